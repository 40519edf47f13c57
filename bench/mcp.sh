#!/usr/bin/env bash
# bench/mcp.sh — what MCP's initialize and tools/list cost with 200 registered operations.
#
#   bash bench/mcp.sh
#
# bench/mcp_bench.c, linked against build-bench/libabx.a, embeds a server with
# BENCH_MCP_OPS (default 200) extra operations registered through the public API
# (include/abx/abx.h), mounted with core.* for one principal, on a loopback port; then
# (a) server side, in process: the MCP core plus the JSON encoding a transport does —
#     initialize, the first tools/list (builds the cached list), each page and the whole
#     listing from the cache;
# (b) over HTTP on one keep-alive connection: POST /mcp initialize and each tools/list page.
# Target (issue 6): the whole tools/list, server side, p50 <= 2 ms.
# Writes bench/out/mcp-<timestamp>.json. See bench/README.md.
#
# Exit status: 0 when every measurement ran cleanly (unless BENCH_STRICT=1 and a target
# was missed); 1 when the run is invalid.
set -euo pipefail
BENCH_NAME="mcp"
# shellcheck source=bench/lib.sh
. "$(dirname "${BASH_SOURCE[0]}")/lib.sh"

N_OPS=${BENCH_MCP_OPS:-200}
ITERS=${BENCH_MCP_ITERATIONS:-2000}
[[ $N_OPS =~ ^[0-9]{1,4}$ ]] && [ "$N_OPS" -ge 1 ] && [ "$N_OPS" -le 5000 ] ||
    { echo "mcp: BENCH_MCP_OPS must be 1..5000" >&2; exit 2; }
[[ $ITERS =~ ^[0-9]{2,6}$ ]] || { echo "mcp: BENCH_MCP_ITERATIONS must be 10..999999" >&2; exit 2; }
bench_under_timeout 900 "$@"
bench_init
need_pkg pkg-config pkg-config
bench_build --static

bench_cc_libabx "$TMP/mcp_bench" "$BENCH_DIR/mcp_bench.c"
mkdir -p "$TMP/run"
log "mcp_bench: $N_OPS extra operations, $ITERS iterations per case"
run_bg timeout 600 "$TMP/mcp_bench" "$TMP/run" "$N_OPS" "$ITERS" >"$TMP/table.txt" 2>"$TMP/mcp_bench.log" ||
    fail "mcp_bench failed: $(grep -v '^result' "$TMP/mcp_bench.log" | tail -n 3 | tr '\n' ' ')"
NAMES=() COUNTS=() P50=() P99=() MEAN=()
while IFS=$'\t' read -r tag name count p50 p99 mean; do
    [ "$tag" = result ] || continue
    NAMES+=("$name") COUNTS+=("$count") P50+=("$p50") P99+=("$p99") MEAN+=("$mean")
done <"$TMP/mcp_bench.log"
read -r _ N_TOOLS N_PAGES PAGE1_BYTES < <(awk -F'\t' '$1 == "tools"' "$TMP/mcp_bench.log") || true
[ ${#NAMES[@]} -gt 0 ] || fail "mcp_bench printed no results"
e=$(grep -v '^result\|^tools' "$TMP/mcp_bench.log" | grep -i '"level":"error"' | head -n 3 || true)
[ -z "$e" ] && [ -z "$(log_errors "$TMP/mcp_bench.log")" ] || warn "the server logged errors: $e"

ALL_P50=""
for i in "${!NAMES[@]}"; do
    [[ ${NAMES[$i]} == "core tools/list all "* ]] && ALL_P50=${P50[$i]}
done
[ -n "$ALL_P50" ] || fail "no whole-listing measurement"
ALL_MS=$(awk -v u="${ALL_P50:-0}" 'BEGIN { printf "%.3f", u / 1000 }')
ge 2 "$ALL_MS" || MISSED+=("tools/list of $N_TOOLS tools, server side, p50 $ALL_MS ms > 2 ms")

echo
echo "abx MCP benchmarks — $(nproc) cores, $(date -u +%FT%TZ)"
echo "$N_OPS registered operations + core.*: ${N_TOOLS:-?} tools in ${N_PAGES:-?} pages (page 1: ${PAGE1_BYTES:-?} bytes)"
echo
cat "$TMP/table.txt"
echo
echo "whole tools/list, server side: p50 $ALL_MS ms (target <= 2 ms)"

BODY="$TMP/body.json"
{
    printf '  "ops": %s,\n  "tools": %s,\n  "pages": %s,\n  "page1_bytes": %s,\n  "iterations": %s,\n' \
        "$N_OPS" "${N_TOOLS:-0}" "${N_PAGES:-0}" "${PAGE1_BYTES:-0}" "$ITERS"
    printf '  "cases": [\n'
    for i in "${!NAMES[@]}"; do
        [ "$i" = 0 ] || printf ',\n'
        printf '    {"name": %s, "count": %s, "p50_us": %s, "p99_us": %s, "mean_us": %s}' \
            "$(json_str "${NAMES[$i]}")" "${COUNTS[$i]}" "${P50[$i]}" "${P99[$i]}" "${MEAN[$i]}"
    done
    printf '\n  ],\n'
    printf '  "tools_list_all_p50_ms": {"value": %s, "target_max": 2},\n' "$ALL_MS"
} >"$BODY"
bench_finish "$BODY"
