file(REMOVE_RECURSE
  "CMakeFiles/abx.dir/src/cli/call.c.o"
  "CMakeFiles/abx.dir/src/cli/call.c.o.d"
  "CMakeFiles/abx.dir/src/cli/ledger.c.o"
  "CMakeFiles/abx.dir/src/cli/ledger.c.o.d"
  "CMakeFiles/abx.dir/src/cli/main.c.o"
  "CMakeFiles/abx.dir/src/cli/main.c.o.d"
  "CMakeFiles/abx.dir/src/cli/mcp.c.o"
  "CMakeFiles/abx.dir/src/cli/mcp.c.o.d"
  "abx"
  "abx.pdb"
)

# Per-language clean rules from dependency scanning.
foreach(lang C)
  include(CMakeFiles/abx.dir/cmake_clean_${lang}.cmake OPTIONAL)
endforeach()
