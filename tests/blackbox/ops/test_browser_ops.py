"""browser.* without starting a browser (the real ones run in tests/e2e/browser): every op
on an id the caller does not have is the one 404, and the url scope is demanded."""
import pytest

from abxtest import ALICE_TOKEN, assert_error, sha256_hex

OPS = {"browser.navigate": {"url": "http://127.0.0.1:9/ok/"}, "browser.back": {}, "browser.snapshot": {},
       "browser.click": {"ref": "e1"}, "browser.type": {"ref": "e1", "text": "x"}, "browser.press": {"key": "Enter"},
       "browser.scroll": {"dy": 10}, "browser.screenshot": {}, "browser.content": {"format": "text"},
       "browser.tabs": {}, "browser.evaluate": {"expression": "1"}, "browser.close": {}}


def config(ws, urls=True):
    stmt = {"ops": ["browser.*", "browser.evaluate"], "principals": ["role:agent"], "net": True}
    if urls:
        stmt["urls"] = ["http://127.0.0.1:9/ok/**"]
    return {"workspace": ws, "terminal_listen": "off", "ledger": {"enabled": False},
            "auth": {"tokens": [{"principal": "alice", "roles": ["agent"], "token_sha256": sha256_hex(ALICE_TOKEN)}]},
            "policy": {"allow": [stmt]}}


def test_unknown_browser_is_404_for_every_op(abx, workspace):
    s = abx(config(workspace))
    for op, extra in OPS.items():
        body = dict(extra, id="b-000000000000")
        assert_error(s.post("/ops/" + op, token=ALICE_TOKEN, json_body=body), 404, "browser.not_found")
    # a navigation outside the scope is the policy's refusal, before any browser is looked up
    assert_error(s.post("/ops/browser.navigate", token=ALICE_TOKEN,
                        json_body={"id": "b-000000000000", "url": "file:///etc/passwd"}), 403, "policy.url_not_allowed")


def test_a_statement_naming_browser_ops_needs_urls(abx, workspace):
    s = abx(config(workspace, urls=False), start=False)
    with pytest.raises(RuntimeError, match="config.scope_required"):
        s.start()
