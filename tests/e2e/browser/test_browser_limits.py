"""limits.browsers (per principal) and limits.browser_idle (issue 22): a browser no call
used for browser_idle is closed by the next call of the namespace — its process ended, its
profile removed, browser.reaped in the ledger."""
import os
import sqlite3
import time

import pytest

from abxtest import ALICE_TOKEN, CAROL_TOKEN, assert_error, proc_alive, wait_for
from pages import Site
from test_browser import config, ok, op

pytestmark = pytest.mark.skipif(not os.path.exists("/usr/lib/chromium/chromium"),
                                reason="chromium is not installed (scripts/deps.sh installs it)")


@pytest.fixture
def site():
    s = Site()
    yield s
    s.stop()


def profile_dir(pid):
    with open("/proc/%d/cmdline" % pid, "rb") as f:
        argv = f.read().split(b"\0")
    arg = [a for a in argv if a.startswith(b"--user-data-dir=")][0].decode()
    return os.path.dirname(arg.split("=", 1)[1])  # the private TMPDIR holding the profile


def test_browsers_per_principal(abx, workspace, tmp_path, site):
    cfg = config(workspace, str(tmp_path / "l.db"), site)
    cfg["limits"] = {"browsers": 2}
    s = abx(cfg)
    ids = [ok(op(s, "browser.create", {}))["id"] for _ in range(2)]
    r = op(s, "browser.create", {})
    assert_error(r, 429, "browser.too_many")
    assert r.json()["error"]["details"]["limit"] == 2
    carol = ok(op(s, "browser.create", {}, token=CAROL_TOKEN))["id"]  # the count is per principal
    ok(op(s, "browser.close", {"id": ids[0]}))
    ids[0] = ok(op(s, "browser.create", {}))["id"]
    for bid in ids:
        ok(op(s, "browser.close", {"id": bid}))
    ok(op(s, "browser.close", {"id": carol}, token=CAROL_TOKEN))


def test_idle_browser_is_reaped(abx, workspace, tmp_path, site):
    ledger = str(tmp_path / "l.db")
    cfg = config(workspace, ledger, site)
    cfg["limits"] = {"browser_idle": "2s"}
    s = abx(cfg)
    b = ok(op(s, "browser.create", {}))
    busy = ok(op(s, "browser.create", {}))["id"]
    pid, tmp = b["pid"], profile_dir(b["pid"])
    assert os.path.isdir(tmp)
    deadline = time.time() + 3.5  # the other browser stays in use meanwhile
    while time.time() < deadline:
        ok(op(s, "browser.tabs", {"id": busy}))
        time.sleep(0.5)
    assert_error(op(s, "browser.tabs", {"id": b["id"]}), 404, "browser.not_found")
    assert wait_for(lambda: not proc_alive(pid), timeout=10)
    assert wait_for(lambda: not os.path.exists(tmp), timeout=10), tmp
    ok(op(s, "browser.tabs", {"id": busy}))  # used all along: kept
    con = sqlite3.connect(ledger, timeout=10)
    rows = con.execute("SELECT data FROM action_events WHERE kind = 'browser.reaped'").fetchall()
    con.close()
    assert len(rows) == 1 and b["id"] in rows[0][0], rows
    ok(op(s, "browser.close", {"id": busy}))
