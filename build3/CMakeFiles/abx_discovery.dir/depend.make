# Empty dependencies file for abx_discovery.
# This may be replaced when dependencies are built.
