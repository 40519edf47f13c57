file(REMOVE_RECURSE
  "CMakeFiles/test_mcp.dir/tests/unit/test_mcp.c.o"
  "CMakeFiles/test_mcp.dir/tests/unit/test_mcp.c.o.d"
  "test_mcp"
  "test_mcp.pdb"
)

# Per-language clean rules from dependency scanning.
foreach(lang C)
  include(CMakeFiles/test_mcp.dir/cmake_clean_${lang}.cmake OPTIONAL)
endforeach()
