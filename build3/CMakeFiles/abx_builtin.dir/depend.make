# Empty dependencies file for abx_builtin.
# This may be replaced when dependencies are built.
