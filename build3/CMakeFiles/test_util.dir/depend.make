# Empty dependencies file for test_util.
# This may be replaced when dependencies are built.
