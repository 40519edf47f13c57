file(REMOVE_RECURSE
  "CMakeFiles/abx_pipeline.dir/src/pipeline/approval_bind.c.o"
  "CMakeFiles/abx_pipeline.dir/src/pipeline/approval_bind.c.o.d"
  "CMakeFiles/abx_pipeline.dir/src/pipeline/approvals.c.o"
  "CMakeFiles/abx_pipeline.dir/src/pipeline/approvals.c.o.d"
  "CMakeFiles/abx_pipeline.dir/src/pipeline/auth.c.o"
  "CMakeFiles/abx_pipeline.dir/src/pipeline/auth.c.o.d"
  "CMakeFiles/abx_pipeline.dir/src/pipeline/call.c.o"
  "CMakeFiles/abx_pipeline.dir/src/pipeline/call.c.o.d"
  "CMakeFiles/abx_pipeline.dir/src/pipeline/dispatch.c.o"
  "CMakeFiles/abx_pipeline.dir/src/pipeline/dispatch.c.o.d"
  "CMakeFiles/abx_pipeline.dir/src/pipeline/explain.c.o"
  "CMakeFiles/abx_pipeline.dir/src/pipeline/explain.c.o.d"
  "CMakeFiles/abx_pipeline.dir/src/pipeline/idempotency.c.o"
  "CMakeFiles/abx_pipeline.dir/src/pipeline/idempotency.c.o.d"
  "CMakeFiles/abx_pipeline.dir/src/pipeline/lanes.c.o"
  "CMakeFiles/abx_pipeline.dir/src/pipeline/lanes.c.o.d"
  "CMakeFiles/abx_pipeline.dir/src/pipeline/log.c.o"
  "CMakeFiles/abx_pipeline.dir/src/pipeline/log.c.o.d"
  "CMakeFiles/abx_pipeline.dir/src/pipeline/metrics.c.o"
  "CMakeFiles/abx_pipeline.dir/src/pipeline/metrics.c.o.d"
  "CMakeFiles/abx_pipeline.dir/src/pipeline/namespace.c.o"
  "CMakeFiles/abx_pipeline.dir/src/pipeline/namespace.c.o.d"
  "CMakeFiles/abx_pipeline.dir/src/pipeline/request.c.o"
  "CMakeFiles/abx_pipeline.dir/src/pipeline/request.c.o.d"
)

# Per-language clean rules from dependency scanning.
foreach(lang C)
  include(CMakeFiles/abx_pipeline.dir/cmake_clean_${lang}.cmake OPTIONAL)
endforeach()
