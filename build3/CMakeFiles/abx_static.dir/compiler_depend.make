# Empty compiler generated dependencies file for abx_static.
# This may be replaced when dependencies are built.
