"""Issues 17 and 25: a process's network namespace has loopback up under every `net`
setting, and `net: {allow: [...]}` gives it abx's egress proxy as its only way out.

Upstream servers run on loopback in the test's (abx's) own namespace and are named through
`egress.resolve`; the process reaches them only through the proxy abx listens with inside
the process's namespace (docs/egress.md)."""
import json
import os

import pytest

from abxtest import ALICE_TOKEN, tokens
from secutil import make_workspace


def config(ws, net=None, top=None, cmds=("sh *",)):
    stmt = {"ops": ["commands.*", "process.*"], "principals": ["alice"],
            "paths": {"read": [ws + "/**"], "write": [ws + "/**"]},
            "commands": {"allow": list(cmds), "shell": True}}
    if net is not None:
        stmt["net"] = net
    c = {"workspace": ws, "terminal_listen": "off",
         "auth": {"tokens": tokens("alice")},
         "policy": {"allow": [{"ops": ["core.*", "ledger.*"], "principals": ["*"]}, stmt]}}
    c.update(top or {})
    return c


def run(s, command, timeout=60):
    r = s.post("/commands/run", token=ALICE_TOKEN, json_body={"command": command, "timeout": timeout},
               timeout=timeout + 30)
    assert r.status_code == 200, r.text
    return r.json()


LOOPBACK = ("cd $TMPDIR && (/usr/bin/python3 -m http.server 18765 --bind 127.0.0.1 >/dev/null 2>&1 &) && "
            "for i in $(seq 50); do /usr/bin/python3 -c \"import urllib.request as u; "
            "print(u.urlopen('http://127.0.0.1:18765/').status)\" 2>/dev/null && break; sleep 0.1; done")

DIRECT = ("/usr/bin/python3 -c \"import socket\n"
          "try:\n"
          "    socket.create_connection(('1.1.1.1', 80), timeout=3); print('CONNECTED')\n"
          "except OSError as e:\n"
          "    print('refused', e.errno)\"")


def test_net_false_has_loopback_but_no_way_out(abx, workspace):
    s = abx(config(workspace, net=False))
    j = run(s, LOOPBACK)
    assert j["stdout"].strip() == "200", j
    j = run(s, DIRECT)
    assert j["stdout"].startswith("refused"), j


# -- the allowlist -------------------------------------------------------------------------

import http.server
import threading


class _Upstream(http.server.BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"

    def do_GET(self):
        body = ("hello from %s %s\n" % (self.headers.get("Host"), self.path)).encode()
        if self.path.startswith("/big"):
            body = b"x" * 100000
        self.send_response(200)
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def log_message(self, *a):
        pass


@pytest.fixture(scope="module")
def upstream():
    srv = http.server.ThreadingHTTPServer(("127.0.0.1", 0), _Upstream)
    t = threading.Thread(target=srv.serve_forever, daemon=True)
    t.start()
    yield srv.server_address[1]
    srv.shutdown()
    srv.server_close()


def allow_config(ws, port, extra_allow=(), resolve=None):
    res = {"up.test": "127.0.0.1", "private.test": "10.1.2.3"}
    res.update(resolve or {})
    return config(ws, net={"allow": ["up.test:%d" % port] + list(extra_allow)},
                  top={"egress": {"resolve": res}})


def ledger_events(s, kind="egress"):
    r = s.post("/ops/ledger.tail", token=ALICE_TOKEN, json_body={"n": 200})
    return r


def test_allowed_host_through_the_proxy(abx, workspace, upstream):
    s = abx(allow_config(workspace, upstream))
    j = run(s, "curl -sS http://up.test:%d/hello; echo; env | grep -i _proxy | sort" % upstream)
    assert j["stdout"].startswith("hello from up.test:%d /hello" % upstream), j
    assert "ALL_PROXY=socks5h://127.0.0.1:3128" in j["stdout"], j
