"""Issue 17: Python op workers (`load: ["python:..."]`) under `net: {allow: [...]}` get
the egress proxy and transparent mode like every other process: an allowed host is
reached (with and without the proxy variables), an unlisted one is refused; per_call
workers record each connection in the call's ledger group (a mutating call's; a read-only
call has none yet, so the log), shared ones in the log."""
import os

import pytest

from abxtest import ALICE_TOKEN, sha256_hex
from test_egress_e2e import ledger_events, upstream  # noqa: F401 (fixture)

MODULE = '''
import urllib.request as u
from abx_ops import op


@op("tnet.fetch.get", effects="write")
def fetch(ctx, url: str, proxies: bool = True):
    o = u.build_opener() if proxies else u.build_opener(u.ProxyHandler({}))
    try:
        return {"body": o.open(url, timeout=10).read().decode()}
    except Exception as e:
        return {"error": "%s: %s" % (type(e).__name__, e)}
'''


def start(abx, ws, port, isolation):
    tokens = [{"principal": "alice", "roles": ["agent"], "token_sha256": sha256_hex(ALICE_TOKEN)}]
    c = {"workspace": ws, "terminal_listen": "off", "load": ["python:tnet.ops"], "python_isolation": isolation,
         "auth": {"tokens": tokens}, "egress": {"resolve": {"up.test": "127.0.0.1"}},
         "policy": {"allow": [{"ops": ["core.*", "ledger.*"], "principals": ["*"]},
                              {"ops": ["tnet.*"], "principals": ["alice"], "paths": [ws + "/**"],
                               "net": {"allow": ["up.test:%d" % port]}}]}}
    s = abx(c, start=False)
    pkg = os.path.join(os.path.dirname(s.config_path), "tnet")
    os.makedirs(pkg, exist_ok=True)
    open(os.path.join(pkg, "__init__.py"), "w").close()
    with open(os.path.join(pkg, "ops.py"), "w") as f:
        f.write(MODULE)
    return s.start()


def fetch(s, url, proxies=True):
    r = s.post("/ops/tnet.fetch.get", token=ALICE_TOKEN, json_body={"url": url, "proxies": proxies})
    assert r.status_code == 200, r.text
    return r.json()


@pytest.mark.parametrize("isolation", ["per_call", "shared"])
def test_python_worker_allowlist(abx, workspace, upstream, isolation):  # noqa: F811
    s = start(abx, workspace, upstream, isolation)
    assert fetch(s, "http://up.test:%d/w" % upstream) == {"body": "hello from up.test:%d /w\n" % upstream}
    assert fetch(s, "http://up.test:%d/t" % upstream, proxies=False) == \
        {"body": "hello from up.test:%d /t\n" % upstream}
    denied = fetch(s, "http://evil.test:%d/" % upstream)
    assert "403" in denied["error"], denied
    assert "Name or service not known" in fetch(s, "http://evil.test/", proxies=False)["error"]
    ev = [e["data"] for e in ledger_events(s)["events"] if e["kind"] == "egress"]
    if isolation == "per_call":
        assert [(e["proto"], e["host"], e["decision"]) for e in ev] == [
            ("http", "up.test", "allow"), ("transparent", "up.test", "allow"), ("http", "evil.test", "deny"),
            ("dns", "evil.test", "deny")], ev
    else:
        assert ev == []  # a shared worker serves many calls: its connections go to the log
        log = s.stderr()
        assert "python:tnet.ops: egress http up.test:%d allow" % upstream in log, log
        assert "python:tnet.ops: egress dns evil.test:53 deny" in log, log
