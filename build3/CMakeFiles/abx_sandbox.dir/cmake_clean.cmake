file(REMOVE_RECURSE
  "CMakeFiles/abx_sandbox.dir/src/sandbox/jail.c.o"
  "CMakeFiles/abx_sandbox.dir/src/sandbox/jail.c.o.d"
  "CMakeFiles/abx_sandbox.dir/src/sandbox/procs.c.o"
  "CMakeFiles/abx_sandbox.dir/src/sandbox/procs.c.o.d"
  "CMakeFiles/abx_sandbox.dir/src/sandbox/seccomp.c.o"
  "CMakeFiles/abx_sandbox.dir/src/sandbox/seccomp.c.o.d"
  "CMakeFiles/abx_sandbox.dir/src/sandbox/spawn.c.o"
  "CMakeFiles/abx_sandbox.dir/src/sandbox/spawn.c.o.d"
  "CMakeFiles/abx_sandbox.dir/src/sandbox/watchdog.c.o"
  "CMakeFiles/abx_sandbox.dir/src/sandbox/watchdog.c.o.d"
)

# Per-language clean rules from dependency scanning.
foreach(lang C)
  include(CMakeFiles/abx_sandbox.dir/cmake_clean_${lang}.cmake OPTIONAL)
endforeach()
