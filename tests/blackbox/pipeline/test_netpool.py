"""Network namespaces made ahead (src/sandbox/netpool.c, issue 14).

A process without the network gets a namespace of its own. abx makes a few ahead and
hands each to one process tree; a namespace comes back for a later process only when
every process of its tree is gone and it holds no socket. These tests play the attacker
who wants a later call (another agent's, another principal's) to meet something left in
"its own" namespace: a listener, an abstract Unix socket, a TIME_WAIT, a process still
running."""
import time

import pytest

from abxtest import ALICE_TOKEN, sha256_hex, wait_for

BOB_TOKEN = "bob-netpool-token-7f3a"
CMDS = ["python3 *", "sh *", "readlink *"]


def config(ws):
    paths = {"read": [ws + "/**"], "write": [ws + "/**"], "delete": [ws + "/**"]}
    stmt = {"ops": ["commands.*", "process.*"], "principals": ["alice", "bob"], "paths": paths, "commands": CMDS}
    return {"workspace": ws, "terminal_listen": "off",
            "auth": {"tokens": [{"principal": "alice", "roles": ["agent"], "token_sha256": sha256_hex(ALICE_TOKEN)},
                                {"principal": "bob", "roles": ["agent"], "token_sha256": sha256_hex(BOB_TOKEN)}]},
            "policy": {"allow": [{"ops": ["core.*", "system.info"], "principals": ["*"]}, stmt]}}


@pytest.fixture
def srv(abx, workspace):
    s = abx(config(workspace))
    info = s.get("/system/info", token=ALICE_TOKEN).json()["confinement"]
    if not info.get("network_namespace"):
        pytest.skip("no network namespaces here: %s" % info.get("missing"))
    s.netns = info["network_namespaces"]
    return s


def run(s, argv, token=ALICE_TOKEN):
    r = s.post("/commands/run", token=token, json_body={"argv": argv}, timeout=30)
    assert r.status_code == 200, r.text[:800]
    j = r.json()
    assert j["status"] == "completed" and j["exit_code"] == 0, (j["stdout"], j["stderr"])
    return j["stdout"]


def netns(s, token=ALICE_TOKEN):
    out = run(s, ["readlink", "/proc/self/ns/net"], token)
    assert out.startswith("net:["), out
    return out.strip()


def py(s, code, *args, token=ALICE_TOKEN):
    return run(s, ["python3", "-c", code] + list(args), token)


def test_namespaces_are_reused_one_tree_at_a_time(srv):
    """Sequential calls share a few namespaces (none is torn down and made again per
    call); a namespace in use by a running process is never handed to another one."""
    seen = [netns(srv) for _ in range(8)]
    info = srv.get("/system/info", token=ALICE_TOKEN).json()["confinement"]["network_namespaces"]
    if not info["reuse"]:
        assert len(set(seen)) == len(seen), seen  # made ahead, never reused
        pytest.skip("namespaces are not reused here (no cgroup, or Landlock < 6)")
    assert len(set(seen)) < len(seen), seen
    assert info["reused"] >= 1 and info["made_ahead"] >= 1, info

    # a background process holds its namespace while it runs
    r = srv.post("/process", token=ALICE_TOKEN,
                 json_body={"argv": ["sh", "-c", "readlink /proc/self/ns/net; sleep 30"]})
    assert r.status_code == 200, r.text
    pid = r.json()["pid"]
    try:
        def held():
            o = srv.get("/process/%d/output" % pid, token=ALICE_TOKEN).json()["stdout"]
            return o.strip() if o.startswith("net:[") else None
        busy = wait_for(held, timeout=10)
        assert busy
        others = [netns(srv, token) for token in (ALICE_TOKEN, BOB_TOKEN) * 4]
        assert busy not in others, (busy, others)
    finally:
        r = srv.post("/process/%d/signal" % pid, token=ALICE_TOKEN, json_body={"signal": "KILL"})
        assert r.status_code == 200, r.text


LEFTOVER = """
import os, socket, sys, time
port = int(sys.argv[1])
if os.fork() == 0:
    os.setsid()
    if os.fork() == 0:
        s = socket.socket(); s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        s.bind(("127.0.0.1", port)); s.listen(8)
        u = socket.socket(socket.AF_UNIX); u.bind("\\0abx-netpool-left"); u.listen(8)
        time.sleep(60)
    os._exit(0)
time.sleep(0.5)
print(open("/proc/self/ns/net").name, os.readlink("/proc/self/ns/net"))
"""

PROBE = """
import os, socket, sys
port = int(sys.argv[1])
r = []
c = socket.socket()
c.settimeout(2)
r.append("tcp-open" if c.connect_ex(("127.0.0.1", port)) == 0 else "tcp-refused")
u = socket.socket(socket.AF_UNIX)
try:
    u.connect("\\0abx-netpool-left"); r.append("unix-open")
except OSError:
    r.append("unix-refused")
print(os.readlink("/proc/self/ns/net"), " ".join(r))
"""


def test_a_later_call_never_meets_what_an_earlier_one_left(srv):
    """A call forks a session leader's child that listens on TCP and on an abstract Unix
    socket, and returns. Its tree is killed with it; the calls after it — the same
    principal's and another's — find nothing listening, whichever namespace they get."""
    port = 20000 + (int(time.time() * 1000) % 20000)
    left = py(srv, LEFTOVER, str(port)).split()[-1]
    assert left.startswith("net:["), left
    for token in (ALICE_TOKEN, BOB_TOKEN) * 4:
        ns, tcp, unix = py(srv, PROBE, str(port), token=token).split()
        assert (tcp, unix) == ("tcp-refused", "unix-refused"), (ns, left)


# whether this namespace holds a TIME_WAIT on the port, as the kernel lists it (state 06)
SEES_TW = """
def sees_tw(port):
    return any(int(f[1].split(":")[1], 16) == port and f[3] == "06"
               for name in ("/proc/self/net/tcp", "/proc/self/net/tcp6") if os.path.exists(name)
               for f in (l.split() for l in open(name).readlines()[1:]))
"""

TIME_WAIT = """
import os, socket, sys
""" + SEES_TW + """
s = socket.socket(); s.bind(("127.0.0.1", 0)); s.listen(1)
port = s.getsockname()[1]
c = socket.create_connection(("127.0.0.1", port)); a, _ = s.accept()
a.close()           # the server closes first: its side of the port goes to TIME_WAIT
c.recv(1); c.close(); s.close()
print(os.readlink("/proc/self/ns/net"), port, "time_wait" if sees_tw(port) else "clean")
"""

BIND = """
import os, socket, sys
""" + SEES_TW + """
port = int(sys.argv[1])
tw = sees_tw(port)
s = socket.socket()   # no SO_REUSEADDR: a TIME_WAIT on the port would refuse it
try:
    s.bind(("127.0.0.1", port)); s.listen(1); r = "bound"
except OSError as e:
    r = "refused-%d" % e.errno
print(os.readlink("/proc/self/ns/net"), r, "time_wait" if tw else "clean")
"""


def test_a_namespace_with_a_socket_left_is_not_reused(srv):
    """A connection in TIME_WAIT outlives its process. The namespace that holds it is
    dropped, not reused: no later call sees it, and each can bind that port as it could
    in a new namespace. (Which namespace a call got is told by what it finds, not by its
    inode number: the kernel gives a freed namespace's number to the next one made.)"""
    dirty, port, seen = py(srv, TIME_WAIT).split()
    assert seen == "time_wait", "the probe does not see the TIME_WAIT it made"
    for token in (ALICE_TOKEN, BOB_TOKEN) * 4:
        ns, what, tw = py(srv, BIND, port, token=token).split()[:3]
        assert (what, tw) == ("bound", "clean"), (ns, dirty, port, what, tw)
