"""The command line: version, catalog, openapi, docs, call; and the embedded default's token
and url files, its first-start banner, and a clean stop."""
import json
import os
import re
import signal
import stat


from abxtest import run_abx

ERROR_CODES = ["request.bad_target", "request.bad_header", "request.host_denied", "request.origin_denied",
               "request.busy", "request.bad_content_type", "request.bad_json", "limit.request_too_large",
               "auth.required", "auth.invalid_token", "auth.conflicting_credentials", "auth.rate_limited",
               "op.not_enabled", "args.unknown", "args.missing", "args.invalid", "policy.denied",
               "policy.path_denied", "policy.path_not_allowed", "policy.scope_required", "files.not_a_directory",
               "files.is_a_directory", "files.not_regular", "files.not_utf8"]


def test_version():
    r = run_abx(["version"])
    assert r.returncode == 0
    assert re.match(r"^abx \d+\.\d+\.\d+\S* \(catalog \d+, api agent-sandbox/2\)\s*$", r.stdout), r.stdout


def test_catalog():
    r = run_abx(["catalog"])
    assert r.returncode == 0, r.stderr
    j = json.loads(r.stdout)
    assert isinstance(j["catalog_version"], int)
    assert j["sdk_version"]
    ids = [e["id"] for e in j["ops"]]
    assert ids == sorted(ids)
    for must in ("core.health", "files.read", "files.list", "files.stat"):
        assert must in ids
    read = [e for e in j["ops"] if e["id"] == "files.read"][0]
    assert read["http"] == [{"method": "GET", "path": "/files/read"}]
    assert read["rpc"] == "/ops/files.read"
    names = [p["name"] for p in read["params"]]
    assert names[:1] == ["path"]
    assert {"offset", "length", "start_line", "max_lines", "numbered", "encoding"} <= set(names)
    assert "max_bytes" in read["limits"]


def test_catalog_is_deterministic():
    assert run_abx(["catalog"]).stdout == run_abx(["catalog"]).stdout


def test_openapi():
    r = run_abx(["openapi"])
    assert r.returncode == 0, r.stderr
    doc = json.loads(r.stdout)
    assert doc["openapi"] == "3.1.0"
    cat = json.loads(run_abx(["catalog"]).stdout)
    # every REST binding of every op is in the document
    for e in cat["ops"]:
        for b in e["http"]:
            path = b["path"].replace("*}", "}")  # {rest*} (the rest of the path) is {rest} in OpenAPI
            assert path in doc["paths"], b
            assert b["method"].lower() in doc["paths"][path], b


def test_docs_ops():
    r = run_abx(["docs", "ops"])
    assert r.returncode == 0
    cat = json.loads(run_abx(["catalog"]).stdout)
    for e in cat["ops"]:
        assert e["id"] in r.stdout


def test_docs_errors():
    r = run_abx(["docs", "errors"])
    assert r.returncode == 0
    for c in ERROR_CODES:
        assert "`%s`" % c in r.stdout or c in r.stdout, c


def test_docs_unknown_topic():
    r = run_abx(["docs", "nope"])
    assert r.returncode != 0


def test_unknown_command():
    r = run_abx(["frobnicate"])
    assert r.returncode == 2
    assert "unknown command 'frobnicate'" in r.stderr
    assert "commands:" in r.stderr and r.stdout == ""


def _listed_commands(text):
    """The command names of the usage text: the first word of each indented line that is not a
    continuation of the help column."""
    return [ln.split()[0] for ln in text.splitlines() if ln.startswith("  ") and not ln.startswith("   ")]


def test_help_lists_every_command():
    r = run_abx(["help"])
    assert r.returncode == 0 and r.stderr == ""
    names = _listed_commands(r.stdout)
    assert names == ["serve", "mcp", "call", "check-config", "explain", "ledger", "ops", "catalog", "openapi",
                     "gen-client", "tools", "docs", "install", "version", "help"]
    for alias in (["--help"], ["-h"]):
        assert run_abx(alias).stdout == r.stdout
    # no arguments at all: the same usage, on stderr, as a usage error
    none = run_abx([])
    assert none.returncode == 2 and none.stderr == r.stdout


def test_every_listed_command_dispatches(tmp_path):
    """A command the usage names is one main() runs: an unknown option to it is that command's
    own usage error (or its own refusal), never 'unknown command'."""
    for name in _listed_commands(run_abx(["help"]).stdout):
        if name in ("serve", "mcp", "call"):  # these would start something: check they refuse the option
            continue
        r = run_abx([name, "--no-such-option"], home=tmp_path)
        assert "unknown command" not in r.stderr, (name, r.stderr)
    for name in ("serve", "mcp", "call"):
        r = run_abx([name, "--no-such-option"], home=tmp_path)
        assert r.returncode in (1, 2) and "unknown command" not in r.stderr, (name, r.stderr)
        assert ("abx %s:" % name) in r.stderr or ("usage: abx %s" % name) in r.stderr, (name, r.stderr)


# -- the embedded default: token, url, banner -------------------------------------------------------

def test_default_token_file_created_0600_and_printed_once(abx):
    s = abx()
    tok_path = os.path.join(s.home, "token")
    st = os.stat(tok_path)
    assert stat.S_IMODE(st.st_mode) == 0o600
    tok = s.token
    assert len(tok) >= 32
    assert tok in s.stdout()
    with open(os.path.join(s.home, "url")) as f:
        assert f.read().strip() == s.url
    assert s.get("/capabilities", token=tok).json()["principal"] == "local"
    s.stop()
    # second start: the same token, not printed again
    s2 = abx(home=s.home)
    assert s2.token == tok
    assert tok not in s2.stdout()
    assert s2.get("/capabilities", token=tok).status_code == 200
    with open(os.path.join(s2.home, "url")) as f:
        assert f.read().strip() == s2.url


def test_default_tokens_differ_between_homes(abx, tmp_path):
    a = abx(home=str(tmp_path / "h1"))
    b = abx(home=str(tmp_path / "h2"))
    assert a.token != b.token
    assert b.get("/capabilities", token=a.token).status_code == 401


def test_default_workspace_is_current_dir(abx, workspace):
    s = abx(use_workspace_flag=False)  # cwd is the workspace
    r = s.get("/files/read", token=s.token, params={"path": "a.txt"})
    assert r.status_code == 200, r.text
    assert r.json()["path"] == os.path.join(workspace, "a.txt")


def test_serve_stops_cleanly_on_sigterm(abx):
    s = abx()
    s.get("/health")
    s.proc.send_signal(signal.SIGTERM)
    assert s.proc.wait(timeout=10) == 0


# -- abx call ------------------------------------------------------------------------------------------

def test_call_uses_home_files(server, workspace):
    r = run_abx(["call", "files.read", "path=a.txt"], home=server.home)
    assert r.returncode == 0, r.stdout + r.stderr
    j = json.loads(r.stdout)
    assert j["content"] == "hello\n"
    assert j["path"] == os.path.join(workspace, "a.txt")


def test_call_typed_args(server):
    r = run_abx(["call", "files.list", "path=.", "max_entries=1", "recursive=true"], home=server.home)
    assert r.returncode == 0, r.stdout + r.stderr
    j = json.loads(r.stdout)
    assert len(j["entries"]) == 1 and j["truncated"] is True


def test_call_json_args(server):
    r = run_abx(["call", "files.read", "--json", '{"path": "b.txt", "start_line": 2, "max_lines": 1}'],
                home=server.home)
    assert r.returncode == 0, r.stdout + r.stderr
    assert json.loads(r.stdout)["content"] == "line2\n"


def test_call_error_exits_1_and_prints_error(server):
    r = run_abx(["call", "files.read", "path=/etc/passwd"], home=server.home)
    assert r.returncode == 1
    j = json.loads(r.stdout)
    assert j["error"]["code"] == "policy.path_not_allowed"
    r = run_abx(["call", "files.nope"], home=server.home)
    assert r.returncode == 1
    assert json.loads(r.stdout)["error"]["code"] == "op.not_enabled"


def test_call_explicit_url_and_token(server, tmp_path):
    empty_home = tmp_path / "empty-home"
    empty_home.mkdir()
    r = run_abx(["call", "core.capabilities", "--url", server.url, "--token", server.token], home=empty_home)
    assert r.returncode == 0, r.stdout + r.stderr
    assert json.loads(r.stdout)["principal"] == "local"
    r = run_abx(["call", "core.capabilities", "--url", server.url, "--token", "wrong-token-0123456789abcdef"],
                home=empty_home)
    assert r.returncode == 1
    assert json.loads(r.stdout)["error"]["code"] == "auth.invalid_token"
    # no token at all
    r = run_abx(["call", "core.capabilities", "--url", server.url], home=empty_home)
    assert r.returncode == 1
    assert json.loads(r.stdout)["error"]["code"] == "auth.required"


def test_call_env_url_and_token(server, tmp_path):
    empty_home = tmp_path / "empty-home2"
    empty_home.mkdir()
    r = run_abx(["call", "core.health"], home=empty_home, env={"ABX_URL": server.url, "ABX_TOKEN": server.token})
    assert r.returncode == 0, r.stdout + r.stderr
    assert json.loads(r.stdout)["status"] == "ok"


def test_call_bad_typed_arg_fails(server):
    r = run_abx(["call", "files.list", "max_entries=abc"], home=server.home)
    assert r.returncode != 0


def test_call_server_down(tmp_path):
    from abxtest import free_port
    r = run_abx(["call", "core.health", "--url", "http://127.0.0.1:%d" % free_port()], home=tmp_path)
    assert r.returncode != 0
    assert r.stderr


# -- abx call: --args, --json output, streams ---------------------------------------------------

def test_call_args_object(server):
    r = run_abx(["call", "files.read", "--args", '{"path": "b.txt", "start_line": 3, "max_lines": 1}'],
                home=server.home)
    assert r.returncode == 0, r.stdout + r.stderr
    assert json.loads(r.stdout)["content"] == "line3\n"
    r = run_abx(["call", "files.read", "--args", "[1]"], home=server.home)
    assert r.returncode == 1 and "--args must be a JSON object" in r.stderr


def test_call_json_output_is_one_compact_line(server):
    r = run_abx(["call", "files.read", "path=a.txt", "--json"], home=server.home)
    assert r.returncode == 0, r.stderr
    assert r.stdout.count("\n") == 1 and json.loads(r.stdout)["content"] == "hello\n"
    r = run_abx(["call", "files.read", "path=missing.txt", "--json"], home=server.home)
    assert r.returncode == 1
    assert r.stdout.count("\n") == 1 and json.loads(r.stdout)["error"]["code"] == "files.not_found"


def test_call_json_output_of_bytes(server):
    import base64
    r = run_abx(["call", "files.download", "path=a.txt", "--json"], home=server.home)
    assert r.returncode == 0, r.stderr
    j = json.loads(r.stdout)
    assert base64.b64decode(j["content_base64"]) == b"hello\n" and j["length"] == 6
    assert j["content_type"].startswith("text/plain")
    r = run_abx(["call", "files.download", "path=a.txt"], home=server.home)
    assert r.stdout == "hello\n"


def test_call_sse_json_lines(server):
    r = run_abx(["call", "commands.stream", "argv=[\"sh\",\"-c\",\"echo out; echo err >&2; exit 3\"]", "--json"],
                home=server.home)
    assert r.returncode == 0, r.stderr
    events = [json.loads(ln) for ln in r.stdout.splitlines()]
    assert events[0]["event"] == "start" and isinstance(events[0]["data"]["pid"], int)
    assert {"event": "stdout", "data": {"data": "out\n", "offset": 0}, "id": "4,0"} in events
    assert [e["data"]["data"] for e in events if e["event"] == "stderr"] == ["err\n"]
    assert events[-1]["event"] == "exit" and events[-1]["data"]["exit_code"] == 3


def test_call_sse_prints_events_as_they_arrive(server):
    """The first frames are on stdout while the command is still sleeping."""
    import subprocess
    import time
    env = dict(os.environ, ABX_HOME=server.home)
    env.pop("ABX_URL", None)
    env.pop("ABX_TOKEN", None)
    from abxtest import ABX_BIN
    for extra in ([], ["--json"]):
        t0 = time.time()
        p = subprocess.Popen([ABX_BIN, "call", "commands.stream",
                              'argv=["sh","-c","echo first; sleep 4; echo late"]'] + extra,
                             stdout=subprocess.PIPE, stderr=subprocess.PIPE, env=env, text=True)
        try:
            seen = ""
            while "first" not in seen:
                line = p.stdout.readline()
                assert line, "stream ended before 'first': " + p.stderr.read()
                seen += line
            assert time.time() - t0 < 3, "the first event waited for the end of the command"
            rest, err = p.communicate(timeout=20)
        finally:
            if p.poll() is None:
                p.kill()
                p.wait()
        assert p.returncode == 0, err
        assert "late" in rest and "exit" in rest
        if extra:
            assert all(json.loads(ln)["event"] for ln in (seen + rest).splitlines())
        else:
            assert "event: stdout" in seen + rest and "data: " in rest
