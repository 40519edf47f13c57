"""codex (npm @openai/codex, `codex exec --json`) as agents.codex.* and Claude Code (npm
@anthropic-ai/claude-code, `claude -p --output-format stream-json`) as
agents.claude_code.*: each installed lazily by abx from the npm registry (once under
concurrency), run confined against the scripted model server (Responses API for codex,
Messages API for Claude Code) with the key injected by the egress proxy."""
import json
import os

import pytest
import requests

from abxtest import ALICE_TOKEN, assert_error, parse_sse, run_abx
from agentsutil import KEY, concurrently, config, ensure_installed, env, files_containing, ledger_events
from modelserver import ModelServer


@pytest.fixture(scope="module")
def inst(tmp_path_factory):
    return str(tmp_path_factory.mktemp("agents-install"))


# adapter, its requirement, its wire name, the request path and header the key must reach
ADAPTERS = [("codex", "codex-cli", "codex", "/responses", "authorization", "Bearer "),
            ("claude_code", "claude-code", "claude-code", "/messages", "x-api-key", "")]


@pytest.fixture(params=ADAPTERS, ids=[a[0] for a in ADAPTERS])
def ad(request):
    return request.param


@pytest.fixture
def model():
    m = ModelServer()
    yield m
    m.close()


@pytest.fixture
def srv(abx, workspace, inst, model):
    return abx(config(workspace, inst, model.port), env=env())


def run(srv, ad, prompt, **kw):
    r = srv.post("/ops/agents.%s.run" % ad[0], token=ALICE_TOKEN, json_body=dict({"prompt": prompt, "timeout": 120}, **kw),
                 timeout=180)
    assert r.status_code == 200, r.text[:2000]
    return r.json()


def test_lazy_install_once_under_concurrency(abx, workspace, inst, model, ad):
    s = abx(config(workspace, inst, model.port), env=env())
    op = "agents.%s.sessions.create" % ad[0]
    rs = concurrently([lambda: ensure_installed(s, op) for _ in range(3)])
    for r in rs:
        assert r.status_code == 200, r.text[:2000]
    installs = [e for e in ledger_events(s, "install") if e["name"] == ad[1]]
    assert len(installs) == 1 and installs[0]["result"] == "installed", installs
    # later calls find it: no new install
    assert s.op(op, {}, token=ALICE_TOKEN).status_code == 200
    assert len([e for e in ledger_events(s, "install") if e["name"] == ad[1]]) == 1
    chk = run_abx(["install", "--check", "--dir", inst, "--json"])
    j = {e["name"]: e for e in json.loads(chk.stdout)["requirements"]}
    assert j[ad[1]]["installed"] and j[ad[1]]["verified"], chk.stdout


def test_refused_when_not_allowed(abx, workspace, tmp_path, model, ad):
    s = abx(config(workspace, str(tmp_path / "none"), model.port, install_allow=()), env=env())
    assert_error(s.op("agents.%s.run" % ad[0], {"prompt": "TASK: write"}, token=ALICE_TOKEN), 403,
                 "install.not_allowed")
    assert model.requests == []


def test_run_writes_confined_in_cwd_and_the_key_stays_outside(srv, workspace, model, ad):
    ensure_installed(srv, "agents.%s.sessions.create" % ad[0])
    res = run(srv, ad, "TASK: write")
    assert res["ok"] is True, res
    assert res["final"].startswith("DONE:"), res
    with open(os.path.join(workspace, "out.txt")) as f:
        assert f.read() == "hi\n"
    assert "out.txt" in res["files_changed"]
    calls = res["tool_calls"]
    assert any("echo hi > out.txt" in (c.get("command") or "") and c.get("exit_code") in (0, None)
               and not c.get("error") for c in calls), calls
    # the key reached the model server, through the proxy's injection
    auths = [r["headers"].get(ad[4]) for r in model.requests if ad[3] in r["path"]]
    assert auths and all(a == ad[5] + KEY for a in auths), auths
    # ... and the ledger has the tool call and the final message, in the call's group
    evs = ledger_events(srv, "agent")
    op = "agents.%s.run" % ad[0]
    kinds = [e["event"]["type"] for e in evs if e["op"] == op]
    assert "tool_call" in kinds and "tool_result" in kinds and "final" in kinds, kinds
    assert len({e["group"] for e in evs if e["op"] == op}) == 1
    assert any(e["event"].get("command") and "echo hi" in e["event"]["command"] for e in evs)


def test_key_is_nowhere_the_cli_can_read(srv, workspace, model, ad):
    ensure_installed(srv, "agents.%s.sessions.create" % ad[0])
    res = run(srv, ad, "TASK: env")
    seen = "\n".join(model.tool_outputs())
    assert "PATH=" in seen, seen[:500]          # the model saw env's output ...
    assert KEY not in seen                        # ... without the key
    assert "HTTP_PROXY=http://127.0.0.1:3128" in seen  # the CLI reaches out through the proxy only
    assert KEY not in json.dumps(res)
    homes = [os.path.join(srv.home, d) for d in os.listdir(srv.home)]
    assert not files_containing(workspace, KEY)
    for h in homes:
        if os.path.isdir(h) and not h.endswith(".abx"):
            assert not files_containing(h, KEY), h


def test_shadow_refused_by_confinement_and_the_model_sees_it(srv, model, ad):
    ensure_installed(srv, "agents.%s.sessions.create" % ad[0])
    res = run(srv, ad, "TASK: shadow")
    seen = "\n".join(model.tool_outputs())
    assert "root:" not in seen
    assert "Permission denied" in seen or "No such file" in seen, seen[:800]
    assert res["final"].startswith("DONE:") and ("Permission denied" in res["final"] or "No such file" in res["final"])


def test_unlisted_host_refused_by_egress_and_the_model_sees_it(srv, model, ad):
    ensure_installed(srv, "agents.%s.sessions.create" % ad[0])
    res = run(srv, ad, "TASK: connect")
    seen = "\n".join(model.tool_outputs())
    assert "egress to unlisted.test denied" in seen, seen[:800]  # the proxy's answer, as curl printed it
    assert res["ok"] is True
    egress = [e for e in ledger_events(srv, "egress") if e.get("host") == "unlisted.test"]
    assert egress and all(e["decision"] == "deny" for e in egress), egress


def test_session_keeps_context_and_streams_events(srv, workspace, model, ad):
    ensure_installed(srv, "agents.%s.sessions.create" % ad[0])
    r = srv.post("/agents/%s/v1/agents/sessions" % ad[2], token=ALICE_TOKEN, json_body={})
    assert r.status_code == 200, r.text
    sid = r.json()["id"]
    r = srv.post("/v1/agents/sessions/%s/events" % sid, token=ALICE_TOKEN,
                 json_body={"text": "TASK: remember banana", "timeout": 120}, stream=True, timeout=180)
    assert r.status_code == 200 and r.headers["Content-Type"].startswith("text/event-stream")
    events = parse_sse(r.text)
    names = [e["event"] for e in events]
    assert names[0] == "start" and names[-1] == "result", names
    assert "session" in names and "final" in names
    result = json.loads(events[-1]["data"])
    assert result["final"] == "noted"
    thread = result["thread"]
    r = srv.post("/v1/agents/sessions/%s/events" % sid, token=ALICE_TOKEN,
                 json_body={"text": "TASK: recall", "stream": False, "timeout": 120}, timeout=180)
    assert r.status_code == 200, r.text
    assert r.json()["final"] == "you said banana"
    assert r.json()["thread"] == thread
    got = srv.get("/v1/agents/sessions/" + sid, token=ALICE_TOKEN).json()
    assert got["turns"] == 2 and got["thread"] == thread and got["last_final"] == "you said banana"
