"""ports.* (issue 25): ports.list shows the TCP ports the caller's processes listen on, and
GET /ports/{port}/{path...} relays HTTP to them through the pipeline, scoped by a `ports:`
scope and only to a socket one of the caller's own processes holds."""
import json
import os

import pytest

from abxtest import ALICE_TOKEN, CAROL_TOKEN, assert_error, free_port, run_abx, tokens, wait_for


def make_config(ws, ports, net=True, extra=None):
    stmt = {"ops": ["process.*", "ports.*"], "principals": ["role:agent"], "paths": [ws + "/**"],
            "commands": {"allow": ["python3 *"]}, "net": net}
    if ports is not None:
        stmt["ports"] = ports
    stmt.update(extra or {})
    return {"workspace": ws, "terminal_listen": "off", "auth": {"tokens": tokens("alice", "bob", "carol")},
            "policy": {"allow": [{"ops": ["core.*"], "principals": ["*"]}, stmt]}}


def serve(s, ws, port, token=ALICE_TOKEN):
    """A dev server started by process.start (python's http.server over the workspace)."""
    r = s.post("/process", token=token,
               json_body={"command": "python3 -m http.server %d --bind 127.0.0.1 --directory %s" % (port, ws)})
    assert r.status_code == 200, r.text
    pid = r.json()["pid"]
    assert wait_for(lambda: any(p["port"] == port for p in
                                s.get("/ports", token=token).json().get("ports", [])), timeout=10), \
        s.get("/process/%d/output" % pid, token=token).text
    return pid


def stop(s, pid, token=ALICE_TOKEN):
    s.post("/process/%d/signal" % pid, token=token, json_body={"signal": "KILL"})


def test_dev_server_reached_through_ports(abx, workspace):
    port = free_port()
    s = abx(make_config(workspace, ["1024-65535"]))
    with open(os.path.join(workspace, "index.html"), "w") as f:
        f.write("<h1>dev server</h1>\n")
    pid = serve(s, workspace, port)
    try:
        listed = s.get("/ports", token=ALICE_TOKEN).json()["ports"]
        entry = [p for p in listed if p["port"] == port][0]
        assert entry["address"] == "127.0.0.1" and entry["family"] == "ipv4", entry
        assert entry["process"] == pid and entry["path"] == "/ports/%d/" % port, entry
        r = s.get("/ports/%d/index.html" % port, token=ALICE_TOKEN)
        assert r.status_code == 200, r.text
        assert r.text == "<h1>dev server</h1>\n"
        assert r.headers["Content-Type"].startswith("text/html")
        # a directory listing, with the query string passed through as is
        sub = s.get("/ports/%d/sub/?a=1&b=%%20" % port, token=ALICE_TOKEN)
        assert sub.status_code == 200 and "c.txt" in sub.text, sub.text
        assert wait_for(lambda: "GET /sub/?a=1&b=%20 HTTP/1.0" in
                        s.get("/process/%d/output" % pid, token=ALICE_TOKEN).text, timeout=5)
        assert s.get("/ports/%d/" % port, token=ALICE_TOKEN).text == "<h1>dev server</h1>\n"
        # a name with a space travels encoded again
        with open(os.path.join(workspace, "sp ace.txt"), "w") as f:
            f.write("odd name\n")
        assert s.get("/ports/%d/sp%%20ace.txt" % port, token=ALICE_TOKEN).text == "odd name\n"
        # the upstream's own status is relayed
        assert s.get("/ports/%d/nosuch.txt" % port, token=ALICE_TOKEN).status_code == 404
        # the same through the RPC door
        rpc = s.op("ports.proxy", {"port": port, "rest": "index.html"}, token=ALICE_TOKEN)
        assert rpc.status_code == 200 and "dev server" in rpc.text, rpc.text
        # no credentials: the pipeline refuses before anything is relayed
        assert_error(s.get("/ports/%d/index.html" % port), 401, "auth.required")
    finally:
        stop(s, pid)


def test_port_outside_the_scope_is_refused(abx, workspace):
    port = free_port()
    s = abx(make_config(workspace, ["1-2"]))
    pid = serve(s, workspace, port)
    try:
        assert_error(s.get("/ports/%d/" % port, token=ALICE_TOKEN), 403, "policy.port_not_allowed")
    finally:
        stop(s, pid)


def test_port_of_another_principal_or_nobody_is_refused(abx, workspace):
    port = free_port()
    s = abx(make_config(workspace, ["*"]))
    pid = serve(s, workspace, port)
    try:
        assert any(p["port"] == port for p in s.get("/ports", token=ALICE_TOKEN).json()["ports"])
        assert not any(p["port"] == port for p in s.get("/ports", token=CAROL_TOKEN).json()["ports"])
        assert_error(s.get("/ports/%d/" % port, token=CAROL_TOKEN), 404, "ports.not_found")
        # abx's own port is no process of the caller's
        assert_error(s.get("/ports/%d/health" % s.port, token=ALICE_TOKEN), 404, "ports.not_found")
    finally:
        stop(s, pid)


def test_ports_scope_is_required(abx, workspace):
    s = abx(make_config(workspace, None), start=False)
    with pytest.raises(RuntimeError) as e:
        s.start()
    assert "config.scope_required" in str(e.value) and "'ports'" in str(e.value)


@pytest.mark.parametrize("entry", ["0", "70000", "9-3", "http", "80-"])
def test_ports_scope_entries_are_checked(abx, workspace, entry):
    s = abx(make_config(workspace, [entry]), start=False)
    with pytest.raises(RuntimeError) as e:
        s.start()
    assert "ports entry '%s'" % entry in str(e.value)


def test_explain_shows_the_port_verdict(workspace, tmp_path):
    cfg = tmp_path / "abx.json"
    cfg.write_text(json.dumps(make_config(workspace, ["8000-8999"])))
    r = run_abx(["explain", "--config", str(cfg), "--op", "ports.proxy", "--principal", "alice",
                 "--arg", "port=9000", "--json"], home=str(tmp_path / "h"))
    t = json.loads(r.stdout)
    assert t["code"] == "policy.port_not_allowed", t


def test_a_server_started_by_a_child_counts(abx, workspace):
    """The socket is held by a grandchild of the started process (its session): found by
    the scan of the session, not only of the started process itself."""
    port = free_port()
    s = abx(make_config(workspace, ["*"]))
    code = ("import subprocess, sys; subprocess.run([sys.executable, '-m', 'http.server', '%d', "
            "'--bind', '127.0.0.1', '--directory', %r])" % (port, workspace))
    r = s.post("/process", token=ALICE_TOKEN, json_body={"argv": ["python3", "-c", code]})
    assert r.status_code == 200, r.text
    pid = r.json()["pid"]
    try:
        assert wait_for(lambda: any(p["port"] == port for p in s.get("/ports", token=ALICE_TOKEN).json()["ports"]),
                        timeout=10)
        entry = [p for p in s.get("/ports", token=ALICE_TOKEN).json()["ports"] if p["port"] == port][0]
        assert entry["process"] == pid and entry["pid"] != pid, entry
        r = s.get("/ports/%d/a.txt" % port, token=ALICE_TOKEN)
        assert r.status_code == 200 and r.text == "hello\n", r.text
    finally:
        stop(s, pid)


def test_a_stopped_server_is_not_reached_through_the_cache(abx, workspace):
    """The proxy keeps the listener it found for a few seconds; once the server is gone the
    next request does not use that entry (not found), and a new server on the same port
    (carol's) is not reached with alice's token."""
    port = free_port()
    s = abx(make_config(workspace, ["*"]))
    pid = serve(s, workspace, port)
    assert s.get("/ports/%d/a.txt" % port, token=ALICE_TOKEN).text == "hello\n"
    stop(s, pid)
    assert wait_for(lambda: s.get("/ports/%d/a.txt" % port, token=ALICE_TOKEN).status_code == 404, timeout=3)
    pid2 = serve(s, workspace, port, token=CAROL_TOKEN)
    try:
        assert_error(s.get("/ports/%d/a.txt" % port, token=ALICE_TOKEN), 404, "ports.not_found")
        assert s.get("/ports/%d/a.txt" % port, token=CAROL_TOKEN).text == "hello\n"
    finally:
        stop(s, pid2, token=CAROL_TOKEN)


ECHO_SERVER = r'''
import http.server, json, sys

BIG = bytes(range(256)) * (5 * 1024 * 1024 // 256)


class H(http.server.BaseHTTPRequestHandler):
    def answer(self, status=200, body=b"", ctype="application/json", length=True):
        self.send_response(status)
        self.send_header("Content-Type", ctype)
        self.send_header("X-Echo-Method", self.command)
        self.send_header("Set-Cookie", "a=1")
        self.send_header("Set-Cookie", "b=2")
        if length:
            self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        if self.command != "HEAD":
            self.wfile.write(body)

    def seen(self):
        n = int(self.headers.get("Content-Length") or 0)
        return {"method": self.command, "path": self.path, "body": self.rfile.read(n).decode(),
                "headers": {k.lower(): v for k, v in self.headers.items()}}

    def do_GET(self):
        if self.path == "/big":
            return self.answer(body=BIG, ctype="application/octet-stream")
        if self.path == "/big-unsized":
            return self.answer(body=BIG, ctype="application/octet-stream", length=False)
        self.answer(body=json.dumps(self.seen()).encode())

    do_POST = do_PUT = do_PATCH = do_DELETE = do_OPTIONS = do_GET

    def do_HEAD(self):
        self.answer(body=b"x" * 123)


http.server.HTTPServer(("127.0.0.1", int(sys.argv[1])), H).serve_forever()
'''


def serve_echo(s, ws, port, token=ALICE_TOKEN):
    with open(os.path.join(ws, "echo_server.py"), "w") as f:
        f.write(ECHO_SERVER)
    r = s.post("/process", token=token, json_body={"argv": ["python3", os.path.join(ws, "echo_server.py"), str(port)]})
    assert r.status_code == 200, r.text
    pid = r.json()["pid"]
    assert wait_for(lambda: any(p["port"] == port for p in
                                s.get("/ports", token=token).json().get("ports", [])), timeout=10), \
        s.get("/process/%d/output" % pid, token=token).text
    return pid


def test_every_method_with_body_and_headers_is_relayed(abx, workspace):
    port = free_port()
    s = abx(make_config(workspace, ["*"]))
    pid = serve_echo(s, workspace, port)
    try:
        r = s.post("/ports/%d/api/items?x=1" % port, token=ALICE_TOKEN, json_body={"name": "widget", "n": 3},
                   headers={"X-Custom": "yes", "Cookie": "sid=42", "X-Access-Token": ALICE_TOKEN,
                            "Connection": "keep-alive, X-Hop", "X-Hop": "drop me"})
        assert r.status_code == 200, r.text
        seen = r.json()
        assert seen["method"] == "POST" and seen["path"] == "/api/items?x=1", seen
        assert json.loads(seen["body"]) == {"name": "widget", "n": 3}
        h = seen["headers"]
        assert h["content-type"] == "application/json" and h["x-custom"] == "yes" and h["cookie"] == "sid=42", h
        # abx's own credentials and the hop-by-hop headers never reach the server
        assert "authorization" not in h and "x-access-token" not in h and "x-hop" not in h, h
        assert ALICE_TOKEN not in json.dumps(seen)
        # the server's headers come back, a repeated one as many times
        assert r.headers["X-Echo-Method"] == "POST"
        assert r.raw.headers.getlist("Set-Cookie") == ["a=1", "b=2"], r.raw.headers
        for method in ("PUT", "PATCH", "DELETE", "OPTIONS"):
            r = s.request(method, "/ports/%d/thing" % port, token=ALICE_TOKEN, data=b"raw \x00 bytes",
                          headers={"Content-Type": "application/octet-stream"})
            assert r.status_code == 200, (method, r.text)
            assert r.json()["method"] == method and r.json()["body"] == "raw \x00 bytes", r.text
        d = s.request("DELETE", "/ports/%d/thing/7" % port, token=ALICE_TOKEN)
        assert d.status_code == 200 and d.json()["method"] == "DELETE" and d.json()["path"] == "/thing/7"
        hd = s.request("HEAD", "/ports/%d/anything" % port, token=ALICE_TOKEN)
        assert hd.status_code == 200 and hd.headers["X-Echo-Method"] == "HEAD" and hd.content == b""
        # a server that answers an upgrade with anything but 101: 502, nothing upgraded
        import websocket
        with pytest.raises(websocket.WebSocketBadStatusException) as ei:
            websocket.create_connection("ws://127.0.0.1:%d/ports/%d/" % (s.port, port), timeout=5,
                                        header=["Authorization: Bearer " + ALICE_TOKEN], suppress_origin=True)
        assert ei.value.status_code == 502
    finally:
        stop(s, pid)


def test_large_bodies_arrive_whole(abx, workspace):
    port = free_port()
    s = abx(make_config(workspace, ["*"]))
    pid = serve_echo(s, workspace, port)
    big = bytes(range(256)) * (5 * 1024 * 1024 // 256)
    try:
        for path in ("big", "big-unsized"):  # relayed as a stream: no copy of 5 MB in abx, no cap
            r = s.get("/ports/%d/%s" % (port, path), token=ALICE_TOKEN, timeout=30)
            assert r.status_code == 200 and r.headers["Content-Type"] == "application/octet-stream"
            assert len(r.content) == len(big) and r.content == big, (path, len(r.content))
        # a request body is bounded by limits.request_max_bytes
        up = s.post("/ports/%d/up" % port, token=ALICE_TOKEN, data=b"y" * 300000,
                    headers={"Content-Type": "text/plain"})
        assert up.status_code == 200 and len(up.json()["body"]) == 300000
    finally:
        stop(s, pid)


def test_request_body_over_the_limit_is_refused(abx, workspace):
    port = free_port()
    cfg = make_config(workspace, ["*"])
    cfg["limits"] = {"request_max_bytes": 1000}
    s = abx(cfg)
    pid = serve_echo(s, workspace, port)
    try:
        assert_error(s.post("/ports/%d/up" % port, token=ALICE_TOKEN, data=b"y" * 5000,
                            headers={"Content-Type": "text/plain"}), 413, "limit.request_too_large")
    finally:
        stop(s, pid)


WS_ECHO_SERVER = r'''
import base64, hashlib, socket, sys, threading

GUID = b"258EAFA5-E914-47DA-95CA-C5AB0DC85B11"


def recv_exact(c, n):
    b = b""
    while len(b) < n:
        k = c.recv(n - len(b))
        if not k:
            raise EOFError
        b += k
    return b


def session(c):
    head = b""
    while b"\r\n\r\n" not in head:
        head += c.recv(4096)
    lines = head.decode().split("\r\n")
    h = {l.split(":", 1)[0].strip().lower(): l.split(":", 1)[1].strip() for l in lines[1:] if ":" in l}
    if h.get("upgrade", "").lower() != "websocket":
        c.sendall(b"HTTP/1.0 400 Bad Request\r\nContent-Length: 0\r\n\r\n")
        return c.close()
    acc = base64.b64encode(hashlib.sha1(h["sec-websocket-key"].encode() + GUID).digest()).decode()
    c.sendall(("HTTP/1.1 101 Switching Protocols\r\nUpgrade: websocket\r\nConnection: Upgrade\r\n"
               "Sec-WebSocket-Accept: %s\r\n\r\n" % acc).encode())
    try:
        while True:
            b0, b1 = recv_exact(c, 2)
            n = b1 & 127
            if n == 126:
                n = int.from_bytes(recv_exact(c, 2), "big")
            elif n == 127:
                n = int.from_bytes(recv_exact(c, 8), "big")
            mask = recv_exact(c, 4)
            data = bytes(x ^ mask[i % 4] for i, x in enumerate(recv_exact(c, n)))
            if b0 & 15 == 8:
                c.sendall(b"\x88\x00")
                break
            reply = b"echo:" + data + (b" auth=" + h["authorization"].encode() if "authorization" in h else b"")
            hdr = bytes([0x80 | (b0 & 15)]) + (bytes([len(reply)]) if len(reply) < 126 else
                                                bytes([126]) + len(reply).to_bytes(2, "big"))
            c.sendall(hdr + reply)
    except EOFError:
        pass
    c.close()


s = socket.socket()
s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
s.bind(("127.0.0.1", int(sys.argv[1])))
s.listen(8)
while True:
    c, _ = s.accept()
    threading.Thread(target=session, args=(c,), daemon=True).start()
'''


def test_websocket_upgrade_is_passed_through(abx, workspace):
    import websocket
    port = free_port()
    s = abx(make_config(workspace, ["*"]))
    with open(os.path.join(workspace, "ws_server.py"), "w") as f:
        f.write(WS_ECHO_SERVER)
    r = s.post("/process", token=ALICE_TOKEN, json_body={"argv": ["python3", os.path.join(workspace, "ws_server.py"),
                                                                  str(port)]})
    assert r.status_code == 200, r.text
    pid = r.json()["pid"]
    try:
        assert wait_for(lambda: any(p["port"] == port for p in
                                    s.get("/ports", token=ALICE_TOKEN).json().get("ports", [])), timeout=10)
        url = "ws://127.0.0.1:%d/ports/%d/socket" % (s.port, port)
        ws = websocket.create_connection(url, header=["Authorization: Bearer " + ALICE_TOKEN], timeout=5,
                                         suppress_origin=True)
        try:
            for msg in ("hello", "x" * 5000):
                ws.send(msg)
                # the frames are the server's own; abx's token never reached it
                assert ws.recv() == "echo:" + msg
        finally:
            ws.close()
        # without credentials the upgrade is refused by the pipeline
        with pytest.raises(websocket.WebSocketBadStatusException) as ei:
            websocket.create_connection(url, timeout=5, suppress_origin=True)
        assert ei.value.status_code == 401
    finally:
        stop(s, pid)


HEADER_ECHO_SERVER = r'''
import json, sys
from http.server import BaseHTTPRequestHandler, HTTPServer
class H(BaseHTTPRequestHandler):
    def do_GET(self):
        body = json.dumps({"path": self.path, "headers": {k.lower(): v for k, v in self.headers.items()}}).encode()
        self.send_response(200)
        self.send_header("Content-Type", "application/json")
        self.send_header("Set-Cookie", "app=1; Path=/")
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)
    def log_message(self, *a):
        pass
HTTPServer(("127.0.0.1", int(sys.argv[1])), H).serve_forever()
'''


def start_echo(s, ws, port):
    with open(os.path.join(ws, "hdr_echo.py"), "w") as f:
        f.write(HEADER_ECHO_SERVER)
    r = s.post("/process", token=ALICE_TOKEN, json_body={"argv": ["python3", os.path.join(ws, "hdr_echo.py"), str(port)]})
    assert r.status_code == 200, r.text
    assert wait_for(lambda: any(p["port"] == port for p in
                                s.get("/ports", token=ALICE_TOKEN).json().get("ports", [])), timeout=10)
    return r.json()["pid"]


def test_port_origin_browser_sign_in(abx, workspace):
    """A browser reaches a port on its own origin p<port>.localhost: a ports.ticket URL signs
    it in (303 + an HttpOnly session cookie for that port only), abx's API is not on that
    origin, and neither the ticket nor the cookie reaches the server."""
    import requests
    port, other = free_port(), free_port()
    s = abx(make_config(workspace, ["*"]))
    pid = start_echo(s, workspace, port)
    base = "http://127.0.0.1:%d" % s.port
    host = {"Host": "p%d.localhost:%d" % (port, s.port)}
    try:
        t = s.post("/ports/ticket/%d" % port, token=ALICE_TOKEN).json()
        assert t["url"] == "http://p%d.localhost:%d/?abx_ticket=%s" % (port, s.port, t["ticket"]), t
        assert t["expires_in"] == 30 and t["path"] == "/?abx_ticket=" + t["ticket"], t
        r = requests.get(base + "/page?x=1&abx_ticket=%s&y=2" % t["ticket"], headers=host, allow_redirects=False)
        assert r.status_code == 303 and r.headers["Location"] == "/page?x=1&y=2", (r.status_code, r.headers)
        ck = r.headers["Set-Cookie"]
        assert ck.startswith("abx_port=") and "HttpOnly" in ck and "SameSite=Lax" in ck and "Domain" not in ck, ck
        session = ck.split(";")[0].split("=", 1)[1]
        # single use
        r2 = requests.get(base + "/?abx_ticket=" + t["ticket"], headers=host, allow_redirects=False)
        assert_error(r2, 401, "auth.invalid_token")
        # the session: the server sees the page, its own cookies, never abx's
        r = requests.get(base + "/page?x=1", headers=dict(host, Cookie="app=1; abx_port=%s; theme=dark" % session))
        assert r.status_code == 200, r.text
        seen = r.json()
        assert seen["path"] == "/page?x=1", seen
        assert seen["headers"].get("cookie") == "app=1; theme=dark", seen
        assert "authorization" not in seen["headers"] and "abx_ticket" not in json.dumps(seen), seen
        r = requests.get(base + "/", headers=dict(host, Cookie="abx_port=" + session))
        assert r.status_code == 200 and "cookie" not in r.json()["headers"], r.text
        # abx's own API is not on the port's origin: /health is the server's path
        r = requests.get(base + "/health", headers=dict(host, Cookie="abx_port=" + session))
        assert r.json()["path"] == "/health", r.text
        # the session opens this port only, on its own origin only
        other_host = {"Host": "p%d.localhost:%d" % (other, s.port), "Cookie": "abx_port=" + session}
        assert_error(requests.get(base + "/", headers=other_host), 401, "auth.invalid_token")
        assert_error(requests.get(base + "/ports/%d/" % port, headers={"Cookie": "abx_port=" + session}), 401,
                     "auth.required")
        # a ticket for one port does not sign in on another's origin
        t2 = s.post("/ports/ticket/%d" % port, token=ALICE_TOKEN).json()
        assert_error(requests.get(base + "/?abx_ticket=" + t2["ticket"], headers={"Host": other_host["Host"]},
                                  allow_redirects=False), 401, "auth.invalid_token")
        # no ticket, no cookie: a clear 401; a forged cookie: 401
        r = requests.get(base + "/", headers=host)
        assert_error(r, 401, "auth.required")
        assert "ports.ticket" in r.json()["error"]["message"], r.text
        assert_error(requests.get(base + "/", headers=dict(host, Cookie="abx_port=" + "0" * 64)), 401,
                     "auth.invalid_token")
        # a token still works on the port's origin (curl)
        r = requests.get(base + "/tok", headers=dict(host, Authorization="Bearer " + ALICE_TOKEN))
        assert r.status_code == 200 and r.json()["path"] == "/tok", r.text
        # names that are not a port's origin
        for bad in ("p0.localhost", "p70000.localhost", "p080.localhost", "p%d.evil.example" % port, "px.localhost"):
            assert_error(requests.get(base + "/", headers={"Host": bad}), 403, "request.host_denied")
    finally:
        stop(s, pid)


def test_port_origin_scope_and_websocket(abx, workspace):
    """The session is the principal's: each request still passes the ports scope; and a
    page's WebSocket (which cannot send Authorization) connects with the cookie."""
    import requests
    import websocket
    port = free_port()
    s = abx(make_config(workspace, ["*"]))
    with open(os.path.join(workspace, "ws_server.py"), "w") as f:
        f.write(WS_ECHO_SERVER)
    r = s.post("/process", token=ALICE_TOKEN, json_body={"argv": ["python3", os.path.join(workspace, "ws_server.py"),
                                                                  str(port)]})
    pid = r.json()["pid"]
    try:
        assert wait_for(lambda: any(p["port"] == port for p in
                                    s.get("/ports", token=ALICE_TOKEN).json().get("ports", [])), timeout=10)
        t = s.post("/ports/ticket/%d" % port, token=ALICE_TOKEN).json()
        host = "p%d.localhost:%d" % (port, s.port)
        r = requests.get("http://127.0.0.1:%d/?abx_ticket=%s" % (s.port, t["ticket"]), headers={"Host": host},
                         allow_redirects=False)
        session = r.headers["Set-Cookie"].split(";")[0]
        ws = websocket.create_connection("ws://127.0.0.1:%d/socket" % s.port, host=host, timeout=5,
                                         header=["Cookie: " + session], origin="http://" + host)
        try:
            ws.send("from the page")
            assert ws.recv() == "echo:from the page"
        finally:
            ws.close()
        # a port outside the ports scope gets no ticket
        s2 = abx(make_config(workspace, ["1-80"]))
        assert_error(s2.post("/ports/ticket/%d" % port, token=ALICE_TOKEN), 403, "policy.port_not_allowed")
    finally:
        stop(s, pid)


def test_port_origin_in_chromium(abx, workspace):
    """Debian's headless Chromium resolves p<port>.localhost itself, follows the 303 and
    keeps the cookie: the ticket URL opens the page."""
    import shutil
    import subprocess
    chromium = shutil.which("chromium")
    if not chromium:
        pytest.skip("chromium is not installed (scripts/deps.sh test installs it)")
    port = free_port()
    s = abx(make_config(workspace, ["*"]))
    with open(os.path.join(workspace, "index.html"), "w") as f:
        f.write("<html><body><p id=x>served to the browser</p></body></html>\n")
    pid = serve(s, workspace, port)
    try:
        t = s.post("/ports/ticket/%d" % port, token=ALICE_TOKEN).json()
        prof = os.path.join(workspace, "..", "chromium-profile")
        out = subprocess.run([chromium, "--headless", "--no-sandbox", "--disable-gpu", "--user-data-dir=" + prof,
                              "--dump-dom", t["url"]], capture_output=True, text=True, timeout=60)
        assert "served to the browser" in out.stdout, (out.stdout[-500:], out.stderr[-1500:])
    finally:
        stop(s, pid)
