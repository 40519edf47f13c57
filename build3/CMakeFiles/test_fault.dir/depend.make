# Empty dependencies file for test_fault.
# This may be replaced when dependencies are built.
