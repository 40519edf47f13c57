"""Declarative commands (`custom:` in the config) and the legacy command registry, from
outside: ids mangled from the original names (Hello-World.v2 -> custom.hello_world_v2,
collisions _2), placeholders substituted into separate argv elements (never a shell), path
parameters admitted by the op's intrinsic jail AND the statement's scope with the canonical
value substituted, the process confined like every other, timeouts, POST /commands/{name}
and GET /commands, config errors with line numbers (config.name_conflict, ...), lints,
aliases in policy files, reload with a changed custom:, and the ledger's record of it all."""
import json
import os
import signal
import sqlite3
import time

import pytest

from abxtest import ALICE_TOKEN, BOB_TOKEN, assert_error, run_abx, sha256_hex


def config(ws, custom, allow=None, extra=""):
    tokens = [{"principal": "alice", "roles": ["agent"], "token_sha256": sha256_hex(ALICE_TOKEN)},
              {"principal": "bob", "roles": ["viewer"], "token_sha256": sha256_hex(BOB_TOKEN)}]
    allow = allow if allow is not None else [
        {"ops": ["core.*"], "principals": ["*"]},
        {"ops": ["custom.*", "commands.run"], "principals": ["alice"], "paths": [ws + "/**"],
         "commands": ["echo *"]},
    ]
    return {"workspace": ws, "terminal_listen": "off", "auth": {"tokens": tokens},
            "policy": {"allow": allow}, "custom": custom}


HELLO = {"name": "Hello-World.v2", "summary": "Greet someone", "argv": ["echo", "hello", "{who}"],
         "params": {"who": "string"}, "effects": ["exec"]}


def call(s, op, body, token=ALICE_TOKEN):
    return s.post("/ops/" + op, token=token, json_body=body)


def ok(r):
    assert r.status_code == 200, "%s %s" % (r.status_code, r.text[:800])
    return r.json()


def write_config(tmp_path, text, name="abx.yaml"):
    p = tmp_path / name
    p.write_text(text)
    return str(p)


def check(path):
    return run_abx(["check-config", path])


# -- ids, argv substitution, the legacy routes ----------------------------------------------

def test_hello_world_mangled_id_and_legacy_routes(abx, workspace):
    s = abx(config(workspace, [HELLO]))
    j = ok(call(s, "custom.hello_world_v2", {"who": "bob"}))
    assert j["stdout"] == "hello bob\n" and j["exit_code"] == 0 and j["status"] == "completed"
    assert j["argv"] == ["/usr/bin/echo", "hello", "bob"] or j["argv"] == ["/bin/echo", "hello", "bob"]
    # POST /commands/{original name} resolves through the alias table
    j = ok(s.post("/commands/Hello-World.v2", token=ALICE_TOKEN, json_body={"who": "carol"}))
    assert j["stdout"] == "hello carol\n"
    # the alias is accepted by POST /ops/{id} too (Registry.resolve)
    assert ok(call(s, "Hello-World.v2", {"who": "x"}))["stdout"] == "hello x\n"
    # GET /commands lists the caller's commands by original name
    lst = ok(s.get("/commands", token=ALICE_TOKEN))["commands"]
    assert [(c["name"], c["op"]) for c in lst] == [("Hello-World.v2", "custom.hello_world_v2")]
    assert lst[0]["summary"] == "Greet someone" and lst[0]["params"]["required"] == ["who"]
    # bob has no custom op mounted: an empty list, and the command is the one 404
    assert ok(s.get("/commands", token=BOB_TOKEN))["commands"] == []
    assert_error(s.post("/commands/Hello-World.v2", token=BOB_TOKEN, json_body={"who": "x"}), 404, "op.not_enabled")
    # anonymous callers learn nothing
    assert_error(s.get("/commands"), 401, "auth.required")
    assert_error(s.post("/commands/Hello-World.v2", json_body={"who": "x"}), 401, "auth.required")


def test_legacy_route_only_reaches_declarative_commands(abx, workspace):
    s = abx(config(workspace, [HELLO]))
    # not a way around REST routes: only original names of custom commands resolve here
    for name in ("custom.hello_world_v2", "core.health", "nosuch", "hello_world_v2"):
        assert_error(s.post("/commands/" + name, token=ALICE_TOKEN, json_body={"who": "x"}), 404, "op.not_enabled")
    # the built-in literal routes still win
    j = ok(s.post("/commands/run", token=ALICE_TOKEN, json_body={"argv": ["echo", "builtin"]}))
    assert j["stdout"] == "builtin\n"
    # arguments go in the JSON body, as for POST /ops/{id}
    assert_error(s.post("/commands/Hello-World.v2?who=x", token=ALICE_TOKEN, json_body={}), 400, "args.invalid")
    # the schema applies: unknown and missing arguments
    assert_error(s.post("/commands/Hello-World.v2", token=ALICE_TOKEN, json_body={"who": "x", "y": 1}), 400,
                 "args.unknown")
    assert_error(s.post("/commands/Hello-World.v2", token=ALICE_TOKEN, json_body={}), 400, "args.missing")


def test_placeholders_are_separate_argv_elements_never_a_shell(abx, workspace):
    custom = [{"name": "greet", "argv": ["echo", "--name={who}", "{who}", "{{literal}}", "n={n}", "{flag}", "{opt}"],
               "params": {"who": "string", "n": "int", "flag": {"type": "bool", "default": False},
                          "opt": {"type": "string", "required": False}},
               "effects": "exec"}]
    s = abx(config(workspace, custom))
    evil = "a b; touch pwned $(id) `id` | cat > x"
    j = ok(call(s, "custom.greet", {"who": evil, "n": 7}))
    # {opt} alone and not given: the element is left out
    assert j["argv"][1:] == ["--name=" + evil, evil, "{literal}", "n=7", "false"]
    assert j["stdout"] == "--name=%s %s {literal} n=7 false\n" % (evil, evil)
    assert not os.path.exists(os.path.join(workspace, "pwned"))
    j = ok(call(s, "custom.greet", {"who": "w", "n": -1, "flag": True, "opt": "o"}))
    assert j["argv"][1:] == ["--name=w", "w", "{literal}", "n=-1", "true", "o"]
    assert_error(call(s, "custom.greet", {"who": "w", "n": "seven"}), 400, "args.invalid")
    r = call(s, "custom.greet", {"who": "w" * 70000, "n": 1})
    assert_error(r, 400, "args.invalid")
    assert "longer than 64 KiB" in r.json()["error"]["message"]


COUNT = {"name": "count", "argv": ["printf", "{{\"lines\": %s, \"name\": \"%s\"}}", "{n}", "{who}"],
         "params": {"n": "string", "who": "string"}, "effects": ["exec"],
         "result": {"lines": "int", "name": "string", "note": {"type": "string", "required": False}}}


def test_declared_result_is_the_commands_json_output(abx, workspace):
    """result: {name: TYPE} — the command prints one JSON object with those fields and
    that object is the op's result (typed in the catalog); without result: the result
    is commands.run's, declared too."""
    bad = dict(COUNT, name="bad", argv=["echo", "{n}"])
    fails = dict(COUNT, name="fails", argv=["false", "{n}"])
    s = abx(config(workspace, [HELLO, COUNT, bad, fails], allow=[
        {"ops": ["core.*"], "principals": ["*"]},
        {"ops": ["custom.*"], "principals": ["alice"], "paths": [workspace + "/**"]}]))
    d = ok(s.get("/ops/custom.count", token=ALICE_TOKEN))
    assert [(f["name"], f["type"], f["required"]) for f in d["result"]["fields"]] == [
        ("lines", "integer", True), ("name", "string", True), ("note", "string", False)]
    hello = ok(s.get("/ops/custom.hello_world_v2", token=ALICE_TOKEN))["result"]["schema"]
    assert {"stdout", "exit_code", "argv"} <= set(hello["required"])
    assert ok(call(s, "custom.count", {"n": "3", "who": "x"})) == {"lines": 3, "name": "x"}
    # a missing declared field, output that is not a JSON object, a failing command
    for op, body, words in (("custom.count", {"n": "3", "who": 'x", "extra": "1'}, "does not match"),
                            ("custom.count", {"n": "\"three\"", "who": "x"}, "does not match"),
                            ("custom.bad", {"n": "3", "who": "x"}, "not one JSON object"),
                            ("custom.fails", {"n": "3", "who": "x"}, "did not succeed")):
        r = call(s, op, body)
        assert_error(r, 502, "op.bad_result")
        assert words in r.json()["error"]["message"], r.text


def test_mangling_collisions_get_suffixes(abx, workspace):
    custom = [dict(HELLO, name="Hello-World.v2"), dict(HELLO, name="hello world v2"),
              dict(HELLO, name="HELLO__WORLD--V2"), dict(HELLO, name="2fast")]
    s = abx(config(workspace, custom))
    names = {c["name"]: c["op"] for c in ok(s.get("/commands", token=ALICE_TOKEN))["commands"]}
    assert names == {"Hello-World.v2": "custom.hello_world_v2", "hello world v2": "custom.hello_world_v2_2",
                     "HELLO__WORLD--V2": "custom.hello_world_v2_3", "2fast": "custom.c_2fast"}
    assert ok(s.post("/commands/hello%20world%20v2", token=ALICE_TOKEN, json_body={"who": "y"}))["stdout"] == "hello y\n"
    # discovery: ids are primary, original names only as aliases
    ops = {o["id"]: o for o in ok(s.get("/ops", token=ALICE_TOKEN))["ops"]}
    assert "custom.hello_world_v2_2" in ops and "hello world v2" not in ops
    assert ops["custom.hello_world_v2_2"]["aliases"] == ["hello world v2"]


# -- paths: intrinsic jail ∩ statement scope, canonical values ------------------------------

def test_path_params_intrinsic_jail_intersected_with_statement(abx, workspace, tmp_path):
    outside = tmp_path / "outside"
    outside.mkdir()
    (outside / "o.txt").write_text("outside\n")
    (tmp_path / "ws" / "sub" / "d.txt").write_text("inner\n")
    custom = [{"name": "show", "argv": ["cat", "{target}"], "params": {"target": "string"},
               "paths": {"target": [workspace + "/sub/**", str(outside) + "/**"]}, "effects": ["exec"],
               "timeout": 30}]
    s = abx(config(workspace, custom))
    # inside both: runs, with the canonical path substituted (relative and ../ resolved)
    j = ok(call(s, "custom.show", {"target": "sub/../sub/c.txt"}))
    assert j["stdout"] == "deep\n" and j["argv"][1] == workspace + "/sub/c.txt"
    # inside the statement's scope, outside the op's own jail
    r = call(s, "custom.show", {"target": workspace + "/a.txt"})
    assert_error(r, 403, "policy.path_not_allowed")
    assert "own jail" in r.json()["error"]["message"]
    # inside the op's own jail, outside the statement's scope
    assert_error(call(s, "custom.show", {"target": str(outside / "o.txt")}), 403, "policy.path_not_allowed")
    # a symlink inside both that points outside is judged by its canonical target
    os.symlink(str(outside / "o.txt"), os.path.join(workspace, "sub", "link"))
    assert_error(call(s, "custom.show", {"target": workspace + "/sub/link"}), 403, "policy.path_not_allowed")
    # the statement that mounts a path op must carry a path scope
    p = tmp_path / "noscope.json"
    p.write_text(json.dumps(config(workspace, custom, allow=[{"ops": ["custom.show"], "principals": ["alice"]}])))
    r = check(str(p))
    assert r.returncode == 1 and "config.scope_required" in r.stdout, r.stdout


def test_optional_path_parameter_left_out(abx, workspace):
    custom = [{"name": "ls", "argv": ["ls", "-d", "{dir}"], "effects": ["exec"],
               "params": {"dir": {"type": "string", "required": False}}, "paths": ["dir"]}]
    s = abx(config(workspace, custom))
    j = ok(call(s, "custom.ls", {}))
    assert j["argv"][1:] == ["-d"] and j["exit_code"] == 0 and j["stdout"] == ".\n", j
    j = ok(call(s, "custom.ls", {"dir": "sub"}))
    assert j["argv"][1:] == ["-d", workspace + "/sub"] and j["stdout"] == workspace + "/sub\n", j


def test_relative_intrinsic_patterns_are_anchored_at_the_workspace(abx, workspace):
    custom = [{"name": "show", "argv": ["cat", "{target}"], "params": {"target": "string"},
               "paths": {"target": {"roots": "sub/**", "access": "read"}}, "effects": ["exec"]}]
    s = abx(config(workspace, custom))
    assert ok(call(s, "custom.show", {"target": "sub/c.txt"}))["stdout"] == "deep\n"
    assert_error(call(s, "custom.show", {"target": "a.txt"}), 403, "policy.path_not_allowed")


def test_process_is_confined_and_timed_out(abx, workspace, tmp_path):
    secret = tmp_path / "secret.txt"
    secret.write_text("top secret\n")
    custom = [{"name": "peek", "argv": ["cat", str(secret)], "effects": ["exec"]},
              {"name": "nap", "argv": ["sleep", "20"], "effects": ["exec"], "timeout": 0.5}]
    s = abx(config(workspace, custom))
    j = ok(call(s, "custom.peek", {}))
    # the fixed argv names a file outside every granted root: the kernel refuses it
    assert j["exit_code"] != 0 and "top secret" not in j["stdout"], j
    t0 = time.time()
    j = ok(call(s, "custom.nap", {}))
    assert j["status"] == "timed_out" and time.time() - t0 < 10, j


# -- effects and lints ------------------------------------------------------------------------

def test_undeclared_effects_are_admin_and_explicit_only(abx, workspace, tmp_path):
    custom = [{"name": "lint", "argv": ["cat", "{file}"], "params": {"file": "string"}}]
    s = abx(config(workspace, custom))
    # custom.* does not mount an admin (explicit-only) op
    assert_error(call(s, "custom.lint", {"file": "a.txt"}), 404, "op.not_enabled")
    allow = [{"ops": ["core.*"], "principals": ["*"]},
             {"ops": ["custom.lint"], "principals": ["alice"], "paths": [workspace + "/**"]}]
    s2 = abx(config(workspace, custom, allow=allow))
    assert ok(call(s2, "custom.lint", {"file": workspace + "/a.txt"}))["stdout"] == "hello\n"
    ops = {o["id"]: o for o in ok(s2.get("/ops", token=ALICE_TOKEN))["ops"]}
    assert ops["custom.lint"]["effects"] == ["admin"]
    text = "custom:\n  - name: lint\n    argv: [cat, '{file}']\n    params: {file: string}\n"
    r = check(write_config(tmp_path, text))
    assert r.returncode == 0, r.stdout
    assert "abx.yaml:2: warning: core.effects_undeclared" in r.stdout
    assert ("abx.yaml:2: warning: core.path_like_param: op 'custom.lint': parameter file looks like a path but is "
            "not declared in paths=; path scopes will not protect it") in r.stdout


# -- config errors, each with its line -------------------------------------------------------

BAD = [
    ("- name: run\n    argv: [echo]\n", "config.name_conflict", 3, "collides with the built-in route /commands/run"),
    ("- name: sessions\n    argv: [echo]\n", "config.name_conflict", 3, "/commands/sessions"),
    ("- name: stream\n    argv: [echo]\n", "config.name_conflict", 3, "/commands/stream"),
    ("- name: x\n    argv: [echo, '{nope}']\n", "config.invalid", 4, "placeholder '{nope}'"),
    ("- name: x\n    argv: [echo, '{a']\n    params: {a: string}\n", "config.invalid", 4, "unclosed"),
    ("- name: x\n    argv: ['{a}']\n    params: {a: string}\n", "config.invalid", 4, "program (argv[0]) is fixed"),
    ("- name: x\n    argv: [no-such-program-abx]\n", "config.bad_value", 4, "not found"),
    ("- name: x\n    argv: [./rel/prog]\n", "config.bad_value", 4, "must be absolute"),
    ("- name: x\n    argv: [/etc/passwd]\n", "config.bad_value", 4, "not an executable"),
    ("- name: x\n    argv: []\n", "config.invalid", 3, "non-empty list"),
    ("- name: x\n    argv: [echo]\n    shell: true\n", "config.unknown_key", 5, "unknown key 'shell'"),
    ("- name: x\n    argv: [echo]\n    effects: [fly]\n", "config.bad_value", 5, "effects must be"),
    ("- name: x\n    argv: [echo]\n    timeout: -1\n", "config.bad_value", 5, "timeout"),
    ("- name: x\n    argv: [echo]\n    params: {a: tuple}\n", "config.invalid", 5, "needs a type"),
    ("- name: x\n    argv: [echo]\n    params: {A-b: string}\n", "config.invalid", 5, "must be [a-z0-9_]"),
    ("- name: x\n    argv: [echo]\n    params: {a: {type: int, color: red}}\n", "config.unknown_key", 5, "'color'"),
    ("- name: x\n    argv: [echo]\n    paths: {a: ['/w/**']}\n", "config.invalid", 5, "not a declared string"),
    ("- name: x\n    argv: [echo, '{a}']\n    params: {a: string}\n    paths: {a: ['/w/[ab]']}\n",
     "config.bad_glob", 6, "path pattern"),
    ("- name: x\n    argv: [echo, '{a}']\n    params: {a: string}\n    paths: {a: {roots: ['/w/**'], access: fly}}\n",
     "config.bad_value", 6, "access of 'a'"),
    ("- name: x\n    argv: [echo, '{a}']\n    params: {a: string}\n    paths: {a: []}\n",
     "config.invalid", 6, "non-empty list"),
    ("- name: a/b\n    argv: [echo]\n", "config.invalid", 3, "needs a name"),
    ("- name: '---'\n    argv: [echo]\n", "config.invalid", 3, "no letter or digit"),
    ("- name: x\n    argv: [echo]\n  - name: x\n    argv: [echo]\n", "config.invalid", 5, "declared twice"),
    ("- 7\n", "config.invalid", 3, "must be a mapping"),
]


@pytest.mark.parametrize("entry,code,line,text", BAD)
def test_check_config_reports_custom_errors_with_lines(tmp_path, entry, code, line, text):
    path = write_config(tmp_path, "listen: 127.0.0.1:0\ncustom:\n  " + entry)
    r = check(path)
    assert r.returncode == 1, r.stdout
    want = "abx.yaml:%d: error: %s:" % (line, code)
    assert want in r.stdout and text in r.stdout, r.stdout


def test_serve_refuses_a_config_with_a_name_conflict(abx, workspace):
    s = abx(config(workspace, [{"name": "run", "argv": ["echo"], "effects": ["exec"]}]), start=False)
    with pytest.raises(RuntimeError) as e:
        s.start()
    assert "config.name_conflict" in str(e.value)


# -- aliases in policy files, reload ---------------------------------------------------------

def test_policy_alias_rewritten_with_deprecation_warning(abx, workspace, tmp_path):
    allow = [{"ops": ["core.*"], "principals": ["*"]}, {"ops": ["Hello-World.v2"], "principals": ["alice"]}]
    cfg = config(workspace, [HELLO], allow=allow)
    path = tmp_path / "abx.json"
    path.write_text(json.dumps(cfg))
    r = check(str(path))
    assert r.returncode == 0, r.stdout
    assert "config.alias_used" in r.stdout and "deprecated alias" in r.stdout and "custom.hello_world_v2" in r.stdout
    s = abx(cfg)
    assert ok(call(s, "custom.hello_world_v2", {"who": "z"}))["stdout"] == "hello z\n"
    cat = ok(s.get("/ops", token=ALICE_TOKEN))["ops"]
    assert [o["id"] for o in cat if o["id"].startswith("custom.")] == ["custom.hello_world_v2"]
    assert all(o["id"] != "Hello-World.v2" for o in cat)
    paths = ok(s.get("/openapi.json", token=ALICE_TOKEN))["paths"]
    assert "/ops/custom.hello_world_v2" in paths and not any("Hello-World" in p for p in paths)


def test_reload_with_changed_custom_warns_and_keeps_the_registered_ops(abx, workspace):
    s = abx(config(workspace, [HELLO]))
    cfg = config(workspace, [HELLO, {"name": "new", "argv": ["echo", "new"], "effects": ["exec"]}])
    with open(s.config_path, "w") as f:
        json.dump(cfg, f)
    s.proc.send_signal(signal.SIGHUP)
    deadline = time.time() + 10
    while "config.restart_required" not in s.stderr() and time.time() < deadline:
        time.sleep(0.05)
    assert "custom:, load:, plugin_dir or python changed" in s.stderr()
    assert ok(call(s, "custom.hello_world_v2", {"who": "still"}))["stdout"] == "hello still\n"
    assert_error(call(s, "custom.new", {}), 404, "op.not_enabled")


# -- the ledger records custom calls like built-ins -----------------------------------------

def _group(path, request_id, timeout=3.0):
    deadline = time.time() + timeout
    while True:
        con = sqlite3.connect(path, timeout=10)
        try:
            rows = con.execute("SELECT group_id, principal, op, door FROM action_groups WHERE request_id = ?",
                               (request_id,)).fetchall()
            evs = con.execute("SELECT kind, data FROM action_events WHERE group_id = ? ORDER BY ordinal",
                              (rows[0][0],)).fetchall() if rows else []
        finally:
            con.close()
        if rows and any(k == "finished" for k, _ in evs):
            return rows[0], [(k, json.loads(d)) for k, d in evs]
        if time.time() > deadline:
            raise AssertionError("no finished group for %s: %r %r" % (request_id, rows, evs))
        time.sleep(0.05)


def test_ledger_records_custom_calls_like_builtins(abx, workspace, tmp_path):
    led = str(tmp_path / "ledger.db")
    custom = [HELLO, {"name": "show", "argv": ["cat", "{target}"], "params": {"target": "string"},
                      "paths": {"target": [workspace + "/**"]}, "effects": ["exec"]}]
    cfg = config(workspace, custom)
    cfg["ledger"] = {"path": led}
    s = abx(cfg)
    r = s.post("/commands/Hello-World.v2", token=ALICE_TOKEN, json_body={"who": "ledger"})
    ok(r)
    (gid, principal, op, door), evs = _group(led, r.headers["X-Request-Id"])
    assert (principal, op, door) == ("alice", "custom.hello_world_v2", "commands")
    kinds = [k for k, _ in evs]
    assert kinds[0] == "received" and "admitted" in kinds and kinds[-1] == "finished", kinds
    assert [d for k, d in evs if k == "finished"][0]["status"] == 200
    r = call(s, "custom.show", {"target": "a.txt"})
    ok(r)
    (_, _, op, door), evs = _group(led, r.headers["X-Request-Id"])
    assert (op, door) == ("custom.show", "rpc")
    adm = [d for k, d in evs if k == "admitted"][0]
    assert workspace + "/a.txt" in json.dumps(adm)
    r = call(s, "custom.show", {"target": "/etc/hostname"})
    assert_error(r, 403, "policy.path_not_allowed")
    (_, _, op, _), evs = _group(led, r.headers["X-Request-Id"])
    assert op == "custom.show" and [d for k, d in evs if k == "denied"][0]["code"] == "policy.path_not_allowed"


def test_example_commands(abx, workspace):
    """examples/commands/abx.yaml as shipped (paths moved to this test's workspace)."""
    os.makedirs(os.path.join(workspace, "docs"))
    with open(os.path.join(workspace, "docs", "notes.txt"), "w") as f:
        f.write("a\nb\n")
    with open(os.path.join(workspace, "top.txt"), "w") as f:
        f.write("x\n")
    root = os.path.dirname(os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__)))))
    text = open(os.path.join(root, "examples", "commands", "abx.yaml")).read()
    s = abx(text.replace("/tmp/abx-commands", workspace).replace("127.0.0.1:8092", "127.0.0.1:0"))
    assert ok(s.post("/commands/Hello-World.v2", token=ALICE_TOKEN, json_body={"who": "world"}))["stdout"] == \
        "hello world\n"
    assert ok(call(s, "custom.hello_world_v2", {"who": "again"}))["stdout"] == "hello again\n"
    j = ok(call(s, "custom.line_count", {"file": "docs/notes.txt"}))
    assert j["stdout"].split() == ["2", workspace + "/docs/notes.txt"]
    assert_error(call(s, "custom.line_count", {"file": "top.txt"}), 403, "policy.path_not_allowed")
    names = json.dumps(ok(s.get("/commands", token=ALICE_TOKEN)))
    assert "Hello-World.v2" in names and "line-count" in names
