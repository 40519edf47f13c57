#!/usr/bin/python3
"""bench/egress_e2e.py — a process's network through abx's egress proxy vs direct (issue 17).

    /usr/bin/python3 bench/egress_e2e.py [path/to/abx]     (default build/abx)

Starts an HTTP upstream on loopback (abx's namespace) and one `abx serve` with two
principals: `direct` (net: true) and `proxied` (net: {allow: [up.test:PORT]}, up.test
pinned to 127.0.0.1 by egress.resolve). Inside commands.run, curl fetches the same URL
(`--resolve up.test:PORT:127.0.0.1`, which the proxied side's proxy ignores: the proxy
resolves), interleaved over BENCH_EG_ROUNDS rounds:
  - a BENCH_EG_MIB MiB download: direct, HTTP forward proxy, CONNECT (curl -p); MB/s
    from curl's speed_download, best round; target proxy >= 0.70 x direct;
  - BENCH_EG_SMALL small requests, a new curl (and connection) each: p50 of curl's
    time_total; target added p50 <= 1 ms.
On loopback "direct" moves memory to memory, so the ratio is the proxy's CPU cost, an
upper bound of what a real download loses. Writes bench/out/egress_e2e-<ts>.json."""
import hashlib
import http.server
import json
import os
import socket
import statistics
import subprocess
import sys
import tempfile
import threading
import time

import requests

MIB = int(os.environ.get("BENCH_EG_MIB", "100"))
ROUNDS = int(os.environ.get("BENCH_EG_ROUNDS", "3"))
SMALL = int(os.environ.get("BENCH_EG_SMALL", "200"))
TOKENS = {"direct": "bench-direct-0123456789abcdef", "proxied": "bench-proxied-0123456789abcd"}
CHUNK = b"\0" * (1 << 20)


class Upstream(http.server.BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"

    def do_GET(self):
        n = MIB << 20 if self.path == "/big" else 64
        self.send_response(200)
        self.send_header("Content-Length", str(n))
        self.end_headers()
        while n > 0:
            k = min(n, len(CHUNK))
            self.wfile.write(CHUNK[:k])
            n -= k

    def log_message(self, *a):
        pass


def main():
    binary = sys.argv[1] if len(sys.argv) > 1 else "build/abx"
    up = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Upstream)
    threading.Thread(target=up.serve_forever, daemon=True).start()
    uport = up.server_address[1]
    tmp = tempfile.mkdtemp(prefix="abx-bench-eg-")
    ws = os.path.join(tmp, "ws")
    os.mkdir(ws)
    stmt = {"ops": ["commands.*"], "paths": [ws + "/**"], "commands": {"allow": ["sh *"], "shell": True}}
    cfg = {"workspace": ws, "terminal_listen": "off", "ledger": {"enabled": False},
           "egress": {"resolve": {"up.test": "127.0.0.1"}},
           "auth": {"tokens": [{"principal": p, "roles": ["agent"],
                                "token_sha256": hashlib.sha256(t.encode()).hexdigest()} for p, t in TOKENS.items()]},
           "policy": {"allow": [dict(stmt, principals=["direct"], net=True),
                                dict(stmt, principals=["proxied"], net={"allow": ["up.test:%d" % uport]})]}}
    with open(os.path.join(tmp, "abx.json"), "w") as f:
        json.dump(cfg, f)
    s = socket.socket()
    s.bind(("127.0.0.1", 0))
    port = s.getsockname()[1]
    s.close()
    env = dict(os.environ, ABX_HOME=os.path.join(tmp, "home"))
    srv = subprocess.Popen([binary, "serve", "--listen", "127.0.0.1:%d" % port, "--config",
                            os.path.join(tmp, "abx.json")], env=env, stderr=subprocess.DEVNULL)
    try:
        for _ in range(100):
            try:
                requests.get("http://127.0.0.1:%d/health" % port, timeout=1)
                break
            except requests.RequestException:
                time.sleep(0.05)

        def run(who, command):
            r = requests.post("http://127.0.0.1:%d/commands/run" % port, json={"command": command, "timeout": 300},
                              headers={"Authorization": "Bearer " + TOKENS[who]}, timeout=330)
            j = r.json()
            assert r.status_code == 200 and j.get("exit_code") == 0, (who, command, r.text[:500])
            return j["stdout"]

        url = "http://up.test:%d" % uport
        curl = "curl -s -o /dev/null --resolve up.test:%d:127.0.0.1 " % uport
        big = {"direct": [], "forward": [], "connect": []}
        small = {"direct": [], "proxied": []}
        for _ in range(ROUNDS):
            big["direct"].append(float(run("direct", curl + "-w '%%{speed_download}' %s/big" % url)))
            big["forward"].append(float(run("proxied", curl + "-w '%%{speed_download}' %s/big" % url)))
            big["connect"].append(float(run("proxied", curl + "-p -w '%%{speed_download}' %s/big" % url)))
            loop = "for i in $(seq %d); do %s -w '%%{time_total}\\n' %s/small; done" % (SMALL // ROUNDS, curl, url)
            for who in ("direct", "proxied"):
                small[who] += [float(x) for x in run(who, loop).split()]
        mbs = {k: max(v) / 1e6 for k, v in big.items()}
        p50 = {k: statistics.median(v) * 1e6 for k, v in small.items()}
        res = {"mib": MIB, "rounds": ROUNDS, "small_requests": len(small["direct"]),
               "direct_mbs": round(mbs["direct"], 1), "forward_mbs": round(mbs["forward"], 1),
               "connect_mbs": round(mbs["connect"], 1),
               "forward_ratio": round(mbs["forward"] / mbs["direct"], 3),
               "connect_ratio": round(mbs["connect"] / mbs["direct"], 3),
               "direct_p50_us": round(p50["direct"]), "proxied_p50_us": round(p50["proxied"]),
               "added_p50_us": round(p50["proxied"] - p50["direct"])}
        print("(a) %d MiB in a confined curl, best of %d: direct %.0f MB/s, forward proxy %.0f MB/s (%.2fx), "
              "CONNECT %.0f MB/s (%.2fx) (target >= 0.70x)" % (MIB, ROUNDS, mbs["direct"], mbs["forward"],
                                                             res["forward_ratio"], mbs["connect"], res["connect_ratio"]))
        print("(b) %d small requests, a new curl each: p50 direct %d us, proxied %d us, added %d us (target <= 1000)"
              % (res["small_requests"], res["direct_p50_us"], res["proxied_p50_us"], res["added_p50_us"]))
        out = os.path.join(os.path.dirname(os.path.abspath(__file__)), "out")
        os.makedirs(out, exist_ok=True)
        path = os.path.join(out, "egress_e2e-%s.json" % time.strftime("%Y%m%dT%H%M%SZ", time.gmtime()))
        with open(path, "w") as f:
            json.dump(res, f, indent=2)
        print("results:", path)
        missed = [k for k, ok in (("forward ratio", res["forward_ratio"] >= 0.7),
                                  ("connect ratio", res["connect_ratio"] >= 0.7),
                                  ("added p50", res["added_p50_us"] <= 1000)) if not ok]
        if missed:
            print("MISSED:", ", ".join(missed))
    finally:
        srv.terminate()
        srv.wait(10)
        up.shutdown()
        subprocess.run(["rm", "-rf", tmp])


if __name__ == "__main__":
    main()
