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
