"""abxtest: the one helper module of abx's Python tests (tests/blackbox and tests/security).

Both conftest.py files put tests/pylib on sys.path and take their fixtures from here; test
files import helpers with `from abxtest import ...`. What lives here: the binary snapshot
(ABX_BIN), starting the real server on a free 127.0.0.1 port (AbxServer, the `abx`
factory fixture), the CLI runner, raw HTTP responses, error assertions, the shared
principals and their tokens (`tokens()`), the multi-principal config, the SSE parser, and
process polling.

Pick another binary (e.g. an ASan build) with:   ABX_BIN=/path/to/abx

Every server a test starts gets its own free port, its own $ABX_HOME (a tmp dir) and is
stopped (SIGTERM, then SIGKILL) at teardown. Under a sanitizer build, a report on the
server's stderr fails the test that started it.
"""
import atexit
import hashlib
import json
import os
import random
import shutil
import signal
import socket
import subprocess
import tempfile
import time

import pytest
import requests

import abxschema

ABX_BIN_SOURCE = os.environ.get("ABX_BIN", "/work/main/build/abx")
ABX_BIN = ABX_BIN_SOURCE  # replaced by a private copy in pytest_configure
START_TIMEOUT = float(os.environ.get("ABX_START_TIMEOUT", "15"))

# Tokens used by config-driven servers (all >= 16 characters).
ALICE_TOKEN = "alice-token-0123456789abcdef"   # principal alice, role agent
BOB_TOKEN = "bob-token-0123456789abcdefgh"     # principal bob, role viewer
CAROL_TOKEN = "carol-token-0123456789abcdef"   # principal carol, role agent
ADMIN_TOKEN = "admin-token-0123456789abcdef"   # principal root, role admin
APPROVER_TOKEN = "approver-token-0123456789abcd"  # principal ann, role approver
OWNER_TOKEN = "owner-token-0123456789abcdef"   # principal olga, role owner
VAL_TOKEN = "val-agent-approver-token-01234"   # principal val, roles agent + approver

# principal -> (token, roles): the cast every config-driven test draws from
PRINCIPALS = {
    "alice": (ALICE_TOKEN, ["agent"]),
    "bob": (BOB_TOKEN, ["viewer"]),
    "carol": (CAROL_TOKEN, ["agent"]),
    "root": (ADMIN_TOKEN, ["admin"]),
    "ann": (APPROVER_TOKEN, ["approver"]),
    "olga": (OWNER_TOKEN, ["owner"]),
    "val": (VAL_TOKEN, ["agent", "approver"]),
}


def _snapshot_binary(src):
    """Copy the binary once per session, so a concurrent rebuild of build/abx (the linker
    rewriting it) cannot make tests fail half-way. ABX_BIN_COPY=0 runs it in place."""
    if os.environ.get("ABX_BIN_COPY", "1") == "0":
        return src
    d = tempfile.mkdtemp(prefix="abx-bin-")
    dst = os.path.join(d, "abx")
    last = None
    for _ in range(30):
        try:
            shutil.copy2(src, dst)
            os.chmod(dst, 0o755)
            r = subprocess.run([dst, "version"], capture_output=True, text=True, timeout=20)
            if r.returncode == 0 and r.stdout.startswith("abx "):
                atexit.register(shutil.rmtree, d, True)
                return dst
            last = r.stderr or r.stdout
        except (OSError, subprocess.SubprocessError) as e:
            last = e
        time.sleep(0.5)
    raise RuntimeError("cannot snapshot %s: %s" % (src, last))


def configure():
    """Called from each conftest's pytest_configure: run a private copy of the binary."""
    global ABX_BIN
    ABX_BIN = _snapshot_binary(ABX_BIN_SOURCE)
    abxschema.install(ABX_BIN)  # every JSON result is checked against its op's result schema


def sha256_hex(s):
    return hashlib.sha256(s.encode()).hexdigest()


def tokens(*names, extra=(), admin=False, approver=False):
    """auth.tokens entries for the named principals of PRINCIPALS, in that order, then the
    entries of `extra` as given: tokens("alice", "bob", "root"). Without names, the
    attack corpus's usual pair alice and bob (plus root with admin=True, ann with
    approver=True), as the older secutil.tokens(admin, approver) gave."""
    if not names:
        names = ("alice", "bob") + (("root",) if admin else ()) + (("ann",) if approver else ())
    return [{"principal": n, "roles": list(PRINCIPALS[n][1]), "token_sha256": sha256_hex(PRINCIPALS[n][0])}
            for n in names] + list(extra)


def free_port():
    s = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    s.bind(("127.0.0.1", 0))
    port = s.getsockname()[1]
    s.close()
    return port


SANITIZER_MARKERS = ("ERROR: AddressSanitizer", "ERROR: LeakSanitizer", "runtime error:",
                     "WARNING: ThreadSanitizer", "ERROR: UndefinedBehaviorSanitizer")


def sanitizer_report(text):
    for m in SANITIZER_MARKERS:
        if m in text:
            return m
    return None


def run_abx(args, env=None, home=None, timeout=20, cwd=None, input=None):
    """Run a short-lived abx command (CLI); returns CompletedProcess with text output."""
    e = dict(os.environ)
    if home is not None:
        e["ABX_HOME"] = str(home)
    e.pop("ABX_URL", None)
    e.pop("ABX_TOKEN", None)
    if env:
        e.update(env)
    r = subprocess.run([ABX_BIN] + list(args), env=e, cwd=cwd, capture_output=True, text=True,
                       timeout=timeout, input=input)
    rep = sanitizer_report(r.stderr)
    assert rep is None, "%s in `abx %s`:\n%s" % (rep, " ".join(args), r.stderr[-4000:])
    return r


class RawResponse:
    def __init__(self, data):
        self.raw = data
        head, _, body = data.partition(b"\r\n\r\n")
        lines = head.split(b"\r\n")
        self.status_line = lines[0].decode("latin-1") if lines else ""
        parts = self.status_line.split(" ", 2)
        self.status = int(parts[1]) if len(parts) > 1 and parts[1].isdigit() else None
        self.headers = {}
        for ln in lines[1:]:
            k, _, v = ln.decode("latin-1").partition(":")
            self.headers[k.strip().lower()] = v.strip()
        if self.headers.get("transfer-encoding", "").lower() == "chunked":
            body = _dechunk(body)
        self.body = body

    @property
    def status_code(self):
        return self.status

    @property
    def text(self):
        return self.body.decode("utf-8", "replace")

    def json(self):
        return json.loads(self.body)

    @property
    def code(self):
        try:
            return self.json()["error"]["code"]
        except Exception:
            return None

    def __repr__(self):
        return "RawResponse(%r)" % (self.raw[:400],)


def _dechunk(body):
    out = b""
    while body:
        size_line, _, rest = body.partition(b"\r\n")
        try:
            n = int(size_line.split(b";")[0], 16)
        except ValueError:
            return out + body
        if n == 0:
            break
        out += rest[:n]
        body = rest[n + 2:]
    return out


class AbxServer:
    """One running `abx serve`."""

    def __init__(self, tmp, config=None, args=(), workspace=None, env=None, config_name=None,
                 home=None, use_workspace_flag=True):
        self.tmp = tmp
        self.home = str(home) if home else os.path.join(tmp, "home")
        os.makedirs(self.home, exist_ok=True)
        self.workspace = workspace
        self.config_path = None
        if config is not None:
            if not isinstance(config, str):
                config = json.dumps(config)
                config_name = config_name or "abx.json"
            self.config_path = os.path.join(tmp, config_name or "abx.yaml")
            with open(self.config_path, "w") as f:
                f.write(config)
        self.args = list(args)
        self.env = env or {}
        self.use_workspace_flag = use_workspace_flag
        self.proc = None
        self.port = None
        self.returncode = None
        self._n = 0

    # -- lifecycle -------------------------------------------------------------------
    def command(self):
        cmd = [ABX_BIN, "serve", "--listen", "127.0.0.1:%d" % self.port]
        if self.config_path:
            cmd += ["--config", self.config_path]
        if self.workspace and self.use_workspace_flag:
            cmd += ["--workspace", self.workspace]
        return cmd + self.args

    def start(self):
        last = ""
        for _attempt in range(3):
            self.port = free_port()
            abxschema.forget(self.port)
            self._n += 1
            self.stdout_path = os.path.join(self.tmp, "stdout.%d.txt" % self._n)
            self.stderr_path = os.path.join(self.tmp, "stderr.%d.txt" % self._n)
            env = dict(os.environ)
            env.pop("ABX_URL", None)
            env.pop("ABX_TOKEN", None)
            env["ABX_HOME"] = self.home
            env.update(self.env)
            with open(self.stdout_path, "wb") as so, open(self.stderr_path, "wb") as se:
                self.proc = subprocess.Popen(self.command(), stdout=so, stderr=se, env=env,
                                             cwd=self.workspace or self.tmp, start_new_session=True)
            deadline = time.time() + START_TIMEOUT
            while time.time() < deadline:
                if self.proc.poll() is not None:
                    break
                try:
                    r = requests.get(self.url + "/health", timeout=1)
                    if r.status_code == 200:
                        return self
                except requests.RequestException:
                    pass
                time.sleep(0.02)
            if self.proc.poll() is None:
                self.kill()
                raise RuntimeError("abx did not become ready in %.0fs: %s" % (START_TIMEOUT, self.stderr()))
            last = self.stderr()
            if "in use" not in last.lower() and "bind" not in last.lower():
                break
        raise RuntimeError("abx serve exited with %s: %s" % (self.proc.returncode, last))

    def stop(self):
        if self.proc and self.proc.poll() is None:
            self.proc.send_signal(signal.SIGTERM)
            try:
                self.proc.wait(timeout=10)
            except subprocess.TimeoutExpired:
                self.kill()
        if self.proc:
            self.returncode = self.proc.returncode
        return self.returncode

    def kill(self):
        if self.proc and self.proc.poll() is None:
            try:
                os.killpg(self.proc.pid, signal.SIGKILL)
            except ProcessLookupError:
                pass
            self.proc.wait(timeout=10)

    # -- output ---------------------------------------------------------------------
    def stdout(self):
        with open(self.stdout_path, "rb") as f:
            return f.read().decode("utf-8", "replace")

    def stderr(self):
        with open(self.stderr_path, "rb") as f:
            return f.read().decode("utf-8", "replace")

    def log_lines(self):
        out = []
        for ln in self.stderr().splitlines():
            ln = ln.strip()
            if ln.startswith("{"):
                try:
                    out.append(json.loads(ln))
                except ValueError:
                    pass
        return out

    @property
    def url(self):
        return "http://127.0.0.1:%d" % self.port

    @property
    def token(self):
        """The embedded default's token ($ABX_HOME/token)."""
        with open(os.path.join(self.home, "token")) as f:
            return f.read().strip()

    # -- HTTP helpers -----------------------------------------------------------------
    def _headers(self, token, headers):
        h = {}
        if token is not None:
            h["Authorization"] = "Bearer " + token
        if headers:
            h.update(headers)
        return h

    def request(self, method, path, token=None, headers=None, **kw):
        kw.setdefault("timeout", 10)
        return requests.request(method, self.url + path, headers=self._headers(token, headers), **kw)

    def get(self, path, token=None, params=None, headers=None, **kw):
        return self.request("GET", path, token=token, headers=headers, params=params, **kw)

    def post(self, path, token=None, json_body=None, headers=None, **kw):
        if json_body is not None:
            kw["json"] = json_body
        return self.request("POST", path, token=token, headers=headers, **kw)

    def op(self, op_id, body=None, token=None, headers=None):
        """RPC: POST /ops/{id} with a JSON body."""
        return self.post("/ops/" + op_id, token=token, json_body={} if body is None else body,
                         headers=headers)

    def raw(self, data, timeout=5, read_all=True):
        """Send raw bytes on a fresh connection, return a RawResponse of what came back."""
        c = socket.create_connection(("127.0.0.1", self.port), timeout=timeout)
        try:
            c.sendall(data)
            out = b""
            deadline = time.time() + timeout
            while time.time() < deadline:
                try:
                    d = c.recv(65536)
                except socket.timeout:
                    break
                if not d:
                    break
                out += d
                if not read_all and _complete(out):
                    break
            return RawResponse(out)
        finally:
            c.close()

    def raw_request(self, method, target, headers=None, body=b"", host=None, token=None):
        if isinstance(target, str):
            target = target.encode("latin-1")
        lines = [method.encode() + b" " + target + b" HTTP/1.1",
                 b"Host: " + (host if host is not None else "127.0.0.1:%d" % self.port).encode()]
        if token is not None:
            lines.append(b"Authorization: Bearer " + token.encode())
        for h in headers or []:
            lines.append(h if isinstance(h, bytes) else h.encode("latin-1"))
        lines.append(b"Connection: close")
        return self.raw(b"\r\n".join(lines) + b"\r\n\r\n" + body)


def _complete(data):
    head, sep, body = data.partition(b"\r\n\r\n")
    if not sep:
        return False
    for ln in head.split(b"\r\n")[1:]:
        k, _, v = ln.partition(b":")
        if k.strip().lower() == b"content-length":
            return len(body) >= int(v.strip())
    return False


def error_code(resp):
    try:
        return resp.json()["error"]["code"]
    except Exception:
        return None


def assert_error(resp, status, code):
    """Assert an abx error reply: status, {"error": {"code", "message"}} and the headers."""
    body = resp.text
    assert resp.status_code == status, "expected %s %s, got %s: %s" % (status, code, resp.status_code, body[:500])
    try:
        j = resp.json()
    except ValueError:
        raise AssertionError("error body is not JSON: %r" % body[:500])
    assert isinstance(j, dict) and isinstance(j.get("error"), dict), body
    assert j["error"].get("code") == code, "expected %s, got %s" % (code, body[:500])
    assert isinstance(j["error"].get("message"), str) and j["error"]["message"], body
    return j


# -- fixtures ---------------------------------------------------------------------------

@pytest.fixture
def workspace(tmp_path):
    """A workspace directory with a few files; canonical (realpath) string."""
    ws = tmp_path / "ws"
    ws.mkdir()
    (ws / "a.txt").write_text("hello\n")
    (ws / "b.txt").write_text("line1\nline2\nline3\nline4\nline5\n")
    (ws / "sub").mkdir()
    (ws / "sub" / "c.txt").write_text("deep\n")
    (ws / ".hidden").write_text("secret-ish\n")
    return os.path.realpath(str(ws))


@pytest.fixture
def abx(tmp_path, workspace, request):
    """Factory: abx(config=None|str|dict, args=(), workspace=..., env=..., start=True) -> AbxServer.

    config=None runs the embedded default on `workspace`. Config text may use the
    placeholders {ws} and {tmp}, substituted with str.replace.
    """
    servers = []
    counter = [0]

    def make(config=None, args=(), workspace=workspace, env=None, start=True, config_name=None,
             home=None, use_workspace_flag=None):
        counter[0] += 1
        d = os.path.join(str(tmp_path), "srv%d" % counter[0])
        os.makedirs(d, exist_ok=True)
        if isinstance(config, str):
            config = config.replace("{ws}", workspace or "").replace("{tmp}", d)
        if use_workspace_flag is None:
            use_workspace_flag = config is None
        s = AbxServer(d, config=config, args=args, workspace=workspace, env=env,
                      config_name=config_name, home=home, use_workspace_flag=use_workspace_flag)
        servers.append(s)
        if start:
            s.start()
        return s

    yield make
    problems = []
    for s in servers:
        if s.proc is None:
            continue
        try:
            s.stop()
        finally:
            s.kill()
        rep = sanitizer_report(s.stderr()) if os.path.exists(getattr(s, "stderr_path", "")) else None
        if rep:
            problems.append("%s in server stderr:\n%s" % (rep, s.stderr()[-4000:]))
    if problems:
        pytest.fail("\n\n".join(problems))


@pytest.fixture
def server(abx):
    """The embedded default (principal `local`, preset workspace) on the workspace fixture."""
    return abx()


@pytest.fixture
def token(server):
    return server.token


# A config with three principals used by many tests:
#   alice (role agent): files.* confined to the workspace, core.*
#   bob   (role viewer): core.* only
#   carol (role agent) : like alice (another agent)
MULTI_CONFIG = """
workspace: {ws}
auth:
  tokens:
    - principal: alice
      roles: [agent]
      token_sha256: "%s"
    - principal: bob
      roles: [viewer]
      token_sha256: "%s"
    - principal: carol
      roles: [agent]
      token_sha256: "%s"
policy:
  allow:
    - ops: ["files.*"]
      principals: ["role:agent"]
      paths: ["{ws}/**"]
    - ops: ["core.*"]
      principals: ["*"]
""" % (sha256_hex(ALICE_TOKEN), sha256_hex(BOB_TOKEN), sha256_hex(CAROL_TOKEN))


def multi_config(extra_allow="", deny="", top=""):
    """MULTI_CONFIG plus extra allow statements (YAML list items, 4-space indented) and deny."""
    text = MULTI_CONFIG + extra_allow
    if deny:
        text += "  deny:\n" + deny
    return top + text


@pytest.fixture
def multi(abx):
    return abx(multi_config())


# -- helpers shared by the test files (processes and polling) ---------------------------------

def uniq_sleep():
    """A sleep duration no other process on the machine will carry in its argv."""
    return "%d.%03d" % (random.randint(300, 999), random.randint(0, 999))


def pgrep(pattern):
    r = subprocess.run(["pgrep", "-f", pattern], capture_output=True, text=True, timeout=10)
    return [int(x) for x in r.stdout.split()]


def wait_for(pred, timeout=8.0, step=0.1):
    """Poll pred until it returns something true or timeout passes; its last value."""
    deadline = time.time() + timeout
    while True:
        v = pred()
        if v or time.time() >= deadline:
            return v
        time.sleep(step)


def proc_alive(pid):
    """The process exists and is not a zombie."""
    try:
        with open("/proc/%d/stat" % pid) as f:
            return f.read().rsplit(")", 1)[1].split()[0] != "Z"
    except OSError:
        return False


def rss_kib(pid):
    """Resident memory of a process in KiB (0 when /proc does not say)."""
    with open("/proc/%d/status" % pid) as f:
        for ln in f:
            if ln.startswith("VmRSS:"):
                return int(ln.split()[1])
    return 0


# -- server-sent events ------------------------------------------------------------------------

def parse_sse(text):
    """SSE text -> [{"event", "id", "data"}] (events without data are dropped)."""
    events = []
    for block in text.replace("\r\n", "\n").split("\n\n"):
        ev = {"event": "message", "id": None}
        data = []
        for line in block.split("\n"):
            if not line or line.startswith(":"):
                continue
            k, _, v = line.partition(":")
            v = v[1:] if v.startswith(" ") else v
            if k == "event":
                ev["event"] = v
            elif k == "id":
                ev["id"] = v
            elif k == "data":
                data.append(v)
        if data:
            ev["data"] = "\n".join(data)
            events.append(ev)
    return events


def read_sse(resp, until_event="exit", timeout=15.0):
    """Read a streamed SSE response until an event named until_event is complete (or the
    timeout), close it, and parse what arrived."""
    deadline = time.time() + timeout
    buf = ""
    for chunk in resp.iter_content(chunk_size=None, decode_unicode=False):
        buf += chunk.decode("utf-8", "replace")
        if ("event: %s\n" % until_event) in buf and buf.endswith("\n\n"):
            break
        if time.time() > deadline:
            break
    resp.close()
    events = parse_sse(buf)
    if getattr(resp, "_abx_request", None) is not None and resp.status_code == 200:
        abxschema.check_events(resp._abx_request, resp.url, events)  # the declared events
    return events
