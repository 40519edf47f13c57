"""The zero-step Python client (clients/python/abx) against a real server: defaults to the
local server and its token file, builds its attribute tree from GET /ops, checks
arguments against the fetched schema before sending, sends X-ABX-Client, raises
ContractMismatchError (E3111) for ops the server does not list, maps error bodies to
AbxError subclasses, returns bytes as bytes and SSE as an iterator of events."""
import os
import sys

import pytest

from abxtest import ALICE_TOKEN, BOB_TOKEN, multi_config

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "clients", "python"))
import abx as abxc  # noqa: E402  (the client package, not the server fixture)


@pytest.fixture
def local(server, monkeypatch):
    """The embedded default server, found the way a user's script finds it: $ABX_HOME."""
    monkeypatch.setenv("ABX_HOME", server.home)
    monkeypatch.delenv("ABX_URL", raising=False)
    monkeypatch.delenv("ABX_TOKEN", raising=False)
    # the server writes $ABX_HOME/url once it listens, just after it starts answering
    import time
    deadline = time.time() + 5
    while abxc.default_url() != server.url and time.time() < deadline:
        time.sleep(0.02)
    return server


@pytest.fixture
def client(local):
    return abxc.Client()


# -- finding the server ---------------------------------------------------------------------

def test_defaults_to_the_local_server_and_its_token(local):
    c = abxc.Client()
    assert c.url == local.url
    assert c.token == local.token
    assert "files.read" in c.ops


def test_env_overrides_the_files(multi, monkeypatch, tmp_path):
    monkeypatch.setenv("ABX_HOME", str(tmp_path))          # no url or token files there
    monkeypatch.setenv("ABX_URL", multi.url)
    monkeypatch.setenv("ABX_TOKEN", BOB_TOKEN)
    c = abxc.Client()
    assert c.url == multi.url and c.token == BOB_TOKEN
    assert all(i.startswith("core.") for i in c.ops)
    c2 = abxc.Client(url=multi.url + "/", token=ALICE_TOKEN)  # explicit arguments win
    assert "files.read" in c2.ops and c2.url == multi.url


def test_bad_token_is_an_auth_error(local):
    with pytest.raises(abxc.AuthError) as ei:
        abxc.Client(token="x" * 64)
    assert ei.value.code == "auth.invalid_token" and ei.value.status == 401
    with pytest.raises(abxc.AuthError) as ei:
        abxc.Client(token="")
    assert ei.value.code == "auth.required"


def test_unreachable_server_is_a_transport_error(tmp_path, monkeypatch):
    from abxtest import free_port
    monkeypatch.setenv("ABX_HOME", str(tmp_path))
    with pytest.raises(abxc.TransportError) as ei:
        abxc.Client(url="http://127.0.0.1:%d" % free_port(), token="t")
    assert ei.value.code == "client.unreachable"
    with pytest.raises(ValueError):
        abxc.Client(url="ftp://example", token="t")


# -- the attribute tree ---------------------------------------------------------------------

def test_attribute_tree(client):
    assert {"core", "files", "commands", "process"} <= set(dir(client))
    assert "list" in dir(client.files) and "sessions" in dir(client.commands)
    assert isinstance(client.commands.sessions, abxc.Namespace)
    assert isinstance(client.commands.sessions.create, abxc.Operation)
    assert client.files.read.__doc__ == client.ops["files.read"]["summary"]
    listing = client.files.list(path=".")
    assert {"a.txt", "b.txt", "sub"} <= {e["name"] for e in listing["entries"]}
    assert client.core.ops.list()["ops"] == list(client.ops.values())


def test_call_by_id_alias_and_tool_name(client):
    assert client.call("files.read", path="a.txt")["content"] == "hello\n"
    assert client.call("files__read", path="a.txt")["content"] == "hello\n"


def test_keyword_arguments_only(client):
    with pytest.raises(abxc.ArgumentError):
        client.files.read("a.txt")


def test_x_abx_client_header_is_sent(client, local):
    client.files.stat(path="a.txt")
    lines = [ln for ln in local.log_lines() if ln.get("op") == "files.stat"]
    assert lines and lines[-1]["client"] == "python/%s catalog=%d" % (abxc.__version__, abxc.CATALOG_VERSION)


# -- arguments checked before sending -------------------------------------------------------

@pytest.mark.parametrize("op,args,code,fragment", [
    ("files.read", {"pathh": "a.txt"}, "args.unknown", "pathh"),
    ("files.read", {}, "args.missing", "path"),
    ("files.read", {"path": 3}, "args.invalid", "must be a string"),
    ("files.read", {"path": "a.txt", "max_lines": "5"}, "args.invalid", "must be an integer"),
    ("files.read", {"path": "a.txt", "max_lines": True}, "args.invalid", "must be an integer"),
    ("files.read", {"path": "a.txt", "encoding": "latin1"}, "args.invalid", "must be one of"),
    ("files.read", {"path": "a.txt", "offset": -1}, "args.invalid", ">= 0"),
    ("files.list", {"path": ".", "recursive": "yes"}, "args.invalid", "boolean"),
    ("commands.run", {"argv": ["echo", 1]}, "args.invalid", "argv[1]"),
    ("commands.run", {"argv": "echo hi"}, "args.invalid", "must be a list"),
    ("commands.run", {}, "args.missing", "exactly one of command, argv"),
    ("commands.run", {"command": "echo", "argv": ["echo"]}, "args.invalid", "exactly one of"),
    ("commands.run", {"command": "echo", "env": {"A": 1}}, "args.invalid", "env.A"),
])
def test_arguments_refused_before_any_request(client, local, op, args, code, fragment):
    before = len(local.log_lines())
    with pytest.raises(abxc.ArgumentError) as ei:
        client.call(op, **args)
    assert ei.value.code == code and fragment in ei.value.message, ei.value
    assert ei.value.status is None and ei.value.op == op
    assert len(local.log_lines()) == before  # nothing reached the server


def test_the_server_agrees_with_the_client_checks(local):
    """The client's codes are the server's: the same bad call sent raw gets the same code."""
    for op, args, code in (("files.read", {"pathh": "a.txt"}, "args.unknown"),
                           ("files.read", {}, "args.missing"),
                           ("files.read", {"path": "a.txt", "encoding": "latin1"}, "args.invalid")):
        assert local.op(op, args, token=local.token).json()["error"]["code"] == code


# -- errors from the server -----------------------------------------------------------------

def test_server_errors_become_abx_errors(client):
    with pytest.raises(abxc.NotFoundError) as ei:
        client.files.read(path="nope.txt")
    e = ei.value
    assert (e.code, e.status, e.op) == ("files.not_found", 404, "files.read")
    assert e.message and e.request_id
    with pytest.raises(abxc.PolicyError) as ei:
        client.files.read(path="/etc/hostname")
    assert ei.value.code == "policy.path_not_allowed" and ei.value.status == 403
    with pytest.raises(abxc.AbxError) as ei:
        client.files.read(path="sub")
    assert ei.value.code == "files.is_a_directory" and ei.value.status == 400


def test_contract_mismatch_for_unlisted_ops(multi):
    bob = abxc.Client(url=multi.url, token=BOB_TOKEN)   # core.* only
    for call in (lambda: bob.call("files.read", path="a.txt"), lambda: bob.files,
                 lambda: bob.call("custom.grade", submission="x"), lambda: bob.core.nope):
        with pytest.raises(abxc.ContractMismatchError) as ei:
            call()
        assert ei.value.code == "E3111" and ei.value.status is None
    assert not hasattr(bob, "files")
    alice = abxc.Client(url=multi.url, token=ALICE_TOKEN)
    assert alice.files.read(path="a.txt")["content"] == "hello\n"


def test_refresh_after_a_reload(abx, workspace):
    """An op mounted after the client was made: E3111 until refresh() fetches GET /ops again."""
    import signal
    import time
    s = abx(multi_config())
    bob = abxc.Client(url=s.url, token=BOB_TOKEN)
    with open(s.config_path, "w") as f:
        f.write(multi_config(extra_allow='    - ops: ["files.read"]\n      principals: ["bob"]\n'
                                         '      paths: ["{ws}/**"]\n').replace("{ws}", workspace))
    os.kill(s.proc.pid, signal.SIGHUP)
    with pytest.raises(abxc.ContractMismatchError):
        bob.files.read(path="a.txt")
    deadline = time.time() + 10
    while "files.read" not in bob.ops and time.time() < deadline:
        time.sleep(0.1)
        bob.refresh()
    assert bob.files.read(path="a.txt")["content"] == "hello\n"


# -- results --------------------------------------------------------------------------------

def test_bytes_result_is_bytes(client, workspace):
    with open(os.path.join(workspace, "bin.dat"), "wb") as f:
        f.write(bytes(range(256)))
    got = client.files.download(path="bin.dat")
    assert isinstance(got, bytes) and got == bytes(range(256))


def test_upload_takes_the_body_positionally(client, workspace):
    r = client.files.upload(b"\x00\x01up", path="up.bin")
    assert r["bytes_written"] == 4
    with open(os.path.join(workspace, "up.bin"), "rb") as f:
        assert f.read() == b"\x00\x01up"
    with pytest.raises(abxc.ArgumentError) as ei:
        client.files.upload(path="up.bin")
    assert ei.value.code == "args.missing"


def test_sse_result_is_an_event_iterator(client):
    with client.commands.stream(argv=["sh", "-c", "echo one; echo two >&2"]) as stream:
        events = list(stream)
    names = [e.event for e in events]
    assert names[0] == "start" and names[-1] == "exit"
    out = "".join(e.data["data"] for e in events if e.event == "stdout")
    err = "".join(e.data["data"] for e in events if e.event == "stderr")
    assert (out, err) == ("one\n", "two\n")
    assert events[-1].data["exit_code"] == 0
    assert all(e.id for e in events if e.event in ("stdout", "stderr"))


def test_sse_events_arrive_before_the_command_ends(client):
    """Iterating yields each event as it comes; closing early ends the command."""
    import time
    t0 = time.time()
    stream = client.commands.stream(argv=["sh", "-c", "echo first; sleep 5; echo late"])
    first = [next(stream), next(stream)]
    assert [e.event for e in first] == ["start", "stdout"] and first[1].data["data"] == "first\n"
    assert time.time() - t0 < 4
    stream.close()
    assert list(stream) == []
