#!/usr/bin/env bash
# bench/egress_tls.sh — what credential injection costs (issue 17), in-process on loopback.
#
#   bash bench/egress_tls.sh            # 100 MiB, 3 rounds, 300 small requests
#   BENCH_EGRESS_MIB=20 BENCH_EGRESS_ROUNDS=2 BENCH_EGRESS_SMALL=100 bash bench/egress_tls.sh
#
# bench/egress_tls_bench.c, linked against build-bench/libabx.a: an HTTPS upstream thread
# and the proxy in one process; side by side, round-robin, (a) a MIB MiB GET through a
# plain CONNECT tunnel and through interception (TLS terminated and re-made, the header
# injected, the body scanned for the secret and re-chunked); (b) small requests on new
# connections through each (p50). Interception does twice the TLS work of a tunnel on the
# same CPUs, so on loopback its ratio measures that work plus the scan. Target: intercepted
# throughput >= 0.40 x the tunnel's, added p50 <= 3 ms (two handshakes and a leaf lookup).
# Writes bench/out/egress_tls-<timestamp>.json. See bench/README.md.
set -euo pipefail
BENCH_NAME="egress_tls"
# shellcheck source=bench/lib.sh
. "$(dirname "${BASH_SOURCE[0]}")/lib.sh"

MIB=${BENCH_EGRESS_MIB:-100}
ROUNDS=${BENCH_EGRESS_ROUNDS:-3}
SMALL=${BENCH_EGRESS_SMALL:-300}
[[ $MIB =~ ^[1-9][0-9]{0,3}$ ]] || { echo "egress_tls: BENCH_EGRESS_MIB must be 1..9999" >&2; exit 2; }
[[ $ROUNDS =~ ^[1-9]$ ]] || { echo "egress_tls: BENCH_EGRESS_ROUNDS must be 1..9" >&2; exit 2; }
[[ $SMALL =~ ^[1-9][0-9]{1,5}$ ]] || { echo "egress_tls: BENCH_EGRESS_SMALL must be 10..999999" >&2; exit 2; }
bench_under_timeout 600 "$@"
bench_init
bench_build --static
bench_cc_libabx "$TMP/egress_tls_bench" "$BENCH_DIR/egress_tls_bench.c"
log "egress_tls_bench: $MIB MiB x $ROUNDS rounds, $SMALL small requests"
run_bg timeout 500 "$TMP/egress_tls_bench" "$MIB" "$ROUNDS" "$SMALL" >"$TMP/out.txt" 2>"$TMP/err.txt" ||
    fail "egress_tls_bench failed: $(tail -n 3 "$TMP/err.txt" | tr '\n' ' ')"
grep -v '^result' "$TMP/out.txt" || true
declare -A R
while IFS=$'\t' read -r tag name value; do
    [ "$tag" = result ] && R[$name]=$value
done <"$TMP/out.txt"
[ -n "${R[intercept_ratio]:-}" ] || fail "egress_tls_bench printed no results"
if [ ${#FAILURES[@]} -eq 0 ]; then
    ge "${R[intercept_ratio]}" 0.40 || MISSED+=("intercepted throughput ratio ${R[intercept_ratio]} < 0.40")
    ge 3000 "${R[added_p50_us]}" || MISSED+=("added p50 latency ${R[added_p50_us]} us > 3000")
fi
BODY="$TMP/body.json"
{
    printf '  "mib": %s,\n  "rounds": %s,\n  "small_requests": %s,\n' "$MIB" "$ROUNDS" "$SMALL"
    for k in tunnel_mbs intercept_mbs intercept_ratio tunnel_p50_us intercept_p50_us added_p50_us; do
        printf '  "%s": %s,\n' "$k" "${R[$k]:-0}"
    done
} >"$BODY"
bench_finish "$BODY"
