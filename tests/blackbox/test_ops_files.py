"""files.stat / files.list / files.read, and step 7 (path policy) as the files ops see it:
scope confinement, no existence oracle, deny statements, protected areas, symlinks,
statement limits."""
import base64
import os
import time

import pytest

from abxtest import ALICE_TOKEN, BOB_TOKEN, CAROL_TOKEN, assert_error, error_code, multi_config


# -- files.stat ---------------------------------------------------------------------------------

def test_stat_file(server, token, workspace):
    p = os.path.join(workspace, "a.txt")
    os.chmod(p, 0o640)
    r = server.get("/files/stat", token=token, params={"path": "a.txt"})
    assert r.status_code == 200, r.text
    j = r.json()
    st = os.stat(p)
    assert j["exists"] is True
    assert j["path"] == p
    assert j["type"] == "file"
    assert j["size"] == 6
    assert j["mode"] == "0640"
    assert j["uid"] == st.st_uid and j["gid"] == st.st_gid
    assert abs(j["mtime_ms"] - int(st.st_mtime * 1000)) <= 1
    assert isinstance(j["mtime"], str) and j["mtime"][:4].isdigit()


def test_stat_absolute_and_canonical(server, token, workspace):
    r = server.get("/files/stat", token=token, params={"path": workspace + "/sub/../a.txt"})
    assert r.status_code == 200, r.text
    assert r.json()["path"] == os.path.join(workspace, "a.txt")


def test_stat_directory(server, token, workspace):
    j = server.get("/files/stat", token=token, params={"path": "sub"}).json()
    assert j["exists"] is True and j["type"] == "directory"
    assert j["path"] == os.path.join(workspace, "sub")


def test_stat_missing_inside_scope(server, token, workspace):
    r = server.get("/files/stat", token=token, params={"path": "no/such/file"})
    assert r.status_code == 200, r.text
    j = r.json()
    assert j["exists"] is False


def test_stat_symlink_inside_scope(server, token, workspace):
    os.symlink("a.txt", os.path.join(workspace, "ln"))
    r = server.get("/files/stat", token=token, params={"path": "ln"})
    assert r.status_code == 200, r.text
    assert r.json()["path"] == os.path.join(workspace, "a.txt")


def test_stat_rpc(server, token, workspace):
    g = server.get("/files/stat", token=token, params={"path": "a.txt"}).json()
    p = server.op("files.stat", {"path": "a.txt"}, token=token)
    assert p.status_code == 200, p.text
    assert p.json() == g


# -- scope, no existence oracle ------------------------------------------------------------------

@pytest.mark.parametrize("op", ["files.stat", "files.read", "files.list"])
def test_outside_scope_no_existence_oracle(server, token, op, tmp_path):
    outside = tmp_path / "outside"
    outside.mkdir()
    (outside / "exists.txt").write_text("x")
    existing = str(outside / "exists.txt") if op != "files.list" else str(outside)
    missing = str(outside / "missing.txt") if op != "files.list" else str(outside / "missing")
    a = server.op(op, {"path": existing}, token=token)
    b = server.op(op, {"path": missing}, token=token)
    assert_error(a, 403, "policy.path_not_allowed")
    assert_error(b, 403, "policy.path_not_allowed")
    assert a.text.replace(existing, "P") == b.text.replace(missing, "P")


@pytest.mark.parametrize("path", ["/etc/passwd", "/etc/no-such-file-abx", "/", "..", "../ws2", "sub/../../x",
                                  "/tmp"])
def test_outside_scope_rest(server, token, path):
    r = server.get("/files/stat", token=token, params={"path": path})
    assert_error(r, 403, "policy.path_not_allowed")


def test_symlink_pointing_outside(server, token, workspace, tmp_path):
    out = tmp_path / "outside2"
    out.mkdir()
    (out / "f.txt").write_text("outside\n")
    os.symlink(str(out), os.path.join(workspace, "escape"))
    os.symlink(str(out / "f.txt"), os.path.join(workspace, "escape_file"))
    os.symlink("/etc/passwd", os.path.join(workspace, "pw"))
    for p in ("escape/f.txt", "escape_file", "pw", "escape/missing"):
        assert_error(server.get("/files/read", token=token, params={"path": p}), 403, "policy.path_not_allowed")
        assert_error(server.get("/files/stat", token=token, params={"path": p}), 403, "policy.path_not_allowed")
    assert_error(server.get("/files/list", token=token, params={"path": "escape"}), 403, "policy.path_not_allowed")


def test_symlink_loop(server, token, workspace):
    os.symlink("loop_b", os.path.join(workspace, "loop_a"))
    os.symlink("loop_a", os.path.join(workspace, "loop_b"))
    for op in ("/files/stat", "/files/read"):
        assert_error(server.get(op, token=token, params={"path": "loop_a"}), 403, "policy.path_denied")
    assert_error(server.get("/files/read", token=token, params={"path": "loop_a/x"}), 403, "policy.path_denied")


def test_self_symlink_loop(server, token, workspace):
    os.symlink("self", os.path.join(workspace, "self"))
    assert_error(server.get("/files/stat", token=token, params={"path": "self"}), 403, "policy.path_denied")


# -- deny statements and protected areas -----------------------------------------------------------

def test_deny_paths(abx, workspace):
    os.makedirs(os.path.join(workspace, "secret"))
    with open(os.path.join(workspace, "secret", "k.txt"), "w") as f:
        f.write("k")
    s = abx(multi_config(deny='    - paths: ["{ws}/secret/**"]\n'))
    assert_error(s.get("/files/read", token=ALICE_TOKEN, params={"path": "secret/k.txt"}), 403, "policy.path_denied")
    # no existence oracle for denied paths either
    assert_error(s.get("/files/stat", token=ALICE_TOKEN, params={"path": "secret/nope.txt"}),
                 403, "policy.path_denied")
    # through a symlink, the canonical path is what is matched
    os.symlink("secret", os.path.join(workspace, "innocent"))
    assert_error(s.get("/files/read", token=ALICE_TOKEN, params={"path": "innocent/k.txt"}),
                 403, "policy.path_denied")
    assert s.get("/files/read", token=ALICE_TOKEN, params={"path": "a.txt"}).status_code == 200


def test_deny_relative_glob_pattern(abx, workspace):
    os.makedirs(os.path.join(workspace, "deep", ".ssh"))
    with open(os.path.join(workspace, "deep", ".ssh", "id"), "w") as f:
        f.write("key")
    s = abx(multi_config(deny='    - paths: ["**/.ssh/**"]\n'))
    assert_error(s.get("/files/read", token=ALICE_TOKEN, params={"path": "deep/.ssh/id"}), 403, "policy.path_denied")
    assert s.get("/files/read", token=ALICE_TOKEN, params={"path": "a.txt"}).status_code == 200


def test_recursive_list_does_not_reveal_denied_subtree(abx, workspace):
    # files.stat of secret/k.txt is denied; a recursive listing of the parent must not
    # hand out the same metadata (name, size, mtime) of what lies inside the denied subtree
    os.makedirs(os.path.join(workspace, "secret"))
    with open(os.path.join(workspace, "secret", "k.txt"), "w") as f:
        f.write("k")
    s = abx(multi_config(deny='    - paths: ["{ws}/secret/**"]\n'))
    assert_error(s.get("/files/stat", token=ALICE_TOKEN, params={"path": "secret/k.txt"}), 403, "policy.path_denied")
    r = s.get("/files/list", token=ALICE_TOKEN, params={"path": ".", "recursive": "true"})
    assert r.status_code == 200, r.text
    paths = [e["path"] for e in r.json()["entries"]]
    assert "sub/c.txt" in paths
    assert "secret/k.txt" not in paths, paths


def test_glob_single_segment_and_exact_path_scopes(abx, workspace):
    s = abx(multi_config().replace('      paths: ["{ws}/**"]\n', '      paths: ["{ws}/*", "{ws}/sub/c.txt"]\n'))
    assert s.get("/files/read", token=ALICE_TOKEN, params={"path": "a.txt"}).status_code == 200
    assert s.get("/files/read", token=ALICE_TOKEN, params={"path": "sub/c.txt"}).status_code == 200
    os.makedirs(os.path.join(workspace, "sub", "more"))
    with open(os.path.join(workspace, "sub", "more", "x.txt"), "w") as f:
        f.write("x")
    assert_error(s.get("/files/read", token=ALICE_TOKEN, params={"path": "sub/more/x.txt"}),
                 403, "policy.path_not_allowed")


def test_deny_ops_only(abx):
    s = abx(multi_config(deny='    - ops: ["files.read"]\n      principals: [carol]\n'))
    assert_error(s.get("/files/read", token=CAROL_TOKEN, params={"path": "a.txt"}), 403, "policy.denied")
    assert_error(s.op("files.read", {"path": "a.txt"}, token=CAROL_TOKEN), 403, "policy.denied")
    # deny for carol only: alice still reads, carol still stats
    assert s.get("/files/read", token=ALICE_TOKEN, params={"path": "a.txt"}).status_code == 200
    assert s.get("/files/stat", token=CAROL_TOKEN, params={"path": "a.txt"}).status_code == 200


def test_deny_by_role_selector(abx):
    s = abx(multi_config(deny='    - ops: ["files.*"]\n      principals: ["role:agent"]\n'))
    assert_error(s.get("/files/list", token=ALICE_TOKEN, params={"path": "."}), 403, "policy.denied")
    assert_error(s.get("/files/stat", token=CAROL_TOKEN, params={"path": "a.txt"}), 403, "policy.denied")


WIDE = """
workspace: {ws}
auth:
  tokens:
    - principal: alice
      roles: [agent]
      token_sha256: "%s"
policy:
  allow:
    - ops: ["files.*"]
      principals: [alice]
      paths: {read: ["/**"]}
"""


@pytest.fixture
def wide(abx):
    from abxtest import sha256_hex
    return abx(WIDE % sha256_hex(ALICE_TOKEN))


@pytest.mark.parametrize("path", ["/proc/self/status", "/proc/1/environ", "/proc", "/sys/kernel/hostname", "/sys",
                                  "/dev/tty", "/dev/sda", "/dev", "/dev/../proc/self/status",
                                  "/boot/nothing-here"])
def test_protected_areas_denied_even_with_wide_scope(wide, path):
    for op in ("/files/stat", "/files/read"):
        assert_error(wide.get(op, token=ALICE_TOKEN, params={"path": path}), 403, "policy.path_denied")


def test_protected_list_denied(wide):
    assert_error(wide.get("/files/list", token=ALICE_TOKEN, params={"path": "/proc"}), 403, "policy.path_denied")
    assert_error(wide.get("/files/list", token=ALICE_TOKEN, params={"path": "/dev"}), 403, "policy.path_denied")


@pytest.mark.parametrize("path", ["/dev/null", "/dev/zero", "/dev/urandom"])
def test_dev_exceptions_allowed(wide, path):
    r = wide.get("/files/stat", token=ALICE_TOKEN, params={"path": path})
    assert r.status_code == 200, r.text
    assert r.json()["exists"] is True


def test_config_file_is_protected(wide):
    cfg = os.path.realpath(wide.config_path)
    for op in ("/files/stat", "/files/read"):
        assert_error(wide.get(op, token=ALICE_TOKEN, params={"path": cfg}), 403, "policy.path_denied")
    # and through a symlink to it
    link = os.path.join(wide.workspace, "cfglink")
    os.symlink(cfg, link)
    assert_error(wide.get("/files/read", token=ALICE_TOKEN, params={"path": link}), 403, "policy.path_denied")


def test_proc_through_symlink_denied(wide, workspace):
    os.symlink("/proc/self", os.path.join(workspace, "me"))
    assert_error(wide.get("/files/read", token=ALICE_TOKEN, params={"path": os.path.join(workspace, "me/environ")}),
                 403, "policy.path_denied")


def test_token_file_protected_in_default(abx, workspace):
    # $ABX_HOME inside the workspace: the embedded default refuses the layout (the agent
    # could rename the folder away); nothing is created there
    home = os.path.join(workspace, ".abxhome")
    s = abx(home=home, start=False)
    with pytest.raises(RuntimeError, match="config.state_writable"):
        s.start()
    assert not os.path.exists(os.path.join(home, "token"))


# -- files.list ---------------------------------------------------------------------------------------

def test_list_basic_sorted(server, token, workspace):
    for n in ("zeta.txt", "Alpha.txt", "mid.txt"):
        open(os.path.join(workspace, n), "w").close()
    r = server.get("/files/list", token=token, params={"path": ".", "include_hidden": "false"})
    assert r.status_code == 200, r.text
    j = r.json()
    assert j["path"] == workspace
    names = [e["name"] for e in j["entries"]]
    assert names == sorted(names)
    assert set(names) == {"a.txt", "b.txt", "sub", "zeta.txt", "Alpha.txt", "mid.txt"}
    assert ".hidden" not in names
    assert j["count"] == len(j["entries"]) == 6
    assert j["truncated"] is False
    e = {x["name"]: x for x in j["entries"]}
    assert e["a.txt"]["type"] == "file" and e["a.txt"]["size"] == 6 and e["a.txt"]["path"] == "a.txt"
    assert e["sub"]["type"] == "directory"
    assert "mode" in e["a.txt"] and "mtime" in e["a.txt"]


def test_list_include_hidden(server, token):
    names = [e["name"] for e in server.get("/files/list", token=token,
                                           params={"path": ".", "include_hidden": "true"}).json()["entries"]]
    assert ".hidden" in names
    assert names == sorted(names)
    # the default is whatever the catalog declares
    decl = server.get("/ops/files.list", token=token).json()
    dflt = [p for p in decl["params"] if p["name"] == "include_hidden"][0].get("default")
    names = [e["name"] for e in server.get("/files/list", token=token, params={"path": "."}).json()["entries"]]
    assert (".hidden" in names) == bool(dflt)


def test_list_recursive_relative_paths(server, token, workspace):
    os.makedirs(os.path.join(workspace, "sub", "deeper"))
    open(os.path.join(workspace, "sub", "deeper", "d.txt"), "w").close()
    j = server.get("/files/list", token=token, params={"path": ".", "recursive": "true"}).json()
    paths = [e["path"] for e in j["entries"]]
    assert {"a.txt", "sub", "sub/c.txt", "sub/deeper", "sub/deeper/d.txt"} <= set(paths)
    assert j["count"] == len(paths) and j["truncated"] is False
    # listing a subdirectory: paths relative to it
    j = server.get("/files/list", token=token, params={"path": "sub", "recursive": "true"}).json()
    paths = {e["path"] for e in j["entries"]}
    assert paths == {"c.txt", "deeper", "deeper/d.txt"}
    names = {e["path"]: e["name"] for e in j["entries"]}
    assert names["deeper/d.txt"] == "d.txt"


def test_list_recursive_does_not_follow_symlinks(server, token, workspace, tmp_path):
    out = tmp_path / "elsewhere"
    out.mkdir()
    (out / "leak.txt").write_text("x")
    os.symlink(str(out), os.path.join(workspace, "outlink"))
    os.symlink("sub", os.path.join(workspace, "sublink"))
    j = server.get("/files/list", token=token, params={"path": ".", "recursive": "true"}).json()
    paths = {e["path"]: e for e in j["entries"]}
    assert paths["outlink"]["type"] == "symlink"
    assert paths["sublink"]["type"] == "symlink"
    assert not any(p.startswith("outlink/") or p.startswith("sublink/") for p in paths), sorted(paths)


def test_list_max_entries(server, token):
    j = server.get("/files/list", token=token, params={"path": ".", "max_entries": "2",
                                                      "include_hidden": "false"}).json()
    assert len(j["entries"]) == 2
    assert j["count"] == 2
    assert j["truncated"] is True
    assert [e["name"] for e in j["entries"]] == ["a.txt", "b.txt"]


def test_list_not_a_directory(server, token):
    assert_error(server.get("/files/list", token=token, params={"path": "a.txt"}), 400, "files.not_a_directory")


def test_list_missing_dir(server, token):
    r = server.get("/files/list", token=token, params={"path": "nodir"})
    assert_error(r, 404, "files.not_found")


def test_list_rpc(server, token):
    g = server.get("/files/list", token=token, params={"path": "sub"}).json()
    p = server.op("files.list", {"path": "sub"}, token=token)
    assert p.status_code == 200, p.text
    assert p.json() == g


def test_statement_max_entries_caps_listing(abx, workspace):
    for i in range(5):
        open(os.path.join(workspace, "f%d" % i), "w").close()
    s = abx(multi_config().replace('      paths: ["{ws}/**"]\n',
                                   '      paths: ["{ws}/**"]\n      limits: {max_entries: 3}\n'))
    j = s.get("/files/list", token=ALICE_TOKEN, params={"path": "."}).json()
    assert len(j["entries"]) == 3 and j["truncated"] is True
    # request asks for more: the statement wins
    j = s.get("/files/list", token=ALICE_TOKEN, params={"path": ".", "max_entries": "100"}).json()
    assert len(j["entries"]) == 3 and j["truncated"] is True
    # request asks for fewer: the request wins
    j = s.get("/files/list", token=ALICE_TOKEN, params={"path": ".", "max_entries": "2"}).json()
    assert len(j["entries"]) == 2 and j["truncated"] is True


# -- files.read ---------------------------------------------------------------------------------------

def test_read_whole_file(server, token, workspace):
    r = server.get("/files/read", token=token, params={"path": "a.txt"})
    assert r.status_code == 200, r.text
    j = r.json()
    assert j["path"] == os.path.join(workspace, "a.txt")
    assert j["encoding"] == "utf8"
    assert j["content"] == "hello\n"
    assert j["size"] == 6
    assert j["offset"] == 0
    assert j["length"] == 6
    assert j["truncated"] is False
    assert j["eof"] is True


def test_read_byte_range(server, token):
    j = server.get("/files/read", token=token, params={"path": "a.txt", "offset": "1", "length": "3"}).json()
    assert j["content"] == "ell"
    assert j["offset"] == 1 and j["length"] == 3
    assert j["eof"] is False
    j = server.get("/files/read", token=token, params={"path": "a.txt", "offset": "4"}).json()
    assert j["content"] == "o\n" and j["eof"] is True


def test_read_offset_past_end(server, token):
    r = server.get("/files/read", token=token, params={"path": "a.txt", "offset": "1000"})
    assert r.status_code == 200, r.text
    j = r.json()
    assert j["content"] == "" and j["length"] == 0 and j["eof"] is True


def test_read_line_range(server, token):
    j = server.get("/files/read", token=token, params={"path": "b.txt", "start_line": "2", "max_lines": "2"}).json()
    assert j["content"] == "line2\nline3\n"
    assert j["start_line"] == 2
    assert j["end_line"] == 3
    assert j["lines"] == 2
    assert j["length"] == len("line2\nline3\n")
    assert j["truncated"] is True  # lines remain after line 3
    j = server.get("/files/read", token=token, params={"path": "b.txt", "start_line": "4"}).json()
    assert j["content"] == "line4\nline5\n"
    assert j["lines"] == 2 and j["end_line"] == 5
    assert j["truncated"] is False


def test_read_line_range_numbered(server, token):
    j = server.get("/files/read", token=token, params={"path": "b.txt", "start_line": "3", "max_lines": "2",
                                                      "numbered": "true"}).json()
    assert j["content"] == "%6d\tline3\n%6d\tline4\n" % (3, 4)


def test_read_line_range_past_end(server, token):
    r = server.get("/files/read", token=token, params={"path": "b.txt", "start_line": "50"})
    assert r.status_code == 200, r.text
    j = r.json()
    assert j["content"] == "" and j["lines"] == 0


def test_read_byte_and_line_range_together_invalid(server, token):
    r = server.get("/files/read", token=token, params={"path": "b.txt", "offset": "1", "start_line": "2"})
    assert_error(r, 400, "args.invalid")
    r = server.op("files.read", {"path": "b.txt", "length": 3, "max_lines": 2}, token=token)
    assert_error(r, 400, "args.invalid")


def test_read_base64_roundtrip(server, token, workspace):
    data = bytes(range(256)) * 4 + b"\x00\xff\xfe\r\n\x80"
    with open(os.path.join(workspace, "bin.dat"), "wb") as f:
        f.write(data)
    j = server.get("/files/read", token=token, params={"path": "bin.dat", "encoding": "base64"}).json()
    assert j["encoding"] == "base64"
    assert base64.b64decode(j["content"]) == data
    assert j["size"] == len(data) and j["eof"] is True
    j = server.op("files.read", {"path": "bin.dat", "encoding": "base64", "offset": 10, "length": 5},
                  token=token).json()
    assert base64.b64decode(j["content"]) == data[10:15]


def test_read_utf8_multibyte(server, token, workspace):
    text = "héllo wörld ✓ 😀\n"
    with open(os.path.join(workspace, "u.txt"), "w", encoding="utf-8") as f:
        f.write(text)
    j = server.get("/files/read", token=token, params={"path": "u.txt"}).json()
    assert j["content"] == text
    assert j["size"] == len(text.encode())


def test_read_not_utf8(server, token, workspace):
    with open(os.path.join(workspace, "latin1.txt"), "wb") as f:
        f.write("caf\xe9\n".encode("latin-1"))
    assert_error(server.get("/files/read", token=token, params={"path": "latin1.txt"}), 400, "files.not_utf8")


def test_read_directory(server, token):
    assert_error(server.get("/files/read", token=token, params={"path": "sub"}), 400, "files.is_a_directory")


def test_read_missing_file(server, token):
    assert_error(server.get("/files/read", token=token, params={"path": "nope.txt"}), 404, "files.not_found")


def test_read_fifo_no_hang(server, token, workspace):
    os.mkfifo(os.path.join(workspace, "pipe"))
    t0 = time.time()
    r = server.get("/files/read", token=token, params={"path": "pipe"}, timeout=5)
    assert time.time() - t0 < 2
    assert_error(r, 400, "files.not_regular")


def test_read_dev_null(abx):
    from abxtest import sha256_hex
    s = abx(WIDE % sha256_hex(ALICE_TOKEN))
    r = s.get("/files/read", token=ALICE_TOKEN, params={"path": "/dev/null"})
    # /dev/null is allowed by policy; it is a character device, so not a regular file
    assert r.status_code in (200, 400), r.text
    if r.status_code == 400:
        assert error_code(r) == "files.not_regular"
    else:
        assert r.json()["content"] == ""


def test_read_unreadable_file(server, token, workspace):
    if os.geteuid() == 0:
        pytest.skip("root reads anything")
    p = os.path.join(workspace, "noperm.txt")
    with open(p, "w") as f:
        f.write("x")
    os.chmod(p, 0)
    assert_error(server.get("/files/read", token=token, params={"path": "noperm.txt"}), 403, "files.access")


def test_statement_max_bytes_caps_read(abx, workspace):
    with open(os.path.join(workspace, "big.txt"), "w") as f:
        f.write("0123456789" * 10)
    s = abx(multi_config().replace('      paths: ["{ws}/**"]\n',
                                   '      paths: ["{ws}/**"]\n      limits: {max_bytes: 16}\n'))
    j = s.get("/files/read", token=ALICE_TOKEN, params={"path": "big.txt"}).json()
    assert j["content"] == "0123456789012345"
    assert j["length"] == 16
    assert j["truncated"] is True
    assert j["eof"] is False
    assert j["size"] == 100
    # a request for less is honoured; a request for more is capped
    j = s.get("/files/read", token=ALICE_TOKEN, params={"path": "big.txt", "length": "4"}).json()
    assert j["content"] == "0123" and j["truncated"] is False
    j = s.get("/files/read", token=ALICE_TOKEN, params={"path": "big.txt", "length": "50"}).json()
    assert j["length"] == 16 and j["truncated"] is True
    # line ranges are capped too
    j = s.get("/files/read", token=ALICE_TOKEN, params={"path": "big.txt", "start_line": "1"}).json()
    assert len(j["content"].encode()) <= 16 and j["truncated"] is True
    # small files are not flagged
    j = s.get("/files/read", token=ALICE_TOKEN, params={"path": "a.txt"}).json()
    assert j["content"] == "hello\n" and j["truncated"] is False


def test_max_bytes_truncation_keeps_utf8_valid(abx, workspace):
    with open(os.path.join(workspace, "multi.txt"), "w", encoding="utf-8") as f:
        f.write("é" * 20)  # 2 bytes each
    s = abx(multi_config().replace('      paths: ["{ws}/**"]\n',
                                   '      paths: ["{ws}/**"]\n      limits: {max_bytes: 5}\n'))
    r = s.get("/files/read", token=ALICE_TOKEN, params={"path": "multi.txt"})
    assert r.status_code == 200, r.text
    j = r.json()
    assert j["truncated"] is True
    assert j["content"] in ("éé", "ééé"[:2])
    assert len(j["content"].encode()) <= 5


def test_read_bob_not_mounted(multi):
    r = multi.get("/files/read", token=BOB_TOKEN, params={"path": "a.txt"})
    assert_error(r, 404, "op.not_enabled")


def test_names_with_spaces_and_unicode(server, token, workspace):
    for n in ("sp ace.txt", "ü-ñ.txt", "100%.txt", "a+b.txt"):
        with open(os.path.join(workspace, n), "w", encoding="utf-8") as f:
            f.write(n)
        r = server.get("/files/read", token=token, params={"path": n})
        assert r.status_code == 200, (n, r.text)
        assert r.json()["content"] == n
        assert r.json()["path"] == os.path.join(workspace, n)
    names = [e["name"] for e in server.get("/files/list", token=token, params={"path": "."}).json()["entries"]]
    assert {"sp ace.txt", "ü-ñ.txt", "100%.txt", "a+b.txt"} <= set(names)


def test_recursive_list_does_not_descend_into_protected_areas(wide):
    # /dev, /proc and /sys are denied to files.list/stat/read even under paths ["/**"];
    # a recursive listing of / must not hand out their contents either
    r = wide.get("/files/list", token=ALICE_TOKEN, params={"path": "/", "recursive": "true", "max_entries": "3000"},
                 timeout=30)
    assert r.status_code == 200, r.text
    leaked = [e["path"] for e in r.json()["entries"]
              if e["path"].split("/")[0] in ("proc", "sys", "dev") and "/" in e["path"]
              and e["path"] not in ("dev/null", "dev/zero", "dev/urandom")]
    assert not leaked, leaked[:10]
