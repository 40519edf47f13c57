"""Kernel confinement of every spawned process: no_new_privs and no capabilities, its own
session, Landlock (read roots read-only, write roots read-write, system dirs read-only,
/etc secrets, /tmp and /root out of reach, a private TMPDIR), an empty network
namespace unless `net: true`, cgroup pids and memory limits, hard timeouts that reach
grandchildren, no leaked descriptors, deny rules masked inside granted roots, TIOCSTI."""
import json
import os
import random
import time

import pytest

from abxtest import ALICE_TOKEN, pgrep, run_abx, sha256_hex, uniq_sleep, wait_for

CMDS = ["cat *", "ls *", "python3 *", "sh *"]


def make_config(ws, ro=None, limits=None, net=None, deny=None, ops=None):
    paths = {"read": [ws + "/**"] + ([ro + "/**"] if ro else []), "write": [ws + "/**"], "delete": [ws + "/**"]}
    stmt = {"ops": ops or ["commands.*", "process.*"], "principals": ["alice"], "paths": paths, "commands": CMDS}
    if limits:
        stmt["limits"] = limits
    if net is not None:
        stmt["net"] = net
    policy = {"allow": [{"ops": ["core.*"], "principals": ["*"]}, stmt]}
    if deny:
        policy["deny"] = deny
    return {"workspace": ws, "terminal_listen": "off",
            "auth": {"tokens": [{"principal": "alice", "roles": ["agent"],
                                 "token_sha256": sha256_hex(ALICE_TOKEN)}]},
            "policy": policy}


@pytest.fixture
def srv(abx, workspace):
    return abx(make_config(workspace))


def run(s, body, timeout=30):
    r = s.post("/commands/run", token=ALICE_TOKEN, json_body=body, timeout=timeout)
    assert r.status_code == 200, r.text[:800]
    return r.json()


def py(s, code, *args, **kw):
    body = {"argv": ["python3", "-c", code] + list(args)}
    body.update(kw)
    return run(s, body)


def succeeded(j):
    return j["status"] == "completed" and j["exit_code"] == 0








@pytest.fixture
def outside(tmp_path):
    """A world-readable file outside every root: only Landlock can refuse it."""
    d = tmp_path / "outside"
    d.mkdir()
    f = d / "plain.txt"
    f.write_text("outside-content\n")
    os.chmod(str(tmp_path), 0o755)
    os.chmod(str(d), 0o755)
    os.chmod(str(f), 0o644)
    return str(f)


# -- privileges ----------------------------------------------------------------------------------

def status_fields(s):
    j = run(s, {"argv": ["cat", "/proc/self/status"]})
    assert succeeded(j), j
    out = {}
    for ln in j["stdout"].splitlines():
        k, _, v = ln.partition(":")
        out[k.strip()] = v.strip()
    return out


def test_no_new_privs_and_no_capabilities(srv):
    st = status_fields(srv)
    assert st["NoNewPrivs"] == "1"
    assert int(st["CapEff"], 16) == 0
    assert int(st["CapPrm"], 16) == 0
    assert int(st["CapBnd"], 16) == 0
    assert int(st["CapAmb"], 16) == 0


def test_own_session_and_process_group(srv):
    j = py(srv, "import os; print(os.getsid(0) == os.getpid(), os.getpgid(0) == os.getpid(), os.getppid())")
    assert succeeded(j), j
    a, b, ppid = j["stdout"].split()
    assert a == "True" and b == "True"
    # abx (the parent) stays in its own session
    assert os.getsid(int(ppid)) != int(j["pid"])


def test_no_controlling_terminal_tiocsti(srv):
    code = ("import fcntl, termios\n"
            "try:\n"
            "    fcntl.ioctl(0, termios.TIOCSTI, b'x')\n"
            "    print('injected')\n"
            "except OSError as e:\n"
            "    print('refused', e.errno)\n")
    j = py(srv, code)
    assert j["stdout"].startswith("refused"), j
    # with an inherited /dev/tty it would work; the child has none
    j = py(srv, "import os\ntry:\n    os.open('/dev/tty', os.O_RDWR); print('tty')\nexcept OSError as e:\n"
                "    print('notty', e.errno)\n")
    assert j["stdout"].startswith("notty"), j


def test_descriptors_do_not_leak(srv):
    j = py(srv, "import os; print(' '.join(sorted(os.listdir('/proc/self/fd'), key=int)))")
    assert succeeded(j), j
    fds = [int(x) for x in j["stdout"].split()]
    assert fds[:3] == [0, 1, 2]
    assert len(fds) == 4, "only 0, 1, 2 and the listing's own descriptor: %s" % fds
    j = run(srv, {"argv": ["ls", "/proc/self/fd"]})
    assert sorted(int(x) for x in j["stdout"].split()) == [0, 1, 2, 3], j["stdout"]


# -- Landlock: files -------------------------------------------------------------------------------

def OUTSIDE(stderr):
    """A path outside the roots: refused by Landlock, or not there at all in the view of
    only its roots a process without the network gets (docs/security.md)."""
    return "Permission denied" in stderr or "No such file or directory" in stderr


def test_file_outside_roots_unreadable(srv, outside):
    with open(outside) as f:
        assert f.read() == "outside-content\n"  # the test itself can
    j = run(srv, {"argv": ["cat", outside]})
    assert j["exit_code"] != 0, j
    assert OUTSIDE(j["stderr"]), j
    assert "outside-content" not in j["stdout"]


def test_etc_secrets_unreadable_system_readable(srv):
    j = run(srv, {"argv": ["cat", "/etc/shadow"]})
    assert j["exit_code"] != 0 and "Permission denied" in j["stderr"], j
    j = run(srv, {"argv": ["cat", "/etc/passwd"]})
    assert succeeded(j) and "root:" in j["stdout"], j
    j = run(srv, {"argv": ["ls", "/usr/bin"]})
    assert succeeded(j) and "python3" in j["stdout"].split(), j["stderr"]


def test_root_home_out_of_reach(srv):
    j = run(srv, {"argv": ["ls", "/root"]})
    assert j["exit_code"] != 0 and OUTSIDE(j["stderr"]), j


def test_tmp_not_writable(srv):
    name = "/tmp/abx-confine-probe-%d" % random.randint(0, 10 ** 9)
    j = py(srv, "open(%r, 'w').write('x')" % name)
    try:
        assert j["exit_code"] != 0 and "Permission" in j["stderr"], j
        assert not os.path.exists(name)
    finally:
        if os.path.exists(name):
            os.unlink(name)


def test_private_tmpdir_is_writable(srv):
    code = ("import os, tempfile\n"
            "d = os.environ['TMPDIR']\n"
            "fd, p = tempfile.mkstemp()\n"
            "os.write(fd, b'ok'); os.close(fd)\n"
            "print(d, p, open(p).read())\n")
    j1 = py(srv, code)
    j2 = py(srv, code)
    assert succeeded(j1) and succeeded(j2), (j1, j2)
    d1, p1, c1 = j1["stdout"].split()
    d2, _, _ = j2["stdout"].split()
    assert c1 == "ok" and p1.startswith(d1 + "/")
    assert d1 not in ("/tmp", "/tmp/")
    assert d1 != d2, "each process gets its own TMPDIR"


def test_write_root_writable_read_root_read_only(abx, workspace, tmp_path):
    ro = tmp_path / "ro"
    ro.mkdir()
    (ro / "data.txt").write_text("read-only-data\n")
    s = abx(make_config(workspace, ro=str(ro)))
    j = py(s, "open('new.txt', 'w').write('written'); print(open('new.txt').read())")
    assert succeeded(j) and j["stdout"] == "written\n", j
    with open(os.path.join(workspace, "new.txt")) as f:
        assert f.read() == "written"
    j = run(s, {"argv": ["cat", str(ro / "data.txt")]})
    assert succeeded(j) and j["stdout"] == "read-only-data\n", j
    j = py(s, "open(%r, 'a').write('x')" % str(ro / "data.txt"))
    assert j["exit_code"] != 0 and "Permission" in j["stderr"], j
    j = py(s, "open(%r, 'w').write('x')" % str(ro / "new.txt"))
    assert j["exit_code"] != 0, j
    assert (ro / "data.txt").read_text() == "read-only-data\n"
    assert not (ro / "new.txt").exists()


@pytest.mark.parametrize("how", ["absolute", "relative"])
def test_git_hooks_read_only_inside_write_root(abx, workspace, how):
    hooks = os.path.join(workspace, ".git", "hooks")
    os.makedirs(hooks)
    s = abx(make_config(workspace))
    target = os.path.join(hooks, "pre-commit") if how == "absolute" else ".git/hooks/pre-commit"
    j = py(s, "open(%r, 'w').write('#!/bin/sh\\necho pwned\\n')" % target)
    assert not os.path.exists(os.path.join(hooks, "pre-commit")), "hook written through a %s path" % how
    assert j["exit_code"] != 0, j
    j = py(s, "open('ok.txt', 'w').write('fine')")
    assert succeeded(j), j


def test_deny_literal_path_hidden_absolute(abx, workspace):
    secret = os.path.join(workspace, "secret.txt")
    with open(secret, "w") as f:
        f.write("top-secret-value\n")
    s = abx(make_config(workspace, deny=[{"paths": [secret]}]))
    j = run(s, {"argv": ["cat", secret]})
    assert "top-secret-value" not in j["stdout"], j
    assert j["exit_code"] != 0, "cat of a denied path must fail: %s" % j


def test_deny_literal_path_hidden_relative_to_cwd(abx, workspace):
    secret = os.path.join(workspace, "secret.txt")
    with open(secret, "w") as f:
        f.write("top-secret-value\n")
    s = abx(make_config(workspace, deny=[{"paths": [secret]}]))
    j = run(s, {"argv": ["cat", "secret.txt"]})
    assert "top-secret-value" not in j["stdout"], "a denied file is readable by a relative path: %s" % j
    assert j["exit_code"] != 0, j
    j = run(s, {"argv": ["cat", "a.txt"]})
    assert succeeded(j) and j["stdout"] == "hello\n", j


def test_deny_literal_directory_hidden(abx, workspace):
    d = os.path.join(workspace, "private")
    os.makedirs(d)
    with open(os.path.join(d, "k.txt"), "w") as f:
        f.write("dir-secret\n")
    s = abx(make_config(workspace, deny=[{"paths": [d]}]))
    for arg in (os.path.join(d, "k.txt"), "private/k.txt"):
        j = run(s, {"argv": ["cat", arg]})
        assert "dir-secret" not in j["stdout"], (arg, j)
        assert j["exit_code"] != 0, (arg, j)


def test_deny_mask_keeps_cwd_usable(abx, workspace):
    secret = os.path.join(workspace, "secret.txt")
    with open(secret, "w") as f:
        f.write("x\n")
    s = abx(make_config(workspace, deny=[{"paths": [secret]}]))
    j = py(s, "import os; print(os.getcwd())")
    assert succeeded(j) and j["stdout"].strip() == workspace, j


# -- network ---------------------------------------------------------------------------------------

CONNECT = ("import socket, sys\n"
           "try:\n"
           "    c = socket.create_connection(('127.0.0.1', int(sys.argv[1])), timeout=3)\n"
           "    c.sendall(b'GET /health HTTP/1.0\\r\\nHost: 127.0.0.1\\r\\n\\r\\n')\n"
           "    print('connected', c.recv(64).split(b' ')[1].decode())\n"
           "except OSError as e:\n"
           "    print('refused', e.errno)\n")


def test_no_tcp_to_abx_without_net(srv):
    j = py(srv, CONNECT, str(srv.port))
    assert j["stdout"].startswith("refused"), j


def test_loopback_of_its_own_without_net(srv):
    """Issue 25: lo is up in the process's namespace; a server and its client work there
    (abx's own port is not reachable: test_no_tcp_to_abx_without_net)."""
    code = ("import socket\n"
            "s = socket.socket(); s.bind(('127.0.0.1', 0)); s.listen(1)\n"
            "c = socket.create_connection(s.getsockname()); a, _ = s.accept(); c.sendall(b'lo'); print(a.recv(2).decode())\n")
    j = py(srv, code)
    assert j["stdout"] == "lo\n", j


def test_no_udp_without_net(srv):
    code = ("import socket\n"
            "try:\n"
            "    s = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)\n"
            "    s.sendto(b'x', ('127.0.0.1', 9)); s.sendto(b'x', ('8.8.8.8', 53)); print('sent')\n"
            "except OSError as e:\n"
            "    print('refused', e.errno)\n")
    j = py(srv, code)
    assert j["stdout"].startswith("refused"), j


def test_empty_network_namespace(srv):
    j = run(srv, {"argv": ["cat", "/proc/net/dev"]})
    assert succeeded(j), j
    ifaces = [ln.split(":")[0].strip() for ln in j["stdout"].splitlines()[2:]]
    assert ifaces in ([], ["lo"]), ifaces


def test_net_true_reaches_abx(abx, workspace):
    s = abx(make_config(workspace, net=True))
    j = py(s, CONNECT, str(s.port))
    assert j["stdout"].strip() == "connected 200", j


def test_net_false_explicit(abx, workspace):
    s = abx(make_config(workspace, net=False))
    j = py(s, CONNECT, str(s.port))
    assert j["stdout"].startswith("refused"), j


# -- cgroups ---------------------------------------------------------------------------------------

FORKS = ("import os, sys, time\n"
         "n = 0\n"
         "while n < 1000:\n"
         "    try:\n"
         "        pid = os.fork()\n"
         "    except OSError:\n"
         "        break\n"
         "    if pid == 0:\n"
         "        time.sleep(30)\n"
         "        os._exit(0)\n"
         "    n += 1\n"
         "print('forked', n, flush=True)\n")


def test_fork_bomb_stops_at_pids_limit(abx, workspace):
    s = abx(make_config(workspace, limits={"pids": 32}))
    marker = "forkmark-%d" % random.randint(0, 10 ** 9)
    t0 = time.time()
    j = run(s, {"argv": ["python3", "-c", FORKS, marker], "hard_timeout": 20}, timeout=40)
    assert time.time() - t0 < 25
    assert j["stdout"].startswith("forked "), j
    n = int(j["stdout"].split()[1])
    assert 0 < n < 32, "forked %d children under pids: 32" % n
    assert wait_for(lambda: not pgrep(marker), timeout=8), "fork-bomb children outlived the call"


def test_default_pids_limit(abx, workspace):
    s = abx(make_config(workspace))
    marker = "forkdefault-%d" % random.randint(0, 10 ** 9)
    j = run(s, {"argv": ["python3", "-c", FORKS.replace("1000", "400"), marker], "hard_timeout": 30}, timeout=45)
    assert j["stdout"].startswith("forked "), j
    n = int(j["stdout"].split()[1])
    assert 200 <= n < 256, "forked %d children under the default pids limit of 256" % n
    assert wait_for(lambda: not pgrep(marker), timeout=10), "children outlived the call"


def test_fork_bomb_loop_returns(abx, workspace):
    s = abx(make_config(workspace, limits={"pids": 32}))
    marker = "forkloop-%d" % random.randint(0, 10 ** 9)
    code = "import os\nwhile True:\n    try:\n        os.fork()\n    except OSError:\n        pass\n"
    t0 = time.time()
    j = run(s, {"argv": ["python3", "-c", code, marker], "hard_timeout": 2}, timeout=30)
    assert time.time() - t0 < 15
    assert j["status"] == "timed_out", j
    assert wait_for(lambda: not pgrep(marker), timeout=8), "fork-bomb processes survived"


def test_memory_hog_is_stopped(abx, workspace):
    s = abx(make_config(workspace, limits={"memory": "64MiB"}))
    code = ("b = bytearray(512 * 1024 * 1024)\n"
            "for i in range(0, len(b), 4096): b[i] = 1\n"
            "print('allocated', flush=True)\n")
    j = run(s, {"argv": ["python3", "-c", code], "hard_timeout": 20}, timeout=40)
    assert "allocated" not in j["stdout"], j
    assert not succeeded(j), j
    assert j["signal"] is not None or "MemoryError" in j["stderr"], j


def test_memory_limit_allows_small_use(abx, workspace):
    s = abx(make_config(workspace, limits={"memory": "64MiB"}))
    j = py(s, "b = bytearray(8 * 1024 * 1024); print('small ok')")
    assert succeeded(j) and j["stdout"] == "small ok\n", j


# -- process groups --------------------------------------------------------------------------------

def test_hard_timeout_kills_grandchildren(srv):
    d = uniq_sleep()
    t0 = time.time()
    j = run(srv, {"argv": ["sh", "-c", "sleep %s & sleep %s" % (d, d)], "hard_timeout": 1})
    assert j["status"] == "timed_out", j
    assert time.time() - t0 < 6
    assert wait_for(lambda: not pgrep("sleep " + d), timeout=5), "a grandchild survived the hard timeout"


def test_setsid_escapee_killed_by_hard_timeout(srv):
    # a grandchild that leaves the process group still dies with the call
    d = uniq_sleep()
    code = ("import os, subprocess\n"
            "subprocess.Popen(['sleep', %r], start_new_session=True)\n"
            "os.execvp('sleep', ['sleep', %r])\n") % (d, d)
    j = py(srv, code, hard_timeout=1)
    assert j["status"] == "timed_out", j
    assert wait_for(lambda: not pgrep("sleep " + d), timeout=5), "a setsid() grandchild survived"


def test_background_process_confined_too(abx, workspace, outside):
    s = abx(make_config(workspace))
    r = s.post("/process", token=ALICE_TOKEN, json_body={"argv": ["cat", outside, "/proc/self/status"]})
    assert r.status_code == 200, r.text
    pid = r.json()["pid"]

    def done():
        g = s.get("/process/%d" % pid, token=ALICE_TOKEN).json()
        return g if g["running"] is False else None
    assert wait_for(done, timeout=5)
    o = s.get("/process/%d/output" % pid, token=ALICE_TOKEN).json()
    assert "outside-content" not in o["stdout"]
    assert OUTSIDE(o["stderr"])
    assert "NoNewPrivs:\t1" in o["stdout"]


# -- which statement's confinement applies (issue 25) -----------------------------------------------

def preset_plus_shell_net(ws):
    shell = {"ops": ["commands.run"], "principals": ["*"], "paths": [ws + "/**"],
             "commands": {"allow": ["sh *"], "shell": True}, "net": True}
    return {"workspace": ws, "terminal_listen": "off",
            "auth": {"tokens": [{"principal": "alice", "roles": ["agent"], "token_sha256": sha256_hex(ALICE_TOKEN)}]},
            "policy": {"presets": ["workspace"], "allow": [shell]}}


def test_network_does_not_depend_on_the_commands_shape(abx, workspace, tmp_path):
    """A preset (no network) and a {shell: true, net: true} statement both admit `python3 probe.py`;
    only the latter admits `... | cat`. The call runs under the admitting statement that grants
    the network in both cases, so both reach the network."""
    with open(os.path.join(workspace, "probe.py"), "w") as f:
        f.write(CONNECT)
    s = abx(preset_plus_shell_net(workspace))
    plain = run(s, {"command": "python3 probe.py %d" % s.port})
    piped = run(s, {"command": "python3 probe.py %d | cat" % s.port})
    assert piped["stdout"].strip() == "connected 200", piped
    assert plain["stdout"].strip() == "connected 200", plain
    # `abx explain` says so, with the confinement it gets
    cfg = os.path.join(str(tmp_path), "net.json")
    with open(cfg, "w") as f:
        json.dump(preset_plus_shell_net(workspace), f)
    for cmd in ("python3 probe.py 1", "python3 probe.py 1 | cat"):
        r = run_abx(["explain", "--config", cfg, "--op", "commands.run", "--principal", "alice",
                     "--arg", "command=" + cmd, "--json"], home=str(tmp_path / "h"))
        conf = json.loads(r.stdout)["confinement"]
        assert conf["net"] is True, conf
        assert conf["statement"] == "allow[0]", conf
        assert workspace in conf["write_roots"], conf
        assert conf["tier"] in ("full", "unprivileged", "minimal", "none"), conf


def test_without_a_network_statement_the_preset_confines(workspace, tmp_path):
    r = run_abx(["explain", "--op", "commands.run", "--arg", "command=curl http://x"], home=str(tmp_path / "h"),
                cwd=workspace)
    assert r.returncode == 0, r.stderr
    assert "confinement (preset:workspace[0]): network off, tier " in r.stdout, r.stdout
    assert "write_roots " + workspace in r.stdout, r.stdout


# -- abx serve --net: the embedded default grows a network, keeping `local` (issue 25) ----------------

def test_serve_net_on_keeps_the_local_principal(abx, workspace):
    with open(os.path.join(workspace, "probe.py"), "w") as f:
        f.write(CONNECT)
    s = abx(None, args=["--net", "on"])
    r = s.post("/commands/run", token=s.token, json_body={"command": "python3 probe.py %d" % s.port}, timeout=30)
    assert r.status_code == 200, r.text
    assert r.json()["stdout"].strip() == "connected 200", r.json()
    off = abx(None, args=["--net", "off"])
    r = off.post("/commands/run", token=off.token, json_body={"command": "python3 probe.py %d" % off.port}, timeout=30)
    assert r.json()["stdout"].startswith("refused"), r.json()


def test_serve_net_allow_keeps_local_and_goes_out_only_through_the_proxy(abx, workspace):
    # --net allow:HOST,... gives the preset an egress allowlist (docs/egress.md): the process
    # gets the proxy variables, a listed host is decided allowed, an unlisted one is refused
    # with the proxy's message, and principal `local` keeps its token
    s = abx(None, args=["--net", "allow:pypi.org,*.example.test"])
    j = s.post("/commands/run", token=s.token, timeout=60, json_body={
        "command": "echo $HTTPS_PROXY; curl -sS --max-time 10 http://evil.test/ ; echo"}).json()
    assert j["stdout"].splitlines()[0] == "http://127.0.0.1:3128", j
    assert "abx: egress to evil.test denied by policy" in j["stdout"], j


@pytest.mark.parametrize("args,why", [
    (["--net", "sometimes"], "--net must read on, off or allow:HOST"),
    (["--net", "allow:"], "--net must read on, off or allow:HOST"),
])
def test_serve_net_bad_value(abx, args, why):
    s = abx(None, args=args, start=False)
    with pytest.raises(RuntimeError) as e:
        s.start()
    assert why in str(e.value)


def test_serve_net_with_a_config_is_refused(abx, workspace):
    s = abx(make_config(workspace), args=["--net", "on"], start=False)
    with pytest.raises(RuntimeError) as e:
        s.start()
    assert "--net grows the embedded default" in str(e.value)


# -- extends: default — a config that grows the embedded default (issue 25) -------------------------

def extends_config(ws):
    shell = {"ops": ["commands.run"], "principals": ["local"], "paths": [ws + "/**"],
             "commands": {"allow": ["sh *"], "shell": True}, "net": True}
    return {"extends": "default", "workspace": ws, "terminal_listen": "off",
            "auth": {"tokens": [{"principal": "alice", "roles": ["agent"], "token_sha256": sha256_hex(ALICE_TOKEN)}]},
            "policy": {"allow": [shell]}}


def test_extends_default_keeps_local_and_its_token(abx, workspace):
    with open(os.path.join(workspace, "probe.py"), "w") as f:
        f.write(CONNECT)
    s = abx(extends_config(workspace))
    local = s.token  # $ABX_HOME/token, made as for the embedded default
    r = s.get("/files/read", token=local, params={"path": "a.txt"})
    assert r.status_code == 200 and r.json()["content"] == "hello\n", r.text
    # the file's own principal gets the preset too
    assert s.get("/files/read", token=ALICE_TOKEN, params={"path": "a.txt"}).status_code == 200
    # the file's statement grows local: the network for its commands, pipes or not
    for cmd in ("python3 probe.py %d", "python3 probe.py %d | cat"):
        j = s.post("/commands/run", token=local, json_body={"command": cmd % s.port}, timeout=30).json()
        assert j["stdout"].strip() == "connected 200", j
    # alice has no network statement: the preset confines her
    j = s.post("/commands/run", token=ALICE_TOKEN, json_body={"command": "python3 probe.py %d" % s.port},
               timeout=30).json()
    assert j["stdout"].startswith("refused"), j


def test_extends_default_takes_serve_net(abx, workspace):
    cfg = extends_config(workspace)
    cfg["policy"] = {"allow": []}
    with open(os.path.join(workspace, "probe.py"), "w") as f:
        f.write(CONNECT)
    s = abx(cfg, args=["--net", "on"])
    j = s.post("/commands/run", token=ALICE_TOKEN, json_body={"command": "python3 probe.py %d" % s.port},
               timeout=30).json()
    assert j["stdout"].strip() == "connected 200", j


def test_extends_must_name_default(abx, workspace):
    cfg = extends_config(workspace)
    cfg["extends"] = "mine"
    s = abx(cfg, start=False)
    with pytest.raises(RuntimeError) as e:
        s.start()
    assert "extends" in str(e.value) and "none or default" in str(e.value)
