"""Issue 12, classes 3 and 4: no process outlives its call, and the kernel surfaces an
empty network namespace does not close.

Class 3: with a statement timeout, `kill -9` of abx (and a restart) left a call's
processes running — a double-forked, setsid'd grandchild that ignores SIGTERM escapes the
process group and PDEATHSIG. Now the watchdog (src/sandbox/watchdog.c) kills every
registered group and cgroup when abx dies and at the deadline when abx cannot (stopped
here with SIGSTOP), and a restarted abx empties the cgroups a dead one left.

Class 4: a confined child read the host user's keyring with keyctl, and
socket(AF_VSOCK) worked under `net: false`. Now the seccomp filter of every process
refuses keyctl/add_key/request_key and every address family its statement does not grant."""
import ctypes
import errno
import os
import random
import signal
import time

import pytest

from abxtest import ALICE_TOKEN, pgrep, tokens, wait_for
from secutil import make_workspace


def config(ws, timeout=None, net=None):
    stmt = {"ops": ["commands.*", "process.*"], "principals": ["alice"],
            "paths": {"read": [ws + "/**"], "write": [ws + "/**"]}, "commands": ["python3 *"]}
    if timeout:
        stmt["limits"] = {"timeout": timeout}
    if net is not None:
        stmt["net"] = net
    return {"workspace": ws, "terminal_listen": "off", "ledger": {"enabled": False},
            "auth": {"tokens": tokens("alice", "bob")},
            "policy": {"allow": [{"ops": ["core.*"], "principals": ["*"]}, stmt]}}


# -- class 3: lifetimes ---------------------------------------------------------------------

# The first process double-forks a grandchild that leaves the session and the process
# group and ignores the polite signals, then waits (its own life is the second argument).
DAEMON = ("import os, sys, time, signal\n"
          "if os.fork() == 0:\n"
          "    os.setsid()\n"
          "    if os.fork() == 0:\n"
          "        signal.signal(signal.SIGTERM, signal.SIG_IGN)\n"
          "        signal.signal(signal.SIGHUP, signal.SIG_IGN)\n"
          "        os.execvp('sleep', ['sleep', sys.argv[1]])\n"
          "    os._exit(0)\n"
          "time.sleep(float(sys.argv[2]))\n")


def marker():
    return "%d.%03d" % (random.randint(300, 999), random.randint(0, 999))


def start_daemon(s, how, m):
    """Start DAEMON through commands.run (detached by a soft timeout) or process.start."""
    argv = ["python3", "-c", DAEMON, m, "600"]
    if how == "run":
        r = s.post("/commands/run", token=ALICE_TOKEN, json_body={"argv": argv, "timeout": 0.5}, timeout=30)
        assert r.status_code == 200 and r.json()["status"] == "running", r.text
    else:
        r = s.post("/process", token=ALICE_TOKEN, json_body={"argv": argv})
        assert r.status_code == 200, r.text
    assert wait_for(lambda: pgrep("sleep " + m), timeout=5), "the grandchild never started"


def _stat(pid):
    """(comm, ppid, pgid) of a process, or None once it is gone."""
    try:
        with open("/proc/%s/stat" % pid) as f:
            st = f.read()
    except OSError:
        return None
    rest = st[st.rindex(")") + 2:].split()
    return st[st.index("(") + 1:st.rindex(")")], int(rest[1]), int(rest[2])


def _state(pid):
    try:
        with open("/proc/%d/stat" % pid) as f:
            return f.read().rsplit(")", 1)[1].split()[0]
    except OSError:
        return None


def watchdogs_of(s):
    """The watchdog processes of server s: named abx-watchdog, in abx's process group
    (they stay there after abx is gone)."""
    out = []
    for d in os.listdir("/proc"):
        st = _stat(d) if d.isdigit() else None
        if st and st[0] == "abx-watchdog" and st[2] == s.proc.pid:
            out.append(int(d))
    return out


def kill_leftovers(m):
    for pid in pgrep("sleep " + m):
        try:
            os.kill(pid, signal.SIGKILL)
        except ProcessLookupError:
            pass


@pytest.mark.parametrize("how", ["run", "process"])
def test_kill9_of_abx_ends_the_calls_processes(abx, workspace, how):
    """abx dies by SIGKILL: nothing of the call may run past the call's deadline, without
    any restart (the watchdog holds a pidfd of abx and kills the call's cgroups)."""
    s = abx(config(workspace, timeout="5s"))
    m = marker()
    t0 = time.time()
    start_daemon(s, how, m)
    try:
        os.kill(s.proc.pid, signal.SIGKILL)
        s.proc.wait(timeout=10)
        left = 5 - (time.time() - t0) + 1.5
        assert wait_for(lambda: not pgrep("sleep " + m), timeout=max(left, 1.0)), \
            "a setsid'd grandchild outlived abx's SIGKILL past its call's deadline"
        # the watchdog has nothing left to do, and ends
        assert wait_for(lambda: not watchdogs_of(s), timeout=5), "the watchdog outlived its work"
    finally:
        kill_leftovers(m)


@pytest.mark.parametrize("how", ["run", "process"])
def test_restart_sweeps_a_dead_servers_processes(abx, workspace, how):
    """abx and its watchdog both die by SIGKILL (a supervisor killing the whole group):
    the grandchild survives that, and the next abx on the same machine kills it at start
    (it empties the dead server's cgroups instead of only removing empty ones)."""
    s = abx(config(workspace, timeout="5s"))
    m = marker()
    start_daemon(s, how, m)
    try:
        s.kill()                      # SIGKILL to abx's process group: abx and its watchdog
        time.sleep(0.5)
        assert pgrep("sleep " + m), "the grandchild did not survive its server (nothing to sweep)"
        s.start()
        assert wait_for(lambda: not pgrep("sleep " + m), timeout=5), \
            "a restarted abx left the dead server's processes running"
    finally:
        kill_leftovers(m)


def test_a_killed_watchdog_is_replaced(abx, workspace):
    """Killing the watchdog (by hand, the OOM killer) neither stops abx from running
    commands (confinement is required here) nor leaves the next call unguarded."""
    s = abx(config(workspace, timeout="5s"))
    first = wait_for(lambda: watchdogs_of(s), timeout=5)
    assert first, "no watchdog"
    os.kill(first[0], signal.SIGKILL)
    assert wait_for(lambda: _state(first[0]) in (None, "Z"), timeout=5)
    m = marker()
    start_daemon(s, "process", m)
    try:
        now = watchdogs_of(s)
        assert now and first[0] not in now, now
        os.kill(s.proc.pid, signal.SIGKILL)
        s.proc.wait(timeout=10)
        assert wait_for(lambda: not pgrep("sleep " + m), timeout=5), "the replacement watchdog did not act"
    finally:
        kill_leftovers(m)


def test_deadline_holds_while_abx_is_wedged(abx, workspace):
    """abx is stopped (SIGSTOP: alive, but doing nothing): the watchdog kills the call's
    processes at the statement's deadline on its own."""
    s = abx(config(workspace, timeout="2s"))
    killed_at_deadline_while_wedged(s, "the deadline passed with abx wedged and the grandchild still runs")


def killed_at_deadline_while_wedged(s, why):
    """Start DAEMON (a 2 s statement timeout), stop abx at once, and wait for the watchdog
    to kill it: the deadline and its 0.5 s grace, plus some slack."""
    m = marker()
    t0 = time.time()
    start_daemon(s, "process", m)
    os.kill(s.proc.pid, signal.SIGSTOP)
    try:
        assert wait_for(lambda: not pgrep("sleep " + m), timeout=max(2 - (time.time() - t0) + 2.5, 1.0)), why
    finally:
        os.kill(s.proc.pid, signal.SIGCONT)
        kill_leftovers(m)


def _wakeups(pid):
    """How many times a process has gone to sleep and been woken (voluntary switches)."""
    with open("/proc/%d/status" % pid) as f:
        return sum(int(line.split()[1]) for line in f if line.startswith("voluntary_ctxt_switches:"))


def test_the_watchdog_reads_a_stream_of_calls_in_batches_and_still_acts(abx, workspace):
    """While calls keep coming, the watchdog reads their reports and exits every 50 ms
    instead of waking twice a call beside the call's program (issue 14): 120 calls wake
    it far fewer than 120 times. Batching must not cost what it is for: a call reported
    in the same instant as abx is wedged (SIGSTOP) is still killed at its deadline."""
    cfg = config(workspace, timeout="2s")
    cfg["policy"]["allow"][1]["commands"].append("true")
    s = abx(cfg)
    wd = wait_for(lambda: watchdogs_of(s), timeout=5)
    assert wd, "no watchdog"
    for _ in range(3):
        r = s.post("/commands/run", token=ALICE_TOKEN, json_body={"argv": ["true"]}, timeout=30)
        assert r.status_code == 200 and r.json()["exit_code"] == 0, r.text
    before = _wakeups(wd[0])
    t0 = time.time()
    for _ in range(150):
        r = s.post("/commands/run", token=ALICE_TOKEN, json_body={"argv": ["true"]}, timeout=30)
        assert r.status_code == 200 and r.json()["exit_code"] == 0, r.text
    took = time.time() - t0
    woke = _wakeups(wd[0]) - before
    # one or two a call before (150-300); now about one a tick, 20 a second, and a few more
    assert woke <= 40 * took + 10 and woke < 100, "the watchdog woke %d times for 150 calls in %.1f s" % (woke, took)
    # reported while the watchdog reads in batches
    killed_at_deadline_while_wedged(s, "a call reported during a stream of calls outlived its deadline with abx wedged")


def test_confined_process_cannot_kill_the_watchdog(abx, workspace):
    s = abx(config(workspace))
    wds = wait_for(lambda: watchdogs_of(s), timeout=5)   # the sandbox is built beside the listener
    assert wds and len(wds) == 1, wds
    code = ("import os, sys\n"
            "for sig in (9, 15):\n"
            "    try:\n"
            "        os.kill(int(sys.argv[1]), sig); print('ALLOWED')\n"
            "    except OSError as e:\n"
            "        print('refused')\n")
    r = s.post("/commands/run", token=ALICE_TOKEN, json_body={"argv": ["python3", "-c", code, str(wds[0])]})
    assert r.status_code == 200, r.text
    assert "ALLOWED" not in r.json()["stdout"], r.json()
    assert watchdogs_of(s) == wds
    # a graceful stop waits for the watchdog's sweep: nothing of it stays behind
    s.stop()
    assert s.returncode == 0 and not watchdogs_of(s), (s.returncode, watchdogs_of(s))


# -- class 4: keyrings and socket families --------------------------------------------------

libc = ctypes.CDLL(None, use_errno=True)
SYS_add_key, SYS_keyctl = 248, 250            # x86_64
KEY_SPEC_USER_KEYRING = -4
KEYCTL_REVOKE, KEYCTL_UNLINK = 3, 9


@pytest.fixture
def planted_key():
    """A secret in the host user's keyring (root's: abx and its children run as root here)."""
    if os.uname().machine != "x86_64":
        pytest.skip("system call numbers are x86_64's")
    desc = ("abxsecret-%d" % random.randint(0, 10 ** 9)).encode()
    payload = ("hunter2-%d" % random.randint(0, 10 ** 9)).encode()
    kid = libc.syscall(SYS_add_key, b"user", desc, payload, len(payload), KEY_SPEC_USER_KEYRING)
    if kid < 0:
        pytest.skip("cannot add a key here: %s" % os.strerror(ctypes.get_errno()))
    yield desc.decode(), payload.decode()
    libc.syscall(SYS_keyctl, KEYCTL_REVOKE, kid)
    libc.syscall(SYS_keyctl, KEYCTL_UNLINK, kid, KEY_SPEC_USER_KEYRING)


def run_py(s, code, *args):
    r = s.post("/commands/run", token=ALICE_TOKEN,
               json_body={"argv": ["python3", "-c", code] + [str(a) for a in args]}, timeout=60)
    assert r.status_code == 200, r.text[:800]
    return r.json()


KEYS = ("import ctypes, errno, sys\n"
        "libc = ctypes.CDLL(None, use_errno=True)\n"
        "def call(*a):\n"
        "    r = libc.syscall(*a)\n"
        "    print('ok' if r >= 0 else 'refused-' + errno.errorcode.get(ctypes.get_errno(), '?'))\n"
        "    return r\n"
        "call(250, 0, -4, 0)\n"                                   # keyctl(GET_KEYRING_ID, @u)
        "call(248, b'user', b'abxchild', b'x', 1, -4)\n"          # add_key
        "kid = call(249, b'user', sys.argv[1].encode(), None, 0)\n"  # request_key
        "buf = ctypes.create_string_buffer(256)\n"
        "if kid < 0:\n"
        "    kid = libc.syscall(250, 10, -4, b'user', sys.argv[1].encode(), 0)\n"  # KEYCTL_SEARCH
        "n = libc.syscall(250, 11, kid, buf, 256)\n"                # KEYCTL_READ
        "print('read', buf.raw[:max(n, 0)].decode(errors='replace') if n > 0 else 'nothing')\n")


@pytest.mark.parametrize("net", [False, True])
def test_host_keyring_out_of_reach(abx, workspace, planted_key, net):
    desc, payload = planted_key
    s = abx(config(workspace, net=net))
    j = run_py(s, KEYS, desc)
    lines = j["stdout"].split("\n")
    assert payload not in j["stdout"], "the child read the host user's keyring: %s" % j
    for ln in lines[:3]:
        assert ln in ("refused-EPERM", "refused-ENOSYS"), j


FAMILY = ("import socket, errno, sys\n"
          "try:\n"
          "    socket.socket(int(sys.argv[1]), int(sys.argv[2])).close(); print('ALLOWED')\n"
          "except OSError as e:\n"
          "    print('refused', errno.errorcode.get(e.errno, e.errno))\n")

REFUSED = {"vsock": (40, 1), "packet": (17, 3), "alg": (38, 5), "xdp": (44, 3), "bluetooth": (31, 1),
           "key": (15, 2), "tipc": (30, 5)}


@pytest.fixture(scope="module")
def both(tmp_path_factory):
    """One server per net setting, shared by the family probes."""
    import abxtest as bb
    servers = {}
    for net in (False, True):
        ws = make_workspace(tmp_path_factory.mktemp("fam%d" % net))
        d = str(tmp_path_factory.mktemp("fam-srv%d" % net))
        servers[net] = bb.AbxServer(d, config=config(ws, net=net), workspace=ws, use_workspace_flag=False).start()
    yield servers
    for srv in servers.values():
        srv.stop()
        srv.kill()


@pytest.mark.parametrize("net", [False, True])
@pytest.mark.parametrize("family", sorted(REFUSED))
def test_ungranted_socket_families_refused(both, family, net):
    fam, typ = REFUSED[family]
    j = run_py(both[net], FAMILY, fam, typ)
    assert j["stdout"].strip() == "refused EAFNOSUPPORT", "%s (net=%s): %s" % (family, net, j)


def test_net_true_keeps_inet_unix_and_plumbing(both):
    code = ("import socket, subprocess\n"
            "s = socket.socket(); s.bind(('127.0.0.1', 0)); s.listen(1)\n"
            "c = socket.create_connection(s.getsockname()); a, _ = s.accept(); c.sendall(b'tcp'); print(a.recv(3).decode())\n"
            "u = socket.socket(socket.AF_UNIX); u.close(); print('unix')\n"
            "n = socket.socket(socket.AF_NETLINK, socket.SOCK_RAW, 0); n.close(); print('netlink')\n"
            "x, y = socket.socketpair(); x.sendall(b'pair'); print(y.recv(4).decode())\n"
            "print(subprocess.run(['cat'], input=b'pipe', capture_output=True).stdout.decode())\n")
    j = run_py(both[True], code)
    assert j["exit_code"] == 0 and j["stdout"] == "tcp\nunix\nnetlink\npair\npipe\n", j


def test_without_net_inet_sockets_exist_but_reach_nothing(both):
    """AF_INET/AF_INET6 stay creatable (programs probe them) inside the empty namespace;
    AF_UNIX too, inside the process's view of only its roots (view.c; refused with EACCES
    where that view cannot be built: test_tiers.py), socketpair and pipes work."""
    code = ("import socket, errno\n"
            "socket.socket(socket.AF_INET6, socket.SOCK_DGRAM).close(); print('inet6')\n"
            "try:\n"
            "    socket.create_connection(('1.1.1.1', 443), timeout=2); print('ALLOWED')\n"
            "except OSError as e:\n"
            "    print('unreachable')\n"
            "try:\n"
            "    socket.socket(socket.AF_UNIX); print('ALLOWED')\n"
            "except OSError as e:\n"
            "    print('unix', errno.errorcode[e.errno])\n"
            "x, y = socket.socketpair(); x.sendall(b'pair'); print(y.recv(4).decode())\n")
    j = run_py(both[False], code)
    assert j["exit_code"] == 0 and j["stdout"] == "inet6\nunreachable\nALLOWED\npair\n", j


def test_io_uring_refused_even_with_net(both):
    code = ("import ctypes, errno\n"
            "libc = ctypes.CDLL(None, use_errno=True)\n"
            "p = ctypes.create_string_buffer(120)\n"
            "r = libc.syscall(425, 4, p)\n"
            "print('ALLOWED' if r >= 0 else errno.errorcode.get(ctypes.get_errno()))\n")
    j = run_py(both[True], code)
    assert j["stdout"].strip() == "ENOSYS", j
