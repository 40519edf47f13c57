"""abx's MCP seen by the official implementations, from npm (pinned in tests/mcp/package-lock.json,
installed by tests/mcp/install.sh): the TypeScript SDK client over Streamable HTTP and over stdio
(`abx mcp`) lists the tools, calls a read op in both spellings, gets a policy denial as an isError
result and an unknown tool as -32602; and the MCP conformance suite's scenarios that apply to a
server without the reference test tools (initialize, ping, tools/list, multiple SSE streams, DNS
rebinding protection) pass. Skipped, saying so, only when the npm registry is unreachable."""
import json
import os
import subprocess

import pytest

import abxtest
from abxtest import ALICE_TOKEN, BOB_TOKEN, free_port, sha256_hex

HERE = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
MCP_DIR = os.path.join(os.path.dirname(HERE), "mcp")


@pytest.fixture(scope="module")
def npm_packages():
    r = subprocess.run(["bash", os.path.join(MCP_DIR, "install.sh")], capture_output=True, text=True, timeout=600)
    if r.returncode == 3:
        pytest.skip("MCP SDK tests need the npm registry: " + r.stderr.strip()[-300:])
    assert r.returncode == 0, r.stdout + r.stderr
    return MCP_DIR


def config(ws, tmp, origins=()):
    return {"workspace": ws, "terminal_listen": "off", "ledger": {"path": os.path.join(tmp, "ledger.db")},
            "allowed_origins": list(origins),
            "auth": {"tokens": [
                {"principal": "alice", "roles": ["agent"], "token_sha256": sha256_hex(ALICE_TOKEN)},
                {"principal": "bob", "roles": ["viewer"], "token_sha256": sha256_hex(BOB_TOKEN)}]},
            "policy": {"allow": [
                {"ops": ["core.*"], "principals": ["*"]},
                {"ops": ["files.*"], "principals": ["role:agent"], "paths": [ws + "/**"]}]}}


def run_client(args, env=None, cwd=None):
    e = dict(os.environ)
    e.pop("ABX_TOKEN", None)
    e.update(env or {})
    r = subprocess.run(["node", os.path.join(MCP_DIR, "client.mjs")] + args, capture_output=True, text=True,
                       timeout=120, env=e, cwd=cwd)
    assert r.stdout.strip(), "no report from the SDK client:\n" + r.stderr[-3000:]
    report = json.loads(r.stdout.strip().splitlines()[-1])
    assert r.returncode == 0 and "failure" not in report, report.get("failure", r.stderr[-3000:])
    return report


def check_report(rep, workspace):
    assert rep["server"]["name"] == "abx", rep
    assert rep["capabilities"] == {"tools": {"listChanged": True}}, rep
    names = [t["name"] for t in rep["tools"]]
    assert "files__list" in names and "files__read" in names and "core__health" in names, names
    assert "files__upload" not in names and all("." not in n for n in names), names
    read = [t for t in rep["tools"] if t["name"] == "files__read"][0]
    assert read["title"] == "files.read" and read["meta"]["abx/op"] == "files.read", read
    assert read["annotations"]["readOnlyHint"] is True, read
    assert rep["list"]["isError"] is False and "a.txt" in rep["list"]["text"], rep["list"]
    assert rep["dotted"]["isError"] is False and json.loads(rep["dotted"]["text"])["path"] == workspace, rep
    assert rep["denied"]["isError"] is True and rep["denied"]["text"].startswith("policy.path_not_allowed"), rep
    assert rep["unknown"]["error"] == -32602, rep
    assert rep["ping"] is True
    # typed results (revision 2025-06-18 on): every JSON tool has an outputSchema and its
    # structuredContent passes the SDK's client-side validation
    assert {"files__read", "files__list", "core__health"} <= set(rep["outputSchemas"]), rep["outputSchemas"]
    assert "files__watch" not in rep["outputSchemas"] and "files__download" not in rep["outputSchemas"]
    for name, t in rep["typed"].items():
        assert t == {"validator": True, "isError": False, "same": True}, (name, t)
    assert "does not match the tool's output schema" in rep["mismatch"], rep["mismatch"]


def test_sdk_client_over_streamable_http(npm_packages, abx, workspace, tmp_path):
    s = abx(config(workspace, str(tmp_path)))
    rep = run_client(["http", s.url + "/mcp", ALICE_TOKEN, workspace, "/etc/passwd"])
    check_report(rep, workspace)
    assert len(rep["sessionId"]) == 32, rep
    # the client ended its session (DELETE): the id is gone
    r = s.post("/mcp", token=ALICE_TOKEN, json_body={"jsonrpc": "2.0", "id": 1, "method": "ping"},
               headers={"Mcp-Session-Id": rep["sessionId"]})
    assert r.status_code == 404 and r.json()["error"]["data"]["code"] == "mcp.session_not_found", r.text


def test_sdk_client_over_stdio(npm_packages, workspace, tmp_path):
    path = str(tmp_path / "abx.json")
    with open(path, "w") as f:
        json.dump(config(workspace, str(tmp_path)), f)
    rep = run_client(["stdio", abxtest.ABX_BIN, workspace, "/etc/passwd", "--config", path, "--principal", "alice"],
                     env={"ABX_HOME": str(tmp_path / "home")})
    check_report(rep, workspace)
    # the embedded default: ABX_TOKEN not needed, principal local on the workspace
    rep = run_client(["stdio", abxtest.ABX_BIN, workspace, "/etc/passwd", "--workspace", workspace],
                     env={"ABX_HOME": str(tmp_path / "home2")}, cwd=workspace)
    check_report(rep, workspace)


CONFORMANCE = ["server-initialize", "ping", "tools-list", "server-sse-multiple-streams", "dns-rebinding-protection"]


def test_conformance_scenarios(npm_packages, abx, workspace, tmp_path):
    proxy_port = free_port()
    # the runner checks that a same-origin request is served: allow the proxy's origin
    s = abx(config(workspace, str(tmp_path), origins=["http://127.0.0.1:%d" % proxy_port]))
    proxy = subprocess.Popen(["node", os.path.join(MCP_DIR, "auth_proxy.mjs"), str(proxy_port), s.url, ALICE_TOKEN],
                             stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    try:
        assert proxy.stdout.readline().strip() == "ready", proxy.stderr.read()
        runner = os.path.join(MCP_DIR, "node_modules", ".bin", "conformance")
        for sc in CONFORMANCE:
            r = subprocess.run([runner, "server", "--url", "http://127.0.0.1:%d/mcp" % proxy_port, "--scenario", sc],
                               capture_output=True, text=True, timeout=180, cwd=str(tmp_path))
            out = r.stdout + r.stderr
            assert r.returncode == 0 and " 0 failed" in out and "Passed: 0/" not in out, "%s:\n%s" % (sc, out[-3000:])
    finally:
        proxy.terminate()
        proxy.wait(10)


# -- long calls (issue 25) -----------------------------------------------------------------------
# The SDK's default request timeout is 60 s; a `sleep 65` would take a minute per run, so the
# test configures a 2 s door soft timeout and a 1.5 s client timeout instead: the same paths.

def long_config(ws, tmp):
    c = config(ws, tmp)
    c["limits"] = {"tool_soft_timeout": "2s", "progress_interval": "500ms"}
    c["policy"]["allow"] += [
        {"ops": ["commands.run"], "principals": ["role:agent"], "paths": [ws + "/**"], "commands": ["sh *"]},
        {"ops": ["process.wait", "process.output"], "principals": ["role:agent"]}]
    return c


def run_long(args, env=None):
    e = dict(os.environ)
    e.pop("ABX_TOKEN", None)
    e.update(env or {})
    r = subprocess.run(["node", os.path.join(MCP_DIR, "long.mjs")] + args, capture_output=True, text=True,
                       timeout=120, env=e)
    assert r.stdout.strip(), "no report from the SDK client:\n" + r.stderr[-3000:]
    rep = json.loads(r.stdout.strip().splitlines()[-1])
    assert r.returncode == 0 and "failure" not in rep, json.dumps(rep)[-3000:]
    return rep


def check_long(rep):
    assert rep["first"]["status"] == "running" and 1800 <= rep["first"]["ms"] < 3500, rep
    assert rep["waited"] == {"status": "completed", "exit_code": 0, "polls": rep["waited"]["polls"],
                             "stdout": "built\n"} and rep["waited"]["polls"] >= 1, rep
    k = rep["kept"]
    assert k["isError"] is False and k["result"]["stdout"] == "kept\n" and k["ms"] >= 2900, rep
    assert k["progress"] >= 3, rep
    assert rep["control"] == "-32001", rep  # RequestTimeout: the client gave up without progress resets


def test_sdk_long_calls_over_streamable_http(npm_packages, abx, workspace, tmp_path):
    s = abx(long_config(workspace, str(tmp_path)))
    check_long(run_long(["http", s.url + "/mcp", ALICE_TOKEN]))


def test_sdk_long_calls_over_stdio(npm_packages, workspace, tmp_path):
    path = str(tmp_path / "abx.json")
    with open(path, "w") as f:
        json.dump(long_config(workspace, str(tmp_path)), f)
    check_long(run_long(["stdio", abxtest.ABX_BIN, "--config", path, "--principal", "alice"],
                        env={"ABX_HOME": str(tmp_path / "home")}))
