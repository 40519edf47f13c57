file(REMOVE_RECURSE
  "CMakeFiles/test_url.dir/tests/unit/test_url.c.o"
  "CMakeFiles/test_url.dir/tests/unit/test_url.c.o.d"
  "test_url"
  "test_url.pdb"
)

# Per-language clean rules from dependency scanning.
foreach(lang C)
  include(CMakeFiles/test_url.dir/cmake_clean_${lang}.cmake OPTIONAL)
endforeach()
