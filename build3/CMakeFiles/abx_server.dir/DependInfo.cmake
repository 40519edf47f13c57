
# Consider dependencies only in project.
set(CMAKE_DEPENDS_IN_PROJECT_ONLY OFF)

# The set of languages for which implicit dependencies are needed:
set(CMAKE_DEPENDS_LANGUAGES
  )

# The set of dependency files which are needed:
set(CMAKE_DEPENDS_DEPENDENCY_FILES
  "/work/main/src/server/listener.c" "CMakeFiles/abx_server.dir/src/server/listener.c.o" "gcc" "CMakeFiles/abx_server.dir/src/server/listener.c.o.d"
  "/work/main/src/server/server.c" "CMakeFiles/abx_server.dir/src/server/server.c.o" "gcc" "CMakeFiles/abx_server.dir/src/server/server.c.o.d"
  "/work/main/src/server/state.c" "CMakeFiles/abx_server.dir/src/server/state.c.o" "gcc" "CMakeFiles/abx_server.dir/src/server/state.c.o.d"
  )

# Targets to which this target links.
set(CMAKE_TARGET_LINKED_INFO_FILES
  )

# Fortran module output directory.
set(CMAKE_Fortran_TARGET_MODULE_DIR "")
