"""Black-box fixtures for abx: start the real binary on 127.0.0.1 and speak HTTP to it.
The fixtures and helpers live in tests/pylib/abxtest.py, shared with tests/security;
test files import helpers from there (`from abxtest import ...`).

Run with Debian's interpreter:   ABX_BIN=build/abx /usr/bin/python3 -m pytest tests/blackbox
"""
import os
import sys

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "pylib"))

import abxtest  # noqa: E402
from abxtest import abx, multi, server, token, workspace  # noqa: E402,F401  (fixtures)
# Transition only: test files written on other branches before abxtest existed still say
# `from conftest import ...`. Files here import from abxtest; drop this line once merged.
from abxtest import *  # noqa: E402,F401,F403


def pytest_configure(config):
    abxtest.configure()
