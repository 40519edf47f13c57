"""The config the console's end-to-end test serves (also runnable by hand to look at the
console: /usr/bin/python3 tests/e2e/console/consolecfg.py → prints the URL and tokens)."""
import os
import sys

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "pylib"))

from abxtest import tokens  # noqa: E402

HAVE_KERNEL = os.path.exists("/usr/lib/python3/dist-packages/ipykernel")


def config(ws, ledger):
    """alice (agent) works, ann (approver) approves, root (admin) watches the chain."""
    agent = ["role:agent"]  # alice, and val (agent + approver: the self-approval case)
    allow = [
        {"ops": ["core.*", "ledger.*", "approvals.*"], "principals": ["*"]},
        {"ops": ["ledger.verify"], "principals": ["role:admin"]},
        {"ops": ["approvals.decide"], "principals": ["role:approver"]},
        {"ops": ["files.list", "files.read", "files.stat", "files.write", "files.search"], "principals": agent,
         "paths": [ws + "/**"]},
        {"ops": ["files.mkdir"], "principals": agent, "paths": [ws + "/**"], "approval": "required"},
        {"ops": ["terminal.*", "process.*", "commands.run"], "principals": agent, "paths": [ws + "/**"],
         "commands": {"allow": ["bash *", "sh *", "echo *", "cat *"]}},
    ]
    if HAVE_KERNEL:
        allow.append({"ops": ["kernels.*"], "principals": agent, "paths": [ws + "/**"], "languages": ["python"]})
    return {"workspace": ws, "terminal_listen": "off", "ledger": {"path": ledger},
            "auth": {"tokens": tokens("alice", "ann", "root", "val")}, "policy": {"allow": allow}}


if __name__ == "__main__":
    import json
    import signal
    import tempfile
    import time

    signal.signal(signal.SIGTERM, lambda *_: sys.exit(0))  # kill PID stops the server too

    from abxtest import ADMIN_TOKEN, ALICE_TOKEN, APPROVER_TOKEN, AbxServer, configure

    configure()
    tmp = tempfile.mkdtemp(prefix="abx-console-")
    ws = os.path.join(tmp, "ws")
    os.makedirs(ws)
    s = AbxServer(tmp, json.loads(json.dumps(config(ws, os.path.join(tmp, "ledger.db")))), workspace=ws).start()
    print("%s/ui/  alice=%s ann=%s root=%s" % (s.url, ALICE_TOKEN, APPROVER_TOKEN, ADMIN_TOKEN), flush=True)
    try:
        while True:
            time.sleep(3600)
    finally:
        s.stop()
