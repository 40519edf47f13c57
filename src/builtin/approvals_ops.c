/* approvals_ops.c — the approvals namespace: approvers list and decide held calls;
 * requesters (and approvers) poll them. Deciding needs role approver besides being
 * mounted (approvals.decide is explicit-only, like every admin op). */
#include "builtin/builtin.h"
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#define WATCH_POLL_MS 300 /* how often approvals.stream looks for a change */

static abx_err approvals_list(abx_ctx *ctx, const json_t *args, abx_reply *r)
{
    abx_reply_json(r, abx_ctx_approvals_list(ctx, abx_ctx_has_role(ctx, "approver")));
    return ABX_OK;
}

static abx_err approvals_get(abx_ctx *ctx, const json_t *args, abx_reply *r)
{
    return abx_ctx_approval_get(ctx, json_string_value(json_object_get(args, "id")), abx_ctx_has_role(ctx, "approver"), r);
}

static abx_err approvals_decide(abx_ctx *ctx, const json_t *args, abx_reply *r)
{
    if (!abx_ctx_has_role(ctx, "approver"))
        return abx_reply_error(r, ABX_E_POLICY_DENIED, NULL, "deciding held calls needs role approver");
    const char *decision = json_string_value(json_object_get(args, "decision"));
    return abx_ctx_approval_decide(ctx, json_string_value(json_object_get(args, "id")), strcmp(decision, "approve") == 0,
                                   json_string_value(json_object_get(args, "reason")), r);
}

/* approvals.stream: the approvals.list answer again whenever it changes, as SSE */
typedef struct watch_state {
    abx_approvals_watch *w;
    char *principal;
    bool approver;
    char *last; /* the list last sent (compact, sorted keys) */
    long seq;
    abx_buf pending;
} watch_state;

static long watch_read(void *state, char *buf, size_t max)
{
    watch_state *st = state;
    int64_t quiet_since = abx_now_ms();
    for (;;) {
        if (st->pending.len) {
            size_t n = st->pending.len < max ? st->pending.len : max;
            memcpy(buf, st->pending.data, n);
            memmove(st->pending.data, st->pending.data + n, st->pending.len - n);
            st->pending.len -= n;
            return (long)n;
        }
        json_t *list = abx_approvals_watch_list(st->w, st->principal, st->approver);
        char *now = json_dumps(list, JSON_COMPACT | JSON_SORT_KEYS);
        json_decref(list);
        if (now && (!st->last || strcmp(now, st->last) != 0)) {
            abx_buf_printf(&st->pending, "id: %ld\nevent: approvals\ndata: %s\n\n", ++st->seq, now);
            free(st->last);
            st->last = now;
            continue;
        }
        free(now);
        if (abx_now_ms() - quiet_since >= 1500) { /* a comment at least every ~2 s (abx.h) */
            abx_buf_puts(&st->pending, ": keepalive\n\n");
            continue;
        }
        usleep(WATCH_POLL_MS * 1000);
    }
}

static void watch_free(void *state)
{
    watch_state *st = state;
    abx_buf_release(&st->pending);
    free(st->last);
    free(st->principal);
    free(st);
}

static abx_err approvals_stream(abx_ctx *ctx, const json_t *args, abx_reply *r)
{
    watch_state *st = calloc(1, sizeof *st);
    if (!st || !(st->principal = strdup(abx_ctx_principal(ctx)))) {
        free(st);
        return abx_reply_error(r, ABX_E_SERVER_UNAVAILABLE, NULL, "out of memory");
    }
    st->w = abx_ctx_approvals_watch(ctx);
    st->approver = abx_ctx_has_role(ctx, "approver");
    abx_buf_init(&st->pending, 1 << 22);
    abx_reply_stream(r, "text/event-stream", watch_read, st, watch_free);
    return ABX_OK;
}

static const abx_param stream_params[] = {ABX_TOOL_STREAM_PARAMS, {0}};
static const abx_param id_params[] = {{"id", ABX_T_STRING, .required = true, .doc = "Approval id"}, {0}};
static const abx_param decide_params[] = {
    {"id", ABX_T_STRING, .required = true, .doc = "Approval id"},
    {"decision", ABX_T_ENUM, .required = true, .choices = "approve|deny", .doc = "approve or deny"},
    {"reason", ABX_T_STRING, .doc = "Why (recorded in the ledger)"},
    {0},
};

/* results: approvals.list's (approvals.get and decide answer the held call's own result) */
static const abx_param approval_fields[] = {
    {"id", ABX_T_STRING, .required = true},
    {"status", ABX_T_STRING, .required = true},
    {"principal", ABX_T_STRING, .required = true},
    {"op", ABX_T_STRING, .required = true},
    {"args", ABX_T_MAP, ABX_T_ANY, .required = true},
    {"args_sha256", ABX_T_STRING, .required = true},
    {"files", ABX_T_ANY, .required = true, .doc = "The files the call is bound to (their digests)"},
    {"created_at", ABX_T_STRING, .required = true},
    {"ledger_group", ABX_T_INT, .required = true},
    {"decided_by", ABX_T_STRING},
    {"reason", ABX_T_STRING},
    {0},
};

static const abx_param approvals_list_result[] = {
    {"approvals", ABX_T_LIST, ABX_T_OBJECT, .required = true, .fields = approval_fields},
    {0},
};

static const abx_param approvals_stream_events[] = {
    {"approvals", ABX_T_OBJECT, .fields = approvals_list_result,
     .doc = "The approvals.list answer: now, then whenever it changes"},
    {0},
};

static const abx_op_def approvals_ops[] = {
    {.id = "approvals.list", .result = approvals_list_result, .effects = ABX_EFF_READ,
     .summary = "Held calls: approvers see all, others their own (pending and recent).", .http = {"GET /approvals"},
     .since = "0.1", .handler = approvals_list},
    {.id = "approvals.get", .effects = ABX_EFF_READ,
     .summary = "Poll a held call: 202 while pending, then the held call's own status and result.",
     .http = {"GET /approvals/{id}"}, .params = id_params, .since = "0.1",
     .errors = "approval.not_found", .handler = approvals_get},
    {.id = "approvals.stream", .events = approvals_stream_events, .effects = ABX_EFF_READ,
     .summary = "The approvals.list answer as server-sent events: now, then again whenever a held call is "
                "added, decided or expires.",
     .http = {"GET /approvals/stream"}, .params = stream_params, .stream = ABX_STREAM_SSE, .since = "0.3",
     .handler = approvals_stream},
    {.id = "approvals.decide", .effects = ABX_EFF_ADMIN,
     .summary = "Approve or deny a held call (role approver; not one's own); approved calls run exactly once.",
     .http = {"POST /approvals/{id}"}, .params = decide_params, .since = "0.1",
     .errors = "approval.not_found approval.self_approval approval.expired approval.already_decided",
     .handler = approvals_decide},
    {0},
};

const abx_namespace abx_ns_approvals = {.name = "approvals", .ops = approvals_ops};
