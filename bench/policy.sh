#!/usr/bin/env bash
# bench/policy.sh — what the policy costs.
#
#   bash bench/policy.sh
#
# (a) bench/policy_bench.c, linked against build-bench/libabx.a: a generated
#     200-statement policy compiled in-process, then abx_decide for files.stat and
#     files.read in a single-threaded loop (decisions/s, ns/decision).
# (b) two Release abx servers side by side: A with a 200-statement policy (deny
#     statements with paths; the one statement mounting files.stat for the caller is
#     the last one), B with that one statement alone. wrk -t2 -c64 on an authenticated
#     GET /files/stat?path=f1k.txt, alternately A, B, A, B. Target: A/B >= 0.90.
# Writes bench/out/policy-<timestamp>.json. See bench/README.md.
#
# Exit status: 0 when every measurement ran cleanly (unless BENCH_STRICT=1 and a target
# was missed); 1 when the run is invalid.
set -euo pipefail
BENCH_NAME="policy"
# shellcheck source=bench/lib.sh
. "$(dirname "${BASH_SOURCE[0]}")/lib.sh"

DURATION=${BENCH_DURATION:-10s}
ROUNDS=${BENCH_POLICY_ROUNDS:-2}
MICRO_S=${BENCH_POLICY_SECONDS:-2}
STATEMENTS=${BENCH_POLICY_STATEMENTS:-200}
LEDGER=${BENCH_POLICY_LEDGER:-off}
if ! [[ $DURATION =~ ^[0-9]+[smh]?$ ]] || [ "$(dur_seconds "$DURATION")" -lt 1 ]; then
    echo "policy: BENCH_DURATION must read like 10s, 30, 1m (got '$DURATION')" >&2
    exit 2
fi
[[ $DURATION =~ [smh]$ ]] || DURATION="${DURATION}s"
[[ $ROUNDS =~ ^[1-9][0-9]?$ ]] || { echo "policy: BENCH_POLICY_ROUNDS must be 1..99" >&2; exit 2; }
[[ $LEDGER =~ ^(on|off)$ ]] || { echo "policy: BENCH_POLICY_LEDGER must be on or off" >&2; exit 2; }
[[ $MICRO_S =~ ^[1-9][0-9]{0,2}$ ]] || { echo "policy: BENCH_POLICY_SECONDS must be a whole number 1..999" >&2; exit 2; }
if ! [[ $STATEMENTS =~ ^[0-9]{1,5}$ ]] || [ "$STATEMENTS" -lt 2 ]; then
    echo "policy: BENCH_POLICY_STATEMENTS must be 2..60000" >&2
    exit 2
fi
DUR_S=$(dur_seconds "$DURATION")
bench_under_timeout $((2 * ROUNDS * (DUR_S + 35) + 3 * MICRO_S + 960)) "$@"
bench_init
need_pkg wrk wrk
need_pkg pkg-config pkg-config
bench_build --static

# ---------------------------------------------------------------- (a) microbenchmark
bench_cc_libabx "$TMP/policy_bench" "$BENCH_DIR/policy_bench.c"
mkdir -p "$TMP/micro"
log "policy_bench: $STATEMENTS statements, $MICRO_S s mixed, then $MICRO_S/4 s per case"
run_bg timeout $((4 * MICRO_S + 120)) "$TMP/policy_bench" "$TMP/micro" "$MICRO_S" "$STATEMENTS" >"$TMP/micro.txt" 2>"$TMP/policy_bench.log" ||
    fail "policy_bench failed: $(tail -n 3 "$TMP/policy_bench.log" | tr '\n' ' ')"
rm -rf "$TMP/micro"
M_NAMES=() M_OPS=() M_OUT=() M_RATE=() M_NS=() M_COUNT=()
while IFS=$'\t' read -r tag name op outcome count _secs rate ns; do
    [ "$tag" = result ] || continue
    M_NAMES+=("$name") M_OPS+=("$op") M_OUT+=("$outcome") M_COUNT+=("$count") M_RATE+=("$rate") M_NS+=("$ns")
done <"$TMP/micro.txt"
read -r _ COMPILE_MS N_ALLOW N_DENY N_MOUNTING < <(awk -F'\t' '$1 == "compile"' "$TMP/micro.txt") || true
[ ${#M_NAMES[@]} -gt 0 ] || fail "policy_bench printed no results"

# ---------------------------------------------------------------- (b) two servers
WS="$TMP/ws"
mkdir -p "$WS"
WS=$(realpath "$WS")
LC_ALL=C awk 'BEGIN { for (i = 0; i < 1024; i++) printf "%c", 32 + (i % 95) }' >"$WS/f1k.txt"
for d in $(seq 0 19); do
    mkdir -p "$WS/d$d/private"
    echo key >"$WS/d$d/private/key.txt"
done

mapfile -t PORTS < <(free_ports 2)
[ "${#PORTS[@]}" = 2 ] || die "cannot find free ports"
PORT_A=${PORTS[0]} PORT_B=${PORTS[1]}

TOKEN="bench-$(od -An -tx1 -N16 /dev/urandom | tr -d ' \n')"
TOKEN_SHA=$(printf '%s' "$TOKEN" | sha256sum | cut -d' ' -f1)
# the same principals (and ledger setting) in both configs, so that A and B differ by
# their policy only. The action ledger is off by default: its writer costs more than
# the policy and would hide it (BENCH_POLICY_LEDGER=on keeps abx's default, on).
auth_yaml() {
    [ "$LEDGER" = off ] && printf 'ledger:\n  enabled: false\n'

    printf 'auth:\n  tokens:\n'
    printf '    - principal: bench\n      roles: [agent]\n      token_sha256: "%s"\n' "$TOKEN_SHA"
    local i
    for i in $(seq 0 9); do
        printf '    - principal: p%d\n      roles: [r%d]\n      token_sha256: "%s"\n' "$i" "$i" \
            "$(printf 'policy-bench-other-principal-%02d' "$i" | sha256sum | cut -d' ' -f1)"
    done
}

# Config A: STATEMENTS statements. n/10 deny statements with paths; then allow
# statements for roles r0..r9 (which bench does not have) with op selectors "files.*",
# "effect:read", exact ids and path scopes under WS; then allow statements for bench that
# mount other ops (files.read, files.list, system.info); last, the only statement that
# mounts files.stat for bench.
gen_policy_a() {
    local n=$STATEMENTS nd na i j d
    nd=$((n / 10)) && [ "$nd" -ge 1 ] || nd=1
    na=$((n - nd))
    printf 'policy:\n  deny:\n'
    for ((j = 0; j < nd; j++)); do
        d=$((j % 20))
        case $((j % 4)) in
        0) printf '    - paths: ["%s/**/.env", "%s/**/*.pem"]\n' "$WS" "$WS" ;;
        1) printf '    - paths: ["%s/d%d/private/**"]\n' "$WS" "$d" ;;
        2) printf '    - ops: [files.read]\n      paths: ["%s/secret%d/**", "%s/d%d/*.key"]\n' "$WS" "$j" "$WS" "$d" ;;
        3) printf '    - ops: [files.list]\n      principals: ["role:r%d"]\n      paths: ["%s/d%d/**/*.log"]\n' $((j % 10)) "$WS" "$d" ;;
        esac
    done
    printf '  allow:\n'
    local sels=('["files.*"]' '["effect:read"]' '[files.stat, files.read]' '[files.read]' '[files.list, system.info]' '[files.stat]')
    local mine=('[files.read]' '[files.list]' '[system.info]')
    for ((i = 0; i < na - 1; i++)); do
        d=$(((i * 7) % 20))
        if [ $((i % 20)) = 19 ]; then # every 20th: bench, an op other than files.stat
            printf '    - ops: %s\n      principals: [bench]\n' "${mine[$(((i / 20) % 3))]}"
        else
            printf '    - ops: %s\n      principals: ["role:r%d"]\n' "${sels[$(((i / 10) % 6))]}" $((i % 10))
        fi
        case $((i % 3)) in
        0) printf '      paths: ["%s/d%d/**"]\n' "$WS" "$d" ;;
        1) printf '      paths: {read: ["%s/d%d/**", "%s/*.txt"], write: ["%s/d%d/out/**"]}\n' "$WS" "$d" "$WS" "$WS" "$d" ;;
        2) printf '      paths: ["%s/d%d/*.txt", "%s/d%d/**/*.md", "%s/d%d/a/**"]\n' "$WS" "$d" "$WS" "$d" "$WS" "$d" ;;
        esac
        [ $((i % 7)) = 0 ] && printf '      limits: {max_bytes: 1MiB, max_entries: 100}\n'
    done
    printf '    - ops: [files.stat]\n      principals: [bench]\n      paths: ["%s/**"]\n' "$WS"
}
# each config in its own directory: abx keeps its ledger in .abx/ beside the config,
# and two servers must not share one
mkdir -p "$TMP/a" "$TMP/b"
{
    printf 'listen: 127.0.0.1:%s\nworkspace: %s\nterminal_listen: "off"\n' "$PORT_A" "$WS"
    auth_yaml
    gen_policy_a
} >"$TMP/a/abx.yaml"
{
    printf 'listen: 127.0.0.1:%s\nworkspace: %s\nterminal_listen: "off"\n' "$PORT_B" "$WS"
    auth_yaml
    printf 'policy:\n  allow:\n    - ops: [files.stat]\n      principals: [bench]\n      paths: ["%s/**"]\n' "$WS"
} >"$TMP/b/abx.yaml"
N_STMTS_A=$(grep -c '^    - ' "$TMP/a/abx.yaml")
N_STMTS_A=$((N_STMTS_A - 11)) # minus the 11 principals
"$ABX" check-config "$TMP/a/abx.yaml" >"$TMP/check-a.log" 2>&1 || die "config A does not check: $(grep -m3 error "$TMP/check-a.log")"
"$ABX" check-config "$TMP/b/abx.yaml" >"$TMP/check-b.log" 2>&1 || die "config B does not check: $(grep -m3 error "$TMP/check-b.log")"

bench_start_abx abx-a "$TMP/a/abx.yaml" "$PORT_A"
PID_A=$STARTED_PID
bench_start_abx abx-b "$TMP/b/abx.yaml" "$PORT_B"
PID_B=$STARTED_PID

# sanity: one request each
check() { # what expected-status response
    local got=${3%% *}
    [ "$got" = "$2" ] || fail "$1 answered $3 (expected $2)"
}
for side in A B; do
    port=$PORT_A && [ $side = B ] && port=$PORT_B
    r=$(http "$port" GET "/files/stat?path=f1k.txt" "$TOKEN")
    check "$side files.stat f1k.txt" 200 "$r"
    grep -q '"size": *1024' <<<"$r" || fail "$side files.stat did not report size 1024: $r"
    check "$side files.stat without a token" 401 "$(http "$port" GET "/files/stat?path=f1k.txt")"
    check "$side files.stat /etc/hostname" 403 "$(http "$port" GET "/files/stat?path=/etc/hostname" "$TOKEN")"
done
r=$(http "$PORT_A" GET "/files/stat?path=d1/private/key.txt" "$TOKEN")
check "A files.stat on a denied path" 403 "$r"
grep -q policy.path_denied <<<"$r" || fail "A files.stat on a denied path: $r (expected policy.path_denied)"
check "A files.read (mounted by a statement in the middle)" 200 "$(http "$PORT_A" GET "/files/read?path=d0/private/../../f1k.txt" "$TOKEN")"
[ ${#FAILURES[@]} -eq 0 ] || die "sanity checks failed; not benchmarking: ${FAILURES[*]}"

RUN_NAMES=() RUN_RPS=() RUN_P50=() RUN_P99=() RUN_REQS=() RUN_NON2XX=() RUN_SOCK=()
SUM_A=0 SUM_B=0
for r in $(seq 1 "$ROUNDS"); do
    for side in A B; do
        port=$PORT_A && [ $side = B ] && port=$PORT_B
        wrk_run "$side round $r" "http://127.0.0.1:$port/files/stat?path=f1k.txt" "$TOKEN" "$DURATION"
        RUN_NAMES+=("$side$r") RUN_RPS+=("$WRK_RPS") RUN_P50+=("$WRK_P50") RUN_P99+=("$WRK_P99")
        RUN_REQS+=("$WRK_REQS") RUN_NON2XX+=("$WRK_NON2XX") RUN_SOCK+=("$WRK_SOCK")
        if [ $side = A ]; then SUM_A=$(awk -v s="$SUM_A" -v v="$WRK_RPS" 'BEGIN { print s + v }'); else
            SUM_B=$(awk -v s="$SUM_B" -v v="$WRK_RPS" 'BEGIN { print s + v }'); fi
    done
done
for side in A B; do
    pid=$PID_A && [ $side = B ] && pid=$PID_B
    kill -0 "$pid" 2>/dev/null || fail "abx $side died during the load"
done
RSS_A=$(proc_field "$PID_A" VmHWM) RSS_B=$(proc_field "$PID_B" VmHWM)
bench_stop "$PID_A"
bench_stop "$PID_B"
for side in a b; do
    e=$(log_errors "$TMP/abx-$side.log")
    [ -z "$e" ] || warn "abx $side logged errors: $e"
done

MEAN_A=$(awk -v s="$SUM_A" -v n="$ROUNDS" 'BEGIN { printf "%.0f", s / n }')
MEAN_B=$(awk -v s="$SUM_B" -v n="$ROUNDS" 'BEGIN { printf "%.0f", s / n }')
RATIO=$(ratio "$SUM_A" "$SUM_B")
PAIR_RATIOS=()
for ((i = 0; i < ${#RUN_NAMES[@]}; i += 2)); do
    PAIR_RATIOS+=("$(ratio "${RUN_RPS[$i]}" "${RUN_RPS[$((i + 1))]}")")
done
ge "$RATIO" 0.90 || MISSED+=("policy A/B req/s ratio $RATIO < 0.90")

# ---------------------------------------------------------------- report
echo
echo "abx policy benchmarks — $(nproc) cores, $(date -u +%FT%TZ)"
echo
echo "(a) abx_decide, single thread: ${N_ALLOW:-?} allow + ${N_DENY:-?} deny statements compiled in ${COMPILE_MS:-?} ms;"
echo "    principal bench has ${N_MOUNTING:-?} statements mounting files.stat"
printf '%-22s %-11s %-26s %12s %10s\n' case op outcome decisions/s ns/dec
for i in "${!M_NAMES[@]}"; do
    printf '%-22s %-11s %-26s %12.0f %10.0f\n' "${M_NAMES[$i]}" "${M_OPS[$i]}" "${M_OUT[$i]}" "${M_RATE[$i]}" "${M_NS[$i]}"
done
echo
echo "(b) GET /files/stat?path=f1k.txt, wrk -t2 -c64 -d$DURATION; A: $N_STMTS_A statements, B: 1 statement; ledger $LEDGER"
printf '%-10s %12s %10s %10s\n' run req/s p50 p99
for i in "${!RUN_NAMES[@]}"; do
    printf '%-10s %12.0f %8.2fms %8.2fms\n' "${RUN_NAMES[$i]}" "${RUN_RPS[$i]}" "${RUN_P50[$i]}" "${RUN_P99[$i]}"
done
echo
echo "A mean $MEAN_A req/s, B mean $MEAN_B req/s; A/B ratio: $RATIO (target >= 0.90); per round: ${PAIR_RATIOS[*]}"
echo "peak RSS: A $(mib "${RSS_A:-0}") MiB, B $(mib "${RSS_B:-0}") MiB"

BODY="$TMP/body.json"
{
    printf '  "micro": {"statements": %s, "allow": %s, "deny": %s, "mounting_files_stat": %s, "compile_ms": %s, "seconds": %s, "cases": [\n' \
        "$STATEMENTS" "${N_ALLOW:-0}" "${N_DENY:-0}" "${N_MOUNTING:-0}" "${COMPILE_MS:-0}" "$MICRO_S"
    for i in "${!M_NAMES[@]}"; do
        [ "$i" = 0 ] || printf ',\n'
        printf '    {"name": %s, "op": %s, "outcome": %s, "decisions": %s, "decisions_per_sec": %s, "ns_per_decision": %s}' \
            "$(json_str "${M_NAMES[$i]}")" "$(json_str "${M_OPS[$i]}")" "$(json_str "${M_OUT[$i]}")" "${M_COUNT[$i]}" \
            "${M_RATE[$i]}" "${M_NS[$i]}"
    done
    printf '\n  ]},\n'
    printf '  "wrk": {"threads": 2, "connections": 64, "duration": "%s", "url": "/files/stat?path=f1k.txt"},\n' "$DURATION"
    printf '  "config_a_statements": %s,\n  "ledger": "%s",\n  "runs": [\n' "$N_STMTS_A" "$LEDGER"
    for i in "${!RUN_NAMES[@]}"; do
        [ "$i" = 0 ] || printf ',\n'
        printf '    {"name": "%s", "requests_per_sec": %s, "p50_ms": %s, "p99_ms": %s, "requests": %s, "non_2xx_3xx": %s, "socket_errors": %s}' \
            "${RUN_NAMES[$i]}" "${RUN_RPS[$i]}" "${RUN_P50[$i]}" "${RUN_P99[$i]}" "${RUN_REQS[$i]}" "${RUN_NON2XX[$i]}" \
            "$(json_str "${RUN_SOCK[$i]}")"
    done
    printf '\n  ],\n'
    printf '  "mean_rps_a": %s,\n  "mean_rps_b": %s,\n' "$MEAN_A" "$MEAN_B"
    printf '  "ratio_a_b": {"value": %s, "target_min": 0.90, "per_round": %s},\n' "$RATIO" "$(json_nums "${PAIR_RATIOS[@]}")"
    printf '  "peak_rss_kib": {"a": %s, "b": %s},\n' "${RSS_A:-0}" "${RSS_B:-0}"
} >"$BODY"
bench_finish "$BODY"
