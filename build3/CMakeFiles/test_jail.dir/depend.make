# Empty dependencies file for test_jail.
# This may be replaced when dependencies are built.
