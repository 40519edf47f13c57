#!/usr/bin/env bash
# bench/egress.sh — what the egress proxy costs (issue 17), in-process on loopback.
#
#   bash bench/egress.sh            # 100 MiB, 3 rounds, 2000 small requests
#   BENCH_EGRESS_MIB=20 BENCH_EGRESS_ROUNDS=2 BENCH_EGRESS_SMALL=500 bash bench/egress.sh
#
# bench/egress_bench.c, linked against build-bench/libabx.a: an upstream HTTP server
# thread and the proxy in one process; (a) a MIB MiB GET direct, through CONNECT and
# through HTTP forward proxying, round-robin; (b) small requests on new connections,
# direct vs forward proxy. Targets (the issue's): throughput >= 0.70 x direct, added
# p50 latency <= 1000 us. On loopback "direct" is a memory copy, so the throughput ratio
# measures the proxy's CPU cost, not what a download over a real network would lose.
# Writes bench/out/egress-<timestamp>.json. See bench/README.md.
set -euo pipefail
BENCH_NAME="egress"
# shellcheck source=bench/lib.sh
. "$(dirname "${BASH_SOURCE[0]}")/lib.sh"

MIB=${BENCH_EGRESS_MIB:-100}
ROUNDS=${BENCH_EGRESS_ROUNDS:-3}
SMALL=${BENCH_EGRESS_SMALL:-2000}
[[ $MIB =~ ^[1-9][0-9]{0,3}$ ]] || { echo "egress: BENCH_EGRESS_MIB must be 1..9999" >&2; exit 2; }
[[ $ROUNDS =~ ^[1-9]$ ]] || { echo "egress: BENCH_EGRESS_ROUNDS must be 1..9" >&2; exit 2; }
[[ $SMALL =~ ^[1-9][0-9]{2,5}$ ]] || { echo "egress: BENCH_EGRESS_SMALL must be 100..999999" >&2; exit 2; }
bench_under_timeout 600 "$@"
bench_init
bench_build --static
bench_cc_libabx "$TMP/egress_bench" "$BENCH_DIR/egress_bench.c"
log "egress_bench: $MIB MiB x $ROUNDS rounds, $SMALL small requests"
run_bg timeout 500 "$TMP/egress_bench" "$MIB" "$ROUNDS" "$SMALL" >"$TMP/out.txt" 2>"$TMP/err.txt" ||
    fail "egress_bench failed: $(tail -n 3 "$TMP/err.txt" | tr '\n' ' ')"
grep -v '^result' "$TMP/out.txt" || true
declare -A R
while IFS=$'\t' read -r tag name value; do
    [ "$tag" = result ] && R[$name]=$value
done <"$TMP/out.txt"
[ -n "${R[connect_ratio]:-}" ] || fail "egress_bench printed no results"
if [ ${#FAILURES[@]} -eq 0 ]; then
    ge "${R[connect_ratio]}" 0.70 || MISSED+=("CONNECT throughput ratio ${R[connect_ratio]} < 0.70")
    ge "${R[forward_ratio]}" 0.70 || MISSED+=("forward throughput ratio ${R[forward_ratio]} < 0.70")
    ge 1000 "${R[added_p50_us]}" || MISSED+=("added p50 latency ${R[added_p50_us]} us > 1000")
fi
BODY="$TMP/body.json"
{
    printf '  "mib": %s,\n  "rounds": %s,\n  "small_requests": %s,\n' "$MIB" "$ROUNDS" "$SMALL"
    for k in direct_mbs connect_mbs forward_mbs connect_ratio forward_ratio direct_p50_us forward_p50_us added_p50_us; do
        printf '  "%s": %s,\n' "$k" "${R[$k]:-0}"
    done
} >"$BODY"
bench_finish "$BODY"
