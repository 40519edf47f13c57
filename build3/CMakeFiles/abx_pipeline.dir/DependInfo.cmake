
# Consider dependencies only in project.
set(CMAKE_DEPENDS_IN_PROJECT_ONLY OFF)

# The set of languages for which implicit dependencies are needed:
set(CMAKE_DEPENDS_LANGUAGES
  )

# The set of dependency files which are needed:
set(CMAKE_DEPENDS_DEPENDENCY_FILES
  "/work/main/src/pipeline/approval_bind.c" "CMakeFiles/abx_pipeline.dir/src/pipeline/approval_bind.c.o" "gcc" "CMakeFiles/abx_pipeline.dir/src/pipeline/approval_bind.c.o.d"
  "/work/main/src/pipeline/approvals.c" "CMakeFiles/abx_pipeline.dir/src/pipeline/approvals.c.o" "gcc" "CMakeFiles/abx_pipeline.dir/src/pipeline/approvals.c.o.d"
  "/work/main/src/pipeline/auth.c" "CMakeFiles/abx_pipeline.dir/src/pipeline/auth.c.o" "gcc" "CMakeFiles/abx_pipeline.dir/src/pipeline/auth.c.o.d"
  "/work/main/src/pipeline/call.c" "CMakeFiles/abx_pipeline.dir/src/pipeline/call.c.o" "gcc" "CMakeFiles/abx_pipeline.dir/src/pipeline/call.c.o.d"
  "/work/main/src/pipeline/dispatch.c" "CMakeFiles/abx_pipeline.dir/src/pipeline/dispatch.c.o" "gcc" "CMakeFiles/abx_pipeline.dir/src/pipeline/dispatch.c.o.d"
  "/work/main/src/pipeline/explain.c" "CMakeFiles/abx_pipeline.dir/src/pipeline/explain.c.o" "gcc" "CMakeFiles/abx_pipeline.dir/src/pipeline/explain.c.o.d"
  "/work/main/src/pipeline/idempotency.c" "CMakeFiles/abx_pipeline.dir/src/pipeline/idempotency.c.o" "gcc" "CMakeFiles/abx_pipeline.dir/src/pipeline/idempotency.c.o.d"
  "/work/main/src/pipeline/lanes.c" "CMakeFiles/abx_pipeline.dir/src/pipeline/lanes.c.o" "gcc" "CMakeFiles/abx_pipeline.dir/src/pipeline/lanes.c.o.d"
  "/work/main/src/pipeline/log.c" "CMakeFiles/abx_pipeline.dir/src/pipeline/log.c.o" "gcc" "CMakeFiles/abx_pipeline.dir/src/pipeline/log.c.o.d"
  "/work/main/src/pipeline/metrics.c" "CMakeFiles/abx_pipeline.dir/src/pipeline/metrics.c.o" "gcc" "CMakeFiles/abx_pipeline.dir/src/pipeline/metrics.c.o.d"
  "/work/main/src/pipeline/namespace.c" "CMakeFiles/abx_pipeline.dir/src/pipeline/namespace.c.o" "gcc" "CMakeFiles/abx_pipeline.dir/src/pipeline/namespace.c.o.d"
  "/work/main/src/pipeline/request.c" "CMakeFiles/abx_pipeline.dir/src/pipeline/request.c.o" "gcc" "CMakeFiles/abx_pipeline.dir/src/pipeline/request.c.o.d"
  )

# Targets to which this target links.
set(CMAKE_TARGET_LINKED_INFO_FILES
  )

# Fortran module output directory.
set(CMAKE_Fortran_TARGET_MODULE_DIR "")
