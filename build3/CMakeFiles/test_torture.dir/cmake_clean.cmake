file(REMOVE_RECURSE
  "CMakeFiles/test_torture.dir/tests/unit/test_torture.c.o"
  "CMakeFiles/test_torture.dir/tests/unit/test_torture.c.o.d"
  "test_torture"
  "test_torture.pdb"
)

# Per-language clean rules from dependency scanning.
foreach(lang C)
  include(CMakeFiles/test_torture.dir/cmake_clean_${lang}.cmake OPTIONAL)
endforeach()
