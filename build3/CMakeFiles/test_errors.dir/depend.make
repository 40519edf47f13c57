# Empty dependencies file for test_errors.
# This may be replaced when dependencies are built.
