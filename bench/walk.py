#!/usr/bin/python3
"""bench/walk.py — the directory walks (files.list, files.find, files.search) of two abx
binaries side by side on the same tree, interleaved, with the ratio.

    /usr/bin/python3 bench/walk.py --abx build/abx [--base OTHER_ABX] [--rounds 7]

The tree (made once in a temporary directory): 40 x 25 directories of 20 small files
(21,040 entries), one line "needle" in 1,000 of them. Each op is timed over HTTP as the
median of --rounds calls against a server on 127.0.0.1 (the black-box tests' AbxServer
from tests/blackbox/conftest.py starts and stops it; the embedded default policy on
the tree). Without --base only --abx is measured. Every walk asks the policy about its
entries, so these figures are mostly the cost of those decisions; ratio = abx / base.
"""
import argparse
import os
import shutil
import statistics
import sys
import tempfile
import time

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, "..", "tests", "blackbox"))

CASES = [
    ("files.list", {"path": ".", "recursive": True, "max_entries": 100000}, "list -R"),
    ("files.find", {"path": ".", "pattern": "f07.txt", "max_results": 100000}, "find f07.txt"),
    ("files.search", {"path": ".", "pattern": "needle", "max_results": 100000}, "search needle"),
    ("files.search", {"path": ".", "pattern": "needle", "include": ["*/e00/*"]}, "search include"),
]


def make_tree(ws):
    for i in range(40):
        for j in range(25):
            d = os.path.join(ws, "d%02d" % i, "e%02d" % j)
            os.makedirs(d)
            for k in range(20):
                with open(os.path.join(d, "f%02d.txt" % k), "w") as f:
                    f.write("alpha beta gamma\n" * 20 + ("needle\n" if k == 7 else ""))


def start(binary, tmp, ws, n):
    os.environ["ABX_BIN"] = binary
    import conftest  # noqa: E402 (reads ABX_BIN when servers start)
    d = os.path.join(tmp, "srv%d" % n)
    os.makedirs(d)
    s = conftest.AbxServer(d, config=None, args=(), workspace=ws, env=None, config_name=None, home=None,
                           use_workspace_flag=True)
    s.start()
    return s


def timed(s, op, body):
    a = time.perf_counter()
    r = s.op(op, body, token=s.token)
    dt = time.perf_counter() - a
    if r.status_code != 200:
        raise SystemExit("%s: %s" % (op, r.text[:300]))
    return dt, r.json().get("count")


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--abx", required=True)
    ap.add_argument("--base")
    ap.add_argument("--rounds", type=int, default=7)
    a = ap.parse_args()
    tmp = tempfile.mkdtemp(prefix="abx-walk-bench-")
    servers = []
    try:
        ws = os.path.realpath(os.path.join(tmp, "ws"))
        make_tree(ws)
        bins = [("abx", os.path.abspath(a.abx))] + ([("base", os.path.abspath(a.base))] if a.base else [])
        for i, (_, b) in enumerate(bins):
            servers.append(start(b, tmp, ws, i))
        print("%-16s %12s %12s %7s  %s" % ("walk", "abx ms", "base ms", "ratio", "count"))
        for op, body, label in CASES:
            times = [[] for _ in servers]
            counts = [None for _ in servers]
            for _ in range(a.rounds):  # interleaved: both servers see the same machine load
                for i, s in enumerate(servers):
                    dt, counts[i] = timed(s, op, body)
                    times[i].append(dt)
            med = [statistics.median(t) * 1000 for t in times]
            base = "%12.1f" % med[1] if len(med) > 1 else "%12s" % "-"
            ratio = "%7.2f" % (med[0] / med[1]) if len(med) > 1 else "%7s" % "-"
            print("%-16s %12.1f %s %s  %s" % (label, med[0], base, ratio, counts))
    finally:
        for s in servers:
            try:
                s.stop()
            finally:
                s.kill()
        shutil.rmtree(tmp, ignore_errors=True)


if __name__ == "__main__":
    main()
