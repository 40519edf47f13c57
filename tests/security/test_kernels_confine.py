"""kernels.*: a kernel is confined like a command (issue 15). Without `net`, a cell can
open neither a TCP connection to a listener on the host nor a Unix socket it knows the
path of; it reaches abx only over the sockets abx handed it. The kernel's host
credential is useless outside the kernel, and a wrong one is refused on the channel."""
import os
import socket

import pytest

import abxtest as bb

ALICE_TOKEN, sha256_hex = bb.ALICE_TOKEN, bb.sha256_hex
from secutil import world_readable_dir

pytestmark = pytest.mark.skipif(not os.path.exists("/usr/lib/python3/dist-packages/ipykernel"),
                                reason="python3-ipykernel is not installed (scripts/deps.sh installs it)")


def ok(r):
    assert r.status_code == 200, "%s %s" % (r.status_code, r.text[:800])
    return r.json()


@pytest.fixture
def kern(abx, workspace):
    cfg = {"workspace": workspace, "terminal_listen": "off",
           "auth": {"tokens": [{"principal": "alice", "roles": ["agent"], "token_sha256": sha256_hex(ALICE_TOKEN)}]},
           "policy": {"allow": [
               {"ops": ["kernels.*"], "principals": ["alice"], "paths": [workspace + "/**"], "languages": ["python"]},
               {"ops": ["files.*", "core.*"], "principals": ["alice"], "paths": [workspace + "/**"]}]}}
    s = abx(cfg)
    kid = ok(s.op("kernels.create", {"language": "python"}, token=ALICE_TOKEN))["id"]
    return s, kid


def cell(s, kid, code):
    e = ok(s.post("/ops/kernels.execute", token=ALICE_TOKEN, json_body={"id": kid, "code": code}, timeout=60))
    assert e["error"] is None, e["error"]
    return e["results"][0]["text/plain"] if e["results"] else None


TRY = ("def attempt(f):\n"
       "    try:\n"
       "        f()\n"
       "        return 'ALLOWED'\n"
       "    except OSError as e:\n"
       "        return 'refused %s' % e.errno\n")


def test_cell_cannot_reach_host_tcp(kern):
    s, kid = kern
    lst = socket.socket()
    lst.bind(("127.0.0.1", 0))
    lst.listen(1)
    port = lst.getsockname()[1]
    try:
        v = cell(s, kid, TRY + "import socket\nattempt(lambda: socket.create_connection(('127.0.0.1', %d), 2))" % port)
        assert "refused" in v, v
        # abx's own HTTP port is no way out either
        v = cell(s, kid, TRY + "attempt(lambda: socket.create_connection(('127.0.0.1', %d), 2))" % s.port)
        assert "refused" in v, v
    finally:
        lst.close()


def test_cell_cannot_reach_unix_socket_in_tmp(kern, tmp_path):
    s, kid = kern
    d = world_readable_dir(tmp_path, "sock")
    path = str(d / "s")
    host = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    host.bind(path)
    os.chmod(path, 0o777)
    host.listen(1)
    try:
        v = cell(s, kid, TRY + "import socket\nattempt(lambda: socket.socket(socket.AF_UNIX).connect(%r))" % path)
        assert "refused" in v, v
        # while the host channel still works
        assert cell(s, kid, "host.files.stat(path='a.txt')['size']") == "6"
    finally:
        host.close()


def test_credential_useless_outside_and_checked_inside(kern):
    s, kid = kern
    cred = cell(s, kid, "import host\nhost._tok")[1:-1]
    assert len(cred) == 36
    for op in ("core.whoami", "files.stat", "kernels.list"):
        r = s.op(op, {"path": "a.txt"} if op == "files.stat" else {}, token=cred)
        assert r.status_code == 401, (op, r.status_code, r.text)
    # a wrong credential on the channel is refused, as a value
    v = cell(s, kid, "import host\nhost._tok = 'x' * 36\nhost.files.stat(path='a.txt')['error']['code']")
    assert v == "'auth.invalid_token'", v
    # the environment does not carry it
    assert cell(s, kid, "import os\n[k for k in os.environ if k.startswith('ABX_')]") == "[]"


@pytest.fixture
def rkern(abx, workspace):
    if not os.path.exists("/usr/lib/R/site-library/IRkernel"):
        pytest.skip("r-cran-irkernel is not installed (scripts/deps.sh installs it)")
    cfg = {"workspace": workspace, "terminal_listen": "off",
           "auth": {"tokens": [{"principal": "alice", "roles": ["agent"], "token_sha256": sha256_hex(ALICE_TOKEN)}]},
           "policy": {"allow": [
               {"ops": ["kernels.*"], "principals": ["alice"], "paths": [workspace + "/**"], "languages": ["r"]},
               {"ops": ["files.*", "core.*"], "principals": ["alice"], "paths": [workspace + "/**"]}]}}
    s = abx(cfg)
    kid = ok(s.op("kernels.create", {"language": "r"}, token=ALICE_TOKEN))["id"]
    return s, kid


R_TRY = "attempt <- function(f) tryCatch({ f(); 'ALLOWED' }, error = function(e) 'refused', warning = function(w) 'refused')\n"


def test_r_cell_cannot_reach_host_tcp_or_bind_unix_sockets(rkern, tmp_path):
    s, kid = rkern
    lst = socket.socket()
    lst.bind(("127.0.0.1", 0))
    lst.listen(1)
    port = lst.getsockname()[1]
    try:
        v = cell(s, kid, R_TRY + "attempt(function() socketConnection('127.0.0.1', %d, timeout = 2))" % port)
        assert v == '[1] "refused"', v
    finally:
        lst.close()
    # a ZeroMQ socket of its own (pbdZMQ directly, not IRkernel's routed binds) is refused
    path = str(world_readable_dir(tmp_path, "rsock") / "z")
    v = cell(s, kid, R_TRY + "attempt(function() { z <- pbdZMQ::zmq.socket(pbdZMQ::zmq.ctx.new(), "
                             "pbdZMQ::ZMQ.ST()$REP); if (pbdZMQ::zmq.bind(z, 'ipc://%s') != 0) stop('no') })" % path)
    assert v == '[1] "refused"', v
    assert not os.path.exists(path)
    # the host channel still works
    assert cell(s, kid, "host_call('files.stat', path = 'a.txt')$size") == "[1] 6"


def test_r_credential_useless_outside_and_not_in_env(rkern):
    s, kid = rkern
    cred = cell(s, kid, "get('tok', environment(host_call))")
    cred = cred.split('"')[1]
    assert len(cred) == 36
    r = s.op("core.whoami", {}, token=cred)
    assert r.status_code == 401, r.text
    assert cell(s, kid, "grep('^ABX_', names(Sys.getenv()), value = TRUE)") == "character(0)"
