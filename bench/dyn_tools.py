#!/usr/bin/python3
"""bench/dyn_tools.py — GET /ops with 0 and with 100 dynamic tools defined (issue 23).

    /usr/bin/python3 bench/dyn_tools.py [path/to/abx]     (default build/abx)

Starts two `abx serve` side by side with the same config: on one, alice defines BENCH_DYN_TOOLS
tools (default 100, each through tools.define: checked, tests run confined); on the other
nobody defines any. Then GET /ops alternates, over one keep-alive connection each, BENCH_DYN_N times (default
500): alice on the server without tools, alice on the one with them (her /ops lists them),
carol beside them (she sees none); it prints p50/p99 of each and the ratios.
The catalog is the cached document; the dynamic tools are spliced into it per call."""
import hashlib
import json
import os
import socket
import subprocess
import sys
import tempfile
import time

import requests

N = int(os.environ.get("BENCH_DYN_N", "500"))
TOOLS = int(os.environ.get("BENCH_DYN_TOOLS", "100"))
TOKEN = "bench-token-0123456789abcdef"
OTHER = "bench-other-0123456789abcdef"   # carol: defines nothing, sees none of alice's tools


def pct(v, p):
    v = sorted(v)
    return v[min(len(v) - 1, int(len(v) * p))]


def free_port():
    s = socket.socket()
    s.bind(("127.0.0.1", 0))
    p = s.getsockname()[1]
    s.close()
    return p


def start(abx, d, ws):
    cfg = {"workspace": ws, "terminal_listen": "off", "ledger": {"enabled": False},
           "auth": {"tokens": [{"principal": "alice", "roles": ["agent"],
                                "token_sha256": hashlib.sha256(TOKEN.encode()).hexdigest()},
                               {"principal": "carol", "roles": ["agent"],
                                "token_sha256": hashlib.sha256(OTHER.encode()).hexdigest()}]},
           "policy": {"allow": [{"ops": ["core.*", "tools.*", "files.*"], "principals": ["alice", "carol"],
                                 "paths": [ws + "/**"]}]}}
    os.makedirs(d, exist_ok=True)
    path = os.path.join(d, "abx.json")
    with open(path, "w") as f:
        json.dump(cfg, f)
    port = free_port()
    env = dict(os.environ, ABX_HOME=os.path.join(d, "home"))
    p = subprocess.Popen([abx, "serve", "--listen", "127.0.0.1:%d" % port, "--config", path],
                         stdout=subprocess.DEVNULL, stderr=open(os.path.join(d, "stderr"), "w"), env=env)
    url = "http://127.0.0.1:%d" % port
    for _ in range(300):
        try:
            if requests.get(url + "/health", timeout=1).status_code == 200:
                return p, url
        except requests.RequestException:
            pass
        time.sleep(0.05)
    p.kill()
    sys.exit("abx did not start: " + open(os.path.join(d, "stderr")).read()[-2000:])


def main():
    abx = os.path.abspath(sys.argv[1] if len(sys.argv) > 1 else "build/abx")
    tmp = tempfile.mkdtemp(prefix="abx-bench-dyn-")
    ws = os.path.join(tmp, "ws")
    os.makedirs(ws)
    h = {"Authorization": "Bearer " + TOKEN, "Content-Type": "application/json"}
    empty, eurl = start(abx, os.path.join(tmp, "a"), ws)
    full, furl = start(abx, os.path.join(tmp, "b"), ws)
    try:
        t0 = time.time()
        for i in range(TOOLS):
            d = {"name": "tool_%03d" % i, "description": "bench tool %d" % i, "language": "python",
                 "parameters": {"type": "object", "properties": {"x": {"type": "integer"}}, "required": ["x"]},
                 "code": "def run(x):\n    return x + %d\n" % i, "tests": [{"args": {"x": 1}, "expect": 1 + i}]}
            r = requests.post(furl + "/ops/tools.define", headers=h, json=d, timeout=60)
            assert r.status_code == 200, r.text
        define_ms = (time.time() - t0) * 1000 / max(TOOLS, 1)
        se, sf, so = requests.Session(), requests.Session(), requests.Session()
        ho = dict(h, Authorization="Bearer " + OTHER)
        ne = len(se.get(eurl + "/ops", headers=h).json()["ops"])
        nf = len(sf.get(furl + "/ops", headers=h).json()["ops"])
        assert nf == ne + TOOLS, (ne, nf)
        te, tf, to = [], [], []
        for _ in range(N):
            for s, url, out, hh in ((se, eurl, te, h), (sf, furl, tf, h), (so, furl, to, ho)):
                a = time.perf_counter()
                r = s.get(url + "/ops", headers=hh)
                out.append((time.perf_counter() - a) * 1000)
                assert r.status_code == 200
        print("tools.define (checked + tests run confined): %.1f ms per tool" % define_ms)
        print("GET /ops, %d ops, 0 dynamic tools:   p50 %.3f ms  p99 %.3f ms" % (ne, pct(te, .5), pct(te, .99)))
        print("GET /ops, %d ops, %d dynamic tools: p50 %.3f ms  p99 %.3f ms" % (nf, TOOLS, pct(tf, .5),
                                                                                   pct(tf, .99)))
        print("GET /ops, another principal beside them:  p50 %.3f ms  p99 %.3f ms" % (pct(to, .5), pct(to, .99)))
        print("ratio p50, the author with %d tools / no tools: %.2f (the answer is %.1fx longer)" % (
            TOOLS, pct(tf, .5) / pct(te, .5), len(sf.get(furl + "/ops", headers=h).content) /
            len(se.get(eurl + "/ops", headers=h).content)))
        print("ratio p50, another principal beside %d tools / no tools: %.2f" % (TOOLS, pct(to, .5) / pct(te, .5)))
    finally:
        for p in (empty, full):
            p.terminate()
            try:
                p.wait(timeout=10)
            except subprocess.TimeoutExpired:
                p.kill()
        subprocess.run(["rm", "-rf", tmp])


if __name__ == "__main__":
    main()
