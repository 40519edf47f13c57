# Empty dependencies file for test_tools.
# This may be replaced when dependencies are built.
