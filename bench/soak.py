#!/usr/bin/python3
"""bench/soak.py — a bounded soak of one abx server under mixed traffic.

    /usr/bin/python3 bench/soak.py --abx build-bench/abx [--duration 600] [--interval 30] [--workers 6]

Traffic (each worker loops, picking by weight): files.read / stat / list, files.write of
1 KiB, commands.run (echo), commands.stream (SSE read to the end), a terminal created,
connected over WebSocket, used, and dropped (half deleted, half only disconnected and
deleted later), process.start + output of a short process, ledger.timeline.

Every interval it prints one line: RSS, open fds, threads, ledger bytes, requests,
errors and p50/p99 latency of the interval. At the end it fails (exit 1) when:
  - any request errored unexpectedly (a status other than the op's success),
  - RSS keeps growing: each of the last 4 samples above the one before and the last more
    than 25% above the first sample after warm-up,
  - open fds keep growing: the last sample more than 16 above the warm-up sample,
  - p99 drifts: an interval's p99 more than 2x the first (warm-up excluded) interval's
    p99 (floored at 5 ms, since a 2x drift of a sub-millisecond p99 is noise).
Only loopback; the server and everything it started are stopped at the end.
"""
import argparse
import json
import os
import random
import shutil
import signal
import socket
import statistics
import subprocess
import sys
import tempfile
import threading
import time

import requests

try:
    import websocket  # Debian python3-websocket
except ImportError:  # the terminal part is skipped, and says so
    websocket = None

TOKEN = "soak-token-0123456789abcdef0123"


def free_port():
    s = socket.socket()
    s.bind(("127.0.0.1", 0))
    p = s.getsockname()[1]
    s.close()
    return p


def proc_stats(pid):
    rss = threads = 0
    with open("/proc/%d/status" % pid) as f:
        for line in f:
            if line.startswith("VmRSS:"):
                rss = int(line.split()[1])
            elif line.startswith("Threads:"):
                threads = int(line.split()[1])
    fds = len(os.listdir("/proc/%d/fd" % pid))
    return rss, fds, threads


def ledger_bytes(path):
    total = 0
    for p in (path, path + "-wal", path + "-shm"):
        if os.path.exists(p):
            total += os.path.getsize(p)
    arch = path + ".archive"
    if os.path.isdir(arch):
        total += sum(os.path.getsize(os.path.join(arch, n)) for n in os.listdir(arch))
    return total


class Stats:
    def __init__(self):
        self.mu = threading.Lock()
        self.lat = []
        self.errors = []
        self.count = 0

    def add(self, what, seconds, ok, detail=""):
        with self.mu:
            self.count += 1
            self.lat.append(seconds)
            if not ok:
                self.errors.append("%s: %s" % (what, detail[:300]))

    def take(self):
        with self.mu:
            lat, self.lat = self.lat, []
            n, self.count = self.count, 0
            return lat, n


def pct(xs, p):
    if not xs:
        return 0.0
    xs = sorted(xs)
    return xs[min(len(xs) - 1, int(p / 100.0 * len(xs)))]


def worker(base, ws, stop, st, k, tport):
    s = requests.Session()
    s.headers["Authorization"] = "Bearer " + TOKEN
    rnd = random.Random(k)
    names = ["f%d.txt" % i for i in range(20)]
    pending_terms = []

    def call(what, method, path, expect=200, **kw):
        t0 = time.time()
        try:
            r = s.request(method, base + path, timeout=30, **kw)
            body = r.content
            ok = r.status_code == expect
            st.add(what, time.time() - t0, ok, "%d %s" % (r.status_code, body[:200]))
            return r if ok else None
        except requests.RequestException as e:
            st.add(what, time.time() - t0, False, repr(e))
            return None

    while not stop.is_set():
        x = rnd.random()
        name = rnd.choice(names)
        if x < 0.25:
            call("read", "GET", "/files/read", params={"path": "%s/%s" % (ws, name)}, expect=200)
        elif x < 0.40:
            call("stat", "GET", "/files/stat", params={"path": "%s/%s" % (ws, name)})
        elif x < 0.45:
            call("list", "GET", "/files/list", params={"path": ws})
        elif x < 0.60:
            call("write", "POST", "/files/write", json={"path": "%s/%s" % (ws, name), "content": "x" * 1024})
        elif x < 0.70:
            call("run", "POST", "/commands/run", json={"command": "echo soak %d" % k})
        elif x < 0.77:
            t0 = time.time()
            try:
                with s.post(base + "/commands/stream", json={"command": "echo streamed"}, stream=True,
                            timeout=30) as r:
                    data = b"".join(r.iter_content(4096))
                    st.add("stream", time.time() - t0, r.status_code == 200 and b"streamed" in data,
                           "%d %r" % (r.status_code, data[:200]))
            except requests.RequestException as e:
                st.add("stream", time.time() - t0, False, repr(e))
        elif x < 0.82:
            r = call("process", "POST", "/process", json={"command": "echo bg"})
            if r is not None:
                pid = r.json().get("pid")
                time.sleep(0.05)
                call("process.output", "GET", "/process/%s/output" % pid)
        elif x < 0.87 and websocket is not None:
            r = call("terminal.create", "POST", "/terminal", json={"command": "bash --norc --noprofile"})
            if r is not None:
                tid = r.json()["id"]
                t0 = time.time()
                ok = False
                try:
                    c = websocket.create_connection("ws://127.0.0.1:%d/terminal/%d" % (tport, tid),
                                                    header=["Authorization: Bearer " + TOKEN], timeout=5,
                                                    suppress_origin=True)
                    c.send_binary(b"echo soak-term\n")
                    buf = b""
                    deadline = time.time() + 5
                    while time.time() < deadline and b"soak-term\r\n" not in buf:
                        op, data = c.recv_data()
                        buf += data or b""
                    ok = b"soak-term" in buf
                    c.close()  # dropped: the terminal lives on until deleted
                except Exception as e:  # noqa: BLE001 — recorded as an error
                    buf = repr(e).encode()
                st.add("terminal.connect", time.time() - t0, ok, repr(buf[-200:]))
                if rnd.random() < 0.5:
                    call("terminal.delete", "DELETE", "/terminal/%d" % tid)
                else:
                    pending_terms.append(tid)
            if len(pending_terms) > 3:
                call("terminal.delete", "DELETE", "/terminal/%d" % pending_terms.pop(0))
        else:
            call("timeline", "GET", "/ledger/timeline", params={"limit": 20})
    for tid in pending_terms:
        call("terminal.delete", "DELETE", "/terminal/%d" % tid)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--abx", required=True)
    ap.add_argument("--duration", type=float, default=float(os.environ.get("SOAK_SECONDS", 600)))
    ap.add_argument("--interval", type=float, default=float(os.environ.get("SOAK_INTERVAL", 30)))
    ap.add_argument("--workers", type=int, default=6)
    ap.add_argument("--warmup", type=int, default=1, help="intervals excluded from the growth baselines")
    a = ap.parse_args()

    tmp = tempfile.mkdtemp(prefix="abx-soak-")
    ws = os.path.join(tmp, "ws")
    os.makedirs(ws)
    for i in range(20):
        with open(os.path.join(ws, "f%d.txt" % i), "w") as f:
            f.write("y" * 1024)
    port, tport = free_port(), free_port()
    led = os.path.join(tmp, "ledger.db")
    cfg = {
        "listen": "127.0.0.1:%d" % port, "terminal_listen": "127.0.0.1:%d" % tport, "workspace": ws,
        "ledger": {"path": led},
        "auth": {"tokens": [{"principal": "soak", "roles": ["agent"], "token_env": "ABX_SOAK_TOKEN"},
                            {"principal": "auditor", "roles": ["admin"], "token_env": "ABX_SOAK_TOKEN2"}]},
        "policy": {"allow": [
            {"ops": ["core.*", "ledger.*", "files.*", "process.*", "terminal.*"], "principals": ["soak"],
             "paths": [ws + "/**"], "commands": {"allow": ["echo *", "bash *"]}},
            {"ops": ["commands.run", "commands.stream"], "principals": ["soak"], "paths": [ws + "/**"],
             "commands": {"allow": ["echo *"]}},
        ]},
    }
    cfgp = os.path.join(tmp, "abx.yaml")
    with open(cfgp, "w") as f:
        json.dump(cfg, f)
    env = dict(os.environ, ABX_SOAK_TOKEN=TOKEN, ABX_SOAK_TOKEN2=TOKEN + "-admin", ABX_HOME=os.path.join(tmp, "home"))
    log = open(os.path.join(tmp, "abx.log"), "w")
    srv = subprocess.Popen([a.abx, "serve", "--config", cfgp], stdout=log, stderr=subprocess.STDOUT, env=env,
                           start_new_session=True)
    base = "http://127.0.0.1:%d" % port
    rc = 1
    try:
        deadline = time.time() + 15
        while True:
            try:
                if requests.get(base + "/health", timeout=2).status_code == 200:
                    break
            except requests.RequestException:
                pass
            if time.time() > deadline or srv.poll() is not None:
                raise SystemExit("abx did not start: " + open(os.path.join(tmp, "abx.log")).read()[-2000:])
            time.sleep(0.1)
        if websocket is None:
            print("soak: python3-websocket missing: terminals are not part of this run", flush=True)
        st = Stats()
        stop = threading.Event()
        threads = [threading.Thread(target=worker, args=(base, ws, stop, st, k, tport), daemon=True)
                   for k in range(a.workers)]
        for t in threads:
            t.start()
        samples = []
        t_end = time.time() + a.duration
        print("soak: %d workers for %.0fs, a sample every %.0fs (pid %d)" % (a.workers, a.duration, a.interval,
                                                                             srv.pid), flush=True)
        print("%8s %9s %5s %7s %10s %8s %6s %8s %8s" % ("t(s)", "rss(KiB)", "fds", "threads", "ledger(B)",
                                                        "requests", "errors", "p50(ms)", "p99(ms)"), flush=True)
        t0 = time.time()
        while time.time() < t_end:
            time.sleep(min(a.interval, max(0.0, t_end - time.time())))
            lat, n = st.take()
            rss, fds, th = proc_stats(srv.pid)
            row = {"t": time.time() - t0, "rss": rss, "fds": fds, "threads": th, "ledger": ledger_bytes(led),
                   "requests": n, "errors": len(st.errors), "p50": pct(lat, 50) * 1000, "p99": pct(lat, 99) * 1000}
            samples.append(row)
            print("%8.0f %9d %5d %7d %10d %8d %6d %8.2f %8.2f" % (row["t"], rss, fds, th, row["ledger"], n,
                                                                 row["errors"], row["p50"], row["p99"]), flush=True)
        stop.set()
        for t in threads:
            t.join(60)
        problems = []
        if st.errors:
            problems.append("%d requests failed, e.g. %s" % (len(st.errors), st.errors[:3]))
        base_s = samples[min(a.warmup, len(samples) - 1)]
        last = samples[-1]
        tail = samples[-5:]
        if len(tail) == 5 and all(tail[i + 1]["rss"] > tail[i]["rss"] * 1.01 for i in range(4)) and \
                last["rss"] > base_s["rss"] * 1.25:
            problems.append("RSS keeps growing: %d KiB after warm-up, %d KiB at the end" % (base_s["rss"],
                                                                                          last["rss"]))
        if last["fds"] > base_s["fds"] + 16:
            problems.append("open fds grew from %d to %d" % (base_s["fds"], last["fds"]))
        p99_base = max(base_s["p99"], 5.0)
        worst = max(samples[a.warmup:] or samples, key=lambda r: r["p99"])
        if worst["p99"] > 2 * p99_base:
            problems.append("p99 drifted from %.1f ms to %.1f ms (at %.0fs)" % (base_s["p99"], worst["p99"],
                                                                               worst["t"]))
        if srv.poll() is not None:
            problems.append("abx exited with %s" % srv.returncode)
        summary = {"duration_s": a.duration, "workers": a.workers, "samples": samples, "problems": problems}
        out = os.environ.get("SOAK_OUT")
        if out:
            with open(out, "w") as f:
                json.dump(summary, f, indent=1)
        if problems:
            print("soak: FAILED\n  " + "\n  ".join(problems), flush=True)
        else:
            print("soak: ok — RSS %d→%d KiB, fds %d→%d, threads %d→%d, p99 %.1f→%.1f ms, %d requests" % (
                base_s["rss"], last["rss"], base_s["fds"], last["fds"], base_s["threads"], last["threads"],
                base_s["p99"], last["p99"], sum(r["requests"] for r in samples)), flush=True)
            rc = 0
    finally:
        try:
            os.killpg(srv.pid, signal.SIGTERM)
            srv.wait(20)
        except (ProcessLookupError, subprocess.TimeoutExpired):
            os.killpg(srv.pid, signal.SIGKILL)
        log.close()
        if os.environ.get("SOAK_KEEP_TMP") != "1":
            shutil.rmtree(tmp, ignore_errors=True)
        else:
            print("soak: kept %s" % tmp)
    return rc


if __name__ == "__main__":
    sys.exit(main())
