
# Consider dependencies only in project.
set(CMAKE_DEPENDS_IN_PROJECT_ONLY OFF)

# The set of languages for which implicit dependencies are needed:
set(CMAKE_DEPENDS_LANGUAGES
  )

# The set of dependency files which are needed:
set(CMAKE_DEPENDS_DEPENDENCY_FILES
  "/work/main/src/doors/batch.c" "CMakeFiles/abx_doors.dir/src/doors/batch.c.o" "gcc" "CMakeFiles/abx_doors.dir/src/doors/batch.c.o.d"
  "/work/main/src/doors/doors.c" "CMakeFiles/abx_doors.dir/src/doors/doors.c.o" "gcc" "CMakeFiles/abx_doors.dir/src/doors/doors.c.o.d"
  "/work/main/src/doors/legacy.c" "CMakeFiles/abx_doors.dir/src/doors/legacy.c.o" "gcc" "CMakeFiles/abx_doors.dir/src/doors/legacy.c.o.d"
  "/work/main/src/doors/mcp.c" "CMakeFiles/abx_doors.dir/src/doors/mcp.c.o" "gcc" "CMakeFiles/abx_doors.dir/src/doors/mcp.c.o.d"
  "/work/main/src/doors/toolcall.c" "CMakeFiles/abx_doors.dir/src/doors/toolcall.c.o" "gcc" "CMakeFiles/abx_doors.dir/src/doors/toolcall.c.o.d"
  )

# Targets to which this target links.
set(CMAKE_TARGET_LINKED_INFO_FILES
  )

# Fortran module output directory.
set(CMAKE_Fortran_TARGET_MODULE_DIR "")
