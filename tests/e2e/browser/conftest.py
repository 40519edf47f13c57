"""e2e.browser: a real headless Chromium driven through abx's browser.* ops, pages served
from a Python http.server on loopback."""
import os
import sys

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "pylib"))

import abxtest  # noqa: E402
from abxtest import abx, workspace  # noqa: E402,F401  (fixtures)


def pytest_configure(config):
    abxtest.configure()
