file(REMOVE_RECURSE
  "CMakeFiles/test_tools.dir/tests/unit/test_tools.c.o"
  "CMakeFiles/test_tools.dir/tests/unit/test_tools.c.o.d"
  "test_tools"
  "test_tools.pdb"
)

# Per-language clean rules from dependency scanning.
foreach(lang C)
  include(CMakeFiles/test_tools.dir/cmake_clean_${lang}.cmake OPTIONAL)
endforeach()
