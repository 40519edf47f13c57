"""The console's end-to-end suite: one abx server for the module (tests/pylib/abxtest.py),
the pinned playwright-core (install.sh) and Debian's chromium."""
import os
import sys

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "pylib"))

import abxtest  # noqa: E402


def pytest_configure(config):
    abxtest.configure()
