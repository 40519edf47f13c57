# Empty dependencies file for test_registry.
# This may be replaced when dependencies are built.
