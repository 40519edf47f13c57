"""The request pipeline, step by step: target/Host/Origin/header checks (0), body limits and
content type (1), authentication before routing (3), the one 404 (4-5), 405, argument
validation (6), and the headers every reply carries."""
import re
import socket
import time

import pytest
import requests

from abxtest import ALICE_TOKEN, BOB_TOKEN, assert_error, error_code, multi_config


# -- headers every reply carries --------------------------------------------------------

def _check_server_headers(resp, expected):
    h = {k.lower(): v for k, v in resp.headers.items()}
    assert h.get("x-abx-server") == expected, h
    assert h.get("x-request-id"), h
    return h["x-request-id"]


def test_every_response_has_server_and_request_id_headers(server, token):
    health = server.get("/health")
    assert health.status_code == 200
    version = health.json()["version"]
    cat = server.get("/ops", token=token).json()["catalog_version"]
    expected = "abx/%s catalog=%d" % (version, cat)
    assert re.match(r"^abx/\S+ catalog=\d+$", expected)
    ids = []
    ids.append(_check_server_headers(health, expected))
    ids.append(_check_server_headers(server.get("/capabilities"), expected))             # 401
    ids.append(_check_server_headers(server.get("/nope", token=token), expected))        # 404
    ids.append(_check_server_headers(server.post("/files/read", token=token), expected))  # 405
    ids.append(_check_server_headers(server.get("/files/stat", token=token), expected))  # 400
    ids.append(_check_server_headers(
        server.get("/files/stat", token=token, params={"path": "/etc/passwd"}), expected))  # 403
    raw = server.raw_request("GET", "//health")                                           # step 0
    assert raw.status == 400
    ids.append(_check_server_headers(raw, expected))
    assert len(set(ids)) == len(ids), "request ids must be unique: %s" % ids


def test_error_body_shape(server, token):
    r = server.get("/nope", token=token)
    j = assert_error(r, 404, "op.not_enabled")
    assert set(j) == {"error"}
    assert r.headers["Content-Type"].startswith("application/json")


# -- step 0: the raw target -------------------------------------------------------------

BAD_TARGETS = [
    "//health",
    "/files//list",
    "/./health",
    "/files/./list",
    "/files/../health",
    "/files/..",
    "/health/..",
    "/files%2flist",
    "/files%2Flist",
    "/%2e%2e/health",
    "/%2E%2E/health",
    "/files/%2e",
    "/files/%2E%2e/x",
    "/files%5clist",
    "/files%5Clist",
    "/files\\list",
    "/hea\x01lth",
    "/health\x1f",
    "/health\x7f",
    "/files/list?path=\x01",
]

# libmicrohttpd hands abx the request target cut at a NUL byte, so "/hea\0lth" arrives
# as "/hea": abx cannot see the NUL (documented in docs/security.md). What must hold is
# that nothing after the NUL is ever routed: it is never /health.
def test_nul_in_target_never_reaches_the_route_after_it(server):
    r = server.raw_request("GET", "/hea\x00lth")
    assert r.status_code != 200
    assert b'"status":"ok"' not in r.raw


@pytest.mark.parametrize("target", BAD_TARGETS, ids=[repr(t) for t in BAD_TARGETS])
def test_bad_target_is_400_before_auth(server, target):
    # no credentials: step 0 must answer before step 3 (401)
    r = server.raw_request("GET", target)
    assert_error(r, 400, "request.bad_target")


def test_bad_target_with_credentials(server, token):
    r = server.raw_request("GET", "/files/../files/list?path=.", token=token)
    assert_error(r, 400, "request.bad_target")


def test_good_raw_target_passes(server, token):
    r = server.raw_request("GET", "/files/stat?path=a.txt", token=token)
    assert r.status == 200, r
    assert r.json()["exists"] is True


# -- step 0: Host and Origin --------------------------------------------------------------

@pytest.mark.parametrize("host", ["evil.example.com", "evil.example.com:80", "127.0.0.1.evil.example",
                                  "127.evil.example", "localhost.evil.example", "0.0.0.0",
                                  # near misses of the "127.0.0.1[:port]" fast path
                                  "127.0.0.1evil.example", "127.0.0.1@evil.example", "127.0.0.1.evil:80",
                                  "127.0.0.1x:80"])
def test_host_not_loopback_denied(server, host):
    r = server.raw_request("GET", "/health", host=host)
    assert_error(r, 403, "request.host_denied")


def test_host_denied_before_auth(server):
    r = server.raw_request("GET", "/capabilities", host="evil.example.com")
    assert_error(r, 403, "request.host_denied")


@pytest.mark.parametrize("fmt", ["127.0.0.1:%d", "localhost:%d", "[::1]:%d", "127.0.0.1", "localhost",
                                 "127.0.0.10:%d", "127.0.0.1:"])
def test_loopback_hosts_accepted(server, fmt):
    host = fmt % server.port if "%d" in fmt else fmt
    r = server.raw_request("GET", "/health", host=host)
    assert r.status == 200, r


def test_allowed_hosts(abx):
    s = abx(multi_config(top="allowed_hosts: [sandbox.internal]\n"))
    ok = s.raw_request("GET", "/capabilities", host="sandbox.internal:%d" % s.port, token=ALICE_TOKEN)
    assert ok.status == 200, ok
    assert s.raw_request("GET", "/health", host="sandbox.internal").status == 200
    assert_error(s.raw_request("GET", "/health", host="other.internal"), 403, "request.host_denied")
    # loopback keeps working
    assert s.raw_request("GET", "/health", host="127.0.0.1:%d" % s.port).status == 200


def test_origin_denied_by_default(server, token):
    assert_error(server.get("/health", headers={"Origin": "http://evil.example"}), 403, "request.origin_denied")
    assert_error(server.get("/capabilities", token=token, headers={"Origin": "http://evil.example"}),
                 403, "request.origin_denied")
    # before authentication
    assert_error(server.get("/capabilities", headers={"Origin": "http://evil.example"}),
                 403, "request.origin_denied")
    # no Origin: fine
    assert server.get("/capabilities", token=token).status_code == 200


def test_allowed_origins(abx):
    s = abx(multi_config(top='allowed_origins: ["http://app.example"]\n'))
    r = s.get("/capabilities", token=ALICE_TOKEN, headers={"Origin": "http://app.example"})
    assert r.status_code == 200, r.text
    assert_error(s.get("/capabilities", token=ALICE_TOKEN, headers={"Origin": "http://evil.example"}),
                 403, "request.origin_denied")


# -- step 0: ambiguous framing and malformed headers --------------------------------------

BAD_HEADERS = {
    "duplicate_content_length_same": (["Content-Type: application/json", "Content-Length: 2",
                                       "Content-Length: 2"], b"{}"),
    "duplicate_content_length_diff": (["Content-Type: application/json", "Content-Length: 2",
                                       "Content-Length: 5"], b"{}"),
    "content_length_and_chunked": (["Content-Type: application/json", "Content-Length: 2",
                                    "Transfer-Encoding: chunked"], b"2\r\n{}\r\n0\r\n\r\n"),
    "te_gzip": (["Content-Type: application/json", "Transfer-Encoding: gzip"], b"2\r\n{}\r\n0\r\n\r\n"),
    "te_chunkedx": (["Content-Type: application/json", "Transfer-Encoding: chunkedx"], b"2\r\n{}\r\n0\r\n\r\n"),
    "te_gzip_chunked": (["Content-Type: application/json", "Transfer-Encoding: gzip, chunked"],
                        b"2\r\n{}\r\n0\r\n\r\n"),
    "space_before_colon": (["Content-Type: application/json", "Content-Length: 2", "X-Bad : 1"], b"{}"),
}


@pytest.mark.parametrize("case", sorted(BAD_HEADERS))
def test_bad_header_is_400(server, token, case):
    headers, body = BAD_HEADERS[case]
    r = server.raw_request("POST", "/ops/core.health", headers=headers, body=body, token=token)
    assert_error(r, 400, "request.bad_header")


def test_bad_header_before_auth(server):
    r = server.raw_request("GET", "/capabilities", headers=["X-Bad : 1"])
    assert_error(r, 400, "request.bad_header")


def test_chunked_body_accepted(server, token):
    body = b'{"path": "a.txt"}'
    chunked = b"%x\r\n%s\r\n0\r\n\r\n" % (len(body), body)
    r = server.raw_request("POST", "/ops/files.stat", headers=["Content-Type: application/json",
                                                                 "Transfer-Encoding: chunked"],
                           body=chunked, token=token)
    assert r.status == 200, r
    assert r.json()["exists"] is True


# -- step 0: connection limit ----------------------------------------------------------------

def _poll(fn, want, timeout=5.0):
    deadline = time.time() + timeout
    while True:
        r = fn()
        if r.status == want or time.time() > deadline:
            return r
        time.sleep(0.05)


def test_busy_past_connection_limit_but_health_answers(abx):
    s = abx(multi_config(top="limits: {connections: 2}\n"))
    caps = lambda: s.raw_request("GET", "/capabilities", token=ALICE_TOKEN)  # noqa: E731
    idle = []
    try:
        # one idle connection + the request's own = 2: at the limit, still served
        idle.append(socket.create_connection(("127.0.0.1", s.port)))
        time.sleep(0.2)
        r = caps()
        assert r.status == 200, r
        # two idle + the request's own = 3 > 2: busy
        idle.append(socket.create_connection(("127.0.0.1", s.port)))
        r = _poll(caps, 503)
        assert_error(r, 503, "request.busy")
        r = s.raw_request("GET", "/files/list?path=.", token=ALICE_TOKEN)
        assert_error(r, 503, "request.busy")
        r = s.raw_request("GET", "/nope", token=ALICE_TOKEN)
        assert_error(r, 503, "request.busy")
        h = s.raw_request("GET", "/health")
        assert h.status == 200, h
    finally:
        for c in idle:
            c.close()
    r = _poll(caps, 200)
    assert r.status == 200, r


# -- step 1: body size and content type ----------------------------------------------------

LIMIT_CONFIG_TOP = "limits: {request_max_bytes: 1KiB}\n"


def test_content_length_over_limit_is_413_before_body(abx):
    s = abx(multi_config(top=LIMIT_CONFIG_TOP))
    c = socket.create_connection(("127.0.0.1", s.port), timeout=5)
    try:
        c.sendall(("POST /ops/files.stat HTTP/1.1\r\nHost: 127.0.0.1:%d\r\nAuthorization: Bearer %s\r\n"
                   "Content-Type: application/json\r\nContent-Length: 100000000\r\n\r\n"
                   % (s.port, ALICE_TOKEN)).encode())
        t0 = time.time()
        data = b""
        while b"\r\n\r\n" not in data:
            d = c.recv(65536)
            if not d:
                break
            data += d
        assert time.time() - t0 < 4
        # read the rest of a small body if any
        c.settimeout(1)
        try:
            while True:
                d = c.recv(65536)
                if not d:
                    break
                data += d
        except socket.timeout:
            pass
    finally:
        c.close()
    from abxtest import RawResponse
    assert_error(RawResponse(data), 413, "limit.request_too_large")


def test_body_over_limit_is_413(abx):
    s = abx(multi_config(top=LIMIT_CONFIG_TOP))
    big = {"path": "a.txt", "pad": "x" * 2000}
    r = s.op("files.stat", big, token=ALICE_TOKEN)
    assert_error(r, 413, "limit.request_too_large")
    # under the limit the same op works
    r = s.op("files.stat", {"path": "a.txt"}, token=ALICE_TOKEN)
    assert r.status_code == 200, r.text


def test_chunked_body_cut_at_cap(abx):
    s = abx(multi_config(top=LIMIT_CONFIG_TOP))
    payload = b'{"path": "a.txt", "pad": "' + b"x" * 4000 + b'"}'
    chunks = b"".join(b"%x\r\n%s\r\n" % (len(payload[i:i + 500]), payload[i:i + 500])
                      for i in range(0, len(payload), 500)) + b"0\r\n\r\n"
    r = s.raw_request("POST", "/ops/files.stat", headers=["Content-Type: application/json",
                                                            "Transfer-Encoding: chunked"],
                      body=chunks, token=ALICE_TOKEN)
    assert_error(r, 413, "limit.request_too_large")


def test_body_without_json_content_type_is_415(server, token):
    r = server.post("/ops/files.stat", token=token, data=b'{"path": "a.txt"}',
                    headers={"Content-Type": "text/plain"})
    assert_error(r, 415, "request.bad_content_type")
    r = server.post("/ops/files.stat", token=token, data=b'{"path": "a.txt"}')  # no Content-Type
    assert_error(r, 415, "request.bad_content_type")
    r = server.post("/ops/files.stat", token=token, data=b'{"path": "a.txt"}',
                    headers={"Content-Type": "application/jsonx"})
    assert_error(r, 415, "request.bad_content_type")


def test_json_content_type_with_charset_accepted(server, token):
    r = server.post("/ops/files.stat", token=token, data=b'{"path": "a.txt"}',
                    headers={"Content-Type": "application/json; charset=utf-8"})
    assert r.status_code == 200, r.text


@pytest.mark.parametrize("body", [b'{"path": "a.txt"', b"not json", b'{"path": "a.txt",}', b"\xff\xfe"])
def test_malformed_json_is_bad_json(server, token, body):
    r = server.post("/ops/files.stat", token=token, data=body, headers={"Content-Type": "application/json"})
    assert_error(r, 400, "request.bad_json")


def test_duplicate_json_keys_is_bad_json(server, token):
    r = server.post("/ops/files.stat", token=token, data=b'{"path": "a.txt", "path": "/etc/passwd"}',
                    headers={"Content-Type": "application/json"})
    assert_error(r, 400, "request.bad_json")


@pytest.mark.parametrize("body", [b"[]", b'"a.txt"', b"42", b"null"])
def test_non_object_json_is_bad_json(server, token, body):
    r = server.post("/ops/files.stat", token=token, data=body, headers={"Content-Type": "application/json"})
    assert_error(r, 400, "request.bad_json")


# -- step 3 before routing ----------------------------------------------------------------

@pytest.mark.parametrize("method,path", [("GET", "/nonexistent"), ("GET", "/ops/files.nope"),
                                         ("POST", "/ops/files.nope"), ("POST", "/files/read"),
                                         ("DELETE", "/files/stat"), ("GET", "/files/list")])
def test_unauthenticated_is_401_before_404_405(server, method, path):
    r = server.request(method, path)
    assert_error(r, 401, "auth.required")


# -- steps 4-5: the one 404 -----------------------------------------------------------------

def test_404_bodies_are_identical(abx):
    s = abx(multi_config())
    replies = {
        "unknown op (alice)": s.op("files.nope", {}, token=ALICE_TOKEN),
        "unknown route (alice)": s.get("/nope", token=ALICE_TOKEN),
        "unknown route DELETE (alice)": s.request("DELETE", "/nope/deeper", token=ALICE_TOKEN),
        "unknown describe (alice)": s.get("/ops/files.nope", token=ALICE_TOKEN),
        "unknown op (bob)": s.op("files.nope", {}, token=BOB_TOKEN),
        "unmounted REST (bob)": s.get("/files/list", token=BOB_TOKEN, params={"path": "."}),
        "unmounted RPC (bob)": s.op("files.list", {"path": "."}, token=BOB_TOKEN),
        "unmounted describe (bob)": s.get("/ops/files.list", token=BOB_TOKEN),
        "unmounted wrong method (bob)": s.post("/files/read", token=BOB_TOKEN),
    }
    first = None
    for name, r in replies.items():
        assert_error(r, 404, "op.not_enabled")
        if first is None:
            first = r.content
        assert r.content == first, "%s: %r != %r" % (name, r.content, first)


def test_explain_denials_did_you_mean(abx):
    s = abx(args=["--explain-denials"])
    r = s.op("files.lsit", {"path": "."}, token=s.token)
    j = assert_error(r, 404, "op.not_enabled")
    assert "did you mean 'files.list'" in j["error"]["message"]


def test_no_did_you_mean_without_flag(server, token):
    r = server.op("files.lsit", {"path": "."}, token=token)
    assert_error(r, 404, "op.not_enabled")
    assert "files.list" not in r.text
    assert r.content == server.get("/nope", token=token).content


def test_wrong_method_on_mounted_path_is_405(server, token):
    r = server.post("/files/read", token=token, json_body={"path": "a.txt"})
    assert r.status_code == 405, r.text
    assert r.headers.get("Allow") == "GET"
    assert error_code(r) == "request.method_not_allowed"
    r = server.request("DELETE", "/files/stat", token=token)
    assert r.status_code == 405
    assert r.headers.get("Allow") == "GET"
    r = server.request("PUT", "/capabilities", token=token, data=b"")
    assert r.status_code == 405
    assert r.headers.get("Allow") == "GET"


# -- step 6: arguments ----------------------------------------------------------------------

def test_unknown_argument(server, token):
    r = server.get("/files/stat", token=token, params={"path": "a.txt", "bogus": "1"})
    j = assert_error(r, 400, "args.unknown")
    assert "bogus" in j["error"]["message"]
    r = server.op("files.stat", {"path": "a.txt", "bogus": 1}, token=token)
    assert_error(r, 400, "args.unknown")
    r = server.get("/capabilities", token=token, params={"x": "1"})
    assert_error(r, 400, "args.unknown")


def test_args_checked_before_policy(server, token):
    # /etc/passwd is outside the scope; the unknown argument is found first (step 6 < 7)
    r = server.get("/files/stat", token=token, params={"path": "/etc/passwd", "bogus": "1"})
    assert_error(r, 400, "args.unknown")


@pytest.mark.parametrize("params,name", [
    ({"path": ".", "max_entries": "abc"}, "max_entries"),
    ({"path": ".", "max_entries": "0"}, "max_entries"),
    ({"path": ".", "max_entries": "-3"}, "max_entries"),
    ({"path": ".", "max_entries": "1.5"}, "max_entries"),
    ({"path": ".", "recursive": "maybe"}, "recursive"),
    ({"path": ".", "include_hidden": "2"}, "include_hidden"),
])
def test_invalid_query_argument_names_parameter(server, token, params, name):
    r = server.get("/files/list", token=token, params=params)
    j = assert_error(r, 400, "args.invalid")
    assert name in j["error"]["message"]


@pytest.mark.parametrize("body,name", [
    ({"path": ".", "max_entries": "x"}, "max_entries"),
    ({"path": ".", "max_entries": 0}, "max_entries"),
    ({"path": ".", "max_entries": 2.5}, "max_entries"),
    ({"path": ".", "max_entries": True}, "max_entries"),
    ({"path": ".", "recursive": "yes"}, "recursive"),
    ({"path": 5}, "path"),
    ({"path": ["a"]}, "path"),      # (null is "not given" for an optional argument: test_null_args.py)
])
def test_invalid_json_argument_names_parameter(server, token, body, name):
    r = server.op("files.list", body, token=token)
    j = assert_error(r, 400, "args.invalid")
    assert name in j["error"]["message"]


@pytest.mark.parametrize("params,name", [
    ({"path": "a.txt", "offset": "-1"}, "offset"),
    ({"path": "a.txt", "length": "0"}, "length"),
    ({"path": "a.txt", "start_line": "0"}, "start_line"),
    ({"path": "a.txt", "max_lines": "0"}, "max_lines"),
    ({"path": "a.txt", "encoding": "latin1"}, "encoding"),
    ({"path": "a.txt", "numbered": "x"}, "numbered"),
])
def test_invalid_read_arguments(server, token, params, name):
    r = server.get("/files/read", token=token, params=params)
    j = assert_error(r, 400, "args.invalid")
    assert name in j["error"]["message"]


def test_missing_required_argument(server, token):
    j = assert_error(server.get("/files/read", token=token), 400, "args.missing")
    assert "path" in j["error"]["message"]
    assert_error(server.op("files.read", {}, token=token), 400, "args.missing")
    assert_error(server.get("/files/stat", token=token), 400, "args.missing")


def test_query_args_on_rpc_are_invalid(server, token):
    r = server.post("/ops/files.stat?path=a.txt", token=token, json_body={})
    assert_error(r, 400, "args.invalid")
    r = server.post("/ops/files.stat?path=a.txt", token=token, json_body={"path": "a.txt"})
    assert_error(r, 400, "args.invalid")


def test_repeated_query_argument_rejected(server, token):
    # two values for one scalar parameter are ambiguous (which one did policy check?)
    r = server.get("/files/stat?path=a.txt&path=/etc/passwd", token=token)
    assert r.status_code in (400, 403), r.text
    assert error_code(r) in ("args.invalid", "policy.path_not_allowed"), r.text


def test_nul_in_arguments_rejected(server, token):
    r = server.get("/files/read?path=a.txt%00/../../etc/passwd", token=token)
    assert_error(r, 400, "args.invalid")
    r = server.post("/ops/files.read", token=token, data=b'{"path": "a.txt\\u0000/../../etc/passwd"}',
                    headers={"Content-Type": "application/json"})
    assert r.status_code == 400, r.text
    assert error_code(r) in ("args.invalid", "request.bad_json")


def test_empty_path_argument_rejected(server, token):
    assert_error(server.get("/files/read?path=", token=token), 400, "args.invalid")


# -- connection behaviour ------------------------------------------------------------------

def test_keep_alive_mixed_statuses(server, token):
    with requests.Session() as s:
        seq = [("/capabilities", token, 200), ("/capabilities", None, 401), ("/nope", token, 404),
               ("/capabilities", "wrong-token-0123456789abcdef", 401), ("/files/stat?path=a.txt", token, 200),
               ("/files/stat?path=/etc/passwd", token, 403), ("/health", None, 200)]
        for path, tok, want in seq:
            h = {"Authorization": "Bearer " + tok} if tok else {}
            r = s.get(server.url + path, headers=h, timeout=5)
            assert r.status_code == want, (path, r.text)
            if want == 200 and path == "/capabilities":
                assert r.json()["principal"] == "local"  # no credential leaks across requests


def test_read_timeout_closes_idle_connection(abx):
    s = abx(multi_config(top="limits: {read_timeout: 1}\n"))
    c = socket.create_connection(("127.0.0.1", s.port), timeout=8)
    try:
        c.sendall(b"GET /health HTTP/1.1\r\nHost: 127.0.0.1\r\n")  # never finished
        t0 = time.time()
        try:
            while c.recv(65536):
                pass
        except (socket.timeout, ConnectionResetError):
            pass
        assert time.time() - t0 < 5, "slow client kept open past read_timeout"
    finally:
        c.close()


def test_keep_alive_header_names_the_idle_timeout(abx):
    """Every reply says how long an idle connection stays open (a second under
    read_timeout, which is counted in whole seconds): a client that keeps sockets longer
    would reuse one being closed. Made once when the listener starts."""
    for top, want in (("limits: {read_timeout: 5}\n", "timeout=4"), ("limits: {read_timeout: 1}\n", "timeout=1"),
                      ("", None)):
        s = abx(multi_config(top=top))
        for r in (s.get("/health"), s.get("/nope")):
            got = r.headers.get("Keep-Alive")
            assert got and got.startswith("timeout="), r.headers
            if want:
                assert got == want, (top, got)
            assert int(got.split("=")[1]) >= 1
        s.stop()


SMUGGLED = b"GET /nope-smuggled HTTP/1.1\r\nHost: 127.0.0.1\r\n\r\n"


@pytest.mark.parametrize("case", ["too_large", "bad_content_type", "unauthenticated", "bad_json"])
def test_early_reject_does_not_parse_body_as_next_request(abx, case):
    s = abx(multi_config(top="limits: {request_max_bytes: 1KiB}\n"))
    ctype, auth, body = {
        "too_large": ("application/json", True, b"x" * 1100 + SMUGGLED),
        "bad_content_type": ("text/plain", True, SMUGGLED),
        "unauthenticated": ("application/json", False, b"{}" + b" " * 10 + SMUGGLED),
        "bad_json": ("application/json", True, b'{"path": "a.txt"}' + SMUGGLED),
    }[case]
    head = ("POST /ops/files.stat HTTP/1.1\r\nHost: 127.0.0.1:%d\r\nContent-Type: %s\r\nContent-Length: %d\r\n"
            % (s.port, ctype, len(body)))
    if auth:
        head += "Authorization: Bearer %s\r\n" % ALICE_TOKEN
    c = socket.create_connection(("127.0.0.1", s.port), timeout=1)
    out = b""
    try:
        c.sendall(head.encode() + b"\r\n" + body)
        deadline = time.time() + 1.5
        while time.time() < deadline:
            try:
                d = c.recv(65536)
            except (socket.timeout, ConnectionResetError):
                break
            if not d:
                break
            out += d
    finally:
        c.close()
    assert out.count(b"HTTP/1.1 ") == 1, out
    assert out.startswith(b"HTTP/1.1 4"), out
