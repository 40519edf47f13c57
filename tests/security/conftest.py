"""Fixtures for the attack corpus: the black-box fixtures of tests/blackbox/conftest.py
(servers with configs, tokens, raw HTTP helpers, sanitizer checks), loaded under their
own module name so both directories can keep a file called conftest.py.

Run with:   ABX_BIN=build/abx /usr/bin/python3 -m pytest -q -p no:cacheprovider tests/security
"""
import importlib.util
import os
import sys

_BB_PATH = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "blackbox", "conftest.py")
_spec = importlib.util.spec_from_file_location("abx_blackbox_conftest", _BB_PATH)
bb = importlib.util.module_from_spec(_spec)
sys.modules["abx_blackbox_conftest"] = bb
_spec.loader.exec_module(bb)

# fixtures (pytest registers what this module's namespace holds)
abx = bb.abx
workspace = bb.workspace
server = bb.server
token = bb.token
multi = bb.multi


def pytest_configure(config):
    bb.pytest_configure(config)
