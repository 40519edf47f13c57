"""approvals.stream (the web console's live approvals list): the approvals.list answer as
SSE, sent at once and again on every change (a call held, decided), each caller's own view
(approvers all, others their own); GET /approvals/stream is not taken for an approval id."""
import json
import threading
import time

import requests

from abxtest import ALICE_TOKEN, APPROVER_TOKEN, CAROL_TOKEN, parse_sse
from test_approvals import make_config


def watch(s, token, seconds, out):
    buf = []
    with requests.get(s.url + "/approvals/stream", headers={"Authorization": "Bearer " + token}, stream=True,
                      timeout=10) as r:
        out["status"] = r.status_code
        deadline = time.time() + seconds
        for chunk in r.iter_content(chunk_size=None):
            buf.append(chunk.decode())
            if time.time() > deadline:
                break
    out["events"] = [json.loads(e["data"])["approvals"] for e in parse_sse("".join(buf)) if e["event"] == "approvals"]


def test_stream_follows_hold_and_decision(abx, workspace, tmp_path):
    s = abx(make_config(workspace, str(tmp_path / "ledger.db")))
    ann, carol = {}, {}
    ta = threading.Thread(target=watch, args=(s, APPROVER_TOKEN, 4.0, ann))
    tc = threading.Thread(target=watch, args=(s, CAROL_TOKEN, 4.0, carol))
    ta.start()
    tc.start()
    time.sleep(0.8)
    r = s.post("/files/write", token=ALICE_TOKEN, json_body={"path": workspace + "/held.txt", "content": "x"})
    assert r.status_code == 202, r.text
    aid = r.json()["approval_id"]
    time.sleep(1.0)
    d = s.post("/approvals/" + aid, token=APPROVER_TOKEN, json_body={"decision": "approve", "reason": "ok"})
    assert d.status_code == 200, d.text
    ta.join()
    tc.join()
    assert ann["status"] == 200
    ev = ann["events"]
    assert ev[0] == [], ev  # at once: nothing is held yet
    pend = [e for e in ev if any(a["id"] == aid and a["status"] == "pending" for a in e)]
    assert pend and pend[0][0]["principal"] == "alice" and pend[0][0]["op"] == "files.write", ev
    later = [a for e in ev for a in e if a["id"] == aid and a["status"] != "pending"]
    assert later and later[-1]["decided_by"] == "ann", ev
    assert all(x != y for x, y in zip(ev, ev[1:])), "an unchanged list was sent again"
    # carol (no approver, nothing held of hers) never sees alice's call
    assert carol["status"] == 200 and all(e == [] for e in carol["events"]), carol


def test_stream_path_is_not_an_approval_id(abx, workspace, tmp_path):
    s = abx(make_config(workspace, str(tmp_path / "ledger.db")))
    r = s.get("/approvals/nope", token=APPROVER_TOKEN)
    assert r.status_code == 404 and r.json()["error"]["code"] == "approval.not_found"
    with requests.get(s.url + "/approvals/stream", headers={"Authorization": "Bearer " + APPROVER_TOKEN},
                      stream=True, timeout=10) as r:
        assert r.status_code == 200 and r.headers["Content-Type"].startswith("text/event-stream")
