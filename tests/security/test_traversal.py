"""Attack corpus, item 1: path traversal and encodings.

Every payload is tried where a client can put a path: a path parameter in the query
string of a REST call, in the JSON body of an RPC call, inside a batch, and in the
request target itself. abx decodes a query string once and a JSON string not at all, so
an encoded "../" is either decoded once into a real ".." (and refused by the scope) or
stays a literal, harmless file name inside the workspace; it never becomes a second,
different path after the policy looked at the first."""
import json
import os

import pytest

from abxtest import assert_error, error_code
from secutil import make_workspace, module_server


@pytest.fixture(scope="module")
def workspace(tmp_path_factory):
    return make_workspace(tmp_path_factory.mktemp("traversal"))


@pytest.fixture(scope="module")
def server(tmp_path_factory, workspace):
    yield from module_server(tmp_path_factory, workspace)

# Escapes: refused by the scope, whether or not the target exists (no existence oracle).
ESCAPES = [
    "../x", "../../../../../../../../etc/passwd", "/etc/passwd", "/etc/shadow", "/tmp", "/", "..",
    "sub/../../x", "./../x", "a.txt/../../x", "sub/../sub/../../x", "//etc/passwd", "/./etc/passwd",
    "/etc/../etc/passwd", "{ws}/../x", "{ws}/../ws-sibling/x", "{ws}/sub/../../x", "sub/./../../x",
    "nonexistent/../../x", "nonexistent/../../../etc/passwd", "../ws/a.txt/../../x", "./" * 50 + "../x",
]

# Encodings a naive server might decode after the check. In JSON they are literal names
# inside the workspace: stat answers exists=false below the workspace, read 404.
LITERALS = [
    "%2e%2e/x", ".%2e/x", "%2e./x", "%2E%2E/x", "%252e%252e/x", "%25252e%25252e/x", "%c0%ae%c0%ae/x",
    "%e0%80%ae%e0%80%ae/x", "..%2fx", "..%2f..%2fetc%2fpasswd", "..%5c..%5cetc%5cpasswd",
    "..\\..\\etc\\passwd", "sub\\..\\..\\x", "~", "~/x", "~root/.bashrc", "$HOME/x", "${HOME}/x",
    "..;/x", "..%00/x", "...", ".../x", ". ./x", ".. /x", " ../x", "..\t/x", "..\u2215x", "\u2024\u2024/x",
    "\uff0e\uff0e/x", "....", "..../x",
]


def _subst(p, ws):
    return p.replace("{ws}", ws)


@pytest.mark.parametrize("payload", ESCAPES)
@pytest.mark.parametrize("where", ["query", "json", "batch"])
def test_escape_refused(server, workspace, payload, where):
    p = _subst(payload, workspace)
    r = call(server, "files.stat", {"path": p}, where)
    assert_error_in(r, where, 403, "policy.path_not_allowed")
    r = call(server, "files.read", {"path": p}, where)
    assert_error_in(r, where, 403, "policy.path_not_allowed")


@pytest.mark.parametrize("payload", LITERALS)
@pytest.mark.parametrize("where", ["query", "json"])
def test_encodings_stay_literal_names(server, workspace, payload, where):
    r = call(server, "files.stat", {"path": payload}, where)
    assert r.status_code == 200, r.text[:300]
    j = r.json()
    assert j["exists"] is False, j
    assert j["path"] == workspace + "/" + payload, j
    assert_error(call(server, "files.read", {"path": payload}, where), 404, "files.not_found")


@pytest.mark.parametrize("payload", ["%c0%ae%c0%ae/x", "%ff", "%fe%ff", "%ed%a0%80", "%f4%90%80%80",
                                     "a%00b", "%00", "a.txt%00/../../etc/passwd", "%c0%af", "%80"])
def test_query_bytes_not_utf8_or_nul(server, payload):
    r = server.raw_request("GET", "/files/stat?path=" + payload, token=server.token)
    assert_error(r, 400, "args.invalid")


@pytest.mark.parametrize("payload,decoded", [("%2e%2e/x", "../x"), ("%2E%2E%2Fx", "../x"), (".%2e/x", "../x"),
                                             ("%2e%2e%2f%2e%2e%2fetc%2fpasswd", "../../etc/passwd"),
                                             ("sub%2f..%2f..%2fx", "sub/../../x"), ("+/../../x", " /../../x")])
def test_query_decoded_once_then_checked(server, payload, decoded):
    """The query string is decoded once ("+" is a space); what the decoding gives is
    what the scope checks: here always an escape."""
    r = server.raw_request("GET", "/files/stat?path=" + payload, token=server.token)
    assert_error(r, 403, "policy.path_not_allowed")
    assert ".." in decoded


@pytest.mark.parametrize("payload", ["%252e%252e/x", "%252e%252e%252fx", "%25c0%25ae/x", "..%255cx"])
def test_query_double_encoding_decoded_only_once(server, workspace, payload):
    r = server.raw_request("GET", "/files/stat?path=" + payload, token=server.token)
    assert r.status == 200, r
    j = r.json()
    assert j["exists"] is False and j["path"].startswith(workspace + "/"), j
    assert "%" in j["path"], "decoded twice: %s" % j["path"]


@pytest.mark.parametrize("body", [b'{"path": "\xff\xfe"}', b'{"path": "\xc0\xae\xc0\xae/x"}',
                                  b'{"path": "\xed\xa0\x80"}', b'{"path": "a\\u0000b"}', b'{"path": "\\ud800"}',
                                  b'{"path": "..\\u0000/x"}', b'{"path": 5}', b'{"path": ["a.txt"]}',
                                  b'{"path": {"$ref": "/etc/passwd"}}', b'{"path": null}', b'{"path": ""}'])
def test_json_bytes_not_utf8_nul_or_wrong_type(server, body):
    r = server.post("/ops/files.stat", token=server.token, data=body, headers={"Content-Type": "application/json"})
    assert r.status_code == 400, r.text
    assert error_code(r) in ("request.bad_json", "args.invalid"), r.text


@pytest.mark.parametrize("shape", ["long_name", "path_4096", "path_8000", "deep_2100", "deep_dotdot"])
@pytest.mark.parametrize("where", ["query", "json"])
def test_overlong_paths(server, shape, where):
    p = {"long_name": "a" * 256, "path_4096": ("d" * 200 + "/") * 20 + "e" * 100,
         "path_8000": "b/" * 4000, "deep_2100": "a/" * 2100 + "x", "deep_dotdot": "sub/" + "../" * 2000 + "etc/passwd"}[shape]
    r = call(server, "files.stat", {"path": p}, where)
    assert r.status_code in (400, 403), r.text[:300]
    assert error_code(r) in ("args.invalid", "policy.path_not_allowed"), r.text[:300]
    if shape != "deep_dotdot":
        assert_error(r, 400, "args.invalid")


@pytest.mark.parametrize("op,args", [
    ("files.write", {"path": "../escape.txt", "content": "x"}),
    ("files.write", {"path": "%2e%2e/escape.txt", "content": "x"}),
    ("files.mkdir", {"path": "../escape-dir"}),
    ("files.copy", {"src": "a.txt", "dst": "../escape.txt"}),
    ("files.move", {"src": "a.txt", "dst": "sub/../../escape.txt"}),
    ("files.upload", None),
])
def test_writes_never_land_outside(server, workspace, op, args):
    parent = os.path.dirname(workspace)
    before = sorted(os.listdir(parent))
    if op == "files.upload":
        r = server.request("PUT", "/files/upload", token=server.token, params={"path": "../escape.txt"}, data=b"x")
        assert_error(r, 403, "policy.path_not_allowed")
    else:
        r = server.op(op, args, token=server.token)
        if "%2e" in args["path" if "path" in args else "dst"]:
            assert r.status_code == 404 or r.status_code == 200, r.text   # a literal name inside
        else:
            assert_error(r, 403, "policy.path_not_allowed")
    assert sorted(os.listdir(parent)) == before


# -- the request target ----------------------------------------------------------------------------

BAD_TARGETS = [
    "/files/stat/../../etc/passwd", "/files/%2e%2e/%2e%2e/etc/passwd", "/files/.%2e/x", "/files/%2e./x",
    "/files/%252e%252e/x", "/files/stat%2f..%2f..%2fetc", "/ops/files.read/../files.write", "/ops/%2e%2e",
    "/ops/files%2eread", "/ops/files.read%00", "/files\\stat", "/files/stat\\..\\..", "/health#frag",
    "/files/stat?path=a.txt#x", "health", "*", "/files/stat?path=a b", "/fil\xc3\xa9s/stat", "/files/\xc0\xae\xc0\xae/x",
    "/files/st%2", "/files/st%zz", "/.%2e/health", "/files/.", "/files/./stat", "/%2E%2E", "/ops/%2Ffiles.read",
    "/files/stat?path=\x7f", "/files/stat?path=\x00",
]


@pytest.mark.parametrize("target", BAD_TARGETS, ids=[repr(t) for t in BAD_TARGETS])
def test_bad_request_target(server, target):
    r = server.raw_request("GET", target, token=server.token)
    assert r.status is not None, r
    # libmicrohttpd cuts the target at a NUL (documented): what follows is never routed
    if "\x00" in target:
        assert r.status in (400, 404), r
        return
    assert_error(r, 400, "request.bad_target")


@pytest.mark.parametrize("target", ["/%66iles/stat?path=a.txt", "/files/st%61t?path=a.txt", "/ops/files%2Estat",
                                    "/FILES/STAT?path=a.txt", "/files/stat/?path=a.txt", "/files/%c0%ae%c0%ae/x",
                                    "/ops/files.stat/", "/ops/FILES.STAT"])
def test_encoded_or_case_variant_routes_are_not_aliases(server, target):
    """The router matches the raw target byte for byte: an encoded or case-changed
    spelling of a route is no route at all (never a second way past a rule)."""
    r = server.raw_request("GET", target, token=server.token)
    assert r.status in (400, 404), r
    assert r.code in ("op.not_enabled", "request.bad_target"), r


@pytest.mark.parametrize("length", [4097, 16384, 100000])
def test_long_request_target(server, length):
    target = "/files/stat?path=" + "a" * length
    r = server.raw_request("GET", target, token=server.token)
    # abx answers args.invalid; past libmicrohttpd's buffer it answers 414 itself
    assert r.status in (400, 414, 431), r
    if r.status == 400:
        assert r.code == "args.invalid", r
    assert server.get("/health").status_code == 200


# -- helpers ---------------------------------------------------------------------------------------

def call(s, op, args, where):
    if where == "query":
        path = {"files.stat": "/files/stat", "files.read": "/files/read"}[op]
        return s.get(path, token=s.token, params=args)
    if where == "json":
        return s.op(op, args, token=s.token)
    r = s.post("/batch", token=s.token, json_body={"calls": [{"op": op, "args": args}]})
    return BatchResult(r)


class BatchResult:
    """The first inner result of a batch, read like a response."""

    def __init__(self, r):
        assert r.status_code == 200, r.text[:300]
        j = r.json()
        res = j["results"][0]
        self.status_code = res["status"]
        self._body = res["body"]
        self.text = json.dumps(self._body)

    def json(self):
        return self._body


def assert_error_in(r, where, status, code):
    assert_error(r, status, code)
