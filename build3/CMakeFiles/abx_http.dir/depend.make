# Empty dependencies file for abx_http.
# This may be replaced when dependencies are built.
