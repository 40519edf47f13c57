"""files.read answers a call from the network with JSON text it writes itself, without a
tree (src/builtin/files/read.c, read_reply_text); every other caller gets the tree. The
text must be what rendering the tree writes, byte for byte and member for member: an
Idempotency-Key on the same GET takes the tree path, so the two bodies are compared as
bytes; batches and MCP read the tree and must see the same result."""
import base64
import json
import os
import re

import pytest
import requests

from abxtest import ALICE_TOKEN, multi_config

CASES = [
    ("plain.txt", b"hello\n", {}),
    ("escapes.txt", 'he said "hi"\n\ttab \\ back \x01\x1f\x7f é ✓ 😀 </script>'.encode(), {}),
    ("empty.txt", b"", {}),
    ("range.txt", b"0123456789" * 50, {"offset": "7", "length": "33"}),
    ("past-end.txt", b"abc", {"offset": "10"}),
    ("cut-utf8.txt", "aé✓😀z".encode(), {"length": "4"}),  # the range ends inside a character
    ("binary.bin", bytes(range(256)), {"encoding": "base64"}),
    ("binary-range.bin", bytes(range(256)) * 3, {"encoding": "base64", "offset": "5", "length": "100"}),
    ("nested/deeper/name with spaces & ünïcode.txt", b"x" * 3000, {}),
]


def pairs(text):
    """The members in order (a dict would hide a reordering)."""
    return json.loads(text, object_pairs_hook=lambda kv: [list(p) for p in kv])


@pytest.fixture
def files(workspace):
    for name, data, _ in CASES:
        p = os.path.join(workspace, name)
        os.makedirs(os.path.dirname(p), exist_ok=True)
        with open(p, "wb") as f:
            f.write(data)
    return CASES


def test_text_and_tree_are_the_same_bytes(abx, workspace, files):
    s = abx(multi_config())
    for i, (name, data, extra) in enumerate(files):
        params = dict(path=name, **extra)
        text = s.get("/files/read", token=ALICE_TOKEN, params=params)
        tree = s.get("/files/read", token=ALICE_TOKEN, params=params, headers={"Idempotency-Key": "k%d" % i})
        assert text.status_code == 200 and tree.status_code == 200, (name, text.text, tree.text)
        assert text.headers["Content-Type"] == tree.headers["Content-Type"] == "application/json"
        assert text.content == tree.content, (name, text.content[:300], tree.content[:300])
        j = text.json()
        want = data[int(extra.get("offset", 0)):]
        if "length" in extra:
            want = want[:int(extra["length"])]
        if extra.get("encoding") == "base64":
            assert base64.b64decode(j["content"]) == want
        else:
            assert want.decode("utf-8", "ignore").startswith(j["content"]) and j["content"].encode() == want[:len(j["content"].encode())]
        assert [k for k, _ in pairs(text.text)] == ["path", "encoding", "size", "content", "offset", "length",
                                                    "truncated", "eof"]
        # POST /ops/{id} (the RPC door) answers the same text
        rpc = s.op("files.read", {k: (int(v) if k in ("offset", "length") else v) for k, v in params.items()},
                   token=ALICE_TOKEN)
        assert rpc.status_code == 200 and rpc.content == text.content, (name, rpc.text)


def mcp_call(s, tool, args):
    """tools/call over Streamable HTTP in a session of its own; the result (one JSON body)."""
    h = {"Accept": "application/json, text/event-stream"}
    r = s.post("/mcp", token=ALICE_TOKEN, headers=h, json_body={
        "jsonrpc": "2.0", "id": 0, "method": "initialize",
        "params": {"protocolVersion": "2025-11-25", "capabilities": {}, "clientInfo": {"name": "t", "version": "1"}}})
    assert r.status_code == 200, r.text
    h["Mcp-Session-Id"] = r.headers["Mcp-Session-Id"]
    s.post("/mcp", token=ALICE_TOKEN, headers=h, json_body={"jsonrpc": "2.0", "method": "notifications/initialized"})
    r = s.post("/mcp", token=ALICE_TOKEN, headers=h, json_body={
        "jsonrpc": "2.0", "id": 1, "method": "tools/call", "params": {"name": tool, "arguments": args}})
    assert r.status_code == 200 and r.headers["Content-Type"].startswith("application/json"), r.text
    return r.json()["result"]


def test_tree_callers_see_the_same_result(abx, workspace, files):
    s = abx(multi_config())
    for name, _, extra in files:
        args = {k: (int(v) if k in ("offset", "length") else v) for k, v in dict(path=name, **extra).items()}
        text = s.get("/files/read", token=ALICE_TOKEN, params=dict(path=name, **extra))
        batch = s.post("/batch", token=ALICE_TOKEN, json_body={"calls": [{"op": "files.read", "args": args}]})
        assert batch.status_code == 200, batch.text
        body = batch.json()["results"][0]["body"]
        assert pairs(json.dumps(body)) == pairs(text.text), name
        res = mcp_call(s, "files__read", args)
        assert res.get("isError") is not True, res
        assert res["structuredContent"] == text.json(), name


def test_errors_and_warnings_keep_their_shape(abx, workspace):
    """What the text path does not write: errors (not UTF-8, missing) and a git config's
    warning, which is added to a tree."""
    s = abx(multi_config())
    with open(os.path.join(workspace, "latin1.txt"), "wb") as f:
        f.write(b"caf\xe9\n")
    r = s.get("/files/read", token=ALICE_TOKEN, params={"path": "latin1.txt"})
    assert r.json()["error"]["code"] == "files.not_utf8", r.text
    r = s.get("/files/read", token=ALICE_TOKEN, params={"path": "missing.txt"})
    assert r.json()["error"]["code"] == "files.not_found", r.text
    with open(os.path.join(workspace, ".gitconfig"), "w") as f:
        f.write("[core]\n\tfsmonitor = ./run-me\n")
    r = s.get("/files/read", token=ALICE_TOKEN, params={"path": ".gitconfig"})
    assert r.status_code == 200, r.text
    assert [w["code"] for w in r.json().get("warnings", [])] == ["files.git_config_hook"], r.text


def test_request_ids_count_up_in_hex(server, token):
    ids = [server.get("/health", token=token).headers["X-Request-Id"] for _ in range(3)]
    m = [re.fullmatch(r"([0-9a-f]{8})-([0-9a-f]{8,})", i) for i in ids]
    assert all(m), ids
    assert len({x.group(1) for x in m}) == 1, ids
    n = [int(x.group(2), 16) for x in m]
    assert n[1] > n[0] and n[2] > n[1], ids
