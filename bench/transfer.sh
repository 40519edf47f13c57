#!/usr/bin/env bash
# bench/transfer.sh — files.upload and files.download of a large file against cat.
#
#   bash bench/transfer.sh
#
# A Release `abx serve` (files.upload, files.download, files.stat mounted on WS/**) and
# a random file of BENCH_TRANSFER_MIB MiB (default 100) in the workspace. Each round:
#   upload floor    catfloor big.bin floor.bin    (cat SRC > DST, same file system)
#   files.upload    curl -T big.bin  PUT /files/upload?path=up.bin
#   download floor  catfloor big.bin /dev/null    (cat SRC > /dev/null)
#   files.download  curl -o /dev/null GET /files/download?path=big.bin
# BENCH_TRANSFER_ROUNDS rounds (default 3). The floors time themselves (bench/catfloor.c),
# abx is timed by curl's time_total: neither counts its process start-up (curl's is
# ~40 ms here). A sampler reads the server's VmRSS every 20 ms during the transfers;
# VmHWM is read at the end. Targets: abx MB/s >= 0.7 x the floor's for each direction,
# peak RSS < 50 MiB. For context, nginx (2 workers, sendfile; PUT through its dav module)
# does the same two transfers with the same curl in each round: the HTTP-over-loopback
# ceiling of this machine.
# When the abx catalog lacks files.upload or files.download, prints
# "skipped: OP not available" and exits 0.
# Writes bench/out/transfer-<timestamp>.json. See bench/README.md.
set -euo pipefail
BENCH_NAME="transfer"
# shellcheck source=bench/lib.sh
. "$(dirname "${BASH_SOURCE[0]}")/lib.sh"

SIZE_MIB=${BENCH_TRANSFER_MIB:-100}
ROUNDS=${BENCH_TRANSFER_ROUNDS:-3}
[[ $SIZE_MIB =~ ^[1-9][0-9]{0,4}$ ]] || { echo "transfer: BENCH_TRANSFER_MIB must be 1..99999" >&2; exit 2; }
[[ $ROUNDS =~ ^[1-9][0-9]?$ ]] || { echo "transfer: BENCH_TRANSFER_ROUNDS must be 1..99" >&2; exit 2; }
# a transfer gets 60 s + 1 s per 10 MiB
XFER_TIMEOUT=$((60 + SIZE_MIB / 10))
bench_under_timeout $((ROUNDS * 4 * XFER_TIMEOUT + 900)) "$@"
bench_init
bench_build --abx-only
cc -O2 -Wall -o "$TMP/catfloor" "$BENCH_DIR/catfloor.c" || die "cannot compile bench/catfloor.c"
need_pkg nginx nginx-light nginx

SIZE=$((SIZE_MIB * 1048576))
OUTBODY="$TMP/body.json"
for op in files.upload files.download; do
    if ! has_op "$op"; then
        echo "skipped: $op not available"
        printf '  "skipped": %s,\n' "$(json_str "$op not available")" >"$OUTBODY"
        bench_finish "$OUTBODY"
    fi
done

WS="$TMP/ws"
mkdir -p "$WS"
WS=$(realpath "$WS")
log "writing a $SIZE_MIB MiB random file"
head -c "$SIZE" /dev/urandom >"$WS/big.bin"
[ "$(stat -c %s "$WS/big.bin")" = "$SIZE" ] || die "cannot write $WS/big.bin"
head -c 1024 /dev/urandom >"$WS/small.bin"

mapfile -t PORTS < <(free_ports 2)
PORT=${PORTS[0]:-} NGX_PORT=${PORTS[1]:-}
[ -n "$NGX_PORT" ] || die "cannot find free ports"
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
    - ops: [files.upload, files.download, files.stat]
      principals: [bench]
      paths: ["$WS/**"]
EOF
"$ABX" check-config "$TMP/abx.yaml" >"$TMP/check.log" 2>&1 || die "the config does not check: $(grep -m3 error "$TMP/check.log")"
bench_start_abx abx "$TMP/abx.yaml" "$PORT"
PID=$STARTED_PID

# nginx: GET /big.bin from WS; PUT /ngx-up/NAME into WS/ngx-up (its workers run as nobody)
NGX="$TMP/nginx"
mkdir -p "$NGX/tmp" "$WS/ngx-up" "$WS/ngx-tmp"
chmod 755 "$TMP" "$WS"
chmod 644 "$WS/big.bin" "$WS/small.bin"
chmod 1777 "$WS/ngx-up" "$WS/ngx-tmp"
cat >"$NGX/nginx.conf" <<EOF
daemon off;
master_process on;
worker_processes 2;
pid $NGX/nginx.pid;
error_log $NGX/error.log warn;
events {
    worker_connections 1024;
}
http {
    access_log off;
    sendfile on;
    tcp_nopush on;
    default_type application/octet-stream;
    client_max_body_size 0;
    client_body_temp_path $WS/ngx-tmp;
    proxy_temp_path $NGX/tmp/proxy;
    fastcgi_temp_path $NGX/tmp/fastcgi;
    uwsgi_temp_path $NGX/tmp/uwsgi;
    scgi_temp_path $NGX/tmp/scgi;
    server {
        listen 127.0.0.1:$NGX_PORT;
        root $WS;
        location /ngx-up/ {
            dav_methods PUT;
        }
    }
}
EOF
nginx -p "$NGX" -c "$NGX/nginx.conf" -e "$NGX/error.log" >"$NGX/stdout.log" 2>&1 &
NGX_PID=$!
PIDS+=("$NGX_PID")
for _ in $(seq 1 200); do
    kill -0 "$NGX_PID" 2>/dev/null || die "nginx exited before listening: $(tail -n 2 "$NGX/error.log" 2>/dev/null)"
    port_listening "$NGX_PORT" && break
    sleep 0.05
done
port_listening "$NGX_PORT" || die "nginx is not listening on port $NGX_PORT after 10 s"
NBASE="http://127.0.0.1:$NGX_PORT"
BASE="http://127.0.0.1:$PORT"
AUTH="Authorization: Bearer $TOKEN"

# curl_xfer OUTFILE ARGS... -> runs curl, prints "HTTP_CODE SIZE_UP SIZE_DOWN TIME_TOTAL"
curl_xfer() {
    local out=$1
    shift
    run_bg timeout "$XFER_TIMEOUT" curl -sS -H "$AUTH" -o "$out" \
        -w '%{http_code} %{size_upload} %{size_download} %{time_total}\n' "$@" 2>>"$TMP/curl.log" || true
}

# ---------------------------------------------------------------- sanity: one small transfer each way
read -r code _ _ _ < <(curl_xfer "$TMP/resp.json" -T "$WS/small.bin" "$BASE/files/upload?path=small-up.bin")
is_2xx() { [ "${1:-000}" -ge 200 ] && [ "${1:-000}" -le 299 ]; }
is_2xx "$code" || die "files.upload of 1 KiB answered ${code:-nothing}: $(head -c 300 "$TMP/resp.json" 2>/dev/null)"
cmp -s "$WS/small.bin" "$WS/small-up.bin" || die "files.upload did not store the uploaded bytes"
read -r code _ down _ < <(curl_xfer "$TMP/small-down.bin" "$BASE/files/download?path=small.bin")
[ "${code:-000}" = 200 ] || die "files.download of 1 KiB answered ${code:-nothing}: $(head -c 300 "$TMP/small-down.bin" 2>/dev/null)"
cmp -s "$WS/small.bin" "$TMP/small-down.bin" || die "files.download did not return the file's bytes"
read -r code _ _ _ < <(curl_xfer "$TMP/resp.json" "$BASE/files/download?path=/etc/hostname")
[ "${code:-000}" = 403 ] || fail "files.download of /etc/hostname answered ${code:-nothing} (expected 403)"
rm -f "$WS/small-up.bin"
read -r code _ _ _ < <(curl_xfer "$TMP/resp.txt" -T "$WS/small.bin" "$NBASE/ngx-up/small.bin")
if ! is_2xx "$code" || ! cmp -s "$WS/small.bin" "$WS/ngx-up/small.bin"; then
    die "nginx PUT answered ${code:-nothing}: $(tail -n 2 "$NGX/error.log" 2>/dev/null)"
fi
read -r code _ _ _ < <(curl_xfer "$TMP/resp.txt" "$NBASE/small.bin")
if [ "${code:-000}" != 200 ] || ! cmp -s "$WS/small.bin" "$TMP/resp.txt"; then
    die "nginx GET /small.bin answered ${code:-nothing}"
fi
rm -f "$WS/ngx-up/small.bin"

# ---------------------------------------------------------------- RSS sampler
IDLE_RSS_KB=$(proc_field "$PID" VmRSS)
# rss_sampler PID OUT STOPFILE: "EPOCHREALTIME VmRSS_kB" every 20 ms until STOPFILE exists
# (or the process is gone, or the time limit)
rss_sampler() {
    local end=$((SECONDS + ROUNDS * 4 * XFER_TIMEOUT + 60)) k v _rest
    while [ ! -e "$3" ] && [ "$SECONDS" -lt "$end" ]; do
        while read -r k v _rest; do
            if [ "$k" = VmRSS: ]; then
                printf '%s %s\n' "$EPOCHREALTIME" "$v"
                break
            fi
        done <"/proc/$1/status" 2>/dev/null || break
        sleep 0.02
    done >"$2"
}
rss_sampler "$PID" "$TMP/rss.txt" "$TMP/rss.stop" &
SAMPLER=$!
PIDS+=("$SAMPLER")

# ---------------------------------------------------------------- rounds
# elapsed START END -> seconds; mbs BYTES SECONDS -> MB/s (10^6 bytes)
elapsed() { awk -v a="$1" -v b="$2" 'BEGIN { printf "%.6f", b - a }'; }
mbs() { awk -v n="$1" -v s="$2" 'BEGIN { if (s > 0) printf "%.1f", n / s / 1e6; else print 0 }'; }
# floor SRC DST -> MB/s, from catfloor's own timing
floor() {
    local bytes secs
    read -r bytes secs < <(run_bg timeout "$XFER_TIMEOUT" "$TMP/catfloor" "$1" "$2" 2>>"$TMP/catfloor.log") || true
    if [ "${bytes:-0}" != "$SIZE" ]; then
        fail "catfloor $1 $2 copied ${bytes:-no} bytes: $(tail -n 1 "$TMP/catfloor.log" 2>/dev/null)"
        echo 0
    else
        mbs "$SIZE" "$secs"
    fi
}
# ngx_xfer KIND -> MB/s of one nginx transfer (curl's time_total)
ngx_xfer() {
    local code n tt
    if [ "$1" = upload ]; then
        rm -f "$WS/ngx-up/up.bin"
        read -r code n _ tt < <(curl_xfer "$TMP/resp.txt" -T "$WS/big.bin" "$NBASE/ngx-up/up.bin")
    else
        read -r code _ n tt < <(curl_xfer /dev/null "$NBASE/big.bin")
    fi
    if [ "${code:-000}" -lt 200 ] || [ "${code:-000}" -gt 299 ] || [ "${n:-0}" != "$SIZE" ]; then
        fail "nginx $1 answered ${code:-nothing} after ${n:-0} bytes"
        echo 0
    else
        mbs "$SIZE" "$tt"
    fi
}
UP_FLOOR=() UP_ABX=() DOWN_FLOOR=() DOWN_ABX=() UP_WALL=() DOWN_WALL=() UP_NGX=() DOWN_NGX=() WINDOWS=()
for r in $(seq 1 "$ROUNDS"); do
    log "round $r/$ROUNDS"
    rm -f "$WS/floor.bin" "$WS/up.bin"

    UP_FLOOR+=("$(floor "$WS/big.bin" "$WS/floor.bin")")
    UP_NGX+=("$(ngx_xfer upload)")

    t0=$EPOCHREALTIME
    read -r code up _ tt < <(curl_xfer "$TMP/resp.json" -T "$WS/big.bin" "$BASE/files/upload?path=up.bin")
    t1=$EPOCHREALTIME
    WINDOWS+=("upload $t0 $t1")
    UP_ABX+=("$(mbs "$SIZE" "${tt:-0}")") UP_WALL+=("$(mbs "$SIZE" "$(elapsed "$t0" "$t1")")")
    if [ "${code:-000}" -lt 200 ] || [ "${code:-000}" -gt 299 ]; then
        fail "round $r: files.upload answered ${code:-nothing}: $(head -c 300 "$TMP/resp.json" 2>/dev/null)"
    elif [ "${up:-0}" != "$SIZE" ] || [ "$(stat -c %s "$WS/up.bin" 2>/dev/null)" != "$SIZE" ]; then
        fail "round $r: files.upload sent ${up:-0} bytes, the file has $(stat -c %s "$WS/up.bin" 2>/dev/null || echo no) bytes (expected $SIZE)"
    elif [ "$r" = 1 ] && ! cmp -s "$WS/big.bin" "$WS/up.bin"; then
        fail "round $r: the uploaded file differs from the source"
    fi

    DOWN_FLOOR+=("$(floor "$WS/big.bin" /dev/null)")
    DOWN_NGX+=("$(ngx_xfer download)")

    if [ "$r" = 1 ]; then # once: check the bytes (not timed)
        read -r code _ down _ < <(curl_xfer "$TMP/down.bin" "$BASE/files/download?path=big.bin")
        if [ "${code:-000}" != 200 ] || ! cmp -s "$WS/big.bin" "$TMP/down.bin"; then
            fail "files.download did not return the file's bytes (status ${code:-none}, ${down:-0} bytes)"
        fi
        rm -f "$TMP/down.bin"
    fi
    t0=$EPOCHREALTIME
    read -r code _ down tt < <(curl_xfer /dev/null "$BASE/files/download?path=big.bin")
    t1=$EPOCHREALTIME
    WINDOWS+=("download $t0 $t1")
    DOWN_ABX+=("$(mbs "$SIZE" "${tt:-0}")") DOWN_WALL+=("$(mbs "$SIZE" "$(elapsed "$t0" "$t1")")")
    [ "${code:-000}" = 200 ] || fail "round $r: files.download answered ${code:-nothing}"
    [ "${down:-0}" = "$SIZE" ] || fail "round $r: files.download returned ${down:-0} bytes (expected $SIZE)"
done
touch "$TMP/rss.stop"
wait "$SAMPLER" 2>/dev/null || true
forget_pid "$SAMPLER"

kill -0 "$PID" 2>/dev/null || fail "abx died during the transfers"
HWM_KB=$(proc_field "$PID" VmHWM)
END_RSS_KB=$(proc_field "$PID" VmRSS)
THREADS=$(proc_field "$PID" Threads)
# leftovers of the uploads (staging files) in the workspace
LEFT=$(find "$WS" -mindepth 1 -maxdepth 1 ! -name big.bin ! -name small.bin ! -name up.bin ! -name floor.bin \
    ! -name ngx-up ! -name ngx-tmp -printf '%f ' | head -c 300)
[ -z "$LEFT" ] || warn "files left in the workspace after the uploads: $LEFT"
bench_stop "$PID"
bench_stop "$NGX_PID"
e=$(log_errors "$TMP/abx.log")
[ -z "$e" ] || warn "abx logged errors: $e"

# peak RSS within the windows of one kind
peak_in() { # kind
    local w lines=()
    for w in "${WINDOWS[@]}"; do
        [ "${w%% *}" = "$1" ] && lines+=("${w#* }")
    done
    printf '%s\n' "${lines[@]}" | awk 'NR == FNR { a[NR] = $1; b[NR] = $2; n = NR; next }
        { for (i = 1; i <= n; i++) if ($1 >= a[i] && $1 <= b[i] && $2 > m) m = $2 }
        END { print m + 0 }' - "$TMP/rss.txt"
}
SAMPLES=$(wc -l <"$TMP/rss.txt")
PEAK_ALL=$(awk '$2 > m { m = $2 } END { print m + 0 }' "$TMP/rss.txt")
PEAK_UP=$(peak_in upload)
PEAK_DOWN=$(peak_in download)

UF=$(median "${UP_FLOOR[@]}") UA=$(median "${UP_ABX[@]}") DF=$(median "${DOWN_FLOOR[@]}") DA=$(median "${DOWN_ABX[@]}")
UR=$(ratio "$UA" "$UF") DR=$(ratio "$DA" "$DF")
UN=$(median "${UP_NGX[@]}") DN=$(median "${DOWN_NGX[@]}")
URN=$(ratio "$UA" "$UN") DRN=$(ratio "$DA" "$DN")
ge "$UR" 0.7 || MISSED+=("files.upload $UA MB/s is $UR x the floor's $UF MB/s (< 0.7)")
ge "$DR" 0.7 || MISSED+=("files.download $DA MB/s is $DR x the floor's $DF MB/s (< 0.7)")
PEAK_MAX=$(awk -v a="$PEAK_ALL" -v b="${HWM_KB:-0}" 'BEGIN { print (a > b ? a : b) }')
awk -v k="$PEAK_ALL" 'BEGIN { exit !(k < 50 * 1024) }' || MISSED+=("peak RSS during the transfers $(mib "$PEAK_ALL") MiB >= 50 MiB")
awk -v k="${HWM_KB:-0}" 'BEGIN { exit !(k < 50 * 1024) }' || MISSED+=("VmHWM $(mib "${HWM_KB:-0}") MiB >= 50 MiB")

echo
echo "abx transfers — $SIZE_MIB MiB file, $ROUNDS rounds interleaved, MB = 10^6 bytes, $(nproc) cores, $(date -u +%FT%TZ)"
printf '%-34s %s\n' what "MB/s per round (curl's time_total; with curl's start-up in brackets)"
printf '%-34s' "upload floor: cat > file"
printf ' %8s          ' "${UP_FLOOR[@]}"
echo
printf '%-34s' "nginx PUT (dav): curl -T"
printf ' %8s          ' "${UP_NGX[@]}"
echo
printf '%-34s' "files.upload: curl -T (PUT)"
for i in "${!UP_ABX[@]}"; do printf ' %8s [%6s]' "${UP_ABX[$i]}" "${UP_WALL[$i]}"; done
echo
printf '%-34s' "download floor: cat > /dev/null"
printf ' %8s          ' "${DOWN_FLOOR[@]}"
echo
printf '%-34s' "nginx GET: curl -o /dev/null"
printf ' %8s          ' "${DOWN_NGX[@]}"
echo
printf '%-34s' "files.download: curl -o /dev/null"
for i in "${!DOWN_ABX[@]}"; do printf ' %8s [%6s]' "${DOWN_ABX[$i]}" "${DOWN_WALL[$i]}"; done
echo
echo
echo "medians:"
printf '%-10s %11s %11s %11s %10s %8s %10s\n' direction "floor MB/s" "nginx MB/s" "abx MB/s" "abx/floor" target "abx/nginx"
printf '%-10s %11s %11s %11s %10s %8s %10s\n' upload "$UF" "$UN" "$UA" "$UR" ">= 0.70" "$URN"
printf '%-10s %11s %11s %11s %10s %8s %10s\n' download "$DF" "$DN" "$DA" "$DR" ">= 0.70" "$DRN"
echo
echo "server RSS: idle $(mib "${IDLE_RSS_KB:-0}") MiB; peak during uploads $(mib "$PEAK_UP") MiB, during downloads $(mib "$PEAK_DOWN") MiB ($SAMPLES samples at 20 ms)"
echo "            VmHWM at the end $(mib "${HWM_KB:-0}") MiB, VmRSS at the end $(mib "${END_RSS_KB:-0}") MiB, ${THREADS:-?} threads (target: peak < 50 MiB)"

{
    printf '  "size_bytes": %s,\n  "rounds": %s,\n  "unit": "MB/s, 10^6 bytes per second; floors timed by catfloor, abx by curl time_total",\n' "$SIZE" "$ROUNDS"
    printf '  "upload": {"floor_mbs": %s, "abx_mbs": %s, "abx_wall_incl_curl_startup_mbs": %s, "median_floor": %s, "median_abx": %s, "ratio": %s, "target_min": 0.7, "nginx_mbs": %s, "median_nginx": %s, "ratio_to_nginx": %s},\n' \
        "$(json_nums "${UP_FLOOR[@]}")" "$(json_nums "${UP_ABX[@]}")" "$(json_nums "${UP_WALL[@]}")" "$UF" "$UA" "$UR" \
        "$(json_nums "${UP_NGX[@]}")" "$UN" "$URN"
    printf '  "download": {"floor_mbs": %s, "abx_mbs": %s, "abx_wall_incl_curl_startup_mbs": %s, "median_floor": %s, "median_abx": %s, "ratio": %s, "target_min": 0.7, "nginx_mbs": %s, "median_nginx": %s, "ratio_to_nginx": %s},\n' \
        "$(json_nums "${DOWN_FLOOR[@]}")" "$(json_nums "${DOWN_ABX[@]}")" "$(json_nums "${DOWN_WALL[@]}")" "$DF" "$DA" "$DR" \
        "$(json_nums "${DOWN_NGX[@]}")" "$DN" "$DRN"
    printf '  "rss_kib": {"idle": %s, "peak_sampled": %s, "peak_upload": %s, "peak_download": %s, "vmhwm": %s, "end": %s, "samples": %s, "peak_max": %s, "target_max_mib": 50},\n' \
        "${IDLE_RSS_KB:-0}" "$PEAK_ALL" "$PEAK_UP" "$PEAK_DOWN" "${HWM_KB:-0}" "${END_RSS_KB:-0}" "$SAMPLES" "$PEAK_MAX"
} >"$OUTBODY"
bench_finish "$OUTBODY"
