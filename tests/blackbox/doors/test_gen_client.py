"""`abx gen-client --lang python|ts|openapi [--out FILE]`: typed client modules written
from the registry offline. The generated Python module imports and calls a live server
through the zero-step client; the generated TypeScript passes `tsc --noEmit --strict`,
refuses a mistyped call, and (compiled to JavaScript) calls a live server with Node."""
import inspect
import json
import os
import subprocess
import sys
import typing

import pytest

from abxtest import ALICE_TOKEN, BOB_TOKEN, run_abx
from nodetools import NODE_DIR, node_bin

CLIENTS = os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))), "..", "..", "clients", "python")


def gen(tmp_path, lang, name):
    out = tmp_path / name
    r = run_abx(["gen-client", "--lang", lang, "--out", str(out)],
                env={"ABX_URL": "http://127.0.0.1:9", "ABX_HOME": str(tmp_path)})  # offline: no server
    assert r.returncode == 0, r.stderr
    assert r.stdout == ""
    return out


# -- command line -------------------------------------------------------------------------

def test_stdout_without_out_and_same_as_out(tmp_path):
    r = run_abx(["gen-client", "--lang", "python"])
    assert r.returncode == 0, r.stderr
    assert r.stdout == gen(tmp_path, "python", "ops.py").read_text()


def test_openapi_is_abx_openapi(tmp_path):
    assert gen(tmp_path, "openapi", "o.json").read_text() == run_abx(["openapi"]).stdout


@pytest.mark.parametrize("args,fragment", [
    (["--lang", "cobol", "--out", "{tmp}/x"], "unknown language 'cobol' (python, ts or openapi)"),
    (["--out", "{tmp}/x"], "usage: abx gen-client"),
    (["--lang"], "unexpected argument '--lang'"),
    (["--lang", "python", "--frobnicate"], "unexpected argument '--frobnicate'"),
])
def test_bad_arguments(args, fragment, tmp_path):
    r = run_abx(["gen-client"] + [a.replace("{tmp}", str(tmp_path)) for a in args])
    assert r.returncode == 2, (r.returncode, r.stderr)
    assert fragment in r.stderr, r.stderr
    assert r.stdout == ""
    assert os.listdir(tmp_path) == []


def test_out_replaces_atomically(tmp_path):
    out = tmp_path / "ops.py"
    out.write_text("old contents\n")
    gen(tmp_path, "python", "ops.py")
    assert out.read_text().startswith('"""Typed abx client')
    assert sorted(os.listdir(tmp_path)) == ["ops.py"]  # no temporary file left


def test_out_failure_keeps_the_target_and_leaves_nothing(tmp_path):
    target = tmp_path / "adir"
    target.mkdir()
    (target / "keep").write_text("x")
    r = run_abx(["gen-client", "--lang", "ts", "--out", str(target)])
    assert r.returncode == 1 and "cannot write" in r.stderr, r.stderr
    assert os.listdir(target) == ["keep"]
    assert sorted(os.listdir(tmp_path)) == ["adir"]
    r = run_abx(["gen-client", "--lang", "ts", "--out", str(tmp_path / "no" / "such" / "f.ts")])
    assert r.returncode == 1 and "cannot create" in r.stderr, r.stderr


# -- Python ----------------------------------------------------------------------------------

@pytest.fixture
def py_ops(tmp_path, monkeypatch):
    gen(tmp_path, "python", "abx_ops_generated.py")
    monkeypatch.syspath_prepend(str(tmp_path))
    monkeypatch.syspath_prepend(CLIENTS)
    sys.modules.pop("abx_ops_generated", None)
    import abx_ops_generated
    return abx_ops_generated


def test_python_module_is_typed(py_ops):
    sig = inspect.signature(py_ops._FilesOps.write)
    params = sig.parameters
    assert all(p.kind == p.KEYWORD_ONLY for n, p in params.items() if n != "self")
    assert params["path"].default is inspect.Parameter.empty  # required
    assert params["mode"].default is None                      # optional
    hints = typing.get_type_hints(py_ops._FilesOps.write)
    assert hints["path"] is str
    assert hints["mode"] == typing.Optional[typing.Literal["overwrite", "append", "create_new"]]
    assert hints["return"] is py_ops.FilesWriteResult  # the declared result
    assert typing.get_type_hints(py_ops._FilesOps.download)["return"] is bytes
    run = typing.get_type_hints(py_ops._CommandsOps.run)
    assert run["argv"] == typing.Optional[typing.List[str]]
    assert run["env"] == typing.Optional[typing.Dict[str, str]]
    up = inspect.signature(py_ops._FilesOps.upload).parameters
    assert up["body"].kind == inspect.Parameter.POSITIONAL_ONLY
    summary = {e["id"]: e["summary"] for e in json.loads(run_abx(["catalog"]).stdout)["ops"]}["files.read"]
    assert py_ops._FilesOps.read.__doc__.startswith(summary)
    assert "Operation `files.read`" in py_ops._FilesOps.read.__doc__
    assert "path: File to read" in py_ops._FilesOps.read.__doc__


def test_python_module_calls_a_live_server(py_ops, multi):
    ops = py_ops.Ops(multi.url, ALICE_TOKEN)
    assert ops.files.read(path="a.txt")["content"] == "hello\n"
    assert "a.txt" in {e["name"] for e in ops.files.list(path=".")["entries"]}
    assert ops.files.download(path="a.txt") == b"hello\n"
    assert ops.core.capabilities()["principal"] == "alice"
    assert ops.files.upload(b"new", path="n.txt")["bytes_written"] == 3
    assert ops.files.read(path="n.txt")["content"] == "new"
    with pytest.raises(TypeError):
        ops.files.read("a.txt")                      # keyword-only
    import abx
    with pytest.raises(abx.NotFoundError) as ei:
        ops.files.read(path="missing.txt")
    assert ei.value.code == "files.not_found"
    with pytest.raises(abx.ArgumentError) as ei:
        ops.files.write(path="x.txt", content="x", mode="truncate")  # checked before sending
    assert ei.value.code == "args.invalid"


def test_python_module_contract_mismatch(py_ops, multi):
    """Generated from the whole registry, used by a caller the server lists core.* for."""
    import abx
    ops = py_ops.Ops(multi.url, BOB_TOKEN)
    assert ops.core.health()["status"] == "ok"
    with pytest.raises(abx.ContractMismatchError) as ei:
        ops.files.read(path="a.txt")
    assert ei.value.code == "E3111"


def test_python_module_streams(py_ops, server):
    ops = py_ops.Ops(server.url, server.token)
    with ops.commands.stream(argv=["echo", "hi"]) as events:
        got = list(events)
    assert [e.event for e in got][0] == "start" and got[-1].event == "exit"
    assert "".join(e.data["data"] for e in got if e.event == "stdout") == "hi\n"


# -- TypeScript ------------------------------------------------------------------------------

TSC_FLAGS = ["--noEmit", "--strict", "--target", "es2022", "--module", "es2022", "--lib", "es2022,dom"]


def tsc(*args):
    return subprocess.run([node_bin("tsc")] + list(args), cwd=NODE_DIR, capture_output=True, text=True, timeout=300)


def test_typescript_type_checks(tmp_path):
    ts = gen(tmp_path, "ts", "abx.ts")
    r = tsc(*TSC_FLAGS, str(ts))
    assert r.returncode == 0, r.stdout + r.stderr


def test_typescript_refuses_mistyped_calls(tmp_path):
    gen(tmp_path, "ts", "abx.ts")
    use = tmp_path / "use.ts"
    use.write_text('import { Abx } from "./abx.js";\n'
                   'const a = new Abx({ url: "http://127.0.0.1:1" });\n'
                   'export const ok = a.files.read({ path: "a.txt", max_lines: 3 });\n'
                   'export const bad1 = a.files.read({ pathh: "a.txt" });\n'
                   'export const bad2 = a.files.write({ path: "x", content: "y", mode: "truncate" });\n'
                   'export const bad3 = a.files.read({});\n')
    r = tsc(*TSC_FLAGS, "--moduleResolution", "bundler", str(use))
    out = r.stdout + r.stderr
    assert r.returncode != 0
    assert "use.ts(4," in out and "pathh" in out
    assert "use.ts(5," in out and "truncate" in out
    assert "use.ts(6," in out
    assert "use.ts(3," not in out, out


def test_typescript_results_are_typed(tmp_path):
    """A declared result is an interface: files.read's content is a string under --strict,
    a wrong type or an undeclared field does not compile."""
    gen(tmp_path, "ts", "abx.ts")
    ok = tmp_path / "ok.ts"
    ok.write_text('import { Abx, FilesReadResult } from "./abx.js";\n'
                  'const a = new Abx({ url: "http://127.0.0.1:1" });\n'
                  'export async function f(): Promise<string> {\n'
                  '  const r = await a.files.read({ path: "a.txt" });\n'
                  '  const text: string = r.content;\n'
                  '  const eof: boolean | undefined = r.eof;\n'
                  '  const code: number | null = (await a.commands.run({ command: "true" })).exit_code;\n'
                  '  const names: string[] = (await a.files.list({})).entries.map((e) => e.name);\n'
                  '  const typed: FilesReadResult = r;\n'
                  '  return text + String(eof) + String(code) + names.join() + typed.path;\n'
                  '}\n')
    r = tsc(*TSC_FLAGS, "--moduleResolution", "bundler", str(ok))
    assert r.returncode == 0, r.stdout + r.stderr
    bad = tmp_path / "bad.ts"
    bad.write_text('import { Abx } from "./abx.js";\n'
                   'const a = new Abx({ url: "http://127.0.0.1:1" });\n'
                   'export async function f() {\n'
                   '  const r = await a.files.read({ path: "a.txt" });\n'
                   '  const n: number = r.content;\n'
                   '  return r.no_such_field;\n'
                   '}\n')
    r = tsc(*TSC_FLAGS, "--moduleResolution", "bundler", str(bad))
    out = r.stdout + r.stderr
    assert r.returncode != 0
    assert "bad.ts(5," in out and "bad.ts(6," in out and "no_such_field" in out, out


def test_python_results_are_typed_dicts(py_ops, tmp_path):
    """Each declared result is a TypedDict (required keys always present, the others
    optional), and the method is annotated with it."""
    m = py_ops
    t = m.FilesReadResult
    assert {"path", "encoding", "size", "content", "length", "truncated"} <= t.__required_keys__
    assert {"eof", "offset", "warnings"} <= t.__optional_keys__
    assert t.__annotations__["content"] is str
    assert typing.get_type_hints(m._FilesOps.read)["return"] is t
    assert typing.get_type_hints(m._FilesOps.download)["return"] is bytes
    assert m.CommandsRunResult.__annotations__["exit_code"] == typing.Optional[int]


NODE_SCRIPT = r"""
import { Abx, AbxError, ContractMismatchError } from "./abx.js";
const [url, token, bobToken] = process.argv.slice(2);
const out = {};
const abx = new Abx({ url, token });
out.read = (await abx.files.read({ path: "a.txt" })).content;
out.download = new TextDecoder().decode(await abx.files.download({ path: "a.txt" }));
out.upload = (await abx.files.upload("up!", { path: "up.txt" })).bytes_written;
const events = [];
for await (const ev of await abx.commands.stream({ argv: ["echo", "streamed"] })) events.push(ev);
out.events = events.map((e) => e.event);
out.stdout = events.filter((e) => e.event === "stdout").map((e) => e.data.data).join("");
try { await abx.files.read({ path: "missing.txt" }); } catch (e) {
  out.notFound = [e instanceof AbxError, e.code, e.status];
}
const bob = new Abx({ url, token: bobToken });
try { await bob.files.read({ path: "a.txt" }); } catch (e) {
  out.mismatch = [e instanceof ContractMismatchError, e.code];
}
console.log(JSON.stringify(out));
"""


def test_typescript_calls_a_live_server(tmp_path, abx, workspace):
    from abxtest import multi_config
    s = abx(multi_config(extra_allow='    - ops: ["commands.stream"]\n      principals: ["alice"]\n'
                                      '      paths: ["{ws}/**"]\n      commands: ["echo *"]\n'))
    gen(tmp_path, "ts", "abx.ts")
    (tmp_path / "package.json").write_text('{"type": "module"}')
    r = tsc("--strict", "--target", "es2022", "--module", "es2022", "--lib", "es2022,dom",
            "--outDir", str(tmp_path), str(tmp_path / "abx.ts"))
    assert r.returncode == 0, r.stdout + r.stderr
    (tmp_path / "run.mjs").write_text(NODE_SCRIPT)
    r = subprocess.run(["node", str(tmp_path / "run.mjs"), s.url, ALICE_TOKEN, BOB_TOKEN], cwd=str(tmp_path),
                       capture_output=True, text=True, timeout=60)
    assert r.returncode == 0, r.stdout + r.stderr
    got = json.loads(r.stdout)
    assert got["read"] == "hello\n" and got["download"] == "hello\n" and got["upload"] == 3
    assert got["events"][0] == "start" and got["events"][-1] == "exit"
    assert got["stdout"] == "streamed\n"
    assert got["notFound"] == [True, "files.not_found", 404]
    assert got["mismatch"] == [True, "E3111"]
    with open(os.path.join(workspace, "up.txt")) as f:
        assert f.read() == "up!"
