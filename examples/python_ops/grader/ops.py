"""grader.run — grade a Python submission against the test cases in a work folder.

abx loads this module in a confined worker (load: ["python:grader.ops"] in abx.yaml, whose
folder is on the module path). The schema of each op comes from the annotations; the
handler receives the canonical, admitted work folder in ctx.paths["workdir"] and must use
that, never the raw argument.
"""
import json
import os
import subprocess
import sys
from typing import Literal, Optional, TypedDict

from abx_ops import OpError, op


class Case(TypedDict):
    call: str          # an expression, e.g. "add(1, 2)"
    expect: str        # the repr of the expected value, e.g. "3"


HARNESS = r"""
import json, sys
src, cases = sys.stdin.read().split("\0", 1)
ns = {}
exec(compile(src, "submission.py", "exec"), ns)
out = []
for c in json.loads(cases):
    try:
        got = repr(eval(c["call"], ns))
        out.append({"call": c["call"], "ok": got == c["expect"], "got": got})
    except Exception as e:
        out.append({"call": c["call"], "ok": False, "got": "%s: %s" % (type(e).__name__, e)})
print(json.dumps(out))
"""


@op("grader.run", effects="exec", paths=("workdir",), limits=("timeout",), since="0.1")
def run(ctx, submission: str, workdir: str = ".", timeout: int = 10,
        mode: Literal["all", "first_failure"] = "all", extra: Optional[list[Case]] = None) -> dict:
    """Grade a submission with the test cases in WORKDIR/cases.json."""
    folder = ctx.paths["workdir"]             # canonical and admitted by the policy
    try:
        with open(os.path.join(folder, "cases.json")) as f:
            cases = json.load(f)
    except FileNotFoundError:
        raise OpError("files.not_found", "no cases.json in the work folder")
    cases += extra or []
    ctx.log("info", "grading %d cases in %s" % (len(cases), folder))
    try:
        p = subprocess.run([sys.executable, "-I", "-c", HARNESS], input=submission + "\0" + json.dumps(cases),
                           capture_output=True, text=True, timeout=timeout, cwd=folder)
    except subprocess.TimeoutExpired:
        return {"passed": 0, "failed": len(cases), "timed_out": True, "results": []}
    if p.returncode != 0:
        return {"passed": 0, "failed": len(cases), "error": p.stderr.strip().splitlines()[-1:], "results": []}
    results = json.loads(p.stdout)
    passed = sum(1 for r in results if r["ok"])
    if mode == "first_failure":
        results = [r for r in results if not r["ok"]][:1]
    return {"passed": passed, "failed": len(cases) - passed, "results": results, "workdir": folder}
