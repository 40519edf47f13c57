"""The Debian package on a clean Debian 12 (issue 21, packaging): scripts/package.sh builds
abx, libabx0, libabx-dev and python3-abx with dpkg-buildpackage and lintian finds no error;
a minbase Debian 12 root made by debootstrap (cached, see debroot.py) gets abx and
python3-abx installed by apt, its dependencies resolved from the mirror; the unit's
ExecStart runs as the unit's user with the unit's environment and file-system view, and
/health, `abx --version`, a confined command and a terminal answer; an upgrade keeps the
edited config and the state; purge leaves nothing but the state folder /var/lib/abx (and
the user abx that owns it). A copy of the root is also booted by systemd-nspawn, so
systemd itself starts abx.service and the same checks run under the real unit.

Needs root, debootstrap, dpkg-buildpackage (debhelper, dh-python) and lintian; the
systemd test also systemd-nspawn (scripts/deps.sh test). Skips, saying why, when deb.debian.org cannot be reached.
Env: ABX_PACKAGE_DIR (where the packages are built, default build/package),
ABX_CACHE_DIR (the debootstrap tarball and apt's downloads, default ~/.cache/abx),
ABX_DEBIAN_MIRROR."""
import glob
import json
import os
import re
import shlex
import shutil
import signal
import socket
import subprocess
import sys
import time
import urllib.request

import pytest

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import debroot  # noqa: E402

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__)))))
OUT = os.environ.get("ABX_PACKAGE_DIR") or os.path.join(ROOT, "build", "package")
UNIT = "/lib/systemd/system/abx.service"


def log(msg):
    print(f"[package] {msg}", file=sys.stderr)


def _need_tools():
    if os.geteuid() != 0:
        pytest.skip("the package test needs root (debootstrap, chroot, mounts)")
    missing = [t for t in ("debootstrap", "dpkg-buildpackage", "dh", "lintian", "unshare", "chroot")
               if not shutil.which(t)]
    if missing:
        pytest.skip(f"not installed: {', '.join(missing)} (bash scripts/deps.sh test)")


@pytest.fixture(scope="module")
def debs():
    _need_tools()
    t0 = time.time()
    r = subprocess.run(["bash", os.path.join(ROOT, "scripts", "package.sh"), OUT], capture_output=True, text=True,
                       timeout=1800)
    log(f"scripts/package.sh: {time.time() - t0:.0f}s")
    assert r.returncode == 0, r.stdout[-3000:] + r.stderr[-3000:]
    paths = [l for l in r.stdout.splitlines() if l.endswith(".deb")]
    assert len(paths) == 4, r.stdout
    return {os.path.basename(p).split("_")[0]: p for p in paths}


@pytest.fixture(scope="module")
def root(debs, tmp_path_factory):
    try:
        tar = debroot.rootfs_tarball(log)
    except debroot.Unreachable as e:
        pytest.skip(str(e))
    path = str(tmp_path_factory.mktemp("debian12") / "root")
    t0 = time.time()
    debroot.unpack(tar, path)
    log(f"unpacked {tar}: {time.time() - t0:.0f}s")
    os.makedirs(os.path.join(path, "tmp", "debs"))
    for p in debs.values():
        shutil.copy(p, os.path.join(path, "tmp", "debs"))
    yield path
    shutil.rmtree(path, ignore_errors=True)


@pytest.fixture(scope="module")
def installed(root, debs):
    """The dependencies first (apt-get satisfy, from the mirror; systemd too, as on any
    Debian 12 install: its units make `systemd-analyze verify` meaningful, and the package's
    scripts enable the unit), a snapshot, then the two packages by apt: the snapshot is
    what purge must come back to."""
    deps = ", ".join(["systemd, systemd-sysv"] + [subprocess.run(["dpkg-deb", "-f", debs[p], "Depends"], capture_output=True,
                                                   text=True, check=True).stdout.strip()
                                    for p in ("abx", "python3-abx")])
    t0 = time.time()
    try:
        debroot.in_root(root, "apt-get update -qq && apt-get satisfy -y -qq --no-install-recommends "
                              + shlex.quote(deps))
    except debroot.Unreachable as e:
        pytest.skip(str(e))
    log(f"dependencies installed: {time.time() - t0:.0f}s")
    before = debroot.snapshot(root)
    names = [os.path.basename(debs[p]) for p in ("abx", "python3-abx")]
    r = debroot.in_root(root, "apt-get install -y --no-install-recommends "
                              + " ".join(f"/tmp/debs/{n}" for n in names))
    assert "E:" not in r.stdout + r.stderr, r.stdout + r.stderr
    return before


def test_lintian_has_no_errors_or_warnings(debs):
    report = open(os.path.join(OUT, "lintian.txt")).read()
    assert not [l for l in report.splitlines() if l[:2] in ("E:", "W:")], report


def test_installed_layout(root, installed):
    for f in ("/usr/bin/abx", "/usr/share/man/man1/abx.1.gz", "/usr/share/man/man5/abx.yaml.5.gz",
              "/usr/share/bash-completion/completions/abx", UNIT, "/etc/abx/abx.yaml",
              "/usr/lib/python3/dist-packages/abx/client.py", "/usr/lib/python3/dist-packages/abx_ops.py",
              "/usr/share/doc/abx/docs/install.md", "/usr/share/doc/abx/copyright"):
        assert os.path.exists(root + f), f
    r = debroot.in_root(root, "dpkg-query -W -f='${Status} ${Version}\\n' abx python3-abx; "
                              "getent passwd abx; abx --version; "
                              "python3 -c 'import abx, abx_ops; print(abx.__version__)'; "
                              "grep -c abx.yaml /var/lib/dpkg/info/abx.conffiles; "
                              "readlink /etc/systemd/system/multi-user.target.wants/abx.service")
    lines = r.stdout.splitlines()
    assert lines[0].startswith("install ok installed") and lines[1].startswith("install ok installed"), r.stdout
    user = lines[2].split(":")
    assert user[0] == "abx" and int(user[2]) < 1000 and user[5] == "/var/lib/abx" and user[6] == "/usr/sbin/nologin"
    version = lines[3].split()[1]
    assert lines[0].split()[-1] == version and lines[4] == version
    assert lines[5] == "1"  # /etc/abx/abx.yaml is a conffile: upgrades keep the admin's edits
    assert lines[6] == UNIT  # enabled (WantedBy=multi-user.target); started where systemd runs


def test_unit_passes_systemd_analyze(root, installed):
    if not shutil.which("systemd-analyze"):
        pytest.skip("systemd-analyze is not installed")
    r = subprocess.run(["systemd-analyze", "verify", "--man=no", f"--root={root}", UNIT], capture_output=True,
                       text=True, timeout=60)
    assert r.returncode == 0 and "abx.service" not in r.stderr, r.stderr


def _free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _get(url, token=None, body=None):
    req = urllib.request.Request(url, data=json.dumps(body).encode() if body is not None else None)
    if token:
        req.add_header("Authorization", f"Bearer {token}")
    if body is not None:
        req.add_header("Content-Type", "application/json")
    with urllib.request.urlopen(req, timeout=30) as resp:
        return json.loads(resp.read())


def test_service_runs_under_the_units_semantics(root, installed):
    service = debroot.read_unit(root + UNIT)["Service"]
    keys = {k for k, _ in service}
    # every hardening key of the unit is either reproduced here or named as systemd's own
    assert keys <= debroot.EMULATED | debroot.NOT_EMULATED, keys - debroot.EMULATED - debroot.NOT_EMULATED
    opts = dict(service)
    assert opts["User"] == "abx" and opts["DynamicUser"] == "no" and opts["ProtectSystem"] == "strict"
    assert "abx" in opts["StateDirectory"].split()
    # the admin's one edit on a shared machine: ports of its own (8080 may be taken here)
    port, tport = _free_port(), _free_port()
    conf = root + "/etc/abx/abx.yaml"
    text = open(conf).read().replace("127.0.0.1:8080", f"127.0.0.1:{port}").replace("127.0.0.1:9001",
                                                                                     f"127.0.0.1:{tport}")
    open(conf, "w").write(text)
    script, argv, env = debroot.service_script(root, service)
    assert argv[:2] == ["/usr/bin/abx", "serve"] and env["ABX_WORKSPACE"] in argv
    token = state = None
    proc = subprocess.Popen(["unshare", "--mount", "--propagation", "private", "sh", "-c", script],
                            stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    try:
        url = f"http://127.0.0.1:{port}"
        health = None
        for _ in range(100):
            try:
                health = _get(url + "/health")
                break
            except OSError:
                assert proc.poll() is None, proc.stdout.read()
                time.sleep(0.1)
        assert health and health["status"] == "ok"
        version = debroot.in_root(root, "abx --version").stdout.split()[1]
        assert health["version"] == version
        state = root + env["ABX_HOME"]
        token_file = state + "/token"
        st = os.stat(token_file)
        assert oct(st.st_mode & 0o777) == "0o600"
        token = open(token_file).read().strip()
        info = _get(url + "/system/info", token)["confinement"]
        assert info["tier"] == "unprivileged", info
        assert info["layers"]["landlock"]["state"] == "active" and info["layers"]["seccomp"]["state"] == "active"
        run = _get(url + "/commands/run", token, {"command": "echo hi | wc -c"})
        assert run["exit_code"] == 0 and run["stdout"].strip() == "3", run
        run = _get(url + "/commands/run", token, {"command": "id -un; pwd; touch made-here"})
        assert run["stdout"].split() == ["abx", env["ABX_WORKSPACE"]], run
        assert os.stat(root + env["ABX_WORKSPACE"] + "/made-here").st_uid == os.stat(state).st_uid
        # confined: abx's own state and the read-only system stay out of reach
        run = _get(url + "/commands/run", token, {"command": f"touch {env['ABX_HOME']}/planted"})
        assert run["exit_code"] != 0 and not os.path.exists(state + "/planted"), run
        run = _get(url + "/commands/run", token, {"command": "touch /etc/planted"})
        assert run["exit_code"] != 0 and not os.path.exists(root + "/etc/planted"), run
        # a terminal: PrivateDevices= leaves a private /dev/pts and /dev/ptmx
        term = _get(url + "/terminal", token, {"command": "sleep 30"})
        assert term.get("id"), term
        listed = _get(url + "/terminal/list", token)
        assert term["id"] in [t["id"] for t in listed["terminals"]], listed
        # the Python client of python3-abx, from inside the root
        r = debroot.in_root(root, "python3 -c " + shlex.quote(
            f"import abx; c = abx.Client(url='{url}', token='{token}'); print(c.call('core.health')['version'])"))
        assert r.stdout.strip() == version
    finally:
        proc.send_signal(signal.SIGTERM)
        try:
            rc = proc.wait(timeout=30)  # TimeoutStopSec
        except subprocess.TimeoutExpired:
            proc.kill()
            rc = proc.wait()
        out = proc.stdout.read()
    assert rc == 0, out
    assert token and token not in out  # --quiet: the token stays out of the journal
    assert os.path.exists(state + "/ledger.db")


def _set_ports(root):
    port, tport = _free_port(), _free_port()
    conf = root + "/etc/abx/abx.yaml"
    text = re.sub(r"^listen: .*$", f"listen: 127.0.0.1:{port}", open(conf).read(), flags=re.M)
    text = re.sub(r"^terminal_listen: .*$", f"terminal_listen: 127.0.0.1:{tport}", text, flags=re.M)
    open(conf, "w").write(text)
    return f"http://127.0.0.1:{port}"


def _abx_process(argv):
    """The process running exactly argv (the unit's ExecStart): its /proc/PID/status."""
    for pid in filter(str.isdigit, os.listdir("/proc")):
        try:
            if open(f"/proc/{pid}/cmdline").read().split("\0")[:-1] == argv:
                return dict(l.split(":\t", 1) for l in open(f"/proc/{pid}/status").read().splitlines() if ":\t" in l)
        except OSError:
            continue
    return None


def test_service_under_systemd(root, installed, tmp_path):
    """The unit under systemd itself: the root booted by systemd-nspawn, abx.service started
    by systemd as the package enabled it. nspawn's own seccomp allowlist (systemd 252) has
    no Landlock calls: they are added, as a container runtime must (docs/install.md)."""
    if not shutil.which("systemd-nspawn"):
        pytest.skip("systemd-nspawn is not installed (systemd-container)")
    # a copy: what booting writes (journal, timers' stamps) is no leftover of the package
    booted = str(tmp_path / "root")
    subprocess.run(["cp", "-a", "--reflink=auto", root, booted], check=True)
    try:
        _boot(booted, tmp_path)
    finally:
        shutil.rmtree(booted, ignore_errors=True)


def _boot(root, tmp_path):
    url = _set_ports(root)
    console = open(tmp_path / "console.log", "w")
    boot = subprocess.Popen(["systemd-nspawn", "-q", "-D", root, "--register=no", "--keep-unit",
                             "--console=read-only", "--system-call-filter=landlock_create_ruleset landlock_add_rule "
                             "landlock_restrict_self", "-b"], stdin=subprocess.DEVNULL, stdout=console,
                            stderr=subprocess.STDOUT)
    try:
        health = None
        for _ in range(600):
            try:
                health = _get(url + "/health")
                break
            except OSError:
                assert boot.poll() is None, open(tmp_path / "console.log").read()[-3000:]
                time.sleep(0.1)
        assert health, open(tmp_path / "console.log").read()[-3000:]
        version = debroot.in_root(root, "abx --version").stdout.split()[1]
        assert health["version"] == version
        service = debroot.read_unit(root + UNIT)["Service"]
        status = _abx_process(debroot.expand_exec(dict(service)["ExecStart"], debroot.unit_environment(service)))
        uid = debroot.in_root(root, "id -u abx").stdout.strip()
        assert status["Uid"].split()[0] == uid and status["NoNewPrivs"] == "1", status
        assert int(status["CapBnd"], 16) == 0 and int(status["CapEff"], 16) == 0, status
        token = open(root + "/var/lib/abx/state/token").read().strip()
        info = _get(url + "/system/info", token)["confinement"]
        assert info["tier"] == "unprivileged" and info["layers"]["landlock"]["state"] == "active", info
        run = _get(url + "/commands/run", token, {"command": "echo hi | wc -c"})
        assert run["exit_code"] == 0 and run["stdout"].strip() == "3", run
        run = _get(url + "/commands/run", token, {"command": "touch /var/lib/abx/state/planted"})
        assert run["exit_code"] != 0 and not os.path.exists(root + "/var/lib/abx/state/planted"), run
        assert _get(url + "/terminal", token, {"command": "sleep 30"}).get("id")
    finally:
        boot.terminate()  # nspawn powers the container off: systemd stops abx.service
        try:
            boot.wait(timeout=90)
        except subprocess.TimeoutExpired:
            boot.kill()
            boot.wait()
        console.close()


def test_upgrade_keeps_the_config_and_the_state(root, installed, debs, tmp_path):
    """An upgrade: the same package repacked as a higher version, installed over the
    running configuration. The admin's edit of the conffile and the state stay."""
    conf = open(root + "/etc/abx/abx.yaml").read()
    token = open(root + "/var/lib/abx/state/token").read()
    assert "127.0.0.1:8080" not in conf  # edited by the service test
    tree = str(tmp_path / "tree")
    subprocess.run(["dpkg-deb", "-R", debs["abx"], tree], check=True)
    control = open(tree + "/DEBIAN/control").read()
    version = re.search(r"^Version: (.*)$", control, re.M).group(1)
    open(tree + "/DEBIAN/control", "w").write(control.replace(f"Version: {version}", f"Version: {version}+up1"))
    new = root + f"/tmp/debs/abx_{version}+up1.deb"
    subprocess.run(["dpkg-deb", "--root-owner-group", "-b", tree, new], check=True, capture_output=True)
    r = debroot.in_root(root, f"apt-get install -y /tmp/debs/{os.path.basename(new)} && "
                              "dpkg-query -W -f='${Version}' abx")
    assert r.stdout.splitlines()[-1] == f"{version}+up1", r.stdout
    assert open(root + "/etc/abx/abx.yaml").read() == conf
    assert open(root + "/var/lib/abx/state/token").read() == token
    os.unlink(new)


def test_purge_leaves_only_the_state_folder(root, installed):
    r = debroot.in_root(root, "apt-get purge -y abx python3-abx")
    assert "E:" not in r.stdout + r.stderr, r.stdout + r.stderr
    after = debroot.snapshot(root)
    before = installed
    added = sorted(p for p in after if p not in before)
    changed = sorted(p for p in after if p in before and after[p] != before[p])
    removed = sorted(p for p in before if p not in after)
    # the user abx stays, owner of the state folder (Debian keeps system users on purge)
    accounts = {"/etc/passwd", "/etc/group", "/etc/shadow", "/etc/gshadow", "/etc/passwd-", "/etc/group-",
                "/etc/shadow-", "/etc/gshadow-", "/etc/subuid", "/etc/subgid", "/etc/subuid-", "/etc/subgid-"}
    state = [p for p in added if p == "/var/lib/abx" or p.startswith("/var/lib/abx/")]
    assert [p for p in added if p not in state and p not in accounts] == []
    assert [p for p in changed if p not in accounts] == [], changed
    assert removed == []
    assert "/var/lib/abx/state/token" in state and "/var/lib/abx/state/ledger.db" in state
    for gone in ("/etc/abx", "/usr/bin/abx", UNIT, "/usr/lib/python3/dist-packages/abx",
                 "/etc/systemd/system/multi-user.target.wants/abx.service"):
        assert not os.path.lexists(root + gone), gone
    assert not glob.glob(root + "/var/lib/systemd/deb-systemd-helper-enabled/**/abx*", recursive=True)
