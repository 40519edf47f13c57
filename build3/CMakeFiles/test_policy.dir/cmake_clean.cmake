file(REMOVE_RECURSE
  "CMakeFiles/test_policy.dir/tests/unit/test_policy.c.o"
  "CMakeFiles/test_policy.dir/tests/unit/test_policy.c.o.d"
  "test_policy"
  "test_policy.pdb"
)

# Per-language clean rules from dependency scanning.
foreach(lang C)
  include(CMakeFiles/test_policy.dir/cmake_clean_${lang}.cmake OPTIONAL)
endforeach()
