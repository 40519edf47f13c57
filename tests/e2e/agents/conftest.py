"""The agents end-to-end suite: the real codex and Claude Code CLIs, installed by abx's
lazy install from the npm registry (once per run, into a shared folder), driven through
abx against the scripted model server (modelserver.py). Skips when the registry is
unreachable."""
import os
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, "..", "..", "pylib"))
sys.path.insert(0, HERE)

import abxtest  # noqa: E402
from abxtest import abx, workspace  # noqa: E402,F401  (fixtures)


def pytest_configure(config):
    abxtest.configure()
