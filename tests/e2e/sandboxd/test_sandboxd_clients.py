"""The sandboxd door (docs/fleet.md) with clients no one here wrote: Node's @grpc/grpc-js and
@grpc/proto-loader load agent-sandbox's published process.proto unchanged
(third_party/agent-sandbox) and drive Start, Execute, WriteStdin, SendSignal and ResizeTTY, a
context executing 1+1 (abx's own proto for the Full level) and a watch; policy denials arrive as
PERMISSION_DENIED / NOT_FOUND and are in the ledger with the router's traceparent. Every REST
route of the published filesystem.yaml is checked against that document by
openapi-response-validator. deploy/k8s validates against the vendored CRDs' schemas (ajv).
Packages pinned in package-lock.json, installed by install.sh; skipped, saying so, without Node
or the npm registry."""
import json
import os
import shutil
import sqlite3
import subprocess
import time

import pytest

from abxtest import free_port

HERE = os.path.dirname(os.path.abspath(__file__))
TOKEN = "pod-token-0123456789abcdef"
TRACE = "4bf92f3577b34da6a3ce929d0e0e4736"


@pytest.fixture(scope="module")
def npm():
    r = subprocess.run(["bash", os.path.join(HERE, "install.sh")], capture_output=True, text=True, timeout=600)
    if r.returncode == 3:
        pytest.skip("the sandboxd client tests need Node >= 20 and the npm registry: " + r.stderr.strip()[-300:])
    assert r.returncode == 0, r.stdout + r.stderr
    return HERE


@pytest.fixture
def pod(abx, workspace, tmp_path):
    """abx as a sandbox's runtime: the pod's token in a file, both sandboxd listeners."""
    cfg_dir = tmp_path / "etc"
    cfg_dir.mkdir()
    (cfg_dir / "token").write_text(TOKEN + "\n")
    os.makedirs(os.path.join(workspace, "secret"), exist_ok=True)
    with open(os.path.join(workspace, "secret", "key.txt"), "w") as f:
        f.write("k")
    rest, grpc = free_port(), free_port()
    s = abx({"workspace": workspace, "terminal_listen": "off", "ledger": {"path": str(cfg_dir / "ledger.db")},
             "sandboxd": {"rest_listen": "127.0.0.1:%d" % rest, "grpc_listen": "127.0.0.1:%d" % grpc,
                          "token_file": str(cfg_dir / "token"), "principal": "agent"},
             "auth": {"tokens": [{"principal": "agent", "roles": ["agent"], "token_file": str(cfg_dir / "token")}]},
             "policy": {
                 "allow": [
                     {"ops": ["core.*"], "principals": ["*"]},
                     {"ops": ["files.*", "process.*", "terminal.*", "commands.*"], "principals": ["role:agent"],
                      "paths": [workspace + "/**"],
                      "commands": {"allow": ["/bin/bash *", "/bin/cat *", "/bin/sleep *"], "env": ["TERM", "FOO"]}},
                     {"ops": ["kernels.*"], "principals": ["role:agent"], "paths": [workspace + "/**"],
                      "languages": ["python"]}],
                 "deny": [{"ops": ["files.*"], "principals": ["*"], "paths": [workspace + "/secret/**"]}]}},
            env={"SANDBOX_ID": "sbx-1234"})
    s.rest = "http://127.0.0.1:%d" % rest
    s.grpc = "127.0.0.1:%d" % grpc
    s.ledger_db = str(cfg_dir / "ledger.db")
    return s


def node(script, env, *args):
    r = subprocess.run(["node", os.path.join(HERE, script), *args], capture_output=True, text=True, timeout=180,
                       env=dict(os.environ, **env))
    assert r.stdout.strip(), "no report from %s:\n%s" % (script, r.stderr[-3000:])
    rep = json.loads(r.stdout.strip().splitlines()[-1])
    assert "failure" not in rep, rep["failure"]
    return rep


def ledger(s, sql, args=()):
    deadline = time.time() + 5
    while True:
        with sqlite3.connect(s.ledger_db) as db:
            rows = db.execute(sql, args).fetchall()
        if rows or time.time() > deadline:
            return rows
        time.sleep(0.05)


def test_grpc_process_service_with_grpc_js(npm, pod, workspace):
    rep = node("grpc_client.mjs", {"SBX_GRPC": pod.grpc, "SBX_TOKEN": TOKEN, "SBX_WS": workspace})
    # Start: init, the output as it comes, then the exit event
    st = rep["start"]
    assert st["events"][0] == "init" and st["pid"] > 0 and st["events"][-1] == "exit"
    assert st["stdout"] == "out\n" and st["stderr"] == "err\n" and st["exit"] == 3
    # Execute: exit code and the output at once, env vars passed
    assert rep["execute"]["ok"] == {"exitCode": 7, "stdout": "bar\n"}
    # stdin: bytes then EOF through WriteStdin, the echo on the Start stream
    assert rep["stdin"]["write"] == {"ok": {}} and rep["stdin"]["eof"] == {"ok": {}}
    assert rep["stdin"]["raw"] == {"ok": {}}, rep["stdin"]
    # bytes that are not UTF-8 pass both ways unchanged (process.write/stream in base64)
    assert rep["stdin"]["stdoutHex"] == b"hello stdin\n\xff\x00\xfe\n".hex() and rep["stdin"]["exit"] == 0
    # signals: SIGTERM ends the process (killed by a signal: -1, as Go's ExitCode())
    assert rep["signal"]["sent"] == {"ok": {}} and rep["signal"]["exit"] == -1
    # TTY: a PTY process resized, and stty inside sees the new size
    assert rep["tty"]["resize"] == {"ok": {}}
    assert "45 123" in rep["tty"]["stdout"] and rep["tty"]["exit"] == 0
    # Full level: a context (an abx kernel) executes 1+1
    assert rep["context"]["ok"]["contextId"] and rep["context"]["ok"]["language"] == "python"
    assert rep["code"]["ok"]["text"] == "2"
    assert {"mimeType": "text/plain", "data": "2"} in rep["code"]["ok"]["results"]
    assert rep["code_error"]["ok"]["error"]["name"] == "ZeroDivisionError"
    assert rep["delete_context"] == {"ok": {}}
    assert rep["watch"]["events"][0] == {"type": "TYPE_CREATED", "path": "watched.txt"}
    # denials and unknowns as gRPC status codes, abx's code leading the message
    assert rep["denied"]["code"] == "PERMISSION_DENIED"
    assert rep["denied"]["details"].startswith("policy.command_not_allowed")
    assert rep["denied_path"]["code"] == "PERMISSION_DENIED"
    assert rep["not_found"]["code"] == "NOT_FOUND" and rep["not_found"]["details"].startswith("process.not_found")
    assert rep["no_context"]["code"] == "NOT_FOUND" and rep["no_context"]["details"].startswith("kernel.not_found")
    assert rep["unauthenticated"]["code"] == "UNAUTHENTICATED"
    assert rep["invalid"]["code"] == "INVALID_ARGUMENT"
    # below the methods: unknown paths, undecodable messages, wrong framing
    assert rep["unimplemented"]["code"] == "UNIMPLEMENTED"
    assert rep["bad_message"]["code"] == "INVALID_ARGUMENT"
    assert rep["wrong_type"]["status"] == 200 and rep["wrong_type"]["grpcStatus"] == "12"
    assert rep["compressed"]["grpcStatus"] == "13" and "uncompressed" in rep["compressed"]["message"]
    assert rep["cut_short"]["grpcStatus"] == "13"
    # the ledger: door sandboxd, the router's traceparent in the groups, the denial recorded
    rows = ledger(pod, "SELECT g.op, e.data FROM action_events e JOIN action_groups g ON g.group_id = e.group_id "
                       "WHERE g.door = 'sandboxd' AND g.op = 'commands.run' AND e.data LIKE ?",
                  ("%policy.command_not_allowed%",))
    assert rows, "the denied Execute is not in the ledger"
    traced = ledger(pod, "SELECT DISTINCT g.op FROM action_events e JOIN action_groups g ON g.group_id = e.group_id "
                         "WHERE g.door = 'sandboxd' AND e.data LIKE ?", ("%" + TRACE + "%",))
    assert {"process.start", "commands.run", "kernels.create"} <= {r[0] for r in traced}
    clients = ledger(pod, "SELECT DISTINCT client FROM action_groups WHERE door = 'sandboxd' AND op = 'commands.run'")
    assert clients == [("127.0.0.1",)]


def test_grpc_many_calls_on_one_connection(npm, pod):
    rep = node("grpc_client.mjs", {"SBX_GRPC": pod.grpc, "SBX_TOKEN": TOKEN}, "parallel")
    for i, st in enumerate(rep["starts"]):
        assert st == {"stdout": "%d-1\n%d-2\n%d-3\n" % (i, i, i), "exit": i % 5, "code": None}, (i, st)
    assert rep["execs"] == ["x%d\n" % i for i in range(len(rep["execs"]))]


def test_grpc_failed_tokens_are_rate_limited(npm, abx, workspace, tmp_path):
    (tmp_path / "token").write_text(TOKEN)
    grpc = free_port()
    abx({"workspace": workspace, "terminal_listen": "off", "limits": {"auth_failures": 10},
         "sandboxd": {"rest_listen": "off", "grpc_listen": "127.0.0.1:%d" % grpc,
                      "token_file": str(tmp_path / "token"), "principal": "agent"},
         "auth": {"tokens": [{"principal": "agent", "roles": ["agent"], "token_file": str(tmp_path / "token")}]},
         "policy": {"allow": [{"ops": ["core.*"], "principals": ["*"]}]}})
    rep = node("grpc_client.mjs", {"SBX_GRPC": "127.0.0.1:%d" % grpc, "SBX_TOKEN": TOKEN}, "limit")
    assert rep["codes"][0] == "UNAUTHENTICATED" and rep["codes"][-1] == "RESOURCE_EXHAUSTED", rep


def test_grpc_over_tls(npm, workspace, tmp_path):
    """With top-level tls, the gRPC listener speaks HTTP/2 over TLS (ALPN h2) and may bind a
    non-loopback address; grpc-js trusts the test's own CA."""
    from abxtest import ABX_BIN
    key, cert = tmp_path / "key.pem", tmp_path / "cert.pem"
    subprocess.run(["openssl", "req", "-x509", "-newkey", "rsa:2048", "-nodes", "-days", "1", "-subj", "/CN=localhost",
                    "-addext", "subjectAltName=DNS:localhost,IP:127.0.0.1", "-keyout", str(key), "-out", str(cert)],
                   check=True, capture_output=True)
    (tmp_path / "token").write_text(TOKEN)
    grpc, main = free_port(), free_port()
    cfg = {"workspace": workspace, "terminal_listen": "off", "tls": {"cert": str(cert), "key": str(key)},
           "ledger": {"path": str(tmp_path / "ledger.db")},
           "sandboxd": {"rest_listen": "off", "grpc_listen": "0.0.0.0:%d" % grpc,
                        "token_file": str(tmp_path / "token"), "principal": "agent"},
           "auth": {"tokens": [{"principal": "agent", "roles": ["agent"], "token_file": str(tmp_path / "token")}]},
           "policy": {"allow": [{"ops": ["commands.*"], "principals": ["role:agent"], "paths": [workspace + "/**"],
                                 "commands": {"allow": ["/bin/bash *"]}}]}}
    (tmp_path / "abx.json").write_text(json.dumps(cfg))
    env = dict(os.environ, ABX_HOME=str(tmp_path / "home"))
    p = subprocess.Popen([ABX_BIN, "serve", "--config", str(tmp_path / "abx.json"), "--listen", "127.0.0.1:%d" % main],
                         stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, env=env, start_new_session=True)
    try:
        import socket
        deadline = time.time() + 10
        while time.time() < deadline:
            try:
                socket.create_connection(("127.0.0.1", grpc), timeout=0.2).close()
                break
            except OSError:
                assert p.poll() is None, p.stderr.read().decode()
                time.sleep(0.05)
        rep = node("grpc_client.mjs", {"SBX_GRPC": "localhost:%d" % grpc, "SBX_TOKEN": TOKEN, "SBX_CA": str(cert)},
                   "tls")
        assert rep["execute"] == {"ok": {"exitCode": 0, "stdout": "tls\n"}}, rep
        # cleartext h2c to a TLS listener is not served
        rep = node("grpc_client.mjs", {"SBX_GRPC": "127.0.0.1:%d" % grpc, "SBX_TOKEN": TOKEN}, "tls")
        assert rep["execute"]["code"] == "UNAVAILABLE", rep
    finally:
        p.terminate()
        p.wait(timeout=10)


def test_rest_routes_match_the_published_openapi(npm, pod, workspace):
    rep = node("rest_client.mjs", {"SBX_REST": pod.rest, "SBX_TOKEN": TOKEN})
    by = {c["name"]: c for c in rep["checks"]}
    for c in rep["checks"]:
        assert c["errors"] == [], (c["name"], c["status"], c["body"], c["errors"])
    assert by["metadata"]["body"] == {"env": {"SANDBOX_ID": "sbx-1234"}}
    assert by["get file"]["body"] == "hello sandboxd\n"
    assert [e["name"] for e in by["get dir"]["body"]["entries"]] == ["multi.txt", "note.txt"]
    assert by["get denied"]["body"]["code"] == "PERMISSION_DENIED"
    assert by["delete non-empty"]["body"]["message"].startswith("files.not_empty")
    assert not os.path.exists(os.path.join(workspace, "docs"))
    rows = ledger(pod, "SELECT count(*) FROM action_events e JOIN action_groups g ON g.group_id = e.group_id "
                       "WHERE g.door = 'sandboxd' AND g.op = 'files.write' AND e.data LIKE ?",
                  ("%0af7651916cd43dd8448eb211c80319c%",))
    assert rows[0][0] >= 1


def test_manifests_validate_against_the_crd_schemas(npm, tmp_path):
    rep = node("k8s_check.mjs", {})
    docs = {d["kind"]: d for d in rep["documents"]}
    assert set(docs) == {"SandboxTemplate", "SandboxWarmPool"}
    for d in rep["documents"]:
        assert d["errors"] == [], d
    t = docs["SandboxTemplate"]
    assert t["readiness"] == {"path": "/v1/health", "port": 8080} and t["ports"] == [8080, 9090]
    assert t["runAsNonRoot"] and t["capsDropped"] and t["readOnlyRoot"] and t["workspaceEmptyDir"]
    # the check is real: a manifest the schema refuses is reported
    bad = tmp_path / "k8s"
    bad.mkdir()
    src = os.path.join(HERE, "..", "..", "..", "deploy", "k8s", "sandbox-warmpool.yaml")
    shutil.copy(src, bad / "pool.yaml")
    with open(bad / "pool.yaml") as f:
        text = f.read().replace("replicas: 3", "replicas: many")
    (bad / "pool.yaml").write_text(text)
    rep = node("k8s_check.mjs", {}, str(bad))
    assert any("replicas" in e for e in rep["documents"][0]["errors"]), rep
