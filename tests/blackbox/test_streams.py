"""files.archive (tar.gz streamed), files.watch (inotify as SSE, resumable) and polling a
held call through the RPC binding of approvals.get."""
import io
import json
import os
import tarfile
import threading
import time


from abxtest import ALICE_TOKEN, APPROVER_TOKEN
from test_approvals import make_config


def test_archive_streams_sources_as_tar_gz(server, token, workspace):
    os.makedirs(os.path.join(workspace, "d", "sub"))
    with open(os.path.join(workspace, "d", "one.txt"), "w") as f:
        f.write("one\n")
    with open(os.path.join(workspace, "d", "sub", "two.bin"), "wb") as f:
        f.write(bytes(range(256)) * 1000)
    with open(os.path.join(workspace, "top.txt"), "w") as f:
        f.write("top\n")
    os.symlink("/etc/passwd", os.path.join(workspace, "d", "link"))
    r = server.post("/files/archive", token=token, json_body={"sources": ["d", "top.txt"]}, stream=True)
    assert r.status_code == 200, r.text[:300]
    assert r.headers["Content-Type"].startswith("application/gzip")
    data = r.raw.read()
    with tarfile.open(fileobj=io.BytesIO(data), mode="r:gz") as t:
        names = set(t.getnames())
        assert {"d", "d/one.txt", "d/sub", "d/sub/two.bin", "top.txt"} <= names, names
        assert t.extractfile("d/sub/two.bin").read() == bytes(range(256)) * 1000
        link = t.getmember("d/link")
        assert link.issym() and link.linkname == "/etc/passwd"   # stored as a link, never followed


def test_archive_refuses_a_source_outside_the_scope(server, token):
    r = server.post("/files/archive", token=token, json_body={"sources": ["/etc"]})
    assert r.status_code == 403 and r.json()["error"]["code"] == "policy.path_not_allowed"


def test_archive_missing_source_is_an_error_before_any_byte(server, token):
    r = server.post("/files/archive", token=token, json_body={"sources": ["nope"]})
    assert r.status_code == 404 and r.json()["error"]["code"] == "files.not_found"


def sse_events(resp, want, timeout=10):
    """Read SSE frames until `want` data events arrived (or the timeout)."""
    events, cur = [], {}
    deadline = time.time() + timeout
    for raw in resp.iter_lines(decode_unicode=True):
        if time.time() > deadline:
            break
        if raw == "":
            if "event" in cur and cur["event"] not in ("ready", "reset"):
                events.append(cur)
            cur = {}
            if len(events) >= want:
                break
            continue
        if raw.startswith(":"):
            continue
        k, _, v = raw.partition(": ")
        cur[k] = v
    return events


def test_watch_reports_create_modify_delete_in_order(server, token, workspace):
    r = server.get("/files/watch", token=token, params={"path": ".", "recursive": "true"}, stream=True, timeout=15)
    assert r.status_code == 200 and r.headers["Content-Type"].startswith("text/event-stream")
    got = []
    t = threading.Thread(target=lambda: got.extend(sse_events(r, 3)))
    t.start()
    time.sleep(0.3)
    p = os.path.join(workspace, "w.txt")
    with open(p, "w") as f:
        f.write("a")
    time.sleep(0.2)
    with open(p, "a") as f:
        f.write("b")
    time.sleep(0.2)
    os.unlink(p)
    t.join(12)
    r.close()
    kinds = [(e["event"], json.loads(e["data"])["path"]) for e in got]
    assert kinds[0] == ("create", "w.txt"), kinds
    assert ("modify", "w.txt") in kinds, kinds
    assert kinds[-1] == ("delete", "w.txt"), kinds
    assert kinds.index(("modify", "w.txt")) < len(kinds) - 1
    seqs = [int(e["id"].split(":")[1]) for e in got]
    assert seqs == sorted(seqs)


def test_watch_resumes_with_last_event_id(server, token, workspace):
    r = server.get("/files/watch", token=token, params={"path": "."}, stream=True, timeout=15)
    first = []
    t = threading.Thread(target=lambda: first.extend(sse_events(r, 1)))
    t.start()
    time.sleep(0.3)
    open(os.path.join(workspace, "a1"), "w").close()
    t.join(10)
    r.close()
    assert first, "no event"
    last_id = first[-1]["id"]
    open(os.path.join(workspace, "a2"), "w").close()     # while nobody listens
    time.sleep(0.3)
    r2 = server.get("/files/watch", token=token, params={"path": "."}, stream=True, timeout=15,
                    headers={"Last-Event-ID": last_id})
    more = []
    t2 = threading.Thread(target=lambda: more.extend(sse_events(r2, 3, timeout=4)))
    t2.start()
    t2.join(6)
    r2.close()
    paths = [json.loads(e["data"])["path"] for e in more]
    assert "a2" in paths, more                       # what happened while nobody listened
    seq0 = int(last_id.split(":")[1])
    assert all(int(e["id"].split(":")[1]) > seq0 for e in more), more   # nothing sent twice


def test_watch_refuses_a_file(server, token, workspace):
    open(os.path.join(workspace, "f"), "w").close()
    r = server.get("/files/watch", token=token, params={"path": "f"})
    assert r.status_code == 400 and r.json()["error"]["code"] == "files.not_a_directory"


def test_approvals_get_through_rpc(abx, workspace, tmp_path):
    s = abx(make_config(workspace, str(tmp_path / "l.db")))
    r = s.post("/files/write", token=ALICE_TOKEN, json_body={"path": "held.txt", "content": "x"})
    assert r.status_code == 202, r.text
    aid = r.json()["approval_id"]
    pending = s.op("approvals.get", {"id": aid}, token=ALICE_TOKEN)
    assert pending.status_code == 202 and pending.json()["status"] == "pending"
    assert s.post("/approvals/" + aid, token=APPROVER_TOKEN, json_body={"decision": "approve"}).status_code == 200
    deadline = time.time() + 10
    while True:
        done = s.op("approvals.get", {"id": aid}, token=ALICE_TOKEN)
        if done.status_code != 202 or time.time() > deadline:
            break
        time.sleep(0.05)
    assert done.status_code == 200, done.text
    assert done.json()["path"].endswith("/held.txt")
    with open(os.path.join(workspace, "held.txt")) as f:
        assert f.read() == "x"
    other = s.op("approvals.get", {"id": "0" * 32}, token=ALICE_TOKEN)
    assert other.status_code == 404 and other.json()["error"]["code"] == "approval.not_found"
