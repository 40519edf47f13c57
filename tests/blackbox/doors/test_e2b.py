"""The E2B door (docs/e2b.md): envd's protocols on e2b.envd_listen as alternate bindings of abx's
own ops. The stock npm package e2b (pinned in tests/e2b/package-lock.json, installed by
tests/e2b/install.sh; skipped, saying so, without Node >= 20 or the npm registry) in its debug
mode drives files, commands and stdin with an abx token as its envd access token; the SDK's
debug mode targets localhost:49983, and its own override (E2B_SANDBOX_URL) points it at the free
port each test takes. A sandbox object without the token is refused. Without the SDK: Connect's
binary protobuf encoding, its error documents, envd's REST routes and the listener's config."""
import base64
import json
import os
import socket
import sqlite3
import struct
import subprocess
import time

import pytest
import requests

from abxtest import ALICE_TOKEN, BOB_TOKEN, free_port, sha256_hex

HERE = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
E2B_DIR = os.path.join(os.path.dirname(HERE), "e2b")


def config(ws, tmp, port, interp=None):
    interp = interp or free_port()
    os.makedirs(tmp, exist_ok=True)
    return {"workspace": ws, "terminal_listen": "off", "ledger": {"path": os.path.join(tmp, "ledger.db")},
            "e2b": {"envd_listen": "127.0.0.1:%d" % port, "interpreter_listen": "127.0.0.1:%d" % interp},
            "auth": {"tokens": [
                {"principal": "alice", "roles": ["agent"], "token_sha256": sha256_hex(ALICE_TOKEN)},
                {"principal": "bob", "roles": ["viewer"], "token_sha256": sha256_hex(BOB_TOKEN)}]},
            "policy": {"allow": [
                {"ops": ["core.*"], "principals": ["*"]},
                {"ops": ["files.*", "process.*", "terminal.*"], "principals": ["role:agent"], "paths": [ws + "/**"],
                 "commands": {"allow": ["/bin/bash *"], "env": ["TERM", "LANG", "LC_ALL"]}},
                {"ops": ["kernels.*"], "principals": ["role:agent"], "paths": [ws + "/**"], "languages": ["python"],
                 "commands": {"env": ["CELL_VAR"]}}]}}


@pytest.fixture
def envd(abx, workspace, tmp_path):
    port, interp = free_port(), free_port()
    s = abx(config(workspace, str(tmp_path), port, interp))
    s.envd = "http://127.0.0.1:%d" % port
    s.interp = "http://127.0.0.1:%d" % interp
    s.ledger_db = os.path.join(str(tmp_path), "ledger.db")
    return s


@pytest.fixture(scope="module")
def sdk():
    r = subprocess.run(["bash", os.path.join(E2B_DIR, "install.sh")], capture_output=True, text=True, timeout=600)
    if r.returncode == 3:
        pytest.skip("the E2B SDK tests need Node >= 20 and the npm registry: " + r.stderr.strip()[-300:])
    assert r.returncode == 0, r.stdout + r.stderr
    return E2B_DIR


def run_sdk(s, scenario, ws, outside="/etc/passwd", token=ALICE_TOKEN):
    env = dict(os.environ, E2B_SANDBOX_URL=s.envd, ABX_E2B_TOKEN=token)
    env.pop("E2B_API_KEY", None)
    r = subprocess.run(["node", os.path.join(E2B_DIR, "client.mjs"), scenario, ws, outside], capture_output=True,
                       text=True, timeout=120, env=env)
    assert r.stdout.strip(), "no report from the SDK client:\n" + r.stderr[-3000:]
    rep = json.loads(r.stdout.strip().splitlines()[-1])
    assert r.returncode == 0 and "failure" not in rep, rep.get("failure", r.stderr[-3000:])
    return rep


def ledger(s, sql, args=()):
    deadline = time.time() + 5
    while True:
        with sqlite3.connect(s.ledger_db) as db:
            rows = db.execute(sql, args).fetchall()
        if rows or time.time() > deadline:
            return rows
        time.sleep(0.05)


def test_sdk_files(sdk, envd, workspace):
    rep = run_sdk(envd, "files", workspace)
    base = workspace + "/e2b"
    assert rep["written"] == {"name": "hello.txt", "path": base + "/hello.txt", "type": "file"}, rep
    assert rep["read"] == "hello from e2b\n" and rep["bytes"] == 15, rep
    assert rep["existsYes"] is True and rep["existsNo"] is False, rep
    assert rep["mkdir"] is True and rep["mkdirAgain"] is False, rep  # already_exists, as envd answers
    assert rep["renamed"] == {"name": "renamed.txt", "path": base + "/sub/renamed.txt", "type": "file"}, rep
    assert rep["list"] == [{"name": "sub", "type": "dir"}], rep
    assert rep["listDeep"] == [base + "/sub", base + "/sub/deeper", base + "/sub/renamed.txt"], rep
    assert rep["info"] == {"name": "renamed.txt", "type": "file", "size": 15, "mode": 0o100644,
                           "permissions": "-rw-r--r--", "modified": True}, rep
    assert rep["afterRemove"] is False and not os.path.exists(base + "/sub"), rep
    # outside the statement's paths: refused by the policy (403), recorded with door e2b
    assert rep["outside"]["name"] == "SandboxError" and rep["outside"]["message"].startswith("403:"), rep
    rows = ledger(envd, "SELECT g.op, g.principal, e.data FROM action_groups g JOIN action_events e USING(group_id) "
                        "WHERE g.door = 'e2b' AND g.op = 'files.download' AND e.data LIKE '%path_not_allowed%'")
    assert rows and rows[0][1] == "alice", rows
    ops = {r[0] for r in ledger(envd, "SELECT op FROM action_groups WHERE door = 'e2b'")}
    assert {"files.write", "files.stat", "files.mkdir", "files.move", "files.list", "files.delete"} <= ops, ops


def test_sdk_commands(sdk, envd, workspace):
    rep = run_sdk(envd, "commands", workspace)
    assert rep["run"] == {"exitCode": 0, "stdout": "out-line\n", "stderr": "err-line\n", "cbOut": "out-line\n",
                          "cbErr": "err-line\n"}, rep
    assert rep["fail"] == {"exit": True, "exitCode": 7}, rep
    assert rep["noStdin"] == "after-cat\n", rep  # stdin: false is EOF at once, as envd
    assert rep["bgPid"] and rep["listed"], rep
    assert rep["stdin"] == {"exitCode": 0, "stdout": "got:abc\n"}, rep
    assert rep["killed"] is True and rep["afterKill"] == {"exitCode": -1}, rep
    # commands.connect to a running command: abx replays its output from the start
    assert rep["connect"] == {"stdout": "early\nlate\n", "exitCode": 0}, rep
    # a working directory outside the statement's paths: the SDK's error, the policy's code in it
    assert rep["refused"]["name"] == "SandboxError" and "permission_denied" in rep["refused"]["message"], rep
    assert "policy.path_not_allowed" in rep["refused"]["message"], rep
    ops = {r[0] for r in ledger(envd, "SELECT op FROM action_groups WHERE door = 'e2b' AND principal = 'alice'")}
    assert {"process.start", "process.stream", "process.write", "process.signal", "process.list"} <= ops, ops
    # one admitted process.stream per SDK stream, not a poll per second
    assert "process.output" not in ops, ops


def test_sdk_pty(sdk, envd, workspace):
    rep = run_sdk(envd, "pty", workspace)
    # pty.create → terminal.create (80x24), sendInput → process.write, resize → terminal.resize
    assert rep == {"pid": True, "size1": True, "exit": 5, "size2": True}, rep
    ops = {r[0] for r in ledger(envd, "SELECT op FROM action_groups WHERE door = 'e2b'")}
    assert {"terminal.create", "terminal.resize", "process.write"} <= ops, ops


def test_sdk_watch_dir(sdk, envd, workspace):
    rep = run_sdk(envd, "watch", workspace)
    # files.write of a new file is linked into place (atomic, and one create for watchers,
    # as envd's own write gives); its temporary is not shown
    assert rep["events"] == ["create:new.txt"], rep


def test_sdk_code_interpreter(sdk, envd, workspace):
    rep = run_sdk(envd, "interpreter", workspace)
    assert rep["sum"] == "2", rep
    assert rep["print"] == {"stdout": "hi\n", "stderr": "oops\n", "cb": "hi\n"}, rep
    assert rep["png"] is True and "png" in rep["plotKeys"], rep  # a matplotlib plot arrives as png
    assert rep["error"] == {"name": "ZeroDivisionError", "value": "division by zero", "tb": True}, rep
    assert rep["ctxValue"] == "10" and rep["listed"] is True, rep
    assert rep["afterRestart"] == "NameError" and rep["afterRemove"] is False, rep
    # runCode's envs (env_vars on the wire): set for that cell only, the next cell no longer sees them
    assert rep["envs"] == {"withEnvs": "'y z'", "after": "None", "refused": True}, rep
    ops = {r[0] for r in ledger(envd, "SELECT op FROM action_groups WHERE door = 'e2b'")}
    assert {"kernels.create", "kernels.stream", "kernels.restart", "kernels.delete", "kernels.list"} <= ops, ops


def test_sdk_without_token_is_refused(sdk, envd, workspace):
    rep = run_sdk(envd, "noToken", workspace)
    for k in ("list", "read", "run"):
        assert rep[k]["auth"] is True and rep[k]["name"] == "AuthenticationError", rep


# ---- without the SDK: the wire itself ----

def envelope(payload, flags=0):
    return bytes([flags]) + struct.pack(">I", len(payload)) + payload


def frames(data):
    out = []
    while data:
        flags, n = data[0], struct.unpack(">I", data[1:5])[0]
        out.append((flags, data[5:5 + n]))
        data = data[5 + n:]
    return out


def pb_string(field, s):
    b = s.encode()
    return bytes([field << 3 | 2, len(b)]) + b


def connect(s, method, body, ctype="application/json", token=ALICE_TOKEN, **kw):
    h = {"Content-Type": ctype}
    if token:
        h["X-Access-Token"] = token
    data = json.dumps(body).encode() if isinstance(body, dict) else body
    return requests.post(s.envd + "/" + method, data=data, headers=h, timeout=30, **kw)


def test_binary_protobuf_unary_and_stream(envd, workspace):
    r = connect(envd, "filesystem.Filesystem/Stat", pb_string(1, workspace + "/a.txt"), "application/proto")
    assert r.status_code == 200 and r.headers["Content-Type"] == "application/proto", r.text
    # StatResponse{entry=1: EntryInfo{name=1 "a.txt", type=2 FILE(1), path=3 ...}}
    assert r.content[0] == 0x0a and pb_string(1, "a.txt") + b"\x10\x01" in r.content, r.content
    assert pb_string(3, workspace + "/a.txt") in r.content, r.content
    # proto3 strings are UTF-8: a path that is not is refused, not passed on
    r = connect(envd, "filesystem.Filesystem/Stat", b"\x0a\x02\xff\xfe", "application/proto")
    assert r.status_code == 400 and r.json()["code"] == "invalid_argument" and "UTF-8" in r.json()["message"], r.text
    # Start as connect+proto: ProcessConfig{cmd=1, args=2}
    cfg = pb_string(1, "/bin/bash") + pb_string(2, "-c") + pb_string(2, "echo hi; exit 3")
    req = bytes([0x0a, len(cfg)]) + cfg
    r = connect(envd, "process.Process/Start", envelope(req), "application/connect+proto")
    assert r.status_code == 200 and r.headers["Content-Type"] == "application/connect+proto", r.text
    fs = frames(r.content)
    assert fs[-1] == (2, b"{}"), fs  # end of stream, JSON as Connect wants it
    msgs = [f[1] for f in fs[:-1]]
    assert msgs[0].startswith(b"\x0a") and msgs[0][2:4] == b"\x0a" + bytes([len(msgs[0]) - 4]), msgs
    assert any(b"\x12\x05\x0a\x03hi\n" in m for m in msgs), msgs  # data{stdout: "hi\n"}
    assert b"\x1a" in msgs[-1] and b"exit status 3" in msgs[-1], msgs  # end{exit_code: sint32 3 ...}
    # proto3 `optional` keeps presence in the binary encoding too: stdin=4 set to false (the
    # default value, so only presence says it was sent) is a process whose stdin ends at once
    cfg = pb_string(1, "/bin/bash") + pb_string(2, "-c") + pb_string(2, "cat; echo after-cat")
    req = bytes([0x0a, len(cfg)]) + cfg + b"\x20\x00"
    r = connect(envd, "process.Process/Start", envelope(req), "application/connect+proto")
    assert r.status_code == 200 and any(b"after-cat" in f[1] for f in frames(r.content)), r.content


def test_connect_json_stream_and_errors(envd, workspace):
    body = envelope(json.dumps({"process": {"cmd": "/bin/bash", "args": ["-c", "printf x"]}}).encode())
    r = connect(envd, "process.Process/Start", body, "application/connect+json")
    fs = frames(r.content)
    evs = [json.loads(f[1]) for f in fs[:-1]]
    assert "start" in evs[0]["event"] and evs[0]["event"]["start"]["pid"] > 0, evs
    assert {"event": {"data": {"stdout": "eA=="}}} in evs, evs
    assert evs[-1]["event"]["end"]["exited"] is True and fs[-1] == (2, b"{}"), evs
    # output that is not UTF-8 arrives byte for byte (envd's data fields are bytes)
    body = envelope(json.dumps({"process": {"cmd": "/bin/bash", "args": ["-c", r"printf '\xff\xfe\x00ok\xc3'"]}}).encode())
    fs = frames(connect(envd, "process.Process/Start", body, "application/connect+json").content)
    got = b"".join(base64.b64decode(json.loads(f[1])["event"]["data"]["stdout"]) for f in fs[:-1]
                   if "data" in json.loads(f[1]).get("event", {}))
    assert got == b"\xff\xfe\x00ok\xc3", got
    # Connect error documents: {code, message}, HTTP status as Connect maps it; a stream's
    # error is its end-of-stream message under 200
    def stream(method, payload, raw=False):
        return connect(envd, method, payload if raw else envelope(json.dumps(payload).encode()),
                       "application/connect+json")
    cases = [
        (connect(envd, "filesystem.Filesystem/Stat", {"path": workspace + "/nope"}), 404, "not_found"),
        (connect(envd, "filesystem.Filesystem/Stat", {"path": "/etc/passwd"}), 403, "permission_denied"),
        (connect(envd, "filesystem.Filesystem/Stat", {"path": 5}), 400, "invalid_argument"),
        (connect(envd, "filesystem.Filesystem/Stat", b"[1]"), 400, "invalid_argument"),
        (connect(envd, "filesystem.Filesystem/Stat", b"\xff\xff", "application/proto"), 400, "invalid_argument"),
        (connect(envd, "filesystem.Filesystem/Nope", {}), 404, "not_found"),
        (connect(envd, "filesystem.Filesystem/GetWatcherEvents", {"watcherId": "w-none"}), 404, "not_found"),
        (connect(envd, "filesystem.Filesystem/CreateWatcher", {"path": "/etc"}), 403, "permission_denied"),
        (connect(envd, "process.Process/Update", {"process": {"pid": 999999}, "pty": {"size": {"cols": 9, "rows": 9}}}),
         404, "not_found"),
        (connect(envd, "process.Process/SendInput", {"process": {"tag": "none"}}), 404, "not_found"),
        (connect(envd, "filesystem.Filesystem/ListDir", {"path": "/"}, token="not-a-token"), 401, "unauthenticated"),
        (connect(envd, "filesystem.Filesystem/ListDir", {"path": "/"}, token=None), 401, "unauthenticated"),
        (stream("process.Process/Start", b"\x00\x00\x00\x00\x09{}", raw=True), 200, "invalid_argument"),
        (stream("process.Process/Connect", {"process": {"pid": 999999}}), 200, "not_found"),
        (stream("process.Process/Start", {"process": {"cmd": "/bin/sh", "args": ["-c", "true"]}}), 200,
         "permission_denied"),
        (stream("filesystem.Filesystem/WatchDir", {"path": "/etc"}), 200, "permission_denied"),
    ]
    for r, status, code in cases:
        assert r.status_code == status, (r.status_code, r.text)
        if status == 200:
            fs = frames(r.content)
            assert len(fs) == 1 and fs[0][0] == 2, fs
            assert json.loads(fs[0][1])["error"]["code"] == code, fs
        elif status != 401 or "code" in r.json():
            assert r.json()["code"] == code, r.text
    r = connect(envd, "filesystem.Filesystem/Stat", {"path": workspace}, "text/plain")
    assert r.status_code == 415, r.text
    r = requests.get(envd.envd + "/filesystem.Filesystem/Stat", headers={"X-Access-Token": ALICE_TOKEN})
    assert r.status_code == 405 and r.json()["code"] == "unimplemented", r.text
    # bob (viewer) has no files.* mounted: the one 404 of abx, as Connect's not_found
    r = connect(envd, "filesystem.Filesystem/Stat", {"path": workspace}, token=BOB_TOKEN)
    assert r.status_code == 404 and r.json()["code"] == "not_found", r.text


def test_stream_input(envd, workspace):
    bearer = {"Authorization": "Bearer " + ALICE_TOKEN}
    r = requests.post(envd.url + "/ops/process.start", headers=bearer,
                      json={"argv": ["/bin/bash", "-c", "read a; read b; echo $a-$b"], "cwd": workspace, "tag": "si"})
    pid = r.json()["pid"]
    b64 = lambda t: base64.b64encode(t.encode()).decode()
    events = [{"start": {"process": {"tag": "si"}}}, {"data": {"input": {"stdin": b64("one\n")}}},
              {"keepalive": {}}, {"data": {"input": {"stdin": b64("two\n")}}}]
    body = b"".join(envelope(json.dumps(e).encode()) for e in events) + envelope(b"{}", 2)
    r = connect(envd, "process.Process/StreamInput", body, "application/connect+json")
    assert r.status_code == 200 and frames(r.content) == [(0, b"{}"), (2, b"{}")], r.content
    deadline = time.time() + 10
    while time.time() < deadline:
        out = requests.post(envd.url + "/ops/process.output", headers=bearer, json={"pid": pid, "wait": 1}).json()
        if not out["running"]:
            break
    assert out["stdout"] == "one-two\n", out
    # stdin bytes that are not text reach the process byte for byte
    r = requests.post(envd.url + "/ops/process.start", headers=bearer,
                      json={"argv": ["/bin/bash", "-c", "head -c 4 > raw.in"], "cwd": workspace, "tag": "raw"})
    pid = r.json()["pid"]
    raw = base64.b64encode(b"\xff\x00\xfe\n").decode()
    body = b"".join(envelope(json.dumps(e).encode()) for e in
                    [{"start": {"process": {"tag": "raw"}}}, {"data": {"input": {"stdin": raw}}}]) + envelope(b"{}", 2)
    assert connect(envd, "process.Process/StreamInput", body, "application/connect+json").status_code == 200
    wait = requests.post(envd.url + "/ops/process.wait", headers=bearer, json={"pid": pid, "timeout": 10}).json()
    assert wait["exit_code"] == 0 and open(workspace + "/raw.in", "rb").read() == b"\xff\x00\xfe\n", wait
    for bad, code in [(envelope(b'{"data": {"input": {"stdin": "eA=="}}}'), "invalid_argument"),
                      (envelope(b'{"start": {"process": {"tag": "none"}}}'), "not_found"),
                      (b"\x00\x00\x00\x00\x09{}", "invalid_argument")]:
        r = connect(envd, "process.Process/StreamInput", bad, "application/connect+json")
        fs = frames(r.content)
        assert r.status_code == 200 and json.loads(fs[-1][1])["error"]["code"] == code, r.content


def test_polled_watcher(envd, workspace):
    r = connect(envd, "filesystem.Filesystem/CreateWatcher", {"path": workspace, "recursive": True})
    wid = r.json()["watcherId"]
    assert r.status_code == 200 and wid.startswith("w-"), r.text
    requests.post(envd.envd + "/files", params={"path": workspace + "/sub/polled.txt"}, data=b"x",
                  headers={"X-Access-Token": ALICE_TOKEN, "Content-Type": "application/octet-stream"})
    seen, deadline = [], time.time() + 10
    while time.time() < deadline and not any(e.get("name") == "sub/polled.txt" for e in seen):
        r = connect(envd, "filesystem.Filesystem/GetWatcherEvents", {"watcherId": wid})
        assert r.status_code == 200, r.text
        seen += r.json().get("events", [])
        time.sleep(0.1)
    assert {"name": "sub/polled.txt", "type": "EVENT_TYPE_CREATE"} in seen, seen
    # another principal's watcher is not there for bob (and bob has no files.* at all)
    assert connect(envd, "filesystem.Filesystem/GetWatcherEvents", {"watcherId": wid},
                   token=BOB_TOKEN).status_code == 404
    assert connect(envd, "filesystem.Filesystem/RemoveWatcher", {"watcherId": wid}).status_code == 200
    r = connect(envd, "filesystem.Filesystem/GetWatcherEvents", {"watcherId": wid})
    assert r.status_code == 404 and r.json()["code"] == "not_found", r.text
    # a watcher left running ends with the server (stop must not hang)
    assert connect(envd, "filesystem.Filesystem/CreateWatcher", {"path": workspace}).status_code == 200
    assert envd.stop() == 0


def test_rest_routes(envd, workspace):
    assert requests.get(envd.envd + "/health").status_code == 204  # no token, as envd
    h = {"X-Access-Token": ALICE_TOKEN}
    assert requests.get(envd.envd + "/envs", headers=h).json() == {}
    assert requests.get(envd.envd + "/envs").status_code == 401
    r = requests.post(envd.envd + "/files", params={"path": workspace + "/up/raw.bin"}, data=b"\x00\x01binary",
                      headers=dict(h, **{"Content-Type": "application/octet-stream"}))
    assert r.status_code == 200 and r.json() == [{"path": workspace + "/up/raw.bin", "name": "raw.bin",
                                                  "type": "file"}], r.text
    with open(workspace + "/up/raw.bin", "rb") as f:
        assert f.read() == b"\x00\x01binary"
    r = requests.get(envd.envd + "/files", params={"path": workspace + "/up/raw.bin"}, headers=h)
    assert r.status_code == 200 and r.content == b"\x00\x01binary", r.text
    # multipart with two parts named by their file names
    r = requests.post(envd.envd + "/files", headers=h,
                      files=[("file", (workspace + "/up/m1.txt", b"one")), ("file", (workspace + "/up/m2.txt", b"two"))])
    assert r.status_code == 200 and [e["name"] for e in r.json()] == ["m1.txt", "m2.txt"], r.text
    errors = [
        requests.get(envd.envd + "/files", params={"path": workspace + "/up/none"}, headers=h),
        requests.get(envd.envd + "/files", headers=h),
        requests.get(envd.envd + "/files", params={"path": "/etc/passwd"}, headers=h),
        requests.post(envd.envd + "/files", headers=dict(h, **{"Content-Type": "application/octet-stream"}), data=b"x"),
        requests.post(envd.envd + "/files", params={"path": workspace + "/x"},
                      headers=dict(h, **{"Content-Type": "multipart/form-data; boundary=zz"}), data=b"--zz\r\nbroken"),
        requests.post(envd.envd + "/files", params={"path": workspace + "/x"},
                      headers=dict(h, **{"Content-Type": "text/plain"}), data=b"x"),
        requests.put(envd.envd + "/files", headers=h, data=b"x"),
    ]
    assert [r.status_code for r in errors] == [404, 400, 403, 400, 400, 415, 405], [(r.status_code, r.text) for r in errors]
    assert errors[0].json()["code"] == 404 and "files.not_found" in errors[0].json()["message"], errors[0].text


def test_interpreter_listener(envd, workspace):
    h = {"X-Access-Token": ALICE_TOKEN}
    r = requests.post(envd.interp + "/execute", json={"code": "print(6*7)"}, headers=h, timeout=60)
    lines = [json.loads(x) for x in r.text.splitlines()]
    lines = [x for x in lines if x["type"] != "keepalive"]  # a quiet second's line (the SDK skips it)
    assert r.status_code == 200 and r.headers["Content-Type"] == "application/x-ndjson", r.text
    assert lines[0]["type"] == "stdout" and lines[0]["text"] == "42\n", lines
    assert lines[-2:] == [{"type": "number_of_executions", "execution_count": 1}, {"type": "end_of_execution"}], lines
    # E2B-Traffic-Access-Token is taken where X-Access-Token is missing (the SDK's /contexts calls)
    r = requests.get(envd.interp + "/contexts", headers={"E2B-Traffic-Access-Token": ALICE_TOKEN})
    assert r.status_code == 200 and len(r.json()) == 1 and r.json()[0]["language"] == "python", r.text
    kid = r.json()[0]["id"]
    errors = [
        requests.get(envd.interp + "/contexts"),
        requests.post(envd.interp + "/execute", json={"code": "1", "env_vars": {"A": "b"}}, headers=h),
        requests.post(envd.interp + "/execute", json={"code": "1", "env_vars": ["A"]}, headers=h),
        requests.post(envd.interp + "/execute", json={"nocode": 1}, headers=h),
        requests.post(envd.interp + "/execute", data=b"[", headers=dict(h, **{"Content-Type": "application/json"})),
        requests.get(envd.interp + "/execute", headers=h),
        requests.post(envd.interp + "/contexts/k-none/restart", headers=h),
        requests.post(envd.interp + "/contexts/%s/other" % kid, headers=h),
        requests.post(envd.interp + "/execute", json={"code": "1", "context_id": "k-none"}, headers=h),
        requests.post(envd.interp + "/execute", json={"code": "1", "language": "cobol"}, headers=h),
    ]
    # env_vars: a name outside the statement's env allowlist is policy's refusal (as commands.run's env)
    assert [r.status_code for r in errors] == [401, 403, 400, 400, 400, 405, 404, 404, 404, 400], \
        [(r.status_code, r.text[:200]) for r in errors]
    assert "policy.command_not_allowed" in errors[1].text, errors[1].text
    assert requests.delete(envd.interp + "/contexts/" + kid, headers=h).status_code == 204
    assert requests.get(envd.interp + "/contexts", headers=h).json() == []


def test_client_leaving_interrupts_the_cell(envd, workspace):
    h = {"X-Access-Token": ALICE_TOKEN}
    assert requests.post(envd.interp + "/execute", json={"code": "n = 0"}, headers=h, timeout=60).status_code == 200
    # a quiet endless cell over a raw connection that is closed mid-cell
    body = json.dumps({"code": "import time\nwhile True:\n    n += 1\n    time.sleep(0.01)"}).encode()
    port = int(envd.interp.rsplit(":", 1)[1])
    sock = socket.create_connection(("127.0.0.1", port), timeout=10)
    sock.sendall(b"POST /execute HTTP/1.1\r\nHost: 127.0.0.1:%d\r\nX-Access-Token: %s\r\nContent-Type: application/json\r\n"
                 b"Content-Length: %d\r\n\r\n%s" % (port, ALICE_TOKEN.encode(), len(body), body))
    got = b""
    while b"keepalive" not in got:  # a quiet second's line: the cell runs
        more = sock.recv(4096)
        assert more, got
        got += more
    assert got.startswith(b"HTTP/1.1 200"), got
    sock.close()
    t0 = time.time()
    # the next cell runs promptly (not after the 60 s cell timeout), the loop is no longer running
    r = requests.post(envd.interp + "/execute", json={"code": "a = n; time.sleep(0.5); (n == a, n > 0)"}, headers=h,
                      timeout=60)
    waited = time.time() - t0
    lines = [json.loads(x) for x in r.text.splitlines()]
    assert [x.get("text") for x in lines if x["type"] == "result"] == ["(True, True)"], lines
    assert waited < 15, waited


def test_listener_config(abx, workspace, tmp_path):
    # absent section: no envd listener
    port = free_port()
    cfg = config(workspace, str(tmp_path), port)
    del cfg["e2b"]
    abx(cfg)
    with pytest.raises(requests.ConnectionError):
        requests.get("http://127.0.0.1:%d/health" % port, timeout=2)
    # a non-loopback envd listener without TLS or allow_plaintext does not start
    cfg = config(workspace, str(tmp_path / "second"), free_port())
    cfg["e2b"]["envd_listen"] = "0.0.0.0:%d" % free_port()
    s = abx(cfg, start=False)
    with pytest.raises(RuntimeError) as e:
        s.start()
    assert "e2b.envd_listen 0.0.0.0" in str(e.value) and "allow_plaintext" in str(e.value)
    # a bad value is a config error with its line
    cfg["e2b"] = {"envd_listen": "nonsense", "other": 1}
    s = abx(cfg, start=False)
    with pytest.raises(RuntimeError) as e:
        s.start()
    assert "e2b" in str(e.value)


def test_every_listener_is_bound_when_health_answers(abx, workspace, tmp_path):
    """The main listener's GET /health is the readiness signal: when it answers, the envd and
    interpreter listeners answer too (they bind first). A busy envd port stops the start with
    the listener's name, and no main listener stays behind."""
    for i in range(5):
        port, interp = free_port(), free_port()
        s = abx(config(workspace, str(tmp_path / ("r%d" % i)), port, interp))
        assert requests.get("http://127.0.0.1:%d/health" % port, timeout=2).status_code == 204
        assert requests.get("http://127.0.0.1:%d/health" % interp, timeout=2).status_code == 204
        s.stop()
    busy = socket.socket()
    busy.bind(("127.0.0.1", 0))
    busy.listen(1)
    try:
        s = abx(config(workspace, str(tmp_path / "busy"), busy.getsockname()[1]), start=False)
        with pytest.raises(RuntimeError) as e:
            s.start()
        assert "cannot listen on e2b.envd_listen" in str(e.value), str(e.value)
        assert s.proc.poll() is not None and s.proc.returncode != 0
        with pytest.raises(requests.ConnectionError):
            requests.get(s.url + "/health", timeout=2)
    finally:
        busy.close()


def sign(path, op, user, token, exp=None):
    raw = "%s:%s:%s:%s" % (path, op, user, token) + (":%d" % exp if exp is not None else "")
    import hashlib
    return "v1_" + base64.b64encode(hashlib.sha256(raw.encode()).digest()).decode().rstrip("=")


@pytest.fixture
def signed_envd(abx, workspace, tmp_path):
    """alice's token is read in plain text (token_file), so pre-signed URLs can name her;
    bob's is only a hash, so nothing signed can name him."""
    port = free_port()
    cfg = config(workspace, str(tmp_path), port)
    tf = os.path.join(str(tmp_path), "alice.token")
    with open(tf, "w") as f:
        f.write(ALICE_TOKEN + "\n")
    os.chmod(tf, 0o600)
    cfg["auth"]["tokens"][0] = {"principal": "alice", "roles": ["agent"], "token_file": tf}
    s = abx(cfg)
    s.envd = "http://127.0.0.1:%d" % port
    s.ledger_db = os.path.join(str(tmp_path), "ledger.db")
    return s


def test_presigned_urls(signed_envd, workspace):
    s, url = signed_envd, signed_envd.envd + "/files"
    with open(workspace + "/s.txt", "w") as f:
        f.write("signed read\n")
    path = workspace + "/s.txt"
    r = requests.get(url, params={"path": path, "signature": sign(path, "read", "", ALICE_TOKEN)})
    assert r.status_code == 200 and r.text == "signed read\n", r.text
    # the username is part of what is signed
    r = requests.get(url, params={"path": path, "username": "user", "signature": sign(path, "read", "user", ALICE_TOKEN)})
    assert r.status_code == 200, r.text
    exp = int(time.time()) + 60
    r = requests.get(url, params={"path": path, "signature": sign(path, "read", "", ALICE_TOKEN, exp),
                                  "signature_expiration": exp})
    assert r.status_code == 200, r.text
    # a write signature uploads
    up = workspace + "/up/signed.bin"
    r = requests.post(url, params={"path": up, "signature": sign(up, "write", "", ALICE_TOKEN)}, data=b"xyz",
                      headers={"Content-Type": "application/octet-stream"})
    assert r.status_code == 200 and open(up, "rb").read() == b"xyz", r.text
    rows = ledger(s, "SELECT principal FROM action_groups WHERE door = 'e2b' AND op = 'files.write'")
    assert rows and rows[0][0] == "alice", rows
    refused = {
        "expired": {"path": path, "signature": sign(path, "read", "", ALICE_TOKEN, exp - 120),
                    "signature_expiration": exp - 120},
        "expiration not signed": {"path": path, "signature": sign(path, "read", "", ALICE_TOKEN),
                                  "signature_expiration": exp},
        "other path": {"path": workspace + "/other", "signature": sign(path, "read", "", ALICE_TOKEN)},
        "other user": {"path": path, "username": "root", "signature": sign(path, "read", "", ALICE_TOKEN)},
        "write signature read": {"path": path, "signature": sign(path, "write", "", ALICE_TOKEN)},
        "hash-only token": {"path": path, "signature": sign(path, "read", "", BOB_TOKEN)},
        "tampered": {"path": path, "signature": sign(path, "read", "", ALICE_TOKEN)[:-2] + "AA"},
        "no v1": {"path": path, "signature": sign(path, "read", "", ALICE_TOKEN)[3:]},
        "garbage expiration": {"path": path, "signature": sign(path, "read", "", ALICE_TOKEN),
                               "signature_expiration": "12x"},
        "no signature": {"path": path},
    }
    for what, params in refused.items():
        r = requests.get(url, params=params)
        assert r.status_code == 401, (what, r.status_code, r.text)
    r = requests.get(url, params=refused["expired"])
    assert "expired" in r.json()["message"], r.text
    # signatures name a caller for /files only
    r = requests.get(s.envd + "/envs", params={"signature": sign("", "read", "", ALICE_TOKEN)})
    assert r.status_code == 401
    # a signed URL is still alice, under alice's policy: outside her paths is refused
    r = requests.get(url, params={"path": "/etc/passwd", "signature": sign("/etc/passwd", "read", "", ALICE_TOKEN)})
    assert r.status_code == 403, r.text


def test_sdk_presigned_urls(sdk, signed_envd, workspace):
    rep = run_sdk(signed_envd, "signedUrls", workspace)
    assert rep["uploadHasSignature"] is True, rep
    assert rep["upload"]["status"] == 200 and rep["upload"]["body"][0]["path"] == workspace + "/signed/up.txt", rep
    assert rep["download"] == {"status": 200, "text": "signed upload\n"}, rep
    assert rep["timedHasExpiration"] is True and rep["timed"] == 200, rep
    assert rep["readSigPost"] == 401 and rep["otherPath"] == 401, rep
    assert rep["outside"] == 403, rep


def test_sdk_full_disk(sdk, abx, workspace, tmp_path):
    """A write that does not fit is envd's 507, which the SDK raises as NotEnoughSpaceError;
    nothing half-written is left. abx runs in a user and mount namespace of its own with a
    256 KiB tmpfs under the workspace (skipped where unprivileged user namespaces are off)."""
    if subprocess.run(["unshare", "-Urm", "true"], capture_output=True).returncode != 0:
        pytest.skip("unshare -Urm is not permitted here: no small filesystem for the test")
    small = os.path.join(workspace, "small")
    os.makedirs(small)
    port = free_port()
    s = abx(config(workspace, str(tmp_path), port), start=False)
    inner = s.command
    s.command = lambda: ["unshare", "-Urm", "sh", "-c", 'mount -t tmpfs -o size=256k tmpfs "$0" && exec "$@"',
                         small] + inner()
    s.start()
    s.envd = "http://127.0.0.1:%d" % port
    rep = run_sdk(s, "fullDisk", workspace, outside=small + "/big.bin")
    assert rep["big"]["space"] is True and rep["big"]["name"] == "NotEnoughSpaceError", rep
    assert rep["big"]["message"].startswith("files.no_space:"), rep
    assert rep["small"] == "big.bin.small", rep
    # nothing half-written: the file that did not fit is not there (tmpfs lives in abx's namespace)
    r = requests.get(s.envd + "/files", params={"path": small + "/big.bin"}, headers={"X-Access-Token": ALICE_TOKEN})
    assert r.status_code == 404, r.text
