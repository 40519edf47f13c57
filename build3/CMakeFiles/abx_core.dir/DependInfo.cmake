
# Consider dependencies only in project.
set(CMAKE_DEPENDS_IN_PROJECT_ONLY OFF)

# The set of languages for which implicit dependencies are needed:
set(CMAKE_DEPENDS_LANGUAGES
  )

# The set of dependency files which are needed:
set(CMAKE_DEPENDS_DEPENDENCY_FILES
  "/work/main/src/core/diag.c" "CMakeFiles/abx_core.dir/src/core/diag.c.o" "gcc" "CMakeFiles/abx_core.dir/src/core/diag.c.o.d"
  "/work/main/src/core/errors.c" "CMakeFiles/abx_core.dir/src/core/errors.c.o" "gcc" "CMakeFiles/abx_core.dir/src/core/errors.c.o.d"
  "/work/main/src/core/fault.c" "CMakeFiles/abx_core.dir/src/core/fault.c.o" "gcc" "CMakeFiles/abx_core.dir/src/core/fault.c.o.d"
  "/work/main/src/core/ids.c" "CMakeFiles/abx_core.dir/src/core/ids.c.o" "gcc" "CMakeFiles/abx_core.dir/src/core/ids.c.o.d"
  "/work/main/src/core/linemap.c" "CMakeFiles/abx_core.dir/src/core/linemap.c.o" "gcc" "CMakeFiles/abx_core.dir/src/core/linemap.c.o.d"
  "/work/main/src/core/registry.c" "CMakeFiles/abx_core.dir/src/core/registry.c.o" "gcc" "CMakeFiles/abx_core.dir/src/core/registry.c.o.d"
  "/work/main/src/core/schema.c" "CMakeFiles/abx_core.dir/src/core/schema.c.o" "gcc" "CMakeFiles/abx_core.dir/src/core/schema.c.o.d"
  "/work/main/src/core/text.c" "CMakeFiles/abx_core.dir/src/core/text.c.o" "gcc" "CMakeFiles/abx_core.dir/src/core/text.c.o.d"
  "/work/main/src/core/util.c" "CMakeFiles/abx_core.dir/src/core/util.c.o" "gcc" "CMakeFiles/abx_core.dir/src/core/util.c.o.d"
  "/work/main/src/core/yaml.c" "CMakeFiles/abx_core.dir/src/core/yaml.c.o" "gcc" "CMakeFiles/abx_core.dir/src/core/yaml.c.o.d"
  )

# Targets to which this target links.
set(CMAKE_TARGET_LINKED_INFO_FILES
  )

# Fortran module output directory.
set(CMAKE_Fortran_TARGET_MODULE_DIR "")
