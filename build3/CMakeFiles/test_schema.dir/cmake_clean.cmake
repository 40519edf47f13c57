file(REMOVE_RECURSE
  "CMakeFiles/test_schema.dir/tests/unit/test_schema.c.o"
  "CMakeFiles/test_schema.dir/tests/unit/test_schema.c.o.d"
  "test_schema"
  "test_schema.pdb"
)

# Per-language clean rules from dependency scanning.
foreach(lang C)
  include(CMakeFiles/test_schema.dir/cmake_clean_${lang}.cmake OPTIONAL)
endforeach()
