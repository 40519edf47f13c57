#!/usr/bin/env bash
# bench/flood.sh — abx under a connection flood.
#
#   bash bench/flood.sh                 # 10000 connections
#   BENCH_FLOOD_N=2000 bash bench/flood.sh
#
# Starts a Release abx on a free loopback port, opens BENCH_FLOOD_N (10000) connections
# to it that never finish a request (idle, half-open header, keep-alive after one
# request; bench/flood.c), and while they are held times GET /health and an
# authenticated files.stat from a new client (BENCH_FLOOD_SAMPLES each, 2 s bound per
# request). Prints the server's RSS growth, the latencies and how many flood connections
# it still holds. Targets (issue 14): RSS growth < 64 MiB; /health and files.stat answered
# within 100 ms. Writes bench/out/flood-<timestamp>.json.
set -euo pipefail
BENCH_NAME="flood"
# shellcheck source=bench/lib.sh
. "$(dirname "${BASH_SOURCE[0]}")/lib.sh"

N=${BENCH_FLOOD_N:-10000}
SAMPLES=${BENCH_FLOOD_SAMPLES:-20}
if ! [[ $N =~ ^[0-9]+$ ]] || ! [[ $SAMPLES =~ ^[0-9]+$ ]]; then
    echo "flood: BENCH_FLOOD_N and BENCH_FLOOD_SAMPLES are whole numbers" >&2
    exit 2
fi
bench_under_timeout 300 "$@"

# the flood client and abx each need a descriptor per connection (and some to spare)
WANT=$((N + 2048))
HARD=$(ulimit -Hn)
[ "$HARD" = unlimited ] || [ "$HARD" -ge "$WANT" ] || {
    echo "flood: the hard RLIMIT_NOFILE ($HARD) is below the $WANT descriptors $N connections need" >&2
    exit 2
}
ulimit -n "$WANT"

bench_init
bench_build
cc -O2 -Wall -o "$TMP/flood" "$BENCH_DIR/flood.c" || die "cannot compile bench/flood.c"

WS="$TMP/ws"
mkdir -p "$WS"
head -c 1024 /dev/zero | tr '\0' 'x' >"$WS/f1k.txt"
TOKEN="bench-flood-token-$(od -An -tx1 -N8 /dev/urandom | tr -d ' \n')"
export ABX_BENCH_TOKEN="$TOKEN"
mapfile -t PORTS < <(free_ports 1)
PORT=${PORTS[0]}
cat >"$TMP/abx.yaml" <<YAML
listen: 127.0.0.1:$PORT
workspace: $WS
terminal_listen: "off"
# hold the whole flood while measuring: a table and a per-address cap larger than it
# (all of it comes from 127.0.0.1), a read timeout longer than the run
limits: {connections: $((N + 100)), connections_per_address: $((N + 100)), read_timeout: 60s}
auth:
  tokens:
    - {principal: bench, roles: [agent], token_env: ABX_BENCH_TOKEN}
policy:
  allow:
    - ops: ["files.*"]
      principals: [bench]
      paths: ["$WS/**"]
YAML
bench_start_abx abx "$TMP/abx.yaml" "$PORT"
PID=$STARTED_PID
sleep 0.5
[ "$(http "$PORT" GET /health | cut -d' ' -f1)" = 200 ] || die "abx does not answer GET /health before the flood"
[ "$(http "$PORT" GET "/files/stat?path=f1k.txt" "$TOKEN" | cut -d' ' -f1)" = 200 ] ||
    die "abx does not answer files.stat before the flood"

log "flood: $N connections, then $SAMPLES GET /health and $SAMPLES files.stat from a new client"
run_bg "$TMP/flood" "$PORT" "$N" "$PID" "$TOKEN" "/files/stat?path=f1k.txt" "$SAMPLES" >"$TMP/flood.out" ||
    die "the flood client failed"
kill -0 "$PID" 2>/dev/null || die "abx died during the flood"
sleep 0.5
[ "$(http "$PORT" GET /health | cut -d' ' -f1)" = 200 ] || fail "abx does not answer GET /health after the flood"
RSS_AFTER=$(proc_field "$PID" VmRSS)

v() { awk -F= -v k="$1" '$1 == k { print $2 }' "$TMP/flood.out"; }
GROWTH_MIB=$(mib "$(v rss_growth_kib)")
echo
echo "abx under a connection flood — $(nproc) cores, $(date -u +%FT%TZ)"
printf 'connections: %s asked, %s opened (%s connect errors) in %s ms; the server still held %s of them after %s ms\n' \
    "$N" "$(v flood_opened)" "$(v flood_connect_errors)" "$(v flood_open_ms)" "$(v flood_still_open)" "$(v flood_held_ms)"
printf 'server RSS: %s MiB before, %s MiB during (growth %s MiB, target < 64 MiB), %s MiB after; threads %s -> %s\n' \
    "$(mib "$(v rss_before_kib)")" "$(mib "$(v rss_during_kib)")" "$GROWTH_MIB" "$(mib "$RSS_AFTER")" \
    "$(v threads_before)" "$(v threads_during)"
printf '%-28s %9s %9s %9s %9s %s\n' "during the flood" answered "200" p50 p99 max
for k in health stat; do
    name=$([ $k = health ] && echo "GET /health" || echo "files.stat (authenticated)")
    printf '%-28s %5s/%-3s %9s %7sms %7sms %sms%s\n' "$name" "$(v ${k}_answered)" "$(v ${k}_samples)" "$(v ${k}_ok)" \
        "$(v ${k}_p50_ms)" "$(v ${k}_p99_ms)" "$(v ${k}_max_ms)" \
        "$([ -n "$(v "${k}"_first_failure)" ] && echo " (first failure: status $(v ${k}_first_failure); 0 = no answer in 2 s)")"
done

ge 64 "$GROWTH_MIB" || MISSED+=("RSS growth $GROWTH_MIB MiB >= 64 MiB")
for k in health stat; do
    [ "$(v ${k}_ok)" = "$(v ${k}_samples)" ] || MISSED+=("$k: $(v ${k}_ok) of $(v ${k}_samples) answered 200 during the flood")
    ge 100 "$(v ${k}_max_ms | sed 's/inf/1e9/')" || MISSED+=("$k: slowest answer $(v ${k}_max_ms) ms > 100 ms")
done
log_errors "$TMP/abx.log"

{
    printf '  "connections": {"asked": %s, "opened": %s, "connect_errors": %s, "open_ms": %s, "still_open": %s},\n' \
        "$N" "$(v flood_opened)" "$(v flood_connect_errors)" "$(v flood_open_ms)" "$(v flood_still_open)"
    printf '  "rss_kib": {"before": %s, "during": %s, "growth": %s, "after": %s, "target_growth_mib_max": 64},\n' \
        "$(v rss_before_kib)" "$(v rss_during_kib)" "$(v rss_growth_kib)" "${RSS_AFTER:-0}"
    for k in health stat; do
        printf '  "%s": {"samples": %s, "answered": %s, "ok": %s, "p50_ms": "%s", "p99_ms": "%s", "max_ms": "%s", "target_max_ms": 100},\n' \
            "$k" "$(v ${k}_samples)" "$(v ${k}_answered)" "$(v ${k}_ok)" "$(v ${k}_p50_ms)" "$(v ${k}_p99_ms)" "$(v ${k}_max_ms)"
    done
} >"$TMP/body.json"
bench_finish "$TMP/body.json"
