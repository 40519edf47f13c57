/* runs.c — the runs namespace: the completion record of an agent's run (the guide's
 * "finalize_response" / host.submit_output). A run is open until exactly one completion:
 * runs.finalize from outside (a closed schema: id and output only) or host.submit_output
 * from a cell of a kernel created with `run: ID`. Nothing else completes a run; a second
 * completion is 409 run.completed. Runs live in memory, per principal. */
#include "builtin/kernels.h"
#include <stdio.h>
#include <string.h>

typedef struct run {
    char id[20];
    char *owner;
    json_t *output;          /* NULL while open */
    const char *completed_by;
    struct run *next;
} run;

typedef struct rstate {
    pthread_mutex_t mu;
    run *list;
} rstate;

static void *rstate_new(void)
{
    rstate *st = abx_calloc(1, sizeof *st);
    if (st)
        pthread_mutex_init(&st->mu, NULL);
    return st;
}

static void rstate_free(void *p)
{
    rstate *st = p;
    while (st->list) {
        run *r = st->list;
        st->list = r->next;
        json_decref(r->output);
        abx_free(r->owner);
        abx_free(r);
    }
    pthread_mutex_destroy(&st->mu);
    abx_free(st);
}

static run *find(rstate *st, const char *id, const char *owner) /* under st->mu */
{
    for (run *r = st->list; r; r = r->next)
        if (id && strcmp(r->id, id) == 0 && strcmp(r->owner, owner) == 0)
            return r;
    return NULL;
}

bool abx_run_exists(abx_host *s, const char *id, const char *owner)
{
    rstate *st = abx_host_ns_state(s, &abx_ns_runs);
    pthread_mutex_lock(&st->mu);
    bool found = find(st, id, owner) != NULL;
    pthread_mutex_unlock(&st->mu);
    return found;
}

abx_err abx_run_complete(abx_host *s, const char *id, const char *owner, const json_t *output, const char *by,
                         char *msg, size_t msglen)
{
    rstate *st = abx_host_ns_state(s, &abx_ns_runs);
    abx_err e = ABX_OK;
    pthread_mutex_lock(&st->mu);
    run *r = find(st, id, owner);
    if (!r) {
        e = ABX_E_RUN_NOT_FOUND;
        snprintf(msg, msglen, "no run %s of this caller", id ? id : "");
    } else if (r->output) {
        e = ABX_E_RUN_COMPLETED;
        snprintf(msg, msglen, "run %s was already completed by %s", r->id, r->completed_by);
    } else {
        r->output = json_deep_copy(output ? output : json_null());
        r->completed_by = by;
    }
    pthread_mutex_unlock(&st->mu);
    return e;
}

static abx_err runs_create(abx_ctx *ctx, const json_t *args, abx_reply *rep)
{
    rstate *st = abx_ctx_ns_state(ctx, &abx_ns_runs);
    run *r = abx_calloc(1, sizeof *r);
    unsigned char rnd[6];
    if (!r || !(r->owner = abx_strdup(abx_ctx_principal(ctx))) || abx_random(rnd, sizeof rnd) != 0) {
        if (r)
            abx_free(r->owner);
        abx_free(r);
        return abx_reply_error(rep, ABX_E_SERVER_UNAVAILABLE, NULL, "out of memory");
    }
    char hex[13];
    abx_hex(rnd, sizeof rnd, hex);
    snprintf(r->id, sizeof r->id, "r-%s", hex);
    pthread_mutex_lock(&st->mu);
    r->next = st->list;
    st->list = r;
    pthread_mutex_unlock(&st->mu);
    abx_reply_json(rep, json_pack("{s:s, s:s}", "id", r->id, "status", "open"));
    return ABX_OK;
}

static abx_err runs_get(abx_ctx *ctx, const json_t *args, abx_reply *rep)
{
    rstate *st = abx_ctx_ns_state(ctx, &abx_ns_runs);
    pthread_mutex_lock(&st->mu);
    run *r = find(st, json_string_value(json_object_get(args, "id")), abx_ctx_principal(ctx));
    json_t *out = r ? json_pack("{s:s, s:s, s:O?, s:s?}", "id", r->id, "status", r->output ? "completed" : "open",
                                "output", r->output, "completed_by", r->completed_by)
                    : NULL;
    pthread_mutex_unlock(&st->mu);
    if (!out)
        return abx_reply_error(rep, ABX_E_RUN_NOT_FOUND, NULL, "no run %s of this caller",
                               json_string_value(json_object_get(args, "id")));
    abx_reply_json(rep, out);
    return ABX_OK;
}

static abx_err runs_finalize(abx_ctx *ctx, const json_t *args, abx_reply *rep)
{
    char msg[160];
    const char *id = json_string_value(json_object_get(args, "id"));
    abx_err e = abx_run_complete(abx_ctx_host(ctx), id, abx_ctx_principal(ctx),
                                 json_object_get(args, "output"), "finalize", msg, sizeof msg);
    if (e != ABX_OK)
        return abx_reply_error(rep, e, NULL, "%s", msg);
    return runs_get(ctx, args, rep);
}

static const abx_param id_params[] = {{"id", ABX_T_STRING, .required = true, .doc = "Run id"}, {0}};
static const abx_param finalize_params[] = {
    {"id", ABX_T_STRING, .required = true, .doc = "Run id"},
    {"output", ABX_T_ANY, .required = true, .doc = "The run's final output (any JSON value)"},
    {0},
};

/* results: what each op answers */
static const abx_param run_open_result[] = {
    {"id", ABX_T_STRING, .required = true},
    {"status", ABX_T_ENUM, .required = true, .choices = "open|completed"},
    {0},
};

static const abx_param run_result[] = {
    {"id", ABX_T_STRING, .required = true},
    {"status", ABX_T_ENUM, .required = true, .choices = "open|completed"},
    {"output", ABX_T_ANY, .required = true, .doc = "The final output (null while open)"},
    {"completed_by", ABX_T_STRING, .required = true, .nullable = true},
    {0},
};

static const abx_op_def runs_ops[] = {
    {.id = "runs.create", .result = run_open_result, .effects = ABX_EFF_WRITE, .summary = "Open a run (a completion record).",
     .http = {"POST /runs"}, .since = "0.2", .handler = runs_create},
    {.id = "runs.get", .result = run_result, .effects = ABX_EFF_READ, .summary = "A run: open or completed, its output and by what.",
     .http = {"GET /runs/{id}"}, .params = id_params, .since = "0.2", .errors = "run.not_found",
     .handler = runs_get},
    {.id = "runs.finalize", .result = run_result, .effects = ABX_EFF_WRITE,
     .summary = "Complete a run from outside with its output (once; host.submit_output is the other way).",
     .http = {"POST /runs/{id}/finalize"}, .params = finalize_params, .since = "0.2",
     .errors = "run.not_found run.completed", .handler = runs_finalize},
    {0},
};

const abx_namespace abx_ns_runs = {.name = "runs", .ops = runs_ops, .state_new = rstate_new, .state_free = rstate_free};
