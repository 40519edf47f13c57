# Empty dependencies file for test_torture.
# This may be replaced when dependencies are built.
