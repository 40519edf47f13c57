"""The one directory walker (src/builtin/files/walk.h) as the ops show it: files.list,
files.find, files.search and files.archive must agree on what a walk below a directory
shows — symlinks never followed (a loop, a link out of the workspace), hidden names,
the depth cap, a denied subtree and a denied symlink name, and where an entry limit
truncates. Each test asks every op the same question about the same tree."""
import io
import os
import tarfile

import pytest

from abxtest import ALICE_TOKEN, assert_error, multi_config

DEPTH_CAP = 128  # FILES_WALK_MAX_DEPTH: entries exist down to this many path components


def call(s, op, body):
    r = s.op(op, body, token=ALICE_TOKEN)
    assert r.status_code == 200, r.text
    return r.json()


def listed(s, **kw):
    body = {"path": "t", "recursive": True}
    body.update(kw)
    return {e["path"]: e["type"] for e in call(s, "files.list", body)["entries"]}


def found(s, **kw):
    body = {"path": "t", "pattern": "*"}
    body.update(kw)
    return {e["path"]: e["type"] for e in call(s, "files.find", body)["results"]}


def searched(s, **kw):
    body = {"path": "t", "pattern": "needle"}
    body.update(kw)
    return {r["path"] for r in call(s, "files.search", body)["results"]}


def archived(s, workspace):
    r = s.post("/files/archive", token=ALICE_TOKEN, json_body={"sources": ["t"]}, stream=True)
    assert r.status_code == 200, r.text[:300]
    with tarfile.open(fileobj=io.BytesIO(r.raw.read()), mode="r:gz") as t:
        return {m.name[len("t/"):]: m for m in t.getmembers() if m.name.startswith("t/")}


def put(path, text="needle\n"):
    os.makedirs(os.path.dirname(path), exist_ok=True)
    with open(path, "w") as f:
        f.write(text)


@pytest.fixture
def tree(workspace, tmp_path):
    """ws/t: visible files, a hidden dir, a denied subtree, a symlink loop, a link out of
    the workspace and a symlink whose own name is denied."""
    t = os.path.join(workspace, "t")
    put(os.path.join(t, "v", "v.txt"))
    put(os.path.join(t, ".hid", "h.txt"))
    put(os.path.join(t, "secret", "s.txt"))
    outside = tmp_path / "outside"
    outside.mkdir()
    (outside / "o.txt").write_text("needle\n")
    os.symlink(".", os.path.join(t, "loop"))          # t/loop -> t
    os.symlink("..", os.path.join(t, "v", "up"))       # t/v/up -> t
    os.symlink(str(outside), os.path.join(t, "out"))   # out of the workspace
    os.symlink("v/v.txt", os.path.join(t, "masked"))   # its own name is denied
    return t


DENY = '    - paths: ["{ws}/t/secret/**", "{ws}/t/secret", "{ws}/t/mask*"]\n'


def test_symlinks_are_shown_as_links_and_never_entered(abx, workspace, tree):
    s = abx(multi_config(deny=DENY))
    ls, fd = listed(s), found(s)
    for got in (ls, fd):
        assert got["loop"] == "symlink" and got["out"] == "symlink" and got["v/up"] == "symlink", got
        # a loop is never entered, a link out of the workspace is never followed
        assert not [p for p in got if p.startswith(("loop/", "out/", "v/up/"))], got
    assert searched(s) == {"v/v.txt"}  # not loop/v/v.txt, not out/o.txt
    tar = archived(s, workspace)
    assert tar["loop"].issym() and tar["loop"].linkname == "."
    assert tar["out"].issym() and not [n for n in tar if n.startswith(("loop/", "out/"))], sorted(tar)


def test_a_denied_subtree_and_a_denied_link_name_are_not_walked_by_any_op(abx, workspace, tree):
    s = abx(multi_config(deny=DENY))
    for got in (listed(s), found(s), searched(s), set(archived(s, workspace))):
        assert not [p for p in got if p == "secret" or p.startswith("secret/")], got
        assert "masked" not in got, got  # a symlink is held to deny statements by its own name
    # an op's own filter (find's pattern, search's include) never lets a denied entry through
    assert "secret/s.txt" not in found(s, pattern="s.txt")
    assert searched(s, include=["*s.txt"]) == set()
    # without the deny statement every op sees both again (the test can tell them apart)
    s2 = abx(multi_config())
    assert "secret/s.txt" in listed(s2) and "masked" in listed(s2) and "masked" in found(s2)
    assert "secret/s.txt" in searched(s2) and searched(s2, include=["*s.txt"]) == {"secret/s.txt"}
    assert "secret/s.txt" in found(s2, pattern="s.txt")


def test_hidden_names_follow_include_hidden_in_every_op(abx, workspace, tree):
    s = abx(multi_config(deny=DENY))
    for hidden in (False, True):
        ls = listed(s, include_hidden=hidden)
        fd = found(s, include_hidden=hidden)
        sr = searched(s, include_hidden=hidden)
        for got in (ls, fd, sr):
            assert (".hid/h.txt" in got) is hidden, (hidden, got)
    assert ".hid/h.txt" in listed(s)  # files.list shows hidden names by default
    assert ".hid/h.txt" not in found(s) and ".hid/h.txt" not in searched(s)


def test_depth_cap_is_the_same_for_list_find_search(abx, workspace):
    # t/d/d/.../d, deeper than the cap, with a file at the last levels the cap allows and beyond
    t = os.path.join(workspace, "t")
    deep = os.path.join(t, *(["d"] * (DEPTH_CAP + 3)))
    os.makedirs(deep)
    for k in (DEPTH_CAP - 1, DEPTH_CAP, DEPTH_CAP + 1):  # path components of the file
        put(os.path.join(t, *(["d"] * (k - 1) + ["f.txt"])))
    s = abx(multi_config())

    def depth(p):
        return p.count("/") + 1

    ls = listed(s, max_entries=100000)
    fd = found(s, max_results=100000)
    sr = searched(s, max_results=100000)
    for got in (ls, fd, sr):
        assert max(depth(p) for p in got) == DEPTH_CAP, sorted(got, key=depth)[-3:]
    for got in (ls, fd, sr):
        files = sorted(depth(p) for p in got if p.endswith("f.txt"))
        assert files == [DEPTH_CAP - 1, DEPTH_CAP], files
    # a mutating walk must see everything or change nothing: too deep fails, nothing removed
    r = s.op("files.delete", {"path": "t", "recursive": True}, token=ALICE_TOKEN)
    assert_error(r, 500, "files.io")
    assert "deeper than %d levels" % DEPTH_CAP in r.json()["error"]["message"]
    assert os.path.isdir(deep)


def test_entry_limit_truncates_alike_and_only_when_more_was_visible(abx, workspace):
    t = os.path.join(workspace, "t")
    for n in ("a.txt", "b.txt", "c.txt"):
        put(os.path.join(t, n))
    put(os.path.join(t, "z", "hidden-by-policy.txt"))
    s = abx(multi_config(deny='    - paths: ["{ws}/t/z", "{ws}/t/z/**"]\n'))
    r = call(s, "files.list", {"path": "t", "max_entries": 2})
    assert [e["path"] for e in r["entries"]] == ["a.txt", "b.txt"] and r["truncated"] is True, r
    r = call(s, "files.find", {"path": "t", "pattern": "*.txt", "max_results": 2})
    assert [e["path"] for e in r["results"]] == ["a.txt", "b.txt"] and r["truncated"] is True, r
    r = call(s, "files.search", {"path": "t", "pattern": "needle", "max_results": 2})
    assert [e["path"] for e in r["results"]] == ["a.txt", "b.txt"] and r["truncated"] is True, r
    # exactly as many as the limit, and what follows is denied: there was nothing more to see
    r = call(s, "files.list", {"path": "t", "max_entries": 3})
    assert [e["path"] for e in r["entries"]] == ["a.txt", "b.txt", "c.txt"] and r["truncated"] is False, r
    r = call(s, "files.find", {"path": "t", "pattern": "*", "max_results": 3})
    assert len(r["results"]) == 3 and r["truncated"] is False, r


def test_walk_order_is_sorted_and_stable(abx, workspace):
    t = os.path.join(workspace, "t")
    for n in ("b", "a", "C", "_x", "a0"):
        put(os.path.join(t, n, "f.txt"))
    s = abx(multi_config())
    want = sorted(["a", "a0", "b", "C", "_x"], key=lambda n: n.encode())
    ls = [e["path"] for e in call(s, "files.list", {"path": "t"})["entries"]]
    assert ls == want
    fd = [e["path"] for e in call(s, "files.find", {"path": "t", "pattern": "f.txt"})["results"]]
    assert fd == [n + "/f.txt" for n in want]
    tar = list(archived(s, workspace))
    assert [n for n in tar if "/" not in n] == want
