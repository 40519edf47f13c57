"""The pinned Node tools the client and discovery tests run (tests/clients/package.json:
@redocly/cli for OpenAPI lint, typescript for tsc). `npm ci` installs them from the
committed lock file the first time a test needs them (scripts/test.sh also runs it)."""
import fcntl
import json
import os
import subprocess

NODE_DIR = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "clients")


def _installed():
    """node_modules matches package-lock.json (npm writes its own copy when it installs)."""
    mine = os.path.join(NODE_DIR, "node_modules", ".package-lock.json")
    try:
        with open(mine) as f:
            got = json.load(f)["packages"]
        with open(os.path.join(NODE_DIR, "package-lock.json")) as f:
            want = json.load(f)["packages"]
    except (OSError, ValueError, KeyError):
        return False
    return all(got.get(k, {}).get("version") == v.get("version") for k, v in want.items() if k)


def node_ok():
    """The machine's Node.js runs the pinned tools (@redocly/cli 2.77 needs >= 20.19)."""
    try:
        v = subprocess.run(["node", "--version"], capture_output=True, text=True, timeout=20).stdout.strip()
        major, minor = (int(x) for x in v.lstrip("v").split(".")[:2])
    except (OSError, ValueError, subprocess.SubprocessError):
        return False
    return major > 20 or (major == 20 and minor >= 19)


def node_bin(name):
    """Path of node_modules/.bin/NAME, running `npm ci` first when needed; skips the test
    when the machine's Node.js is too old for the pinned tools."""
    if not node_ok():
        import pytest
        pytest.skip("Node.js >= 20.19 is needed for the pinned Node tools (tests/clients)")
    with open(os.path.join(NODE_DIR, ".npm-ci.lock"), "w") as lk:
        fcntl.flock(lk, fcntl.LOCK_EX)
        if not _installed():
            r = subprocess.run(["npm", "ci", "--no-audit", "--no-fund", "--loglevel=error"], cwd=NODE_DIR,
                               capture_output=True, text=True, timeout=600)
            assert r.returncode == 0, "npm ci in tests/clients failed:\n" + r.stdout + r.stderr
    path = os.path.join(NODE_DIR, "node_modules", ".bin", name)
    assert os.path.exists(path), path
    return path


def redocly_lint(path):
    """Lint an OpenAPI file with redocly's recommended rules; returns the JSON report."""
    env = dict(os.environ, REDOCLY_TELEMETRY="off", REDOCLY_SUPPRESS_UPDATE_NOTICE="true")
    r = subprocess.run([node_bin("redocly"), "lint", "--format=json", path], cwd=NODE_DIR, env=env,
                       capture_output=True, text=True, timeout=300)
    try:
        report = json.loads(r.stdout)
    except ValueError:
        raise AssertionError("redocly lint gave no JSON report (exit %d):\n%s\n%s"
                             % (r.returncode, r.stdout[-2000:], r.stderr[-2000:]))
    return report
