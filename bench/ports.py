#!/usr/bin/python3
"""bench/ports.py — GET through the ports proxy against GET straight to the server (issue 25).

    /usr/bin/python3 bench/ports.py [path/to/abx]     (default build/abx)

Starts `abx serve` on a free port with process.* and ports.* (net on, so the server shares
the host's network namespace and its whole /proc/net/tcp), starts `python3 -m http.server`
through process.start, then measures side by side BENCH_P_N GETs of a small file:
  - straight to the server (the floor), p50;
  - through GET /ports/{port}/a.txt, p50; and the ratio.
Environment: BENCH_P_N (default 200)."""
import hashlib
import json
import os
import shutil
import socket
import statistics
import subprocess
import sys
import tempfile
import time

import requests

N = int(os.environ.get("BENCH_P_N", "200"))
TOKEN = "bench-token-0123456789abcdef"


def free_port():
    s = socket.socket()
    s.bind(("127.0.0.1", 0))
    p = s.getsockname()[1]
    s.close()
    return p


def timed(sess, url, headers):
    ts = []
    for _ in range(N):
        t = time.perf_counter()
        r = sess.get(url, headers=headers, timeout=30)
        ts.append((time.perf_counter() - t) * 1000)
        assert r.status_code == 200 and r.text == "x\n", r.text
    return statistics.median(ts)


def main():
    binary = sys.argv[1] if len(sys.argv) > 1 else "build/abx"
    tmp = tempfile.mkdtemp(prefix="abx-bench-p-")
    ws = os.path.join(tmp, "ws")
    os.mkdir(ws)
    with open(os.path.join(ws, "a.txt"), "w") as f:
        f.write("x\n")
    cfg = {"workspace": ws, "terminal_listen": "off",
           "auth": {"tokens": [{"principal": "b", "roles": ["agent"],
                                "token_sha256": hashlib.sha256(TOKEN.encode()).hexdigest()}]},
           "policy": {"allow": [{"ops": ["process.*", "ports.*"], "principals": ["b"], "paths": [ws + "/**"],
                                 "commands": {"allow": ["python3 *"]}, "net": True, "ports": ["*"]}]}}
    with open(os.path.join(tmp, "abx.json"), "w") as f:
        json.dump(cfg, f)
    port, up = free_port(), free_port()
    env = dict(os.environ, ABX_HOME=os.path.join(tmp, "home"))
    srv = subprocess.Popen([binary, "serve", "--listen", "127.0.0.1:%d" % port, "--config",
                            os.path.join(tmp, "abx.json")], env=env, stderr=subprocess.DEVNULL)
    base = "http://127.0.0.1:%d" % port
    h = {"Authorization": "Bearer " + TOKEN}
    sess = requests.Session()
    try:
        for _ in range(200):
            try:
                sess.get(base + "/health", timeout=1)
                break
            except requests.RequestException:
                time.sleep(0.05)
        r = sess.post(base + "/process", headers=h, timeout=10,
                      json={"command": "python3 -m http.server %d --bind 127.0.0.1 --directory %s" % (up, ws)})
        r.raise_for_status()
        pid = r.json()["pid"]
        for _ in range(200):
            if any(p["port"] == up for p in sess.get(base + "/ports", headers=h).json().get("ports", [])):
                break
            time.sleep(0.05)
        with open("/proc/net/tcp") as f:
            rows = sum(1 for _ in f) - 1
        direct = timed(sess, "http://127.0.0.1:%d/a.txt" % up, {})
        proxied = timed(sess, base + "/ports/%d/a.txt" % up, h)
        print("ports bench (N=%d, host /proc/net/tcp rows: %d)" % (N, rows))
        print("  direct GET            p50 %7.2f ms   (floor)" % direct)
        print("  GET /ports/{port}/    p50 %7.2f ms   = %.1f x direct" % (proxied, proxied / direct))
        sess.post(base + "/process/%d/signal" % pid, headers=h, json={"signal": "KILL"})
    finally:
        srv.terminate()
        srv.wait(10)
        shutil.rmtree(tmp, ignore_errors=True)


if __name__ == "__main__":
    main()
