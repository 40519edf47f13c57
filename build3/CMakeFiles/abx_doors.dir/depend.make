# Empty dependencies file for abx_doors.
# This may be replaced when dependencies are built.
