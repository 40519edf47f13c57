"""kernels.* with R: persistent confined IRkernel processes spoken to over the Jupyter
protocol (issue 15). Each test starts real IRkernel processes through abx."""
import base64
import os
import sqlite3
import time

import pytest

from abxtest import ALICE_TOKEN, assert_error, sha256_hex

pytestmark = pytest.mark.skipif(not os.path.exists("/usr/lib/R/site-library/IRkernel"),
                                reason="r-cran-irkernel is not installed (scripts/deps.sh installs it)")


def config(ws, ledger, languages=("r",), limits=None):
    stmt = {"ops": ["kernels.*", "devtools.*"], "principals": ["role:agent"], "paths": [ws + "/**"],
            "languages": list(languages), "net": False}
    if limits:
        stmt["limits"] = limits
    return {"workspace": ws, "terminal_listen": "off", "ledger": {"path": ledger},
            "auth": {"tokens": [{"principal": "alice", "roles": ["agent"], "token_sha256": sha256_hex(ALICE_TOKEN)}]},
            "policy": {"allow": [stmt, {"ops": ["files.*"], "principals": ["role:agent"], "paths": [ws + "/**"]},
                                {"ops": ["runs.*"], "principals": ["role:agent"]}]}}


def ok(r):
    assert r.status_code == 200, "%s %s" % (r.status_code, r.text[:800])
    return r.json()


def run(s, kid, code, **extra):
    body = {"id": kid, "code": code}
    body.update(extra)
    return s.post("/ops/kernels.execute", token=ALICE_TOKEN, json_body=body, timeout=120)


@pytest.fixture
def rk(abx, workspace, tmp_path):
    """(server, kernel id, ledger path) with one R kernel of alice's."""
    ledger = str(tmp_path / "ledger.db")
    s = abx(config(workspace, ledger, limits={"max_output_bytes": "64KiB"}))
    k = ok(s.op("kernels.create", {"language": "r"}, token=ALICE_TOKEN))
    assert k["status"] == "idle" and k["language"] == "r"
    return s, k["id"], ledger


def test_r_state_output_and_error(rk):
    s, kid, _ = rk
    e = ok(run(s, kid, "x <- 41\ncat('hello\\n')\nmessage('warn')\nx + 1"))
    # IRkernel shows a cell's value as display_data (not execute_result): is_main_result is false
    assert e["results"][0]["text/plain"] == "[1] 42" and "text/html" in e["results"][0], e
    assert "".join(e["logs"]["stdout"]) == "hello\n" and "".join(e["logs"]["stderr"]).strip() == "warn", e
    assert e["error"] is None and e["execution_count"] == 1
    assert ok(run(s, kid, "x * 2"))["results"][0]["text/plain"] == "[1] 82"
    e = ok(run(s, kid, "f <- function() stop('boom')\nf()"))
    assert "boom" in e["error"]["value"] and isinstance(e["error"]["traceback"], list), e
    assert any("f()" in line for line in e["error"]["traceback"]), e
    # the kernel goes on after an error
    assert ok(run(s, kid, "x"))["results"][0]["text/plain"] == "[1] 41"


def test_r_plot_is_png(rk):
    s, kid, _ = rk
    e = ok(run(s, kid, "plot(1:10)"))
    pngs = [r for r in e["results"] if "image/png" in r]
    assert pngs, e
    assert base64.b64decode(pngs[0]["image/png"])[:8] == b"\x89PNG\r\n\x1a\n"


def test_r_timeout_interrupts_and_kernel_keeps_state(rk):
    s, kid, _ = rk
    ok(run(s, kid, "y <- 7"))
    t0 = time.time()
    e = ok(run(s, kid, "repeat {}", timeout=1))
    assert time.time() - t0 < 8
    assert e["timed_out"] is True, e
    # IRkernel answers an interrupted cell with status abort and no error message
    assert e["error"]["name"] == "Interrupted" and e["results"] == [], e
    assert ok(run(s, kid, "y"))["results"][0]["text/plain"] == "[1] 7"


def test_r_host_calls_and_denied_path_recorded(rk, workspace):
    s, kid, ledger = rk
    with open(os.path.join(workspace, "a.txt"), "w") as f:
        f.write("hello\n")
    e = ok(run(s, kid, "host_call('files.read', path = 'a.txt')$content"))
    assert e["results"][0]["text/plain"] == '[1] "hello\\n"', e
    cell = run(s, kid, "d <- host_call('files.read', path = '/etc/shadow')\nd$error$code")
    assert ok(cell)["results"][0]["text/plain"] == '[1] "policy.path_not_allowed"'
    rid = cell.headers["X-Request-Id"]
    time.sleep(0.5)
    con = sqlite3.connect(ledger, timeout=10)
    try:
        (cell_group,) = con.execute("SELECT group_id FROM action_groups WHERE request_id = ?", (rid,)).fetchone()
        rows = con.execute("SELECT principal, op, door FROM action_groups WHERE batch_group = ?",
                           (cell_group,)).fetchall()
    finally:
        con.close()
    assert ("alice", "files.read", "kernel") in rows, rows
    # soft failures are values
    e = ok(run(s, kid, "host_call('nosuch.op')$error$code"))
    assert e["results"][0]["text/plain"] == '[1] "op.not_enabled"' and e["error"] is None, e
    e = ok(run(s, kid, "host_call('files.read', 'a.txt')$error$code"))
    assert e["results"][0]["text/plain"] == '[1] "args.invalid"'


def test_r_submit_output_completes_run(rk):
    s, _, _ = rk
    rid = ok(s.op("runs.create", {}, token=ALICE_TOKEN))["id"]
    kid = ok(s.op("kernels.create", {"language": "r", "run": rid}, token=ALICE_TOKEN))["id"]
    e = ok(run(s, kid, "a <- host_submit_output(list(answer = 42))\nb <- host_submit_output('again')\n"
                       "c(a$status, b$error$code)"))
    assert e["results"][0]["text/plain"] == '[1] "completed"     "run.completed"', e
    g = ok(s.op("runs.get", {"id": rid}, token=ALICE_TOKEN))
    assert g["status"] == "completed" and g["output"] == {"answer": 42} and g["completed_by"] == "submit_output"


def test_r_languages_scope(abx, workspace, tmp_path):
    s = abx(config(workspace, str(tmp_path / "l.db"), languages=("python",)))
    assert_error(s.op("kernels.create", {"language": "r"}, token=ALICE_TOKEN), 403, "policy.language_not_allowed")
    assert_error(s.op("devtools.code.run", {"language": "r", "code": "1"}, token=ALICE_TOKEN), 403,
                 "policy.language_not_allowed")


def test_r_death_and_restart_keeps_language(rk):
    s, kid, _ = rk
    ok(run(s, kid, "z <- 1"))
    r = run(s, kid, "tools::pskill(Sys.getpid(), tools::SIGKILL)")
    assert_error(r, 502, "kernel.died")
    assert r.json()["error"]["details"]["signal"] == "KILL", r.text
    k = ok(s.op("kernels.restart", {"id": kid}, token=ALICE_TOKEN))
    assert k["language"] == "r" and k["status"] == "idle"
    assert ok(run(s, kid, "exists('z')"))["results"][0]["text/plain"] == "[1] FALSE"


@pytest.mark.skipif(not (os.path.exists("/sys/fs/cgroup/memory/cgroup.procs") or
                         (os.path.exists("/sys/fs/cgroup/cgroup.controllers") and
                          "memory" in open("/sys/fs/cgroup/cgroup.controllers").read())),
                    reason="no memory cgroup abx could delegate to itself: a kernel's memory limit cannot be watched")
def test_r_memory_pressure_interrupts_and_keeps_state(abx, workspace, tmp_path):
    s = abx(config(workspace, str(tmp_path / "l.db"), limits={"memory": "384MiB"}))
    kid = ok(s.op("kernels.create", {"language": "r"}, token=ALICE_TOKEN))["id"]
    ok(run(s, kid, "keep <- 'still here'"))
    # R acts on SIGINT only at its interrupt checks (every ~1000 evaluations of a tight
    # loop, or in Sys.sleep and I/O): the cell grows by 4 MB steps with a pause between
    r = run(s, kid, "grow <- function() { l <- list(); repeat { l[[length(l) + 1]] <- numeric(5e5); "
                    "Sys.sleep(0.005) } }\ngrow()")
    assert_error(r, 507, "kernel.memory_pressure")
    assert r.json()["error"]["details"]["memory_limit"] == 384 << 20
    assert ok(run(s, kid, "keep"))["results"][0]["text/plain"] == '[1] "still here"'


def test_r_cell_env_set_for_that_cell_only(abx, workspace, tmp_path):
    cfg = config(workspace, str(tmp_path / "l.db"))
    cfg["policy"]["allow"][0]["commands"] = {"env": ["CELL_VAR", "HOME"]}
    s = abx(cfg)
    kid = ok(s.op("kernels.create", {"language": "r"}, token=ALICE_TOKEN))["id"]
    ok(run(s, kid, "home <- Sys.getenv('HOME')"))
    weird = "a'b\"c\\d \u00e9 $(x)"
    e = ok(run(s, kid, "cat(Sys.getenv('CELL_VAR'), Sys.getenv('HOME') == home, sep = '|')",
               env={"CELL_VAR": weird, "HOME": "/elsewhere"}))
    assert "".join(e["logs"]["stdout"]) == weird + "|FALSE" and e["execution_count"] == 2, e
    e = ok(run(s, kid, "cat(Sys.getenv('CELL_VAR', unset = '<unset>'), Sys.getenv('HOME') == home, sep = '|')"))
    assert "".join(e["logs"]["stdout"]) == "<unset>|TRUE" and e["execution_count"] == 3, e
    # restored after an error too
    e = ok(run(s, kid, "stopifnot(Sys.getenv('CELL_VAR') == 'x')\nstop('boom')", env={"CELL_VAR": "x"}))
    assert "boom" in e["error"]["value"], e
    e = ok(run(s, kid, "cat(Sys.getenv('CELL_VAR', unset = '<unset>'))"))
    assert "".join(e["logs"]["stdout"]) == "<unset>", e
    assert_error(run(s, kid, "1", env={"NOT_LISTED": "x"}), 403, "policy.command_not_allowed")
