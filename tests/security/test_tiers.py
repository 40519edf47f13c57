"""Confinement tiers (docs/security.md, "Tiers"): the confinement part of the attack corpus
run in each tier this machine can be made to show.

  full          abx as started by the other tests (root, every kernel feature)
  unprivileged  abx as uid 65534 with every capability dropped, under tests/helpers/tierwrap.c:
                a seccomp filter refusing unshare, clone with namespace flags, setns and mount
                the way Docker's default profile does
  minimal       the same, and landlock_* answered with ENOSYS, as gVisor does

In each, every case either holds (the probe is refused inside the process) or the call is
refused as 503 sandbox.unavailable naming the missing layer: none runs unconfined. The
lifetime cases (setsid grandchildren) are left out: without a delegated cgroup they can
outlive their call, still confined (docs/security.md says so)."""
import json
import os
import random
import shutil
import stat
import tempfile

import pytest

import abxtest as bb
from abxtest import ALICE_TOKEN, sha256_hex, tokens
from test_child_confinement import ABX_PROBES, CAP_PROBES, SECCOMP_PROBES, SOCKETS, TRY, UNIX_PROBES

NOBODY = 65534
SECRET = "tier-secret-5521"
TIERS = {
    "full": None,
    "unprivileged": ["--uid", str(NOBODY), "--gid", str(NOBODY)],
    "minimal": ["--uid", str(NOBODY), "--gid", str(NOBODY), "--no-landlock"],
}


def wrapper():
    w = os.environ.get("ABX_TIERWRAP") or os.path.join(os.path.dirname(os.path.abspath(bb.ABX_BIN_SOURCE)),
                                                       "abx-tierwrap")
    return os.path.abspath(w) if os.access(w, os.X_OK) else None


class WrappedServer(bb.AbxServer):
    """abx serve, started through the tier wrapper (it execs abx: the pid is abx's)."""

    def __init__(self, *a, wrap=None, **kw):
        super().__init__(*a, **kw)
        self.wrap = wrap

    def command(self):
        cmd = super().command()
        return cmd if self.wrap is None else [wrapper()] + self.wrap + ["--"] + cmd


def stmt(ws, **extra):
    s = {"ops": ["commands.*", "process.*"], "principals": ["alice"],
         "paths": {"read": [ws + "/**"], "write": [ws + "/**"]}, "commands": ["python3 *"]}
    s.update(extra)
    return s


def config(ws, statement=None, deny=None, ledger=False, confine=None):
    policy = {"allow": [{"ops": ["core.*", "system.*", "ledger.*"], "principals": ["*"]},
                        statement or stmt(ws)]}
    if deny:
        policy["deny"] = deny
    cfg = {"workspace": ws, "terminal_listen": "off", "ledger": {"enabled": ledger},
           "auth": {"tokens": tokens()}, "policy": policy}
    if confine:
        cfg["confine"] = confine
    return cfg


class Tier:
    """A base directory any uid can traverse, a copy of abx there, a workspace owned by
    the uid abx runs as, and servers started in the tier."""

    def __init__(self, name):
        self.name = name
        self.wrap = TIERS[name]
        self.base = tempfile.mkdtemp(prefix="abx-tier-%s-" % name)
        os.chmod(self.base, 0o755)
        self.bin = os.path.join(self.base, "abx")
        shutil.copy2(bb.ABX_BIN, self.bin)
        os.chmod(self.bin, 0o755)
        self.uid = NOBODY if self.wrap else os.geteuid()
        self.servers = []
        self.n = 0

    def workspace(self):
        self.n += 1
        ws = os.path.join(self.base, "ws%d" % self.n)
        os.makedirs(os.path.join(ws, "sub"))
        with open(os.path.join(ws, "a.txt"), "w") as f:
            f.write("hello\n")
        self.own(ws)
        return os.path.realpath(ws)

    def own(self, path):
        for root, dirs, files in os.walk(path):
            for n in [root] + [os.path.join(root, x) for x in dirs + files]:
                os.chown(n, self.uid, self.uid)

    def server(self, cfg):
        d = os.path.join(self.base, "srv%d" % self.n)
        os.makedirs(d, exist_ok=True)
        s = WrappedServer(d, config=cfg, workspace=cfg["workspace"], wrap=self.wrap)
        self.own(d)
        os.chmod(s.config_path, 0o644)
        self.servers.append(s)
        orig = bb.ABX_BIN
        bb.ABX_BIN = self.bin   # command() reads the module's ABX_BIN
        try:
            s.start()
        finally:
            bb.ABX_BIN = orig
        return s

    def close(self):
        for s in self.servers:
            try:
                s.stop()
            finally:
                s.kill()
        shutil.rmtree(self.base, ignore_errors=True)


@pytest.fixture(scope="module", params=sorted(TIERS))
def tier(request):
    if TIERS[request.param] is not None:
        if os.geteuid() != 0:
            pytest.skip("the tier wrapper drops from root to uid %d" % NOBODY)
        if not wrapper():
            pytest.skip("abx-tierwrap is not built (set ABX_TIERWRAP)")
    t = Tier(request.param)
    yield t
    t.close()


@pytest.fixture(scope="module")
def shared(tier):
    ws = tier.workspace()
    s = tier.server(config(ws))
    info = s.get("/system/info", token=ALICE_TOKEN).json()["confinement"]
    if tier.name == "full" and info["tier"] != "full":
        pytest.skip("this machine does not give the full tier: %s" % info["missing"])
    assert info["tier"] == tier.name, info
    # abx serve logs the tier (and what is unavailable) once the sandbox is built
    assert bb.wait_for(lambda: "confinement tier %s" % tier.name in s.stderr(), timeout=5), s.stderr()[-2000:]
    return s, ws


def run(s, code, *args, **kw):
    body = {"argv": ["python3", "-c", code] + [str(a) for a in args]}
    body.update(kw)
    return s.post("/commands/run", token=ALICE_TOKEN, json_body=body, timeout=60)


def holds_or_refused(r, tier_name, layer=None):
    """The call's answer: 'refused' (503 sandbox.unavailable naming a layer) or the
    command's output (it ran, so its probe must have been refused inside)."""
    if r.status_code == 503:
        err = r.json()["error"]
        assert err["code"] == "sandbox.unavailable", r.text
        assert "tier %s" % tier_name in err["message"], r.text
        if layer:
            assert layer in err["message"], r.text
        return None
    assert r.status_code == 200, r.text[:800]
    j = r.json()
    assert tier_name != "minimal", "a command ran in the minimal tier without Landlock: %s" % j
    return j


def last_word(j):
    out = j["stdout"].strip().split()
    assert out, j
    return out[-1]


CASES = {}
CASES.update({"net_" + k: TRY + "attempt(lambda: exec(%r))\n" % v for k, v in SOCKETS.items()})
CASES.update({"seccomp_" + k: TRY + v for k, v in SECCOMP_PROBES.items()})
CASES.update({"seccomp_" + k: TRY + v for k, v in UNIX_PROBES.items()})
CASES.update({"abx_" + k: TRY + v for k, v in ABX_PROBES.items()})
CASES.update({"cap_" + k: TRY + v for k, v in CAP_PROBES.items() if k != "read_other_uid_0600"})
for target in ("/tmp/abx-tier-probe-%d", "/etc/abx-tier-probe-%d", "/var/tmp/abx-tier-probe-%d",
               "/dev/shm/abx-tier-probe-%d"):
    CASES["write_" + target.split("/")[1] + "_" + target.split("/")[2].split("-")[0]] = (
        TRY + "attempt(lambda: open(%r %% %d, 'a').write('x'))\n" % (target, random.randint(0, 10 ** 9)))


@pytest.mark.parametrize("case", sorted(CASES))
def test_corpus_case_holds_or_is_refused(shared, tier, case):
    if case.startswith("seccomp_unix") and tier.name == "full":
        pytest.skip("the full tier builds each process's view: Unix sockets are allowed (test_unix_sockets.py)")
    s, ws = shared
    r = run(s, CASES[case], s.proc.pid if not case.startswith("net_") else s.port)
    j = holds_or_refused(r, tier.name, "landlock" if tier.name == "minimal" else None)
    # with Landlock and seccomp these statements are enforceable: they must run, not be refused
    assert j is not None or tier.name == "minimal", r.text
    if j is not None:
        assert last_word(j) != "ALLOWED", "%s in tier %s: %s" % (case, tier.name, j)
        assert "refused" in j["stdout"], j
    assert s.proc.poll() is None, "abx died"


def test_outside_file_not_readable(shared, tier, tmp_path):
    s, ws = shared
    outside = os.path.join(tier.base, "outside-%d.txt" % random.randint(0, 10 ** 9))
    with open(outside, "w") as f:
        f.write(SECRET)
    os.chmod(outside, 0o644)  # any uid may read it: only confinement stands in the way
    r = run(s, TRY + "attempt(lambda: print(open(sys.argv[1]).read()))\n", outside)
    j = holds_or_refused(r, tier.name, "landlock" if tier.name == "minimal" else None)
    if j is not None:
        assert SECRET not in j["stdout"] and last_word(j) != "ALLOWED", j


def test_privileges_of_a_process(shared, tier):
    s, ws = shared
    r = run(s, "print(open('/proc/self/status').read())")
    j = holds_or_refused(r, tier.name)
    if j is not None:
        for line in ("NoNewPrivs:\t1", "CapEff:\t0000000000000000", "CapPrm:\t0000000000000000",
                     "CapAmb:\t0000000000000000"):
            assert line in j["stdout"], j["stdout"]


@pytest.mark.parametrize("confine", ["required", "best_effort"])
def test_deny_mask_holds_or_names_the_mount_namespace(tier, confine):
    """A deny statement is policy: without a mount namespace to mask it the call is
    refused, even with best_effort (which drops hardening layers, never a deny)."""
    ws = tier.workspace()
    secret = os.path.join(ws, "secret.txt")
    with open(secret, "w") as f:
        f.write(SECRET)
    tier.own(secret)
    s = tier.server(config(ws, deny=[{"paths": [secret]}], confine=confine))
    r = run(s, TRY + "attempt(lambda: print(open(sys.argv[1]).read()))\n", secret)
    if tier.name != "full":
        assert r.status_code == 503 and "mount namespace" in r.text, r.text
        assert r.json()["error"]["code"] == "sandbox.unavailable", r.text
        return
    j = holds_or_refused(r, tier.name)
    if j is not None:
        assert SECRET not in j["stdout"], j
    assert SECRET not in r.text


def test_pids_limit_holds(tier):
    """pids by the cgroup (full) or RLIMIT_NPROC (unprivileged)."""
    ws = tier.workspace()
    s = tier.server(config(ws, statement=stmt(ws, limits={"pids": 16})))
    code = ("import threading, time\n"
            "n = 0\n"
            "try:\n"
            "    for i in range(100):\n"
            "        threading.Thread(target=time.sleep, args=(3,), daemon=True).start(); n += 1\n"
            "except RuntimeError:\n"
            "    pass\n"
            "print('threads', n)\n")
    j = holds_or_refused(run(s, code, hard_timeout=20), tier.name)
    assert j is not None or tier.name == "minimal"
    if j is not None:
        assert j["stdout"].startswith("threads"), j
        assert int(j["stdout"].split()[1]) < 16, j


def test_memory_limit_needs_the_cgroup(tier):
    ws = tier.workspace()
    s = tier.server(config(ws, statement=stmt(ws, limits={"memory": "64MiB"})))
    r = run(s, "b = bytearray(200 * 1024 * 1024)\nprint('allocated')\n", hard_timeout=20)
    if tier.name != "full":
        assert r.status_code == 503 and "cgroup memory" in r.text, r.text
    j = holds_or_refused(r, tier.name)
    if j is not None:
        assert "allocated" not in j["stdout"], j


def test_best_effort_runs_and_records_what_was_not_enforced(tier):
    """confine: best_effort runs the command and the ledger says which tier it met and what
    of its statement was not enforced; required answers 503 and records the tier too."""
    ws = tier.workspace()
    s = tier.server(config(ws, ledger=True, confine="best_effort"))
    r = run(s, "print('ran')")
    assert r.status_code == 200 and r.json()["stdout"] == "ran\n", r.text
    text = ledger_text(s)
    assert '"tier": "%s"' % tier.name in text, text[:3000]   # the attempt's admitted event
    # what the statement needed and the tier lacked: only where something was lacking
    assert ('"kind": "confinement"' in text) == (tier.name == "minimal"), text[:3000]
    if tier.name == "minimal":
        assert '"not_enforced": "landlock' in text, text[:3000]
    info = s.get("/system/info", token=ALICE_TOKEN).json()["confinement"]
    assert info["tier"] == tier.name and info["mode"] == "best_effort", info
    for name, layer in info["layers"].items():
        assert layer["state"] in ("active", "unavailable", "not_needed"), (name, layer)
        assert layer["state"] == "active" or layer.get("reason"), (name, layer)


def ledger_text(s):
    """Every group of the ledger that alice may see, as one JSON text."""
    tl = s.get("/ledger/timeline", token=ALICE_TOKEN)
    assert tl.status_code == 200, tl.text
    ids = set()

    def walk(v):
        if isinstance(v, dict):
            if isinstance(v.get("group_id"), int):
                ids.add(v["group_id"])
            for x in v.values():
                walk(x)
        elif isinstance(v, list):
            for x in v:
                walk(x)
    walk(tl.json())
    return "\n".join(json.dumps(s.get("/ledger/%d" % g, token=ALICE_TOKEN).json()) for g in sorted(ids))


def test_required_refusal_records_the_tier(tier):
    if tier.name != "minimal":
        pytest.skip("only the minimal tier refuses every command")
    ws = tier.workspace()
    s = tier.server(config(ws, ledger=True))
    r = run(s, "print('ran')")
    assert r.status_code == 503 and r.json()["error"]["code"] == "sandbox.unavailable", r.text
    text = ledger_text(s)
    assert '"tier": "minimal"' in text and '"missing": "landlock' in text, text[:3000]


def test_run_as_other_uid_is_a_config_error_when_unprivileged(tier):
    if tier.name == "full":
        pytest.skip("abx may switch ids here")
    ws = tier.workspace()
    cfg = config(ws)
    cfg["run_as"] = "12345:12345"
    with pytest.raises(RuntimeError, match="run_as 12345:12345 is not abx's own uid"):
        tier.server(cfg)


def test_check_config_warns_about_what_this_tier_cannot_enforce(tier):
    import subprocess
    ws = tier.workspace()
    secret = os.path.join(ws, "secret.txt")
    open(secret, "w").close()
    cfg = config(ws, statement=stmt(ws, limits={"memory": "64MiB"}), deny=[{"paths": [secret]}])
    path = os.path.join(tier.base, "check-%d.json" % tier.n)
    with open(path, "w") as f:
        json.dump(cfg, f)
    os.chmod(path, 0o644)
    home = os.path.join(tier.base, "check-home-%d" % tier.n)
    os.makedirs(home)
    tier.own(home)
    cmd = [tier.bin, "check-config", path]
    if tier.wrap:
        cmd = [wrapper()] + tier.wrap + ["--"] + cmd
    r = subprocess.run(cmd, capture_output=True, text=True, cwd=tier.base, env=dict(os.environ, ABX_HOME=home),
                       timeout=60)
    assert r.returncode == 0, r.stdout + r.stderr
    warnings = [ln for ln in r.stdout.splitlines() if "config.not_enforceable" in ln]
    if tier.name == "full":
        assert warnings == [], r.stdout
        return
    text = "\n".join(warnings)
    assert "needs mount namespace" in text and "needs cgroup" in text, r.stdout
    assert ("needs landlock" in text) == (tier.name == "minimal"), r.stdout
    assert "tier %s" % tier.name in text, r.stdout


def test_file_operations_work_in_every_tier(tier):
    """abx's own file handlers need no privilege (the openat2 jail): the same ops work as
    root and as an unprivileged uid without capabilities, Landlock or not."""
    ws = tier.workspace()
    cfg = config(ws)
    cfg["policy"]["allow"].append({"ops": ["files.*"], "principals": ["alice"], "paths": [ws + "/**"]})
    s = tier.server(cfg)
    w = s.post("/files/write", token=ALICE_TOKEN, json_body={"path": ws + "/new.txt", "content": "tier\n"})
    assert w.status_code == 200, w.text
    r = s.get("/files/read", token=ALICE_TOKEN, params={"path": ws + "/new.txt"})
    assert r.status_code == 200 and r.json()["content"] == "tier\n", r.text
    assert os.stat(os.path.join(ws, "new.txt")).st_uid == tier.uid
    outside = s.get("/files/read", token=ALICE_TOKEN, params={"path": tier.base + "/abx"})
    assert outside.status_code == 403, outside.text


@pytest.mark.parametrize("probe", ["kill_term", "kill_stop", "kill_probe", "kill_group"])
def test_signals_to_abx_refused_without_landlock_scoping(tier, probe):
    """With abx's uid and no Landlock signal scoping (minimal here; unprivileged on
    kernels below ABI 6), the seccomp guard keeps a process from signalling abx, its
    process group and every process of the uid."""
    if tier.name != "minimal":
        pytest.skip("Landlock scopes signals in this tier on this machine")
    ws = tier.workspace()
    s = tier.server(config(ws, confine="best_effort"))
    r = run(s, TRY + ABX_PROBES[probe], s.proc.pid)
    assert r.status_code == 200, r.text
    assert last_word(r.json()) != "ALLOWED", r.json()
    r = run(s, TRY + "attempt(lambda: os.kill(-1, 0))\n")
    assert r.status_code == 200 and last_word(r.json()) != "ALLOWED", r.json()
    assert s.proc.poll() is None and s.get("/health").status_code == 200


def test_read_only_root_file_system():
    """abx as a hardened container runs it: any uid, no capabilities, and the root file
    system read-only apart from /tmp (Docker's --read-only with --tmpfs /tmp), where the
    workspace and abx's state live. Files, commands, processes and the ledger all work,
    and abx really runs on a read-only root."""
    if os.geteuid() != 0:
        pytest.skip("the tier wrapper needs root to make the mount namespace")
    if not wrapper():
        pytest.skip("abx-tierwrap is not built (set ABX_TIERWRAP)")
    t = Tier("unprivileged")
    t.wrap = TIERS["unprivileged"] + ["--ro-root", "--rw", "/tmp"]
    try:
        ws = t.workspace()
        cfg = config(ws, ledger=True)
        cfg["policy"]["allow"].append({"ops": ["files.*"], "principals": ["alice"], "paths": [ws + "/**"]})
        s = t.server(cfg)
        with open("/proc/%d/mountinfo" % s.proc.pid) as f:
            root = [ln.split() for ln in f if ln.split()[4] == "/"]
        assert root and "ro" in root[-1][5].split(","), root   # abx's own view of /
        info = s.get("/system/info", token=ALICE_TOKEN).json()["confinement"]
        assert info["tier"] == "unprivileged", info
        w = s.post("/files/write", token=ALICE_TOKEN, json_body={"path": ws + "/ro.txt", "content": "ro\n"})
        assert w.status_code == 200, w.text
        r = run(s, "open('made.txt', 'w').write('x'); print(open('ro.txt').read().strip())")
        assert r.status_code == 200 and r.json()["exit_code"] == 0, r.text
        assert r.json()["stdout"].strip() == "ro" and os.path.exists(os.path.join(ws, "made.txt"))
        p = s.post("/process", token=ALICE_TOKEN, json_body={"argv": ["python3", "-c", "print('bg')"]})
        assert p.status_code == 200 and p.json()["pid"] > 0, p.text
        led = s.get("/ledger/timeline", token=ALICE_TOKEN)   # the ledger lives in the state folder
        assert led.status_code == 200, led.text
        assert any(e.get("op") == "commands.run" for e in led.json()["events"]), led.text[:600]
        # the wrapper's promise holds for the processes abx starts, too
        r = run(s, "import os\ntry:\n    open('/etc/abx-ro-probe', 'w')\n    print('WROTE')\nexcept OSError as e:\n"
                   "    print(e.errno)")
        assert r.status_code == 200 and "WROTE" not in r.json()["stdout"], r.text
    finally:
        t.close()


@pytest.mark.parametrize("confine", ["required", "best_effort"])
def test_egress_allowlist_needs_a_network_namespace(tier, confine):
    """net: {allow}: the proxy listens inside the process's namespace; without namespaces
    the call is refused in either mode (an allowlist cannot be approximated)."""
    ws = tier.workspace()
    s = tier.server(config(ws, statement=stmt(ws, net={"allow": ["pypi.org"]}), confine=confine))
    r = run(s, "import os; print(os.environ.get('HTTPS_PROXY'))")
    if tier.name == "full":
        assert r.status_code == 200 and r.json()["stdout"] == "http://127.0.0.1:3128\n", r.text
        return
    assert r.status_code == 503 and r.json()["error"]["code"] == "sandbox.unavailable", r.text
    if tier.name == "minimal" and confine == "required":
        assert "landlock" in r.text, r.text  # refused first for what every statement needs
    else:
        assert "an egress allowlist needs a network namespace" in r.text, r.text


def test_check_config_warns_an_allowlist_needs_namespaces(tier):
    import subprocess
    ws = tier.workspace()
    path = os.path.join(tier.base, "check-eg-%d.json" % tier.n)
    with open(path, "w") as f:
        json.dump(config(ws, statement=stmt(ws, net={"allow": ["pypi.org"]})), f)
    os.chmod(path, 0o644)
    home = os.path.join(tier.base, "check-eg-home-%d" % tier.n)
    os.makedirs(home)
    tier.own(home)
    cmd = [tier.bin, "check-config", path]
    if tier.wrap:
        cmd = [wrapper()] + tier.wrap + ["--"] + cmd
    r = subprocess.run(cmd, capture_output=True, text=True, cwd=tier.base, env=dict(os.environ, ABX_HOME=home),
                       timeout=60)
    assert r.returncode == 0, r.stdout + r.stderr
    warned = "net: {allow: [...]} needs network namespace" in r.stdout
    assert warned == (tier.name != "full"), r.stdout
