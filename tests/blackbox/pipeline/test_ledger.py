"""The action ledger, seen from outside: the SQLite file (tables, append-only triggers, hash
chain), what every call leaves there (401/404/400/403/200, flood aggregation, redaction),
durability of mutating calls (before the handler, before the answer, across kill -9), the
offline CLI (verify/anchor/tail/show/export), the ledger.unavailable fail-closed mode, the
ledger.timeline / ledger.get projection, and Idempotency-Key.

Tests that wait for the wall-clock minute to turn share one module-scoped server: the flood
is sent by the first test, its aggregation is checked by the last one (so the wait overlaps
the rest of the module)."""
import hashlib
import json
import os
import shutil
import sqlite3
import subprocess
import threading
import time

import pytest
import requests

from abxtest import (ADMIN_TOKEN, ALICE_TOKEN, BOB_TOKEN, CAROL_TOKEN, OWNER_TOKEN, AbxServer, assert_error, run_abx,
                    sanitizer_report, tokens)


APPEND_ONLY_MSG = "the ledger is append-only"


# -- helpers ------------------------------------------------------------------------------------

def make_config(ws, ledger=None):
    policy = {"allow": [
        {"ops": ["core.*", "ledger.*"], "principals": ["*"]},
        {"ops": ["core.explain"], "principals": ["role:admin"]},
        {"ops": ["files.*"], "principals": ["role:agent"], "paths": [ws + "/**"]},
        {"ops": ["commands.run"], "principals": ["role:agent"], "paths": [ws + "/**"],
         "commands": {"allow": ["sh *", "echo *", "cat *", "touch *"], "env": ["FOO"]}},
    ]}
    cfg = {"workspace": ws, "terminal_listen": "off", "auth": {"tokens": tokens("alice", "bob", "carol", "root", "olga")},
           "policy": policy}
    if ledger is not None:
        cfg["ledger"] = ledger
    return cfg


def H(tok):
    return {"Authorization": "Bearer " + tok}


def ok(r):
    assert r.status_code == 200, "%s %s" % (r.status_code, r.text[:800])
    return r.json()


def rid(r):
    v = r.headers.get("X-Request-Id")
    assert v, "no X-Request-Id header: %r" % dict(r.headers)
    return v


def q(path, sql, args=()):
    con = sqlite3.connect(path, timeout=10)
    try:
        return con.execute(sql, args).fetchall()
    finally:
        con.close()


def group_of(path, request_id, want_kind="finished", timeout=2.0):
    """(group row dict, [events]) of the group recorded for request_id, waiting (bounded) until
    an event of want_kind is there."""
    deadline = time.time() + timeout
    while True:
        rows = q(path, "SELECT group_id, request_id, principal, op, door, client, created_at, batch_group"
                       " FROM action_groups WHERE request_id = ?", (request_id,))
        evs = []
        if rows:
            evs = [{"ordinal": o, "seq": sq, "kind": k, "data": json.loads(dt)} for o, sq, k, dt in
                   q(path, "SELECT ordinal, seq, kind, data FROM action_events WHERE group_id = ? ORDER BY ordinal",
                     (rows[0][0],))]
            if want_kind is None or any(e["kind"] == want_kind for e in evs):
                keys = ["group_id", "request_id", "principal", "op", "door", "client", "created_at", "batch_group"]
                return dict(zip(keys, rows[0])), evs
        if time.time() >= deadline:
            raise AssertionError("request %s: no group with a %r event in the ledger after %.1fs (rows=%r events=%r)"
                                 % (request_id, want_kind, timeout, rows, [e["kind"] for e in evs]))
        time.sleep(0.05)


def kinds(evs):
    return [e["kind"] for e in evs]


def one(evs, kind):
    xs = [e for e in evs if e["kind"] == kind]
    assert len(xs) == 1, "expected one %r event, got %r" % (kind, kinds(evs))
    return xs[0]["data"]


def ledger_cli(args, timeout=30):
    return run_abx(["ledger"] + list(args), timeout=timeout)


def verify(path, anchor=None):
    a = ["verify", "--path", path]
    if anchor:
        a += ["--anchor", anchor]
    return ledger_cli(a)


def settle(path, timeout=2.0):
    """Wait until the number of events stops growing (non-durable events are flushed)."""
    deadline = time.time() + timeout
    last = -1
    while time.time() < deadline:
        n = q(path, "SELECT COUNT(*) FROM action_events")[0][0]
        if n == last:
            return n
        last = n
        time.sleep(0.3)
    return last


@pytest.fixture
def led(abx, workspace, tmp_path):
    """A server with its ledger at an explicit path: (server, ledger path)."""
    path = str(tmp_path / "ledger.db")
    s = abx(make_config(workspace, ledger={"path": path}))
    return s, path


# -- flood aggregation (first half; the second half is the last test of this module) -------------

def _wall_minute():
    return int(time.time() // 60)


@pytest.fixture(scope="module")
def flood(tmp_path_factory):
    """One server flooded with 30 unauthenticated (401) and 30 unmounted (404) calls in one minute."""
    base = str(tmp_path_factory.mktemp("flood"))
    ws = os.path.join(base, "ws")
    os.makedirs(ws)
    ws = os.path.realpath(ws)
    d = os.path.join(base, "srv")
    os.makedirs(d)
    path = os.path.join(base, "ledger.db")
    s = AbxServer(d, config=make_config(ws, ledger={"path": path}), workspace=ws, use_workspace_flag=False)
    s.start()
    try:
        # keep the flood inside one wall-clock minute (bounded wait: at most ~6 s)
        if time.time() % 60 > 54:
            time.sleep(60.3 - time.time() % 60)
        minute = _wall_minute()
        sess = requests.Session()
        s401 = [sess.get(s.url + "/files/list", params={"path": ws}, timeout=5) for _ in range(30)]
        s404 = [sess.post(s.url + "/ops/nosuch.op", headers=H(BOB_TOKEN), json={}, timeout=5) for _ in range(30)]
        health = [sess.get(s.url + "/health", timeout=5) for _ in range(30)]
        authed = [sess.get(s.url + "/health", headers=H(ALICE_TOKEN), timeout=5) for _ in range(3)]
        assert _wall_minute() == minute, "the flood straddled a minute boundary"
        yield {"server": s, "path": path, "minute": minute, "r401": s401, "r404": s404, "health": health,
               "authed_health": authed, "ws": ws}
    finally:
        try:
            s.stop()
        finally:
            s.kill()
        rep = sanitizer_report(s.stderr())
        assert rep is None, "%s in server stderr:\n%s" % (rep, s.stderr()[-4000:])


def _groups_with_status(path, status):
    out = []
    for gid, rq in q(path, "SELECT group_id, request_id FROM action_groups ORDER BY group_id"):
        for (dt,) in q(path, "SELECT data FROM action_events WHERE group_id = ? AND kind = 'finished'", (gid,)):
            if json.loads(dt).get("status") == status:
                out.append((gid, rq))
    return out


def test_flood_of_401_and_404_is_one_group_per_minute(flood):
    for r in flood["r401"]:
        assert_error(r, 401, "auth.required")
    for r in flood["r404"]:
        assert_error(r, 404, "op.not_enabled")
    path = flood["path"]
    settle(path)
    g401 = _groups_with_status(path, 401)
    g404 = _groups_with_status(path, 404)
    assert len(g401) == 1, "30 401s in one minute from one client: want 1 group, got %r" % g401
    assert len(g404) == 1, "30 404s in one minute from one client: want 1 group, got %r" % g404
    # the recorded one is the first of the flood
    assert g401[0][1] == rid(flood["r401"][0])
    assert g404[0][1] == rid(flood["r404"][0])


def _health_groups(path, principal="anonymous"):
    sql = "SELECT request_id FROM action_groups WHERE op = 'core.health' AND principal = ?"
    return [rq for (rq,) in q(path, sql, (principal,))]


def test_anonymous_health_probes_are_summed_per_minute(flood):
    """A liveness probe names no one and touches nothing: 30 anonymous GET /health in one
    minute from one client are at most one group per minute (the server's own start-up
    probes may sit in the minute before); a principal's GET /health is recorded each time."""
    for r in flood["health"] + flood["authed_health"]:
        assert r.status_code == 200, r.text
    path = flood["path"]
    settle(path)
    recorded = set(_health_groups(path))
    assert recorded, "no anonymous probe recorded at all"
    assert len(recorded) <= 2, "30 probes in one minute: want at most 2 groups, got %d" % len(recorded)
    assert sum(rid(r) in recorded for r in flood["health"]) <= 1
    mine = _health_groups(path, "alice")
    assert sorted(mine) == sorted(rid(r) for r in flood["authed_health"]), mine


# -- the file ------------------------------------------------------------------------------------

def test_default_path_beside_config_and_schema(abx, workspace):
    s = abx(make_config(workspace))
    ok(s.get("/files/list", token=ALICE_TOKEN, params={"path": workspace}))
    path = os.path.join(os.path.dirname(s.config_path), ".abx", "ledger.db")
    assert os.path.isfile(path), os.listdir(os.path.dirname(s.config_path))
    tables = {r[0] for r in q(path, "SELECT name FROM sqlite_master WHERE type = 'table'")}
    assert {"action_groups", "action_events", "execution_attempts"} <= tables, tables
    cols = [r[1] for r in q(path, "PRAGMA table_info(action_events)")]
    for c in ("ordinal", "group_id", "seq", "kind", "at", "data", "prev_hash", "hash"):
        assert c in cols, cols
    gcols = [r[1] for r in q(path, "PRAGMA table_info(action_groups)")]
    for c in ("group_id", "request_id", "batch_group"):
        assert c in gcols, gcols
    # `abx ledger ... --config F` finds the same default file
    r = ledger_cli(["verify", "--config", s.config_path])
    assert r.returncode == 0 and r.stdout.startswith("ok: "), r.stdout + r.stderr


def test_synchronous_full_is_accepted_and_records(abx, workspace, tmp_path):
    path = str(tmp_path / "full.db")
    s = abx(make_config(workspace, ledger={"path": path, "synchronous": "full"}))
    r = s.post("/files/write", token=ALICE_TOKEN, json_body={"path": workspace + "/f.txt", "content": "x"})
    ok(r)
    _, evs = group_of(path, rid(r), timeout=0.01)
    assert kinds(evs) == ["received", "admitted", "started", "finished"]


def test_unused_principal_index_is_gone_and_an_old_ledger_loses_it(abx, workspace, tmp_path):
    """No query of the ledger reaches a group by principal, so the index on it only made
    every call pay a fourth B-tree insert: a new ledger has none, a ledger an older abx
    wrote with one loses it when it is opened, and its chain still verifies."""
    path = str(tmp_path / "old.db")
    cfg = make_config(workspace, ledger={"path": path})
    s = abx(cfg)
    ok(s.get("/files/list", token=ALICE_TOKEN, params={"path": workspace}))
    settle(path)
    index_sql = "SELECT name FROM sqlite_master WHERE type = 'index' AND name = 'action_groups_principal'"
    assert q(path, index_sql) == []
    plan = q(path, "EXPLAIN QUERY PLAN SELECT e.ordinal FROM action_events e JOIN action_groups g"
                   " ON g.group_id = e.group_id WHERE e.ordinal < 9 AND g.principal = 'alice'"
                   " ORDER BY e.ordinal DESC LIMIT 5")
    assert all("action_groups_principal" not in str(row) for row in plan), plan
    s.stop()
    con = sqlite3.connect(path)
    con.execute("CREATE INDEX action_groups_principal ON action_groups(principal, group_id)")
    con.commit()
    con.close()
    assert q(path, index_sql) != []
    s = abx(cfg)
    r = s.get("/files/list", token=ALICE_TOKEN, params={"path": workspace})
    ok(r)
    group_of(path, rid(r))
    assert q(path, index_sql) == []
    s.stop()
    v = verify(path)
    assert v.returncode == 0 and v.stdout.startswith("ok: "), v.stdout + v.stderr


def test_new_segments_use_16k_pages_old_ones_keep_theirs(abx, workspace, tmp_path):
    """A new ledger is made with 16 KiB pages (fewer WAL frames per group commit), unless
    its segments rotate under 16 MiB; one made with 4 KiB pages (every ledger before) keeps
    them, is written on and verifies."""
    new = str(tmp_path / "new.db")
    s = abx(make_config(workspace, ledger={"path": new}))
    ok(s.get("/files/list", token=ALICE_TOKEN, params={"path": workspace}))
    settle(new)
    s.stop()
    assert q(new, "PRAGMA page_size") == [(16384,)]
    small = str(tmp_path / "small.db")  # segments that rotate small keep 4 KiB pages
    s = abx(make_config(workspace, ledger={"path": small, "max_size": "1MiB"}))
    ok(s.get("/files/list", token=ALICE_TOKEN, params={"path": workspace}))
    settle(small)
    s.stop()
    assert q(small, "PRAGMA page_size") == [(4096,)]
    old = str(tmp_path / "old4k.db")
    con = sqlite3.connect(old)
    con.execute("PRAGMA page_size=4096")
    con.execute("PRAGMA journal_mode=WAL")
    con.execute("CREATE TABLE made_with_4k_pages(x)")  # a written page fixes the page size
    con.commit()
    con.close()
    s = abx(make_config(workspace, ledger={"path": old}))
    for _ in range(3):
        r = s.get("/files/list", token=ALICE_TOKEN, params={"path": workspace})
        ok(r)
    group_of(old, rid(r))
    s.stop()
    assert q(old, "PRAGMA page_size") == [(4096,)]
    v = verify(old)
    assert v.returncode == 0 and v.stdout.startswith("ok: "), v.stdout + v.stderr


def test_disabled_ledger_writes_no_file(abx, workspace):
    s = abx(make_config(workspace, ledger={"enabled": False}))
    ok(s.post("/files/write", token=ALICE_TOKEN, json_body={"path": workspace + "/d.txt", "content": "x"}))
    ok(s.get("/files/list", token=ALICE_TOKEN, params={"path": workspace}))
    time.sleep(0.3)
    d = os.path.dirname(s.config_path)
    assert not os.path.exists(os.path.join(d, ".abx", "ledger.db"))
    assert open(os.path.join(workspace, "d.txt")).read() == "x"


# -- every call is recorded ------------------------------------------------------------------------

def test_every_kind_of_call_is_recorded(led, workspace):
    s, path = led
    r401 = s.get("/files/list", params={"path": workspace})
    assert_error(r401, 401, "auth.required")
    r404 = s.get("/files/read", token=BOB_TOKEN, params={"path": workspace + "/a.txt"})
    assert_error(r404, 404, "op.not_enabled")
    r400 = s.get("/files/read", token=ALICE_TOKEN, params={"path": workspace + "/a.txt", "offset": "-5"})
    assert r400.status_code == 400, r400.text
    r403 = s.get("/files/read", token=ALICE_TOKEN, params={"path": "/etc/hostname"})
    assert r403.status_code == 403, r403.text
    r200 = s.get("/files/read", token=ALICE_TOKEN, params={"path": workspace + "/a.txt"})
    ok(r200)
    rbad = s.post("/files/write", token=ALICE_TOKEN, data="{", headers={"Content-Type": "application/json"})
    assert_error(rbad, 400, "request.bad_json")
    _, e = group_of(path, rid(rbad))
    assert kinds(e) == ["received", "rejected", "finished"], kinds(e)
    assert one(e, "rejected")["code"] == "request.bad_json"

    _, e = group_of(path, rid(r401))
    assert kinds(e)[0] == "received" and kinds(e)[-1] == "finished"
    assert one(e, "finished")["status"] == 401
    assert "admitted" not in kinds(e) and "started" not in kinds(e)

    _, e = group_of(path, rid(r404))
    assert one(e, "finished")["status"] == 404
    assert "admitted" not in kinds(e)

    _, e = group_of(path, rid(r400))
    assert kinds(e) == ["received", "rejected", "finished"], kinds(e)
    assert one(e, "rejected")["code"] == r400.json()["error"]["code"]
    assert one(e, "finished")["status"] == 400

    g, e = group_of(path, rid(r403))
    assert kinds(e) == ["received", "denied", "finished"], kinds(e)
    assert one(e, "denied")["code"] == r403.json()["error"]["code"]
    assert one(e, "denied")["code"].startswith("policy."), one(e, "denied")
    assert one(e, "finished")["status"] == 403
    assert g["principal"] == "alice" and g["op"] == "files.read"

    g, e = group_of(path, rid(r200))
    # a read that ran is one event: "finished" carries what "received" would and its
    # admission (determining statements, redacted arguments, canonical paths)
    # (docs/policy.md, "The action ledger")
    assert kinds(e) == ["finished"], kinds(e)
    adm = one(e, "finished")
    assert adm["paths"].get("path") == workspace + "/a.txt", adm
    assert adm["args"].get("path") == workspace + "/a.txt", adm
    assert isinstance(adm.get("determining"), str) and adm["determining"], adm
    fin = one(e, "finished")
    assert fin["status"] == 200 and fin.get("code") is None and isinstance(fin.get("duration_ms"), (int, float))
    assert g["principal"] == "alice" and g["request_id"] == rid(r200)
    # each group's request id is the one its call answered with, and its event says so too
    assert fin["request_id"] == rid(r200) and fin["principal"] == "alice" and fin["op"] == "files.read", fin
    assert fin["door"] == "http" and fin["target"] == "/files/read", fin


def test_non_mutating_call_appears_within_a_second(led, workspace):
    s, path = led
    r = s.get("/files/stat", token=ALICE_TOKEN, params={"path": workspace + "/b.txt"})
    ok(r)
    t0 = time.time()
    group_of(path, rid(r), timeout=1.5)
    assert time.time() - t0 <= 1.5


def test_mutating_call_is_durable_before_handler_and_finished_before_answer(led, workspace):
    s, path = led
    go = os.path.join(workspace, "go")
    script = "n=0; while [ ! -e %s ] && [ $n -lt 200 ]; do sleep 0.05; n=$((n+1)); done; echo ran" % go
    box = {}

    def call():
        box["r"] = s.post("/commands/run", token=ALICE_TOKEN, json_body={"argv": ["sh", "-c", script]}, timeout=20)

    t = threading.Thread(target=call)
    t.start()
    try:
        # while the handler runs (waiting for `go`), received+admitted+started are committed
        deadline = time.time() + 5
        seen = None
        while time.time() < deadline and seen is None:
            for gid, rq in q(path, "SELECT group_id, request_id FROM action_groups WHERE op = 'commands.run'"):
                ks = [k for (k,) in q(path, "SELECT kind FROM action_events WHERE group_id = ? ORDER BY ordinal",
                                      (gid,))]
                if "started" in ks:
                    seen = (rq, ks)
            time.sleep(0.05)
        assert seen, "no committed started event for the running commands.run"
        assert seen[1] == ["received", "admitted", "started"], seen
        assert "r" not in box, "the call answered before `go` existed"
    finally:
        open(go, "w").close()
        t.join(25)
    r = box["r"]
    assert ok(r)["stdout"] == "ran\n"
    assert rid(r) == seen[0]
    # finished is there the moment the answer is
    _, e = group_of(path, rid(r), timeout=0.0)
    fin = one(e, "finished")
    assert fin["status"] == 200
    adm = one(e, "admitted")
    assert adm.get("argv") and adm["argv"][1:] == ["-c", script], adm
    st = one(e, "started")
    assert isinstance(st.get("attempt_id"), int)
    att = q(path, "SELECT attempt_id, group_id FROM execution_attempts WHERE attempt_id = ?", (st["attempt_id"],))
    assert att and att[0][1] == group_of(path, rid(r), timeout=0)[0]["group_id"]


def test_kill9_under_mutating_load_keeps_chain_and_answered_calls(led, workspace):
    s, path = led
    answered, errors = [], []
    stop = threading.Event()

    def worker(k):
        sess = requests.Session()
        i = 0
        while not stop.is_set():
            i += 1
            try:
                if i % 3 == 0:
                    r = sess.post(s.url + "/commands/run", headers=H(ALICE_TOKEN),
                                  json={"argv": ["echo", "k%d-%d" % (k, i)]}, timeout=10)
                else:
                    r = sess.post(s.url + "/files/write", headers=H(ALICE_TOKEN),
                                  json={"path": "%s/load-%d-%d.txt" % (workspace, k, i), "content": "v%d" % i},
                                  timeout=10)
            except requests.RequestException:
                continue
            if r.status_code == 200:
                answered.append(r.headers.get("X-Request-Id"))
            else:
                errors.append((r.status_code, r.text[:200]))

    ts = [threading.Thread(target=worker, args=(k,)) for k in range(5)]
    for t in ts:
        t.start()
    time.sleep(1.5)
    os.killpg(s.proc.pid, 9)
    s.proc.wait(timeout=10)
    stop.set()
    for t in ts:
        t.join(15)
    assert not errors, errors[:5]
    assert len(answered) >= 20, "too little load: %d answered" % len(answered)
    assert all(answered)
    r = verify(path)
    assert r.returncode == 0, r.stdout + r.stderr
    assert r.stdout.startswith("ok: ") and "chain intact" in r.stdout, r.stdout
    rows = q(path, "SELECT g.request_id, e.kind FROM action_groups g JOIN action_events e ON e.group_id = g.group_id")
    have = {}
    for rq, k in rows:
        have.setdefault(rq, set()).add(k)
    missing = [a for a in answered if a not in have]
    assert not missing, "%d answered mutating calls are not in the ledger, e.g. %s" % (len(missing), missing[:3])
    unfinished = [a for a in answered if "finished" not in have[a]]
    assert not unfinished, "answered calls without a finished event: %s" % unfinished[:3]


# -- redaction ---------------------------------------------------------------------------------------

def _digest(v):
    return {"sha256": hashlib.sha256(v.encode()).hexdigest(), "size": len(v.encode())}


def test_arguments_are_redacted(led, workspace):
    s, path = led
    secrets = {
        "content": "CONTENT-SECRET-1111", "stdin": "STDIN-SECRET-2222", "env": "ENV-SECRET-3333",
        "old": "CONTENT", "new": "NEWTEXT-SECRET-4444", "api_key": "APIKEY-SECRET-5555",
        "db_password": "PASSWORD-SECRET-6666", "access_token": "TOKEN-SECRET-7777",
        "client_secret": "CLIENTSECRET-8888", "credentials": "CRED-SECRET-9999",
        "authorization": "AUTHZ-SECRET-0000", "ex_content": "EXPLAIN-CONTENT-SECRET",
    }
    w = s.post("/files/write", token=ALICE_TOKEN,
               json_body={"path": workspace + "/r.txt", "content": secrets["content"]})
    ok(w)
    e = s.post("/files/edit", token=ALICE_TOKEN,
               json_body={"path": workspace + "/r.txt", "old": secrets["old"], "new": secrets["new"]})
    ok(e)
    c = s.post("/commands/run", token=ALICE_TOKEN,
               json_body={"argv": ["sh", "-c", "cat > /dev/null; echo done"], "stdin": secrets["stdin"],
                          "env": {"FOO": secrets["env"]}})
    assert ok(c)["stdout"] == "done\n"
    inner = {"path": workspace + "/x.txt", "content": secrets["ex_content"], "api_key": secrets["api_key"],
             "db_password": secrets["db_password"], "access_token": secrets["access_token"],
             "client_secret": secrets["client_secret"], "credentials": secrets["credentials"],
             "authorization": secrets["authorization"]}
    x = s.post("/explain", token=ADMIN_TOKEN, json_body={"op": "files.write", "principal": "alice", "args": inner})
    ok(x)

    a = one(group_of(path, rid(w))[1], "admitted")["args"]
    assert a["content"] == _digest(secrets["content"]), a
    assert a["path"] == workspace + "/r.txt"
    a = one(group_of(path, rid(e))[1], "admitted")["args"]
    assert a["old"] == _digest(secrets["old"]) and a["new"] == _digest(secrets["new"]), a
    ad = one(group_of(path, rid(c))[1], "admitted")
    assert ad["args"]["stdin"] == _digest(secrets["stdin"]), ad
    assert ad["args"]["env"] == {"FOO": _digest(secrets["env"])}, ad
    assert ad["args"]["argv"] == ["sh", "-c", "cat > /dev/null; echo done"], ad
    assert ad.get("argv") and ad["argv"][1:] == ["-c", "cat > /dev/null; echo done"], ad
    ia = one(group_of(path, rid(x))[1], "admitted")["args"]["args"]
    for k in ("api_key", "db_password", "access_token", "client_secret", "credentials", "authorization"):
        assert ia[k] == _digest(inner[k]), (k, ia)
    assert ia["content"] == _digest(inner["content"]), ia
    assert ia["path"] == inner["path"], ia
    # and no secret appears anywhere in the file
    settle(path)
    s.stop()
    blob = b""
    for suffix in ("", "-wal"):
        if os.path.exists(path + suffix):
            blob += open(path + suffix, "rb").read()
    for k, v in secrets.items():
        if k == "old":
            continue  # a common word
        assert v.encode() not in blob, "%s (%s) is in the ledger file in clear" % (k, v)


def test_secret_key_names_are_redacted_whatever_their_case(led, workspace):
    """Header-style and upper-case spellings of secret names (Authorization, DB_PASSWORD,
    GitHubToken, X-Api-Key style API_KEY) are still secrets."""
    s, path = led
    inner = {"path": workspace + "/x.txt", "content": "c", "Authorization": "Bearer AUTHZ-CASE-SECRET",
             "DB_PASSWORD": "PW-CASE-SECRET", "GitHubToken": "GH-CASE-SECRET", "API_KEY": "AK-CASE-SECRET"}
    x = s.post("/explain", token=ADMIN_TOKEN, json_body={"op": "files.write", "principal": "alice", "args": inner})
    ok(x)
    ia = one(group_of(path, rid(x))[1], "admitted")["args"]["args"]
    clear = [k for k in ("Authorization", "DB_PASSWORD", "GitHubToken", "API_KEY") if ia.get(k) != _digest(inner[k])]
    assert not clear, "kept in clear: %s" % {k: ia.get(k) for k in clear}


# -- append-only, verify, anchor ------------------------------------------------------------------------

@pytest.fixture(scope="module")
def base_ledger(tmp_path_factory):
    """A finished ledger with a few dozen events (server stopped): path of a pristine copy."""
    base = str(tmp_path_factory.mktemp("baseled"))
    ws = os.path.realpath(os.path.join(base, "ws"))
    os.makedirs(ws)
    d = os.path.join(base, "srv")
    os.makedirs(d)
    path = os.path.join(base, "ledger.db")
    s = AbxServer(d, config=make_config(ws, ledger={"path": path}), workspace=ws, use_workspace_flag=False)
    s.start()
    try:
        for i in range(6):
            ok(s.post("/files/write", token=ALICE_TOKEN, json_body={"path": "%s/f%d" % (ws, i), "content": "%d" % i}))
            ok(s.get("/files/read", token=ALICE_TOKEN, params={"path": "%s/f%d" % (ws, i)}))
        s.get("/files/list", token=BOB_TOKEN, params={"path": ws})
        time.sleep(0.5)
    finally:
        s.stop()
        s.kill()
    assert s.returncode == 0, s.stderr()[-2000:]
    # fold the WAL in, so a plain file copy is the whole ledger
    con = sqlite3.connect(path)
    con.execute("PRAGMA wal_checkpoint(TRUNCATE)")
    con.close()
    return path


@pytest.fixture
def ledcopy(base_ledger, tmp_path):
    p = str(tmp_path / "copy.db")
    shutil.copyfile(base_ledger, p)
    return p


def test_triggers_refuse_update_and_delete(ledcopy):
    con = sqlite3.connect(ledcopy)
    try:
        stmts = [
            "UPDATE action_events SET data = '{}' WHERE ordinal = 2",
            "DELETE FROM action_events WHERE ordinal = 2",
            "UPDATE action_groups SET principal = 'mallory' WHERE group_id = 1",
            "DELETE FROM action_groups WHERE group_id = 1",
            "UPDATE execution_attempts SET group_id = 99",
            "DELETE FROM execution_attempts",
        ]
        for sql in stmts:
            with pytest.raises(sqlite3.DatabaseError) as ei:
                con.execute(sql)
            assert APPEND_ONLY_MSG in str(ei.value), (sql, str(ei.value))
            con.rollback()
    finally:
        con.close()
    # the sqlite3 CLI gets the same answer
    if shutil.which("sqlite3"):
        r = subprocess.run(["sqlite3", ledcopy, "DELETE FROM action_events;"], capture_output=True, text=True,
                           timeout=20)
        assert r.returncode != 0 and APPEND_ONLY_MSG in r.stderr, (r.returncode, r.stderr)
    r = verify(ledcopy)
    assert r.returncode == 0, r.stdout


def test_verify_ok_and_anchor(ledcopy):
    n = q(ledcopy, "SELECT COUNT(*) FROM action_events")[0][0]
    r = verify(ledcopy)
    assert r.returncode == 0, r.stdout + r.stderr
    assert r.stdout.strip().startswith("ok: %d events, chain intact" % n), r.stdout
    a = ledger_cli(["anchor", "--path", ledcopy])
    assert a.returncode == 0, a.stderr
    anchor = a.stdout.strip()
    h, _, cnt = anchor.partition(":")
    assert len(h) == 64 and int(cnt) == n, anchor
    last = q(ledcopy, "SELECT hash FROM action_events ORDER BY ordinal DESC LIMIT 1")[0][0]
    assert h == last
    r = verify(ledcopy, anchor)
    assert r.returncode == 0 and r.stdout.startswith("ok: "), r.stdout
    # an anchor for an earlier prefix also matches
    mid = q(ledcopy, "SELECT hash FROM action_events WHERE ordinal = 5")[0][0]
    r = verify(ledcopy, "%s:5" % mid)
    assert r.returncode == 0, r.stdout
    # a wrong hash for the prefix does not
    r = verify(ledcopy, "%s:5" % last)
    assert r.returncode == 1 and r.stdout.startswith("TAMPERED"), r.stdout


def _drop_triggers(con):
    for (name,) in con.execute("SELECT name FROM sqlite_master WHERE type = 'trigger'").fetchall():
        con.execute("DROP TRIGGER %s" % name)


TAMPERS = {
    "edit_data": ["UPDATE action_events SET data = replace(data, 'alice', 'mallory') WHERE ordinal = "
                  "(SELECT MIN(ordinal) FROM action_events WHERE data LIKE '%alice%')"],
    "edit_kind": ["UPDATE action_events SET kind = 'denied' WHERE kind = 'admitted' AND ordinal = "
                  "(SELECT MIN(ordinal) FROM action_events WHERE kind = 'admitted')"],
    "edit_group": ["UPDATE action_groups SET principal = 'mallory' WHERE principal = 'alice' AND group_id = "
                   "(SELECT MIN(group_id) FROM action_groups WHERE principal = 'alice')"],
    "delete_middle": ["DELETE FROM action_events WHERE ordinal = (SELECT MAX(ordinal) / 2 FROM action_events)"],
    "delete_middle_renumbered": [
        "DELETE FROM action_events WHERE ordinal = 7",
        "UPDATE action_events SET ordinal = ordinal - 1 WHERE ordinal > 7"],
    "reorder": ["UPDATE action_events SET ordinal = -1 WHERE ordinal = 4",
                "UPDATE action_events SET ordinal = 4 WHERE ordinal = 5",
                "UPDATE action_events SET ordinal = 5 WHERE ordinal = -1"],
    # rows of the other two tables are history too: a deleted group hides its events from
    # export/timeline (they are joined), a deleted attempt erases a start
    "delete_middle_group": ["DELETE FROM action_groups WHERE group_id = (SELECT MAX(group_id) / 2 FROM action_groups)"],
    "delete_middle_attempt": ["DELETE FROM execution_attempts WHERE attempt_id = "
                              "(SELECT MAX(attempt_id) / 2 FROM execution_attempts)"],
    "edit_group_client": ["UPDATE action_groups SET client = '10.6.6.6' WHERE group_id = "
                          "(SELECT MAX(group_id) / 2 FROM action_groups)"],
    "edit_group_batch_group": ["UPDATE action_groups SET batch_group = 1 WHERE group_id = "
                               "(SELECT MAX(group_id) / 2 FROM action_groups)"],
    "renumber_last": ["UPDATE action_events SET ordinal = ordinal + 1000 WHERE ordinal = "
                      "(SELECT MAX(ordinal) FROM action_events)"],
}


@pytest.mark.parametrize("how", sorted(TAMPERS))
def test_verify_detects_tampering(ledcopy, how):
    assert verify(ledcopy).returncode == 0
    con = sqlite3.connect(ledcopy)
    _drop_triggers(con)
    for sql in TAMPERS[how]:
        cur = con.execute(sql)
        assert cur.rowcount >= 1, (how, sql)
    con.commit()
    con.close()
    r = verify(ledcopy)
    assert r.returncode == 1, "%s: %s" % (how, r.stdout)
    assert r.stdout.startswith("TAMPERED"), r.stdout


def test_verify_detects_truncated_tail_with_anchor(ledcopy):
    anchor = ledger_cli(["anchor", "--path", ledcopy]).stdout.strip()
    con = sqlite3.connect(ledcopy)
    _drop_triggers(con)
    con.execute("DELETE FROM action_events WHERE ordinal > (SELECT MAX(ordinal) - 3 FROM action_events)")
    con.commit()
    con.close()
    r = verify(ledcopy, anchor)
    assert r.returncode == 1 and r.stdout.startswith("TAMPERED"), r.stdout


def test_cli_tail_show_export(ledcopy):
    rows = q(ledcopy, "SELECT ordinal, group_id, kind FROM action_events ORDER BY ordinal")
    r = ledger_cli(["tail", "-n", "3", "--path", ledcopy])
    assert r.returncode == 0, r.stderr
    lines = [json.loads(x) for x in r.stdout.splitlines() if x.strip()]
    assert [x["ordinal"] for x in lines] == [o for o, _, _ in rows[-3:]], lines
    g = rows[len(rows) // 2][1]
    r = ledger_cli(["show", str(g), "--path", ledcopy])
    assert r.returncode == 0, r.stderr
    lines = [json.loads(x) for x in r.stdout.splitlines() if x.strip()]
    assert lines and all(x["group_id"] == g for x in lines), lines
    assert [x["kind"] for x in lines] == [k for _, gg, k in rows if gg == g]
    r = ledger_cli(["export", "--path", ledcopy])
    assert r.returncode == 0, r.stderr
    lines = [json.loads(x) for x in r.stdout.splitlines() if x.strip()]
    assert len(lines) == len(rows)
    assert [(x["ordinal"], x["group_id"], x["kind"]) for x in lines] == rows
    assert all(isinstance(x.get("data"), dict) for x in lines)


# -- fail closed when the ledger cannot be written ----------------------------------------------------

def test_ledger_unavailable_refuses_mutating_calls(abx, workspace, tmp_path):
    mnt = str(tmp_path / "mnt")
    os.makedirs(mnt)
    m = subprocess.run(["mount", "-t", "tmpfs", "-o", "size=1m", "tmpfs", mnt], capture_output=True, text=True,
                       timeout=20)
    if m.returncode != 0:
        pytest.skip("cannot mount a tmpfs: %s" % m.stderr.strip())
    path = os.path.join(mnt, "ledger.db")
    try:
        s = abx(make_config(workspace, ledger={"path": path}))
        ok(s.post("/files/write", token=ALICE_TOKEN, json_body={"path": workspace + "/before.txt", "content": "x"}))
        filler = os.path.join(mnt, "filler")
        with pytest.raises(OSError):
            with open(filler, "wb") as f:
                for _ in range(4096):
                    f.write(b"\0" * 4096)
                    f.flush()
        for i in range(3):
            r = s.post("/files/write", token=ALICE_TOKEN,
                       json_body={"path": workspace + "/full%d.txt" % i, "content": "x"})
            assert_error(r, 503, "ledger.unavailable")
        r = s.post("/commands/run", token=ALICE_TOKEN,
                   json_body={"argv": ["sh", "-c", "echo ran > %s/side.txt" % workspace]})
        assert_error(r, 503, "ledger.unavailable")
        # reads keep answering
        assert ok(s.get("/files/read", token=ALICE_TOKEN, params={"path": workspace + "/before.txt"}))["content"] == "x"
        ok(s.get("/files/list", token=ALICE_TOKEN, params={"path": workspace}))
        # inside a batch: the read answers, the write is refused on its own
        b = ok(s.post("/batch", token=ALICE_TOKEN, json_body={"calls": [
            {"op": "files.read", "args": {"path": workspace + "/before.txt"}},
            {"op": "files.write", "args": {"path": workspace + "/full-batch.txt", "content": "x"}}]}))
        assert [x["status"] for x in b["results"]] == [200, 503], b
        assert b["results"][1]["body"]["error"]["code"] == "ledger.unavailable"
        time.sleep(0.3)
        assert not os.path.exists(workspace + "/full-batch.txt")
        for i in range(3):
            assert not os.path.exists(workspace + "/full%d.txt" % i)
        assert not os.path.exists(workspace + "/side.txt"), "commands.run ran although the ledger is unavailable"
        # space again: mutating calls work again (bounded)
        os.unlink(filler)
        deadline = time.time() + 5
        while True:
            r = s.post("/files/write", token=ALICE_TOKEN, json_body={"path": workspace + "/after.txt", "content": "y"})
            if r.status_code == 200 or time.time() > deadline:
                break
            time.sleep(0.2)
        ok(r)
        assert open(workspace + "/after.txt").read() == "y"
        _, e = group_of(path, rid(r), timeout=0)
        assert one(e, "finished")["status"] == 200
        s.stop()
        v = verify(path)
        assert v.returncode == 0, v.stdout
    finally:
        subprocess.run(["umount", "-l", mnt], capture_output=True, timeout=20)


# -- ledger.timeline / ledger.get ----------------------------------------------------------------------

def _timeline(s, token, **params):
    return s.get("/ledger/timeline", token=token, params=params)


@pytest.mark.parametrize("params", [{"limit": 0}, {"limit": 501}, {"limit": -1}, {"limit": "x"}])
def test_timeline_limit_bounds(led, params):
    s, _ = led
    assert_error(_timeline(s, ALICE_TOKEN, **params), 400, "args.invalid")


def test_timeline_cursors_invalid(led):
    s, _ = led
    for p in ({"before_ordinal": -1}, {"after_ordinal": -5}):
        r = _timeline(s, ALICE_TOKEN, **p)
        assert r.status_code == 400, r.text
        assert r.json()["error"]["code"].startswith("args."), r.text
    assert_error(_timeline(s, ALICE_TOKEN, before_ordinal=5, after_ordinal=1), 400, "args.invalid")
    ok(_timeline(s, ALICE_TOKEN, limit=1))
    ok(_timeline(s, ALICE_TOKEN, limit=500))


def _populate(s, ws, n=6):
    for i in range(n):
        ok(s.post("/files/write", token=ALICE_TOKEN, json_body={"path": "%s/t%d.txt" % (ws, i), "content": "x"}))
        ok(s.get("/files/stat", token=CAROL_TOKEN, params={"path": "%s/t%d.txt" % (ws, i)}))
        ok(s.get("/capabilities", token=BOB_TOKEN))


def test_timeline_latest_window_and_paging(led, workspace):
    s, path = led
    _populate(s, workspace)
    settle(path)
    top = q(path, "SELECT MAX(ordinal) FROM action_events")[0][0]
    p = ok(_timeline(s, ADMIN_TOKEN, limit=7))
    for k in ("events", "cursor", "has_more_before", "has_more_after", "limit", "field_max_bytes"):
        assert k in p, p.keys()
    assert p["limit"] == 7 and isinstance(p["field_max_bytes"], int) and p["field_max_bytes"] > 0
    ords = [e["ordinal"] for e in p["events"]]
    assert ords == list(range(top - 6, top + 1)), (ords, top)
    assert p["has_more_before"] is True
    assert p["cursor"]["before_ordinal"] == ords[0] and p["cursor"]["after_ordinal"] == ords[-1]
    for e in p["events"]:
        for k in ("ordinal", "group_id", "kind", "at", "data"):
            assert k in e, e
    # walk back to the beginning: every ordinal once, each page ascending
    seen = list(ords)
    cur = p
    for _ in range(100):
        if not cur["has_more_before"]:
            break
        cur = ok(_timeline(s, ADMIN_TOKEN, limit=7, before_ordinal=cur["cursor"]["before_ordinal"]))
        o = [e["ordinal"] for e in cur["events"]]
        assert o == sorted(o) and o and o[-1] < seen[0], (o, seen[:3])
        assert cur["has_more_after"] is True
        seen = o + seen
    assert seen == list(range(1, top + 1))
    # forward from the start
    f = ok(_timeline(s, ADMIN_TOKEN, limit=5, after_ordinal=0))
    assert [e["ordinal"] for e in f["events"]] == [1, 2, 3, 4, 5]
    assert f["has_more_after"] is True and f["has_more_before"] is False
    f2 = ok(_timeline(s, ADMIN_TOKEN, limit=5, after_ordinal=f["cursor"]["after_ordinal"]))
    assert [e["ordinal"] for e in f2["events"]] == [6, 7, 8, 9, 10]
    # far past the end: empty, nothing after
    f3 = ok(_timeline(s, ADMIN_TOKEN, limit=5, after_ordinal=top + 100000))
    assert f3["events"] == [] and f3["has_more_after"] is False


def _my_ordinals(path, who):
    return [o for (o,) in q(path, "SELECT e.ordinal FROM action_events e JOIN action_groups g"
                                  " ON g.group_id = e.group_id WHERE g.principal = ? ORDER BY e.ordinal", (who,))]


def test_timeline_has_more_before_is_truthful_for_own_view(led, workspace):
    """alice's first page from the start: the anonymous health checks came first, so her
    first event is not ordinal 1 — but nothing older is visible to her."""
    s, path = led
    _populate(s, workspace, n=3)
    settle(path)
    mine = _my_ordinals(path, "alice")
    assert mine and mine[0] > 1
    f = ok(_timeline(s, ALICE_TOKEN, after_ordinal=0, limit=2))
    assert [e["ordinal"] for e in f["events"]] == mine[:2]
    older = ok(_timeline(s, ALICE_TOKEN, before_ordinal=f["cursor"]["before_ordinal"], limit=2))
    assert older["events"] == [] and older["has_more_before"] is False
    assert f["has_more_before"] is False, "has_more_before is true but the page before it is empty"


def test_timeline_has_more_after_is_truthful_past_the_end(led, workspace):
    s, path = led
    _populate(s, workspace, n=2)
    settle(path)
    top = q(path, "SELECT MAX(ordinal) FROM action_events")[0][0]
    mine = _my_ordinals(path, "alice")
    p = ok(_timeline(s, ALICE_TOKEN, before_ordinal=top + 1000, limit=500))
    assert [e["ordinal"] for e in p["events"]] == mine
    assert p["has_more_before"] is False
    assert p["has_more_after"] is False, "has_more_after is true after the newest event"


def test_timeline_visibility(led, workspace):
    s, path = led
    _populate(s, workspace, n=3)
    settle(path)
    owner_of = {}
    for o, pr in q(path, "SELECT e.ordinal, g.principal FROM action_events e JOIN action_groups g"
                         " ON g.group_id = e.group_id"):
        owner_of[o] = pr
    for tok, me in ((ALICE_TOKEN, "alice"), (BOB_TOKEN, "bob"), (CAROL_TOKEN, "carol")):
        p = ok(_timeline(s, tok, limit=500))
        assert p["events"], me
        assert all(owner_of.get(e["ordinal"], me) == me for e in p["events"]), \
            (me, {owner_of.get(e["ordinal"]) for e in p["events"]})
        mine = sorted(o for o, pr in owner_of.items() if pr == me)
        assert [e["ordinal"] for e in p["events"] if e["ordinal"] in owner_of] == mine
    for tok in (ADMIN_TOKEN, OWNER_TOKEN):
        p = ok(_timeline(s, tok, limit=500))
        who = {owner_of.get(e["ordinal"]) for e in p["events"]}
        assert {"alice", "bob", "carol"} <= who, who


def test_timeline_long_data_is_field_bounded(led, workspace):
    s, path = led
    long_arg = "A" * 6000
    r = s.post("/commands/run", token=ALICE_TOKEN, json_body={"argv": ["echo", long_arg]})
    assert ok(r)["stdout"] == long_arg + "\n"
    p = ok(_timeline(s, ALICE_TOKEN, limit=50))
    adm = [e for e in p["events"] if e.get("request_id", rid(r)) == rid(r) and e["kind"] == "admitted"]
    if not adm:  # events may not carry request_id: find by group
        g, _ = group_of(path, rid(r), timeout=0)
        adm = [e for e in p["events"] if e["group_id"] == g["group_id"] and e["kind"] == "admitted"]
    assert adm, p["events"]
    d = adm[0]["data"]
    assert isinstance(d, dict) and d.get("truncated") is True, str(d)[:300]
    assert isinstance(d.get("size"), int) and d["size"] > 6000, d.get("size")
    assert isinstance(d.get("preview"), str) and 0 < len(d["preview"]) <= p["field_max_bytes"]
    assert long_arg not in json.dumps(p)
    # small events of the same group are not cut
    fin = [e for e in p["events"] if e["group_id"] == adm[0]["group_id"] and e["kind"] == "finished"]
    assert fin and fin[0]["data"].get("status") == 200


def test_ledger_get(led, workspace):
    s, path = led
    w = s.post("/files/write", token=ALICE_TOKEN, json_body={"path": workspace + "/g.txt", "content": "secretish"})
    ok(w)
    g, _ = group_of(path, rid(w), timeout=0)
    gid = g["group_id"]
    j = ok(s.get("/ledger/%d" % gid, token=ALICE_TOKEN))
    for k in ("group_id", "request_id", "principal", "op", "door", "created_at", "batch_group", "events", "attempts"):
        assert k in j, j.keys()
    assert j["group_id"] == gid and j["request_id"] == rid(w) and j["principal"] == "alice"
    assert j["op"] == "files.write" and j["batch_group"] is None
    assert [e["kind"] for e in j["events"]] == ["received", "admitted", "started", "finished"]
    assert all(e["group_id"] == gid for e in j["events"])
    adm = j["events"][1]["data"]
    assert adm["args"]["content"] == _digest("secretish"), adm
    assert len(j["attempts"]) == 1
    assert j["events"][2]["data"]["attempt_id"] == j["attempts"][0]["attempt_id"]
    # the RPC binding answers the same
    assert ok(s.op("ledger.get", {"group_id": gid}, token=ALICE_TOKEN))["request_id"] == rid(w)
    # another principal's group: not found; admin sees it
    assert_error(s.get("/ledger/%d" % gid, token=CAROL_TOKEN), 404, "ledger.not_found")
    assert_error(s.get("/ledger/%d" % gid, token=BOB_TOKEN), 404, "ledger.not_found")
    assert ok(s.get("/ledger/%d" % gid, token=ADMIN_TOKEN))["principal"] == "alice"
    assert ok(s.get("/ledger/%d" % gid, token=OWNER_TOKEN))["principal"] == "alice"
    assert_error(s.get("/ledger/99999999", token=ADMIN_TOKEN), 404, "ledger.not_found")


# -- Idempotency-Key ----------------------------------------------------------------------------------

def test_idempotency_key_replays_first_result(led, workspace):
    s, path = led
    cnt = os.path.join(workspace, "idem.txt")
    body = {"argv": ["sh", "-c", "echo x >> %s; echo $$" % cnt]}
    r1 = s.post("/commands/run", token=ALICE_TOKEN, json_body=body, headers={"Idempotency-Key": "key-1"})
    j1 = ok(r1)
    r2 = s.post("/commands/run", token=ALICE_TOKEN, json_body=body, headers={"Idempotency-Key": "key-1"})
    j2 = ok(r2)
    assert j2 == j1, (j1, j2)
    assert j2["pid"] == j1["pid"]
    time.sleep(0.2)
    assert open(cnt).read() == "x\n", "the repeated call ran again"
    # the same key for another op: conflict, nothing written
    r3 = s.post("/files/write", token=ALICE_TOKEN, json_body={"path": workspace + "/idem2.txt", "content": "z"},
                headers={"Idempotency-Key": "key-1"})
    assert_error(r3, 409, "request.idempotency_conflict")
    assert not os.path.exists(workspace + "/idem2.txt")
    # another key runs
    j4 = ok(s.post("/commands/run", token=ALICE_TOKEN, json_body=body, headers={"Idempotency-Key": "key-2"}))
    assert j4["pid"] != j1["pid"]
    assert open(cnt).read() == "x\nx\n"
    # the same key from another principal is that principal's own key
    j5 = ok(s.post("/commands/run", token=CAROL_TOKEN, json_body=body, headers={"Idempotency-Key": "key-1"}))
    assert j5["pid"] != j1["pid"]
    assert open(cnt).read() == "x\nx\nx\n"


# -- flood aggregation, second half (keep last: it may wait for the minute to turn) -------------------

# -- segment rotation (ledger.max_size / ledger.retention) ------------------------------------------

def _segments(path):
    d = path + ".archive"
    return sorted(os.path.join(d, n) for n in os.listdir(d)
                  if n.startswith("seg-") and n.endswith(".db")) if os.path.isdir(d) else []


def _seg_range(seg):
    return q(seg, "SELECT MIN(ordinal), MAX(ordinal) FROM action_events")[0]


def _busy(s, ws, n, tag="f"):
    for i in range(n):
        ok(s.post("/files/write", token=ALICE_TOKEN,
                  json_body={"path": "%s/%s%d" % (ws, tag, i), "content": "x" * 300 + str(i)}))


@pytest.fixture
def rotated(abx, workspace, tmp_path):
    """A server whose live segment is archived every 64 KiB, after enough calls to rotate a
    few times; stopped. (server, ledger path)."""
    path = str(tmp_path / "ledger.db")
    s = abx(make_config(workspace, ledger={"path": path, "max_size": "64KiB"}))
    _busy(s, workspace, 90)
    s.stop()
    assert s.returncode == 0, s.stderr()[-2000:]
    return s, path


def test_rotation_by_size_archives_chained_segments(rotated):
    s, path = rotated
    segs = _segments(path)
    assert len(segs) >= 2, segs
    # segments hold contiguous ordinal ranges, named after them, oldest first
    expect = 1
    for seg in segs:
        lo, hi = _seg_range(seg)
        assert lo == expect, (seg, lo, expect)
        assert os.path.basename(seg) == "seg-%012d-%012d.db" % (lo, hi)
        first, prev = q(seg, "SELECT first_ordinal, prev_hash FROM ledger_segment")[0]
        assert first == lo
        expect = hi + 1
    live_first = q(path, "SELECT first_ordinal FROM ledger_segment")[0][0]
    assert live_first == expect
    # each segment's chain starts at the previous segment's last hash
    for a, b in zip(segs, segs[1:] + [path]):
        last = q(a, "SELECT hash FROM action_events ORDER BY ordinal DESC LIMIT 1")[0][0]
        assert q(b, "SELECT prev_hash FROM ledger_segment")[0][0] == last
    total = settle(path) + sum(q(seg, "SELECT COUNT(*) FROM action_events")[0][0] for seg in segs)
    r = verify(path)
    assert r.returncode == 0, r.stdout + r.stderr
    assert r.stdout.startswith("ok: %d events" % total), r.stdout
    # export covers every segment, in order
    e = ledger_cli(["export", "--path", path])
    assert e.returncode == 0, e.stderr
    ords = [json.loads(x)["ordinal"] for x in e.stdout.splitlines()]
    assert ords == list(range(1, total + 1))
    # the anchor is the head of the whole chain
    a = ledger_cli(["anchor", "--path", path]).stdout.strip()
    assert a.endswith(":%d" % total), a
    assert verify(path, a).returncode == 0


def test_rotation_while_calls_keep_coming(abx, workspace, tmp_path):
    """Mutating calls commit their own events and the writer thread rotates behind them:
    calls from four clients keep taking group ids while a segment is archived and the next
    one opened. Every call is answered, no group id is given twice (a duplicate would
    fail its commit: 503 ledger.unavailable), and the chain verifies across segments."""
    path = str(tmp_path / "ledger.db")
    s = abx(make_config(workspace, ledger={"path": path, "max_size": "64KiB"}))
    bad = []

    def worker(k):
        sess = requests.Session()
        for i in range(40):
            r = sess.post(s.url + "/files/write", headers=H(ALICE_TOKEN),
                          json={"path": "%s/c%d-%d" % (workspace, k, i), "content": "x" * 300}, timeout=30)
            if r.status_code != 200:
                bad.append((r.status_code, r.text[:200]))

    ts = [threading.Thread(target=worker, args=(k,)) for k in range(4)]
    for t in ts:
        t.start()
    for t in ts:
        t.join(120)
    s.stop()
    assert not bad, bad[:3]
    assert len(_segments(path)) >= 2, _segments(path)
    r = verify(path)
    assert r.returncode == 0, r.stdout + r.stderr
    groups = sum(q(seg, "SELECT COUNT(*) FROM action_groups WHERE op = 'files.write'")[0][0]
                 for seg in _segments(path) + [path])
    assert groups == 160, groups


def test_rotation_restart_continues_chain_and_groups(rotated, abx, workspace):
    s, path = rotated
    before = verify(path)
    n0 = int(before.stdout.split()[1])
    groups0 = max(q(seg, "SELECT MAX(group_id) FROM action_groups")[0][0] or 0 for seg in _segments(path) + [path])
    s2 = abx(make_config(workspace, ledger={"path": path, "max_size": "64KiB"}))
    r = s2.post("/files/write", token=ALICE_TOKEN, json_body={"path": workspace + "/after", "content": "x"})
    g, _ = group_of(path, rid(r))
    assert g["group_id"] > groups0
    tl = ok(s2.get("/ledger/timeline", token=ADMIN_TOKEN, params={"limit": 5}))
    assert tl["live_first_ordinal"] >= 1
    assert all(ev["ordinal"] >= tl["live_first_ordinal"] for ev in tl["events"])
    s2.stop()
    r = verify(path)
    assert r.returncode == 0, r.stdout
    assert int(r.stdout.split()[1]) > n0


def test_rotation_crash_after_archive_rename_continues_chain(rotated, abx, workspace):
    """kill -9 between renaming the live segment into the archive and creating the next
    one: the next start finds no live file and continues after the newest archive."""
    s, path = rotated
    n0 = int(verify(path).stdout.split()[1])
    con = sqlite3.connect(path)
    con.execute("PRAGMA wal_checkpoint(TRUNCATE)")
    first = con.execute("SELECT first_ordinal FROM ledger_segment").fetchone()[0]
    con.close()
    assert n0 >= first, (n0, first)
    os.rename(path, os.path.join(path + ".archive", "seg-%012d-%012d.db" % (first, n0)))
    for suffix in ("-wal", "-shm"):
        if os.path.exists(path + suffix):
            os.unlink(path + suffix)
    s2 = abx(make_config(workspace, ledger={"path": path, "max_size": "64KiB"}))
    ok(s2.post("/files/write", token=ALICE_TOKEN, json_body={"path": workspace + "/again", "content": "x"}))
    s2.stop()
    assert q(path, "SELECT first_ordinal FROM ledger_segment")[0][0] == n0 + 1
    r = verify(path)
    assert r.returncode == 0, r.stdout
    assert int(r.stdout.split()[1]) > n0


def _tamper_seg(seg, sql):
    con = sqlite3.connect(seg)
    _drop_triggers(con)
    cur = con.execute(sql)
    assert cur.rowcount >= 1, sql
    con.commit()
    con.close()


@pytest.mark.parametrize("how", ["edit_archived_event", "delete_middle_segment", "delete_first_segment",
                                 "edit_segment_start", "swap_segment_names"])
def test_verify_detects_tampering_across_segments(rotated, how):
    s, path = rotated
    segs = _segments(path)
    assert len(segs) >= 2
    assert verify(path).returncode == 0
    if how == "edit_archived_event":
        _tamper_seg(segs[0], "UPDATE action_events SET data = replace(data, 'alice', 'mallory') WHERE ordinal = "
                             "(SELECT MIN(ordinal) FROM action_events WHERE data LIKE '%alice%')")
    elif how == "delete_middle_segment":
        os.unlink(segs[1] if len(segs) > 2 else segs[-1])
    elif how == "delete_first_segment":
        os.unlink(segs[0])
    elif how == "edit_segment_start":
        _tamper_seg(segs[1], "UPDATE ledger_segment SET prev_hash = '%s'" % ("0" * 64))
    elif how == "swap_segment_names":
        tmp = segs[0] + ".tmp"
        os.rename(segs[0], tmp)
        os.rename(segs[1], segs[0])
        os.rename(tmp, segs[1])
    r = verify(path)
    assert r.returncode == 1, "%s: %s" % (how, r.stdout)
    assert r.stdout.startswith("TAMPERED"), r.stdout


def test_rotation_by_retention(abx, workspace, tmp_path):
    path = str(tmp_path / "ledger.db")
    s = abx(make_config(workspace, ledger={"path": path, "retention": "1s"}))
    _busy(s, workspace, 2)
    assert _segments(path) == []
    time.sleep(1.3)
    _busy(s, workspace, 1, tag="late")  # the first commit after a second archives the segment
    deadline = time.time() + 3
    while not _segments(path) and time.time() < deadline:
        time.sleep(0.1)
    segs = _segments(path)
    assert len(segs) == 1, segs
    s.stop()
    assert verify(path).returncode == 0


def test_archived_segments_are_protected(rotated, abx, workspace, tmp_path):
    """Agents cannot read the archive even when a statement's read scope covers it, and no
    statement may grant writes where it lies (the server refuses that layout)."""
    s, path = rotated
    root = str(tmp_path)
    cfg = make_config(workspace, ledger={"path": path, "max_size": "64KiB"})
    cfg["policy"]["allow"].append({"ops": ["files.*"], "principals": ["role:agent"], "paths": [root + "/**"]})
    refused = abx(cfg, start=False)
    with pytest.raises(RuntimeError, match="config.state_writable"):
        refused.start()
    cfg["policy"]["allow"][-1]["paths"] = {"read": [root + "/**"], "write": [workspace + "/**"]}
    s2 = abx(cfg)
    seg = _segments(path)[0]
    r = s2.get("/files/read", token=ALICE_TOKEN, params={"path": seg})
    assert r.status_code == 403, r.text
    r = s2.post("/files/write", token=ALICE_TOKEN, json_body={"path": seg, "content": "gone"})
    assert r.status_code == 403, r.text
    r = s2.post("/files/write", token=ALICE_TOKEN,
                json_body={"path": path + ".archive/seg-000000000999-000000001000.db", "content": "forged"})
    assert r.status_code == 403, r.text
    assert os.path.exists(seg)
    assert verify(path).returncode == 0


def test_flood_later_group_carries_aggregated_count(flood):
    s, path = flood["server"], flood["path"]
    deadline = time.time() + 65
    while _wall_minute() == flood["minute"] and time.time() < deadline:
        time.sleep(0.2)
    assert _wall_minute() != flood["minute"]
    r1 = s.get("/files/list", params={"path": flood["ws"]})
    assert_error(r1, 401, "auth.required")
    r2 = s.post("/ops/nosuch.op", token=BOB_TOKEN, json_body={})
    assert_error(r2, 404, "op.not_enabled")
    r3 = s.get("/health")
    assert r3.status_code == 200
    _, e = group_of(path, rid(r3))
    agg = [x["data"] for x in e if x["kind"] == "aggregated"]
    assert agg and agg[0].get("previous_minute_count", 0) >= 29, "the probes counted are not in %r" % e
    for r in (r1, r2):
        _, e = group_of(path, rid(r))
        agg = [x["data"] for x in e if x["kind"] == "aggregated"]
        assert agg, "no aggregated event in the next minute's group: %r" % kinds(e)
        nums = [v for v in agg[0].values() if isinstance(v, int) and not isinstance(v, bool)]
        assert 29 in nums, "the 29 calls counted but not recorded are not in %r" % agg[0]
