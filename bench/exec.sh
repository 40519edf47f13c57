#!/usr/bin/env bash
# bench/exec.sh — commands.run of /bin/true end to end against the bare spawn floor.
#
#   bash bench/exec.sh
#
# Floor: bench/spawn_floor.c, posix_spawn("/bin/true") + waitpid, N times in a row.
# abx: a Release `abx serve` whose policy mounts commands.run (paths WS/**, commands
# ["true"], net: false); bench/http_loop.c sends N sequential
# POST /commands/run {"argv": ["true"]} on one keep-alive connection and times each
# call on the client side. Floor and abx batches alternate for BENCH_EXEC_ROUNDS rounds.
# Target: abx p50 <= 1.5 x floor p50 + 200 us.
# Writes bench/out/exec-<timestamp>.json. See bench/README.md.
set -euo pipefail
BENCH_NAME="exec"
# shellcheck source=bench/lib.sh
. "$(dirname "${BASH_SOURCE[0]}")/lib.sh"

N=${BENCH_EXEC_N:-300}
ROUNDS=${BENCH_EXEC_ROUNDS:-3}
[[ $N =~ ^[1-9][0-9]{0,4}$ ]] || { echo "exec: BENCH_EXEC_N must be 1..99999" >&2; exit 2; }
[[ $ROUNDS =~ ^[1-9][0-9]?$ ]] || { echo "exec: BENCH_EXEC_ROUNDS must be 1..99" >&2; exit 2; }
# a call should take a few ms; allow 100 ms each in the worst case
bench_under_timeout $((ROUNDS * N / 5 + 600)) "$@"
bench_init
bench_build --abx-only

cc -O2 -Wall -o "$TMP/spawn_floor" "$BENCH_DIR/spawn_floor.c" || die "cannot compile bench/spawn_floor.c"
cc -O2 -Wall -o "$TMP/http_loop" "$BENCH_DIR/http_loop.c" || die "cannot compile bench/http_loop.c"
[ -x /bin/true ] || die "no /bin/true"
has_op commands.run || die "the abx catalog has no commands.run"

WS="$TMP/ws"
mkdir -p "$WS"
WS=$(realpath "$WS")
mapfile -t PORTS < <(free_ports 1)
PORT=${PORTS[0]:-}
[ -n "$PORT" ] || die "cannot find a free port"
TOKEN="bench-$(od -An -tx1 -N16 /dev/urandom | tr -d ' \n')"
cat >"$TMP/abx.yaml" <<EOF
listen: 127.0.0.1:$PORT
workspace: $WS
terminal_listen: "off"
auth:
  tokens:
    - principal: bench
      roles: [agent]
      token_sha256: "$(printf '%s' "$TOKEN" | sha256sum | cut -d' ' -f1)"
policy:
  allow:
    - ops: [commands.run]
      principals: [bench]
      paths: ["$WS/**"]
      commands: ["true"]
      net: false
    - ops: [system.info]
      principals: [bench]
EOF
"$ABX" check-config "$TMP/abx.yaml" >"$TMP/check.log" 2>&1 || die "the config does not check: $(grep -m3 error "$TMP/check.log")"
bench_start_abx abx "$TMP/abx.yaml" "$PORT"
PID=$STARTED_PID

BODY='{"argv": ["true"]}'
r=$(http "$PORT" POST /commands/run "$TOKEN" "$BODY")
[ "${r%% *}" = 200 ] || die "commands.run answered $r"
grep -q '"exit_code": *0' <<<"$r" || die "commands.run did not report exit code 0: $r"
r2=$(http "$PORT" POST /commands/run "$TOKEN" '{"argv": ["false"]}')
[ "${r2%% *}" = 403 ] || fail "commands.run of a program outside the scope answered $r2 (expected 403)"
INFO=$(http "$PORT" GET /system/info "$TOKEN")
[ "${INFO%% *}" = 200 ] || log "warning: system.info answered ${INFO%% *}"
# what the kernel confinement of this machine has (context for the numbers)
CONFINE=$(/usr/bin/python3 -c '
import json, sys
try:
    d = json.load(sys.stdin)
except Exception:
    sys.exit(0)
for k in ("sandbox", "confinement", "confine"):
    if k in d:
        print(json.dumps(d[k], separators=(",", ":"), sort_keys=True)[:600])
        break
' <"$TMP/http-body" 2>/dev/null || true)

# warm-up (not timed): page cache, the server's first spawns
run_bg timeout 120 "$TMP/http_loop" "$PORT" 10 POST /commands/run "$TOKEN" "$BODY" '"exit_code":0' >/dev/null 2>"$TMP/warmup.log" ||
    die "warm-up failed: $(tail -n 2 "$TMP/warmup.log")"
run_bg timeout 120 "$TMP/spawn_floor" 10 /bin/true >/dev/null 2>&1 || die "spawn_floor failed"
FDS_BEFORE=$(find "/proc/$PID/fd" -mindepth 1 -maxdepth 1 2>/dev/null | wc -l)

: >"$TMP/floor-all.txt"
: >"$TMP/abx-all.txt"
R_FLOOR_P50=() R_FLOOR_P99=() R_ABX_P50=() R_ABX_P99=()
for r in $(seq 1 "$ROUNDS"); do
    log "round $r/$ROUNDS: $N x posix_spawn(/bin/true), then $N x POST /commands/run"
    run_bg timeout $((N / 5 + 60)) "$TMP/spawn_floor" "$N" /bin/true >"$TMP/floor-$r.txt" 2>"$TMP/floor.log" ||
        fail "spawn_floor failed in round $r: $(tail -n 1 "$TMP/floor.log")"
    run_bg timeout $((N / 5 + 60)) "$TMP/http_loop" "$PORT" "$N" POST /commands/run "$TOKEN" "$BODY" '"exit_code":0' \
        >"$TMP/abx-$r.txt" 2>"$TMP/http_loop.log" ||
        fail "commands.run calls failed in round $r: $(head -n 1 "$TMP/http_loop.log")"
    grep -q 'reconnects=0 ' "$TMP/http_loop.log" || log "note: the server closed the keep-alive connection: $(tail -n 1 "$TMP/http_loop.log")"
    cat "$TMP/floor-$r.txt" >>"$TMP/floor-all.txt"
    cat "$TMP/abx-$r.txt" >>"$TMP/abx-all.txt"
    R_FLOOR_P50+=("$(pct "$TMP/floor-$r.txt" 50)") R_FLOOR_P99+=("$(pct "$TMP/floor-$r.txt" 99)")
    R_ABX_P50+=("$(pct "$TMP/abx-$r.txt" 50)") R_ABX_P99+=("$(pct "$TMP/abx-$r.txt" 99)")
done

kill -0 "$PID" 2>/dev/null || fail "abx died during the calls"
# every process a call started must be gone
sleep 0.2
# (abx's watchdog, a child named abx-watchdog, stays for the server's life, and an idle
# slot's next process, abx-spare (src/sandbox/spare.c), for the slot's: not a call's)
LEFT=$(for k in $(pgrep -P "$PID" 2>/dev/null); do case "$(cat "/proc/$k/comm" 2>/dev/null)" in abx-watchdog | abx-spare) ;; *) echo "$k" ;; esac; done)
KIDS=$(grep -c . <<<"$LEFT" || true)
[ "${KIDS:-0}" = 0 ] || warn "abx still has $KIDS child process(es) after the calls: $(for k in $LEFT; do ps -o pid=,args= -p "$k"; done | head -n 3 | tr '\n' ';')"
RSS_KB=$(proc_field "$PID" VmRSS) HWM_KB=$(proc_field "$PID" VmHWM) THREADS=$(proc_field "$PID" Threads)
FDS=$(find "/proc/$PID/fd" -mindepth 1 -maxdepth 1 2>/dev/null | wc -l)
[ "$FDS" -le $((FDS_BEFORE + 4)) ] || warn "abx holds $FDS fds after the calls, $FDS_BEFORE before them (a leak?)"
bench_stop "$PID"
# the server's cgroup directories (abx-PID under the pids/memory hierarchies) must go
# with it
for _ in $(seq 1 40); do
    CG_LEFT=$(find /sys/fs/cgroup -maxdepth 6 -type d -name "abx-$PID" 2>/dev/null | head -n 3 | tr '\n' ' ')
    [ -z "$CG_LEFT" ] && break
    sleep 0.05
done
[ -z "$CG_LEFT" ] || warn "cgroup directories of the stopped abx (pid $PID) are left: $CG_LEFT"
e=$(log_errors "$TMP/abx.log")
[ -z "$e" ] || warn "abx logged errors: $e"

F50=$(pct "$TMP/floor-all.txt" 50) F99=$(pct "$TMP/floor-all.txt" 99)
A50=$(pct "$TMP/abx-all.txt" 50) A99=$(pct "$TMP/abx-all.txt" 99)
FN=$(wc -l <"$TMP/floor-all.txt") AN=$(wc -l <"$TMP/abx-all.txt")
# calls slower than 50 ms: stalls (a 100 ms poll, a lost wake-up) rather than work
SLOW_F=$(awk '$1 > 50000' "$TMP/floor-all.txt" | wc -l) SLOW_A=$(awk '$1 > 50000' "$TMP/abx-all.txt" | wc -l)
MAX_F=$(pct "$TMP/floor-all.txt" 100) MAX_A=$(pct "$TMP/abx-all.txt" 100)
LIMIT=$(awk -v f="$F50" 'BEGIN { printf "%.1f", 1.5 * f + 200 }')
OVER=$(awk -v a="$A50" -v f="$F50" 'BEGIN { printf "%.1f", a - f }')
ge "$LIMIT" "$A50" || MISSED+=("commands.run p50 $A50 us > 1.5 x floor p50 + 200 us = $LIMIT us")

echo
echo "abx commands.run vs spawn floor — $ROUNDS rounds x $N calls, interleaved, $(nproc) cores, $(date -u +%FT%TZ)"
printf '%-28s %7s %12s %12s\n' what calls p50 p99
for i in "${!R_FLOOR_P50[@]}"; do
    printf '%-28s %7s %10.0fus %10.0fus\n' "floor round $((i + 1))" "$N" "${R_FLOOR_P50[$i]}" "${R_FLOOR_P99[$i]}"
    printf '%-28s %7s %10.0fus %10.0fus\n' "abx round $((i + 1))" "$N" "${R_ABX_P50[$i]}" "${R_ABX_P99[$i]}"
done
printf '%-28s %7s %10.0fus %10.0fus\n' "floor posix_spawn+waitpid" "$FN" "$F50" "$F99"
printf '%-28s %7s %10.0fus %10.0fus\n' "abx POST /commands/run" "$AN" "$A50" "$A99"
echo
echo "abx p50 / floor p50: $(ratio "$A50" "$F50"); abx p50 - floor p50: $OVER us"
echo "calls over 50 ms: abx $SLOW_A of $AN (max $MAX_A us), floor $SLOW_F of $FN (max $MAX_F us)"
echo "target: abx p50 <= 1.5 x floor p50 + 200 us = $LIMIT us -> $(ge "$LIMIT" "$A50" && echo met || echo MISSED)"
echo "abx after the calls: RSS $(mib "${RSS_KB:-0}") MiB (peak $(mib "${HWM_KB:-0}") MiB), ${THREADS:-?} threads, ${FDS:-?} fds (${FDS_BEFORE:-?} before the calls)"
[ -n "$CONFINE" ] && echo "confinement (system.info): $CONFINE"

OUTBODY="$TMP/body.json"
{
    printf '  "calls_per_round": %s,\n  "rounds": %s,\n' "$N" "$ROUNDS"
    printf '  "floor_us": {"p50": %s, "p99": %s, "n": %s, "per_round_p50": %s, "per_round_p99": %s},\n' "$F50" "$F99" "$FN" \
        "$(json_nums "${R_FLOOR_P50[@]}")" "$(json_nums "${R_FLOOR_P99[@]}")"
    printf '  "abx_us": {"p50": %s, "p99": %s, "n": %s, "per_round_p50": %s, "per_round_p99": %s},\n' "$A50" "$A99" "$AN" \
        "$(json_nums "${R_ABX_P50[@]}")" "$(json_nums "${R_ABX_P99[@]}")"
    printf '  "ratio_p50": %s,\n  "overhead_p50_us": %s,\n' "$(ratio "$A50" "$F50")" "$OVER"
    printf '  "over_50ms": {"abx": %s, "floor": %s, "abx_max_us": %s, "floor_max_us": %s},\n' "$SLOW_A" "$SLOW_F" "$MAX_A" "$MAX_F"
    printf '  "target": {"abx_p50_max_us": %s, "rule": "1.5 * floor_p50 + 200", "met": %s},\n' "$LIMIT" \
        "$(ge "$LIMIT" "$A50" && echo true || echo false)"
    printf '  "server_after": {"rss_kib": %s, "peak_kib": %s, "threads": %s, "fds": %s, "fds_before": %s, "children": %s},\n' \
        "${RSS_KB:-0}" "${HWM_KB:-0}" "${THREADS:-0}" "${FDS:-0}" "${FDS_BEFORE:-0}" "${KIDS:-0}"
    printf '  "confinement": %s,\n' "$(json_str "$CONFINE")"
} >"$OUTBODY"
bench_finish "$OUTBODY"
