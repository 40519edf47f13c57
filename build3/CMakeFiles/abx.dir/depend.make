# Empty dependencies file for abx.
# This may be replaced when dependencies are built.
