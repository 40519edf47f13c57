
# Consider dependencies only in project.
set(CMAKE_DEPENDS_IN_PROJECT_ONLY OFF)

# The set of languages for which implicit dependencies are needed:
set(CMAKE_DEPENDS_LANGUAGES
  )

# The set of dependency files which are needed:
set(CMAKE_DEPENDS_DEPENDENCY_FILES
  "/work/main/src/discovery/cache.c" "CMakeFiles/abx_discovery.dir/src/discovery/cache.c.o" "gcc" "CMakeFiles/abx_discovery.dir/src/discovery/cache.c.o.d"
  "/work/main/src/discovery/catalog.c" "CMakeFiles/abx_discovery.dir/src/discovery/catalog.c.o" "gcc" "CMakeFiles/abx_discovery.dir/src/discovery/catalog.c.o.d"
  "/work/main/src/discovery/genclient.c" "CMakeFiles/abx_discovery.dir/src/discovery/genclient.c.o" "gcc" "CMakeFiles/abx_discovery.dir/src/discovery/genclient.c.o.d"
  "/work/main/src/discovery/openapi.c" "CMakeFiles/abx_discovery.dir/src/discovery/openapi.c.o" "gcc" "CMakeFiles/abx_discovery.dir/src/discovery/openapi.c.o.d"
  "/work/main/src/discovery/tools.c" "CMakeFiles/abx_discovery.dir/src/discovery/tools.c.o" "gcc" "CMakeFiles/abx_discovery.dir/src/discovery/tools.c.o.d"
  )

# Targets to which this target links.
set(CMAKE_TARGET_LINKED_INFO_FILES
  )

# Fortran module output directory.
set(CMAKE_Fortran_TARGET_MODULE_DIR "")
