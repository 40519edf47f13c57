"""Config secrets (issue 17, docs/egress.md): `secrets: {NAME: {env: VAR} | {file: PATH}}`
are read at load and reach nothing else: not check-config's output, not `abx explain` or
core.explain, not the ledger's files, not the server's logs, not a process's environment
or output. check-config names an unset variable or an unreadable file with
config.secret_unavailable."""
import glob
import json
import os

from abxtest import ADMIN_TOKEN, ALICE_TOKEN, run_abx, tokens

ENV_SECRET = "abx-env-secret-7f3a9c1d"
FILE_SECRET = "abx-file-secret-52be0e88"


def make_config(ws, secret_file):
    return {
        "workspace": ws,
        "terminal_listen": "off",
        "auth": {"tokens": tokens("alice", "root")},
        "secrets": {"GH": {"env": "ABX_BB_SECRET"}, "KEY": {"file": secret_file}},
        "policy": {"allow": [
            {"ops": ["core.*"], "principals": ["*"]},
            {"ops": ["core.explain"], "principals": ["role:admin"]},
            {"ops": ["commands.run"], "principals": ["role:agent"], "paths": [ws + "/**"],
             "commands": ["env", "echo *"]},
        ]},
    }


def secret_file(tmp_path):
    p = tmp_path / "secret.txt"
    p.write_text(FILE_SECRET + "\n")
    os.chmod(p, 0o600)
    return str(p)


def assert_clean(text, where):
    assert ENV_SECRET not in text and FILE_SECRET not in text, "a secret value in %s" % where


def test_secrets_reach_nothing(tmp_path, workspace, abx):
    cfg = make_config(workspace, secret_file(tmp_path))
    env = {"ABX_BB_SECRET": ENV_SECRET}
    p = tmp_path / "cfg.json"
    p.write_text(json.dumps(cfg))
    r = run_abx(["check-config", str(p)], env=env)
    assert r.returncode == 0, r.stdout + r.stderr
    assert_clean(r.stdout + r.stderr, "check-config")
    r = run_abx(["explain", "--config", str(p), "--op", "commands.run", "--arg", "command=env",
                 "--principal", "alice", "--json"], env=env)
    assert json.loads(r.stdout)["decision"] == "allow", r.stdout
    assert_clean(r.stdout + r.stderr, "abx explain")

    s = abx(cfg, env=env)
    r = s.post("/explain", token=ADMIN_TOKEN, json_body={"op": "commands.run", "args": {"command": "env"},
                                                         "principal": "alice"})
    assert r.status_code == 200, r.text
    assert_clean(r.text, "core.explain")
    r = s.post("/commands/run", token=ALICE_TOKEN, json_body={"command": "env"}, timeout=20)
    assert r.status_code == 200, r.text
    assert "PATH=" in r.text  # the environment was printed ...
    assert_clean(r.text, "a process's environment")  # ... without abx's secrets
    r = s.post("/commands/run", token=ALICE_TOKEN, json_body={"command": "echo done"}, timeout=20)
    assert r.status_code == 200, r.text
    s.stop()
    ledger = glob.glob(os.path.join(os.path.dirname(s.config_path), ".abx", "*"))
    assert any(f.endswith("ledger.db") for f in ledger), ledger
    for f in ledger:
        if os.path.isfile(f):
            with open(f, "rb") as fh:
                data = fh.read()
            assert ENV_SECRET.encode() not in data and FILE_SECRET.encode() not in data, f
    assert_clean(s.stderr(), "the server's log")
    r = run_abx(["ledger", "export", "--config", s.config_path], env=env)
    assert_clean(r.stdout + r.stderr, "ledger export")


def test_check_config_unavailable_secret(tmp_path, workspace):
    cfg = make_config(workspace, str(tmp_path / "missing.txt"))
    p = tmp_path / "cfg.json"
    p.write_text(json.dumps(cfg))
    r = run_abx(["check-config", str(p)], env={"ABX_BB_SECRET": ""})
    assert r.returncode == 1
    assert "config.secret_unavailable" in r.stdout and "ABX_BB_SECRET is not set" in r.stdout, r.stdout
    r = run_abx(["check-config", str(p)], env={"ABX_BB_SECRET": ENV_SECRET})
    assert r.returncode == 1
    assert "config.secret_unavailable" in r.stdout and "cannot read %s" % (tmp_path / "missing.txt") in r.stdout
    assert_clean(r.stdout + r.stderr, "check-config")
    cfg["secrets"] = {"GH": "inline-value"}
    p.write_text(json.dumps(cfg))
    r = run_abx(["check-config", str(p)])
    assert r.returncode == 1 and "config.invalid" in r.stdout and "inline-value" not in r.stdout, r.stdout
