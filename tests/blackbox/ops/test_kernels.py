"""kernels.*: persistent confined Python kernels spoken to over the Jupyter protocol
(issue 15). Each test starts real ipykernel processes through abx."""
import base64
import json
import os
import sqlite3
import threading
import time

import pytest

from abxtest import ALICE_TOKEN, CAROL_TOKEN, assert_error, sha256_hex

pytestmark = pytest.mark.skipif(not os.path.exists("/usr/lib/python3/dist-packages/ipykernel"),
                                reason="python3-ipykernel is not installed (scripts/deps.sh installs it)")


def config(ws, ledger, languages=("python",), limits=None, net=False):
    stmt = {"ops": ["kernels.*", "devtools.*"], "principals": ["role:agent"], "paths": [ws + "/**"],
            "languages": list(languages), "net": net}
    if limits:
        stmt["limits"] = limits
    return {"workspace": ws, "terminal_listen": "off", "ledger": {"path": ledger},
            "auth": {"tokens": [
                {"principal": "alice", "roles": ["agent"], "token_sha256": sha256_hex(ALICE_TOKEN)},
                {"principal": "carol", "roles": ["agent"], "token_sha256": sha256_hex(CAROL_TOKEN)}]},
            "policy": {"allow": [stmt, {"ops": ["files.*"], "principals": ["role:agent"], "paths": [ws + "/**"]},
                                {"ops": ["runs.*"], "principals": ["role:agent"]}]}}


def ok(r):
    assert r.status_code == 200, "%s %s" % (r.status_code, r.text[:800])
    return r.json()


@pytest.fixture
def ks(abx, workspace, tmp_path):
    """(server, kernel id, ledger path) with one Python kernel of alice's."""
    ledger = str(tmp_path / "ledger.db")
    s = abx(config(workspace, ledger, limits={"max_output_bytes": "64KiB"}))
    k = ok(s.op("kernels.create", {"language": "python"}, token=ALICE_TOKEN))
    assert k["status"] == "idle" and k["language"] == "python" and k["id"].startswith("k-")
    return s, k["id"], ledger


def run(s, kid, code, token=ALICE_TOKEN, **extra):
    body = {"id": kid, "code": code}
    body.update(extra)
    r = s.post("/ops/kernels.execute", token=token, json_body=body, timeout=120)
    return r


def test_state_kept_between_cells_and_execution_shape(ks):
    s, kid, _ = ks
    e = ok(run(s, kid, "x = 41\nprint('hello')\nimport sys; print('warn', file=sys.stderr)\nx + 1"))
    assert e["results"] == [{"text/plain": "42", "is_main_result": True}]
    assert "".join(e["logs"]["stdout"]) == "hello\n" and "".join(e["logs"]["stderr"]) == "warn\n"
    assert e["error"] is None and e["truncated"] is False and e["execution_count"] == 1
    e2 = ok(run(s, kid, "x * 2"))
    assert e2["results"][0]["text/plain"] == "82" and e2["execution_count"] == 2
    listed = ok(s.op("kernels.list", {}, token=ALICE_TOKEN))["kernels"]
    assert [k["id"] for k in listed] == [kid]
    assert ok(s.op("kernels.get", {"id": kid}, token=ALICE_TOKEN))["execution_count"] == 2


def test_output_from_threads_and_display_stays_in_order(ks):
    """The shell's own messages leave from the main thread when nothing is queued on the
    IOPub thread (kernel_files.h): flushed output (also another thread's), display() and
    the result must still arrive in the order the cell made them, and all before idle."""
    s, kid, _ = ks
    code = ("import threading, sys\n"
            "from IPython.display import display\n"
            "for i in range(6):\n"
            "    print('m%d' % i, flush=True)\n"
            "    display(i)\n"
            "    t = threading.Thread(target=lambda: print('t%d' % i, flush=True)); t.start(); t.join()\n"
            "    display(-i)\n"
            "'end'")
    want = []
    for i in range(6):
        want += [("stdout", "m%d\n" % i), ("result", str(i)), ("stdout", "t%d\n" % i), ("result", str(-i))]
    want += [("result", "'end'")]
    for _ in range(8):
        r = s.post("/ops/kernels.stream", token=ALICE_TOKEN, stream=True, timeout=60,
                   json_body={"id": kid, "code": code})
        events = sse_events(r)
        got = []
        for e, d in events[:-1]:
            # a stream's chunking is not part of the order: print() writes its text and its
            # newline separately, and under load they may leave as two stdout messages
            if e == "stdout" and got and got[-1][0] == "stdout":
                got[-1] = ("stdout", got[-1][1] + d["text"])
            else:
                got.append((e, d["text"] if e == "stdout" else d.get("text/plain")))
        assert got == want and events[-1][0] == "end", events
    e = ok(run(s, kid, code))
    assert "".join(e["logs"]["stdout"]) == "".join("m%d\nt%d\n" % (i, i) for i in range(6))
    assert [r["text/plain"] for r in e["results"]][-1] == "'end'" and len(e["results"]) == 13


def test_error_value(ks):
    s, kid, _ = ks
    e = ok(run(s, kid, "1/0"))
    assert e["error"]["name"] == "ZeroDivisionError" and e["error"]["value"] == "division by zero"
    assert isinstance(e["error"]["traceback"], list) and e["results"] == []


def test_dataframe_html_and_plot_png(ks):
    s, kid, _ = ks
    e = ok(run(s, kid, "import pandas as pd\npd.DataFrame({'a': [1, 2]})"))
    assert "<table" in e["results"][0]["text/html"] and e["results"][0]["is_main_result"] is True
    e = ok(run(s, kid, "%matplotlib inline\nimport matplotlib.pyplot as plt\nplt.plot([1, 2, 3])\nplt.show()"))
    pngs = [r for r in e["results"] if "image/png" in r]
    assert pngs, e
    assert base64.b64decode(pngs[0]["image/png"])[:8] == b"\x89PNG\r\n\x1a\n"
    assert pngs[0]["is_main_result"] is False and "text/plain" in pngs[0]


def test_huge_output_keeps_head_and_tail(ks):
    s, kid, _ = ks
    e = ok(run(s, kid, "import sys\nsys.stdout.write('H' * 1000 + 'x' * 100_000_000 + 'T' * 1000)\nsys.stdout.flush()"))
    assert e["truncated"] is True and e["stdout_bytes"] == 100_002_000
    out = e["logs"]["stdout"]
    assert out[0].startswith("H" * 1000) and out[-1].endswith("T" * 1000)
    assert sum(len(x) for x in out) < 70 * 1024
    # the kernel still answers
    assert ok(run(s, kid, "2 + 2"))["results"][0]["text/plain"] == "4"


def test_timeout_interrupts_and_kernel_keeps_state(ks):
    s, kid, _ = ks
    ok(run(s, kid, "y = 7"))
    t0 = time.time()
    e = ok(run(s, kid, "while True: pass", timeout=1))
    assert time.time() - t0 < 8
    assert e["timed_out"] is True and e["error"]["name"] == "KeyboardInterrupt"
    assert ok(run(s, kid, "y"))["results"][0]["text/plain"] == "7"


def test_death_reported_and_restart(ks):
    s, kid, _ = ks
    ok(run(s, kid, "z = 1"))
    r = run(s, kid, "import os; os._exit(1)")
    assert_error(r, 502, "kernel.died")
    assert r.json()["error"]["details"]["exit_code"] == 1
    assert ok(s.op("kernels.get", {"id": kid}, token=ALICE_TOKEN))["status"] == "dead"
    assert_error(run(s, kid, "1"), 502, "kernel.died")
    k = ok(s.op("kernels.restart", {"id": kid}, token=ALICE_TOKEN))
    assert k["status"] == "idle" and k["execution_count"] == 0
    e = ok(run(s, kid, "'z' in globals()"))
    assert e["results"][0]["text/plain"] == "False"
    r = run(s, kid, "import os, signal; os.kill(os.getpid(), signal.SIGSEGV)")
    assert_error(r, 502, "kernel.died")
    assert r.json()["error"]["details"]["signal"] == "SEGV", r.text


def test_fifo_and_busy(ks):
    s, kid, _ = ks
    results = {}

    def slow():
        results["slow"] = run(s, kid, "import time; time.sleep(2); 'slow'")

    t = threading.Thread(target=slow)
    t.start()
    time.sleep(0.5)
    assert_error(run(s, kid, "1", wait=False), 409, "kernel.busy")
    e = ok(run(s, kid, "'after'"))  # waits its turn
    t.join()
    assert ok(results["slow"])["results"][0]["text/plain"] == "'slow'"
    assert e["results"][0]["text/plain"] == "'after'"


def test_interrupt_op(ks):
    s, kid, _ = ks
    results = {}
    t = threading.Thread(target=lambda: results.setdefault("r", run(s, kid, "import time; time.sleep(30)")))
    t.start()
    time.sleep(1)
    ok(s.op("kernels.interrupt", {"id": kid}, token=ALICE_TOKEN))
    t.join(15)
    assert ok(results["r"])["error"]["name"] == "KeyboardInterrupt"


def test_other_principal_sees_nothing(ks):
    s, kid, _ = ks
    bodies = []
    for op, body in (("kernels.execute", {"id": kid, "code": "1"}), ("kernels.get", {"id": kid}),
                     ("kernels.delete", {"id": kid}), ("kernels.interrupt", {"id": kid}),
                     ("kernels.restart", {"id": kid})):
        r = s.op(op, body, token=CAROL_TOKEN)
        assert_error(r, 404, "kernel.not_found")
        bodies.append(r.json()["error"]["message"])
    missing = s.op("kernels.get", {"id": "k-000000000000"}, token=CAROL_TOKEN)
    assert_error(missing, 404, "kernel.not_found")
    assert ok(s.op("kernels.list", {}, token=CAROL_TOKEN))["kernels"] == []
    # the kernel is untouched
    assert ok(run(s, kid, "3"))["results"][0]["text/plain"] == "3"
    ok(s.op("kernels.delete", {"id": kid}, token=ALICE_TOKEN))
    assert_error(s.op("kernels.get", {"id": kid}, token=ALICE_TOKEN), 404, "kernel.not_found")


def test_language_not_allowed(abx, workspace, tmp_path):
    s = abx(config(workspace, str(tmp_path / "l.db"), languages=("r",)))
    assert_error(s.op("kernels.create", {"language": "python"}, token=ALICE_TOKEN), 403,
                 "policy.language_not_allowed")


def test_env_outside_allowlist_refused(ks):
    s, _, _ = ks
    assert_error(s.op("kernels.create", {"language": "python", "env": {"LD_PRELOAD": "/x.so"}},
                      token=ALICE_TOKEN), 403, "policy.command_not_allowed")


def test_host_calls_go_through_the_pipeline(ks, workspace):
    s, kid, ledger = ks
    e = ok(run(s, kid, "r = host.files.read(path='a.txt')\nr['content']"))
    assert e["results"][0]["text/plain"] == "'hello\\n'"
    e = ok(run(s, kid, "host.call('files.stat', path='a.txt')['size']"))
    assert e["results"][0]["text/plain"] == "6"
    cell = run(s, kid, "d = host.files.read(path='/etc/shadow')\nd['error']['code']")
    assert ok(cell)["results"][0]["text/plain"] == "'policy.path_not_allowed'"
    rid = cell.headers["X-Request-Id"]
    time.sleep(0.5)
    con = sqlite3.connect(ledger, timeout=10)
    try:
        (cell_group,) = con.execute("SELECT group_id FROM action_groups WHERE request_id = ?", (rid,)).fetchone()
        rows = con.execute("SELECT principal, op, door FROM action_groups WHERE batch_group = ?",
                           (cell_group,)).fetchall()
    finally:
        con.close()
    assert ("alice", "files.read", "kernel") in rows, rows
    # a soft failure: an unknown op is a value too, and the cell goes on
    e = ok(run(s, kid, "v = host.nosuch.op()\nv['error']['code']"))
    assert e["results"][0]["text/plain"] == "'op.not_enabled'" and e["error"] is None


def test_runs_complete_once(ks):
    s, _, _ = ks
    rid = ok(s.op("runs.create", {}, token=ALICE_TOKEN))["id"]
    assert ok(s.op("runs.get", {"id": rid}, token=ALICE_TOKEN))["status"] == "open"
    kid = ok(s.op("kernels.create", {"language": "python", "run": rid}, token=ALICE_TOKEN))["id"]
    # ordinary results and prose never complete it
    ok(run(s, kid, "print('final answer: 42')\n42"))
    assert ok(s.op("runs.get", {"id": rid}, token=ALICE_TOKEN))["status"] == "open"
    e = ok(run(s, kid, "a = host.submit_output({'answer': 42})\nb = host.submit_output('again')\n(a, b['error']['code'])"))
    assert e["results"][0]["text/plain"] == "({'run': '%s', 'status': 'completed'}, 'run.completed')" % rid
    g = ok(s.op("runs.get", {"id": rid}, token=ALICE_TOKEN))
    assert g == {"id": rid, "status": "completed", "output": {"answer": 42}, "completed_by": "submit_output"}
    assert_error(s.op("runs.finalize", {"id": rid, "output": 1}, token=ALICE_TOKEN), 409, "run.completed")
    # finalize from outside; a closed schema; other principals see nothing
    rid2 = ok(s.op("runs.create", {}, token=ALICE_TOKEN))["id"]
    assert_error(s.op("runs.finalize", {"id": rid2, "output": 1, "extra": 2}, token=ALICE_TOKEN), 400, "args.unknown")
    assert_error(s.op("runs.finalize", {"id": rid2, "output": 1}, token=CAROL_TOKEN), 404, "run.not_found")
    assert_error(s.op("kernels.create", {"language": "python", "run": rid2}, token=CAROL_TOKEN), 404, "run.not_found")
    g = ok(s.op("runs.finalize", {"id": rid2, "output": [1, 2]}, token=ALICE_TOKEN))
    assert g["completed_by"] == "finalize" and g["output"] == [1, 2]
    # a kernel of no run cannot complete anything
    e = ok(run(s, ks[1], "host.submit_output(1)['error']['code']"))
    assert e["results"][0]["text/plain"] == "'run.not_found'"


def sse_events(resp):
    out, ev = [], None
    for line in resp.iter_lines(decode_unicode=True):
        if line.startswith("event: "):
            ev = line[7:]
        elif line.startswith("data: ") and ev:
            out.append((ev, json.loads(line[6:])))
            if ev == "end":
                break
    return out


def test_stream_events_in_order(ks):
    s, kid, _ = ks
    r = s.post("/ops/kernels.stream", token=ALICE_TOKEN, stream=True, timeout=60,
               json_body={"id": kid, "code": "import sys, time\nprint('a')\nsys.stdout.flush()\ntime.sleep(0.5)\n"
                                               "print('b', file=sys.stderr)\n1/0"})
    assert r.status_code == 200 and r.headers["Content-Type"].startswith("text/event-stream")
    events = sse_events(r)
    kinds = [e for e, _ in events]
    assert kinds == ["stdout", "stderr", "error", "end"], events
    assert events[0][1]["text"] == "a\n" and events[1][1]["text"] == "b\n"
    assert events[2][1]["name"] == "ZeroDivisionError"
    assert events[3][1]["execution_count"] == 1
    e = ok(run(s, kid, "'x'"))
    assert e["results"][0]["text/plain"] == "'x'" and e["execution_count"] == 2
    r = s.post("/ops/kernels.stream", token=ALICE_TOKEN, stream=True, timeout=60, json_body={"id": kid, "code": "40+2"})
    events = sse_events(r)
    assert [e for e, _ in events] == ["result", "end"] and events[0][1]["text/plain"] == "42", events
    assert_error(s.op("kernels.stream", {"id": "k-000000000000", "code": "1"}, token=ALICE_TOKEN), 404,
                 "kernel.not_found")


def test_devtools_code_run_one_shot(ks):
    s, kid, _ = ks
    e = ok(s.op("devtools.code.run", {"language": "python", "code": "import os\nprint(os.getpid())\n6*7"},
                token=ALICE_TOKEN))
    assert e["results"][0]["text/plain"] == "42" and e["execution_count"] == 1 and e["error"] is None
    pid = int(e["logs"]["stdout"][0])
    # a fresh interpreter each time, gone afterwards; the caller's own kernel stays
    e2 = ok(s.op("devtools.code.run", {"language": "python", "code": "'y' in globals()"}, token=ALICE_TOKEN))
    assert e2["results"][0]["text/plain"] == "False"
    assert [k["id"] for k in ok(s.op("kernels.list", {}, token=ALICE_TOKEN))["kernels"]] == [kid]
    deadline = time.time() + 5
    while os.path.exists("/proc/%d" % pid) and time.time() < deadline:
        time.sleep(0.1)
    assert not os.path.exists("/proc/%d/cmdline" % pid) or b"ipykernel" not in open("/proc/%d/cmdline" % pid, "rb").read()
    e3 = ok(s.op("devtools.code.run", {"language": "python", "code": "while True: pass", "timeout": 1},
                 token=ALICE_TOKEN))
    assert e3["timed_out"] is True
    assert_error(s.op("devtools.code.run", {"language": "r", "code": "1"}, token=ALICE_TOKEN), 403,
                 "policy.language_not_allowed")


def test_restart_keeps_cwd_env_and_language(abx, workspace, tmp_path):
    cfg = config(workspace, str(tmp_path / "l.db"))
    cfg["policy"]["allow"][0]["commands"] = {"allow": ["true"], "env": ["FOO"]}
    s = abx(cfg)
    os.makedirs(os.path.join(workspace, "sub"), exist_ok=True)
    kid = ok(s.op("kernels.create", {"language": "python", "cwd": "sub", "env": {"FOO": "bar"}},
                  token=ALICE_TOKEN))["id"]
    code = "import os\n(os.path.basename(os.getcwd()), os.environ.get('FOO'))"
    assert ok(run(s, kid, code))["results"][0]["text/plain"] == "('sub', 'bar')"
    k = ok(s.op("kernels.restart", {"id": kid}, token=ALICE_TOKEN))
    assert k["language"] == "python" and k["status"] == "idle"
    assert ok(run(s, kid, code))["results"][0]["text/plain"] == "('sub', 'bar')"


def test_idle_kernel_reaped_after_limits_kernel_idle(abx, workspace, tmp_path):
    cfg = config(workspace, str(tmp_path / "l.db"))
    cfg["limits"] = {"kernel_idle": "2s"}
    s = abx(cfg)
    k = ok(s.op("kernels.create", {"language": "python"}, token=ALICE_TOKEN))
    time.sleep(1)
    ok(run(s, k["id"], "1"))  # a cell counts as use
    time.sleep(1.2)
    assert ok(s.op("kernels.get", {"id": k["id"]}, token=ALICE_TOKEN))["status"] == "idle"
    time.sleep(2.5)
    assert_error(s.op("kernels.get", {"id": k["id"]}, token=ALICE_TOKEN), 404, "kernel.not_found")
    deadline = time.time() + 5
    while os.path.exists("/proc/%d" % k["pid"]) and time.time() < deadline:
        time.sleep(0.1)
    assert not os.path.exists("/proc/%d" % k["pid"])


def cgroup_memory_watchable():
    """abx can watch a kernel's memory cgroup: v1 memory (usage threshold eventfd) or v2
    with memory delegated (memory.high). Else the test is skipped with the reason."""
    if os.path.exists("/sys/fs/cgroup/memory/cgroup.event_control") or \
            os.path.exists("/sys/fs/cgroup/memory/cgroup.procs"):
        return True
    ctl = "/sys/fs/cgroup/cgroup.controllers"
    return os.path.exists(ctl) and "memory" in open(ctl).read()


@pytest.mark.skipif(not cgroup_memory_watchable(),
                    reason="no memory cgroup abx could delegate to itself (neither cgroup v1 memory nor v2 with "
                           "the memory controller): a kernel's memory limit cannot be watched here")
def test_memory_pressure_interrupts_and_keeps_state(abx, workspace, tmp_path):
    s = abx(config(workspace, str(tmp_path / "l.db"), limits={"memory": "384MiB"}))
    kid = ok(s.op("kernels.create", {"language": "python"}, token=ALICE_TOKEN))["id"]
    ok(run(s, kid, "keep = 'still here'"))
    code = ("def grow():\n    l = []\n    while True:\n        l.append(b'x' * (4 << 20))\n"
            "print('growing', flush=True)\ngrow()")
    r = run(s, kid, code)
    assert_error(r, 507, "kernel.memory_pressure")
    d = r.json()["error"]["details"]
    assert d["memory_limit"] == 384 << 20 and d["threshold"] < d["memory_limit"], d
    assert "growing" in "".join(d["execution"]["logs"]["stdout"]), d
    assert d["execution"]["error"]["name"] == "KeyboardInterrupt", d
    # the kernel and its state survive, and the memory came back
    e = ok(run(s, kid, "keep"))
    assert e["results"][0]["text/plain"] == "'still here'"
    assert ok(run(s, kid, "len(b'y' * (16 << 20))"))["results"][0]["text/plain"] == str(16 << 20)
    # kernels.stream says it as an error event before the end
    pid = ok(s.op("kernels.get", {"id": kid}, token=ALICE_TOKEN))["pid"]
    rss = [int(l.split()[1]) for l in open("/proc/%d/status" % pid) if l.startswith("VmRSS")][0]
    assert rss < 200 << 10, "the interrupted cell's memory is still held: %d KiB" % rss
    r = s.post("/ops/kernels.stream", token=ALICE_TOKEN, stream=True, timeout=60, json_body={"id": kid, "code": code})
    events = sse_events(r)
    codes = [d.get("code") or d.get("name") for ev, d in events if ev == "error"]
    assert "kernel.memory_pressure" in codes and events[-1][0] == "end", events
    assert ok(run(s, kid, "keep"))["results"][0]["text/plain"] == "'still here'"


ENV_NAMES = ("CELL_VAR", "OTHER_VAR", "HOME", "LD_PRELOAD", "PYTHONPATH", "ABX_TOKEN", "1BAD", "A=B", "NUL",
             "V") + tuple("V%d" % i for i in range(65))


def env_server(abx, workspace, tmp_path, names=ENV_NAMES):
    cfg = config(workspace, str(tmp_path / "l.db"))
    cfg["policy"]["allow"][0]["commands"] = {"env": list(names)}
    s = abx(cfg)
    return s, ok(s.op("kernels.create", {"language": "python"}, token=ALICE_TOKEN))["id"]


def test_cell_env_set_for_that_cell_only(abx, workspace, tmp_path):
    s, kid = env_server(abx, workspace, tmp_path)
    look = "import os\n(os.environ.get('CELL_VAR'), os.environ.get('HOME') == home)"
    ok(run(s, kid, "import os\nhome = os.environ.get('HOME')"))
    weird = "a'b\"c\\d\n\u00e9 \u2603 $(x) %s"
    e = ok(run(s, kid, look, env={"CELL_VAR": weird, "HOME": "/elsewhere"}))
    assert e["results"][0]["text/plain"] == repr((weird, False)), e
    # the setting and the restoring are silent: the user's execution count moves once per cell
    assert e["execution_count"] == 2, e
    e = ok(run(s, kid, look))
    assert e["results"][0]["text/plain"] == "(None, True)" and e["execution_count"] == 3, e
    # restored after an error too, and in kernels.stream
    e = ok(run(s, kid, "import os\nassert os.environ['CELL_VAR'] == 'x'\n1/0", env={"CELL_VAR": "x"}))
    assert e["error"]["name"] == "ZeroDivisionError", e
    r = s.post("/ops/kernels.stream", token=ALICE_TOKEN, stream=True, timeout=60,
               json_body={"id": kid, "code": "import os\nos.environ['OTHER_VAR']", "env": {"OTHER_VAR": "s"}})
    events = sse_events(r)
    assert [k for k, _ in events] == ["result", "end"] and events[0][1]["text/plain"] == "'s'", events
    assert ok(run(s, kid, "import os\n[os.environ.get(k) for k in ('CELL_VAR', 'OTHER_VAR')]"))[
        "results"][0]["text/plain"] == "[None, None]"


def test_cell_env_restored_after_timeout_interrupt(abx, workspace, tmp_path):
    s, kid = env_server(abx, workspace, tmp_path)
    e = ok(run(s, kid, "import time\nwhile True: time.sleep(0.05)", env={"CELL_VAR": "t"}, timeout=1))
    assert e["timed_out"] is True and e["error"]["name"] == "KeyboardInterrupt", e
    assert ok(run(s, kid, "import os\nstr(os.environ.get('CELL_VAR'))"))["results"][0]["text/plain"] == "'None'"


def test_cell_env_refused(abx, workspace, tmp_path):
    s, kid = env_server(abx, workspace, tmp_path)
    # a name outside the statement's env allowlist: policy, as for commands.run's env
    assert_error(run(s, kid, "1", env={"NOT_LISTED": "x"}), 403, "policy.command_not_allowed")
    assert_error(s.post("/ops/kernels.stream", token=ALICE_TOKEN, json_body={"id": kid, "code": "1",
                                                                              "env": {"NOT_LISTED": "x"}}),
                 403, "policy.command_not_allowed")
    # allowlisted, yet reserved or malformed names and values are refused before the kernel is touched
    for env in ({"LD_PRELOAD": "/x.so"}, {"PYTHONPATH": "/x"}, {"ABX_TOKEN": "x"}, {"1BAD": "x"},
                {"A=B": "x"}, {"V": "x" * 40000}):
        assert_error(run(s, kid, "1", env=env), 400, "args.invalid")
    assert_error(run(s, kid, "1", env={"NUL": "a\u0000b"}), 400, "request.bad_json")  # no NUL reaches a kernel
    assert_error(run(s, kid, "1", env={"V": 1}), 400, "args.invalid")
    assert_error(run(s, kid, "1", env={"V%d" % i: "x" for i in range(65)}), 400, "args.invalid")  # 64 at most
    assert ok(run(s, kid, "import os\nos.environ.get('V')", env={"V": "ok"}))["results"][0]["text/plain"] == "'ok'"


LOOP = """
import time
codes = []
end = time.time() + 14
while time.time() < end:
    r = host.files.read(path='a.txt')
    codes.append('ok' if 'content' in r else r['error']['code'])
    time.sleep(0.25)
codes
"""


def test_host_calls_end_when_the_creators_token_expires(abx, workspace, tmp_path):
    """A kernel's host.* calls run as its creator. A cell started while the creator's token
    was valid (a loop, as an agent's long task would be) must stop reaching the host once
    the token has expired (expires_at): the kernel cannot outlive the credential."""
    import datetime
    exp = datetime.datetime.now(datetime.timezone.utc).replace(microsecond=0) + datetime.timedelta(seconds=8)
    cfg = config(workspace, str(tmp_path / "ledger.db"))
    cfg["auth"]["tokens"][0]["expires_at"] = exp.strftime("%Y-%m-%dT%H:%M:%SZ")
    s = abx(cfg)
    k = ok(s.op("kernels.create", {"language": "python"}, token=ALICE_TOKEN))
    e = ok(run(s, k["id"], LOOP, timeout=30))
    codes = eval(e["results"][0]["text/plain"])
    assert codes and codes[0] == "ok", codes
    first_bad = next((i for i, c in enumerate(codes) if c != "ok"), None)
    assert first_bad is not None, "host.* calls went on after the token expired: %s" % codes
    assert set(codes[first_bad:]) == {"auth.invalid_token"}, codes
    left = (exp - datetime.datetime.now(datetime.timezone.utc)).total_seconds()
    assert left < 0, "the test ended before the token expired"
