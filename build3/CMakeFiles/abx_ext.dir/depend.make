# Empty dependencies file for abx_ext.
# This may be replaced when dependencies are built.
