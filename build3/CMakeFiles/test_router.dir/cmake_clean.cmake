file(REMOVE_RECURSE
  "CMakeFiles/test_router.dir/tests/unit/test_router.c.o"
  "CMakeFiles/test_router.dir/tests/unit/test_router.c.o.d"
  "test_router"
  "test_router.pdb"
)

# Per-language clean rules from dependency scanning.
foreach(lang C)
  include(CMakeFiles/test_router.dir/cmake_clean_${lang}.cmake OPTIONAL)
endforeach()
