/* audit.c — step 10 and the ledger's view of a call: which events a call writes
 * (received, admitted, finished), when they must be durable (mutating calls: before the
 * handler runs), how floods of refused calls are summed up instead of recorded one by
 * one, and the one finish every request passes (metrics, log line, ledger, idempotency). */
#include "pipeline/pipeline.h"
#include "core/jsonout.h"
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* ---- the ledger's view of a call ---- */

static bool is_mutating(const abx_op *op)
{
    return op && (op->effects & (ABX_EFF_WRITE | ABX_EFF_DELETE | ABX_EFF_EXEC | ABX_EFF_ADMIN));
}

static json_t *ev(const char *kind)
{
    char at[32];
    abx_iso8601(abx_wall_ms(), at);
    return json_pack("{s:s, s:s}", "kind", kind, "at", at);
}

static const char *principal_of(const abx_request *r)
{
    return r->policy && r->slot >= 0 ? abx_policy_principal_id(r->policy, r->slot) : NULL;
}

static const char *op_name_of(const abx_request *r)
{
    return r->op ? r->op->id : r->op_name;
}

static void received_fields(const abx_request *r, json_t *e)
{
    json_object_set_new(e, "request_id", json_string(r->id));
    json_object_set_new(e, "principal", principal_of(r) ? json_string(principal_of(r)) : json_null());
    json_object_set_new(e, "op", op_name_of(r) ? json_string(op_name_of(r)) : json_null());
    json_object_set_new(e, "door", json_string(abx_door_name(r->door)));
    if (r->client)
        json_object_set_new(e, "client", json_string(r->client));
    if (r->path)
        json_object_set_new(e, "target", json_stringn(r->path, r->path_len));
    if (r->batch_group)
        json_object_set_new(e, "batch_group", json_integer((json_int_t)r->batch_group));
    if (r->traceparent)
        json_object_set_new(e, "traceparent", json_string(r->traceparent));
}

static json_t *received_event(const abx_request *r)
{
    json_t *e = ev("received");
    received_fields(r, e);
    return e;
}

static void admission_fields(const abx_request *r, json_t *e)
{
    json_object_set_new(e, "determining", json_string(r->decision.determining));
    json_object_set_new(e, "args", r->args ? abx_ledger_redact(r->args) : json_object());
    if (r->decision.argv.n) {
        json_t *a = json_array();
        for (size_t i = 0; i < r->decision.argv.n; i++)
            json_array_append_new(a, json_string(r->decision.argv.v[i]));
        json_object_set_new(e, "argv", a);
    }
    json_t *paths = json_object();
    for (size_t i = 0; i < r->decision.n_paths; i++)
        json_object_set_new(paths, r->decision.paths[i].param, json_string(r->decision.paths[i].canonical));
    json_object_set_new(e, "paths", paths);
}

static json_t *admitted_event(const abx_request *r)
{
    json_t *e = ev("admitted");
    admission_fields(r, e);
    return e;
}

/* Step 8's last act for mutating calls: the group, its admission and the attempt are
 * committed before the handler starts, so an answered mutating call is always there. */
abx_err abx_audit_admission(abx_request *r)
{
    abx_ledger *l = r->server->ledger;
    if (!l || !is_mutating(r->op))
        return ABX_OK;
    json_t *adm = admitted_event(r); /* an execution also records the confinement tier it meets */
    if (r->op->effects & ABX_EFF_EXEC && r->server->procs)
        json_object_set_new(adm, "tier", json_string(abx_sandbox_tier_name(abx_procs_sandbox(r->server->procs))));
    json_t *events = json_pack("[o, o, o]", received_event(r), adm, ev("started"));
    abx_ledger_call c = {.request_id = r->id, .principal = principal_of(r), .op = r->op->id,
                         .door = abx_door_name(r->door), .client = r->client, .events = events, .durable = true,
                         .attempt = true, .batch_group = r->batch_group};
    r->group_id = abx_ledger_record(l, &c);
    json_decref(events);
    if (!r->group_id) {
        abx_fail(r, ABX_E_LEDGER_UNAVAILABLE, "the action ledger cannot be written; nothing was run");
        return ABX_E_LEDGER_UNAVAILABLE;
    }
    return ABX_OK;
}

/* Floods of unauthenticated or unmounted calls, and anonymous health probes, are
 * recorded once per client, status and minute; the rest are counted and the count
 * recorded when the minute turns. */
static bool flood_first(abx_request *r, int status, uint64_t *summary)
{
    abx_server *s = r->server;
    char key[80];
    snprintf(key, sizeof key, "%d|%s", status, r->client ? r->client : "-"); /* 200: health probes only */
    int64_t minute = abx_wall_ms() / 60000;
    bool first = true;
    *summary = 0;
    pthread_mutex_lock(&s->flood_mu);
    size_t slot = 0, oldest = 0;
    bool found = false;
    for (size_t i = 0; i < ABX_ARRAY_LEN(s->flood); i++) {
        if (strcmp(s->flood[i].key, key) == 0) {
            slot = i;
            found = true;
            break;
        }
        if (s->flood[i].minute < s->flood[oldest].minute)
            oldest = i;
    }
    if (!found) {
        slot = oldest;
        if (s->flood[slot].count > 1)
            *summary = s->flood[slot].count - 1;
        snprintf(s->flood[slot].key, sizeof s->flood[slot].key, "%s", key);
        s->flood[slot].minute = minute;
        s->flood[slot].count = 1;
    } else if (s->flood[slot].minute != minute) {
        if (s->flood[slot].count > 1)
            *summary = s->flood[slot].count - 1;
        s->flood[slot].minute = minute;
        s->flood[slot].count = 1;
    } else {
        s->flood[slot].count++;
        first = false;
    }
    pthread_mutex_unlock(&s->flood_mu);
    return first;
}

static void finished_fields(const abx_request *r, json_t *fin, int status, int64_t dur_us)
{
    json_object_set_new(fin, "status", json_integer(status));
    json_object_set_new(fin, "code", r->reply.err ? json_string(abx_err_code(r->reply.err)) : json_null());
    json_object_set_new(fin, "duration_ms", json_real((double)dur_us / 1000.0));
    if (r->reply.err && r->reply.message)
        json_object_set_new(fin, "message", json_string(r->reply.message));
}

/* ---- the hot events, serialized without a jansson tree ----
 * What a call that ran (or GET /health) writes on every request: the same members the
 * tree path above sets, in the order abx_json_compact(sort_keys) writes them, so the
 * stored text is byte for byte what the tree would give (tests/unit/test_audit_direct
 * compares the two). A string jansson would refuse (not UTF-8) leaves its member out,
 * as json_object_set_new of a NULL value does. */

typedef struct evw {
    abx_jw w;
    bool first;
} evw;

static void m_key(evw *e, const char *k)
{
    abx_jw_raw(&e->w, e->first ? "\"" : ",\"", e->first ? 1 : 2);
    abx_jw_raw(&e->w, k, strlen(k));
    abx_jw_raw(&e->w, "\":", 2);
    e->first = false;
}

static void m_strn(evw *e, const char *k, const char *s, size_t n)
{
    if (!s)
        return;
    size_t mark = e->w.n;
    bool first = e->first;
    m_key(e, k);
    if (!abx_jw_str(&e->w, s, n)) {
        e->w.n = mark;
        e->first = first;
    }
}

static void m_str(evw *e, const char *k, const char *s) { m_strn(e, k, s, s ? strlen(s) : 0); }

static void m_str_or_null(evw *e, const char *k, const char *s)
{
    if (s) {
        m_str(e, k, s);
    } else {
        m_key(e, k);
        abx_jw_raw(&e->w, "null", 4);
    }
}

static int cmp_path_param(const void *a, const void *b)
{
    const abx_path_value *x = *(const abx_path_value *const *)a, *y = *(const abx_path_value *const *)b;
    int c = strcmp(x->param, y->param);
    return c ? c : (x < y ? -1 : x > y); /* equal names: in order, the last one wins */
}

/* "paths": {param: canonical}, sorted, a repeated param keeping its last value */
static bool m_paths(evw *e, const abx_decision *d)
{
    const abx_path_value *one[16], **v = one;
    if (d->n_paths > ABX_ARRAY_LEN(one) && !(v = malloc(d->n_paths * sizeof *v)))
        return false;
    size_t n = 0;
    for (size_t i = 0; i < d->n_paths; i++)
        if (abx_utf8_valid(d->paths[i].canonical, strlen(d->paths[i].canonical)))
            v[n++] = &d->paths[i]; /* jansson drops a value it cannot hold */
    qsort(v, n, sizeof *v, cmp_path_param);
    m_key(e, "paths");
    evw o = {e->w, true};
    abx_jw_raw(&o.w, "{", 1);
    for (size_t i = 0; i < n; i++)
        if (i + 1 == n || strcmp(v[i]->param, v[i + 1]->param) != 0)
            m_str(&o, v[i]->param, v[i]->canonical);
    abx_jw_raw(&o.w, "}", 1);
    e->w = o.w;
    if (v != one)
        free(v);
    return true;
}

static bool m_admission_head(evw *e, const abx_request *r)
{
    m_key(e, "args");
    /* arguments with nothing to redact (a read's path) are written as they are */
    json_t *red = r->args && !abx_ledger_redact_keeps(r->args) ? abx_ledger_redact(r->args) : NULL;
    const json_t *args = red ? red : r->args;
    bool ok = args ? abx_jw_value(&e->w, args, true) : (abx_jw_raw(&e->w, "{}", 2), true);
    json_decref(red);
    if (ok && r->decision.argv.n) {
        m_key(e, "argv");
        evw a = {e->w, true};
        abx_jw_raw(&a.w, "[", 1);
        for (size_t i = 0; i < r->decision.argv.n; i++) {
            const char *s = r->decision.argv.v[i];
            size_t mark = a.w.n;
            abx_jw_raw(&a.w, a.first ? "" : ",", a.first ? 0 : 1);
            if (abx_jw_str(&a.w, s, strlen(s)))
                a.first = false;
            else
                a.w.n = mark;
        }
        abx_jw_raw(&a.w, "]", 1);
        e->w = a.w;
    }
    return ok;
}

/* One event's data: received's members (rcv), finished's (fin) and the admission (adm),
 * merged in sorted key order. NULL when out of memory or a value the tree path would
 * write differently: the caller then takes the tree path. */
static char *direct_event(const abx_request *r, bool rcv, bool fin, bool adm, int status, int64_t dur_us)
{
    evw e = {{0}, true};
    abx_jw_raw(&e.w, "{", 1);
    bool ok = !adm || m_admission_head(&e, r);
    if (rcv && r->batch_group) {
        m_key(&e, "batch_group");
        abx_jw_int(&e.w, (long long)r->batch_group);
    }
    if (rcv)
        m_str(&e, "client", r->client);
    if (fin) {
        m_key(&e, "code");
        abx_jw_raw(&e.w, "null", 4);
    }
    if (adm)
        m_str(&e, "determining", r->decision.determining);
    if (rcv)
        m_str(&e, "door", abx_door_name(r->door));
    if (fin) {
        m_key(&e, "duration_ms");
        ok = abx_jw_real(&e.w, (double)dur_us / 1000.0) && ok;
    }
    if (rcv)
        m_str_or_null(&e, "op", op_name_of(r));
    if (adm)
        ok = ok && m_paths(&e, &r->decision);
    if (rcv) {
        m_str_or_null(&e, "principal", principal_of(r));
        m_str(&e, "request_id", r->id);
    }
    if (fin) {
        m_key(&e, "status");
        abx_jw_int(&e.w, status);
    }
    if (rcv && r->path)
        m_strn(&e, "target", r->path, r->path_len);
    if (rcv && r->traceparent)
        m_str(&e, "traceparent", r->traceparent);
    abx_jw_raw(&e.w, "}", 1);
    char *out = abx_jw_finish(&e.w, NULL);
    if (!ok) {
        free(out);
        return NULL;
    }
    return out;
}

/* A call that ran without an error (one "finished" event holding all), or one without
 * an op such as GET /health ("received", then "finished"). false: take the tree path. */
static bool ledger_audit_direct(abx_request *r, abx_ledger *l, int status, int64_t dur_us)
{
    char at[32];
    abx_iso8601(abx_wall_ms(), at);
    abx_ledger_raw ev[2];
    size_t n = 0;
    if (r->op) {
        ev[n++] = (abx_ledger_raw){"finished", at, direct_event(r, true, true, true, status, dur_us)};
    } else {
        ev[n++] = (abx_ledger_raw){"received", at, direct_event(r, true, false, false, status, dur_us)};
        ev[n++] = (abx_ledger_raw){"finished", at, direct_event(r, false, true, false, status, dur_us)};
    }
    for (size_t i = 0; i < n; i++)
        if (!ev[i].data) {
            for (size_t k = 0; k < n; k++)
                free(ev[k].data);
            return false;
        }
    abx_ledger_call c = {.request_id = r->id, .principal = principal_of(r), .op = op_name_of(r),
                         .door = abx_door_name(r->door), .client = r->client, .raw = ev, .n_raw = n,
                         .durable = false, .attempt = false, .batch_group = r->batch_group};
    abx_ledger_record(l, &c);
    return true;
}

/* For tests/unit/test_audit: the hot events' data as the direct path writes it and as
 * the tree path would (received then finished without an op; finished alone with one). */
size_t abx__audit_hot_texts(const abx_request *r, int status, int64_t dur_us, char *direct[2], char *tree[2])
{
    size_t n = 0;
    json_t *fin = json_object();
    finished_fields(r, fin, status, dur_us);
    if (r->op) {
        received_fields(r, fin);
        admission_fields(r, fin);
        direct[n] = direct_event(r, true, true, true, status, dur_us);
    } else {
        json_t *rcv = json_object();
        received_fields(r, rcv);
        direct[n] = direct_event(r, true, false, false, status, dur_us);
        tree[n++] = abx_json_compact(rcv, true, NULL);
        json_decref(rcv);
        direct[n] = direct_event(r, false, true, false, status, dur_us);
    }
    tree[n++] = abx_json_compact(fin, true, NULL);
    json_decref(fin);
    return n;
}

/* An anonymous GET /health from the network that answered: a liveness probe (a load
 * balancer's, the kubelet's every few seconds) touches nothing and names no one, so it
 * is summed per client and minute like a flood instead of costing a ledger row each. */
static bool health_probe(const abx_request *r, int status)
{
    return status == 200 && !r->trusted_principal && r->door == ABX_DOOR_HTTP && r->op && r->policy &&
           r->slot == (int)r->policy->n_principals && strcmp(r->op->id, "core.health") == 0;
}

static void ledger_audit(abx_request *r, int status, int64_t dur_us)
{
    abx_ledger *l = r->server->ledger;
    if (!l)
        return;
    uint64_t counted = 0;
    if (health_probe(r, status) && !flood_first(r, status, &counted))
        return;
    if (!counted && !r->group_id && !r->reply.err && !(!r->trusted_principal && status == 401) &&
        ledger_audit_direct(r, l, status, dur_us))
        return;
    json_t *fin = ev("finished");
    finished_fields(r, fin, status, dur_us);
    if (r->group_id) { /* admitted mutating call: its end is durable before the answer */
        json_t *events = json_pack("[o]", fin);
        abx_ledger_append(l, r->group_id, events, true);
        json_decref(events);
        return;
    }
    /* only what arrives from the network is aggregated: a call inside a batch, a tool-call
     * or MCP request (whose front door was authenticated and recorded) or an in-process
     * call gets its own group */
    bool quiet_class = !r->trusted_principal &&
                       (status == 401 || (status == 404 && r->reply.err == ABX_E_OP_NOT_ENABLED));
    if (quiet_class && !flood_first(r, status, &counted)) {
        json_decref(fin);
        return;
    }
    json_t *events = json_array();
    if (r->reply.err || !r->op || counted) {
        json_array_append_new(events, received_event(r));
        if (r->reply.err) {
            bool policy = r->reply.err >= ABX_E_POLICY_DENIED && r->reply.err <= ABX_E_POLICY_SCOPE_REQUIRED;
            json_t *d = ev(policy ? "denied" : "rejected");
            json_object_set_new(d, "code", json_string(abx_err_code(r->reply.err)));
            if (r->decision.determining[0])
                json_object_set_new(d, "determining", json_string(r->decision.determining));
            json_array_append_new(events, d);
        }
    } else {
        /* a read that ran is one event: "finished" carries what "received" would (it
         * opens the group, so verify holds the group row to it) and the admission
         * (determining statements, redacted arguments, canonical paths); one row, one
         * hash and one serialization per read on the hot path */
        received_fields(r, fin);
        admission_fields(r, fin);
    }
    if (counted) {
        json_t *a = ev("aggregated");
        json_object_set_new(a, "previous_minute_count", json_integer((json_int_t)counted));
        json_array_append_new(events, a);
    }
    json_array_append_new(events, fin);
    abx_ledger_call c = {.request_id = r->id, .principal = principal_of(r), .op = op_name_of(r),
                         .door = abx_door_name(r->door), .client = r->client, .events = events,
                         .durable = false, .attempt = false, .batch_group = r->batch_group};
    abx_ledger_record(l, &c);
    json_decref(events);
}

void abx_audit(abx_request *r)
{
    int status = abx_reply_http_status(&r->reply);
    int64_t dur = abx_now_us() - r->start_us;
    abx_metrics_observe(r->server->metrics, r->op_index, r->op != NULL, status, r->reply.err, dur);
    abx_log_request(r, status, dur);
    ledger_audit(r, status, dur);
    abx_idem_end(r);
}
