# Empty dependencies file for test_ids.
# This may be replaced when dependencies are built.
