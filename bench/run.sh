#!/usr/bin/env bash
# bench/run.sh — core benchmarks of abx, side by side with nginx on the same machine.
#
#   bash bench/run.sh
#
# Measures, in one run: throughput and latency of GET /health, files.stat and
# files.read on a 1 KiB file (wrk), the same file served by nginx (the ceiling),
# start-to-serving time of `abx serve`, and idle / after-load RSS. Prints a table
# and target lines, and writes everything to bench/out/core-<timestamp>.json.
# See bench/README.md for what each number means and the environment variables.
#
# Exit status: 0 when every measurement ran cleanly (targets missed or not, unless
# BENCH_STRICT=1); 1 when the run is invalid (non-2xx responses, socket errors,
# a failed sanity check, a server that did not start).
set -euo pipefail

BENCH_NAME="bench"
# shellcheck source=bench/lib.sh
. "$(dirname "${BASH_SOURCE[0]}")/lib.sh" # ROOT, BUILD_DIR, ABX, log/die/fail, run_bg, need_pkg, JSON helpers
DURATION=${BENCH_DURATION:-10s}
STARTUP_RUNS=${BENCH_STARTUP_RUNS:-20}
WRK_THREADS=2
WRK_CONNS=64

if ! [[ $DURATION =~ ^[0-9]+[smh]?$ ]] || [ "$(dur_seconds "$DURATION")" -lt 1 ]; then
    echo "bench: BENCH_DURATION must read like 10s, 30, 1m (got '$DURATION')" >&2
    exit 2
fi
[[ $DURATION =~ [smh]$ ]] || DURATION="${DURATION}s"
DUR_S=$(dur_seconds "$DURATION")

# Bound the whole run: re-exec under timeout(1). --foreground keeps Ctrl-C working;
# the trap below stops what this script started when the TERM arrives.
if [ -z "${BENCH_UNDER_TIMEOUT:-}" ]; then
    LIMIT=${BENCH_TIMEOUT:-$((4 * (DUR_S + 35) + STARTUP_RUNS * 6 + 900))}
    export BENCH_UNDER_TIMEOUT=1
    exec timeout --foreground -k 20 "$LIMIT" bash "${BASH_SOURCE[0]}" "$@"
fi

# progress and errors go to the original stderr, even from a trap that fires while
# a function's output is redirected
exec {LOGFD}>&2

# ---------------------------------------------------------------- cleanup
# shellcheck disable=SC2317 # invoked by the trap
cleanup() {
    local rc=$?
    set +e
    trap - EXIT INT TERM
    local p
    for p in "${PIDS[@]}"; do
        kill -TERM "$p" 2>/dev/null
    done
    for p in "${PIDS[@]}"; do
        for _ in $(seq 1 60); do
            kill -0 "$p" 2>/dev/null || break
            sleep 0.05
        done
        kill -KILL "$p" 2>/dev/null
        wait "$p" 2>/dev/null
    done
    if [ -n "$TMP" ] && [ -d "$TMP" ]; then
        if [ "$rc" -ne 0 ]; then
            for f in "$TMP"/abx.log "$TMP"/abx-startup.log "$TMP"/nginx-startup.log "$TMP"/nginx/error.log "$TMP"/fastapi.log; do
                [ -s "$f" ] && { log "--- tail of $f"; tail -n 20 "$f" >&"$LOGFD"; }
            done
        fi
        if [ "$KEEP_TMP" = 1 ]; then
            log "kept $TMP"
        else
            rm -rf "$TMP"
        fi
    fi
    exit "$rc"
}
trap cleanup EXIT
trap 'log "interrupted"; exit 130' INT
trap 'log "stopped (SIGTERM or the BENCH_TIMEOUT limit)"; exit 143' TERM



need_pkg wrk wrk
need_pkg nginx nginx-light nginx
need_pkg cc gcc
need_pkg cmake cmake
PY=/usr/bin/python3
need_pkg "$PY" python3
"$PY" -c 'import fastapi, uvicorn, uvloop, httptools' 2>/dev/null || {
    log "installing the FastAPI reference: python3-fastapi python3-uvicorn python3-uvloop python3-httptools"
    run_bg apt-get install -y -qq --no-install-recommends python3-fastapi python3-uvicorn python3-uvloop python3-httptools >&2 ||
        die "cannot install the FastAPI reference (bash scripts/deps.sh bench)"
}

# ---------------------------------------------------------------- build
if [ ! -x "$ABX" ] || [ "${BENCH_REBUILD:-0}" = 1 ]; then
    log "building a Release abx in $BUILD_DIR"
    run_bg timeout 900 cmake -S "$ROOT" -B "$BUILD_DIR" -DCMAKE_BUILD_TYPE=Release >&2 || die "cmake configure failed"
    run_bg timeout 900 cmake --build "$BUILD_DIR" -j2 --target abx >&2 || die "build failed"
fi
[ -x "$ABX" ] || die "no abx binary at $ABX"
STALE=$(find "$ROOT/src" "$ROOT/include" "$ROOT/CMakeLists.txt" -newer "$ABX" -print -quit 2>/dev/null || true)
[ -z "$STALE" ] || log "warning: $ABX is older than ${STALE#"$ROOT"/} (BENCH_REBUILD=1 rebuilds it)"
ABX_VERSION=$("$ABX" version 2>/dev/null || echo unknown)
if [ "$ABX" = "$BUILD_DIR/abx" ] && [ -f "$BUILD_DIR/CMakeCache.txt" ]; then
    BUILD_TYPE=$(sed -n 's/^CMAKE_BUILD_TYPE:[A-Z]*=//p' "$BUILD_DIR/CMakeCache.txt")
    [ "$BUILD_TYPE" = Release ] || log "warning: $BUILD_DIR is a '$BUILD_TYPE' build, not Release"
else
    BUILD_TYPE=unknown
fi

TMP=$(mktemp -d /tmp/abx-bench.XXXXXX)
chmod 755 "$TMP" # nginx workers run as nobody and must reach the workspace
cc -O2 -Wall -o "$TMP/startup" "$BENCH_DIR/startup.c" || die "cannot compile bench/startup.c"
cc -O2 -Wall -o "$TMP/freeport" "$BENCH_DIR/freeport.c" || die "cannot compile bench/freeport.c"

# ---------------------------------------------------------------- workspace and configs
WS="$TMP/ws"
mkdir -p "$WS"
chmod 755 "$WS"
WS=$(realpath "$WS")
# 1024 bytes of printable ASCII (space to '~', repeating), no newline
LC_ALL=C awk 'BEGIN { for (i = 0; i < 1024; i++) printf "%c", 32 + (i % 95) }' >"$WS/f1k.txt"
chmod 644 "$WS/f1k.txt"
[ "$(stat -c %s "$WS/f1k.txt")" = 1024 ] || die "f1k.txt is not 1024 bytes"

mapfile -t PORTS < <("$TMP/freeport" 5)
[ "${#PORTS[@]}" = 5 ] || die "cannot find free ports"
ABX_PORT=${PORTS[0]} NGX_PORT=${PORTS[1]} START_PORT=${PORTS[2]} NGX_START_PORT=${PORTS[3]} FA_PORT=${PORTS[4]}

ABX_BENCH_TOKEN="bench-$(od -An -tx1 -N16 /dev/urandom | tr -d ' \n')"
export ABX_BENCH_TOKEN

# terminal_listen off: the default terminal listener would bind the fixed port 9001
write_cfg() { # port file
    cat >"$2" <<EOF
listen: 127.0.0.1:$1
workspace: $WS
terminal_listen: "off"
auth:
  tokens:
    - principal: bench
      roles: [agent]
      token_env: ABX_BENCH_TOKEN
policy:
  allow:
    - ops: ["files.*", "core.*"]
      principals: [bench]
      paths: ["$WS/**"]
EOF
}
CFG="$TMP/abx.yaml"
CFG2="$TMP/abx-startup.yaml"
write_cfg "$ABX_PORT" "$CFG"
write_cfg "$START_PORT" "$CFG2"

# write_ngx_conf DIR PORT: a minimal nginx serving WS on 127.0.0.1:PORT, its pid,
# logs and temp files in DIR; GET /health answers 200 (used by the start-up reference)
write_ngx_conf() {
    mkdir -p "$1/tmp"
    cat >"$1/nginx.conf" <<EOF
daemon off;
master_process on;
worker_processes 2;
pid $1/nginx.pid;
error_log $1/error.log warn;
events {
    worker_connections 1024;
}
http {
    access_log off;
    sendfile on;
    tcp_nopush on;
    keepalive_requests 100000;
    keepalive_timeout 65s;
    default_type text/plain;
    client_body_temp_path $1/tmp/body;
    proxy_temp_path $1/tmp/proxy;
    fastcgi_temp_path $1/tmp/fastcgi;
    uwsgi_temp_path $1/tmp/uwsgi;
    scgi_temp_path $1/tmp/scgi;
    server {
        listen 127.0.0.1:$2;
        root $WS;
        location = /health {
            return 200 "ok\n";
        }
    }
}
EOF
}
NGX="$TMP/nginx"
write_ngx_conf "$NGX" "$NGX_PORT"

wait_listening() { # pid port name
    local i
    for i in $(seq 1 200); do
        kill -0 "$1" 2>/dev/null || die "$3 exited before listening on port $2"
        port_listening "$2" && return 0
        sleep 0.05
    done
    die "$3 is not listening on port $2 after 10 s"
}
# status_field PID FIELD -> the value in kB (VmRSS, VmHWM) or count (Threads)

# http_get PORT PATH [TOKEN] -> full response (headers and body) on stdout
http_get() {
    local port=$1 path=$2 token=${3:-} fd
    exec {fd}<>"/dev/tcp/127.0.0.1/$port"
    {
        printf 'GET %s HTTP/1.1\r\nHost: 127.0.0.1:%s\r\nConnection: close\r\n' "$path" "$port"
        [ -n "$token" ] && printf 'Authorization: Bearer %s\r\n' "$token"
        printf '\r\n'
    } >&"$fd"
    timeout 5 cat <&"$fd" || true
    exec {fd}>&-
}
status_of() { head -n 1 | awk '{ print $2 }'; }

FAILURES=()

# ---------------------------------------------------------------- start the servers
log "$ABX_VERSION ($ABX, build type $BUILD_TYPE)"
"$ABX" serve --config "$CFG" --log-level warn >"$TMP/abx.log" 2>&1 &
ABX_PID=$!
PIDS+=("$ABX_PID")
wait_listening "$ABX_PID" "$ABX_PORT" "abx serve"

nginx -p "$NGX" -c "$NGX/nginx.conf" -e "$NGX/error.log" >"$NGX/stdout.log" 2>&1 &
NGX_PID=$!
PIDS+=("$NGX_PID")
wait_listening "$NGX_PID" "$NGX_PORT" "nginx"

"$PY" "$BENCH_DIR/fastapi_ref.py" "$FA_PORT" "$WS" >"$TMP/fastapi.log" 2>&1 &
FA_PID=$!
PIDS+=("$FA_PID")
wait_listening "$FA_PID" "$FA_PORT" "the FastAPI reference"

# idle RSS: fresh server, no request served yet, idle for 1 s
sleep 1
IDLE_RSS_KB=$(proc_field "$ABX_PID" VmRSS)
IDLE_THREADS=$(proc_field "$ABX_PID" Threads)

# ---------------------------------------------------------------- sanity checks (one request each)
EXPECT=$(cat "$WS/f1k.txt")
r=$(http_get "$ABX_PORT" /health)
[ "$(status_of <<<"$r")" = 200 ] || fail "abx GET /health answered '$(head -n 1 <<<"$r")'"
r=$(http_get "$ABX_PORT" "/files/stat?path=f1k.txt")
[ "$(status_of <<<"$r")" = 401 ] || fail "abx files.stat without a token answered '$(head -n 1 <<<"$r")' (expected 401)"
r=$(http_get "$ABX_PORT" "/files/stat?path=f1k.txt" "$ABX_BENCH_TOKEN")
[ "$(status_of <<<"$r")" = 200 ] || fail "abx files.stat answered '$(head -n 1 <<<"$r")'"
grep -q '"size": *1024' <<<"$r" || fail "abx files.stat did not report size 1024: $(tail -n 1 <<<"$r")"
r=$(http_get "$ABX_PORT" "/files/read?path=f1k.txt" "$ABX_BENCH_TOKEN")
[ "$(status_of <<<"$r")" = 200 ] || fail "abx files.read answered '$(head -n 1 <<<"$r")'"
grep -q '"content"' <<<"$r" && grep -qF 'abcdefghijklmnopqrstuvwxyz' <<<"$r" ||
    fail "abx files.read did not return the file content"
r=$(http_get "$NGX_PORT" /f1k.txt)
[ "$(status_of <<<"$r")" = 200 ] || fail "nginx GET /f1k.txt answered '$(head -n 1 <<<"$r")'"
[ "${r#*$'\r\n\r\n'}" = "$EXPECT" ] || fail "nginx did not return the file content"
r=$(http_get "$FA_PORT" "/files/read?path=f1k.txt")
[ "$(status_of <<<"$r")" = 401 ] || fail "FastAPI files.read without a token answered '$(head -n 1 <<<"$r")' (expected 401)"
r=$(http_get "$FA_PORT" "/files/read?path=f1k.txt" "$ABX_BENCH_TOKEN")
[ "$(status_of <<<"$r")" = 200 ] || fail "FastAPI files.read answered '$(head -n 1 <<<"$r")'"
grep -qF 'abcdefghijklmnopqrstuvwxyz' <<<"$r" || fail "FastAPI files.read did not return the file content"
[ ${#FAILURES[@]} -eq 0 ] || die "sanity checks failed; not benchmarking"


# cpu_ticks PID -> user + system clock ticks of PID (all its threads) and of its
# direct children (nginx's workers), from /proc/PID/stat fields 14 and 15
cpu_ticks() {
    local p sum=0 t
    for p in "$1" $(cat "/proc/$1/task/$1/children" 2>/dev/null); do
        # the comm field may hold spaces: cut at the last ')'
        t=$(sed 's/.*) //' "/proc/$p/stat" 2>/dev/null | awk '{ print $12 + $13 }')
        sum=$((sum + ${t:-0}))
    done
    echo "$sum"
}
HZ=$(getconf CLK_TCK)

NAMES=() URLS=() RPS=() P50=() P99=() REQS=() NON2XX=() SOCKERR=() CPU_US=()
bench_one() { # name server-pid url [token]
    local name=$1 spid=$2 url=$3 token=${4:-} out="$TMP/wrk-${#NAMES[@]}.txt"
    local args=(-t"$WRK_THREADS" -c"$WRK_CONNS" -d"$DURATION" --timeout 5s --latency)
    [ -n "$token" ] && args+=(-H "Authorization: Bearer $token")
    log "wrk $name: $url ($DURATION)"
    local t0 t1
    t0=$(cpu_ticks "$spid")
    run_bg timeout $((DUR_S + 30)) wrk "${args[@]}" "$url" >"$out" 2>&1 || {
        cat "$out" >&2
        fail "wrk failed on $name"
    }
    t1=$(cpu_ticks "$spid")
    local rps p50 p99 reqs non2xx sock
    rps=$(awk '/^Requests\/sec:/ { print $2 }' "$out")
    p50=$(awk '$1 == "50%" { print $2 }' "$out")
    p99=$(awk '$1 == "99%" { print $2 }' "$out")
    reqs=$(awk '/requests in/ { print $1 }' "$out")
    non2xx=$(awk '/Non-2xx or 3xx responses:/ { print $NF }' "$out")
    sock=$(awk '/Socket errors:/ { sub(/^ *Socket errors: */, ""); print }' "$out")
    [ -n "$rps" ] && [ -n "$p50" ] && [ -n "$p99" ] || {
        cat "$out" >&2
        fail "cannot parse the wrk output of $name"
        rps=${rps:-0} p50=${p50:-0us} p99=${p99:-0us}
    }
    [ -z "$non2xx" ] || fail "$name: $non2xx non-2xx/3xx responses (of ${reqs:-?})"
    [ -z "$sock" ] || fail "$name: wrk socket errors: $sock"
    # server CPU per request: the server's ticks during the run over wrk's request count
    CPU_US+=("$(awk -v d=$((t1 - t0)) -v hz="$HZ" -v n="${reqs:-0}" 'BEGIN { printf "%.1f", (n > 0 ? d * 1e6 / hz / n : 0) }')")
    NAMES+=("$name") URLS+=("$url") RPS+=("$rps") P50+=("$(to_ms "$p50")") P99+=("$(to_ms "$p99")")
    REQS+=("${reqs:-0}") NON2XX+=("${non2xx:-0}") SOCKERR+=("${sock:-none}")
}

A="http://127.0.0.1:$ABX_PORT"
bench_one "abx GET /health" "$ABX_PID" "$A/health"
bench_one "abx files.stat" "$ABX_PID" "$A/files/stat?path=f1k.txt" "$ABX_BENCH_TOKEN"
bench_one "abx files.read" "$ABX_PID" "$A/files/read?path=f1k.txt" "$ABX_BENCH_TOKEN"
bench_one "nginx GET /f1k.txt" "$NGX_PID" "http://127.0.0.1:$NGX_PORT/f1k.txt"
bench_one "fastapi files.read" "$FA_PID" "http://127.0.0.1:$FA_PORT/files/read?path=f1k.txt" "$ABX_BENCH_TOKEN"

kill -0 "$ABX_PID" 2>/dev/null || die "abx died during the load"
AFTER_RSS_KB=$(proc_field "$ABX_PID" VmRSS)
PEAK_RSS_KB=$(proc_field "$ABX_PID" VmHWM)
AFTER_THREADS=$(proc_field "$ABX_PID" Threads)

# stop the load servers before timing start-up (less noise)
kill -TERM "$ABX_PID" "$NGX_PID" "$FA_PID" 2>/dev/null || true
wait "$ABX_PID" 2>/dev/null || true
wait "$NGX_PID" 2>/dev/null || true
wait "$FA_PID" 2>/dev/null || true
PIDS=()
grep -i 'error\|fatal\|crit' "$TMP/abx.log" >/dev/null && log "abx logged errors: $(grep -ci 'error\|fatal\|crit' "$TMP/abx.log") line(s), e.g. $(grep -i -m1 'error\|fatal\|crit' "$TMP/abx.log")"
grep -i '\[\(error\|crit\|alert\|emerg\)\]' "$NGX/error.log" >/dev/null 2>&1 && log "nginx logged errors: $(grep -m1 '\[error\]' "$NGX/error.log")"

# ---------------------------------------------------------------- start-to-serving
# abx and, as a reference for what fork+exec+listen costs on this machine, nginx
# (master + 2 workers, answering GET /health with 200), interleaved run by run so
# both see the same noise.
NGX2="$TMP/nginx-startup"
write_ngx_conf "$NGX2" "$NGX_START_PORT"

# startup_once NAME PORT CMD... -> appends the elapsed ms to $TMP/startup-NAME.txt
startup_once() {
    local name=$1 port=$2
    shift 2
    port_listening "$port" && die "port $port is still in use before a start-up run of $name"
    if run_bg "$TMP/startup" "$port" 5000 -- "$@" >"$TMP/ms.txt" 2>>"$TMP/$name-startup.log"; then
        cat "$TMP/ms.txt" >>"$TMP/startup-$name.txt"
    else
        fail "start-up run of $name: $(tail -n 1 "$TMP/$name-startup.log")"
    fi
}
log "start-to-serving: $STARTUP_RUNS runs each of abx and nginx"
: >"$TMP/startup-abx.txt"
: >"$TMP/startup-nginx.txt"
for i in $(seq 1 "$STARTUP_RUNS"); do
    startup_once abx "$START_PORT" "$ABX" serve --config "$CFG2" --log-level warn --quiet
    startup_once nginx "$NGX_START_PORT" nginx -p "$NGX2" -c "$NGX2/nginx.conf" -e "$NGX2/error.log"
done
# stats FILE -> "median max min count"
stats() {
    sort -n "$1" | awk '{ v[NR] = $1 } END {
        if (NR == 0) { print "0 0 0 0"; exit }
        m = NR % 2 ? v[(NR + 1) / 2] : (v[NR / 2] + v[NR / 2 + 1]) / 2
        printf "%.2f %.2f %.2f %d\n", m, v[NR], v[1], NR }'
}
read -r ST_MEDIAN ST_MAX ST_MIN ST_N < <(stats "$TMP/startup-abx.txt")
read -r NS_MEDIAN NS_MAX NS_MIN NS_N < <(stats "$TMP/startup-nginx.txt")
mapfile -t SAMPLES <"$TMP/startup-abx.txt"
mapfile -t NGX_SAMPLES <"$TMP/startup-nginx.txt"

# ---------------------------------------------------------------- report
NGX_RPS=${RPS[3]}
FA_RPS=${RPS[4]}
READ_RATIO=$(ratio "${RPS[2]}" "$NGX_RPS")
FA_RATIO=$(ratio "${RPS[2]}" "$FA_RPS")
HEALTH_RATIO=$(ratio "${RPS[0]}" "$NGX_RPS")
P99_RATIO=$(ratio "${P99[2]}" "${P99[3]}")
IDLE_MIB=$(mib "$IDLE_RSS_KB")
AFTER_MIB=$(mib "$AFTER_RSS_KB")
PEAK_MIB=$(mib "$PEAK_RSS_KB")

echo
echo "abx core benchmarks — wrk -t$WRK_THREADS -c$WRK_CONNS -d$DURATION, $(nproc) cores, $(date -u +%FT%TZ)"
printf '%-20s %12s %10s %10s %9s %11s %10s\n' name req/s p50 p99 vs-nginx vs-fastapi cpu/req
for i in "${!NAMES[@]}"; do
    printf '%-20s %12.0f %8.2fms %8.2fms %9s %11s %8sus\n' "${NAMES[$i]}" "${RPS[$i]}" "${P50[$i]}" "${P99[$i]}" \
        "$(ratio "${RPS[$i]}" "$NGX_RPS")" "$(ratio "${RPS[$i]}" "$FA_RPS")" "${CPU_US[$i]}"
done
echo
echo "files.read / nginx ratio: $READ_RATIO (target >= 0.60)"
echo "files.read / fastapi ratio: $FA_RATIO (target >= 3.0)"
echo "files.read server CPU per request: ${CPU_US[2]} us (target <= 45 us; nginx ${CPU_US[3]} us, fastapi ${CPU_US[4]} us)"
echo "files.read p99 / nginx p99: $P99_RATIO (target <= 3.0)"
echo "GET /health / nginx ratio: $HEALTH_RATIO (target >= 1.0)"
echo "start-to-serving median: $ST_MEDIAN ms (target <= 20 ms); max $ST_MAX ms, min $ST_MIN ms over $ST_N runs"
echo "  nginx start-to-serving (reference): median $NS_MEDIAN ms, max $NS_MAX ms; abx / nginx: $(ratio "$ST_MEDIAN" "$NS_MEDIAN")"
echo "idle RSS: $IDLE_MIB MiB (target <= 10 MiB); $IDLE_THREADS threads"
echo "after-load RSS: $AFTER_MIB MiB (peak $PEAK_MIB MiB); $AFTER_THREADS threads"

MISSED=()
ge "$READ_RATIO" 0.60 || MISSED+=("files.read/nginx ratio $READ_RATIO < 0.60")
ge "$FA_RATIO" 3.0 || MISSED+=("files.read/fastapi ratio $FA_RATIO < 3.0")
ge 45 "${CPU_US[2]}" || MISSED+=("files.read server CPU ${CPU_US[2]} us > 45 us")
ge 3.0 "$P99_RATIO" || MISSED+=("files.read p99 / nginx p99 $P99_RATIO > 3.0")
ge "$HEALTH_RATIO" 1.0 || MISSED+=("GET /health / nginx ratio $HEALTH_RATIO < 1.0")
awk -v m="$ST_MEDIAN" 'BEGIN { exit !(m <= 20) }' || MISSED+=("start-to-serving median $ST_MEDIAN ms > 20 ms")
awk -v k="$IDLE_RSS_KB" 'BEGIN { exit !(k <= 10 * 1024) }' || MISSED+=("idle RSS $IDLE_MIB MiB > 10 MiB")

STAMP=$(date -u +%Y%m%dT%H%M%SZ)
mkdir -p "$BENCH_DIR/out"
OUT="$BENCH_DIR/out/core-$STAMP.json"
COMMIT=$(git -C "$ROOT" rev-parse HEAD 2>/dev/null || echo unknown)
DIRTY=$(GIT_OPTIONAL_LOCKS=0 git -C "$ROOT" status --porcelain --untracked-files=no 2>/dev/null | grep -q . && echo true || echo false)
CPU=$(awk -F': ' '/^model name/ { print $2; exit }' /proc/cpuinfo 2>/dev/null || echo unknown)
{
    printf '{\n'
    printf '  "benchmark": "core",\n'
    printf '  "timestamp": "%s",\n' "$STAMP"
    printf '  "git_commit": "%s",\n  "git_dirty": %s,\n' "$COMMIT" "$DIRTY"
    printf '  "abx_binary": %s,\n  "abx_version": %s,\n  "build_type": %s,\n' "$(json_str "$ABX")" \
        "$(json_str "$ABX_VERSION")" "$(json_str "$BUILD_TYPE")"
    printf '  "machine": {"cores": %s, "cpu": %s, "kernel": %s},\n' "$(nproc)" "$(json_str "$CPU")" "$(json_str "$(uname -r)")"
    printf '  "wrk": {"threads": %s, "connections": %s, "duration": "%s", "version": %s},\n' \
        "$WRK_THREADS" "$WRK_CONNS" "$DURATION" "$(json_str "$( (wrk -v 2>&1 || true) | head -n 1 | cut -c1-80)")"
    printf '  "nginx_version": %s,\n' "$(json_str "$(nginx -v 2>&1 | sed 's/.*: //')")"
    printf '  "http": [\n'
    for i in "${!NAMES[@]}"; do
        [ "$i" = 0 ] || printf ',\n'
        printf '    {"name": %s, "url": %s, "requests_per_sec": %s, "p50_ms": %s, "p99_ms": %s, "ratio_to_nginx": %s, "ratio_to_fastapi": %s, "server_cpu_us_per_request": %s, "requests": %s, "non_2xx_3xx": %s, "socket_errors": %s}' \
            "$(json_str "${NAMES[$i]}")" "$(json_str "${URLS[$i]}")" "${RPS[$i]}" "${P50[$i]}" "${P99[$i]}" \
            "$(ratio "${RPS[$i]}" "$NGX_RPS")" "$(ratio "${RPS[$i]}" "$FA_RPS")" "${CPU_US[$i]}" "${REQS[$i]}" "${NON2XX[$i]}" "$(json_str "${SOCKERR[$i]}")"
    done
    printf '\n  ],\n'
    printf '  "files_read_nginx_ratio": {"value": %s, "target_min": 0.60},\n' "$READ_RATIO"
    printf '  "files_read_fastapi_ratio": {"value": %s, "target_min": 3.0},\n' "$FA_RATIO"
    printf '  "files_read_cpu_us": {"value": %s, "target_max": 45},\n' "${CPU_US[2]}"
    printf '  "files_read_p99_nginx_ratio": {"value": %s, "target_max": 3.0},\n' "$P99_RATIO"
    printf '  "health_nginx_ratio": {"value": %s, "target_min": 1.0},\n' "$HEALTH_RATIO"
    printf '  "start_to_serving_ms": {"median": %s, "max": %s, "min": %s, "runs": %s, "target_median_max": 20, "samples": [%s],\n' \
        "$ST_MEDIAN" "$ST_MAX" "$ST_MIN" "$ST_N" "$(
            IFS=,
            echo "${SAMPLES[*]}"
        )"
    printf '    "nginx_reference": {"median": %s, "max": %s, "min": %s, "runs": %s, "samples": [%s]}, "ratio_to_nginx": %s},\n' \
        "$NS_MEDIAN" "$NS_MAX" "$NS_MIN" "$NS_N" "$(
            IFS=,
            echo "${NGX_SAMPLES[*]}"
        )" "$(ratio "$ST_MEDIAN" "$NS_MEDIAN")"
    printf '  "rss": {"idle_kib": %s, "idle_mib": %s, "idle_threads": %s, "after_load_kib": %s, "after_load_mib": %s, "after_load_threads": %s, "peak_kib": %s, "target_idle_mib_max": 10},\n' \
        "$IDLE_RSS_KB" "$IDLE_MIB" "$IDLE_THREADS" "$AFTER_RSS_KB" "$AFTER_MIB" "$AFTER_THREADS" "$PEAK_RSS_KB"
    printf '  "targets_missed": %s,\n' "$(json_list "${MISSED[@]}")"
    printf '  "failures": %s,\n' "$(json_list "${FAILURES[@]}")"
    printf '  "ok": %s\n' "$([ ${#FAILURES[@]} -eq 0 ] && echo true || echo false)"
    printf '}\n'
} >"$OUT"
echo "results: ${OUT#"$ROOT"/}"

if [ ${#MISSED[@]} -gt 0 ]; then
    echo "targets missed: ${#MISSED[@]}"
    printf '  - %s\n' "${MISSED[@]}"
fi
if [ ${#FAILURES[@]} -gt 0 ]; then
    echo "RUN INVALID: ${#FAILURES[@]} failure(s)"
    printf '  - %s\n' "${FAILURES[@]}"
    exit 1
fi
[ "$STRICT" = 1 ] && [ ${#MISSED[@]} -gt 0 ] && exit 1
exit 0
