file(REMOVE_RECURSE
  "CMakeFiles/test_registry.dir/tests/unit/test_registry.c.o"
  "CMakeFiles/test_registry.dir/tests/unit/test_registry.c.o.d"
  "test_registry"
  "test_registry.pdb"
)

# Per-language clean rules from dependency scanning.
foreach(lang C)
  include(CMakeFiles/test_registry.dir/cmake_clean_${lang}.cmake OPTIONAL)
endforeach()
