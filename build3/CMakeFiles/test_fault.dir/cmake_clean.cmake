file(REMOVE_RECURSE
  "CMakeFiles/test_fault.dir/tests/unit/test_fault.c.o"
  "CMakeFiles/test_fault.dir/tests/unit/test_fault.c.o.d"
  "test_fault"
  "test_fault.pdb"
)

# Per-language clean rules from dependency scanning.
foreach(lang C)
  include(CMakeFiles/test_fault.dir/cmake_clean_${lang}.cmake OPTIONAL)
endforeach()
