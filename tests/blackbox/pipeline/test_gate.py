"""Gates over the whole suite: every registered operation is called by some black-box
test, and every example config passes check-config (with its own policy tests)."""
import glob
import json
import os
import re
import subprocess

HERE = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
ROOT = os.path.dirname(os.path.dirname(HERE))


def abx_bin():
    return os.environ.get("ABX_BIN") or os.path.join(ROOT, "build", "abx")


def catalog():
    out = subprocess.run([abx_bin(), "catalog"], capture_output=True, text=True, timeout=30, check=True).stdout
    return json.loads(out)["ops"]


def test_every_op_has_a_black_box_test():
    sources = ""
    for path in glob.glob(os.path.join(HERE, "**", "test_*.py"), recursive=True):
        if os.path.basename(path) != "test_gate.py":
            with open(path, encoding="utf-8") as f:
                sources += f.read()
    missing = []
    for op in catalog():
        if op["id"] in sources or op["id"].replace(".", "__") in sources:
            continue
        found = False
        for b in op["http"]:
            # a binding called through its path: variables may be anything in the test
            pattern = re.escape(b["path"])
            pattern = re.sub(r"\\\{[a-z_]+\\\}", r"[^\"'\\s]+", pattern)
            if re.search(pattern + r"(?![A-Za-z0-9_/])", sources):
                found = True
                break
        if not found:
            missing.append(op["id"])
    assert not missing, "operations without a black-box test calling them: %s" % ", ".join(missing)


def test_example_configs_pass_check_config(tmp_path):
    env = dict(os.environ)
    for name in ("ABX_REVIEWER_TOKEN", "ABX_AGENT_TOKEN", "ABX_ALICE_TOKEN", "ABX_OPS_TOKEN"):
        env[name] = name.lower() + "-0123456789abcdef"
    examples = sorted(glob.glob(os.path.join(ROOT, "examples", "*.yaml")))
    assert len(examples) >= 3
    for path in examples:
        r = subprocess.run([abx_bin(), "check-config", path], capture_output=True, text=True, env=env, timeout=30)
        assert r.returncode == 0, "%s: %s%s" % (path, r.stdout, r.stderr)
        assert "error" not in r.stdout.replace("0 error", ""), r.stdout
