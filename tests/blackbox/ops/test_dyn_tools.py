"""Session-authored dynamic tools (tools.*, docs/dynamic-tools.md, issue 23): a definition is
checked (closed schema, portable name), hashed (SHA-256 of its canonical text) and its tests run
in a confined Python process; it becomes dyn.<name> for its author only, through REST (/ops,
POST /ops/{id}, tools.call by hash), a provider format (GET /tools, POST /tools/call) and MCP
(tools/list, tools/call, notifications/tools/list_changed); another principal gets the one 404
until a promotion approved by someone other than the author; a failing test refuses the
definition; a crash answers 502 and abx carries on; ttl expiry; redefinition; the ledger."""
import hashlib
import json
import os
import sqlite3
import time

import pytest
import requests

from abxtest import (ALICE_TOKEN, APPROVER_TOKEN, BOB_TOKEN, VAL_TOKEN, assert_error, tokens)

CSV_SUM = {
    "name": "csv_sum",
    "description": "Sum the integers of a comma-separated line",
    "language": "python",
    "parameters": {"type": "object", "properties": {"line": {"type": "string", "description": "1,2,3"}},
                   "required": ["line"], "additionalProperties": False},
    "code": "def run(line):\n    return sum(int(x) for x in line.split(','))\n",
    "tests": [{"args": {"line": "1,2"}, "expect": 3}, {"args": {"line": "5"}, "expect": 5}],
}

READER = {
    "name": "read_head",
    "description": "The first line of a file",
    "language": "python",
    "effects": ["read"],
    "parameters": {"type": "object", "properties": {"path": {"type": "string"}}, "required": ["path"]},
    "code": ("def run(path):\n"
             "    try:\n"
             "        with open(path) as f:\n"
             "            return {'line': f.readline().strip()}\n"
             "    except OSError as e:\n"
             "        return {'denied': type(e).__name__}\n"),
}


def config(ws, ledger, ttl=None):
    allow = [
        {"ops": ["core.*", "approvals.*", "ledger.*"], "principals": ["*"]},
        {"ops": ["approvals.decide"], "principals": ["role:approver"]},
        {"ops": ["tools.*", "files.*"], "principals": ["alice", "val"],
         "paths": {"read": [ws + "/**"], "write": [ws + "/**"]}},
        # bob may run tools too, but reaches only sub/
        {"ops": ["tools.*", "files.*"], "principals": ["bob"], "paths": {"read": [ws + "/sub/**"]}},
    ]
    cfg = {"workspace": ws, "terminal_listen": "off", "ledger": {"path": ledger},
           "auth": {"tokens": tokens("alice", "bob", "ann", "val")}, "policy": {"allow": allow}}
    if ttl:
        cfg["limits"] = {"dynamic_tool_ttl": ttl}
    return cfg


@pytest.fixture
def srv(abx, workspace, tmp_path):
    path = str(tmp_path / "ledger.db")
    s = abx(config(workspace, path))
    s.ledger_path = path
    return s


def ok(r, status=200):
    assert r.status_code == status, "%s %s" % (r.status_code, r.text[:1500])
    return r.json()


def define(s, d, token=ALICE_TOKEN, **extra):
    body = dict(d)
    body.update(extra)
    return s.op("tools.define", body, token=token)


def canonical_hash(definition):
    text = json.dumps(definition, sort_keys=True, separators=(",", ":"), ensure_ascii=False)
    return hashlib.sha256(text.encode()).hexdigest()


# -- REST ---------------------------------------------------------------------------------------

def test_define_list_get_and_call_through_rest(srv):
    j = ok(define(srv, CSV_SUM))
    assert j["id"] == "dyn.csv_sum" and len(j["hash"]) == 64, j
    assert [t["ok"] for t in j["tests"]] == [True, True], j
    h = j["hash"]
    listed = ok(srv.op("tools.list", {}, token=ALICE_TOKEN))["tools"]
    assert [(t["id"], t["hash"], t["author"], t["mine"]) for t in listed] == [("dyn.csv_sum", h, "alice", True)]
    got = ok(srv.op("tools.get", {"hash": h}, token=ALICE_TOKEN))
    assert got["definition"]["code"] == CSV_SUM["code"] and got["tests"] == j["tests"], got
    assert canonical_hash(got["definition"]) == h      # the hash is the canonical definition's
    # the op and the stable path by hash
    assert ok(srv.op("dyn.csv_sum", {"line": "4,5,6"}, token=ALICE_TOKEN)) == 15
    assert ok(srv.op("tools.call", {"hash": h, "args": {"line": "7,8"}}, token=ALICE_TOKEN)) == 15
    # arguments are checked against the definition's closed schema before anything runs
    assert_error(srv.op("dyn.csv_sum", {"line": "1", "extra": 1}, token=ALICE_TOKEN), 400, "args.unknown")
    assert_error(srv.op("dyn.csv_sum", {}, token=ALICE_TOKEN), 400, "args.missing")
    assert_error(srv.op("tools.call", {"hash": h, "args": {"line": 3}}, token=ALICE_TOKEN), 400, "args.invalid")
    # discovery: the author's /ops lists it, with its parameters
    ops = {o["id"]: o for o in ok(srv.get("/ops", token=ALICE_TOKEN))["ops"]}
    assert "dyn.csv_sum" in ops and "tools.define" in ops
    assert [p["name"] for p in ops["dyn.csv_sum"]["params"]] == ["line"], ops["dyn.csv_sum"]
    assert ok(srv.op("core.ops.describe", {"id": "tools.call"}, token=ALICE_TOKEN))["id"] == "tools.call"
    assert ok(srv.op("core.ops.describe", {"id": "dyn.csv_sum"}, token=ALICE_TOKEN))["effects"] == ["exec"]
    assert_error(srv.op("core.ops.describe", {"id": "dyn.csv_sum"}, token=BOB_TOKEN), 404, "op.not_enabled")
    # OpenAPI: its RPC path, with its schema, and every $ref in the document resolves
    doc = ok(srv.get("/openapi.json", token=ALICE_TOKEN))
    post = doc["paths"]["/ops/dyn.csv_sum"]["post"]
    assert post["x-abx-op"] == "dyn.csv_sum", post
    schema = post["requestBody"]["content"]["application/json"]["schema"]
    assert schema["properties"]["line"]["type"] == "string" and schema["additionalProperties"] is False, schema
    assert "/ops/tools.call" in doc["paths"] and doc["servers"], list(doc)

    def refs(v):
        if isinstance(v, dict):
            for k, x in v.items():
                if k == "$ref":
                    yield x
                else:
                    yield from refs(x)
        elif isinstance(v, list):
            for x in v:
                yield from refs(x)
    for ref in refs(doc):
        node = doc
        for part in ref[2:].split("/"):
            node = node[part]
    assert "/ops/dyn.csv_sum" not in ok(srv.get("/openapi.json", token=BOB_TOKEN))["paths"]


def test_the_registry_stays_frozen_and_dyn_is_reserved(srv):
    ok(define(srv, CSV_SUM))
    # tools.delete then the op is gone: the one 404
    h = ok(srv.op("tools.list", {}, token=ALICE_TOKEN))["tools"][0]["hash"]
    ids = lambda: [o["id"] for o in ok(srv.get("/ops", token=ALICE_TOKEN))["ops"]]
    assert "dyn.csv_sum" in ids() and "dyn.csv_sum" in ids()        # served again from the memo
    ok(srv.op("tools.delete", {"hash": h}, token=ALICE_TOKEN))
    assert "dyn.csv_sum" not in ids()
    assert_error(srv.op("dyn.csv_sum", {"line": "1"}, token=ALICE_TOKEN), 404, "op.not_enabled")
    assert_error(srv.op("tools.call", {"hash": h, "args": {"line": "1"}}, token=ALICE_TOKEN), 404,
                 "tools.not_found")
    assert_error(srv.op("tools.delete", {"hash": h}, token=ALICE_TOKEN), 404, "tools.not_found")
    assert ok(srv.op("tools.list", {}, token=ALICE_TOKEN))["tools"] == []


@pytest.mark.parametrize("change, why", [
    ({"name": "Bad-Name"}, "name must match"),
    ({"name": "a__b"}, "name must match"),
    ({"name": "x" * 59}, "name must match"),
    ({"parameters": {"type": "object", "properties": {}, "additionalProperties": True}}, "closed"),
    ({"parameters": {"type": "object", "properties": {"p": {"type": "object"}}}}, "type must be"),
    ({"parameters": {"type": "object", "properties": {"p": {"type": "string", "format": "uri"}}}}, "unknown key"),
    ({"parameters": {"type": "object", "properties": {}, "patternProperties": {}}}, "unknown key"),
    ({"parameters": {"type": "object", "properties": {"p": {"type": "string"}}, "required": ["q"]}},
     "names no property"),
    ({"effects": ["admin"]}, "effects[0]"),
    ({"net": True}, "needs the effect net"),
    ({"paths": {"read": ["relative/dir"]}}, "absolute"),
    ({"paths": {"read": ["/a/../etc"]}}, "absolute"),
    ({"tests": [{"args": {"line": "1"}}]}, "tests[0]"),
])
def test_invalid_definitions_are_refused_naming_the_field(srv, change, why):
    d = dict(CSV_SUM)
    d.update(change)
    r = define(srv, d)
    assert_error(r, 400, "args.invalid")
    assert why in r.json()["error"]["message"], r.text
    assert_error(srv.op("tools.define", dict(CSV_SUM, owner="me"), token=ALICE_TOKEN), 400, "args.unknown")


def test_a_failing_test_refuses_the_definition(srv):
    d = dict(CSV_SUM, tests=[{"args": {"line": "1,2"}, "expect": 3}, {"args": {"line": "2,2"}, "expect": 5},
                             {"args": {"line": "x"}, "expect": 0}])
    r = define(srv, d)
    assert_error(r, 422, "tools.test_failed")
    tests = r.json()["error"]["details"]["tests"]
    assert [t["ok"] for t in tests] == [True, False, False], tests
    assert tests[1]["got"] == 4 and "ValueError" in tests[2]["error"], tests
    assert ok(srv.op("tools.list", {}, token=ALICE_TOKEN))["tools"] == []
    assert_error(srv.op("dyn.csv_sum", {"line": "1"}, token=ALICE_TOKEN), 404, "op.not_enabled")
    # code that does not load, or defines no run(): refused as raised
    assert_error(define(srv, dict(CSV_SUM, code="def run(:\n")), 422, "tools.raised")
    assert_error(define(srv, dict(CSV_SUM, code="x = 1\n", tests=[])), 422, "tools.raised")


def test_a_crash_answers_502_and_abx_is_unaffected(srv):
    crash = dict(CSV_SUM, name="crasher", tests=[],
                 code="import os\ndef run(line):\n    if line == 'die':\n        os._exit(3)\n    return len(line)\n")
    h = ok(define(srv, crash))["hash"]
    assert_error(srv.op("dyn.crasher", {"line": "die"}, token=ALICE_TOKEN), 502, "op.worker_failed")
    assert ok(srv.get("/health")).get("status") == "ok"
    assert ok(srv.op("tools.call", {"hash": h, "args": {"line": "four"}}, token=ALICE_TOKEN)) == 4
    big = dict(CSV_SUM, name="big", tests=[], code="def run(line):\n    return line * (2 << 20)\n")
    r = srv.op("dyn.big", {"line": "x"}, token=ALICE_TOKEN) if define(srv, big).status_code == 200 else None
    assert_error(r, 502, "op.worker_failed")
    assert "1 MiB" in r.json()["error"]["message"], r.text
    raiser = dict(CSV_SUM, name="raiser", tests=[], code="def run(line):\n    raise KeyError(line)\n")
    r = srv.op("tools.call", {"hash": ok(define(srv, raiser))["hash"], "args": {"line": "k"}}, token=ALICE_TOKEN)
    assert_error(r, 422, "tools.raised")
    assert "KeyError" in r.json()["error"]["message"], r.text


def test_redefinition_is_a_new_hash_and_the_old_one_stays_callable(srv):
    h1 = ok(define(srv, CSV_SUM))["hash"]
    double = dict(CSV_SUM, code="def run(line):\n    return 2 * sum(int(x) for x in line.split(','))\n",
                  tests=[{"args": {"line": "1,2"}, "expect": 6}])
    h2 = ok(define(srv, double))["hash"]
    assert h1 != h2
    assert ok(srv.op("dyn.csv_sum", {"line": "1,1"}, token=ALICE_TOKEN)) == 4          # the newest
    assert ok(srv.op("tools.call", {"hash": h1, "args": {"line": "1,1"}}, token=ALICE_TOKEN)) == 2
    assert ok(srv.op("tools.call", {"hash": h2, "args": {"line": "1,1"}}, token=ALICE_TOKEN)) == 4
    assert {t["hash"] for t in ok(srv.op("tools.list", {}, token=ALICE_TOKEN))["tools"]} == {h1, h2}
    ops = [o["id"] for o in ok(srv.get("/ops", token=ALICE_TOKEN))["ops"]]
    assert ops.count("dyn.csv_sum") == 1, ops
    # the same definition again is the same hash
    assert ok(define(srv, double))["hash"] == h2


def test_ttl_expiry(abx, workspace, tmp_path):
    s = abx(config(workspace, str(tmp_path / "l.db"), ttl="2s"))
    short = ok(define(s, CSV_SUM, ttl=1))
    capped = ok(define(s, dict(CSV_SUM, name="capped"), ttl=3600))     # limits.dynamic_tool_ttl caps it
    assert ok(s.op("dyn.csv_sum", {"line": "1"}, token=ALICE_TOKEN)) == 1
    time.sleep(1.3)
    assert_error(s.op("dyn.csv_sum", {"line": "1"}, token=ALICE_TOKEN), 404, "op.not_enabled")
    assert_error(s.op("tools.call", {"hash": short["hash"], "args": {"line": "1"}}, token=ALICE_TOKEN), 404,
                 "tools.not_found")
    assert ok(s.op("dyn.capped", {"line": "2"}, token=ALICE_TOKEN)) == 2
    time.sleep(1.0)
    assert_error(s.op("dyn.capped", {"line": "1"}, token=ALICE_TOKEN), 404, "op.not_enabled")
    assert ok(s.op("tools.list", {}, token=ALICE_TOKEN))["tools"] == []
    assert not [o for o in ok(s.get("/ops", token=ALICE_TOKEN))["ops"] if o["id"].startswith("dyn.")]


# -- other principals, promotion ------------------------------------------------------------------

def test_other_principals_see_nothing_until_a_promotion_approved_by_someone_else(srv, workspace):
    # val (agent and approver) is the author: even an approver cannot approve their own promotion
    # the tool may reach at most the workspace; each caller's own scope narrows that
    h = ok(define(srv, dict(READER, paths={"read": [workspace]}), token=VAL_TOKEN))["hash"]
    assert_error(srv.op("dyn.read_head", {"path": workspace + "/sub/c.txt"}, token=BOB_TOKEN), 404,
                 "op.not_enabled")
    assert_error(srv.op("tools.call", {"hash": h, "args": {"path": "x"}}, token=BOB_TOKEN), 404, "tools.not_found")
    assert_error(srv.op("tools.get", {"hash": h}, token=BOB_TOKEN), 404, "tools.not_found")
    assert "dyn.read_head" not in srv.get("/ops", token=BOB_TOKEN).text
    assert ok(srv.op("tools.list", {}, token=BOB_TOKEN))["tools"] == []
    # only the author can ask for a promotion, and it is held
    held = ok(srv.op("tools.promote", {"hash": h, "to": ["bob"]}, token=VAL_TOKEN), 202)
    aid = held["approval_id"]
    assert_error(srv.post("/approvals/" + aid, token=VAL_TOKEN, json_body={"decision": "approve"}), 403,
                 "approval.self_approval")
    assert_error(srv.op("dyn.read_head", {"path": workspace + "/sub/c.txt"}, token=BOB_TOKEN), 404,
                 "op.not_enabled")
    ok(srv.post("/approvals/" + aid, token=APPROVER_TOKEN, json_body={"decision": "approve"}))
    deadline = time.time() + 10
    while srv.get("/approvals/" + aid, token=VAL_TOKEN).status_code == 202 and time.time() < deadline:
        time.sleep(0.05)
    # now bob sees and calls it — with bob's own grants (sub/ only), not the author's
    assert "dyn.read_head" in [o["id"] for o in ok(srv.get("/ops", token=BOB_TOKEN))["ops"]]
    assert ok(srv.op("dyn.read_head", {"path": workspace + "/sub/c.txt"}, token=BOB_TOKEN)) == {"line": "deep"}
    # outside bob's roots: refused by Landlock (EACCES), or absent from the process's view of
    # only its roots (ENOENT, where that view is built: docs/security.md)
    assert ok(srv.op("tools.call", {"hash": h, "args": {"path": workspace + "/a.txt"}}, token=BOB_TOKEN)) in \
        ({"denied": "PermissionError"}, {"denied": "FileNotFoundError"})
    assert ok(srv.op("dyn.read_head", {"path": workspace + "/a.txt"}, token=VAL_TOKEN)) == {"line": "hello"}
    mine = ok(srv.op("tools.list", {}, token=BOB_TOKEN))["tools"]
    assert [(t["author"], t["mine"]) for t in mine] == [("val", False)]
    # bob cannot delete or promote it further
    assert_error(srv.op("tools.delete", {"hash": h}, token=BOB_TOKEN), 404, "tools.not_found")


def test_a_promotion_is_bound_to_the_content_hash(srv):
    h1 = ok(define(srv, CSV_SUM, token=VAL_TOKEN))["hash"]
    aid = ok(srv.op("tools.promote", {"hash": h1, "to": ["role:viewer"]}, token=VAL_TOKEN), 202)["approval_id"]
    # the author changes the tool before the approval: a new hash, not promoted by it
    h2 = ok(define(srv, dict(CSV_SUM, code="def run(line):\n    return -1\n", tests=[]), token=VAL_TOKEN))["hash"]
    ok(srv.post("/approvals/" + aid, token=APPROVER_TOKEN, json_body={"decision": "approve"}))
    deadline = time.time() + 10
    while srv.get("/approvals/" + aid, token=VAL_TOKEN).status_code == 202 and time.time() < deadline:
        time.sleep(0.05)
    assert ok(srv.op("tools.call", {"hash": h1, "args": {"line": "2,3"}}, token=BOB_TOKEN)) == 5
    assert_error(srv.op("tools.call", {"hash": h2, "args": {"line": "2,3"}}, token=BOB_TOKEN), 404,
                 "tools.not_found")
    # the name resolves to what bob may see: the promoted version
    assert ok(srv.op("dyn.csv_sum", {"line": "2,3"}, token=BOB_TOKEN)) == 5
    assert ok(srv.op("dyn.csv_sum", {"line": "2,3"}, token=VAL_TOKEN)) == -1


# -- provider formats and MCP ---------------------------------------------------------------------

def test_provider_formats_offer_and_run_it(srv):
    h = ok(define(srv, CSV_SUM))["hash"]
    for fmt in ("openai", "responses", "anthropic", "gemini"):
        doc = ok(srv.get("/tools?format=" + fmt, token=ALICE_TOKEN))
        text = json.dumps(doc)
        assert "dyn__csv_sum" in text, (fmt, text[:300])
        assert "dyn__csv_sum" not in srv.get("/tools?format=" + fmt, token=BOB_TOKEN).text
    msg = {"role": "assistant", "tool_calls": [
        {"id": "c1", "type": "function", "function": {"name": "dyn__csv_sum", "arguments": '{"line": "2,2,2"}'}}]}
    ans = ok(srv.post("/tools/call?format=openai", token=ALICE_TOKEN, json_body=msg, timeout=60))
    assert json.loads(ans["messages"][0]["content"]) == 6, ans
    blocks = {"content": [{"type": "tool_use", "id": "t1", "name": "dyn__csv_sum", "input": {"line": "9"}}]}
    ans = ok(srv.post("/tools/call?format=anthropic", token=ALICE_TOKEN, json_body=blocks, timeout=60))
    assert "9" in json.dumps(ans), ans
    # bob: the model was never offered it
    ans = ok(srv.post("/tools/call?format=openai", token=BOB_TOKEN, json_body=msg, timeout=60))
    assert "op.not_enabled" in ans["messages"][0]["content"], ans
    assert h


class Mcp:
    def __init__(self, srv, token):
        self.srv, self.token, self.sid, self.n = srv, token, None, 0

    def post(self, msg):
        h = {"Content-Type": "application/json", "Accept": "application/json, text/event-stream",
             "Authorization": "Bearer " + self.token}
        if self.sid:
            h["Mcp-Session-Id"] = self.sid
        return requests.post(self.srv.url + "/mcp", data=json.dumps(msg), headers=h, timeout=60)

    def initialize(self):
        r = self.post({"jsonrpc": "2.0", "id": 0, "method": "initialize",
                       "params": {"protocolVersion": "2025-11-25", "capabilities": {},
                                  "clientInfo": {"name": "pytest", "version": "1"}}})
        assert r.status_code == 200, r.text
        self.sid = r.headers["Mcp-Session-Id"]
        assert r.json()["result"]["capabilities"]["tools"]["listChanged"] is True
        self.post({"jsonrpc": "2.0", "method": "notifications/initialized"})

    def messages(self, method, params):
        """Every JSON-RPC message of the answer (SSE events or one JSON body)."""
        self.n += 1
        r = self.post({"jsonrpc": "2.0", "id": self.n, "method": method, "params": params})
        assert r.status_code == 200, r.text
        if r.headers["Content-Type"].startswith("text/event-stream"):
            return [json.loads(ln[5:].strip()) for ln in r.text.splitlines() if ln.startswith("data:")]
        return [r.json()]

    def names(self):
        (m,) = self.messages("tools/list", {})
        return [t["name"] for t in m["result"]["tools"]]


def test_mcp_lists_calls_and_notifies_the_authors_sessions(srv):
    alice, alice2, bob = Mcp(srv, ALICE_TOKEN), Mcp(srv, ALICE_TOKEN), Mcp(srv, BOB_TOKEN)
    for m in (alice, alice2, bob):
        m.initialize()
        assert "dyn__csv_sum" not in m.names()
    msgs = alice.messages("tools/call", {"name": "tools__define", "arguments": CSV_SUM})
    assert msgs[0] == {"jsonrpc": "2.0", "method": "notifications/tools/list_changed"}, msgs
    result = msgs[-1]["result"]
    assert not result.get("isError"), result
    h = json.loads(result["content"][0]["text"])["hash"]
    names = alice.names()
    assert "dyn__csv_sum" in names
    (m,) = alice.messages("tools/list", {})
    entry = [t for t in m["result"]["tools"] if t["name"] == "dyn__csv_sum"][0]
    assert entry["_meta"]["abx/hash"] == h and entry["title"] == "dyn.csv_sum", entry
    msgs = alice.messages("tools/call", {"name": "dyn__csv_sum", "arguments": {"line": "3,4"}})
    assert len(msgs) == 1 and msgs[0]["result"]["content"][0]["text"] == "7", msgs
    # the author's other session is told at its next exchange; bob's session never is
    msgs = alice2.messages("tools/call", {"name": "core__ops__describe", "arguments": {"id": "tools.call"}})
    assert msgs[0]["method"] == "notifications/tools/list_changed", msgs
    msgs = bob.messages("tools/call", {"name": "core__ops__describe", "arguments": {"id": "tools.call"}})
    assert len(msgs) == 1 and "result" in msgs[0], msgs
    assert "dyn__csv_sum" not in bob.names()
    (m,) = bob.messages("tools/call", {"name": "dyn__csv_sum", "arguments": {"line": "1"}})
    assert "error" in m or m["result"].get("isError"), m
    # deleting notifies again
    msgs = alice.messages("tools/call", {"name": "tools__delete", "arguments": {"hash": h}})
    assert msgs[0]["method"] == "notifications/tools/list_changed", msgs
    assert "dyn__csv_sum" not in alice.names()


# -- the ledger -----------------------------------------------------------------------------------

def test_the_ledger_records_definition_tests_calls_and_promotion_without_the_code(srv):
    h = ok(define(srv, CSV_SUM, token=VAL_TOKEN))["hash"]
    ok(srv.op("dyn.csv_sum", {"line": "1,2"}, token=VAL_TOKEN))
    ok(srv.op("tools.call", {"hash": h, "args": {"line": "1"}}, token=VAL_TOKEN))
    aid = ok(srv.op("tools.promote", {"hash": h, "to": ["bob"]}, token=VAL_TOKEN), 202)["approval_id"]
    ok(srv.post("/approvals/" + aid, token=APPROVER_TOKEN, json_body={"decision": "approve"}))
    deadline = time.time() + 10
    while srv.get("/approvals/" + aid, token=VAL_TOKEN).status_code == 202 and time.time() < deadline:
        time.sleep(0.05)
    time.sleep(0.5)
    con = sqlite3.connect(srv.ledger_path, timeout=10)
    try:
        text = "\n".join(str(row) for row in con.execute("SELECT * FROM action_groups"))
        events = "\n".join(str(row) for row in con.execute("SELECT * FROM action_events"))
    finally:
        con.close()
    everything = text + events
    assert "sum(int(x)" not in everything                     # never the code
    for needle in ("dyn_tool.define", "dyn_tool.call", "dyn_tool.promote", "tools.promote", "dyn.csv_sum", h):
        assert needle in everything, needle
    assert '"ok": true' in everything or '"ok":true' in everything  # the test results


def test_mcp_over_stdio_sends_list_changed_before_the_answer(workspace, tmp_path):
    import subprocess
    import abxtest
    path = str(tmp_path / "stdio.json")
    with open(path, "w") as f:
        json.dump(config(workspace, str(tmp_path / "stdio-ledger.db")), f)
    env = dict(os.environ, ABX_HOME=str(tmp_path / "h"))
    env.pop("ABX_TOKEN", None)
    p = subprocess.Popen([abxtest.ABX_BIN, "mcp", "--config", path, "--principal", "alice"], stdin=subprocess.PIPE,
                         stdout=subprocess.PIPE, stderr=subprocess.PIPE, env=env, text=True, bufsize=1)
    try:
        def exchange(rid, method, params):
            p.stdin.write(json.dumps({"jsonrpc": "2.0", "id": rid, "method": method, "params": params}) + "\n")
            p.stdin.flush()
            got = []
            while True:
                m = json.loads(p.stdout.readline())
                got.append(m)
                if m.get("id") == rid:
                    return got
        exchange(1, "initialize", {"protocolVersion": "2025-11-25"})
        got = exchange(2, "tools/call", {"name": "tools__define", "arguments": CSV_SUM})
        assert got[0] == {"jsonrpc": "2.0", "method": "notifications/tools/list_changed"}, got
        assert not got[-1]["result"]["isError"], got
        (lst,) = exchange(3, "tools/list", {})
        assert "dyn__csv_sum" in [t["name"] for t in lst["result"]["tools"]]
        got = exchange(4, "tools/call", {"name": "dyn__csv_sum", "arguments": {"line": "5,5"}})
        assert len(got) == 1 and got[0]["result"]["content"][0]["text"] == "10", got
    finally:
        p.stdin.close()
        p.wait(timeout=20)
        err = p.stderr.read()
        assert abxtest.sanitizer_report(err) is None, err[-3000:]


def test_a_held_call_of_dyn_name_is_bound_to_the_hash(abx, workspace, tmp_path):
    from abxtest import CAROL_TOKEN
    cfg = config(workspace, str(tmp_path / "l.db"))
    cfg["auth"]["tokens"] = tokens("alice", "bob", "ann", "val", "carol")
    cfg["policy"]["allow"] += [
        {"ops": ["tools.define", "tools.list", "tools.get"], "principals": ["carol"], "paths": [workspace + "/**"]},
        {"ops": ["tools.call"], "principals": ["carol"], "paths": [workspace + "/**"], "approval": "required"}]
    s = abx(cfg)
    h1 = ok(define(s, CSV_SUM, token=CAROL_TOKEN))["hash"]
    held = ok(s.op("dyn.csv_sum", {"line": "1,2"}, token=CAROL_TOKEN), 202)
    aid = held["approval_id"]
    entry = [x for x in ok(s.get("/approvals", token=APPROVER_TOKEN))["approvals"] if x["id"] == aid][0]
    assert entry["op"] == "tools.call" and h1 in json.dumps(entry), entry     # the approver sees the hash
    # carol redefines the name before the decision: the approval still runs what was held
    ok(define(s, dict(CSV_SUM, code="def run(line):\n    return 'changed'\n", tests=[]), token=CAROL_TOKEN))
    ok(s.post("/approvals/" + aid, token=APPROVER_TOKEN, json_body={"decision": "approve"}))
    deadline = time.time() + 10
    while True:
        r = s.get("/approvals/" + aid, token=CAROL_TOKEN)
        if r.status_code != 202 or time.time() > deadline:
            break
        time.sleep(0.05)
    assert ok(r) == 3, r.text


def approve(s, aid, author_token):
    ok(s.post("/approvals/" + aid, token=APPROVER_TOKEN, json_body={"decision": "approve"}))
    deadline = time.time() + 10
    while True:
        r = s.get("/approvals/" + aid, token=author_token)
        if r.status_code != 202 or time.time() > deadline:
            return r
        time.sleep(0.05)


def test_the_limits_on_tools_and_audiences(srv):
    from concurrent.futures import ThreadPoolExecutor
    h = ok(define(srv, CSV_SUM, token=VAL_TOKEN))["hash"]
    assert_error(srv.op("tools.promote", {"hash": h, "to": ["p%d" % i for i in range(33)]}, token=VAL_TOKEN), 400,
                 "args.invalid")
    aid = ok(srv.op("tools.promote", {"hash": h, "to": ["p%d" % i for i in range(32)]}, token=VAL_TOKEN),
             202)["approval_id"]
    assert len(ok(approve(srv, aid, VAL_TOKEN))["promoted_to"]) == 32
    aid = ok(srv.op("tools.promote", {"hash": h, "to": ["bob"]}, token=VAL_TOKEN), 202)["approval_id"]
    assert_error(approve(srv, aid, VAL_TOKEN), 409, "tools.too_many")
    # at most 256 live tools per principal (each defined for real: its code loads confined)
    quick = dict(CSV_SUM, tests=[])
    with ThreadPoolExecutor(4) as pool:
        codes = list(pool.map(lambda i: define(srv, dict(quick, name="t%03d" % i)).status_code, range(256)))
    assert codes == [200] * 256, codes
    assert_error(define(srv, dict(quick, name="one_more")), 409, "tools.too_many")
    ok(define(srv, dict(quick, name="one_more"), token=VAL_TOKEN))            # another principal's own count
    ok(srv.op("tools.delete", {"hash": ok(srv.op("tools.list", {}, token=ALICE_TOKEN))["tools"][0]["hash"]},
              token=ALICE_TOKEN))
    ok(define(srv, dict(quick, name="one_more")))


def test_the_statements_timeout_bounds_a_call(abx, workspace, tmp_path):
    cfg = config(workspace, str(tmp_path / "l.db"))
    cfg["policy"]["allow"][2]["limits"] = {"timeout": "1s"}
    s = abx(cfg)
    spin = dict(CSV_SUM, name="spin", tests=[], code="def run(line):\n    while line:\n        pass\n    return 0\n")
    ok(define(s, spin))
    t = time.time()
    r = s.op("dyn.spin", {"line": "forever"}, token=ALICE_TOKEN)
    assert_error(r, 502, "op.worker_failed")
    assert "deadline" in r.json()["error"]["message"] and time.time() - t < 8, r.text
    assert ok(s.op("dyn.spin", {"line": ""}, token=ALICE_TOKEN)) == 0


def test_without_a_ttl_a_tool_lives_as_long_as_its_mcp_session(srv):
    m = Mcp(srv, ALICE_TOKEN)
    m.initialize()
    res = m.messages("tools/call", {"name": "tools__define", "arguments": CSV_SUM})[-1]["result"]
    assert json.loads(res["content"][0]["text"])["session"] is True, res
    res = m.messages("tools/call", {"name": "tools__define", "arguments": dict(CSV_SUM, name="kept", ttl=600)})
    assert json.loads(res[-1]["result"]["content"][0]["text"])["session"] is False, res
    assert ok(srv.op("dyn.csv_sum", {"line": "1,1"}, token=ALICE_TOKEN)) == 2          # REST sees it too
    r = requests.delete(srv.url + "/mcp", headers={"Authorization": "Bearer " + ALICE_TOKEN,
                                                   "Mcp-Session-Id": m.sid}, timeout=10)
    assert r.status_code == 204, r.text
    assert_error(srv.op("dyn.csv_sum", {"line": "1,1"}, token=ALICE_TOKEN), 404, "op.not_enabled")
    assert ok(srv.op("dyn.kept", {"line": "1,1"}, token=ALICE_TOKEN)) == 2
    # defined through REST (no session): it lives until limits.dynamic_tool_ttl
    assert ok(define(srv, dict(CSV_SUM, name="rest"))).get("session") is False
