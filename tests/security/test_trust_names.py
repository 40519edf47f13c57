"""Issue 12, names vs identities: existence oracles outside the scope (class 5), deny rules
that bind the file and not only its name in abx's own file ops (class 2), and git config
that plants code the operator's git would run (class 2's warning).

Each test provokes the attack: it fails on a build without the fix."""
import json
import os
import shutil
import subprocess
import tempfile

import pytest

import abxtest as bb
from abxtest import ALICE_TOKEN, assert_error
from secutil import files_config

NOBODY = 65534


def body_of(r):
    """The part of an error answer a client could compare: status and error object,
    without what differs per request anyway."""
    j = r.json()
    err = dict(j.get("error") or {})
    for k in ("request_id", "id"):
        err.pop(k, None)
    return r.status_code, json.dumps(err, sort_keys=True)


def outside_tree(root):
    """Things outside the workspace a prober would tell apart: a file, a folder, a
    symlink loop, a folder nobody but root may search."""
    out = os.path.join(root, "outside")
    os.makedirs(os.path.join(out, "dir"))
    with open(os.path.join(out, "f.txt"), "w") as f:
        f.write("outside\n")
    os.symlink("loop", os.path.join(out, "loop"))
    os.makedirs(os.path.join(out, "locked", "inner"))
    os.chmod(os.path.join(out, "locked"), 0o700)
    return out


def probes(out, ws, pid):
    names = [
        out + "/f.txt", out + "/missing.txt", out + "/dir/x", out + "/nodir/x",
        out + "/loop", out + "/loop/x", out + "/f.txt/x",
        out + "/locked/inner/x", out + "/nolocked/inner/x",
        "/proc/%d/status" % pid, "/proc/4194000/status",
        "/proc/%d/fd/0" % pid, "/proc/%d/fd/3" % pid, "/proc/%d/fd/9999" % pid,
        "/proc/%d/cwd/a.txt" % pid, "/proc/self/root" + ws + "/a.txt",
        os.path.relpath(out, ws) + "/f.txt", os.path.relpath(out, ws) + "/missing.txt",
        os.path.relpath(out, ws) + "/loop/x",
    ]
    # symlinks inside the workspace that point out: what they point at must not matter
    links = {"to_file": out + "/f.txt", "to_missing": out + "/missing.txt", "to_loop": out + "/loop",
             "to_locked": out + "/locked/inner", "to_fd3": "/proc/%d/fd/3" % pid,
             "to_fd9999": "/proc/%d/fd/9999" % pid, "to_pid": "/proc/%d" % pid, "to_nopid": "/proc/4194000"}
    for name, target in links.items():
        os.symlink(target, os.path.join(ws, name))
        names += [name, name + "/x"]
    return names


def assert_one_answer(answers):
    seen = {}
    for name, (status, err) in answers.items():
        seen.setdefault((status, err), []).append(name)
    assert len(seen) == 1, "answers differ by what the file system holds:\n" + "\n".join(
        "%s %s <- %s" % (k[0], k[1], v) for k, v in seen.items())
    (status, err), = seen
    assert status == 403 and json.loads(err)["code"] == "policy.path_not_allowed", (status, err)


def doors(s, op, path):
    """The same call through three doors."""
    yield "ops", s.op(op, {"path": path}, token=ALICE_TOKEN)
    yield "route", s.get("/files/" + op.split(".")[1], token=ALICE_TOKEN, params={"path": path})
    r = s.post("/batch", token=ALICE_TOKEN, json_body={"calls": [{"op": op, "args": {"path": path}}]})
    assert r.status_code == 200, r.text
    yield "batch", _BatchAnswer(r.json()["results"][0])


class _BatchAnswer:
    """One batch result, shaped like a response for body_of."""

    def __init__(self, res):
        self.status_code = res["status"]
        self._j = res["body"]

    def json(self):
        return self._j


@pytest.mark.parametrize("op", ["files.read", "files.stat", "files.list"])
def test_outside_scope_one_answer(abx, workspace, tmp_path, op):
    """Class 5: a loop, a /proc entry, an fd number, a link pointing out — one answer."""
    out = outside_tree(str(tmp_path))
    s = abx(files_config(workspace))
    names = probes(out, workspace, s.proc.pid)
    answers = {}
    for name in names:
        for door, r in doors(s, op, name):
            answers.setdefault(door, {})[name] = body_of(r)
    assert sorted(answers) == ["batch", "ops", "route"]
    for per_door in answers.values():
        assert_one_answer(per_door)


@pytest.fixture
def nobody_dir():
    """A tree the unprivileged uid can reach (pytest's tmp_path is root-only)."""
    if os.geteuid() != 0 or not shutil.which("setpriv"):
        pytest.skip("needs root and setpriv to start abx as another uid")
    d = tempfile.mkdtemp(prefix="abx-nobody-")
    os.chmod(d, 0o755)
    yield d
    shutil.rmtree(d, ignore_errors=True)


def test_unprivileged_abx_unsearchable_folder(nobody_dir):
    """Class 5, abx not root: an existing folder abx may not search answered 400 (EACCES
    while canonicalizing) where a missing one answered 403."""
    ws = os.path.join(nobody_dir, "ws")
    home = os.path.join(nobody_dir, "home")
    os.makedirs(ws)
    os.makedirs(home)
    with open(os.path.join(ws, "a.txt"), "w") as f:
        f.write("hello\n")
    for p in (ws, home, os.path.join(ws, "a.txt")):
        os.chown(p, NOBODY, NOBODY)
    locked = os.path.join(nobody_dir, "locked")
    os.makedirs(os.path.join(locked, "inner"))
    os.chmod(locked, 0o700)  # root's: abx (nobody) gets EACCES below it
    os.symlink(locked + "/inner", os.path.join(ws, "to_locked"))
    binary = os.path.join(nobody_dir, "abx")
    shutil.copy2(bb.ABX_BIN, binary)
    os.chmod(binary, 0o755)
    srv = bb.AbxServer(nobody_dir, config=files_config(ws), workspace=ws, home=home)
    base = srv.command

    def command():
        cmd = base()
        cmd[0] = binary
        return ["setpriv", "--reuid=%d" % NOBODY, "--regid=%d" % NOBODY, "--clear-groups"] + cmd
    srv.command = command
    srv.start()
    try:
        assert srv.op("files.read", {"path": "a.txt"}, token=ALICE_TOKEN).status_code == 200
        answers = {}
        for name in (locked + "/inner/x", locked + "/x", nobody_dir + "/missing/inner/x",
                     nobody_dir + "/missing/x", "to_locked", "to_locked/x", "../locked/inner"):
            for door, r in doors(srv, "files.stat", name):
                answers["%s %s" % (door, name)] = body_of(r)
        # the routes share one answer per door; compare across names within each door
        for door in ("ops", "route", "batch"):
            assert_one_answer({k: v for k, v in answers.items() if k.startswith(door + " ")})
    finally:
        srv.stop()
        srv.kill()


# -- class 2: deny rules bind the file, not only its name ---------------------------------------------

KEY = "KEY-4f1b-never-leaves"
MORE = "MORE-9c2e-denied-with-its-folder"


def secret_tree(ws):
    os.makedirs(os.path.join(ws, "secret", "deeper"))
    with open(os.path.join(ws, "secret", "key.txt"), "w") as f:
        f.write(KEY + "\n")
    with open(os.path.join(ws, "secret", "deeper", "more.txt"), "w") as f:
        f.write(MORE + "\n")


def no_key(r):
    assert KEY not in r.text, r.text[:500]


@pytest.mark.parametrize("deny", ["{ws}/secret/key.txt", "{ws}/secret/**"])
def test_renamed_denied_file_stays_denied(abx, workspace, deny):
    """A process renames the denied file's folder: files.read by the new name returned it."""
    secret_tree(workspace)
    s = abx(files_config(workspace, deny=[{"paths": [deny.replace("{ws}", workspace)]}]))
    assert_error(s.op("files.read", {"path": "secret/key.txt"}, token=ALICE_TOKEN), 403, "policy.path_denied")
    os.rename(os.path.join(workspace, "secret"), os.path.join(workspace, "public"))  # what `mv` in a command does
    for op, args in (("files.read", {"path": "public/key.txt"}),
                     ("files.download", {"path": "public/key.txt"}),
                     ("files.copy", {"src": "public/key.txt", "dst": "copy.txt"}),
                     ("files.edit", {"path": "public/key.txt", "old": "KEY", "new": "PWN"})):
        r = s.op(op, args, token=ALICE_TOKEN)
        assert_error(r, 403, "policy.path_denied")
        no_key(r)
    assert not os.path.exists(os.path.join(workspace, "copy.txt"))
    with open(os.path.join(workspace, "public", "key.txt")) as f:
        assert f.read() == KEY + "\n"
    # the walkers do not hand the content out either
    r = s.op("files.search", {"path": ".", "pattern": "KEY-4f1b"}, token=ALICE_TOKEN)
    assert r.status_code in (200, 403), r.text
    no_key(r)
    r = s.op("files.list", {"path": ".", "recursive": True}, token=ALICE_TOKEN)
    assert r.status_code == 200, r.text
    names = [e["path"] for e in r.json()["entries"]]
    assert "public/key.txt" not in names, names
    if deny.endswith("/**"):
        # the whole folder is bound: its other files, new files in it, listing it
        assert_error(s.op("files.read", {"path": "public/deeper/more.txt"}, token=ALICE_TOKEN),
                     403, "policy.path_denied")
        assert_error(s.op("files.write", {"path": "public/planted.txt", "content": "x"}, token=ALICE_TOKEN),
                     403, "policy.path_denied")
        assert not os.path.exists(os.path.join(workspace, "public", "planted.txt"))
        assert_error(s.op("files.list", {"path": "public"}, token=ALICE_TOKEN), 403, "policy.path_denied")
        assert "public" not in names and "public/deeper/more.txt" not in names, names
        r = s.op("files.search", {"path": ".", "pattern": "MORE-9c2e"}, token=ALICE_TOKEN)
        assert r.status_code == 200 and MORE not in r.text, r.text
    # an unrelated file is still served
    assert s.op("files.read", {"path": "a.txt"}, token=ALICE_TOKEN).status_code == 200


def test_hard_link_to_denied_file(abx, workspace):
    """`ln secret/key.txt other` by a process, then files.read other."""
    secret_tree(workspace)
    s = abx(files_config(workspace, deny=[{"paths": [workspace + "/secret/key.txt"]}]))
    os.link(os.path.join(workspace, "secret", "key.txt"), os.path.join(workspace, "other.txt"))
    for op, args in (("files.read", {"path": "other.txt"}),
                     ("files.stat", {"path": "other.txt"}),
                     ("files.move", {"src": "other.txt", "dst": "moved.txt"})):
        r = s.op(op, args, token=ALICE_TOKEN)
        assert_error(r, 403, "policy.path_denied")
        no_key(r)
    r = s.op("files.search", {"path": ".", "pattern": "KEY-4f1b"}, token=ALICE_TOKEN)
    assert r.status_code == 200, r.text
    no_key(r)
    r = s.op("files.archive", {"sources": ["."]}, token=ALICE_TOKEN)
    assert KEY.encode() not in r.content
    # a name replaced by a new file is still denied by its name
    os.unlink(os.path.join(workspace, "secret", "key.txt"))
    with open(os.path.join(workspace, "secret", "key.txt"), "w") as f:
        f.write("new inode\n")
    assert_error(s.op("files.read", {"path": "secret/key.txt"}, token=ALICE_TOKEN), 403, "policy.path_denied")


# -- git config that makes the operator's git run code ------------------------------------------------

FSMONITOR = "[core]\n\trepositoryformatversion = 0\n\tfsmonitor = /tmp/planted-hook.sh\n"


def warning_codes(r):
    assert r.status_code == 200, r.text
    return [w.get("code") for w in r.json().get("warnings", [])]


def git_repo(ws):
    os.makedirs(os.path.join(ws, ".git", "objects"))
    with open(os.path.join(ws, ".git", "HEAD"), "w") as f:
        f.write("ref: refs/heads/main\n")
    with open(os.path.join(ws, ".git", "config"), "w") as f:
        f.write("[core]\n\tbare = false\n")


@pytest.mark.parametrize("content,key", [
    (FSMONITOR, "core.fsmonitor"),
    ("[CORE]\n    HooksPath=hooks-elsewhere ; a comment\n", "core.hooksPath"),
    ("# header\n[include]\n\tpath = ../evil.inc\n", "include.path"),
    ('[includeIf "gitdir:~/"]\n  path = /tmp/x.inc\n', "includeIf"),
    ("[core] fsmonitor\n", "core.fsmonitor"),
])
def test_git_config_hook_warned(abx, workspace, content, key):
    """Writing a config that plants fsmonitor/hooksPath/include: the result says so."""
    s = abx(files_config(workspace))
    # a checked-out repo's .git/config is protected; the same file planted where git looks
    # after a rename, in a bare-shaped git dir, or as a .gitconfig is not
    git_repo(os.path.join(workspace, "sub"))
    for path in ("sub/.git/config.worktree", ".gitconfig", "bare.git/config"):
        if path.startswith("bare.git"):
            git_repo(os.path.join(workspace, "barework"))
            os.rename(os.path.join(workspace, "barework", ".git"), os.path.join(workspace, "bare.git"))
        r = s.op("files.write", {"path": path, "content": content}, token=ALICE_TOKEN)
        codes = warning_codes(r)
        assert codes == ["files.git_config_hook"], (path, r.text)
        assert key in r.json()["warnings"][0]["message"], r.text
        assert warning_codes(s.op("files.read", {"path": path}, token=ALICE_TOKEN)) == ["files.git_config_hook"]
        shutil.rmtree(os.path.join(workspace, "barework"), ignore_errors=True)


def test_git_config_hook_moved_into_place(abx, workspace):
    """`mv evil .git`-style: a git dir with a planted config moved or copied into place,
    or a config edited to add the key, is reported too; harmless configs are not."""
    s = abx(files_config(workspace))
    # (abx itself refuses to write below a .git/; a bare-shaped git dir has no such name)
    git_repo(os.path.join(workspace, "stage"))
    os.rename(os.path.join(workspace, "stage", ".git"), os.path.join(workspace, "stage", "repo"))
    with open(os.path.join(workspace, "stage", "repo", "config"), "w") as f:
        f.write(FSMONITOR)
    os.makedirs(os.path.join(workspace, "other"))
    r = s.op("files.move", {"src": "stage/repo", "dst": "other/repo"}, token=ALICE_TOKEN)
    assert warning_codes(r) == ["files.git_config_hook"], r.text
    r = s.op("files.copy", {"src": "other/repo", "dst": "copied", "recursive": True}, token=ALICE_TOKEN)
    assert warning_codes(r) == ["files.git_config_hook"], r.text
    with open(os.path.join(workspace, "plain.txt"), "w") as f:
        f.write("[core]\n\tbare = false\n")
    r = s.op("files.copy", {"src": "plain.txt", "dst": ".gitconfig"}, token=ALICE_TOKEN)
    assert warning_codes(r) == [], r.text
    r = s.op("files.edit", {"path": ".gitconfig", "old": "bare = false", "new": "hookspath = x"}, token=ALICE_TOKEN)
    assert warning_codes(r) == ["files.git_config_hook"], r.text
    r = s.request("PUT", "/files/upload", token=ALICE_TOKEN, params={"path": "up/.gitconfig", "make_parents": "true"},
                  data=FSMONITOR.encode())
    assert warning_codes(r) == ["files.git_config_hook"], r.text
    # keys of other sections, and the names in values or comments, are not warned about
    r = s.op("files.write", {"path": ".gitconfig",
                             "content": "[alias]\n\tfsmonitor = x\n# [core] hooksPath = y\n[user]\n\tname = core.fsmonitor\n"},
             token=ALICE_TOKEN)
    assert warning_codes(r) == [], r.text
    r = s.op("files.write", {"path": "notes/config", "content": FSMONITOR, "make_parents": True}, token=ALICE_TOKEN)
    assert warning_codes(r) == [], r.text  # not a git dir: just a file called config


def test_nested_root_moved_under_denied_folder_stays_denied(abx, workspace):
    """The identity walk stops early only at roots nothing abx grants can move. A root
    nested in another write root can be moved (here: into the denied folder, as `mv` in
    a command would), and its descriptor follows the folder: what is read through it
    must still be checked against the denied folder above it, and a decoy planted at the
    old name must not open the moved one."""
    secret_tree(workspace)
    proj = os.path.join(workspace, "proj")
    os.makedirs(proj)
    with open(os.path.join(proj, "x.txt"), "w") as f:
        f.write(KEY + "\n")
    # reads through the root proj; writes (so renames) anywhere in the workspace
    writes = {"ops": ["files.write", "files.move", "files.mkdir"], "principals": ["alice"],
              "paths": [workspace + "/**"]}
    s = abx(files_config(workspace, paths=[proj + "/**"], extra=[writes],
                         deny=[{"paths": [workspace + "/secret/**"]}]))
    r = s.op("files.read", {"path": "proj/x.txt"}, token=ALICE_TOKEN)
    assert r.status_code == 200 and KEY in r.text, r.text  # allowed while it is outside
    os.rename(proj, os.path.join(workspace, "secret", "proj"))
    os.makedirs(proj)
    with open(os.path.join(proj, "x.txt"), "w") as f:
        f.write("decoy\n")
    for path in ("proj/x.txt", proj + "/x.txt"):
        r = s.op("files.read", {"path": path}, token=ALICE_TOKEN)
        no_key(r)
        assert r.status_code in (200, 403), r.text
        if r.status_code == 200:
            assert "decoy" in r.text, r.text
        else:
            assert r.json()["error"]["code"] == "policy.path_denied", r.text
