file(REMOVE_RECURSE
  "CMakeFiles/abx_ext.dir/src/ext/custom.c.o"
  "CMakeFiles/abx_ext.dir/src/ext/custom.c.o.d"
  "CMakeFiles/abx_ext.dir/src/ext/ext.c.o"
  "CMakeFiles/abx_ext.dir/src/ext/ext.c.o.d"
  "CMakeFiles/abx_ext.dir/src/ext/plugin.c.o"
  "CMakeFiles/abx_ext.dir/src/ext/plugin.c.o.d"
  "CMakeFiles/abx_ext.dir/src/ext/pycatalog.c.o"
  "CMakeFiles/abx_ext.dir/src/ext/pycatalog.c.o.d"
  "CMakeFiles/abx_ext.dir/src/ext/pyworker.c.o"
  "CMakeFiles/abx_ext.dir/src/ext/pyworker.c.o.d"
)

# Per-language clean rules from dependency scanning.
foreach(lang C)
  include(CMakeFiles/abx_ext.dir/cmake_clean_${lang}.cmake OPTIONAL)
endforeach()
