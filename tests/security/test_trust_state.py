"""Attack corpus: abx's own state out of the agent's reach (issue 12, class 1).

An independent review held a limited agent token and could run confined commands in the
workspace. With abx's config in the workspace, a process renamed `.abx` away and a
restart began a fresh ledger that `abx ledger verify` called intact; the same rename made
the config and the ledger readable through files.read; a config planted at abx's config
path was picked up by SIGHUP; a `.so` dropped into the default plugins/ folder beside an
in-workspace config would load at the next start; a principal's token_file inside the
workspace was readable.

What holds now (docs/security.md, "abx's own state"):
- abx's state (config, token files, plugins, Python op modules, ledger and its archive,
  abx's home with the ledger heads, runtime folder, TLS files) is never inside a root any
  statement lets anyone write: `serve`, `check-config` and every reload refuse such a
  layout with `config.state_writable`, naming the statement and the path;
- a ledger that disappears or is replaced is detected: abx keeps the chain head in its
  home and refuses to start on a ledger that does not continue it; `abx ledger verify`
  says so too; `abx ledger reset --i-know` starts a new chain and records that it did;
- state under a read-only root stays a protected area (token files included).
"""
import os
import shutil
import signal
import time

import pytest

import abxtest


def _cfg(ws, paths, extra_top="", token_line=None):
    token_line = token_line or "    - {principal: alice, roles: [agent], token_sha256: %s}" % abxtest.sha256_hex(abxtest.ALICE_TOKEN)
    return """workspace: %s
terminal_listen: "off"
%s
auth:
  tokens:
%s
    - {principal: root, roles: [admin], token_sha256: %s}
policy:
  allow:
    - ops: ["core.*"]
      principals: ["*"]
    - ops: ["files.*"]
      principals: [alice]
      paths: %s
    - ops: ["system.policy.reload"]
      principals: [root]
""" % (ws, extra_top, token_line, abxtest.sha256_hex(abxtest.ADMIN_TOKEN), paths)


def _write(path, text):
    os.makedirs(os.path.dirname(path), exist_ok=True)
    with open(path, "w") as f:
        f.write(text)
    return path


def _serve_fails(abx, config_path, home):
    r = abxtest.run_abx(["serve", "--listen", "127.0.0.1:0", "--config", config_path], home=home, timeout=15)
    assert r.returncode != 0, r.stdout + r.stderr
    return r.stderr


def _check_config(config_path):
    r = abxtest.run_abx(["check-config", config_path])
    return r.returncode, r.stdout + r.stderr


# -- the layout rule --------------------------------------------------------------------

def test_config_inside_a_writable_root_is_refused(abx, workspace, tmp_path):
    cfg = _write(os.path.join(workspace, "abx.yaml"), _cfg(workspace, '["%s/**"]' % workspace))
    err = _serve_fails(abx, cfg, tmp_path / "home")
    assert "config.state_writable" in err and "allow[1]" in err and cfg in err, err
    rc, out = _check_config(cfg)
    assert rc == 1 and "config.state_writable" in out and "the config file" in out, out


def test_relative_config_is_where_abx_opens_it_not_in_the_workspace(abx, workspace, tmp_path):
    """`--config abx.yaml` names the file in abx's working folder. The layout rule once
    joined it to the workspace instead: a config in a writable folder other than the
    workspace, started by a relative name from there, passed (a process could then plant
    the config the next SIGHUP reads); and a config beside a writable workspace was
    refused for a file that does not exist."""
    shared = tmp_path / "shared"
    _write(str(shared / "abx.yaml"), _cfg(workspace, '["%s/**", "%s/**"]' % (workspace, shared)))
    r = abxtest.run_abx(["check-config", "abx.yaml"], cwd=str(shared))
    out = r.stdout + r.stderr
    assert r.returncode == 1 and "config.state_writable" in out, out
    assert os.path.join(str(shared), "abx.yaml") in out and "the config file" in out, out
    r = abxtest.run_abx(["serve", "--listen", "127.0.0.1:0", "--config", "abx.yaml"], home=tmp_path / "home",
                        cwd=str(shared), timeout=15)
    assert r.returncode != 0 and "config.state_writable" in r.stderr, r.stdout + r.stderr
    # beside the workspace, outside every writable root: accepted, and no file in the
    # workspace is named
    etc = tmp_path / "etc"
    _write(str(etc / "abx.yaml"), _cfg(workspace, '["%s/**"]' % workspace))
    r = abxtest.run_abx(["check-config", "abx.yaml"], cwd=str(etc))
    assert r.returncode == 0, r.stdout + r.stderr
    assert os.path.join(workspace, "abx.yaml") not in r.stdout + r.stderr


def test_symlinks_on_the_way_to_the_config_are_state(abx, workspace, tmp_path):
    """The config itself outside every writable root, but reached through a symlink in the
    workspace: the agent can point the link at a config of its own, which the next SIGHUP
    or restart reads. The canonical path alone hid that."""
    etc = tmp_path / "etc"
    real = _write(str(etc / "real.yaml"), _cfg(workspace, '["%s/**"]' % workspace,
                                              extra_top="ledger: {path: %s/ledger.db}" % etc))
    assert abxtest.run_abx(["check-config", real]).returncode == 0
    link = os.path.join(workspace, "abx.yaml")
    os.symlink(real, link)
    rc, out = _check_config(link)
    assert rc == 1 and "config.state_writable" in out and link in out, out
    assert "config.state_writable" in _serve_fails(abx, link, tmp_path / "home")
    # a symlinked folder on the way
    os.symlink(str(etc), os.path.join(workspace, "etc-link"))
    via = os.path.join(workspace, "etc-link", "real.yaml")
    rc, out = _check_config(via)
    assert rc == 1 and "config.state_writable" in out and os.path.join(workspace, "etc-link") in out, out
    # a token_file through a link in the workspace
    _write(str(etc / "alice.token"), abxtest.ALICE_TOKEN + "\n")
    cfg = _write(str(etc / "tok.yaml"),
                 _cfg(workspace, '["%s/**"]' % workspace, extra_top="ledger: {path: %s/ledger.db}" % etc,
                      token_line="    - {principal: alice, roles: [agent], token_file: %s}"
                      % os.path.join(workspace, "etc-link", "alice.token")))
    rc, out = _check_config(cfg)
    assert rc == 1 and "config.state_writable" in out and "token_file" in out, out


def test_secrets_and_trust_files_are_state(abx, workspace, tmp_path):
    """A secret's file, sandboxd's token_file, egress.upstream_ca and install.dir decide
    what abx injects, who a caller is, which upstreams it trusts and which programs it
    runs: in a writable root the agent could replace them (and read a secret it must
    only ever have injected for it)."""
    etc = tmp_path / "etc"
    _write(str(etc / "x"), "x\n")
    cases = [
        ("secrets: {KEY: {file: %s}}", "a secret's file"),
        ("listen: 127.0.0.1:7070\nsandboxd: {token_file: %s, principal: alice}", "sandboxd's token_file"),
        ("egress: {upstream_ca: %s}", "egress.upstream_ca"),
        ("install: {dir: %s}", "install.dir"),
    ]
    for top, what in cases:
        inside = _write(os.path.join(workspace, "state", "f"), "secret-value-1234567890123456789\n")
        cfg = _write(str(etc / "abx.yaml"), _cfg(workspace, '["%s/**"]' % workspace,
                                                 extra_top="ledger: {path: %s/ledger.db}\n" % etc + top % inside))
        rc, out = _check_config(cfg)
        assert rc == 1 and "config.state_writable" in out and what in out and inside in out, (top, out)
        # the same file outside every root is fine
        outside = _write(str(etc / "f"), "secret-value-1234567890123456789\n")
        _write(cfg, _cfg(workspace, '["%s/**"]' % workspace,
                         extra_top="ledger: {path: %s/ledger.db}\n" % etc + top % outside))
        rc, out = _check_config(cfg)
        assert "config.state_writable" not in out, (top, out)


def test_a_secret_file_under_a_read_root_is_never_served(abx, workspace, tmp_path):
    sdir = tmp_path / "secrets"
    sf = _write(str(sdir / "gh"), "ghp_file_secret_4b1d2c3e\n")
    cfg = """workspace: %s
terminal_listen: "off"
ledger: {enabled: false}
secrets: {GH: {file: %s}}
auth:
  tokens:
    - {principal: alice, roles: [agent], token_sha256: %s}
policy:
  allow:
    - ops: ["files.read", "files.list", "files.stat", "commands.run"]
      principals: [alice]
      paths: {read: ["%s/**", "%s/**"]}
      commands: ["cat *"]
""" % (workspace, sf, abxtest.sha256_hex(abxtest.ALICE_TOKEN), workspace, sdir)
    _write(str(sdir / "other.txt"), "visible\n")
    s = abx(cfg)
    r = s.op("files.read", {"path": sf}, token=abxtest.ALICE_TOKEN)
    abxtest.assert_error(r, 403, "policy.path_denied")
    assert "ghp_file_secret" not in r.text
    # a process sees the folder but not the secret
    r = s.op("commands.run", {"argv": ["cat", str(sdir / "other.txt")]}, token=abxtest.ALICE_TOKEN)
    assert r.status_code == 200 and r.json()["stdout"] == "visible\n", r.text
    r = s.op("commands.run", {"argv": ["cat", sf]}, token=abxtest.ALICE_TOKEN)
    assert r.status_code == 200 and r.json()["exit_code"] != 0 and "ghp_file_secret" not in r.text, r.text


def test_relative_token_file_is_protected_where_it_is_read(abx, workspace, tmp_path):
    shared = tmp_path / "shared"
    _write(str(shared / "alice.token"), abxtest.ALICE_TOKEN + "\n")
    cfg = _write(str(tmp_path / "etc" / "abx.yaml"),
                 _cfg(workspace, '["%s/**", "%s/**"]' % (workspace, shared),
                      token_line="    - {principal: alice, roles: [agent], token_file: alice.token}"))
    r = abxtest.run_abx(["check-config", cfg], cwd=str(shared))
    out = r.stdout + r.stderr
    assert r.returncode == 1 and "config.state_writable" in out and "token_file" in out, out
    assert os.path.join(str(shared), "alice.token") in out, out


def test_token_file_inside_a_writable_root_is_refused(abx, workspace, tmp_path):
    tf = _write(os.path.join(workspace, "secrets", "alice.token"), abxtest.ALICE_TOKEN + "\n")
    cfg = _write(str(tmp_path / "etc" / "abx.yaml"),
                 _cfg(workspace, '["%s/**"]' % workspace,
                      token_line="    - {principal: alice, roles: [agent], token_file: %s}" % tf))
    rc, out = _check_config(cfg)
    assert rc == 1 and "config.state_writable" in out and "token_file" in out and tf in out, out
    assert "config.state_writable" in _serve_fails(abx, cfg, tmp_path / "home")


def test_token_file_under_a_read_root_is_a_protected_area(abx, workspace, tmp_path):
    """Readable by a statement's scope, but never served: the token it holds reloads the policy."""
    tdir = tmp_path / "tokens"
    tf = _write(str(tdir / "root.token"), abxtest.ADMIN_TOKEN + "\n")
    cfg = """workspace: %s
terminal_listen: "off"
ledger: {enabled: false}
auth:
  tokens:
    - {principal: alice, roles: [agent], token_sha256: %s}
    - {principal: root, roles: [admin], token_file: %s}
policy:
  allow:
    - ops: ["files.read", "files.list", "files.stat"]
      principals: [alice]
      paths: {read: ["%s/**", "%s/**"]}
""" % (workspace, abxtest.sha256_hex(abxtest.ALICE_TOKEN), tf, workspace, tdir)
    s = abx(cfg)
    r = s.op("files.read", {"path": tf}, token=abxtest.ALICE_TOKEN)
    abxtest.assert_error(r, 403, "policy.path_denied")
    assert abxtest.ADMIN_TOKEN not in r.text


def test_ledger_inside_a_writable_root_is_refused(abx, workspace, tmp_path):
    cfg = _write(str(tmp_path / "etc" / "abx.yaml"),
                 _cfg(workspace, '["%s/**"]' % workspace, extra_top="ledger: {path: %s/.abx/ledger.db}" % workspace))
    rc, out = _check_config(cfg)
    assert rc == 1 and "config.state_writable" in out and "the ledger" in out, out


def test_plugin_folder_inside_a_writable_root_is_refused(abx, workspace, tmp_path):
    os.makedirs(os.path.join(workspace, "plugins"))
    cfg = _write(str(tmp_path / "etc" / "abx.yaml"),
                 _cfg(workspace, '["%s/**"]' % workspace,
                      extra_top="plugin_dir: %s/plugins\nload: [\"evil\"]" % workspace))
    rc, out = _check_config(cfg)
    assert rc == 1 and "config.state_writable" in out and "plugin" in out, out


def test_writable_root_above_abx_home_is_refused(abx, workspace, tmp_path):
    cfg = _write(str(tmp_path / "etc" / "abx.yaml"), _cfg(workspace, '["%s/**"]' % workspace))
    home = os.path.join(workspace, ".abx-home")
    err = _serve_fails(abx, cfg, home)
    assert "config.state_writable" in err and "ABX_HOME" in err, err


def test_embedded_default_refuses_a_workspace_holding_its_home(workspace):
    r = abxtest.run_abx(["serve", "--listen", "127.0.0.1:0", "--workspace", workspace],
                   home=os.path.join(workspace, "home"), cwd=workspace)
    assert r.returncode != 0
    assert "config.state_writable" in r.stderr and "ABX_HOME" in r.stderr, r.stderr


def test_a_statement_writing_the_runtime_folder_is_refused(abx, workspace, tmp_path):
    """/tmp/abx-<pid>-<n> holds every process's private TMPDIR."""
    cfg = _write(str(tmp_path / "etc" / "abx.yaml"), _cfg(workspace, '["/tmp/**"]'))
    rc, out = _check_config(cfg)
    assert rc == 1 and "config.state_writable" in out, out


def test_reload_that_makes_state_writable_keeps_the_policy_in_force(abx, workspace, tmp_path):
    """The planted-config attack needs a writable config folder; a reload that would grant
    one is refused and the policy in force stays."""
    etc = tmp_path / "etc"
    cfg_path = _write(str(etc / "abx.yaml"), _cfg(workspace, '["%s/**"]' % workspace))
    s = abx(open(cfg_path).read())
    _write(s.config_path, _cfg(workspace, '["%s/**", "%s/**"]' % (workspace, os.path.dirname(s.config_path))))
    r = s.op("system.policy.reload", {}, token=abxtest.ADMIN_TOKEN)
    assert r.status_code == 400 and "config.state_writable" in r.text, r.text
    os.kill(s.proc.pid, signal.SIGHUP)
    time.sleep(0.3)
    r = s.op("files.write", {"path": os.path.join(os.path.dirname(s.config_path), "planted.yaml"),
                             "content": "x"}, token=abxtest.ALICE_TOKEN)
    abxtest.assert_error(r, 403, "policy.path_not_allowed")


# -- the ledger head --------------------------------------------------------------------

def _ledger_cfg(workspace, ledger):
    return _cfg(workspace, '["%s/**"]' % workspace, extra_top="ledger: {path: %s}" % ledger)


def _make_history(s, n=3):
    for i in range(n):
        r = s.op("files.write", {"path": "h%d.txt" % i, "content": "x"}, token=abxtest.ALICE_TOKEN)
        assert r.status_code == 200, r.text


def test_replaced_ledger_is_detected_and_refused(abx, workspace, tmp_path):
    ledger = str(tmp_path / "state" / "ledger.db")
    os.makedirs(os.path.dirname(ledger))
    s = abx(_ledger_cfg(workspace, ledger))
    _make_history(s)
    s.stop()
    # a fresh, internally valid ledger in its place (what `mv .abx .abx-gone` produced)
    os.rename(ledger, ledger + ".gone")
    for sfx in ("-wal", "-shm"):
        if os.path.exists(ledger + sfx):
            os.rename(ledger + sfx, ledger + ".gone" + sfx)
    other_home = tmp_path / "other-home"
    s2 = abx(_ledger_cfg(workspace, ledger), home=other_home)  # another home: no head, writes a new chain
    s2.op("core.health", {})
    s2.stop()
    verify = abxtest.run_abx(["ledger", "verify", "--path", ledger], home=s.home)
    assert verify.returncode == 1 and "chain head" in verify.stdout, verify.stdout
    with pytest.raises(RuntimeError) as e:
        s.start()
    assert "chain head" in str(e.value) and "ledger reset --i-know" in str(e.value), str(e.value)


def test_removed_ledger_is_detected_and_not_recreated(abx, workspace, tmp_path):
    ledger = str(tmp_path / "state" / "ledger.db")
    os.makedirs(os.path.dirname(ledger))
    s = abx(_ledger_cfg(workspace, ledger))
    _make_history(s)
    s.stop()
    shutil.move(os.path.dirname(ledger), str(tmp_path / "state-gone"))
    os.makedirs(os.path.dirname(ledger))
    with pytest.raises(RuntimeError) as e:
        s.start()
    assert "is gone" in str(e.value), str(e.value)
    assert not os.path.exists(ledger), "a new empty ledger must not be created over a recorded head"


def test_ledger_reset_starts_a_recorded_chain(abx, workspace, tmp_path):
    ledger = str(tmp_path / "state" / "ledger.db")
    os.makedirs(os.path.dirname(ledger))
    s = abx(_ledger_cfg(workspace, ledger))
    _make_history(s)
    s.stop()
    os.remove(ledger)
    r = abxtest.run_abx(["ledger", "reset", "--path", ledger], home=s.home)
    assert r.returncode == 2 and "--i-know" in r.stderr
    r = abxtest.run_abx(["ledger", "reset", "--i-know", "--path", ledger], home=s.home)
    assert r.returncode == 0, r.stdout + r.stderr
    s.start()
    _make_history(s, 1)
    s.stop()
    v = abxtest.run_abx(["ledger", "verify", "--path", ledger], home=s.home)
    assert v.returncode == 0 and v.stdout.startswith("ok:"), v.stdout
    tail = abxtest.run_abx(["ledger", "tail", "-n", "100", "--path", ledger], home=s.home).stdout
    first = tail.splitlines()[0]
    assert '"op":"ledger.reset"' in first or '"kind":"received"' in first, tail
    assert '"kind":"reset"' in tail and '"previous_head":{"count":' in tail, tail


def test_reset_is_refused_while_a_server_holds_the_ledger(abx, workspace, tmp_path):
    ledger = str(tmp_path / "state" / "ledger.db")
    os.makedirs(os.path.dirname(ledger))
    s = abx(_ledger_cfg(workspace, ledger))
    r = abxtest.run_abx(["ledger", "reset", "--i-know", "--path", ledger], home=s.home)
    assert r.returncode == 1 and "in use" in r.stderr, r.stderr
    assert s.op("core.health", {}).status_code == 200


def test_history_survives_restarts_and_the_head_follows(abx, workspace, tmp_path):
    ledger = str(tmp_path / "state" / "ledger.db")
    os.makedirs(os.path.dirname(ledger))
    s = abx(_ledger_cfg(workspace, ledger))
    for _ in range(3):
        _make_history(s, 2)
        s.stop()
        s.start()
    _make_history(s, 1)
    s.kill()  # kill -9: the head was written after each commit
    s.start()
    v = abxtest.run_abx(["ledger", "verify", "--path", ledger], home=s.home)
    assert v.returncode == 0, v.stdout
