"""Python op workers (`load: ["python:pkg.mod"]`, python/abx_ops.py) from outside: the
examples/python_ops grader called over HTTP under policy; schemas derived from annotations
(the closed list) and unsupported annotations refused naming the parameter; handlers get the
canonical admitted values (ctx.paths, ctx.argv); the worker is confined to the union of the
roots of the statements mounting its ops (recomputed on reload, which restarts it); a crash
during a call answers 502 op.worker_failed and the worker is back at once, with backoff only
on repeated crashes; OpError codes; lints; the ledger records the calls."""
import json
import os
import shutil
import signal
import sqlite3
import time

import pytest

from abxtest import ALICE_TOKEN, BOB_TOKEN, assert_error, run_abx, sha256_hex

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__)))))

MODULE = '''
import os
from dataclasses import dataclass
from typing import Literal, Optional, TypedDict
from abx_ops import op, OpError, Bytes


class Point(TypedDict):
    x: int
    y: float


@dataclass
class Opts:
    name: str
    level: int = 1


@op("tpy.types.get", effects="read", summary="Echo typed values")
def types_(ctx, s: str, i: int, f: float, b: bool, raw: bytes, words: list[str], scores: dict[str, float],
           mode: Literal["fast", "slow"], maybe: Optional[int] = None, pt: Optional[Point] = None,
           opts: Optional[Opts] = None, untyped="dflt"):
    assert isinstance(raw, bytes) and (opts is None or isinstance(opts, Opts))
    return {"s": s, "i": i, "f": f, "b": b, "raw": raw, "words": words, "scores": scores, "mode": mode,
            "maybe": maybe, "pt": pt, "opts": opts, "untyped": untyped}


@op("tpy.paths.get", effects="read", paths={"target": ["%(ws)s/sub/**", "%(other)s/**"]}, http="POST /tpy/paths")
def paths_(ctx, target: str, many: Optional[list[str]] = None):
    return {"paths": ctx.paths, "argv": ctx.argv, "principal": ctx.principal, "raw": target}


@op("tpy.files.read", effects="read", paths=("target",))
def read_(ctx, target: str, other: str = ""):
    """Read the admitted file, and try a raw path (not declared: the worker's confinement decides)."""
    out = {"admitted": open(ctx.paths["target"]).read()}
    if other:
        try:
            out["other"] = open(other).read()
        except OSError as e:
            out["other_error"] = "%%s: %%s" %% (type(e).__name__, e.strerror)
    return out


@op("tpy.exec.run", effects="exec", command="argv")
def exec_(ctx, argv: list[str]):
    return {"argv": ctx.argv}


@op("tpy.crash.run", effects="read")
def crash(ctx, code: int = 3):
    ctx.log("warn", "about to crash")
    os._exit(code)


@op("tpy.fail.run", effects="read")
def fail(ctx, how: str):
    if how == "op":
        raise OpError("files.not_found", "nothing at %%s" %% how, where="here")
    raise RuntimeError("secret-internal-detail")


class Slept(TypedDict):
    slept: float
    note: Optional[str]


@op("tpy.sleep.run", effects="read")
def sleep_(ctx, seconds: float) -> Slept:
    import time
    time.sleep(seconds)
    return {"slept": seconds, "note": None}


@op("tpy.temp.run", effects="read")
def temp(ctx):
    import tempfile
    with tempfile.NamedTemporaryFile("w+") as f:
        f.write("scratch")
        f.flush()
        f.seek(0)
        return {"dir": os.path.dirname(f.name), "data": f.read()}


@op("tpy.blob.get", effects="read")
def blob(ctx) -> bytes:
    return Bytes(b"\\x00\\x01abc", "application/x-test")


@op("tpy.lint.run")
def lint(ctx, file: str):
    return file
'''


def cfg(ws, other, load=("python:tpy.ops",), allow=None):
    tokens = [{"principal": "alice", "roles": ["agent"], "token_sha256": sha256_hex(ALICE_TOKEN)},
              {"principal": "bob", "roles": ["viewer"], "token_sha256": sha256_hex(BOB_TOKEN)}]
    allow = allow if allow is not None else [
        {"ops": ["core.*"], "principals": ["*"]},
        {"ops": ["tpy.*"], "principals": ["alice"], "paths": [ws + "/**", other + "/**"],
         "commands": ["echo *"]},
    ]
    return {"workspace": ws, "terminal_listen": "off", "load": list(load),
            "auth": {"tokens": tokens}, "policy": {"allow": allow}}


def install_module(folder, ws, other, text=MODULE, name="tpy"):
    pkg = os.path.join(folder, name)
    os.makedirs(pkg, exist_ok=True)
    with open(os.path.join(pkg, "__init__.py"), "w") as f:
        f.write("")
    with open(os.path.join(pkg, "ops.py"), "w") as f:
        f.write(text % {"ws": ws, "other": other} if "%(ws)s" in text else text)


@pytest.fixture
def other(tmp_path):
    d = tmp_path / "other"
    d.mkdir()
    (d / "o.txt").write_text("other file\n")
    return os.path.realpath(str(d))


@pytest.fixture
def py(abx, workspace, other):
    s = abx(cfg(workspace, other), start=False)
    install_module(os.path.dirname(s.config_path), workspace, other)
    return s.start()


def OUTSIDE(err):
    """A path outside the worker's roots: refused by Landlock, or (without the network,
    inside its view of only its roots: docs/security.md) not there at all."""
    return "PermissionError" in err or "FileNotFoundError" in err


def ok(r):
    assert r.status_code == 200, "%s %s" % (r.status_code, r.text[:800])
    return r.json()


def call(s, op, body, token=ALICE_TOKEN):
    return s.post("/ops/" + op, token=token, json_body=body)


# -- the example --------------------------------------------------------------------------------

def test_example_grader(abx, workspace, tmp_path):
    hw = os.path.join(workspace, "hw1")
    os.makedirs(hw)
    with open(os.path.join(hw, "cases.json"), "w") as f:
        json.dump([{"call": "add(1, 2)", "expect": "3"}, {"call": "add(2, 2)", "expect": "5"}], f)
    text = open(os.path.join(ROOT, "examples", "python_ops", "abx.yaml")).read()
    text = text.replace("/tmp/abx-grader", workspace).replace("127.0.0.1:8091", "127.0.0.1:0")
    s = abx(text, start=False)
    shutil.copytree(os.path.join(ROOT, "examples", "python_ops", "grader"),
                    os.path.join(os.path.dirname(s.config_path), "grader"))
    s.start()
    tok = "grader-token-0123456789abcdef"
    sub = "def add(a, b):\n    return a + b\n"
    j = ok(s.post("/ops/grader.run", token=tok, json_body={"submission": sub, "workdir": "hw1/../hw1"}))
    assert j["passed"] == 1 and j["failed"] == 1 and j["workdir"] == hw
    assert [r["got"] for r in j["results"]] == ["3", "4"]
    j = ok(s.post("/ops/grader.run", token=tok, json_body={"submission": sub, "workdir": hw, "mode": "first_failure",
                                                           "extra": [{"call": "add(0, 0)", "expect": "0"}]}))
    assert j["passed"] == 2 and [r["call"] for r in j["results"]] == ["add(2, 2)"]
    # schema from annotations: Literal and TypedDict are checked by abx before the worker sees them
    assert_error(s.post("/ops/grader.run", token=tok, json_body={"submission": sub, "workdir": hw, "mode": "x"}),
                 400, "args.invalid")
    assert_error(s.post("/ops/grader.run", token=tok,
                        json_body={"submission": sub, "workdir": hw, "extra": [{"call": "f()"}]}), 400, "args.missing")
    # a work folder outside the statement's scope never reaches the handler
    assert_error(s.post("/ops/grader.run", token=tok, json_body={"submission": sub, "workdir": "/etc"}), 403,
                 "policy.path_not_allowed")
    assert_error(s.post("/ops/grader.run", token=tok, json_body={"submission": sub, "workdir": "nope"}), 404,
                 "files.not_found")
    assert "grading 2 cases" in s.stderr()


# -- schemas ----------------------------------------------------------------------------------------

def test_schema_from_annotations_and_typed_calls(py):
    d = ok(py.get("/ops/tpy.types.get", token=ALICE_TOKEN))
    params = {p["name"]: p for p in d["params"]}
    assert params["s"]["type"] == "string" and params["i"]["type"] == "integer"
    assert params["f"]["type"] == "number" and params["b"]["type"] == "boolean"
    assert params["raw"]["type"] == "bytes"
    assert params["words"]["type"] == "list" and params["words"]["items"] == "string"
    assert params["scores"]["type"] == "map"
    assert params["mode"]["choices"] == ["fast", "slow"]
    assert params["maybe"]["nullable"] and not params["maybe"]["required"]
    assert [f["name"] for f in params["pt"]["fields"]] == ["x", "y"]
    assert [(f["name"], f["required"]) for f in params["opts"]["fields"]] == [("name", True), ("level", False)]
    assert params["untyped"]["type"] == "string" and params["untyped"]["default"] == "dflt"
    assert d["summary"] == "Echo typed values" and d["effects"] == ["read"]
    body = {"s": "x", "i": 3, "f": 1.5, "b": True, "raw": "AAE=", "words": ["a"], "scores": {"k": 0.5},
            "mode": "fast", "pt": {"x": 1, "y": 2.5}, "opts": {"name": "n"}}
    j = ok(call(py, "tpy.types.get", body))
    assert j["i"] == 3 and j["pt"] == {"x": 1, "y": 2.5} and j["maybe"] is None and j["untyped"] == "dflt"
    assert j["opts"] == {"name": "n", "level": 1}
    for bad in ({"i": "3"}, {"mode": "medium"}, {"words": [1]}, {"pt": {"x": 1}}, {"zzz": 1}):
        r = call(py, "tpy.types.get", dict(body, **bad))
        assert r.status_code == 400, (bad, r.text)


def test_return_annotation_is_the_result_schema(py):
    """A TypedDict return annotation is the op's result: the catalog lists it, and the
    black-box hook (abxschema) checks the call's answer against it."""
    d = ok(py.get("/ops/tpy.sleep.run", token=ALICE_TOKEN))
    assert [(f["name"], f["type"], f["required"]) for f in d["result"]["fields"]] == [
        ("slept", "number", True), ("note", "string", True)]
    assert d["result"]["schema"]["properties"]["note"]["type"] == ["string", "null"]
    assert ok(call(py, "tpy.sleep.run", {"seconds": 0})) == {"slept": 0, "note": None}
    # without a TypedDict/dataclass return annotation the result stays undeclared
    assert "schema" not in ok(py.get("/ops/tpy.types.get", token=ALICE_TOKEN))["result"]


UNSUPPORTED = [
    ("def f(x: set[int]): pass", "parameter 'x'"),
    ("def f(x: int | str): pass", "parameter 'x'"),
    ("def f(x: list[list[int]]): pass", "parameter 'x'"),
    ("def f(x: dict[int, str]): pass", "parameter 'x'"),
    ("def f(x: Literal[1, 2]): pass", "parameter 'x'"),
    ("def f(*rest): pass", "parameter 'rest'"),
    ("def f(y: 'NoSuchType'): pass", "cannot read the annotations"),
]


@pytest.mark.parametrize("src,text", UNSUPPORTED)
def test_unsupported_annotations_are_errors_naming_the_parameter(tmp_path, src, text):
    mod = "from typing import Literal\nfrom abx_ops import op\n@op('bad.thing.get', effects='read')\n" + src + "\n"
    install_module(str(tmp_path), "", "", text=mod, name="badmod")
    (tmp_path / "abx.yaml").write_text("listen: 127.0.0.1:0\nload:\n  - python:badmod.ops\n")
    r = run_abx(["check-config", str(tmp_path / "abx.yaml")], timeout=60)
    assert r.returncode == 1, r.stdout
    assert "abx.yaml:3: error: config.python:" in r.stdout and text in r.stdout, r.stdout


@pytest.mark.parametrize("entry,text", [
    ("python:nosuchmod_abx", "ModuleNotFoundError"),
    ("python:../evil", "must name a module"),
    ("python:raising", "ZeroDivisionError"),
    ("python:emptymod", "declares no operations"),
    ("python:reserved", "namespace is reserved"),
    ("python:streamy", "not supported for Python ops"),
    ("python:aliased", "at most 4 aliases"),
])
def test_load_errors_with_lines(tmp_path, entry, text):
    (tmp_path / "raising.py").write_text("1 / 0\n")
    (tmp_path / "emptymod.py").write_text("x = 1\n")
    (tmp_path / "reserved.py").write_text("from abx_ops import op\n@op('files.mine.get', effects='read')\n"
                                          "def f(): pass\n")
    (tmp_path / "streamy.py").write_text("from abx_ops import op\n@op('s.thing.get', effects='read', stream='sse')\n"
                                         "def f(): pass\n")
    (tmp_path / "aliased.py").write_text("from abx_ops import op\n@op('s.thing.get', effects='read', "
                                         "aliases=('a1', 'a2', 'a3', 'a4', 'a5'))\ndef f(): pass\n")
    (tmp_path / "abx.yaml").write_text("listen: 127.0.0.1:0\nload:\n  - %s\n" % entry)
    r = run_abx(["check-config", str(tmp_path / "abx.yaml")], timeout=60)
    assert "abx.yaml:3:" in r.stdout and text in r.stdout, r.stdout
    if entry != "python:emptymod":
        assert r.returncode == 1


def test_bad_interpreter_is_a_config_error(tmp_path):
    (tmp_path / "abx.yaml").write_text("listen: 127.0.0.1:0\npython: /nonexistent/python3\nload: ['python:x']\n")
    r = run_abx(["check-config", str(tmp_path / "abx.yaml")])
    assert r.returncode == 1 and "config.python" in r.stdout and "/nonexistent/python3" in r.stdout, r.stdout
    (tmp_path / "abx.yaml").write_text("listen: 127.0.0.1:0\npython: python3\n")
    r = run_abx(["check-config", str(tmp_path / "abx.yaml")])
    assert r.returncode == 1 and "'python' must be an absolute path" in r.stdout, r.stdout


def test_lints_for_python_ops(tmp_path, workspace, other):
    install_module(str(tmp_path), workspace, other)
    (tmp_path / "abx.yaml").write_text("listen: 127.0.0.1:0\nload:\n  - python:tpy.ops\n")
    r = run_abx(["check-config", str(tmp_path / "abx.yaml")], timeout=60)
    assert "abx.yaml:3: warning: core.effects_undeclared: op 'tpy.lint.run' declares no effects" in r.stdout, r.stdout
    assert ("abx.yaml:3: warning: core.path_like_param: op 'tpy.lint.run': parameter file looks like a path but is "
            "not declared in paths=; path scopes will not protect it") in r.stdout


# -- canonical values, policy, confinement ------------------------------------------------------------

def test_handler_gets_canonical_admitted_values(py, workspace, other):
    j = ok(py.post("/tpy/paths", token=ALICE_TOKEN, json_body={"target": "sub/./../sub/c.txt"}))
    assert j["paths"] == {"target": workspace + "/sub/c.txt"} and j["raw"] == "sub/./../sub/c.txt"
    assert j["principal"] == "alice"
    # intrinsic jail (the op's own roots) ∩ the statement's scope
    assert ok(call(py, "tpy.paths.get", {"target": other + "/o.txt"}))["paths"]["target"] == other + "/o.txt"
    r = call(py, "tpy.paths.get", {"target": workspace + "/a.txt"})
    assert_error(r, 403, "policy.path_not_allowed")
    assert "own jail" in r.json()["error"]["message"]
    # ctx.argv: the canonical argv the command scope admitted (program resolved)
    j = ok(call(py, "tpy.exec.run", {"argv": ["echo", "hi there"]}))
    assert j["argv"][1:] == ["hi there"] and j["argv"][0].endswith("/echo") and j["argv"][0].startswith("/")
    assert_error(call(py, "tpy.exec.run", {"argv": ["rm", "-rf", "/"]}), 403, "policy.command_not_allowed")
    # unmounted for bob
    assert_error(call(py, "tpy.paths.get", {"target": other + "/o.txt"}, token=BOB_TOKEN), 404, "op.not_enabled")


def test_worker_confined_to_the_union_of_mounting_roots(py, workspace, other, tmp_path):
    secret = tmp_path / "secret.txt"
    secret.write_text("top secret\n")
    j = ok(call(py, "tpy.files.read", {"target": "a.txt", "other": str(secret)}))
    assert j["admitted"] == "hello\n"
    assert "other" not in j and OUTSIDE(j["other_error"]), j
    # a root granted by the (union of) statements is readable, even by a raw path
    j = ok(call(py, "tpy.files.read", {"target": "a.txt", "other": other + "/o.txt"}))
    assert j["other"] == "other file\n"


def test_reload_recomputes_roots_and_restarts_the_worker(py, workspace, other, tmp_path):
    third = tmp_path / "third"
    third.mkdir()
    (third / "t.txt").write_text("third\n")
    j = ok(call(py, "tpy.files.read", {"target": "a.txt", "other": str(third / "t.txt")}))
    assert OUTSIDE(j["other_error"])
    c = cfg(workspace, other)
    c["policy"]["allow"][1]["paths"].append(str(third) + "/**")
    with open(py.config_path, "w") as f:
        json.dump(c, f)
    n = py.stderr().count("worker started")
    py.proc.send_signal(signal.SIGHUP)
    deadline = time.time() + 15
    while py.stderr().count("worker started") == n and time.time() < deadline:
        time.sleep(0.05)
    assert py.stderr().count("worker started") == n + 1, py.stderr()[-2000:]
    j = ok(call(py, "tpy.files.read", {"target": "a.txt", "other": str(third / "t.txt")}))
    assert j["other"] == "third\n", j


# -- failures ------------------------------------------------------------------------------------------

def test_crash_during_a_call_is_502_and_the_worker_is_back_at_once(py):
    assert_error(call(py, "tpy.crash.run", {}), 502, "op.worker_failed")
    j = ok(call(py, "tpy.paths.get", {"target": "sub/c.txt"}))
    assert j["paths"]["target"].endswith("/sub/c.txt")
    assert "about to crash" in py.stderr()


def test_repeated_crashes_back_off(py):
    for _ in range(3):
        assert_error(call(py, "tpy.crash.run", {}), 502, "op.worker_failed")
    r = call(py, "tpy.paths.get", {"target": "sub/c.txt"})
    assert_error(r, 502, "op.worker_failed")
    assert "keeps crashing" in r.json()["error"]["message"]
    time.sleep(1.2)
    ok(call(py, "tpy.paths.get", {"target": "sub/c.txt"}))


def test_op_errors_and_exceptions(py):
    r = call(py, "tpy.fail.run", {"how": "op"})
    assert_error(r, 404, "files.not_found")
    assert r.json()["error"]["message"] == "nothing at op" and r.json()["error"]["details"] == {"where": "here"}
    r = call(py, "tpy.fail.run", {"how": "boom"})
    assert_error(r, 500, "server.internal")
    assert "secret-internal-detail" not in r.text
    assert "secret-internal-detail" in py.stderr()  # logged with the request id
    j = ok(call(py, "tpy.temp.run", {}))  # a private TMPDIR: tempfile works inside the confinement
    assert j["data"] == "scratch" and "/tmp-" in j["dir"], j
    j = ok(call(py, "tpy.blob.get", {}))
    assert j == {"content_type": "application/x-test", "content_base64": "AAFhYmM="}


def test_ledger_records_python_calls(abx, workspace, other, tmp_path):
    led = str(tmp_path / "ledger.db")
    c = cfg(workspace, other)
    c["ledger"] = {"path": led}
    s = abx(c, start=False)
    install_module(os.path.dirname(s.config_path), workspace, other)
    s.start()
    r = s.post("/tpy/paths", token=ALICE_TOKEN, json_body={"target": "sub/c.txt"})
    ok(r)
    rid = r.headers["X-Request-Id"]
    r2 = call(s, "tpy.crash.run", {})
    assert_error(r2, 502, "op.worker_failed")
    deadline = time.time() + 3
    while True:
        con = sqlite3.connect(led, timeout=10)
        rows = con.execute("SELECT g.request_id, g.op, g.door, e.kind, e.data FROM action_groups g JOIN "
                           "action_events e ON e.group_id = g.group_id WHERE g.request_id IN (?, ?)",
                           (rid, r2.headers["X-Request-Id"])).fetchall()
        con.close()
        if sum(1 for x in rows if x[3] == "finished") == 2 or time.time() > deadline:
            break
        time.sleep(0.05)
    fin = {x[0]: json.loads(x[4]) for x in rows if x[3] == "finished"}
    assert fin[rid]["status"] == 200 and [x[1] for x in rows if x[0] == rid][0] == "tpy.paths.get"
    assert fin[r2.headers["X-Request-Id"]]["status"] == 502


# -- python_isolation: per_call ---------------------------------------------------------------------

def test_per_call_isolation_confines_each_call_to_its_statement(abx, workspace, other, tmp_path):
    allow = [{"ops": ["core.*"], "principals": ["*"]},
             {"ops": ["tpy.files.read", "tpy.crash.run", "tpy.paths.get"], "principals": ["alice"],
              "paths": [workspace + "/**"]},
             {"ops": ["tpy.files.read"], "principals": ["bob"], "paths": [other + "/**"]}]
    c = cfg(workspace, other, allow=allow)
    c["python_isolation"] = "per_call"
    s = abx(c, start=False)
    install_module(os.path.dirname(s.config_path), workspace, other)
    s.start()
    # alice's call sees only alice's statement's roots: other/ is bob's, not hers
    j = ok(call(s, "tpy.files.read", {"target": "a.txt", "other": other + "/o.txt"}))
    assert j["admitted"] == "hello\n" and OUTSIDE(j["other_error"]), j
    j = ok(call(s, "tpy.files.read", {"target": other + "/o.txt", "other": workspace + "/a.txt"}, token=BOB_TOKEN))
    assert j["admitted"] == "other file\n" and OUTSIDE(j["other_error"]), j
    # a crash affects only that call
    assert_error(call(s, "tpy.crash.run", {}), 502, "op.worker_failed")
    assert ok(call(s, "tpy.paths.get", {"target": "sub/c.txt"}))["paths"]["target"] == workspace + "/sub/c.txt"
    # in shared mode the union would have let alice read other/ (see the test above)


def test_python_isolation_value_is_checked(tmp_path):
    (tmp_path / "abx.yaml").write_text("listen: 127.0.0.1:0\npython_isolation: sometimes\n")
    r = run_abx(["check-config", str(tmp_path / "abx.yaml")])
    assert r.returncode == 1 and "abx.yaml:2: error: config.bad_value: 'python_isolation' must be" in r.stdout, r.stdout


def test_call_past_its_deadline_restarts_the_worker(abx, workspace, other):
    c = cfg(workspace, other)
    c["policy"]["allow"][1]["limits"] = {"timeout": "1s"}
    s = abx(c, start=False)
    install_module(os.path.dirname(s.config_path), workspace, other)
    s.start()
    t0 = time.time()
    r = call(s, "tpy.sleep.run", {"seconds": 30})
    assert_error(r, 502, "op.worker_failed")
    assert "deadline" in r.json()["error"]["message"] and time.time() - t0 < 10
    assert ok(call(s, "tpy.sleep.run", {"seconds": 0.01})) == {"slept": 0.01, "note": None}


def test_worker_that_cannot_restart_on_reload(py, workspace, other):
    folder = os.path.dirname(py.config_path)
    with open(os.path.join(folder, "tpy", "ops.py"), "a") as f:
        f.write("\nraise SystemExit('broken on purpose')\n")
    py.proc.send_signal(signal.SIGHUP)
    deadline = time.time() + 15
    while "config.worker_restart" not in py.stderr() and time.time() < deadline:
        time.sleep(0.05)
    assert "config.worker_restart" in py.stderr(), py.stderr()[-2000:]
    r = call(py, "tpy.paths.get", {"target": "sub/c.txt"})
    assert_error(r, 502, "op.worker_failed")
    assert "cannot be started" in r.json()["error"]["message"]


def test_the_import_at_load_is_confined(tmp_path):
    secret = tmp_path / "secret" / "s.txt"
    secret.parent.mkdir()
    secret.write_text("top secret\n")
    cfgdir = tmp_path / "cfg"
    cfgdir.mkdir()
    (cfgdir / "peeker.py").write_text(
        "from abx_ops import op\n"
        "try:\n    open(%r).read()\n    raise SystemExit('the import could read ' + %r)\n"
        "except (PermissionError, FileNotFoundError):\n    pass\n"
        "try:\n    open(%r, 'w').write('x')\n    raise SystemExit('the import could write its folder')\n"
        "except (PermissionError, OSError):\n    pass\n"
        "@op('peek.thing.get', effects='read')\ndef f(): pass\n"
        % (str(secret), str(secret), str(cfgdir / "written.txt")))
    (cfgdir / "abx.yaml").write_text("listen: 127.0.0.1:0\nload:\n  - python:peeker\n")
    r = run_abx(["check-config", str(cfgdir / "abx.yaml")], timeout=60)
    assert r.returncode == 0 and "could" not in r.stdout, r.stdout
    assert not (cfgdir / "written.txt").exists()


def test_reload_never_waits_for_a_busy_worker(py, workspace, other, tmp_path):
    import threading
    third = tmp_path / "third"
    third.mkdir()
    (third / "t.txt").write_text("third\n")
    res = {}
    t = threading.Thread(target=lambda: res.setdefault("r", call(py, "tpy.sleep.run", {"seconds": 3})))
    t.start()
    time.sleep(0.5)  # the call is in the worker now
    c = cfg(workspace, other)
    c["policy"]["allow"][1]["paths"].append(str(third) + "/**")
    with open(py.config_path, "w") as f:
        json.dump(c, f)
    t0 = time.time()
    py.proc.send_signal(signal.SIGHUP)
    while "policy reloaded" not in py.stderr() and time.time() - t0 < 10:
        time.sleep(0.05)
    assert "policy reloaded" in py.stderr() and time.time() - t0 < 2.0, "the reload waited for the call"
    t.join(10)
    assert ok(res["r"]) == {"slept": 3, "note": None}
    # the next call runs in a worker restarted with the new roots
    j = ok(call(py, "tpy.files.read", {"target": "a.txt", "other": str(third / "t.txt")}))
    assert j["other"] == "third\n", j
