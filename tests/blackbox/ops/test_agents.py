"""agents.*: the seed's adapter selection for the generic ops and /v1 routes, case by case
(path prefix, X-ABX-Adapter, a model string naming an adapter, agents.default, the only
mounted adapter, else 400 agents.adapter_required / 404 when none is), the two-level gate,
the agents: scope (policy.scope_required), agent ops not mounted by "*", and step 8's lazy
install refusing a requirement install.allow does not name (403) or failing with the
installer's message (503). Offline: the CLIs are faked as installed where a session only
needs to be created; tests/e2e/agents drives the real CLIs."""
import json
import os

import pytest

from abxtest import ALICE_TOKEN, BOB_TOKEN, CAROL_TOKEN, ADMIN_TOKEN, VAL_TOKEN, assert_error, run_abx, tokens

ALL_TOKENS = tokens("alice", "bob", "carol", "root", "val")
AGENTS = ["codex", "claude_code"]


def fake_install(d, name, bin_rel):
    """A requirement that looks installed (marker and program), so no install runs."""
    root = os.path.join(d, name)
    os.makedirs(os.path.dirname(os.path.join(root, bin_rel)), exist_ok=True)
    with open(os.path.join(root, bin_rel), "w") as f:
        f.write("#!/bin/sh\nexit 0\n")
    os.chmod(os.path.join(root, bin_rel), 0o755)
    with open(os.path.join(root, "abx-install.json"), "w") as f:
        json.dump({"name": name}, f)


def config(ws, inst, agents_cfg=None, extra=None, install_allow=()):
    allow = [
        {"ops": ["core.*"], "principals": ["*"]},
        # alice: both adapters and the generic ops
        {"ops": ["agents.*"], "principals": ["alice", "val"], "paths": [ws + "/**"], "agents": AGENTS},
        # bob: codex only (its ops and the generic ones)
        {"ops": ["agents.codex.*", "agents.sessions.*"], "principals": ["bob"], "paths": [ws + "/**"],
         "agents": AGENTS},
        # carol: the generic ops only, no adapter
        {"ops": ["agents.sessions.*"], "principals": ["carol"], "paths": [ws + "/**"], "agents": AGENTS},
        # root: codex's own ops only, not the generic ones
        {"ops": ["agents.codex.*"], "principals": ["root"], "paths": [ws + "/**"], "agents": ["codex"]},
    ] + list(extra or [])
    c = {"workspace": ws, "terminal_listen": "off", "auth": {"tokens": ALL_TOKENS}, "policy": {"allow": allow},
         "install": {"allow": list(install_allow), "dir": inst}}
    if agents_cfg is not None:
        c["agents"] = agents_cfg
    return c


@pytest.fixture
def inst(tmp_path):
    d = str(tmp_path / "inst")
    fake_install(d, "codex-cli", "node_modules/@openai/codex/bin/codex.js")
    fake_install(d, "claude-code", "node_modules/@anthropic-ai/claude-code/bin/claude.exe")
    return d


@pytest.fixture
def srv(abx, workspace, inst):
    return abx(config(workspace, inst))


def create(s, token=ALICE_TOKEN, path="/v1/agents/sessions", body=None, headers=None):
    return s.post(path, token=token, json_body=body or {}, headers=headers)


def picked(r, adapter, by):
    assert r.status_code == 200, r.text
    j = r.json()
    assert (j["adapter"], j["selected_by"]) == (adapter, by), j
    return j


def test_selection_order_case_by_case(srv):
    # (1) the path prefix, wire or id spelling; it beats the header
    picked(create(srv, path="/agents/codex/v1/agents/sessions"), "codex", "path")
    picked(create(srv, path="/agents/claude-code/v1/agents/sessions"), "claude_code", "path")
    picked(create(srv, path="/agents/codex/v1/agents/sessions", headers={"X-ABX-Adapter": "claude-code"}),
           "codex", "path")
    assert_error(create(srv, path="/agents/nope/v1/agents/sessions"), 404, "op.not_enabled")
    # (2) the header; it beats the model string
    picked(create(srv, headers={"X-ABX-Adapter": "claude-code"}, body={"model": "codex"}), "claude_code", "header")
    picked(create(srv, headers={"X-ABX-Adapter": "codex"}), "codex", "header")
    assert_error(create(srv, headers={"X-ABX-Adapter": "gpt"}), 404, "op.not_enabled")
    # (3) a model string equal to an adapter name (the adapter's default model is used)
    j = picked(create(srv, body={"model": "claude-code"}), "claude_code", "model")
    assert j["model"] != "claude-code"
    picked(create(srv, body={"model": "claude_code"}), "claude_code", "model")
    picked(create(srv, body={"model": "codex"}), "codex", "model")
    # real model names never select an adapter, never 404, and pass through upstream
    assert_error(create(srv, body={"model": "gpt-5-codex"}), 400, "agents.adapter_required")
    j = picked(create(srv, headers={"X-ABX-Adapter": "codex"}, body={"model": "gpt-5-codex"}), "codex", "header")
    assert j["model"] == "gpt-5-codex"
    # (6) nothing chose and two are mounted
    assert_error(create(srv), 400, "agents.adapter_required")


def test_selection_default_and_only_mounted(abx, workspace, inst):
    s = abx(config(workspace, inst, agents_cfg={"default": "claude_code"}))
    # (4) config agents.default
    picked(create(s), "claude_code", "default")
    # an explicit choice still wins over the default
    picked(create(s, body={"model": "codex"}), "codex", "model")
    s2 = abx(config(workspace, inst))
    # (5) the only adapter mounted for bob
    picked(create(s2, token=BOB_TOKEN), "codex", "only_mounted")
    # a selected adapter that is not mounted is the one 404 (header, path, model alike)
    assert_error(create(s2, token=BOB_TOKEN, headers={"X-ABX-Adapter": "claude-code"}), 404, "op.not_enabled")
    assert_error(create(s2, token=BOB_TOKEN, path="/agents/claude_code/v1/agents/sessions"), 404, "op.not_enabled")
    assert_error(create(s2, token=BOB_TOKEN, body={"model": "claude-code"}), 404, "op.not_enabled")
    # none mounted: 404 op.not_enabled (carol has only the generic ops)
    assert_error(create(s2, token=CAROL_TOKEN), 404, "op.not_enabled")
    assert_error(create(s2, token=CAROL_TOKEN, headers={"X-ABX-Adapter": "codex"}), 404, "op.not_enabled")


def test_two_level_gate(srv):
    # root has agents.codex.* but not the generic ops: the /v1 route is not there for it ...
    assert_error(create(srv, token=ADMIN_TOKEN, headers={"X-ABX-Adapter": "codex"}), 404, "op.not_enabled")
    # ... while its own op is
    r = srv.op("agents.codex.sessions.create", {}, token=ADMIN_TOKEN)
    assert r.status_code == 200, r.text
    sid = r.json()["id"]
    assert srv.op("agents.codex.sessions.get", {"id": sid}, token=ADMIN_TOKEN).json()["adapter"] == "codex"
    # a session of one adapter is not found through the other's ops or prefix
    j = picked(create(srv, headers={"X-ABX-Adapter": "codex"}), "codex", "header")
    assert_error(srv.op("agents.claude_code.sessions.get", {"id": j["id"]}, token=ALICE_TOKEN), 404,
                 "agents.session_not_found")
    assert_error(srv.get("/agents/claude-code/v1/agents/sessions/" + j["id"], token=ALICE_TOKEN), 404,
                 "agents.session_not_found")
    assert srv.get("/v1/agents/sessions/" + j["id"], token=ALICE_TOKEN).json()["id"] == j["id"]
    # sessions are the caller's own
    assert_error(srv.get("/v1/agents/sessions/" + j["id"], token=VAL_TOKEN), 404, "agents.session_not_found")
    listed = srv.get("/v1/agents/sessions", token=ALICE_TOKEN).json()["sessions"]
    assert j["id"] in [x["id"] for x in listed]
    assert srv.get("/v1/agents/sessions", token=VAL_TOKEN).json()["sessions"] == []
    r = srv.request("DELETE", "/v1/agents/sessions/" + j["id"], token=ALICE_TOKEN)
    assert r.status_code == 200 and r.json()["deleted"] is True
    assert_error(srv.get("/v1/agents/sessions/" + j["id"], token=ALICE_TOKEN), 404, "agents.session_not_found")


def test_agents_scope_checks_the_selected_adapter(abx, workspace, inst):
    extra = [{"ops": ["agents.*"], "principals": ["carol"], "paths": [workspace + "/**"], "agents": ["codex"]}]
    s = abx(config(workspace, inst, extra=extra))
    picked(create(s, token=CAROL_TOKEN, headers={"X-ABX-Adapter": "codex"}), "codex", "header")
    r = create(s, token=CAROL_TOKEN, headers={"X-ABX-Adapter": "claude-code"})
    assert r.status_code == 403, r.text
    assert "agents" in r.json()["error"]["message"]
    r = s.op("agents.claude_code.sessions.create", {}, token=CAROL_TOKEN)
    assert r.status_code == 403, r.text


def test_scope_required(abx, workspace, inst, tmp_path):
    bad = config(workspace, inst, extra=[{"ops": ["agents.codex.run"], "principals": ["carol"],
                                          "paths": [workspace + "/**"]}])
    path = tmp_path / "bad.json"
    path.write_text(json.dumps(bad))
    out = run_abx(["check-config", str(path)])
    assert out.returncode == 1 and "config.scope_required" in out.stdout, out.stdout
    bad["allow_lint_errors"] = True
    s = abx(bad)
    assert_error(s.op("agents.codex.run", {"prompt": "x"}, token=CAROL_TOKEN), 403, "policy.scope_required")


def test_star_does_not_mount_agent_ops(server):
    # the embedded default's preset mounts "*": the agents that start CLIs are not in it
    assert_error(server.op("agents.codex.run", {"prompt": "x"}, token=server.token), 404, "op.not_enabled")
    assert_error(server.post("/v1/agents/sessions", token=server.token, json_body={}), 404, "op.not_enabled")


def test_install_not_allowed_before_anything_runs(abx, workspace, tmp_path):
    inst = str(tmp_path / "empty-inst")
    s = abx(config(workspace, inst))
    r = s.op("agents.codex.run", {"prompt": "hello"}, token=ALICE_TOKEN)
    assert_error(r, 403, "install.not_allowed")
    assert "codex-cli" in r.json()["error"]["message"]
    # the generic route refuses the same way once it knows the adapter
    assert_error(create(s, headers={"X-ABX-Adapter": "claude-code"}), 403, "install.not_allowed")
    assert not os.path.exists(os.path.join(inst, "codex-cli"))


def test_install_failure_is_503_with_the_installers_message(abx, workspace, tmp_path):
    inst = str(tmp_path / "inst2")
    c = config(workspace, inst, install_allow=["codex-cli"])
    # a registry nobody serves: the installer's npm fails and says why
    c["install"]["registry"] = "http://registry.test:9/"
    c["egress"] = {"resolve": {"registry.test": "127.0.0.1"}}
    s = abx(c)
    r = s.op("agents.codex.sessions.create", {}, token=ALICE_TOKEN, )
    assert_error(r, 503, "install.failed")
    msg = r.json()["error"]["message"]
    assert "npm pack" in msg and "codex-cli" in msg, msg
    assert not os.path.exists(os.path.join(inst, "codex-cli"))
    out = run_abx(["ledger", "tail", "-n", "20", "--config", s.config_path], home=s.home)
    assert '"install"' in out.stdout and '"failed"' in out.stdout, out.stdout[-2000:]
    chk = run_abx(["install", "--check", "--dir", inst, "--json"])
    j = json.loads(chk.stdout)
    assert chk.returncode == 0 and not any(e["installed"] for e in j["requirements"])


def test_install_check_verifies_hashes(tmp_path, inst):
    out = run_abx(["install", "--check", "--dir", inst, "--json"])
    assert out.returncode == 1, out.stdout  # the fakes have no tarball matching the manifest
    j = json.loads(out.stdout)
    names = {e["name"]: e for e in j["requirements"]}
    assert set(names) == {"codex-cli", "claude-code"}
    assert names["codex-cli"]["installed"] and not names["codex-cli"]["verified"]
    assert "cannot be read" in names["codex-cli"]["error"]
    assert names["codex-cli"]["integrity"].startswith("sha512-")


# A stand-in for codex (run as `node codex.js exec --json ...`): it prints codex's JSONL
# for one command and a message, and says what it was given.
FAKE_CODEX = r"""
const argv = process.argv.slice(2);
const prompt = argv[argv.length - 1];
const out = (o) => process.stdout.write(JSON.stringify(o) + "\n");
if (prompt.includes("FAIL")) { process.stderr.write("boom: the model is gone\n"); process.exit(3); }
const resumed = argv.indexOf("resume") >= 0 ? argv[argv.indexOf("resume") + 1] : null;
out({type: "thread.started", thread_id: resumed || "t-fake"});
out({type: "turn.started"});
out({type: "item.started", item: {id: "item_1", type: "command_execution", command: "bash -lc 'echo hi'",
     aggregated_output: "", exit_code: null, status: "in_progress"}});
const finish = () => {
  out({type: "item.completed", item: {id: "item_1", type: "command_execution", command: "bash -lc 'echo hi'",
       aggregated_output: "hi\n", exit_code: 0, status: "completed"}});
  out({type: "item.completed", item: {id: "item_2", type: "agent_message",
       text: "argv=" + argv.join(" ") + " key=" + (process.env.OPENAI_API_KEY || "none")}});
  out({type: "turn.completed", usage: {input_tokens: 1, output_tokens: 1}});
};
if (prompt.includes("SLOW")) setTimeout(finish, 2500); else finish();
"""


@pytest.fixture
def fake_srv(abx, workspace, tmp_path):
    d = str(tmp_path / "inst-fake")
    fake_install(d, "codex-cli", "node_modules/@openai/codex/bin/codex.js")
    with open(os.path.join(d, "codex-cli", "node_modules/@openai/codex/bin/codex.js"), "w") as f:
        f.write(FAKE_CODEX)
    return abx(config(workspace, d))


def test_turn_events_streamed_mapped_and_one_turn_at_a_time(fake_srv):
    s = fake_srv
    sid = s.op("agents.codex.sessions.create", {}, token=ALICE_TOKEN).json()["id"]
    box = {}

    def first():
        box["r"] = s.post("/v1/agents/sessions/%s/events" % sid, token=ALICE_TOKEN,
                          json_body={"text": "SLOW please"}, timeout=30)

    import threading
    t = threading.Thread(target=first)
    t.start()
    import time
    deadline = time.time() + 10
    while time.time() < deadline and not s.op("agents.codex.sessions.get", {"id": sid}, token=ALICE_TOKEN).json()["busy"]:
        time.sleep(0.05)
    assert_error(s.op("agents.codex.sessions.send_event", {"id": sid, "text": "again"}, token=ALICE_TOKEN), 409,
                 "agents.session_busy")
    assert_error(s.op("agents.codex.sessions.delete", {"id": sid}, token=ALICE_TOKEN), 409, "agents.session_busy")
    t.join()
    from abxtest import parse_sse
    evs = parse_sse(box["r"].text)
    names = [e["event"] for e in evs]
    assert names == ["start", "session", "tool_call", "tool_result", "message", "final", "result"], names
    call = json.loads(evs[2]["data"])
    assert call == {"type": "tool_call", "id": "item_1", "tool": "command", "command": "bash -lc 'echo hi'"}
    res = json.loads(evs[-1]["data"])
    assert res["ok"] is True and res["thread"] == "t-fake" and res["tool_calls"][0]["output"] == "hi\n"
    # what the CLI was given: codex's own sandbox off inside abx's, the model provider, no key
    assert "--sandbox danger-full-access" in res["final"] and "exec --json" in res["final"]
    assert "key=none" in res["final"]
    got = s.op("agents.codex.sessions.get", {"id": sid}, token=ALICE_TOKEN).json()
    assert got["turns"] == 1 and got["thread"] == "t-fake" and not got["busy"]
    # the second turn resumes the CLI's conversation
    r = s.op("agents.codex.sessions.send_event", {"id": sid, "text": "more", "stream": False}, token=ALICE_TOKEN)
    assert r.status_code == 200 and "resume t-fake" in r.json()["final"], r.text


def test_cli_that_ends_without_an_answer(fake_srv):
    r = fake_srv.op("agents.codex.run", {"prompt": "FAIL now"}, token=ALICE_TOKEN)
    assert r.status_code == 200, r.text
    j = r.json()
    assert j["ok"] is False and j["final"] is None and j["exit_code"] == 3
    err = [e for e in j["events"] if e["type"] == "error"]
    assert err and "boom: the model is gone" in err[0]["message"] and err[0]["exit_code"] == 3


# A stand-in for Claude Code (`claude -p --output-format stream-json ...`): its stream-json
# lines for one Bash call, a Write, and the result; it echoes --resume's value.
FAKE_CLAUDE = r"""#!/bin/sh
resume=none
while [ $# -gt 0 ]; do [ "$1" = "--resume" ] && resume="$2"; shift; done
printf '%s\n' '{"type":"system","subtype":"init","session_id":"c-fake"}'
printf '%s\n' '{"type":"assistant","message":{"content":[{"type":"text","text":"on it"},{"type":"tool_use","id":"u1","name":"Bash","input":{"command":"echo hi > out.txt"}}]}}'
printf '%s\n' '{"type":"user","message":{"content":[{"type":"tool_result","tool_use_id":"u1","content":"","is_error":false}]}}'
printf '%s\n' '{"type":"assistant","message":{"content":[{"type":"tool_use","id":"u2","name":"Write","input":{"file_path":"/w/b.txt","content":"x"}}]}}'
printf '{"type":"result","subtype":"success","result":"finished resume=%s key=%s","usage":{"output_tokens":1}}\n' "$resume" "$ANTHROPIC_API_KEY"
"""


def test_claude_code_ops_with_a_stand_in(abx, workspace, tmp_path):
    d = str(tmp_path / "inst-claude")
    rel = "node_modules/@anthropic-ai/claude-code/bin/claude.exe"
    fake_install(d, "claude-code", rel)
    fake_install(d, "codex-cli", "node_modules/@openai/codex/bin/codex.js")
    with open(os.path.join(d, "claude-code", rel), "w") as f:
        f.write(FAKE_CLAUDE)
    s = abx(config(workspace, d))
    r = s.op("agents.claude_code.run", {"prompt": "do it"}, token=ALICE_TOKEN)
    assert r.status_code == 200, r.text
    j = r.json()
    assert j["ok"] and j["thread"] == "c-fake"
    # the CLI sees a placeholder key (the egress proxy puts the real one on the wire)
    assert j["final"] == "finished resume=none key=abx-egress-injects-the-key"
    assert [e["type"] for e in j["events"]] == ["session", "message", "tool_call", "tool_result", "tool_call",
                                                "file_change", "final"]
    assert j["tool_calls"][0]["command"] == "echo hi > out.txt" and j["tool_calls"][0]["error"] is False
    assert {"type": "file_change", "path": "/w/b.txt", "kind": "add"} in j["events"]
    sid = s.op("agents.claude_code.sessions.create", {}, token=ALICE_TOKEN).json()["id"]
    for _ in range(2):
        r = s.op("agents.claude_code.sessions.send_event", {"id": sid, "text": "go", "stream": False},
                 token=ALICE_TOKEN)
        assert r.status_code == 200, r.text
    assert r.json()["final"].startswith("finished resume=c-fake")   # the second turn resumed
    listed = s.op("agents.claude_code.sessions.list", {}, token=ALICE_TOKEN).json()["sessions"]
    assert [x["id"] for x in listed] == [sid] and listed[0]["turns"] == 2
    assert s.op("agents.codex.sessions.list", {}, token=ALICE_TOKEN).json()["sessions"] == []
    assert s.op("agents.claude_code.sessions.delete", {"id": sid}, token=ALICE_TOKEN).json()["deleted"] is True
    assert s.op("agents.claude_code.sessions.list", {}, token=ALICE_TOKEN).json()["sessions"] == []
