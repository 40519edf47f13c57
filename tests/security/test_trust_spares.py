"""Spares (src/sandbox/spare.c, issue 14): once a slot's process tree is gone, abx makes the
slot's next process and confines it ahead; a later call of the same slot and settings hands it
its streams, cwd, argv and environment, and it execs.

The attacker wants what waits between calls to be a way in: a process that holds abx's
descriptors, keeps privileges, outlives abx, or serves a call of other settings (another
statement's limits) with the confinement of the first. Each test checks that spares were
made and used where the machine allows them, so none passes on the ordinary path only."""
import os
import signal
import time

import pytest

from abxtest import ALICE_TOKEN, tokens, wait_for

# forks up to 10 children that live 0.3 s (so they are alive together), waits for them
# all (so the tree is gone when the call ends and the slot comes back), prints the count
FORKS = ("import os, time\n"
         "n = 0\n"
         "while n < 10:\n"
         "    try:\n"
         "        pid = os.fork()\n"
         "    except OSError:\n"
         "        break\n"
         "    if pid == 0:\n"
         "        time.sleep(0.3)\n"
         "        os._exit(0)\n"
         "    n += 1\n"
         "while True:\n"
         "    try:\n"
         "        os.wait()\n"
         "    except ChildProcessError:\n"
         "        break\n"
         "print('forked', n, flush=True)\n")


def config(ws, statements=None):
    paths = {"read": [ws + "/**"], "write": [ws + "/**"]}
    stmts = statements or [{"commands": ["sh *", "cat *", "true"]}]
    allow = [{"ops": ["core.*", "system.info"], "principals": ["*"]}]
    for st in stmts:
        allow.append(dict({"ops": ["commands.run"], "principals": ["alice"], "paths": paths}, **st))
    return {"workspace": ws, "terminal_listen": "off", "ledger": {"enabled": False},
            "auth": {"tokens": tokens("alice")}, "policy": {"allow": allow}}


def stats(s):
    return s.get("/system/info", token=ALICE_TOKEN).json()["confinement"].get("prepared_confinement", {})


def start(abx, cfg):
    s = abx(cfg)
    if not stats(s).get("on"):
        pytest.skip("no prepared confinements on this machine (they need the view, cgroups, Landlock >= 6)")
    return s


def run(s, argv, timeout=30):
    r = s.post("/commands/run", token=ALICE_TOKEN, json_body={"argv": argv}, timeout=timeout)
    assert r.status_code == 200, r.text[:800]
    return r.json()


def spares(pid):
    out = []
    for k in os.listdir("/proc"):
        if not k.isdigit():
            continue
        try:
            with open("/proc/%s/stat" % k) as f:
                st = f.read()
            with open("/proc/%s/comm" % k) as f:
                comm = f.read().strip()
        except OSError:
            continue
        ppid = int(st.rsplit(")", 1)[1].split()[1])
        if ppid == pid and comm == "abx-spare":
            out.append(int(k))
    return out


def status(pid):
    with open("/proc/%d/status" % pid) as f:
        return dict(line.rstrip("\n").split(":\t", 1) for line in f if ":\t" in line)


def warm(s, n=4):
    for _ in range(n):
        j = run(s, ["sh", "-c", "echo warm"])
        assert j["exit_code"] == 0 and j["stdout"] == "warm\n", j
    assert wait_for(lambda: spares(s.proc.pid), timeout=5), "no spare was made after %d calls" % n
    assert stats(s)["spares_used"] >= 1, stats(s)


def test_an_idle_spare_is_confined_and_holds_nothing_of_abx(abx, workspace):
    """Between calls the spare has dropped every capability, is under no_new_privs, the
    filter and Landlock, sits in namespaces and a cgroup of its own, and holds one
    descriptor: its channel to abx. None of abx's (the listening socket, the ledger, other
    processes' pipes) may be reachable through it."""
    s = start(abx, config(workspace))
    warm(s)
    abx_pid = s.proc.pid
    for p in spares(abx_pid):
        st = status(p)
        assert st["NoNewPrivs"].strip() == "1", st
        assert st["Seccomp"].strip() == "2", st
        if "Seccomp_filters" in st:  # the one filter, inherited from the cloner or loaded: never two
            assert st["Seccomp_filters"].strip() == "1", st
        assert int(st["CapEff"], 16) == 0 and int(st["CapPrm"], 16) == 0 and int(st["CapBnd"], 16) == 0, st
        fds = os.listdir("/proc/%d/fd" % p)
        assert len(fds) == 1, [os.readlink("/proc/%d/fd/%s" % (p, f)) for f in fds]
        assert os.readlink("/proc/%d/fd/%s" % (p, fds[0])).startswith("socket:"), fds
        for ns in ("net", "mnt"):
            assert os.readlink("/proc/%d/ns/%s" % (p, ns)) != os.readlink("/proc/%d/ns/%s" % (abx_pid, ns)), ns
        with open("/proc/%d/cgroup" % p) as f:
            mine = [ln for ln in f.read().splitlines() if ":pids:" in ln or ln.startswith("0::")]
        with open("/proc/%d/cgroup" % abx_pid) as f:
            theirs = [ln for ln in f.read().splitlines() if ":pids:" in ln or ln.startswith("0::")]
        assert mine and mine != theirs, (mine, theirs)


def test_a_spare_serves_only_the_settings_it_was_made_for(abx, workspace):
    """Two statements grant the same paths (one slot) with different pids limits. Calls
    alternate between them, each after the other's spare was made: a spare made for the
    pids: 4 statement must not run the pids: 64 statement's program under 4, nor the other
    way round — each call forks as many children as its own statement allows."""
    s = start(abx, config(workspace, [{"commands": ["python3 -c * small"], "limits": {"pids": 4}},
                                      {"commands": ["python3 -c * large"], "limits": {"pids": 64}}]))
    want = {"small": 3, "large": 10}
    for i in range(4):
        for kind in ("small", "large"):
            j = run(s, ["python3", "-c", FORKS, kind], timeout=60)
            assert j["stdout"] == "forked %d\n" % want[kind], (i, kind, j)
    # and spares did serve: the same statement again and again, each call after the last
    # one's slot came back (else the next call takes another slot, whose spare was made
    # for whatever that slot ran last)
    for kind in ("small", "large"):
        before = stats(s)["spares_used"]
        for _ in range(3):
            j = run(s, ["python3", "-c", FORKS, kind], timeout=60)
            assert j["stdout"] == "forked %d\n" % want[kind], (kind, j)
            time.sleep(0.3)
        assert stats(s)["spares_used"] >= before + 2, (kind, stats(s))


def test_idle_spares_die_with_abx(abx, workspace):
    """A spare is abx's child, set to die with the thread that made it: kill -9 abx and
    no spare may stay behind (it would be a process inside the sandbox's namespaces that no
    one watches)."""
    s = start(abx, config(workspace))
    warm(s)
    left = spares(s.proc.pid)
    assert left
    os.killpg(s.proc.pid, signal.SIGKILL)
    s.proc.wait(timeout=10)

    def gone():
        return not any(os.path.exists("/proc/%d" % p) and not open("/proc/%d/stat" % p).read().split(") ", 1)[1]
                       .startswith("Z") for p in left)

    assert wait_for(gone, timeout=5), "spares outlived abx: %s" % left


def test_a_spare_killed_between_calls_does_not_fail_the_next(abx, workspace):
    """Someone kills the idle spare (the OOM killer, an operator): the next call runs as
    usual on the ordinary path, and a new spare is made for the one after."""
    s = start(abx, config(workspace))
    warm(s)
    for p in spares(s.proc.pid):
        os.kill(p, signal.SIGKILL)
    time.sleep(0.2)
    j = run(s, ["sh", "-c", "echo after; cat /proc/self/status | grep -c NoNewPrivs"])
    assert j["exit_code"] == 0 and j["stdout"] == "after\n1\n", j
    used = stats(s)["spares_used"]
    assert wait_for(lambda: spares(s.proc.pid), timeout=5), "no new spare after the killed one"
    for _ in range(2):
        run(s, ["true"])
    assert stats(s)["spares_used"] > used, stats(s)


# a program's view of its own confinement, and whether the kernel keyrings answer it
SELF = ("import ctypes, os\n"
        "st = dict(l.split(':', 1) for l in open('/proc/self/status') if ':' in l)\n"
        "libc = ctypes.CDLL(None, use_errno=True)\n"
        "rc = libc.syscall(250, 0, 0, 0, 0, 0)  # keyctl(KEYCTL_GET_KEYRING_ID) on x86_64\n"
        "print(st['Seccomp'].strip(), st.get('Seccomp_filters', '1').strip(), st['CapBnd'].strip(),\n"
        "      st['CapEff'].strip(), st['NoNewPrivs'].strip(), rc, ctypes.get_errno())\n")


def test_a_spare_from_the_cloner_runs_its_program_under_the_filter_and_no_bounding_set(abx, workspace):
    """Spares are cloned by one thread of abx that carries their filter and an empty
    bounding set, and skip loading them (spare.c, the cloner). What must hold: the program
    a spare runs is under exactly one filter that refuses what it must (keyctl: EPERM),
    with no capability and an empty bounding set; and the cloner's filter and bounding set
    are that thread's alone: abx's other threads keep theirs (a filter leaking onto the
    HTTP workers or the process manager would refuse abx's own calls)."""
    if os.uname().machine != "x86_64":
        pytest.skip("keyctl's number is x86_64's")
    s = start(abx, config(workspace, [{"commands": ["python3 -c *"]}]))
    for _ in range(3):
        j = run(s, ["python3", "-c", SELF])
        assert j["exit_code"] == 0, j
        sec, nfilters, bnd, eff, nnp, rc, err = j["stdout"].split()
        assert (sec, nfilters, int(bnd, 16), int(eff, 16), nnp) == ("2", "1", 0, 0, "1"), j["stdout"]
        assert (rc, err) == ("-1", "1"), "keyctl was not refused with EPERM: %s" % j["stdout"]
        time.sleep(0.2)
    assert stats(s)["spares_used"] >= 1, stats(s)
    pid = s.proc.pid
    threads = {}
    for t in os.listdir("/proc/%d/task" % pid):
        with open("/proc/%d/task/%s/comm" % (pid, t)) as f:
            comm = f.read().strip()
        with open("/proc/%d/task/%s/status" % (pid, t)) as f:
            st = dict(line.rstrip("\n").split(":\t", 1) for line in f if ":\t" in line)
        threads[t] = (comm, st["Seccomp"].strip(), int(st["CapBnd"], 16))
    cloners = [v for v in threads.values() if v[0] == "abx-cloner"]
    assert len(cloners) == 1 and cloners[0][1:] == ("2", 0), threads
    main_bnd = threads[str(pid)][2]
    assert main_bnd != 0, threads
    for comm, sec, bnd in threads.values():
        if comm != "abx-cloner":
            assert (sec, bnd) == ("0", main_bnd), threads
