"""Human approval: `approval: required` holds a call (202 pending, or Prefer: wait=N),
approvers list and decide (approvals.decide is explicit-only and needs role approver),
self-approval, double decisions and unknown ids are refused, and an approved call runs
exactly once with exactly the held arguments — every step in the held call's ledger group."""
import hashlib
import json
import os
import sqlite3
import threading
import time

import pytest

from abxtest import ALICE_TOKEN, APPROVER_TOKEN, BOB_TOKEN, CAROL_TOKEN, VAL_TOKEN, assert_error, tokens


def make_config(ws, ledger_path, approvers=True):
    policy = {"allow": [
        {"ops": ["core.*", "ledger.*", "approvals.*"], "principals": ["*"]},
        # explicit-only admin op: mounted by its exact id; alice gets it mounted but is no approver
        {"ops": ["approvals.decide"], "principals": ["role:approver", "alice"]},
        {"ops": ["files.read", "files.stat", "files.list"], "principals": ["role:agent"], "paths": [ws + "/**"]},
        {"ops": ["files.write"], "principals": ["role:agent"], "paths": [ws + "/**"], "approval": "required"},
        {"ops": ["commands.run"], "principals": ["role:agent"], "paths": [ws + "/**"],
         "commands": ["sh *", "echo *"], "approval": "required"},
    ]}
    cast = ("alice", "bob", "carol", "root") + (("ann", "val") if approvers else ())
    return {"workspace": ws, "terminal_listen": "off", "auth": {"tokens": tokens(*cast)}, "policy": policy,
            "ledger": {"path": ledger_path}}


@pytest.fixture
def srv(abx, workspace, tmp_path):
    path = str(tmp_path / "ledger.db")
    s = abx(make_config(workspace, path))
    s.ledger_path = path
    return s


def ok(r, status=200):
    assert r.status_code == status, "%s %s" % (r.status_code, r.text[:800])
    return r.json()


def counter_cmd(ws, name="count"):
    return "sh -c 'echo x >> %s/%s'" % (ws, name)


def hold(s, body, token=ALICE_TOKEN, op_path="/commands/run", headers=None):
    r = s.post(op_path, token=token, json_body=body, headers=headers, timeout=30)
    j = ok(r, 202)
    assert j["status"] == "pending", j
    assert isinstance(j["approval_id"], str) and j["approval_id"], j
    assert j["poll"] == "/approvals/" + j["approval_id"], j
    return j["approval_id"], r


def decide(s, aid, decision, token=APPROVER_TOKEN, reason="because"):
    body = {"decision": decision}
    if reason is not None:
        body["reason"] = reason
    return s.post("/approvals/" + aid, token=token, json_body=body)


def poll_done(s, aid, token=ALICE_TOKEN, timeout=10):
    deadline = time.time() + timeout
    while True:
        r = s.get("/approvals/" + aid, token=token)
        if r.status_code != 202 or time.time() > deadline:
            return r
        time.sleep(0.05)


def lines(path):
    if not os.path.exists(path):
        return 0
    with open(path) as f:
        return len(f.read().splitlines())


def held_group_events(s, request_id, want=None, timeout=3.0):
    """Event kinds and data of the ledger group recorded for the held request."""
    deadline = time.time() + timeout
    while True:
        con = sqlite3.connect(s.ledger_path, timeout=10)
        try:
            g = con.execute("SELECT group_id FROM action_groups WHERE request_id = ?", (request_id,)).fetchall()
            evs = []
            if g:
                evs = [(k, json.loads(d)) for k, d in con.execute(
                    "SELECT kind, data FROM action_events WHERE group_id = ? ORDER BY ordinal", (g[0][0],))]
        finally:
            con.close()
        ks = [k for k, _ in evs]
        if (want is None and evs) or (want is not None and all(w in ks for w in want)) or time.time() > deadline:
            return evs


# -- holding ----------------------------------------------------------------------------------------

def test_no_approver_configured_denies(abx, workspace, tmp_path):
    s = abx(make_config(workspace, str(tmp_path / "l.db"), approvers=False))
    r = s.post("/commands/run", token=ALICE_TOKEN, json_body={"command": counter_cmd(workspace)})
    assert_error(r, 403, "approval.no_approver")
    time.sleep(0.2)
    assert not os.path.exists(os.path.join(workspace, "count"))


def test_held_call_is_pending_and_listed(srv, workspace):
    aid, r = hold(srv, {"command": counter_cmd(workspace)})
    time.sleep(0.3)
    assert not os.path.exists(os.path.join(workspace, "count")), "a held call ran before approval"
    p = ok(srv.get("/approvals/" + aid, token=ALICE_TOKEN), 202)
    assert p["status"] == "pending" and p["approval_id"] == aid
    # approvers see every held call; requesters their own; others none of alice's
    ids = lambda tok: [x["id"] for x in ok(srv.get("/approvals", token=tok))["approvals"]]
    assert aid in ids(APPROVER_TOKEN)
    assert aid in ids(VAL_TOKEN)
    assert aid in ids(ALICE_TOKEN)
    assert aid not in ids(CAROL_TOKEN)
    assert aid not in ids(BOB_TOKEN)
    entry = [x for x in ok(srv.get("/approvals", token=APPROVER_TOKEN))["approvals"] if x["id"] == aid][0]
    assert entry["op"] == "commands.run" and entry["principal"] == "alice"
    assert entry["args"]["command"] == counter_cmd(workspace), entry
    # the held call's group is in the ledger already
    evs = held_group_events(srv, r.headers["X-Request-Id"], want=["approval_requested"])
    assert "approval_requested" in [k for k, _ in evs], evs


def test_approve_runs_exactly_once_with_held_args(srv, workspace):
    cnt = os.path.join(workspace, "count")
    cmd = counter_cmd(workspace)
    aid, held = hold(srv, {"command": cmd})
    d = ok(decide(srv, aid, "approve", reason="looks fine"))
    assert d.get("decision") in ("approve", "approved"), d
    r = poll_done(srv, aid)
    j = ok(r)
    assert j["exit_code"] == 0 and j["status"] == "completed", j
    assert j["argv"][1:] == ["-c", "echo x >> %s/count" % workspace], j
    assert lines(cnt) == 1
    # polling again returns the same recorded result and runs nothing
    for _ in range(2):
        again = ok(srv.get("/approvals/" + aid, token=ALICE_TOKEN))
        assert again == j
    ok(srv.get("/approvals/" + aid, token=APPROVER_TOKEN))
    time.sleep(0.3)
    assert lines(cnt) == 1, "the approved call ran more than once"
    # a second decision is refused
    assert_error(decide(srv, aid, "approve"), 409, "approval.already_decided")
    assert_error(decide(srv, aid, "deny"), 409, "approval.already_decided")
    assert lines(cnt) == 1
    # every step in the held call's group
    evs = held_group_events(srv, held.headers["X-Request-Id"],
                            want=["approval_requested", "approval_decided", "approved_call_finished"])
    ks = [k for k, _ in evs]
    for k in ("approval_requested", "approval_decided", "approved_call_finished"):
        assert ks.count(k) == 1, ks
    assert ks.index("approval_requested") < ks.index("approval_decided") < ks.index("approved_call_finished"), ks
    dec = dict(evs)["approval_decided"]
    assert "approve" in json.dumps(dec) and "ann" in json.dumps(dec), dec
    fin = dict(evs)["approved_call_finished"]
    assert fin.get("status") == 200, fin


def test_approved_write_uses_exactly_the_held_content(srv, workspace):
    target = os.path.join(workspace, "held.txt")
    aid, held = hold(srv, {"path": target, "content": "held content\n"}, op_path="/files/write")
    assert not os.path.exists(target)
    ok(decide(srv, aid, "approve"))
    j = ok(poll_done(srv, aid))
    assert j.get("bytes_written") == len("held content\n"), j
    with open(target) as f:
        assert f.read() == "held content\n"
    # the held arguments are recorded redacted like any other call's
    evs = held_group_events(srv, held.headers["X-Request-Id"], want=["approval_requested"])
    req = dict(evs)["approval_requested"]
    assert req["args"]["path"] == target, req
    assert req["args"]["content"] == {"sha256": hashlib.sha256(b"held content\n").hexdigest(), "size": 13}, req


def test_poll_returns_the_held_calls_own_error(srv, workspace):
    """The approved run's own failure is what polling answers (status and error code)."""
    target = os.path.join(workspace, "late.txt")
    aid, held = hold(srv, {"path": target, "content": "from the held call", "mode": "create_new"},
                     op_path="/files/write")
    with open(target, "w") as f:
        f.write("created meanwhile")
    ok(decide(srv, aid, "approve"))
    r = poll_done(srv, aid)
    assert_error(r, 400, "args.invalid")
    with open(target) as f:
        assert f.read() == "created meanwhile"
    evs = held_group_events(srv, held.headers["X-Request-Id"], want=["approved_call_finished"])
    assert dict(evs).get("approved_call_finished", {}).get("status") == 400, evs


def test_concurrent_decisions_only_one_wins(srv, workspace):
    cnt = os.path.join(workspace, "count")
    aid, _ = hold(srv, {"command": counter_cmd(workspace)})
    out = []

    def go():
        out.append(decide(srv, aid, "approve"))

    ts = [threading.Thread(target=go) for _ in range(8)]
    for t in ts:
        t.start()
    for t in ts:
        t.join(15)
    codes = sorted(r.status_code for r in out)
    assert codes == [200] + [409] * 7, codes
    for r in out:
        if r.status_code == 409:
            assert_error(r, 409, "approval.already_decided")
    ok(poll_done(srv, aid))
    time.sleep(0.3)
    assert lines(cnt) == 1


def test_deny(srv, workspace):
    cnt = os.path.join(workspace, "count")
    aid, held = hold(srv, {"command": counter_cmd(workspace)})
    ok(decide(srv, aid, "deny", reason="no"))
    assert_error(poll_done(srv, aid), 403, "approval.denied")
    assert_error(srv.get("/approvals/" + aid, token=ALICE_TOKEN), 403, "approval.denied")
    time.sleep(0.3)
    assert not os.path.exists(cnt), "a denied call ran"
    assert_error(decide(srv, aid, "approve"), 409, "approval.already_decided")
    time.sleep(0.3)
    assert not os.path.exists(cnt), "approving after a deny ran the call"
    evs = held_group_events(srv, held.headers["X-Request-Id"], want=["approval_decided"])
    ks = [k for k, _ in evs]
    assert "approval_decided" in ks and "approved_call_finished" not in ks, ks
    assert "deny" in json.dumps(dict(evs)["approval_decided"])


def test_self_approval_refused(srv, workspace):
    cnt = os.path.join(workspace, "count")
    aid, _ = hold(srv, {"command": counter_cmd(workspace)}, token=VAL_TOKEN)
    assert_error(decide(srv, aid, "approve", token=VAL_TOKEN), 403, "approval.self_approval")
    time.sleep(0.2)
    assert not os.path.exists(cnt)
    ok(srv.get("/approvals/" + aid, token=VAL_TOKEN), 202)
    # another approver may
    ok(decide(srv, aid, "approve", token=APPROVER_TOKEN))
    ok(poll_done(srv, aid, token=VAL_TOKEN))
    assert lines(cnt) == 1


def test_mounted_non_approver_is_denied(srv, workspace):
    aid, _ = hold(srv, {"command": counter_cmd(workspace)}, token=CAROL_TOKEN)
    assert_error(decide(srv, aid, "approve", token=ALICE_TOKEN), 403, "policy.denied")
    time.sleep(0.2)
    assert not os.path.exists(os.path.join(workspace, "count"))
    ok(srv.get("/approvals/" + aid, token=CAROL_TOKEN), 202)


def test_decide_is_explicit_only(srv, workspace):
    """`approvals.*` mounts list/get for everyone but never the admin op approvals.decide."""
    aid, _ = hold(srv, {"command": counter_cmd(workspace)})
    for tok in (CAROL_TOKEN, BOB_TOKEN):
        r = srv.op("approvals.decide", {"id": aid, "decision": "approve"}, token=tok)
        assert_error(r, 404, "op.not_enabled")
    time.sleep(0.2)
    assert not os.path.exists(os.path.join(workspace, "count"))
    ok(srv.get("/approvals/" + aid, token=ALICE_TOKEN), 202)


def test_unknown_id(srv):
    assert_error(decide(srv, "0" * 32, "approve"), 404, "approval.not_found")
    assert_error(srv.get("/approvals/" + "0" * 32, token=APPROVER_TOKEN), 404, "approval.not_found")


def test_bad_decision_value(srv, workspace):
    aid, _ = hold(srv, {"command": counter_cmd(workspace)})
    assert_error(decide(srv, aid, "maybe"), 400, "args.invalid")
    ok(srv.get("/approvals/" + aid, token=ALICE_TOKEN), 202)


# -- Prefer: wait ---------------------------------------------------------------------------------------

def _approve_when_listed(s, decision, delay=0.4):
    deadline = time.time() + 8
    while time.time() < deadline:
        pend = [x for x in s.get("/approvals", token=APPROVER_TOKEN).json().get("approvals", [])
                if x["status"] == "pending"]
        if pend:
            time.sleep(delay)
            decide(s, pend[0]["id"], decision)
            return
        time.sleep(0.05)


def test_prefer_wait_returns_result_when_decided_in_time(srv, workspace):
    cnt = os.path.join(workspace, "count")
    t = threading.Thread(target=_approve_when_listed, args=(srv, "approve"))
    t.start()
    t0 = time.time()
    r = srv.post("/commands/run", token=ALICE_TOKEN, json_body={"command": counter_cmd(workspace)},
                 headers={"Prefer": "wait=8"}, timeout=20)
    el = time.time() - t0
    t.join(10)
    j = ok(r)
    assert j["exit_code"] == 0 and el < 7.5, (j, el)
    assert lines(cnt) == 1


def test_prefer_wait_denied_in_time(srv, workspace):
    t = threading.Thread(target=_approve_when_listed, args=(srv, "deny"))
    t.start()
    r = srv.post("/commands/run", token=ALICE_TOKEN, json_body={"command": counter_cmd(workspace)},
                 headers={"Prefer": "wait=8"}, timeout=20)
    t.join(10)
    assert_error(r, 403, "approval.denied")
    time.sleep(0.2)
    assert not os.path.exists(os.path.join(workspace, "count"))


def test_prefer_wait_times_out_pending(srv, workspace):
    t0 = time.time()
    r = srv.post("/commands/run", token=ALICE_TOKEN, json_body={"command": counter_cmd(workspace)},
                 headers={"Prefer": "wait=1"}, timeout=20)
    el = time.time() - t0
    j = ok(r, 202)
    assert j["status"] == "pending" and j["poll"] == "/approvals/" + j["approval_id"]
    assert 0.8 <= el < 4, el
    assert not os.path.exists(os.path.join(workspace, "count"))


def test_expired(abx, workspace, tmp_path):
    """limits.approval_ttl (default 15m): a held call not decided in time is 408
    approval.expired — to its caller's poll and to a late approver — and never runs."""
    path = str(tmp_path / "ledger.db")
    cfg = make_config(workspace, path)
    cfg["limits"] = {"approval_ttl": "1s"}
    s = abx(cfg)
    aid, _ = hold(s, {"command": counter_cmd(workspace)})
    time.sleep(1.3)
    r = s.get("/approvals/" + aid, token=ALICE_TOKEN)
    assert_error(r, 408, "approval.expired")
    r = decide(s, aid, "approve")
    assert r.status_code in (408, 409), r.text
    assert r.json()["error"]["code"] in ("approval.expired", "approval.already_decided"), r.text
    listed = ok(s.get("/approvals", token=APPROVER_TOKEN))
    states = {a["id"]: a["status"] for a in listed["approvals"]}
    assert states.get(aid) == "expired", listed
    time.sleep(0.3)
    assert not os.path.exists(os.path.join(workspace, "count"))


def test_expired_while_waiting_under_prefer_wait(abx, workspace, tmp_path):
    path = str(tmp_path / "ledger.db")
    cfg = make_config(workspace, path)
    cfg["limits"] = {"approval_ttl": "1s"}
    s = abx(cfg)
    t0 = time.time()
    r = s.post("/commands/run", token=ALICE_TOKEN, json_body={"command": counter_cmd(workspace)},
               headers={"Prefer": "wait=5"}, timeout=20)
    assert_error(r, 408, "approval.expired")
    assert time.time() - t0 < 4
    assert not os.path.exists(os.path.join(workspace, "count"))
