"""Policy and confinement properties that need a live server: HTTP Range on downloads,
a cpu limit that holds, hard links out of a root refused by the kernel, and a storm of
reloads under load that never admits a call the old or the new policy would refuse."""
import json
import os
import signal
import threading
import time

from abxtest import ALICE_TOKEN, rss_kib, sha256_hex

ADMIN_TOKEN = "admin-token-0123456789abcdef"


def config(ws, allow_dir, extra=None):
    allow = [
        {"ops": ["files.read", "files.stat", "files.download"], "principals": ["alice"],
         "paths": [ws + "/" + allow_dir + "/**"]},
        {"ops": ["system.policy.reload"], "principals": ["root"]},
        {"ops": ["commands.run"], "principals": ["alice"], "paths": {"read": ["/usr/share/**"], "write": [ws + "/**"]},
         "commands": ["python3 *"], "limits": {"cpu": 0.2, "timeout": 20}},
    ]
    return {"workspace": ws, "terminal_listen": "off", "ledger": {"enabled": False},
            "auth": {"tokens": [{"principal": "alice", "roles": ["agent"], "token_sha256": sha256_hex(ALICE_TOKEN)},
                                {"principal": "root", "roles": ["admin"], "token_sha256": sha256_hex(ADMIN_TOKEN)}]},
            "policy": {"allow": allow + (extra or [])}}


def setup_dirs(ws):
    for d in ("a", "b", "c"):
        os.makedirs(os.path.join(ws, d), exist_ok=True)
        with open(os.path.join(ws, d, "x.txt"), "w") as f:
            f.write("0123456789")


def test_download_honours_http_range(abx, workspace):
    setup_dirs(workspace)
    s = abx(config(workspace, "a"))
    r = s.get("/files/download", token=ALICE_TOKEN, params={"path": "a/x.txt"}, headers={"Range": "bytes=2-5"})
    assert r.status_code == 206 and r.content == b"2345", (r.status_code, r.content)
    assert r.headers["Content-Range"] == "bytes 2-5/10" and r.headers["Accept-Ranges"] == "bytes"
    r = s.get("/files/download", token=ALICE_TOKEN, params={"path": "a/x.txt"}, headers={"Range": "bytes=-3"})
    assert r.status_code == 206 and r.content == b"789"
    r = s.get("/files/download", token=ALICE_TOKEN, params={"path": "a/x.txt"}, headers={"Range": "bytes=7-"})
    assert r.status_code == 206 and r.content == b"789"
    r = s.get("/files/download", token=ALICE_TOKEN, params={"path": "a/x.txt"}, headers={"Range": "bytes=50-60"})
    assert r.status_code == 416 and r.json()["error"]["code"] == "files.range_not_satisfiable"
    assert r.headers["Content-Range"] == "bytes */10"
    r = s.get("/files/download", token=ALICE_TOKEN, params={"path": "a/x.txt"})
    assert r.status_code == 200 and r.content == b"0123456789"


def run_py(s, code):
    r = s.post("/commands/run", token=ALICE_TOKEN, json_body={"argv": ["python3", "-c", code]}, timeout=30)
    assert r.status_code == 200, r.text
    return r.json()


def test_cpu_limit_holds(abx, workspace):
    s = abx(config(workspace, "a"))
    out = run_py(s, "import time,resource\n"
                    "t=time.time()\n"
                    "while time.time()-t<1.5: pass\n"
                    "print(resource.getrusage(resource.RUSAGE_SELF).ru_utime)")
    cpu = float(out["stdout"].strip())
    # 0.2 of a cpu over 1.5 s of wall time: well under the 1.5 s it would burn unlimited
    assert cpu < 0.7, "cpu limit 0.2 let the process use %.2f s in 1.5 s" % cpu


def test_no_hard_link_out_of_a_root(abx, workspace):
    s = abx(config(workspace, "a"))
    # /usr/share is a read root, the workspace a write root: linking across them (or from
    # outside every root) is refused by the kernel (Landlock's REFER rule), not by abx
    for src in ("/usr/share/doc", "/etc/hostname"):
        target = src if os.path.isfile(src) else None
        if target is None:
            for root, _, files in os.walk(src):
                if files:
                    target = os.path.join(root, files[0])
                    break
        out = run_py(s, "import os\ntry:\n os.link(%r, %r)\n print('linked')\nexcept OSError as e:\n print('refused', e.errno)"
                     % (target, os.path.join(workspace, "stolen")))
        assert out["stdout"].startswith("refused"), out
        assert not os.path.exists(os.path.join(workspace, "stolen"))


def test_reload_storm_never_admits_what_neither_policy_allows(abx, workspace):
    setup_dirs(workspace)
    s = abx(config(workspace, "a"))
    versions = [json.dumps(config(workspace, "a")), json.dumps(config(workspace, "b"))]
    stop = time.time() + 4
    bad = []
    counts = {"a": 0, "b": 0}

    def hammer():
        import requests
        sess = requests.Session()
        while time.time() < stop:
            for d in ("a", "b", "c"):
                r = sess.get(s.url + "/files/read", params={"path": d + "/x.txt"},
                             headers={"Authorization": "Bearer " + ALICE_TOKEN}, timeout=10)
                if r.status_code == 200:
                    if d == "c":
                        bad.append("c admitted")   # neither policy allows c
                    counts[d] += 1
                elif r.status_code != 403 or r.json()["error"]["code"] != "policy.path_not_allowed":
                    bad.append("%s: %s %s" % (d, r.status_code, r.text[:200]))

    threads = [threading.Thread(target=hammer) for _ in range(4)]
    for t in threads:
        t.start()
    i = 0
    while time.time() < stop:
        with open(s.config_path, "w") as f:
            f.write(versions[i % 2])
        if i % 2:
            os.kill(s.proc.pid, signal.SIGHUP)
        else:
            r = s.post("/system/policy/reload", token=ADMIN_TOKEN)
            assert r.status_code == 200, r.text
        i += 1
        time.sleep(0.05)
    for t in threads:
        t.join(20)
    assert not bad, bad[:5]
    assert i > 20
    assert counts["a"] > 0 and counts["b"] > 0, counts   # both policies were in force in turn


def test_ten_mib_of_output_with_a_one_mib_cap(abx, workspace):
    s = abx(config(workspace, "a"))
    r = s.post("/commands/run", token=ALICE_TOKEN, timeout=60, json_body={
        "argv": ["python3", "-c", "import sys\nfor _ in range(10): sys.stdout.write('y' * (1 << 20))"],
        "max_output_bytes": 1 << 20})
    j = r.json()
    assert r.status_code == 200 and j["status"] == "completed", j.get("status")
    assert j["truncated"] is True and j["stdout_truncated"] is True
    assert len(j["stdout"]) == 1 << 20
    assert rss_kib(s.proc.pid) < 50 * 1024


def test_download_of_100_mib_in_bounded_memory(abx, workspace):
    big = os.path.join(workspace, "a", "big.bin")
    os.makedirs(os.path.dirname(big), exist_ok=True)
    with open(big, "wb") as f:
        for _ in range(100):
            f.write(os.urandom(1 << 20))
    s = abx(config(workspace, "a"))
    peak = [0]
    done = threading.Event()

    def sample():
        while not done.is_set():
            peak[0] = max(peak[0], rss_kib(s.proc.pid))
            time.sleep(0.02)

    t = threading.Thread(target=sample)
    t.start()
    got = 0
    with s.get("/files/download", token=ALICE_TOKEN, params={"path": "a/big.bin"}, stream=True, timeout=60) as r:
        assert r.status_code == 200
        for chunk in r.iter_content(1 << 16):
            got += len(chunk)
    done.set()
    t.join()
    assert got == 100 << 20
    assert peak[0] < 50 * 1024, "peak RSS %d KiB" % peak[0]


def test_process_output_after_five_seconds_of_silence(abx, workspace):
    cfg = config(workspace, "a", extra=[{"ops": ["process.*"], "principals": ["alice"],
                                         "paths": [workspace + "/**"], "commands": ["python3 *"]}])
    s = abx(cfg)
    r = s.post("/process", token=ALICE_TOKEN, json_body={"argv": ["python3", "-c",
               "import time,sys\nprint('first', flush=True)\ntime.sleep(0.5)\nprint('second', flush=True)\n"
               "time.sleep(30)"]})
    assert r.status_code == 200, r.text
    pid = r.json()["pid"]
    time.sleep(5)   # nobody listens for five seconds
    out = s.get("/process/%d/output" % pid, token=ALICE_TOKEN, params={"offset": 0}).json()
    assert out["stdout"] == "first\nsecond\n" and out["stdout_dropped"] is False, out
    more = s.get("/process/%d/output" % pid, token=ALICE_TOKEN, params={"offset": out["offset"], "wait": 0.2}).json()
    assert more["stdout"] == "" and more["running"] is True
    assert s.post("/process/%d/signal" % pid, token=ALICE_TOKEN, json_body={"signal": "KILL"}).status_code == 200
