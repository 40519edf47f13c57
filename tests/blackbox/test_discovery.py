"""Discovery documents: the OpenAPI document passes a real validator (redocly's recommended
rules) as committed and as served; each op lists the error responses it can give; the
served documents are the caller's (principal-filtered), name the server they came from,
are cached per policy snapshot and view, and change when a reload changes the policy."""
import concurrent.futures
import json
import os
import signal
import time

import pytest

from abxtest import ALICE_TOKEN, BOB_TOKEN, CAROL_TOKEN, multi_config, run_abx
from nodetools import redocly_lint

ROOT = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..")


def assert_lint_clean(path):
    report = redocly_lint(path)
    errors = [p for p in report["problems"] if p["severity"] == "error"]
    assert report["totals"]["errors"] == 0 and not errors, json.dumps(errors[:10], indent=1)
    return report


# -- the validator --------------------------------------------------------------------------

def test_committed_openapi_passes_redocly():
    report = assert_lint_clean(os.path.join(ROOT, "catalog", "openapi.json"))
    assert report["totals"]["warnings"] == 0, json.dumps(report["problems"][:10], indent=1)


def test_served_openapi_passes_redocly(server, token, tmp_path):
    path = tmp_path / "served.json"
    path.write_bytes(server.get("/openapi.json", token=token).content)
    report = assert_lint_clean(str(path))
    assert report["totals"]["warnings"] == 0, json.dumps(report["problems"][:10], indent=1)


def test_filtered_openapi_passes_redocly(multi, tmp_path):
    """A principal that sees only core.* gets a smaller document that is still valid."""
    path = tmp_path / "bob.json"
    path.write_bytes(multi.get("/openapi.json", token=BOB_TOKEN).content)
    assert_lint_clean(str(path))


def test_validator_catches_a_broken_document(tmp_path):
    """The lint is not a rubber stamp: a duplicated operationId fails it."""
    doc = json.loads(run_abx(["openapi"]).stdout)
    ops = [o for item in doc["paths"].values() for o in item.values()]
    ops[1]["operationId"] = ops[0]["operationId"]
    path = tmp_path / "broken.json"
    path.write_text(json.dumps(doc))
    report = redocly_lint(str(path))
    rules = {p["ruleId"] for p in report["problems"] if p["severity"] == "error"}
    assert report["totals"]["errors"] >= 1, report["totals"]
    assert "operation-operationId-unique" in rules, rules


# -- document content -----------------------------------------------------------------------

@pytest.fixture(scope="module")
def cli_openapi():
    return json.loads(run_abx(["openapi"]).stdout)


DOC = {}


@pytest.fixture(autouse=True)
def _doc_for_codes(cli_openapi):
    DOC["doc"] = cli_openapi


def codes(op, status, doc=None):
    """The codes an op's error response lists (through its components.responses $ref)."""
    resp = op["responses"][str(status)]
    ref = resp["$ref"]
    assert ref.startswith("#/components/responses/Error%s-" % status), ref
    resp = (doc or DOC["doc"])["components"]["responses"][ref.rsplit("/", 1)[1]]
    got = resp["content"]["application/json"]["schema"]["allOf"][1]["properties"]["error"]["properties"]["code"]["enum"]
    assert resp["description"] == ", ".join(got)
    return set(got)


def test_openapi_document_shape(cli_openapi):
    d = cli_openapi
    assert d["openapi"] == "3.1.0"
    assert d["jsonSchemaDialect"] == "https://json-schema.org/draft/2020-12/schema"
    assert d["components"]["securitySchemes"]["bearer"] == {"type": "http", "scheme": "bearer"}
    assert d["security"] == [{"bearer": []}]
    ids = [o["operationId"] for item in d["paths"].values() for o in item.values()]
    assert len(ids) == len(set(ids))
    for item in d["paths"].values():
        for o in item.values():
            assert o["summary"] and o["tags"] and (o.get("x-abx-op") or o.get("x-abx-door"))
            assert any(s.startswith("2") for s in o["responses"]), o["operationId"]
    used = {r["$ref"].rsplit("/", 1)[1] for item in d["paths"].values() for o in item.values()
            for r in o["responses"].values() if "$ref" in r}
    assert used == set(d["components"]["responses"])  # every reference resolves, none unused


def door_routes():
    """The rows of src/core/doors.def: (door, method, path, match)."""
    rows = []
    with open(os.path.join(ROOT, "src", "core", "doors.def")) as f:
        for line in f:
            if line.startswith("ABX_DOOR_ROUTE("):
                a = [x.strip().strip('"') for x in line[len("ABX_DOOR_ROUTE("):].split(",")[:5]]
                rows.append((a[0], a[1], a[3], a[4]))
    return rows


def test_openapi_lists_every_door(cli_openapi):
    """Every front door of the door table is in the document, with its method, its errors
    and the door it is; POST /ops/{id} is each op's own path."""
    rows = door_routes()
    assert {r[0] for r in rows} >= {"RPC", "BATCH", "TOOLS", "MCP", "COMMANDS"}
    paths = cli_openapi["paths"]
    for door, method, path, match in rows:
        if door == "RPC":
            assert all(("/ops/" + o) in paths for o in ("files.read", "core.health"))
            continue
        full = path + ("{name}" if match == "SEGMENT" else "")
        o = paths[full][method.lower()]
        assert o["x-abx-door"] == door and "doors" in o["tags"]
        assert "auth.required" in codes(o, 401)
        if method == "POST":
            assert "request.bad_json" in codes(o, 400)


def test_door_table_routes_each_row(server, token):
    """Each row of the door table reaches its door: a wrong verb on a door that takes
    only its own method falls through to the ops' routes (the one 404), a door that
    takes every method answers 405 itself."""
    r = server.post("/batch", token=token, json={"calls": [{"op": "core.health"}]})
    assert r.status_code == 200 and r.json()["results"][0]["status"] == 200, r.text
    assert server.get("/batch", token=token).status_code == 404
    r = server.get("/tools", token=token, params={"format": "openai"})
    assert r.status_code == 200 and isinstance(r.json(), (list, dict)), r.text
    r = server.request("DELETE", "/tools/call", token=token)
    assert r.status_code == 405, r.text
    assert server.request("GET", "/mcp", token=token).status_code == 405
    r = server.post("/ops/core.health", token=token, json={})
    assert r.status_code == 200 and r.json()["status"] == "ok", r.text
    r = server.post("/ops/core.nope", token=token, json={})
    assert r.status_code == 404 and r.json()["error"]["code"] == "op.not_enabled"
    assert server.post("/ops/", token=token, json={}).status_code == 404  # no segment: not the RPC door
    r = server.get("/commands", token=token)
    assert r.status_code == 200 and "commands" in r.json(), r.text


def test_openapi_error_responses_per_op(cli_openapi):
    p = cli_openapi["paths"]
    read = p["/files/read"]["get"]
    assert {"files.not_found", "op.not_enabled"} <= codes(read, 404)
    assert {"files.not_utf8", "args.invalid", "args.missing"} <= codes(read, 400)
    assert {"policy.path_not_allowed", "policy.denied"} <= codes(read, 403)
    assert "415" not in read["responses"]          # query arguments: no body to type
    assert "409" not in read["responses"]          # read-only: no Idempotency-Key conflicts
    download = p["/files/download"]["get"]
    assert codes(download, 416) == {"files.range_not_satisfiable"}
    write = p["/process/{pid}/stdin"]["post"]
    assert {"process.not_running", "process.stdin_closed", "request.idempotency_conflict"} <= codes(write, 409)
    assert "request.bad_content_type" in codes(write, 415)
    health = p["/health"]["get"]
    assert "args.missing" not in codes(health, 400)  # no required arguments
    assert "413" not in health["responses"] and "415" not in health["responses"]  # GET: no body
    run = p["/commands/run"]["post"]
    assert {"policy.command_not_allowed", "policy.scope_required"} <= codes(run, 403)
    assert {"process.spawn_failed", "sandbox.unavailable", "ledger.unavailable"} <= codes(run, 503)
    # every listed code is in the error table, with the status it is listed under
    table = {line.split("`")[1]: int(line.split("|")[2]) for line in
             run_abx(["docs", "errors"]).stdout.splitlines() if line.startswith("| `")}
    for item in p.values():
        for o in item.values():
            for status, resp in o["responses"].items():
                if status.startswith(("4", "5")):
                    for c in codes(o, status):
                        assert table[c] == int(status), (o["operationId"], c, status)


def test_streaming_media_types(cli_openapi):
    p = cli_openapi["paths"]
    assert "text/event-stream" in p["/commands/stream"]["post"]["responses"]["200"]["content"]
    assert "application/octet-stream" in p["/files/download"]["get"]["responses"]["200"]["content"]
    assert "application/octet-stream" in p["/files/upload"]["put"]["requestBody"]["content"]


# -- served documents -----------------------------------------------------------------------

def test_served_openapi_names_the_server(server, token):
    d = server.get("/openapi.json", token=token).json()
    assert d["servers"] == [{"url": server.url}]
    # the Host the client used (step 0 admits loopback names)
    r = server.get("/openapi.json", token=token, headers={"Host": "localhost:%d" % server.port})
    assert r.json()["servers"] == [{"url": "http://localhost:%d" % server.port}]
    # the same document otherwise
    a = dict(d, servers=None)
    b = dict(r.json(), servers=None)
    assert a == b


def test_served_documents_filtered_per_principal(multi):
    a = multi.get("/openapi.json", token=ALICE_TOKEN).json()
    c = multi.get("/openapi.json", token=CAROL_TOKEN).json()
    b = multi.get("/openapi.json", token=BOB_TOKEN).json()
    assert a == c                                  # same role, same view
    # shared error responses are named by content: the same name in every view
    full = json.loads(run_abx(["openapi"]).stdout)["components"]["responses"]
    for name, resp in b["components"]["responses"].items():
        assert full[name] == resp
    assert "/files/read" in a["paths"] and "/files/read" not in b["paths"]
    assert {t["name"] for t in b["tags"]} == {"core", "doors"}  # the front doors are everyone's
    ops_b = multi.get("/ops", token=BOB_TOKEN).json()["ops"]
    assert {o["id"].split(".")[0] for o in ops_b} == {"core"}


def test_in_process_calls_get_json_documents(multi):
    """A batch runs core.ops.list through abx_call_internal: the cached bytes come back as JSON."""
    r = multi.post("/batch", token=ALICE_TOKEN, json_body={"calls": [{"op": "core.ops.list", "args": {}},
                                                                     {"op": "core.openapi.get", "args": {}}]})
    assert r.status_code == 200, r.text
    res = r.json()["results"]
    assert res[0]["status"] == 200 and res[0]["body"] == multi.get("/ops", token=ALICE_TOKEN).json()
    assert res[1]["body"]["openapi"] == "3.1.0" and "/files/read" in res[1]["body"]["paths"]


def test_concurrent_first_requests_agree(multi):
    """Many connections ask for the documents at once on a fresh snapshot: one build, one answer."""
    def get(i):
        tok = (ALICE_TOKEN, BOB_TOKEN, CAROL_TOKEN)[i % 3]
        path = "/openapi.json" if i % 2 else "/ops"
        return i, multi.get(path, token=tok).content
    with concurrent.futures.ThreadPoolExecutor(16) as ex:
        got = list(ex.map(get, range(48)))
    by_key = {}
    for i, body in got:
        key = ((i % 3) == 1, i % 2)  # bob or not, which document
        by_key.setdefault(key, set()).add(body)
    assert all(len(v) == 1 for v in by_key.values()), {k: len(v) for k, v in by_key.items()}


def test_reload_changes_the_served_documents(abx, workspace):
    """The cache hangs off the policy snapshot: a reload that mounts files.* for bob shows it."""
    s = abx(multi_config())
    before_ops = {o["id"] for o in s.get("/ops", token=BOB_TOKEN).json()["ops"]}
    before_api = s.get("/openapi.json", token=BOB_TOKEN).json()
    assert "files.read" not in before_ops and "/files/read" not in before_api["paths"]
    with open(s.config_path, "w") as f:
        f.write(multi_config(extra_allow='    - ops: ["files.read"]\n      principals: ["bob"]\n'
                                         '      paths: ["{ws}/**"]\n').replace("{ws}", workspace))
    os.kill(s.proc.pid, signal.SIGHUP)
    deadline = time.time() + 10
    while time.time() < deadline:
        if "files.read" in {o["id"] for o in s.get("/ops", token=BOB_TOKEN).json()["ops"]}:
            break
        time.sleep(0.1)
    after_ops = {o["id"] for o in s.get("/ops", token=BOB_TOKEN).json()["ops"]}
    after_api = s.get("/openapi.json", token=BOB_TOKEN).json()
    assert after_ops == before_ops | {"files.read"}
    assert "/files/read" in after_api["paths"] and "/files/list" not in after_api["paths"]
    # alice's view did not change
    assert "/files/list" in s.get("/openapi.json", token=ALICE_TOKEN).json()["paths"]
