"""Shared by the agents suite and bench/agents.py: the config of an abx that runs the
agent CLIs against the scripted model server, with the key as a secret the egress proxy
injects for the model host."""
import json
import os
import threading

import pytest

from abxtest import ALICE_TOKEN, run_abx, tokens

KEY = "sk-abx-e2e-0123456789abcdef"      # what the model server must receive
KEY_ENV = "ABX_E2E_MODEL_KEY"
MODEL_HOST = "model.test"


def config(ws, inst, port, adapters=("codex", "claude_code"), install_allow=("codex-cli", "claude-code")):
    host = "%s:%d" % (MODEL_HOST, port)
    return {
        "workspace": ws, "terminal_listen": "off",
        "auth": {"tokens": tokens("alice", "bob", "root")},
        "secrets": {"MODEL_KEY": {"env": KEY_ENV}},
        "egress": {"resolve": {MODEL_HOST: "127.0.0.1"}},
        "install": {"allow": list(install_allow), "dir": inst},
        "agents": {"codex": {"base_url": "http://%s/v1" % host, "model": "scripted-model"},
                   "claude_code": {"base_url": "http://%s" % host, "model": "claude-scripted"}},
        "policy": {"allow": [
            {"ops": ["core.*", "ledger.*"], "principals": ["*"]},
            {"ops": ["agents.*"], "principals": ["alice"], "paths": [ws + "/**"], "agents": list(adapters),
             "net": {"allow": [host],
                     "inject": [{"host": MODEL_HOST, "header": "Authorization", "value": "Bearer ${secret:MODEL_KEY}"},
                                {"host": MODEL_HOST, "header": "x-api-key", "value": "${secret:MODEL_KEY}"}]}},
        ]},
    }


def env():
    return {KEY_ENV: KEY}


def ensure_installed(srv, op, token=ALICE_TOKEN):
    """Call op (it needs the requirement) and skip when the npm registry is unreachable."""
    r = srv.post("/ops/" + op, token=token, json_body={}, timeout=900)
    if r.status_code == 503 and r.json()["error"]["code"] == "install.failed":
        msg = r.json()["error"]["message"]
        if any(w in msg for w in ("ENOTFOUND", "EAI_AGAIN", "ETIMEDOUT", "ECONNREFUSED", "ENETUNREACH", "403",
                                  "network")):
            pytest.skip("the npm registry is unreachable: " + msg[:200])
    return r


def ledger_events(srv, kind, n=2000):
    """The ledger's events of one kind: their data with group and op."""
    path = os.path.join(os.path.dirname(srv.config_path), ".abx", "ledger.db")
    out = run_abx(["ledger", "tail", "-n", str(n), "--path", path], home=srv.home)
    evs = []
    for line in out.stdout.splitlines():
        try:
            e = json.loads(line)
        except ValueError:
            continue
        if e.get("kind") == kind:
            evs.append(dict(e.get("data") or {}, group=e.get("group_id"), op=e.get("op")))
    return evs


def concurrently(fns):
    res = [None] * len(fns)

    def run(i):
        res[i] = fns[i]()

    ts = [threading.Thread(target=run, args=(i,)) for i in range(len(fns))]
    for t in ts:
        t.start()
    for t in ts:
        t.join()
    return res


def files_containing(root, needle):
    hits = []
    for d, _dirs, files in os.walk(root):
        for f in files:
            p = os.path.join(d, f)
            try:
                with open(p, "rb") as fh:
                    if needle.encode() in fh.read():
                        hits.append(p)
            except OSError:
                pass
    return hits
