"""Issue 25: Unix sockets under `net: false`. Landlock cannot govern connect() on a
pathname socket, so a process without the network sees a view of only its roots
(src/sandbox/view.c: the system directories, /etc, /proc, a few devices, its read and
write roots, TMPDIR and HOME) and may then make Unix sockets: its own servers in the
workspace or TMPDIR work among its processes; a socket anywhere else (another /tmp
folder, /run, abx's own state and runtime folders) does not exist for it. Where the view
cannot be built, socket(AF_UNIX) stays refused (test_tiers.py)."""
import glob
import os
import socket

from abxtest import ALICE_TOKEN


def config(ws):
    return {"workspace": ws, "terminal_listen": "off", "auth": {"tokens": [
        {"principal": "alice", "token_sha256": __import__("hashlib").sha256(ALICE_TOKEN.encode()).hexdigest()}]},
        "policy": {"allow": [{"ops": ["commands.*"], "principals": ["alice"],
                              "paths": {"read": [ws + "/**"], "write": [ws + "/**"]},
                              "commands": {"allow": ["python3 *", "sh *"], "shell": True}}]}}


def run(s, command):
    r = s.post("/commands/run", token=ALICE_TOKEN, json_body={"command": command, "timeout": 30}, timeout=60)
    assert r.status_code == 200, r.text
    return r.json()


SERVE = r"""
import os, socket, sys, threading
def serve(path):
    srv = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    srv.bind(path); srv.listen(1)
    def once():
        c, _ = srv.accept(); c.sendall(b"pong " + c.recv(10)); c.close()
    threading.Thread(target=once).start()
    cl = socket.socket(socket.AF_UNIX); cl.connect(path); cl.sendall(b"ping")
    print(os.path.basename(path), cl.recv(100).decode())
serve(os.path.join(os.getcwd(), "dev.sock"))
serve(os.path.join(os.environ["TMPDIR"], "tmp.sock"))
"""


def test_socket_server_in_the_workspace_and_tmpdir(abx, workspace):
    s = abx(config(workspace))
    with open(os.path.join(workspace, "serve.py"), "w") as f:
        f.write(SERVE)
    j = run(s, "python3 serve.py")
    assert j["stdout"] == "dev.sock pong ping\ntmp.sock pong ping\n", j


def test_a_client_in_another_process_of_the_call(abx, workspace):
    s = abx(config(workspace))
    j = run(s, "python3 -c \"import socket,os; s=socket.socket(socket.AF_UNIX); s.bind('w.sock'); s.listen(1); "
               "c,_=s.accept(); c.sendall(b'hi')\" & sleep 0.5; "
               "python3 -c \"import socket; c=socket.socket(socket.AF_UNIX); c.connect('w.sock'); print(c.recv(9))\"")
    assert j["stdout"] == "b'hi'\n", j


PROBE = r"""
import socket, sys, errno
for p in sys.argv[1:]:
    try:
        c = socket.socket(socket.AF_UNIX); c.settimeout(3); c.connect(p); print("CONNECTED", p)
    except OSError as e:
        print("refused", errno.errorcode.get(e.errno, e.errno))
print()
"""


def listen(path):
    srv = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    srv.bind(path)
    os.chmod(path, 0o777)
    srv.listen(4)
    return srv


def test_sockets_outside_the_roots_do_not_exist(abx, workspace, tmp_path):
    s = abx(config(workspace))
    outside = tmp_path / "elsewhere"
    outside.mkdir()
    os.chmod(str(tmp_path), 0o755)
    os.chmod(str(outside), 0o777)
    paths = [str(outside / "host.sock"), "/run/abx-test-%d.sock" % os.getpid()]
    state = os.path.join(os.path.dirname(s.config_path), ".abx")
    os.makedirs(state, exist_ok=True)
    paths.append(os.path.join(state, "abx-state.sock"))
    runtime = [d for d in glob.glob("/tmp/abx-%d-*" % s.proc.pid) if os.path.isdir(d)]
    assert runtime, "abx's runtime dir"
    paths.append(os.path.join(runtime[0], "abx-runtime.sock"))
    servers = [listen(p) for p in paths]
    try:
        with open(os.path.join(workspace, "probe.py"), "w") as f:
            f.write(PROBE)
        # and not through another process's root either (Landlock's ptrace rule closes
        # /proc/<pid>/root of processes outside the domain: abx's, init's)
        via = ["/proc/%d/root%s" % (pid, paths[0]) for pid in (s.proc.pid, 1)]
        j = run(s, "python3 probe.py " + " ".join(paths + via) + "; ls /")
        lines = j["stdout"].split("\n")
        assert lines[:4] == ["refused ENOENT"] * 4, j  # the paths do not exist in its view
        assert all(ln.startswith("refused") for ln in lines[4:6]), j
        top = set(lines[7:]) - {""}
        assert top <= {"bin", "dev", "etc", "lib", "lib32", "lib64", "libx32", "proc", "sbin", "tmp", "usr",
                       workspace.split("/")[1]}, top
    finally:
        for srv in servers:
            srv.close()
        for p in paths:
            if os.path.exists(p):
                os.unlink(p)
