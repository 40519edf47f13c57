file(REMOVE_RECURSE
  "CMakeFiles/abx_discovery.dir/src/discovery/cache.c.o"
  "CMakeFiles/abx_discovery.dir/src/discovery/cache.c.o.d"
  "CMakeFiles/abx_discovery.dir/src/discovery/catalog.c.o"
  "CMakeFiles/abx_discovery.dir/src/discovery/catalog.c.o.d"
  "CMakeFiles/abx_discovery.dir/src/discovery/genclient.c.o"
  "CMakeFiles/abx_discovery.dir/src/discovery/genclient.c.o.d"
  "CMakeFiles/abx_discovery.dir/src/discovery/openapi.c.o"
  "CMakeFiles/abx_discovery.dir/src/discovery/openapi.c.o.d"
  "CMakeFiles/abx_discovery.dir/src/discovery/tools.c.o"
  "CMakeFiles/abx_discovery.dir/src/discovery/tools.c.o.d"
)

# Per-language clean rules from dependency scanning.
foreach(lang C)
  include(CMakeFiles/abx_discovery.dir/cmake_clean_${lang}.cmake OPTIONAL)
endforeach()
