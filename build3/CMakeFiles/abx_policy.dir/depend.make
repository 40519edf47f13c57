# Empty dependencies file for abx_policy.
# This may be replaced when dependencies are built.
