# Empty dependencies file for abx_core.
# This may be replaced when dependencies are built.
