# Empty dependencies file for abx_shared.
# This may be replaced when dependencies are built.
