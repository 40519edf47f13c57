/* batch.c — POST /batch: the {"calls": [{"op", "args"}]} envelope. The calls run as
 * lanes.c schedules every multi-call front door (each through the whole pipeline with
 * its own ledger group linked to the batch's; a leading lane of path-naming reads in
 * parallel, everything else a barrier); results come back in request order with each
 * call's status and timing. */
#include "doors/doors.h"
#include <string.h>

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
    if (n == 0 || n > ABX_FRONT_MAX_CALLS) {
        json_decref(doc);
        abx_fail(r, ABX_E_ARGS_INVALID, "a batch holds 1 to %d calls (%zu given)", ABX_FRONT_MAX_CALLS, n);
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
    abx_front_door_record(r, "batch", n, NULL);
    abx_lane_call *slots = abx_calloc(n, sizeof *slots);
    if (!slots) {
        json_decref(doc);
        abx_fail(r, ABX_E_SERVER_UNAVAILABLE, "out of memory");
        return;
    }
    for (size_t i = 0; i < n; i++) {
        const json_t *c = json_array_get(calls, i);
        slots[i] = (abx_lane_call){.op = json_string_value(json_object_get(c, "op")), .args = json_object_get(c, "args")};
    }
    abx_lanes_run(r, ABX_DOOR_BATCH, slots, n);
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
