file(REMOVE_RECURSE
  "CMakeFiles/test_yaml.dir/tests/unit/test_yaml.c.o"
  "CMakeFiles/test_yaml.dir/tests/unit/test_yaml.c.o.d"
  "test_yaml"
  "test_yaml.pdb"
)

# Per-language clean rules from dependency scanning.
foreach(lang C)
  include(CMakeFiles/test_yaml.dir/cmake_clean_${lang}.cmake OPTIONAL)
endforeach()
