/* lanes.c — how a front door that carries several calls (POST /batch, POST /tools/call)
 * runs them: each call through the whole pipeline with the door's authenticated
 * principal and its own ledger group linked to the door's group. Scheduling follows the
 * read-only parallel lane: consecutive read-only calls that name paths run in parallel
 * (reads never conflict with reads); a read-only call without a path, a streaming call,
 * and every mutating or unknown call is a sequential barrier. Results stay in request
 * order. The doors own their envelopes; nothing here knows a wire format. */
#include "pipeline/pipeline.h"
#include <string.h>

#define LANE_THREADS 8

typedef struct lane_job {
    abx_request *front;    /* borrowed */
    abx_door door;
    abx_lane_call *call;   /* borrowed */
} lane_job;

static void run_one(lane_job *j)
{
    abx_request *f = j->front;
    abx_lane_call *c = j->call;
    c->start_us = abx_now_us();
    c->status = abx_call_internal(f->server, j->door, abx_policy_principal_id(f->policy, f->slot), c->op, c->args,
                                  f->group_id, NULL, &c->body);
    c->end_us = abx_now_us();
}

static void *lane_worker(void *arg)
{
    run_one(arg);
    return NULL;
}

/* A call may join the parallel lane when its op is known, read-only, names paths and
 * answers at once (a stream may run for as long as its source lives). */
static bool lane_ok(const abx_request *f, const char *op_name)
{
    const abx_op *op = op_name ? abx_registry_resolve(f->server->reg, op_name) : NULL;
    return op && op->effects == ABX_EFF_READ && op->path_params && op->def->stream == ABX_STREAM_NONE;
}

void abx_lanes_run(abx_request *front, abx_door door, abx_lane_call *calls, size_t n)
{
    lane_job jobs[LANE_THREADS];
    for (size_t i = 0; i < n;) {
        size_t j = i;
        while (j < n && j - i < LANE_THREADS && lane_ok(front, calls[j].op))
            j++;
        if (j - i >= 2) { /* a lane: run together, wait for all */
            pthread_t t[LANE_THREADS];
            bool started[LANE_THREADS] = {0};
            for (size_t k = i; k < j; k++) {
                jobs[k - i] = (lane_job){.front = front, .door = door, .call = &calls[k]};
                started[k - i] = pthread_create(&t[k - i], NULL, lane_worker, &jobs[k - i]) == 0;
            }
            for (size_t k = i; k < j; k++) {
                if (started[k - i])
                    pthread_join(t[k - i], NULL);
                else
                    run_one(&jobs[k - i]);
            }
            i = j;
        } else { /* a barrier: alone, in order */
            lane_job one = {.front = front, .door = door, .call = &calls[i]};
            run_one(&one);
            i++;
        }
    }
}

void abx_front_door_record(abx_request *r, const char *label, size_t n_calls, json_t *extra)
{
    abx_ledger *l = r->server->ledger;
    if (!l) {
        json_decref(extra);
        return;
    }
    char at[32];
    abx_iso8601(abx_wall_ms(), at);
    const char *principal = abx_policy_principal_id(r->policy, r->slot);
    json_t *received = json_pack("{s:s, s:s, s:s, s:s, s:s, s:i, s:s}", "kind", "received", "at", at, "request_id",
                                 r->id, "principal", principal, "op", label, "calls", (int)n_calls, "door",
                                 abx_door_name(r->door));
    if (received && extra)
        json_object_update(received, extra);
    json_decref(extra);
    json_t *events = json_array();
    json_array_append_new(events, received);
    abx_ledger_call c = {.request_id = r->id, .principal = principal, .op = label, .door = abx_door_name(r->door),
                         .client = r->client, .events = events, .durable = true};
    r->group_id = abx_ledger_record(l, &c);
    json_decref(events);
}
