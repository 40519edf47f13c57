# Empty dependencies file for test_router.
# This may be replaced when dependencies are built.
