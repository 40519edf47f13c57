# Empty dependencies file for test_gitcfg.
# This may be replaced when dependencies are built.
