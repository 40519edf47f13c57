file(REMOVE_RECURSE
  "CMakeFiles/test_ids.dir/tests/unit/test_ids.c.o"
  "CMakeFiles/test_ids.dir/tests/unit/test_ids.c.o.d"
  "test_ids"
  "test_ids.pdb"
)

# Per-language clean rules from dependency scanning.
foreach(lang C)
  include(CMakeFiles/test_ids.dir/cmake_clean_${lang}.cmake OPTIONAL)
endforeach()
