"""The command line as a new user meets it (issue 25, small frictions): `abx ops` and
`abx call OP --help` print an op's parameters from the catalog; the examples of
docs/getting-started.md run as written against a server on the abx checkout; and
scripts/run.sh puts `abx` on PATH (its install step, run alone)."""
import json
import os
import re
import shlex
import subprocess

from abxtest import run_abx

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__)))))


def test_call_help_prints_the_parameters():
    r = run_abx(["call", "files.list", "--help"])
    assert r.returncode == 0, r.stderr
    out = r.stdout
    assert out.startswith("usage: abx call files.list")
    assert re.search(r"^  path +string +optional, default \"\.\"$", out, re.M), out
    assert re.search(r"^  depth +integer 1\.\.128 +optional$", out, re.M), out
    assert re.search(r"^  max_entries +integer 1\.\.100000 +optional, default 1000$", out, re.M), out
    assert "      Directory to list" in out
    r = run_abx(["call", "files.read", "-h"])
    assert re.search(r"^  path +string +required$", r.stdout, re.M), r.stdout
    assert re.search(r"^  encoding +enum \(utf8\|base64\) +optional, default \"utf8\"$", r.stdout, re.M)
    # and its declared result
    res = r.stdout.split("\nresult (a JSON object):\n")[1]
    assert re.search(r"^  content +string +always$", res, re.M), res
    assert re.search(r"^  eof +boolean +optional$", res, re.M), res
    r = run_abx(["call", "commands.run", "--help"])
    assert re.search(r"^  exit_code +integer +always, may be null$", r.stdout, re.M), r.stdout
    r = run_abx(["call", "no.such.op", "--help"])
    assert r.returncode == 1 and "no operation 'no.such.op'" in r.stderr
    r = run_abx(["call", "--help"])
    assert r.returncode == 2 and "usage" in r.stderr


def test_ops_lists_every_op_with_its_parameters():
    cat = json.loads(run_abx(["catalog"]).stdout)["ops"]
    r = run_abx(["ops"])
    assert r.returncode == 0, r.stderr
    heads = [l.split(" — ")[0] for l in r.stdout.splitlines() if " — " in l and not l.startswith(" ")]
    assert heads == [o["id"] for o in cat]
    r = run_abx(["ops", "files", "core.health"])
    heads = [l.split(" — ")[0] for l in r.stdout.splitlines() if " — " in l and not l.startswith(" ")]
    assert heads == [o["id"] for o in cat if o["id"].startswith("files.") or o["id"] == "core.health"]
    assert "core.health — " in r.stdout and "(no parameters)" in r.stdout
    r = run_abx(["ops", "files.extract", "--json"])
    j = json.loads(r.stdout)
    assert [o["id"] for o in j] == ["files.extract"]
    assert j[0] == [o for o in cat if o["id"] == "files.extract"][0]
    r = run_abx(["ops", "nothing.here"])
    assert r.returncode == 1
    assert run_abx(["ops", "--bogus"]).returncode == 2


def _example_lines():
    text = open(os.path.join(ROOT, "docs", "getting-started.md")).read()
    block = text.split("## Call it", 1)[1].split("```sh", 1)[1].split("```", 1)[0]
    return [l for l in block.strip().splitlines() if l.startswith("abx ")]


def test_getting_started_examples_run_as_written(abx, tmp_path):
    """Each `abx call` line of the "Call it" block, with the abx checkout as workspace: the
    ones the comment says fail fail with that code, every other one succeeds."""
    s = abx(workspace=ROOT)
    lines = _example_lines()
    assert len(lines) >= 5 and any("src/cli/main.c" in l for l in lines)
    for line in lines:
        cmd, _, comment = line.partition("#")
        argv = shlex.split(cmd)[1:]
        r = run_abx(argv, home=s.home)
        want = re.search(r"\b(40\d) ([a-z_]+\.[a-z_]+)", comment)
        if want:
            assert r.returncode == 1, (line, r.stdout)
            assert json.loads(r.stdout)["error"]["code"] == want.group(2), (line, r.stdout)
        else:
            assert r.returncode == 0, (line, r.stdout, r.stderr)
        if "src/cli/main.c" in line:
            assert "abx_cli_call" in json.loads(r.stdout)["content"] or json.loads(r.stdout)["content"], r.stdout
        if "no/such.c" in line:
            assert "path '%s/no/such.c' does not exist" % ROOT in r.stdout, r.stdout


def test_run_sh_links_abx_onto_path(tmp_path):
    """The install step of scripts/run.sh (everything after the build) links abx into
    ABX_BIN_DIR; ABX_BIN_DIR=none skips it."""
    text = open(os.path.join(ROOT, "scripts", "run.sh")).read()
    step = text[text.index("bindir=${ABX_BIN_DIR"):text.index('exec "$here/build/abx"')]
    bindir = tmp_path / "bin"
    env = dict(os.environ, ABX_BIN_DIR=str(bindir), PATH="/usr/bin:/bin")
    r = subprocess.run(["bash", "-c", "here=%s\n%s" % (shlex.quote(ROOT), step)], env=env,
                       capture_output=True, text=True)
    assert r.returncode == 0, r.stderr
    assert os.readlink(bindir / "abx") == os.path.join(ROOT, "build", "abx")
    assert "is not on PATH" in r.stderr
    env["ABX_BIN_DIR"] = "none"
    env["HOME"] = str(tmp_path / "home")
    r = subprocess.run(["bash", "-c", "here=%s\n%s" % (shlex.quote(ROOT), step)], env=env,
                       capture_output=True, text=True)
    assert r.returncode == 0 and not os.path.exists(tmp_path / "home")
