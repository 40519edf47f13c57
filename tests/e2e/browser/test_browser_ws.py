"""WebSockets under the urls scope (issue 22): a ws: URL is matched as http: (wss: as https:);
one the scope admits on every path of its host:port connects (the browser's proxy rules
let that pair bypass the dead SOCKS proxy every other WebSocket meets), any other fails in
the page, never reaches its server, and is recorded under the call — from a page, an
out-of-process iframe and a dedicated worker alike."""
import json
import os
import signal
import time
import urllib.parse

import pytest

from abxtest import assert_error, wait_for
from pages import Site
from test_browser import config, ledger_blocked, ok, op
from wsecho import EchoServer

pytestmark = pytest.mark.skipif(not os.path.exists("/usr/lib/chromium/chromium"),
                                reason="chromium is not installed (scripts/deps.sh installs it)")


@pytest.fixture
def site():
    s = Site()
    yield s
    s.stop()


@pytest.fixture
def echo():
    good, bad = EchoServer(), EchoServer()
    yield good, bad
    good.stop()
    bad.stop()


def scope(site, good):
    return [site.base + "/ok/**", "http://localhost:%d/ok/**" % site.port, "http://127.0.0.1:%d/**" % good.port]


def result(s, bid, ledger, page, want):
    r = op(s, "browser.navigate", {"id": bid, "url": page})
    out, rid = ok(r), r.headers["X-Request-Id"]
    v = ok(op(s, "browser.evaluate", {"id": bid, "expression": "Promise.race([window.wsres, new Promise(r => setTimeout(() => r('timeout'), 8000))])"}))
    return v["value"], out["blocked"] + v["blocked"], rid


def check(s, bid, ledger, good, bad, page_of):
    got, blocked, _ = result(s, bid, ledger, page_of(good.url("/in")), None)
    assert got == "echo:hi" and good.url("/in") not in blocked, (got, blocked)
    got, blocked, rid = result(s, bid, ledger, page_of(bad.url("/out")), None)
    assert got == "error", got
    assert bad.url("/out") in blocked, blocked
    assert (rid, "browser.navigate", bad.url("/out")) in ledger_blocked(ledger, rid), ledger_blocked(ledger)
    assert bad.handshakes == [], bad.handshakes


def q(**kw):
    return "?" + urllib.parse.urlencode(kw)


def test_websocket_in_scope_opens_and_out_of_scope_fails(abx, workspace, tmp_path, site, echo):
    good, bad = echo
    ledger = str(tmp_path / "l.db")
    s = abx(config(workspace, ledger, site, urls=scope(site, good)))
    bid = ok(op(s, "browser.create", {}))["id"]
    try:
        # the page's own WebSocket
        check(s, bid, ledger, good, bad, lambda u: site.url("/ok/wsecho.html" + q(u=u)))
        assert good.handshakes == ["/in"]
        # a dedicated worker's
        check(s, bid, ledger, good, bad, lambda u: site.url("/ok/wsworker.html" + q(u=u)))
        # an out-of-process iframe's (localhost is another site than 127.0.0.1)
        child = lambda u: "http://localhost:%d/ok/wschild.html%s" % (site.port, q(u=u))
        check(s, bid, ledger, good, bad, lambda u: site.url("/ok/wsframe.html" + q(f=child(u))))
        assert good.handshakes == ["/in"] * 3
        assert not site.secret_hits(), site.hits
    finally:
        ok(op(s, "browser.close", {"id": bid}))


def test_a_narrowed_scope_refuses_a_browser_started_with_a_websocket_host(abx, workspace, tmp_path, site, echo):
    good, _ = echo
    cfg = config(workspace, str(tmp_path / "l.db"), site, urls=scope(site, good))
    s = abx(cfg)
    bid = ok(op(s, "browser.create", {}))["id"]
    try:
        cfg["policy"]["allow"][0]["urls"] = [site.base + "/ok/**"]
        with open(s.config_path, "w") as f:
            json.dump(cfg, f)
        s.proc.send_signal(signal.SIGHUP)
        deadline = time.time() + 15
        r = None
        while time.time() < deadline:
            r = op(s, "browser.tabs", {"id": bid})
            if r.status_code != 200:
                break
            time.sleep(0.2)
        assert_error(r, 409, "browser.scope_changed")
        b2 = ok(op(s, "browser.create", {}))["id"]  # a new browser has the new gate
        ok(op(s, "browser.tabs", {"id": b2}))
        ok(op(s, "browser.close", {"id": b2}))
    finally:
        ok(op(s, "browser.close", {"id": bid}))


def test_websocket_under_an_egress_allowlist_never_exceeds_it(abx, workspace, tmp_path, site, echo):
    """Under net: {allow} a pair on the bypass list connects the way any connection made
    without the proxy does: a name goes to the egress box's transparent listener, the
    allowlist holding (it relays the upgrade, then the frames); an IP literal reaches only
    the process's own loopback. So a pair the scope admits but the allowlist does not list
    never reaches its server."""
    good, bad = echo
    ledger = str(tmp_path / "l.db")
    urls = [site.base + "/ok/**", "http://echo.test:%d/**" % good.port, "http://other.test:%d/**" % bad.port,
            "http://127.0.0.1:%d/**" % bad.port]
    net = {"allow": ["127.0.0.1:%d" % site.port, "echo.test:%d" % good.port]}
    cfg = config(workspace, ledger, site, urls=urls, net=net)
    cfg["egress"] = {"resolve": {"echo.test": "127.0.0.1", "other.test": "127.0.0.1"}}
    s = abx(cfg)
    bid = ok(op(s, "browser.create", {}))["id"]
    try:
        page = lambda u: site.url("/ok/wsecho.html" + q(u=u))
        got, _, _ = result(s, bid, ledger, page("ws://echo.test:%d/in" % good.port), None)
        assert got == "echo:hi" and good.handshakes == ["/in"], (got, good.handshakes)
        got, _, _ = result(s, bid, ledger, page("ws://other.test:%d/out" % bad.port), None)
        assert got == "error", got
        got, _, _ = result(s, bid, ledger, page(bad.url("/literal")), None)
        assert got == "error" and bad.handshakes == [], (got, bad.handshakes)
    finally:
        ok(op(s, "browser.close", {"id": bid}))
