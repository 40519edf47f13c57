# Empty dependencies file for test_server.
# This may be replaced when dependencies are built.
