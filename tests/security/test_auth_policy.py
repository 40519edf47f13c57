"""Attack corpus, item 6: authentication and policy under attack.

Token brute force is rate-limited (429 auth.rate_limited with Retry-After) on every door
and header, and a limited client learns nothing — not even from the right token; the
time to refuse a wrong token does not depend on how much of a real token it matches;
an approval is single-use, bound to its arguments, its principal and the policy in
force when it runs; and reload storms (SIGHUP and system.policy.reload) under load
never admit a call that neither the old nor the new config admits — tokens included.
(tests/blackbox/pipeline/test_auth.py has the basic 10-failures case, test_hardening.py the
path-scope reload storm.)"""
import json
import os
import random
import signal
import socket
import statistics
import threading
import time

import pytest
import requests

from abxtest import (ADMIN_TOKEN, ALICE_TOKEN, APPROVER_TOKEN, BOB_TOKEN, RawResponse, assert_error, multi_config,
                     sha256_hex, tokens)


def raw_get(port, path, headers, source=None):
    c = socket.create_connection(("127.0.0.1", port), timeout=5, source_address=(source, 0) if source else None)
    try:
        hs = "".join("%s: %s\r\n" % kv for kv in headers.items())
        c.sendall(("GET %s HTTP/1.1\r\nHost: 127.0.0.1:%d\r\n%sConnection: close\r\n\r\n" % (path, port, hs)).encode())
        data = b""
        while True:
            d = c.recv(65536)
            if not d:
                break
            data += d
        return RawResponse(data)
    finally:
        c.close()


def bearer(t):
    return {"Authorization": "Bearer " + t}


def wrong(i):
    return "wrong-token-%04d-%s" % (i, "x" * 16)


def exhaust(s, source=None, header="Authorization"):
    for i in range(10):
        h = bearer(wrong(i)) if header == "Authorization" else {"X-Access-Token": wrong(i)}
        r = raw_get(s.port, "/capabilities", h, source)
        assert_error(r, 401, "auth.invalid_token")


def check_limited(r):
    assert_error(r, 429, "auth.rate_limited")
    ra = r.headers.get("retry-after")
    assert ra and ra.isdigit() and 1 <= int(ra) <= 60, ra


# -- brute force --------------------------------------------------------------------------------------

@pytest.mark.parametrize("header", ["Authorization", "X-Access-Token"])
def test_limited_client_learns_nothing_from_the_right_token(multi, header):
    exhaust(multi, header=header)
    check_limited(raw_get(multi.port, "/capabilities", bearer(wrong(99))))
    # the right token from the limited address is refused the same way: no oracle
    check_limited(raw_get(multi.port, "/capabilities", bearer(ALICE_TOKEN)))
    check_limited(raw_get(multi.port, "/capabilities", {"X-Access-Token": BOB_TOKEN}))


@pytest.mark.parametrize("door", ["rest", "rpc", "batch", "unknown_route", "health_with_token"])
def test_every_door_counts_and_is_limited(multi, workspace, door):
    def attempt(tok):
        if door == "rest":
            return multi.get("/files/stat", token=tok, params={"path": "a.txt"})
        if door == "rpc":
            return multi.op("files.stat", {"path": "a.txt"}, token=tok)
        if door == "batch":
            return multi.post("/batch", token=tok, json_body={"calls": [{"op": "files.stat", "args": {"path": "a.txt"}}]})
        if door == "unknown_route":
            return multi.get("/no/such/route", token=tok)
        return multi.get("/health", token=tok)
    for i in range(10):
        assert_error(attempt(wrong(i)), 401, "auth.invalid_token")
    check_limited(attempt(wrong(10)))
    check_limited(attempt(ALICE_TOKEN))
    assert multi.get("/health").status_code == 200   # no credential: health still answers


def _can_bind(addr):
    try:
        c = socket.socket()
        c.bind((addr, 0))
        c.close()
        return True
    except OSError:
        return False


def test_one_token_tried_from_many_addresses_is_limited(multi):
    if not _can_bind("127.0.0.2"):
        pytest.skip("cannot bind 127.0.0.x source addresses")
    tok = wrong(7)
    for i in range(10):
        assert_error(raw_get(multi.port, "/capabilities", bearer(tok), "127.0.0.%d" % (10 + i)), 401, "auth.invalid_token")
    check_limited(raw_get(multi.port, "/capabilities", bearer(tok), "127.0.0.30"))
    # other addresses with other tokens are unaffected
    r = raw_get(multi.port, "/capabilities", bearer(ALICE_TOKEN), "127.0.0.31")
    assert r.status == 200, r


def test_many_addresses_trip_the_global_budget_known_clients_keep_theirs(multi):
    """10 tries per address from 10 addresses (100 failures in a minute, the default
    limits.auth_failures): addresses that have not authenticated recently are then refused
    before their token is checked, the right token included; an address that
    authenticated before the flood keeps its own budget and still gets in."""
    if not _can_bind("127.0.0.2"):
        pytest.skip("cannot bind 127.0.0.x source addresses")
    good = "127.0.0.90"
    r = raw_get(multi.port, "/capabilities", bearer(ALICE_TOKEN), good)
    assert r.status == 200, r
    for a in range(10):
        src = "127.0.1.%d" % (10 + a)
        for i in range(10):
            assert_error(raw_get(multi.port, "/capabilities", bearer(wrong(100 * a + i)), src), 401,
                         "auth.invalid_token")
    check_limited(raw_get(multi.port, "/capabilities", bearer(wrong(5000)), "127.0.2.1"))
    check_limited(raw_get(multi.port, "/capabilities", bearer(ALICE_TOKEN), "127.0.2.2"))  # no oracle
    r = raw_get(multi.port, "/capabilities", bearer(ALICE_TOKEN), good)
    assert r.status == 200, r
    # no credential needs no budget: health still answers from anywhere
    r = raw_get(multi.port, "/health", {}, "127.0.2.3")
    assert r.status == 200, r


def test_limit_holds_while_one_address_churns_fingerprints(multi):
    """Hundreds of distinct wrong tokens from one address: the address stays limited
    after its tenth failure (fingerprint entries do not dilute it)."""
    exhaust(multi)
    for i in range(300):
        r = raw_get(multi.port, "/capabilities", bearer(wrong(1000 + i)))
        if r.status != 429:
            pytest.fail("attempt %d was not limited: %r" % (i, r))
    check_limited(raw_get(multi.port, "/capabilities", bearer(ALICE_TOKEN)))


def test_malformed_credentials_do_not_crash_or_leak(multi):
    for h in [{"Authorization": "Bearer " + "A" * 60000}, {"Authorization": "Basic YWxpY2U6eA=="},
              {"Authorization": "Bearer\t" + ALICE_TOKEN}, {"Authorization": "bearer " + ALICE_TOKEN},
              {"Authorization": "Bearer  " + ALICE_TOKEN}, {"Authorization": "Bearer " + ALICE_TOKEN + " "},
              {"X-Access-Token": ""}, {"Authorization": "Bearer \u00e9\u00e9\u00e9".encode().decode("latin-1")}]:
        try:
            r = multi.get("/capabilities", headers=h)
        except requests.RequestException:
            continue
        size = sum(len(k) + len(v) for k, v in h.items())
        if size > 40 * 1024:  # over libmicrohttpd's pool: its own 431, without abx's JSON
            assert r.status_code == 431, (size, r.status_code, r.text[:200])
            continue
        if size > 16 * 1024:  # over limits.header_bytes
            assert_error(r, 431, "request.headers_too_large")
            continue
        assert r.status_code in (200, 400, 401, 429), (h, r.status_code, r.text[:200])
        if r.status_code == 200:
            assert r.json()["principal"] == "alice"
    assert multi.get("/health").status_code == 200


# -- timing of the token comparison ---------------------------------------------------------------------

def _timed_request(port, tok, source):
    c = socket.create_connection(("127.0.0.1", port), timeout=5, source_address=(source, 0))
    try:
        c.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        req = ("GET /capabilities HTTP/1.1\r\nHost: 127.0.0.1\r\nAuthorization: Bearer %s\r\nConnection: close\r\n\r\n"
               % tok).encode()
        t0 = time.perf_counter_ns()
        c.sendall(req)
        data = c.recv(65536)
        t1 = time.perf_counter_ns()
        while c.recv(65536):
            pass
    finally:
        c.close()
    assert b" 401 " in data.split(b"\r\n", 1)[0], data[:200]
    return t1 - t0


def _sample(port, n_per_kind, first_addr):
    """Interleaved samples of wrong tokens: the real token with one of its last two
    characters changed (all but one character match, the prefix matches at least n-2)
    and random tokens of the same length. Each source address makes at most 10 attempts
    (the per-address budget); near misses are spread over 70 distinct tokens so that a
    retry's samples stay under the per-token budget (10 a minute) too."""
    near, far = [], []
    alphabet = "abcdefghijklmnopqrstuvwxyz0123456789"
    addr = first_addr
    used = 0
    for i in range(n_per_kind):
        pos = len(ALICE_TOKEN) - 1 - (i % 2)
        choices = [ch for ch in alphabet if ch != ALICE_TOKEN[pos]]
        other = choices[(first_addr + i // 2) % len(choices)]  # in turn: at most 5 uses a token
        near_tok = ALICE_TOKEN[:pos] + other + ALICE_TOKEN[pos + 1:]
        far_tok = "".join(random.choice(alphabet) for _ in ALICE_TOKEN)
        pair = [("near", near_tok), ("far", far_tok)]
        random.shuffle(pair)
        for kind, tok in pair:
            if used == 10:
                addr += 1
                used = 0
            t = _timed_request(port, tok, "127.0.%d.%d" % (addr // 250, 1 + addr % 250))
            used += 1
            (near if kind == "near" else far).append(t)
    return near, far


def test_token_comparison_time_does_not_depend_on_matched_prefix(abx):
    """abx hashes the presented token and compares SHA-256 digests in constant time
    against every configured token, so a token matching all but one character of a
    real one takes as long to refuse as a random one. Medians of interleaved samples,
    with a threshold (20 % and 0.3 ms) far above what the loopback jitter of a busy
    2-core machine moves a median, and one retry before failing. A byte-wise early-exit
    comparison of the tokens themselves would not be caught here at all (nanoseconds);
    what this catches is a refusal path that does measurably more work for a near miss."""
    if not _can_bind("127.0.1.1"):
        pytest.skip("cannot bind 127.0.x.y source addresses")
    # 600 failures: lift the global budget (the per-address one still applies)
    multi = abx(multi_config(top="limits: {auth_failures: 100000}\n"))
    for attempt in range(2):
        near, far = _sample(multi.port, 150, 300 + attempt * 40)
        mn, mf = statistics.median(near), statistics.median(far)
        diff = abs(mn - mf)
        if diff < max(0.2 * min(mn, mf), 300_000):
            return
    pytest.fail("median near-miss %.0f us vs random %.0f us" % (mn / 1000, mf / 1000))


# -- approvals -----------------------------------------------------------------------------------------

def approval_config(ws, with_commands=True):
    stmts = [{"ops": ["core.*", "approvals.*"], "principals": ["*"]},
             {"ops": ["approvals.decide"], "principals": ["role:approver"]},
             {"ops": ["system.policy.reload"], "principals": ["root"]},
             {"ops": ["files.write"], "principals": ["alice", "bob"], "paths": [ws + "/**"], "approval": "required"}]
    if with_commands:
        stmts.append({"ops": ["commands.run"], "principals": ["alice"], "paths": [ws + "/**"],
                      "commands": ["python3 *"], "approval": "required"})
    return {"workspace": ws, "terminal_listen": "off", "ledger": {"enabled": False},
            "auth": {"tokens": tokens("alice", "bob", "root", "ann")}, "policy": {"allow": stmts}}


@pytest.fixture
def asrv(abx, workspace):
    return abx(approval_config(workspace))


def hold(s, body, token=ALICE_TOKEN, path="/files/write", headers=None):
    r = s.post(path, token=token, json_body=body, headers=headers, timeout=20)
    assert r.status_code == 202, r.text
    return r.json()["approval_id"]


def decide(s, aid, decision="approve", extra=None):
    body = {"decision": decision}
    body.update(extra or {})
    return s.post("/approvals/" + aid, token=APPROVER_TOKEN, json_body=body)


def poll(s, aid, token=ALICE_TOKEN):
    deadline = time.time() + 10
    while True:
        r = s.get("/approvals/" + aid, token=token)
        if r.status_code != 202 or time.time() > deadline:
            return r
        time.sleep(0.05)


def counter(ws):
    p = os.path.join(ws, "count")
    return len(open(p).read().splitlines()) if os.path.exists(p) else 0


APPEND = "open('count', 'a').write('x\\n')"


def test_same_call_again_is_held_again(asrv, workspace):
    aid = hold(asrv, {"argv": ["python3", "-c", APPEND]}, path="/commands/run")
    assert decide(asrv, aid).status_code == 200
    assert poll(asrv, aid).status_code == 200
    assert counter(workspace) == 1
    aid2 = hold(asrv, {"argv": ["python3", "-c", APPEND]}, path="/commands/run")
    assert aid2 != aid
    time.sleep(0.3)
    assert counter(workspace) == 1, "the approval was reused for an identical call"


def test_decision_cannot_carry_arguments(asrv, workspace):
    aid = hold(asrv, {"path": "held.txt", "content": "held"})
    r = decide(asrv, aid, extra={"args": {"path": "other.txt", "content": "changed"}})
    assert_error(r, 400, "args.unknown")
    r = decide(asrv, aid, extra={"content": "changed"})
    assert_error(r, 400, "args.unknown")
    assert decide(asrv, aid).status_code == 200
    assert poll(asrv, aid).status_code == 200
    assert open(os.path.join(workspace, "held.txt")).read() == "held"
    assert not os.path.exists(os.path.join(workspace, "other.txt"))


def test_approval_id_is_not_a_credential(asrv, workspace):
    aid = hold(asrv, {"path": "held.txt", "content": "held"})
    assert_error(asrv.get("/approvals/" + aid, token=BOB_TOKEN), 404, "approval.not_found")
    assert_error(asrv.get("/approvals/" + aid), 401, "auth.required")
    for h in ({"X-Approval-Id": aid}, {"Prefer": "approval=" + aid}):
        r = asrv.post("/files/write", token=ALICE_TOKEN, json_body={"path": "direct.txt", "content": "x"}, headers=h)
        assert r.status_code == 202, r.text
    r = asrv.post("/files/write", token=ALICE_TOKEN, json_body={"path": "direct.txt", "content": "x",
                                                                "approval_id": aid})
    assert_error(r, 400, "args.unknown")
    time.sleep(0.2)
    assert not os.path.exists(os.path.join(workspace, "direct.txt"))


def test_idempotency_key_cannot_replay_an_approval_for_other_arguments(asrv, workspace):
    key = "key-%d" % random.randint(0, 10 ** 9)
    aid = hold(asrv, {"path": "one.txt", "content": "one"}, headers={"Idempotency-Key": key})
    assert decide(asrv, aid).status_code == 200
    assert poll(asrv, aid).status_code == 200
    r = asrv.post("/files/write", token=ALICE_TOKEN, json_body={"path": "two.txt", "content": "two"},
                  headers={"Idempotency-Key": key})
    assert r.status_code in (202, 409), r.text
    if r.status_code == 409:
        assert_error(r, 409, "request.idempotency_conflict")
    time.sleep(0.3)
    assert not os.path.exists(os.path.join(workspace, "two.txt"))
    assert open(os.path.join(workspace, "one.txt")).read() == "one"


def test_approved_call_meets_the_policy_in_force_when_it_runs(asrv, workspace):
    aid = hold(asrv, {"argv": ["python3", "-c", APPEND]}, path="/commands/run")
    with open(asrv.config_path, "w") as f:
        json.dump(approval_config(workspace, with_commands=False), f)
    assert asrv.post("/system/policy/reload", token=ADMIN_TOKEN).status_code == 200
    decide(asrv, aid)
    r = poll(asrv, aid)
    assert r.status_code in (403, 404), r.text
    assert r.json()["error"]["code"] in ("op.not_enabled", "approval.denied", "policy.denied"), r.text
    time.sleep(0.3)
    assert counter(workspace) == 0, "an approval outlived the statement that allowed the call"


def test_held_call_inside_a_batch_runs_once(asrv, workspace):
    r = asrv.post("/batch", token=ALICE_TOKEN, json_body={"calls": [
        {"op": "files.write", "args": {"path": "b1.txt", "content": "1"}}]})
    assert r.status_code == 200, r.text
    res = r.json()["results"][0]
    assert res["status"] == 202, res
    aid = res["body"]["approval_id"]
    assert not os.path.exists(os.path.join(workspace, "b1.txt"))
    assert decide(asrv, aid).status_code == 200
    assert poll(asrv, aid).status_code == 200
    assert_error(decide(asrv, aid), 409, "approval.already_decided")
    assert open(os.path.join(workspace, "b1.txt")).read() == "1"


# -- reload storms -------------------------------------------------------------------------------------

T1 = "rotating-token-one-0123456789"
T2 = "rotating-token-two-0123456789"
T3 = "never-valid-token-0123456789"


def storm_config(ws, version):
    tok = T1 if version == 0 else T2
    cmd = ["python3 *"] if version == 0 else ["cat *"]
    deny = [{"paths": [ws + "/secret.txt"]}] if version == 0 else [{"commands": ["cat /etc/shadow"]}]
    paths = [ws + "/**"] if version == 0 else [ws + "/sub/**", ws + "/a.txt"]
    return {"workspace": ws, "terminal_listen": "off", "ledger": {"enabled": False},
            "auth": {"tokens": [{"principal": "mallory", "roles": ["agent"], "token_sha256": sha256_hex(tok)},
                                {"principal": "trent", "roles": ["agent"],
                                 "token_sha256": sha256_hex(T2 if version == 0 else T1)},
                                {"principal": "root", "roles": ["admin"], "token_sha256": sha256_hex(ADMIN_TOKEN)}]},
            "policy": {"allow": [{"ops": ["system.policy.reload"], "principals": ["root"]},
                                 {"ops": ["files.read"], "principals": ["mallory"], "paths": paths},
                                 {"ops": ["commands.run"], "principals": ["mallory"], "paths": [ws + "/**"],
                                  "commands": cmd}],
                       "deny": deny}}


def raw_call(port, method, path, token, body=None, source=None):
    c = socket.create_connection(("127.0.0.1", port), timeout=20, source_address=(source, 0) if source else None)
    try:
        data = json.dumps(body).encode() if body is not None else b""
        head = "%s %s HTTP/1.1\r\nHost: 127.0.0.1\r\nAuthorization: Bearer %s\r\nConnection: close\r\n" % (
            method, path, token)
        if body is not None:
            head += "Content-Type: application/json\r\nContent-Length: %d\r\n" % len(data)
        c.sendall(head.encode() + b"\r\n" + data)
        out = b""
        while True:
            d = c.recv(65536)
            if not d:
                break
            out += d
        return RawResponse(out)
    finally:
        c.close()


def test_reload_storm_tokens_commands_and_denies(abx, workspace):
    """Two configs alternate (SIGHUP and system.policy.reload) while four clients call.
    Tokens rotate: T1 is mallory's in the first config and trent's (who may call
    nothing) in the second, T2 the other way round, T3 is nobody's. The first config
    runs python3 and reads the whole workspace but denies secret.txt with a deny path;
    the second runs cat and reads only a.txt and sub/. Nothing neither config admits
    may ever succeed: T3 never authenticates, `touch` never runs, secret.txt is never
    read. Each request comes from its own loopback address so the failed-attempt limit
    does not hide the decisions."""
    if not _can_bind("127.0.2.1"):
        pytest.skip("cannot bind 127.0.x.y source addresses")
    with open(os.path.join(workspace, "secret.txt"), "w") as f:
        f.write("storm-secret\n")
    s = abx(storm_config(workspace, 0))
    versions = [json.dumps(storm_config(workspace, v)) for v in (0, 1)]
    stop = time.time() + 4
    bad, ok = [], {"T1": 0, "T2": 0, "b.txt": 0, "cat": 0}
    counter_lock = threading.Lock()
    seq = [0]

    def source():
        with counter_lock:
            seq[0] += 1
            n = seq[0]
        return "127.0.%d.%d" % (2 + (n // 250) % 50, 1 + n % 250)

    def hammer(n):
        while time.time() < stop:
            for name, tok in (("T1", T1), ("T2", T2), ("T3", T3)):
                r = raw_call(s.port, "GET", "/files/read?path=secret.txt", tok, source=source())
                if r.status == 200:
                    bad.append("%s read the secret" % name)
                r = raw_call(s.port, "POST", "/commands/run", tok, {"argv": ["touch", "pwned-%d" % n]}, source())
                if r.status == 200:
                    bad.append("%s ran touch" % name)
                r = raw_call(s.port, "GET", "/files/read?path=a.txt", tok, source=source())
                if r.status == 200:
                    if name == "T3":
                        bad.append("T3 authenticated")
                    ok[name] += 1
                elif r.status not in (401, 404, 429):
                    bad.append("%s a.txt: %s" % (name, r.raw[:160]))
            r = raw_call(s.port, "GET", "/files/read?path=b.txt", T1, source=source())
            ok["b.txt"] += r.status == 200
            r = raw_call(s.port, "POST", "/commands/run", T2, {"argv": ["cat", "a.txt"]}, source())
            ok["cat"] += r.status == 200

    ths = [threading.Thread(target=hammer, args=(i,)) for i in range(4)]
    for t in ths:
        t.start()
    i = 0
    while time.time() < stop:
        with open(s.config_path, "w") as f:
            f.write(versions[i % 2])
        if i % 2:
            os.kill(s.proc.pid, signal.SIGHUP)
        else:
            r = s.post("/system/policy/reload", token=ADMIN_TOKEN)
            assert r.status_code == 200, r.text
        i += 1
        time.sleep(0.05)
    for t in ths:
        t.join(30)
    assert not bad, bad[:5]
    assert i > 20
    # both configs were in force in turn (tokens may get limited by their own fingerprint)
    assert ok["b.txt"] > 0 and ok["cat"] > 0, ok
    assert not [n for n in os.listdir(workspace) if n.startswith("pwned")]


def test_broken_config_in_a_storm_keeps_the_last_good_policy(abx, workspace):
    s = abx(storm_config(workspace, 0))
    good = json.dumps(storm_config(workspace, 0))
    broken = ['{"policy": ', json.dumps({"workspace": workspace, "policy": {"allow": [{"ops": ["nope.*"]}]}}),
              json.dumps({"workspace": workspace, "auth": {"tokens": [{"principal": "x", "token": "short"}]}})]
    for i in range(30):
        with open(s.config_path, "w") as f:
            f.write(broken[i % len(broken)])
        r = s.post("/system/policy/reload", token=ADMIN_TOKEN)
        assert_error(r, 400, "config.reload_failed")
        r = s.get("/files/read", token=T1, params={"path": "a.txt"})
        assert r.status_code == 200, r.text
        assert_error(s.get("/files/read", token=T1, params={"path": "secret.txt"}), 403, "policy.path_denied")
    with open(s.config_path, "w") as f:
        f.write(good)
    assert s.post("/system/policy/reload", token=ADMIN_TOKEN).status_code == 200
