file(REMOVE_RECURSE
  "CMakeFiles/abx_ledger.dir/src/ledger/ledger.c.o"
  "CMakeFiles/abx_ledger.dir/src/ledger/ledger.c.o.d"
)

# Per-language clean rules from dependency scanning.
foreach(lang C)
  include(CMakeFiles/abx_ledger.dir/cmake_clean_${lang}.cmake OPTIONAL)
endforeach()
