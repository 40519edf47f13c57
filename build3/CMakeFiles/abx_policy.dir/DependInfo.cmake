
# Consider dependencies only in project.
set(CMAKE_DEPENDS_IN_PROJECT_ONLY OFF)

# The set of languages for which implicit dependencies are needed:
set(CMAKE_DEPENDS_LANGUAGES
  )

# The set of dependency files which are needed:
set(CMAKE_DEPENDS_DEPENDENCY_FILES
  "/work/main/src/policy/auth.c" "CMakeFiles/abx_policy.dir/src/policy/auth.c.o" "gcc" "CMakeFiles/abx_policy.dir/src/policy/auth.c.o.d"
  "/work/main/src/policy/command.c" "CMakeFiles/abx_policy.dir/src/policy/command.c.o" "gcc" "CMakeFiles/abx_policy.dir/src/policy/command.c.o.d"
  "/work/main/src/policy/compile.c" "CMakeFiles/abx_policy.dir/src/policy/compile.c.o" "gcc" "CMakeFiles/abx_policy.dir/src/policy/compile.c.o.d"
  "/work/main/src/policy/decide.c" "CMakeFiles/abx_policy.dir/src/policy/decide.c.o" "gcc" "CMakeFiles/abx_policy.dir/src/policy/decide.c.o.d"
  "/work/main/src/policy/layout.c" "CMakeFiles/abx_policy.dir/src/policy/layout.c.o" "gcc" "CMakeFiles/abx_policy.dir/src/policy/layout.c.o.d"
  "/work/main/src/policy/lint.c" "CMakeFiles/abx_policy.dir/src/policy/lint.c.o" "gcc" "CMakeFiles/abx_policy.dir/src/policy/lint.c.o.d"
  "/work/main/src/policy/match.c" "CMakeFiles/abx_policy.dir/src/policy/match.c.o" "gcc" "CMakeFiles/abx_policy.dir/src/policy/match.c.o.d"
  "/work/main/src/policy/paths.c" "CMakeFiles/abx_policy.dir/src/policy/paths.c.o" "gcc" "CMakeFiles/abx_policy.dir/src/policy/paths.c.o.d"
  "/work/main/src/policy/snapshot.c" "CMakeFiles/abx_policy.dir/src/policy/snapshot.c.o" "gcc" "CMakeFiles/abx_policy.dir/src/policy/snapshot.c.o.d"
  "/work/main/src/policy/stmt.c" "CMakeFiles/abx_policy.dir/src/policy/stmt.c.o" "gcc" "CMakeFiles/abx_policy.dir/src/policy/stmt.c.o.d"
  "/work/main/src/policy/url.c" "CMakeFiles/abx_policy.dir/src/policy/url.c.o" "gcc" "CMakeFiles/abx_policy.dir/src/policy/url.c.o.d"
  "/work/main/src/policy/view.c" "CMakeFiles/abx_policy.dir/src/policy/view.c.o" "gcc" "CMakeFiles/abx_policy.dir/src/policy/view.c.o.d"
  )

# Targets to which this target links.
set(CMAKE_TARGET_LINKED_INFO_FILES
  )

# Fortran module output directory.
set(CMAKE_Fortran_TARGET_MODULE_DIR "")
