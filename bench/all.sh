#!/usr/bin/env bash
# bench/all.sh — every abx benchmark in sequence, then one summary table.
#
#   bash bench/all.sh
#
# Runs bench/run.sh (core), bench/policy.sh, bench/exec.sh and bench/transfer.sh one
# after the other (never two at once: they would share the 2 cores), shows their
# output as they go, and prints one table of the headline numbers and targets read from
# the JSON files they wrote in bench/out/. BENCH_REBUILD=1 rebuilds once, before the
# first script. BENCH_ALL_ONLY="policy exec" runs a subset (names: core policy exec
# transfer). Every other BENCH_* variable reaches the scripts (BENCH_TIMEOUT is then a
# limit for each script; BENCH_ALL_TIMEOUT, default 3600 s, for the whole run).
#
# Exit status: 0 when every script ran cleanly (a skipped transfer counts as clean),
# 1 when any run was invalid or failed; with BENCH_STRICT=1 also when a target was missed.
set -uo pipefail
BENCH_DIR=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
ROOT=$(cd "$BENCH_DIR/.." && pwd)

if [ -z "${BENCH_UNDER_TIMEOUT_all:-}" ]; then
    export BENCH_UNDER_TIMEOUT_all=1
    exec timeout --foreground -k 30 "${BENCH_ALL_TIMEOUT:-3600}" bash "${BASH_SOURCE[0]}" "$@"
fi

exec {LOGFD}>&2
log() { printf 'all: %s\n' "$*" >&"$LOGFD"; }
TMP=$(mktemp -d /tmp/abx-bench-all.XXXXXX)
CHILD=""
# shellcheck disable=SC2317 # invoked by the trap
cleanup() {
    local rc=$?
    trap - EXIT INT TERM
    if [ -n "$CHILD" ] && kill -0 "$CHILD" 2>/dev/null; then
        kill -TERM "$CHILD" 2>/dev/null # the script's own trap stops what it started
        for _ in $(seq 1 200); do
            kill -0 "$CHILD" 2>/dev/null || break
            sleep 0.1
        done
        kill -KILL "$CHILD" 2>/dev/null
        wait "$CHILD" 2>/dev/null
    fi
    rm -rf "$TMP"
    exit "$rc"
}
trap cleanup EXIT
trap 'log "interrupted"; exit 130' INT
trap 'log "stopped (SIGTERM or the BENCH_ALL_TIMEOUT limit)"; exit 143' TERM

ONLY=${BENCH_ALL_ONLY:-core policy exec transfer}
NAMES=() SCRIPTS=()
for n in core policy exec transfer; do
    case " $ONLY " in *" $n "*) ;; *) continue ;; esac
    NAMES+=("$n")
    if [ "$n" = core ]; then SCRIPTS+=("$BENCH_DIR/run.sh"); else SCRIPTS+=("$BENCH_DIR/$n.sh"); fi
done
[ ${#NAMES[@]} -gt 0 ] || { log "BENCH_ALL_ONLY names none of: core policy exec transfer"; exit 2; }

REBUILD=${BENCH_REBUILD:-0}
RCS=() RESULTS=() DURS=()
START=$SECONDS
for i in "${!NAMES[@]}"; do
    name=${NAMES[$i]}
    log "=== $name: bash ${SCRIPTS[$i]#"$ROOT"/}"
    t0=$SECONDS
    # the scripts' own timeout guards must not think they already run under timeout(1)
    env -u BENCH_UNDER_TIMEOUT -u BENCH_UNDER_TIMEOUT_all BENCH_REBUILD="$REBUILD" \
        bash "${SCRIPTS[$i]}" > >(tee "$TMP/$name.out") 2>&1 &
    CHILD=$!
    wait "$CHILD"
    rc=$?
    CHILD=""
    REBUILD=0
    sleep 0.2 # let tee finish writing
    RCS+=("$rc") DURS+=("$((SECONDS - t0))")
    res=$(sed -n 's/^results: //p' "$TMP/$name.out" | tail -n 1)
    [ -n "$res" ] && res="$ROOT/$res"
    RESULTS+=("${res:-none}")
    log "=== $name: exit $rc after $((SECONDS - t0)) s"
done

# ---------------------------------------------------------------- summary
ARGS=()
for i in "${!NAMES[@]}"; do
    ARGS+=("${NAMES[$i]}" "${RCS[$i]}" "${RESULTS[$i]}" "${DURS[$i]}")
done
PY=/usr/bin/python3
[ -x "$PY" ] || PY=python3
echo
echo "abx benchmarks — summary ($(nproc) cores, $(date -u +%FT%TZ), $((SECONDS - START)) s)"
"$PY" - "${ARGS[@]}" <<'PYEOF'
import json
import sys

args = sys.argv[1:]
rows = []  # (benchmark, metric, value, target, status)


def status(ok):
    return "ok" if ok else "MISSED"


def core(d):
    http = {h["name"]: h for h in d.get("http", [])}
    for name in ("abx GET /health", "abx files.stat", "abx files.read", "nginx GET /f1k.txt"):
        h = http.get(name)
        if h:
            rows.append(("core", name + " req/s", "%.0f (p99 %.2f ms)" % (h["requests_per_sec"], h["p99_ms"]), "", ""))
    r = d["files_read_nginx_ratio"]
    rows.append(("core", "files.read / nginx req/s", "%.2f" % r["value"], ">= 0.50", status(r["value"] >= 0.50)))
    s = d["start_to_serving_ms"]
    rows.append(("core", "start-to-serving median", "%.2f ms (nginx %.2f ms)" % (s["median"], s["nginx_reference"]["median"]),
                 "<= 20 ms", status(s["median"] <= 20)))
    rss = d["rss"]
    rows.append(("core", "idle RSS", "%.1f MiB" % rss["idle_mib"], "<= 10 MiB", status(rss["idle_mib"] <= 10)))
    rows.append(("core", "after-load RSS (peak)", "%.1f MiB (%.1f MiB)" % (rss["after_load_mib"], rss["peak_kib"] / 1024), "", ""))


def policy(d):
    m = d["micro"]
    for c in m["cases"]:
        if c["name"].startswith("mixed"):
            rows.append(("policy", "abx_decide, %d statements, mixed" % m["statements"],
                         "%.0f decisions/s (%.1f us each)" % (c["decisions_per_sec"], c["ns_per_decision"] / 1000), "", ""))
    rows.append(("policy", "files.stat req/s A (%d stmts) / B (1)" % d["config_a_statements"],
                 "%.0f / %.0f" % (d["mean_rps_a"], d["mean_rps_b"]), "", ""))
    r = d["ratio_a_b"]
    rows.append(("policy", "A / B ratio", "%.2f (rounds %s)" % (r["value"], " ".join("%.2f" % x for x in r["per_round"])),
                 ">= 0.90", status(r["value"] >= 0.90)))


def exec_(d):
    f, a = d["floor_us"], d["abx_us"]
    rows.append(("exec", "posix_spawn floor p50 / p99", "%.0f / %.0f us" % (f["p50"], f["p99"]), "", ""))
    rows.append(("exec", "commands.run p50 / p99", "%.0f / %.0f us" % (a["p50"], a["p99"]),
                 "p50 <= %.0f us" % d["target"]["abx_p50_max_us"], status(d["target"]["met"])))
    o = d.get("over_50ms")
    if o:
        rows.append(("exec", "calls over 50 ms: abx / floor", "%d / %d of %d (max %.0f us)" % (o["abx"], o["floor"], a["n"], o["abx_max_us"]),
                     "", "WARN" if o["abx"] > o["floor"] else ""))


def transfer(d):
    if "skipped" in d:
        rows.append(("transfer", "files.upload / files.download", "skipped: " + d["skipped"], "", "skipped"))
        return
    for k in ("upload", "download"):
        x = d[k]
        rows.append(("transfer", "files.%s MB/s (floor, nginx)" % k,
                     "%.0f (%.0f, %.0f)" % (x["median_abx"], x["median_floor"], x["median_nginx"]), "", ""))
        rows.append(("transfer", "files.%s / floor" % k, "%.2f (/ nginx %.2f)" % (x["ratio"], x["ratio_to_nginx"]),
                     ">= 0.70", status(x["ratio"] >= 0.70)))
    r = d["rss_kib"]
    rows.append(("transfer", "server peak RSS (sampled, VmHWM)", "%.1f MiB, %.1f MiB" % (r["peak_sampled"] / 1024, r["vmhwm"] / 1024),
                 "< 50 MiB", status(r["peak_max"] < 50 * 1024)))


handlers = {"core": core, "policy": policy, "exec": exec_, "transfer": transfer}
invalid = []
for i in range(0, len(args), 4):
    name, rc, path, secs = args[i], int(args[i + 1]), args[i + 2], args[i + 3]
    d = None
    if path != "none":
        try:
            with open(path) as fh:
                d = json.load(fh)
        except (OSError, ValueError) as e:
            rows.append((name, "results", "unreadable: %s" % e, "", "INVALID"))
    if d is None:
        rows.append((name, "run", "exit %d after %s s, no results" % (rc, secs), "", "FAILED"))
        invalid.append(name)
        continue
    try:
        handlers[name](d)
    except (KeyError, TypeError, ValueError) as e:
        rows.append((name, "results", "cannot read field %s" % e, "", "INVALID"))
    if not d.get("ok", False):
        rows.append((name, "run", "RUN INVALID: " + "; ".join(d.get("failures", []))[:200], "", "INVALID"))
        invalid.append(name)
    for w in d.get("warnings", []):
        rows.append((name, "warning", w[:200], "", "WARN"))
    rows.append((name, "results file", "bench/" + path.split("/bench/", 1)[-1], "", ""))

w = [max(len(r[c]) for r in rows + [("benchmark", "metric", "value", "target", "status")]) for c in range(5)]
w[2] = min(w[2], 60)
fmt = "%-{}s  %-{}s  %-{}s  %-{}s  %s".format(w[0], w[1], w[2], w[3])
print(fmt % ("benchmark", "metric", "value", "target", "status"))
print(fmt % (tuple("-" * x for x in w[:4]) + ("------",)))
for r in rows:
    print(fmt % r)
missed = sum(1 for r in rows if r[4] == "MISSED")
print()
print("targets missed: %d; invalid or failed runs: %s" % (missed, ", ".join(invalid) if invalid else "none"))
PYEOF

FAILED=0
for rc in "${RCS[@]}"; do
    [ "$rc" = 0 ] || FAILED=1
done
exit "$FAILED"
