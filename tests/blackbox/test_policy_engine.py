"""The policy engine as command ops see it: scopes required for commands/process/terminal,
approval (no approver / unavailable), rate and concurrency admission, tightest limits,
deny statements on argv, core.explain and `abx explain`, and the config's policy tests
at check-config and start."""
import json
import os
import random
import threading
import time

import pytest

from abxtest import ADMIN_TOKEN, ALICE_TOKEN, BOB_TOKEN, CAROL_TOKEN, assert_error, pgrep, run_abx, tokens, wait_for


def cmd_stmt(ws, commands=("echo *", "sleep *", "touch *"), **kw):
    st = {"ops": ["commands.run"], "principals": ["role:agent"], "paths": [ws + "/**"], "commands": list(commands)}
    st.update(kw)
    return st


def make_config(ws, stmts, deny=None, approver=False, tests=None, top=None):
    policy = {"allow": [{"ops": ["core.*"], "principals": ["*"]},
                        {"ops": ["core.explain"], "principals": ["role:admin"]}] + list(stmts)}
    if deny:
        policy["deny"] = deny
    cast = ("alice", "bob", "carol", "root") + (("ann",) if approver else ())
    cfg = {"workspace": ws, "terminal_listen": "off", "auth": {"tokens": tokens(*cast)}, "policy": policy}
    if tests is not None:
        cfg["tests"] = tests
    cfg.update(top or {})
    return cfg


def ok(r):
    assert r.status_code == 200, r.text[:800]
    return r.json()


def run(s, command, token=ALICE_TOKEN, **kw):
    body = {"command": command}
    body.update(kw)
    return s.post("/commands/run", token=token, json_body=body, timeout=20)


def write_cfg(tmp_path, cfg, name="cfg.json"):
    p = tmp_path / name
    p.write_text(json.dumps(cfg))
    return str(p)


def check(tmp_path, cfg):
    return run_abx(["check-config", write_cfg(tmp_path, cfg)])


def explain(s, op, args, principal="alice", token=ADMIN_TOKEN):
    return s.post("/explain", token=token, json_body={"op": op, "args": args, "principal": principal})


# -- scopes required -----------------------------------------------------------------------------

SCOPED_OPS = ["commands.*", "commands.run", "process.*", "process.start", "terminal.*", "terminal.create"]


@pytest.mark.parametrize("ops", SCOPED_OPS)
@pytest.mark.parametrize("missing", ["paths", "commands"])
def test_check_config_scope_required(tmp_path, workspace, ops, missing):
    st = {"ops": [ops], "principals": ["role:agent"], "paths": [workspace + "/**"], "commands": ["echo *"]}
    del st[missing]
    r = check(tmp_path, make_config(workspace, [st]))
    assert r.returncode == 1, r.stdout
    lines = [ln for ln in r.stdout.splitlines() if ": error: config.scope_required:" in ln]
    assert lines, r.stdout
    assert ("'%s'" % missing) in lines[0], lines[0]


def test_check_config_ok_with_both_scopes(tmp_path, workspace):
    st = {"ops": ["commands.*", "process.*", "terminal.*"], "principals": ["role:agent"],
          "paths": [workspace + "/**"], "commands": ["echo *"]}
    r = check(tmp_path, make_config(workspace, [st]))
    assert r.returncode == 0, r.stdout
    assert "config.scope_required" not in r.stdout


def test_read_only_process_ops_need_no_scope(tmp_path, workspace):
    st = {"ops": ["process.list", "process.get", "terminal.list"], "principals": ["role:agent"]}
    r = check(tmp_path, make_config(workspace, [st]))
    assert r.returncode == 0, r.stdout


def test_serve_refuses_scope_required(abx, workspace):
    st = {"ops": ["commands.run"], "principals": ["role:agent"], "paths": [workspace + "/**"]}
    s = abx(make_config(workspace, [st]), start=False)
    with pytest.raises(RuntimeError) as ei:
        s.start()
    assert "scope_required" in str(ei.value)


def test_lint_override_answers_scope_required(abx, workspace):
    st = {"ops": ["commands.run"], "principals": ["role:agent"], "paths": [workspace + "/**"]}
    s = abx(make_config(workspace, [st], top={"allow_lint_errors": True}))
    assert_error(run(s, "echo x"), 403, "policy.scope_required")


def test_bad_command_pattern_is_a_config_error(tmp_path, workspace):
    r = check(tmp_path, make_config(workspace, [cmd_stmt(workspace, commands=["no-such-prog-xyz *"])]))
    assert r.returncode == 1 and "config.bad_command_pattern" in r.stdout, r.stdout
    r = check(tmp_path, make_config(workspace, [cmd_stmt(workspace, commands=["* foo"])]))
    assert r.returncode == 1, r.stdout


def test_unrestricted_commands_need_unsafe(tmp_path, workspace):
    st = cmd_stmt(workspace)
    st["commands"] = {"unrestricted": True}
    r = check(tmp_path, make_config(workspace, [st]))
    assert r.returncode == 1 and "config.unsafe_scope" in r.stdout, r.stdout


# -- allow across statements, deny on argv ----------------------------------------------------------

def test_any_admitting_statement_suffices(abx, workspace):
    s = abx(make_config(workspace, [cmd_stmt(workspace, commands=["echo *"]),
                                    cmd_stmt(workspace, commands=["sleep *"])]))
    assert ok(run(s, "echo one"))["stdout"] == "one\n"
    assert ok(run(s, "sleep 0"))["exit_code"] == 0
    assert_error(run(s, "touch x"), 403, "policy.command_not_allowed")


def test_deny_statement_on_argv(abx, workspace):
    s = abx(make_config(workspace, [cmd_stmt(workspace)], deny=[{"commands": ["touch *"]},
                                                                {"commands": ["echo secret *"]}]))
    assert_error(run(s, "touch x"), 403, "policy.denied")
    assert not os.path.exists(os.path.join(workspace, "x"))
    assert_error(run(s, "echo secret please"), 403, "policy.denied")
    assert ok(run(s, "echo public"))["stdout"] == "public\n"


def test_deny_by_principal(abx, workspace):
    s = abx(make_config(workspace, [cmd_stmt(workspace)], deny=[{"ops": ["commands.run"], "principals": ["carol"]}]))
    assert ok(run(s, "echo a"))["exit_code"] == 0
    assert_error(run(s, "echo a", token=CAROL_TOKEN), 403, "policy.denied")


def test_limits_tightest_over_admitting_statements(abx, workspace):
    a = cmd_stmt(workspace, commands=["python3 *"], limits={"max_output_bytes": 100})
    b = cmd_stmt(workspace, commands=["python3 *"], limits={"max_output_bytes": 40})
    s = abx(make_config(workspace, [a, b]))
    r = s.post("/commands/run", token=ALICE_TOKEN,
               json_body={"argv": ["python3", "-c", "print('y' * 500)"]})
    j = ok(r)
    assert j["stdout"] == "y" * 40 and j["truncated"] is True
    t = ok(explain(s, "commands.run", {"argv": ["python3", "-c", "1"]}))
    assert t["limits"]["max_output_bytes"] == 40


# -- approval ----------------------------------------------------------------------------------------

def test_approval_without_approver(abx, workspace):
    s = abx(make_config(workspace, [cmd_stmt(workspace, approval="required")]))
    assert_error(run(s, "touch approved.txt"), 403, "approval.no_approver")
    assert not os.path.exists(os.path.join(workspace, "approved.txt"))


def assert_held_or_unavailable(r):
    """With an approver configured the call is held (202 pending, POLICY.md) or, in a build
    that cannot hold calls yet, refused with 503 approval.unavailable. Never run directly."""
    if r.status_code == 503:
        assert_error(r, 503, "approval.unavailable")
        return None
    assert r.status_code == 202, r.text[:500]
    j = r.json()
    assert j["status"] == "pending", j
    assert isinstance(j["approval_id"], str) and j["approval_id"]
    assert j["poll"] == "/approvals/" + j["approval_id"]
    return j


def test_approval_with_approver_is_not_run_directly(abx, workspace):
    s = abx(make_config(workspace, [cmd_stmt(workspace, approval="required")], approver=True))
    assert_held_or_unavailable(run(s, "touch approved.txt"))
    time.sleep(0.3)
    assert not os.path.exists(os.path.join(workspace, "approved.txt"))


@pytest.mark.parametrize("order", ["approval_first", "plain_first"])
def test_approval_beats_plain_allow_in_any_order(abx, workspace, order):
    stmts = [cmd_stmt(workspace, approval="required"), cmd_stmt(workspace)]
    if order == "plain_first":
        stmts.reverse()
    s = abx(make_config(workspace, stmts, approver=True))
    assert_held_or_unavailable(run(s, "touch either-order.txt"))
    time.sleep(0.2)
    assert not os.path.exists(os.path.join(workspace, "either-order.txt"))
    t = ok(explain(s, "commands.run", {"command": "echo x"}))
    assert t["decision"] == "approval"


# -- rate and concurrency -------------------------------------------------------------------------

def test_rate_limit(abx, workspace):
    s = abx(make_config(workspace, [cmd_stmt(workspace, limits={"rate": "1/min"})]))
    assert ok(run(s, "echo 1"))["exit_code"] == 0
    r = run(s, "echo 2")
    assert_error(r, 429, "limit.rate")
    ra = r.headers.get("Retry-After")
    assert ra is not None and ra.isdigit() and 1 <= int(ra) <= 60, ra
    # per principal: carol has her own budget
    assert ok(run(s, "echo 3", token=CAROL_TOKEN))["exit_code"] == 0
    assert_error(run(s, "echo 4", token=CAROL_TOKEN), 429, "limit.rate")


def test_rate_limit_admits_n_calls_per_window(abx, workspace):
    s = abx(make_config(workspace, [cmd_stmt(workspace, limits={"rate": "3/min"})]))
    codes = [run(s, "echo %d" % i).status_code for i in range(4)]
    assert codes == [200, 200, 200, 429], "rate 3/min: %s" % codes


def test_rate_limit_per_second(abx, workspace):
    s = abx(make_config(workspace, [cmd_stmt(workspace, limits={"rate": "1/s"})]))
    codes = [run(s, "echo %d" % i).status_code for i in range(3)]
    assert codes[0] == 200 and 429 in codes, codes
    time.sleep(1.2)
    assert ok(run(s, "echo later"))["exit_code"] == 0


def test_rate_refusal_runs_nothing(abx, workspace):
    s = abx(make_config(workspace, [cmd_stmt(workspace, limits={"rate": "1/min"})]))
    ok(run(s, "echo first"))
    assert_error(run(s, "touch rate-limited.txt"), 429, "limit.rate")
    assert not os.path.exists(os.path.join(workspace, "rate-limited.txt"))


def test_concurrency_limit(abx, workspace):
    s = abx(make_config(workspace, [cmd_stmt(workspace, limits={"concurrency": 1})]))
    d = "1.%03d" % random.randint(500, 999)
    res = []
    th = threading.Thread(target=lambda: res.append(run(s, "sleep " + d)))
    th.start()
    try:
        assert wait_for(lambda: pgrep("sleep " + d), timeout=5), "the first call never started"
        assert_error(run(s, "echo second"), 429, "limit.concurrency")
    finally:
        th.join(15)
    assert res and res[0].status_code == 200 and res[0].json()["status"] == "completed"
    assert ok(run(s, "echo after"))["stdout"] == "after\n"


def test_concurrency_slot_released_after_refusals(abx, workspace):
    s = abx(make_config(workspace, [cmd_stmt(workspace, limits={"concurrency": 1})]))
    for i in range(5):
        assert_error(run(s, "touch x; y"), 403, "policy.command_not_allowed")
        assert ok(run(s, "echo %d" % i))["exit_code"] == 0


# -- core.explain -----------------------------------------------------------------------------------

@pytest.fixture
def esrv(abx, workspace):
    return abx(make_config(workspace, [cmd_stmt(workspace, limits={"timeout": "30s", "pids": 32}, id="agents-run")],
                           deny=[{"commands": ["touch /etc/x"]}]))


def test_explain_allow_trace(esrv):
    t = ok(explain(esrv, "commands.run", {"command": "echo hi"}))
    assert t["decision"] == "allow"
    assert t["code"] is None
    assert t["op"] == "commands.run" and t["principal"] == "alice"
    assert t["mounting"] == ["agents-run"]
    assert t["deny_hits"] == []
    st = [x for x in t["statements"] if x["statement"] == "agents-run"]
    assert st and any(c["scope"] == "commands" and c["verdict"] == "admits" and c["value"] == "/usr/bin/echo"
                      for c in st[0]["checks"]), t["statements"]
    assert t["limits"]["pids"] == 32
    assert t["limits"]["timeout"] == 30000
    assert t["argv"] == [os.path.realpath("/usr/bin/echo"), "hi"]


def test_explain_command_not_allowed(esrv):
    t = ok(explain(esrv, "commands.run", {"command": "cat /etc/hostname"}))
    assert t["decision"] == "deny"
    assert t["code"] == "policy.command_not_allowed"
    checks = t["statements"][0]["checks"]
    assert any(c["scope"] == "commands" and c["verdict"] == "refuses" for c in checks), checks


def test_explain_shell_syntax_and_path(esrv):
    t = ok(explain(esrv, "commands.run", {"command": "echo a | cat"}))
    assert t["decision"] == "deny" and t["code"] == "policy.command_not_allowed"
    t = ok(explain(esrv, "commands.run", {"command": "echo a", "cwd": "/etc"}))
    assert t["decision"] == "deny" and t["code"] == "policy.path_not_allowed"
    assert any(p["param"] == "cwd" and p["canonical"] == "/etc" for p in t["paths"]), t["paths"]


def test_explain_deny_hit(esrv):
    t = ok(explain(esrv, "commands.run", {"argv": ["touch", "/etc/x"]}))
    assert t["decision"] == "deny" and t["code"] == "policy.denied"
    assert t["deny_hits"] == ["deny[0]"]


def test_explain_not_mounted_and_invalid(esrv):
    t = ok(explain(esrv, "commands.run", {"command": "echo hi"}, principal="bob"))
    assert t["decision"] == "not_mounted"
    t = ok(explain(esrv, "commands.run", {"command": "echo hi", "argv": ["echo"]}))
    assert t["decision"] == "invalid" and t["code"] == "args.invalid"
    t = ok(explain(esrv, "no.such.op", {}))
    assert t["decision"] == "not_mounted"


def test_explain_runs_nothing(esrv, workspace):
    t = ok(explain(esrv, "commands.run", {"command": "touch explained.txt"}))
    assert t["decision"] == "allow"
    time.sleep(0.2)
    assert not os.path.exists(os.path.join(workspace, "explained.txt"))


def test_explain_is_admin_only(esrv):
    # core.* mounts the read ops of core for everyone, never the explicit-only explain
    assert_error(explain(esrv, "commands.run", {"command": "echo hi"}, token=ALICE_TOKEN), 404, "op.not_enabled")
    assert_error(esrv.op("core.explain", {"op": "commands.run"}, token=ALICE_TOKEN), 404, "op.not_enabled")


def test_explain_unknown_principal(esrv):
    assert_error(explain(esrv, "commands.run", {"command": "echo hi"}, principal="mallory"), 400, "args.invalid")


def test_explain_agrees_with_real_call(esrv):
    for cmd in ("echo ok", "cat x", "echo a;b", "touch /etc/x"):
        t = ok(explain(esrv, "commands.run", {"command": cmd}))
        r = run(esrv, cmd, hard_timeout=5)
        if t["decision"] == "allow":
            assert r.status_code == 200, (cmd, r.text)
        else:
            assert r.status_code == 403 and r.json()["error"]["code"] == t["code"], (cmd, t, r.text)


def test_abx_explain_cli(tmp_path, workspace):
    p = write_cfg(tmp_path, make_config(workspace, [cmd_stmt(workspace)]))
    r = run_abx(["explain", "--config", p, "--op", "commands.run", "--arg", "command=echo hi",
                 "--principal", "alice"])
    assert r.returncode == 0, r.stdout + r.stderr
    assert "decision: allow" in r.stdout
    r = run_abx(["explain", "--config", p, "--op", "commands.run", "--arg", "command=cat x",
                 "--principal", "alice"])
    assert r.returncode == 1, r.stdout
    assert "decision: deny" in r.stdout and "policy.command_not_allowed" in r.stdout
    r = run_abx(["explain", "--config", p, "--op", "commands.run", "--arg", "command=echo hi",
                 "--principal", "bob", "--json"])
    assert r.returncode == 1
    assert json.loads(r.stdout)["decision"] == "not_mounted"
    r = run_abx(["explain", "--config", p, "--op", "commands.run", "--arg", "cwd=/etc",
                 "--arg", "command=echo hi", "--principal", "alice", "--json"])
    t = json.loads(r.stdout)
    assert r.returncode == 1 and t["code"] == "policy.path_not_allowed"


# -- policy tests in the config ---------------------------------------------------------------------

GOOD_TESTS = [
    {"principal": "alice", "op": "commands.run", "args": {"command": "echo hi"}, "expect": "allow"},
    {"principal": "alice", "op": "commands.run", "args": {"command": "rm -rf /"}, "expect": "deny"},
    {"principal": "alice", "op": "commands.run", "args": {"command": "echo a; rm x"}, "expect": "deny"},
    {"principal": "bob", "op": "commands.run", "args": {"command": "echo hi"}, "expect": "not_mounted"},
]


def test_config_tests_pass(tmp_path, workspace):
    r = check(tmp_path, make_config(workspace, [cmd_stmt(workspace)], tests=GOOD_TESTS))
    assert r.returncode == 0, r.stdout
    assert "config.test_failed" not in r.stdout


def test_config_test_failure_reported_with_trace(tmp_path, workspace):
    bad = GOOD_TESTS + [{"principal": "alice", "op": "commands.run", "args": {"command": "cat /etc/passwd"},
                         "expect": "allow"}]
    r = check(tmp_path, make_config(workspace, [cmd_stmt(workspace)], tests=bad))
    assert r.returncode == 1, r.stdout
    assert "config.test_failed" in r.stdout
    assert "tests[4]" in r.stdout
    assert "expected allow, got deny" in r.stdout
    assert "policy.command_not_allowed" in r.stdout  # the trace is printed


def test_config_test_approval_expectation(tmp_path, workspace):
    tests = [{"principal": "alice", "op": "commands.run", "args": {"command": "echo hi"}, "expect": "approval"}]
    r = check(tmp_path, make_config(workspace, [cmd_stmt(workspace, approval="required")], approver=True,
                                     tests=tests))
    assert r.returncode == 0, r.stdout
    r = check(tmp_path, make_config(workspace, [cmd_stmt(workspace)], tests=tests))
    assert r.returncode == 1 and "config.test_failed" in r.stdout, r.stdout


def test_serve_refuses_failing_config_test(abx, workspace):
    bad = [{"principal": "alice", "op": "commands.run", "args": {"command": "echo hi"}, "expect": "deny"}]
    s = abx(make_config(workspace, [cmd_stmt(workspace)], tests=bad), start=False)
    with pytest.raises(RuntimeError) as ei:
        s.start()
    assert "config.test_failed" in str(ei.value)


def test_serve_starts_with_passing_config_tests(abx, workspace):
    s = abx(make_config(workspace, [cmd_stmt(workspace)], tests=GOOD_TESTS))
    assert ok(run(s, "echo started"))["stdout"] == "started\n"


def test_malformed_config_test(tmp_path, workspace):
    bad = [{"principal": "alice", "op": "commands.run", "expect": "maybe"}]
    r = check(tmp_path, make_config(workspace, [cmd_stmt(workspace)], tests=bad))
    assert r.returncode == 1 and "config.bad_test" in r.stdout, r.stdout
