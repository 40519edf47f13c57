"""Helpers only the attack corpus (tests/security) uses: configs, raw-socket HTTP and
small predicates. What both suites share is in tests/pylib/abxtest.py."""
import os
import socket
import time

import abxtest as bb
from abxtest import RawResponse, tokens


def files_config(ws, paths=None, deny=None, extra=None, top=None, admin=False):
    """alice: files.* on paths (default the workspace), core.* for everyone."""
    allow = [{"ops": ["core.*"], "principals": ["*"]},
             {"ops": ["files.*"], "principals": ["alice"], "paths": paths or [ws + "/**"]}]
    if admin:
        allow.append({"ops": ["system.policy.reload"], "principals": ["root"]})
    policy = {"allow": allow + list(extra or [])}
    if deny:
        policy["deny"] = deny
    cfg = {"workspace": ws, "terminal_listen": "off", "ledger": {"enabled": False},
           "auth": {"tokens": tokens("alice", "bob", *(["root"] if admin else []))}, "policy": policy}
    cfg.update(top or {})
    return cfg


def raw_exchange(port, data, timeout=3.0, linger=1.0):
    """Send bytes on a fresh connection; read until the server closes it or `linger`
    seconds pass without data. Returns (bytes received, closed_by_server)."""
    c = socket.create_connection(("127.0.0.1", port), timeout=timeout)
    out = b""
    closed = False
    try:
        c.sendall(data)
        c.settimeout(linger)
        deadline = time.time() + timeout
        while time.time() < deadline:
            try:
                d = c.recv(65536)
            except socket.timeout:
                break
            except ConnectionResetError:
                closed = True
                break
            if not d:
                closed = True
                break
            out += d
    finally:
        c.close()
    return out, closed


def responses(data):
    """Split raw bytes into RawResponse values (by status lines; bodies carry Content-Length)."""
    out = []
    while data.startswith(b"HTTP/"):
        head, sep, rest = data.partition(b"\r\n\r\n")
        if not sep:
            break
        n = 0
        chunked = False
        for ln in head.split(b"\r\n")[1:]:
            k, _, v = ln.partition(b":")
            if k.strip().lower() == b"content-length":
                n = int(v.strip())
            if k.strip().lower() == b"transfer-encoding" and b"chunked" in v.lower():
                chunked = True
        if chunked:
            end = rest.find(b"\r\n0\r\n\r\n")
            n = len(rest) if end < 0 else end + 7
        out.append(RawResponse(head + b"\r\n\r\n" + rest[:n]))
        data = rest[n:]
    return out




def world_readable_dir(tmp_path, name):
    """A directory outside the workspace whose contents any uid could read: only abx's
    policy and the kernel's confinement stand between a client and it."""
    d = tmp_path / name
    d.mkdir()
    os.chmod(str(tmp_path), 0o755)
    os.chmod(str(d), 0o755)
    return d


def make_workspace(root):
    """The same tree as the black-box `workspace` fixture, under root."""
    ws = os.path.join(str(root), "ws")
    os.makedirs(os.path.join(ws, "sub"))
    for name, text in (("a.txt", "hello\n"), ("b.txt", "line1\nline2\nline3\nline4\nline5\n"),
                       ("sub/c.txt", "deep\n"), (".hidden", "secret-ish\n")):
        with open(os.path.join(ws, name), "w") as f:
            f.write(text)
    return os.path.realpath(ws)


def module_server(tmp_path_factory, workspace, config=None):
    """Start one server for a whole module (a generator for a module-scoped fixture):
    attack files whose cases only send requests share it, so the suite does not pay a
    server start per case. Stopped at the end of the module; a sanitizer report on its
    stderr fails the module's last test."""
    import pytest
    d = str(tmp_path_factory.mktemp("shared-srv"))
    s = bb.AbxServer(d, config=config, workspace=workspace, use_workspace_flag=config is None)
    s.start()
    try:
        yield s
    finally:
        try:
            s.stop()
        finally:
            s.kill()
        rep = bb.sanitizer_report(s.stderr())
        if rep:
            pytest.fail("%s in server stderr:\n%s" % (rep, s.stderr()[-4000:]))
