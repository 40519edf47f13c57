"""The web console at /ui in a real browser (issue 19): sign-in and a wrong token, a form
run and the call appearing live in the timeline, an approval by a second principal and a
refused self-approval, the terminal over its WebSocket (echo hi, reconnect replays), a
kernel cell's image output opened, a narrow screen, markup in a file name and in an op
argument rendered as text. Each scenario is drive.mjs in headless chromium; screenshots
of every page go to $ABX_ARTIFACTS (default build/test-artifacts/console)."""
import json
import os
import shutil
import subprocess

import pytest
import requests

import abxtest
from abxtest import ADMIN_TOKEN, ALICE_TOKEN, APPROVER_TOKEN, VAL_TOKEN, AbxServer
from consolecfg import HAVE_KERNEL, config

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.normpath(os.path.join(HERE, "..", "..", ".."))
CONSOLE = os.path.join(ROOT, "console")
CHROMIUM = os.environ.get("CHROMIUM", "/usr/bin/chromium")
XSS = "<img src=x onerror=window.__xss=1>"


def _ready():
    if not shutil.which("node"):
        return "node is not installed"
    if not os.path.exists(CHROMIUM):
        return "%s is not installed (scripts/deps.sh test)" % CHROMIUM
    r = subprocess.run(["bash", os.path.join(HERE, "install.sh")], capture_output=True, text=True, timeout=600)
    if r.returncode == 3:
        return "the npm registry is unreachable: " + r.stderr.strip()[-200:]
    assert r.returncode == 0, r.stderr
    return None


@pytest.fixture(scope="module")
def console(tmp_path_factory):
    why = _ready()
    if why:
        pytest.skip(why)
    shutil.rmtree(artifacts(), ignore_errors=True)  # this run's screenshots only
    tmp = str(tmp_path_factory.mktemp("console"))
    ws = os.path.realpath(os.path.join(tmp, "ws"))
    os.makedirs(ws)
    with open(os.path.join(ws, "hello.txt"), "w") as f:
        f.write("hello\n")
    with open(os.path.join(ws, XSS + ".txt"), "w") as f:
        f.write("markup in a name\n")
    s = AbxServer(tmp, config(ws, os.path.join(tmp, "ledger.db")), workspace=ws).start()
    r = requests.get(s.url + "/ui/", timeout=5)
    if r.status_code == 404:
        s.stop()
        pytest.skip("this abx was built without the console (console/dist): " + r.text.strip()[:80])
    yield s
    s.stop()


def artifacts():
    return os.path.join(os.environ.get("ABX_ARTIFACTS") or os.path.join(ROOT, "build", "test-artifacts"), "console")


def drive(s, scenario):
    env = dict(os.environ, ABX_URL=s.url, ABX_WS=s.workspace, ABX_ARTIFACTS=artifacts(),
               ALICE_TOKEN=ALICE_TOKEN, ANN_TOKEN=APPROVER_TOKEN, ROOT_TOKEN=ADMIN_TOKEN, VAL_TOKEN=VAL_TOKEN,
               XSS_NAME=XSS, CHROMIUM=CHROMIUM)
    r = subprocess.run(["node", os.path.join(HERE, "drive.mjs"), scenario], capture_output=True, text=True,
                       timeout=240, cwd=HERE, env=env)
    lines = [ln for ln in r.stdout.splitlines() if ln.startswith("{")]
    assert lines, "drive.mjs %s printed nothing: %s %s" % (scenario, r.stdout[-2000:], r.stderr[-2000:])
    out = json.loads(lines[-1])
    assert out["ok"] and r.returncode == 0, "%s: %s" % (scenario, out)
    return out


def test_sign_in_and_wrong_token(console):
    out = drive(console, "signin")
    assert "auth.invalid_token" in out["error"]


def test_form_run_live_timeline_and_markup_as_text(console):
    for i in range(240):  # more than the timeline's first page: "Load older" pages back by cursor
        assert console.get("/files/stat", token=ALICE_TOKEN, params={"path": "hello.txt"}).status_code == 200
    out = drive(console, "ops_and_timeline")
    assert "Chain intact" in out["chain"]


def test_approval_by_second_principal_and_self_approval_refused(console):
    drive(console, "approval")
    assert os.path.isdir(os.path.join(console.workspace, "held-" + XSS))
    assert not os.path.exists(os.path.join(console.workspace, "val-own"))


def test_terminal_echo_and_reconnect(console):
    drive(console, "terminal")


@pytest.mark.skipif(not HAVE_KERNEL, reason="python3-ipykernel is not installed (scripts/deps.sh installs it)")
def test_kernel_cell_image_output(console):
    out = drive(console, "kernels")
    assert out["image"]["w"] == 16


def test_narrow_screen_and_labels(console):
    drive(console, "narrow")


def test_committed_dist_is_what_the_sources_build(tmp_path):
    """console/dist is committed (a fresh clone needs no Node); it must be the build of src/."""
    why = _ready()
    if why:
        pytest.skip(why)
    out = str(tmp_path / "dist")
    r = subprocess.run(["node", "build.mjs"], cwd=CONSOLE, env=dict(os.environ, OUT=out), capture_output=True,
                       text=True, timeout=120)
    assert r.returncode == 0, r.stderr
    want = sorted(os.listdir(os.path.join(CONSOLE, "dist")))
    assert sorted(os.listdir(out)) == want
    for name in want:
        with open(os.path.join(out, name), "rb") as a, open(os.path.join(CONSOLE, "dist", name), "rb") as b:
            assert a.read() == b.read(), "console/dist/%s is stale: run npm run build in console/ and commit" % name


def test_sources_never_parse_data_as_markup():
    """No innerHTML/outerHTML/insertAdjacentHTML/document.write/eval in the console's own
    code: data becomes text nodes (dom.js). The one HTML sink is a kernel's text/html
    output, given to an iframe with sandbox="" through srcdoc."""
    src = os.path.join(CONSOLE, "src")
    for name in sorted(os.listdir(src)):
        if not name.endswith(".js"):
            continue
        with open(os.path.join(src, name)) as f:
            text = f.read()
        for sink in ("innerHTML", "outerHTML", "insertAdjacentHTML", "document.write", "eval(", "new Function"):
            assert sink not in text, "%s uses %s" % (name, sink)
        if "srcdoc" in text:
            assert name == "kernels.js" and "sandbox: ''" in text, name
