"""Custom operations through every door (issue 7): a declarative command, a Python op
worker and a C plugin, each called over HTTP (REST binding and POST /ops/{id}), over MCP
(tools/call, both tool spellings) and through the zero-step Python client — under the same
policy (an op's own jail intersected with the statement's scope refuses the same paths at
every door), and recorded in the ledger like built-ins, with the door that carried them."""
import json
import os
import sqlite3
import sys
import time

import pytest

from abxtest import ALICE_TOKEN, assert_error, sha256_hex
from test_custom_plugins import compile_plugin
from test_mcp import Mcp, text_of

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
sys.path.insert(0, os.path.join(ROOT, "clients", "python"))
import abx as abx_client  # noqa: E402  (clients/python, stdlib only)

PY_MODULE = '''
from abx_ops import op

@op("tdoor.count.get", effects="read", paths=("target",))
def count(ctx, target: str) -> dict:
    with open(ctx.paths["target"]) as f:
        return {"lines": sum(1 for _ in f), "path": ctx.paths["target"]}
'''


@pytest.fixture
def srv(abx, workspace, tmp_path):
    """A server with one op of each custom form, the ledger at a known path."""
    os.makedirs(os.path.join(workspace, "docs"))
    with open(os.path.join(workspace, "docs", "a.txt"), "w") as f:
        f.write("one\ntwo\nthree\n")
    with open(os.path.join(workspace, "top.txt"), "w") as f:
        f.write("x\n")
    plugdir = tmp_path / "plugins"
    plugdir.mkdir()
    os.chmod(str(plugdir), 0o755)
    compile_plugin(os.path.join(ROOT, "examples", "plugin", "my_ops.c"), str(plugdir / "my_ops.so"))
    led = str(tmp_path / "ledger.db")
    cfg = {
        "workspace": workspace, "terminal_listen": "off", "ledger": {"path": led},
        "plugin_dir": str(plugdir),
        "load": ["my_ops", "python:tdoor_ops"],
        "custom": [{"name": "Word-Count.v1", "summary": "count lines of a file",
                    "argv": ["wc", "-l", "{target}"], "params": {"target": "string"},
                    "paths": {"target": [workspace + "/docs/**"]}, "effects": ["read"]}],
        "auth": {"tokens": [{"principal": "alice", "roles": ["agent"], "token_sha256": sha256_hex(ALICE_TOKEN)}]},
        "policy": {"allow": [
            {"ops": ["core.*"], "principals": ["*"]},
            {"ops": ["custom.*", "textstats.*", "tdoor.*"], "principals": ["alice"], "paths": [workspace + "/**"]},
        ]},
    }
    s = abx(cfg, start=False)
    with open(os.path.join(os.path.dirname(s.config_path), "tdoor_ops.py"), "w") as f:
        f.write(PY_MODULE)
    s.start()
    s.ledger_path = led
    return s


def doors_of(led, op, want, timeout=3.0):
    """The doors of the finished groups recorded for op, waiting until `want` are there."""
    deadline = time.time() + timeout
    while True:
        con = sqlite3.connect(led, timeout=10)
        try:
            rows = con.execute("SELECT g.door FROM action_groups g JOIN action_events e ON e.group_id = g.group_id"
                               " WHERE g.op = ? AND e.kind = 'finished'", (op,)).fetchall()
        finally:
            con.close()
        doors = sorted(d for (d,) in rows)
        if all(doors.count(d) >= n for d, n in want.items()) or time.time() > deadline:
            return doors
        time.sleep(0.1)


CASES = [
    # op id, good args, the args' expected result check, args outside the op's own jail
    ("custom.word_count_v1", lambda ws: {"target": "docs/a.txt"},
     lambda j, ws: j["exit_code"] == 0 and j["stdout"].split()[0] == "3" and ws + "/docs/a.txt" in j["stdout"],
     lambda ws: {"target": "top.txt"}),
    ("tdoor.count.get", lambda ws: {"target": "docs/a.txt"},
     lambda j, ws: j == {"lines": 3, "path": ws + "/docs/a.txt"},
     lambda ws: {"target": "/etc/hostname"}),
    ("textstats.words.get", lambda ws: {"file": "docs/a.txt"},
     lambda j, ws: j["file"] == ws + "/docs/a.txt" and j["words"] == 3,
     lambda ws: {"file": "/etc/hostname"}),
]


@pytest.mark.parametrize("op,good,check,outside", CASES, ids=[c[0] for c in CASES])
def test_every_door(srv, workspace, op, good, check, outside):
    # HTTP: the RPC binding
    r = srv.post("/ops/" + op, token=ALICE_TOKEN, json_body=good(workspace))
    assert r.status_code == 200, r.text
    assert check(r.json(), workspace), r.json()
    assert_error(srv.post("/ops/" + op, token=ALICE_TOKEN, json_body=outside(workspace)), 403,
                 "policy.path_not_allowed")
    # MCP: both spellings; a refusal is an isError result the model can read
    m = Mcp(srv)
    m.initialize()
    names = {t["name"]: t for t in m.all_tools()}
    tool = op.replace(".", "__")
    assert tool in names and names[tool]["title"] == op
    for spelling in (tool, op):
        res = m.call(spelling, good(workspace))
        assert not res.get("isError"), res
        assert check(json.loads(text_of(res)), workspace), res
    res = m.call(tool, outside(workspace))
    assert res.get("isError") and "policy.path_not_allowed" in text_of(res), res
    # the zero-step Python client: attribute tree and call by id
    c = abx_client.Client(url=srv.url, token=ALICE_TOKEN)
    node = c
    for seg in op.split("."):
        node = getattr(node, seg)
    assert check(node(**good(workspace)), workspace)
    assert check(c.call(op, **good(workspace)), workspace)
    with pytest.raises(abx_client.PolicyError) as ei:
        c.call(op, **outside(workspace))
    assert ei.value.code == "policy.path_not_allowed"
    # the ledger has each call, with the door that carried it
    doors = doors_of(srv.ledger_path, op, {"rpc": 2 + 3, "mcp": 3})  # wait for all of them
    assert doors.count("rpc") >= 2 + 3, doors   # two by hand, three from the Python client (RPC binding)
    assert doors.count("mcp") >= 3, doors


def test_legacy_route_and_listing_for_the_declarative_command(srv, workspace):
    r = srv.post("/commands/Word-Count.v1", token=ALICE_TOKEN, json_body={"target": "docs/a.txt"})
    assert r.status_code == 200, r.text
    assert r.json()["stdout"].split()[0] == "3"
    listed = srv.get("/commands", token=ALICE_TOKEN)
    assert listed.status_code == 200, listed.text
    assert "Word-Count.v1" in json.dumps(listed.json())
