
# Consider dependencies only in project.
set(CMAKE_DEPENDS_IN_PROJECT_ONLY OFF)

# The set of languages for which implicit dependencies are needed:
set(CMAKE_DEPENDS_LANGUAGES
  )

# The set of dependency files which are needed:
set(CMAKE_DEPENDS_DEPENDENCY_FILES
  "/work/main/src/builtin/approvals_ops.c" "CMakeFiles/abx_builtin.dir/src/builtin/approvals_ops.c.o" "gcc" "CMakeFiles/abx_builtin.dir/src/builtin/approvals_ops.c.o.d"
  "/work/main/src/builtin/builtin.c" "CMakeFiles/abx_builtin.dir/src/builtin/builtin.c.o" "gcc" "CMakeFiles/abx_builtin.dir/src/builtin/builtin.c.o.d"
  "/work/main/src/builtin/commands.c" "CMakeFiles/abx_builtin.dir/src/builtin/commands.c.o" "gcc" "CMakeFiles/abx_builtin.dir/src/builtin/commands.c.o.d"
  "/work/main/src/builtin/core.c" "CMakeFiles/abx_builtin.dir/src/builtin/core.c.o" "gcc" "CMakeFiles/abx_builtin.dir/src/builtin/core.c.o.d"
  "/work/main/src/builtin/exec.c" "CMakeFiles/abx_builtin.dir/src/builtin/exec.c.o" "gcc" "CMakeFiles/abx_builtin.dir/src/builtin/exec.c.o.d"
  "/work/main/src/builtin/files/archive.c" "CMakeFiles/abx_builtin.dir/src/builtin/files/archive.c.o" "gcc" "CMakeFiles/abx_builtin.dir/src/builtin/files/archive.c.o.d"
  "/work/main/src/builtin/files/common.c" "CMakeFiles/abx_builtin.dir/src/builtin/files/common.c.o" "gcc" "CMakeFiles/abx_builtin.dir/src/builtin/files/common.c.o.d"
  "/work/main/src/builtin/files/files.c" "CMakeFiles/abx_builtin.dir/src/builtin/files/files.c.o" "gcc" "CMakeFiles/abx_builtin.dir/src/builtin/files/files.c.o.d"
  "/work/main/src/builtin/files/gitwarn.c" "CMakeFiles/abx_builtin.dir/src/builtin/files/gitwarn.c.o" "gcc" "CMakeFiles/abx_builtin.dir/src/builtin/files/gitwarn.c.o.d"
  "/work/main/src/builtin/files/read.c" "CMakeFiles/abx_builtin.dir/src/builtin/files/read.c.o" "gcc" "CMakeFiles/abx_builtin.dir/src/builtin/files/read.c.o.d"
  "/work/main/src/builtin/files/search.c" "CMakeFiles/abx_builtin.dir/src/builtin/files/search.c.o" "gcc" "CMakeFiles/abx_builtin.dir/src/builtin/files/search.c.o.d"
  "/work/main/src/builtin/files/stage.c" "CMakeFiles/abx_builtin.dir/src/builtin/files/stage.c.o" "gcc" "CMakeFiles/abx_builtin.dir/src/builtin/files/stage.c.o.d"
  "/work/main/src/builtin/files/transfer.c" "CMakeFiles/abx_builtin.dir/src/builtin/files/transfer.c.o" "gcc" "CMakeFiles/abx_builtin.dir/src/builtin/files/transfer.c.o.d"
  "/work/main/src/builtin/files/tree.c" "CMakeFiles/abx_builtin.dir/src/builtin/files/tree.c.o" "gcc" "CMakeFiles/abx_builtin.dir/src/builtin/files/tree.c.o.d"
  "/work/main/src/builtin/files/walk.c" "CMakeFiles/abx_builtin.dir/src/builtin/files/walk.c.o" "gcc" "CMakeFiles/abx_builtin.dir/src/builtin/files/walk.c.o.d"
  "/work/main/src/builtin/files/watch.c" "CMakeFiles/abx_builtin.dir/src/builtin/files/watch.c.o" "gcc" "CMakeFiles/abx_builtin.dir/src/builtin/files/watch.c.o.d"
  "/work/main/src/builtin/files/write.c" "CMakeFiles/abx_builtin.dir/src/builtin/files/write.c.o" "gcc" "CMakeFiles/abx_builtin.dir/src/builtin/files/write.c.o.d"
  "/work/main/src/builtin/gitcfg.c" "CMakeFiles/abx_builtin.dir/src/builtin/gitcfg.c.o" "gcc" "CMakeFiles/abx_builtin.dir/src/builtin/gitcfg.c.o.d"
  "/work/main/src/builtin/ledger_ops.c" "CMakeFiles/abx_builtin.dir/src/builtin/ledger_ops.c.o" "gcc" "CMakeFiles/abx_builtin.dir/src/builtin/ledger_ops.c.o.d"
  "/work/main/src/builtin/process.c" "CMakeFiles/abx_builtin.dir/src/builtin/process.c.o" "gcc" "CMakeFiles/abx_builtin.dir/src/builtin/process.c.o.d"
  "/work/main/src/builtin/system.c" "CMakeFiles/abx_builtin.dir/src/builtin/system.c.o" "gcc" "CMakeFiles/abx_builtin.dir/src/builtin/system.c.o.d"
  "/work/main/src/builtin/terminal.c" "CMakeFiles/abx_builtin.dir/src/builtin/terminal.c.o" "gcc" "CMakeFiles/abx_builtin.dir/src/builtin/terminal.c.o.d"
  )

# Targets to which this target links.
set(CMAKE_TARGET_LINKED_INFO_FILES
  )

# Fortran module output directory.
set(CMAKE_Fortran_TARGET_MODULE_DIR "")
