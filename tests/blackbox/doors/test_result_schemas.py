"""Typed results from outside: every op that answers JSON declares its result, OpenAPI
types each 200 response with it (and an example that matches it), and the shared test
hook (tests/pylib/abxschema.py, installed by abxtest.configure) checks every JSON answer
the suites receive against the declaration — including each call of a batch — so a
schema cannot drift from its handler."""
import copy
import os

import pytest

import abxschema


@pytest.fixture
def files(server, workspace):
    with open(os.path.join(workspace, "a.txt"), "w") as f:
        f.write("hello\n")
    return server


def test_every_json_op_declares_its_result(server):
    ops = server.get("/ops", token=server.token).json()["ops"]
    undeclared = sorted(o["id"] for o in ops if o["result"]["kind"] == "json" and "schema" not in o["result"]
                        and o["stream"] == "none" and o.get("query") != "raw")
    # answers that are another call's own: the held call's (approvals.decide: not mounted
    # here) and the dynamic tool's, whatever its run() returns
    assert undeclared == ["approvals.get", "tools.call"]
    for o in ops:
        if o["stream"] == "sse":
            assert o["result"]["events"], o["id"]


def test_openapi_responses_are_typed_with_examples(server):
    doc = server.get("/openapi.json", token=server.token).json()
    ops = {o["id"]: o for o in server.get("/ops", token=server.token).json()["ops"]}
    typed = 0
    for path, item in doc["paths"].items():
        for method, op in item.items():
            entry = ops.get(op.get("x-abx-op"))
            if not entry or "schema" not in entry["result"]:
                continue
            media = op["responses"]["200"]["content"]["application/json"]
            assert media["schema"] == entry["result"]["schema"], (method, path)
            assert abxschema.errors(media["schema"], media["example"]) == [], (method, path)
            typed += 1
    assert typed > 50
    watch = doc["paths"]["/files/watch"]["get"]["responses"]["200"]["content"]["text/event-stream"]
    assert set(watch["x-abx-events"]) >= {"ready", "create", "modify", "delete", "move"}


def test_the_hook_checks_answers_and_catches_a_drift(files):
    before = abxschema.checked["responses"]
    assert files.get("/files/read", token=files.token, params={"path": "a.txt"}).json()["content"] == "hello\n"
    assert abxschema.checked["responses"] == before + 1 and "files.read" in abxschema.checked["ops"]
    schema = abxschema._base["files.read"]["result"]["schema"]
    saved = copy.deepcopy(schema)
    try:
        del schema["properties"]["eof"]  # as if the handler had grown an undeclared field
        with pytest.raises(abxschema.SchemaDrift, match="undeclared field 'eof'"):
            files.get("/files/read", token=files.token, params={"path": "a.txt"})
        with pytest.raises(abxschema.SchemaDrift, match="files.read"):  # the same through a batch
            files.post("/batch", token=files.token, json_body={"calls": [
                {"op": "files.stat", "args": {"path": "a.txt"}}, {"op": "files.read", "args": {"path": "a.txt"}}]})
        schema["properties"]["eof"] = {"type": "string"}  # or had changed a field's type
        with pytest.raises(abxschema.SchemaDrift, match="is not of type string"):
            files.op("files.read", {"path": "a.txt"}, token=files.token)
    finally:
        abxschema._base["files.read"]["result"]["schema"] = saved
    files.op("files.read", {"path": "a.txt"}, token=files.token)


def test_validator_subset():
    s = {"type": "object", "properties": {"a": {"type": ["integer", "null"], "minimum": 1},
                                          "b": {"type": "array", "items": {"enum": ["x", "y"]}},
                                          "m": {"type": "object", "additionalProperties": {"type": "string"}}},
         "required": ["a"], "additionalProperties": False}
    assert abxschema.errors(s, {"a": None, "b": ["x"], "m": {"k": "v"}}) == []
    assert abxschema.errors(s, {"a": True}) == ["$.a: true is not of type ['integer', 'null']"]
    assert abxschema.errors(s, {"a": 0}) == ["$.a: 0 < minimum 1"]
    assert abxschema.errors(s, {"b": ["z"]}) == ["$: missing required 'a'", "$.b[0]: 'z' is not one of ['x', 'y']"]
    assert abxschema.errors(s, {"a": 1, "c": 1, "m": {"k": 1}}) == ["$: undeclared field 'c'",
                                                                 "$.m.k: 1 is not of type string"]


def test_stream_events_are_checked_against_the_declared_events(server):
    from abxtest import read_sse
    body = {"argv": ["echo", "hi"]}
    r = server.post("/commands/stream", token=server.token, json_body=body)  # read whole: the hook
    assert r.status_code == 200 and "event: exit" in r.text
    resp = server.post("/commands/stream", token=server.token, json_body=body, stream=True)
    assert [e["event"] for e in read_sse(resp)][-1] == "exit"  # read_sse checks them too
    events = abxschema._base["commands.stream"]["result"]["events"]
    saved = copy.deepcopy(events)
    try:
        del events["exit"]  # as if the handler sent an event it does not declare
        with pytest.raises(abxschema.SchemaDrift, match="undeclared event 'exit'"):
            server.post("/commands/stream", token=server.token, json_body=body)
        events["exit"] = copy.deepcopy(saved["exit"])
        events["stdout"]["properties"]["offset"] = {"type": "string"}
        resp = server.post("/commands/stream", token=server.token, json_body=body, stream=True)
        with pytest.raises(abxschema.SchemaDrift, match="event 'stdout' does not match"):
            read_sse(resp)
    finally:
        abxschema._base["commands.stream"]["result"]["events"] = saved
