/* approvals.c — the human-approval boundary. A call whose admitting statement says
 * `approval: required` (or whose op declares requires_approval) is held at step 8:
 * its exact canonical arguments and principal are stored, an approver decides, and abx
 * runs the held call itself — exactly once — through the whole pipeline again (so the
 * policy in force at that moment still applies). Polling returns the held call's own
 * status and body.
 *
 * States: PENDING → APPROVED → RUNNING → DONE, PENDING → DENIED, PENDING → EXPIRED.
 * abx_approval_hold creates PENDING; abx_approval_decide moves it to APPROVED or
 * DENIED (once: a second decision is 409); the runner thread moves APPROVED →
 * RUNNING → DONE; any read past expires_ms of a PENDING record moves it to EXPIRED. */
#include "pipeline/pipeline.h"
#include <stdio.h>
#include <string.h>

#define APPROVALS_MAX 1024

enum state { PENDING, APPROVED, RUNNING, DONE, DENIED, EXPIRED };
static const char *const state_names[] = {"pending", "approved", "running", "completed", "denied", "expired"};

struct abx_approval {
    char id[33];
    char *principal;         /* the requester */
    char *op;
    json_t *args;            /* exactly what was admitted, what will run */
    char args_sha256[65];
    abx_bound_files files;   /* the named files' content, as the approver sees it */
    uint64_t group_id;       /* the held call's ledger group */
    int64_t created_wall, expires_mono;
    enum state state;
    char *decided_by, *reason;
    int result_status;
    json_t *result;          /* the held call's body */
    abx_server *server;      /* borrowed */
    struct abx_approval *next;
};

struct abx_approvals {
    pthread_mutex_t mu;
    pthread_cond_t cond;     /* a record changed state */
    abx_approval *head;
    size_t n;
    int running;             /* runner threads in flight */
};

abx_approvals *abx_approvals_new(void)
{
    abx_approvals *a = abx_calloc(1, sizeof *a);
    if (!a)
        return NULL;
    pthread_mutex_init(&a->mu, NULL);
    pthread_condattr_t ca;
    pthread_condattr_init(&ca);
    pthread_condattr_setclock(&ca, CLOCK_MONOTONIC);
    pthread_cond_init(&a->cond, &ca);
    pthread_condattr_destroy(&ca);
    return a;
}

static void approval_free(abx_approval *x)
{
    abx_free(x->principal);
    abx_free(x->op);
    json_decref(x->args);
    abx_bound_files_release(&x->files);
    abx_free(x->decided_by);
    abx_free(x->reason);
    json_decref(x->result);
    abx_free(x);
}

void abx_approvals_free(abx_approvals *a)
{
    if (!a)
        return;
    pthread_mutex_lock(&a->mu);
    while (a->running > 0) /* approved calls finish before the server goes */
        pthread_cond_wait(&a->cond, &a->mu);
    pthread_mutex_unlock(&a->mu);
    for (abx_approval *x = a->head, *nx; x; x = nx) {
        nx = x->next;
        approval_free(x);
    }
    pthread_cond_destroy(&a->cond);
    pthread_mutex_destroy(&a->mu);
    abx_free(a);
}

static void expire_locked(abx_approvals *a)
{
    int64_t now = abx_now_ms();
    for (abx_approval *x = a->head; x; x = x->next)
        if (x->state == PENDING && now >= x->expires_mono)
            x->state = EXPIRED;
}

static abx_approval *find_locked(abx_approvals *a, const char *id)
{
    for (abx_approval *x = a->head; x; x = x->next)
        if (strcmp(x->id, id) == 0)
            return x;
    return NULL;
}

static void ledger_note(abx_server *s, uint64_t group, const char *kind, json_t *data)
{
    if (!s->ledger || !group) {
        json_decref(data);
        return;
    }
    char at[32];
    abx_iso8601(abx_wall_ms(), at);
    json_object_set_new(data, "kind", json_string(kind));
    json_object_set_new(data, "at", json_string(at));
    json_t *events = json_pack("[o]", data);
    abx_ledger_append(s->ledger, group, events, true);
    json_decref(events);
}

/* The reply a poller gets for a record (under mu). */
static abx_err reply_for(const abx_approval *x, abx_reply *r)
{
    switch (x->state) {
    case DONE:
        abx_reply_status(r, x->result_status);
        if (x->result_status >= 400) {
            const json_t *e = json_object_get(x->result, "error");
            int code = abx_err_by_code(json_string_value(json_object_get(e, "code")));
            return abx_reply_error(r, code > 0 ? (abx_err)code : ABX_E_SERVER_INTERNAL, NULL, "%s",
                                   json_string_value(json_object_get(e, "message")) ?: "the held call failed");
        }
        abx_reply_json(r, json_incref(x->result));
        return ABX_OK;
    case DENIED:
        return abx_reply_error(r, ABX_E_APPROVAL_DENIED,
                               json_pack("{s:s, s:s?, s:s?}", "approval_id", x->id, "decided_by", x->decided_by,
                                         "reason", x->reason),
                               "the held call was denied by %s", x->decided_by ? x->decided_by : "an approver");
    case EXPIRED:
        return abx_reply_error(r, ABX_E_APPROVAL_EXPIRED, json_pack("{s:s}", "approval_id", x->id),
                               "nobody decided the held call in time");
    default: {
        char poll[64];
        snprintf(poll, sizeof poll, "/approvals/%s", x->id);
        abx_reply_status(r, 202);
        abx_reply_json(r, json_pack("{s:s, s:s, s:s, s:s, s:o}", "status", "pending", "approval_id", x->id, "poll",
                                    poll, "state", state_names[x->state], "files",
                                    abx_bound_files_json(&x->files)));
        return ABX_OK;
    }
    }
}

static void wait_decided_locked(abx_approvals *a, abx_approval *x, int64_t until_mono)
{
    while ((x->state == PENDING || x->state == APPROVED || x->state == RUNNING) && abx_now_ms() < until_mono) {
        int64_t t = until_mono < x->expires_mono ? until_mono : x->expires_mono;
        struct timespec ts = {.tv_sec = t / 1000, .tv_nsec = (t % 1000) * 1000000};
        pthread_cond_timedwait(&a->cond, &a->mu, &ts);
        expire_locked(a);
    }
}

abx_err abx_approval_hold(abx_request *r)
{
    abx_server *s = r->server;
    abx_approvals *a = s->approvals;
    abx_approval *x = abx_calloc(1, sizeof *x);
    unsigned char rnd[16];
    if (!x || abx_random(rnd, sizeof rnd) != 0) {
        abx_free(x);
        abx_fail(r, ABX_E_SERVER_UNAVAILABLE, "out of memory");
        return ABX_E_SERVER_UNAVAILABLE;
    }
    /* the approver reviews the files the call names as they are now */
    char why[400];
    abx_err be = abx_bind_files(r, &x->files, why, sizeof why);
    if (be != ABX_OK) {
        abx_free(x);
        abx_fail(r, be, "%s", why);
        return be;
    }
    abx_hex(rnd, sizeof rnd, x->id);
    x->server = s;
    x->principal = abx_strdup(abx_policy_principal_id(r->policy, r->slot));
    x->op = abx_strdup(r->op->id);
    x->args = json_deep_copy(r->args);
    char *canon = json_dumps(x->args, JSON_COMPACT | JSON_SORT_KEYS);
    abx_sha256_hex(canon ? canon : "", canon ? strlen(canon) : 0, x->args_sha256);
    free(canon);
    x->created_wall = abx_wall_ms();
    x->expires_mono = abx_now_ms() + (s->cfg.approval_ttl_ms > 0 ? s->cfg.approval_ttl_ms : 15 * 60 * 1000);
    x->state = PENDING;
    /* the held call's own ledger group: requested now, decided and run later */
    if (s->ledger) {
        char at[32];
        abx_iso8601(abx_wall_ms(), at);
        json_t *events = json_pack("[{s:s, s:s, s:s, s:s, s:s, s:s}, {s:s, s:s, s:s, s:s, s:o, s:s, s:o}]",
                                   "kind", "received", "at", at, "request_id", r->id, "principal", x->principal, "op",
                                   x->op, "door", abx_door_name(r->door), "kind", "approval_requested", "at", at,
                                   "approval_id", x->id, "determining", r->decision.determining, "args",
                                   abx_ledger_redact(x->args), "args_sha256", x->args_sha256, "files",
                                   abx_bound_files_json(&x->files));
        abx_ledger_call c = {.request_id = r->id, .principal = x->principal, .op = x->op,
                             .door = abx_door_name(r->door), .client = r->client, .events = events,
                             .durable = true};
        x->group_id = abx_ledger_record(s->ledger, &c);
        json_decref(events);
        if (!x->group_id) {
            approval_free(x);
            abx_fail(r, ABX_E_LEDGER_UNAVAILABLE, "the action ledger cannot be written; nothing was held");
            return ABX_E_LEDGER_UNAVAILABLE;
        }
    }
    pthread_mutex_lock(&a->mu);
    expire_locked(a);
    if (a->n >= APPROVALS_MAX) { /* drop the oldest finished records */
        for (abx_approval **pp = &a->head; *pp && a->n >= APPROVALS_MAX;) {
            if ((*pp)->state == DONE || (*pp)->state == DENIED || (*pp)->state == EXPIRED) {
                abx_approval *dead = *pp;
                *pp = dead->next;
                approval_free(dead);
                a->n--;
            } else {
                pp = &(*pp)->next;
            }
        }
    }
    x->next = a->head;
    a->head = x;
    a->n++;
    if (r->prefer_wait > 0)
        wait_decided_locked(a, x, abx_now_ms() + (int64_t)r->prefer_wait * 1000);
    abx_err e = reply_for(x, &r->reply);
    pthread_mutex_unlock(&a->mu);
    return e;
}

json_t *abx_approvals_list(abx_server *s, const char *principal, bool approver)
{
    abx_approvals *a = s->approvals;
    json_t *arr = json_array();
    pthread_mutex_lock(&a->mu);
    expire_locked(a);
    for (abx_approval *x = a->head; x; x = x->next) {
        if (!approver && strcmp(x->principal, principal) != 0)
            continue;
        char ts[32];
        abx_iso8601(x->created_wall, ts);
        json_t *o = json_pack("{s:s, s:s, s:s, s:s, s:O, s:s, s:o, s:s, s:I}", "id", x->id, "status",
                              state_names[x->state], "principal", x->principal, "op", x->op, "args", x->args,
                              "args_sha256", x->args_sha256, "files", abx_bound_files_json(&x->files), "created_at",
                              ts, "ledger_group", (json_int_t)x->group_id);
        if (x->decided_by)
            json_object_set_new(o, "decided_by", json_string(x->decided_by));
        if (x->reason)
            json_object_set_new(o, "reason", json_string(x->reason));
        json_array_append_new(arr, o);
    }
    pthread_mutex_unlock(&a->mu);
    return json_pack("{s:o}", "approvals", arr);
}

abx_err abx_approval_get(abx_server *s, const char *id, const char *principal, bool approver, abx_reply *r)
{
    abx_approvals *a = s->approvals;
    pthread_mutex_lock(&a->mu);
    expire_locked(a);
    abx_approval *x = find_locked(a, id);
    abx_err e;
    if (!x || (!approver && strcmp(x->principal, principal) != 0))
        e = abx_reply_error(r, ABX_E_APPROVAL_NOT_FOUND, NULL, "no held call '%s'", id);
    else
        e = reply_for(x, r);
    pthread_mutex_unlock(&a->mu);
    return e;
}

static void *runner(void *arg)
{
    abx_approval *x = arg;
    abx_server *s = x->server;
    abx_approvals *a = s->approvals;
    json_t *body = NULL;
    /* the whole pipeline again, as the requester, with this approval standing in for
     * the hold at step 8: exactly these arguments, exactly once */
    int status = abx_call_internal(s, ABX_DOOR_APPROVAL, x->principal, x->op, x->args, 0, x, &body);
    ledger_note(s, x->group_id, "approved_call_finished", json_pack("{s:i, s:s}", "status", status, "approval_id", x->id));
    pthread_mutex_lock(&a->mu);
    x->result_status = status;
    x->result = body;
    x->state = DONE;
    a->running--;
    pthread_cond_broadcast(&a->cond);
    pthread_mutex_unlock(&a->mu);
    return NULL;
}

abx_err abx_approval_decide(abx_server *s, const char *id, const char *approver, bool approve, const char *reason,
                            abx_reply *r)
{
    abx_approvals *a = s->approvals;
    pthread_mutex_lock(&a->mu);
    expire_locked(a);
    abx_approval *x = find_locked(a, id);
    abx_err e = ABX_OK;
    if (!x)
        e = abx_reply_error(r, ABX_E_APPROVAL_NOT_FOUND, NULL, "no held call '%s'", id);
    else if (strcmp(x->principal, approver) == 0)
        e = abx_reply_error(r, ABX_E_APPROVAL_SELF, NULL, "'%s' cannot decide its own held call", approver);
    else if (x->state == EXPIRED)
        e = abx_reply_error(r, ABX_E_APPROVAL_EXPIRED, NULL, "the held call expired before it was decided");
    else if (x->state != PENDING)
        e = abx_reply_error(r, ABX_E_APPROVAL_DECIDED, NULL, "the held call was already %s", state_names[x->state]);
    if (e) {
        pthread_mutex_unlock(&a->mu);
        return e;
    }
    x->decided_by = abx_strdup(approver);
    x->reason = reason ? abx_strdup(reason) : NULL;
    x->state = approve ? APPROVED : DENIED;
    pthread_cond_broadcast(&a->cond);
    if (approve) {
        pthread_t t;
        pthread_attr_t at;
        pthread_attr_init(&at);
        pthread_attr_setdetachstate(&at, PTHREAD_CREATE_DETACHED);
        a->running++;
        x->state = RUNNING;
        if (pthread_create(&t, &at, runner, x) != 0) {
            a->running--;
            x->state = APPROVED; /* decided; it will not run: record why */
            x->result_status = 503;
            x->result = abx_error_json(ABX_E_SERVER_UNAVAILABLE, "could not start the approved call", NULL);
            x->state = DONE;
        }
        pthread_attr_destroy(&at);
    }
    uint64_t group = x->group_id;
    json_t *out = json_pack("{s:s, s:s, s:s, s:s?}", "id", x->id, "decision", approve ? "approve" : "deny",
                            "status", state_names[x->state], "reason", reason);
    pthread_mutex_unlock(&a->mu);
    ledger_note(s, group, "approval_decided",
                json_pack("{s:s, s:s, s:s, s:s?}", "approval_id", id, "decision", approve ? "approve" : "deny",
                          "decided_by", approver, "reason", reason));
    abx_reply_json(r, out);
    return ABX_OK;
}

/* Does this approval authorise exactly this call? (step 8 of the approved run) */
bool abx_approval_matches(const abx_approval *x, const char *principal, const char *op, const json_t *args)
{
    char *canon = json_dumps(args, JSON_COMPACT | JSON_SORT_KEYS);
    char h[65];
    abx_sha256_hex(canon ? canon : "", canon ? strlen(canon) : 0, h);
    free(canon);
    return strcmp(x->principal, principal) == 0 && strcmp(x->op, op) == 0 && strcmp(x->args_sha256, h) == 0 &&
           x->state == RUNNING;
}

abx_err abx_approval_check_files(abx_approval *x, abx_request *now, char *msg, size_t msglen)
{
    /* x->files is written once, before the record is published, and freed only with
     * the record, which outlives its runner: no lock needed to read it */
    abx_err e = abx_bind_check(&x->files, now, msg, msglen);
    if (e != ABX_OK)
        ledger_note(x->server, x->group_id, "approval_stale",
                    json_pack("{s:s, s:s, s:s}", "approval_id", x->id, "code", abx_err_code(e), "message", msg));
    return e;
}
