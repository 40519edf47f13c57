"""Config files: `abx check-config` diagnostics (FILE:LINE: level: code: message), and
`abx serve` refusing bad configs, non-loopback plaintext listeners, selectors, presets."""
import json
import os
import re
import subprocess

import pytest

import abxtest
from abxtest import ALICE_TOKEN, BOB_TOKEN, assert_error, free_port, multi_config, run_abx, sha256_hex

DIAG = re.compile(r"^(?P<file>.+?):(?P<line>\d+): (?P<level>error|warning): (?P<code>[a-z_]+\.[a-z_]+): (?P<msg>.+)$")


def check(tmp_path, text, name="c.yaml"):
    p = tmp_path / name
    p.write_text(text)
    r = run_abx(["check-config", str(p)])
    diags = []
    for ln in r.stdout.splitlines():
        m = DIAG.match(ln)
        if m:
            d = m.groupdict()
            d["line"] = int(d["line"])
            assert d["file"] == str(p), ln
            diags.append(d)
    return r, diags, str(p)


def codes(diags, level=None):
    return [d["code"] for d in diags if level is None or d["level"] == level]


def serve_fails(args, env=None, timeout=8):
    """Run `abx serve ARGS`; it must exit by itself. Returns (rc, stdout, stderr)."""
    e = dict(os.environ)
    e.update(env or {})
    p = subprocess.Popen([abxtest.ABX_BIN, "serve"] + args, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                         env=e, text=True)
    try:
        out, err = p.communicate(timeout=timeout)
    except subprocess.TimeoutExpired:
        p.kill()
        out, err = p.communicate()
        pytest.fail("abx serve %s kept running; expected a refusal. stderr: %s" % (args, err[-2000:]))
    rep = abxtest.sanitizer_report(err)
    assert rep is None, "%s in abx serve:\n%s" % (rep, err[-4000:])
    return p.returncode, out, err


GOOD = """\
workspace: /srv/abx-test-ws
auth:
  tokens:
    - principal: alice
      roles: [agent]
      token_sha256: "%s"
policy:
  allow:
    - ops: ["files.*"]
      principals: ["role:agent"]
      paths: ["/srv/abx-test-ws/**"]
""" % sha256_hex(ALICE_TOKEN)


# -- check-config -----------------------------------------------------------------------------

def test_check_config_ok(tmp_path):
    r, diags, _ = check(tmp_path, GOOD)
    assert r.returncode == 0, r.stdout + r.stderr
    assert diags == []
    assert "ok (0 warning(s))" in r.stdout


def test_check_config_plaintext_token_warning(tmp_path):
    text = GOOD.replace('token_sha256: "%s"' % sha256_hex(ALICE_TOKEN), "token: %s" % ALICE_TOKEN)
    r, diags, _ = check(tmp_path, text)
    assert r.returncode == 0, r.stdout
    assert codes(diags) == ["config.plaintext_token"]
    assert diags[0]["level"] == "warning"
    assert 4 <= diags[0]["line"] <= 6
    assert "ok (1 warning(s))" in r.stdout
    assert ALICE_TOKEN not in r.stdout + r.stderr  # the diagnostic must not echo the secret


def test_check_config_unknown_top_key_line(tmp_path):
    r, diags, _ = check(tmp_path, GOOD + "bogus_key: 1\n")
    assert r.returncode == 1
    d = [x for x in diags if x["code"] == "config.unknown_key"]
    assert d and d[0]["level"] == "error"
    assert d[0]["line"] == GOOD.count("\n") + 1
    assert "bogus_key" in d[0]["msg"]


@pytest.mark.parametrize("text,line,word", [
    (GOOD.replace("  allow:\n", "  bogus: 1\n  allow:\n"), 8, "bogus"),
    (GOOD + "      opz: [1]\n", 12, "opz"),
    (GOOD.replace("      roles: [agent]\n", "      roles: [agent]\n      colour: red\n"), 6, "colour"),
    (GOOD + "limits:\n  request_max_bytes: 1024\n  bogus_limit: 3\n", 14, "bogus_limit"),
], ids=["policy", "statement", "token_entry", "limits"])
def test_check_config_nested_unknown_key(tmp_path, text, line, word):
    r, diags, _ = check(tmp_path, text)
    assert r.returncode == 1, r.stdout
    d = [x for x in diags if x["code"] == "config.unknown_key"]
    assert d, r.stdout
    assert word in d[0]["msg"]
    assert d[0]["line"] == line, r.stdout


@pytest.mark.parametrize("value", ["{retention: 0s}", "{retention: soon}", "{max_size: 32KiB}", "{max_size: -5}",
                                   "{max_size: lots}", "{retention: 30}"])
def test_check_config_ledger_rotation_bad_values(tmp_path, value):
    r, diags, _ = check(tmp_path, GOOD + "ledger: %s\n" % value)
    assert r.returncode == 1, r.stdout
    d = [x for x in diags if x["code"] == "config.bad_value"]
    assert d and d[0]["line"] == GOOD.count("\n") + 1, r.stdout
    assert "ledger." in d[0]["msg"]


@pytest.mark.parametrize("value", ["5", "2000000", "lots", "{a: 1}"])
def test_check_config_auth_failures_bad_values(tmp_path, value):
    r, diags, _ = check(tmp_path, GOOD + "limits: {auth_failures: %s}\n" % value)
    assert r.returncode == 1, r.stdout
    d = [x for x in diags if x["code"] == "config.bad_value"]
    assert d and "auth_failures" in d[0]["msg"], r.stdout


def test_check_config_ledger_rotation_accepted(tmp_path):
    r, diags, _ = check(tmp_path, GOOD + "ledger: {retention: 30d, max_size: 256MiB}\n")
    assert r.returncode == 0, r.stdout


def test_check_config_confine_never_silently_ignored(tmp_path):
    # a value that means nothing must not pass
    r, diags, _ = check(tmp_path, GOOD + "confine: sometimes\n")
    assert r.returncode == 1, r.stdout
    r, diags, _ = check(tmp_path, GOOD + "confine: required\n", name="c2.yaml")
    assert r.returncode == 0, r.stdout


def test_check_config_system_key_never_silently_ignored(tmp_path):
    # the key is understood and a malformed value refused, never accepted and ignored
    r, diags, _ = check(tmp_path, GOOD + "system: {env: [LANG]}\n")
    assert r.returncode == 0, r.stdout
    r, diags, _ = check(tmp_path, GOOD + "system: {envv: [LANG]}\n", name="c2.yaml")
    assert r.returncode == 1, r.stdout


def test_check_config_tests_key_never_silently_ignored(tmp_path):
    # a failing policy-test expectation fails check-config
    text = GOOD + ("tests:\n  - {principal: alice, op: files.read, args: {path: /etc/passwd}, expect: allow}\n")
    r, diags, _ = check(tmp_path, text)
    assert r.returncode == 1, r.stdout
    assert codes(diags, "error"), r.stdout


def test_check_config_unknown_selector_did_you_mean(tmp_path):
    text = GOOD.replace('["files.*"]', '["files.lsit"]')
    r, diags, _ = check(tmp_path, text)
    assert r.returncode == 1
    d = [x for x in diags if x["code"] == "config.unknown_selector"]
    assert d and d[0]["level"] == "error"
    assert "did you mean 'files.list'" in d[0]["msg"]
    assert d[0]["line"] in (9, 10)


@pytest.mark.parametrize("sel", ["nosuch.*", "group:nosuch", "files.nope", "filez.*"])
def test_check_config_selector_matching_nothing(tmp_path, sel):
    r, diags, _ = check(tmp_path, GOOD.replace('["files.*"]', '["%s"]' % sel))
    assert r.returncode == 1, r.stdout
    assert "config.unknown_selector" in codes(diags, "error"), r.stdout


def test_check_config_unknown_selector_in_deny(tmp_path):
    r, diags, _ = check(tmp_path, GOOD + "  deny:\n    - ops: [files.raed]\n")
    assert r.returncode == 1
    d = [x for x in diags if x["code"] == "config.unknown_selector"]
    assert d and "files.read" in d[0]["msg"]


def test_check_config_non_strict_selector_warning(tmp_path):
    text = GOOD.replace("policy:\n", "policy:\n  strict: false\n").replace('["files.*"]', '["files.*", "files.lsit"]')
    r, diags, _ = check(tmp_path, text)
    assert r.returncode == 0, r.stdout
    assert codes(diags) == ["config.unknown_selector"] and diags[0]["level"] == "warning"


def test_check_config_scope_required(tmp_path):
    text = GOOD.replace('      paths: ["/srv/abx-test-ws/**"]\n', "")
    r, diags, _ = check(tmp_path, text)
    assert r.returncode == 1
    assert "config.scope_required" in codes(diags, "error")


def test_check_config_effect_selector(tmp_path):
    r, diags, _ = check(tmp_path, GOOD.replace('["files.*"]', '["effect:read,write"]'))
    assert r.returncode == 0, r.stdout


def test_check_config_short_token(tmp_path):
    text = GOOD.replace('token_sha256: "%s"' % sha256_hex(ALICE_TOKEN), "token: short-token")
    r, diags, _ = check(tmp_path, text)
    assert r.returncode == 1
    assert codes(diags, "error"), r.stdout
    assert "short-token" not in r.stdout


def test_check_config_duplicate_token(tmp_path):
    text = GOOD.replace("policy:\n", "    - principal: mallory\n      roles: [agent]\n"
                                     "      token_sha256: \"%s\"\npolicy:\n" % sha256_hex(ALICE_TOKEN))
    r, diags, _ = check(tmp_path, text)
    assert r.returncode == 1
    assert "config.duplicate_token" in codes(diags, "error"), r.stdout


def test_check_config_duplicate_token_across_forms(tmp_path):
    # the same secret once as plain text and once as a hash is still the same token
    text = GOOD.replace("policy:\n", "    - principal: mallory\n      roles: [agent]\n"
                                     "      token: %s\npolicy:\n" % ALICE_TOKEN)
    r, diags, _ = check(tmp_path, text)
    assert r.returncode == 1
    assert "config.duplicate_token" in codes(diags, "error"), r.stdout


def test_check_config_json(tmp_path):
    cfg = {"workspace": "/srv/abx-test-ws",
           "auth": {"tokens": [{"principal": "alice", "roles": ["agent"], "token_sha256": sha256_hex(ALICE_TOKEN)}]},
           "policy": {"allow": [{"ops": ["files.*"], "principals": ["role:agent"], "paths": ["/srv/abx-test-ws/**"]}]}}
    r, diags, _ = check(tmp_path, json.dumps(cfg, indent=1), name="c.json")
    assert r.returncode == 0, r.stdout
    cfg["bogus"] = 1
    r, diags, _ = check(tmp_path, json.dumps(cfg, indent=1), name="c2.json")
    assert r.returncode == 1
    assert "config.unknown_key" in codes(diags)
    assert diags[0]["line"] > 1


def test_check_config_syntax_error(tmp_path):
    r, diags, _ = check(tmp_path, "policy: [\n")
    assert r.returncode == 1
    assert codes(diags, "error")


def test_check_config_missing_file(tmp_path):
    r = run_abx(["check-config", str(tmp_path / "nope.yaml")])
    assert r.returncode == 1


def test_check_config_unknown_preset(tmp_path):
    r, diags, _ = check(tmp_path, GOOD.replace("policy:\n", "policy:\n  presets: [nosuch]\n"))
    assert r.returncode == 1
    assert codes(diags, "error")


@pytest.mark.parametrize("key", ["presets", "allow"])
def test_policy_keys_at_the_top_level_say_where_they_belong(tmp_path, key):
    r, diags, _ = check(tmp_path, "workspace: /tmp\n%s: [workspace]\n" % key)
    assert r.returncode == 1
    msgs = [d["msg"] for d in diags if d["code"] == "config.unknown_key"]
    assert msgs and "belongs under 'policy:'" in msgs[0] and "extends: default" in msgs[0], diags


# -- serve refuses --------------------------------------------------------------------------------

def _write(tmp_path, text, name="s.yaml"):
    p = tmp_path / name
    p.write_text(text)
    return str(p)


@pytest.mark.parametrize("mutate", [
    lambda t: t + "bogus_key: 1\n",
    lambda t: t + "ledger: {retention: soon}\n",
    lambda t: t + "custom: [{name: run, argv: [echo]}]\n",
    lambda t: t.replace('["files.*"]', '["files.lsit"]'),
    lambda t: t.replace('      paths: ["/srv/abx-test-ws/**"]\n', ""),
    lambda t: t.replace('token_sha256: "%s"' % sha256_hex(ALICE_TOKEN), "token: short"),
    lambda t: "policy: [\n",
], ids=["unknown_key", "bad_ledger_value", "name_conflict", "unknown_selector", "scope_required", "short_token",
        "syntax"])
def test_serve_refuses_bad_config(tmp_path, mutate):
    port = free_port()
    cfg = _write(tmp_path, mutate(GOOD))
    rc, out, err = serve_fails(["--config", cfg, "--listen", "127.0.0.1:%d" % port],
                               env={"ABX_HOME": str(tmp_path / "home")})
    assert rc == 1, (rc, err)
    assert err.strip(), "a refusal must say why on stderr"


def test_serve_refuses_missing_config(tmp_path):
    rc, out, err = serve_fails(["--config", str(tmp_path / "nope.yaml"), "--listen", "127.0.0.1:%d" % free_port()],
                               env={"ABX_HOME": str(tmp_path / "home")})
    assert rc == 1 and err.strip()


def test_serve_refuses_non_loopback_plaintext_flag(tmp_path):
    cfg = _write(tmp_path, GOOD)
    rc, out, err = serve_fails(["--config", cfg, "--listen", "0.0.0.0:%d" % free_port()],
                               env={"ABX_HOME": str(tmp_path / "home")})
    assert rc == 1 and err.strip()


def test_serve_refuses_non_loopback_plaintext_config(tmp_path):
    cfg = _write(tmp_path, "listen: 0.0.0.0:%d\n" % free_port() + GOOD)
    rc, out, err = serve_fails(["--config", cfg], env={"ABX_HOME": str(tmp_path / "home")})
    assert rc == 1 and err.strip()


def test_serve_refuses_non_loopback_embedded_default(tmp_path):
    rc, out, err = serve_fails(["--listen", "0.0.0.0:%d" % free_port(), "--workspace", str(tmp_path)],
                               env={"ABX_HOME": str(tmp_path / "home")})
    assert rc == 1 and err.strip()


def test_serve_non_loopback_with_allow_plaintext(abx):
    s = abx(multi_config(top="allow_plaintext: true\n"), start=False)
    s.args = []
    orig = s.command

    def cmd():
        c = orig()
        c[c.index("--listen") + 1] = "0.0.0.0:%d" % s.port
        return c
    s.command = cmd
    s.start()
    r = s.get("/capabilities", token=ALICE_TOKEN)
    assert r.status_code == 200, r.text


def test_lint_errors_allowed_then_scope_required_at_runtime(abx):
    text = multi_config(top="allow_lint_errors: true\n").replace('      paths: ["{ws}/**"]\n', "")
    s = abx(text)
    r = s.get("/files/read", token=ALICE_TOKEN, params={"path": "a.txt"})
    assert_error(r, 403, "policy.scope_required")


def test_flag_overrides_config_listen(abx):
    other = free_port()
    s = abx(multi_config(top="listen: 127.0.0.1:%d\n" % other))
    assert s.port != other
    assert s.get("/capabilities", token=ALICE_TOKEN).status_code == 200
    import requests
    with pytest.raises(requests.ConnectionError):
        requests.get("http://127.0.0.1:%d/health" % other, timeout=2)


def test_json_config_serves(abx, workspace):
    cfg = {"workspace": workspace,
           "auth": {"tokens": [{"principal": "alice", "roles": ["agent"], "token_sha256": sha256_hex(ALICE_TOKEN)}]},
           "policy": {"allow": [{"ops": ["files.*", "core.*"], "principals": ["alice"],
                                 "paths": [workspace + "/**"]}]}}
    s = abx(cfg)
    assert s.config_path.endswith(".json")
    r = s.get("/files/read", token=ALICE_TOKEN, params={"path": "a.txt"})
    assert r.status_code == 200, r.text
    assert r.json()["content"] == "hello\n"


# -- selectors and presets, as served ---------------------------------------------------------------

def _mounted(s, tok):
    r = s.get("/ops", token=tok)
    assert r.status_code == 200, r.text
    return {e["id"] for e in r.json()["ops"]}


def test_effect_selector_mounts_read_ops(abx):
    s = abx(multi_config().replace('["files.*"]', '["effect:read"]'))
    m = _mounted(s, ALICE_TOKEN)
    assert {"files.read", "files.list", "files.stat", "core.health"} <= m
    assert s.get("/files/read", token=ALICE_TOKEN, params={"path": "a.txt"}).status_code == 200


def test_effect_set_selector(abx):
    s = abx(multi_config().replace('["files.*"]', '["effect:read,write"]'))
    assert "files.read" in _mounted(s, ALICE_TOKEN)


SCOPE_KEYS = {"path": None, "command": "commands", "url": "urls", "language": "languages", "agent": "agents",
              "port": "ports"}
SCOPE_VALUES = {"commands": '["/bin/true"]', "urls": '["https://example.invalid/**"]', "languages": "[python]",
                "agents": "[codex]", "ports": '["8000"]'}


def star_config():
    """multi_config with alice's statement widened to ops ["*"], carrying every scope that the
    catalog's non-admin ops declare (an op with e.g. a command parameter needs `commands`)."""
    cat = json.loads(run_abx(["catalog"]).stdout)
    kinds = {p.get("kind") for e in cat["ops"] if "admin" not in e["effects"] for p in e["params"]}
    kinds.discard(None)
    kinds.discard("")
    unknown = kinds - set(SCOPE_KEYS)
    if unknown:
        pytest.skip("catalog has parameter kinds this test cannot scope: %s" % sorted(unknown))
    extra = "".join("      %s: %s\n" % (SCOPE_KEYS[k], SCOPE_VALUES[SCOPE_KEYS[k]])
                    for k in sorted(kinds) if SCOPE_KEYS[k])
    return multi_config().replace('["files.*"]', '["*"]').replace('      paths: ["{ws}/**"]\n',
                                                                  '      paths: ["{ws}/**"]\n' + extra)


def test_star_selector(abx):
    s = abx(star_config())
    m = _mounted(s, ALICE_TOKEN)
    assert {"files.read", "core.ops.list"} <= m
    assert "files.read" not in _mounted(s, BOB_TOKEN)


def test_exact_id_and_principal_id_selectors(abx):
    s = abx(multi_config().replace('["files.*"]', '["files.stat"]').replace('["role:agent"]', '[alice]'))
    m = _mounted(s, ALICE_TOKEN)
    assert "files.stat" in m and "files.read" not in m
    assert "files.stat" not in _mounted(s, abxtest.CAROL_TOKEN)
    assert_error(s.get("/files/read", token=ALICE_TOKEN, params={"path": "a.txt"}), 404, "op.not_enabled")


def test_union_of_statements(abx, workspace, tmp_path):
    other = tmp_path / "other"
    other.mkdir()
    (other / "o.txt").write_text("other\n")
    extra = ('    - ops: ["files.read"]\n      principals: [alice]\n      paths: ["%s/**"]\n'
             % os.path.realpath(str(other)))
    s = abx(multi_config(extra_allow=extra))
    r = s.get("/files/read", token=ALICE_TOKEN, params={"path": str(other / "o.txt")})
    assert r.status_code == 200, r.text
    # carol is not in the second statement
    assert_error(s.get("/files/read", token=abxtest.CAROL_TOKEN, params={"path": str(other / "o.txt")}),
                 403, "policy.path_not_allowed")
    # files.stat is not in the second statement either
    assert_error(s.get("/files/stat", token=ALICE_TOKEN, params={"path": str(other / "o.txt")}),
                 403, "policy.path_not_allowed")


def test_path_kinds_read_scope(abx, workspace):
    text = multi_config().replace('      paths: ["{ws}/**"]\n', '      paths: {read: ["{ws}/sub/**"]}\n')
    s = abx(text)
    assert s.get("/files/read", token=ALICE_TOKEN, params={"path": "sub/c.txt"}).status_code == 200
    assert_error(s.get("/files/read", token=ALICE_TOKEN, params={"path": "a.txt"}), 403, "policy.path_not_allowed")


def test_workspace_preset_in_config(abx, workspace):
    text = """
workspace: {ws}
auth:
  tokens:
    - principal: alice
      roles: [agent]
      token_sha256: "%s"
policy:
  presets: [workspace]
""" % sha256_hex(ALICE_TOKEN)
    s = abx(text)
    r = s.get("/files/read", token=ALICE_TOKEN, params={"path": "a.txt"})
    assert r.status_code == 200, r.text
    assert_error(s.get("/files/read", token=ALICE_TOKEN, params={"path": "/etc/passwd"}),
                 403, "policy.path_not_allowed")


def test_deny_beats_allow_regardless_of_order(abx):
    # deny first or last: same decision
    d = '    - ops: ["files.read"]\n      principals: [alice]\n'
    s = abx(multi_config(deny=d))
    assert_error(s.get("/files/read", token=ALICE_TOKEN, params={"path": "a.txt"}), 403, "policy.denied")
    s2 = abx(multi_config(extra_allow='    - ops: ["files.read"]\n      principals: [alice]\n      paths: {read: ["/**"]}\n',
                          deny=d))
    assert_error(s2.get("/files/read", token=ALICE_TOKEN, params={"path": "a.txt"}), 403, "policy.denied")


def test_explicit_only_ops_not_mounted_by_wildcards(abx):
    cat = json.loads(run_abx(["catalog"]).stdout)
    admin = [e["id"] for e in cat["ops"] if "admin" in e["effects"]]
    if not admin:
        pytest.skip("no explicit-only (admin) ops in this build")
    s = abx(star_config())
    m = _mounted(s, ALICE_TOKEN)
    assert "files.read" in m
    assert not (set(admin) & m)


def test_explicit_only_ops_mounted_by_exact_id(abx):
    cat = json.loads(run_abx(["catalog"]).stdout)
    admin = sorted(e["id"] for e in cat["ops"] if "admin" in e["effects"])
    if not admin:
        pytest.skip("no explicit-only (admin) ops in this build")
    op = admin[0]
    ns = op.split(".")[0]
    s = abx(multi_config(extra_allow='    - ops: ["%s"]\n      principals: [alice]\n' % op))
    assert op in _mounted(s, ALICE_TOKEN)
    # bob has core.* (and alice/carol files.*): a namespace wildcard never mounts it
    assert op not in _mounted(s, BOB_TOKEN)
    assert op not in _mounted(s, abxtest.CAROL_TOKEN)
    s2 = abx(multi_config(extra_allow='    - ops: ["%s.*", "effect:read,write,admin"]\n      principals: [bob]\n'
                                      '      paths: ["{ws}/**"]\n' % ns)
             .replace("policy:\n", "policy:\n  strict: false\n"))
    assert op not in _mounted(s2, BOB_TOKEN)


def test_serve_relative_workspace_is_below_the_working_folder(tmp_path):
    """`abx serve --workspace w` serves ./w, not /w (it was joined to "/")."""
    (tmp_path / "w").mkdir()
    e = dict(os.environ, ABX_HOME=str(tmp_path / "home"))
    p = subprocess.Popen([abxtest.ABX_BIN, "serve", "--listen", "127.0.0.1:0", "--workspace", "w"], cwd=str(tmp_path),
                         stdout=subprocess.PIPE, stderr=subprocess.PIPE, env=e, text=True)
    try:
        line = p.stdout.readline()
    finally:
        p.terminate()
        out, err = p.communicate(timeout=10)
    assert abxtest.sanitizer_report(err) is None, err[-4000:]
    assert "(workspace %s)" % (tmp_path / "w") in line, line + out + err
