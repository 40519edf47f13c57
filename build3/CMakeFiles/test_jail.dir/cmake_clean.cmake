file(REMOVE_RECURSE
  "CMakeFiles/test_jail.dir/tests/unit/test_jail.c.o"
  "CMakeFiles/test_jail.dir/tests/unit/test_jail.c.o.d"
  "test_jail"
  "test_jail.pdb"
)

# Per-language clean rules from dependency scanning.
foreach(lang C)
  include(CMakeFiles/test_jail.dir/cmake_clean_${lang}.cmake OPTIONAL)
endforeach()
