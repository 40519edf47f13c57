# Empty dependencies file for test_seccomp.
# This may be replaced when dependencies are built.
