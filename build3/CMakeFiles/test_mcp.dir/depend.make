# Empty dependencies file for test_mcp.
# This may be replaced when dependencies are built.
