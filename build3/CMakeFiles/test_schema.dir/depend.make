# Empty dependencies file for test_schema.
# This may be replaced when dependencies are built.
