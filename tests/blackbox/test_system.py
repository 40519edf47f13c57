"""system.*: system.info (machine facts and the confinement abx can apply),
system.env.get (only allowlisted variables, others refused), and policy reload by the
explicit-only admin op and by SIGHUP (a broken file keeps the old policy)."""
import ctypes
import json
import os
import signal
import time

import pytest

from abxtest import ADMIN_TOKEN, ALICE_TOKEN, BOB_TOKEN, assert_error, run_abx, sha256_hex, tokens, wait_for

DAVE_TOKEN = "dave-token-0123456789abcdefgh"


def make_config(ws, commands=("echo *",), system=None, extra_tokens=(), tests=None):
    cfg = {
        "workspace": ws, "terminal_listen": "off",
        "auth": {"tokens": tokens("alice", "bob", "root", extra=extra_tokens)},
        "policy": {"allow": [
            {"ops": ["core.*"], "principals": ["*"]},
            {"ops": ["system.*"], "principals": ["*"]},
            {"ops": ["system.policy.reload"], "principals": ["role:admin"]},
            {"ops": ["commands.run"], "principals": ["alice", "dave"], "paths": [ws + "/**"],
             "commands": list(commands)},
        ]},
    }
    if system is not None:
        cfg["system"] = system
    if tests is not None:
        cfg["tests"] = tests
    return cfg


def ok(r):
    assert r.status_code == 200, r.text[:800]
    return r.json()


def rewrite(s, cfg):
    with open(s.config_path, "w") as f:
        if isinstance(cfg, str):
            f.write(cfg)
        else:
            json.dump(cfg, f)


def echo(s, token=ALICE_TOKEN):
    return s.post("/commands/run", token=token, json_body={"command": "echo alive"})


def cat(s):
    return s.post("/commands/run", token=ALICE_TOKEN, json_body={"command": "cat a.txt"})


def reload_(s, token=ADMIN_TOKEN):
    return s.post("/system/policy/reload", token=token)


@pytest.fixture
def srv(abx, workspace):
    return abx(make_config(workspace))


# -- system.info ----------------------------------------------------------------------------------

def landlock_abi():
    try:
        libc = ctypes.CDLL(None, use_errno=True)
        v = libc.syscall(444, None, ctypes.c_size_t(0), ctypes.c_uint32(1))
        return v if v > 0 else 0
    except Exception:
        return 0


def test_system_info_machine_facts(srv, workspace):
    j = ok(srv.get("/system/info", token=BOB_TOKEN))
    u = os.uname()
    assert j["os"]["name"] == u.sysname == "Linux"
    assert j["os"]["kernel"] == u.release
    assert j["os"]["arch"] == u.machine
    assert j["cpus"] == os.sysconf("SC_NPROCESSORS_ONLN")
    total = os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES")
    assert abs(j["memory"]["total_bytes"] - total) <= total * 0.05
    assert 0 < j["memory"]["available_bytes"] <= j["memory"]["total_bytes"]
    assert j["disk"]["path"] == workspace
    st = os.statvfs(workspace)
    assert j["disk"]["total_bytes"] == st.f_blocks * st.f_frsize
    assert 0 < j["disk"]["free_bytes"] <= j["disk"]["total_bytes"]
    with open("/proc/uptime") as f:
        up = float(f.read().split()[0])
    assert abs(j["uptime_s"] - up) < 30
    version = run_abx(["version"]).stdout.split()[1]
    assert j["abx"]["version"] == version
    assert 0 <= j["abx"]["uptime_s"] < 60


def test_system_info_confinement(srv):
    c = ok(srv.get("/system/info", token=ALICE_TOKEN))["confinement"]
    abi = landlock_abi()
    assert c["mode"] == "required"
    assert c["landlock"] is (abi > 0)
    assert c["landlock_abi"] == abi
    assert c["network_namespace"] is True
    assert c["mount_namespace"] is True
    assert c["cgroup_pids"] is True
    assert c["cgroup_memory"] is True
    v1 = os.path.exists("/sys/fs/cgroup/pids/cgroup.procs")
    assert c["cgroup_version"] == (1 if v1 else 2)
    assert c["openat2"] is True
    assert c["seccomp"] is True and c["watchdog"] is True
    assert c["missing"] == ""


def test_system_info_best_effort_mode_reported(abx, workspace):
    cfg = make_config(workspace)
    cfg["confine"] = "best_effort"
    s = abx(cfg)
    assert ok(s.get("/system/info", token=ALICE_TOKEN))["confinement"]["mode"] == "best_effort"


def test_system_info_needs_authentication(srv):
    assert_error(srv.get("/system/info"), 401, "auth.required")


# -- system.env.get -------------------------------------------------------------------------------

ENV = {"LANG": "C.UTF-8", "TZ": "Europe/Paris", "ABX_SYS_A": "value-a", "ABX_SYS_SECRET": "do-not-tell"}


def test_env_default_allowlist_lang_tz(abx, workspace):
    s = abx(make_config(workspace), env=ENV)
    j = ok(s.get("/system/env", token=ALICE_TOKEN, params={"names": "LANG"}))
    assert j["env"] == {"LANG": "C.UTF-8"}
    j = ok(s.get("/system/env", token=ALICE_TOKEN, params={"names": ["LANG", "TZ"]}))
    assert j["env"] == {"LANG": "C.UTF-8", "TZ": "Europe/Paris"}
    j = ok(s.get("/system/env", token=ALICE_TOKEN))
    assert j["env"] == {"LANG": "C.UTF-8", "TZ": "Europe/Paris"}


def test_env_names_outside_allowlist_denied(abx, workspace):
    s = abx(make_config(workspace), env=ENV)
    for name in ("HOME", "PATH", "ABX_SYS_SECRET", "ABX_TOKEN", "lang"):
        r = s.get("/system/env", token=ALICE_TOKEN, params={"names": name})
        j = assert_error(r, 403, "policy.denied")
        assert "do-not-tell" not in r.text
        assert name in j["error"]["message"]


def test_env_mixed_names_refused_not_filtered(abx, workspace):
    s = abx(make_config(workspace), env=ENV)
    r = s.get("/system/env", token=ALICE_TOKEN, params={"names": ["LANG", "ABX_SYS_SECRET"]})
    assert_error(r, 403, "policy.denied")
    assert "do-not-tell" not in r.text
    r = s.op("system.env.get", {"names": ["ABX_SYS_SECRET"]}, token=ALICE_TOKEN)
    assert_error(r, 403, "policy.denied")


def test_env_config_allowlist_replaces_default(abx, workspace):
    s = abx(make_config(workspace, system={"env": ["ABX_SYS_A", "ABX_UNSET_VAR"]}), env=ENV)
    j = ok(s.get("/system/env", token=ALICE_TOKEN, params={"names": "ABX_SYS_A"}))
    assert j["env"] == {"ABX_SYS_A": "value-a"}
    j = ok(s.op("system.env.get", {}, token=ALICE_TOKEN))
    assert j["env"]["ABX_SYS_A"] == "value-a"
    assert set(j["env"]) == {"ABX_SYS_A", "ABX_UNSET_VAR"}
    assert j["env"]["ABX_UNSET_VAR"] is None
    assert_error(s.get("/system/env", token=ALICE_TOKEN, params={"names": "LANG"}), 403, "policy.denied")


# -- system.policy.reload ---------------------------------------------------------------------------

def test_reload_is_explicit_only_admin(srv):
    # `system.*` mounts system.info for alice, never the explicit-only reload
    assert_error(reload_(srv, token=ALICE_TOKEN), 404, "op.not_enabled")
    assert_error(srv.op("system.policy.reload", {}, token=ALICE_TOKEN), 404, "op.not_enabled")
    j = ok(reload_(srv))
    assert j["reloaded"] is True
    assert isinstance(j["diagnostics"], list)


def test_reload_unchanged_file_has_no_restart_warning(srv):
    j = ok(reload_(srv))
    codes = [d["code"] for d in j["diagnostics"]]
    assert "config.restart_required" not in codes, j["diagnostics"]


def test_reload_applies_new_policy(srv, workspace):
    assert ok(echo(srv))["stdout"] == "alive\n"
    assert_error(cat(srv), 403, "policy.command_not_allowed")
    rewrite(srv, make_config(workspace, commands=("cat *",)))
    ok(reload_(srv))
    assert_error(echo(srv), 403, "policy.command_not_allowed")
    assert ok(cat(srv))["stdout"] == "hello\n"


@pytest.mark.parametrize("broken,code", [
    ("{ broken", "config.syntax"),
    ('{"workspace": "/x", "bogus_key": 1}', "config.unknown_key"),
])
def test_reload_broken_file_keeps_old_policy(srv, broken, code):
    rewrite(srv, broken)
    r = reload_(srv)
    j = assert_error(r, 400, "config.reload_failed")
    diags = j["error"]["details"]["diagnostics"]
    assert any(d["code"] == code and d["level"] == "error" for d in diags), diags
    assert all(isinstance(d["line"], int) and d["message"] for d in diags)
    # the old policy keeps working, reload included
    assert ok(echo(srv))["stdout"] == "alive\n"
    assert_error(cat(srv), 403, "policy.command_not_allowed")
    assert_error(reload_(srv), 400, "config.reload_failed")


def test_reload_with_failing_policy_test_keeps_old_policy(srv, workspace):
    bad = make_config(workspace, commands=("cat *",), tests=[
        {"principal": "alice", "op": "commands.run", "args": {"command": "echo x"}, "expect": "allow"}])
    rewrite(srv, bad)
    j = assert_error(reload_(srv), 400, "config.reload_failed")
    assert any(d["code"] == "config.test_failed" for d in j["error"]["details"]["diagnostics"])
    assert ok(echo(srv))["stdout"] == "alive\n"


def test_reload_rotates_tokens(srv, workspace):
    assert_error(echo(srv, token=DAVE_TOKEN), 401, "auth.invalid_token")
    dave = {"principal": "dave", "roles": ["agent"], "token_sha256": sha256_hex(DAVE_TOKEN)}
    rewrite(srv, make_config(workspace, extra_tokens=[dave]))
    ok(reload_(srv))
    assert ok(echo(srv, token=DAVE_TOKEN))["stdout"] == "alive\n"
    rewrite(srv, make_config(workspace))
    ok(reload_(srv))
    assert_error(echo(srv, token=DAVE_TOKEN), 401, "auth.invalid_token")


def test_sighup_reloads(srv, workspace):
    rewrite(srv, make_config(workspace, commands=("cat *",)))
    srv.proc.send_signal(signal.SIGHUP)
    assert wait_for(lambda: echo(srv).status_code == 403, timeout=5), "SIGHUP did not reload the policy"
    assert ok(cat(srv))["stdout"] == "hello\n"
    assert srv.proc.poll() is None


def test_sighup_with_broken_file_keeps_serving(srv):
    rewrite(srv, "policy: [unclosed")
    srv.proc.send_signal(signal.SIGHUP)
    time.sleep(0.5)
    assert srv.proc.poll() is None, "abx exited on SIGHUP with a broken file"
    assert ok(echo(srv))["stdout"] == "alive\n"
    assert_error(cat(srv), 403, "policy.command_not_allowed")
