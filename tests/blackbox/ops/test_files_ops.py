"""files.write / edit / mkdir / move / copy / delete / search / find / download / upload:
atomic replacement, symlink handling, recursive walks under the policy, streaming in
bounded memory, and the policy's refusals (outside the workspace, protected areas)."""
import base64
import hashlib
import os
import shutil
import stat
import subprocess
import threading
import time

import pytest
import requests

from abxtest import ALICE_TOKEN, AbxServer, assert_error, multi_config, rss_kib


def tmp_leftovers(directory):
    return [n for n in os.listdir(directory) if n.endswith(".abx-tmp")]


def write(server, token, body):
    return server.post("/files/write", token=token, json_body=body)


def read_text(path):
    with open(path, encoding="utf-8") as f:
        return f.read()


def limited(abx, limit):
    return abx(multi_config().replace('      paths: ["{ws}/**"]\n',
                                      '      paths: ["{ws}/**"]\n      limits: {%s}\n' % limit))


# -- files.write ---------------------------------------------------------------------------------

def test_write_create_then_overwrite(server, token, workspace):
    p = os.path.join(workspace, "new.txt")
    r = write(server, token, {"path": "new.txt", "content": "héllo\n"})
    assert r.status_code == 200, r.text
    assert r.json() == {"path": p, "bytes_written": 7, "created": True, "mode": "overwrite"}
    assert read_text(p) == "héllo\n"
    r = write(server, token, {"path": "new.txt", "content": "second"})
    assert r.status_code == 200, r.text
    assert r.json()["created"] is False and r.json()["bytes_written"] == 6
    assert read_text(p) == "second"


def test_write_is_atomic_and_keeps_permissions(server, token, workspace):
    p = os.path.join(workspace, "a.txt")
    os.chmod(p, 0o640)
    before = os.stat(p)
    r = write(server, token, {"path": "a.txt", "content": "replaced\n"})
    assert r.status_code == 200, r.text
    after = os.stat(p)
    assert read_text(p) == "replaced\n"
    assert stat.S_IMODE(after.st_mode) == 0o640
    assert after.st_ino != before.st_ino  # a new file renamed into place, not rewritten in place
    assert tmp_leftovers(workspace) == []


def test_write_permissions(server, token, workspace):
    """permissions sets the nine permission bits (octal) on the temp file before any byte is
    written; special bits and append are refused, and nothing is written then."""
    r = write(server, token, {"path": "run.sh", "content": "#!/bin/sh\n", "permissions": "0755"})
    assert r.status_code == 200, r.text
    assert stat.S_IMODE(os.stat(os.path.join(workspace, "run.sh")).st_mode) == 0o755
    r = write(server, token, {"path": "run.sh", "content": "#!/bin/sh\necho\n", "permissions": "600"})
    assert r.status_code == 200 and stat.S_IMODE(os.stat(os.path.join(workspace, "run.sh")).st_mode) == 0o600
    for bad in ("4755", "1777", "0888", "0x1ff", "", "07555", "rwx"):
        assert_error(write(server, token, {"path": "bad.sh", "content": "x", "permissions": bad}), 400,
                     "args.invalid")
    assert_error(write(server, token, {"path": "run.sh", "content": "x", "mode": "append", "permissions": "0644"}),
                 400, "args.invalid")
    assert not os.path.exists(os.path.join(workspace, "bad.sh"))
    assert read_text(os.path.join(workspace, "run.sh")) == "#!/bin/sh\necho\n"


def test_write_through_symlink_replaces_target(server, token, workspace):
    os.symlink("a.txt", os.path.join(workspace, "ln"))
    r = write(server, token, {"path": "ln", "content": "via link"})
    assert r.status_code == 200, r.text
    assert os.path.islink(os.path.join(workspace, "ln"))
    assert read_text(os.path.join(workspace, "a.txt")) == "via link"


def test_write_append(server, token, workspace):
    r = write(server, token, {"path": "a.txt", "content": "more\n", "mode": "append"})
    assert r.status_code == 200, r.text
    assert r.json()["created"] is False
    assert read_text(os.path.join(workspace, "a.txt")) == "hello\nmore\n"
    r = write(server, token, {"path": "log.txt", "content": "first\n", "mode": "append"})
    assert r.status_code == 200 and r.json()["created"] is True
    assert read_text(os.path.join(workspace, "log.txt")) == "first\n"


def test_write_create_new(server, token, workspace):
    r = write(server, token, {"path": "a.txt", "content": "clobber", "mode": "create_new"})
    j = assert_error(r, 400, "args.invalid")
    assert "exists" in j["error"]["message"]
    assert read_text(os.path.join(workspace, "a.txt")) == "hello\n"
    assert tmp_leftovers(workspace) == []
    r = write(server, token, {"path": "fresh.txt", "content": "x", "mode": "create_new"})
    assert r.status_code == 200 and r.json()["created"] is True


def test_write_make_parents(server, token, workspace):
    r = write(server, token, {"path": "d1/d2/f.txt", "content": "x"})
    assert_error(r, 404, "files.not_found")
    assert not os.path.exists(os.path.join(workspace, "d1"))
    r = write(server, token, {"path": "d1/d2/f.txt", "content": "x", "make_parents": True})
    assert r.status_code == 200, r.text
    assert read_text(os.path.join(workspace, "d1/d2/f.txt")) == "x"


def test_write_base64_binary(server, token, workspace):
    data = bytes(range(256)) * 4
    r = server.op("files.write", {"path": "bin.dat", "content": base64.b64encode(data).decode(),
                                  "encoding": "base64"}, token=token)
    assert r.status_code == 200, r.text
    assert r.json()["bytes_written"] == len(data)
    with open(os.path.join(workspace, "bin.dat"), "rb") as f:
        assert f.read() == data
    assert_error(write(server, token, {"path": "bin2.dat", "content": "not base64!", "encoding": "base64"}),
                 400, "args.invalid")


def test_write_refuses_directory_and_root(server, token, workspace):
    assert_error(write(server, token, {"path": "sub", "content": "x"}), 400, "files.is_a_directory")
    assert os.path.isdir(os.path.join(workspace, "sub"))
    assert_error(write(server, token, {"path": ".", "content": "x"}), 400, "args.invalid")


def test_write_statement_max_bytes(abx, workspace):
    s = limited(abx, "max_bytes: 16")
    r = s.post("/files/write", token=ALICE_TOKEN, json_body={"path": "a.txt", "content": "x" * 17})
    assert_error(r, 413, "limit.max_bytes")
    assert read_text(os.path.join(workspace, "a.txt")) == "hello\n"
    r = s.post("/files/write", token=ALICE_TOKEN, json_body={"path": "a.txt", "content": "x" * 16})
    assert r.status_code == 200, r.text


class TinyFsServer(AbxServer):
    """abx serve in its own mount namespace with the workspace on a 256 KiB tmpfs."""

    def command(self):
        # the server's own files (ledger, ...) stay in a directory of their own
        return ["unshare", "-m", "--propagation", "private", "sh", "-c",
                'mount -t tmpfs -o size=256k abxtest "$0" && cd "$ABX_TEST_CWD" && exec "$@"',
                self.workspace] + super().command()


def test_write_enospc_leaves_old_file(tmp_path):
    if os.geteuid() != 0 or not shutil.which("unshare"):
        pytest.skip("needs root for a private tmpfs")
    probe = subprocess.run(["unshare", "-m", "--propagation", "private", "true"], capture_output=True)
    if probe.returncode != 0:
        pytest.skip("cannot create a mount namespace here")
    ws = tmp_path / "tiny"
    ws.mkdir()
    run = tmp_path / "run"
    run.mkdir()
    srv = TinyFsServer(str(tmp_path), workspace=str(ws), env={"ABX_TEST_CWD": str(run)})
    try:
        srv.start()
        tok = srv.token
        r = write(srv, tok, {"path": "keep.txt", "content": "precious\n"})
        assert r.status_code == 200, r.text
        r = write(srv, tok, {"path": "filler.bin", "content": base64.b64encode(b"\0" * 200 * 1024).decode(),
                             "encoding": "base64"})
        assert r.status_code == 200, r.text
        r = write(srv, tok, {"path": "keep.txt", "content": "y" * (120 * 1024)})
        j = assert_error(r, 507, "files.no_space")
        assert "space" in j["error"]["message"] and "left unchanged" in j["error"]["message"]
        r = srv.get("/files/read", token=tok, params={"path": "keep.txt"})
        assert r.status_code == 200 and r.json()["content"] == "precious\n"
        names = [e["name"] for e in srv.get("/files/list", token=tok, params={"path": "."}).json()["entries"]]
        assert {"filler.bin", "keep.txt"} <= set(names), names
        assert not [n for n in names if n.endswith(".abx-tmp")], names
        # the same through an upload: the temp file goes, the old file stays (the server
        # answers before the body is read to the end, which may cut the connection)
        try:
            r = srv.request("PUT", "/files/upload", token=tok, params={"path": "keep.txt"}, data=b"z" * 90000)
            assert_error(r, 507, "files.no_space")
        except requests.ConnectionError:
            pass
        r = srv.get("/files/read", token=tok, params={"path": "keep.txt"})
        assert r.json()["content"] == "precious\n"
        names = [e["name"] for e in srv.get("/files/list", token=tok, params={"path": "."}).json()["entries"]]
        assert {"filler.bin", "keep.txt"} <= set(names), names
        assert not [n for n in names if n.endswith(".abx-tmp")], names
    finally:
        srv.stop()
        srv.kill()


# -- files.edit ----------------------------------------------------------------------------------

def edit(server, token, body):
    return server.post("/files/edit", token=token, json_body=body)


def test_edit_counts(server, token, workspace):
    p = os.path.join(workspace, "e.txt")
    with open(p, "w") as f:
        f.write("foo bar foo\n")
    os.chmod(p, 0o600)
    r = edit(server, token, {"path": "e.txt", "old": "baz", "new": "x"})
    j = assert_error(r, 400, "args.invalid")
    assert "not found" in j["error"]["message"] and j["error"]["details"]["found"] == 0
    r = edit(server, token, {"path": "e.txt", "old": "foo", "new": "x"})  # count defaults to 1
    j = assert_error(r, 400, "args.invalid")
    assert "2 times" in j["error"]["message"] and j["error"]["details"] == {"found": 2, "expected": 1}
    assert read_text(p) == "foo bar foo\n"
    r = edit(server, token, {"path": "e.txt", "old": "foo", "new": "x", "count": 3})
    assert_error(r, 400, "args.invalid")
    r = edit(server, token, {"path": "e.txt", "old": "foo", "new": "qux", "count": 2})
    assert r.status_code == 200, r.text
    assert r.json()["replacements"] == 2
    assert read_text(p) == "qux bar qux\n"
    r = edit(server, token, {"path": "e.txt", "old": "bar", "new": "BAR"})
    assert r.status_code == 200 and r.json()["replacements"] == 1
    r = edit(server, token, {"path": "e.txt", "old": "q", "new": "", "count": 0})
    assert r.status_code == 200 and r.json()["replacements"] == 2
    assert read_text(p) == "ux BAR ux\n"
    assert stat.S_IMODE(os.stat(p).st_mode) == 0o600
    assert tmp_leftovers(workspace) == []


def test_edit_errors(server, token, workspace):
    assert_error(edit(server, token, {"path": "a.txt", "old": "", "new": "x"}), 400, "args.invalid")
    assert_error(edit(server, token, {"path": "missing.txt", "old": "a", "new": "b"}), 404, "files.not_found")
    assert_error(edit(server, token, {"path": "sub", "old": "a", "new": "b"}), 400, "files.is_a_directory")


# -- files.mkdir ---------------------------------------------------------------------------------

def test_mkdir(server, token, workspace):
    r = server.post("/files/mkdir", token=token, json_body={"path": "nd"})
    assert r.status_code == 200 and r.json() == {"path": os.path.join(workspace, "nd"), "created": True}
    assert os.path.isdir(os.path.join(workspace, "nd"))
    r = server.post("/files/mkdir", token=token, json_body={"path": "nd"})
    assert r.status_code == 200 and r.json()["created"] is False
    assert_error(server.post("/files/mkdir", token=token, json_body={"path": "a.txt"}), 400, "files.not_a_directory")
    assert_error(server.post("/files/mkdir", token=token, json_body={"path": "p/q/r"}), 404, "files.not_found")
    r = server.post("/files/mkdir", token=token, json_body={"path": "p/q/r", "parents": True})
    assert r.status_code == 200 and r.json()["created"] is True
    assert os.path.isdir(os.path.join(workspace, "p/q/r"))


# -- files.move ----------------------------------------------------------------------------------

def move(server, token, body):
    return server.post("/files/move", token=token, json_body=body)


def test_move_file_and_overwrite(server, token, workspace):
    r = move(server, token, {"src": "a.txt", "dst": "moved.txt"})
    assert r.status_code == 200, r.text
    assert r.json()["replaced"] is False
    assert not os.path.exists(os.path.join(workspace, "a.txt"))
    assert read_text(os.path.join(workspace, "moved.txt")) == "hello\n"
    r = move(server, token, {"src": "moved.txt", "dst": "b.txt"})
    j = assert_error(r, 400, "args.invalid")
    assert "overwrite" in j["error"]["message"]
    assert read_text(os.path.join(workspace, "moved.txt")) == "hello\n"
    assert read_text(os.path.join(workspace, "b.txt")).startswith("line1")
    r = move(server, token, {"src": "moved.txt", "dst": "b.txt", "overwrite": True})
    assert r.status_code == 200 and r.json()["replaced"] is True
    assert read_text(os.path.join(workspace, "b.txt")) == "hello\n"
    assert_error(move(server, token, {"src": "nope", "dst": "x"}), 404, "files.not_found")


def test_move_directory(server, token, workspace):
    r = move(server, token, {"src": "sub", "dst": "sub2"})
    assert r.status_code == 200 and r.json()["type"] == "directory"
    assert read_text(os.path.join(workspace, "sub2/c.txt")) == "deep\n"
    assert_error(move(server, token, {"src": "sub2", "dst": "sub2/inner"}), 400, "args.invalid")
    assert os.path.isdir(os.path.join(workspace, "sub2"))


def test_move_symlink_moves_the_link(server, token, workspace):
    os.symlink("a.txt", os.path.join(workspace, "ln"))
    r = move(server, token, {"src": "ln", "dst": "ln2"})
    assert r.status_code == 200, r.text
    assert os.path.islink(os.path.join(workspace, "ln2"))
    assert os.readlink(os.path.join(workspace, "ln2")) == "a.txt"
    assert read_text(os.path.join(workspace, "a.txt")) == "hello\n"


# -- files.copy ----------------------------------------------------------------------------------

def copy(server, token, body):
    return server.post("/files/copy", token=token, json_body=body)


def test_copy_file_keeps_mode(server, token, workspace):
    p = os.path.join(workspace, "run.sh")
    with open(p, "w") as f:
        f.write("#!/bin/sh\necho hi\n")
    os.chmod(p, 0o751)
    r = copy(server, token, {"src": "run.sh", "dst": "run2.sh"})
    assert r.status_code == 200, r.text
    assert r.json()["files"] == 1 and r.json()["bytes"] == 18
    q = os.path.join(workspace, "run2.sh")
    assert read_text(q) == read_text(p)
    assert stat.S_IMODE(os.stat(q).st_mode) == 0o751
    assert_error(copy(server, token, {"src": "run.sh", "dst": "a.txt"}), 400, "args.invalid")
    assert read_text(os.path.join(workspace, "a.txt")) == "hello\n"
    r = copy(server, token, {"src": "run.sh", "dst": "a.txt", "overwrite": True})
    assert r.status_code == 200 and read_text(os.path.join(workspace, "a.txt")).startswith("#!/bin/sh")


def test_copy_recursive(server, token, workspace):
    os.makedirs(os.path.join(workspace, "sub/deeper"))
    with open(os.path.join(workspace, "sub/deeper/d.txt"), "w") as f:
        f.write("d\n")
    os.symlink("../c.txt", os.path.join(workspace, "sub/deeper/link"))
    os.mkfifo(os.path.join(workspace, "sub/fifo"))
    os.chmod(os.path.join(workspace, "sub/deeper"), 0o750)
    assert_error(copy(server, token, {"src": "sub", "dst": "copy"}), 400, "files.is_a_directory")
    r = copy(server, token, {"src": "sub", "dst": "copy", "recursive": True})
    assert r.status_code == 200, r.text
    j = r.json()
    assert (j["files"], j["directories"], j["symlinks"], j["skipped"]) == (2, 2, 1, 1)
    c = os.path.join(workspace, "copy")
    assert read_text(os.path.join(c, "c.txt")) == "deep\n"
    assert read_text(os.path.join(c, "deeper/d.txt")) == "d\n"
    assert os.path.islink(os.path.join(c, "deeper/link"))
    assert os.readlink(os.path.join(c, "deeper/link")) == "../c.txt"
    assert stat.S_IMODE(os.stat(os.path.join(c, "deeper")).st_mode) == 0o750
    assert not os.path.exists(os.path.join(c, "fifo"))
    assert_error(copy(server, token, {"src": "sub", "dst": "copy", "recursive": True}), 400, "args.invalid")
    assert_error(copy(server, token, {"src": "sub", "dst": "sub/inside", "recursive": True}), 400, "args.invalid")


def test_copy_into_protected_area_refused_per_entry(server, token, workspace):
    os.makedirs(os.path.join(workspace, ".git"))
    os.makedirs(os.path.join(workspace, "evil/hooks"))
    with open(os.path.join(workspace, "evil/hooks/pre-commit"), "w") as f:
        f.write("#!/bin/sh\n")
    r = copy(server, token, {"src": "evil", "dst": ".git", "recursive": True, "overwrite": True})
    assert_error(r, 403, "policy.path_denied")
    assert not os.path.exists(os.path.join(workspace, ".git/hooks"))


# -- files.delete --------------------------------------------------------------------------------

def delete(server, token, **params):
    params = {k: (str(v).lower() if isinstance(v, bool) else v) for k, v in params.items()}
    return server.request("DELETE", "/files", token=token, params=params)


def test_delete_file_and_dirs(server, token, workspace):
    r = delete(server, token, path="a.txt")
    assert r.status_code == 200 and r.json()["type"] == "file" and r.json()["deleted"] == 1
    assert not os.path.exists(os.path.join(workspace, "a.txt"))
    assert_error(delete(server, token, path="a.txt"), 404, "files.not_found")
    os.mkdir(os.path.join(workspace, "empty"))
    r = delete(server, token, path="empty")
    assert r.status_code == 200 and r.json()["type"] == "directory"
    j = assert_error(delete(server, token, path="sub"), 400, "args.invalid")
    assert "recursive" in j["error"]["message"]
    assert os.path.exists(os.path.join(workspace, "sub/c.txt"))
    os.symlink("/etc", os.path.join(workspace, "sub/etc-link"))
    r = delete(server, token, path="sub", recursive=True)
    assert r.status_code == 200, r.text
    assert r.json()["deleted"] == 3
    assert not os.path.exists(os.path.join(workspace, "sub"))
    assert os.path.exists("/etc/hostname") or os.path.isdir("/etc")
    assert_error(delete(server, token, path="."), 400, "args.invalid")


def test_delete_symlink_deletes_link_not_target(server, token, workspace):
    os.symlink("a.txt", os.path.join(workspace, "ln"))
    os.symlink("sub", os.path.join(workspace, "dirlink"))
    r = delete(server, token, path="ln")
    assert r.status_code == 200, r.text
    assert r.json()["type"] == "symlink"
    assert not os.path.lexists(os.path.join(workspace, "ln"))
    assert read_text(os.path.join(workspace, "a.txt")) == "hello\n"
    r = delete(server, token, path="dirlink", recursive=True)
    assert r.status_code == 200, r.text
    assert not os.path.lexists(os.path.join(workspace, "dirlink"))
    assert read_text(os.path.join(workspace, "sub/c.txt")) == "deep\n"
    os.symlink("missing-target", os.path.join(workspace, "dangling"))
    r = delete(server, token, path="dangling")
    assert r.status_code == 200, r.text
    assert not os.path.lexists(os.path.join(workspace, "dangling"))


def test_delete_recursive_stops_at_protected_entries(server, token, workspace):
    os.makedirs(os.path.join(workspace, "repo/.git/hooks"))
    with open(os.path.join(workspace, "repo/.git/hooks/post-checkout"), "w") as f:
        f.write("x")
    with open(os.path.join(workspace, "repo/file.txt"), "w") as f:
        f.write("x")
    assert_error(delete(server, token, path="repo", recursive=True), 403, "policy.path_denied")
    # checked before anything went
    assert os.path.exists(os.path.join(workspace, "repo/file.txt"))


# -- files.search --------------------------------------------------------------------------------

@pytest.fixture
def tree(workspace):
    def put(rel, data):
        p = os.path.join(workspace, rel)
        os.makedirs(os.path.dirname(p), exist_ok=True)
        with open(p, "wb") as f:
            f.write(data if isinstance(data, bytes) else data.encode())
    put("src/main.c", "int main(void)\n{\n    return TODO_fix();\n}\n")
    put("src/util.c", "// todo: lower case\nstatic int x;\n")
    put("src/util.h", "#define TODO 1\n")
    put("docs/readme.md", "line a\nline b\nTODO docs\nline d\nline e\n")
    put("bin/blob.bin", b"\0\1\2TODO\0")
    put(".git/config.txt", "TODO hidden\n")
    return workspace


def search(server, token, **body):
    return server.post("/files/search", token=token, json_body=body)


def test_search_literal_and_case(server, token, tree):
    r = search(server, token, pattern="TODO")
    assert r.status_code == 200, r.text
    j = r.json()
    hits = sorted((x["path"], x["line"]) for x in j["results"])
    assert hits == [("docs/readme.md", 3), ("src/main.c", 3), ("src/util.h", 1)]
    assert j["truncated"] is False
    assert j["files_scanned"] >= 4 and j["files_skipped"] >= 1  # the binary file
    assert all(x["path"] != "bin/blob.bin" for x in j["results"])
    main = [x for x in j["results"] if x["path"] == "src/main.c"][0]
    assert main["text"] == "    return TODO_fix();"
    r = search(server, token, pattern="todo", case_sensitive=False)
    assert len(r.json()["results"]) == 4
    r = search(server, token, pattern="TODO", include_hidden=True)
    assert any(x["path"] == ".git/config.txt" for x in r.json()["results"])


def test_search_regex(server, token, tree):
    r = search(server, token, pattern=r"^(int|static) [a-z]+", regex=True)
    assert r.status_code == 200, r.text
    assert sorted(x["path"] for x in r.json()["results"]) == ["src/main.c", "src/util.c"]
    r = search(server, token, pattern="TODO.fix", regex=False)
    assert r.json()["results"] == []  # literal: the dot is a dot
    assert_error(search(server, token, pattern="(unclosed", regex=True), 400, "args.invalid")


def test_search_include_exclude(server, token, tree):
    r = search(server, token, pattern="TODO", include=["*.c"])
    assert [x["path"] for x in r.json()["results"]] == ["src/main.c"]
    r = search(server, token, pattern="TODO", exclude=["src"])
    assert [x["path"] for x in r.json()["results"]] == ["docs/readme.md"]
    r = search(server, token, pattern="TODO", exclude=["*.h", "docs/*"])
    assert [x["path"] for x in r.json()["results"]] == ["src/main.c"]


def test_search_context_and_truncation(server, token, tree):
    r = search(server, token, pattern="TODO docs", context_before=2, context_after=1)
    (hit,) = r.json()["results"]
    assert hit["line"] == 3 and hit["before"] == ["line a", "line b"] and hit["after"] == ["line d"]
    with open(os.path.join(tree, "many.txt"), "w") as f:
        f.write("needle\n" * 50)
    r = search(server, token, path="many.txt", pattern="needle", max_results=10)
    j = r.json()
    assert len(j["results"]) == 10 and j["truncated"] is True
    assert [x["line"] for x in j["results"]] == list(range(1, 11))
    r = search(server, token, path="many.txt", pattern="needle", max_results=50)
    assert len(r.json()["results"]) == 50 and r.json()["truncated"] is False


def test_search_max_file_size(server, token, tree):
    r = search(server, token, pattern="TODO", path="docs", max_file_size=10)
    assert r.json()["results"] == [] and r.json()["files_skipped"] == 1


# -- files.find ----------------------------------------------------------------------------------

def test_find(server, token, tree):
    r = server.post("/files/find", token=token, json_body={"pattern": "*.c"})
    assert r.status_code == 200, r.text
    assert [(x["path"], x["type"]) for x in r.json()["results"]] == [("src/main.c", "file"), ("src/util.c", "file")]
    r = server.post("/files/find", token=token, json_body={"pattern": "*", "type": "directory"})
    assert sorted(x["path"] for x in r.json()["results"]) == ["bin", "docs", "src", "sub"]
    r = server.post("/files/find", token=token, json_body={"pattern": "*", "type": "file", "max_results": 2})
    assert len(r.json()["results"]) == 2 and r.json()["truncated"] is True
    r = server.post("/files/find", token=token, json_body={"pattern": "util.h"})
    (hit,) = r.json()["results"]
    assert hit == {"path": "src/util.h", "type": "file", "size": 15}


# -- files.download ------------------------------------------------------------------------------

def test_download_bytes_and_ranges(server, token, workspace):
    data = os.urandom(300 * 1024)
    with open(os.path.join(workspace, "blob.bin"), "wb") as f:
        f.write(data)
    r = server.get("/files/download", token=token, params={"path": "blob.bin"})
    assert r.status_code == 200
    assert r.headers["Content-Type"] == "application/octet-stream"
    assert r.content == data
    r = server.get("/files/download", token=token, params={"path": "blob.bin", "offset": "1000", "length": "5000"})
    assert r.status_code == 200 and r.content == data[1000:6000]
    r = server.get("/files/download", token=token, params={"path": "blob.bin", "offset": str(len(data) - 10),
                                                           "length": "100"})
    assert r.content == data[-10:]
    r = server.get("/files/download", token=token, params={"path": "a.txt"})
    assert r.content == b"hello\n" and r.headers["Content-Type"] == "text/plain; charset=utf-8"
    for name, ctype in (("x.json", "application/json"), ("x.PNG", "image/png"), ("x.tar", "application/x-tar")):
        with open(os.path.join(workspace, name), "wb") as f:
            f.write(b"{}")
        assert server.get("/files/download", token=token, params={"path": name}).headers["Content-Type"] == ctype
    assert_error(server.get("/files/download", token=token, params={"path": "sub"}), 400, "files.is_a_directory")
    assert_error(server.get("/files/download", token=token, params={"path": "nope"}), 404, "files.not_found")


# -- files.upload --------------------------------------------------------------------------------

def test_upload_100mib_streams_in_bounded_memory(server, token, workspace):
    chunk = os.urandom(1024 * 1024)
    total = 100
    digest = hashlib.sha256()
    for _ in range(total):
        digest.update(chunk)
    pid = server.proc.pid
    peak = [rss_kib(pid)]
    done = threading.Event()

    def sample():
        while not done.is_set():
            peak[0] = max(peak[0], rss_kib(pid))
            time.sleep(0.01)

    t = threading.Thread(target=sample)
    t.start()
    try:
        r = server.request("PUT", "/files/upload", token=token, params={"path": "big/upload.bin",
                                                                        "make_parents": "true"},
                           data=(chunk for _ in range(total)), timeout=120)
    finally:
        done.set()
        t.join()
    assert r.status_code == 200, r.text
    p = os.path.join(workspace, "big/upload.bin")
    assert r.json() == {"path": p, "bytes_written": total << 20, "created": True}
    assert os.path.getsize(p) == total << 20
    h = hashlib.sha256()
    with open(p, "rb") as f:
        for block in iter(lambda: f.read(1 << 20), b""):
            h.update(block)
    assert h.hexdigest() == digest.hexdigest()
    assert peak[0] < 50 * 1024, "server RSS peaked at %d KiB" % peak[0]
    assert tmp_leftovers(os.path.dirname(p)) == []


def test_upload_replaces_and_keeps_mode(server, token, workspace):
    p = os.path.join(workspace, "a.txt")
    os.chmod(p, 0o604)
    r = server.request("PUT", "/files/upload", token=token, params={"path": "a.txt"}, data=b"\x00\xffbinary")
    assert r.status_code == 200, r.text
    assert r.json()["created"] is False and r.json()["bytes_written"] == 8
    with open(p, "rb") as f:
        assert f.read() == b"\x00\xffbinary"
    assert stat.S_IMODE(os.stat(p).st_mode) == 0o604
    r = server.request("PUT", "/files/upload", token=token, params={"path": "no/dir/x"}, data=b"x")
    assert_error(r, 404, "files.not_found")


def test_upload_max_bytes(abx, workspace):
    s = limited(abx, "max_bytes: 16")
    r = s.request("PUT", "/files/upload", token=ALICE_TOKEN, params={"path": "a.txt"}, data=b"y" * 100)
    assert_error(r, 413, "limit.max_bytes")
    assert read_text(os.path.join(workspace, "a.txt")) == "hello\n"
    assert tmp_leftovers(workspace) == []
    r = s.request("PUT", "/files/upload", token=ALICE_TOKEN, params={"path": "a.txt"}, data=b"y" * 16)
    assert r.status_code == 200, r.text


# -- policy --------------------------------------------------------------------------------------

OUTSIDE_CALLS = [
    ("files.write", lambda o: {"path": o + "/x.txt", "content": "x"}),
    ("files.edit", lambda o: {"path": o + "/f.txt", "old": "a", "new": "b"}),
    ("files.mkdir", lambda o: {"path": o + "/d"}),
    ("files.move", lambda o: {"src": "a.txt", "dst": o + "/moved"}),
    ("files.move", lambda o: {"src": o + "/f.txt", "dst": "stolen"}),
    ("files.copy", lambda o: {"src": o + "/f.txt", "dst": "stolen"}),
    ("files.copy", lambda o: {"src": "a.txt", "dst": o + "/c"}),
    ("files.delete", lambda o: {"path": o + "/f.txt"}),
    ("files.search", lambda o: {"path": o, "pattern": "a"}),
    ("files.find", lambda o: {"path": o}),
]


@pytest.mark.parametrize("op,args", OUTSIDE_CALLS, ids=[c[0] + str(i) for i, c in enumerate(OUTSIDE_CALLS)])
def test_outside_workspace_refused(server, token, tmp_path, workspace, op, args):
    outside = tmp_path / "outside"
    outside.mkdir()
    (outside / "f.txt").write_text("a")
    assert_error(server.op(op, args(str(outside)), token=token), 403, "policy.path_not_allowed")
    assert sorted(os.listdir(outside)) == ["f.txt"] and (outside / "f.txt").read_text() == "a"
    assert os.path.exists(os.path.join(workspace, "a.txt"))


def test_outside_via_symlink_and_rest(server, token, tmp_path, workspace):
    outside = tmp_path / "outside"
    outside.mkdir()
    os.symlink(str(outside), os.path.join(workspace, "escape"))
    assert_error(write(server, token, {"path": "escape/x", "content": "x"}), 403, "policy.path_not_allowed")
    r = server.request("PUT", "/files/upload", token=token, params={"path": "../x"}, data=b"x")
    assert_error(r, 403, "policy.path_not_allowed")
    r = server.get("/files/download", token=token, params={"path": str(tmp_path / "outside")})
    assert_error(r, 403, "policy.path_not_allowed")
    assert_error(delete(server, token, path="escape/../../x"), 403, "policy.path_not_allowed")
    assert os.listdir(outside) == []


def test_git_hooks_protected(server, token, workspace):
    os.makedirs(os.path.join(workspace, ".git/hooks"))
    hooks = os.path.join(workspace, ".git/hooks")
    assert_error(write(server, token, {"path": ".git/hooks/pre-commit", "content": "#!/bin/sh\n"}),
                 403, "policy.path_denied")
    r = server.request("PUT", "/files/upload", token=token, params={"path": ".git/hooks/pre-push"}, data=b"x")
    assert_error(r, 403, "policy.path_denied")
    assert_error(server.post("/files/mkdir", token=token, json_body={"path": ".git/hooks/d"}),
                 403, "policy.path_denied")
    assert_error(copy(server, token, {"src": "a.txt", "dst": ".git/hooks/post-merge"}), 403, "policy.path_denied")
    assert_error(move(server, token, {"src": "a.txt", "dst": ".git/hooks/post-merge"}), 403, "policy.path_denied")
    assert_error(write(server, token, {"path": ".git/config", "content": "[core]\n"}), 403, "policy.path_denied")
    assert os.listdir(hooks) == []
    assert os.path.exists(os.path.join(workspace, "a.txt"))
