file(REMOVE_RECURSE
  "CMakeFiles/test_gitcfg.dir/tests/unit/test_gitcfg.c.o"
  "CMakeFiles/test_gitcfg.dir/tests/unit/test_gitcfg.c.o.d"
  "test_gitcfg"
  "test_gitcfg.pdb"
)

# Per-language clean rules from dependency scanning.
foreach(lang C)
  include(CMakeFiles/test_gitcfg.dir/cmake_clean_${lang}.cmake OPTIONAL)
endforeach()
