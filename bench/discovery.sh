#!/usr/bin/env bash
# bench/discovery.sh — what GET /openapi.json and GET /ops cost with 200 registered ops.
#
#   bash bench/discovery.sh
#
# bench/discovery_bench.c, linked against build-bench/libabx.a, embeds abx through
# the public API and registers BENCH_DISCOVERY_OPS (default 200) extra ops, three
# parameters each. Eight principals p0..p7 each have a view of their own (core.*,
# bench.* and one more op), so each one's first request builds its documents: that is
# the cold (first) call, eight samples per document. Then bench/http_loop.c sends
# BENCH_DISCOVERY_N (default 300) requests per document for p0 over one keep-alive
# connection: the cached calls. Server side = duration_ms of the server's request log
# (request read to reply ready, before the body is sent); client side = http_loop's
# time from the first byte written to the last byte read (includes the transfer).
# Target: cached server-side p50 <= 2 ms for both documents.
# Writes bench/out/discovery-<timestamp>.json. See bench/README.md.
#
# Exit status: 0 when every measurement ran cleanly (unless BENCH_STRICT=1 and a target
# was missed); 1 when the run is invalid.
set -euo pipefail
BENCH_NAME="discovery"
# shellcheck source=bench/lib.sh
. "$(dirname "${BASH_SOURCE[0]}")/lib.sh"

N_OPS=${BENCH_DISCOVERY_OPS:-200}
N=${BENCH_DISCOVERY_N:-300}
[[ $N_OPS =~ ^[1-9][0-9]{0,3}$ ]] || { echo "discovery: BENCH_DISCOVERY_OPS must be 1..5000" >&2; exit 2; }
[[ $N =~ ^[1-9][0-9]{0,4}$ ]] || { echo "discovery: BENCH_DISCOVERY_N must be 1..99999" >&2; exit 2; }
bench_under_timeout $((N / 5 + 900)) "$@"
bench_init
need_pkg pkg-config pkg-config
bench_build --static

bench_cc_libabx "$TMP/discovery_bench" "$BENCH_DIR/discovery_bench.c"
cc -O2 -Wall -o "$TMP/http_loop" "$BENCH_DIR/http_loop.c" || die "cannot compile bench/http_loop.c"

WS="$TMP/ws"
mkdir -p "$WS"
WS=$(realpath "$WS")
PORT=$(free_ports 1)
[ -n "$PORT" ] || die "cannot find a free port"
EXTRA=(files.stat files.read files.list files.find files.search files.download system.info process.list)
token() { printf 'discovery-bench-token-%s-0123456789' "$1"; }
{
    printf 'listen: 127.0.0.1:%s\nworkspace: %s\nterminal_listen: "off"\nledger:\n  enabled: false\n' "$PORT" "$WS"
    printf 'auth:\n  tokens:\n'
    for p in check p0 p1 p2 p3 p4 p5 p6 p7; do
        printf '    - principal: %s\n      token_sha256: "%s"\n' "$p" "$(token "$p" | sha256sum | cut -d' ' -f1)"
    done
    printf 'policy:\n  allow:\n    - ops: ["core.*", "bench.*"]\n      principals: ["*"]\n'
    for i in 0 1 2 3 4 5 6 7; do
        printf '    - ops: [%s]\n      principals: [p%d]\n      paths: ["%s/**"]\n' "${EXTRA[$i]}" "$i" "$WS"
    done
} >"$TMP/abx.yaml"

"$TMP/discovery_bench" "$TMP/abx.yaml" "$N_OPS" >"$TMP/ready.txt" 2>"$TMP/server.log" &
SERVER_PID=$!
PIDS+=("$SERVER_PID")
for _ in $(seq 1 200); do
    [ -s "$TMP/ready.txt" ] && break
    kill -0 "$SERVER_PID" 2>/dev/null || die "discovery_bench exited: $(tail -n 3 "$TMP/server.log" | tr '\n' ' ')"
    sleep 0.05
done
read -r word got_port LISTED <"$TMP/ready.txt" || die "discovery_bench did not report ready"
[ "$word" = ready ] && [ "$got_port" = "$PORT" ] || die "discovery_bench: unexpected '$(cat "$TMP/ready.txt")'"
[ "$LISTED" -ge "$N_OPS" ] || die "GET /ops lists $LISTED ops for principal check, expected at least $N_OPS"
log "$LISTED ops listed for a principal ($N_OPS registered by the embedder); $N requests per document"

# server-side durations (ms) of op OP in the log, in request order, from line FROM on
durations() { # op from
    tail -n +"$2" "$TMP/server.log" | grep "\"op\":\"$1\"" | sed -n 's/.*"duration_ms":\([0-9.e+-]*\).*/\1/p'
}

declare -A RES
for doc in openapi ops; do
    path=/openapi.json && op=core.openapi.get && expect='"openapi":"3.1.0"'
    [ $doc = ops ] && path=/ops && op=core.ops.list && expect='"catalog_version"'
    # cold: each principal's first request for the document
    : >"$TMP/$doc-cold-client.txt"
    from=$(($(wc -l <"$TMP/server.log") + 1))
    for i in 0 1 2 3 4 5 6 7; do
        run_bg timeout 60 "$TMP/http_loop" "$PORT" 1 GET "$path" "$(token "p$i")" "" "$expect" \
            >>"$TMP/$doc-cold-client.txt" 2>"$TMP/http_loop.log" ||
            fail "$doc cold request for p$i: $(tail -n 2 "$TMP/http_loop.log" | tr '\n' ' ')"
    done
    sleep 0.2 # the log line is written after the reply
    durations "$op" "$from" >"$TMP/$doc-cold-server.txt"
    # cached: N more for p0
    from=$(($(wc -l <"$TMP/server.log") + 1))
    run_bg timeout $((N / 5 + 60)) "$TMP/http_loop" "$PORT" "$N" GET "$path" "$(token p0)" "" "$expect" \
        >"$TMP/$doc-client.txt" 2>"$TMP/http_loop.log" ||
        fail "$doc cached requests: $(tail -n 2 "$TMP/http_loop.log" | tr '\n' ' ')"
    sleep 0.2
    durations "$op" "$from" >"$TMP/$doc-server.txt"
    [ "$(wc -l <"$TMP/$doc-cold-server.txt")" = 8 ] || fail "$doc: expected 8 cold log lines, got $(wc -l <"$TMP/$doc-cold-server.txt")"
    [ "$(wc -l <"$TMP/$doc-server.txt")" = "$N" ] || fail "$doc: expected $N log lines, got $(wc -l <"$TMP/$doc-server.txt")"
    size=$(curl -sS -o /dev/null -w '%{size_download}' -H "Authorization: Bearer $(token p0)" "http://127.0.0.1:$PORT$path")
    RES[$doc.size]=$size
    RES[$doc.cold_server_p50]=$(pct "$TMP/$doc-cold-server.txt" 50)
    RES[$doc.cold_server_max]=$(pct "$TMP/$doc-cold-server.txt" 100)
    RES[$doc.cold_client_p50_ms]=$(awk '{ print $1 / 1000 }' "$TMP/$doc-cold-client.txt" | sort -g | awk '{ v[NR] = $1 } END { print v[int((NR + 1) / 2)] }')
    RES[$doc.server_p50]=$(pct "$TMP/$doc-server.txt" 50)
    RES[$doc.server_p99]=$(pct "$TMP/$doc-server.txt" 99)
    RES[$doc.client_p50_ms]=$(awk -v v="$(pct "$TMP/$doc-client.txt" 50)" 'BEGIN { printf "%.3f", v / 1000 }')
    RES[$doc.client_p99_ms]=$(awk -v v="$(pct "$TMP/$doc-client.txt" 99)" 'BEGIN { printf "%.3f", v / 1000 }')
done
errs=$(log_errors "$TMP/server.log")
[ -z "$errs" ] || warn "server log: $errs"

printf '\n%-22s %12s %16s %16s %16s %16s %16s\n' document bytes "first: server" "first: client" "cached: server" "cached: p99" "cached: client"
for doc in openapi ops; do
    printf '%-22s %12s %13s ms %13s ms %13s ms %13s ms %13s ms\n' "GET /${doc/openapi/openapi.json}" "${RES[$doc.size]}" \
        "${RES[$doc.cold_server_p50]}" "${RES[$doc.cold_client_p50_ms]}" "${RES[$doc.server_p50]}" "${RES[$doc.server_p99]}" \
        "${RES[$doc.client_p50_ms]}"
    ge 2 "${RES[$doc.server_p50]}" || MISSED+=("GET /$doc cached server-side p50 ${RES[$doc.server_p50]} ms > 2 ms")
done
echo "(first: median of 8 principals' first request; cached: $N requests, p50 unless noted)"

{
    printf '  "ops_registered_extra": %s,\n  "ops_listed": %s,\n  "requests": %s,\n' "$N_OPS" "$LISTED" "$N"
    for doc in openapi ops; do
        printf '  "%s": {"bytes": %s, "first_server_ms_p50": %s, "first_server_ms_max": %s, "first_client_ms_p50": %s, ' \
            "$doc" "${RES[$doc.size]}" "${RES[$doc.cold_server_p50]}" "${RES[$doc.cold_server_max]}" "${RES[$doc.cold_client_p50_ms]}"
        printf '"cached_server_ms_p50": %s, "cached_server_ms_p99": %s, "cached_client_ms_p50": %s, "cached_client_ms_p99": %s},\n' \
            "${RES[$doc.server_p50]}" "${RES[$doc.server_p99]}" "${RES[$doc.client_p50_ms]}" "${RES[$doc.client_p99_ms]}"
    done
    printf '  "target": "cached server-side p50 <= 2 ms",\n'
} >"$TMP/body.json"
bench_finish "$TMP/body.json"
