"""files.extract through POST /ops: tar, tar.gz and zip archives made here with Python's
tarfile and zipfile unpack below dest, all or nothing. Malicious archives (zip-slip with
'..' and absolute names, symlinks and hardlinks leading out, a symlink followed by a file
written through it, devices) are refused with files.unsafe_archive and leave dest exactly
as it was; so do the limits (limit.max_entries, limit.max_bytes), a name already in dest
(files.exists) and corrupt archives (files.bad_archive)."""
import io
import os
import stat
import tarfile
import zipfile

import pytest

from abxtest import ALICE_TOKEN, assert_error, multi_config


def snapshot(root):
    """Every path below root (links not followed), with its type."""
    out = {}
    for d, dirs, files in os.walk(root):
        for n in dirs + files:
            p = os.path.join(d, n)
            out[os.path.relpath(p, root)] = stat.S_IFMT(os.lstat(p).st_mode)
    return out


def tar_bytes(members, mode="w"):
    """members: (name, kind, payload) with kind file|dir|symlink|hardlink|fifo|chr."""
    buf = io.BytesIO()
    with tarfile.open(fileobj=buf, mode=mode, format=tarfile.PAX_FORMAT) as t:
        for name, kind, payload in members:
            ti = tarfile.TarInfo(name)
            ti.mode = 0o644
            if kind == "file":
                data = payload if isinstance(payload, bytes) else payload.encode()
                ti.size = len(data)
                t.addfile(ti, io.BytesIO(data))
                continue
            ti.type = {"dir": tarfile.DIRTYPE, "symlink": tarfile.SYMTYPE, "hardlink": tarfile.LNKTYPE,
                       "fifo": tarfile.FIFOTYPE, "chr": tarfile.CHRTYPE}[kind]
            if kind in ("symlink", "hardlink"):
                ti.linkname = payload
            if kind == "dir":
                ti.mode = 0o755
            t.addfile(ti)
    return buf.getvalue()


def zip_bytes(members):
    buf = io.BytesIO()
    with zipfile.ZipFile(buf, "w", zipfile.ZIP_DEFLATED) as z:
        for name, kind, payload in members:
            zi = zipfile.ZipInfo(name)
            zi.create_system = 3
            if kind == "file":
                zi.external_attr = (stat.S_IFREG | 0o640) << 16
                z.writestr(zi, payload)
            elif kind == "dir":
                zi.external_attr = (stat.S_IFDIR | 0o755) << 16
                z.writestr(zi, b"")
            elif kind == "symlink":
                zi.external_attr = (stat.S_IFLNK | 0o777) << 16
                z.writestr(zi, payload)
    return buf.getvalue()


def put(workspace, name, data):
    with open(os.path.join(workspace, name), "wb") as f:
        f.write(data)


def extract(server, **body):
    return server.op("files.extract", body, token=server.token)


GOOD = [("proj", "dir", None), ("proj/a.txt", "file", "alpha\n"), ("proj/sub/b.txt", "file", "beta\n"),
        ("proj/link", "symlink", "sub/b.txt"), ("proj/up", "symlink", "../proj/a.txt"),
        ("proj/hard", "hardlink", "proj/a.txt")]


@pytest.mark.parametrize("kind", ["tar", "tar.gz", "zip"])
def test_extracts_each_format(server, workspace, kind):
    if kind == "zip":
        data = zip_bytes([m for m in GOOD if m[1] != "hardlink"])
    else:
        data = tar_bytes(GOOD, "w:gz" if kind == "tar.gz" else "w")
    put(workspace, "arc", data)
    r = extract(server, path="arc", dest="out")           # dest is created
    assert r.status_code == 200, r.text
    j = r.json()
    assert j["format"] == kind and j["dest"] == os.path.join(workspace, "out")
    out = os.path.join(workspace, "out", "proj")
    assert open(os.path.join(out, "a.txt")).read() == "alpha\n"
    assert open(os.path.join(out, "sub", "b.txt")).read() == "beta\n"
    assert os.readlink(os.path.join(out, "link")) == "sub/b.txt"
    assert open(os.path.join(out, "up")).read() == "alpha\n"
    assert (j["symlinks"], j["bytes"]) == (2, 11)
    if kind != "zip":
        assert os.stat(os.path.join(out, "hard")).st_ino == os.stat(os.path.join(out, "a.txt")).st_ino
        assert j["hardlinks"] == 1 and j["files"] == 2
    else:
        assert stat.S_IMODE(os.stat(os.path.join(out, "a.txt")).st_mode) == 0o640
    assert not [n for n in os.listdir(os.path.join(workspace, "out")) if n.endswith(".abx-tmp")]
    # the same again into the same dest: its top-level name exists, nothing changes
    before = snapshot(workspace)
    r = extract(server, path="arc", dest="out")
    assert_error(r, 409, "files.exists")
    assert snapshot(workspace) == before


def test_extract_into_the_workspace_root_and_a_bad_format(server, workspace):
    put(workspace, "one.tar", tar_bytes([("fresh.txt", "file", "x")]))
    r = extract(server, path="one.tar", dest=".")
    assert r.status_code == 200, r.text
    assert open(os.path.join(workspace, "fresh.txt")).read() == "x"
    assert_error(extract(server, path="one.tar", dest="o2", format="zip"), 400, "files.bad_archive")
    assert not os.path.exists(os.path.join(workspace, "o2"))


MALICIOUS = {
    "dotdot": [("ok.txt", "file", "fine"), ("../evil.txt", "file", "x")],
    "dotdot_inner": [("a/../../evil.txt", "file", "x")],
    "absolute": [("/tmp/abx-extract-evil.txt", "file", "x")],
    "symlink_abs": [("l", "symlink", "/etc")],
    "symlink_up": [("d/l", "symlink", "../../outside")],
    "symlink_dot_then_up": [("r", "symlink", "."), ("x", "symlink", "r/..")],
    "write_through_symlink": [("l", "symlink", "sub"), ("sub", "dir", None), ("l/x.txt", "file", "x")],
    "write_through_symlink_out": [("l", "symlink", "/tmp"), ("l/abx-evil.txt", "file", "x")],
    "hardlink_out": [("h", "hardlink", "/etc/passwd")],
    "hardlink_dotdot": [("h", "hardlink", "../secret.txt")],
    "hardlink_to_symlink": [("l", "symlink", "a.txt"), ("a.txt", "file", "x"), ("d/h", "hardlink", "l")],
    "fifo": [("p", "fifo", None)],
    "device": [("c", "chr", None)],
}


@pytest.mark.parametrize("case", sorted(MALICIOUS))
def test_malicious_tar_is_refused_and_nothing_is_written(server, workspace, tmp_path, case):
    with open(os.path.join(str(tmp_path), "secret.txt"), "w") as f:
        f.write("secret")
    put(workspace, "evil.tar", tar_bytes(MALICIOUS[case]))
    os.mkdir(os.path.join(workspace, "dst"))
    # outside the workspace: all but the server's own state (it writes its url file when ready)
    others = lambda: {k: v for k, v in snapshot(str(tmp_path)).items() if not k.startswith("srv")}
    before, outside = snapshot(workspace), others()
    r = extract(server, path="evil.tar", dest="dst")
    j = assert_error(r, 400, "files.unsafe_archive")
    assert "nothing was extracted" in j["error"]["message"]
    assert snapshot(workspace) == before
    assert others() == outside
    assert not os.path.exists("/tmp/abx-extract-evil.txt") and not os.path.exists("/tmp/abx-evil.txt")
    # into a dest that does not exist yet: it is not left behind either
    r = extract(server, path="evil.tar", dest="newdst")
    assert_error(r, 400, "files.unsafe_archive")
    assert not os.path.exists(os.path.join(workspace, "newdst"))


@pytest.mark.parametrize("members", [
    [("../evil.txt", "file", b"x")],
    [("/abs.txt", "file", b"x")],
    [("l", "symlink", b"../../x")],
    [("l", "symlink", b"/etc"), ("l/passwd", "file", b"x")],
])
def test_malicious_zip_is_refused(server, workspace, members):
    put(workspace, "evil.zip", zip_bytes(members))
    before = snapshot(workspace)
    assert_error(extract(server, path="evil.zip", dest="z"), 400, "files.unsafe_archive")
    assert snapshot(workspace) == before


def test_limits_leave_nothing(server, workspace):
    put(workspace, "many.tar", tar_bytes([("m/%d" % i, "file", "x") for i in range(5)]))
    assert_error(extract(server, path="many.tar", dest="m1", max_entries=3), 413, "limit.max_entries")
    put(workspace, "big.tar.gz", tar_bytes([("big.bin", "file", b"\0" * 200000)], "w:gz"))
    assert_error(extract(server, path="big.tar.gz", dest="m2", max_bytes=100000), 413, "limit.max_bytes")
    assert not os.path.exists(os.path.join(workspace, "m1")) and not os.path.exists(os.path.join(workspace, "m2"))
    assert extract(server, path="many.tar", dest="m3", max_entries=6).status_code == 200


def test_policy_limits_apply(abx, workspace):
    s = abx(multi_config().replace('      paths: ["{ws}/**"]\n',
                                   '      paths: ["{ws}/**"]\n      limits: {max_entries: 2}\n'))
    put(workspace, "three.tar", tar_bytes([("t/a", "file", "1"), ("t/b", "file", "2"), ("t/c", "file", "3")]))
    r = s.op("files.extract", {"path": "three.tar", "dest": "t1"}, token=ALICE_TOKEN)
    assert_error(r, 413, "limit.max_entries")  # the policy's 2, below the argument's default
    assert not os.path.exists(os.path.join(workspace, "t1"))
    # outside the scope: the policy refuses before anything is looked at
    r = s.op("files.extract", {"path": "three.tar", "dest": "/tmp"}, token=ALICE_TOKEN)
    assert r.status_code == 403


def test_corrupt_archives(server, workspace):
    good = tar_bytes([("c/a.txt", "file", "a" * 5000)], "w:gz")
    put(workspace, "trunc.tar.gz", good[: len(good) // 2])
    put(workspace, "junk.bin", os.urandom(3000))
    z = bytearray(zip_bytes([("c/a.txt", "file", b"hello world " * 50)]))
    z[z.index(b"PK\x01\x02") + 16] ^= 0xFF  # the central directory's CRC-32
    put(workspace, "badcrc.zip", bytes(z))
    put(workspace, "short.tar", tar_bytes([("c/a.txt", "file", "a" * 5000)])[:1500])
    for name in ("trunc.tar.gz", "junk.bin", "badcrc.zip", "short.tar"):
        before = snapshot(workspace)
        r = extract(server, path=name, dest="c_out")
        assert_error(r, 400, "files.bad_archive")
        assert snapshot(workspace) == before, name
    assert_error(extract(server, path="nope.tar", dest="x"), 404, "files.not_found")


def test_a_denied_member_refuses_the_archive(abx, workspace):
    """Each member's final path is decided by the policy as `dest`: a deny statement on
    one member refuses the whole archive before anything lands."""
    s = abx(multi_config(deny='    - ops: ["files.*"]\n      paths: ["{ws}/**/secret/**"]\n'))
    put(workspace, "mixed.tar", tar_bytes([("pkg/ok.txt", "file", "1"), ("pkg/secret/key", "file", "2")]))
    before = snapshot(workspace)
    r = s.op("files.extract", {"path": "mixed.tar", "dest": "out"}, token=ALICE_TOKEN)
    assert r.status_code == 403, r.text
    assert "pkg/secret/key" in r.text
    assert snapshot(workspace) == before


def test_zip_as_zipfile_writes_by_default(server, workspace):
    """zipfile.writestr(name, data) sets unix permission bits without a file type; a
    member is a file then (and a zip from a non-unix host has no mode at all)."""
    buf = io.BytesIO()
    with zipfile.ZipFile(buf, "w", zipfile.ZIP_DEFLATED) as z:
        z.writestr("plain/a.txt", "a" * 3000)
        z.writestr("plain/dir/", "")
        zi = zipfile.ZipInfo("plain/dos.txt")
        zi.create_system = 0
        z.writestr(zi, "dos")
    put(workspace, "plain.zip", buf.getvalue())
    r = extract(server, path="plain.zip", dest="pz")
    assert r.status_code == 200, r.text
    assert (r.json()["files"], r.json()["directories"]) == (2, 1)
    assert open(os.path.join(workspace, "pz", "plain", "a.txt")).read() == "a" * 3000
    assert os.path.isdir(os.path.join(workspace, "pz", "plain", "dir"))
    assert open(os.path.join(workspace, "pz", "plain", "dos.txt")).read() == "dos"
