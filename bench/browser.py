#!/usr/bin/python3
"""bench/browser.py — browser.* against driving the same Chromium over CDP directly (issue 22).

    /usr/bin/python3 bench/browser.py [path/to/abx]     (default build/abx)

A local http.server serves a page with a few subresources (3 images, a script, a style
sheet). Measured in the same run, side by side:
  - create → first snapshot: abx (browser.create + browser.snapshot: a confined Chromium,
    auto-attach and Fetch guarding) against a bare Chromium started by this script over
    the same pipe (start, a tab, Accessibility.getFullAXTree), p50 of BENCH_B_START runs;
  - navigate + snapshot p50/p90 of the local page over BENCH_B_N rounds: abx; the bare
    driver; the bare driver with Fetch interception of every request (continued at once:
    what the Fetch pause costs, and the floor of a design where abx would fetch and
    fulfil each request itself).
Environment: BENCH_B_N (default 30), BENCH_B_START (default 3)."""
import hashlib
import http.server
import json
import os
import select
import shutil
import socket
import statistics
import subprocess
import sys
import tempfile
import threading
import time

import requests

N = int(os.environ.get("BENCH_B_N", "30"))
STARTS = int(os.environ.get("BENCH_B_START", "3"))
TOKEN = "bench-token-0123456789abcdef"
CHROMIUM = "/usr/lib/chromium/chromium"
PNG = bytes.fromhex("89504e470d0a1a0a0000000d4948445200000001000000010802000000907753de0000000c4944415408d763f8cf"
                    "c000000301010018dd8db00000000049454e44ae426082")
PAGE = ("<html><head><title>Bench</title><link rel=stylesheet href=/s.css><script src=/a.js></script></head>"
        "<body><h1>Bench page</h1>" + "".join("<p>Paragraph %d with <a href='/p%d'>a link</a></p>" % (i, i)
                                               for i in range(40)) +
        "".join("<img src='/i%d.png' alt='image %d'>" % (i, i) for i in range(3)) +
        "<form><input aria-label=Search><button>Go</button></form></body></html>").encode()


def pct(v, p):
    v = sorted(v)
    return v[min(len(v) - 1, int(len(v) * p))]


class H(http.server.BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"

    def log_message(self, *a):
        pass

    def do_GET(self):
        p = self.path.split("?")[0]
        body, ctype = (PNG, "image/png") if p.endswith(".png") else \
            (b"var x = 1;", "application/javascript") if p.endswith(".js") else \
            (b"h1 { color: #333 }", "text/css") if p.endswith(".css") else (PAGE, "text/html")
        self.send_response(200)
        self.send_header("Content-Type", ctype)
        self.send_header("Content-Length", str(len(body)))
        self.send_header("Cache-Control", "no-store")
        self.end_headers()
        self.wfile.write(body)


class Bare:
    """Chromium over --remote-debugging-pipe, driven directly (no abx, no confinement)."""

    def __init__(self, fetch=False):
        self.dir = tempfile.mkdtemp()
        r1, self.w = os.pipe()
        self.r, w2 = os.pipe()
        for f in (r1, w2):
            os.set_inheritable(f, True)
        a, b = os.dup(r1), os.dup(w2)
        os.set_inheritable(a, True)
        os.set_inheritable(b, True)

        def pre():
            os.dup2(a, 3)
            os.dup2(b, 4)
        self.p = subprocess.Popen([CHROMIUM, "--headless", "--no-sandbox", "--remote-debugging-pipe",
                                   "--user-data-dir=" + self.dir, "--disable-gpu", "--no-first-run",
                                   "--disable-background-networking", "about:blank"], close_fds=False,
                                  preexec_fn=pre, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        for f in (r1, w2, a, b):
            os.close(f)
        self.buf, self.n, self.fetch, self.sid, self.events = b"", 0, fetch, None, []
        tid = self.call("Target.createTarget", {"url": "about:blank"})["targetId"]
        self.sid = self.call("Target.attachToTarget", {"targetId": tid, "flatten": True})["sessionId"]
        self.call("Page.enable", {}, self.sid)
        if fetch:
            self.call("Fetch.enable", {"patterns": [{"urlPattern": "*"}]}, self.sid)

    def send(self, method, params, sid=None):
        self.n += 1
        m = {"id": self.n, "method": method, "params": params}
        if sid:
            m["sessionId"] = sid
        os.write(self.w, json.dumps(m).encode() + b"\0")
        return self.n

    def recv(self):
        while b"\0" not in self.buf:
            select.select([self.r], [], [], 30)
            self.buf += os.read(self.r, 1 << 20)
        m, self.buf = self.buf.split(b"\0", 1)
        m = json.loads(m)
        if m.get("method") == "Fetch.requestPaused":
            self.send("Fetch.continueRequest", {"requestId": m["params"]["requestId"]}, m.get("sessionId"))
        return m

    def call(self, method, params, sid=None):
        i = self.send(method, params, sid)
        while True:
            m = self.recv()
            if m.get("id") == i:
                return m.get("result")
            self.events.append(m.get("method"))

    def navigate(self, url):
        self.events = []
        self.call("Page.navigate", {"url": url}, self.sid)
        while "Page.loadEventFired" not in self.events:
            self.events.append(self.recv().get("method"))

    def snapshot(self):
        return self.call("Accessibility.getFullAXTree", {}, self.sid)

    def close(self):
        self.p.kill()
        self.p.wait()
        shutil.rmtree(self.dir, ignore_errors=True)


def bare_start():
    t0 = time.perf_counter()
    b = Bare()
    b.snapshot()
    dt = time.perf_counter() - t0
    b.close()
    return dt


def start_abx(binary, tmp, page_port):
    port = socket.socket()
    port.bind(("127.0.0.1", 0))
    p = port.getsockname()[1]
    port.close()
    ws = os.path.join(tmp, "ws")
    os.makedirs(ws)
    cfg = {"workspace": ws, "terminal_listen": "off", "ledger": {"path": os.path.join(tmp, "l.db")},
           "auth": {"tokens": [{"principal": "bench", "roles": ["agent"],
                                "token_sha256": hashlib.sha256(TOKEN.encode()).hexdigest()}]},
           "policy": {"allow": [{"ops": ["browser.*"], "principals": ["role:agent"], "paths": [ws + "/**"],
                                 "net": True, "urls": ["http://127.0.0.1:%d/**" % page_port]}]}}
    with open(os.path.join(tmp, "abx.json"), "w") as f:
        json.dump(cfg, f)
    env = dict(os.environ, ABX_HOME=os.path.join(tmp, "home"))
    proc = subprocess.Popen([binary, "serve", "--listen", "127.0.0.1:%d" % p, "--config",
                             os.path.join(tmp, "abx.json")], env=env, stdout=subprocess.DEVNULL,
                            stderr=subprocess.DEVNULL)
    url = "http://127.0.0.1:%d" % p
    for _ in range(200):
        try:
            if requests.get(url + "/health", timeout=1).status_code == 200:
                return proc, url
        except requests.RequestException:
            time.sleep(0.05)
    raise SystemExit("abx did not start")


def main():
    binary = sys.argv[1] if len(sys.argv) > 1 else "build/abx"
    httpd = http.server.ThreadingHTTPServer(("127.0.0.1", 0), H)
    threading.Thread(target=httpd.serve_forever, daemon=True).start()
    page = "http://127.0.0.1:%d/page.html" % httpd.server_address[1]
    tmp = tempfile.mkdtemp()
    proc, url = start_abx(binary, tmp, httpd.server_address[1])
    sess = requests.Session()
    sess.headers["Authorization"] = "Bearer " + TOKEN

    def op(name, body):
        r = sess.post(url + "/ops/" + name, json=body, timeout=60)
        assert r.status_code == 200, r.text
        return r.json()
    try:
        abx_start, bare = [], []
        for _ in range(STARTS):
            t0 = time.perf_counter()
            bid = op("browser.create", {})["id"]
            op("browser.snapshot", {"id": bid})
            abx_start.append(time.perf_counter() - t0)
            op("browser.close", {"id": bid})
            bare.append(bare_start())
        print("create -> first snapshot p50: abx %.0f ms, bare chromium %.0f ms, ratio %.2f" %
              (statistics.median(abx_start) * 1e3, statistics.median(bare) * 1e3,
               statistics.median(abx_start) / statistics.median(bare)))
        bid = op("browser.create", {})["id"]
        b0, bf = Bare(), Bare(fetch=True)
        t_abx, t_bare, t_fetch = [], [], []
        for i in range(N + 3):
            t0 = time.perf_counter()
            out = op("browser.navigate", {"id": bid, "url": page})
            op("browser.snapshot", {"id": bid})
            t1 = time.perf_counter()
            b0.navigate(page)
            b0.snapshot()
            t2 = time.perf_counter()
            bf.navigate(page)
            bf.snapshot()
            t3 = time.perf_counter()
            assert out["loaded"] and out["blocked"] == [], out
            if i >= 3:  # warm-up
                t_abx.append(t1 - t0)
                t_bare.append(t2 - t1)
                t_fetch.append(t3 - t2)
        b0.close()
        bf.close()
        op("browser.close", {"id": bid})
        for name, v in (("abx (confined, Fetch-guarded, over HTTP)", t_abx), ("bare chromium", t_bare),
                        ("bare chromium + Fetch continue", t_fetch)):
            print("navigate+snapshot %-42s p50 %6.1f ms  p90 %6.1f ms" % (name, pct(v, 0.5) * 1e3, pct(v, 0.9) * 1e3))
        print("ratio abx / bare: %.2f   bare+Fetch / bare: %.2f" %
              (pct(t_abx, 0.5) / pct(t_bare, 0.5), pct(t_fetch, 0.5) / pct(t_bare, 0.5)))
    finally:
        proc.terminate()
        proc.wait(timeout=15)
        httpd.shutdown()
        shutil.rmtree(tmp, ignore_errors=True)


if __name__ == "__main__":
    main()
