file(REMOVE_RECURSE
  "CMakeFiles/abx_http.dir/src/http/router.c.o"
  "CMakeFiles/abx_http.dir/src/http/router.c.o.d"
  "CMakeFiles/abx_http.dir/src/http/target.c.o"
  "CMakeFiles/abx_http.dir/src/http/target.c.o.d"
  "CMakeFiles/abx_http.dir/src/http/websocket.c.o"
  "CMakeFiles/abx_http.dir/src/http/websocket.c.o.d"
)

# Per-language clean rules from dependency scanning.
foreach(lang C)
  include(CMakeFiles/abx_http.dir/cmake_clean_${lang}.cmake OPTIONAL)
endforeach()
