file(REMOVE_RECURSE
  "CMakeFiles/abx_server.dir/src/server/listener.c.o"
  "CMakeFiles/abx_server.dir/src/server/listener.c.o.d"
  "CMakeFiles/abx_server.dir/src/server/server.c.o"
  "CMakeFiles/abx_server.dir/src/server/server.c.o.d"
  "CMakeFiles/abx_server.dir/src/server/state.c.o"
  "CMakeFiles/abx_server.dir/src/server/state.c.o.d"
)

# Per-language clean rules from dependency scanning.
foreach(lang C)
  include(CMakeFiles/abx_server.dir/cmake_clean_${lang}.cmake OPTIONAL)
endforeach()
