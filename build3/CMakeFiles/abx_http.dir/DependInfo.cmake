
# Consider dependencies only in project.
set(CMAKE_DEPENDS_IN_PROJECT_ONLY OFF)

# The set of languages for which implicit dependencies are needed:
set(CMAKE_DEPENDS_LANGUAGES
  )

# The set of dependency files which are needed:
set(CMAKE_DEPENDS_DEPENDENCY_FILES
  "/work/main/src/http/router.c" "CMakeFiles/abx_http.dir/src/http/router.c.o" "gcc" "CMakeFiles/abx_http.dir/src/http/router.c.o.d"
  "/work/main/src/http/target.c" "CMakeFiles/abx_http.dir/src/http/target.c.o" "gcc" "CMakeFiles/abx_http.dir/src/http/target.c.o.d"
  "/work/main/src/http/websocket.c" "CMakeFiles/abx_http.dir/src/http/websocket.c.o" "gcc" "CMakeFiles/abx_http.dir/src/http/websocket.c.o.d"
  )

# Targets to which this target links.
set(CMAKE_TARGET_LINKED_INFO_FILES
  )

# Fortran module output directory.
set(CMAKE_Fortran_TARGET_MODULE_DIR "")
