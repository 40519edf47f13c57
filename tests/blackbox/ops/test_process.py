"""process.*: background processes started confined, visible and signalable only to
their principal (admins see all), stdin writes, offset reads with long-poll and a bounded
ring that says when an offset fell off, resumable SSE, signals to the process group,
reaping and record retention."""
import json
import os
import time

import pytest
import requests

from abxtest import (ADMIN_TOKEN, ALICE_TOKEN, BOB_TOKEN, CAROL_TOKEN, assert_error, pgrep, read_sse, tokens,
                    uniq_sleep, wait_for)

CMDS = ["echo *", "cat *", "python3 *", "sh *", "sleep *", "pwd"]


def make_config(ws, limits=None, commands=None):
    stmt = {"ops": ["process.*", "commands.run"], "principals": ["role:agent", "role:admin"],
            "paths": [ws + "/**"], "commands": commands or {"allow": CMDS, "env": ["FOO"]}}
    if limits:
        stmt["limits"] = limits
    return {"workspace": ws, "terminal_listen": "off", "auth": {"tokens": tokens("alice", "bob", "carol", "root")},
            "policy": {"allow": [{"ops": ["core.*"], "principals": ["*"]}, stmt]}}


@pytest.fixture
def srv(abx, workspace):
    return abx(make_config(workspace))


def ok(r):
    assert r.status_code == 200, r.text[:800]
    return r.json()


def start(s, body, token=ALICE_TOKEN):
    return ok(s.post("/process", token=token, json_body=body))


def get(s, pid, token=ALICE_TOKEN):
    return s.get("/process/%d" % pid, token=token)


def output(s, pid, token=ALICE_TOKEN, timeout=15, **params):
    return s.get("/process/%d/output" % pid, token=token, params=params, timeout=timeout)


def write(s, pid, body, token=ALICE_TOKEN):
    return s.post("/process/%d/stdin" % pid, token=token, json_body=body)


def signal_(s, pid, sig, token=ALICE_TOKEN):
    return s.post("/process/%d/signal" % pid, token=token, json_body={"signal": sig})


def proc_state(pid):
    try:
        with open("/proc/%d/stat" % pid) as f:
            return f.read().rsplit(")", 1)[1].split()[0]
    except OSError:
        return None


def wait_exit(s, pid, timeout=8.0, token=ALICE_TOKEN):
    def ended():
        j = get(s, pid, token).json()
        return j if j.get("running") is False else None
    j = wait_for(ended, timeout=timeout)
    assert j, "process %d did not end in %.0fs" % (pid, timeout)
    return j


def kill_quietly(s, pid):
    try:
        signal_(s, pid, "KILL")
    except Exception:
        pass


ECHOER = ["python3", "-u", "-c",
          "import sys\n"
          "for l in sys.stdin:\n"
          "    print('got', l.strip(), flush=True)\n"
          "    print('err', l.strip(), file=sys.stderr, flush=True)\n"]


# -- start / get / list ----------------------------------------------------------------------

def test_start_returns_pid_and_state(srv):
    d = uniq_sleep()
    j = start(srv, {"command": "sleep " + d, "tag": "my-tag"})
    try:
        assert isinstance(j["pid"], int) and j["pid"] > 0
        assert j["running"] is True
        assert j["status"] == "running"
        assert j["argv"][0] == os.path.realpath("/usr/bin/sleep") and j["argv"][1] == d
        assert j["tag"] == "my-tag"
        assert j["pid"] in pgrep("sleep " + d)
        g = ok(get(srv, j["pid"]))
        assert g["pid"] == j["pid"] and g["running"] is True and g["exit_code"] is None
        assert isinstance(g["started_at"], str) and g["started_at"][:2] == "20"
    finally:
        kill_quietly(srv, j["pid"])


def test_list_only_own_admin_sees_all(srv):
    a = start(srv, {"command": "sleep " + uniq_sleep(), "tag": "alice-proc"})
    c = start(srv, {"command": "sleep " + uniq_sleep(), "tag": "carol-proc"}, token=CAROL_TOKEN)
    try:
        la = [p["pid"] for p in ok(srv.get("/process/list", token=ALICE_TOKEN))["processes"]]
        lc = [p["pid"] for p in ok(srv.get("/process/list", token=CAROL_TOKEN))["processes"]]
        assert a["pid"] in la and c["pid"] not in la
        assert c["pid"] in lc and a["pid"] not in lc
        ladm = ok(srv.get("/process/list", token=ADMIN_TOKEN))["processes"]
        tags = {p["pid"]: p.get("tag") for p in ladm}
        assert tags.get(a["pid"]) == "alice-proc" and tags.get(c["pid"]) == "carol-proc"
        # the admin may look at and signal another principal's process
        assert ok(get(srv, a["pid"], token=ADMIN_TOKEN))["pid"] == a["pid"]
    finally:
        kill_quietly(srv, a["pid"])
        signal_(srv, c["pid"], "KILL", token=CAROL_TOKEN)


def test_list_running_filter(srv):
    done = start(srv, {"command": "echo done"})
    wait_exit(srv, done["pid"])
    live = start(srv, {"command": "sleep " + uniq_sleep()})
    try:
        allp = [p["pid"] for p in ok(srv.get("/process/list", token=ALICE_TOKEN))["processes"]]
        run = [p["pid"] for p in ok(srv.get("/process/list", token=ALICE_TOKEN, params={"running": "true"}))
               ["processes"]]
        assert done["pid"] in allp and live["pid"] in allp
        assert live["pid"] in run and done["pid"] not in run
    finally:
        kill_quietly(srv, live["pid"])


def test_other_principals_process_is_not_found(srv):
    j = start(srv, {"argv": ECHOER})
    pid = j["pid"]
    try:
        assert_error(get(srv, pid, token=CAROL_TOKEN), 404, "process.not_found")
        assert_error(output(srv, pid, token=CAROL_TOKEN), 404, "process.not_found")
        assert_error(write(srv, pid, {"data": "x\n"}, token=CAROL_TOKEN), 404, "process.not_found")
        assert_error(signal_(srv, pid, "KILL", token=CAROL_TOKEN), 404, "process.not_found")
        r = srv.get("/process/%d/stream" % pid, token=CAROL_TOKEN)
        assert_error(r, 404, "process.not_found")
        assert ok(get(srv, pid))["running"] is True, "carol's attempts must not affect it"
    finally:
        kill_quietly(srv, pid)


def test_unknown_and_malformed_pid(srv):
    assert_error(get(srv, 99999999), 404, "process.not_found")
    # a real pid of a process abx did not start (this test runner)
    assert_error(get(srv, os.getpid()), 404, "process.not_found")
    assert_error(signal_(srv, os.getpid(), "TERM"), 404, "process.not_found")
    assert_error(srv.get("/process/abc", token=ALICE_TOKEN), 400, "args.invalid")


def test_viewer_not_mounted(srv):
    assert_error(srv.get("/process/list", token=BOB_TOKEN), 404, "op.not_enabled")
    assert_error(srv.post("/process", token=BOB_TOKEN, json_body={"command": "echo x"}), 404, "op.not_enabled")


def test_start_policy_applies(srv):
    assert_error(srv.post("/process", token=ALICE_TOKEN, json_body={"command": "touch x"}), 403,
                 "policy.command_not_allowed")
    assert_error(srv.post("/process", token=ALICE_TOKEN, json_body={"command": "sleep 1 && echo x"}), 403,
                 "policy.command_not_allowed")
    assert_error(srv.post("/process", token=ALICE_TOKEN, json_body={"command": "echo x", "env": {"PATH": "/x"}}),
                 403, "policy.command_not_allowed")
    assert_error(srv.post("/process", token=ALICE_TOKEN, json_body={"command": "echo x", "cwd": "/etc"}), 403,
                 "policy.path_not_allowed")
    assert_error(srv.post("/process", token=ALICE_TOKEN, json_body={"command": "echo x", "argv": ["echo"]}), 400,
                 "args.invalid")


def test_start_cwd_env_and_stdin(srv, workspace):
    code = "import os, sys; print(os.getcwd(), os.environ.get('FOO'), sys.stdin.read())"
    j = start(srv, {"argv": ["python3", "-c", code], "cwd": "sub", "env": {"FOO": "fooval"}, "stdin": "given"})
    pid = j["pid"]
    # stdin stays open for process.write until eof
    ok(write(srv, pid, {"data": "+more", "eof": True}))
    wait_exit(srv, pid)
    o = ok(output(srv, pid))
    assert o["stdout"] == "%s fooval given+more\n" % os.path.join(workspace, "sub")


# -- stdin and output -------------------------------------------------------------------------------

def test_write_and_output_offsets(srv):
    pid = start(srv, {"argv": ECHOER})["pid"]
    try:
        w = ok(write(srv, pid, {"data": "one\n"}))
        assert w["written"] == 4 and w["eof"] is False
        o = ok(output(srv, pid, wait=5))
        if o["stdout"] != "got one\n":  # long-poll may return on the first byte
            time.sleep(0.3)
            o = ok(output(srv, pid))
        assert o["stdout"] == "got one\n"
        assert o["offset"] == 8 and o["stdout_start"] == 0 and o["stdout_dropped"] is False
        assert o["stdout_total"] == 8
        assert o["running"] is True and o["status"] == "running" and o["exit_code"] is None
        o2 = ok(output(srv, pid, wait=0.5))
        assert o2["stderr"] == "err one\n" and o2["stderr_offset"] == 8
        # bytes given as base64 are written as they are; base64 that is not is refused, unwritten
        assert_error(write(srv, pid, {"data": "%%%", "encoding": "base64"}), 400, "args.invalid")
        assert_error(write(srv, pid, {"data": "eA==", "encoding": "latin1"}), 400, "args.invalid")
        w = ok(write(srv, pid, {"data": "dHdvCg==", "encoding": "base64"}))  # "two\n"
        assert w["written"] == 4
        o3 = ok(output(srv, pid, offset=o["offset"], stderr_offset=o2["stderr_offset"], wait=5))
        deadline = time.time() + 5
        while (o3["stdout"] != "got two\n" or o3["stderr"] != "err two\n") and time.time() < deadline:
            time.sleep(0.1)
            o3 = ok(output(srv, pid, offset=o["offset"], stderr_offset=o2["stderr_offset"]))
        assert o3["stdout"] == "got two\n" and o3["stdout_start"] == 8 and o3["offset"] == 16
        assert o3["stderr"] == "err two\n" and o3["stderr_offset"] == 16
        # a middle offset reads the tail of what is there
        assert ok(output(srv, pid, offset=4))["stdout"] == "one\ngot two\n"
        ok(write(srv, pid, {"eof": True}))
        g = wait_exit(srv, pid)
        assert g["exit_code"] == 0 and g["status"] == "completed"
    finally:
        kill_quietly(srv, pid)


def test_output_long_poll_is_bounded(srv):
    pid = start(srv, {"command": "sleep " + uniq_sleep()})["pid"]
    try:
        t0 = time.time()
        o = ok(output(srv, pid, wait=1))
        el = time.time() - t0
        assert 0.8 <= el < 4, el
        assert o["stdout"] == "" and o["running"] is True
    finally:
        kill_quietly(srv, pid)


def test_output_long_poll_wakes_on_output(srv):
    code = "import time, sys; time.sleep(0.5); print('late', flush=True); time.sleep(30)"
    pid = start(srv, {"argv": ["python3", "-c", code]})["pid"]
    try:
        t0 = time.time()
        o = ok(output(srv, pid, wait=20, timeout=30))
        el = time.time() - t0
        assert o["stdout"] == "late\n", o
        assert el < 10, "the long-poll did not return when output arrived (%.1fs)" % el
    finally:
        kill_quietly(srv, pid)


def test_output_wait_out_of_range(srv):
    pid = start(srv, {"command": "echo x"})["pid"]
    assert_error(output(srv, pid, wait=61), 400, "args.invalid")
    assert_error(output(srv, pid, offset=-1), 400, "args.invalid")


def test_ring_buffer_reports_dropped_offsets(srv):
    code = "import sys\nfor i in range(3): sys.stdout.write(chr(65 + i) * (1024 * 1024))\nsys.stdout.flush()"
    pid = start(srv, {"argv": ["python3", "-c", code]})["pid"]
    wait_exit(srv, pid, timeout=15)
    total = 3 * 1024 * 1024
    o = ok(output(srv, pid, offset=0))
    assert o["stdout_dropped"] is True
    assert o["stdout_total"] == total
    assert o["stdout_start"] == total - 1024 * 1024
    assert o["stdout"] == "C" * (1024 * 1024)
    assert o["offset"] == total
    o2 = ok(output(srv, pid, offset=total - 10))
    assert o2["stdout_dropped"] is False and o2["stdout"] == "C" * 10 and o2["stdout_start"] == total - 10
    o3 = ok(output(srv, pid, offset=total))
    assert o3["stdout"] == "" and o3["offset"] == total and o3["stdout_dropped"] is False


def test_write_after_eof_and_after_exit(srv):
    pid = start(srv, {"command": "sleep " + uniq_sleep()})["pid"]
    try:
        ok(write(srv, pid, {"data": "x", "eof": True}))
        assert_error(write(srv, pid, {"data": "y"}), 409, "process.stdin_closed")
    finally:
        kill_quietly(srv, pid)
    wait_exit(srv, pid)
    assert_error(write(srv, pid, {"data": "z"}), 409, "process.not_running")


# -- signals ---------------------------------------------------------------------------------------

def test_signal_term(srv):
    d = uniq_sleep()
    pid = start(srv, {"command": "sleep " + d})["pid"]
    r = ok(signal_(srv, pid, "TERM"))
    assert r["pid"] == pid and r["signal"] == "TERM"
    g = wait_exit(srv, pid)
    assert g["signal"] == "TERM" and g["exit_code"] is None
    assert not pgrep("sleep " + d)
    assert_error(signal_(srv, pid, "TERM"), 409, "process.not_running")


def test_signal_default_is_term(srv):
    pid = start(srv, {"command": "sleep " + uniq_sleep()})["pid"]
    r = srv.post("/process/%d/signal" % pid, token=ALICE_TOKEN, json_body={})
    assert ok(r)["signal"] == "TERM"
    assert wait_exit(srv, pid)["signal"] == "TERM"


def test_signal_by_name_reaches_handler(srv):
    code = ("import signal, sys, time\n"
            "signal.signal(signal.SIGUSR1, lambda *a: print('usr1', flush=True))\n"
            "signal.signal(signal.SIGHUP, lambda *a: print('hup', flush=True))\n"
            "print('ready', flush=True)\n"
            "while True: time.sleep(0.05)\n")
    pid = start(srv, {"argv": ["python3", "-c", code]})["pid"]
    try:
        assert wait_for(lambda: "ready" in ok(output(srv, pid))["stdout"], timeout=8)
        ok(signal_(srv, pid, "USR1"))
        assert wait_for(lambda: ok(output(srv, pid))["stdout"] == "ready\nusr1\n", timeout=5), \
            ok(output(srv, pid))
        ok(signal_(srv, pid, "SIGHUP"))
        assert wait_for(lambda: ok(output(srv, pid))["stdout"] == "ready\nusr1\nhup\n", timeout=5), \
            ok(output(srv, pid))
        assert ok(get(srv, pid))["running"] is True
        ok(signal_(srv, pid, "INT"))
        g = wait_exit(srv, pid)
        assert g["running"] is False
    finally:
        kill_quietly(srv, pid)


def test_signal_reaches_whole_process_group(srv):
    d = uniq_sleep()
    pid = start(srv, {"argv": ["sh", "-c", "sleep %s & sleep %s; wait" % (d, d)]})["pid"]
    try:
        # sh itself and its two sleeps carry the marker in their argv
        assert wait_for(lambda: len(pgrep("sleep " + d)) == 3, timeout=5), pgrep("sleep " + d)
        ok(signal_(srv, pid, "KILL"))
        assert wait_for(lambda: not pgrep("sleep " + d), timeout=5), "a group member survived"
        g = wait_exit(srv, pid)
        assert g["signal"] == "KILL" and g["status"] == "killed", g
    finally:
        kill_quietly(srv, pid)


def test_unknown_signal_invalid(srv):
    pid = start(srv, {"command": "sleep " + uniq_sleep()})["pid"]
    try:
        for sig in ("BOGUS", "", "SIGNOPE", "99"):
            assert_error(signal_(srv, pid, sig), 400, "args.invalid")
        assert ok(get(srv, pid))["running"] is True
    finally:
        kill_quietly(srv, pid)


# -- stream ------------------------------------------------------------------------------------------

TWO_LINES = ["python3", "-c", "import sys, time\nsys.stdout.write('AAAA\\n'); sys.stdout.flush()\n"
             "time.sleep(0.3)\nsys.stdout.write('BBBB\\n'); sys.stderr.write('EE\\n')\n"]


def sse_get(s, pid, headers=None, params=None):
    h = {"Authorization": "Bearer " + ALICE_TOKEN}
    h.update(headers or {})
    return requests.get(s.url + "/process/%d/stream" % pid, headers=h, params=params, stream=True,
                        timeout=(5, 10))


def collect(evs):
    out = "".join(json.loads(e["data"])["data"] for e in evs if e["event"] == "stdout")
    err = "".join(json.loads(e["data"])["data"] for e in evs if e["event"] == "stderr")
    return out, err


def test_stream_live_until_exit(srv):
    pid = start(srv, {"argv": TWO_LINES})["pid"]
    r = sse_get(srv, pid)
    assert r.status_code == 200 and r.headers["content-type"].startswith("text/event-stream")
    evs = read_sse(r)
    assert evs[0]["event"] == "start" and json.loads(evs[0]["data"])["pid"] == pid
    assert collect(evs) == ("AAAA\nBBBB\n", "EE\n")
    assert evs[-1]["event"] == "exit" and evs[-1]["id"] == "10,3"
    fin = json.loads(evs[-1]["data"])
    assert fin["exit_code"] == 0 and fin["running"] is False


def test_stream_resumes_from_last_event_id(srv):
    pid = start(srv, {"argv": TWO_LINES})["pid"]
    wait_exit(srv, pid)
    evs = read_sse(sse_get(srv, pid, headers={"Last-Event-ID": "5,3"}))
    assert collect(evs) == ("BBBB\n", "")
    first = [e for e in evs if e["event"] == "stdout"][0]
    assert json.loads(first["data"])["offset"] == 5
    evs = read_sse(sse_get(srv, pid, headers={"Last-Event-ID": "10,0"}))
    assert collect(evs) == ("", "EE\n")
    # the offset parameters do the same; Last-Event-ID wins over them
    evs = read_sse(sse_get(srv, pid, params={"offset": 5, "stderr_offset": 3}))
    assert collect(evs) == ("BBBB\n", "")
    evs = read_sse(sse_get(srv, pid, params={"offset": 0}, headers={"Last-Event-ID": "5,3"}))
    assert collect(evs) == ("BBBB\n", "")


def test_stream_bytes_and_split_characters(srv):
    """encoding base64 carries the raw bytes; text keeps a character whole when a chunk
    boundary (32 KiB) falls inside it, and turns only bytes that are not text (NUL among them) into U+FFFD."""
    prog = ("import sys\nsys.stdout.buffer.write(b'a' * 32767 + 'é'.encode() + b'z\\xff\\x00!')\n")
    pid = start(srv, {"argv": ["python3", "-c", prog]})["pid"]
    wait_exit(srv, pid)
    evs = read_sse(sse_get(srv, pid))
    out, _ = collect(evs)
    assert out == "a" * 32767 + "éz\ufffd\ufffd!", repr(out[-8:])  # NUL is not text either
    evs = read_sse(sse_get(srv, pid, params={"encoding": "base64"}))
    import base64
    frames = [json.loads(e["data"]) for e in evs if e["event"] == "stdout"]
    assert all(f["encoding"] == "base64" for f in frames), frames[:1]
    raw = b"".join(base64.b64decode(f["data"]) for f in frames)
    assert raw == b"a" * 32767 + "é".encode() + b"z\xff\x00!"
    r = sse_get(srv, pid, params={"encoding": "latin1"})
    assert r.status_code == 400, r.text


def test_stream_disconnect_does_not_kill_background_process(srv):
    pid = start(srv, {"command": "sleep " + uniq_sleep()})["pid"]
    try:
        r = sse_get(srv, pid)
        assert next(r.iter_lines()) == b"event: start"
        r.close()
        time.sleep(0.5)
        assert ok(get(srv, pid))["running"] is True
    finally:
        kill_quietly(srv, pid)


# -- lifecycle --------------------------------------------------------------------------------------

def test_exited_process_is_reaped_and_record_kept(srv):
    j = start(srv, {"argv": ["python3", "-c", "import sys; print('bye'); sys.exit(7)"]})
    pid = j["pid"]
    g = wait_exit(srv, pid)
    assert g["exit_code"] == 7 and g["status"] == "completed" and g["running"] is False
    assert isinstance(g["ended_at"], str)
    assert wait_for(lambda: proc_state(pid) != "Z", timeout=5), "exited process %d left a zombie" % pid
    # the record is kept after exit
    assert ok(get(srv, pid))["exit_code"] == 7
    assert ok(output(srv, pid))["stdout"] == "bye\n"
    assert pid in [p["pid"] for p in ok(srv.get("/process/list", token=ALICE_TOKEN))["processes"]]


def test_killed_process_is_reaped(srv):
    pid = start(srv, {"command": "sleep " + uniq_sleep()})["pid"]
    ok(signal_(srv, pid, "KILL"))
    wait_exit(srv, pid)
    assert wait_for(lambda: proc_state(pid) != "Z", timeout=5), "killed process %d left a zombie" % pid


def test_statement_timeout_caps_process_life(abx, workspace):
    s = abx(make_config(workspace, limits={"timeout": "1s"}))
    d = uniq_sleep()
    pid = start(s, {"command": "sleep " + d})["pid"]
    g = wait_exit(s, pid, timeout=6)
    assert g["status"] == "timed_out", g
    assert not pgrep("sleep " + d)


def _fds(s):
    return len(os.listdir("/proc/%d/fd" % s.proc.pid))


def _start_batch(srv, tag):
    pids = [start(srv, {"command": "echo %s %d" % (tag, i)})["pid"] for i in range(40)]
    for pid in pids:
        deadline = time.time() + 10
        while ok(get(srv, pid))["running"] and time.time() < deadline:
            time.sleep(0.05)
    time.sleep(0.3)
    return pids


def test_exited_records_hold_no_descriptors(srv):
    """A record is kept for minutes after its process exits; its stdin pipe and output
    pipes must be closed at exit, or a busy agent exhausts the server's fds. What is kept
    on purpose is bounded: lazily opened things, the prepared confinements of processes
    that ran at once (a view, a ruleset and a spare process's channel and namespace each,
    sixteen at most) and the network namespaces made ahead (eight at most). How many of
    those a batch warms depends on how its processes overlapped, so the check is on the
    total after 120 processes: a leak of even one descriptor per process exceeds it."""
    for _ in range(3):
        ok(srv.post("/commands/run", token=ALICE_TOKEN, json_body={"command": "echo warm"}))
    cold = _fds(srv)
    for tag in ("one", "two"):
        _start_batch(srv, tag)
    pids = _start_batch(srv, "bye")
    after = _fds(srv)
    assert after <= cold + 16 * 4 + 8 + 4, (cold, after)
    # the records are still there, with their output
    assert "bye 0" in output(srv, pids[0]).text
    listed = ok(srv.get("/process/list", token=ALICE_TOKEN))
    assert {p["pid"] for p in listed["processes"]} >= set(pids)
    # writing to an exited process's stdin is a clean error, not a write to a reused fd
    r = write(srv, pids[0], {"data": "x"})
    assert r.status_code == 409 and r.json()["error"]["code"] in ("process.not_running", "process.stdin_closed"), r.text


def test_exited_records_are_bounded(srv):
    """At most 512 exited records are kept (the oldest go first), whatever the retention."""
    first = start(srv, {"command": "echo first"})["pid"]
    for i in range(540):
        ok(srv.post("/commands/run", token=ALICE_TOKEN, json_body={"command": "echo %d" % i}))
    deadline = time.time() + 5
    while time.time() < deadline:
        listed = ok(srv.get("/process/list", token=ADMIN_TOKEN))["processes"]
        if len([p for p in listed if not p["running"]]) <= 512:
            break
        time.sleep(0.2)
    exited = [p for p in listed if not p["running"]]
    assert 400 <= len(exited) <= 512, len(exited)
    assert first not in {p["pid"] for p in listed}
    assert_error(srv.get("/process/%d" % first, token=ALICE_TOKEN), 404, "process.not_found")
