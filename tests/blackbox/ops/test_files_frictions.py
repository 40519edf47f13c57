"""Small frictions of the files namespace (issue 25): an error about a path names the
path (the admitted value, inside the caller's scope) instead of the parameter, while a
path outside the scope gets the same 403 whether or not it exists; files.list takes a
bounded depth through the one walker."""
import os

import pytest

from abxtest import assert_error


def op(server, name, body):
    return server.op(name, body, token=server.token)


@pytest.mark.parametrize("name,body,param", [
    ("files.read", {"path": "nope/x.txt"}, "path"),
    ("files.list", {"path": "nope"}, "path"),
    ("files.delete", {"path": "nope.txt"}, "path"),
    ("files.move", {"src": "nope.txt", "dst": "y.txt"}, "src"),
    ("files.copy", {"src": "nope.txt", "dst": "y.txt"}, "src"),
    ("files.download", {"path": "nope.bin"}, "path"),
    ("files.edit", {"path": "nope.txt", "old": "a", "new": "b"}, "path"),
    ("files.search", {"path": "nope", "pattern": "x"}, "path"),
])
def test_not_found_names_the_path(server, workspace, name, body, param):
    r = op(server, name, body)
    j = assert_error(r, 404, "files.not_found")
    want = os.path.join(workspace, body[param])
    assert "'%s'" % want in j["error"]["message"], j
    assert "'%s'" % param not in j["error"]["message"], j
    assert j["error"]["details"] == {"param": param, "path": want}


def test_outside_the_scope_existence_is_not_revealed(server, workspace, tmp_path):
    """The 403 for a path outside the workspace is the same for one that exists and one
    that does not (only the path itself differs)."""
    there = str(tmp_path / "there.txt")
    with open(there, "w") as f:
        f.write("x")
    missing = str(tmp_path / "missing.txt")
    for name in ("files.read", "files.stat", "files.delete"):
        a, b = op(server, name, {"path": there}), op(server, name, {"path": missing})
        ja, jb = assert_error(a, 403, "policy.path_not_allowed"), assert_error(b, 403, "policy.path_not_allowed")
        assert ja["error"]["message"].replace(there, "P") == jb["error"]["message"].replace(missing, "P")
        assert "exist" not in ja["error"]["message"] + jb["error"]["message"]
        scrub = lambda d, p: {k: (v.replace(p, "P") if isinstance(v, str) else v) for k, v in (d or {}).items()}
        assert scrub(ja["error"].get("details"), there) == scrub(jb["error"].get("details"), missing)


def test_list_depth(server, workspace):
    os.makedirs(os.path.join(workspace, "t", "a", "b", "c"))
    open(os.path.join(workspace, "t", "a", "b", "c", "deep.txt"), "w").close()
    open(os.path.join(workspace, "t", "top.txt"), "w").close()

    def paths(**kw):
        r = op(server, "files.list", dict(path="t", **kw))
        assert r.status_code == 200, r.text
        return sorted(e["path"] for e in r.json()["entries"])

    assert paths() == ["a", "top.txt"]
    assert paths(depth=1) == ["a", "top.txt"]
    assert paths(depth=2) == ["a", "a/b", "top.txt"]
    assert paths(depth=3) == ["a", "a/b", "a/b/c", "top.txt"]
    everything = ["a", "a/b", "a/b/c", "a/b/c/deep.txt", "top.txt"]
    assert paths(recursive=True) == everything
    assert paths(depth=128) == everything
    assert paths(depth=2, recursive=True) == ["a", "a/b", "top.txt"]   # depth wins
    for bad in (0, 129, "2"):
        assert_error(op(server, "files.list", {"path": "t", "depth": bad}), 400, "args.invalid")
    r = server.get("/files/list", token=server.token, params={"path": "t", "depth": "2"})
    assert sorted(e["path"] for e in r.json()["entries"]) == ["a", "a/b", "top.txt"]


def test_a_missing_parent_is_named(server, workspace):
    r = op(server, "files.write", {"path": "no/dir/f.txt", "content": "x"})
    j = assert_error(r, 404, "files.not_found")
    assert "'%s'" % os.path.join(workspace, "no/dir/f.txt") in j["error"]["message"]
    assert "create_dirs=true creates it" in j["error"]["message"] or "=true creates it" in j["error"]["message"]
    r = op(server, "files.write", {"path": "a.txt/f.txt", "content": "x"})
    j = assert_error(r, 400, "files.not_a_directory")
    assert "'%s'" % os.path.join(workspace, "a.txt/f.txt") in j["error"]["message"]
