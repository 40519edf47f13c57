"""Door review (the other doors than the plain HTTP API): tickets, watch events, and the
E2B / sandboxd bindings, attacked with a limited token. Each test provokes the attack and
fails on a build without its fix."""
import json
import os
import socket
import threading
import time

import pytest
import requests
import websocket

from abxtest import ALICE_TOKEN, BOB_TOKEN, assert_error, free_port, tokens, wait_for


# ---- a port ticket is for a browser on one port's origin: never a terminal's WebSocket ----

def ticket_config(ws):
    stmt = {"ops": ["terminal.*", "process.*", "ports.*"], "principals": ["role:agent"], "paths": [ws + "/**"],
            "commands": {"allow": ["bash *", "python3 *"]}, "ports": ["*"], "net": True}
    return {"workspace": ws, "terminal_listen": "off", "auth": {"tokens": tokens("alice", "bob", "carol")},
            "policy": {"allow": [{"ops": ["core.*"], "principals": ["*"]}, stmt]}}


def test_port_ticket_does_not_open_a_terminal(abx, workspace):
    """ports.ticket mints a single-use ticket that signs a browser in on p<port>.localhost
    for that port only (a preview link). Redeemed instead at GET /terminal/{id}?ticket=,
    it must not give its holder an interactive shell as the principal."""
    s = abx(ticket_config(workspace))
    r = s.post("/terminal", token=ALICE_TOKEN, json_body={"command": "bash --norc --noprofile"})
    assert r.status_code == 200, r.text
    tid = r.json()["id"]
    try:
        port = free_port()
        t = s.post("/ports/ticket/%d" % port, token=ALICE_TOKEN)
        assert t.status_code == 200, t.text
        tk = t.json()["ticket"]
        url = "ws://127.0.0.1:%d/terminal/%d?ticket=%s" % (s.port, tid, tk)
        try:
            ws = websocket.create_connection(url, timeout=5, origin="http://127.0.0.1:%d" % s.port)
        except websocket.WebSocketBadStatusException as e:
            assert e.status_code == 401, e
            return
        try:
            ws.send_binary(b"echo pwned-$((40+2))\n")
            got = b""
            deadline = time.time() + 5
            while time.time() < deadline and b"pwned-42" not in got:
                ws.settimeout(1)
                try:
                    got += ws.recv_data()[1]
                except websocket.WebSocketTimeoutException:
                    pass
        finally:
            ws.close()
        pytest.fail("a ports.ticket opened terminal %d (shell output: %r)" % (tid, got[-200:]))
    finally:
        s.request("DELETE", "/terminal/%d" % tid, token=ALICE_TOKEN)


# ---- files.watch: a rename out of a denied name must not show the denied name ----

def watch_config(ws):
    return {"workspace": ws, "terminal_listen": "off", "auth": {"tokens": tokens("alice", "bob", "carol")},
            "policy": {"deny": [{"paths": [ws + "/**/*.key"]}],
                       "allow": [{"ops": ["core.*"], "principals": ["*"]},
                                 {"ops": ["files.*"], "principals": ["role:agent"], "paths": [ws + "/**"]}]}}


class SSE:
    """files.watch's stream read on a thread: the data of each event."""

    def __init__(self, s, params):
        self.events = []
        self.resp = requests.get(s.url + "/files/watch", params=params, stream=True, timeout=30,
                                 headers={"Authorization": "Bearer " + ALICE_TOKEN})
        assert self.resp.status_code == 200, self.resp.text
        self.t = threading.Thread(target=self.run, daemon=True)
        self.t.start()

    def run(self):
        try:
            for line in self.resp.iter_lines():
                if line.startswith(b"data: "):
                    self.events.append(json.loads(line[6:]))
        except Exception:
            pass

    def close(self):
        self.resp.close()


def test_watch_move_does_not_show_a_denied_old_name(abx, workspace):
    """A file under a denied name (here *.key) is hidden from the watcher's caller: its
    creation, changes and removal are never shown. When it is renamed to a visible name
    (by the host, another principal, a process), the move event must not carry the
    denied name in `from`."""
    s = abx(watch_config(workspace))
    secret = os.path.join(workspace, "prod-db-password-hunter2.key")
    with open(secret, "w") as f:
        f.write("x")
    # the name is hidden from the caller's listing
    lst = s.get("/files/list", token=ALICE_TOKEN, params={"path": workspace}).json()
    assert all(not e["name"].endswith(".key") for e in lst["entries"]), lst
    w = SSE(s, {"path": workspace, "recursive": "true"})
    try:
        assert wait_for(lambda: w.events, timeout=5)  # ready
        os.rename(secret, os.path.join(workspace, "renamed.txt"))
        with open(os.path.join(workspace, "marker.txt"), "w") as f:
            f.write("m")
        assert wait_for(lambda: any(e.get("path") == "marker.txt" for e in w.events), timeout=8), w.events
        dump = json.dumps(w.events)
        assert "hunter2" not in dump, "the denied name leaked through a watch event: %s" % dump
        # the file that appeared is shown as what the caller sees: a new file
        assert any(e.get("path") == "renamed.txt" for e in w.events), w.events
    finally:
        w.close()


# ---- E2B's polled watchers: the policy in force when the events are read ----

def e2b_config(ws, tmp, port, files=True, deny=None):
    allow = [{"ops": ["core.*"], "principals": ["*"]}]
    if files:
        allow.append({"ops": ["files.*"], "principals": ["role:agent"], "paths": [ws + "/**"]})
    pol = {"allow": allow}
    if deny:
        pol["deny"] = [{"paths": deny}]
    return {"workspace": ws, "terminal_listen": "off", "ledger": {"path": os.path.join(tmp, "ledger.db")},
            "e2b": {"envd_listen": "127.0.0.1:%d" % port, "interpreter_listen": "127.0.0.1:%d" % free_port()},
            "auth": {"tokens": tokens("alice", "bob", "carol")}, "policy": pol}


def envd_call(port, method, body, token=ALICE_TOKEN):
    return requests.post("http://127.0.0.1:%d/%s" % (port, method), data=json.dumps(body).encode(), timeout=30,
                         headers={"Content-Type": "application/json", "X-Access-Token": token})


def reload_with(s, cfg):
    with open(s.config_path, "w") as f:
        json.dump(cfg, f)
    import signal
    os.kill(s.proc.pid, signal.SIGHUP)


def poll_events(port, wid, want, timeout=8):
    seen, deadline = [], time.time() + timeout
    while time.time() < deadline:
        r = envd_call(port, "filesystem.Filesystem/GetWatcherEvents", {"watcherId": wid})
        if r.status_code != 200:
            return r, seen
        seen += r.json().get("events", [])
        if any(want in e.get("name", "") for e in seen):
            break
        time.sleep(0.1)
    return r, seen


@pytest.mark.parametrize("change", ["revoked", "denied"])
def test_e2b_watcher_follows_a_reloaded_policy(abx, workspace, tmp_path, change):
    """CreateWatcher starts files.watch once; GetWatcherEvents is a new call each time, made
    as the caller under the policy in force. After a reload that takes files.* away (or
    denies a name), polling must not go on handing out the names of changed files."""
    port = free_port()
    tmp = str(tmp_path)
    s = abx(e2b_config(workspace, tmp, port))
    r = envd_call(port, "filesystem.Filesystem/CreateWatcher", {"path": workspace, "recursive": True})
    assert r.status_code == 200, r.text
    wid = r.json()["watcherId"]
    with open(os.path.join(workspace, "before.txt"), "w") as f:
        f.write("x")
    r, seen = poll_events(port, wid, "before.txt")
    assert any(e["name"] == "before.txt" for e in seen), seen
    if change == "revoked":
        reload_with(s, e2b_config(workspace, tmp, port, files=False))
        # the reload is in force: files.stat is gone for alice
        assert wait_for(lambda: envd_call(port, "filesystem.Filesystem/Stat",
                                          {"path": workspace}).status_code == 404, timeout=10)
        secret = "after-revocation-hunter2.txt"
    else:
        reload_with(s, e2b_config(workspace, tmp, port, deny=[workspace + "/**/*.key"]))
        probe = os.path.join(workspace, "probe.key")
        open(probe, "w").close()
        assert wait_for(lambda: envd_call(port, "filesystem.Filesystem/Stat",
                                          {"path": probe}).status_code == 403, timeout=10)
        secret = "after-deny-hunter2.key"
    with open(os.path.join(workspace, secret), "w") as f:
        f.write("x")
    r, seen = poll_events(port, wid, "hunter2", timeout=4)
    assert not any("hunter2" in e.get("name", "") for e in seen), \
        "the watcher outlived the policy that admitted it: %s" % seen
    if change == "revoked":
        assert r.status_code in (403, 404), r.text  # the watcher ended with the refusal
    else:
        # what the caller still may see keeps coming
        with open(os.path.join(workspace, "visible-after.txt"), "w") as f:
            f.write("x")
        r, seen = poll_events(port, wid, "visible-after.txt")
        assert r.status_code == 200 and any(e["name"] == "visible-after.txt" for e in seen), (r.text, seen)


# ---- a port-origin session ends with the principal's token ----

def test_port_session_ends_when_the_token_expires(abx, workspace):
    """A ports.ticket signs a browser in on p<port>.localhost with a 12 h session cookie.
    The cookie stands for the principal's token: once the token has expired (expires_at),
    neither the token nor the session opens anything."""
    import datetime
    port = free_port()
    exp = datetime.datetime.now(datetime.timezone.utc).replace(microsecond=0) + datetime.timedelta(seconds=8)
    toks = tokens("alice", "bob")
    toks[0]["expires_at"] = exp.strftime("%Y-%m-%dT%H:%M:%SZ")
    stmt = {"ops": ["process.*", "ports.*"], "principals": ["role:agent"], "paths": [workspace + "/**"],
            "commands": {"allow": ["python3 *"]}, "ports": ["*"], "net": True}
    s = abx({"workspace": workspace, "terminal_listen": "off", "auth": {"tokens": toks},
             "policy": {"allow": [{"ops": ["core.*"], "principals": ["*"]}, stmt]}})
    r = s.post("/process", token=ALICE_TOKEN, json_body={
        "command": "python3 -m http.server %d --bind 127.0.0.1 --directory %s" % (port, workspace)})
    assert r.status_code == 200, r.text
    assert r.json()["pid"] > 0
    assert wait_for(lambda: any(p["port"] == port for p in
                                s.get("/ports", token=ALICE_TOKEN).json().get("ports", [])), timeout=10)
    t = s.post("/ports/ticket/%d" % port, token=ALICE_TOKEN).json()
    host = "p%d.localhost:%d" % (port, s.port)
    r = requests.get(s.url + "/?abx_ticket=" + t["ticket"], headers={"Host": host}, allow_redirects=False)
    assert r.status_code == 303, r.text
    cookie = r.headers["Set-Cookie"].split(";")[0]
    r = requests.get(s.url + "/a.txt", headers={"Host": host, "Cookie": cookie})
    assert r.status_code == 200 and r.text == "hello\n", r.text
    left = (exp - datetime.datetime.now(datetime.timezone.utc)).total_seconds()
    time.sleep(max(0, left) + 1.0)
    assert_error(s.get("/ports", token=ALICE_TOKEN), 401, "auth.invalid_token")  # the token is over
    r = requests.get(s.url + "/a.txt", headers={"Host": host, "Cookie": cookie})
    assert r.status_code == 401, "the port session outlived its token: %s %r" % (r.status_code, r.text[:200])


@pytest.mark.parametrize("watched", [".", "sub"])
def test_watch_does_not_enter_a_denied_folder_renamed_by_the_host(abx, workspace, watched):
    """Deny rules bind identities: a denied folder renamed by the host (mv secrets loot) is
    still denied under its new name (docs/security.md). A recursive watch must not start
    watching it under the new name and report what is created inside: whether it was
    renamed inside the watched folder or moved into it from outside."""
    os.makedirs(os.path.join(workspace, "secrets"))
    cfg = watch_config(workspace)
    cfg["policy"]["deny"] = [{"paths": [workspace + "/secrets/**"]}]
    s = abx(cfg)
    top = os.path.join(workspace, watched)
    w = SSE(s, {"path": top, "recursive": "true"})
    try:
        assert wait_for(lambda: w.events, timeout=5)  # ready
        loot = os.path.join(top, "loot")
        os.rename(os.path.join(workspace, "secrets"), loot)
        time.sleep(0.5)
        # abx's own ops hold the identity: the renamed folder is denied
        r = s.get("/files/list", token=ALICE_TOKEN, params={"path": loot})
        assert r.status_code == 403, r.text
        with open(os.path.join(loot, "new-hunter2.txt"), "w") as f:
            f.write("x")
        with open(os.path.join(top, "marker.txt"), "w") as f:
            f.write("m")
        assert wait_for(lambda: any(e.get("path") == "marker.txt" for e in w.events), timeout=8), w.events
        dump = json.dumps(w.events)
        assert "hunter2" not in dump, "a file in a denied folder was reported: %s" % dump
    finally:
        w.close()
