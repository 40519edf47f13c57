# Empty dependencies file for abx_config.
# This may be replaced when dependencies are built.
