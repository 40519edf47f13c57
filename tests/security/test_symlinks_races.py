"""Attack corpus, item 2: symlinks and races.

Links from inside to outside (and to denied names inside) through every files op,
loops, /proc magic links, hard links, a path component swapped for a symlink while the
server reads and writes through it (thousands of swaps), a parent renamed during
resolution, protected names that do not exist yet and are created through abx, and
FIFOs / endless or huge files that must never hang or exhaust memory.

What must hold: no answer ever carries the content of a file the policy refuses, no file
appears where the policy refuses it, and each refusal has its code from errors.def."""
import base64
import os
import threading
import time

import pytest
import requests

from abxtest import ALICE_TOKEN, assert_error, error_code, rss_kib
from secutil import files_config, world_readable_dir

SECRET = "TOP-SECRET-CONTENT"
OUTSIDE = "OUTSIDE-CONTENT"


@pytest.fixture
def outside(tmp_path):
    d = world_readable_dir(tmp_path, "outside")
    (d / "f.txt").write_text(OUTSIDE + "\n")
    return str(d)


@pytest.fixture
def denied(abx, workspace):
    """alice: files.* on the workspace, minus secret.txt, private/ and a name not yet created."""
    with open(os.path.join(workspace, "secret.txt"), "w") as f:
        f.write(SECRET + "\n")
    os.makedirs(os.path.join(workspace, "private"))
    with open(os.path.join(workspace, "private", "k.txt"), "w") as f:
        f.write(SECRET + "\n")
    s = abx(files_config(workspace, deny=[{"paths": [workspace + "/secret.txt", workspace + "/private/**",
                                                     workspace + "/future.txt", workspace + "/future-dir/**"]}]))
    return s


def call(s, op, args):
    return s.op(op, args, token=ALICE_TOKEN)


def no_leak(r, *needles):
    for n in needles:
        assert n not in r.text, "leaked %r: %s" % (n, r.text[:300])


# -- links from inside to outside, through every op ------------------------------------------------

# (op, args with L = a link name inside the workspace, expected code)
LINK_CALLS = [
    ("files.read", {"path": "L/f.txt"}),
    ("files.read", {"path": "LF"}),
    ("files.stat", {"path": "L/f.txt"}),
    ("files.list", {"path": "L"}),
    ("files.download", {"path": "LF"}),
    ("files.edit", {"path": "LF", "old": "OUTSIDE", "new": "PWNED"}),
    ("files.write", {"path": "LF", "content": "PWNED"}),
    ("files.write", {"path": "L/new.txt", "content": "PWNED"}),
    ("files.write", {"path": "LD", "content": "PWNED"}),           # dangling link to outside
    ("files.mkdir", {"path": "L/newdir"}),
    ("files.mkdir", {"path": "LD"}),
    ("files.copy", {"src": "a.txt", "dst": "L/copied.txt"}),
    ("files.copy", {"src": "a.txt", "dst": "LD"}),
    ("files.copy", {"src": "LF", "dst": "stolen.txt"}),
    ("files.move", {"src": "a.txt", "dst": "L/moved.txt"}),
    ("files.move", {"src": "L/f.txt", "dst": "stolen.txt"}),
    ("files.delete", {"path": "L/f.txt"}),
    ("files.search", {"path": "L", "pattern": "OUTSIDE"}),
    ("files.find", {"path": "L"}),
    ("files.archive", {"sources": ["L"]}),
    ("files.archive", {"sources": ["LF"]}),
]


@pytest.mark.parametrize("op,args", LINK_CALLS, ids=["%s-%d" % (c[0], i) for i, c in enumerate(LINK_CALLS)])
def test_link_to_outside_refused(server, workspace, outside, op, args):
    os.symlink(outside, os.path.join(workspace, "L"))
    os.symlink(os.path.join(outside, "f.txt"), os.path.join(workspace, "LF"))
    os.symlink(os.path.join(outside, "made-through-link"), os.path.join(workspace, "LD"))
    r = server.op(op, args, token=server.token)
    assert_error(r, 403, "policy.path_not_allowed")
    no_leak(r, OUTSIDE)
    assert sorted(os.listdir(outside)) == ["f.txt"]
    with open(os.path.join(outside, "f.txt")) as f:
        assert f.read() == OUTSIDE + "\n"
    assert not os.path.exists(os.path.join(workspace, "stolen.txt"))


@pytest.mark.parametrize("target", ["../../../../../../etc/passwd", "/etc/passwd", "..", "/", "../ws-sibling"])
def test_relative_and_absolute_link_targets_outside(server, workspace, target):
    os.symlink(target, os.path.join(workspace, "up"))
    r = server.get("/files/read", token=server.token, params={"path": "up"})
    assert_error(r, 403, "policy.path_not_allowed")
    no_leak(r, "root:x:0")


# -- links to denied names inside the scope ----------------------------------------------------------

DENIED_LINK_CALLS = [
    ("files.read", {"path": "toSecret"}),
    ("files.read", {"path": "toPrivate/k.txt"}),
    ("files.download", {"path": "toSecret"}),
    ("files.list", {"path": "toPrivate"}),
    ("files.search", {"path": "toPrivate", "pattern": "SECRET"}),
    ("files.copy", {"src": "toSecret", "dst": "copy.txt"}),
    ("files.write", {"path": "toSecret", "content": "overwritten"}),
    ("files.edit", {"path": "toSecret", "old": "TOP", "new": "PWN"}),
    ("files.write", {"path": "toFuture", "content": "created"}),    # dangling link to a denied name
    ("files.mkdir", {"path": "toFutureDir"}),
    ("files.archive", {"sources": ["toPrivate"]}),
]


@pytest.mark.parametrize("op,args", DENIED_LINK_CALLS,
                         ids=["%s-%d" % (c[0], i) for i, c in enumerate(DENIED_LINK_CALLS)])
def test_link_to_denied_name_refused(denied, workspace, op, args):
    os.symlink("secret.txt", os.path.join(workspace, "toSecret"))
    os.symlink("private", os.path.join(workspace, "toPrivate"))
    os.symlink("future.txt", os.path.join(workspace, "toFuture"))
    os.symlink("future-dir", os.path.join(workspace, "toFutureDir"))
    r = call(denied, op, args)
    assert_error(r, 403, "policy.path_denied")
    no_leak(r, SECRET)
    with open(os.path.join(workspace, "secret.txt")) as f:
        assert f.read() == SECRET + "\n"
    for name in ("future.txt", "future-dir", "copy.txt"):
        assert not os.path.lexists(os.path.join(workspace, name)), name


# -- loops and magic links ------------------------------------------------------------------------------

@pytest.mark.parametrize("layout", ["self", "pair", "dir_cycle", "deep_chain"])
@pytest.mark.parametrize("op", ["files.read", "files.stat", "files.write", "files.list"])
def test_symlink_loops(server, workspace, layout, op):
    w = lambda *p: os.path.join(workspace, *p)  # noqa: E731
    if layout == "self":
        os.symlink("x", w("x"))
        target = "x"
    elif layout == "pair":
        os.symlink("y", w("x"))
        os.symlink("x", w("y"))
        target = "x/inner"
    elif layout == "dir_cycle":
        os.makedirs(w("d"))
        os.symlink("../d/loop/loop", w("d", "loop"))
        target = "d/loop/f"
    else:  # 60 links in a chain: over the kernel's (and abx's) limit of 40
        for i in range(60):
            os.symlink("c%d" % (i + 1), w("c%d" % i))
        os.symlink("a.txt", w("c60"))
        target = "c0"
    args = {"path": target}
    if op == "files.write":
        args["content"] = "x"
    t0 = time.time()
    r = server.op(op, args, token=server.token)
    assert time.time() - t0 < 5
    assert_error(r, 403, "policy.path_denied")


@pytest.fixture
def wide(abx, workspace):
    """files.* on the whole machine: only protected areas and the jail stand in the way."""
    # read everywhere; writes only in the workspace (no statement may write where abx's
    # own state lies: its config is under /tmp)
    return abx(files_config(workspace, paths={"read": ["/**"], "write": [workspace + "/**"],
                                              "delete": [workspace + "/**"]}),
               env={"ABX_CANARY_ENV": "canary-env-5521"})


@pytest.mark.parametrize("fd", list(range(0, 12)))
def test_proc_self_fd_magic_links(server, workspace, fd):
    """A link in the workspace to abx's own descriptors. Canonicalization reads a magic
    link's text like any link's (/dev/null, a log file, "socket:[N]" below /proc): the
    result is checked like any other path. Outside the scope → 403; the one kind of
    descriptor inside it is the scope root itself (the jail's directory fd), which is
    then just the workspace."""
    os.symlink("/proc/self/fd/%d" % fd, os.path.join(workspace, "fd"))
    for op in ("files.read", "files.stat", "files.download"):
        r = server.op(op, {"path": "fd"}, token=server.token)
        if r.status_code == 403:
            assert error_code(r) in ("policy.path_not_allowed", "policy.path_denied"), r.text
            continue
        # the workspace directory: files.stat describes it, read and download refuse it
        assert (r.status_code, error_code(r)) in ((200, None), (400, "files.is_a_directory")), (op, r.text[:300])
        assert workspace in r.text and "/proc" not in r.text, r.text[:300]


@pytest.mark.parametrize("path", ["/proc/self/environ", "/proc/thread-self/environ", "/proc/%PID%/mem",
                                  "/proc/%PID%/environ", "/proc/self/fd/../environ",
                                  "/sys/../proc/self/environ", "/dev/../proc/self/environ"])
def test_proc_files_refused(wide, workspace, path):
    path = path.replace("%PID%", str(wide.proc.pid))
    os.symlink(path, os.path.join(workspace, "via"))
    for p in (path, "via"):
        r = wide.op("files.read", {"path": p}, token=ALICE_TOKEN)
        assert_error(r, 403, "policy.path_denied")
        no_leak(r, "canary-env-5521")


@pytest.mark.parametrize("path,canonical", [("/proc/self/cwd/a.txt", "{ws}/a.txt"),
                                            ("/proc/self/root/etc/hostname", "/etc/hostname"),
                                            ("/dev/fd/0", "/dev/null"), ("/dev/stdin", "/dev/null")])
def test_proc_links_are_read_as_their_text(wide, workspace, path, canonical):
    """/proc/self/cwd, /proc/self/root, /dev/fd/N: canonicalization reads a magic link's
    text like any link's; the name it stands for is what the policy checks and the jail
    opens (by that name, never through /proc). Nothing below /proc is ever opened."""
    canonical = canonical.replace("{ws}", workspace)
    r = wide.op("files.stat", {"path": path}, token=ALICE_TOKEN)
    assert r.status_code == 200, r.text[:300]
    assert r.json()["path"] == canonical
    assert not r.json()["path"].startswith("/proc")


# -- hard links -------------------------------------------------------------------------------------------

def test_hard_link_to_denied_file_cannot_be_made_by_a_process(abx, workspace):
    """A process may not make a second name for a denied file (the deny is masked by an
    empty mount: a link across mounts fails), so files ops never see one."""
    with open(os.path.join(workspace, "secret.txt"), "w") as f:
        f.write(SECRET + "\n")
    cfg = files_config(workspace, deny=[{"paths": [workspace + "/secret.txt"]}], extra=[
        {"ops": ["commands.run"], "principals": ["alice"], "paths": [workspace + "/**"], "commands": ["python3 *"]}])
    s = abx(cfg)
    r = s.post("/commands/run", token=ALICE_TOKEN, json_body={"argv": ["python3", "-c",
               "import os\ntry:\n os.link('secret.txt', 'alias.txt'); print('linked')\n"
               "except OSError as e:\n print('refused', e.errno)"]}, timeout=30)
    assert r.status_code == 200, r.text
    assert r.json()["stdout"].startswith("refused"), r.json()
    r = s.get("/files/read", token=ALICE_TOKEN, params={"path": "alias.txt"})
    assert_error(r, 404, "files.not_found")


# -- races: a component swapped for a symlink while the server works through it ---------------------------

RACE_SECONDS = 3.0


def _hammer(url, params, stop, seen, method="GET", body=None):
    sess = requests.Session()
    h = {"Authorization": "Bearer " + ALICE_TOKEN}
    while time.time() < stop:
        if method == "GET":
            r = sess.get(url, params=params, headers=h, timeout=10)
        else:
            r = sess.post(url, json=body, headers=h, timeout=10)
        code = None if r.status_code == 200 else error_code(r)
        key = (r.status_code, code)
        seen[key] = seen.get(key, 0) + 1
        if r.status_code == 200:
            seen.setdefault("bodies", []).append(r.text[:200]) if len(seen.get("bodies", [])) < 2000 else None
        if SECRET in r.text or OUTSIDE in r.text:
            seen.setdefault("leaks", []).append(r.text[:200])


def _swap_file(d, name, link_target, stop, count):
    """Over and over: `name` becomes a symlink to link_target, then a regular file again."""
    p = os.path.join(d, name)
    i = 0
    while time.time() < stop:
        os.symlink(link_target, os.path.join(d, ".tl"))
        os.rename(os.path.join(d, ".tl"), p)
        with open(os.path.join(d, ".tf"), "w") as f:
            f.write("public\n")
        os.rename(os.path.join(d, ".tf"), p)
        i += 1
    count.append(i)


def _exchange(a, b, stop, count):
    """renameat2(RENAME_EXCHANGE) would be atomic; rename through a third name is what
    a plain agent can do and leaves short windows where neither name exists."""
    i = 0
    tmp = a + ".swap"
    while time.time() < stop:
        os.rename(a, tmp)
        os.rename(b, a)
        os.rename(tmp, b)
        i += 1
    count.append(i)


# what a racing client may get besides the plain file: refusals, a name missing for an
# instant, or a canonicalization that met a name changing under it (400 args.invalid)
RACE_REFUSALS = {(403, "policy.path_denied"), (403, "policy.path_not_allowed"), (404, "files.not_found"),
                 (400, "args.invalid")}


def _race(workers, racer):
    stop = time.time() + RACE_SECONDS
    seen = {}
    count = []
    ts = [threading.Thread(target=racer, args=(stop, count))] + \
         [threading.Thread(target=w, args=(stop, seen)) for w in workers]
    for t in ts:
        t.start()
    for t in ts:
        t.join(30)
    return seen, count[0] if count else 0


@pytest.mark.parametrize("target_kind", ["denied_inside", "outside"])
def test_race_file_swapped_for_symlink_during_read(denied, workspace, outside, target_kind):
    d = os.path.join(workspace, "d")
    os.makedirs(d)
    with open(os.path.join(d, "f.txt"), "w") as f:
        f.write("public\n")
    target = "../secret.txt" if target_kind == "denied_inside" else os.path.join(outside, "f.txt")
    url = denied.url + "/files/read"
    workers = [lambda stop, seen: _hammer(url, {"path": "d/f.txt"}, stop, seen) for _ in range(3)]
    seen, swaps = _race(workers, lambda stop, count: _swap_file(d, "f.txt", target, stop, count))
    assert not seen.get("leaks"), seen["leaks"][:3]
    assert swaps > 50, "the racer swapped only %d times" % swaps
    assert seen.get((200, None), 0) > 0, seen   # the plain file was read between swaps
    refused = {k for k in seen if isinstance(k, tuple) and k[0] != 200}
    assert refused <= RACE_REFUSALS, seen


def test_race_directory_swapped_for_symlink_during_read(denied, workspace):
    # "d" and "e" trade places; "e" is a symlink to the denied directory
    d = os.path.join(workspace, "d")
    os.makedirs(d)
    with open(os.path.join(d, "k.txt"), "w") as f:
        f.write("public\n")
    os.symlink("private", os.path.join(workspace, "e"))
    url = denied.url + "/files/read"
    workers = [lambda stop, seen: _hammer(url, {"path": "d/k.txt"}, stop, seen) for _ in range(3)]
    seen, swaps = _race(workers, lambda stop, count: _exchange(d, os.path.join(workspace, "e"), stop, count))
    assert not seen.get("leaks"), seen["leaks"][:3]
    assert swaps > 50
    refused = {k for k in seen if isinstance(k, tuple) and k[0] != 200}
    assert refused <= RACE_REFUSALS, seen


def test_race_directory_swapped_during_write_never_writes_into_denied_dir(denied, workspace):
    d = os.path.join(workspace, "d")
    os.makedirs(d)
    os.symlink("private", os.path.join(workspace, "e"))
    url = denied.url + "/files/write"
    workers = [lambda stop, seen, i=i: _hammer(url, None, stop, seen, method="POST",
                                               body={"path": "d/w%d.txt" % i, "content": "planted"})
               for i in range(3)]
    seen, swaps = _race(workers, lambda stop, count: _exchange(d, os.path.join(workspace, "e"), stop, count))
    assert swaps > 50
    assert sorted(os.listdir(os.path.join(workspace, "private"))) == ["k.txt"], \
        "a write went through the swapped-in link into the denied directory"
    refused = {k for k in seen if isinstance(k, tuple) and k[0] != 200}
    assert refused <= RACE_REFUSALS, seen


def test_race_proc_environ_through_swapped_link(wide, workspace):
    """With a scope of /** the jail root is "/": a link swapped in to /proc/self/environ
    would read abx's own environment if the open followed it."""
    d = os.path.join(workspace, "d")
    os.makedirs(d)
    with open(os.path.join(d, "f.txt"), "w") as f:
        f.write("public\n")
    url = wide.url + "/files/read"
    workers = [lambda stop, seen: _hammer(url, {"path": d + "/f.txt"}, stop, seen) for _ in range(3)]
    seen, swaps = _race(workers, lambda stop, count: _swap_file(d, "f.txt", "/proc/self/environ", stop, count))
    assert swaps > 50
    assert not any("canary-env-5521" in b for b in seen.get("bodies", [])), "abx's environment leaked"
    refused = {k for k in seen if isinstance(k, tuple) and k[0] != 200}
    assert refused <= RACE_REFUSALS, seen


def test_parent_renamed_during_resolution(denied, workspace):
    """A parent directory renamed away and back (and replaced by a link to the denied
    directory) while reads resolve through it: only the public file or a refusal."""
    base = os.path.join(workspace, "p")
    os.makedirs(os.path.join(base, "q"))
    with open(os.path.join(base, "q", "f.txt"), "w") as f:
        f.write("public\n")

    def renamer(stop, count):
        i = 0
        while time.time() < stop:
            os.rename(base, base + ".away")
            os.symlink("private", base)     # relative: workspace/private
            os.unlink(base)
            os.rename(base + ".away", base)
            i += 1
        count.append(i)

    url = denied.url + "/files/read"
    workers = [lambda stop, seen: _hammer(url, {"path": "p/q/f.txt"}, stop, seen) for _ in range(3)]
    seen, n = _race(workers, renamer)
    assert n > 50
    assert not seen.get("leaks"), seen["leaks"][:3]
    refused = {k for k in seen if isinstance(k, tuple) and k[0] != 200}
    assert refused <= RACE_REFUSALS, seen


# -- protected names that do not exist yet, created through abx ------------------------------------------

CREATE_CALLS = [
    ("files.write", {"path": "future.txt", "content": "x"}),
    ("files.write", {"path": "future-dir/a.txt", "content": "x", "make_parents": True}),
    ("files.mkdir", {"path": "future-dir", "parents": True}),
    ("files.mkdir", {"path": "future-dir/deeper", "parents": True}),
    ("files.copy", {"src": "a.txt", "dst": "future.txt"}),
    ("files.copy", {"src": "sub", "dst": "future-dir", "recursive": True}),
    ("files.move", {"src": "b.txt", "dst": "future.txt"}),
    ("files.move", {"src": "sub", "dst": "future-dir"}),
    ("files.write", {"path": "./sub/../future.txt", "content": "x"}),
    ("files.write", {"path": "nonexistent/../future.txt", "content": "x"}),
    ("files.write", {"path": "private/new.txt", "content": "x"}),
    ("files.write", {"path": ".git/hooks/pre-commit", "content": "#!/bin/sh\n", "make_parents": True}),
    ("files.mkdir", {"path": ".git/hooks", "parents": True}),
    ("files.copy", {"src": "a.txt", "dst": ".git/config"}),
]


@pytest.mark.parametrize("op,args", CREATE_CALLS, ids=["%s-%d" % (c[0], i) for i, c in enumerate(CREATE_CALLS)])
def test_protected_name_not_created(denied, workspace, op, args):
    r = call(denied, op, args)
    assert_error(r, 403, "policy.path_denied")
    for name in ("future.txt", "future-dir", ".git"):
        assert not os.path.lexists(os.path.join(workspace, name)), name
    assert sorted(os.listdir(os.path.join(workspace, "private"))) == ["k.txt"]
    assert os.path.exists(os.path.join(workspace, "b.txt")) and os.path.isdir(os.path.join(workspace, "sub"))


def test_protected_name_upload(denied, workspace):
    r = denied.request("PUT", "/files/upload", token=ALICE_TOKEN, params={"path": "future.txt"}, data=b"x" * 10)
    assert_error(r, 403, "policy.path_denied")
    r = denied.request("PUT", "/files/upload", token=ALICE_TOKEN, params={"path": "future-dir/x", "make_parents": "true"},
                       data=b"x")
    assert_error(r, 403, "policy.path_denied")
    assert not os.path.lexists(os.path.join(workspace, "future.txt"))
    assert not os.path.lexists(os.path.join(workspace, "future-dir"))


# -- FIFOs, devices, endless and huge files ---------------------------------------------------------------

NOT_REGULAR_CALLS = [
    ("files.read", {"path": "N"}),
    ("files.download", {"path": "N"}),
    ("files.edit", {"path": "N", "old": "a", "new": "b"}),
    ("files.copy", {"src": "N", "dst": "copied"}),
]


@pytest.mark.parametrize("kind", ["fifo", "fifo_with_writer", "socket"])
@pytest.mark.parametrize("op,args", NOT_REGULAR_CALLS, ids=[c[0] for c in NOT_REGULAR_CALLS])
def test_special_files_never_hang(server, workspace, kind, op, args):
    p = os.path.join(workspace, "N")
    held = []
    if kind == "socket":
        import socket
        so = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        so.bind(p)
        so.listen(1)
        held.append(so)
    else:
        os.mkfifo(p)
        if kind == "fifo_with_writer":   # an endless writer on the other side
            fd = os.open(p, os.O_RDWR | os.O_NONBLOCK)
            os.write(fd, b"a" * 4096)
            held.append(fd)
    try:
        t0 = time.time()
        r = server.op(op, args, token=server.token)
        assert time.time() - t0 < 3, "the call took %.1fs" % (time.time() - t0)
        assert_error(r, 400, "files.not_regular")
        assert not os.path.exists(os.path.join(workspace, "copied"))
    finally:
        for h in held:
            h.close() if hasattr(h, "close") else os.close(h)


@pytest.mark.parametrize("op", ["files.search", "files.find", "files.list", "files.archive"])
def test_walks_skip_fifos_without_hanging(server, workspace, op):
    os.mkfifo(os.path.join(workspace, "sub", "pipe"))
    args = {"files.search": {"path": ".", "pattern": "deep"}, "files.find": {"path": "."},
            "files.list": {"path": ".", "recursive": True}, "files.archive": {"sources": ["sub"]}}[op]
    t0 = time.time()
    r = server.op(op, args, token=server.token)
    assert time.time() - t0 < 5
    assert r.status_code == 200, r.text[:300]


@pytest.mark.parametrize("dev", ["/dev/zero", "/dev/urandom", "/dev/null"])
@pytest.mark.parametrize("op", ["files.read", "files.download", "files.copy"])
def test_endless_devices_refused(wide, workspace, dev, op):
    args = {"src": dev, "dst": os.path.join(workspace, "copied")} if op == "files.copy" else {"path": dev}
    t0 = time.time()
    r = wide.op(op, args, token=ALICE_TOKEN)
    assert time.time() - t0 < 3
    assert_error(r, 400, "files.not_regular")
    assert not os.path.exists(os.path.join(workspace, "copied"))


@pytest.mark.parametrize("op", ["files.read", "files.edit", "files.search"])
def test_huge_sparse_file_bounded(server, workspace, op):
    """A 1 TiB sparse file reads like an endless stream of zeros: answers stay bounded
    in time and memory (read caps at max_bytes, edit and search refuse or skip)."""
    p = os.path.join(workspace, "huge.bin")
    with open(p, "wb") as f:
        f.truncate(1 << 40)
    args = {"files.read": {"path": "huge.bin", "encoding": "base64"},
            "files.edit": {"path": "huge.bin", "old": "a", "new": "b"},
            "files.search": {"path": ".", "pattern": "needle"}}[op]
    t0 = time.time()
    r = server.op(op, args, token=server.token)
    assert time.time() - t0 < 20
    assert rss_kib(server.proc.pid) < 200 * 1024
    if op == "files.read":
        assert r.status_code == 200, r.text[:300]
        j = r.json()
        assert j["truncated"] is True and len(base64.b64decode(j["content"])) <= 16 << 20
    elif op == "files.edit":
        assert_error(r, 413, "limit.max_bytes")
    else:
        assert r.status_code == 200, r.text[:300]
    assert os.path.getsize(p) == 1 << 40
