"""Issue 17, transparent mode: clients that ignore the proxy variables (Node 20's own
fetch, curl --noproxy '*', Python urllib without proxies, raw sockets) reach allowed
hosts through the resolver and the transparent listeners inside the process's namespace,
and are refused for the rest (docs/egress.md, "Transparent mode").

Upstreams run on loopback in abx's own namespace and are named through egress.resolve,
as in test_egress_e2e.py (whose fixtures are reused)."""
import os

from abxtest import ALICE_TOKEN
from test_egress_e2e import allow_config, ledger_events, run, tls_upstream, upstream  # noqa: F401 (fixtures)

import pytest


@pytest.fixture
def transparent(abx, workspace, upstream, tls_upstream):  # noqa: F811
    tport, ca = tls_upstream
    with open(os.path.join(workspace, "ca.pem"), "w") as f:
        f.write(ca)
    s = abx(allow_config(workspace, upstream, extra_allow=["up.test:%d" % tport]))
    s.ports = (upstream, tport)
    return s


def egress(s):
    return [e["data"] for e in ledger_events(s)["events"] if e["kind"] == "egress"]


NOPROXY = "unset HTTP_PROXY HTTPS_PROXY ALL_PROXY http_proxy https_proxy all_proxy; "


def test_curl_noproxy_http_and_https(transparent):
    hp, tp = transparent.ports
    j = run(transparent, NOPROXY + "curl -sS --noproxy '*' http://up.test:%d/plain; "
            "curl -sS --noproxy '*' --cacert ca.pem https://up.test:%d/tls; getent hosts up.test" % (hp, tp))
    lines = j["stdout"].split("\n")
    assert lines[0] == "hello from up.test:%d /plain" % hp, j
    assert lines[1] == "hello from up.test:%d /tls" % tp, j
    assert lines[2].startswith("127.100.0."), j  # a synthetic address on the process's loopback
    ev = egress(transparent)
    assert [(e["proto"], e["decision"], e["host"], e["port"]) for e in ev] == \
        [("transparent", "allow", "up.test", hp), ("transparent", "allow", "up.test", tp)], ev
    assert ev[0]["method"] == "GET" and ev[0]["path"] == "/plain" and ev[0]["addr"] == "127.0.0.1", ev
    assert "path" not in ev[1] and ev[1]["bytes_down"] > 1000, ev  # TLS passed through untouched


def test_node20_builtin_fetch(transparent):
    hp, tp = transparent.ports
    js = ("Promise.all([fetch('http://up.test:%d/node').then(r => r.text()),"
          " fetch('https://up.test:%d/node-tls').then(r => r.text())])"
          ".then(a => process.stdout.write(a.join('')), e => { console.log('ERR', e.cause || e); })" % (hp, tp))
    j = run(transparent, "NODE_EXTRA_CA_CERTS=ca.pem node -e \"%s\"" % js)
    assert j["stdout"] == "hello from up.test:%d /node\nhello from up.test:%d /node-tls\n" % (hp, tp), j


def test_python_urllib_without_proxies(transparent):
    hp, tp = transparent.ports
    code = ("import ssl, urllib.request as u\n"
            "o = u.build_opener(u.ProxyHandler({}), u.HTTPSHandler(context=ssl.create_default_context(cafile='ca.pem')))\n"
            "print(o.open('http://up.test:%d/py').read().decode(), end='')\n"
            "print(o.open('https://up.test:%d/py-tls').read().decode(), end='')\n" % (hp, tp))
    with open(os.path.join(transparent.workspace, "t.py"), "w") as f:
        f.write(code)
    j = run(transparent, "/usr/bin/python3 t.py")
    assert j["stdout"] == "hello from up.test:%d /py\nhello from up.test:%d /py-tls\n" % (hp, tp), j


RAW = r"""
import socket, sys
hp = int(sys.argv[1])
addr = socket.gethostbyname("up.test")
def answer(s):  # the whole answer: a body may come in a segment of its own
    data = b""
    while True:
        k = s.recv(4096)
        if not k:
            return data.decode().split("\r\n\r\n", 1)[1]
        data += k
s = socket.create_connection((addr, hp), timeout=5)
s.sendall(b"GET /raw HTTP/1.0\r\n\r\n")  # no Host header: named by the address looked up
print(answer(s), end="")
for name in ("evil.test", "up.test.evil.test"):
    try:
        socket.gethostbyname(name); print("RESOLVED", name)
    except socket.gaierror as e:
        print("nxdomain", name)
s = socket.create_connection((addr, hp), timeout=5)
s.sendall(b"GET / HTTP/1.1\r\nHost: evil.test:%d\r\nConnection: close\r\n\r\n" % hp)
print(answer(s), end="")
"""


def test_unlisted_names_nxdomain_and_raw_sockets(transparent):
    hp, _ = transparent.ports
    with open(os.path.join(transparent.workspace, "raw.py"), "w") as f:
        f.write(RAW)
    j = run(transparent, "/usr/bin/python3 raw.py %d; curl -sS --noproxy '*' https://evil.test/ 2>&1 | head -c 60; "
            "echo" % hp)
    out = j["stdout"].split("\n")
    assert out[0] == "hello from None /raw", j
    assert out[1:3] == ["nxdomain evil.test", "nxdomain up.test.evil.test"], j
    assert out[3] == "abx: egress to evil.test denied by policy", (j["stdout"], j.get("stderr"))  # Host disagrees with the name looked up
    assert "Could not resolve host: evil.test" in out[4], j
    ev = egress(transparent)
    denied = [(e["proto"], e["host"]) for e in ev if e["decision"] == "deny"]
    assert ("dns", "evil.test") in denied and ("dns", "up.test.evil.test") in denied, ev
    assert ("transparent", "evil.test") in denied, ev
    assert sum(1 for d in denied if d == ("dns", "evil.test")) == 1, ev  # once per name
    r = transparent.get("/metrics", token=ALICE_TOKEN)
    assert 'abx_egress_connections_total{decision="deny"}' in r.text


def test_sni_names_an_unlisted_host(transparent):
    """A TLS connection to an allowed name's address whose ClientHello names another host
    is refused (and so is one straight to loopback naming an unlisted host)."""
    _, tp = transparent.ports
    j = run(transparent, NOPROXY + "curl -sS -k --connect-to evil.test:%d:up.test:%d https://evil.test:%d/ 2>&1 "
            "| head -c 40; echo; curl -sS -k --connect-to evil.test:%d:127.0.0.1:%d https://evil.test:%d/ 2>&1 "
            "| head -c 40; echo" % (tp, tp, tp, tp, tp, tp))
    assert "hello" not in j["stdout"], j
    ev = [e for e in egress(transparent) if e["proto"] == "transparent"]
    assert [(e["host"], e["decision"]) for e in ev] == [("evil.test", "deny"), ("evil.test", "deny")], ev
    assert ev[0]["reason"] == "the name sent differs from the name looked up", ev
    assert "not in the allowlist" in ev[1]["reason"], ev


def test_proxy_port_is_configurable(abx, workspace, upstream):  # noqa: F811
    cfg = allow_config(workspace, upstream)
    cfg["egress"]["proxy_port"] = 3999
    s = abx(cfg)
    j = run(s, "echo $HTTP_PROXY; curl -sS http://up.test:%d/p; (echo > /dev/tcp/127.0.0.1/3128) 2>/dev/null "
            "&& echo 3128-open || echo 3128-free" % upstream)
    assert j["stdout"] == "http://127.0.0.1:3999\nhello from up.test:%d /p\n3128-free\n" % upstream, j
    assert [e["proto"] for e in egress(s)] == ["http"]


DNS_TCP = r"""
import socket, struct
q = struct.pack(">HHHHHH", 0x1234, 0x0100, 1, 0, 0, 0) + b"\x02up\x04test\x00" + struct.pack(">HH", 1, 1)
s = socket.create_connection(("127.0.0.1", 53), timeout=5)
s.sendall(struct.pack(">H", len(q)) + q)
n = struct.unpack(">H", s.recv(2))[0]
a = s.recv(n)
print(hex(struct.unpack(">H", a[:2])[0]), a[3] & 15, ".".join(str(b) for b in a[-4:]))
"""


def test_dns_over_tcp(transparent):
    with open(os.path.join(transparent.workspace, "d.py"), "w") as f:
        f.write(DNS_TCP)
    j = run(transparent, "/usr/bin/python3 d.py; getent hosts up.test")
    out = j["stdout"].split("\n")
    assert out[0].startswith("0x1234 0 127.100.0."), j
    assert out[1].split()[0] == out[0].split()[2], j  # the same name keeps its address


def test_inject_on_a_transparent_connection(abx, workspace, tls_upstream, tmp_path):  # noqa: F811
    """Node 20's fetch ignores the proxy: its TLS is terminated by abx's CA on the
    transparent listener (NODE_EXTRA_CA_CERTS), the header is injected, the echo redacted."""
    import http.server
    import ssl
    import threading
    from test_egress_e2e import SEEN_AUTH, TLS_DIR, _Echo, config
    _, ca = tls_upstream
    ca_file = tmp_path / "upstream-ca.pem"
    ca_file.write_text(ca)
    srv = http.server.ThreadingHTTPServer(("127.0.0.1", 0), _Echo)
    ctx = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
    ctx.load_cert_chain(str(TLS_DIR[0] / "up.pem"), str(TLS_DIR[0] / "up.key"))
    srv.socket = ctx.wrap_socket(srv.socket, server_side=True)
    threading.Thread(target=srv.serve_forever, daemon=True).start()
    port = srv.server_address[1]
    secret = "t-s3cret-%d" % os.getpid()
    (tmp_path / "tok").write_text(secret)
    try:
        SEEN_AUTH.clear()
        c = config(workspace, net={"allow": ["up.test:%d" % port],
                                   "inject": [{"host": "up.test", "header": "Authorization",
                                               "value": "Bearer ${secret:TOK}"}]},
                   top={"egress": {"resolve": {"up.test": "127.0.0.1"}, "upstream_ca": str(ca_file)},
                        "secrets": {"TOK": {"file": str(tmp_path / "tok")}}})
        s = abx(c)
        j = run(s, NOPROXY + "node -e \"fetch('https://up.test:%d/n').then(r => r.text())"
                ".then(t => process.stdout.write(t), e => console.log('ERR', e.cause || e))\"; "
                "curl -sS --noproxy '*' https://up.test:%d/c" % (port, port))
        assert j["stdout"] == "auth=Bearer [REDACTED]\nauth=Bearer [REDACTED]\n", j
        assert SEEN_AUTH == ["Bearer " + secret] * 2, SEEN_AUTH
        ev = egress(s)
        assert [(e["proto"], e["decision"]) for e in ev] == [("transparent", "allow")] * 2, ev
    finally:
        srv.shutdown()
        srv.server_close()


UPGRADE = r"""
import socket, sys
s = socket.create_connection((socket.gethostbyname("up.test"), int(sys.argv[1])), timeout=5)
s.sendall(b"GET /ws HTTP/1.1\r\nHost: up.test:%s\r\nUpgrade: websocket\r\nConnection: Upgrade\r\n\r\n" % sys.argv[1].encode())
head = b""
while b"\r\n\r\n" not in head:
    head += s.recv(1)
print(head.split(b"\r\n")[0].decode())
for frame in (b"\x81\x02hi", b"GET /x HTTP/1.1\r\nHost: evil.test\r\n\r\n"):  # not HTTP any more: passed as it is
    s.sendall(frame)
    got = b""
    while len(got) < len(frame):
        got += s.recv(4096)
    print(got == frame)
"""


def test_upgrade_relays_the_frames_to_the_same_host(abx, workspace):
    """A WebSocket-style upgrade through the transparent listener: the 101 comes back and
    the bytes after it are relayed untouched, to the upstream the connection is bound to
    (a browser's ws: under net: {allow}, docs/browser.md)."""
    import socket
    import threading
    srv = socket.socket()
    srv.bind(("127.0.0.1", 0))
    srv.listen(4)
    port, seen = srv.getsockname()[1], []

    def serve():
        c, _ = srv.accept()
        head = b""
        while b"\r\n\r\n" not in head:
            head += c.recv(1)
        seen.append(head.split(b"\r\n")[0])
        c.sendall(b"HTTP/1.1 101 Switching Protocols\r\nUpgrade: websocket\r\nConnection: Upgrade\r\n\r\n")
        while True:
            k = c.recv(4096)
            if not k:
                break
            c.sendall(k)
        c.close()
    threading.Thread(target=serve, daemon=True).start()
    s = abx(allow_config(workspace, port))
    with open(os.path.join(workspace, "up.py"), "w") as f:
        f.write(UPGRADE)
    j = run(s, "/usr/bin/python3 up.py %d" % port)
    srv.close()
    assert j["stdout"].split("\n")[:3] == ["HTTP/1.1 101 Switching Protocols", "True", "True"], j
    assert seen == [b"GET /ws HTTP/1.1"], seen
    ev = [e for e in egress(s) if e["proto"] == "transparent"]
    assert [(e["host"], e["port"], e["decision"], e["path"]) for e in ev] == [("up.test", port, "allow", "/ws")], ev
