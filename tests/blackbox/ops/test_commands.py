"""commands.run / commands.stream / commands.sessions.*: the argv contract (split like a
POSIX shell without expansion, shell syntax refused, programs matched by absolute path),
the env allowlist, cwd, soft and hard timeouts, output caps, cancellation on disconnect,
SSE framing, and sessions that keep cwd and env per principal."""
import json
import os
import shutil
import socket
import time

import pytest
import requests

from abxtest import (ALICE_TOKEN, BOB_TOKEN, CAROL_TOKEN, assert_error, pgrep, proc_alive, read_sse, tokens,
                    uniq_sleep, wait_for)

CMDS = ["echo *", "cat *", "ls *", "python3 *", "sh *", "sleep *", "pwd"]
ENV_ALLOW = ["FOO", "BAR_OK"]


def real(prog):
    return os.path.realpath(shutil.which(prog, path="/usr/local/bin:/usr/bin:/bin"))


def make_config(ws, commands=None, limits=None, extra=None, deny=None):
    stmt = {"ops": ["commands.*", "process.*"], "principals": ["role:agent"], "paths": [ws + "/**"],
            "commands": commands if commands is not None else {"allow": CMDS, "env": ENV_ALLOW}}
    if limits:
        stmt["limits"] = limits
    if extra:
        stmt.update(extra)
    policy = {"allow": [{"ops": ["core.*"], "principals": ["*"]}, stmt]}
    if deny:
        policy["deny"] = deny
    return {"workspace": ws, "terminal_listen": "off", "auth": {"tokens": tokens("alice", "bob", "carol")},
            "policy": policy}


@pytest.fixture
def srv(abx, workspace):
    return abx(make_config(workspace))


def run(s, body, token=ALICE_TOKEN, timeout=20):
    return s.post("/commands/run", token=token, json_body=body, timeout=timeout)


def ok(r):
    assert r.status_code == 200, r.text[:800]
    return r.json()


# -- commands.run: basics ------------------------------------------------------------------

def test_run_command_string_result_shape(srv):
    j = ok(run(srv, {"command": "echo hello world"}))
    assert j["status"] == "completed"
    assert j["exit_code"] == 0
    assert j["signal"] is None
    assert j["stdout"] == "hello world\n"
    assert j["stderr"] == ""
    assert j["stdout_truncated"] is False and j["stderr_truncated"] is False and j["truncated"] is False
    assert isinstance(j["pid"], int) and j["pid"] > 0
    assert isinstance(j["duration_ms"], int) and 0 <= j["duration_ms"] < 10000
    assert j["argv"] == [real("echo"), "hello", "world"]


def test_run_argv_is_used_verbatim(srv):
    j = ok(run(srv, {"argv": ["echo", "a  b", "$HOME", "*", "x;y"]}))
    assert j["stdout"] == "a  b $HOME * x;y\n"
    assert j["argv"] == [real("echo"), "a  b", "$HOME", "*", "x;y"]


def test_run_rpc_door_same_result(srv):
    r = srv.op("commands.run", {"argv": ["echo", "via-rpc"]}, token=ALICE_TOKEN)
    j = ok(r)
    assert j["stdout"] == "via-rpc\n" and j["status"] == "completed"


def test_exit_code_and_separate_stderr(srv):
    code = "import sys; print('to-out'); print('to-err', file=sys.stderr); sys.exit(3)"
    j = ok(run(srv, {"argv": ["python3", "-c", code]}))
    assert j["status"] == "completed"
    assert j["exit_code"] == 3
    assert j["stdout"] == "to-out\n"
    assert j["stderr"] == "to-err\n"


def test_stdin_is_written_then_closed(srv):
    j = ok(run(srv, {"command": "cat", "stdin": "line1\nline2\n", "hard_timeout": 10}))
    assert j["status"] == "completed", j
    assert j["stdout"] == "line1\nline2\n"


def test_exactly_one_of_command_argv(srv):
    for body in ({"command": "echo a", "argv": ["echo", "a"]}, {}, {"cwd": "."}):
        assert_error(run(srv, body), 400, "args.invalid")


def test_quotes_split_without_expansion(srv):
    j = ok(run(srv, {"command": "echo 'a;b' \"c d\" e\\ f '$HOME'"}))
    assert j["argv"] == [real("echo"), "a;b", "c d", "e f", "$HOME"]
    assert j["stdout"] == "a;b c d e f $HOME\n"


def test_shell_metacharacters_inside_quotes_are_data(srv):
    j = ok(run(srv, {"command": "echo 'a|b' 'x>y' '(z)'"}))
    assert j["stdout"] == "a|b x>y (z)\n"


SHELL_SYNTAX = [
    ("echo a; echo b", ";"),
    ("echo a && echo b", "&"),
    ("echo a || echo b", "|"),
    ("echo a | cat", "|"),
    ("echo $(id)", "$"),
    ("echo `id`", "`"),
    ("echo a > out.txt", ">"),
    ("cat < a.txt", "<"),
    ("echo a\necho b", "newline"),
    ("echo {a,b}", "{"),
    ("echo a}", "}"),
    ("ls *.txt", "*"),
    ("ls a?txt", "?"),
    ("ls [ab].txt", "["),
    ("ls a]", "]"),
    ("echo $HOME", "$"),
    ("sleep 1 &", "&"),
]


def test_shell_syntax_refused_naming_the_character(srv, workspace):
    problems = []
    for command, char in SHELL_SYNTAX:
        r = run(srv, {"command": command})
        try:
            j = assert_error(r, 403, "policy.command_not_allowed")
        except AssertionError as e:
            problems.append("%r: %s" % (command, e))
            continue
        msg = j["error"]["message"]
        named = "newline" in msg if char == "newline" else ("'%s'" % char) in msg or ('"%s"' % char) in msg
        if not named:
            problems.append("%r: the message does not name %r: %s" % (command, char, msg))
    assert not problems, "\n".join(problems)
    assert not os.path.exists(os.path.join(workspace, "out.txt"))


def test_program_outside_patterns_refused(srv, workspace):
    r = run(srv, {"command": "touch created.txt"})
    assert_error(r, 403, "policy.command_not_allowed")
    r = run(srv, {"argv": ["rm", "a.txt"]})
    assert_error(r, 403, "policy.command_not_allowed")
    assert not os.path.exists(os.path.join(workspace, "created.txt"))
    assert os.path.exists(os.path.join(workspace, "a.txt"))


def test_program_matched_by_resolved_path_not_name(srv, workspace):
    # an executable named like an allowed program, but elsewhere
    fake = os.path.join(workspace, "echo")
    with open(fake, "w") as f:
        f.write("#!/bin/sh\necho fake\n")
    os.chmod(fake, 0o755)
    assert_error(run(srv, {"argv": [fake, "x"]}), 403, "policy.command_not_allowed")
    assert_error(run(srv, {"argv": ["./echo", "x"]}), 403, "policy.command_not_allowed")
    # the real one by its absolute path is the same program as the pattern's
    j = ok(run(srv, {"argv": [real("echo"), "real"]}))
    assert j["stdout"] == "real\n"
    j = ok(run(srv, {"argv": ["/bin/echo", "viabin"]}))
    assert j["stdout"] == "viabin\n" and j["argv"][0] == real("echo")


def test_pattern_fixed_words(abx, workspace):
    s = abx(make_config(workspace, commands=["echo hello *", "ls -a"]))
    assert ok(run(s, {"command": "echo hello world"}))["stdout"] == "hello world\n"
    assert ok(run(s, {"command": "echo hello"}))["stdout"] == "hello\n"
    assert_error(run(s, {"command": "echo world"}), 403, "policy.command_not_allowed")
    assert ok(run(s, {"command": "ls -a"}))["exit_code"] == 0
    for cmd in ("ls", "ls -l", "ls -a -l"):
        assert_error(run(s, {"command": cmd}), 403, "policy.command_not_allowed")


def test_scope_search_path(abx, workspace):
    bindir = os.path.join(workspace, "bin")
    os.makedirs(bindir)
    tool = os.path.join(bindir, "mytool")
    with open(tool, "w") as f:
        f.write("#!/bin/sh\necho mytool-ran \"$@\"\n")
    os.chmod(tool, 0o755)
    s = abx(make_config(workspace, commands={"allow": ["mytool *"], "path": bindir}))
    j = ok(run(s, {"command": "mytool a b"}))
    assert j["stdout"] == "mytool-ran a b\n" and j["argv"][0] == tool
    # echo is not on the scope's search path
    assert_error(run(s, {"command": "echo x"}), 403, "policy.command_not_allowed")


def test_shell_true_scope_runs_through_sh(abx, workspace):
    s = abx(make_config(workspace, commands={"allow": ["sh *"], "shell": True}))
    j = ok(run(s, {"command": "echo abc | tr b X"}))
    assert j["stdout"] == "aXc\n", j
    assert os.path.basename(j["argv"][0]) in ("sh", "dash", "bash") and j["argv"][1] == "-c"


def test_default_preset_runs_pipes_and_and_through_sh(abx, workspace):
    s = abx()  # no config: the embedded default, preset workspace
    j = ok(run(s, {"command": "echo hi | wc -c"}, token=s.token))
    assert j["stdout"].strip() == "3", j
    assert os.path.basename(j["argv"][0]) in ("sh", "dash", "bash") and j["argv"][1] == "-c", j
    j = ok(run(s, {"command": "true && echo second && false || echo third"}, token=s.token))
    assert j["stdout"] == "second\nthird\n", j
    j = ok(run(s, {"command": "echo made > made.txt; cat made.txt"}, token=s.token))
    assert j["stdout"] == "made\n" and os.path.exists(os.path.join(workspace, "made.txt"))
    # argv is used as given: no shell
    j = ok(run(s, {"argv": ["echo", "a | b"]}, token=s.token))
    assert j["stdout"] == "a | b\n"


def test_default_preset_shell_still_confined(abx, tmp_path):
    outside = tmp_path / "outside.txt"
    s = abx()
    j = ok(run(s, {"command": "echo x > %s; cat /etc/hostname >/dev/null && echo read" % outside}, token=s.token))
    assert not outside.exists(), j


def test_pinned_programs_refuse_shell_syntax_naming_the_key(srv):
    for command in ("echo hi | wc -c", "echo a && echo b"):
        j = assert_error(run(srv, {"command": command}), 403, "policy.command_not_allowed")
        msg = j["error"]["message"]
        assert "shell syntax" in msg and "commands.shell" in msg and "allow[1]" in msg, msg


def test_unknown_program_refused(srv):
    assert_error(run(srv, {"command": "no-such-program-xyz --help"}), 403, "policy.command_not_allowed")


# -- environment ---------------------------------------------------------------------------------

PRINT_ENV = "import os, json; print(json.dumps(dict(os.environ)))"


def test_env_allowlisted_names_reach_the_process(srv):
    j = ok(run(srv, {"argv": ["python3", "-c", PRINT_ENV], "env": {"FOO": "bar baz", "BAR_OK": "1"}}))
    env = json.loads(j["stdout"])
    assert env["FOO"] == "bar baz" and env["BAR_OK"] == "1"


def test_env_name_outside_allowlist_refused(srv):
    for name in ("LD_PRELOAD", "PATH", "foo"):
        r = run(srv, {"argv": ["python3", "-c", PRINT_ENV], "env": {"FOO": "ok", name: "x"}})
        j = assert_error(r, 403, "policy.command_not_allowed")
        assert name in j["error"]["message"]


def test_env_refused_when_scope_has_no_allowlist(abx, workspace):
    s = abx(make_config(workspace, commands=CMDS))
    assert_error(run(s, {"command": "echo x", "env": {"FOO": "1"}}), 403, "policy.command_not_allowed")
    assert ok(run(s, {"command": "echo x"}))["stdout"] == "x\n"


def test_server_environment_does_not_leak(abx, workspace):
    s = abx(make_config(workspace), env={"ABX_LEAK_CANARY": "canary-7731", "ABX_TOKEN": "leaky-token-value-123"})
    j = ok(run(s, {"argv": ["python3", "-c", PRINT_ENV]}))
    assert "canary-7731" not in j["stdout"]
    assert "leaky-token-value-123" not in j["stdout"]
    env = json.loads(j["stdout"])
    assert "ABX_LEAK_CANARY" not in env and "ABX_TOKEN" not in env


# -- cwd ----------------------------------------------------------------------------------------

GETCWD = ["python3", "-c", "import os; print(os.getcwd())"]


def test_cwd_defaults_to_scope_root(srv, workspace):
    j = ok(run(srv, {"argv": GETCWD}))
    assert j["stdout"].strip() == workspace


def test_cwd_relative_and_absolute(srv, workspace):
    assert ok(run(srv, {"argv": GETCWD, "cwd": "sub"}))["stdout"].strip() == os.path.join(workspace, "sub")
    assert ok(run(srv, {"argv": GETCWD, "cwd": workspace + "/sub"}))["stdout"].strip() == \
        os.path.join(workspace, "sub")
    assert ok(run(srv, {"command": "ls", "cwd": "sub"}))["stdout"] == "c.txt\n"


def test_cwd_outside_scope_refused(srv):
    for cwd in ("/etc", "..", "/tmp"):
        assert_error(run(srv, {"argv": GETCWD, "cwd": cwd}), 403, "policy.path_not_allowed")


# -- timeouts ---------------------------------------------------------------------------------

def test_soft_timeout_answers_running_and_process_continues(srv):
    d = uniq_sleep()
    t0 = time.time()
    j = ok(run(srv, {"command": "sleep " + d, "timeout": 0.3}))
    elapsed = time.time() - t0
    try:
        assert j["status"] == "running", j
        assert j["running"] is True
        assert j["exit_code"] is None
        assert elapsed < 5
        pid = j["pid"]
        assert isinstance(pid, int) and pid > 0
        time.sleep(0.3)
        assert proc_alive(pid), "the process should go on after the soft timeout"
        g = srv.get("/process/%d" % pid, token=ALICE_TOKEN)
        assert g.status_code == 200, g.text
        assert g.json()["running"] is True
    finally:
        for pid in pgrep("sleep " + d):
            os.kill(pid, 9)


def test_hard_timeout_kills_and_reports_timed_out(srv):
    d = uniq_sleep()
    t0 = time.time()
    j = ok(run(srv, {"command": "sleep " + d, "hard_timeout": 0.5}))
    elapsed = time.time() - t0
    assert j["status"] == "timed_out", j
    assert j["running"] is False
    assert j["exit_code"] is None
    assert elapsed < 5
    assert wait_for(lambda: not pgrep("sleep " + d), timeout=5)


def test_statement_timeout_caps_the_call(abx, workspace):
    s = abx(make_config(workspace, limits={"timeout": "1s"}))
    d = uniq_sleep()
    t0 = time.time()
    j = ok(run(s, {"command": "sleep " + d, "hard_timeout": 30}))
    assert j["status"] == "timed_out", j
    assert time.time() - t0 < 6
    assert wait_for(lambda: not pgrep("sleep " + d), timeout=5)


def test_statement_timeout_caps_detached_process(abx, workspace):
    s = abx(make_config(workspace, limits={"timeout": "1s"}))
    d = uniq_sleep()
    j = ok(run(s, {"command": "sleep " + d, "timeout": 0.2}))
    assert j["status"] == "running", j
    pid = j["pid"]

    def ended():
        g = s.get("/process/%d" % pid, token=ALICE_TOKEN).json()
        return g if not g.get("running", True) else None

    g = wait_for(ended, timeout=6, step=0.2)
    assert g, "the detached process outlived the statement's timeout"
    assert g["status"] == "timed_out", g
    assert not proc_alive(pid)


# -- output caps ---------------------------------------------------------------------------------

BIG = ["python3", "-c", "import sys; sys.stdout.write('x' * 5000); sys.stderr.write('e' * 10)"]


def test_max_output_bytes_from_request(srv):
    j = ok(run(srv, {"argv": BIG, "max_output_bytes": 100}))
    assert j["status"] == "completed" and j["exit_code"] == 0
    assert j["stdout"] == "x" * 100
    assert j["stdout_truncated"] is True
    assert j["truncated"] is True
    assert j["stderr"] == "e" * 10
    assert j["stderr_truncated"] is False


def test_max_output_bytes_statement_caps_request(abx, workspace):
    s = abx(make_config(workspace, limits={"max_output_bytes": 64}))
    j = ok(run(s, {"argv": BIG, "max_output_bytes": 1000}))
    assert j["stdout"] == "x" * 64 and j["stdout_truncated"] is True
    j = ok(run(s, {"argv": BIG}))
    assert j["stdout"] == "x" * 64 and j["truncated"] is True


def test_untruncated_output_is_complete(srv):
    j = ok(run(srv, {"argv": BIG}))
    assert j["stdout"] == "x" * 5000 and j["truncated"] is False


def test_invalid_limit_arguments(srv):
    for v in (0, -5, "10"):
        assert_error(run(srv, {"command": "echo x", "max_output_bytes": v}), 400, "args.invalid")
    for key in ("timeout", "hard_timeout"):
        assert_error(run(srv, {"command": "echo x", key: -1}), 400, "args.invalid")


# -- cancellation -------------------------------------------------------------------------------

def test_client_disconnect_cancels_run(srv):
    d = uniq_sleep()
    body = json.dumps({"command": "sleep " + d}).encode()
    c = socket.create_connection(("127.0.0.1", srv.port), timeout=5)
    try:
        c.sendall(b"POST /commands/run HTTP/1.1\r\nHost: 127.0.0.1\r\nAuthorization: Bearer " +
                  ALICE_TOKEN.encode() + b"\r\nContent-Type: application/json\r\nContent-Length: " +
                  str(len(body)).encode() + b"\r\n\r\n" + body)
        assert wait_for(lambda: pgrep("sleep " + d), timeout=5), "the command never started"
    finally:
        c.close()
    assert wait_for(lambda: not pgrep("sleep " + d), timeout=8), "the command survived its client"


# -- mounting -------------------------------------------------------------------------------

def test_viewer_without_statement_gets_not_enabled(srv):
    assert_error(run(srv, {"command": "echo x"}, token=BOB_TOKEN), 404, "op.not_enabled")
    r = srv.post("/commands/stream", token=BOB_TOKEN, json_body={"command": "echo x"})
    assert_error(r, 404, "op.not_enabled")
    r = srv.post("/commands/sessions", token=BOB_TOKEN, json_body={})
    assert_error(r, 404, "op.not_enabled")


# -- commands.stream ----------------------------------------------------------------------------

STREAM_CODE = ("import sys, time\n"
               "sys.stdout.write('out1\\n'); sys.stdout.flush()\n"
               "sys.stderr.write('err1\\n'); sys.stderr.flush()\n"
               "time.sleep(0.3)\n"
               "sys.stdout.write('out2\\n'); sys.stdout.flush()\n"
               "sys.exit(4)\n")


def stream(s, body, token=ALICE_TOKEN):
    return requests.post(s.url + "/commands/stream", json=body, headers={"Authorization": "Bearer " + token},
                         stream=True, timeout=(5, 10))


def test_stream_frames_offsets_and_exit(srv):
    r = stream(srv, {"argv": ["python3", "-c", STREAM_CODE]})
    assert r.status_code == 200, r.text
    assert r.headers["content-type"].startswith("text/event-stream")
    evs = read_sse(r)
    assert evs[0]["event"] == "start", evs
    start = json.loads(evs[0]["data"])
    assert isinstance(start["pid"], int) and start["pid"] > 0
    out, err = "", ""
    last = (0, 0)
    for ev in evs[1:]:
        if ev["event"] in ("stdout", "stderr"):
            d = json.loads(ev["data"])
            o, e = (int(x) for x in ev["id"].split(","))
            assert o >= last[0] and e >= last[1], ev
            if ev["event"] == "stdout":
                assert d["offset"] == len(out.encode()), (d, out)
                out += d["data"]
                assert o == len(out.encode())
            else:
                assert d["offset"] == len(err.encode()), (d, err)
                err += d["data"]
                assert e == len(err.encode())
            last = (o, e)
    assert out == "out1\nout2\n"
    assert err == "err1\n"
    assert evs[-1]["event"] == "exit", evs
    assert evs[-1]["id"] == "10,5"
    final = json.loads(evs[-1]["data"])
    assert final["exit_code"] == 4
    assert final["status"] == "completed"
    assert final["running"] is False
    assert final["pid"] == start["pid"]


def test_stream_hard_timeout(srv):
    d = uniq_sleep()
    t0 = time.time()
    r = stream(srv, {"command": "sleep " + d, "hard_timeout": 0.5})
    assert r.status_code == 200, r.text
    evs = read_sse(r, timeout=10)
    assert time.time() - t0 < 8
    assert evs and evs[-1]["event"] == "exit", evs
    assert json.loads(evs[-1]["data"])["status"] == "timed_out"


def test_stream_refuses_shell_syntax_before_streaming(srv):
    r = srv.post("/commands/stream", token=ALICE_TOKEN, json_body={"command": "echo a; echo b"})
    assert_error(r, 403, "policy.command_not_allowed")
    r = srv.post("/commands/stream", token=ALICE_TOKEN, json_body={"command": "touch x"})
    assert_error(r, 403, "policy.command_not_allowed")


def test_stream_disconnect_kills_command(srv):
    d = uniq_sleep()
    r = stream(srv, {"command": "sleep " + d})
    assert r.status_code == 200
    it = r.iter_lines()
    first = next(it)
    assert first == b"event: start"
    assert wait_for(lambda: pgrep("sleep " + d), timeout=5)
    r.close()
    assert wait_for(lambda: not pgrep("sleep " + d), timeout=10), "the streamed command survived its client"


# -- sessions -----------------------------------------------------------------------------------

def new_session(s, body=None, token=ALICE_TOKEN):
    r = s.post("/commands/sessions", token=token, json_body=body or {})
    j = ok(r)
    assert isinstance(j["id"], str) and j["id"]
    return j


def sexec(s, sid, body, token=ALICE_TOKEN):
    return s.post("/commands/sessions/%s/exec" % sid, token=token, json_body=body, timeout=20)


def test_session_keeps_cwd(srv, workspace):
    j = new_session(srv, {"cwd": "sub"})
    sid = j["id"]
    assert j["cwd"] == os.path.join(workspace, "sub")
    assert ok(sexec(srv, sid, {"argv": GETCWD}))["stdout"].strip() == os.path.join(workspace, "sub")
    # a cwd given to exec persists
    assert ok(sexec(srv, sid, {"argv": GETCWD, "cwd": "."}))["stdout"].strip() == workspace
    assert ok(sexec(srv, sid, {"argv": GETCWD}))["stdout"].strip() == workspace


def test_session_keeps_env(srv):
    sid = new_session(srv, {"env": {"FOO": "one"}})["id"]
    pe = ["python3", "-c", "import os; print(os.environ.get('FOO'), os.environ.get('BAR_OK'))"]
    assert ok(sexec(srv, sid, {"argv": pe}))["stdout"] == "one None\n"
    assert ok(sexec(srv, sid, {"argv": pe, "env": {"BAR_OK": "two"}}))["stdout"] == "one two\n"
    assert ok(sexec(srv, sid, {"argv": pe}))["stdout"] == "one two\n"
    assert ok(sexec(srv, sid, {"argv": pe, "env": {"FOO": "three"}}))["stdout"] == "three two\n"


def test_session_env_outside_allowlist_refused(srv):
    assert_error(srv.post("/commands/sessions", token=ALICE_TOKEN, json_body={"env": {"LD_PRELOAD": "/x"}}),
                 403, "policy.command_not_allowed")
    sid = new_session(srv)["id"]
    assert_error(sexec(srv, sid, {"command": "echo x", "env": {"LD_PRELOAD": "/x"}}), 403,
                 "policy.command_not_allowed")


def test_session_exec_policy_still_applies(srv):
    sid = new_session(srv)["id"]
    assert_error(sexec(srv, sid, {"command": "echo a | cat"}), 403, "policy.command_not_allowed")
    assert_error(sexec(srv, sid, {"command": "touch x"}), 403, "policy.command_not_allowed")
    assert_error(sexec(srv, sid, {"command": "ls", "cwd": "/etc"}), 403, "policy.path_not_allowed")


def test_session_list_close_and_ownership(srv):
    sid = new_session(srv)["id"]
    other = new_session(srv, token=CAROL_TOKEN)["id"]
    lst = ok(srv.get("/commands/sessions/list", token=ALICE_TOKEN))["sessions"]
    ids = [x["id"] for x in lst]
    assert sid in ids and other not in ids
    # another principal cannot see, use or close it
    assert sid not in [x["id"] for x in ok(srv.get("/commands/sessions/list", token=CAROL_TOKEN))["sessions"]]
    assert_error(sexec(srv, sid, {"command": "echo x"}, token=CAROL_TOKEN), 404, "session.not_found")
    assert_error(srv.request("DELETE", "/commands/sessions/" + sid, token=CAROL_TOKEN), 404, "session.not_found")
    # the owner still can
    assert ok(sexec(srv, sid, {"command": "echo still"}))["stdout"] == "still\n"
    r = srv.request("DELETE", "/commands/sessions/" + sid, token=ALICE_TOKEN)
    assert r.status_code == 200, r.text
    assert_error(sexec(srv, sid, {"command": "echo x"}), 404, "session.not_found")
    assert_error(srv.request("DELETE", "/commands/sessions/" + sid, token=ALICE_TOKEN), 404, "session.not_found")
    assert sid not in [x["id"] for x in ok(srv.get("/commands/sessions/list", token=ALICE_TOKEN))["sessions"]]


def test_session_unknown_id(srv):
    assert_error(sexec(srv, "0123456789abcdef0123456789abcdef", {"command": "echo x"}), 404, "session.not_found")
    assert_error(sexec(srv, "nope", {"command": "echo x"}), 404, "session.not_found")
