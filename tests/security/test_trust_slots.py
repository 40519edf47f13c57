"""Prepared confinements (src/sandbox/slots.c, issue 14): a statement's Landlock ruleset
and view are built once for a key and serve its processes one at a time.

The attacker wants a later process to run under a confinement built for a world that has
changed since — a root renamed away and replaced (the trust boundary's rename attack), a
denied file created after the slot was built — or to find what an earlier process left
in its TMPDIR. Each test checks the server did use a prepared confinement where the
machine allows it, so none passes by running the slow path only."""
import os
import shutil
import time

import pytest

from abxtest import ALICE_TOKEN, CAROL_TOKEN, tokens, wait_for


def config(ws, paths=None, deny=None):
    paths = paths or {"read": [ws + "/**"], "write": [ws + "/**"], "delete": [ws + "/**"]}
    stmt = {"ops": ["commands.*", "process.*"], "principals": ["alice", "carol"], "paths": paths,
            "commands": ["cat *", "sh *", "ls *"]}
    policy = {"allow": [{"ops": ["core.*", "system.info"], "principals": ["*"]}, stmt]}
    if deny:
        policy["deny"] = deny
    return {"workspace": ws, "terminal_listen": "off", "ledger": {"enabled": False},
            "auth": {"tokens": tokens("alice", "carol")}, "policy": policy}


def prepared(s):
    c = s.get("/system/info", token=ALICE_TOKEN).json()["confinement"]
    return c.get("prepared_confinement", {})


def start(abx, cfg):
    s = abx(cfg)
    if not prepared(s).get("on"):
        pytest.skip("no prepared confinements on this machine (they need the view, cgroups, Landlock >= 6)")
    return s


def run(s, argv, token=ALICE_TOKEN, cwd=None):
    body = {"argv": argv}
    if cwd:
        body["cwd"] = cwd
    r = s.post("/commands/run", token=token, json_body=body, timeout=30)
    assert r.status_code == 200, r.text[:800]
    return r.json()


def test_a_home_replaced_on_the_host_is_not_served_by_a_stale_slot(abx, workspace):
    """A slot binds its HOME by inode (the view's mount, the Landlock rule). The host moves
    the principal's HOME away and makes a new, empty one at the same path. The next process
    must get the new one: a slot built for the old inode would show the old HOME's files
    at $HOME, and grant them."""
    s = start(abx, config(workspace))
    home = None
    for _ in range(3):
        j = run(s, ["sh", "-c", "echo old-home > \"$HOME/x\"; echo \"$HOME\""], cwd=workspace)
        assert j["exit_code"] == 0, j
        home = j["stdout"].strip()
    before = prepared(s)
    assert before["reused"] >= 1, before
    st = os.stat(home)
    os.rename(home, home + ".moved")
    os.mkdir(home, 0o700)
    os.chown(home, st.st_uid, st.st_gid)
    try:
        j = run(s, ["sh", "-c", "cat \"$HOME/x\" 2>&1; ls -a1 \"$HOME\""], cwd=workspace)
        assert "old-home" not in j["stdout"], j
        assert set(j["stdout"].split()) >= {".", ".."} and "x" not in j["stdout"].split(), j
        assert prepared(s)["made"] > before["made"], "the slot was not rebuilt after its HOME was replaced"
    finally:
        shutil.rmtree(home + ".moved", ignore_errors=True)


def test_a_denied_file_created_after_the_slot_is_still_hidden(abx, workspace):
    """A deny target that does not exist yet when the slot is built, then created: the
    next process must not read it (a slot whose mask was skipped for a missing file would
    show it)."""
    secret = os.path.join(workspace, "later-secret.txt")
    s = start(abx, config(workspace, deny=[{"paths": [secret]}]))
    for _ in range(3):
        assert run(s, ["cat", "a.txt"], cwd=workspace)["stdout"] == "hello\n"
    with open(secret, "w") as f:
        f.write("top-secret-later\n")
    before = prepared(s)
    for argv in (["cat", secret], ["cat", "later-secret.txt"]):
        j = run(s, argv, cwd=workspace)
        assert "top-secret-later" not in j["stdout"], j
        assert j["exit_code"] != 0, j
    assert prepared(s)["made"] > before["made"], "the slot built before the deny target existed was kept"


def test_a_root_made_after_the_slot_is_granted_as_a_new_confinement_would(abx, workspace):
    """A statement's root that does not exist yet when the slot is built (the rules and
    the view skip it), then made: the next process gets what a confinement built now
    would give (the root), from a new slot, not the old one without it."""
    later = os.path.join(workspace, "later")
    paths = {"read": [workspace + "/sub/**", later + "/**"], "write": [workspace + "/sub/**"]}
    s = start(abx, config(workspace, paths=paths))
    sub = os.path.join(workspace, "sub")
    for _ in range(3):
        assert run(s, ["cat", "c.txt"], cwd=sub)["stdout"] == "deep\n"
    before = prepared(s)
    os.mkdir(later)
    with open(os.path.join(later, "f.txt"), "w") as f:
        f.write("made-later\n")
    j = run(s, ["cat", os.path.join(later, "f.txt")], cwd=sub)
    assert j["exit_code"] == 0 and j["stdout"] == "made-later\n", j
    assert prepared(s)["made"] > before["made"], prepared(s)


LEAVE = ("echo mine > \"$TMPDIR/left.txt\"; mkdir -p \"$TMPDIR/d/e\"; echo deep > \"$TMPDIR/d/e/f\"; "
         "ln -s /etc/passwd \"$TMPDIR/link\"; echo up > \"$TMPDIR/../up.txt\" 2>/dev/null; "
         "chmod 000 \"$TMPDIR/d\"; echo \"$TMPDIR\"")
LOOK = ("echo \"$TMPDIR\"; ls -a1 \"$TMPDIR\"; echo --; ls -a1 \"$TMPDIR/..\"; echo --; "
        "for f in \"$TMPDIR/../up.txt\" \"$TMPDIR/left.txt\"; do test -e \"$f\" && echo \"FOUND $f\"; done; true")


def test_a_tmpdir_holds_nothing_of_the_process_before(abx, workspace):
    """A process fills its TMPDIR (files, a folder it makes unreadable, a link out) and
    tries the folder above it. The next processes, the same principal's and another's,
    get a TMPDIR of a name never used before and find none of it, wherever they look."""
    s = start(abx, config(workspace))
    first = run(s, ["sh", "-c", LEAVE], cwd=workspace)
    assert first["exit_code"] == 0, first
    t1 = first["stdout"].strip()
    seen = set()
    for token in (ALICE_TOKEN, CAROL_TOKEN) * 3:
        j = run(s, ["sh", "-c", LOOK], token=token, cwd=workspace)
        t, own, above, found = j["stdout"].split("\n", 1)[0], *j["stdout"].split("\n", 1)[1].split("--\n")
        assert t != t1 and t not in seen, (t1, t, seen)
        seen.add(t)
        assert set(own.split()) == {".", ".."}, own          # its own TMPDIR is empty
        assert set(above.split()) <= {".", "..", os.path.basename(t)}, above  # and alone
        assert "FOUND" not in found, found
    assert not os.path.exists(t1), "the first process's TMPDIR is still there"
    assert prepared(s)["reused"] >= 1, prepared(s)


def test_a_busy_slot_is_never_shared(abx, workspace):
    """While a background process runs, the calls beside it get TMPDIRs in other slots:
    a slot serves one process at a time."""
    s = start(abx, config(workspace))
    r = s.post("/process", token=ALICE_TOKEN,
               json_body={"argv": ["sh", "-c", "echo \"$TMPDIR\"; sleep 30"], "cwd": workspace})
    assert r.status_code == 200, r.text
    pid = r.json()["pid"]
    try:
        def busy():
            o = s.get("/process/%d/output" % pid, token=ALICE_TOKEN).json()["stdout"].strip()
            return o or None
        held = wait_for(busy, timeout=10)
        assert held
        for _ in range(4):
            t = run(s, ["sh", "-c", "echo \"$TMPDIR\""], cwd=workspace)["stdout"].strip()
            assert os.path.dirname(t) != os.path.dirname(held), (t, held)
    finally:
        r = s.post("/process/%d/signal" % pid, token=ALICE_TOKEN, json_body={"signal": "KILL"})
        assert r.status_code == 200, r.text
