"""MCP (Model Context Protocol) at POST /mcp (Streamable HTTP) and over stdio (`abx mcp`):
initialize and version negotiation with random session ids, the session rules (missing → 400,
unknown/ended/another principal's → 404, DELETE ends, the table is bounded), GET → 405, step 0
(foreign Origin/Host) and authentication (401) in front of it, JSON-RPC errors (parse, batch,
invalid request, unknown method, invalid params), notifications → 202, tools/list (the caller's
mounted ops only, deterministic, names, titles, schemas, annotations, cursors), tools/call
through the one pipeline (both spellings, isError results for argument and policy failures and
held calls, -32602 for unknown tools, bytes results, the ledger's door "mcp"), streaming with
notifications/progress, cancellation of a streaming and of a running command, and the policy
reload invalidating the cached list."""
import base64
import json
import os
import signal
import sqlite3
import subprocess
import threading
import time

import pytest
import requests

import abxtest
from abxtest import ALICE_TOKEN, BOB_TOKEN, CAROL_TOKEN, assert_error, run_abx, sanitizer_report, sha256_hex

ANN_TOKEN = "ann-approver-token-0123456789"
VERSIONS = ["2025-11-25", "2025-06-18", "2025-03-26"]
ACCEPT = "application/json, text/event-stream"


def make_config(ws, ledger_path, extra_allow=(), deny=None):
    tokens = [
        {"principal": "alice", "roles": ["agent"], "token_sha256": sha256_hex(ALICE_TOKEN)},
        {"principal": "bob", "roles": ["viewer"], "token_sha256": sha256_hex(BOB_TOKEN)},
        {"principal": "carol", "roles": ["agent"], "token_sha256": sha256_hex(CAROL_TOKEN)},
        {"principal": "ann", "roles": ["approver"], "token_sha256": sha256_hex(ANN_TOKEN)},
    ]
    allow = [
        {"ops": ["core.*", "approvals.*"], "principals": ["*"]},
        {"ops": ["files.*"], "principals": ["role:agent"], "paths": [ws + "/**"]},
        {"ops": ["process.list", "process.get"], "principals": ["role:agent"]},
        {"ops": ["commands.run", "commands.stream"], "principals": ["role:agent"], "paths": [ws + "/**"],
         "commands": ["echo *", "sleep *", "sh *"]},
        {"ops": ["commands.sessions.close", "terminal.connect"], "principals": ["role:agent"]},
    ] + list(extra_allow)
    policy = {"allow": allow}
    if deny:
        policy["deny"] = deny
    return {"workspace": ws, "terminal_listen": "off", "auth": {"tokens": tokens}, "policy": policy,
            "ledger": {"path": ledger_path}}


@pytest.fixture
def srv(abx, workspace, tmp_path):
    path = str(tmp_path / "ledger.db")
    s = abx(make_config(workspace, path, deny=[{"ops": ["files.stat"], "principals": ["carol"]}]))
    s.ledger_path = path
    return s


class Mcp:
    """One MCP client over HTTP: POST /mcp with a token and (after initialize) a session."""

    def __init__(self, srv, token=ALICE_TOKEN):
        self.srv = srv
        self.token = token
        self.sid = None
        self.n = 0

    def headers(self, extra=None, sid=True):
        h = {"Content-Type": "application/json", "Accept": ACCEPT}
        if self.token:
            h["Authorization"] = "Bearer " + self.token
        if sid and self.sid:
            h["Mcp-Session-Id"] = self.sid
        h.update(extra or {})
        return h

    def post(self, body, headers=None, sid=True, **kw):
        data = body if isinstance(body, (bytes, str)) else json.dumps(body)
        kw.setdefault("timeout", 30)
        return requests.post(self.srv.url + "/mcp", data=data, headers=self.headers(headers, sid), **kw)

    def initialize(self, version="2025-11-25"):
        r = self.post({"jsonrpc": "2.0", "id": 0, "method": "initialize",
                       "params": {"protocolVersion": version, "capabilities": {},
                                  "clientInfo": {"name": "pytest", "version": "1"}}}, sid=False)
        assert r.status_code == 200, r.text
        self.sid = r.headers["Mcp-Session-Id"]
        assert self.post({"jsonrpc": "2.0", "method": "notifications/initialized"}).status_code == 202
        return r.json()["result"]

    def request(self, method, params=None, headers=None, **kw):
        self.n += 1
        msg = {"jsonrpc": "2.0", "id": self.n, "method": method}
        if params is not None:
            msg["params"] = params
        r = self.post(msg, headers=headers, **kw)
        assert r.status_code == 200, "%s %s" % (r.status_code, r.text[:500])
        j = r.json()
        assert j["jsonrpc"] == "2.0" and j["id"] == self.n, j
        return j

    def result(self, method, params=None, **kw):
        j = self.request(method, params, **kw)
        assert "result" in j, j
        return j["result"]

    def call(self, name, args=None, **kw):
        p = {"name": name}
        if args is not None:
            p["arguments"] = args
        return self.result("tools/call", p, **kw)

    def all_tools(self):
        tools, cursor = [], None
        while True:
            res = self.result("tools/list", {"cursor": cursor} if cursor else {})
            tools += res["tools"]
            cursor = res.get("nextCursor")
            if not cursor:
                return tools


def rpc_error(r, status, rpc_code, abx_code=None):
    assert r.status_code == status, "expected %s, got %s: %s" % (status, r.status_code, r.text[:500])
    j = r.json()
    assert j["jsonrpc"] == "2.0" and "result" not in j, j
    assert j["error"]["code"] == rpc_code and j["error"]["message"], j
    if abx_code:
        assert j["error"]["data"]["code"] == abx_code, j
    return j


def text_of(res):
    assert [c["type"] for c in res["content"]][:1] == ["text"], res
    return res["content"][0]["text"]


def sse_iter(resp):
    """The JSON-RPC messages of a text/event-stream reply (the data of each event), as they come."""
    data = []
    for line in resp.iter_lines(chunk_size=1, decode_unicode=True):
        if line == "":
            if data:
                yield json.loads("\n".join(data))
                data = []
        elif line.startswith("data:"):
            data.append(line[5:].lstrip())


def sse_messages(resp):
    return list(sse_iter(resp))


# -- initialize, sessions, transport rules ------------------------------------------------------------

def test_initialize_negotiates_each_revision_and_gives_random_sessions(srv):
    sids = set()
    for v in VERSIONS + ["2024-11-05", "1999-01-01"]:
        c = Mcp(srv)
        res = c.initialize(v)
        assert res["protocolVersion"] == (v if v in VERSIONS else "2025-11-25"), res
        assert res["serverInfo"]["name"] == "abx" and res["serverInfo"]["version"]
        assert res["capabilities"] == {"tools": {"listChanged": True}}, res
        assert isinstance(res.get("instructions"), str)
        assert len(c.sid) == 32 and int(c.sid, 16) >= 0, c.sid
        sids.add(c.sid)
        assert c.result("ping") == {}
    assert len(sids) == 5
    # initialize without a protocolVersion: invalid params
    r = Mcp(srv).post({"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": {}}, sid=False)
    rpc_error(r, 200, -32602, "args.missing")
    assert "Mcp-Session-Id" not in r.headers


def test_get_and_other_methods_are_405_with_allow(srv):
    c = Mcp(srv)
    c.initialize()
    for m in ("GET", "PUT", "PATCH"):
        r = requests.request(m, srv.url + "/mcp", headers=c.headers(), timeout=10)
        rpc_error(r, 405, -32000, "request.method_not_allowed")
        assert r.headers["Allow"] == "POST, DELETE", r.headers


def test_unauthenticated_and_bad_tokens_are_401(srv):
    body = {"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": {"protocolVersion": "2025-11-25"}}
    r = Mcp(srv, token=None).post(body, sid=False)
    assert_error(r, 401, "auth.required")
    assert r.headers.get("WWW-Authenticate") == "Bearer"
    assert_error(Mcp(srv, token="not-a-real-token-0123456789").post(body, sid=False), 401, "auth.invalid_token")
    assert_error(requests.get(srv.url + "/mcp", timeout=10), 401, "auth.required")


def test_foreign_origin_and_host_are_refused_at_step_0(srv):
    c = Mcp(srv)
    body = {"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": {"protocolVersion": "2025-11-25"}}
    assert_error(c.post(body, headers={"Origin": "http://evil.example"}, sid=False), 403, "request.origin_denied")
    assert_error(c.post(body, headers={"Host": "evil.example"}, sid=False), 403, "request.host_denied")
    r = srv.raw_request("POST", "/mcp", token=ALICE_TOKEN, host="rebind.example:80",
                        headers=["Content-Type: application/json", "Content-Length: %d" % len(json.dumps(body))],
                        body=json.dumps(body).encode())
    assert r.status == 403 and r.code == "request.host_denied", r


def test_session_required_unknown_other_principal_and_delete(srv):
    c = Mcp(srv)
    c.initialize()
    list_msg = {"jsonrpc": "2.0", "id": 5, "method": "tools/list"}
    rpc_error(c.post(list_msg, sid=False), 400, -32000, "mcp.session_required")
    rpc_error(c.post(list_msg, headers={"Mcp-Session-Id": "0" * 32}), 404, -32001, "mcp.session_not_found")
    rpc_error(c.post(list_msg, headers={"Mcp-Session-Id": "not-hex"}), 404, -32001, "mcp.session_not_found")
    # a notification needs a session too
    rpc_error(c.post({"jsonrpc": "2.0", "method": "notifications/initialized"}, sid=False), 400, -32000,
              "mcp.session_required")
    # another principal cannot use alice's session: it does not exist for carol
    other = Mcp(srv, token=CAROL_TOKEN)
    other.sid = c.sid
    rpc_error(other.post(list_msg), 404, -32001, "mcp.session_not_found")
    rpc_error(requests.delete(srv.url + "/mcp", headers=other.headers(), timeout=10), 404, -32001,
              "mcp.session_not_found")
    assert c.result("tools/list")["tools"]      # still alice's
    # DELETE without a session, then with it, then the session is gone
    rpc_error(requests.delete(srv.url + "/mcp", headers=c.headers(sid=False), timeout=10), 400, -32000,
              "mcp.session_required")
    r = requests.delete(srv.url + "/mcp", headers=c.headers(), timeout=10)
    assert r.status_code == 204 and r.content == b"", (r.status_code, r.text)
    rpc_error(c.post(list_msg), 404, -32001, "mcp.session_not_found")
    rpc_error(requests.delete(srv.url + "/mcp", headers=c.headers(), timeout=10), 404, -32001,
              "mcp.session_not_found")


def test_session_table_is_bounded_least_recently_used_goes(srv):
    first = Mcp(srv)
    first.initialize()
    keep = Mcp(srv)
    keep.initialize()
    s = requests.Session()
    body = json.dumps({"jsonrpc": "2.0", "id": 0, "method": "initialize", "params": {"protocolVersion": "2025-11-25"}})
    for i in range(254):
        if i % 50 == 0:
            assert keep.result("ping") == {}       # recently used: survives
        r = s.post(srv.url + "/mcp", data=body, headers=first.headers(sid=False), timeout=10)
        assert r.status_code == 200, r.text
    # 256 sessions now; one more evicts the least recently used idle one: `first`
    r = s.post(srv.url + "/mcp", data=body, headers=first.headers(sid=False), timeout=10)
    assert r.status_code == 200
    rpc_error(first.post({"jsonrpc": "2.0", "id": 1, "method": "ping"}), 404, -32001, "mcp.session_not_found")
    assert keep.result("ping") == {}


def test_protocol_version_header(srv):
    c = Mcp(srv)
    c.initialize("2025-06-18")
    for v in VERSIONS:
        assert c.result("ping", headers={"MCP-Protocol-Version": v}) == {}
    r = c.post({"jsonrpc": "2.0", "id": 9, "method": "ping"}, headers={"MCP-Protocol-Version": "2023-01-01"})
    rpc_error(r, 400, -32000, "mcp.bad_protocol_version")


def test_json_rpc_errors(srv):
    c = Mcp(srv)
    c.initialize()
    rpc_error(c.post(b"{not json"), 400, -32700, "request.bad_json")
    rpc_error(c.post(b""), 400, -32700, "request.bad_json")
    j = rpc_error(c.post([{"jsonrpc": "2.0", "id": 1, "method": "ping"}, {"jsonrpc": "2.0", "id": 2, "method": "ping"}]),
                  400, -32600, "request.bad_json")
    assert "batch" in j["error"]["message"] and j["id"] is None
    rpc_error(c.post(b"42"), 400, -32600, "request.bad_json")
    # jansson's message quotes the bad bytes (here half a UTF-8 character): never sent back raw
    j = rpc_error(c.post(b'{"jsonrpc":"2.0","id":1,"method":"\\\xde\x9b"}'), 400, -32700, "request.bad_json")
    assert j["error"]["message"].isascii() and "invalid escape" in j["error"]["message"], j
    long_name = "\u00e9" * 100                          # 200 bytes: cut at a character boundary
    j = rpc_error(c.post({"jsonrpc": "2.0", "id": 2, "method": long_name}), 200, -32601)
    assert j["error"]["message"] == "Method not found: " + "\u00e9" * 60, j
    rpc_error(c.post({"id": 3, "method": "ping"}), 200, -32600)                       # no "jsonrpc"
    rpc_error(c.post({"jsonrpc": "1.0", "id": 3, "method": "ping"}), 200, -32600)
    rpc_error(c.post({"jsonrpc": "2.0", "id": 3}), 200, -32600)                       # no method
    rpc_error(c.post({"jsonrpc": "2.0", "id": 3, "method": 7}), 200, -32600)
    j = rpc_error(c.post({"jsonrpc": "2.0", "id": True, "method": "ping"}), 200, -32600)
    assert j["id"] is None
    rpc_error(c.post({"jsonrpc": "2.0", "id": None, "method": "ping"}), 200, -32600)
    j = rpc_error(c.post({"jsonrpc": "2.0", "id": "x", "method": "resources/list"}), 200, -32601)
    assert j["id"] == "x"
    rpc_error(c.post({"jsonrpc": "2.0", "id": 4, "method": "tools/list", "params": [1]}), 200, -32602)
    # notifications and responses: 202, no body
    for msg in ({"jsonrpc": "2.0", "method": "notifications/initialized"},
                {"jsonrpc": "2.0", "method": "notifications/whatever", "params": {"x": 1}},
                {"jsonrpc": "2.0", "method": "notifications/cancelled", "params": {"requestId": 12345}},
                {"jsonrpc": "2.0", "id": 77, "result": {}}):
        r = c.post(msg)
        assert r.status_code == 202 and r.content == b"", (msg, r.status_code, r.text)
        assert "Content-Type" not in r.headers
    # a body must say it is JSON (step 1)
    r = c.post(b'{"jsonrpc":"2.0","id":1,"method":"ping"}', headers={"Content-Type": "text/plain"})
    assert_error(r, 415, "request.bad_content_type")
    # string ids are echoed
    r = c.post({"jsonrpc": "2.0", "id": "abc", "method": "ping"})
    assert r.json() == {"jsonrpc": "2.0", "id": "abc", "result": {}}


# -- tools/list -------------------------------------------------------------------------------------

def expected_tools(srv, token):
    ops = srv.get("/ops", token=token).json()["ops"]
    return [o for o in ops if o["stream"] != "ws" and o.get("body") != "raw"]


def test_tools_list_is_the_callers_mounted_ops(srv):
    openapi = srv.get("/openapi.json", token=ALICE_TOKEN).json()
    for token in (ALICE_TOKEN, BOB_TOKEN):
        c = Mcp(srv, token)
        c.initialize()
        tools = c.all_tools()
        want = expected_tools(srv, token)
        assert [t["title"] for t in tools] == [o["id"] for o in want]
        assert [t["title"] for t in tools] == sorted(t["title"] for t in tools)     # deterministic
        assert c.all_tools() == tools
        for t, o in zip(tools, want):
            assert t["name"] == o["id"].replace(".", "__"), t
            assert t["description"] == o["summary"], t
            assert t["_meta"]["abx/op"] == o["id"] and t["_meta"]["abx/effects"] == o["effects"], t
            assert t["inputSchema"]["type"] == "object", t
            # the declared result is the tool's outputSchema (2025-06-18 and later)
            assert t.get("outputSchema") == o["result"].get("schema"), t
    c = Mcp(srv, BOB_TOKEN)
    c.initialize()
    bob = {t["title"] for t in c.all_tools()}
    assert bob and all(x.startswith(("core.", "approvals.")) for x in bob), bob
    c = Mcp(srv)
    c.initialize()
    tools = {t["title"]: t for t in c.all_tools()}
    # not tools: a WebSocket op and an upload (they need what MCP cannot carry)
    assert "terminal.connect" not in tools and "files.upload" not in tools
    assert "files.read" in tools and "commands.stream" in tools
    # the input schema is the op's own (the same the OpenAPI RPC binding declares)
    rpc = openapi["paths"]["/ops/files.read"]["post"]["requestBody"]["content"]["application/json"]["schema"]
    assert tools["files.read"]["inputSchema"] == rpc
    ann = {k: tools[k]["annotations"] for k in ("files.read", "files.write", "files.delete", "commands.run",
                                                "commands.sessions.close")}
    assert ann["files.read"] == {"readOnlyHint": True, "destructiveHint": False, "idempotentHint": True,
                                 "openWorldHint": False}
    assert ann["files.write"] == {"readOnlyHint": False, "destructiveHint": False, "idempotentHint": False,
                                  "openWorldHint": False}
    assert ann["files.delete"]["destructiveHint"] is True and ann["files.delete"]["idempotentHint"] is True
    assert ann["commands.run"]["destructiveHint"] is True and ann["commands.run"]["readOnlyHint"] is False
    assert ann["commands.sessions.close"]["idempotentHint"] is True          # a DELETE binding
    assert tools["commands.stream"]["_meta"]["abx/stream"] == "sse"
    assert "abx/stream" not in tools["files.read"]["_meta"]


def test_tools_list_cursors(srv):
    c = Mcp(srv)
    c.initialize()
    res = c.result("tools/list", {"cursor": None})
    assert len(res["tools"]) < 100 and "nextCursor" not in res       # one page (paging: test_mcp.c)
    b64 = lambda s: base64.b64encode(s.encode()).decode()
    for bad in ("nonsense", b64("hello:100"), b64("abx-tools:100"), b64("abx-tools:7"), b64("abx-tools:"),
                b64("abx-tools:-100"), "", "=" * 8, 100, {"offset": 100}):
        rpc_error(c.post({"jsonrpc": "2.0", "id": 1, "method": "tools/list", "params": {"cursor": bad}}), 200,
                  -32602, "args.invalid")


def test_reload_changes_the_list(abx, workspace, tmp_path):
    ledger = str(tmp_path / "l.db")
    cfg = make_config(workspace, ledger)
    s = abx(cfg)
    c = Mcp(s)
    c.initialize()
    before = {t["title"] for t in c.all_tools()}
    assert "files.read" in before
    cfg["policy"]["allow"] = [a for a in cfg["policy"]["allow"] if a["ops"] != ["files.*"]]
    with open(s.config_path, "w") as f:
        json.dump(cfg, f)
    s.proc.send_signal(signal.SIGHUP)
    deadline = time.time() + 10
    while time.time() < deadline:
        after = {t["title"] for t in c.all_tools()}
        if "files.read" not in after:
            break
        time.sleep(0.1)
    assert after == {x for x in before if not x.startswith("files.")}, after ^ before


# -- tools/call -------------------------------------------------------------------------------------

def test_call_both_spellings_through_the_pipeline(srv, workspace):
    c = Mcp(srv)
    c.initialize()
    direct = srv.op("files.read", {"path": "a.txt"}, token=ALICE_TOKEN).json()
    for name in ("files__read", "files.read"):
        res = c.call(name, {"path": "a.txt"})
        assert res["isError"] is False and res["structuredContent"] == direct, res
        assert json.loads(text_of(res)) == direct
        assert res["_meta"]["abx/request_id"]
    # no arguments at all: the op's defaults (files.list of the workspace)
    res = c.call("files__list")
    assert res["isError"] is False and "a.txt" in text_of(res)
    res = c.call("files__list", None)
    assert res["isError"] is False


def test_unknown_unmounted_and_not_a_tool_are_32602(srv):
    c = Mcp(srv)
    c.initialize()
    bob = Mcp(srv, BOB_TOKEN)
    bob.initialize()
    for client, name in ((c, "no__such__tool"), (c, "files.nope"), (c, "terminal__connect"), (c, "files__upload"),
                         (bob, "files__read"), (bob, "files.read"), (c, "")):
        j = client.request("tools/call", {"name": name, "arguments": {"path": "a.txt"}})
        assert j["error"]["code"] == -32602, (name, j)
        assert j["error"]["data"]["code"] == "op.not_enabled", j
    # the unmounted op answers exactly like the unknown one (nothing leaks)
    a = bob.request("tools/call", {"name": "files__read"})["error"]["message"]
    assert a == "Unknown tool: files__read"
    j = c.request("tools/call", {"arguments": {}})
    assert j["error"]["code"] == -32602 and j["error"]["data"]["code"] == "args.missing"
    j = c.request("tools/call", {"name": "files__read", "arguments": [1]})
    assert j["error"]["code"] == -32602 and j["error"]["data"]["code"] == "args.invalid"


def test_argument_and_policy_failures_are_error_results(srv):
    c = Mcp(srv)
    c.initialize()
    cases = [
        ("files__read", {"path": "a.txt", "bogus": 1}, "args.unknown", 400),
        ("files__read", {}, "args.missing", 400),
        ("files__read", {"path": 5}, "args.invalid", 400),
        ("files__read", {"path": "/etc/passwd"}, "policy.path_not_allowed", 403),
        ("files__read", {"path": "nope.txt"}, "files.not_found", 404),
        ("commands__run", {"command": "rm -rf /"}, "policy.command_not_allowed", 403),
    ]
    for name, args, code, status in cases:
        res = c.call(name, args)
        assert res["isError"] is True, (name, res)
        assert text_of(res).startswith(code + ": "), res
        assert res["_meta"]["abx/code"] == code and res["_meta"]["abx/status"] == status, res
    carol = Mcp(srv, CAROL_TOKEN)
    carol.initialize()
    res = carol.call("files__stat", {"path": "a.txt"})       # a deny statement
    assert res["isError"] is True and text_of(res).startswith("policy.denied: "), res


def test_a_held_call_says_so_with_its_approval_id(abx, workspace, tmp_path):
    extra = [{"ops": ["files.write"], "principals": ["alice"], "paths": [workspace + "/**"], "approval": "required"}]
    cfg = make_config(workspace, str(tmp_path / "l.db"), extra_allow=extra)
    cfg["policy"]["allow"][1]["ops"] = ["files.read", "files.list", "files.stat"]
    s = abx(cfg)
    c = Mcp(s)
    c.initialize()
    res = c.call("files__write", {"path": "held.txt", "content": "x"})
    assert res["isError"] is True, res
    aid = res["_meta"]["abx/approval_id"]
    assert res["_meta"]["abx/status"] == 202 and aid in text_of(res) and "approval" in text_of(res)
    assert not os.path.exists(os.path.join(workspace, "held.txt"))
    r = s.get("/approvals/" + aid, token=ALICE_TOKEN)
    assert r.status_code == 202 and r.json()["status"] == "pending", r.text
    # the model can check it through MCP too
    res = c.call("approvals__get", {"id": aid})
    assert "pending" in text_of(res)


def ledger_groups(path, where, args=(), timeout=3.0):
    deadline = time.time() + timeout
    while True:
        con = sqlite3.connect(path, timeout=10)
        try:
            rows = con.execute("SELECT group_id, request_id, principal, op, door, client FROM action_groups WHERE "
                               + where, args).fetchall()
        finally:
            con.close()
        if rows or time.time() > deadline:
            return rows
        time.sleep(0.05)


def test_calls_are_in_the_ledger_with_door_mcp(srv):
    c = Mcp(srv)
    c.initialize()
    res = c.call("files__stat", {"path": "a.txt"})
    rid = res["_meta"]["abx/request_id"]
    rows = ledger_groups(srv.ledger_path, "request_id = ?", (rid,))
    assert len(rows) == 1, rows
    _, _, principal, op, door, client = rows[0]
    assert (principal, op, door, client) == ("alice", "files.stat", "mcp", "127.0.0.1"), rows
    # a mutating call is durable before its answer, same door
    res = c.call("files__write", {"path": "led.txt", "content": "x"})
    assert res["isError"] is False, res
    rows = ledger_groups(srv.ledger_path, "request_id = ?", (res["_meta"]["abx/request_id"],), timeout=0)
    assert rows and rows[0][3:5] == ("files.write", "mcp"), rows
    # a refused call too
    res = c.call("files__read", {"path": "/etc/passwd"})
    rows = ledger_groups(srv.ledger_path, "request_id = ?", (res["_meta"]["abx/request_id"],))
    assert rows and rows[0][4] == "mcp", rows


def test_bytes_results_text_and_base64(srv, workspace):
    with open(os.path.join(workspace, "bin.dat"), "wb") as f:
        f.write(bytes(range(256)))
    c = Mcp(srv)
    c.initialize()
    res = c.call("core__metrics")
    assert res["isError"] is False and "abx_requests_total" in text_of(res), res
    res = c.call("files__download", {"path": "bin.dat"})
    blob = [x for x in res["content"] if x["type"] == "resource"]
    assert blob and base64.b64decode(blob[0]["resource"]["blob"]) == bytes(range(256)), res
    assert blob[0]["resource"]["uri"].startswith("abx://results/")


# -- streams, progress, cancellation -------------------------------------------------------------

def stream_call(c, args, token="tok-1", accept=ACCEPT, rid=None):
    c.n += 1
    rid = c.n if rid is None else rid
    msg = {"jsonrpc": "2.0", "id": rid, "method": "tools/call",
           "params": {"name": "commands__stream", "arguments": args}}
    if token is not None:
        msg["params"]["_meta"] = {"progressToken": token}
    return rid, c.post(msg, headers={"Accept": accept}, stream=True, timeout=60)


def test_streaming_op_sends_progress_then_the_result(srv):
    c = Mcp(srv)
    c.initialize()
    rid, r = stream_call(c, {"command": "sh -c 'echo one; sleep 0.3; echo two'"})
    assert r.status_code == 200 and r.headers["Content-Type"].startswith("text/event-stream"), r.text
    msgs = sse_messages(r)
    prog = [m for m in msgs if m.get("method") == "notifications/progress"]
    final = msgs[-1]
    assert final["id"] == rid and final["result"]["isError"] is False, final
    assert all(m["params"]["progressToken"] == "tok-1" for m in prog)
    values = [m["params"]["progress"] for m in prog]
    assert values == sorted(values) and len(set(values)) == len(values) and len(values) >= 3, values
    texts = [m["params"]["message"] for m in prog]
    assert texts[0].startswith("start: ") and "stdout: one\n" in texts and "stdout: two\n" in texts, texts
    assert texts[-1].startswith("exit: ")
    events = json.loads(text_of(final["result"]))["events"]
    assert [e["event"] for e in events][0] == "start" and events[-1]["event"] == "exit"
    assert events[-1]["data"]["exit_code"] == 0
    # without a progress token, or without accepting SSE: one JSON answer with everything
    for token, accept in ((None, ACCEPT), ("t", "application/json")):
        rid, r = stream_call(c, {"command": "echo hi"}, token=token, accept=accept)
        assert r.headers["Content-Type"] == "application/json", r.headers
        res = r.json()["result"]
        events = json.loads(text_of(res))["events"]
        assert {"event": "stdout", "data": {"data": "hi\n", "offset": 0}} in events, events


def process_state(srv, pid):
    r = srv.get("/process/%d" % pid, token=ALICE_TOKEN)
    assert r.status_code == 200, r.text
    return r.json()


def test_cancelled_notification_stops_a_streaming_command(srv):
    c = Mcp(srv)
    c.initialize()
    rid, r = stream_call(c, {"command": "sleep 30"}, rid="long-1")
    got = []
    started = threading.Event()

    def read():
        for m in sse_iter(r):
            got.append(m)
            if m.get("method") == "notifications/progress" and m["params"]["message"].startswith("start: "):
                started.set()

    t = threading.Thread(target=read)
    t.start()
    assert started.wait(10), got
    pid = json.loads(got[0]["params"]["message"][len("start: "):])["pid"]
    assert process_state(srv, pid)["running"] is True
    t0 = time.time()
    r2 = c.post({"jsonrpc": "2.0", "method": "notifications/cancelled",
                 "params": {"requestId": "long-1", "reason": "user stopped it"}})
    assert r2.status_code == 202
    t.join(15)
    assert not t.is_alive() and time.time() - t0 < 8
    final = got[-1]
    assert final["id"] == "long-1" and final["result"]["isError"] is True, final
    assert "cancelled" in text_of(final["result"])
    deadline = time.time() + 5
    while process_state(srv, pid)["running"] and time.time() < deadline:
        time.sleep(0.1)
    st = process_state(srv, pid)
    assert st["running"] is False and st["signal"] == "KILL", st


def test_cancelled_notification_stops_a_running_command(srv):
    c = Mcp(srv)
    c.initialize()
    box = {}

    def call():
        box["r"] = c.post({"jsonrpc": "2.0", "id": 41, "method": "tools/call",
                           "params": {"name": "commands__run", "arguments": {"command": "sleep 30"}}}, timeout=60)

    t0 = time.time()
    t = threading.Thread(target=call)
    t.start()
    time.sleep(1.0)
    assert t.is_alive()
    assert c.post({"jsonrpc": "2.0", "method": "notifications/cancelled", "params": {"requestId": 41}}).status_code == 202
    t.join(15)
    assert not t.is_alive() and time.time() - t0 < 8, "the command was not stopped"
    res = box["r"].json()["result"]
    out = json.loads(text_of(res))
    assert out["signal"] == "KILL" and out["running"] is False, out
    # a cancel for another session's (or no) call changes nothing
    other = Mcp(srv)
    other.initialize()
    assert other.post({"jsonrpc": "2.0", "method": "notifications/cancelled",
                       "params": {"requestId": 41}}).status_code == 202


def test_client_hang_up_stops_a_running_command(srv):
    c = Mcp(srv)
    c.initialize()
    before = srv.op("process.list", {}, token=ALICE_TOKEN).json()
    n_before = len(before.get("processes", []))
    with pytest.raises(requests.exceptions.ReadTimeout):
        c.post({"jsonrpc": "2.0", "id": 1, "method": "tools/call",
                "params": {"name": "commands__run", "arguments": {"command": "sleep 31"}}}, timeout=1.0)
    deadline = time.time() + 5
    while time.time() < deadline:
        procs = srv.op("process.list", {}, token=ALICE_TOKEN).json().get("processes", [])
        mine = [p for p in procs if p["argv"][-1:] == ["31"]]
        if mine and not mine[0]["running"]:
            break
        time.sleep(0.1)
    assert mine and mine[0]["running"] is False and mine[0]["signal"] == "KILL", procs
    assert len(procs) >= n_before


# -- stdio: abx mcp ------------------------------------------------------------------------------

class Stdio:
    def __init__(self, args, env=None, cwd=None, home=None):
        e = dict(os.environ)
        e.pop("ABX_TOKEN", None)
        if home:
            e["ABX_HOME"] = home
        e.update(env or {})
        self.p = subprocess.Popen([abxtest.ABX_BIN, "mcp"] + args, stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                                  stderr=subprocess.PIPE, env=e, cwd=cwd, text=True, bufsize=1)
        self.lines = []
        self.cv = threading.Condition()
        self.t = threading.Thread(target=self._read, daemon=True)
        self.t.start()

    def _read(self):
        for line in self.p.stdout:
            with self.cv:
                self.lines.append(line)
                self.cv.notify_all()

    def send(self, obj):
        self.p.stdin.write((obj if isinstance(obj, str) else json.dumps(obj)) + "\n")
        self.p.stdin.flush()

    def wait_for(self, pred, timeout=15):
        deadline = time.time() + timeout
        with self.cv:
            while True:
                for ln in self.lines:
                    m = json.loads(ln)          # every stdout line is one JSON message
                    if pred(m):
                        return m
                left = deadline - time.time()
                if left <= 0:
                    raise AssertionError("no such message; got %r" % self.lines)
                self.cv.wait(left)

    def reply(self, rid, timeout=15):
        return self.wait_for(lambda m: m.get("id") == rid and "method" not in m, timeout)

    def close(self):
        self.p.stdin.close()
        rc = self.p.wait(timeout=20)
        self.t.join(5)
        err = self.p.stderr.read()
        rep = sanitizer_report(err)
        assert rep is None, "%s in abx mcp:\n%s" % (rep, err[-4000:])
        return rc, err


def test_stdio_beside_a_running_embedded_default_has_its_own_ledger(abx, workspace, tmp_path):
    """abx serve and abx mcp on the embedded default, same ABX_HOME: both run, each with its
    own chain (ledger.db and ledger-mcp.db), each verifiable."""
    home = str(tmp_path / "home-both")
    os.makedirs(home)
    srv = abx(None, home=home)
    assert srv.get("/health").status_code == 200
    s = Stdio(["--workspace", workspace], home=home, cwd=workspace)
    s.send({"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": {"protocolVersion": "2025-06-18"}})
    assert s.reply(1)["result"]["protocolVersion"] == "2025-06-18"
    s.send({"jsonrpc": "2.0", "id": 2, "method": "tools/call",
            "params": {"name": "core__health", "arguments": {}}})
    assert not s.reply(2)["result"].get("isError")
    rc, err = s.close()
    assert rc == 0, err
    assert os.path.exists(os.path.join(home, "ledger.db")) and os.path.exists(os.path.join(home, "ledger-mcp.db"))
    r = run_abx(["ledger", "verify", "--path", os.path.join(home, "ledger-mcp.db")])
    assert r.returncode == 0 and r.stdout.startswith("ok: "), r.stdout + r.stderr


def test_stdio_serves_the_same_pipeline(srv, workspace, tmp_path):
    # one server per ledger: the running server holds this config's
    s = Stdio(["--config", srv.config_path, "--principal", "alice"], home=str(tmp_path / "h"))
    rc, err = s.close()
    assert rc == 1 and "ledger" in err, err
    cfg = make_config(workspace, str(tmp_path / "stdio-ledger.db"))
    path = str(tmp_path / "stdio.json")
    with open(path, "w") as f:
        json.dump(cfg, f)
    s = Stdio(["--config", path, "--principal", "alice"], home=str(tmp_path / "h"))
    s.send({"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": {"protocolVersion": "2025-06-18"}})
    assert s.reply(1)["result"]["protocolVersion"] == "2025-06-18"
    s.send({"jsonrpc": "2.0", "method": "notifications/initialized"})
    s.send({"jsonrpc": "2.0", "id": 2, "method": "tools/list"})
    titles = [t["title"] for t in s.reply(2)["result"]["tools"]]
    assert titles == [o["id"] for o in expected_tools(srv, ALICE_TOKEN)]
    s.send({"jsonrpc": "2.0", "id": 3, "method": "tools/call", "params": {"name": "files__read",
                                                                            "arguments": {"path": "a.txt"}}})
    res = s.reply(3)["result"]
    assert res["isError"] is False and json.loads(text_of(res))["content"] == "hello\n", res
    s.send({"jsonrpc": "2.0", "id": 4, "method": "tools/call", "params": {"name": "files.read",
                                                                            "arguments": {"path": "/etc/passwd"}}})
    res = s.reply(4)["result"]
    assert res["isError"] is True and text_of(res).startswith("policy.path_not_allowed"), res
    s.send("{oops")
    assert s.wait_for(lambda m: m.get("error", {}).get("code") == -32700)["id"] is None
    s.send(json.dumps([{"jsonrpc": "2.0", "id": 5, "method": "ping"}]))
    assert s.wait_for(lambda m: m.get("error", {}).get("code") == -32600)["id"] is None
    s.send({"jsonrpc": "2.0", "id": 6, "method": "nope"})
    assert s.reply(6)["error"]["code"] == -32601
    s.send({"jsonrpc": "2.0", "id": 7, "method": "tools/call", "params": {"name": "zzz"}})
    assert s.reply(7)["error"]["code"] == -32602
    # progress over stdio
    s.send({"jsonrpc": "2.0", "id": 8, "method": "tools/call",
            "params": {"name": "commands__stream", "arguments": {"command": "echo via-stdio"},
                       "_meta": {"progressToken": 99}}})
    final = s.reply(8)
    assert final["result"]["isError"] is False
    prog = [json.loads(ln) for ln in s.lines if '"notifications/progress"' in ln]
    assert any(m["params"]["progressToken"] == 99 and m["params"]["message"] == "stdout: via-stdio\n"
               for m in prog), prog
    # cancellation: the command stops and the cancelled request gets no answer
    s.send({"jsonrpc": "2.0", "id": 9, "method": "tools/call",
            "params": {"name": "commands__run", "arguments": {"command": "sleep 30"}}})
    time.sleep(1.0)
    t0 = time.time()
    s.send({"jsonrpc": "2.0", "method": "notifications/cancelled", "params": {"requestId": 9}})
    deadline = time.time() + 8
    for k in range(100, 200):
        s.send({"jsonrpc": "2.0", "id": k, "method": "tools/call", "params": {"name": "process__list"}})
        procs = json.loads(text_of(s.reply(k)["result"]))["processes"]
        sleeper = [p for p in procs if p["argv"][-1:] == ["30"]]
        if (sleeper and not sleeper[0]["running"]) or time.time() > deadline:
            break
        time.sleep(0.2)
    assert sleeper and sleeper[0]["signal"] == "KILL", procs
    assert time.time() - t0 < 8
    time.sleep(0.3)
    assert not any(json.loads(ln).get("id") == 9 for ln in s.lines), "a cancelled request was answered"
    rc, err = s.close()
    assert rc == 0, err
    # the calls are in this process's ledger, door mcp
    rows = ledger_groups(str(tmp_path / "stdio-ledger.db"), "op = 'files.read'")
    assert rows and all(r[4] == "mcp" and r[2] == "alice" and r[5] == "stdio" for r in rows), rows


def test_stdio_principal_selection(abx, workspace, tmp_path):
    cfg = make_config(workspace, str(tmp_path / "p-ledger.db"))
    path = str(tmp_path / "p.json")
    with open(path, "w") as f:
        json.dump(cfg, f)
    home = str(tmp_path / "h")
    # a config and no principal: refused with a clear message
    s = Stdio(["--config", path], home=home)
    rc, err = s.close()
    assert rc == 2 and "--principal" in err, err
    s = Stdio(["--config", path, "--principal", "mallory"], home=home)
    rc, err = s.close()
    assert rc == 2 and "no configured principal" in err, err
    s = Stdio(["--config", path], env={"ABX_TOKEN": "wrong-token-0123456789abcdef"}, home=home)
    rc, err = s.close()
    assert rc == 2 and "ABX_TOKEN" in err, err
    s = Stdio(["--bogus"], home=home)
    rc, err = s.close()
    assert rc == 2 and "unknown option" in err, err
    # ABX_TOKEN names bob: bob's tools only
    s = Stdio(["--config", path], env={"ABX_TOKEN": BOB_TOKEN}, home=home)
    s.send({"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": {"protocolVersion": "2025-11-25"}})
    s.reply(1)
    s.send({"jsonrpc": "2.0", "id": 2, "method": "tools/list"})
    titles = {t["title"] for t in s.reply(2)["result"]["tools"]}
    assert titles and all(t.startswith(("core.", "approvals.")) for t in titles), titles
    rc, err = s.close()
    assert rc == 0, err
    # the embedded default (no config): principal local, preset workspace; stdout only protocol
    for level in (None, "info"):
        s = Stdio(["--workspace", workspace] + (["--log-level", level] if level else []),
                  home=str(tmp_path / ("h2" + (level or ""))))
        s.send({"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": {"protocolVersion": "2025-11-25"}})
        s.reply(1)
        s.send({"jsonrpc": "2.0", "id": 2, "method": "tools/call", "params": {"name": "files__list"}})
        res = s.reply(2)["result"]
        assert res["isError"] is False and "a.txt" in text_of(res), res
        rc, err = s.close()
        assert rc == 0, err
        if level is None:           # by default only warnings and errors reach the client's stderr
            assert '"level":"info"' not in err, err
        else:
            assert "local" in err   # the info line on stderr names the principal


def test_typed_results_only_from_2025_06_18(srv, workspace):
    """outputSchema and structuredContent come with revision 2025-06-18 and later; an
    older session keeps the JSON text block only."""
    direct = srv.op("files.read", {"path": "a.txt"}, token=ALICE_TOKEN).json()
    for version, typed in (("2025-03-26", False), ("2025-06-18", True), ("2025-11-25", True)):
        c = Mcp(srv)
        assert c.initialize(version)["protocolVersion"] == version
        tools = {t["title"]: t for t in c.all_tools()}
        assert ("outputSchema" in tools["files.read"]) is typed, version
        assert "outputSchema" not in tools["files.watch"]  # a stream: its events are in the catalog
        res = c.call("files__read", {"path": "a.txt"})
        assert res["isError"] is False and json.loads(text_of(res)) == direct
        assert res.get("structuredContent") == (direct if typed else None), version
        if typed:
            assert tools["files.read"]["outputSchema"]["required"] == [
                "path", "encoding", "size", "content", "length", "truncated"]
        # an error is text only, on every revision
        err = c.call("files__read", {"path": "missing.txt"})
        assert err["isError"] is True and "structuredContent" not in err
