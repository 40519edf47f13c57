"""Fixtures for the attack corpus: the same fixtures as tests/blackbox (servers with
configs, tokens, raw HTTP helpers, sanitizer checks), from tests/pylib/abxtest.py;
secutil.py adds what only the attack files use.

Run with:   ABX_BIN=build/abx /usr/bin/python3 -m pytest -q -p no:cacheprovider tests/security
"""
import os
import sys

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "pylib"))

import abxtest  # noqa: E402
from abxtest import abx, multi, server, token, workspace  # noqa: E402,F401  (fixtures)


def pytest_configure(config):
    abxtest.configure()
