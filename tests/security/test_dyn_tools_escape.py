"""Dynamic tools (tools.define, docs/dynamic-tools.md) trying to get out: model-authored code
runs only in a fresh confined process, never inside abx, and never with more than its caller
may do. Each case is an attempt from inside a tool's code: reading /etc/shadow, opening a
socket (to abx's own port too), reaching a path the author lacks (directly and through
host.*), writing without the effect, starving memory; and, in the minimal tier (no Landlock),
the definition itself fails closed with 503 sandbox.unavailable."""
import os
import socket
import threading

import pytest

import abxtest as bb
from abxtest import ALICE_TOKEN, assert_error, tokens
from test_tiers import Tier, wrapper

PROBE = {
    "name": "probe",
    "description": "Run a probe and say what happened",
    "language": "python",
    "parameters": {"type": "object", "properties": {"what": {"type": "string"}, "arg": {"type": "string"}},
                   "required": ["what"], "additionalProperties": False},
    "code": r'''
import os, socket
def run(what, arg=""):
    try:
        if what == "read":
            with open(arg) as f:
                return {"read": f.read()}
        if what == "write":
            with open(arg, "w") as f:
                f.write("x")
            return {"wrote": arg}
        if what == "connect":
            addr, port = arg.split(":")
            socket.create_connection((addr, int(port)), timeout=2).close()
            return {"connected": arg}
        if what == "host_read":
            return {"host": host.call("files.read", path=arg)}
        if what == "whoami":
            return {"principal": host.call("core.capabilities")["principal"]}
        if what == "explain":
            return {"host": host.call("core.explain", op="files.read", args={"path": arg})}
        if what == "memory":
            blob = bytearray(2 * 1024 * 1024 * 1024)
            return {"allocated": len(blob)}
    except HostError as e:
        return {"host_refused": str(e)}
    except BaseException as e:
        return {"refused": type(e).__name__, "why": str(e)[:200]}
    return {"unknown": what}
''',
}


def config(ws, outside, net=False):
    stmt = {"ops": ["tools.*", "files.*"], "principals": ["alice"],
            "paths": {"read": [ws + "/**"], "write": [ws + "/**"]}}
    if net:
        stmt["net"] = True
    return {"workspace": ws, "terminal_listen": "off", "ledger": {"enabled": False},
            "auth": {"tokens": tokens("alice", "bob")},
            "policy": {"allow": [{"ops": ["core.*"], "principals": ["*"]}, stmt]}}


@pytest.fixture
def env(abx, workspace, tmp_path):
    outside = tmp_path / "outside"
    outside.mkdir()
    (outside / "secret.txt").write_text("outside-secret-7731\n")
    s = abx(config(workspace, str(outside)))
    return s, workspace, str(outside)


def define(s, **extra):
    d = dict(PROBE)
    d.update(extra)
    r = s.op("tools.define", d, token=ALICE_TOKEN)
    assert r.status_code == 200, r.text
    return r.json()["hash"]


def probe(s, what, arg="", name="probe"):
    r = s.op("dyn." + name, {"what": what, "arg": arg}, token=ALICE_TOKEN)
    assert r.status_code == 200, r.text
    return r.json()


def test_etc_shadow_is_not_readable(env):
    s, ws, _ = env
    define(s, paths={"read": ["/etc", ws]})
    r = probe(s, "read", "/etc/shadow")
    assert "refused" in r and "root:" not in str(r), r
    assert probe(s, "read", ws + "/a.txt") == {"read": "hello\n"}     # the probe itself works
    h = probe(s, "host_read", "/etc/shadow")
    assert "policy.path_not_allowed" in str(h) and "root:" not in str(h), h


def test_sockets_reach_nothing(env):
    s, ws, _ = env
    # even a definition that says net (effect net) gets no network without the statement's net: true
    define(s, effects=["read", "net"], net=True)
    lst = socket.socket()
    lst.bind(("127.0.0.1", 0))
    lst.listen(4)
    lst.settimeout(3)
    got = []

    def accept():
        try:
            got.append(lst.accept()[0])
        except OSError:
            pass
    t = threading.Thread(target=accept)
    t.start()
    r = probe(s, "connect", "127.0.0.1:%d" % lst.getsockname()[1])
    t.join()
    lst.close()
    assert "refused" in r and not got, (r, got)
    r = probe(s, "connect", "127.0.0.1:%d" % s.port)    # abx's own listener
    assert "refused" in r, r


def test_a_tool_cannot_exceed_its_author(env):
    s, ws, outside = env
    # the definition asks for a folder the author's statement does not grant: the intersection is empty
    define(s, paths={"read": [outside, ws]})
    r = probe(s, "read", outside + "/secret.txt")
    assert "refused" in r and "outside-secret" not in str(r), r
    h = probe(s, "host_read", outside + "/secret.txt")
    assert "policy.path_not_allowed" in str(h) and "outside-secret" not in str(h), h
    # host.* calls run as the author, through the pipeline: what alice has mounted, no more
    assert probe(s, "whoami") == {"principal": "alice"}
    assert "op.not_enabled" in str(probe(s, "explain", ws + "/a.txt"))
    # only the effect write gives write access, and only inside the statement's write scope
    r = probe(s, "write", ws + "/made-by-tool.txt")
    assert "refused" in r and not os.path.exists(ws + "/made-by-tool.txt"), r
    define(s, name="writer", effects=["read", "write"], paths={"read": [ws], "write": [ws, outside]})
    r = s.op("dyn.writer", {"what": "write", "arg": ws + "/made-by-tool.txt"}, token=ALICE_TOKEN).json()
    assert r == {"wrote": ws + "/made-by-tool.txt"}, r
    r = s.op("dyn.writer", {"what": "write", "arg": outside + "/planted.txt"}, token=ALICE_TOKEN).json()
    assert "refused" in r and not os.path.exists(outside + "/planted.txt"), r


def test_resource_abuse_is_contained(env):
    s, ws, _ = env
    define(s, paths={"read": [ws]})
    r = s.op("dyn.probe", {"what": "memory"}, token=ALICE_TOKEN)
    # the cgroup's memory cap kills it (502) or the allocation fails inside: never abx
    assert r.status_code in (200, 502), r.text
    if r.status_code == 200:
        assert "refused" in r.json(), r.text
    else:
        assert_error(r, 502, "op.worker_failed")
    assert s.get("/health").status_code == 200
    assert probe(s, "read", ws + "/a.txt") == {"read": "hello\n"}


@pytest.fixture
def minimal():
    if os.geteuid() != 0:
        pytest.skip("the tier wrapper drops from root to uid 65534")
    if not wrapper():
        pytest.skip("abx-tierwrap is not built (set ABX_TIERWRAP)")
    t = Tier("minimal")
    yield t
    t.close()


def test_without_confinement_a_definition_fails_closed(minimal):
    ws = minimal.workspace()
    cfg = config(ws, ws)
    cfg["confine"] = "best_effort"      # even where commands would run unconfined
    s = minimal.server(cfg)
    r = s.op("tools.define", PROBE, token=ALICE_TOKEN)
    assert_error(r, 503, "sandbox.unavailable")
    assert "landlock" in r.json()["error"]["message"], r.text
    assert s.op("tools.list", {}, token=ALICE_TOKEN).json()["tools"] == []
    assert bb.wait_for(lambda: s.get("/health").status_code == 200)


def listener():
    lst = socket.socket()
    lst.bind(("127.0.0.1", 0))
    lst.listen(4)
    lst.settimeout(3)
    got = []

    def accept():
        try:
            got.append(lst.accept()[0])
        except OSError:
            pass
    t = threading.Thread(target=accept)
    t.start()
    return lst, t, got


def test_the_network_needs_both_the_definition_and_the_statement(abx, workspace, tmp_path):
    s = abx(config(workspace, str(tmp_path), net=True))
    define(s)                                                   # no net in the definition
    define(s, name="netted", effects=["read", "net"], net=True)
    lst, t, got = listener()
    addr = "127.0.0.1:%d" % lst.getsockname()[1]
    r = probe(s, "connect", addr)
    assert "refused" in r, r
    r = probe(s, "connect", addr, name="netted")
    t.join()
    lst.close()
    assert r == {"connected": addr} and got, (r, got)
    for c in got:
        c.close()
