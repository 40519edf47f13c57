# Empty dependencies file for abx_sandbox.
# This may be replaced when dependencies are built.
