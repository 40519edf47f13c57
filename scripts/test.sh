#!/usr/bin/env bash
# Every test abx has: unit (cmocka), black-box (pytest against the real binary), drift
# of the generated files, all of it again under ASan+UBSan, then each fuzz target briefly.
#   FUZZ_SECONDS (default 30) per fuzz target; FUZZ_SECONDS=0 skips fuzzing.
set -euo pipefail
here=$(cd "$(dirname "$0")/.." && pwd)
cd "$here"
bash scripts/deps.sh test
# pinned Node tools the client/discovery tests run (OpenAPI lint, tsc): Node >= 20.19 and npm
if node -e 'const [a,b]=process.versions.node.split(".").map(Number); process.exit(a>20||(a==20&&b>=19)?0:1)'; then
  (cd tests/clients && npm ci --no-audit --no-fund --loglevel=error)
else
  echo "tests/clients: Node $(node --version) is older than 20.19 (@redocly/cli 2.77): the OpenAPI lint and TypeScript tests skip"
fi
# the MCP SDK and conformance tests' npm packages (pinned; exit 3 = registry unreachable: those tests skip)
bash tests/mcp/install.sh || [ $? -eq 3 ]
# each end-to-end suite's own pinned packages (tests/e2e/*/install.sh; exit 3 = a registry or
# package is unreachable: that suite skips and says so)
for inst in tests/e2e/*/install.sh; do
  [ -f "$inst" ] || continue
  bash "$inst" || [ $? -eq 3 ]
done
jobs=$(nproc)
export ABX_HOME=$(mktemp -d)   # never touch the user's ~/.abx
trap 'rm -rf "$ABX_HOME"' EXIT

echo "== build (gcc, -Werror) and test"
cmake -S . -B build -DCMAKE_BUILD_TYPE=RelWithDebInfo -DABX_WERROR=ON >/dev/null
cmake --build build -j"$jobs"
(cd build && ctest --output-on-failure -j1)

echo "== build with ASan+UBSan (and allocation-failure injection) and test again"
cmake -S . -B build-asan -DCMAKE_BUILD_TYPE=Debug -DABX_WERROR=ON -DABX_SANITIZE=ON -DABX_FAULT_INJECTION=ON >/dev/null
cmake --build build-asan -j"$jobs"
(cd build-asan && ASAN_OPTIONS=detect_leaks=1:abort_on_error=0 UBSAN_OPTIONS=print_stacktrace=1 ctest --output-on-failure -j1 -LE e2e)

secs=${FUZZ_SECONDS:-30}
if [ "$secs" != "0" ]; then
  echo "== fuzz targets, ${secs}s each (clang, libFuzzer, ASan+UBSan)"
  CC=clang cmake -S . -B build-fuzz -DCMAKE_BUILD_TYPE=RelWithDebInfo -DABX_FUZZ=ON -DABX_TESTS=OFF >/dev/null
  cmake --build build-fuzz -j"$jobs"
  pass=0; fail=0
  for f in build-fuzz/fuzz_*; do
    name=$(basename "$f")
    work=$(mktemp -d)
    corpus=tests/fuzz/corpus/$name
    mkdir -p "$corpus"
    if "$f" -max_total_time="$secs" -print_final_stats=1 "$work" "$corpus" >"$work.log" 2>&1; then
      execs=$(grep -o 'stat::number_of_executed_units: *[0-9]*' "$work.log" | grep -o '[0-9]*$' || echo '?')
      echo "fuzz $name: ok ($execs runs)"
      pass=$((pass + 1))
    else
      echo "fuzz $name: FAILED"; tail -40 "$work.log"
      fail=$((fail + 1))
    fi
    rm -rf "$work" "$work.log"
  done
  echo "fuzz: $pass passed, $fail failed"
  [ "$fail" -eq 0 ]
fi
