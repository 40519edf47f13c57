"""null for an optional argument means "not given" on every door (issue 25): models and
SDKs send it for what they omit (OpenAI's strict mode makes every property required and
nullable). A required argument sent as null stays args.invalid, and an unknown argument's
message lists the valid names and the closest one, so a model fixes its call in one turn."""
import json

from abxtest import ALICE_TOKEN
from test_mcp import Mcp, text_of
from test_tools import call, results, srv  # noqa: F401  (srv is the fixture these tests use)

ARGS = {"path": "a.txt", "start_line": None, "max_lines": None, "numbered": None}


def expected(srv):
    r = srv.op("files.read", {"path": "a.txt"}, token=ALICE_TOKEN)
    assert r.status_code == 200, r.text
    return r.json()


def test_rpc_and_rest_body_take_null_as_absent(srv):
    want = expected(srv)
    r = srv.op("files.read", ARGS, token=ALICE_TOKEN)
    assert r.status_code == 200, r.text
    assert r.json() == want
    r = srv.op("files.read", dict(ARGS, path=None), token=ALICE_TOKEN)
    assert r.status_code == 400 and r.json()["error"]["code"] == "args.invalid", r.text
    assert "required" in r.json()["error"]["message"]


def test_batch_takes_null_as_absent(srv):
    want = expected(srv)
    r = srv.post("/batch", token=ALICE_TOKEN, json_body={"calls": [{"op": "files.read", "args": ARGS}]})
    assert r.status_code == 200, r.text
    res = r.json()["results"][0]
    assert res["status"] == 200 and res["body"] == want, res


def test_mcp_takes_null_as_absent(srv):
    want = expected(srv)
    c = Mcp(srv)
    c.initialize()
    res = c.call("files__read", ARGS)
    assert res["isError"] is False, res
    assert json.loads(text_of(res)) == want


def provider_payload(fmt, args):
    text = json.dumps(args)
    if fmt == "openai":
        return {"role": "assistant", "content": None, "tool_calls": [
            {"id": "call_1", "type": "function", "function": {"name": "files__read", "arguments": text}}]}
    if fmt == "responses":
        return {"output": [{"type": "function_call", "id": "fc_1", "call_id": "call_1", "name": "files__read",
                            "arguments": text}]}
    if fmt == "anthropic":
        return {"role": "assistant", "content": [{"type": "tool_use", "id": "call_1", "name": "files__read",
                                                  "input": args}]}
    return {"role": "model", "parts": [{"functionCall": {"name": "files__read", "args": args}}]}


def test_provider_formats_take_null_as_absent(srv):
    want = expected(srv)
    for fmt in ("openai", "responses", "anthropic", "gemini"):
        r = call(srv, fmt, provider_payload(fmt, ARGS))
        assert r.status_code == 200, (fmt, r.text)
        ids = [None] if fmt == "gemini" else ["call_1"]
        (_, is_error, value), = results(fmt, r.json(), ids)
        assert not is_error and value == want, (fmt, value)


def test_unknown_argument_names_the_valid_ones(srv):
    r = srv.op("files.read", {"pth": "a.txt"}, token=ALICE_TOKEN)
    assert r.status_code == 400, r.text
    e = r.json()["error"]
    assert e["code"] == "args.unknown"
    assert "did you mean 'path'?" in e["message"] and "valid: path" in e["message"], e
    # the query string of a REST binding says the same
    r = srv.get("/files/read", token=ALICE_TOKEN, params={"path": "a.txt", "max_line": "1"})
    assert r.status_code == 400 and r.json()["error"]["code"] == "args.unknown", r.text
    assert "did you mean 'max_lines'?" in r.json()["error"]["message"]
