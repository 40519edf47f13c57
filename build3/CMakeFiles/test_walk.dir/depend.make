# Empty dependencies file for test_walk.
# This may be replaced when dependencies are built.
