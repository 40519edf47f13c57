"""Terminals for agents that cannot send Authorization on a WebSocket (issue 25): terminal.ticket
gives a single-use ticket bound to the principal and one terminal, valid for one upgrade within
limits.ticket_ttl (30 s); a same-origin page connects with GET /terminal/{id}?ticket=...; the
ledger keeps only the ticket's digest. And tool agents (MCP, /tools/call) drive a terminal with
process.write and process.output."""
import json
import os
import sqlite3
import time

import pytest
import requests
import websocket

from abxtest import ALICE_TOKEN, CAROL_TOKEN, tokens, wait_for
from test_terminal import CMDS, create, delete, ok, read_until


def make_config(ws, tmp, limits=None):
    stmt = {"ops": ["terminal.*", "process.get", "process.write", "process.output"], "principals": ["role:agent"],
            "paths": [ws + "/**"], "commands": {"allow": CMDS}}
    return {"workspace": ws, "terminal_listen": "off", "auth": {"tokens": tokens("alice", "bob", "carol")},
            "ledger": {"path": os.path.join(tmp, "ledger.db")}, "limits": limits or {},
            "policy": {"allow": [{"ops": ["core.*"], "principals": ["*"]}, stmt]}}


def ticket(s, tid, token=ALICE_TOKEN):
    return ok(s.post("/terminal/%d/ticket" % tid, token=token, json_body={}))


def ws_connect(s, path, origin=None):
    """A browser's WebSocket: no Authorization; Origin the page's (same origin by default)."""
    return websocket.create_connection("ws://127.0.0.1:%d%s" % (s.port, path), timeout=5,
                                       origin=origin or "http://127.0.0.1:%d" % s.port)


def refused(s, path, origin=None):
    with pytest.raises(websocket.WebSocketBadStatusException) as ei:
        ws_connect(s, path, origin)
    return ei.value.status_code


def test_ticket_opens_one_upgrade_of_its_terminal_from_the_same_origin(abx, workspace, tmp_path):
    s = abx(make_config(workspace, str(tmp_path)))
    a, b = create(s)["id"], create(s)["id"]
    try:
        t = ticket(s, a)
        assert len(t["ticket"]) == 64 and t["expires_in"] == 30 and t["id"] == a, t
        assert t["ws_path"] == "/terminal/%d?ticket=%s" % (a, t["ticket"])
        ws = ws_connect(s, t["ws_path"])
        ws.send_binary(b"echo tick-$((40+2))\n")
        assert b"tick-42" in read_until(ws, b"tick-42")
        ws.close()
        # the second use is refused
        assert refused(s, t["ws_path"]) == 401
        # a ticket for terminal a does not open b (and is spent by trying)
        t2 = ticket(s, a)
        assert refused(s, "/terminal/%d?ticket=%s" % (b, t2["ticket"])) == 401
        assert refused(s, "/terminal/%d?ticket=%s" % (a, t2["ticket"])) == 401
        # unknown tickets, no ticket, another principal's terminal
        assert refused(s, "/terminal/%d?ticket=%s" % (a, "0" * 64)) == 401
        assert refused(s, "/terminal/%d" % a) == 401
        r = s.post("/terminal/%d/ticket" % a, token=CAROL_TOKEN, json_body={})
        assert r.status_code == 404 and r.json()["error"]["code"] == "process.not_found", r.text
        # a foreign page's origin is refused before anything else
        t3 = ticket(s, a)
        assert refused(s, t3["ws_path"], origin="http://evil.example") == 403
        ws = ws_connect(s, t3["ws_path"])  # not spent by the refused origin
        ws.close()
    finally:
        delete(s, a)
        delete(s, b)
    # the ledger has the ticket's digest, never its value
    s.stop()
    db = sqlite3.connect(os.path.join(str(tmp_path), "ledger.db"))
    dump = "\n".join(db.iterdump())
    db.close()
    assert "terminal.connect" in dump and "terminal.ticket" in dump
    assert t["ticket"] not in dump and t3["ticket"] not in dump


def test_expired_ticket_is_refused(abx, workspace, tmp_path):
    s = abx(make_config(workspace, str(tmp_path), {"ticket_ttl": "1s"}))
    a = create(s)["id"]
    try:
        t = ticket(s, a)
        assert t["expires_in"] == 1
        time.sleep(1.3)
        assert refused(s, t["ws_path"]) == 401
    finally:
        delete(s, a)


def test_tool_agent_drives_a_terminal_with_process_write_and_output(abx, workspace, tmp_path):
    from test_mcp import Mcp, text_of
    s = abx(make_config(workspace, str(tmp_path)))
    c = Mcp(s)
    c.initialize()
    term = json.loads(text_of(c.call("terminal__create", {"command": "bash --norc --noprofile"})))
    tid = term["id"]
    try:
        w = json.loads(text_of(c.call("process__write", {"pid": tid, "data": "echo drive-$((6*7))\n"})))
        assert w["written"] > 0, w

        def seen():
            o = json.loads(text_of(c.call("process__output", {"pid": tid, "wait": 1})))
            return "drive-42" in o["stdout"] and o
        assert wait_for(seen, timeout=8), "the terminal's output never showed the command's result"
    finally:
        c.call("terminal__delete", {"id": tid})


def test_outstanding_tickets_are_bounded(abx, workspace, tmp_path):
    s = abx(make_config(workspace, str(tmp_path)))
    a = create(s)["id"]
    try:
        sess = requests.Session()
        hdr = {"Authorization": "Bearer " + ALICE_TOKEN, "Content-Type": "application/json"}
        codes = [sess.post(s.url + "/terminal/%d/ticket" % a, headers=hdr, data="{}").status_code
                 for _ in range(1024)]
        assert codes == [200] * 1024, set(codes)
        r = sess.post(s.url + "/terminal/%d/ticket" % a, headers=hdr, data="{}")
        assert r.status_code == 429 and r.json()["error"]["code"] == "limit.concurrency", r.text
    finally:
        delete(s, a)
