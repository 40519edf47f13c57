"""Every policy denial names what to change (the statement and the key), and
`abx serve --explain-denials` puts the decision trace in the denial's details.trace."""
import pytest

from abxtest import ALICE_TOKEN, assert_error, tokens


def make_config(ws, deny=None):
    policy = {"allow": [
        {"ops": ["core.*"], "principals": ["*"]},
        {"id": "edit-sub", "ops": ["files.read", "files.write"], "principals": ["alice"],
         "paths": {"read": [ws + "/**"], "write": [ws + "/sub/**"]}},
        {"id": "run-echo", "ops": ["commands.run"], "principals": ["alice"], "paths": [ws + "/**"],
         "commands": {"allow": ["echo *"], "env": ["FOO"]}},
    ]}
    if deny:
        policy["deny"] = deny
    return {"workspace": ws, "terminal_listen": "off", "auth": {"tokens": tokens("alice")}, "policy": policy}


@pytest.fixture
def srv(abx, workspace):
    return abx(make_config(workspace, deny=[{"id": "no-secrets", "ops": ["files.read"], "principals": ["*"],
                                             "paths": [workspace + "/secret*"]}]))


def message(r, status, code):
    return assert_error(r, status, code)["error"]["message"]


def test_path_outside_write_scope_names_statement_and_key(srv):
    m = message(srv.post("/files/write", token=ALICE_TOKEN, json_body={"path": "top.txt", "content": "x"}),
                403, "policy.path_not_allowed")
    assert "paths.write" in m and "edit-sub" in m, m


def test_path_outside_every_scope_names_the_key(srv):
    m = message(srv.get("/files/read", token=ALICE_TOKEN, params={"path": "/etc/hostname"}),
                403, "policy.path_not_allowed")
    assert "paths.read" in m and "edit-sub" in m and "add a pattern" in m, m


def test_command_outside_patterns_names_program_and_key(srv):
    m = message(srv.post("/commands/run", token=ALICE_TOKEN, json_body={"command": "wc -c a.txt"}),
                403, "policy.command_not_allowed")
    assert "run-echo" in m and "commands.allow" in m and "wc" in m, m


def test_env_outside_allowlist_names_key(srv):
    m = message(srv.post("/commands/run", token=ALICE_TOKEN, json_body={"command": "echo x", "env": {"BAR": "1"}}),
                403, "policy.command_not_allowed")
    assert "BAR" in m and "run-echo" in m and "commands.env" in m, m


def test_deny_statement_named(srv, workspace):
    with open(workspace + "/secret.txt", "w") as f:
        f.write("s")
    m = message(srv.get("/files/read", token=ALICE_TOKEN, params={"path": "secret.txt"}), 403, "policy.path_denied")
    assert "no-secrets" in m and "remove or narrow" in m, m


def test_no_trace_without_flag(srv):
    j = assert_error(srv.post("/commands/run", token=ALICE_TOKEN, json_body={"command": "wc -c a.txt"}),
                     403, "policy.command_not_allowed")
    assert "trace" not in (j["error"].get("details") or {})


def test_explain_denials_puts_the_trace_in_details(abx, workspace):
    s = abx(make_config(workspace), args=["--explain-denials"])
    j = assert_error(s.post("/commands/run", token=ALICE_TOKEN, json_body={"command": "wc -c a.txt"}),
                     403, "policy.command_not_allowed")
    trace = j["error"]["details"]["trace"]
    assert trace["decision"] == "deny" and trace["code"] == "policy.command_not_allowed"
    assert trace["op"] == "commands.run" and trace["principal"] == "alice"
    st = [x for x in trace["statements"] if x["statement"] == "run-echo"]
    assert st and any(c["scope"] == "commands" and c["verdict"] == "refuses" for c in st[0]["checks"]), trace
    j = assert_error(s.post("/files/write", token=ALICE_TOKEN, json_body={"path": "top.txt", "content": "x"}),
                     403, "policy.path_not_allowed")
    checks = [c for x in j["error"]["details"]["trace"]["statements"] for c in x["checks"]]
    assert any(c["scope"] == "paths.write" and c["verdict"] == "refuses" for c in checks), checks
    # an allowed call is unchanged
    r = s.post("/commands/run", token=ALICE_TOKEN, json_body={"command": "echo ok"})
    assert r.status_code == 200 and r.json()["stdout"] == "ok\n"
