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


def test_tool_formats_mark_untrusted_results():
    import json
    from abxtest import run_abx
    for fmt, name_of, desc_of in (("openai", lambda d: d["function"]["name"], lambda d: d["function"]["description"]),
                                  ("anthropic", lambda d: d["name"], lambda d: d["description"])):
        decls = json.loads(run_abx(["tools", "--format", fmt]).stdout)
        decls = decls if isinstance(decls, list) else decls.get("tools", [])
        by = {name_of(d): desc_of(d) for d in decls}
        for tool in ("browser__content", "browser__snapshot"):
            assert "untrusted web content" in by[tool], by[tool]
        assert "untrusted" not in by["browser__close"]


def test_mcp_tools_list_marks_untrusted_results(workspace, tmp_path):
    import json
    import subprocess
    from abxtest import ABX_BIN
    lines = [{"jsonrpc": "2.0", "id": 1, "method": "initialize",
              "params": {"protocolVersion": "2025-06-18", "capabilities": {}, "clientInfo": {"name": "t", "version": "1"}}},
             {"jsonrpc": "2.0", "method": "notifications/initialized"},
             {"jsonrpc": "2.0", "id": 2, "method": "tools/list"}]
    r = subprocess.run([ABX_BIN, "mcp"], input="".join(json.dumps(x) + "\n" for x in lines), capture_output=True,
                       text=True, timeout=20, cwd=workspace, env={"ABX_HOME": str(tmp_path / "home"), "PATH": "/usr/bin:/bin"})
    tools = {t["name"]: t for t in json.loads(r.stdout.strip().splitlines()[-1])["result"]["tools"]}
    assert tools["browser__content"]["_meta"]["abx/untrusted_result"] is True
    assert "abx/untrusted_result" not in tools["browser__close"]["_meta"]
