#!/usr/bin/env bash
# bench/profile.sh — instruction counts per request of abx's hot routes, under
# valgrind's callgrind: load-independent, so two binaries can be compared on a busy
# machine where wall-clock ratios move by 30 %.
#
#   bash bench/profile.sh [ABX_BINARY]        (default: build/abx, a RelWithDebInfo build)
#
# Starts `abx serve` under callgrind with instrumentation off (openat2 mapped to
# openat by bench/vg_openat2.c: valgrind 3.19 lacks it), warms each route up, then
# for GET /health and the authenticated files.read of a 1 KiB file: switches
# collection on, sends BENCH_PROFILE_N (default 2000) requests over one keep-alive
# connection (bench/http_loop.c), dumps, and prints the instructions per request
# (all threads of the server) and the top functions (inclusive of nothing: self
# cost). The dumps stay in bench/out/callgrind-<route>-<stamp>.out for
# callgrind_annotate. Exit status 1 when a request fails.
set -euo pipefail
BENCH_NAME="profile"
# shellcheck source=bench/lib.sh
. "$(dirname "${BASH_SOURCE[0]}")/lib.sh"
exec {LOGFD}>&2
ABX=$(realpath "${1:-$ROOT/build/abx}")
N=${BENCH_PROFILE_N:-2000}
TOP=${BENCH_PROFILE_TOP:-25}
command -v valgrind >/dev/null || need_pkg valgrind valgrind
TMP=$(mktemp -d /tmp/abx-profile.XXXXXX)
VG_PID=""
cleanup() {
    set +e
    [ -n "$VG_PID" ] && kill -TERM "$VG_PID" 2>/dev/null && wait "$VG_PID" 2>/dev/null
    rm -rf "$TMP"
}
trap cleanup EXIT
cc -O2 -Wall -o "$TMP/http_loop" "$BENCH_DIR/http_loop.c"
cc -O2 -Wall -o "$TMP/freeport" "$BENCH_DIR/freeport.c"
cc -O2 -Wall -shared -fPIC -o "$TMP/vg_openat2.so" "$BENCH_DIR/vg_openat2.c" -ldl
WS="$TMP/ws"
mkdir -p "$WS"
WS=$(realpath "$WS")
LC_ALL=C awk 'BEGIN { for (i = 0; i < 1024; i++) printf "%c", 32 + (i % 95) }' >"$WS/f1k.txt"
PORT=$("$TMP/freeport" 1)
export ABX_BENCH_TOKEN="bench-$(od -An -tx1 -N16 /dev/urandom | tr -d ' \n')"
cat >"$TMP/abx.yaml" <<EOF
listen: 127.0.0.1:$PORT
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
LD_PRELOAD="$TMP/vg_openat2.so" valgrind --tool=callgrind --instr-atstart=no --separate-threads=no \
    --callgrind-out-file="$TMP/cg.%p" "$ABX" serve --config "$TMP/abx.yaml" --log-level warn >"$TMP/abx.log" 2>&1 &
VG_PID=$!
for _ in $(seq 1 600); do
    port_listening "$PORT" && break
    kill -0 "$VG_PID" 2>/dev/null || die "abx under valgrind exited: $(tail -n 5 "$TMP/abx.log")"
    sleep 0.1
done
port_listening "$PORT" || die "abx under valgrind does not listen"
mkdir -p "$BENCH_DIR/out"
STAMP=$(date -u +%Y%m%dT%H%M%SZ)
echo "abx callgrind profile: $ABX, $N requests per route over one keep-alive connection"
profile_route() { # name method path token
    local name=$1
    "$TMP/http_loop" "$PORT" 200 "$2" "$3" "$4" >/dev/null 2>"$TMP/warm.txt" || die "warm-up of $name failed: $(cat "$TMP/warm.txt")"
    callgrind_control --zero "$VG_PID" >/dev/null
    callgrind_control --instr=on "$VG_PID" >/dev/null
    "$TMP/http_loop" "$PORT" "$N" "$2" "$3" "$4" >/dev/null 2>"$TMP/loop.txt" || die "$name failed: $(cat "$TMP/loop.txt")"
    callgrind_control --instr=off "$VG_PID" >/dev/null
    rm -f "$TMP"/cg.*.[0-9]*
    callgrind_control --dump="$name" "$VG_PID" >/dev/null
    sleep 0.5
    local f
    f=$(ls -t "$TMP"/cg.*.[0-9]* | head -n 1)
    cp "$f" "$BENCH_DIR/out/callgrind-$name-$STAMP.out"
    local total
    total=$(awk '/^totals:/ { print $2; exit }' "$f")
    echo
    echo "== $name: $((total / N)) instructions per request (total $total over $N)"
    callgrind_annotate --threshold=100 "$f" 2>/dev/null | awk '/file:function/ { s = 1; next } s && /^ *[0-9,]+ / && !/PROGRAM TOTALS/' |
        head -n "$TOP" | awk -v n="$N" '{ ir = $1; gsub(",", "", ir); $1 = ""; printf "%9d /req %s\n", ir / n, $0 }' || true
}
profile_route health GET /health ""
profile_route read GET "/files/read?path=f1k.txt" "$ABX_BENCH_TOKEN"
