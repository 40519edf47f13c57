"""OpenAI strict mode with the pinned @openai/agents SDK (tests/mcp/package-lock.json, installed
by tests/mcp/install.sh; skipped, saying so, only when the npm registry is unreachable): every tool abx
declares in the openai format converts to strict mode with no warning or error from the
SDK's strict conversion (mcpToFunctionTool with convertSchemasToStrict), and stays the
schema abx declared."""
import json
import os
import subprocess

import pytest

from abxtest import run_abx

MCP_DIR = os.path.join(os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__)))), "mcp")


def sdk_convert(doc):
    r = subprocess.run(["bash", os.path.join(MCP_DIR, "install.sh")], capture_output=True, text=True, timeout=600)
    if r.returncode == 3:
        pytest.skip("the strict-mode check needs the npm registry: " + r.stderr.strip()[-300:])
    assert r.returncode == 0, r.stdout + r.stderr
    r = subprocess.run(["node", os.path.join(MCP_DIR, "strict_tools.mjs")], cwd=MCP_DIR, input=json.dumps(doc),
                       capture_output=True, text=True, timeout=120)
    assert r.returncode == 0, r.stdout[-2000:] + r.stderr[-2000:]
    return [json.loads(line) for line in r.stdout.splitlines() if line.strip()]


def test_every_openai_tool_converts_to_strict_without_warnings():
    r = run_abx(["tools", "--format", "openai"])
    assert r.returncode == 0, r.stderr
    doc = json.loads(r.stdout)
    names = [t["function"]["name"] for t in doc["tools"]]
    assert "commands__run" in names and "runs__finalize" in names and len(names) > 40
    out = sdk_convert(doc)
    assert [o["name"] for o in out] == names
    bad = [o for o in out if o["error"] or o["warnings"] or o["strict"] is not True or not o["same"]
           or o["declared_strict"] is not True]
    assert not bad, json.dumps(bad, indent=1)[:4000]


def test_the_check_catches_a_free_form_map():
    # the harness itself: a map with free keys is what the SDK warns about
    doc = {"tools": [{"function": {"name": "x", "description": "d", "strict": False, "parameters": {
        "type": "object", "properties": {"env": {"type": "object", "additionalProperties": {"type": "string"}}},
        "required": ["env"], "additionalProperties": False}}}]}
    out = sdk_convert(doc)
    assert out[0]["strict"] is False and any("strict" in w for w in out[0]["warnings"]), out
