
# Consider dependencies only in project.
set(CMAKE_DEPENDS_IN_PROJECT_ONLY OFF)

# The set of languages for which implicit dependencies are needed:
set(CMAKE_DEPENDS_LANGUAGES
  )

# The set of dependency files which are needed:
set(CMAKE_DEPENDS_DEPENDENCY_FILES
  "/work/main/src/sandbox/jail.c" "CMakeFiles/abx_sandbox.dir/src/sandbox/jail.c.o" "gcc" "CMakeFiles/abx_sandbox.dir/src/sandbox/jail.c.o.d"
  "/work/main/src/sandbox/procs.c" "CMakeFiles/abx_sandbox.dir/src/sandbox/procs.c.o" "gcc" "CMakeFiles/abx_sandbox.dir/src/sandbox/procs.c.o.d"
  "/work/main/src/sandbox/seccomp.c" "CMakeFiles/abx_sandbox.dir/src/sandbox/seccomp.c.o" "gcc" "CMakeFiles/abx_sandbox.dir/src/sandbox/seccomp.c.o.d"
  "/work/main/src/sandbox/spawn.c" "CMakeFiles/abx_sandbox.dir/src/sandbox/spawn.c.o" "gcc" "CMakeFiles/abx_sandbox.dir/src/sandbox/spawn.c.o.d"
  "/work/main/src/sandbox/watchdog.c" "CMakeFiles/abx_sandbox.dir/src/sandbox/watchdog.c.o" "gcc" "CMakeFiles/abx_sandbox.dir/src/sandbox/watchdog.c.o.d"
  )

# Targets to which this target links.
set(CMAKE_TARGET_LINKED_INFO_FILES
  )

# Fortran module output directory.
set(CMAKE_Fortran_TARGET_MODULE_DIR "")
