"""Long calls on the tool doors (issue 25): commands.run on MCP and /tools/call answers status
running at the door's soft timeout (limits.tool_soft_timeout) and process.wait waits for the exit;
a plain tools/call with a progressToken gets notifications/progress while it runs; streaming ops
(files.watch, process.stream, commands.stream) answer with what they collected within their bound
(duration, max_events) through MCP tools/call and /tools/call; SIGTERM with a stream open and its
client gone stops abx within limits.shutdown_grace and leaves no child behind, and the grace
timer ends a stop that a command ignoring TERM would hold up."""
import json
import os
import signal
import socket
import threading
import time

import requests

from abxtest import ALICE_TOKEN, pgrep, sha256_hex, uniq_sleep, wait_for
from test_mcp import ACCEPT, Mcp, sse_messages, text_of


def make_config(ws, tmp, limits=None):
    toks = [{"principal": "alice", "roles": ["agent"], "token_sha256": sha256_hex(ALICE_TOKEN)}]
    allow = [
        {"ops": ["core.*"], "principals": ["*"]},
        {"ops": ["files.*"], "principals": ["role:agent"], "paths": [ws + "/**"]},
        {"ops": ["process.get", "process.wait", "process.output", "process.stream", "process.signal"],
         "principals": ["role:agent"]},
        {"ops": ["commands.*", "process.start"], "principals": ["role:agent"], "paths": [ws + "/**"],
         "commands": ["echo *", "sleep *", "sh *"]},
    ]
    return {"workspace": ws, "terminal_listen": "off", "auth": {"tokens": toks}, "policy": {"allow": allow},
            "ledger": {"path": os.path.join(tmp, "ledger.db")}, "limits": limits or {}}


def anthropic(s, name, args, timeout=60):
    payload = {"role": "assistant", "content": [{"type": "tool_use", "id": "t1", "name": name, "input": args}]}
    r = s.post("/tools/call?format=anthropic", token=ALICE_TOKEN, json_body=payload, timeout=timeout)
    assert r.status_code == 200, r.text[:500]
    b = r.json()["content"][0]
    assert b["is_error"] is False, b
    return json.loads(b["content"])


# -- soft timeout and process.wait -------------------------------------------------------------------

def test_mcp_run_answers_running_at_the_door_soft_timeout_then_process_wait(abx, workspace, tmp_path):
    s = abx(make_config(workspace, str(tmp_path), {"tool_soft_timeout": "1s"}))
    c = Mcp(s)
    c.initialize()
    t0 = time.time()
    out = json.loads(text_of(c.call("commands__run", {"command": "sh -c 'sleep 2.5; echo done'"})))
    assert time.time() - t0 < 2.2, "the soft timeout did not answer"
    assert out["status"] == "running" and out["running"] is True and out["pid"] > 0, out
    pid = out["pid"]
    # a bounded wait that ends first: still running
    w = json.loads(text_of(c.call("process__wait", {"pid": pid, "timeout": 0.2})))
    assert w["status"] == "running" and w["timed_out_waiting"] is True, w
    w = json.loads(text_of(c.call("process__wait", {"pid": pid, "timeout": 10})))
    assert w["status"] == "completed" and w["exit_code"] == 0 and w["timed_out_waiting"] is False, w
    o = json.loads(text_of(c.call("process__output", {"pid": pid})))
    assert o["stdout"] == "done\n", o
    # the caller's own timeout wins over the door's (0 = none)
    out = json.loads(text_of(c.call("commands__run", {"command": "sh -c 'sleep 1.5; echo x'", "timeout": 0})))
    assert out["status"] == "completed" and out["stdout"] == "x\n", out
    # process.wait is bounded by its schema (under a client's 60 s), and another's pid is unknown
    res = c.call("process__wait", {"pid": pid, "timeout": 51})
    assert res["isError"] is True and text_of(res).startswith("args."), res
    res = c.call("process__wait", {"pid": 1, "timeout": 0})
    assert res["isError"] is True and text_of(res).startswith("process.not_found"), res


def test_tools_call_door_soft_timeout(abx, workspace, tmp_path):
    s = abx(make_config(workspace, str(tmp_path), {"tool_soft_timeout": "1s"}))
    t0 = time.time()
    out = anthropic(s, "commands__run", {"command": "sleep 3"})
    assert time.time() - t0 < 2.5 and out["status"] == "running", out
    w = anthropic(s, "process__wait", {"pid": out["pid"], "timeout": 10})
    assert w["status"] == "completed" and w["exit_code"] == 0, w
    # plain HTTP keeps running to completion (no door default)
    r = s.op("commands.run", {"command": "sh -c 'sleep 1.3; echo y'"}, token=ALICE_TOKEN)
    assert r.status_code == 200 and r.json()["status"] == "completed", r.text


# -- progress for plain calls -------------------------------------------------------------------------

def test_plain_call_with_progress_token_sends_progress_while_it_runs(abx, workspace, tmp_path):
    s = abx(make_config(workspace, str(tmp_path), {"progress_interval": "300ms"}))
    c = Mcp(s)
    c.initialize()
    c.n += 1
    r = c.post({"jsonrpc": "2.0", "id": c.n, "method": "tools/call",
                "params": {"name": "commands__run", "arguments": {"command": "sh -c 'sleep 1.5; echo ok'"},
                           "_meta": {"progressToken": "p-1"}}}, headers={"Accept": ACCEPT}, stream=True)
    assert r.headers["Content-Type"].startswith("text/event-stream"), r.headers
    msgs = sse_messages(r)
    prog = [m for m in msgs if m.get("method") == "notifications/progress"]
    assert len(prog) >= 3 and all(m["params"]["progressToken"] == "p-1" for m in prog), msgs
    vals = [m["params"]["progress"] for m in prog]
    assert vals == sorted(set(vals)), vals
    assert "still running" in prog[0]["params"]["message"], prog
    out = json.loads(text_of(msgs[-1]["result"]))
    assert msgs[-1]["id"] == c.n and out["status"] == "completed" and out["stdout"] == "ok\n", msgs[-1]
    # the same call without a token: one JSON answer
    out = json.loads(text_of(c.call("commands__run", {"command": "echo plain"})))
    assert out["stdout"] == "plain\n"


def test_cancel_reaches_a_plain_call_on_its_worker(abx, workspace, tmp_path):
    s = abx(make_config(workspace, str(tmp_path), {"progress_interval": "200ms"}))
    c = Mcp(s)
    c.initialize()
    got = []
    r = c.post({"jsonrpc": "2.0", "id": "w-1", "method": "tools/call",
                "params": {"name": "commands__run", "arguments": {"command": "sleep 30"},
                           "_meta": {"progressToken": 5}}}, headers={"Accept": ACCEPT}, stream=True)
    t = threading.Thread(target=lambda: got.extend(sse_messages(r)))
    t.start()
    time.sleep(0.8)
    t0 = time.time()
    assert c.post({"jsonrpc": "2.0", "method": "notifications/cancelled",
                   "params": {"requestId": "w-1"}}).status_code == 202
    t.join(10)
    assert not t.is_alive() and time.time() - t0 < 5
    assert got[-1]["id"] == "w-1" and json.loads(text_of(got[-1]["result"]))["signal"] == "KILL", got[-1]


# -- bounded streams on tool doors --------------------------------------------------------------------

def test_streaming_ops_answer_within_their_bound_over_mcp(abx, workspace, tmp_path):
    s = abx(make_config(workspace, str(tmp_path)))
    c = Mcp(s)
    c.initialize()

    def touch_later():
        time.sleep(0.5)
        for i in range(3):
            with open(os.path.join(workspace, "w%d.txt" % i), "w") as f:
                f.write("x")
            time.sleep(0.1)

    threading.Thread(target=touch_later).start()
    t0 = time.time()
    doc = json.loads(text_of(c.call("files__watch", {"path": workspace, "duration": 2})))
    took = time.time() - t0
    assert 1.5 < took < 5, took
    assert doc["ended"] == "duration" and any("w0.txt" in json.dumps(e) for e in doc["events"]), doc
    # max_events ends it first
    doc = json.loads(text_of(c.call("commands__stream", {"command": "sh -c 'echo a; echo b; sleep 20'",
                                                          "max_events": 2})))
    assert doc["ended"] == "max_events" and len(doc["events"]) == 2, doc
    # process.stream of a background process: the duration bound
    p = s.op("process.start", {"command": "sh -c 'echo bg; sleep 20'"}, token=ALICE_TOKEN).json()
    t0 = time.time()
    doc = json.loads(text_of(c.call("process__stream", {"pid": p["pid"], "duration": 1})))
    assert time.time() - t0 < 4 and doc["ended"] == "duration", doc
    assert any(e["event"] == "stdout" for e in doc["events"]), doc
    s.op("process.signal", {"pid": p["pid"], "signal": "KILL"}, token=ALICE_TOKEN)


def test_streaming_ops_answer_within_their_bound_over_tools_call(abx, workspace, tmp_path):
    s = abx(make_config(workspace, str(tmp_path), {"tool_stream_duration": "1s"}))
    t0 = time.time()
    out = anthropic(s, "files__watch", {"path": workspace})  # the server's default bound
    assert time.time() - t0 < 4 and out["ended"] == "duration", out
    t0 = time.time()
    out = anthropic(s, "commands__stream", {"command": "sh -c 'echo a; sleep 0.3; echo b; sleep 20'",
                                            "max_events": 3, "duration": 30})  # start, a, b
    assert time.time() - t0 < 5
    assert out["ended"] == "max_events" and out["events"] == 3 and "data:" in out["text"], out
    p = s.op("process.start", {"command": "sh -c 'echo bg; sleep 20'"}, token=ALICE_TOKEN).json()
    out = anthropic(s, "process__stream", {"pid": p["pid"], "duration": 0.5})
    assert out["ended"] == "duration" and "bg" in out["text"], out
    s.op("process.signal", {"pid": p["pid"], "signal": "KILL"}, token=ALICE_TOKEN)


# -- SIGTERM with a stream open and its client gone ---------------------------------------------------

def test_sigterm_with_an_abandoned_stream_stops_within_grace(abx, workspace, tmp_path):
    s = abx(make_config(workspace, str(tmp_path), {"shutdown_grace": "2s"}))
    c = Mcp(s)
    c.initialize()
    tag = uniq_sleep()
    # an open stream whose client is then gone: a raw socket that sends the call and dies
    body = json.dumps({"jsonrpc": "2.0", "id": 9, "method": "tools/call",
                       "params": {"name": "commands__stream", "arguments": {"command": "sleep " + tag},
                                  "_meta": {"progressToken": 1}}}).encode()
    sock = socket.create_connection(("127.0.0.1", s.port))
    sock.sendall(b"POST /mcp HTTP/1.1\r\nHost: 127.0.0.1\r\nAuthorization: Bearer " + ALICE_TOKEN.encode() +
                 b"\r\nMcp-Session-Id: " + c.sid.encode() + b"\r\nContent-Type: application/json\r\nAccept: " +
                 ACCEPT.encode() + b"\r\nContent-Length: %d\r\n\r\n" % len(body) + body)
    assert wait_for(lambda: pgrep("sleep " + tag)), "the streamed command did not start"
    # and a background process with a long-polling reader
    p = s.op("process.start", {"command": "sleep " + tag + "1"}, token=ALICE_TOKEN).json()
    threading.Thread(target=lambda: requests.get(s.url + "/process/%d/output?wait=60" % p["pid"],
                                                 headers={"Authorization": "Bearer " + ALICE_TOKEN},
                                                 timeout=70), daemon=True).start()
    # and a files.watch stream whose client stays connected and never reads
    held = socket.create_connection(("127.0.0.1", s.port))
    held.sendall(b"GET /files/watch?path=. HTTP/1.1\r\nHost: 127.0.0.1\r\nAuthorization: Bearer " +
                 ALICE_TOKEN.encode() + b"\r\n\r\n")
    time.sleep(0.3)
    sock.close()
    t0 = time.time()
    s.proc.send_signal(signal.SIGTERM)
    s.proc.wait(10)
    took = time.time() - t0
    print("SIGTERM to exit with an abandoned stream, a long poll and a held watch: %.2f s (grace 2 s)" % took)
    assert took < 2 + 1, took
    assert wait_for(lambda: not pgrep("sleep " + tag), timeout=2), pgrep("sleep " + tag)
    held.close()


def test_the_grace_cuts_a_stuck_stop_short(abx, workspace, tmp_path):
    """A running commands.run whose command ignores TERM keeps a normal stop waiting for it;
    after the grace the timer kills every process group abx started, exits, and says so."""
    s = abx(make_config(workspace, str(tmp_path), {"shutdown_grace": "500ms"}))
    tag = uniq_sleep()
    def run():
        try:
            s.op("commands.run", {"argv": ["sh", "-c", "trap '' TERM; sleep " + tag]}, token=ALICE_TOKEN)
        except requests.RequestException:
            pass  # abx went away mid-call: what this test does

    threading.Thread(target=run, daemon=True).start()
    assert wait_for(lambda: pgrep("sleep " + tag)), "the command did not start"
    t0 = time.time()
    s.proc.send_signal(signal.SIGTERM)
    s.proc.wait(10)
    took = time.time() - t0
    assert took < 1.5, took
    assert wait_for(lambda: not pgrep("sleep " + tag), timeout=2), pgrep("sleep " + tag)
    assert "longer than limits.shutdown_grace" in s.stderr(), s.stderr()[-2000:]
