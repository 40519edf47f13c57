"""GET /tools and POST /tools/call: the LLM provider tool formats (openai, responses, anthropic,
gemini). Declarations filtered by policy like the catalog, schemas inside each provider's subset,
and the providers' own recorded-shape assistant outputs (fixtures/tools/) run through the
pipeline: several calls in one message (reads in the parallel lane, a write never reordered with
a read of the same path), a policy denial and an unknown tool and malformed arguments as that
call's error result, each call in the ledger with door "tools" linked to the request's group.
Also: format missing/unknown, 401, 405, more than 100 calls, and `abx tools` offline."""
import base64
import json
import os
import sqlite3
import time

import pytest

from abxtest import ALICE_TOKEN, BOB_TOKEN, assert_error, run_abx, sha256_hex

FORMATS = ("openai", "responses", "anthropic", "gemini")
FIXTURES = os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))), "fixtures", "tools")


def make_config(ws, ledger_path):
    policy = {
        "allow": [
            {"ops": ["core.*", "ledger.*"], "principals": ["*"]},
            {"ops": ["files.*"], "principals": ["role:agent"], "paths": [ws + "/**"]},
            {"ops": ["commands.run", "commands.stream"], "principals": ["role:agent"], "paths": [ws + "/**"],
             "commands": ["echo *"]},
        ],
        "deny": [{"ops": ["files.delete"], "principals": ["role:agent"]}],
    }
    toks = [
        {"principal": "alice", "roles": ["agent"], "token_sha256": sha256_hex(ALICE_TOKEN)},
        {"principal": "bob", "roles": ["viewer"], "token_sha256": sha256_hex(BOB_TOKEN)},
    ]
    return {"workspace": ws, "terminal_listen": "off", "auth": {"tokens": toks}, "policy": policy,
            "ledger": {"path": ledger_path}}


@pytest.fixture
def srv(abx, workspace, tmp_path):
    path = str(tmp_path / "ledger.db")
    s = abx(make_config(workspace, path))
    s.ledger_path = path
    s.config = make_config(workspace, path)
    return s


def tools(s, fmt, token=ALICE_TOKEN):
    r = s.get("/tools?format=" + fmt, token=token)
    assert r.status_code == 200, r.text[:500]
    return r.json()


def declarations(doc, fmt):
    t = doc["tools"]
    if fmt == "gemini":
        assert len(t) <= 1
        return t[0]["functionDeclarations"] if t else []
    return t


def decl_name(d, fmt):
    return d["function"]["name"] if fmt == "openai" else d["name"]


def call(s, fmt, payload, token=ALICE_TOKEN, timeout=60):
    return s.post("/tools/call?format=" + fmt, token=token, json_body=payload, timeout=timeout)


def fixture(name, ws):
    with open(os.path.join(FIXTURES, name)) as f:
        return json.loads(f.read().replace("@WS@", ws))


def assistant_output(fmt, doc):
    """The part of a provider's response that the caller posts verbatim."""
    if fmt == "openai":
        return doc["choices"][0]["message"]
    if fmt == "responses":
        return doc               # the whole Response object: {"output": [...], ...}
    if fmt == "anthropic":
        return doc               # the whole Message
    return doc["candidates"][0]["content"]


def call_ids(fmt, doc):
    if fmt == "openai":
        return [c["id"] for c in doc["choices"][0]["message"]["tool_calls"]]
    if fmt == "responses":
        return [i["call_id"] for i in doc["output"] if i["type"] == "function_call"]
    if fmt == "anthropic":
        return [b["id"] for b in doc["content"] if b["type"] == "tool_use"]
    return [None for p in doc["candidates"][0]["content"]["parts"] if "functionCall" in p]


def results(fmt, answer, ids):
    """Per call, in order: (id, is_error, parsed result or error object)."""
    if fmt == "openai":
        assert set(answer) == {"messages"}, answer
        out = []
        for m in answer["messages"]:
            assert m["role"] == "tool" and set(m) == {"role", "tool_call_id", "content"}, m
            v = json.loads(m["content"])
            out.append((m["tool_call_id"], isinstance(v, dict) and "error" in v and len(v) == 1, v))
    elif fmt == "responses":
        assert set(answer) == {"input"}, answer
        out = []
        for m in answer["input"]:
            assert m["type"] == "function_call_output" and set(m) == {"type", "call_id", "output"}, m
            v = json.loads(m["output"])
            out.append((m["call_id"], isinstance(v, dict) and "error" in v and len(v) == 1, v))
    elif fmt == "anthropic":
        assert answer["role"] == "user" and set(answer) == {"role", "content"}, answer
        out = []
        for b in answer["content"]:
            assert b["type"] == "tool_result" and set(b) == {"type", "tool_use_id", "content", "is_error"}, b
            out.append((b["tool_use_id"], b["is_error"], json.loads(b["content"])))
    else:
        assert answer["role"] == "user" and set(answer) == {"role", "parts"}, answer
        out = []
        for p in answer["parts"]:
            fr = p["functionResponse"]
            assert set(fr) <= {"name", "response", "id"} and set(fr["response"]) in ({"output"}, {"error"}), fr
            resp = fr["response"]
            out.append((fr.get("id"), "error" in resp, resp["output"] if "output" in resp else {"error": resp["error"]}))
    assert [o[0] for o in out] == ids, (out, ids)
    return out


def ledger_rows(path, front, n, timeout=3.0):
    deadline = time.time() + timeout
    while True:
        con = sqlite3.connect(path, timeout=10)
        try:
            rows = con.execute("SELECT group_id, op, door, principal FROM action_groups WHERE batch_group = ?"
                               " ORDER BY group_id", (front,)).fetchall()
            head = con.execute("SELECT op, door, principal FROM action_groups WHERE group_id = ?", (front,)).fetchall()
            events = {}
            for gid, _, _, _ in rows + [(front, 0, 0, 0)]:
                events[gid] = [(k, dict(json.loads(d), at=at)) for k, at, d in
                               con.execute("SELECT kind, at, data FROM action_events WHERE group_id = ?"
                                           " ORDER BY ordinal", (gid,))]
        finally:
            con.close()
        done = sum(1 for gid, _, _, _ in rows if any(k == "finished" for k, _ in events[gid]))
        if done >= n or time.time() > deadline:
            return head, rows, events
        time.sleep(0.1)


# -- declarations ---------------------------------------------------------------------------------

def tool_name(op_id):
    return op_id.replace(".", "__")


def offered(op):
    return (op["stream"] != "ws" and op.get("body") != "raw" and op.get("query") != "raw"
            and len(tool_name(op["id"])) <= 64)


@pytest.mark.parametrize("fmt", FORMATS)
def test_declarations_follow_the_callers_catalog(srv, fmt):
    for token in (ALICE_TOKEN, BOB_TOKEN):
        names = [decl_name(d, fmt) for d in declarations(tools(srv, fmt, token), fmt)]
        cat = srv.get("/ops", token=token).json()["ops"]
        assert names == [tool_name(o["id"]) for o in cat if offered(o)], (names, [o["id"] for o in cat])
        assert len(set(names)) == len(names)
    alice = {decl_name(d, fmt) for d in declarations(tools(srv, fmt), fmt)}
    bob = {decl_name(d, fmt) for d in declarations(tools(srv, fmt, BOB_TOKEN), fmt)}
    assert {"files__read", "files__write", "commands__run", "commands__stream", "core__health"} <= alice
    assert "files__upload" not in alice                 # raw request body: not a tool call
    assert "system__policy__reload" not in alice       # explicit-only, not granted
    assert "process__start" not in alice               # not allowed to anyone here
    assert bob < alice and "core__health" in bob
    assert not [n for n in bob if n.startswith(("files__", "commands__"))], bob


@pytest.mark.parametrize("fmt", FORMATS)
def test_cli_prints_the_same_declarations(srv, fmt, tmp_path):
    cfg = tmp_path / "tools-cli.json"
    cfg.write_text(json.dumps(srv.config))
    r = run_abx(["tools", "--format", fmt, "--config", str(cfg), "--principal", "alice"])
    assert r.returncode == 0, r.stderr
    assert json.loads(r.stdout) == tools(srv, fmt)
    r = run_abx(["tools", "--format", fmt, "--config", str(cfg), "--principal", "bob"])
    assert json.loads(r.stdout) == tools(srv, fmt, BOB_TOKEN)
    # without --principal: what an ordinary principal could get (every offered op a
    # wildcard can grant), never an admin (explicit-only) op
    full = json.loads(run_abx(["tools", "--format", fmt]).stdout)
    cat = json.loads(run_abx(["catalog"]).stdout)["ops"]
    names = [decl_name(d, fmt) for d in declarations(full, fmt)]
    explicit = {"admin", "script"}  # the effects that make an op explicit-only
    assert names == [tool_name(o["id"]) for o in cat if offered(o) and not explicit & set(o["effects"])]
    admin = [tool_name(o["id"]) for o in cat if offered(o) and explicit & set(o["effects"])]
    assert "system__policy__reload" in admin and not set(admin) & set(names)
    # with --config alone too (its custom ops included, admin ones still out)
    r = run_abx(["tools", "--format", fmt, "--config", str(cfg)])
    assert r.returncode == 0, r.stderr
    assert not set(admin) & {decl_name(d, fmt) for d in declarations(json.loads(r.stdout), fmt)}


def test_cli_errors(tmp_path, srv):
    r = run_abx(["tools"])
    assert r.returncode == 2 and "openai, responses, anthropic, gemini" in r.stderr
    r = run_abx(["tools", "--format", "claude"])
    assert r.returncode == 2 and "--format must be one of" in r.stderr
    r = run_abx(["tools", "--format", "openai", "--bogus"])
    assert r.returncode == 2 and "usage" in r.stderr
    cfg = tmp_path / "tools-cli.json"
    cfg.write_text(json.dumps(srv.config))
    r = run_abx(["tools", "--format", "openai", "--config", str(cfg), "--principal", "mallory"])
    assert r.returncode == 1 and "no principal 'mallory'" in r.stderr
    bad = tmp_path / "bad.yaml"
    bad.write_text("policy: [unclosed\n")
    r = run_abx(["tools", "--format", "openai", "--config", str(bad), "--principal", "alice"])
    assert r.returncode == 1 and r.stderr


# -- schema subsets ----------------------------------------------------------------------------------

OPENAI_STRICT_KEYS = {"type", "description", "enum", "minimum", "maximum", "exclusiveMinimum", "exclusiveMaximum",
                      "multipleOf", "pattern", "format", "minItems", "maxItems", "items", "anyOf", "properties",
                      "required", "additionalProperties", "$ref", "$defs"}
GEMINI_KEYS = {"type", "format", "description", "nullable", "enum", "items", "properties", "required", "minItems",
               "maxItems", "minimum", "maximum", "minLength", "maxLength", "pattern", "anyOf", "propertyOrdering",
               "title"}
GEMINI_TYPES = {"STRING", "NUMBER", "INTEGER", "BOOLEAN", "ARRAY", "OBJECT"}


def walk(schema):
    """Every sub-schema (the schema itself included)."""
    yield schema
    for p in (schema.get("properties") or {}).values():
        yield from walk(p)
    for k in ("items", "additionalProperties"):
        if isinstance(schema.get(k), dict):
            yield from walk(schema[k])
    for s in schema.get("anyOf") or []:
        yield from walk(s)


def free_form(op):
    """An op with a map or any-typed parameter: outside strict mode's and Gemini's subsets."""
    return any(p["type"] in ("map", "any") or p.get("items") == "any" for p in op["params"])


@pytest.mark.parametrize("fmt", FORMATS)
def test_schemas_stay_in_the_providers_subset(srv, fmt):
    cat = {tool_name(o["id"]): o for o in srv.get("/ops", token=ALICE_TOKEN).json()["ops"]}
    decls = declarations(tools(srv, fmt), fmt)
    assert decls
    for d in decls:
        name = decl_name(d, fmt)
        op = cat[name]
        text = json.dumps(d)
        assert "x-abx-" not in text and "$schema" not in text, name
        if fmt in ("openai", "responses"):
            f = d["function"] if fmt == "openai" else d
            assert d["type"] == "function" and set(f) >= {"name", "description", "parameters", "strict"}
            params = f["parameters"]
            assert params["type"] == "object", name
            assert f["strict"] is True, name   # maps as {name, value} lists, any-values as JSON text
            if f["strict"]:
                for s in walk(params):
                    assert set(s) <= OPENAI_STRICT_KEYS, (name, set(s) - OPENAI_STRICT_KEYS)
                    t = s.get("type")
                    if t == "object" or (isinstance(t, list) and "object" in t):
                        assert s["additionalProperties"] is False, name
                        assert sorted(s["required"]) == sorted(s["properties"]), name
                required = {p["name"] for p in op["params"] if p["required"]}
                for pname, ps in params["properties"].items():
                    if pname not in required:   # optional: nullable, and null means absent
                        assert isinstance(ps["type"], list) and "null" in ps["type"], (name, pname, ps)
        elif fmt == "anthropic":
            assert set(d) == {"name", "description", "input_schema"}, d
            assert d["input_schema"]["type"] == "object"
            assert set(d["input_schema"]["properties"]) == {p["name"] for p in op["params"]}
        else:
            assert set(d) <= {"name", "description", "parameters", "parametersJsonSchema"}, d
            if not op["params"]:
                assert set(d) == {"name", "description"}, d    # Gemini refuses an OBJECT without properties
            elif free_form(op):
                assert "parameters" not in d and d["parametersJsonSchema"]["type"] == "object", name
                assert not [s for s in walk(d["parametersJsonSchema"]) if "default" in s], name
            else:
                params = d["parameters"]
                assert params["type"] == "OBJECT", name
                for s in walk(params):
                    assert set(s) <= GEMINI_KEYS, (name, set(s) - GEMINI_KEYS)
                    assert s["type"] in GEMINI_TYPES, (name, s)
                    assert all(isinstance(e, str) for e in s.get("enum", [])), (name, s)
                    if s["type"] == "OBJECT":
                        assert s["properties"], name
                required = {p["name"] for p in op["params"] if p["required"]}
                assert set(params.get("required", [])) == required, name


# -- calls ------------------------------------------------------------------------------------------

@pytest.mark.parametrize("fmt", FORMATS)
def test_recorded_multi_call_output(srv, workspace, fmt):
    with open(workspace + "/wr.txt", "w") as f:
        f.write("old")
    doc = fixture(fmt + "_multi.json", workspace)
    r = call(srv, fmt, assistant_output(fmt, doc))
    assert r.status_code == 200, r.text[:800]
    front = int(r.headers["X-ABX-Tools-Group"])
    out = results(fmt, r.json(), call_ids(fmt, doc))
    assert [e for _, e, _ in out] == [False] * 5, out
    read1, stat, write, read2, dl = [v for _, _, v in out]
    assert read1["content"] == "old"                     # read before the write: the old content
    assert stat["size"] == 30 and stat["type"] == "file"
    assert write["bytes_written"] == len("new from the model") and write["path"] == workspace + "/wr.txt"
    assert read2["content"] == "new from the model"      # read after the write: never reordered
    assert base64.b64decode(dl["content_base64"]) == b"hello\n"   # a bytes result, collected
    with open(workspace + "/wr.txt") as f:
        assert f.read() == "new from the model"
    if fmt == "gemini":   # no call ids: names in order
        assert [p["functionResponse"]["name"] for p in r.json()["parts"]] == \
            ["files__read", "files__stat", "files__write", "files__read", "files__download"]
    # one ledger group per call, door tools, linked to the request's group
    head, rows, events = ledger_rows(srv.ledger_path, front, 5)
    assert head == [("tools", "tools", "alice")], head
    assert sorted(op for _, op, _, _ in rows) == ["files.download", "files.read", "files.read", "files.stat",
                                                  "files.write"], rows
    assert all(door == "tools" and who == "alice" for _, _, door, who in rows), rows
    received = [d for k, d in events[front] if k == "received"][0]
    assert received["calls"] == 5 and received["format"] == fmt and received["refused"] == []


@pytest.mark.parametrize("fmt", FORMATS)
def test_recorded_errors_are_per_call_results(srv, workspace, fmt):
    doc = fixture(fmt + "_errors.json", workspace)
    r = call(srv, fmt, assistant_output(fmt, doc))
    assert r.status_code == 200, r.text[:800]
    out = results(fmt, r.json(), call_ids(fmt, doc))
    denied, unknown, malformed, deleted, health = out
    assert denied[1] and denied[2]["error"]["code"].startswith("policy."), denied      # outside the paths
    assert unknown[1] and unknown[2]["error"]["code"] == "op.not_enabled", unknown
    assert "nosuch__tool" in unknown[2]["error"]["message"]                             # names the tool
    assert malformed[1] and malformed[2]["error"]["code"] == "args.invalid", malformed
    if fmt in ("openai", "responses"):
        assert "not valid JSON" in malformed[2]["error"]["message"], malformed
    assert deleted[1] and deleted[2]["error"]["code"] == "policy.denied", deleted
    assert os.path.exists(workspace + "/a.txt")
    assert not health[1] and health[2]["status"] == "ok", health
    front = int(r.headers["X-ABX-Tools-Group"])
    head, rows, events = ledger_rows(srv.ledger_path, front, 4)
    received = [d for k, d in events[front] if k == "received"][0]
    if fmt in ("openai", "responses"):   # arguments that never parsed never ran: the door says so
        assert [x["index"] for x in received["refused"]] == [2] and received["refused"][0]["tool"] == "files__read"
        assert len(rows) == 4
    else:
        assert received["refused"] == [] and len(rows) == 5
    assert all(door == "tools" for _, _, door, _ in rows)
    assert "nosuch__tool" in [op for _, op, _, _ in rows]


def test_openai_bare_tool_calls_and_stream_result(srv, workspace):
    payload = {"tool_calls": [
        {"id": "call_s1", "type": "function",
         "function": {"name": "commands__stream", "arguments": json.dumps({"argv": ["echo", "streamed"]})}},
        {"id": "call_s2", "type": "function", "function": {"name": "commands.run",   # the dotted id works too
                                                          "arguments": json.dumps({"argv": ["echo", "hi"]})}},
        {"id": "call_s3", "type": "custom", "custom": {"name": "code_exec", "input": "print(1)"}},
        {"id": "call_s4", "type": "function", "function": {"name": "core__health", "arguments": "[]"}},
    ]}
    r = call(srv, "openai", payload)
    assert r.status_code == 200, r.text[:800]
    out = results("openai", r.json(), ["call_s1", "call_s2", "call_s3", "call_s4"])
    assert not out[0][1] and "streamed" in out[0][2]["text"], out[0]   # SSE collected as text
    assert not out[1][1] and out[1][2]["stdout"] == "hi\n", out[1]
    assert out[2][1] and "type 'custom'" in out[2][2]["error"]["message"], out[2]
    assert out[3][1] and "object" in out[3][2]["error"]["message"], out[3]


@pytest.mark.parametrize("fmt", ("openai", "responses"))
def test_strict_list_form_of_maps_comes_back_as_the_map(srv, fmt):
    decl = [d for d in declarations(tools(srv, fmt), fmt) if decl_name(d, fmt) == "commands__run"][0]
    f = decl["function"] if fmt == "openai" else decl
    env = f["parameters"]["properties"]["env"]
    assert env["type"] == ["array", "null"] and env["items"]["required"] == ["name", "value"], env
    args = [
        {"argv": ["echo", "x"], "env": [{"name": "FOO", "value": "1"}], "command": None, "cwd": None},
        {"argv": ["echo", "x"], "env": {"FOO": "1"}},            # the map itself is still fine
        {"argv": ["echo", "x"], "env": []},                       # an empty list is an empty map
        {"argv": ["echo", "x"], "env": [{"name": "FOO"}]},        # no value
        {"argv": ["echo", "x"], "env": [{"name": "A", "value": "1"}, {"name": "A", "value": "2"}]},
        {"argv": ["echo", "x"], "env": [{"name": "A", "value": "1", "extra": 1}]},
    ]
    if fmt == "openai":
        payload = {"tool_calls": [{"id": "c%d" % i, "type": "function",
                                   "function": {"name": "commands__run", "arguments": json.dumps(a)}}
                                  for i, a in enumerate(args)]}
    else:
        payload = {"output": [{"type": "function_call", "call_id": "c%d" % i, "name": "commands__run",
                               "arguments": json.dumps(a)} for i, a in enumerate(args)]}
    r = call(srv, fmt, payload)
    assert r.status_code == 200, r.text[:800]
    out = results(fmt, r.json(), ["c%d" % i for i in range(len(args))])
    # the scope has no env allowlist: a FOO that reached the policy as a map is refused by name
    for k in (0, 1):
        assert out[k][1] and out[k][2]["error"]["code"] == "policy.command_not_allowed", out[k]
        assert "'FOO'" in out[k][2]["error"]["message"], out[k]
    assert not out[2][1] and out[2][2]["stdout"] == "x\n", out[2]
    for k in (3, 4, 5):
        assert out[k][1] and out[k][2]["error"]["code"] == "args.invalid", out[k]
        assert "{name, value}" in out[k][2]["error"]["message"], out[k]


def test_strict_any_value_travels_as_json_text(abx, workspace, tmp_path):
    cfg = make_config(workspace, str(tmp_path / "l.db"))
    cfg["policy"]["allow"].append({"ops": ["runs.*"], "principals": ["role:agent"]})
    s = abx(cfg)
    decl = [d for d in declarations(tools(s, "openai"), "openai") if decl_name(d, "openai") == "runs__finalize"][0]
    assert decl["function"]["strict"] is True
    assert decl["function"]["parameters"]["properties"]["output"]["type"] == "string"
    rids = [s.op("runs.create", {}, token=ALICE_TOKEN).json()["id"] for _ in range(3)]
    texts = [json.dumps({"answer": [1, "two"]}), "not json {", json.dumps("plain")]
    payload = {"tool_calls": [{"id": "f%d" % i, "type": "function", "function": {
        "name": "runs__finalize", "arguments": json.dumps({"id": rid, "output": t})}}
        for i, (rid, t) in enumerate(zip(rids, texts))]}
    r = call(s, "openai", payload)
    assert r.status_code == 200, r.text[:800]
    out = results("openai", r.json(), ["f0", "f1", "f2"])
    assert not out[0][1] and out[0][2]["output"] == {"answer": [1, "two"]}, out[0]
    assert out[1][1] and out[1][2]["error"]["code"] == "args.invalid" and "JSON text" in out[1][2]["error"]["message"]
    assert not out[2][1] and out[2][2]["output"] == "plain", out[2]
    assert s.op("runs.get", {"id": rids[1]}, token=ALICE_TOKEN).json()["status"] == "open"


def test_viewer_gets_unmounted_tools_as_error_results(srv, workspace):
    doc = fixture("anthropic_multi.json", workspace)
    r = call(srv, "anthropic", doc, token=BOB_TOKEN)
    assert r.status_code == 200, r.text[:500]
    out = results("anthropic", r.json(), call_ids("anthropic", doc))
    assert all(e and v["error"]["code"] == "op.not_enabled" for _, e, v in out), out
    assert not os.path.exists(workspace + "/wr.txt")


ANN_TOKEN = "ann-approver-token-0123456789"


def test_held_call_answers_its_approval_record(abx, workspace, tmp_path):
    """A call that needs approval is held like any other (202): the model gets the held call's
    record as a normal result, and the call runs once an approver says yes."""
    cfg = make_config(workspace, str(tmp_path / "ledger.db"))
    cfg["policy"]["allow"] += [
        {"ops": ["approvals.list", "approvals.get"], "principals": ["*"]},
        {"ops": ["approvals.decide"], "principals": ["role:approver"]},
        {"ops": ["files.write"], "principals": ["role:agent"], "paths": [workspace + "/held/**"], "approval": "required"},
    ]
    cfg["auth"]["tokens"].append({"principal": "ann", "roles": ["approver"], "token_sha256": sha256_hex(ANN_TOKEN)})
    s = abx(cfg)
    os.mkdir(workspace + "/held")
    payload = {"content": [{"type": "tool_use", "id": "toolu_held", "name": "files__write",
                            "input": {"path": workspace + "/held/x.txt", "content": "approved"}}]}
    r = call(s, "anthropic", payload)
    assert r.status_code == 200, r.text[:500]
    [(tid, is_error, held)] = results("anthropic", r.json(), ["toolu_held"])
    assert not is_error and held["status"] == "pending" and held["poll"] == "/approvals/" + held["approval_id"], held
    assert not os.path.exists(workspace + "/held/x.txt")
    d = s.post("/approvals/" + held["approval_id"], token=ANN_TOKEN, json_body={"decision": "approve"})
    assert d.status_code == 200, d.text
    deadline = time.time() + 10
    while not os.path.exists(workspace + "/held/x.txt") and time.time() < deadline:
        time.sleep(0.05)
    with open(workspace + "/held/x.txt") as f:
        assert f.read() == "approved"


def _interval(events):
    fin = [d for k, d in events if k == "finished"][0]
    end = time.mktime(time.strptime(fin["at"][:19], "%Y-%m-%dT%H:%M:%S")) * 1000 + int(fin["at"][20:23])
    return end - fin["duration_ms"], end


def test_reads_overlap_in_the_lane(srv, workspace):
    paths = []
    for i in range(3):
        p = os.path.join(workspace, "big%d.bin" % i)
        with open(p, "wb") as f:
            f.write(b"abcdefgh" * (512 * 1024))  # 4 MiB
        paths.append(p)
    payload = {"content": [{"type": "tool_use", "id": "toolu_%d" % i, "name": "files__read",
                            "input": {"path": p, "encoding": "base64"}} for i, p in enumerate(paths)]}
    spans = None
    for _ in range(3):  # scheduling noise: one overlapping run out of three is enough
        r = call(srv, "anthropic", payload)
        assert r.status_code == 200, r.text[:300]
        out = results("anthropic", r.json(), ["toolu_0", "toolu_1", "toolu_2"])
        assert not any(e for _, e, _ in out)
        head, rows, events = ledger_rows(srv.ledger_path, int(r.headers["X-ABX-Tools-Group"]), 3)
        spans = [_interval(events[gid]) for gid, _, _, _ in rows]
        if any(a[0] < b[1] and b[0] < a[1] for i, a in enumerate(spans) for b in spans[i + 1:]):
            return
    pytest.fail("no two reads of the lane overlapped: %r" % spans)


# -- request errors ----------------------------------------------------------------------------------

def test_format_missing_or_unknown(srv):
    for path in ("/tools", "/tools?format=", "/tools?format=claude", "/tools?format=OpenAI"):
        j = assert_error(srv.get(path, token=ALICE_TOKEN), 400, "args.invalid")
        assert "openai, responses, anthropic, gemini" in j["error"]["message"], j
    for path in ("/tools/call", "/tools/call?format=mcp"):
        j = assert_error(srv.post(path, token=ALICE_TOKEN, json_body={"tool_calls": []}), 400, "args.invalid")
        assert "openai, responses, anthropic, gemini" in j["error"]["message"], j
    assert_error(srv.get("/tools?format=openai&strict=1", token=ALICE_TOKEN), 400, "args.unknown")
    assert_error(srv.get("/tools?format=%zz", token=ALICE_TOKEN), 400, "args.invalid")


def test_unauthenticated(srv, workspace):
    for token in (None, "wrong-token-0123456789abcdef"):
        r = srv.get("/tools?format=openai", token=token)
        assert r.status_code == 401 and r.json()["error"]["code"].startswith("auth."), r.text
        r = call(srv, "anthropic", fixture("anthropic_multi.json", workspace), token=token)
        assert r.status_code == 401 and r.json()["error"]["code"].startswith("auth."), r.text
    assert not os.path.exists(workspace + "/wr.txt")


def test_wrong_method(srv):
    r = srv.request("POST", "/tools?format=openai", token=ALICE_TOKEN, json={})
    assert_error(r, 405, "request.method_not_allowed")
    assert r.headers["Allow"] == "GET"
    r = srv.get("/tools/call?format=openai", token=ALICE_TOKEN)
    assert_error(r, 405, "request.method_not_allowed")
    assert r.headers["Allow"] == "POST"


@pytest.mark.parametrize("fmt,payload", [
    ("openai", {"tool_calls": []}),
    ("openai", {"role": "assistant", "content": "No tools needed."}),
    ("responses", {"output": [{"type": "message", "role": "assistant", "content": []}]}),
    ("anthropic", {"content": [{"type": "text", "text": "Done."}]}),
    ("gemini", {"role": "model", "parts": [{"text": "Done."}]}),
    ("gemini", {"candidates": []}),
    ("openai", {"tool_calls": [{"type": "function", "function": {"name": "core__health", "arguments": "{}"}}]}),
    ("anthropic", [1, 2]),
])
def test_no_calls_or_wrong_shape(srv, fmt, payload):
    assert_error(call(srv, fmt, payload), 400, "args.invalid")


def test_bad_json_body(srv):
    for body in (b"{", b"", b"not json"):
        r = srv.post("/tools/call?format=openai", token=ALICE_TOKEN, data=body,
                     headers={"Content-Type": "application/json"})
        assert_error(r, 400, "request.bad_json")


def test_at_most_100_calls(srv, workspace):
    def payload(n):
        return {"role": "model", "parts": [{"functionCall": {"name": "files__stat", "args": {"path": workspace + "/a.txt"}}}
                                           for _ in range(n)]}
    j = assert_error(call(srv, "gemini", payload(101)), 400, "args.invalid")
    assert "100" in j["error"]["message"]
    r = call(srv, "gemini", payload(100))
    assert r.status_code == 200, r.text[:300]
    parts = r.json()["parts"]
    assert len(parts) == 100 and all(p["functionResponse"]["response"]["output"]["size"] == 6 for p in parts)
