"""Issue 12, class 6: an approval binds what its arguments name, not just the arguments.

The approver reviewed `sh script.sh`; the agent rewrote script.sh before the decision;
the approved run must not execute the new content. When a call is held, abx hashes every
regular file its arguments name (path parameters; for commands the program and every
argv / command-string word that is a file in the call's roots), shows them to the
approver, and re-checks them before the approved run: any change fails the held call
with 409 approval.stale, runs nothing, and is recorded in the held call's ledger group."""
import hashlib
import json
import os
import sqlite3
import time

import pytest

from abxtest import ALICE_TOKEN, APPROVER_TOKEN, assert_error, tokens


def config(ws, ledger):
    stmts = [{"ops": ["core.*", "approvals.*"], "principals": ["*"]},
             {"ops": ["approvals.decide"], "principals": ["role:approver"]},
             {"ops": ["files.read", "files.stat"], "principals": ["alice"], "paths": [ws + "/**"]},
             {"ops": ["files.write", "files.delete"], "principals": ["alice"], "paths": [ws + "/**"],
              "approval": "required"},
             {"ops": ["commands.run"], "principals": ["alice"], "paths": [ws + "/**"],
              "commands": ["sh *", "python3 *"], "approval": "required"}]
    return {"workspace": ws, "terminal_listen": "off", "ledger": {"path": ledger},
            "auth": {"tokens": tokens("alice", "bob", "ann")}, "policy": {"allow": stmts}}


@pytest.fixture
def srv(abx, workspace, tmp_path):
    ledger = str(tmp_path / "ledger.db")
    s = abx(config(workspace, ledger))
    s.ledger_path = ledger
    return s


def hold(s, body, path="/commands/run"):
    r = s.post(path, token=ALICE_TOKEN, json_body=body, timeout=20)
    assert r.status_code == 202, r.text
    return r.json()["approval_id"], r


def approve(s, aid):
    r = s.post("/approvals/" + aid, token=APPROVER_TOKEN, json_body={"decision": "approve"})
    assert r.status_code == 200, r.text


def poll(s, aid):
    deadline = time.time() + 10
    while True:
        r = s.get("/approvals/" + aid, token=ALICE_TOKEN)
        if r.status_code != 202 or time.time() > deadline:
            return r
        time.sleep(0.05)


def record(s, aid):
    rows = [x for x in s.get("/approvals", token=APPROVER_TOKEN).json()["approvals"] if x["id"] == aid]
    assert len(rows) == 1, rows
    return rows[0]


def sha(data):
    return hashlib.sha256(data).hexdigest()


def write(path, text):
    with open(path, "w") as f:
        f.write(text)


def held_events(s, request_id, want, timeout=3.0):
    deadline = time.time() + timeout
    while True:
        con = sqlite3.connect(s.ledger_path, timeout=10)
        try:
            g = con.execute("SELECT group_id FROM action_groups WHERE request_id = ?", (request_id,)).fetchall()
            evs = [(k, json.loads(d)) for k, d in con.execute(
                "SELECT kind, data FROM action_events WHERE group_id = ? ORDER BY ordinal", (g[0][0],))] if g else []
        finally:
            con.close()
        if want in [k for k, _ in evs] or time.time() > deadline:
            return evs
        time.sleep(0.05)


SCRIPT_A = "echo A\n"
SCRIPT_B = "echo B\ntouch pwned\n"


def test_rewritten_script_is_stale_and_never_runs(srv, workspace):
    script = os.path.join(workspace, "script.sh")
    write(script, SCRIPT_A)
    aid, held = hold(srv, {"command": "sh script.sh"})
    # the agent rewrites the reviewed script before the approver decides
    write(script, SCRIPT_B)
    approve(srv, aid)
    r = poll(srv, aid)
    assert_error(r, 409, "approval.stale")
    assert "script.sh" in r.json()["error"]["message"], r.text
    time.sleep(0.3)
    assert not os.path.exists(os.path.join(workspace, "pwned")), "the rewritten script ran"
    evs = held_events(srv, held.headers["X-Request-Id"], "approval_stale")
    kinds = [k for k, _ in evs]
    assert "approval_stale" in kinds, kinds
    assert "script.sh" in json.dumps(dict(evs)["approval_stale"])
    fin = dict(evs).get("approved_call_finished") or dict(held_events(srv, held.headers["X-Request-Id"],
                                                                       "approved_call_finished"))[
        "approved_call_finished"]
    assert fin["status"] == 409, fin


def test_unchanged_script_runs(srv, workspace):
    write(os.path.join(workspace, "script.sh"), SCRIPT_A)
    aid, _ = hold(srv, {"command": "sh script.sh"})
    approve(srv, aid)
    r = poll(srv, aid)
    assert r.status_code == 200, r.text
    j = r.json()
    assert j["exit_code"] == 0 and j["stdout"] == "A\n", j


def test_approver_sees_the_named_files_and_their_hashes(srv, workspace):
    write(os.path.join(workspace, "tool.py"), "print('tool')\n")
    write(os.path.join(workspace, "cfg.yaml"), "k: v\n")
    aid, held = hold(srv, {"argv": ["python3", "tool.py", "--config=cfg.yaml", "--verbose"]})
    files = {f["path"]: f["sha256"] for f in record(srv, aid)["files"]}
    assert files.get(os.path.join(workspace, "tool.py")) == sha(b"print('tool')\n"), files
    assert files.get(os.path.join(workspace, "cfg.yaml")) == sha(b"k: v\n"), files
    # the requester's own poll and the 202 body show the same binding
    assert held.json()["files"] == record(srv, aid)["files"]
    got = srv.get("/approvals/" + aid, token=APPROVER_TOKEN).json()
    assert {f["path"]: f["sha256"] for f in got["files"]} == files
    # a file named inside a shell command string is bound too
    write(os.path.join(workspace, "script.sh"), SCRIPT_A)
    aid2, _ = hold(srv, {"argv": ["sh", "-c", "sh script.sh && echo done"]})
    paths = [f["path"] for f in record(srv, aid2)["files"]]
    assert os.path.join(workspace, "script.sh") in paths, paths
    # a changed config file (not the program) makes the approval stale as well
    write(os.path.join(workspace, "cfg.yaml"), "k: other\n")
    approve(srv, aid)
    assert_error(poll(srv, aid), 409, "approval.stale")


def test_path_parameter_target_changed_is_stale(srv, workspace):
    target = os.path.join(workspace, "notes.txt")
    write(target, "reviewed\n")
    aid, _ = hold(srv, {"path": target}, path="/ops/files.delete")
    assert record(srv, aid)["files"] == [{"path": target, "sha256": sha(b"reviewed\n")}]
    write(target, "something else the approver never saw\n")
    approve(srv, aid)
    assert_error(poll(srv, aid), 409, "approval.stale")
    assert open(target).read() == "something else the approver never saw\n", "the stale delete ran"
    # files.write over an existing file: the same
    aid, _ = hold(srv, {"path": target, "content": "new"}, path="/files/write")
    write(target, "changed again\n")
    approve(srv, aid)
    assert_error(poll(srv, aid), 409, "approval.stale")
    assert open(target).read() == "changed again\n"


def test_deleted_file_is_stale(srv, workspace):
    script = os.path.join(workspace, "script.sh")
    write(script, SCRIPT_A)
    aid, _ = hold(srv, {"command": "sh script.sh"})
    os.unlink(script)
    approve(srv, aid)
    r = poll(srv, aid)
    assert_error(r, 409, "approval.stale")
    assert "removed" in r.json()["error"]["message"], r.text


def test_file_swapped_for_a_symlink_is_stale(srv, workspace):
    script = os.path.join(workspace, "script.sh")
    write(script, SCRIPT_A)
    write(os.path.join(workspace, "evil.sh"), SCRIPT_B)
    aid, _ = hold(srv, {"command": "sh script.sh"})
    os.unlink(script)
    os.symlink("evil.sh", script)
    approve(srv, aid)
    assert_error(poll(srv, aid), 409, "approval.stale")
    time.sleep(0.3)
    assert not os.path.exists(os.path.join(workspace, "pwned"))


def test_file_replaced_by_a_directory_is_stale(srv, workspace):
    target = os.path.join(workspace, "notes.txt")
    write(target, "reviewed\n")
    aid, _ = hold(srv, {"path": target}, path="/ops/files.delete")
    os.unlink(target)
    os.mkdir(target)
    approve(srv, aid)
    assert_error(poll(srv, aid), 409, "approval.stale")
    assert os.path.isdir(target)


def test_declarative_command_binds_its_template_files(abx, workspace, tmp_path):
    """A custom command `sh {script}` (a plain string parameter) binds the script too."""
    cfg = config(workspace, str(tmp_path / "l.db"))
    cfg["custom"] = [{"name": "runit", "argv": ["sh", "{script}"], "params": {"script": "string"},
                      "effects": ["exec"]}]
    cfg["policy"]["allow"].append({"ops": ["custom.runit"], "principals": ["alice"], "paths": [workspace + "/**"],
                                   "approval": "required"})
    s = abx(cfg)
    script = os.path.join(workspace, "script.sh")
    write(script, SCRIPT_A)
    aid, _ = hold(s, {"script": "script.sh"}, path="/ops/custom.runit")
    assert {"path": script, "sha256": sha(SCRIPT_A.encode())} in record(s, aid)["files"]
    write(script, SCRIPT_B)
    approve(s, aid)
    assert_error(poll(s, aid), 409, "approval.stale")
    time.sleep(0.3)
    assert not os.path.exists(os.path.join(workspace, "pwned"))


def test_session_command_binds_files_in_the_sessions_cwd(abx, workspace, tmp_path):
    """In a command session the words resolve against the session's cwd, as the process will."""
    cfg = config(workspace, str(tmp_path / "l.db"))
    cfg["policy"]["allow"] += [
        {"ops": ["commands.sessions.create"], "principals": ["alice"], "paths": [workspace + "/**"],
         "commands": ["sh *"]},
        {"ops": ["commands.sessions.exec"], "principals": ["alice"], "paths": [workspace + "/**"],
         "commands": ["sh *"], "approval": "required"}]
    s = abx(cfg)
    sub = os.path.join(workspace, "sub")
    script = os.path.join(sub, "script.sh")
    write(script, SCRIPT_A)
    r = s.post("/ops/commands.sessions.create", token=ALICE_TOKEN, json_body={"cwd": sub})
    assert r.status_code == 200, r.text
    sid = r.json()["id"]
    aid, _ = hold(s, {"id": sid, "command": "sh script.sh"}, path="/ops/commands.sessions.exec")
    assert [f["path"] for f in record(s, aid)["files"]] == [script]
    write(script, SCRIPT_B)
    approve(s, aid)
    assert_error(poll(s, aid), 409, "approval.stale")
    time.sleep(0.3)
    assert not os.path.exists(os.path.join(sub, "pwned"))


def test_denied_file_named_by_a_command_is_not_hashed_for_anyone(abx, workspace, tmp_path):
    """The binding must not become an oracle: a denied file's hash is shown to nobody."""
    cfg = config(workspace, str(tmp_path / "l.db"))
    secret = os.path.join(workspace, "secret.txt")
    write(secret, "hunter2\n")
    cfg["policy"]["deny"] = [{"paths": [secret]}]
    s = abx(cfg)
    write(os.path.join(workspace, "script.sh"), SCRIPT_A)
    aid, held = hold(s, {"argv": ["sh", "script.sh", "secret.txt"]})
    paths = [f["path"] for f in record(s, aid)["files"]]
    assert paths == [os.path.join(workspace, "script.sh")], paths
    assert sha(b"hunter2\n") not in held.text


def test_file_too_large_to_bind_refuses_the_hold(srv, workspace):
    """Hashing only a prefix would let a change past it through: refuse to hold instead."""
    big = os.path.join(workspace, "big.sh")
    with open(big, "wb") as f:
        f.truncate(65 << 20)
    r = srv.post("/commands/run", token=ALICE_TOKEN, json_body={"command": "sh big.sh"}, timeout=20)
    assert_error(r, 413, "limit.max_bytes")
    assert "big.sh" in r.json()["error"]["message"]
    assert srv.get("/approvals", token=APPROVER_TOKEN).json()["approvals"] == []
