
# Consider dependencies only in project.
set(CMAKE_DEPENDS_IN_PROJECT_ONLY OFF)

# The set of languages for which implicit dependencies are needed:
set(CMAKE_DEPENDS_LANGUAGES
  )

# The set of dependency files which are needed:
set(CMAKE_DEPENDS_DEPENDENCY_FILES
  "/work/main/src/ext/custom.c" "CMakeFiles/abx_ext.dir/src/ext/custom.c.o" "gcc" "CMakeFiles/abx_ext.dir/src/ext/custom.c.o.d"
  "/work/main/src/ext/ext.c" "CMakeFiles/abx_ext.dir/src/ext/ext.c.o" "gcc" "CMakeFiles/abx_ext.dir/src/ext/ext.c.o.d"
  "/work/main/src/ext/plugin.c" "CMakeFiles/abx_ext.dir/src/ext/plugin.c.o" "gcc" "CMakeFiles/abx_ext.dir/src/ext/plugin.c.o.d"
  "/work/main/src/ext/pycatalog.c" "CMakeFiles/abx_ext.dir/src/ext/pycatalog.c.o" "gcc" "CMakeFiles/abx_ext.dir/src/ext/pycatalog.c.o.d"
  "/work/main/src/ext/pyworker.c" "CMakeFiles/abx_ext.dir/src/ext/pyworker.c.o" "gcc" "CMakeFiles/abx_ext.dir/src/ext/pyworker.c.o.d"
  )

# Targets to which this target links.
set(CMAKE_TARGET_LINKED_INFO_FILES
  )

# Fortran module output directory.
set(CMAKE_Fortran_TARGET_MODULE_DIR "")
