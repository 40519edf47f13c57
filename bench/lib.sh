# bench/lib.sh — helpers shared by bench/policy.sh, bench/exec.sh and bench/transfer.sh.
# Sourced, never run. The sourcing script sets BENCH_NAME (used in messages, the
# results file name and the timeout guard) before sourcing, and calls, in this order:
#   bench_under_timeout SECONDS "$@"   re-exec under timeout(1) (once)
#   bench_init                         log fd, cleanup trap, tools, TMP, freeport
#   bench_build [--static]             a Release abx (and libabx.a) in BUILD_DIR
#   bench_cc_libabx OUT SRC            compile a C helper against BUILD_DIR/libabx.a
# Every process started with bench_start / run_bg is stopped by the EXIT trap, and the
# temporary directory is removed (unless BENCH_KEEP_TMP=1).
# shellcheck shell=bash

ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
BENCH_DIR="$ROOT/bench"
BUILD_DIR=${BENCH_BUILD_DIR:-$ROOT/build-bench}
ABX=${BENCH_ABX:-$BUILD_DIR/abx}
STRICT=${BENCH_STRICT:-0}
KEEP_TMP=${BENCH_KEEP_TMP:-0}
export PATH="$PATH:/usr/sbin:/sbin"

# bench_under_timeout SECONDS ARGS... — bound the whole run: re-exec the calling script
# under timeout(1). --foreground keeps Ctrl-C working; the TERM trap stops what the
# script started. BENCH_TIMEOUT overrides SECONDS.
bench_under_timeout() {
    local limit=${BENCH_TIMEOUT:-$1} guard="BENCH_UNDER_TIMEOUT_${BENCH_NAME}"
    shift
    if [ -z "${!guard:-}" ]; then
        export "$guard=1"
        exec timeout --foreground -k 20 "$limit" bash "${BASH_SOURCE[1]}" "$@"
    fi
}

# progress and errors go to the original stderr, even from a trap that fires while a
# function's output is redirected
log() { printf '%s: %s\n' "$BENCH_NAME" "$*" >&"$LOGFD"; }
die() {
    log "error: $*"
    exit 1
}

TMP=""
PIDS=()
FAILURES=()
MISSED=()
WARNINGS=()
fail() {
    log "FAIL: $*"
    FAILURES+=("$*")
}
# something in the server that looks wrong but does not make the numbers meaningless
warn() {
    log "WARNING: $*"
    WARNINGS+=("$*")
}

# shellcheck disable=SC2317 # invoked by the trap
bench_cleanup() {
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
            for p in "$TMP"/*.log; do
                [ -s "$p" ] && { log "--- tail of $p"; tail -n 20 "$p" >&"$LOGFD"; }
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

forget_pid() {
    local keep=() p
    for p in "${PIDS[@]}"; do
        [ "$p" = "$1" ] || keep+=("$p")
    done
    PIDS=("${keep[@]}")
}

# Run a command in the background and wait for it, so a signal to this script is
# handled at once (bash defers traps while a foreground child runs).
run_bg() {
    "$@" &
    local pid=$!
    PIDS+=("$pid")
    local rc=0
    wait "$pid" || rc=$?
    forget_pid "$pid"
    return "$rc"
}

need_pkg() { # command package...
    local cmd=$1
    shift
    command -v "$cmd" >/dev/null 2>&1 && return 0
    log "$cmd is missing: installing ${*} with apt-get"
    if [ -z "${APT_UPDATED:-}" ]; then
        DEBIAN_FRONTEND=noninteractive apt-get update -qq >&2 || true
        APT_UPDATED=1
    fi
    local p
    for p in "$@"; do
        DEBIAN_FRONTEND=noninteractive apt-get install -y -qq "$p" >&2 && break
    done
    command -v "$cmd" >/dev/null 2>&1 || die "cannot install $cmd"
}

bench_init() {
    exec {LOGFD}>&2
    trap bench_cleanup EXIT
    trap 'log "interrupted"; exit 130' INT
    trap 'log "stopped (SIGTERM or the BENCH_TIMEOUT limit)"; exit 143' TERM
    need_pkg cc gcc
    need_pkg cmake cmake
    need_pkg curl curl
    TMP=$(mktemp -d "/tmp/abx-bench-$BENCH_NAME.XXXXXX")
    chmod 755 "$TMP"
    cc -O2 -Wall -o "$TMP/freeport" "$BENCH_DIR/freeport.c" || die "cannot compile bench/freeport.c"
}

# bench_build --abx-only | --static: configure and build a Release abx in BUILD_DIR
# when it is missing or BENCH_REBUILD=1; --static also needs BUILD_DIR/libabx.a.
bench_build() {
    local targets=(abx) need=0
    [ "${1:-}" = --static ] && targets+=(abx_static)
    [ -x "$ABX" ] || need=1
    [ "${1:-}" = --static ] && [ ! -f "$BUILD_DIR/libabx.a" ] && need=1
    if [ "$need" = 1 ] || [ "${BENCH_REBUILD:-0}" = 1 ]; then
        log "building a Release ${targets[*]} in $BUILD_DIR"
        run_bg timeout 900 cmake -S "$ROOT" -B "$BUILD_DIR" -DCMAKE_BUILD_TYPE=Release >&2 || die "cmake configure failed"
        run_bg timeout 900 cmake --build "$BUILD_DIR" -j2 --target "${targets[@]}" >&2 || die "build failed"
    fi
    [ -x "$ABX" ] || die "no abx binary at $ABX"
    local stale
    stale=$(find "$ROOT/src" "$ROOT/include" "$ROOT/CMakeLists.txt" -newer "$ABX" -print -quit 2>/dev/null || true)
    [ -z "$stale" ] || log "warning: $ABX is older than ${stale#"$ROOT"/} (BENCH_REBUILD=1 rebuilds it)"
    ABX_VERSION=$("$ABX" version 2>/dev/null || echo unknown)
    BUILD_TYPE=unknown
    if [ "$ABX" = "$BUILD_DIR/abx" ] && [ -f "$BUILD_DIR/CMakeCache.txt" ]; then
        BUILD_TYPE=$(sed -n 's/^CMAKE_BUILD_TYPE:[A-Z]*=//p' "$BUILD_DIR/CMakeCache.txt")
        [ "$BUILD_TYPE" = Release ] || log "warning: $BUILD_DIR is a '$BUILD_TYPE' build, not Release"
    fi
    log "$ABX_VERSION ($ABX, build type $BUILD_TYPE)"
}

# bench_cc_libabx OUT SRC: compile the C program SRC against the static libabx of
# BUILD_DIR (bench_build --static first). The libraries come from abx's own link line
# (everything after libabx.a), so a dependency added to CMakeLists.txt needs no change
# here; without that file, the documented set.
bench_cc_libabx() {
    local out=$1 src=$2 lib="$BUILD_DIR/libabx.a" libs=() words=() take=0 w
    [ -f "$lib" ] || die "no $lib"
    local link_txt="$BUILD_DIR/CMakeFiles/abx.dir/link.txt"
    if [ -f "$link_txt" ]; then
        read -ra words <"$link_txt"
        for w in "${words[@]}"; do
            [ "$take" = 1 ] && libs+=("$w")
            [[ $w == */libabx.a || $w == libabx.a ]] && take=1
        done
    fi
    if [ ${#libs[@]} -eq 0 ]; then
        read -ra libs < <(pkg-config --libs libmicrohttpd jansson yaml-0.1 sqlite3 zlib openssl)
        libs+=(-lwslay -ldl)
    fi
    libs+=(-lssl -lcrypto -lpthread) # abx opens OpenSSL itself (dlopen); a helper may call it directly
    local jansson_cflags=()
    read -ra jansson_cflags < <(pkg-config --cflags jansson)
    local name
    name=$(basename "$src" .c)
    cc -O2 -Wall -Wno-format-truncation -D_GNU_SOURCE -I"$ROOT/include" -I"$ROOT/src" "${jansson_cflags[@]}" \
        -o "$out" "$src" "$lib" "${libs[@]}" 2>"$TMP/cc-$name.log" ||
        die "cannot build ${src#"$ROOT"/} against $lib: $(grep -m 3 -i 'error\|undefined' "$TMP/cc-$name.log")"
}

# has_op ID: whether the abx binary's catalog lists the op (the catalog is read once;
# no `abx catalog | grep -q`: with pipefail, grep's early exit would fail the pipe)
has_op() {
    [ -s "$TMP/catalog.json" ] || "$ABX" catalog >"$TMP/catalog.json" 2>/dev/null || true
    grep -q "\"id\": *\"${1//./\\.}\"" "$TMP/catalog.json"
}

# free_ports N -> N distinct free loopback ports, one a line
free_ports() { "$TMP/freeport" "$1"; }

port_listening() { # port
    local hex
    hex=$(printf '%04X' "$1")
    awk -v p=":$hex\$" '$2 ~ p && $4 == "0A" { f = 1 } END { exit !f }' /proc/net/tcp /proc/net/tcp6 2>/dev/null
}

# bench_start_abx NAME CONFIG PORT: start `abx serve` (log in $TMP/NAME.log), wait until
# it listens; sets STARTED_PID.
bench_start_abx() {
    local name=$1 cfg=$2 port=$3
    "$ABX" serve --config "$cfg" --log-level warn >"$TMP/$name.log" 2>&1 &
    STARTED_PID=$!
    PIDS+=("$STARTED_PID")
    for _ in $(seq 1 200); do
        kill -0 "$STARTED_PID" 2>/dev/null || die "abx ($name) exited before listening on port $port"
        port_listening "$port" && return 0
        sleep 0.05
    done
    die "abx ($name) is not listening on port $port after 10 s"
}

# bench_stop PID: TERM, wait up to 3 s, KILL
bench_stop() {
    local p=$1
    kill -TERM "$p" 2>/dev/null || true
    for _ in $(seq 1 60); do
        kill -0 "$p" 2>/dev/null || break
        sleep 0.05
    done
    kill -KILL "$p" 2>/dev/null || true
    wait "$p" 2>/dev/null || true
    forget_pid "$p"
}

# proc_field PID FIELD -> the value in kB (VmRSS, VmHWM) or count (Threads)
proc_field() { awk -v k="$2:" '$1 == k { print $2 }' "/proc/$1/status" 2>/dev/null; }

# http PORT METHOD PATH [TOKEN] [JSON BODY] -> prints "STATUS BODY" (body on one line
# as the server sent it)
http() {
    local port=$1 method=$2 path=$3 token=${4:-} body=${5:-} args=(-sS --max-time 10 -o "$TMP/http-body" -w '%{http_code}')
    [ -n "$token" ] && args+=(-H "Authorization: Bearer $token")
    [ -n "$body" ] && args+=(-H 'Content-Type: application/json' --data-binary "$body")
    local code
    code=$(curl "${args[@]}" -X "$method" "http://127.0.0.1:$port$path" 2>>"$TMP/curl.log") || code=000
    printf '%s %s\n' "$code" "$(tr -d '\n' <"$TMP/http-body" 2>/dev/null | cut -c1-400)"
}

# the server's log lines that look like errors, as one line (empty when none)
log_errors() { # file
    [ -f "$1" ] || return 0
    local n
    n=$(grep -ci 'error\|fatal\|crit\|assert\|sanitizer' "$1" || true)
    [ "${n:-0}" -gt 0 ] && printf '%s line(s), e.g. %s' "$n" "$(grep -i -m1 'error\|fatal\|crit\|assert\|sanitizer' "$1" | cut -c1-200)"
    return 0
}

# ---------------------------------------------------------------- numbers
# pct FILE P -> the P-th percentile (nearest rank) of the numbers in FILE
pct() {
    sort -n "$1" | awk -v p="$2" '{ v[NR] = $1 } END {
        if (NR == 0) { print 0; exit }
        r = int(p / 100 * NR + 0.999999); if (r < 1) r = 1; if (r > NR) r = NR
        print v[r] }'
}
# median of the arguments
median() { printf '%s\n' "$@" | sort -g | awk '{ v[NR] = $1 } END {
    if (NR == 0) { print 0; exit }
    if (NR % 2) print v[(NR + 1) / 2]; else printf "%.6g\n", (v[NR / 2] + v[NR / 2 + 1]) / 2 }'; }
ratio() { awk -v a="$1" -v b="$2" 'BEGIN { if (b > 0) printf "%.2f", a / b; else printf "0.00" }'; }
ratio3() { awk -v a="$1" -v b="$2" 'BEGIN { if (b > 0) printf "%.3f", a / b; else printf "0.000" }'; }
# ge A B: A >= B
ge() { awk -v a="$1" -v b="$2" 'BEGIN { exit !(a >= b) }'; }
mib() { awk -v k="$1" 'BEGIN { printf "%.1f", k / 1024 }'; }

# ---------------------------------------------------------------- JSON
json_str() { # escape for a JSON string (no control characters expected)
    local s=${1//\\/\\\\}
    s=${s//\"/\\\"}
    s=${s//$'\t'/ }
    s=${s//$'\n'/ }
    printf '"%s"' "$s"
}
json_list() { # strings... -> ["a","b"]
    local first=1 s
    printf '['
    for s in "$@"; do
        [ $first = 1 ] || printf ', '
        first=0
        json_str "$s"
    done
    printf ']'
}
json_nums() { # numbers... -> [1,2]
    local IFS=,
    printf '[%s]' "$*"
}

# bench_json_header: the common first fields (no opening brace)
bench_json_header() {
    local commit dirty cpu
    commit=$(git -C "$ROOT" rev-parse HEAD 2>/dev/null || echo unknown)
    dirty=$(GIT_OPTIONAL_LOCKS=0 git -C "$ROOT" status --porcelain --untracked-files=no 2>/dev/null | grep -q . && echo true || echo false)
    cpu=$(awk -F': ' '/^model name/ { print $2; exit }' /proc/cpuinfo 2>/dev/null || echo unknown)
    printf '  "benchmark": %s,\n  "timestamp": "%s",\n' "$(json_str "$BENCH_NAME")" "$STAMP"
    printf '  "git_commit": "%s",\n  "git_dirty": %s,\n' "$commit" "$dirty"
    printf '  "abx_binary": %s,\n  "abx_version": %s,\n  "build_type": %s,\n' "$(json_str "$ABX")" \
        "$(json_str "$ABX_VERSION")" "$(json_str "$BUILD_TYPE")"
    printf '  "machine": {"cores": %s, "cpu": %s, "kernel": %s},\n' "$(nproc)" "$(json_str "$cpu")" "$(json_str "$(uname -r)")"
}

# bench_finish JSON_BODY_FILE: wrap the script's fields (a file holding '"key": value,'
# lines) with the header and the verdict, write bench/out/NAME-STAMP.json, print the
# missed targets and failures, and exit with the right status.
bench_finish() {
    mkdir -p "$BENCH_DIR/out"
    local out="$BENCH_DIR/out/$BENCH_NAME-$STAMP.json"
    {
        printf '{\n'
        bench_json_header
        cat "$1"
        printf '  "targets_missed": %s,\n' "$(json_list "${MISSED[@]}")"
        printf '  "warnings": %s,\n' "$(json_list "${WARNINGS[@]}")"
        printf '  "failures": %s,\n' "$(json_list "${FAILURES[@]}")"
        printf '  "ok": %s\n' "$([ ${#FAILURES[@]} -eq 0 ] && echo true || echo false)"
        printf '}\n'
    } >"$out"
    echo "results: ${out#"$ROOT"/}"
    if [ ${#MISSED[@]} -gt 0 ]; then
        echo "targets missed: ${#MISSED[@]}"
        printf '  - %s\n' "${MISSED[@]}"
    fi
    if [ ${#WARNINGS[@]} -gt 0 ]; then
        echo "warnings: ${#WARNINGS[@]}"
        printf '  - %s\n' "${WARNINGS[@]}"
    fi
    if [ ${#FAILURES[@]} -gt 0 ]; then
        echo "RUN INVALID: ${#FAILURES[@]} failure(s)"
        printf '  - %s\n' "${FAILURES[@]}"
        exit 1
    fi
    [ "$STRICT" = 1 ] && [ ${#MISSED[@]} -gt 0 ] && exit 1
    exit 0
}

STAMP=$(date -u +%Y%m%dT%H%M%SZ)

# ---------------------------------------------------------------- wrk
# to_ms VALUE -> milliseconds (wrk prints 812.00us, 1.23ms, 1.02s, 1.00m)
to_ms() {
    awk -v v="$1" 'BEGIN {
        n = v + 0; u = v; sub(/^[0-9.]+/, "", u)
        if (u == "us") n /= 1000; else if (u == "s") n *= 1000; else if (u == "m") n *= 60000
        printf "%.3f", n }'
}
# dur_seconds "10", "10s", "2m", "1h" -> seconds
dur_seconds() {
    case $1 in
    *h) echo $((${1%h} * 3600)) ;;
    *m) echo $((${1%m} * 60)) ;;
    *s) echo "${1%s}" ;;
    *) echo "$1" ;;
    esac
}

# wrk_run NAME URL TOKEN DURATION -> sets WRK_RPS WRK_P50 WRK_P99 (ms) WRK_REQS WRK_NON2XX
# WRK_SOCK; records a failure for non-2xx responses or socket errors. wrk -t2 -c64.
wrk_run() {
    local name=$1 url=$2 token=$3 dur=$4 out
    out="$TMP/wrk-$(date +%s%N).txt"
    local args=(-t2 -c64 -d"$dur" --timeout 5s --latency)
    [ -n "$token" ] && args+=(-H "Authorization: Bearer $token")
    log "wrk $name: $url ($dur)"
    run_bg timeout $(($(dur_seconds "$dur") + 30)) wrk "${args[@]}" "$url" >"$out" 2>&1 || {
        cat "$out" >&2
        fail "wrk failed on $name"
    }
    WRK_RPS=$(awk '/^Requests\/sec:/ { print $2 }' "$out")
    local p50 p99
    p50=$(awk '$1 == "50%" { print $2 }' "$out")
    p99=$(awk '$1 == "99%" { print $2 }' "$out")
    WRK_REQS=$(awk '/requests in/ { print $1 }' "$out")
    WRK_NON2XX=$(awk '/Non-2xx or 3xx responses:/ { print $NF }' "$out")
    WRK_SOCK=$(awk '/Socket errors:/ { sub(/^ *Socket errors: */, ""); print }' "$out")
    if [ -z "$WRK_RPS" ] || [ -z "$p50" ] || [ -z "$p99" ]; then
        cat "$out" >&2
        fail "cannot parse the wrk output of $name"
        WRK_RPS=${WRK_RPS:-0} p50=${p50:-0us} p99=${p99:-0us}
    fi
    [ -z "$WRK_NON2XX" ] || fail "$name: $WRK_NON2XX non-2xx/3xx responses (of ${WRK_REQS:-?})"
    [ -z "$WRK_SOCK" ] || fail "$name: wrk socket errors: $WRK_SOCK"
    # shellcheck disable=SC2034 # read by the sourcing script
    WRK_P50=$(to_ms "$p50") WRK_P99=$(to_ms "$p99")
    WRK_REQS=${WRK_REQS:-0} WRK_NON2XX=${WRK_NON2XX:-0} WRK_SOCK=${WRK_SOCK:-none}
}
