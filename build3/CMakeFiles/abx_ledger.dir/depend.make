# Empty dependencies file for abx_ledger.
# This may be replaced when dependencies are built.
