"""ledger.stream (the live timeline the web console follows: SSE, id = ordinal, resumable
with Last-Event-ID or after_ordinal, each principal's own view) and ledger.verify (the
chain's status and head, for principals it is mounted for: an admin op)."""
import threading
import time

import requests

from abxtest import ADMIN_TOKEN, ALICE_TOKEN, BOB_TOKEN, assert_error, parse_sse, tokens


def config(ws, ledger=None):
    policy = {"allow": [
        {"ops": ["core.*", "ledger.timeline", "ledger.stream", "ledger.get"], "principals": ["*"]},
        {"ops": ["ledger.verify"], "principals": ["role:admin"]},
        {"ops": ["files.*"], "principals": ["role:agent"], "paths": [ws + "/**"]},
    ]}
    cfg = {"workspace": ws, "terminal_listen": "off", "auth": {"tokens": tokens("alice", "bob", "root")},
           "policy": policy}
    if ledger is not None:
        cfg["ledger"] = ledger
    return cfg


def collect(s, token, seconds, headers=None, params=None):
    """Read ledger.stream for a while: the parsed events."""
    h = {"Authorization": "Bearer " + token}
    h.update(headers or {})
    buf = []
    with requests.get(s.url + "/ledger/stream", headers=h, params=params, stream=True, timeout=10) as r:
        assert r.status_code == 200, r.text
        assert r.headers["Content-Type"].startswith("text/event-stream")
        deadline = time.time() + seconds
        for chunk in r.iter_content(chunk_size=None):
            buf.append(chunk.decode())
            if time.time() > deadline:
                break
    return parse_sse("".join(buf))


def test_stream_live_then_resume(abx, workspace):
    s = abx(config(workspace))
    got = {}

    def reader():
        got["ev"] = collect(s, ALICE_TOKEN, 3.0)

    t = threading.Thread(target=reader)
    t.start()
    time.sleep(0.8)
    r = s.post("/files/write", token=ALICE_TOKEN, json_body={"path": workspace + "/live.txt", "content": "x"})
    assert r.status_code == 200, r.text
    t.join()
    ev = got["ev"]
    assert ev[0]["event"] == "start"
    rows = [e for e in ev if e["event"] == "event"]
    import json
    data = [json.loads(e["data"]) for e in rows]
    assert any(d["op"] == "files.write" and d["door"] == "http" for d in data), data
    ords = [int(e["id"]) for e in rows]
    assert ords == sorted(ords) and ords == [d["ordinal"] for d in data]
    # resume after the first one: the rest again, nothing before it
    again = collect(s, ALICE_TOKEN, 1.0, headers={"Last-Event-ID": str(ords[0])})
    o2 = [int(e["id"]) for e in again if e["event"] == "event"]
    assert o2[:len(ords) - 1] == ords[1:], (o2, ords)
    # after_ordinal=0 replays from the beginning of the caller's view
    whole = collect(s, ALICE_TOKEN, 1.0, params={"after_ordinal": 0})
    o3 = [int(e["id"]) for e in whole if e["event"] == "event"]
    assert set(ords) <= set(o3)


def test_stream_is_each_principals_own_view(abx, workspace):
    s = abx(config(workspace))
    assert s.post("/files/write", token=ALICE_TOKEN, json_body={"path": workspace + "/a.txt", "content": "x"}).ok
    import json
    bob = [json.loads(e["data"]) for e in collect(s, BOB_TOKEN, 1.0, params={"after_ordinal": 0})
           if e["event"] == "event"]
    assert bob and all(d["principal"] == "bob" for d in bob), bob
    root = [json.loads(e["data"]) for e in collect(s, ADMIN_TOKEN, 1.0, params={"after_ordinal": 0})
            if e["event"] == "event"]
    assert any(d["principal"] == "alice" for d in root)


def test_stream_bad_last_event_id(abx, workspace):
    s = abx(config(workspace))
    r = s.get("/ledger/stream", token=ALICE_TOKEN, headers={"Last-Event-ID": "12x"})
    assert_error(r, 400, "args.invalid")


def test_stream_and_verify_without_ledger(abx, workspace):
    s = abx(config(workspace, ledger={"enabled": False}))
    assert_error(s.get("/ledger/stream", token=ALICE_TOKEN), 503, "ledger.unavailable")
    assert_error(s.get("/ledger/verify", token=ADMIN_TOKEN), 503, "ledger.unavailable")


def test_verify_admin_only(abx, workspace):
    s = abx(config(workspace))
    assert s.post("/files/write", token=ALICE_TOKEN, json_body={"path": workspace + "/v.txt", "content": "x"}).ok
    time.sleep(0.5)
    r = s.get("/ledger/verify", token=ADMIN_TOKEN)
    assert r.status_code == 200, r.text
    v = r.json()
    assert v["intact"] is True and v["events"] > 0, v
    assert len(v["head"]["hash"]) == 64 and v["head"]["ordinal"] >= 1, v
    assert s.get("/ledger/verify", token=ALICE_TOKEN).status_code == 404  # not mounted for alice
