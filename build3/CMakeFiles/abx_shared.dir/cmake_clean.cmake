file(REMOVE_RECURSE
  "libabx.pdb"
  "libabx.so"
  "libabx.so.0"
  "libabx.so.0.1.0"
)

# Per-language clean rules from dependency scanning.
foreach(lang C)
  include(CMakeFiles/abx_shared.dir/cmake_clean_${lang}.cmake OPTIONAL)
endforeach()
