"""files.watch as an agent reads it: abx's own temp files (an atomic files.write, the
staging directory of files.extract) never show, a rename inside the tree is one "move"
event with from and path, a rename out of the tree is a delete and into it a create,
and a directory renamed inside a recursive watch keeps being watched under its new name."""
import io
import json
import os
import tarfile
import threading
import time

import pytest


def collect(server, seconds, act, params=None):
    """Watch the workspace recursively, run act() once the watch is ready, and return
    the events seen within `seconds`."""
    q = {"path": ".", "recursive": "true"}
    q.update(params or {})
    r = server.get("/files/watch", token=server.token, params=q, stream=True, timeout=15)
    assert r.status_code == 200, r.text
    events, ready = [], threading.Event()

    def reader():
        cur = {}
        deadline = time.time() + seconds
        for raw in r.iter_lines(decode_unicode=True):
            if raw == "":
                if cur.get("event") == "ready":
                    ready.set()
                elif "event" in cur:
                    events.append(json.loads(cur["data"]))
                cur = {}
            elif not raw.startswith(":"):
                k, _, v = raw.partition(": ")
                cur[k] = v
            if time.time() > deadline:
                break

    t = threading.Thread(target=reader, daemon=True)
    t.start()
    assert ready.wait(5)
    act()
    t.join(seconds + 5)
    r.close()
    return events


def test_atomic_writes_show_no_temp_file(server, workspace):
    def act():
        assert server.op("files.write", {"path": "new.txt", "content": "one"}, token=server.token).status_code == 200
        time.sleep(0.2)
        assert server.op("files.write", {"path": "new.txt", "content": "two"}, token=server.token).status_code == 200
        time.sleep(0.2)
        assert server.op("files.edit", {"path": "new.txt", "old": "two", "new": "three"},
                         token=server.token).status_code == 200
    events = collect(server, 2.5, act)
    assert not [e for e in events if ".abx-tmp" in e["path"] or ".abx-tmp" in e.get("from", "")], events
    kinds = [(e["type"], e["path"]) for e in events]
    assert kinds[0] == ("create", "new.txt"), kinds    # a new file is created, not renamed over
    assert set(kinds[1:]) == {("modify", "new.txt")}, kinds


def test_a_rename_is_one_move_event(server, workspace):
    os.makedirs(os.path.join(workspace, "d", "inner"))
    outside = os.path.join(os.path.dirname(workspace), "outside.txt")

    def act():
        os.rename(os.path.join(workspace, "a.txt"), os.path.join(workspace, "renamed.txt"))
        time.sleep(0.2)
        os.rename(os.path.join(workspace, "d"), os.path.join(workspace, "d2"))
        time.sleep(0.3)
        with open(os.path.join(workspace, "d2", "inner", "x.txt"), "w") as f:   # still watched, new name
            f.write("x")
        time.sleep(0.2)
        os.rename(os.path.join(workspace, "b.txt"), outside)                  # leaves the tree
        time.sleep(0.2)
        os.rename(outside, os.path.join(workspace, "back.txt"))               # comes back in
    events = collect(server, 2.5, act)
    moves = [e for e in events if e["type"] == "move"]
    assert [(e["from"], e["path"]) for e in moves] == [("a.txt", "renamed.txt"), ("d", "d2")], events
    assert moves[1]["dir"] is True
    paths = [(e["type"], e["path"]) for e in events]
    assert ("create", "d2/inner/x.txt") in paths, paths
    assert ("delete", "b.txt") in paths and ("create", "back.txt") in paths, paths
    assert all("from" not in e for e in events if e["type"] != "move")


def test_extract_staging_is_hidden(server, workspace):
    buf = io.BytesIO()
    with tarfile.open(fileobj=buf, mode="w") as t:
        for name in ("pkg/a.txt", "pkg/sub/b.txt"):
            ti = tarfile.TarInfo(name)
            ti.size = 1
            t.addfile(ti, io.BytesIO(b"x"))
    with open(os.path.join(workspace, "p.tar"), "wb") as f:
        f.write(buf.getvalue())

    def act():
        r = server.op("files.extract", {"path": "p.tar", "dest": "."}, token=server.token)
        assert r.status_code == 200, r.text
        time.sleep(0.3)
        with open(os.path.join(workspace, "pkg", "sub", "c.txt"), "w") as f:   # the new tree is watched
            f.write("c")
    events = collect(server, 2, act)
    assert not [e for e in events if "abx-extract" in e["path"] or ".abx-tmp" in e["path"]], events
    paths = [(e["type"], e["path"]) for e in events]
    assert paths[0] == ("create", "pkg"), paths
    assert ("create", "pkg/sub/c.txt") in paths, paths
