file(REMOVE_RECURSE
  "libabx.a"
  "libabx.pdb"
)

# Per-language clean rules from dependency scanning.
foreach(lang C)
  include(CMakeFiles/abx_static.dir/cmake_clean_${lang}.cmake OPTIONAL)
endforeach()
