"""Black-box fixtures for abx: start the real binary on 127.0.0.1 and speak HTTP to it.
The fixtures and helpers live in tests/pylib/abxtest.py, shared with tests/security;
test files import helpers from there (`from abxtest import ...`).

Run with Debian's interpreter:   ABX_BIN=build/abx /usr/bin/python3 -m pytest tests/blackbox
"""
import os
import sys

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "pylib"))
# the tests are grouped by what they exercise: ops/ (one namespace's operations), doors/
# (the ways in: batch, MCP, the provider formats, clients, the CLI) and pipeline/ (auth,
# policy, confinement, config, approvals, the ledger); a test may import a sibling group's
# helpers (test_mcp's client, test_approvals' config)
for _group in ("ops", "doors", "pipeline"):
    sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), _group))

import abxtest  # noqa: E402
from abxtest import abx, multi, server, token, workspace  # noqa: E402,F401  (fixtures)


def pytest_configure(config):
    abxtest.configure()
