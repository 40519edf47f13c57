file(REMOVE_RECURSE
  "CMakeFiles/test_paths.dir/tests/unit/test_paths.c.o"
  "CMakeFiles/test_paths.dir/tests/unit/test_paths.c.o.d"
  "test_paths"
  "test_paths.pdb"
)

# Per-language clean rules from dependency scanning.
foreach(lang C)
  include(CMakeFiles/test_paths.dir/cmake_clean_${lang}.cmake OPTIONAL)
endforeach()
