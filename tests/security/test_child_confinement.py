"""Attack corpus, item 4: what a confined child can do to the machine and to abx.

tests/blackbox/pipeline/test_confinement.py already proves NoNewPrivs and empty capability sets,
TCP connect and bind and UDP refused, the empty network namespace, Landlock on files,
deny masks, TIOCSTI on the stdin of commands.run, fd hygiene of commands.run, the fork
bomb and memory hog, and hard timeouts reaching grandchildren. This file adds what an
attacker inside the child tries next: other socket families, ptrace and /proc access to
abx, signals to abx, capability-only system calls, a user namespace to get capabilities
back and unmount the masks, background processes (process.start) with the same checks,
memory spread over many processes, and grandchildren that outlive their parent.

Each probe is a small python3 program run as the child; it prints one word per check."""
import os
import random
import signal
import time

import pytest

from abxtest import ALICE_TOKEN, pgrep, tokens, wait_for
from secutil import make_workspace, module_server, world_readable_dir

SECRET = "child-secret-7781"


def config(ws, limits=None, deny=None, net=None, cfg_extra=None):
    stmt = {"ops": ["commands.*", "process.*"], "principals": ["alice"],
            "paths": {"read": [ws + "/**"], "write": [ws + "/**"]}, "commands": ["python3 *", "sh *", "cat *"]}
    if limits:
        stmt["limits"] = limits
    if net is not None:
        stmt["net"] = net
    policy = {"allow": [{"ops": ["core.*"], "principals": ["*"]}, stmt]}
    if deny:
        policy["deny"] = deny
    cfg = {"workspace": ws, "terminal_listen": "off", "ledger": {"enabled": False},
           "auth": {"tokens": tokens("alice", "bob")}, "policy": policy}
    cfg.update(cfg_extra or {})
    return cfg


@pytest.fixture(scope="module")
def shared_ws(tmp_path_factory):
    return make_workspace(tmp_path_factory.mktemp("confine"))


@pytest.fixture(scope="module")
def shared(tmp_path_factory, shared_ws):
    yield from module_server(tmp_path_factory, shared_ws, config(shared_ws))


@pytest.fixture
def srv(shared):
    return shared


def py(s, code, *args, timeout=30, **kw):
    body = {"argv": ["python3", "-c", code] + [str(a) for a in args]}
    body.update(kw)
    r = s.post("/commands/run", token=ALICE_TOKEN, json_body=body, timeout=timeout + 30)
    assert r.status_code == 200, r.text[:800]
    return r.json()


def verdict(j):
    out = j["stdout"].strip().split()
    assert out, j
    return out[-1]


TRY = ("import os, sys, socket, errno, ctypes\n"
       "def attempt(f):\n"
       "    try:\n"
       "        f()\n"
       "        print('ALLOWED')\n"
       "    except OSError as e:\n"
       "        print('refused', errno.errorcode.get(e.errno, e.errno))\n")

# -- network: socket families test_confinement.py does not cover ------------------------------

SOCKETS = {
    "raw_icmp": "socket.socket(socket.AF_INET, socket.SOCK_RAW, socket.IPPROTO_ICMP).sendto(b'\\x08\\0\\0\\0\\0\\0\\0\\0', ('127.0.0.1', 0))",
    "raw_tcp": "socket.socket(socket.AF_INET, socket.SOCK_RAW, socket.IPPROTO_TCP).sendto(b'x' * 20, ('127.0.0.1', 0))",
    "packet": "socket.socket(socket.AF_PACKET, socket.SOCK_RAW, socket.htons(3)).bind(('lo', 0))",
    "icmp_dgram": "socket.socket(socket.AF_INET, socket.SOCK_DGRAM, socket.IPPROTO_ICMP).sendto(b'\\x08\\0\\0\\0\\0\\0\\0\\0', ('127.0.0.1', 0))",
    "tcp6_connect": "socket.create_connection(('::1', int(sys.argv[1])), timeout=2)",
    "tcp_connect_outside": "socket.create_connection(('1.1.1.1', 443), timeout=2)",
    "udp_dns": "socket.socket(socket.AF_INET, socket.SOCK_DGRAM).sendto(b'x', ('8.8.8.8', 53))",
    "sctp": "socket.socket(socket.AF_INET, socket.SOCK_STREAM, 132).connect(('127.0.0.1', int(sys.argv[1])))",
}


# The process's own loopback (issue 25): up and private to it under net: false, so these work
# where abx gives each process a network namespace (the full tier); tcp6_connect above
# (to abx's port) still fails: that port is in abx's namespace, not the process's.
LOOPBACK = {
    "tcp6_bind": "s = socket.socket(socket.AF_INET6); s.bind(('::1', 0)); s.listen(1)",
    "udp_bind": "s = socket.socket(socket.AF_INET, socket.SOCK_DGRAM); s.bind(('127.0.0.1', 0)); s.sendto(b'x', ('127.0.0.1', s.getsockname()[1]))",
    "udp6_send": "socket.socket(socket.AF_INET6, socket.SOCK_DGRAM).sendto(b'x', ('::1', 53))",
}


@pytest.mark.parametrize("kind", sorted(LOOPBACK))
def test_own_loopback_works(srv, kind):
    j = py(srv, TRY + "attempt(lambda: exec(%r))\n" % LOOPBACK[kind], srv.port)
    assert verdict(j) == "ALLOWED", "%s: %s" % (kind, j)


@pytest.mark.parametrize("kind", sorted(SOCKETS))
def test_no_network_any_family(srv, kind):
    j = py(srv, TRY + "attempt(lambda: exec(%r))\n" % SOCKETS[kind], srv.port)
    assert verdict(j) != "ALLOWED", "%s: %s" % (kind, j)
    assert "refused" in j["stdout"], j


def test_abstract_unix_socket_of_the_host_unreachable(srv, tmp_path):
    """An abstract socket opened outside the child's Landlock domain (ABI >= 6 scopes
    them; the child's network namespace separates them anyway)."""
    import socket
    name = "\0abx-sec-%d" % random.randint(0, 10 ** 9)
    host = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    host.bind(name)
    host.listen(1)
    try:
        j = py(srv, TRY + "attempt(lambda: socket.socket(socket.AF_UNIX).connect('\\0' + sys.argv[1][1:]))\n",
               "@" + name[1:])
        assert verdict(j) != "ALLOWED", j
    finally:
        host.close()


def test_unix_socket_path_outside_roots_unreachable(srv, tmp_path):
    """Landlock does not govern connect() on a pathname socket and the network namespace
    does not separate them: without net, the process sees only its roots (view.c), or
    socket(AF_UNIX) is refused (seccomp) where that view cannot be built, so a container
    runtime's socket, the system bus or an ssh-agent stays out of reach."""
    import socket
    d = world_readable_dir(tmp_path, "sock")
    path = str(d / "s")
    host = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    host.bind(path)
    os.chmod(path, 0o777)
    host.listen(1)
    try:
        j = py(srv, TRY + "attempt(lambda: socket.socket(socket.AF_UNIX).connect(sys.argv[1]))\n", path)
        assert verdict(j) != "ALLOWED", j
    finally:
        host.close()


UNIX_PROBES = {
    "unix_stream": "attempt(lambda: socket.socket(socket.AF_UNIX, socket.SOCK_STREAM))\n",
    "unix_dgram": "attempt(lambda: socket.socket(socket.AF_UNIX, socket.SOCK_DGRAM))\n",
    "unix_seqpacket": "attempt(lambda: socket.socket(socket.AF_UNIX, socket.SOCK_SEQPACKET))\n",
}
SECCOMP_PROBES = {
    "io_uring": ("libc = ctypes.CDLL(None, use_errno=True)\n"
                 "params = ctypes.create_string_buffer(120)\n"
                 "def f():\n"
                 "    if libc.syscall(425, 4, params) < 0:\n"
                 "        raise OSError(ctypes.get_errno(), 'io_uring_setup')\n"
                 "attempt(f)\n"),
}


@pytest.mark.parametrize("probe", sorted(SECCOMP_PROBES))
def test_no_io_uring_without_net(srv, probe):
    j = py(srv, TRY + SECCOMP_PROBES[probe])
    assert verdict(j) != "ALLOWED", j


@pytest.mark.parametrize("probe", sorted(UNIX_PROBES))
def test_unix_sockets_without_net_inside_the_view(srv, probe):
    """Issue 25: with a view of only its roots (this machine has mount namespaces) a
    process without the network may make Unix sockets; where the view cannot be built
    they stay refused (test_tiers.py)."""
    j = py(srv, TRY + UNIX_PROBES[probe])
    assert verdict(j) == "ALLOWED", j


def test_socketpair_and_pipes_still_work(srv):
    """Programs keep their own plumbing: socketpair (multiprocessing, subprocess
    helpers), pipes and a child process."""
    code = ("import socket, subprocess\n"
            "a, b = socket.socketpair(); a.sendall(b'pair'); print(b.recv(4).decode())\n"
            "print(subprocess.run(['cat'], input=b'pipe', capture_output=True).stdout.decode())\n")
    j = py(srv, code)
    assert j["exit_code"] == 0 and j["stdout"] == "pair\npipe\n", j


def test_net_true_keeps_unix_sockets(abx, workspace):
    s = abx(config(workspace, net=True))
    j = py(s, TRY + UNIX_PROBES["unix_stream"])
    assert verdict(j) == "ALLOWED", j


# -- abx itself: ptrace, /proc, signals ------------------------------------------------------------

PTRACE = ("libc = ctypes.CDLL(None, use_errno=True)\n"
          "def pt(req):\n"
          "    def f():\n"
          "        if libc.ptrace(req, int(sys.argv[1]), 0, 0) != 0:\n"
          "            raise OSError(ctypes.get_errno(), 'ptrace')\n"
          "    return f\n")

ABX_PROBES = {
    "ptrace_attach": PTRACE + "attempt(pt(16))\n",                       # PTRACE_ATTACH
    "ptrace_seize": PTRACE + "attempt(pt(0x4206))\n",                     # PTRACE_SEIZE
    "proc_mem": "attempt(lambda: open('/proc/%s/mem' % sys.argv[1], 'rb').read(1))\n",
    "proc_environ": "attempt(lambda: print(open('/proc/%s/environ' % sys.argv[1], 'rb').read()[:0]))\n",
    "proc_fd_link": "attempt(lambda: os.readlink('/proc/%s/fd/0' % sys.argv[1]))\n",
    "proc_fd_open": "attempt(lambda: open('/proc/%s/fd/2' % sys.argv[1], 'a'))\n",
    "proc_root": "attempt(lambda: os.listdir('/proc/%s/root/' % sys.argv[1]))\n",
    "proc_cwd": "attempt(lambda: os.listdir('/proc/%s/cwd/' % sys.argv[1]))\n",
    "process_vm_readv": ("libc = ctypes.CDLL(None, use_errno=True)\n"
                         "class IOV(ctypes.Structure):\n"
                         "    _fields_ = [('base', ctypes.c_void_p), ('len', ctypes.c_size_t)]\n"
                         "buf = ctypes.create_string_buffer(8)\n"
                         "local = IOV(ctypes.cast(buf, ctypes.c_void_p), 8)\n"
                         "remote = IOV(0x400000, 8)\n"
                         "def f():\n"
                         "    if libc.process_vm_readv(int(sys.argv[1]), ctypes.byref(local), 1, ctypes.byref(remote), 1, 0) < 0:\n"
                         "        raise OSError(ctypes.get_errno(), 'process_vm_readv')\n"
                         "attempt(f)\n"),
    "pidfd_getfd": ("libc = ctypes.CDLL(None, use_errno=True)\n"
                    "def f():\n"
                    "    pfd = os.pidfd_open(int(sys.argv[1]))\n"
                    "    if libc.syscall(438, pfd, 0, 0) < 0:\n"
                    "        raise OSError(ctypes.get_errno(), 'pidfd_getfd')\n"
                    "attempt(f)\n"),
    "kill_term": "attempt(lambda: os.kill(int(sys.argv[1]), 15))\n",
    "kill_stop": "attempt(lambda: os.kill(int(sys.argv[1]), 19))\n",
    "kill_probe": "attempt(lambda: os.kill(int(sys.argv[1]), 0))\n",
    "kill_group": "attempt(lambda: os.killpg(os.getpgid(int(sys.argv[1])), 15))\n",
    "setpgid_join": "attempt(lambda: os.setpgid(0, os.getpgid(int(sys.argv[1]))))\n",
}


@pytest.mark.parametrize("probe", sorted(ABX_PROBES))
def test_child_cannot_touch_abx(srv, probe):
    j = py(srv, TRY + ABX_PROBES[probe], srv.proc.pid)
    assert verdict(j) != "ALLOWED", "%s: %s" % (probe, j)
    time.sleep(0.1)
    assert srv.proc.poll() is None, "abx died"
    r = srv.get("/health")
    assert r.status_code == 200


# -- capabilities, for real: privileged system calls -----------------------------------------------

CAP_PROBES = {
    "chroot": "attempt(lambda: os.chroot('.'))\n",
    "mount_tmpfs": ("libc = ctypes.CDLL(None, use_errno=True)\n"
                    "def f():\n"
                    "    if libc.mount(b'none', b'.', b'tmpfs', 0, None) != 0:\n"
                    "        raise OSError(ctypes.get_errno(), 'mount')\n"
                    "attempt(f)\n"),
    "sethostname": "attempt(lambda: __import__('socket').sethostname('pwned'))\n",
    "mknod_dev": "import stat\nattempt(lambda: os.mknod('sda', stat.S_IFBLK | 0o600, os.makedev(8, 0)))\n",
    "chown_other": "open('mine', 'w').close()\nattempt(lambda: os.chown('mine', 12345, 12345))\n",
    "read_other_uid_0600": "attempt(lambda: open('other-uid.txt').read())\n",
    "setuid_other": "attempt(lambda: os.setuid(12345) if os.getuid() != 12345 else None) if os.getuid() != 0 else attempt(lambda: os.setgroups([0, 1]))\n",
    "nice_minus": "attempt(lambda: os.nice(-5))\n",
    "setns_abx_mnt": ("libc = ctypes.CDLL(None, use_errno=True)\n"
                      "def f():\n"
                      "    fd = os.open('/proc/%s/ns/mnt' % sys.argv[1], os.O_RDONLY)\n"
                      "    if libc.setns(fd, 0) != 0:\n"
                      "        raise OSError(ctypes.get_errno(), 'setns')\n"
                      "attempt(f)\n"),
    "setns_init_mnt": ("libc = ctypes.CDLL(None, use_errno=True)\n"
                       "def f():\n"
                       "    fd = os.open('/proc/1/ns/mnt', os.O_RDONLY)\n"
                       "    if libc.setns(fd, 0) != 0:\n"
                       "        raise OSError(ctypes.get_errno(), 'setns')\n"
                       "attempt(f)\n"),
    "setns_abx_net": ("libc = ctypes.CDLL(None, use_errno=True)\n"
                      "def f():\n"
                      "    fd = os.open('/proc/%s/ns/net' % sys.argv[1], os.O_RDONLY)\n"
                      "    if libc.setns(fd, 0x40000000) != 0:\n"
                      "        raise OSError(ctypes.get_errno(), 'setns')\n"
                      "attempt(f)\n"),
    "reboot": ("libc = ctypes.CDLL(None, use_errno=True)\n"
               "def f():\n"
               "    if libc.reboot(0) != 0:\n"    # LINUX_REBOOT_CMD_CAD_OFF: harmless even if allowed
               "        raise OSError(ctypes.get_errno(), 'reboot')\n"
               "attempt(f)\n"),
    "iopl": ("libc = ctypes.CDLL(None, use_errno=True)\n"
             "def f():\n"
             "    if libc.iopl(3) != 0:\n"
             "        raise OSError(ctypes.get_errno(), 'iopl')\n"
             "attempt(f)\n"),
}


@pytest.mark.parametrize("probe", sorted(CAP_PROBES))
def test_no_capabilities_in_practice(srv, shared_ws, probe):
    workspace = shared_ws
    other = os.path.join(workspace, "other-uid.txt")
    with open(other, "w") as f:
        f.write(SECRET)
    os.chown(other, 12345, 12345)
    os.chmod(other, 0o600)
    j = py(srv, TRY + CAP_PROBES[probe], srv.proc.pid)
    assert verdict(j) != "ALLOWED", "%s: %s" % (probe, j)
    assert SECRET not in j["stdout"]
    assert not os.path.exists(os.path.join(workspace, "sda"))


USERNS = ("libc = ctypes.CDLL(None, use_errno=True)\n"
          "def f():\n"
          "    if libc.unshare(0x10000000 | 0x00020000) != 0:\n"      # CLONE_NEWUSER | CLONE_NEWNS
          "        raise OSError(ctypes.get_errno(), 'unshare')\n"
          "    for target in sys.argv[1:]:\n"
          "        if libc.umount2(target.encode(), 2) == 0:\n"   # MNT_DETACH
          "            print(open(target).read() if os.path.isfile(target) else os.listdir(target))\n"
          "            return\n"
          "        if libc.mount(b'none', target.encode(), b'tmpfs', 0, None) == 0:\n"
          "            print('remounted')\n"
          "            return\n"
          "    raise OSError(errno.EPERM, 'no mount change')\n"
          "attempt(f)\n")


def test_user_namespace_cannot_lift_masks(abx, workspace):
    """Even if the child may create a user namespace (and gets capabilities inside it),
    it cannot unmount the empty mounts that hide denied files nor change mounts at all
    (Landlock forbids mount topology changes); the denied file stays unreadable."""
    secret = os.path.join(workspace, "secret.txt")
    with open(secret, "w") as f:
        f.write(SECRET)
    s = abx(config(workspace, deny=[{"paths": [secret]}]))
    j = py(s, TRY + USERNS, secret, workspace)
    assert SECRET not in j["stdout"], j
    assert verdict(j) != "ALLOWED", j
    j = py(s, TRY + "attempt(lambda: print(open(sys.argv[1]).read()))\n", secret)
    assert SECRET not in j["stdout"], j


def test_config_file_inside_workspace_is_refused(abx, workspace):
    """A config in a root a statement writes is refused outright (a process could rename
    its folder away and plant another: docs/security.md, "abx's own state")."""
    cfg_dir = os.path.join(workspace, "conf")
    os.makedirs(cfg_dir)
    s = abx(config(workspace), start=False)
    import json
    path = os.path.join(cfg_dir, "abx.json")
    with open(path, "w") as f:
        json.dump(config(workspace), f)
    s.config_path = path
    with pytest.raises(RuntimeError, match="config.state_writable"):
        s.start()


def test_config_file_under_a_read_root_hidden_from_child(abx, workspace, tmp_path):
    """Under a root processes may only read, abx's own files are masked for them."""
    conf_root = tmp_path / "readable"
    cfg_dir = conf_root / "conf"
    cfg_dir.mkdir(parents=True)
    cfg = config(workspace)
    cfg["policy"]["allow"][1]["paths"]["read"].append(str(conf_root) + "/**")
    s = abx(cfg, start=False)
    import json
    path = str(cfg_dir / "abx.json")
    with open(path, "w") as f:
        json.dump(cfg, f)
    os.chmod(str(tmp_path), 0o755)
    s.config_path = path
    s.start()
    with open(path) as f:
        assert "token_sha256" in f.read()
    j = py(s, TRY + "attempt(lambda: print(open(sys.argv[1]).read()))\n", path)
    assert "token_sha256" not in j["stdout"], j
    j = py(s, TRY + "attempt(lambda: open(sys.argv[1], 'w').write('{}'))\n", path)
    assert verdict(j) != "ALLOWED", j
    j = py(s, TRY + "import os\nattempt(lambda: os.rename(os.path.dirname(sys.argv[1]), sys.argv[1] + '.gone'))\n",
           path)
    assert verdict(j) != "ALLOWED", j
    with open(path) as f:
        assert "token_sha256" in f.read()


@pytest.mark.parametrize("target", ["/tmp/abx-sec-probe-%d", "{out}/new.txt", "{out}/f.txt", "/etc/abx-sec-probe",
                                    "/usr/abx-sec-probe", "/var/tmp/abx-sec-probe-%d", "/dev/shm/abx-sec-probe-%d"])
def test_no_writes_outside_roots(srv, tmp_path, target):
    out = world_readable_dir(tmp_path, "out")
    (out / "f.txt").write_text("original")
    os.chmod(str(out), 0o777)
    path = target.replace("{out}", str(out))
    if "%d" in path:
        path = path % random.randint(0, 10 ** 9)
    try:
        j = py(srv, TRY + "attempt(lambda: open(sys.argv[1], 'a').write('x'))\n", path)
        assert verdict(j) != "ALLOWED", j
        assert (out / "f.txt").read_text() == "original"
        assert not os.path.exists(path) or path.endswith("f.txt")
    finally:
        if os.path.exists(path) and not path.endswith("f.txt"):
            os.unlink(path)


# -- background processes: the same confinement -------------------------------------------------------

def start_bg(s, code, *args, **kw):
    body = {"argv": ["python3", "-c", code] + [str(a) for a in args]}
    body.update(kw)
    r = s.post("/process", token=ALICE_TOKEN, json_body=body)
    assert r.status_code == 200, r.text
    return r.json()["pid"]


def bg_output(s, pid, timeout=10):
    def done():
        g = s.get("/process/%d" % pid, token=ALICE_TOKEN).json()
        return g if g["running"] is False else None
    assert wait_for(done, timeout=timeout), "the background process did not end"
    return s.get("/process/%d/output" % pid, token=ALICE_TOKEN).json()["stdout"]


def test_background_process_fds_and_tty(srv):
    code = ("import os, fcntl, termios\n"
            "print(' '.join(sorted(os.listdir('/proc/self/fd'), key=int)))\n"
            "try:\n"
            "    fcntl.ioctl(0, termios.TIOCSTI, b'x'); print('injected')\n"
            "except OSError:\n"
            "    print('tiocsti-refused')\n")
    out = bg_output(srv, start_bg(srv, code)).split("\n")
    fds = [int(x) for x in out[0].split()]
    assert fds == [0, 1, 2, 3], "inherited descriptors: %s" % fds
    assert out[1] == "tiocsti-refused", out


def test_background_process_no_network_no_ptrace(srv):
    code = TRY + PTRACE + ("attempt(lambda: socket.create_connection(('127.0.0.1', int(sys.argv[2])), timeout=2))\n"
                           "attempt(pt(16))\n")
    out = bg_output(srv, start_bg(srv, code, srv.proc.pid, srv.port))
    assert "ALLOWED" not in out and out.count("refused") == 2, out


@pytest.mark.parametrize("status_line", ["NoNewPrivs:\t1", "CapEff:\t0000000000000000", "CapPrm:\t0000000000000000",
                                         "CapInh:\t0000000000000000", "CapBnd:\t0000000000000000",
                                         "CapAmb:\t0000000000000000", "Seccomp:"])
def test_background_process_privileges(srv, status_line):
    out = bg_output(srv, start_bg(srv, "print(open('/proc/self/status').read())"))
    assert status_line in out, out


# -- limits -------------------------------------------------------------------------------------------

def test_memory_limit_holds_across_processes(abx, workspace):
    """The memory limit is the cgroup's: eight children of 24 MiB each under 64 MiB do not
    all survive (a per-process rlimit would let them)."""
    s = abx(config(workspace, limits={"memory": "64MiB"}))
    code = ("import os, time\n"
            "pids = []\n"
            "for i in range(8):\n"
            "    pid = os.fork()\n"
            "    if pid == 0:\n"
            "        b = bytearray(24 * 1024 * 1024)\n"
            "        for k in range(0, len(b), 4096): b[k] = 1\n"
            "        time.sleep(2)\n"
            "        os._exit(0)\n"
            "    pids.append(pid)\n"
            "ok = 0\n"
            "for p in pids:\n"
            "    _, st = os.waitpid(p, 0)\n"
            "    ok += os.WIFEXITED(st) and os.WEXITSTATUS(st) == 0\n"
            "print('survived', ok)\n")
    j = py(s, code, hard_timeout=30)
    if j["stdout"].startswith("survived"):
        assert int(j["stdout"].split()[1]) < 8, j
    else:
        assert j["signal"] is not None or j["exit_code"] != 0, j


def test_pids_limit_counts_threads(abx, workspace):
    s = abx(config(workspace, limits={"pids": 16}))
    code = ("import threading, time\n"
            "n = 0\n"
            "try:\n"
            "    for i in range(100):\n"
            "        threading.Thread(target=time.sleep, args=(3,), daemon=True).start(); n += 1\n"
            "except RuntimeError:\n"
            "    pass\n"
            "print('threads', n)\n")
    j = py(s, code, hard_timeout=20)
    assert j["stdout"].startswith("threads"), j
    assert int(j["stdout"].split()[1]) < 16, j


# -- lifetimes: nothing outlives its command ------------------------------------------------------------

DAEMON = ("import os, sys, time, signal\n"
          "if os.fork() == 0:\n"
          "    os.setsid()\n"
          "    if os.fork() == 0:\n"
          "        signal.signal(signal.SIGTERM, signal.SIG_IGN)\n"
          "        signal.signal(signal.SIGHUP, signal.SIG_IGN)\n"
          "        os.execvp('sleep', ['sleep', sys.argv[1]])\n"
          "    os._exit(0)\n"
          "time.sleep(float(sys.argv[2]))\n"
          "print('parent done', flush=True)\n")


def marker():
    return "%d.%03d" % (random.randint(300, 999), random.randint(0, 999))


def test_daemonized_grandchild_ends_with_its_command(srv):
    m = marker()
    j = py(srv, DAEMON, m, 0.2)
    assert j["status"] == "completed" and j["stdout"] == "parent done\n", j
    assert wait_for(lambda: not pgrep("sleep " + m), timeout=8), "a double-forked, setsid, TERM-ignoring grandchild outlived its command"


def test_daemonized_grandchild_killed_at_hard_timeout(srv):
    m = marker()
    t0 = time.time()
    j = py(srv, DAEMON, m, 60, hard_timeout=1)
    assert j["status"] == "timed_out", j
    assert time.time() - t0 < 8
    assert wait_for(lambda: not pgrep("sleep " + m), timeout=8), "grandchild survived the hard timeout"


def test_soft_timeout_then_statement_timeout_kills_grandchildren(abx, workspace):
    s = abx(config(workspace, limits={"timeout": "2s"}))
    m = marker()
    r = s.post("/commands/run", token=ALICE_TOKEN, json_body={"argv": ["python3", "-c", DAEMON, m, "60"],
                                                             "timeout": 0.5}, timeout=30)
    assert r.status_code == 200, r.text
    assert r.json()["status"] == "running", r.json()     # detached by the soft timeout
    assert pgrep("sleep " + m), "the grandchild never started"
    assert wait_for(lambda: not pgrep("sleep " + m), timeout=10), "the statement timeout did not reach the grandchild"


def test_background_grandchildren_end_with_signal_kill(srv):
    m = marker()
    pid = start_bg(srv, DAEMON, m, 60)
    assert wait_for(lambda: pgrep("sleep " + m), timeout=5)
    r = srv.post("/process/%d/signal" % pid, token=ALICE_TOKEN, json_body={"signal": "KILL"})
    assert r.status_code == 200, r.text
    # the grandchild left the process group; the process record's end sweeps its cgroup
    assert wait_for(lambda: not pgrep("sleep " + m), timeout=10), "grandchild of a killed background process survived"


def test_children_end_when_abx_stops(abx, workspace):
    s = abx(config(workspace))
    m = marker()
    start_bg(s, DAEMON, m, 60)
    assert wait_for(lambda: pgrep("sleep " + m), timeout=5)
    s.proc.send_signal(signal.SIGTERM)
    s.proc.wait(timeout=15)
    assert wait_for(lambda: not pgrep("sleep " + m), timeout=10), "a grandchild outlived abx"


CHROOT_SCRIPT = r"""
set -e
R="$1"; BIN="$2"; CFG="$3"; PORT="$4"
for d in usr lib lib32 lib64 libx32 bin sbin etc dev proc sys tmp "$5"; do
  [ -e "/$d" ] || continue
  mkdir -p "$R/$d"; mount --rbind "/$d" "$R/$d"
done
exec chroot "$R" "$BIN" serve --config "$CFG" --listen "127.0.0.1:$PORT"
"""


def test_chroot_without_a_mount_at_root_fails_closed(tmp_path, workspace):
    """In a chroot "/" is no mount point: a private mount namespace cannot be made
    private there, so masks cannot be applied. abx detects that at start and a command
    that needs a mask is 503 sandbox.unavailable naming the layer (not a spawn failure
    on every call, and never an unmasked run)."""
    import shutil
    import subprocess
    import requests
    import abxtest as bb
    if os.geteuid() != 0 or not shutil.which("unshare") or not shutil.which("chroot"):
        pytest.skip("needs root, unshare and chroot")
    with open(os.path.join(workspace, "secret.txt"), "w") as f:
        f.write("chroot-secret-7731\n")
    root = tmp_path / "root"
    root.mkdir()
    cfg = config(workspace, deny=[{"paths": [workspace + "/secret.txt"]}])
    cfg_path = str(tmp_path / "abx.json")
    import json
    with open(cfg_path, "w") as f:
        json.dump(cfg, f)
    port = bb.free_port()
    top = os.path.realpath(bb.ABX_BIN).split("/")[1]
    env = dict(os.environ, ABX_HOME=str(tmp_path / "home"))
    p = subprocess.Popen(["unshare", "-m", "--propagation", "private", "bash", "-c", CHROOT_SCRIPT, "x", str(root),
                          os.path.realpath(bb.ABX_BIN), cfg_path, str(port), top],
                         env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, start_new_session=True)
    try:
        url = "http://127.0.0.1:%d" % port
        assert wait_for(lambda: _up(url), timeout=15), p.stderr.read1(4000) if p.poll() is not None else "not up"
        h = {"Authorization": "Bearer " + ALICE_TOKEN}
        r = requests.post(url + "/ops/commands.run", json={"command": "cat secret.txt"}, headers=h, timeout=10)
        assert r.status_code == 503, r.text
        assert r.json()["error"]["code"] == "sandbox.unavailable" and "mount namespace" in r.text, r.text
        assert "chroot-secret-7731" not in r.text
    finally:
        os.killpg(p.pid, signal.SIGTERM)
        try:
            _, err = p.communicate(timeout=10)
        except subprocess.TimeoutExpired:
            os.killpg(p.pid, signal.SIGKILL)
            _, err = p.communicate()
    rep = bb.sanitizer_report(err.decode(errors="replace"))
    assert rep is None, err[-4000:]


def _up(url):
    import requests
    try:
        return requests.get(url + "/health", timeout=1).status_code == 200
    except requests.RequestException:
        return False
