"""Plugins (`load: ["name"]` → <plugin_dir>/name.so) and the embedding C API, from outside:
examples/plugin is built with the installed header and loaded by a server, called over HTTP
under policy and recorded by the ledger; only modules named in the config are loaded; unsafe
files and folders (world-writable, foreign owner, symlink), missing symbols, failing
registrations and unmet install requirements are config errors with lines.
examples/embed is built with pkg-config against `cmake --install` into a temporary prefix,
then serves its own op over HTTP (and refuses a late registration: RegistryFrozen)."""
import json
import os
import shutil
import signal
import sqlite3
import subprocess
import time

import pytest
import requests

import abxtest
from abxtest import ALICE_TOKEN, assert_error, free_port, run_abx, sanitizer_report, sha256_hex

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__)))))
INCLUDE = os.path.join(ROOT, "include")
CC = shutil.which("cc") or shutil.which("gcc")


def build_dir():
    return os.path.dirname(os.path.abspath(abxtest.ABX_BIN_SOURCE))


def sanitized():
    cache = os.path.join(build_dir(), "CMakeCache.txt")
    return os.path.exists(cache) and "ABX_SANITIZE:BOOL=ON" in open(cache).read()


def compile_plugin(src_text_or_path, out):
    src = src_text_or_path
    if not os.path.exists(src):
        p = out + ".c"
        with open(p, "w") as f:
            f.write(src_text_or_path)
        src = p
    r = subprocess.run([CC, "-shared", "-fPIC", "-Wall", "-Werror", "-I" + INCLUDE, src, "-o", out],
                       capture_output=True, text=True, timeout=120)
    assert r.returncode == 0, r.stderr
    os.chmod(out, 0o755)
    return out


def cfg(ws, load, plugin_dir=None, extra_allow=()):
    c = {"workspace": ws, "terminal_listen": "off", "load": load,
         "auth": {"tokens": [{"principal": "alice", "roles": ["agent"], "token_sha256": sha256_hex(ALICE_TOKEN)}]},
         "policy": {"allow": [{"ops": ["core.*"], "principals": ["*"]},
                              {"ops": ["textstats.*"], "principals": ["alice"], "paths": [ws + "/**"]}]
                    + list(extra_allow)}}
    if plugin_dir is not None:
        c["plugin_dir"] = plugin_dir
    return c


@pytest.fixture
def plugdir(tmp_path):
    d = tmp_path / "plugins"
    d.mkdir()
    os.chmod(str(d), 0o755)
    compile_plugin(os.path.join(ROOT, "examples", "plugin", "my_ops.c"), str(d / "my_ops.so"))
    return str(d)


def ok(r):
    assert r.status_code == 200, "%s %s" % (r.status_code, r.text[:800])
    return r.json()


def test_example_plugin_loaded_called_under_policy_and_recorded(abx, workspace, plugdir, tmp_path):
    led = str(tmp_path / "ledger.db")
    c = cfg(workspace, ["my_ops"], plugin_dir=plugdir)
    c["ledger"] = {"path": led}
    s = abx(c)
    j = ok(s.post("/textstats/words", token=ALICE_TOKEN, json_body={"file": "b.txt"}))
    assert j == {"file": workspace + "/b.txt", "words": 5, "lines": 5, "by": "alice"}
    assert ok(s.op("textstats.words.get", {"file": "a.txt"}, token=ALICE_TOKEN))["words"] == 1
    outside = tmp_path / "o.txt"
    outside.write_text("x\n")
    assert_error(s.post("/textstats/words", token=ALICE_TOKEN, json_body={"file": str(outside)}), 403,
                 "policy.path_not_allowed")
    ops = {o["id"]: o for o in ok(s.get("/ops", token=ALICE_TOKEN))["ops"]}
    assert "textstats.words.get" in ops and ops["textstats.words.get"]["effects"] == ["read"]
    r = s.post("/textstats/words", token=ALICE_TOKEN, json_body={"file": "a.txt"})
    rid = r.headers["X-Request-Id"]
    deadline = time.time() + 3
    while True:
        con = sqlite3.connect(led, timeout=10)
        rows = con.execute("SELECT g.op, g.door, e.kind, e.data FROM action_groups g JOIN action_events e "
                           "ON e.group_id = g.group_id WHERE g.request_id = ?", (rid,)).fetchall()
        con.close()
        if any(k == "finished" for _, _, k, _ in rows) or time.time() > deadline:
            break
        time.sleep(0.05)
    assert rows and rows[0][0] == "textstats.words.get" and rows[0][1] == "http"
    assert [json.loads(d)["status"] for _, _, k, d in rows if k == "finished"] == [200]


def test_default_plugin_dir_is_beside_the_config(abx, workspace, tmp_path):
    # the server's config lands in srvN/; its default plugin_dir is srvN/plugins
    s = abx(cfg(workspace, ["my_ops"]), start=False)
    d = os.path.join(os.path.dirname(s.config_path), "plugins")
    os.makedirs(d)
    compile_plugin(os.path.join(ROOT, "examples", "plugin", "my_ops.c"), os.path.join(d, "my_ops.so"))
    s.start()
    assert ok(s.op("textstats.words.get", {"file": "a.txt"}, token=ALICE_TOKEN))["words"] == 1


def test_only_named_modules_are_loaded(abx, workspace, plugdir):
    # my_ops.so is in the folder, but the config names nothing: nothing registers
    c = cfg(workspace, [], plugin_dir=plugdir)
    c["policy"]["allow"] = c["policy"]["allow"][:1]
    s = abx(c)
    ops = [o["id"] for o in ok(s.get("/ops", token=ALICE_TOKEN))["ops"]]
    assert not any(o.startswith("textstats.") for o in ops)


def check_errors(tmp_path, load, plugin_dir, ws="/tmp"):
    text = "listen: 127.0.0.1:0\nplugin_dir: %s\nload:\n%s" % (plugin_dir, "".join("  - %s\n" % x for x in load))
    p = tmp_path / "abx.yaml"
    p.write_text(text)
    r = run_abx(["check-config", str(p)])
    return r


GOOD_REGISTER = """
#include <abx/abx.h>
static abx_err h(abx_ctx *c, const json_t *a, abx_reply *r) { (void)c; (void)a; abx_reply_json(r, json_object()); return ABX_OK; }
static const abx_op_def ops[] = {{.id = "%s", .effects = ABX_EFF_READ, .summary = "x", .handler = h}, {0}};
%s
int abx_plugin_register(abx_registry *reg, char *err, size_t n) { return abx_registry_add(reg, ops, err, n); }
"""


@pytest.mark.parametrize("case,code,text", [
    ("missing", "config.plugin", "cannot open"),
    ("symlink", "config.plugin", "symbolic link"),
    ("world_writable_file", "config.plugin", "not world-writable"),
    ("world_writable_dir", "config.plugin", "world-writable"),
    ("foreign_owner", "config.plugin", "belongs to root"),
    ("not_elf", "config.plugin", "cannot load"),
    ("no_register", "config.plugin", "exports no abx_plugin_register"),
    ("register_fails", "config.plugin", "failed to register its operations: op 'files.mine.get': namespace is reserved"),
    ("needs_program", "config.plugin_requirement", "needs the program 'abx-no-such-tool'"),
    ("needs_file", "config.plugin_requirement", "needs the file '/nonexistent/abx.conf'"),
    ("needs_newer_abx", "config.plugin_requirement", "needs abx 99.0 or later"),
    ("odd_requirement", "config.plugin_requirement", "does not understand"),
    ("bad_name", "config.plugin", "may hold only letters"),
    ("no_dir", "config.plugin", "plugin folder"),
])
def test_plugin_errors_are_config_errors_with_lines(tmp_path, case, code, text):
    d = tmp_path / "plugins"
    d.mkdir()
    os.chmod(str(d), 0o755)
    name = "p"
    so = str(d / "p.so")
    req = ""
    op_id = "plug.thing.get"
    if case == "symlink":
        compile_plugin(GOOD_REGISTER % (op_id, ""), str(tmp_path / "real.so"))
        os.symlink(str(tmp_path / "real.so"), so)
    elif case == "world_writable_file":
        compile_plugin(GOOD_REGISTER % (op_id, ""), so)
        os.chmod(so, 0o757)
    elif case == "world_writable_dir":
        compile_plugin(GOOD_REGISTER % (op_id, ""), so)
        os.chmod(str(d), 0o777)
    elif case == "foreign_owner":
        compile_plugin(GOOD_REGISTER % (op_id, ""), so)
        if os.geteuid() != 0:
            pytest.skip("needs root to give the file to another user")
        os.chown(so, 65534, 65534)
    elif case == "not_elf":
        with open(so, "w") as f:
            f.write("not a shared object\n")
    elif case == "no_register":
        compile_plugin("int abx_plugin_other(void);\nint abx_plugin_other(void) { return 0; }\n", so)
    elif case == "register_fails":
        compile_plugin(GOOD_REGISTER % ("files.mine.get", ""), so)
    elif case.startswith("needs_") or case == "odd_requirement":
        req = {"needs_program": "program:abx-no-such-tool", "needs_file": "file:/nonexistent/abx.conf",
               "needs_newer_abx": "abx:99.0", "odd_requirement": "pip:numpy"}[case]
        compile_plugin(GOOD_REGISTER % (op_id, 'const char *const abx_plugin_requires[] = {"abx:0.1", "%s", 0};'
                                        % req), so)
    elif case == "bad_name":
        name = "../p"
    elif case == "no_dir":
        shutil.rmtree(str(d))
    r = check_errors(tmp_path, [name], str(d))
    assert r.returncode == 1, r.stdout
    assert "abx.yaml:4: error: %s:" % code in r.stdout and text in r.stdout, r.stdout


def test_plugin_requirements_met_loads(tmp_path, abx, workspace):
    d = tmp_path / "plugins"
    d.mkdir()
    compile_plugin(GOOD_REGISTER % ("plug.thing.get", 'const char *const abx_plugin_requires[] = '
                                    '{"abx:0.1", "program:sh", "file:/etc/hostname", 0};'), str(d / "p.so"))
    c = cfg(workspace, ["p"], plugin_dir=str(d))
    c["policy"]["allow"] = [{"ops": ["plug.*"], "principals": ["alice"]}]
    s = abx(c)
    assert ok(s.op("plug.thing.get", {}, token=ALICE_TOKEN)) == {}


# -- embedding: libabx through pkg-config from an installed prefix ----------------------------

def test_embed_example_built_with_pkg_config_serves_its_op(tmp_path):
    prefix = str(tmp_path / "prefix")
    r = subprocess.run(["cmake", "--install", build_dir(), "--prefix", prefix], capture_output=True, text=True,
                       timeout=300)
    assert r.returncode == 0, r.stdout + r.stderr
    for f in ("lib/libabx.a", "lib/libabx.so", "lib/pkgconfig/abx.pc", "include/abx/abx.h",
              "include/abx/errors.def", "share/abx/python/abx_ops.py"):
        assert os.path.exists(os.path.join(prefix, f)), f
    env = dict(os.environ, PKG_CONFIG_PATH=os.path.join(prefix, "lib", "pkgconfig"))
    flags = subprocess.run(["pkg-config", "--cflags", "--libs", "abx"], capture_output=True, text=True, env=env,
                           timeout=30)
    assert flags.returncode == 0, flags.stderr
    exe = str(tmp_path / "embed")
    r = subprocess.run([CC, "-Wall", "-Wextra", "-Werror", os.path.join(ROOT, "examples", "embed", "embed.c"), "-o",
                        exe] + flags.stdout.split(), capture_output=True, text=True, timeout=300)
    assert r.returncode == 0, r.stderr
    # the static library links too (its own dependencies stay shared libraries)
    cflags = subprocess.run(["pkg-config", "--cflags", "abx"], capture_output=True, text=True, env=env,
                            timeout=30).stdout.split()
    deps = subprocess.run(["pkg-config", "--libs", "jansson", "libmicrohttpd", "yaml-0.1", "sqlite3", "zlib", "libzmq",
                           "openssl", "libprotobuf-c", "libnghttp2"],
                          capture_output=True, text=True, timeout=30).stdout.split()
    r = subprocess.run([CC, os.path.join(ROOT, "examples", "embed", "embed.c"), "-o", exe + "-static"] + cflags +
                       [os.path.join(prefix, "lib", "libabx.a")] + deps + ["-lwslay", "-lpthread", "-ldl"] +
                       [f for f in cflags if f.startswith("-fsanitize")],
                       capture_output=True, text=True, timeout=300)
    assert r.returncode == 0, r.stderr
    data = tmp_path / "data"
    data.mkdir()
    (data / "f.txt").write_text("12345\n")
    port = free_port()
    text = open(os.path.join(ROOT, "examples", "embed", "abx.yaml")).read()
    text = text.replace("127.0.0.1:8090", "127.0.0.1:%d" % port).replace("/tmp/abx-embed-demo", str(data))
    conf = tmp_path / "abx.yaml"
    conf.write_text(text)
    for binary in (exe, exe + "-static"):
        home = tmp_path / ("home-" + os.path.basename(binary))
        home.mkdir()
        runenv = dict(os.environ, LD_LIBRARY_PATH=os.path.join(prefix, "lib"), ABX_HOME=str(home))
        out = tmp_path / (os.path.basename(binary) + ".out")
        err = tmp_path / (os.path.basename(binary) + ".err")
        with open(str(out), "w") as so, open(str(err), "w") as se:
            p = subprocess.Popen([binary, str(conf)], stdout=so, stderr=se, env=runenv, cwd=str(tmp_path))
        try:
            deadline = time.time() + 15
            while "in-process:" not in out.read_text() and time.time() < deadline and p.poll() is None:
                time.sleep(0.05)
            lines = out.read_text()
            assert "listening on port %d" % port in lines, lines + err.read_text()
            assert "late registration refused: RegistryFrozen" in lines
            assert 'in-process: 200 {"greeting":"hello","who":"in-process"}' in lines
            h = {"Authorization": "Bearer " + ALICE_TOKEN}
            r = requests.post("http://127.0.0.1:%d/demo/greet" % port, headers=h,
                              json={"who": "http", "file": str(data / "f.txt")}, timeout=10)
            assert r.status_code == 200, r.text
            assert r.json() == {"greeting": "hello", "who": "http", "file": str(data / "f.txt"), "bytes": 6}
            r = requests.post("http://127.0.0.1:%d/ops/demo.greet.run" % port, headers=h,
                              json={"who": "x", "file": "/etc/hostname"}, timeout=10)
            assert r.status_code == 403 and r.json()["error"]["code"] == "policy.path_not_allowed"
            r = requests.post("http://127.0.0.1:%d/ops/demo.late.run" % port, headers=h, json={}, timeout=10)
            assert r.status_code == 404
        finally:
            p.send_signal(signal.SIGTERM)
            try:
                p.wait(timeout=10)
            except subprocess.TimeoutExpired:
                p.kill()
                p.wait()
        assert p.returncode == 0, err.read_text()
        assert sanitizer_report(err.read_text()) is None, err.read_text()


def test_plugin_ops_get_the_lints(tmp_path):
    d = tmp_path / "plugins"
    d.mkdir()
    src = """
#include <abx/abx.h>
static abx_err h(abx_ctx *c, const json_t *a, abx_reply *r) { (void)c; (void)a; abx_reply_json(r, json_object()); return ABX_OK; }
static const abx_param ps[] = {{"dest", ABX_T_STRING, .required = true}, {0}};
static const abx_op_def ops[] = {{.id = "plug.copy.run", .summary = "x", .params = ps, .handler = h}, {0}};
int abx_plugin_register(abx_registry *reg, char *err, size_t n) { return abx_registry_add(reg, ops, err, n); }
"""
    compile_plugin(src, str(d / "p.so"))
    r = check_errors(tmp_path, ["p"], str(d))
    assert r.returncode == 0, r.stdout
    assert "abx.yaml:4: warning: core.effects_undeclared: op 'plug.copy.run' declares no effects" in r.stdout
    assert ("abx.yaml:4: warning: core.path_like_param: op 'plug.copy.run': parameter dest looks like a path but is "
            "not declared in paths=; path scopes will not protect it") in r.stdout
