file(REMOVE_RECURSE
  "CMakeFiles/test_server.dir/tests/unit/test_server.c.o"
  "CMakeFiles/test_server.dir/tests/unit/test_server.c.o.d"
  "test_server"
  "test_server.pdb"
)

# Per-language clean rules from dependency scanning.
foreach(lang C)
  include(CMakeFiles/test_server.dir/cmake_clean_${lang}.cmake OPTIONAL)
endforeach()
