# Empty dependencies file for test_paths.
# This may be replaced when dependencies are built.
