"""The files frictions of issue 25 through the agent doors: over MCP and a provider's
tool-call door, files.list takes depth, a missing path's error names the path, and
files.extract unpacks a good archive and refuses a zip-slip one."""
import io
import json
import os
import tarfile

from abxtest import ALICE_TOKEN
from test_mcp import Mcp, text_of
from test_tools import call, results, srv  # noqa: F401  (srv is the fixture these tests use)


def tar_to(path, members):
    buf = io.BytesIO()
    with tarfile.open(fileobj=buf, mode="w:gz") as t:
        for name, data in members:
            ti = tarfile.TarInfo(name)
            ti.size = len(data)
            t.addfile(ti, io.BytesIO(data))
    with open(path, "wb") as f:
        f.write(buf.getvalue())


def test_mcp_depth_not_found_and_extract(srv, workspace):
    os.makedirs(os.path.join(workspace, "t", "a", "b"))
    tar_to(os.path.join(workspace, "good.tgz"), [("pkg/x.txt", b"x")])
    tar_to(os.path.join(workspace, "evil.tgz"), [("../../escape.txt", b"x")])
    c = Mcp(srv)
    c.initialize()
    res = c.call("files__list", {"path": "t", "depth": 2})
    assert res["isError"] is False, res
    assert sorted(e["path"] for e in json.loads(text_of(res))["entries"]) == ["a", "a/b"]
    res = c.call("files__read", {"path": "missing.txt"})
    assert res["isError"] is True
    assert text_of(res).startswith("files.not_found: path '%s' does not exist" % os.path.join(workspace, "missing.txt"))
    res = c.call("files__extract", {"path": "good.tgz", "dest": "out"})
    assert res["isError"] is False, res
    assert open(os.path.join(workspace, "out", "pkg", "x.txt")).read() == "x"
    res = c.call("files__extract", {"path": "evil.tgz", "dest": "out2"})
    assert res["isError"] is True and res["_meta"]["abx/code"] == "files.unsafe_archive", res
    assert not os.path.exists(os.path.join(workspace, "out2"))
    assert not os.path.exists(os.path.join(os.path.dirname(os.path.dirname(workspace)), "escape.txt"))


def test_tool_call_door_extract(srv, workspace):
    tar_to(os.path.join(workspace, "g.tgz"), [("lib/y.txt", b"y")])
    payload = {"role": "assistant", "content": [{"type": "tool_use", "id": "call_1", "name": "files__extract",
                                                 "input": {"path": "g.tgz", "dest": "v"}}]}
    r = call(srv, "anthropic", payload)
    assert r.status_code == 200, r.text
    (_, is_error, value), = results("anthropic", r.json(), ["call_1"])
    assert not is_error and value["files"] == 1, value
    assert open(os.path.join(workspace, "v", "lib", "y.txt")).read() == "y"
    names = [t["name"] for t in srv.get("/tools?format=anthropic", token=ALICE_TOKEN).json()["tools"]]
    assert "files__extract" in names
