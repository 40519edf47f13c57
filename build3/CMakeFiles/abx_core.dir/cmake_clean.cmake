file(REMOVE_RECURSE
  "CMakeFiles/abx_core.dir/src/core/diag.c.o"
  "CMakeFiles/abx_core.dir/src/core/diag.c.o.d"
  "CMakeFiles/abx_core.dir/src/core/errors.c.o"
  "CMakeFiles/abx_core.dir/src/core/errors.c.o.d"
  "CMakeFiles/abx_core.dir/src/core/fault.c.o"
  "CMakeFiles/abx_core.dir/src/core/fault.c.o.d"
  "CMakeFiles/abx_core.dir/src/core/ids.c.o"
  "CMakeFiles/abx_core.dir/src/core/ids.c.o.d"
  "CMakeFiles/abx_core.dir/src/core/linemap.c.o"
  "CMakeFiles/abx_core.dir/src/core/linemap.c.o.d"
  "CMakeFiles/abx_core.dir/src/core/registry.c.o"
  "CMakeFiles/abx_core.dir/src/core/registry.c.o.d"
  "CMakeFiles/abx_core.dir/src/core/schema.c.o"
  "CMakeFiles/abx_core.dir/src/core/schema.c.o.d"
  "CMakeFiles/abx_core.dir/src/core/text.c.o"
  "CMakeFiles/abx_core.dir/src/core/text.c.o.d"
  "CMakeFiles/abx_core.dir/src/core/util.c.o"
  "CMakeFiles/abx_core.dir/src/core/util.c.o.d"
  "CMakeFiles/abx_core.dir/src/core/yaml.c.o"
  "CMakeFiles/abx_core.dir/src/core/yaml.c.o.d"
)

# Per-language clean rules from dependency scanning.
foreach(lang C)
  include(CMakeFiles/abx_core.dir/cmake_clean_${lang}.cmake OPTIONAL)
endforeach()
