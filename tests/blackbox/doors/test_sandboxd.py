"""The sandboxd door (docs/fleet.md) without Node: its config rules (a non-loopback listener
without TLS or allow_plaintext, token_file without principal, an unreadable or short token, a
port shared with listen: all refused when the config loads), the pod's token against abx's own
tokens, and the REST door's own answers (health without credentials, 401, 405, %2F paths,
multipart, the spec's error document, the ledger's door and traceparent). The stock gRPC and
OpenAPI clients are in tests/e2e/sandboxd."""
import os
import sqlite3
import stat
import time

import pytest
import requests

from abxtest import ALICE_TOKEN, free_port, sha256_hex

POD_TOKEN = "pod-token-0123456789abcdef"
TP = "00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01"


def config(ws, tmp, rest, grpc, token_file=None):
    os.makedirs(tmp, exist_ok=True)
    sbx = {"rest_listen": "127.0.0.1:%d" % rest, "grpc_listen": "127.0.0.1:%d" % grpc}
    if token_file:
        sbx.update(token_file=token_file, principal="alice")
    return {"workspace": ws, "terminal_listen": "off", "ledger": {"path": os.path.join(tmp, "ledger.db")},
            "sandboxd": sbx,
            "auth": {"tokens": [{"principal": "alice", "roles": ["agent"], "token_sha256": sha256_hex(ALICE_TOKEN)}]},
            "policy": {"allow": [
                {"ops": ["core.*"], "principals": ["*"]},
                {"ops": ["files.*"], "principals": ["role:agent"], "paths": [ws + "/**"]}]}}


@pytest.fixture
def pod(abx, workspace, tmp_path):
    tf = tmp_path / "token"
    tf.write_text(POD_TOKEN + "\n")
    rest = free_port()
    s = abx(config(workspace, str(tmp_path / "state"), rest, free_port(), str(tf)))
    s.rest = "http://127.0.0.1:%d" % rest
    s.ledger_db = os.path.join(str(tmp_path / "state"), "ledger.db")
    return s


def H(token=POD_TOKEN, **extra):
    h = {"Authorization": "Bearer " + token}
    h.update(extra)
    return h


def refused(abx, cfg, *needles):
    s = abx(cfg, start=False)
    with pytest.raises(RuntimeError) as e:
        s.start()
    for n in needles:
        assert n in str(e.value), str(e.value)


def test_config_rules(abx, workspace, tmp_path):
    base = lambda sub: config(workspace, str(tmp_path / sub), free_port(), free_port())  # noqa: E731
    cfg = base("a")
    cfg["sandboxd"]["rest_listen"] = "0.0.0.0:%d" % free_port()
    refused(abx, cfg, "sandboxd.rest_listen 0.0.0.0", "allow_plaintext")
    cfg = base("b")
    cfg["sandboxd"]["grpc_listen"] = "0.0.0.0:%d" % free_port()
    refused(abx, cfg, "sandboxd.grpc_listen 0.0.0.0", "cleartext")
    cfg = base("c")
    cfg["sandboxd"]["token_file"] = str(tmp_path / "none")
    refused(abx, cfg, "sandboxd.token_file needs sandboxd.principal")
    cfg["sandboxd"]["principal"] = "alice"
    refused(abx, cfg, "sandboxd.token_file: cannot read")
    (tmp_path / "short").write_text("abc\n")
    cfg["sandboxd"]["token_file"] = str(tmp_path / "short")
    refused(abx, cfg, "shorter than 16")
    cfg = base("d")
    cfg["listen"] = "127.0.0.1:7777"
    cfg["sandboxd"]["rest_listen"] = "127.0.0.1:7777"
    refused(abx, cfg, "share port 7777")
    cfg = base("e")
    cfg["sandboxd"]["bogus"] = 1
    refused(abx, cfg, "sandboxd.bogus")
    # allow_plaintext: a pod network listener starts
    cfg = base("f")
    port = free_port()
    cfg["sandboxd"].update(rest_listen="0.0.0.0:%d" % port, allow_plaintext=True, grpc_listen="off")
    abx(cfg)
    assert requests.get("http://127.0.0.1:%d/v1/health" % port, timeout=5).json()["status"] == "ok"


def test_rest_auth_and_errors(pod, workspace):
    # health answers the kubelet without credentials; nothing else does
    r = requests.get(pod.rest + "/v1/health", timeout=5)
    assert r.status_code == 200 and r.json()["status"] == "ok" and isinstance(r.json()["uptime_seconds"], int)
    r = requests.get(pod.rest + "/v1/files/", timeout=5)
    assert r.status_code == 401 and r.json()["code"] == "UNAUTHENTICATED"
    r = requests.get(pod.rest + "/v1/files/", headers=H("wrong-token-0123456789"), timeout=5)
    assert r.status_code == 401
    # with token_file, abx's own tokens are not the pod's
    assert requests.get(pod.rest + "/v1/metadata", headers=H(ALICE_TOKEN), timeout=5).status_code == 401
    assert requests.get(pod.rest + "/v1/metadata", headers=H(), timeout=5).json() == {"env": {}}
    # %2F is a separator; the file lands in a sub-folder
    r = requests.put(pod.rest + "/v1/files/a%2Fb.txt", data=b"bytes", headers=H(traceparent=TP), timeout=5)
    assert r.status_code == 204 and r.content == b""
    with open(os.path.join(workspace, "a", "b.txt"), "rb") as f:
        assert f.read() == b"bytes"
    assert requests.get(pod.rest + "/v1/files/a/b.txt", headers=H(), timeout=5).content == b"bytes"
    # mode: the written file's permission bits (default 0644, as the spec says)
    assert stat.S_IMODE(os.stat(os.path.join(workspace, "a", "b.txt")).st_mode) == 0o644
    r = requests.put(pod.rest + "/v1/files/run.sh", params={"mode": "0750"}, data=b"#!/bin/sh\n", headers=H(),
                     timeout=5)
    assert r.status_code == 204 and stat.S_IMODE(os.stat(os.path.join(workspace, "run.sh")).st_mode) == 0o750
    r = requests.head(pod.rest + "/v1/files/a/b.txt", headers=H(), timeout=5)
    assert r.status_code == 200 and r.content == b"" and r.headers["Last-Modified"].endswith(" GMT")
    assert r.headers["Content-Type"] == "application/octet-stream"
    # an encoded dot-dot is still refused at the transport
    r = requests.get(pod.rest + "/v1/files/a%2F..%2F..%2Fetc", headers=H(), timeout=5)
    assert r.status_code == 400
    # multipart: the "file" part; a body without one is a bad request
    r = requests.put(pod.rest + "/v1/files/m.txt", files={"file": ("m.txt", b"multi")}, headers=H(), timeout=5)
    assert r.status_code == 204
    r = requests.put(pod.rest + "/v1/files/m.txt", data=b"--x\r\n", timeout=5,
                     headers=H(**{"Content-Type": "multipart/form-data; boundary=zz"}))
    assert r.status_code == 400 and r.json()["code"] == "INVALID_ARGUMENT"
    # method, route, bad query values
    r = requests.post(pod.rest + "/v1/files/m.txt", data=b"x", headers=H(), timeout=5)
    assert r.status_code == 405 and r.json()["code"] == "UNIMPLEMENTED"
    assert requests.post(pod.rest + "/v1/health", timeout=5).status_code == 405
    assert requests.post(pod.rest + "/v1/metadata", headers=H(), timeout=5).status_code == 405
    r = requests.get(pod.rest + "/v2/nothing", headers=H(), timeout=5)
    assert r.status_code == 404 and r.json()["code"] == "NOT_FOUND"
    r = requests.delete(pod.rest + "/v1/files/m.txt?recursive=maybe", headers=H(), timeout=5)
    assert r.status_code == 400
    # a directory: the spec's listing; its deletion needs recursive=true (409 otherwise)
    r = requests.get(pod.rest + "/v1/files/a", headers=H(), timeout=5)
    assert r.headers["Content-Type"].startswith("application/json")
    assert r.json()["path"] == "/a" and r.json()["entries"][0]["name"] == "b.txt"
    r = requests.delete(pod.rest + "/v1/files/a", headers=H(), timeout=5)
    assert r.status_code == 409 and r.json()["message"].startswith("files.not_empty")
    assert requests.delete(pod.rest + "/v1/files/a?recursive=true", headers=H(), timeout=5).status_code == 204
    # door sandboxd, with the router's traceparent, in the ledger
    deadline = time.time() + 5
    rows = []
    while not rows and time.time() < deadline:
        with sqlite3.connect(pod.ledger_db) as db:
            rows = db.execute("SELECT g.principal FROM action_events e JOIN action_groups g ON g.group_id = e.group_id "
                              "WHERE g.door = 'sandboxd' AND g.op = 'files.write' AND e.data LIKE ?",
                              ("%" + TP + "%",)).fetchall()
        time.sleep(0.05)
    assert rows and rows[0][0] == "alice"


def test_abx_tokens_without_token_file(abx, workspace, tmp_path):
    rest = free_port()
    abx(config(workspace, str(tmp_path / "st"), rest, free_port()))
    base = "http://127.0.0.1:%d" % rest
    assert requests.get(base + "/v1/metadata", headers=H(ALICE_TOKEN), timeout=5).status_code == 200
    assert requests.get(base + "/v1/metadata", headers=H(POD_TOKEN), timeout=5).status_code == 401


def test_failed_tokens_are_rate_limited(abx, workspace, tmp_path):
    tf = tmp_path / "token"
    tf.write_text(POD_TOKEN)
    rest = free_port()
    cfg = config(workspace, str(tmp_path / "st"), rest, free_port(), str(tf))
    cfg["limits"] = {"auth_failures": 10}
    abx(cfg)
    base = "http://127.0.0.1:%d" % rest
    codes = [requests.get(base + "/v1/metadata", headers=H("guess-%02d-0123456789abcdef" % i), timeout=5).status_code
             for i in range(14)]
    assert codes[0] == 401 and codes[-1] == 429, codes
    r = requests.get(base + "/v1/metadata", headers=H("guess-99-0123456789abcdef"), timeout=5)
    assert r.status_code == 429 and int(r.headers["Retry-After"]) > 0 and r.json()["code"] == "RESOURCE_EXHAUSTED"


def test_deploy_config_checks(tmp_path):
    """deploy/abx.yaml (the pod's config) passes check-config with its paths moved here."""
    from abxtest import run_abx
    root = os.path.dirname(os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__)))))
    with open(os.path.join(root, "deploy", "abx.yaml")) as f:
        text = f.read()
    (tmp_path / "token").write_text(POD_TOKEN)
    (tmp_path / "ws").mkdir()
    text = (text.replace("/var/run/secrets/abx/token", str(tmp_path / "token"))
            .replace("/workspace", str(tmp_path / "ws")).replace("/var/lib/abx", str(tmp_path)))
    (tmp_path / "abx.yaml").write_text(text)
    r = run_abx(["check-config", str(tmp_path / "abx.yaml")], home=str(tmp_path / "home"))
    assert r.returncode == 0 and "ok (0 warning(s))" in r.stdout + r.stderr, r.stdout + r.stderr
    assert "0.0.0.0:8080" in text and "0.0.0.0:9090" in text


def test_containerfile_packages_exist(tmp_path):
    """deploy/Containerfile: non-root, and every Debian package it installs is a real package
    name here (this machine runs the same Debian release as the image's base)."""
    import re
    import shutil
    import subprocess
    root = os.path.dirname(os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__)))))
    with open(os.path.join(root, "deploy", "Containerfile")) as f:
        text = f.read()
    assert "\nUSER 1000:1000\n" in text and "FROM debian:bookworm-slim" in text
    if not shutil.which("apt-cache"):
        pytest.skip("no apt-cache")
    pkgs = set()
    for block in re.findall(r"apt-get install -y --no-install-recommends((?:[^&]|&(?!&))*)", text):
        pkgs.update(w for w in block.replace("\\", " ").split() if re.match(r"^[a-z0-9][a-z0-9.+-]+$", w))
    assert {"libnghttp2-14", "libprotobuf-c1", "libnghttp2-dev"} <= pkgs, pkgs
    r = subprocess.run(["apt-cache", "show", "--no-all-versions", *sorted(pkgs)], capture_output=True, text=True)
    missing = [p for p in pkgs if ("Package: %s\n" % p) not in r.stdout]
    assert not missing, missing
