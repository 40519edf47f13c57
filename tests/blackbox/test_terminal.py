"""terminal.*: confined pseudo-terminals reached over WebSocket (the terminal listener
and the main listener), binary and JSON text frames, resize both ways, replay on
reconnect, ownership, delete, and the listener switched off."""
import json
import os
import re
import time

import pytest
import websocket

from abxtest import ALICE_TOKEN, BOB_TOKEN, CAROL_TOKEN, assert_error, tokens, wait_for

CMDS = ["bash *", "sh *", "python3 *", "cat *"]


def make_config(ws, terminal_listen="127.0.0.1:0", commands=None):
    stmt = {"ops": ["terminal.*", "process.get"], "principals": ["role:agent"], "paths": [ws + "/**"],
            "commands": commands or {"allow": CMDS, "env": ["FOO"]}}
    return {"workspace": ws, "terminal_listen": terminal_listen, "auth": {"tokens": tokens("alice", "bob", "carol")},
            "policy": {"allow": [{"ops": ["core.*"], "principals": ["*"]}, stmt]}}


@pytest.fixture
def srv(abx, workspace):
    return abx(make_config(workspace))


def ok(r):
    assert r.status_code == 200, r.text[:800]
    return r.json()


def create(s, body=None, token=ALICE_TOKEN):
    b = {"command": "bash --norc --noprofile"}
    b.update(body or {})
    return ok(s.post("/terminal", token=token, json_body=b))


def connect(url, token=ALICE_TOKEN):
    hdr = ["Authorization: Bearer " + token] if token else []
    return websocket.create_connection(url, header=hdr, timeout=5, suppress_origin=True)


def main_url(s, tid):
    return "ws://127.0.0.1:%d/terminal/%d" % (s.port, tid)


def read_until(ws, needle, timeout=6.0):
    """Collect terminal bytes until needle (bytes or compiled regex) appears."""
    deadline = time.time() + timeout
    buf = b""
    while time.time() < deadline:
        ws.settimeout(max(0.1, deadline - time.time()))
        try:
            op, data = ws.recv_data()
        except websocket.WebSocketTimeoutException:
            break
        except websocket.WebSocketConnectionClosedException:
            break
        if op in (websocket.ABNF.OPCODE_BINARY, websocket.ABNF.OPCODE_TEXT):
            buf += data
        if op == websocket.ABNF.OPCODE_CLOSE:
            break
        if (needle.search(buf) if hasattr(needle, "search") else needle in buf):
            return buf
    return buf


def delete(s, tid, token=ALICE_TOKEN):
    return s.request("DELETE", "/terminal/%d" % tid, token=token)


def test_create_result(srv):
    j = create(srv)
    try:
        tid = j["id"]
        assert isinstance(tid, int) and tid > 0
        assert j["ws_path"] == "/terminal/%d" % tid
        m = re.match(r"^ws://127\.0\.0\.1:(\d+)/terminal/(\d+)$", j["ws_url"])
        assert m, j["ws_url"]
        assert int(m.group(2)) == tid
        assert int(m.group(1)) not in (0, srv.port)
        assert j["running"] is True and j["pty"] is True
        assert j["argv"][0] == os.path.realpath("/usr/bin/bash")
    finally:
        delete(srv, j["id"])


def test_binary_frames_both_ways(srv):
    j = create(srv)
    ws = connect(j["ws_url"])
    try:
        ws.send_binary(b"echo marker-$((6*7))\n")
        buf = read_until(ws, b"marker-42")
        assert b"marker-42" in buf, buf
    finally:
        ws.close()
        delete(srv, j["id"])


def test_text_input_frame(srv):
    j = create(srv)
    ws = connect(j["ws_url"])
    try:
        ws.send(json.dumps({"type": "input", "data": "echo txt-$((5*5))\n"}))
        buf = read_until(ws, b"txt-25")
        assert b"txt-25" in buf, buf
    finally:
        ws.close()
        delete(srv, j["id"])


def test_size_at_create_and_resize(srv):
    j = create(srv, {"cols": 100, "rows": 30})
    tid = j["id"]
    ws = connect(j["ws_url"])
    try:
        ws.send_binary(b"stty size\n")
        assert b"30 100" in read_until(ws, b"30 100")
        ws.send(json.dumps({"type": "resize", "cols": 120, "rows": 40}))
        time.sleep(0.2)
        ws.send_binary(b"stty size\n")
        assert b"40 120" in read_until(ws, b"40 120")
        r = ok(srv.post("/terminal/%d/resize" % tid, token=ALICE_TOKEN, json_body={"cols": 90, "rows": 20}))
        assert r["id"] == tid and r["cols"] == 90 and r["rows"] == 20
        ws.send_binary(b"stty size\n")
        assert b"20 90" in read_until(ws, b"20 90")
    finally:
        ws.close()
        delete(srv, tid)


def test_resize_invalid(srv):
    j = create(srv)
    try:
        for body, code in (({"cols": 0, "rows": 10}, "args.invalid"), ({"cols": 10, "rows": 1001}, "args.invalid"),
                           ({"cols": 10}, "args.missing")):
            assert_error(srv.post("/terminal/%d/resize" % j["id"], token=ALICE_TOKEN, json_body=body), 400, code)
    finally:
        delete(srv, j["id"])


def test_reconnect_replays_recent_output_on_main_listener(srv):
    j = create(srv)
    tid = j["id"]
    ws = connect(j["ws_url"])
    try:
        ws.send_binary(b"echo replay-$((7*11))\n")
        assert b"replay-77" in read_until(ws, b"replay-77")
    finally:
        ws.close()
    # the terminal lives on; the main listener serves the same WebSocket
    ws2 = connect(main_url(srv, tid))
    try:
        assert b"replay-77" in read_until(ws2, b"replay-77", timeout=4)
        ws2.send_binary(b"echo again-$((2*3))\n")
        assert b"again-6" in read_until(ws2, b"again-6")
    finally:
        ws2.close()
        delete(srv, tid)


def test_replay_is_bounded_to_recent_output(srv):
    j = create(srv)
    tid = j["id"]
    ws = connect(j["ws_url"])
    try:
        ws.send_binary(b"head -c 200000 /dev/zero | tr '\\0' x; echo; echo TAIL-$((1+2))\n")
        assert b"TAIL-3" in read_until(ws, b"TAIL-3", timeout=10)
    finally:
        ws.close()
    time.sleep(0.2)
    ws2 = connect(main_url(srv, tid))
    try:
        buf = read_until(ws2, b"TAIL-3", timeout=4)
        assert b"TAIL-3" in buf
        # whatever else arrives within a moment is part of the replay too
        buf += read_until(ws2, b"\x00never\x00", timeout=0.5)
        assert 1024 < len(buf) <= 64 * 1024, len(buf)
    finally:
        ws2.close()
        delete(srv, tid)


def test_terminal_process_is_confined(srv):
    j = create(srv)
    ws = connect(j["ws_url"])
    try:
        ws.send_binary(b"grep -E '^(NoNewPrivs|CapEff)' /proc/self/status | tr '\\t\\n' '  '; echo END$((1+1))\n")
        buf = read_until(ws, b"END2")
        assert re.search(rb"NoNewPrivs: +1", buf), buf
        assert re.search(rb"CapEff: +0000000000000000", buf), buf
    finally:
        ws.close()
        delete(srv, j["id"])


def test_default_command_is_login_bash(srv):
    r = srv.post("/terminal", token=ALICE_TOKEN, json_body={})
    j = ok(r)
    try:
        assert j["argv"] == [os.path.realpath("/usr/bin/bash"), "-l"]
        assert j["running"] is True
    finally:
        delete(srv, j["id"])


def test_command_policy_applies(srv):
    assert_error(srv.post("/terminal", token=ALICE_TOKEN, json_body={"command": "top"}), 403,
                 "policy.command_not_allowed")
    assert_error(srv.post("/terminal", token=ALICE_TOKEN, json_body={"command": "bash; id"}), 403,
                 "policy.command_not_allowed")
    assert_error(srv.post("/terminal", token=ALICE_TOKEN, json_body={"command": "bash", "env": {"LD_PRELOAD": "x"}}),
                 403, "policy.command_not_allowed")
    assert_error(srv.post("/terminal", token=ALICE_TOKEN, json_body={"command": "bash", "cwd": "/etc"}), 403,
                 "policy.path_not_allowed")
    assert_error(srv.post("/terminal", token=BOB_TOKEN, json_body={}), 404, "op.not_enabled")


def test_cwd_and_env(srv, workspace):
    j = create(srv, {"cwd": "sub", "env": {"FOO": "term-env"}})
    ws = connect(j["ws_url"])
    try:
        ws.send_binary(b"echo \"[$PWD][$FOO]\"\n")
        want = ("[%s][term-env]" % os.path.join(workspace, "sub")).encode()
        assert want in read_until(ws, want)
    finally:
        ws.close()
        delete(srv, j["id"])


def test_ownership(srv):
    j = create(srv)
    tid = j["id"]
    try:
        with pytest.raises(websocket.WebSocketBadStatusException) as ei:
            connect(j["ws_url"], token=CAROL_TOKEN)
        assert ei.value.status_code == 404
        with pytest.raises(websocket.WebSocketBadStatusException) as ei:
            connect(j["ws_url"], token=None)
        assert ei.value.status_code == 401
        with pytest.raises(websocket.WebSocketBadStatusException) as ei:
            connect(main_url(srv, tid), token="wrong-token-0123456789abcdef")
        assert ei.value.status_code == 401
        assert_error(srv.post("/terminal/%d/resize" % tid, token=CAROL_TOKEN, json_body={"cols": 10, "rows": 10}),
                     404, "process.not_found")
        assert_error(delete(srv, tid, token=CAROL_TOKEN), 404, "process.not_found")
        ids_c = [t["id"] for t in ok(srv.get("/terminal/list", token=CAROL_TOKEN))["terminals"]]
        ids_a = [t["id"] for t in ok(srv.get("/terminal/list", token=ALICE_TOKEN))["terminals"]]
        assert tid in ids_a and tid not in ids_c
        assert ok(srv.get("/process/%d" % tid, token=ALICE_TOKEN))["running"] is True
    finally:
        delete(srv, tid)


def test_unknown_terminal(srv):
    with pytest.raises(websocket.WebSocketBadStatusException) as ei:
        connect(main_url(srv, 99999999))
    assert ei.value.status_code == 404
    assert_error(delete(srv, 99999999), 404, "process.not_found")


def test_connect_without_upgrade_is_refused(srv):
    j = create(srv)
    try:
        r = srv.get("/terminal/%d" % j["id"], token=ALICE_TOKEN)
        assert_error(r, 400, "args.invalid")
    finally:
        delete(srv, j["id"])


def test_delete_ends_the_terminal(srv):
    j = create(srv)
    tid = j["id"]
    ws = connect(j["ws_url"])
    try:
        r = ok(delete(srv, tid))
        assert r["id"] == tid and r["deleted"] is True
        g = wait_for(lambda: (lambda x: x if x["running"] is False else None)(
            ok(srv.get("/process/%d" % tid, token=ALICE_TOKEN))), timeout=5)
        assert g, "the terminal's process still runs after delete"
        live = [t for t in ok(srv.get("/terminal/list", token=ALICE_TOKEN))["terminals"] if t["id"] == tid]
        assert all(t["running"] is False for t in live)
    finally:
        ws.close()


def test_shell_exit_ends_websocket(srv):
    j = create(srv)
    ws = connect(j["ws_url"])
    try:
        ws.send_binary(b"exit 3\n")
        deadline = time.time() + 6
        closed = False
        while time.time() < deadline:
            try:
                ws.settimeout(1)
                op, _ = ws.recv_data()
                if op == websocket.ABNF.OPCODE_CLOSE:
                    closed = True
                    break
            except websocket.WebSocketTimeoutException:
                continue
            except (websocket.WebSocketConnectionClosedException, ConnectionError, OSError):
                closed = True
                break
        assert closed, "the WebSocket stayed open after the shell exited"
        g = ok(srv.get("/process/%d" % j["id"], token=ALICE_TOKEN))
        assert g["running"] is False and g["exit_code"] == 3
    finally:
        ws.close()


def test_terminal_listener_off(abx, workspace):
    s = abx(make_config(workspace, terminal_listen="off"))
    j = create(s)
    tid = j["id"]
    try:
        assert j["ws_path"] == "/terminal/%d" % tid
        assert "ws_url" not in j or j["ws_url"] is None
        ws = connect(main_url(s, tid))
        try:
            ws.send_binary(b"echo off-$((4*4))\n")
            assert b"off-16" in read_until(ws, b"off-16")
        finally:
            ws.close()
    finally:
        delete(s, tid)
