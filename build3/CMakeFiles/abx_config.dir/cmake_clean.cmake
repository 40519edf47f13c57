file(REMOVE_RECURSE
  "CMakeFiles/abx_config.dir/src/config/config.c.o"
  "CMakeFiles/abx_config.dir/src/config/config.c.o.d"
)

# Per-language clean rules from dependency scanning.
foreach(lang C)
  include(CMakeFiles/abx_config.dir/cmake_clean_${lang}.cmake OPTIONAL)
endforeach()
