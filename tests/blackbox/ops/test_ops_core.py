"""core.* operations: health, capabilities, ops list/describe, openapi, metrics, and their
RPC forms (POST /ops/{id})."""
import json
import re

import pytest

from abxtest import ALICE_TOKEN, BOB_TOKEN, assert_error, run_abx

ENTRY_KEYS = {"id", "summary", "effects", "group", "http", "rpc", "params", "result", "limits", "stream",
              "install", "since", "aliases", "deprecated"}


@pytest.fixture(scope="module")
def cli_catalog():
    r = run_abx(["catalog"])
    assert r.returncode == 0, r.stderr
    return json.loads(r.stdout)


@pytest.fixture(scope="module")
def cli_version():
    r = run_abx(["version"])
    m = re.match(r"^abx (\S+) \(catalog (\d+), api (\S+)\)", r.stdout)
    assert m, r.stdout
    return m.group(1), int(m.group(2)), m.group(3)


# -- core.health ---------------------------------------------------------------------------

def test_health(server, cli_version):
    r = server.get("/health")
    assert r.status_code == 200
    assert r.headers["Content-Type"].startswith("application/json")
    j = r.json()
    assert j["status"] == "ok"
    assert j["version"] == cli_version[0]


def test_health_rpc(server, token):
    r = server.op("core.health", {}, token=token)
    assert r.status_code == 200, r.text
    assert r.json() == server.get("/health").json()


# -- core.capabilities ---------------------------------------------------------------------

def test_capabilities(server, token, cli_version):
    r = server.get("/capabilities", token=token)
    assert r.status_code == 200, r.text
    j = r.json()
    assert j["api"] == "agent-sandbox/2"
    assert j["api"] == cli_version[2]
    assert j["catalog_version"] == cli_version[1]
    assert j["sdk_version"] == cli_version[0]
    assert j["principal"] == "local"
    assert "core" in j["namespaces"] and "files" in j["namespaces"]
    assert isinstance(j["limits"], dict)


def test_capabilities_namespaces_filtered(multi):
    a = multi.get("/capabilities", token=ALICE_TOKEN).json()
    b = multi.get("/capabilities", token=BOB_TOKEN).json()
    assert set(a["namespaces"]) == {"core", "files"}
    assert b["namespaces"] == ["core"]
    assert b["principal"] == "bob"


def test_capabilities_limits_reflect_config(abx):
    from abxtest import multi_config
    s = abx(multi_config(top="limits: {request_max_bytes: 2048, connections: 7}\n"))
    lim = s.get("/capabilities", token=ALICE_TOKEN).json()["limits"]
    assert lim.get("request_max_bytes") == 2048, lim
    assert lim.get("connections") == 7, lim


# -- core.ops.list / core.ops.describe -------------------------------------------------------

def test_ops_list_shape(server, token, cli_catalog):
    r = server.get("/ops", token=token)
    assert r.status_code == 200, r.text
    j = r.json()
    assert j["catalog_version"] == cli_catalog["catalog_version"]
    assert j["sdk_version"] == cli_catalog["sdk_version"]
    ids = [e["id"] for e in j["ops"]]
    assert len(ids) == len(set(ids))
    for e in j["ops"]:
        assert ENTRY_KEYS <= set(e), (e["id"], ENTRY_KEYS - set(e))
        assert e["rpc"] == "/ops/" + e["id"]
        assert isinstance(e["effects"], list) and e["effects"]
        assert isinstance(e["http"], list)
        for b in e["http"]:
            assert set(b) >= {"method", "path"}
        assert isinstance(e["params"], list)
        assert e["stream"] in ("none", "sse", "ndjson", "bytes", "ws")
    for must in ("core.health", "core.capabilities", "core.ops.list", "core.ops.describe", "core.openapi.get",
                 "core.metrics", "files.stat", "files.list", "files.read"):
        assert must in ids


def test_ops_list_for_owner_matches_cli_catalog(server, token, cli_catalog):
    served = {e["id"]: e for e in server.get("/ops", token=token).json()["ops"]}
    # explicit-only ops: admin and script effects, and ops with an agent-kind parameter
    # (coding agents are mounted by name only, never by "*": docs/agents.md)
    non_admin = {e["id"]: e for e in cli_catalog["ops"]
                 if not {"admin", "script"} & set(e["effects"])
                 and not any(p.get("kind") == "agent" for p in e["params"])}
    assert set(served) == set(non_admin)
    for k, e in non_admin.items():
        assert served[k] == e, k


def test_ops_list_filtered_to_caller(multi):
    a = {e["id"] for e in multi.get("/ops", token=ALICE_TOKEN).json()["ops"]}
    b = {e["id"] for e in multi.get("/ops", token=BOB_TOKEN).json()["ops"]}
    assert "files.read" in a
    assert b and all(i.startswith("core.") for i in b), b
    assert "core.ops.list" in b


def test_ops_describe(server, token):
    listed = {e["id"]: e for e in server.get("/ops", token=token).json()["ops"]}
    for op_id in ("files.read", "core.health", "core.ops.describe"):
        r = server.get("/ops/" + op_id, token=token)
        assert r.status_code == 200, r.text
        assert r.json() == listed[op_id]
    r = server.op("core.ops.describe", {"id": "files.list"}, token=token)
    assert r.status_code == 200, r.text
    assert r.json() == listed["files.list"]


def test_ops_describe_unknown_and_unmounted_same_404(multi):
    unknown = multi.get("/ops/files.nope", token=BOB_TOKEN)
    unmounted = multi.get("/ops/files.read", token=BOB_TOKEN)
    rpc_unmounted = multi.op("core.ops.describe", {"id": "files.read"}, token=BOB_TOKEN)
    nope = multi.get("/nope", token=BOB_TOKEN)
    for r in (unknown, unmounted, rpc_unmounted):
        assert_error(r, 404, "op.not_enabled")
        assert r.content == nope.content
    assert multi.get("/ops/files.read", token=ALICE_TOKEN).status_code == 200


def test_ops_describe_rpc_missing_id(server, token):
    assert_error(server.op("core.ops.describe", {}, token=token), 400, "args.missing")


# -- core.openapi.get ------------------------------------------------------------------------

def test_openapi(server, token):
    r = server.get("/openapi.json", token=token)
    assert r.status_code == 200, r.text
    doc = r.json()
    assert doc["openapi"] == "3.1.0"
    assert doc["info"]["version"]
    assert "/files/read" in doc["paths"] and "get" in doc["paths"]["/files/read"]
    assert "/health" in doc["paths"]
    params = {p["name"] for p in doc["paths"]["/files/read"]["get"].get("parameters", [])}
    assert {"path", "offset", "length", "start_line", "max_lines", "numbered", "encoding"} <= params


def test_openapi_filtered_to_caller(multi):
    a = multi.get("/openapi.json", token=ALICE_TOKEN).json()
    b = multi.get("/openapi.json", token=BOB_TOKEN).json()
    assert "/files/list" in a["paths"]
    assert not [p for p in b["paths"] if p.startswith("/files") or "files." in p], list(b["paths"])
    assert "/capabilities" in b["paths"]


def test_openapi_rpc_equals_get(server, token):
    g = server.get("/openapi.json", token=token).json()
    p = server.op("core.openapi.get", {}, token=token)
    assert p.status_code == 200, p.text
    assert p.json() == g


# -- core.metrics --------------------------------------------------------------------------------

def _labels_match(line, name, **labels):
    m = re.match(r"^%s\{([^}]*)\}\s+(\S+)$" % re.escape(name), line)
    if not m:
        return None
    got = dict(re.findall(r'(\w+)="((?:[^"\\]|\\.)*)"', m.group(1)))
    if all(got.get(k) == v for k, v in labels.items()):
        return float(m.group(2))
    return None


def _metric(text, name, **labels):
    for line in text.splitlines():
        v = _labels_match(line, name, **labels)
        if v is not None:
            return v
    return None


def test_metrics(server, token):
    for _ in range(3):
        server.get("/health")
    server.get("/nope", token=token)
    server.get("/capabilities")  # 401
    server.get("/files/stat", token=token, params={"path": "a.txt"})
    r = server.get("/metrics", token=token)
    assert r.status_code == 200
    assert r.headers["Content-Type"].startswith("text/plain")
    t = r.text
    assert "# TYPE abx_requests_total counter" in t
    assert "# TYPE abx_request_duration_seconds histogram" in t
    assert _metric(t, "abx_requests_total", op="core.health", status="200") >= 3
    assert _metric(t, "abx_requests_total", op="files.stat", status="200") >= 1
    assert _metric(t, "abx_errors_total", code="op.not_enabled") >= 1
    assert _metric(t, "abx_errors_total", code="auth.required") >= 1
    assert _metric(t, "abx_request_duration_seconds_bucket", op="core.health", le="+Inf") >= 3
    assert _metric(t, "abx_request_duration_seconds_count", op="core.health") >= 3
    assert _metric(t, "abx_request_duration_seconds_sum", op="core.health") is not None
    m = re.search(r"^abx_connections\s+(\d+)", t, re.M)
    assert m and int(m.group(1)) >= 1


def test_metrics_no_token_in_labels(server, token):
    server.get("/capabilities", token="wrong-token-metrics-0123456789")
    t = server.get("/metrics", token=token).text
    assert token not in t and "wrong-token-metrics" not in t


def test_metrics_rpc(server, token):
    r = server.op("core.metrics", {}, token=token)
    assert r.status_code == 200, r.text
    assert "abx_requests_total" in r.text


# -- every core op through RPC ---------------------------------------------------------------

@pytest.mark.parametrize("op_id", ["core.health", "core.capabilities", "core.ops.list", "core.openapi.get",
                                   "core.metrics"])
def test_core_ops_rpc(server, token, op_id):
    r = server.op(op_id, {}, token=token)
    assert r.status_code == 200, r.text


def test_capabilities_rpc_equals_get(multi):
    g = multi.get("/capabilities", token=BOB_TOKEN).json()
    p = multi.op("core.capabilities", {}, token=BOB_TOKEN).json()
    assert g == p


def test_ops_list_rpc_equals_get(multi):
    g = multi.get("/ops", token=ALICE_TOKEN).json()
    p = multi.op("core.ops.list", {}, token=ALICE_TOKEN).json()
    assert g == p
