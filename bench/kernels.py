#!/usr/bin/python3
"""bench/kernels.py — kernels.* against the floor of starting Python (issue 15).

    /usr/bin/python3 bench/kernels.py [path/to/abx]     (default build/abx)

Starts `abx serve` on a free port with a policy mounting kernels.* and files.* (net off),
then measures in the same run, side by side:
  - `python3 -c pass` start time (the floor), p50 of BENCH_K_START runs;
  - kernels.create (a confined ipykernel, until it answered kernel_info and iopub), p50;
  - kernels.get, the same HTTP call path without the kernel (the call floor), p50;
  - kernels.execute of `1+1`, client-side round trip p50/p99 over BENCH_K_N cells
    (target: p50 <= 3 ms), interleaved cell by cell with the same `1+1` sent straight to
    a stock ipykernel (Debian's, its default command line, no abx) by jupyter_client:
    the reference the shared machine's load moves the same way;
  - host.files.stat from inside a cell, per call, timed in the cell over BENCH_K_N calls.
Environment: BENCH_K_N (default 200), BENCH_K_START (default 5)."""
import hashlib
import shutil
import json
import os
import socket
import statistics
import subprocess
import sys
import tempfile
import time

import requests

N = int(os.environ.get("BENCH_K_N", "200"))
STARTS = int(os.environ.get("BENCH_K_START", "5"))
TOKEN = "bench-token-0123456789abcdef"


def pct(v, p):
    v = sorted(v)
    return v[min(len(v) - 1, int(len(v) * p))]


def cpu_of(pid):
    """(CPU ms, context switches) of all threads of pid so far: the work a cell costs,
    which the load of a shared machine changes far less than the wall clock."""
    ms, cs = 0.0, 0
    try:
        for t in os.listdir("/proc/%d/task" % pid):
            st = open("/proc/%d/task/%s/stat" % (pid, t)).read().rsplit(")", 1)[1].split()
            ms += (int(st[11]) + int(st[12])) * 1000.0 / os.sysconf("SC_CLK_TCK")
            for line in open("/proc/%d/task/%s/status" % (pid, t)):
                if "ctxt_switches" in line:
                    cs += int(line.split()[1])
    except OSError:
        pass
    return ms, cs


class StockKernel:
    """A stock ipykernel started by jupyter_client (kernel spec python3, nothing of abx):
    the same `1+1`, execute_request to execute_reply and iopub idle, as a reference."""

    def __init__(self):
        import zmq
        from jupyter_client import KernelManager
        os.environ["PYDEVD_DISABLE_FILE_VALIDATION"] = "1"  # debugpy's start-up warning
        self.km = KernelManager(kernel_name="python3")
        self.km.start_kernel(stderr=subprocess.DEVNULL)
        self.kc = self.km.client()
        self.kc.start_channels()
        self.kc.wait_for_ready(60)
        self.poller = zmq.Poller()
        self.poller.register(self.kc.shell_channel.socket, zmq.POLLIN)
        self.poller.register(self.kc.iopub_channel.socket, zmq.POLLIN)

    def run(self, code):
        mid = self.kc.execute(code)
        replied = idle = False
        while not (replied and idle):
            ev = dict(self.poller.poll(10000))
            if not ev:
                raise RuntimeError("the stock kernel did not answer")
            if self.kc.shell_channel.socket in ev:
                replied = replied or self.kc.get_shell_msg(timeout=0)["parent_header"].get("msg_id") == mid
            if self.kc.iopub_channel.socket in ev:
                while True:
                    try:
                        m = self.kc.get_iopub_msg(timeout=0)
                    except Exception:
                        break
                    idle = idle or (m["parent_header"].get("msg_id") == mid and m["msg_type"] == "status"
                                    and m["content"]["execution_state"] == "idle")

    def stop(self):
        self.kc.stop_channels()
        self.km.shutdown_kernel(now=True)


def main():
    binary = sys.argv[1] if len(sys.argv) > 1 else "build/abx"
    tmp = tempfile.mkdtemp(prefix="abx-bench-k-")
    ws = os.path.join(tmp, "ws")
    os.mkdir(ws)
    with open(os.path.join(ws, "a.txt"), "w") as f:
        f.write("x\n")
    cfg = {"workspace": ws, "terminal_listen": "off",
           "auth": {"tokens": [{"principal": "b", "roles": ["agent"],
                                "token_sha256": hashlib.sha256(TOKEN.encode()).hexdigest()}]},
           "policy": {"allow": [{"ops": ["kernels.*", "files.*"], "principals": ["b"], "paths": [ws + "/**"],
                                 "languages": ["python"]}]}}
    with open(os.path.join(tmp, "abx.json"), "w") as f:
        json.dump(cfg, f)
    s = socket.socket()
    s.bind(("127.0.0.1", 0))
    port = s.getsockname()[1]
    s.close()
    env = dict(os.environ, ABX_HOME=os.path.join(tmp, "home"))
    srv = subprocess.Popen([binary, "serve", "--listen", "127.0.0.1:%d" % port, "--config",
                            os.path.join(tmp, "abx.json")], env=env, stderr=subprocess.DEVNULL)
    url = "http://127.0.0.1:%d/ops/" % port
    h = {"Authorization": "Bearer " + TOKEN}
    sess = requests.Session()
    try:
        for _ in range(200):
            try:
                sess.get("http://127.0.0.1:%d/health" % port, timeout=1)
                break
            except requests.RequestException:
                time.sleep(0.05)
        floor = []
        for _ in range(STARTS):
            t = time.perf_counter()
            subprocess.run(["/usr/bin/python3", "-c", "pass"], check=True)
            floor.append((time.perf_counter() - t) * 1000)
        starts, kid = [], None
        for i in range(STARTS):
            t = time.perf_counter()
            r = sess.post(url + "kernels.create", json={"language": "python"}, headers=h, timeout=60)
            starts.append((time.perf_counter() - t) * 1000)
            r.raise_for_status()
            if kid:
                sess.post(url + "kernels.delete", json={"id": r.json()["id"]}, headers=h).raise_for_status()
            else:
                kid = r.json()["id"]
        floor_call = []  # an abx call that does not reach the kernel: HTTP + pipeline + ledger
        g0 = cpu_of(srv.pid)
        for _ in range(N):
            t = time.perf_counter()
            sess.post(url + "kernels.get", json={"id": kid}, headers=h, timeout=30).raise_for_status()
            floor_call.append((time.perf_counter() - t) * 1000)
        g1 = cpu_of(srv.pid)
        kpid = sess.post(url + "kernels.get", json={"id": kid}, headers=h).json()["pid"]
        stock = StockKernel()
        for _ in range(20):
            stock.run("1+1")
        k0, a0 = cpu_of(kpid), cpu_of(srv.pid)
        rt, ref = [], []
        for _ in range(N):
            t = time.perf_counter()
            r = sess.post(url + "kernels.execute", json={"id": kid, "code": "1+1"}, headers=h, timeout=30)
            rt.append((time.perf_counter() - t) * 1000)
            assert r.json()["results"][0]["text/plain"] == "2", r.text
            t = time.perf_counter()
            stock.run("1+1")
            ref.append((time.perf_counter() - t) * 1000)
        k1, a1 = cpu_of(kpid), cpu_of(srv.pid)
        stock.stop()
        code = ("import time\nts = []\nfor _ in range(%d):\n    t = time.perf_counter()\n"
                "    assert host.files.stat(path='a.txt')['size'] == 2\n"
                "    ts.append((time.perf_counter() - t) * 1000)\nts.sort()\n(ts[len(ts)//2], ts[int(len(ts)*0.99)])" % N)
        r = sess.post(url + "kernels.execute", json={"id": kid, "code": code}, headers=h, timeout=120)
        hp50, hp99 = eval(r.json()["results"][0]["text/plain"])
        print("kernels bench (N=%d, starts=%d)" % (N, STARTS))
        print("  python3 -c pass start   p50 %8.1f ms   (floor)" % statistics.median(floor))
        print("  kernels.create          p50 %8.1f ms   = %.1f x floor" % (statistics.median(starts),
                                                                          statistics.median(starts) / statistics.median(floor)))
        print("  kernels.get (no kernel) p50 %8.2f ms   p99 %.2f ms   (the call floor)" % (pct(floor_call, 0.5),
                                                                                      pct(floor_call, 0.99)))
        print("  execute 1+1 round trip  p50 %8.2f ms   p99 %.2f ms   (target p50 <= 3 ms)" % (pct(rt, 0.5), pct(rt, 0.99)))
        print("  stock ipykernel 1+1     p50 %8.2f ms   p99 %.2f ms   (jupyter_client, no abx, interleaved)"
              % (pct(ref, 0.5), pct(ref, 0.99)))
        print("  abx / stock ipykernel   p50 ratio %.2f" % (pct(rt, 0.5) / pct(ref, 0.5)))
        print("  per 1+1 cell: kernel cpu %.2f ms, %.1f context switches; abx cpu %.2f ms, %.1f context switches"
              % ((k1[0] - k0[0]) / N, (k1[1] - k0[1]) / N, (a1[0] - a0[0]) / N, (a1[1] - a0[1]) / N))
        print("  per kernels.get:  abx cpu %.2f ms, %.1f context switches" % ((g1[0] - g0[0]) / N, (g1[1] - g0[1]) / N))
        print("  host.files.stat in cell p50 %8.2f ms   p99 %.2f ms" % (hp50, hp99))
    finally:
        srv.terminate()
        srv.wait(10)
        shutil.rmtree(tmp, ignore_errors=True)


if __name__ == "__main__":
    main()
