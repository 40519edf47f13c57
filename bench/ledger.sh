#!/usr/bin/env bash
# bench/ledger.sh — what the action ledger costs.
#
#   bash bench/ledger.sh
#
# (a) Two Release abx servers side by side, the same config but one with
#     `ledger: {enabled: false}`: wrk -t2 -c64 on an authenticated
#     GET /files/stat?path=f1k.txt, alternately ON, OFF, ON, OFF. Target: ON/OFF ≥ 0.85.
# (b) The p50/p99 latency of a mutating call (files.write of 1 KiB, sequential, one
#     keep-alive connection) with `synchronous: normal` and with `synchronous: full`,
#     interleaved. A mutating call waits for two group commits (admission, end).
# Writes bench/out/ledger-<timestamp>.json.
set -euo pipefail
BENCH_NAME="ledger"
# shellcheck source=bench/lib.sh
. "$(dirname "${BASH_SOURCE[0]}")/lib.sh"

DURATION=${BENCH_DURATION:-10s}
ROUNDS=${BENCH_LEDGER_ROUNDS:-2}
CALLS=${BENCH_LEDGER_CALLS:-300}
DUR_S=$(dur_seconds "$DURATION")
bench_under_timeout $((2 * ROUNDS * (DUR_S + 20) + 600)) "$@"
bench_init
need_pkg wrk wrk
bench_build
cc -O2 -Wall -o "$TMP/http_loop" "$BENCH_DIR/http_loop.c" || die "cannot compile bench/http_loop.c"

WS="$TMP/ws"
mkdir -p "$WS"
head -c 1024 /dev/zero | tr '\0' 'x' >"$WS/f1k.txt"
TOKEN="bench-ledger-token-0123456789"
export ABX_BENCH_TOKEN="$TOKEN"
mapfile -t PORTS < <(free_ports 4)
P_ON=${PORTS[0]} P_OFF=${PORTS[1]} P_N=${PORTS[2]} P_F=${PORTS[3]}

config() { # dir port ledger-yaml
    mkdir -p "$1"
    cat >"$1/abx.yaml" <<YAML
listen: 127.0.0.1:$2
workspace: $WS
terminal_listen: "off"
ledger: $3
auth:
  tokens:
    - {principal: bench, roles: [agent], token_env: ABX_BENCH_TOKEN}
policy:
  allow:
    - ops: ["files.*"]
      principals: [bench]
      paths: ["$WS/**"]
YAML
}
config "$TMP/on" "$P_ON" "{path: $TMP/on/ledger.db}"
config "$TMP/off" "$P_OFF" "{enabled: false}"
config "$TMP/normal" "$P_N" "{path: $TMP/normal/ledger.db, synchronous: normal}"
config "$TMP/full" "$P_F" "{path: $TMP/full/ledger.db, synchronous: full}"

wrk_rps() { # port
    wrk -t2 -c64 -d"$DURATION" -H "Authorization: Bearer $TOKEN" "http://127.0.0.1:$1/files/stat?path=f1k.txt" \
        >"$TMP/wrk.out" 2>&1 || die "wrk failed: $(tail -3 "$TMP/wrk.out")"
    grep -q "Non-2xx" "$TMP/wrk.out" && fail "non-2xx replies on port $1: $(grep Non-2xx "$TMP/wrk.out")"
    awk '/Requests\/sec/ { print $2 }' "$TMP/wrk.out"
}

ON=()
OFF=()
for r in $(seq 1 "$ROUNDS"); do
    for which in on off; do
        port=$P_ON
        [ $which = off ] && port=$P_OFF
        bench_start_abx "$which" "$TMP/$which/abx.yaml" "$port"
        pid=$STARTED_PID
        rps=$(wrk_rps "$port")
        bench_stop "$pid"
        log "round $r ledger $which: $rps req/s"
        if [ $which = on ]; then ON+=("$rps"); else OFF+=("$rps"); fi
    done
done
M_ON=$(median "${ON[@]}")
M_OFF=$(median "${OFF[@]}")
R=$(ratio "$M_ON" "$M_OFF")

# (b) mutating-call latency, synchronous normal vs full
BODY='{"path": "w.txt", "content": "'$(head -c 1024 /dev/zero | tr '\0' 'y')'"}'
lat() { # port name
    "$TMP/http_loop" "$1" "$CALLS" POST /ops/files.write "$TOKEN" "$BODY" >"$TMP/lat-$2.txt" 2>"$TMP/lat-$2.err" ||
        die "http_loop failed: $(tail -2 "$TMP/lat-$2.err")"
}
: >"$TMP/all-normal.txt"
: >"$TMP/all-full.txt"
for r in $(seq 1 "$ROUNDS"); do
    for which in normal full; do
        port=$P_N
        [ $which = full ] && port=$P_F
        bench_start_abx "$which" "$TMP/$which/abx.yaml" "$port"
        pid=$STARTED_PID
        lat "$port" "$which"
        cat "$TMP/lat-$which.txt" >>"$TMP/all-$which.txt"
        bench_stop "$pid"
    done
done
N50=$(pct "$TMP/all-normal.txt" 50)
N99=$(pct "$TMP/all-normal.txt" 99)
F50=$(pct "$TMP/all-full.txt" 50)
F99=$(pct "$TMP/all-full.txt" 99)

printf '\nabx ledger benchmarks — wrk -t2 -c%s -d%s, %s rounds, %s cores\n' 64 "$DURATION" "$ROUNDS" "$(nproc)"
printf '%-44s %12s\n' "files.stat req/s, ledger on (median)" "$M_ON"
printf '%-44s %12s\n' "files.stat req/s, ledger off (median)" "$M_OFF"
printf 'ledger on / off ratio: %s (target >= 0.85)\n' "$R"
printf '%-44s %8s us p50 %8s us p99\n' "files.write 1 KiB, synchronous=normal" "$N50" "$N99"
printf '%-44s %8s us p50 %8s us p99\n' "files.write 1 KiB, synchronous=full" "$F50" "$F99"
awk -v r="$R" 'BEGIN { exit !(r < 0.85) }' && MISSED+=("ledger on/off $R < 0.85")

mkdir -p "$BENCH_DIR/out"
OUT="$BENCH_DIR/out/ledger-$(date -u +%Y%m%dT%H%M%SZ).json"
cat >"$OUT" <<JSON
{"benchmark": "ledger", "abx_version": "$ABX_VERSION", "duration": "$DURATION", "rounds": $ROUNDS,
 "files_stat_rps": {"on": [$(IFS=,; echo "${ON[*]}")], "off": [$(IFS=,; echo "${OFF[*]}")], "median_on": $M_ON, "median_off": $M_OFF, "ratio": $R, "target_min": 0.85},
 "files_write_us": {"calls": $((CALLS * ROUNDS)), "normal": {"p50": $N50, "p99": $N99}, "full": {"p50": $F50, "p99": $F99}}}
JSON
log "results: $OUT"
if [ ${#MISSED[@]} -gt 0 ]; then
    echo "targets missed: ${#MISSED[@]}"
    printf '  - %s\n' "${MISSED[@]}"
    [ "$STRICT" = 1 ] && exit 1
fi
[ ${#FAILURES[@]} -eq 0 ]
