"""Issues 17 and 25: a process's network namespace has loopback up under every `net`
setting, and `net: {allow: [...]}` gives it abx's egress proxy as its only way out.

Upstream servers run on loopback in the test's (abx's) own namespace and are named through
`egress.resolve`; the process reaches them only through the proxy abx listens with inside
the process's namespace (docs/egress.md)."""
import http.server
import json
import os
import threading
import time

import pytest

from abxtest import ALICE_TOKEN, pgrep, run_abx, tokens, wait_for


def config(ws, net=None, top=None, cmds=("sh *",)):
    stmt = {"ops": ["commands.*", "process.*"], "principals": ["alice"],
            "paths": {"read": [ws + "/**"], "write": [ws + "/**"]},
            "commands": {"allow": list(cmds), "shell": True}}
    if net is not None:
        stmt["net"] = net
    c = {"workspace": ws, "terminal_listen": "off",
         "auth": {"tokens": tokens("alice")},
         "policy": {"allow": [{"ops": ["core.*", "ledger.*"], "principals": ["*"]}, stmt]}}
    c.update(top or {})
    return c


def run(s, command, timeout=60):
    r = s.post("/commands/run", token=ALICE_TOKEN, json_body={"command": command, "timeout": timeout},
               timeout=timeout + 30)
    assert r.status_code == 200, r.text
    return r.json()


LOOPBACK = ("cd $TMPDIR && (/usr/bin/python3 -m http.server 18765 --bind 127.0.0.1 >/dev/null 2>&1 &) && "
            "for i in $(seq 50); do /usr/bin/python3 -c \"import urllib.request as u; "
            "print(u.urlopen('http://127.0.0.1:18765/').status)\" 2>/dev/null && break; sleep 0.1; done")

DIRECT = ("/usr/bin/python3 -c \"import socket\n"
          "try:\n"
          "    socket.create_connection(('1.1.1.1', 80), timeout=3); print('CONNECTED')\n"
          "except OSError as e:\n"
          "    print('refused', e.errno)\"")


def test_net_false_has_loopback_but_no_way_out(abx, workspace):
    s = abx(config(workspace, net=False))
    j = run(s, LOOPBACK)
    assert j["stdout"].strip() == "200", j
    j = run(s, DIRECT)
    assert j["stdout"].startswith("refused"), j


# -- the allowlist -------------------------------------------------------------------------

class _Upstream(http.server.BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"

    def do_GET(self):
        body = ("hello from %s %s\n" % (self.headers.get("Host"), self.path)).encode()
        if self.path.startswith("/big"):
            body = b"x" * 100000
        self.send_response(200)
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def log_message(self, *a):
        pass


@pytest.fixture(scope="module")
def upstream():
    srv = http.server.ThreadingHTTPServer(("127.0.0.1", 0), _Upstream)
    t = threading.Thread(target=srv.serve_forever, daemon=True)
    t.start()
    yield srv.server_address[1]
    srv.shutdown()
    srv.server_close()


def allow_config(ws, port, extra_allow=(), resolve=None):
    res = {"up.test": "127.0.0.1", "private.test": "10.1.2.3"}
    res.update(resolve or {})
    return config(ws, net={"allow": ["up.test:%d" % port] + list(extra_allow)},
                  top={"egress": {"resolve": res}})


def ledger_events(s):
    r = s.post("/ops/ledger.timeline", token=ALICE_TOKEN, json_body={"limit": 500})
    assert r.status_code == 200, r.text
    return r.json()


TLS_DIR = []   # where tls_upstream keeps its CA and up.test's key and certificate


@pytest.fixture(scope="module")
def tls_upstream(tmp_path_factory):
    """An HTTPS upstream for up.test with a test CA made here (openssl); the CA file is
    copied into each workspace for curl --cacert and requests' verify."""
    import ssl
    import subprocess
    d = tmp_path_factory.mktemp("ca")
    TLS_DIR[:] = [d]
    ca_key, ca, key, csr, crt, ext = (str(d / n) for n in ("ca.key", "ca.pem", "up.key", "up.csr", "up.pem", "ext"))
    with open(ext, "w") as f:
        f.write("subjectAltName=DNS:up.test\n")
    for argv in (["openssl", "req", "-x509", "-newkey", "rsa:2048", "-nodes", "-keyout", ca_key, "-out", ca,
                  "-days", "2", "-subj", "/CN=abx egress test CA"],
                 ["openssl", "req", "-newkey", "rsa:2048", "-nodes", "-keyout", key, "-out", csr,
                  "-subj", "/CN=up.test"],
                 ["openssl", "x509", "-req", "-in", csr, "-CA", ca, "-CAkey", ca_key, "-CAcreateserial",
                  "-out", crt, "-days", "2", "-extfile", ext]):
        subprocess.run(argv, check=True, capture_output=True)
    srv = http.server.ThreadingHTTPServer(("127.0.0.1", 0), _Upstream)
    ctx = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
    ctx.load_cert_chain(crt, key)
    srv.socket = ctx.wrap_socket(srv.socket, server_side=True)
    t = threading.Thread(target=srv.serve_forever, daemon=True)
    t.start()
    yield srv.server_address[1], open(ca).read()
    srv.shutdown()
    srv.server_close()


@pytest.fixture
def proxied(abx, workspace, upstream, tls_upstream):
    """A server whose statement allows up.test on the HTTP and HTTPS upstreams' ports and
    *.wild.test, with evil.wild.test pinned to loopback."""
    tport, ca = tls_upstream
    with open(os.path.join(workspace, "ca.pem"), "w") as f:
        f.write(ca)
    s = abx(allow_config(workspace, upstream, extra_allow=["up.test:%d" % tport, "*.wild.test:%d" % upstream],
                         resolve={"evil.wild.test": "127.0.0.1"}))
    s.ports = (upstream, tport)
    return s


def test_allowed_host_through_the_proxy(abx, workspace, upstream):
    s = abx(allow_config(workspace, upstream))
    j = run(s, "curl -sS http://up.test:%d/hello; echo; env | grep -i _proxy | sort" % upstream)
    assert j["stdout"].startswith("hello from up.test:%d /hello" % upstream), j
    assert "ALL_PROXY=socks5h://127.0.0.1:3128" in j["stdout"], j
    ev = [e for e in ledger_events(s)["events"] if e["kind"] == "egress"]
    assert len(ev) == 1, ev
    d = ev[0]["data"]
    assert (d["host"], d["port"], d["addr"], d["decision"], d["method"], d["path"]) == \
        ("up.test", upstream, "127.0.0.1", "allow", "GET", "/hello"), d
    assert d["bytes_down"] > len("hello from up.test") and d["bytes_up"] > 0 and "duration_ms" in d, d
    assert d["rule"] == "up.test:%d" % upstream


def test_https_connect_and_socks5h(proxied):
    hp, tp = proxied.ports
    j = run(proxied, "curl -sS --cacert ca.pem https://up.test:%d/tls; "
                     "curl -sS --proxy \"$ALL_PROXY\" http://up.test:%d/socks; "
                     "curl -sS --proxy \"$ALL_PROXY\" --cacert ca.pem https://up.test:%d/socks-tls" % (tp, hp, tp))
    assert j["stdout"] == ("hello from up.test:%d /tls\nhello from up.test:%d /socks\n"
                           "hello from up.test:%d /socks-tls\n" % (tp, hp, tp)), j
    ev = [e["data"] for e in ledger_events(proxied)["events"] if e["kind"] == "egress"]
    assert [e["proto"] for e in ev] == ["connect", "socks5", "socks5"], ev
    assert all(e["decision"] == "allow" and e["bytes_down"] > 1000 for e in ev[::2]), ev  # TLS handshakes
    assert "path" not in ev[0], ev  # a tunnel's content is not visible


def test_python_requests(proxied):
    hp, tp = proxied.ports
    code = ("import requests\n"
            "print(requests.get('http://up.test:%d/req').text, end='')\n"
            "print(requests.get('https://up.test:%d/req-tls', verify='ca.pem').text, end='')\n" % (hp, tp))
    with open(os.path.join(proxied.workspace, "req.py"), "w") as f:
        f.write(code)
    j = run(proxied, "/usr/bin/python3 req.py")
    assert j["stdout"] == "hello from up.test:%d /req\nhello from up.test:%d /req-tls\n" % (hp, tp), j


def test_unlisted_host_refused_with_a_clear_message(proxied):
    hp, _ = proxied.ports
    j = run(proxied, "curl -sS -w ' %%{http_code}' http://evil.test:%d/x; echo; "
                     "curl -sS https://evil.test/ 2>&1; echo; "
                     "curl -sS --proxy \"$ALL_PROXY\" http://evil.test/ 2>&1" % hp)
    lines = [ln for ln in j["stdout"].split("\n") if ln]
    assert lines[:2] == ["abx: egress to evil.test denied by policy", " 403"], j
    assert "response 403" in lines[2], j                # CONNECT refused with 403
    assert "SOCKS5 connection to evil.test. (2)" in lines[3], j  # SOCKS: "not allowed by ruleset"
    ev = [e["data"] for e in ledger_events(proxied)["events"] if e["kind"] == "egress"]
    assert len(ev) == 3 and all(e["decision"] == "deny" and e["host"] == "evil.test" for e in ev), ev
    r = proxied.get("/metrics", token=ALICE_TOKEN)
    assert 'abx_egress_connections_total{decision="deny"} 3' in r.text, r.text


def test_wildcard_never_reaches_loopback(proxied):
    """A name a wildcard admits that resolves to loopback (DNS rebinding) is refused; the
    same address named exactly (up.test) is reached."""
    hp, _ = proxied.ports
    j = run(proxied, "curl -sS http://evil.wild.test:%d/; echo; curl -sS http://up.test:%d/ok" % (hp, hp))
    assert j["stdout"] == "abx: egress to evil.wild.test denied by policy\n\nhello from up.test:%d /ok\n" % hp, j
    ev = [e["data"] for e in ledger_events(proxied)["events"] if e["kind"] == "egress"]
    assert "loopback" in ev[0]["reason"], ev


RAW = r"""
import socket, ssl, sys
hp, tp = int(sys.argv[1]), int(sys.argv[2])
def proxy():
    return socket.create_connection(("127.0.0.1", 3128), timeout=5)
def read_response(s):
    data = b""
    while b"\r\n\r\n" not in data:
        data += s.recv(4096)
    head, _, body = data.partition(b"\r\n\r\n")
    n = int([l.split(b":")[1] for l in head.split(b"\r\n") if l.lower().startswith(b"content-length")][0])
    while len(body) < n:
        body += s.recv(4096)
    return head.split(b"\r\n")[0].decode(), body.decode()
# an absolute-form request to another host on a kept-alive connection
s = proxy()
s.sendall(b"GET http://up.test:%d/one HTTP/1.1\r\nHost: up.test:%d\r\n\r\n" % (hp, hp))
print(read_response(s))
s.sendall(b"GET http://evil.test:%d/two HTTP/1.1\r\nHost: evil.test:%d\r\n\r\n" % (hp, hp))
try:
    print(read_response(s))
except (OSError, IndexError) as e:
    print("closed", type(e).__name__)
# CONNECT to up.test, then a ClientHello naming another server
s = proxy()
s.sendall(b"CONNECT up.test:%d HTTP/1.1\r\nHost: up.test:%d\r\n\r\n" % (tp, tp))
print(s.recv(4096).split(b"\r\n")[0].decode())
ctx = ssl.create_default_context(); ctx.check_hostname = False; ctx.verify_mode = ssl.CERT_NONE
try:
    t = ctx.wrap_socket(s, server_hostname="evil.test")
    print("handshake", t.version())
except (OSError, ssl.SSLError) as e:
    print("sni-mismatch closed")
"""


def test_bypasses_refused(proxied):
    hp, tp = proxied.ports
    with open(os.path.join(proxied.workspace, "raw.py"), "w") as f:
        f.write(RAW)
    j = run(proxied, "/usr/bin/python3 raw.py %d %d" % (hp, tp))
    out = j["stdout"].split("\n")
    assert out[0] == "('HTTP/1.1 200 OK', 'hello from up.test:%d /one\\n')" % hp, j
    assert "403" in out[1] and "abx: egress to evil.test denied by policy" in out[1], j
    assert out[2].startswith("HTTP/1.1 200"), j
    assert out[3] == "sni-mismatch closed", j


DIRECT_ALL = r"""
import socket, sys, errno
hp = int(sys.argv[1])
for addr in (("1.1.1.1", 80), ("127.0.0.1", hp + 1 if hp < 65535 else hp - 1), ("10.1.2.3", 80)):
    try:
        socket.create_connection(addr, timeout=3); print("CONNECTED", addr)
    except OSError as e:
        print("tcp refused", errno.errorcode.get(e.errno, e.errno))
u = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
try:
    u.sendto(b"x", ("1.1.1.1", 53)); print("UDP SENT")
except OSError as e:
    print("udp refused", errno.errorcode.get(e.errno, e.errno))
try:
    socket.getaddrinfo("evil.test", 80); print("RESOLVED")
except OSError as e:
    print("dns refused")
"""


def test_direct_tcp_udp_and_dns_fail(proxied):
    hp, _ = proxied.ports
    with open(os.path.join(proxied.workspace, "direct.py"), "w") as f:
        f.write(DIRECT_ALL)
    j = run(proxied, "/usr/bin/python3 direct.py %d; (echo x > /dev/udp/1.1.1.1/53) 2>/dev/null && echo BASH-UDP "
                     "|| echo bash-udp refused" % hp)
    out = j["stdout"].split("\n")
    assert out[0] == "tcp refused ENETUNREACH", j
    assert out[1] == "tcp refused ECONNREFUSED", j  # the process's own loopback: nothing listens there
    # (the allowlist's own ports have transparent listeners: test_egress_transparent.py)
    assert out[2] == "tcp refused ENETUNREACH", j
    assert out[3] == "udp refused ENETUNREACH", j
    assert out[4] == "dns refused", j  # an unlisted name: NXDOMAIN from the process's resolver
    assert out[5] == "bash-udp refused", j


def test_kill_9_of_abx_during_a_transfer_leaves_nothing(abx, workspace, upstream):
    s = abx(allow_config(workspace, upstream))
    mark = "egress-kill-%d" % os.getpid()
    cmd = ("while :; do curl -s --limit-rate 20k http://up.test:%d/big -o /dev/null; done; : %s" % (upstream, mark))
    r = s.post("/commands/run", token=ALICE_TOKEN, json_body={"command": cmd, "timeout": 0.5}, timeout=30)
    assert r.status_code == 200 and r.json()["status"] == "running", r.text
    assert wait_for(lambda: pgrep("curl -s --limit-rate 20k"), timeout=5)
    s.kill()
    assert wait_for(lambda: not pgrep(mark) and not pgrep("curl -s --limit-rate 20k"), timeout=10), \
        "the process or its curl outlived abx"


# -- check-config and explain --------------------------------------------------------------


def _write(tmp_path, cfg):
    p = tmp_path / "abx.yaml"
    p.write_text(json.dumps(cfg))  # JSON is YAML, without anchors for shared values
    return str(p)


@pytest.mark.parametrize("net,top,want", [
    ({"allow": ["pypi.org", "*.com"]}, None, "warning: config.broad_egress: allow[1]: net.allow '*.com'"),
    ({"allow": ["*"]}, None, "warning: config.broad_egress"),
    ({"allow": ["ex ample"]}, None, "error: config.bad_value: allow[1]: net.allow 'ex ample': bad host name"),
    ({"allow": "pypi.org"}, None, "error: config.bad_value: allow[1]: 'net' needs 'allow'"),
    ({"allow": [7]}, None, "error: config.bad_value: allow[1]: net.allow entries are strings"),
    ({"deny": ["x"]}, None, "error: config.unknown_key: unknown key 'deny' in net"),
    ("yes", None, "error: config.bad_value: 'net' must be a boolean or {allow: [hosts]}"),
    (True, {"egress": {"resolve": {"a.test": "not-an-ip"}}}, "error: config.bad_value: egress.resolve 'a.test'"),
    (True, {"egress": {"resolve": {"a.test": []}}}, "an address or a list of them"),
    (True, {"egress": {"resolve": ["a.test"]}}, "egress.resolve must map host names to addresses"),
    (True, {"egress": {"proxy": 1}}, "error: config.unknown_key: unknown key 'proxy' in egress"),
    (True, {"egress": []}, "error: config.invalid"),
])
def test_check_config_net(tmp_path, workspace, net, top, want):
    r = run_abx(["check-config", _write(tmp_path, config(workspace, net=net, top=top))])
    assert want in r.stdout + r.stderr, r.stdout + r.stderr
    assert r.returncode == (0 if "warning" in want else 1), r.stdout + r.stderr


def test_explain_net_host(tmp_path, workspace):
    cfg = config(workspace, net={"allow": ["pypi.org", "*.wild.test"]},
                 top={"egress": {"resolve": {"evil.wild.test": "10.0.0.1", "pypi.org": "151.101.0.223"}}})
    path = _write(tmp_path, cfg)
    base = ["explain", "--config", path, "--principal", "alice", "--op", "commands.run",
            "--arg", "command=sh -c 'curl https://pypi.org'"]
    r = run_abx(base + ["--net-host", "pypi.org"])
    assert "net: allowlist of allow[1]\nnet host pypi.org:443: allow by pypi.org" in r.stdout, r.stdout
    r = run_abx(base + ["--net-host", "evil.test:80"])
    assert "net host evil.test:80: deny — evil.test is not in the allowlist" in r.stdout, r.stdout
    r = run_abx(base + ["--net-host", "evil.wild.test", "--json"])
    nh = json.loads(r.stdout)["net_host"]
    assert (nh["decision"], nh["rule"]) == ("deny", "*.wild.test"), nh
    assert "10.0.0.1 (private)" in nh["reason"], nh
    cfg["policy"]["allow"][1]["net"] = False
    r = run_abx(["explain", "--config", _write(tmp_path, cfg)] + base[3:] + ["--net-host", "pypi.org"])
    assert "net: none\nnet host pypi.org:443: deny — no network (net: false)" in r.stdout, r.stdout


def test_process_start_gets_the_proxy_and_records_in_its_group(abx, workspace, upstream):
    s = abx(allow_config(workspace, upstream))
    r = s.post("/process", token=ALICE_TOKEN,
               json_body={"command": "sh -c 'curl -sS http://up.test:%d/bg; curl -sS http://evil.test/'" % upstream})
    assert r.status_code == 200, r.text
    pid = r.json()["pid"]
    assert wait_for(lambda: s.get("/process/%d" % pid, token=ALICE_TOKEN).json().get("running") is False)
    out = s.get("/process/%d/output" % pid, token=ALICE_TOKEN).json()
    assert out["stdout"] == "hello from up.test:%d /bg\nabx: egress to evil.test denied by policy\n" % upstream, out
    # process.start answered long ago: its group's egress events are committed as they come
    assert wait_for(lambda: len([e for e in ledger_events(s)["events"] if e["kind"] == "egress"]) == 2)
    ev = [e for e in ledger_events(s)["events"] if e["kind"] == "egress"]
    assert [e["data"]["decision"] for e in ev] == ["allow", "deny"], ev
    started = [e for e in ledger_events(s)["events"] if e["op"] == "process.start"]
    assert {e["group_id"] for e in ev} == {started[0]["group_id"]}, (ev, started)


def _git_backend(root):
    """A WSGI app running `git http-backend` (smart HTTP) over the repositories in root."""
    import subprocess

    def app(environ, start_response):
        n = int(environ.get("CONTENT_LENGTH") or 0)
        body = environ["wsgi.input"].read(n) if n else b""
        env = {"GIT_PROJECT_ROOT": root, "GIT_HTTP_EXPORT_ALL": "1", "PATH": "/usr/bin:/bin"}
        for k in ("REQUEST_METHOD", "PATH_INFO", "QUERY_STRING", "CONTENT_TYPE", "REMOTE_ADDR"):
            env[k] = environ.get(k, "")
        env["CONTENT_LENGTH"] = str(len(body))
        if environ.get("HTTP_CONTENT_ENCODING"):
            env["HTTP_CONTENT_ENCODING"] = environ["HTTP_CONTENT_ENCODING"]
        out = subprocess.run(["git", "http-backend"], input=body, env=env, capture_output=True).stdout
        head, _, rest = out.partition(b"\r\n\r\n")
        status, headers = "200 OK", []
        for line in head.decode().split("\r\n"):
            k, _, v = line.partition(":")
            if k.lower() == "status":
                status = v.strip()
            elif k:
                headers.append((k, v.strip()))
        start_response(status, headers)
        return [rest]
    return app


@pytest.fixture(scope="module")
def git_upstream(tmp_path_factory):
    import subprocess
    from wsgiref.simple_server import WSGIRequestHandler, WSGIServer, make_server
    import socketserver
    root = tmp_path_factory.mktemp("git")
    src = root / "src"
    git = ["git", "-c", "user.name=t", "-c", "user.email=t@t", "-c", "init.defaultBranch=main"]
    subprocess.run(git + ["init", "-q", str(src)], check=True)
    (src / "README").write_text("cloned through the egress proxy\n")
    subprocess.run(git + ["-C", str(src), "add", "README"], check=True)
    subprocess.run(git + ["-C", str(src), "commit", "-qm", "one"], check=True)
    subprocess.run(["git", "clone", "-q", "--bare", str(src), str(root / "repo.git")], check=True)

    class Threaded(socketserver.ThreadingMixIn, WSGIServer):
        daemon_threads = True

    class Quiet(WSGIRequestHandler):
        def log_message(self, *a):
            pass
    srv = make_server("127.0.0.1", 0, _git_backend(str(root)), server_class=Threaded, handler_class=Quiet)
    t = threading.Thread(target=srv.serve_forever, daemon=True)
    t.start()
    yield srv.server_address[1]
    srv.shutdown()
    srv.server_close()


def test_git_clone_over_http(abx, workspace, upstream, git_upstream):
    s = abx(allow_config(workspace, upstream, extra_allow=["git.test:%d" % git_upstream],
                         resolve={"git.test": "127.0.0.1"}))
    j = run(s, "cd $TMPDIR && git clone -q http://git.test:%d/repo.git r && cat r/README" % git_upstream)
    assert j["exit_code"] == 0 and j["stdout"] == "cloned through the egress proxy\n", j
    ev = [e["data"] for e in ledger_events(s)["events"] if e["kind"] == "egress"]
    assert ev and all(e["host"] == "git.test" and e["decision"] == "allow" for e in ev), ev
    assert any(e.get("path") == "/repo.git/git-upload-pack" and e["method"] == "POST" for e in ev), ev


def _wheel(path):
    """A minimal pure-Python wheel, abxdemo 1.0."""
    import base64
    import hashlib
    import zipfile
    files = {"abxdemo/__init__.py": b"VALUE = 42\n",
             "abxdemo-1.0.dist-info/METADATA": b"Metadata-Version: 2.1\nName: abxdemo\nVersion: 1.0\n",
             "abxdemo-1.0.dist-info/WHEEL": b"Wheel-Version: 1.0\nGenerator: abx-test\nRoot-Is-Purelib: true\n"
                                            b"Tag: py3-none-any\n"}
    record = ""
    for name, data in files.items():
        h = base64.urlsafe_b64encode(hashlib.sha256(data).digest()).rstrip(b"=").decode()
        record += "%s,sha256=%s,%d\n" % (name, h, len(data))
    record += "abxdemo-1.0.dist-info/RECORD,,\n"
    with zipfile.ZipFile(path, "w") as z:
        for name, data in files.items():
            z.writestr(name, data)
        z.writestr("abxdemo-1.0.dist-info/RECORD", record)


@pytest.fixture(scope="module")
def pip_index(tmp_path_factory):
    import functools
    root = tmp_path_factory.mktemp("index")
    os.makedirs(root / "simple" / "abxdemo")
    _wheel(str(root / "simple" / "abxdemo" / "abxdemo-1.0-py3-none-any.whl"))
    (root / "simple" / "abxdemo" / "index.html").write_text(
        '<html><body><a href="abxdemo-1.0-py3-none-any.whl">abxdemo-1.0-py3-none-any.whl</a></body></html>')

    class Quiet(http.server.SimpleHTTPRequestHandler):
        def log_message(self, *a):
            pass
    srv = http.server.ThreadingHTTPServer(("127.0.0.1", 0), functools.partial(Quiet, directory=str(root)))
    t = threading.Thread(target=srv.serve_forever, daemon=True)
    t.start()
    yield srv.server_address[1]
    srv.shutdown()
    srv.server_close()


def test_pip_download_from_a_simple_index(abx, workspace, upstream, pip_index):
    s = abx(allow_config(workspace, upstream, extra_allow=["pypi.test:%d" % pip_index],
                         resolve={"pypi.test": "127.0.0.1"}))
    j = run(s, "cd $TMPDIR && /usr/bin/python3 -m pip download -q --no-deps --disable-pip-version-check "
               "--no-cache-dir --trusted-host pypi.test:%d --index-url http://pypi.test:%d/simple/ -d dl abxdemo "
               "&& ls dl" % (pip_index, pip_index))
    assert j["exit_code"] == 0 and j["stdout"] == "abxdemo-1.0-py3-none-any.whl\n", (j["stdout"], j["stderr"])
    ev = [e["data"] for e in ledger_events(s)["events"] if e["kind"] == "egress"]
    assert any(e.get("path") == "/simple/abxdemo/abxdemo-1.0-py3-none-any.whl" for e in ev), ev


# docs/policy.md rule 6: the process gets the network (and roots) of the first admitting
# statement that grants one (net: true or an allowlist), else of the first admitting one
@pytest.mark.parametrize("nets,want", [
    ([True, {"allow": ["pypi.org"]}], "host"),
    ([{"allow": ["pypi.org"]}, True], {"allowlist": "allow[1]"}),
    ([{"allow": ["pypi.org"]}, {"allow": ["x.test"]}], {"allowlist": "allow[1]"}),
    ([{"allow": ["pypi.org"]}, False], {"allowlist": "allow[1]"}),
    ([None, {"allow": ["pypi.org"]}], {"allowlist": "allow[2]"}),
    ([False, True], "host"),
    ([False, None], "none"),
    ([True, True], "host"),
])
def test_first_statement_granting_a_network_decides_it(tmp_path, workspace, nets, want):
    cfg = config(workspace)
    base = cfg["policy"]["allow"][1]
    cfg["policy"]["allow"] = cfg["policy"]["allow"][:1]
    for n in nets:
        st = dict(base)
        if n is not None:
            st["net"] = n
        cfg["policy"]["allow"].append(st)
    r = run_abx(["explain", "--config", _write(tmp_path, cfg), "--principal", "alice", "--op", "commands.run",
                 "--arg", "command=sh -c true", "--json"])
    assert json.loads(r.stdout)["net"] == want, r.stdout


def test_terminal_gets_the_proxy(abx, workspace, upstream):
    import websocket
    cfg = allow_config(workspace, upstream)
    st = cfg["policy"]["allow"][1]
    st["ops"] = ["terminal.*"]
    st["commands"] = {"allow": ["bash *"]}
    cfg["terminal_listen"] = "127.0.0.1:0"
    s = abx(cfg)
    r = s.post("/terminal", token=ALICE_TOKEN, json_body={"command": "bash --norc --noprofile"})
    assert r.status_code == 200, r.text
    j = r.json()
    ws = websocket.create_connection(j["ws_url"], header=["Authorization: Bearer " + ALICE_TOKEN], timeout=5,
                                     suppress_origin=True)
    try:
        ws.send_binary(b"curl -sS http://up.test:%d/tty; echo END$((1+1))\n" % upstream)
        buf, deadline = b"", time.time() + 10
        while b"END2" not in buf and time.time() < deadline:
            op, data = ws.recv_data()
            buf += data
        assert b"hello from up.test:%d /tty" % upstream in buf, buf
    finally:
        ws.close()
        s.request("DELETE", "/terminal/%d" % j["id"], token=ALICE_TOKEN)


def test_kernel_gets_the_proxy(abx, workspace, upstream):
    cfg = allow_config(workspace, upstream)
    st = cfg["policy"]["allow"][1]
    st["ops"] = ["kernels.*"]
    st["languages"] = ["python"]
    del st["commands"]
    s = abx(cfg)
    r = s.op("kernels.create", {"language": "python"}, token=ALICE_TOKEN)
    assert r.status_code == 200, r.text
    kid = r.json()["id"]
    code = ("import urllib.request\n"
            "print(urllib.request.urlopen('http://up.test:%d/kernel').read().decode(), end='')\n"
            "try:\n"
            "    urllib.request.urlopen('http://evil.test/')\n"
            "except Exception as e:\n"
            "    print(e.code, e.read().decode(), end='')\n" % upstream)
    r = s.post("/ops/kernels.execute", token=ALICE_TOKEN, json_body={"id": kid, "code": code}, timeout=120)
    assert r.status_code == 200, r.text
    out = "".join(r.json()["logs"]["stdout"])
    assert out == "hello from up.test:%d /kernel\n403 abx: egress to evil.test denied by policy\n" % upstream, r.json()


def test_listed_name_whose_dns_answer_is_loopback_is_refused(abx, workspace, upstream):
    """localhost is listed by name but not pinned: the system resolver's answer (127.0.0.1,
    from /etc/hosts) is loopback, which only a literal entry (or egress.resolve) reaches."""
    s = abx(allow_config(workspace, upstream, extra_allow=["localhost:%d" % upstream]))
    curl = "curl -sS --noproxy '' -x \"$HTTP_PROXY\" "
    j = run(s, curl + "http://localhost:%d/a; echo; " % upstream + curl + "http://127.0.0.1:%d/b" % upstream)
    assert j["stdout"] == ("abx: egress to localhost denied by policy\n\n"
                           "abx: egress to 127.0.0.1 denied by policy\n"), j
    ev = [e["data"] for e in ledger_events(s)["events"] if e["kind"] == "egress"]
    assert "127.0.0.1 (loopback)" in ev[0]["reason"] and ev[0]["rule"] == "localhost:%d" % upstream, ev
    # named literally, the same address is reached
    s2 = abx(allow_config(workspace, upstream, extra_allow=["127.0.0.1:%d" % upstream]))
    j = run(s2, curl + "http://127.0.0.1:%d/b" % upstream)
    assert j["stdout"] == "hello from 127.0.0.1:%d /b\n" % upstream, j


def test_header_values_and_queries_never_recorded(abx, workspace, upstream):
    s = abx(allow_config(workspace, upstream))
    j = run(s, "curl -sS -H 'Authorization: Bearer hdr-secret-4711' -H 'Cookie: c=cookie-secret-4712' "
               "'http://up.test:%d/q?token=query-secret-4713'" % upstream)
    assert j["stdout"].startswith("hello from up.test:%d /q?token=" % upstream), j
    ev = [e["data"] for e in ledger_events(s)["events"] if e["kind"] == "egress"]
    assert len(ev) == 1 and ev[0]["path"] == "/q", ev
    for secret in ("hdr-secret-4711", "cookie-secret-4712", "query-secret-4713"):
        # the call's own arguments are the command line: only the egress events must not have them
        assert secret not in json.dumps(ev), ev


# -- credential injection, end to end (net.inject with secrets) ------------------------------

SEEN_AUTH = []


class _Echo(_Upstream):
    """Records the Authorization header it got and echoes it back in the body."""

    def do_GET(self):
        got = self.headers.get("Authorization") or ""
        SEEN_AUTH.append(got)
        body = ("auth=%s\n" % got).encode()
        self.send_response(200)
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)


def test_inject_reaches_upstream_and_never_the_process(abx, workspace, tls_upstream, tmp_path):
    import ssl
    _, ca = tls_upstream
    ca_file = tmp_path / "upstream-ca.pem"
    ca_file.write_text(ca)
    crt_dir = TLS_DIR[0]   # tls_upstream's certificate is for up.test: the echo handler uses it
    srv = http.server.ThreadingHTTPServer(("127.0.0.1", 0), _Echo)
    ctx = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
    ctx.load_cert_chain(str(crt_dir / "up.pem"), str(crt_dir / "up.key"))
    srv.socket = ctx.wrap_socket(srv.socket, server_side=True)
    threading.Thread(target=srv.serve_forever, daemon=True).start()
    port = srv.server_address[1]
    secret = "s3cret-%d" % os.getpid()
    sfile = tmp_path / "tok"
    sfile.write_text(secret)
    try:
        SEEN_AUTH.clear()
        c = config(workspace, net={"allow": ["up.test:%d" % port],
                                   "inject": [{"host": "up.test", "header": "Authorization",
                                               "value": "Bearer ${secret:TOK}"}]},
                   top={"egress": {"resolve": {"up.test": "127.0.0.1"}, "upstream_ca": str(ca_file)},
                        "secrets": {"TOK": {"file": str(sfile)}}})
        s = abx(c)
        # no --cacert: the process trusts abx's CA through CURL_CA_BUNDLE / SSL_CERT_FILE
        j = run(s, "curl -sS --max-time 20 https://up.test:%d/x; echo; env; "
                   "/usr/bin/python3 -c \"import requests; print(requests.get('https://up.test:%d/y').text)\""
                % (port, port))
        out = j["stdout"]
        assert "auth=Bearer [REDACTED]" in out, (out, j.get("stderr"))
        assert out.count("auth=Bearer [REDACTED]") == 2, j   # curl and requests both
        assert secret not in out and secret not in j.get("stderr", ""), j
        assert "SSL_CERT_FILE=" in out and "NODE_EXTRA_CA_CERTS=" in out, out
        assert SEEN_AUTH and all(a == "Bearer " + secret for a in SEEN_AUTH), SEEN_AUTH
        # nothing the process can read holds the secret: its workspace, and the ledger
        for root, _, files in os.walk(workspace):
            for f in files:
                with open(os.path.join(root, f), "rb") as fh:
                    assert secret.encode() not in fh.read(), f
        ev = json.dumps(ledger_events(s))
        assert secret not in ev
        assert "up.test" in ev   # the connection itself is recorded
    finally:
        srv.shutdown()
        srv.server_close()
