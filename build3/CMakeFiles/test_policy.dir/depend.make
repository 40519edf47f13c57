# Empty dependencies file for test_policy.
# This may be replaced when dependencies are built.
