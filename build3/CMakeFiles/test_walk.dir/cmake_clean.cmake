file(REMOVE_RECURSE
  "CMakeFiles/test_walk.dir/tests/unit/test_walk.c.o"
  "CMakeFiles/test_walk.dir/tests/unit/test_walk.c.o.d"
  "test_walk"
  "test_walk.pdb"
)

# Per-language clean rules from dependency scanning.
foreach(lang C)
  include(CMakeFiles/test_walk.dir/cmake_clean_${lang}.cmake OPTIONAL)
endforeach()
