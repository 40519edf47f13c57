# Empty dependencies file for abx_pipeline.
# This may be replaced when dependencies are built.
