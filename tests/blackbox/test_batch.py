"""POST /batch: request validation (1–100 calls, bad JSON, 401), per-call pipeline results in
request order (404 / 403 inside the results), one ledger group per call linked to the batch's
group, the parallel read-only lane (overlapping intervals of slow reads) and mutating calls
as barriers (write-then-read sees the new content, read-then-write the old)."""
import hashlib
import json
import os
import sqlite3
import time

import pytest

from abxtest import ALICE_TOKEN, BOB_TOKEN, assert_error, sha256_hex

ROOT_TOKEN = "root-admin-token-0123456789ab"


def make_config(ws, ledger_path):
    policy = {"allow": [
        {"ops": ["core.*", "ledger.*"], "principals": ["*"]},
        {"ops": ["files.*"], "principals": ["role:agent"], "paths": [ws + "/**"]},
        {"ops": ["commands.run"], "principals": ["role:agent"], "paths": [ws + "/**"], "commands": ["echo *"]},
    ]}
    toks = [
        {"principal": "alice", "roles": ["agent"], "token_sha256": sha256_hex(ALICE_TOKEN)},
        {"principal": "bob", "roles": ["viewer"], "token_sha256": sha256_hex(BOB_TOKEN)},
        {"principal": "root", "roles": ["admin"], "token_sha256": sha256_hex(ROOT_TOKEN)},
    ]
    return {"workspace": ws, "terminal_listen": "off", "auth": {"tokens": toks}, "policy": policy,
            "ledger": {"path": ledger_path}}


@pytest.fixture
def srv(abx, workspace, tmp_path):
    path = str(tmp_path / "ledger.db")
    s = abx(make_config(workspace, path))
    s.ledger_path = path
    return s


def batch(s, calls, token=ALICE_TOKEN, timeout=60):
    return s.post("/batch", token=token, json_body={"calls": calls}, timeout=timeout)


def ok(r):
    assert r.status_code == 200, "%s %s" % (r.status_code, r.text[:800])
    return r.json()


def call(op, **args):
    return {"op": op, "args": args}


def results(r, n=None):
    j = ok(r)
    assert isinstance(j.get("results"), list), j
    assert isinstance(j.get("batch_group"), int) and j["batch_group"] > 0, j
    if n is not None:
        assert len(j["results"]) == n, j
    for x in j["results"]:
        for k in ("op", "status", "body", "started_us", "ended_us"):
            assert k in x, x
        assert x["ended_us"] >= x["started_us"], x
    return j


# -- validation -------------------------------------------------------------------------------------

def test_empty_and_too_many_calls(srv, workspace):
    assert_error(batch(srv, []), 400, "args.invalid")
    many = [call("files.stat", path=workspace + "/a.txt")] * 101
    assert_error(batch(srv, many), 400, "args.invalid")
    j = results(batch(srv, [call("files.stat", path=workspace + "/a.txt")] * 100), 100)
    assert all(x["status"] == 200 and x["body"]["exists"] is True for x in j["results"])


@pytest.mark.parametrize("body", [b"{", b"[1,2]", b"not json", b'{"calls": 5}'])
def test_malformed(srv, body):
    r = srv.post("/batch", token=ALICE_TOKEN, data=body, headers={"Content-Type": "application/json"})
    assert_error(r, 400, "request.bad_json")


def test_unauthenticated(srv, workspace):
    r = srv.post("/batch", json_body={"calls": [call("files.stat", path=workspace + "/a.txt")]})
    assert r.status_code == 401, r.text
    assert r.json()["error"]["code"].startswith("auth."), r.text
    r = srv.post("/batch", token="wrong-token-0123456789abcdef",
                 json_body={"calls": [call("files.stat", path=workspace + "/a.txt")]})
    assert r.status_code == 401, r.text


# -- results ------------------------------------------------------------------------------------------

def test_results_in_order_with_own_statuses(srv, workspace):
    calls = [
        call("files.read", path=workspace + "/a.txt"),
        call("files.write", path=workspace + "/new.txt", content="fresh"),
        call("files.read", path="/etc/hostname"),           # denied: outside the paths
        call("nosuch.op"),                                     # unknown
        call("commands.run", argv=["echo", "hi"]),
        call("files.stat", path=workspace + "/new.txt"),
        call("core.health"),
    ]
    j = results(batch(srv, calls), len(calls))
    res = j["results"]
    assert [x["op"] for x in res] == [c["op"] for c in calls]
    assert res[0]["status"] == 200 and res[0]["body"]["content"] == "hello\n"
    assert res[1]["status"] == 200 and open(workspace + "/new.txt").read() == "fresh"
    assert res[2]["status"] == 403 and res[2]["body"]["error"]["code"].startswith("policy."), res[2]
    assert res[3]["status"] == 404 and res[3]["body"]["error"]["code"] == "op.not_enabled", res[3]
    assert res[4]["status"] == 200 and res[4]["body"]["stdout"] == "hi\n", res[4]
    assert res[5]["status"] == 200 and res[5]["body"]["size"] == 5
    assert res[6]["status"] == 200


def test_unmounted_ops_inside_batch_are_404_each(srv, workspace):
    """bob (viewer) has no files.*: each such call gets its own 404; mounted ones still run."""
    calls = [call("files.read", path=workspace + "/a.txt"), call("core.health"),
             call("files.write", path=workspace + "/bob.txt", content="x")]
    j = results(batch(srv, calls, token=BOB_TOKEN), 3)
    s = [x["status"] for x in j["results"]]
    assert s == [404, 200, 404], j
    assert j["results"][0]["body"]["error"]["code"] == "op.not_enabled"
    assert j["results"][2]["body"]["error"]["code"] == "op.not_enabled"
    assert not os.path.exists(workspace + "/bob.txt")


def test_each_call_has_own_ledger_group_linked_to_batch(srv, workspace):
    calls = [
        call("files.read", path=workspace + "/a.txt"),
        call("files.write", path=workspace + "/lg.txt", content="x"),
        call("files.read", path="/etc/hostname"),
        call("nosuch.op"),
        call("files.stat", path=workspace + "/b.txt"),
    ]
    j = results(batch(srv, calls), len(calls))
    bg = j["batch_group"]
    deadline = time.time() + 2.0
    while True:
        con = sqlite3.connect(srv.ledger_path, timeout=10)
        try:
            rows = con.execute("SELECT group_id, op, principal, batch_group FROM action_groups WHERE batch_group = ?"
                               " ORDER BY group_id", (bg,)).fetchall()
            batch_row = con.execute("SELECT group_id, principal FROM action_groups WHERE group_id = ?",
                                    (bg,)).fetchall()
            fins = {}
            for gid, _, _, _ in rows:
                for (d,) in con.execute("SELECT data FROM action_events WHERE group_id = ? AND kind = 'finished'",
                                        (gid,)):
                    fins[gid] = json.loads(d)["status"]
        finally:
            con.close()
        if len(rows) >= len(calls) and len(fins) >= len(calls) or time.time() > deadline:
            break
        time.sleep(0.1)
    assert batch_row and batch_row[0][1] == "alice", batch_row
    assert sorted(r[1] for r in rows) == sorted(c["op"] for c in calls), rows
    assert len({r[0] for r in rows}) == len(calls) and bg not in {r[0] for r in rows}
    assert all(r[2] == "alice" for r in rows)
    by_op = {r[1]: fins.get(r[0]) for r in rows}
    assert by_op["files.write"] == 200 and by_op["nosuch.op"] == 404 and by_op["files.read"] in (200, 403)
    assert sorted(fins.values()) == sorted(x["status"] for x in j["results"])
    # ledger.get shows the link, and the call's arguments are redacted like any other's
    w = [r[0] for r in rows if r[1] == "files.write"][0]
    g = ok(srv.get("/ledger/%d" % w, token=ALICE_TOKEN))
    assert g["batch_group"] == bg and g["op"] == "files.write"
    adm = [e for e in g["events"] if e["kind"] == "admitted"]
    assert adm and adm[0]["data"]["args"]["content"] == {"sha256": hashlib.sha256(b"x").hexdigest(), "size": 1}
    assert adm[0]["data"]["args"]["path"] == workspace + "/lg.txt"


def test_unknown_ops_in_batches_each_get_a_group(srv, workspace):
    """Floods of 404s from clients are aggregated per minute; calls inside a batch are not
    (the batch was authenticated and recorded): every one has its own group."""
    bgs = [results(batch(srv, [call("nosuch.op"), call("other.nosuch.op")]), 2)["batch_group"] for _ in range(3)]
    deadline = time.time() + 3.0
    while True:
        con = sqlite3.connect(srv.ledger_path, timeout=10)
        try:
            rows = con.execute("SELECT batch_group, op FROM action_groups WHERE batch_group IN (?, ?, ?)",
                               bgs).fetchall()
        finally:
            con.close()
        if len(rows) >= 6 or time.time() > deadline:
            break
        time.sleep(0.1)
    assert sorted(rows) == sorted((bg, op) for bg in bgs for op in ("nosuch.op", "other.nosuch.op")), rows


# -- scheduling -----------------------------------------------------------------------------------------

def _overlap(a, b):
    return a["started_us"] < b["ended_us"] and b["started_us"] < a["ended_us"]


def test_read_lane_runs_in_parallel(srv, workspace):
    big = []
    for i in range(3):
        p = os.path.join(workspace, "big%d.bin" % i)
        with open(p, "wb") as f:
            f.write(b"abcdefgh" * (1024 * 1024))  # 8 MiB
        big.append(p)
    calls = [call("files.read", path=p) for p in big]
    best = None
    for _ in range(3):  # scheduling noise: one overlapping run out of three is enough
        j = results(batch(srv, calls), 3)
        res = j["results"]
        assert all(x["status"] == 200 and x["body"]["size"] == 8 * 1024 * 1024 for x in res), \
            [(x["status"], str(x["body"])[:200]) for x in res]
        pairs = [(i, k) for i in range(3) for k in range(i + 1, 3) if _overlap(res[i], res[k])]
        best = [(x["started_us"], x["ended_us"]) for x in res]
        if pairs:
            break
    assert pairs, "no two reads of the lane overlapped: %r" % best


def test_mutating_call_is_a_barrier_in_time(srv, workspace):
    calls = [call("files.read", path=workspace + "/a.txt"), call("files.read", path=workspace + "/b.txt"),
             call("files.write", path=workspace + "/bar.txt", content="x"),
             call("files.read", path=workspace + "/a.txt"), call("files.read", path=workspace + "/b.txt")]
    res = results(batch(srv, calls), 5)["results"]
    assert all(x["status"] == 200 for x in res), res
    w = res[2]
    for x in res[:2]:
        assert x["ended_us"] <= w["started_us"], (x, w)
    for x in res[3:]:
        assert w["ended_us"] <= x["started_us"], (w, x)


def test_write_then_read_sees_new_content(srv, workspace):
    p = workspace + "/wr.txt"
    for i in range(20):
        v = "version-%d-%s" % (i, "z" * (i * 37))
        res = results(batch(srv, [call("files.write", path=p, content=v), call("files.read", path=p)]), 2)["results"]
        assert res[0]["status"] == 200, res[0]
        assert res[1]["status"] == 200 and res[1]["body"]["content"] == v, (i, res[1]["body"])


def test_read_then_write_sees_old_content(srv, workspace):
    p = workspace + "/rw.txt"
    q = workspace + "/rw2.txt"
    with open(p, "w") as f:
        f.write("old-0")
    with open(q, "w") as f:
        f.write("other")
    for i in range(20):
        old, new = "old-%d" % i, "old-%d" % (i + 1)
        calls = [call("files.read", path=p), call("files.read", path=q), call("files.write", path=p, content=new),
                 call("files.read", path=p)]
        res = results(batch(srv, calls), 4)["results"]
        assert [x["status"] for x in res] == [200] * 4, res
        assert res[0]["body"]["content"] == old, (i, res[0]["body"])
        assert res[1]["body"]["content"] == "other"
        assert res[3]["body"]["content"] == new, (i, res[3]["body"])
    with open(p) as f:
        assert f.read() == "old-20"
