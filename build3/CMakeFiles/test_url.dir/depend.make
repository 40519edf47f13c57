# Empty dependencies file for test_url.
# This may be replaced when dependencies are built.
