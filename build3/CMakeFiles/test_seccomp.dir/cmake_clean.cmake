file(REMOVE_RECURSE
  "CMakeFiles/test_seccomp.dir/tests/unit/test_seccomp.c.o"
  "CMakeFiles/test_seccomp.dir/tests/unit/test_seccomp.c.o.d"
  "test_seccomp"
  "test_seccomp.pdb"
)

# Per-language clean rules from dependency scanning.
foreach(lang C)
  include(CMakeFiles/test_seccomp.dir/cmake_clean_${lang}.cmake OPTIONAL)
endforeach()
