"""Bounded requests (issue 14): the request line plus headers are capped at
limits.header_bytes (16 KiB by default) and the header count at limits.headers (100).
Past either: 431 request.headers_too_large, JSON from the error table, the connection
closed, on every door and before authentication. Exactly at the limit passes.

The size counted is the header section as sent: "METHOD SP target SP version CRLF",
each "Key: value CRLF", and the final CRLF. Requests here are written in that normal form
so the size on the wire is the size abx counts.

libmicrohttpd's own bound (its connection memory: ours plus 8 KiB and at least 33 KiB, so
that it is mapped and an idle connection's untouched pages cost nothing) is above ours: requests that overflow it are answered by libmicrohttpd itself (431 without abx's
JSON, the connection closed); those must be 431 too, never a 200. The pool is not larger
because libmicrohttpd zeroes all of it on every request of a keep-alive connection."""
import json

import pytest

import abxtest as bb
from abxtest import ALICE_TOKEN, multi_config
from secutil import make_workspace, module_server, raw_exchange, responses


@pytest.fixture(scope="module")
def workspace(tmp_path_factory):
    return make_workspace(tmp_path_factory.mktemp("bounds"))


@pytest.fixture(scope="module")
def srv(tmp_path_factory, workspace):
    yield from module_server(tmp_path_factory, workspace, multi_config().replace("{ws}", workspace))


def request(port, method=b"GET", target=b"/health", extra=(), auth=False, body=b""):
    lines = [method + b" " + target + b" HTTP/1.1", b"Host: 127.0.0.1:%d" % port]
    if auth:
        lines.append(b"Authorization: Bearer " + ALICE_TOKEN.encode())
    if body:
        lines += [b"Content-Type: application/json", b"Content-Length: %d" % len(body)]
    return b"\r\n".join(lines + list(extra)) + b"\r\n\r\n" + body


def padded(port, total, **kw):
    """A request whose header section is exactly `total` bytes (one X-Pad header fills it)."""
    base = request(port, extra=[b"X-Pad: "], **kw)
    body = kw.get("body", b"")
    n = total - (len(base) - len(body))
    assert n >= 0
    return request(port, extra=[b"X-Pad: " + b"a" * n], **kw)


def one(port, data):
    out, closed = raw_exchange(port, data, timeout=5, linger=1.0)
    rs = responses(out)
    assert len(rs) == 1, "expected one answer, got %d: %r" % (len(rs), out[:400])
    return rs[0], closed


def assert_too_large(port, data):
    r, closed = one(port, data)
    assert r.status == 431, r
    assert r.headers.get("content-type", "").startswith("application/json"), r
    assert r.code == "request.headers_too_large", r
    assert closed, "the connection stayed open after a 431"
    return r


def test_17k_header_is_431(srv):
    assert_too_large(srv.port, padded(srv.port, 17 * 1024))


def test_header_within_mhd_pool_gets_abx_json(srv):
    # 28 KiB still fits libmicrohttpd's 33 KiB pool (mapped: 36 KiB of pages), so abx
    # answers with its own code; 37 KiB does not: libmicrohttpd's own 431
    assert_too_large(srv.port, padded(srv.port, 28 * 1024))
    assert_mhd_431(srv.port, padded(srv.port, 37 * 1024))


def assert_mhd_431(port, data):
    try:
        out, closed = raw_exchange(port, data, timeout=5, linger=1.0)
    except (BrokenPipeError, ConnectionResetError):
        out, closed = b"", True
    rs = responses(out)
    assert len(rs) == 1, "expected libmicrohttpd's 431, got %r" % out[:400]
    assert rs[0].status == 431, rs[0]
    assert not rs[0].headers.get("content-type", "").startswith("application/json"), rs[0]
    assert closed


def test_70k_header_is_431_never_200(srv):
    # 70 KB overflows libmicrohttpd's pool: it answers 431 itself, before abx sees a header
    assert_mhd_431(srv.port, request(srv.port, extra=[b"X-Big: " + b"a" * 70000]))
    assert srv.get("/health").status_code == 200


def test_beyond_mhd_pool_is_4xx_never_200(srv):
    # 200 KB: libmicrohttpd answers by itself, or cuts the connection
    try:
        out, closed = raw_exchange(srv.port, request(srv.port, extra=[b"X-Big: " + b"a" * 200000]), timeout=5,
                                   linger=1.0)
    except (BrokenPipeError, ConnectionResetError):
        out, closed = b"", True
    rs = responses(out)
    assert len(rs) <= 1
    for r in rs:  # libmicrohttpd's own answer: 431 with an HTML body
        assert r.status == 431, r
        assert not r.headers.get("content-type", "").startswith("application/json"), r
    assert closed
    assert srv.get("/health").status_code == 200


def test_exactly_at_limit_passes_one_over_fails(srv):
    r, _ = one(srv.port, padded(srv.port, 16 * 1024))
    assert r.status == 200, r
    assert_too_large(srv.port, padded(srv.port, 16 * 1024 + 1))


def test_8k_of_headers_still_served(srv):
    extra = [b"X-H%d: %s" % (i, b"v" * 500) for i in range(16)]  # ~8 KiB over 16 headers
    r, _ = one(srv.port, request(srv.port, extra=extra))
    assert r.status == 200, r
    r, _ = one(srv.port, request(srv.port, target=b"/files/stat?path=a.txt", extra=extra, auth=True))
    assert r.status == 200, r


def test_header_count_cap(srv):
    # Host is one: 99 more make 100 (passes), 100 more make 101 (refused)
    r, _ = one(srv.port, request(srv.port, extra=[b"X-H%d: v" % i for i in range(99)]))
    assert r.status == 200, r
    assert_too_large(srv.port, request(srv.port, extra=[b"X-H%d: v" % i for i in range(100)]))


CALL = json.dumps({"path": "a.txt"}).encode()
DOORS = {
    "health": dict(method=b"GET", target=b"/health"),
    "rest": dict(method=b"GET", target=b"/files/stat?path=a.txt"),
    "ops": dict(method=b"POST", target=b"/ops/files.stat", body=CALL),
    "mcp": dict(method=b"POST", target=b"/mcp",
                body=json.dumps({"jsonrpc": "2.0", "id": 1, "method": "tools/list"}).encode()),
    "batch": dict(method=b"POST", target=b"/batch",
                  body=json.dumps({"calls": [{"op": "files.stat", "args": {"path": "a.txt"}}]}).encode()),
}


@pytest.mark.parametrize("door", sorted(DOORS))
@pytest.mark.parametrize("auth", [False, True], ids=["no_token", "token"])
def test_every_door_before_auth(srv, door, auth):
    assert_too_large(srv.port, padded(srv.port, 16 * 1024 + 1, auth=auth, **DOORS[door]))


@pytest.mark.parametrize("door", sorted(DOORS))
def test_every_door_at_limit_is_not_refused(srv, door):
    r, _ = one(srv.port, padded(srv.port, 16 * 1024, auth=True, **DOORS[door]))
    assert r.status != 431 and r.code != "request.headers_too_large", r
    if door != "mcp":  # MCP wants its session handshake first; the others answer the call
        assert r.status == 200, r


@pytest.fixture
def server_with(tmp_path, workspace):
    started = []

    def start(limits):
        s = bb.AbxServer(str(tmp_path / ("s%d" % len(started))),
                         config=("limits: %s\n" % limits) + multi_config().replace("{ws}", workspace),
                         workspace=workspace, use_workspace_flag=False)
        s.start()
        started.append(s)
        return s
    yield start
    for s in started:
        s.stop()


def test_config_raises_the_limits(server_with):
    # the ceiling (64 KiB) is reachable: libmicrohttpd's pool still holds it, so abx answers
    s = server_with("{header_bytes: 64KiB, headers: 200}")
    r, _ = one(s.port, padded(s.port, 64 * 1024))
    assert r.status == 200, r
    assert_too_large(s.port, padded(s.port, 64 * 1024 + 1))
    r, _ = one(s.port, request(s.port, extra=[b"X-H%d: v" % i for i in range(150)]))
    assert r.status == 200, r
    assert_too_large(s.port, request(s.port, extra=[b"X-H%d: v" % i for i in range(200)]))


def test_config_lowers_the_limits(server_with):
    s = server_with("{header_bytes: 4KiB, headers: 20}")
    r, _ = one(s.port, padded(s.port, 4096))
    assert r.status == 200, r
    assert_too_large(s.port, padded(s.port, 4097))
    assert_too_large(s.port, request(s.port, extra=[b"X-H%d: v" % i for i in range(20)]))


@pytest.mark.parametrize("limits,word", [
    ("{header_bytes: 0}", "header_bytes"), ("{header_bytes: -5}", "header_bytes"),
    ("{header_bytes: 1MiB}", "header_bytes"), ("{header_bytes: lots}", "header_bytes"),
    ("{headers: 0}", "headers"), ("{headers: -1}", "headers"), ("{headers: 100000}", "headers"),
    ("{headers: many}", "headers"),
])
def test_bad_config_values(tmp_path, workspace, limits, word):
    p = tmp_path / "c.yaml"
    p.write_text("limits: %s\n" % limits + multi_config().replace("{ws}", workspace))
    r = bb.run_abx(["check-config", str(p)])
    assert r.returncode == 1, r.stdout
    assert "c.yaml:1: error: config.bad_value: 'limits.%s' must be" % word in r.stdout, r.stdout
