file(REMOVE_RECURSE
  "CMakeFiles/abx_policy.dir/src/policy/auth.c.o"
  "CMakeFiles/abx_policy.dir/src/policy/auth.c.o.d"
  "CMakeFiles/abx_policy.dir/src/policy/command.c.o"
  "CMakeFiles/abx_policy.dir/src/policy/command.c.o.d"
  "CMakeFiles/abx_policy.dir/src/policy/compile.c.o"
  "CMakeFiles/abx_policy.dir/src/policy/compile.c.o.d"
  "CMakeFiles/abx_policy.dir/src/policy/decide.c.o"
  "CMakeFiles/abx_policy.dir/src/policy/decide.c.o.d"
  "CMakeFiles/abx_policy.dir/src/policy/layout.c.o"
  "CMakeFiles/abx_policy.dir/src/policy/layout.c.o.d"
  "CMakeFiles/abx_policy.dir/src/policy/lint.c.o"
  "CMakeFiles/abx_policy.dir/src/policy/lint.c.o.d"
  "CMakeFiles/abx_policy.dir/src/policy/match.c.o"
  "CMakeFiles/abx_policy.dir/src/policy/match.c.o.d"
  "CMakeFiles/abx_policy.dir/src/policy/paths.c.o"
  "CMakeFiles/abx_policy.dir/src/policy/paths.c.o.d"
  "CMakeFiles/abx_policy.dir/src/policy/snapshot.c.o"
  "CMakeFiles/abx_policy.dir/src/policy/snapshot.c.o.d"
  "CMakeFiles/abx_policy.dir/src/policy/stmt.c.o"
  "CMakeFiles/abx_policy.dir/src/policy/stmt.c.o.d"
  "CMakeFiles/abx_policy.dir/src/policy/url.c.o"
  "CMakeFiles/abx_policy.dir/src/policy/url.c.o.d"
  "CMakeFiles/abx_policy.dir/src/policy/view.c.o"
  "CMakeFiles/abx_policy.dir/src/policy/view.c.o.d"
)

# Per-language clean rules from dependency scanning.
foreach(lang C)
  include(CMakeFiles/abx_policy.dir/cmake_clean_${lang}.cmake OPTIONAL)
endforeach()
