#!/usr/bin/python3
"""bench/extract.py — files.extract against the unpackers an agent would otherwise run
(GNU tar for tar.gz, Python's zipfile for zip), side by side on the same archives,
interleaved, with the ratio.

    /usr/bin/python3 bench/extract.py --abx build/abx [--rounds 5] [--files 5000]

The archives (made once): --files members of 1 KiB random hex text in 50 directories,
as tar.gz and as zip (deflate). Each round unpacks each archive into a fresh directory
once with abx (POST /ops/files.extract to a server on 127.0.0.1 with the embedded
default, as the black-box tests start it) and once with the reference (tar xzf, or
zipfile.extractall in this process); medians are printed. abx asks the policy about
every member and stages the tree before moving it into place, so ratio = abx / ref
is the price of those rules.
"""
import argparse
import io
import os
import shutil
import statistics
import subprocess
import sys
import tarfile
import tempfile
import time
import zipfile

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, "..", "tests", "pylib"))


def make_archives(ws, n):
    tbuf, zbuf = io.BytesIO(), io.BytesIO()
    with tarfile.open(fileobj=tbuf, mode="w:gz") as t, zipfile.ZipFile(zbuf, "w", zipfile.ZIP_DEFLATED) as z:
        for i in range(n):
            data = os.urandom(512).hex().encode()
            name = "src/d%02d/f%05d.txt" % (i % 50, i)
            ti = tarfile.TarInfo(name)
            ti.size = len(data)
            t.addfile(ti, io.BytesIO(data))
            z.writestr(name, data)
    for name, buf in (("a.tar.gz", tbuf), ("a.zip", zbuf)):
        with open(os.path.join(ws, name), "wb") as f:
            f.write(buf.getvalue())


def start(binary, tmp, ws):
    os.environ["ABX_BIN"] = binary
    import abxtest  # noqa: E402 (reads ABX_BIN when imported)
    d = os.path.join(tmp, "srv")
    os.makedirs(d)
    s = abxtest.AbxServer(d, config=None, args=(), workspace=ws, env=None, config_name=None, home=None,
                           use_workspace_flag=True)
    s.start()
    return s


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--abx", required=True)
    ap.add_argument("--rounds", type=int, default=5)
    ap.add_argument("--files", type=int, default=5000)
    a = ap.parse_args()
    tmp = tempfile.mkdtemp(prefix="abx-extract-bench-")
    s = None
    try:
        ws = os.path.realpath(os.path.join(tmp, "ws"))
        os.makedirs(ws)
        make_archives(ws, a.files)
        s = start(os.path.abspath(a.abx), tmp, ws)
        print("%-8s %10s %10s %7s" % ("format", "abx ms", "ref ms", "ratio"))
        for fmt in ("a.tar.gz", "a.zip"):
            ta, tr = [], []
            for k in range(a.rounds):
                t0 = time.perf_counter()
                r = s.op("files.extract", {"path": fmt, "dest": "x%s%d" % (fmt[2:5], k)}, token=s.token)
                ta.append(time.perf_counter() - t0)
                if r.status_code != 200:
                    raise SystemExit(r.text[:300])
                dest = os.path.join(ws, "r%s%d" % (fmt[2:5], k))
                os.makedirs(dest)
                t0 = time.perf_counter()
                if fmt.endswith(".zip"):
                    with zipfile.ZipFile(os.path.join(ws, fmt)) as z:
                        z.extractall(dest)
                else:
                    subprocess.run(["tar", "xzf", os.path.join(ws, fmt), "-C", dest], check=True)
                tr.append(time.perf_counter() - t0)
            ma, mr = statistics.median(ta) * 1000, statistics.median(tr) * 1000
            print("%-8s %10.1f %10.1f %7.2f" % (fmt[2:], ma, mr, ma / mr))
    finally:
        if s:
            try:
                s.stop()
            finally:
                s.kill()
        shutil.rmtree(tmp, ignore_errors=True)


if __name__ == "__main__":
    main()
