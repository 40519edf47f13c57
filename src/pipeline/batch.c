/* batch.c — POST /batch: several calls, each through the whole pipeline with its own
 * ledger group linked to the batch's. Scheduling follows the read-only parallel lane:
 * consecutive read-only calls that name paths run in parallel (reads never conflict
 * with reads); a read-only call without a path, and every mutating or unknown call, is
 * a sequential barrier. Results come back in request order with each call's status. */
#include "pipeline/pipeline.h"
#include <string.h>

#define BATCH_MAX 100
#define LANE_THREADS 8

typedef struct slot {
    abx_request *batch;      /* borrowed */
    const char *op;
    const json_t *args;
    int status;
    json_t *body;
    int64_t start_us, end_us;
} slot;

static void run_one(slot *s)
{
    abx_request *b = s->batch;
    s->start_us = abx_now_us();
    s->status = abx_call_internal(b->server, ABX_DOOR_BATCH, abx_policy_principal_id(b->policy, b->slot), s->op,
                                  s->args, b->group_id, NULL, &s->body);
    s->end_us = abx_now_us();
}

static void *lane_worker(void *arg)
{
    run_one(arg);
    return NULL;
}

/* A call may join the parallel lane when its op is known, read-only, and names paths. */
static bool lane_ok(const abx_request *b, const char *op_name)
{
    const abx_op *op = op_name ? abx_registry_resolve(b->server->reg, op_name) : NULL;
    return op && op->effects == ABX_EFF_READ && op->path_params && op->def->stream == ABX_STREAM_NONE;
}

void abx_batch_run(abx_request *r)
{
    if (r->slot == (int)r->policy->n_principals) {
        abx_fail(r, ABX_E_AUTH_REQUIRED, "credentials are required: Authorization: Bearer <token>");
        return;
    }
    json_error_t je;
    json_t *doc = r->body.len ? json_loadb(r->body.data, r->body.len, JSON_REJECT_DUPLICATES, &je) : NULL;
    const json_t *calls = json_object_get(doc, "calls");
    if (!json_is_object(doc) || !json_is_array(calls) || json_object_size(doc) != 1) {
        json_decref(doc);
        abx_fail(r, ABX_E_REQUEST_BAD_JSON, "the body must be {\"calls\": [{\"op\": ..., \"args\": {...}}, ...]}");
        return;
    }
    size_t n = json_array_size(calls);
    if (n == 0 || n > BATCH_MAX) {
        json_decref(doc);
        abx_fail(r, ABX_E_ARGS_INVALID, "a batch holds 1 to %d calls (%zu given)", BATCH_MAX, n);
        return;
    }
    for (size_t i = 0; i < n; i++) {
        const json_t *c = json_array_get(calls, i);
        const json_t *args = json_object_get(c, "args");
        if (!json_is_object(c) || !json_is_string(json_object_get(c, "op")) || (args && !json_is_object(args))) {
            json_decref(doc);
            abx_fail(r, ABX_E_ARGS_INVALID, "calls[%zu] must be {\"op\": \"id\", \"args\": {...}}", i);
            return;
        }
    }
    /* the batch's own group, so each call's group can point at it */
    if (r->server->ledger) {
        char at[32];
        abx_iso8601(abx_wall_ms(), at);
        json_t *events = json_pack("[{s:s, s:s, s:s, s:s, s:s, s:i}]", "kind", "received", "at", at, "request_id",
                                   r->id, "principal", abx_policy_principal_id(r->policy, r->slot), "op", "batch",
                                   "calls", (int)n);
        json_object_set_new(json_array_get(events, 0), "door", json_string("batch"));
        abx_ledger_call c = {.request_id = r->id, .principal = abx_policy_principal_id(r->policy, r->slot),
                             .op = "batch", .door = "batch", .client = r->client, .events = events, .durable = true};
        r->group_id = abx_ledger_record(r->server->ledger, &c);
        json_decref(events);
    }
    slot *slots = abx_calloc(n, sizeof *slots);
    if (!slots) {
        json_decref(doc);
        abx_fail(r, ABX_E_SERVER_UNAVAILABLE, "out of memory");
        return;
    }
    for (size_t i = 0; i < n; i++) {
        const json_t *c = json_array_get(calls, i);
        slots[i] = (slot){.batch = r, .op = json_string_value(json_object_get(c, "op")),
                          .args = json_object_get(c, "args")};
    }
    for (size_t i = 0; i < n;) {
        size_t j = i;
        while (j < n && j - i < LANE_THREADS && lane_ok(r, slots[j].op))
            j++;
        if (j - i >= 2) { /* a lane: run together, wait for all */
            pthread_t t[LANE_THREADS];
            bool started[LANE_THREADS] = {0};
            for (size_t k = i; k < j; k++)
                started[k - i] = pthread_create(&t[k - i], NULL, lane_worker, &slots[k]) == 0;
            for (size_t k = i; k < j; k++) {
                if (started[k - i])
                    pthread_join(t[k - i], NULL);
                else
                    run_one(&slots[k]);
            }
            i = j;
        } else { /* a barrier: alone, in order */
            run_one(&slots[i]);
            i++;
        }
    }
    json_t *results = json_array();
    for (size_t i = 0; i < n; i++) {
        json_t *res = json_pack("{s:s, s:i, s:o}", "op", slots[i].op, "status", slots[i].status, "body",
                                slots[i].body ? slots[i].body : json_null());
        json_object_set_new(res, "started_us", json_integer(slots[i].start_us - r->start_us));
        json_object_set_new(res, "ended_us", json_integer(slots[i].end_us - r->start_us));
        json_array_append_new(results, res);
    }
    abx_free(slots);
    json_decref(doc);
    abx_reply_json(&r->reply, json_pack("{s:o, s:I}", "results", results, "batch_group", (json_int_t)r->group_id));
}
