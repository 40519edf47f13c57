"""browser.create's viewport and user_agent hold in every tab (issue 22): popups from
window.open and target=_blank links are attached paused and get the same device metrics
before they run; browser.tabs {activate} makes one the tab the other ops act on."""
import os
import time

import pytest

from abxtest import ALICE_TOKEN, assert_error
from pages import Site
from test_browser import config, ok, op

pytestmark = pytest.mark.skipif(not os.path.exists("/usr/lib/chromium/chromium"),
                                reason="chromium is not installed (scripts/deps.sh installs it)")


@pytest.fixture
def site():
    s = Site()
    yield s
    s.stop()


def click(s, bid, label):
    text = ok(op(s, "browser.snapshot", {"id": bid}))["snapshot"]
    ref = [l for l in text.splitlines() if label in l][0].split("[ref=")[1].rstrip("]")
    ok(op(s, "browser.click", {"id": bid, "ref": ref}))


def test_viewport_and_user_agent_in_popups_and_new_tabs(abx, workspace, tmp_path, site):
    s = abx(config(workspace, str(tmp_path / "l.db"), site))
    bid = ok(op(s, "browser.create", {"viewport": {"width": 640, "height": 480}, "user_agent": "abx-test/1"}))["id"]
    try:
        ok(op(s, "browser.navigate", {"id": bid, "url": site.url("/ok/opener.html")}))
        click(s, bid, 'button "Pop"')
        click(s, bid, 'link "Blank"')
        want = {"640x480 ?popup", "640x480 ?blank"}
        deadline = time.time() + 15
        while time.time() < deadline:
            tabs = ok(op(s, "browser.tabs", {"id": bid}))["tabs"]
            if want <= {t["title"] for t in tabs}:
                break
            time.sleep(0.3)
        assert want <= {t["title"] for t in tabs}, tabs
        assert len(tabs) == 3 and [t["title"] for t in tabs if t["active"]] == ["Opener"], tabs
        for t in tabs:
            if t["title"] in want:
                got = ok(op(s, "browser.tabs", {"id": bid, "activate": t["tab"]}))["tabs"]
                assert [x["tab"] for x in got if x["active"]] == [t["tab"]], got
                v = ok(op(s, "browser.evaluate", {"id": bid, "expression":
                                                  "[innerWidth, innerHeight, navigator.userAgent, location.search]"}))
                assert v["value"][:3] == [640, 480, "abx-test/1"] and v["value"][3] in t["title"], v
        assert_error(op(s, "browser.tabs", {"id": bid, "activate": "NOPE"}), 404, "browser.tab_not_found")
    finally:
        ok(op(s, "browser.close", {"id": bid}))
