#!/usr/bin/env bash
# bench/fuzz-long.sh — run every libFuzzer target for a long time (default 1 hour each),
# growing a private copy of its committed corpus, and report executions and coverage.
#
#   FUZZ_SECONDS=3600 bash bench/fuzz-long.sh [TARGET...]
#
# Targets run one after another (the machine has two cores; -jobs would halve each).
# A crash stops that target and leaves the reproducer in bench/out/fuzz-<target>/;
# commit it under tests/fuzz/corpus/<target>/ with the fix. New corpus entries are
# kept in bench/out/fuzz-<target>/corpus (merge them with -merge=1 if they add
# coverage worth keeping).
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
cd "$root"
secs=${FUZZ_SECONDS:-3600}
bash scripts/deps.sh test >/dev/null
CC=clang cmake -S . -B build-fuzz -DCMAKE_BUILD_TYPE=RelWithDebInfo -DABX_FUZZ=ON -DABX_TESTS=OFF >/dev/null
cmake --build build-fuzz -j"$(nproc)" >/dev/null
targets=("$@")
[ ${#targets[@]} -eq 0 ] && for f in build-fuzz/fuzz_*; do targets+=("$(basename "$f")"); done
printf '%-16s %12s %10s %8s %8s  %s\n' target executions exec/s cov ft result
fail=0
for t in "${targets[@]}"; do
    out="bench/out/fuzz-$t"
    mkdir -p "$out/corpus"
    cp -n tests/fuzz/corpus/"$t"/* "$out/corpus/" 2>/dev/null || true
    log="$out/fuzz.log"
    if (cd "$out" && "$root/build-fuzz/$t" -max_total_time="$secs" -print_final_stats=1 corpus >"fuzz.log" 2>&1); then
        result=ok
    else
        result="CRASH (see $out)"
        fail=1
    fi
    execs=$(grep -o 'stat::number_of_executed_units: *[0-9]*' "$log" | grep -o '[0-9]*$' || echo '?')
    rate=$(grep -o 'stat::average_exec_per_sec: *[0-9]*' "$log" | grep -o '[0-9]*$' || echo '?')
    last=$(grep -E '#[0-9]+.*cov: [0-9]+' "$log" | tail -1)
    cov=$(sed -n 's/.*cov: \([0-9]*\).*/\1/p' <<<"$last")
    ft=$(sed -n 's/.*ft: \([0-9]*\).*/\1/p' <<<"$last")
    printf '%-16s %12s %10s %8s %8s  %s\n' "$t" "$execs" "$rate" "${cov:-?}" "${ft:-?}" "$result"
done
exit $fail
