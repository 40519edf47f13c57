# Empty dependencies file for test_yaml.
# This may be replaced when dependencies are built.
