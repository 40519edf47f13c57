"""Attack corpus, item 3: command injection.

A command string is split into words without any expansion and shell syntax is refused
(403 policy.command_not_allowed); argv is used verbatim; the program is resolved to an
absolute path before patterns match; the environment is an allowlist. Every payload tries
to create the file `pwned` in the workspace; it must never appear."""
import os
import shutil

import pytest

from abxtest import ALICE_TOKEN, assert_error, tokens
from secutil import make_workspace, module_server

CMDS = ["echo *", "cat *", "ls -a", "git status", "python3 *", "sleep *"]


def config(ws, commands=None, deny=None):
    stmt = {"ops": ["commands.*", "process.*"], "principals": ["alice"], "paths": [ws + "/**"],
            "commands": commands or {"allow": CMDS, "env": ["FOO"]}}
    policy = {"allow": [stmt]}
    if deny:
        policy["deny"] = deny
    return {"workspace": ws, "terminal_listen": "off", "ledger": {"enabled": False},
            "auth": {"tokens": tokens("alice", "bob")}, "policy": policy}


@pytest.fixture(scope="module")
def shared_ws(tmp_path_factory):
    return make_workspace(tmp_path_factory.mktemp("injection"))


@pytest.fixture(scope="module")
def shared(tmp_path_factory, shared_ws):
    yield from module_server(tmp_path_factory, shared_ws, config(shared_ws))


@pytest.fixture
def srv(shared):
    return shared


@pytest.fixture
def workspace(shared_ws):
    return shared_ws


def run(s, body, path="/commands/run"):
    return s.post(path, token=ALICE_TOKEN, json_body=body, timeout=20)


def pwned(ws):
    return os.path.lexists(os.path.join(ws, "pwned"))


INJECTIONS = [
    "echo a; touch pwned", "echo a;touch pwned", "echo a ;; touch pwned", "echo a && touch pwned",
    "echo a || touch pwned", "echo a | touch pwned", "echo a |& touch pwned", "echo a & touch pwned",
    "echo $(touch pwned)", "echo \"$(touch pwned)\"", "echo `touch pwned`", "echo \"`touch pwned`\"",
    "echo <(touch pwned)", "echo >(touch pwned)", "cat <(touch pwned)", "{ touch pwned; }", "echo {a,b}",
    "(touch pwned)", "echo a\ntouch pwned", "echo a\rtouch pwned", "echo a\r\ntouch pwned", "echo a\\\ntouch pwned",
    "echo a > pwned", "echo a >> pwned", "echo a 2> pwned", "echo a &> pwned", "echo a >| pwned", "cat < /etc/passwd",
    "echo a <<< b", "echo $IFS", "echo ${IFS}touch", "echo a$'\\x3b'touch", "echo $((1+1))", "echo ~root",
    "~/x", "echo a # ; touch pwned", "echo pw* ", "echo [p]wned", "echo pwne?", "echo 'a' ; touch pwned",
    "echo 'unterminated ; touch pwned", "echo \"x ; touch pwned", "echo a\\",
]


@pytest.mark.parametrize("command", INJECTIONS, ids=[repr(c) for c in INJECTIONS])
def test_shell_syntax_refused(srv, workspace, command):
    r = run(srv, {"command": command})
    assert_error(r, 403, "policy.command_not_allowed")
    assert not pwned(workspace)


# not syntax for a non-interactive POSIX shell, and no shell runs anyway: plain data
HARMLESS = ["echo !!", "echo a\u000btouch pwned", "echo a\u000ctouch pwned", "echo a\ttouch pwned",
            "echo a\uff1btouch pwned", "echo a=b", "echo \\$HOME", "echo '$(touch pwned)'", "echo \\; touch"]


@pytest.mark.parametrize("command", HARMLESS, ids=[repr(c) for c in HARMLESS])
def test_lookalikes_are_data(srv, workspace, command):
    r = run(srv, {"command": command})
    assert r.status_code == 200, r.text
    assert r.json()["argv"][0] == os.path.realpath(shutil.which("echo"))
    assert not pwned(workspace)


@pytest.mark.parametrize("n", [2, 10, 60])
def test_chained_subcommands(srv, workspace, n):
    r = run(srv, {"command": " ; ".join(["echo %d" % i for i in range(n)] + ["touch pwned"])})
    assert_error(r, 403, "policy.command_not_allowed")
    r = run(srv, {"command": " && ".join(["echo %d" % i for i in range(n)] + ["touch pwned"])})
    assert_error(r, 403, "policy.command_not_allowed")
    assert not pwned(workspace)


@pytest.mark.parametrize("path,body", [
    ("/commands/stream", {"command": "echo a; touch pwned"}),
    ("/process", {"command": "echo a && touch pwned"}),
    ("/process", {"command": "echo $(touch pwned)"}),
    ("/commands/stream", {"command": "echo `touch pwned`"}),
])
def test_other_doors_refuse_too(srv, workspace, path, body):
    assert_error(run(srv, body, path=path), 403, "policy.command_not_allowed")
    assert not pwned(workspace)


def test_session_exec_refuses_too(srv, workspace):
    r = srv.post("/commands/sessions", token=ALICE_TOKEN, json_body={})
    assert r.status_code == 200, r.text
    sid = r.json()["id"]
    r = srv.post("/commands/sessions/%s/exec" % sid, token=ALICE_TOKEN, json_body={"command": "echo a; touch pwned"})
    assert_error(r, 403, "policy.command_not_allowed")
    assert not pwned(workspace)


def test_oversized_command(srv, workspace):
    r = run(srv, {"command": "echo " + "a " * 40000 + "; touch pwned"})
    assert_error(r, 403, "policy.command_not_allowed")
    assert not pwned(workspace)


# argv is verbatim: metacharacters are data for the program, never for a shell
ARGV_DATA = ["a; touch pwned", "$(touch pwned)", "`touch pwned`", "a\ntouch pwned", "a && touch pwned",
             "> pwned", "*", "~", "$HOME", "-e a\\ntouch", "--help; touch pwned"]


@pytest.mark.parametrize("arg", ARGV_DATA, ids=[repr(a) for a in ARGV_DATA])
def test_argv_metacharacters_are_data(srv, workspace, arg):
    r = run(srv, {"argv": ["echo", arg]})
    assert r.status_code == 200, r.text
    assert r.json()["stdout"] == arg + "\n" or arg.startswith("-e"), r.json()
    assert not pwned(workspace)


SPOOFED = [["/usr/bin/../bin/touch", "pwned"], ["/usr/bin/./touch", "pwned"], ["touch", "pwned"], ["./echo", "x"],
           ["ECHO", "x"], [" echo", "x"], ["echo\n", "x"], ["echo ", "x"], ["/proc/self/exe", "x"],
           ["/bin/sh", "-c", "touch pwned"], ["sh", "-c", "touch pwned"], ["env", "touch", "pwned"],
           ["", "x"], [], ["git", "-c", "core.pager=touch pwned", "status"], ["ls", "-a", "/etc"],
           ["ls", "-a", "-l"], ["ls"], ["git", "status", "--porcelain"], ["git", "status", "-c", "x"],
           ["git", "--exec-path=/tmp", "status"]]


@pytest.mark.parametrize("argv", SPOOFED, ids=[repr(a) for a in SPOOFED])
def test_program_and_pinned_arguments(srv, workspace, argv):
    if "/tmp" not in str(argv):
        fake = os.path.join(workspace, "echo")
        with open(fake, "w") as f:
            f.write("#!/bin/sh\ntouch %s/pwned\n" % workspace)
        os.chmod(fake, 0o755)
    assert_error(run(srv, {"argv": argv}), 403, "policy.command_not_allowed")
    assert not pwned(workspace)


@pytest.mark.parametrize("command", ["ls -a /etc", "ls -a -R", "ls -a ..", "git status --short",
                                     "git status -uall", "git -C .. status", "cat a.txt", "echo"])
def test_pinned_patterns_in_command_strings(abx, workspace, command):
    s = abx(config(workspace, commands=["ls -a", "git status", "cat b.txt", "echo hello *"]))
    assert_error(run(s, {"command": command}), 403, "policy.command_not_allowed")


ENV_NAMES = ["PATH", "LD_PRELOAD", "LD_LIBRARY_PATH", "LD_AUDIT", "BASH_ENV", "ENV", "IFS", "PS4",
             "PYTHONSTARTUP", "PYTHONPATH", "PYTHONINSPECT", "GIT_CONFIG_PARAMETERS", "GIT_SSH_COMMAND",
             "GIT_EXEC_PATH", "HOME", "TMPDIR", "FOO=BAR", "foo", "Foo", " FOO", "FOO ", "FOO\n"]


@pytest.mark.parametrize("name", ENV_NAMES, ids=[repr(n) for n in ENV_NAMES])
def test_env_outside_allowlist_refused(srv, workspace, name):
    r = run(srv, {"argv": ["python3", "-c", "open('pwned','w')"], "env": {"FOO": "ok", name: "/tmp/x"}})
    j = assert_error(r, 403, "policy.command_not_allowed")
    assert "env" in j["error"]["message"]
    assert not pwned(workspace)


def test_empty_env_name_invalid(srv):
    assert_error(run(srv, {"argv": ["echo"], "env": {"": "x"}}), 400, "args.invalid")


def test_allowlisted_path_does_not_change_the_program(abx, workspace):
    """Even an operator who lets calls set PATH does not let them pick the program: it
    was resolved through the scope's own search path before matching."""
    bindir = os.path.join(workspace, "bin")
    os.makedirs(bindir)
    with open(os.path.join(bindir, "echo"), "w") as f:
        f.write("#!/bin/sh\ntouch %s/pwned\necho fake\n" % workspace)
    os.chmod(os.path.join(bindir, "echo"), 0o755)
    s = abx(config(workspace, commands={"allow": ["echo *"], "env": ["PATH"]}))
    r = run(s, {"command": "echo real", "env": {"PATH": bindir}})
    assert r.status_code == 200, r.text
    j = r.json()
    assert j["stdout"] == "real\n" and j["argv"][0] == os.path.realpath(shutil.which("echo"))
    assert not pwned(workspace)


@pytest.mark.parametrize("argv,code", [
    (["python3", "-c", "open('pwned','w')"], "policy.denied"),
    (["python3", "-c", "print(1)"], "policy.denied"),
    (["python3", "x.py"], None),
])
def test_deny_pattern_on_arguments(abx, workspace, argv, code):
    with open(os.path.join(workspace, "x.py"), "w") as f:
        f.write("print('script')\n")
    s = abx(config(workspace, deny=[{"commands": ["python3 -c *"]}]))
    r = run(s, {"argv": argv})
    if code:
        assert_error(r, 403, code)
    else:
        assert r.status_code == 200 and r.json()["stdout"] == "script\n", r.text
    assert not pwned(workspace)
