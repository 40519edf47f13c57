# Empty dependencies file for abx_server.
# This may be replaced when dependencies are built.
