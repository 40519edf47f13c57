"""Issue 12, class 2 (processes): deny rules bind names, not files.

A confined process (or abx's own files.move, or the host) renames a folder, and the mask
that abx mounts over a denied path by name no longer covers the file; a running process
reads files created (or swapped in) under a deny path after it started; renaming .git
gets around the read-only .git/hooks and .git/config mounts, so a hook planted by the
agent runs when the operator types `git status`.

What must hold: the child's mount namespace pins every deny target and each folder above
it inside a write root (a mount point cannot be renamed: EBUSY), "X/**" masks the folder X
itself, a mask follows a file the host moved, .git at the top of a write root is pinned,
and files.move refuses to move any of these for any principal."""
import json
import os
import time

import pytest

from abxtest import ALICE_TOKEN, assert_error, run_abx, tokens, wait_for

SECRET = "mask-secret-5521"
LATER = "mask-later-8830"


def config(ws, deny, files=False):
    stmt = {"ops": ["commands.*", "process.*"], "principals": ["alice"],
            "paths": {"read": [ws + "/**"], "write": [ws + "/**"]},
            "commands": ["sh *", "cat *", "mv *", "ls *"]}
    allow = [{"ops": ["core.*"], "principals": ["*"]}, stmt]
    if files:
        allow.append({"ops": ["files.*"], "principals": ["alice"], "paths": [ws + "/**"]})
    return {"workspace": ws, "terminal_listen": "off", "ledger": {"enabled": False},
            "auth": {"tokens": tokens("alice", "bob")}, "policy": {"allow": allow, "deny": deny}}


def run(s, script, timeout=30):
    r = s.post("/commands/run", token=ALICE_TOKEN, json_body={"argv": ["sh", "-c", script]}, timeout=timeout + 30)
    assert r.status_code == 200, r.text[:800]
    return r.json()


def start(s, script):
    r = s.post("/process", token=ALICE_TOKEN, json_body={"argv": ["sh", "-c", script]})
    assert r.status_code == 200, r.text[:800]
    return r.json()["pid"]


def finish(s, pid, timeout=20):
    def done():
        g = s.get("/process/%d" % pid, token=ALICE_TOKEN).json()
        return g if g["running"] is False else None
    assert wait_for(done, timeout=timeout)
    return s.get("/process/%d/output" % pid, token=ALICE_TOKEN).json()


def write(path, text):
    os.makedirs(os.path.dirname(path), exist_ok=True)
    with open(path, "w") as f:
        f.write(text)
    os.chmod(path, 0o644)


def read(path):
    with open(path) as f:
        return f.read()


# -- a. a rename of the parent folder carries the file away from its mask -------------------

def test_rename_parent_then_read_same_and_later_command(abx, workspace):
    secret = os.path.join(workspace, "dir", "inner", "secret")
    write(secret, SECRET)
    s = abx(config(workspace, [{"paths": [secret]}]))
    j = run(s, "mv dir dir2; mv dir/inner dir/in2; cat dir2/inner/secret dir/in2/secret dir/inner/secret")
    assert SECRET not in j["stdout"], j
    for script in ("cat dir2/inner/secret", "cat dir/in2/secret", "cat dir/inner/secret"):
        j = run(s, script)
        assert SECRET not in j["stdout"], (script, j)
    assert read(secret) == SECRET  # the folders stayed where they were


def test_deny_for_other_op_still_pins(abx, workspace):
    """The deny is written for commands.* only: a background process (process.start, to
    which it does not apply) must still not move the folder away from the next command."""
    secret = os.path.join(workspace, "cfg", "secret")
    write(secret, SECRET)
    s = abx(config(workspace, [{"ops": ["commands.*"], "paths": [secret]}]))
    finish(s, start(s, "mv cfg cfg2"))
    j = run(s, "cat cfg2/secret cfg/secret")
    assert SECRET not in j["stdout"], j
    assert os.path.exists(secret)


def test_files_move_refuses_the_parent_of_a_deny_path(abx, workspace):
    secret = os.path.join(workspace, "keys", "secret")
    write(secret, SECRET)
    s = abx(config(workspace, [{"ops": ["commands.*"], "paths": [secret]}], files=True))
    r = s.post("/files/move", token=ALICE_TOKEN,
               json_body={"src": os.path.join(workspace, "keys"), "dst": os.path.join(workspace, "keys2")})
    assert_error(r, 403, "policy.path_denied")
    assert os.path.exists(secret)
    j = run(s, "cat keys2/secret keys/secret")
    assert SECRET not in j["stdout"], j


def test_files_move_refuses_to_replace_a_deny_file(abx, workspace):
    """A principal the deny does not bind must not rename a file over a denied one: that
    would detach the mask of every running process that has it."""
    env = os.path.join(workspace, ".env")
    write(env, SECRET)
    write(os.path.join(workspace, "tmp"), "decoy")
    s = abx(config(workspace, [{"ops": ["commands.*", "process.*"], "paths": [env]}], files=True))
    r = s.post("/files/move", token=ALICE_TOKEN,
               json_body={"src": os.path.join(workspace, "tmp"), "dst": env, "overwrite": True})
    assert_error(r, 403, "policy.path_denied")
    assert read(env) == SECRET


def test_mask_follows_a_file_the_host_moved(abx, workspace):
    """The host (outside abx's pins) renames the folder after the policy was compiled:
    the mask follows the file to its new name."""
    secret = os.path.join(workspace, "vault", "secret")
    write(secret, SECRET)
    s = abx(config(workspace, [{"paths": [secret]}]))
    os.rename(os.path.join(workspace, "vault"), os.path.join(workspace, "vault2"))
    j = run(s, "cat vault2/secret")
    assert SECRET not in j["stdout"], j
    # deleted, not moved: nothing to follow, the command runs
    os.unlink(os.path.join(workspace, "vault2", "secret"))
    j = run(s, "echo ran")
    assert "ran" in j["stdout"], j


@pytest.mark.skipif(os.geteuid() != 0, reason="needs mount(8)")
def test_spawn_refused_when_a_moved_deny_file_cannot_be_found(abx, workspace):
    """Fail closed: the host moved the file to a name under which abx cannot find it
    again (here: a folder the host then mounted over), so no mask can follow it."""
    import subprocess
    secret = os.path.join(workspace, "vault", "secret")
    write(secret, SECRET)
    s = abx(config(workspace, [{"paths": [secret]}]))
    hide = os.path.join(workspace, "hide")
    os.makedirs(hide)
    os.rename(secret, os.path.join(hide, "secret"))
    subprocess.run(["mount", "-t", "tmpfs", "none", hide], check=True)
    try:
        r = s.post("/commands/run", token=ALICE_TOKEN, json_body={"argv": ["sh", "-c", "echo ran"]})
        assert_error(r, 403, "policy.path_denied")
        assert "moved" in r.json()["error"]["message"]
    finally:
        subprocess.run(["umount", hide], check=True)
    j = run(s, "cat hide/secret")  # found again: masked where it is now
    assert SECRET not in j["stdout"], j


# -- b. files that appear under a deny path after the process started ----------------------

@pytest.mark.parametrize("pattern", ["secrets", "secrets/**"])
def test_file_created_later_under_deny_folder(abx, workspace, pattern):
    folder = os.path.join(workspace, "secrets")
    write(os.path.join(folder, "old.txt"), SECRET)
    s = abx(config(workspace, [{"paths": [os.path.join(workspace, pattern)]}]))
    pid = start(s, "sleep 2; cat secrets/old.txt secrets/new.txt; ls secrets")
    time.sleep(0.5)
    write(os.path.join(folder, "new.txt"), LATER)
    o = finish(s, pid)
    assert SECRET not in o["stdout"] and LATER not in o["stdout"], o
    assert "new.txt" not in o["stdout"], o
    j = run(s, "cat secrets/old.txt secrets/new.txt")
    assert SECRET not in j["stdout"] and LATER not in j["stdout"], j


def test_denied_file_replaced_by_rename_while_process_runs(abx, workspace):
    """A process to which the deny does not apply renames a file over .env, which
    detaches the mask of the running process; the operator then writes a new secret into
    .env in place, and the running process reads it. Pins make that rename fail."""
    env = os.path.join(workspace, ".env")
    write(env, SECRET)
    s = abx(config(workspace, [{"ops": ["process.*"], "paths": [env]}]))
    pid = start(s, "sleep 3; cat .env")
    time.sleep(0.5)
    run(s, "echo decoy > tmp; mv tmp .env")
    with open(env, "r+") as f:  # in place, same inode: what an editor without atomic save does
        f.truncate(0)
        f.write(LATER)
    o = finish(s, pid)
    assert LATER not in o["stdout"] and SECRET not in o["stdout"], o
    assert read(env) == LATER


# -- c. .git renamed around its read-only mounts ---------------------------------------------

def git_workspace(workspace, hooks=True):
    git = os.path.join(workspace, ".git")
    os.makedirs(os.path.join(git, "hooks") if hooks else git)
    write(os.path.join(git, "config"), "[core]\n\trepositoryformatversion = 0\n")
    write(os.path.join(git, "HEAD"), "ref: refs/heads/main\n")
    return git


PLANT = ("mkdir -p {d}/hooks; printf '#!/bin/sh\\necho pwned\\n' > {d}/hooks/pre-commit; "
         "chmod +x {d}/hooks/pre-commit; printf '[core]\\n\\tfsmonitor = /tmp/evil\\n' >> {d}/config")


@pytest.mark.parametrize("script", [
    "mv .git g; mkdir .git; cp -r g/HEAD .git/; " + PLANT.format(d=".git"),
    "mv .git g; " + PLANT.format(d="g") + "; mv g .git",
    "mv .git/hooks h; mkdir .git/hooks; " + PLANT.format(d=".git"),
])
def test_git_rename_does_not_lift_readonly_hooks_and_config(abx, workspace, script):
    git = git_workspace(workspace)
    s = abx(config(workspace, []))
    run(s, script)
    if not os.path.isdir(git):  # a first command may leave it moved; a later one puts it back
        run(s, "mv g .git")
    assert not os.path.exists(os.path.join(git, "hooks", "pre-commit"))
    assert "fsmonitor" not in read(os.path.join(git, "config"))


def test_git_rename_across_two_commands(abx, workspace):
    git = git_workspace(workspace)
    s = abx(config(workspace, []))
    run(s, "mv .git g")
    run(s, PLANT.format(d="g") + "; mv g .git")
    assert os.path.isdir(git)
    assert not os.path.exists(os.path.join(git, "hooks", "pre-commit"))
    assert "fsmonitor" not in read(os.path.join(git, "config"))


def test_files_move_refuses_git_at_the_top_of_a_root(abx, workspace):
    git = git_workspace(workspace)
    s = abx(config(workspace, [], files=True))
    r = s.post("/files/move", token=ALICE_TOKEN, json_body={"src": git, "dst": os.path.join(workspace, "g")})
    assert_error(r, 403, "policy.path_denied")
    assert os.path.isdir(git)


def test_git_without_hooks_folder_gets_a_readonly_one(abx, workspace):
    """A repository without .git/hooks (a clone with an empty template): the process must
    not create the folder and plant a hook where no read-only mount was put."""
    git = git_workspace(workspace, hooks=False)
    s = abx(config(workspace, []))
    run(s, PLANT.format(d=".git"))
    assert not os.path.exists(os.path.join(git, "hooks", "pre-commit"))
    assert "fsmonitor" not in read(os.path.join(git, "config"))


def test_check_config_warns_of_deny_globs_processes_are_not_masked_from(tmp_path, workspace):
    """Where a mount cannot express a deny pattern, the layout is reported, not silently
    left readable to processes."""
    cfg = config(workspace, [{"paths": [workspace + "/**/*.pem", workspace + "/keys/**", workspace + "/.env"]}])
    path = tmp_path / "abx.json"
    path.write_text(json.dumps(cfg))
    r = run_abx(["check-config", str(path)])
    assert r.returncode == 0, r.stdout + r.stderr
    lines = [ln for ln in r.stdout.splitlines() if "config.deny_not_masked" in ln]
    assert len(lines) == 1 and "/**/*.pem" in lines[0], r.stdout
