/* audit.c — step 10 and the ledger's view of a call: which events a call writes
 * (received, admitted, finished), when they must be durable (mutating calls: before the
 * handler runs), how floods of refused calls are summed up instead of recorded one by
 * one, and the one finish every request passes (metrics, log line, ledger, idempotency). */
#include "pipeline/pipeline.h"
#include <stdio.h>
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

/* Floods of unauthenticated or unmounted calls are recorded once per client, code and
 * minute; the rest are counted and the count recorded when the minute turns. */
static bool flood_first(abx_request *r, int status, uint64_t *summary)
{
    abx_server *s = r->server;
    char key[80];
    snprintf(key, sizeof key, "%d|%s", status, r->client ? r->client : "-");
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

static void ledger_audit(abx_request *r, int status, int64_t dur_us)
{
    abx_ledger *l = r->server->ledger;
    if (!l)
        return;
    json_t *fin = ev("finished");
    json_object_set_new(fin, "status", json_integer(status));
    json_object_set_new(fin, "code", r->reply.err ? json_string(abx_err_code(r->reply.err)) : json_null());
    json_object_set_new(fin, "duration_ms", json_real((double)dur_us / 1000.0));
    if (r->reply.err && r->reply.message)
        json_object_set_new(fin, "message", json_string(r->reply.message));
    if (r->group_id) { /* admitted mutating call: its end is durable before the answer */
        json_t *events = json_pack("[o]", fin);
        abx_ledger_append(l, r->group_id, events, true);
        json_decref(events);
        return;
    }
    uint64_t counted = 0;
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
