"""Private HOME (issue 25): each principal's processes, terminals and kernels get a HOME in
abx's own state ($ABX_HOME/homes/<principal>), made 0700 on first use, kept across calls,
granted read-write to that principal only; caches, histories and dotfiles never land in the
workspace; system.home.delete and homes.ttl remove it."""
import os
import stat
import time

import pytest
import websocket

from abxtest import ALICE_TOKEN, BOB_TOKEN, CAROL_TOKEN, assert_error, tokens, wait_for

UNRESTRICTED = {"allow": ["sh *", "bash *"]}


def make_config(ws, top=None):
    stmt = {"ops": ["commands.*", "process.*", "terminal.*", "system.home.delete"], "principals": ["role:agent"],
            "paths": [ws + "/**"], "commands": UNRESTRICTED}
    cfg = {"workspace": ws, "terminal_listen": "off", "auth": {"tokens": tokens("alice", "bob", "carol")},
           "policy": {"allow": [{"ops": ["core.*"], "principals": ["*"]}, stmt]}}
    cfg.update(top or {})
    return cfg


@pytest.fixture
def srv(abx, workspace):
    return abx(make_config(workspace))


def sh(s, script, token=ALICE_TOKEN, stdin=None):
    body = {"argv": ["/bin/sh", "-c", script]}
    if stdin is not None:
        body["stdin"] = stdin
    r = s.post("/commands/run", token=token, json_body=body, timeout=60)
    assert r.status_code == 200, r.text[:800]
    return r.json()


def dotfiles(ws):
    """Everything in the workspace the fixture did not put there."""
    seen = set()
    for root, dirs, files in os.walk(ws):
        for n in dirs + files:
            seen.add(os.path.relpath(os.path.join(root, n), ws))
    return seen - {"a.txt", "b.txt", "sub", "sub/c.txt", ".hidden"}


def test_home_is_private_kept_and_outside_the_workspace(srv, workspace):
    j = sh(srv, 'echo "$HOME"; echo "$XDG_CACHE_HOME"; touch "$HOME/marker"')
    assert j["exit_code"] == 0, j
    home, cache = j["stdout"].split()
    assert home == os.path.join(srv.home, "homes", "alice")
    assert cache == home + "/.cache"
    assert not home.startswith(workspace)
    st = os.stat(home)
    assert stat.S_IMODE(st.st_mode) == 0o700
    # kept across calls
    again = sh(srv, 'test -f "$HOME/marker" && echo kept')
    assert again["stdout"] == "kept\n", again


def test_another_principal_has_another_home_and_cannot_reach_alice(srv):
    a = sh(srv, 'echo secret > "$HOME/s"; echo "$HOME"')["stdout"].strip()
    c = sh(srv, 'echo "$HOME"; cat %s/s' % a, token=CAROL_TOKEN)
    assert c["stdout"].split()[0] == os.path.join(srv.home, "homes", "carol")
    assert c["stdout"].split()[0] != a
    assert "secret" not in c["stdout"]
    assert c["exit_code"] != 0, c


def test_npm_and_pip_keep_their_files_in_home(srv, workspace):
    if not os.path.exists("/usr/bin/npm"):
        pytest.skip("npm is not installed")
    j = sh(srv, "cd %s && npm --version && npm config set fund false && npm config get fund "
                "&& python3 -m pip --version && python3 -m pip cache dir && python3 -c 'import json'" % workspace)
    assert j["exit_code"] == 0, j
    out = j["stdout"]
    assert "false" in out
    home = os.path.join(srv.home, "homes", "alice")
    assert home + "/.cache/pip" in out
    assert os.path.exists(os.path.join(home, ".npmrc"))
    assert dotfiles(workspace) == set()


def test_python_bytecode_goes_to_home(srv, workspace):
    with open(os.path.join(workspace, "mod.py"), "w") as f:
        f.write("X = 1\n")
    j = sh(srv, "cd %s && python3 -c 'import mod; print(mod.X)'" % workspace)
    assert j["stdout"] == "1\n", j
    assert not os.path.exists(os.path.join(workspace, "__pycache__"))


def test_terminal_history_lands_in_home(abx, workspace):
    s = abx(make_config(workspace, {"terminal_listen": "127.0.0.1:0"}))
    r = s.post("/terminal", token=ALICE_TOKEN, json_body={"command": "bash --norc --noprofile -i"})
    assert r.status_code == 200, r.text
    t = r.json()
    ws = websocket.create_connection(t["ws_url"], header=["Authorization: Bearer " + ALICE_TOKEN], timeout=5,
                                     suppress_origin=True)
    try:
        ws.send_binary(b"echo history-marker\nexit\n")
        wait_for(lambda: not s.get("/process/%d" % t["pid"], token=ALICE_TOKEN).json().get("running", True),
                 timeout=10)
    finally:
        ws.close()
    hist = os.path.join(s.home, "homes", "alice", ".bash_history")
    assert wait_for(lambda: os.path.exists(hist), timeout=5)
    assert "history-marker" in open(hist).read()
    assert dotfiles(workspace) == set()


def test_home_delete_removes_it(srv):
    home = sh(srv, 'touch "$HOME/marker"; echo "$HOME"')["stdout"].strip()
    r = srv.op("system.home.delete", token=ALICE_TOKEN)
    assert r.status_code == 200, r.text
    assert r.json() == {"removed": True}
    assert not os.path.exists(home)
    assert srv.op("system.home.delete", token=ALICE_TOKEN).json() == {"removed": False}
    j = sh(srv, 'test -e "$HOME/marker" && echo stale || echo fresh')
    assert j["stdout"] == "fresh\n"


def test_home_delete_needs_a_statement(srv):
    sh(srv, 'touch "$HOME/marker"')
    assert_error(srv.op("system.home.delete", token=BOB_TOKEN), 404, "op.not_enabled")
    assert os.path.exists(os.path.join(srv.home, "homes", "alice", "marker"))


def test_homes_ttl_removes_unused_homes_at_start(abx, workspace, tmp_path):
    home = tmp_path / "abxhome"
    cfg = make_config(workspace, {"homes": {"ttl": "1h"}})
    s = abx(cfg, home=home)
    h = sh(s, 'touch "$HOME/m"; echo "$HOME"')["stdout"].strip()
    s.stop()
    old = time.time() - 7200
    os.utime(h, (old, old))
    s2 = abx(cfg, home=home)
    assert not os.path.exists(h)
    assert sh(s2, 'test -e "$HOME/m" && echo stale || echo fresh')["stdout"] == "fresh\n"


def test_homes_ttl_must_be_a_duration(abx, workspace):
    s = abx(make_config(workspace, {"homes": {"ttl": "soon"}}), start=False)
    with pytest.raises(RuntimeError) as e:
        s.start()
    assert "homes.ttl" in str(e.value)
