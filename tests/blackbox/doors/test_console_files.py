"""/ui on the main listener: the web console's files (docs/console.md), served without a
principal but with the strict headers, ETag revalidation, GET/HEAD only, Host checked like
every request, not on the terminal listener; a binary built without the console answers
404 with the hint (that branch is also unit-tested in tests/unit/test_console.c)."""
import re

import requests

from abxtest import ALICE_TOKEN, tokens


def cfg(ws, terminal="off"):
    return {"workspace": ws, "terminal_listen": terminal, "auth": {"tokens": tokens("alice")},
            "policy": {"allow": [{"ops": ["core.*"], "principals": ["*"]},
                                 {"ops": ["terminal.*"], "principals": ["alice"], "paths": [ws + "/**"],
                                  "commands": {"allow": ["bash *"]}}]}}


def built(s):
    r = requests.get(s.url + "/ui/", timeout=5)
    if r.status_code == 404:
        assert "npm ci && npm run build" in r.text and "docs/console.md" in r.text, r.text
        return False
    return True


def test_index_headers_and_etag(abx, workspace):
    s = abx(cfg(workspace))
    if not built(s):
        return
    r = requests.get(s.url + "/ui/", timeout=5)
    assert r.status_code == 200 and r.headers["Content-Type"].startswith("text/html")
    csp = r.headers["Content-Security-Policy"]
    for part in ("default-src 'self'", "script-src 'self';", "frame-ancestors 'none'", "object-src 'none'"):
        assert part in csp, csp
    assert "unsafe-eval" not in csp and "script-src 'self' 'unsafe-inline'" not in csp
    assert r.headers["X-Content-Type-Options"] == "nosniff"
    assert r.headers["X-Frame-Options"] == "DENY"
    assert r.headers["Cache-Control"] == "no-cache"
    etag = r.headers["ETag"]
    assert "<script" in r.text and 'src="app.js"' in r.text
    assert "<script>" not in r.text  # no inline script
    again = requests.get(s.url + "/ui/", headers={"If-None-Match": etag}, timeout=5)
    assert again.status_code == 304 and again.content == b""
    js = requests.get(s.url + "/ui/app.js", timeout=5)
    assert js.status_code == 200 and js.headers["Content-Type"].startswith("text/javascript")
    assert js.headers["ETag"] != etag
    css = requests.head(s.url + "/ui/app.css", timeout=5)
    assert css.status_code == 200 and css.headers["Content-Type"].startswith("text/css")


def test_redirect_refusals_and_the_api_unchanged(abx, workspace):
    s = abx(cfg(workspace))
    if not built(s):
        return
    r = requests.get(s.url + "/ui", allow_redirects=False, timeout=5)
    assert r.status_code == 308 and r.headers["Location"] == "/ui/"
    assert requests.post(s.url + "/ui/", json={}, timeout=5).status_code == 405
    for p in ("/ui/nope.js", "/ui/../ui/app.js", "/ui//index.html", "/ui/index.html/"):
        assert s.raw_request("GET", p).status_code in (400, 404), p
    # /uix is not the console: the one 404/401 of the API
    assert requests.get(s.url + "/uix", timeout=5).status_code in (401, 404)
    assert requests.get(s.url + "/capabilities", headers={"Authorization": "Bearer " + ALICE_TOKEN},
                        timeout=5).status_code == 200


def test_host_checked_and_not_on_terminal_listener(abx, workspace):
    s = abx(cfg(workspace, terminal="127.0.0.1:0"))
    if not built(s):
        return
    r = s.raw_request("GET", "/ui/", host="evil.example")
    assert r.status_code == 403 or r.status_code == 421 or r.status_code == 400, r.status_code
    t = requests.post(s.url + "/terminal", json={"command": "bash --norc --noprofile"},
                      headers={"Authorization": "Bearer " + ALICE_TOKEN}, timeout=10).json()
    tport = int(re.match(r"^ws://127\.0\.0\.1:(\d+)/", t["ws_url"]).group(1))
    assert tport != s.port
    r = requests.get("http://127.0.0.1:%d/ui/" % tport, timeout=5)
    assert r.status_code in (401, 404) and "Content-Security-Policy" not in r.headers  # the API's answer
    requests.delete(s.url + "/terminal/%d" % t["id"], headers={"Authorization": "Bearer " + ALICE_TOKEN}, timeout=10)


def test_not_on_a_ports_own_origin(abx, workspace):
    """p<port>.localhost is an agent's server's origin (docs/ports.md): /ui there is that
    port's path, never abx's console, so a page on that origin cannot load the console."""
    s = abx(cfg(workspace))
    if not built(s):
        return
    r = s.raw_request("GET", "/ui/", host="p3000.localhost:%d" % s.port)
    assert r.status_code != 200 and "content-security-policy" not in r.headers, r.raw[:300]
    assert b"app.js" not in r.body
    assert s.raw_request("GET", "/ui/").status_code == 200  # the same request on abx's own host
