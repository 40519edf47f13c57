#!/usr/bin/python3
"""bench/agents.py — abx's overhead per agent turn vs running the CLI directly (issue 24).

    /usr/bin/python3 bench/agents.py [path/to/abx]     (default build/abx)

Starts the scripted model server of tests/e2e/agents (modelserver.py) and one `abx serve`
whose statement runs agents.codex.* and agents.claude_code.* behind the egress proxy (the
key injected for the model host). For each CLI, interleaved over BENCH_AG_ROUNDS rounds,
the same one-tool turn ("TASK: write": the model asks for `echo hi > out.txt`, then
answers) is timed
  - through abx: agents.<adapter>.run over HTTP (confined spawn, private HOME, network
    namespace and egress proxy with injection, JSONL mapping, ledger), and
  - directly: the same installed CLI with the same arguments, its base URL pointing at the
    model server on loopback, the key in its environment, no confinement.
Prints the medians, the overhead in ms and the ratio. The CLIs are installed by abx's lazy
install on the first call (not timed) into BENCH_AG_INSTALL (default a temporary folder;
point it at a kept folder to skip the download). Writes bench/out/agents-<ts>.json."""
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time

import requests

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, "..", "tests", "e2e", "agents"))
from modelserver import ModelServer  # noqa: E402

ROUNDS = int(os.environ.get("BENCH_AG_ROUNDS", "5"))
TOKEN = "bench-agents-0123456789abcdef"
KEY = "sk-bench-0123456789"
CLIS = {"codex": "node_modules/@openai/codex/bin/codex.js",
        "claude_code": "node_modules/@anthropic-ai/claude-code/bin/claude.exe"}
REQ = {"codex": "codex-cli", "claude_code": "claude-code"}


def config(ws, inst, port):
    import hashlib
    host = "model.test:%d" % port
    return {"workspace": ws, "terminal_listen": "off",
            "auth": {"tokens": [{"principal": "bench", "token_sha256": hashlib.sha256(TOKEN.encode()).hexdigest()}]},
            "secrets": {"MODEL_KEY": {"env": "ABX_BENCH_MODEL_KEY"}},
            "egress": {"resolve": {"model.test": "127.0.0.1"}},
            "install": {"allow": ["codex-cli", "claude-code"], "dir": inst},
            "agents": {"codex": {"base_url": "http://%s/v1" % host, "model": "scripted-model"},
                       "claude_code": {"base_url": "http://%s" % host, "model": "claude-scripted"}},
            "policy": {"allow": [{"ops": ["core.*"], "principals": ["*"]},
                                 {"ops": ["agents.*"], "principals": ["bench"], "paths": [ws + "/**"],
                                  "agents": ["codex", "claude_code"],
                                  "net": {"allow": [host], "inject": [
                                      {"host": "model.test", "header": "Authorization",
                                       "value": "Bearer ${secret:MODEL_KEY}"},
                                      {"host": "model.test", "header": "x-api-key", "value": "${secret:MODEL_KEY}"}]}}]}}


def direct_argv(adapter, program, port):
    if adapter == "codex":
        return ["/usr/bin/node", program, "exec", "--json", "--skip-git-repo-check", "--sandbox", "danger-full-access",
                "-c", 'model_provider="abx"', "-c",
                'model_providers.abx={name="abx",base_url="http://127.0.0.1:%d/v1",wire_api="responses",'
                'request_max_retries=0,stream_max_retries=0}' % port, "-m", "scripted-model", "TASK: write"]
    return [program, "-p", "--output-format", "stream-json", "--verbose", "--permission-mode", "bypassPermissions",
            "--model", "claude-scripted", "--", "TASK: write"]


def direct_env(adapter, home, port):
    e = {"PATH": "/usr/local/bin:/usr/bin:/bin", "HOME": home, "LANG": "C.UTF-8"}
    if adapter == "claude_code":
        e.update({"ANTHROPIC_BASE_URL": "http://127.0.0.1:%d" % port, "ANTHROPIC_API_KEY": KEY, "IS_SANDBOX": "1",
                  "DISABLE_AUTOUPDATER": "1", "DISABLE_TELEMETRY": "1",
                  "CLAUDE_CODE_DISABLE_NONESSENTIAL_TRAFFIC": "1"})
    return e


def main():
    binary = sys.argv[1] if len(sys.argv) > 1 else "build/abx"
    model = ModelServer()
    tmp = tempfile.mkdtemp(prefix="abx-bench-agents-")
    ws = os.path.realpath(os.path.join(tmp, "ws"))
    os.makedirs(ws)
    inst = os.environ.get("BENCH_AG_INSTALL") or os.path.join(tmp, "install")
    cfgp = os.path.join(tmp, "abx.json")
    with open(cfgp, "w") as f:
        json.dump(config(ws, inst, model.port), f)
    s = socket_port()
    env = dict(os.environ, ABX_HOME=os.path.join(tmp, "home"), ABX_BENCH_MODEL_KEY=KEY)
    srv = subprocess.Popen([binary, "serve", "--config", cfgp, "--listen", "127.0.0.1:%d" % s], env=env,
                           stdout=subprocess.DEVNULL, stderr=open(os.path.join(tmp, "abx.log"), "wb"))
    url = "http://127.0.0.1:%d" % s
    try:
        for _ in range(200):
            try:
                if requests.get(url + "/health", timeout=1).status_code == 200:
                    break
            except requests.RequestException:
                time.sleep(0.05)
        h = {"Authorization": "Bearer " + TOKEN}
        results = {}
        for ad in ("codex", "claude_code"):
            r = requests.post(url + "/ops/agents.%s.run" % ad, headers=h, json={"prompt": "TASK: write"}, timeout=900)
            if r.status_code != 200 or not r.json().get("ok"):
                print("%s: warm-up failed (%d): %s" % (ad, r.status_code, r.text[:300]))
                continue
            program = os.path.join(inst, REQ[ad], CLIS[ad])
            home = os.path.join(tmp, "direct-home-" + ad)
            os.makedirs(home, exist_ok=True)
            subprocess.run(direct_argv(ad, program, model.port), env=direct_env(ad, home, model.port), cwd=ws,
                           stdin=subprocess.DEVNULL, capture_output=True, timeout=300)  # warm-up
            via, direct = [], []
            for _ in range(ROUNDS):
                t0 = time.perf_counter()
                r = requests.post(url + "/ops/agents.%s.run" % ad, headers=h, json={"prompt": "TASK: write"},
                                  timeout=300)
                via.append((time.perf_counter() - t0) * 1000)
                assert r.status_code == 200 and r.json()["ok"], r.text[:300]
                t0 = time.perf_counter()
                o = subprocess.run(direct_argv(ad, program, model.port), env=direct_env(ad, home, model.port),
                                   cwd=ws, stdin=subprocess.DEVNULL, capture_output=True, timeout=300)
                direct.append((time.perf_counter() - t0) * 1000)
                assert o.returncode == 0, o.stderr[-300:]
            mv, md = statistics.median(via), statistics.median(direct)
            results[ad] = {"rounds": ROUNDS, "abx_ms": round(mv, 1), "direct_ms": round(md, 1),
                           "overhead_ms": round(mv - md, 1), "ratio": round(mv / md, 3)}
            print("%-12s abx %8.1f ms   direct %8.1f ms   overhead %+7.1f ms   ratio %.3f" % (ad, mv, md, mv - md,
                                                                                           mv / md))
        out = os.path.join(HERE, "out")
        os.makedirs(out, exist_ok=True)
        with open(os.path.join(out, "agents-%d.json" % int(time.time())), "w") as f:
            json.dump(results, f, indent=2)
    finally:
        srv.terminate()
        srv.wait(timeout=15)
        model.close()


def socket_port():
    import socket
    so = socket.socket()
    so.bind(("127.0.0.1", 0))
    p = so.getsockname()[1]
    so.close()
    return p


if __name__ == "__main__":
    main()
