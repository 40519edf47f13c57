file(REMOVE_RECURSE
  "CMakeFiles/test_errors.dir/tests/unit/test_errors.c.o"
  "CMakeFiles/test_errors.dir/tests/unit/test_errors.c.o.d"
  "test_errors"
  "test_errors.pdb"
)

# Per-language clean rules from dependency scanning.
foreach(lang C)
  include(CMakeFiles/test_errors.dir/cmake_clean_${lang}.cmake OPTIONAL)
endforeach()
