"""Step 3: credentials. Bearer and X-Access-Token, conflicts, expiry, credential sources,
anonymous ops, the failed-attempt rate limit, and tokens never reaching the logs."""
import os
import socket
import time

import pytest

from abxtest import ALICE_TOKEN, BOB_TOKEN, RawResponse, assert_error, error_code, multi_config, sha256_hex


def test_health_needs_no_credentials(server):
    r = server.get("/health")
    assert r.status_code == 200
    assert r.json()["status"] == "ok"


@pytest.mark.parametrize("method,path", [("GET", "/capabilities"), ("GET", "/ops"), ("GET", "/openapi.json"),
                                         ("GET", "/metrics"), ("GET", "/files/list"),
                                         ("GET", "/ops/files.read")])
def test_missing_credentials(server, method, path):
    assert_error(server.request(method, path), 401, "auth.required")


def test_missing_credentials_rpc(server):
    assert_error(server.op("core.capabilities", {}), 401, "auth.required")
    assert_error(server.op("files.stat", {"path": "a.txt"}), 401, "auth.required")


def test_empty_bearer_is_not_a_credential(server):
    r = server.get("/capabilities", headers={"Authorization": "Bearer "})
    assert r.status_code == 401
    assert error_code(r) in ("auth.required", "auth.invalid_token")


def test_wrong_token(server, token):
    assert_error(server.get("/capabilities", token="x" * 64), 401, "auth.invalid_token")
    assert_error(server.get("/capabilities", token=token[:-1]), 401, "auth.invalid_token")
    assert_error(server.get("/capabilities", token=token + "0"), 401, "auth.invalid_token")
    assert_error(server.get("/capabilities", headers={"X-Access-Token": "nope-nope-nope-nope"}),
                 401, "auth.invalid_token")


def test_bearer_works(server, token):
    r = server.get("/capabilities", token=token)
    assert r.status_code == 200, r.text
    assert r.json()["principal"] == "local"


def test_x_access_token_alone_works(server, token):
    r = server.get("/capabilities", headers={"X-Access-Token": token})
    assert r.status_code == 200, r.text
    assert r.json()["principal"] == "local"


def test_same_token_in_both_headers_works(server, token):
    r = server.get("/capabilities", token=token, headers={"X-Access-Token": token})
    assert r.status_code == 200, r.text


def test_conflicting_credentials(server, token):
    # valid bearer + different legacy header (and the other way round): 401, never "first wins"
    assert_error(server.get("/capabilities", token=token, headers={"X-Access-Token": "other-token-0123456789"}),
                 401, "auth.conflicting_credentials")
    assert_error(server.get("/capabilities", token="other-token-0123456789", headers={"X-Access-Token": token}),
                 401, "auth.conflicting_credentials")


def test_principals_from_config(multi):
    assert multi.get("/capabilities", token=ALICE_TOKEN).json()["principal"] == "alice"
    assert multi.get("/capabilities", token=BOB_TOKEN).json()["principal"] == "bob"
    # sha256 of the token is not itself a token
    assert_error(multi.get("/capabilities", token=sha256_hex(ALICE_TOKEN)), 401, "auth.invalid_token")


TOKEN_CFG = """
workspace: {ws}
auth:
  tokens:
%s
policy:
  allow:
    - ops: ["core.*"]
      principals: ["*"]
"""


def test_token_env(abx):
    s = abx(TOKEN_CFG % "    - {principal: envy, roles: [agent], token_env: ABX_TEST_ENV_TOKEN}",
            env={"ABX_TEST_ENV_TOKEN": "env-token-0123456789abcdef"})
    r = s.get("/capabilities", token="env-token-0123456789abcdef")
    assert r.status_code == 200, r.text
    assert r.json()["principal"] == "envy"


def test_token_file(abx, tmp_path):
    tf = tmp_path / "secret-token"
    tf.write_text("file-token-0123456789abcdef\n")
    os.chmod(str(tf), 0o600)
    s = abx(TOKEN_CFG % ("    - {principal: filey, roles: [agent], token_file: %s}" % tf))
    r = s.get("/capabilities", token="file-token-0123456789abcdef")
    assert r.status_code == 200, r.text
    assert r.json()["principal"] == "filey"
    assert_error(s.get("/capabilities", token="file-token-0123456789abcdef\n".strip() + "x"),
                 401, "auth.invalid_token")


def test_plaintext_token_works(abx):
    s = abx(TOKEN_CFG % "    - {principal: plain, roles: [agent], token: plain-token-0123456789ab}")
    r = s.get("/capabilities", token="plain-token-0123456789ab")
    assert r.status_code == 200, r.text
    assert r.json()["principal"] == "plain"


def test_expired_token_rejected(abx):
    s = abx(TOKEN_CFG % (
        "    - {principal: old, roles: [agent], token_sha256: \"%s\", expires_at: \"2001-01-01T00:00:00Z\"}\n"
        "    - {principal: new, roles: [agent], token_sha256: \"%s\", expires_at: \"2999-01-01T00:00:00Z\"}"
        % (sha256_hex("old-token-0123456789abcdef"), sha256_hex("new-token-0123456789abcdef"))))
    assert_error(s.get("/capabilities", token="old-token-0123456789abcdef"), 401, "auth.invalid_token")
    r = s.get("/capabilities", token="new-token-0123456789abcdef")
    assert r.status_code == 200, r.text
    assert r.json()["principal"] == "new"


def test_anonymous_ops_from_config(abx):
    s = abx(multi_config().replace("auth:\n", "auth:\n  anonymous: [core.health, core.capabilities]\n"))
    r = s.get("/capabilities")
    assert r.status_code == 200, r.text
    assert r.json()["principal"] == "anonymous"
    assert_error(s.get("/ops"), 401, "auth.required")
    assert_error(s.get("/files/list", params={"path": "."}), 401, "auth.required")
    assert s.get("/health").status_code == 200
    # a wrong token is still a wrong token, even on an anonymous op
    assert_error(s.get("/capabilities", token="wrong-token-0123456789abcdef"), 401, "auth.invalid_token")


def test_tokens_never_logged(abx):
    s = abx(args=["--log-level", "debug"])
    tok = s.token
    wrong = "wrong-token-ZZZZ0123456789abcdefZZ"
    s.get("/capabilities", token=tok)
    s.get("/files/list", token=tok, params={"path": "."})
    s.get("/nope", token=tok)
    s.get("/capabilities", token=wrong)
    s.get("/capabilities", headers={"X-Access-Token": tok})
    s.get("/capabilities", token=tok, headers={"X-Access-Token": wrong})
    s.op("files.stat", {"path": "a.txt"}, headers={"X-Access-Token": tok})
    s.stop()
    text = s.stderr() + s.stdout()[s.stdout().find(tok) + len(tok):]  # stdout shows it once, at start
    assert len(s.log_lines()) >= 7, text
    assert tok not in text
    assert wrong not in text
    assert tok[:16] not in text


def test_log_lines_are_json_with_fields(server, token):
    server.get("/capabilities", token=token)
    server.get("/nope", token=token)
    server.get("/capabilities")
    time.sleep(0.1)
    recs = [r for r in server.log_lines() if r.get("request_id")]
    assert len(recs) >= 3, server.stderr()
    for r in recs:
        for k in ("time", "level", "request_id", "principal", "op", "status", "duration_ms"):
            assert k in r, r
    caps = [r for r in recs if r.get("op") == "core.capabilities" and r.get("status") == 200]
    assert caps and caps[0]["principal"] == "local"
    assert any(r.get("status") == 401 for r in recs)
    assert any(r.get("status") == 404 for r in recs)
    assert token not in server.stderr()


def test_quiet_flag_still_serves(abx):
    s = abx(args=["--quiet"])
    assert s.get("/capabilities", token=s.token).status_code == 200


# -- failed-attempt rate limit (own server; it poisons 127.0.0.1) -------------------------------

def _raw_get(port, path, token, source=None):
    c = socket.create_connection(("127.0.0.1", port), timeout=5, source_address=(source, 0) if source else None)
    try:
        c.sendall(("GET %s HTTP/1.1\r\nHost: 127.0.0.1:%d\r\nAuthorization: Bearer %s\r\nConnection: close\r\n\r\n"
                   % (path, port, token)).encode())
        data = b""
        while True:
            d = c.recv(65536)
            if not d:
                break
            data += d
        return RawResponse(data)
    finally:
        c.close()


def test_zz_auth_rate_limited_after_10_failures(abx):
    s = abx()
    for i in range(10):
        r = s.get("/capabilities", token="bad-token-%02d-0123456789abcdef" % i)
        assert_error(r, 401, "auth.invalid_token")
    r = s.get("/capabilities", token="bad-token-10-0123456789abcdef")
    assert_error(r, 429, "auth.rate_limited")
    ra = r.headers.get("Retry-After")
    assert ra is not None and ra.isdigit() and 0 < int(ra) <= 60, ra
    # another client address is not affected
    try:
        other = _raw_get(s.port, "/capabilities", "bad-token-99-0123456789abcdef", source="127.0.0.2")
    except OSError:
        pytest.skip("cannot bind 127.0.0.2")
    assert_error(other, 401, "auth.invalid_token")
    ok = _raw_get(s.port, "/capabilities", s.token, source="127.0.0.2")
    assert ok.status == 200, ok
