file(REMOVE_RECURSE
  "CMakeFiles/abx_doors.dir/src/doors/batch.c.o"
  "CMakeFiles/abx_doors.dir/src/doors/batch.c.o.d"
  "CMakeFiles/abx_doors.dir/src/doors/doors.c.o"
  "CMakeFiles/abx_doors.dir/src/doors/doors.c.o.d"
  "CMakeFiles/abx_doors.dir/src/doors/legacy.c.o"
  "CMakeFiles/abx_doors.dir/src/doors/legacy.c.o.d"
  "CMakeFiles/abx_doors.dir/src/doors/mcp.c.o"
  "CMakeFiles/abx_doors.dir/src/doors/mcp.c.o.d"
  "CMakeFiles/abx_doors.dir/src/doors/toolcall.c.o"
  "CMakeFiles/abx_doors.dir/src/doors/toolcall.c.o.d"
)

# Per-language clean rules from dependency scanning.
foreach(lang C)
  include(CMakeFiles/abx_doors.dir/cmake_clean_${lang}.cmake OPTIONAL)
endforeach()
