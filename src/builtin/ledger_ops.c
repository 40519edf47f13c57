/* ledger_ops.c — the ledger namespace: the redacted, field-bounded projection of the
 * action ledger (timeline pages, a live stream resumable by ordinal, single groups) and
 * the chain's status. Principals see their own calls; role admin sees every call. Raw
 * wire state never leaves the store. */
#include "builtin/builtin.h"
#include "core/util.h"
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#define STREAM_POLL_MS 250 /* how often a live stream looks for new events */
#define STREAM_PAGE 200    /* events read per look */

static const char *visible_principal(abx_ctx *ctx)
{
    if (abx_ctx_has_role(ctx, "admin") || abx_ctx_has_role(ctx, "owner"))
        return NULL; /* every principal */
    return abx_ctx_principal(ctx);
}

static abx_err ledger_timeline(abx_ctx *ctx, const json_t *args, abx_reply *r)
{
    abx_ledger *l = abx_ctx_ledger(ctx);
    if (!l)
        return abx_reply_error(r, ABX_E_LEDGER_UNAVAILABLE, NULL, "the ledger is disabled in this server's config");
    const json_t *b = json_object_get(args, "before_ordinal"), *a = json_object_get(args, "after_ordinal");
    if (b && a)
        return abx_reply_error(r, ABX_E_ARGS_INVALID, NULL, "before_ordinal and after_ordinal are mutually exclusive");
    int limit = (int)json_integer_value(json_object_get(args, "limit"));
    abx_reply_json(r, abx_ledger_timeline(l, visible_principal(ctx), limit, b ? json_integer_value(b) : -1,
                                          a ? json_integer_value(a) : -1));
    return ABX_OK;
}

static abx_err ledger_get(abx_ctx *ctx, const json_t *args, abx_reply *r)
{
    abx_ledger *l = abx_ctx_ledger(ctx);
    if (!l)
        return abx_reply_error(r, ABX_E_LEDGER_UNAVAILABLE, NULL, "the ledger is disabled in this server's config");
    json_int_t id = json_integer_value(json_object_get(args, "group_id"));
    json_t *g = abx_ledger_group(l, (uint64_t)id, visible_principal(ctx));
    if (!g)
        return abx_reply_error(r, ABX_E_LEDGER_NOT_FOUND, NULL, "no group %lld visible to this caller", (long long)id);
    abx_reply_json(r, g);
    return ABX_OK;
}

/* ledger.stream: the events after an ordinal as they are written, one SSE event each
 * ("id: <ordinal>", so a reconnect with Last-Event-ID resumes after the last one seen). */
typedef struct live_state {
    abx_ledger *l;
    char *principal; /* NULL: every principal */
    int64_t after;
    abx_buf pending;
} live_state;

static long live_read(void *state, char *buf, size_t max)
{
    live_state *st = state;
    int64_t quiet_since = abx_now_ms();
    for (;;) {
        if (st->pending.len) {
            size_t n = st->pending.len < max ? st->pending.len : max;
            memcpy(buf, st->pending.data, n);
            memmove(st->pending.data, st->pending.data + n, st->pending.len - n);
            st->pending.len -= n;
            return (long)n;
        }
        json_t *page = abx_ledger_timeline(st->l, st->principal, STREAM_PAGE, -1, st->after);
        size_t i;
        json_t *ev;
        json_array_foreach(json_object_get(page, "events"), i, ev) {
            char *js = json_dumps(ev, JSON_COMPACT | JSON_SORT_KEYS);
            json_int_t ord = json_integer_value(json_object_get(ev, "ordinal"));
            abx_buf_printf(&st->pending, "id: %lld\nevent: event\ndata: %s\n\n", (long long)ord, js ? js : "{}");
            free(js);
            st->after = ord;
        }
        json_decref(page);
        if (st->pending.len)
            continue;
        if (abx_now_ms() - quiet_since >= 1500) { /* a comment at least every ~2 s (abx.h) */
            abx_buf_puts(&st->pending, ": keepalive\n\n");
            continue;
        }
        usleep(STREAM_POLL_MS * 1000);
    }
}

static void live_free(void *state)
{
    live_state *st = state;
    abx_buf_release(&st->pending);
    free(st->principal);
    free(st);
}

static abx_err ledger_stream(abx_ctx *ctx, const json_t *args, abx_reply *r)
{
    abx_ledger *l = abx_ctx_ledger(ctx);
    if (!l)
        return abx_reply_error(r, ABX_E_LEDGER_UNAVAILABLE, NULL, "the ledger is disabled in this server's config");
    const char *leid = abx_ctx_last_event_id(ctx);
    const json_t *a = json_object_get(args, "after_ordinal");
    int64_t after = -1;
    if (leid) {
        char *end;
        long long v = strtoll(leid, &end, 10);
        if (end == leid || *end || v < 0)
            return abx_reply_error(r, ABX_E_ARGS_INVALID, NULL, "Last-Event-ID is not an event ordinal");
        after = v;
    } else if (a) {
        after = json_integer_value(a);
    } else { /* from now on: after the newest event this caller may see */
        json_t *last = abx_ledger_timeline(l, visible_principal(ctx), 1, -1, -1);
        json_t *b = json_object_get(json_object_get(last, "cursor"), "after_ordinal");
        after = json_is_integer(b) ? json_integer_value(b) : 0;
        json_decref(last);
    }
    live_state *st = calloc(1, sizeof *st);
    const char *who = visible_principal(ctx);
    if (!st || (who && !(st->principal = strdup(who)))) {
        free(st);
        return abx_reply_error(r, ABX_E_SERVER_UNAVAILABLE, NULL, "out of memory");
    }
    st->l = l;
    st->after = after;
    abx_buf_init(&st->pending, 1 << 22);
    abx_buf_printf(&st->pending, "event: start\ndata: {\"after_ordinal\": %lld}\n\n", (long long)after);
    abx_reply_stream(r, "text/event-stream", live_read, st, live_free);
    return ABX_OK;
}

/* ledger.verify: the hash chain checked over every segment, and its head */
static abx_err ledger_verify(abx_ctx *ctx, const json_t *args, abx_reply *r)
{
    abx_ledger *l = abx_ctx_ledger(ctx);
    if (!l)
        return abx_reply_error(r, ABX_E_LEDGER_UNAVAILABLE, NULL, "the ledger is disabled in this server's config");
    char err[512] = "", anchor[128] = "";
    uint64_t events = 0;
    int bad = abx_ledger_verify(abx_ledger_path(l), NULL, err, sizeof err, &events);
    json_t *o = json_pack("{s:b, s:I}", "intact", !bad, "events", (json_int_t)events);
    if (bad)
        json_object_set_new(o, "problem", json_string(err));
    char *colon;
    if (abx_ledger_anchor(abx_ledger_path(l), anchor, sizeof anchor) == 0 && (colon = strchr(anchor, ':'))) {
        *colon = '\0';
        json_object_set_new(o, "head", json_pack("{s:s, s:I}", "hash", anchor, "ordinal",
                                                 (json_int_t)strtoll(colon + 1, NULL, 10)));
    }
    abx_reply_json(r, o);
    return ABX_OK;
}

static const abx_param stream_params[] = {
    {"after_ordinal", ABX_T_INT, ABX_MIN(0),
     .doc = "Send the events after this ordinal first (default: from now on); Last-Event-ID overrides it"},
    ABX_TOOL_STREAM_PARAMS,
    {0},
};

static const abx_param timeline_params[] = {
    {"limit", ABX_T_INT, .dflt = "50", ABX_RANGE(1, 500), .doc = "Events per page (1–500)"},
    {"before_ordinal", ABX_T_INT, ABX_MIN(0), .doc = "Page of events older than this ordinal"},
    {"after_ordinal", ABX_T_INT, ABX_MIN(0), .doc = "Page of events newer than this ordinal"},
    {0},
};
static const abx_param get_params[] = {{"group_id", ABX_T_INT, .required = true, ABX_MIN(1), .doc = "Group id"}, {0}};

/* results: what each op answers */
static const abx_param event_fields[] = {
    {"ordinal", ABX_T_INT, .required = true},
    {"group_id", ABX_T_INT, .required = true},
    {"kind", ABX_T_STRING, .required = true},
    {"at", ABX_T_STRING, .required = true},
    {"data", ABX_T_MAP, ABX_T_ANY, .required = true, .doc = "The event's data (long fields are cut)"},
    {"principal", ABX_T_STRING, .nullable = true},
    {"op", ABX_T_STRING, .nullable = true},
    {"request_id", ABX_T_STRING, .nullable = true},
    {"hash", ABX_T_STRING, .required = true},
    {"door", ABX_T_STRING, .nullable = true, .doc = "The door the call came through (http, mcp, e2b, ...)"},
    {0},
};

static const abx_param cursor_fields[] = {
    {"before_ordinal", ABX_T_INT, .required = true, .nullable = true},
    {"after_ordinal", ABX_T_INT, .required = true, .nullable = true},
    {0},
};

static const abx_param timeline_result[] = {
    {"events", ABX_T_LIST, ABX_T_OBJECT, .required = true, .fields = event_fields},
    {"cursor", ABX_T_OBJECT, .required = true, .fields = cursor_fields},
    {"has_more_before", ABX_T_BOOL, .required = true},
    {"has_more_after", ABX_T_BOOL, .required = true},
    {"limit", ABX_T_INT, .required = true},
    {"field_max_bytes", ABX_T_INT, .required = true},
    {"live_first_ordinal", ABX_T_INT, .required = true},
    {0},
};

static const abx_param attempt_fields[] = {
    {"attempt_id", ABX_T_INT, .required = true},
    {"started_at", ABX_T_STRING, .required = true},
    {0},
};

static const abx_param group_result[] = {
    {"group_id", ABX_T_INT, .required = true},
    {"request_id", ABX_T_STRING, .required = true},
    {"principal", ABX_T_STRING, .required = true, .nullable = true},
    {"op", ABX_T_STRING, .required = true, .nullable = true},
    {"door", ABX_T_STRING, .required = true, .nullable = true},
    {"client", ABX_T_STRING, .required = true, .nullable = true},
    {"created_at", ABX_T_STRING, .required = true},
    {"batch_group", ABX_T_INT, .required = true, .nullable = true},
    {"events", ABX_T_LIST, ABX_T_OBJECT, .required = true, .fields = event_fields},
    {"attempts", ABX_T_LIST, ABX_T_OBJECT, .required = true, .fields = attempt_fields},
    {0},
};

static const abx_param start_fields[] = {
    {"after_ordinal", ABX_T_INT, .required = true, .doc = "The events after this ordinal follow"},
    {0},
};

static const abx_param stream_events[] = {
    {"start", ABX_T_OBJECT, .fields = start_fields, .doc = "The stream opened (the first event)"},
    {"event", ABX_T_OBJECT, .fields = event_fields, .doc = "One ledger event; id = its ordinal"},
    {0},
};

static const abx_param head_fields[] = {
    {"hash", ABX_T_STRING, .required = true},
    {"ordinal", ABX_T_INT, .required = true},
    {0},
};

static const abx_param verify_result[] = {
    {"intact", ABX_T_BOOL, .required = true},
    {"events", ABX_T_INT, .required = true, .doc = "Events checked"},
    {"problem", ABX_T_STRING, .doc = "What is broken (when not intact)"},
    {"head", ABX_T_OBJECT, .fields = head_fields, .doc = "The chain's head (when anchored)"},
    {0},
};

static const abx_op_def ledger_ops[] = {
    {.id = "ledger.timeline", .result = timeline_result, .effects = ABX_EFF_READ,
     .summary = "Redacted, field-bounded pages of the action ledger: the latest window first, then by ordinal.",
     .http = {"GET /ledger/timeline"}, .params = timeline_params, .since = "0.1",
     .errors = "ledger.unavailable", .handler = ledger_timeline},
    {.id = "ledger.get", .result = group_result, .effects = ABX_EFF_READ, .summary = "One call's group with its events and attempts, redacted.",
     .http = {"GET /ledger/{group_id}"}, .params = get_params, .since = "0.1",
     .errors = "ledger.not_found ledger.unavailable", .handler = ledger_get},
    {.id = "ledger.stream", .events = stream_events, .effects = ABX_EFF_READ,
     .summary = "The caller's view of the ledger live, as server-sent events (id = ordinal; resumable with "
                "Last-Event-ID or after_ordinal).",
     .http = {"GET /ledger/stream"}, .params = stream_params, .stream = ABX_STREAM_SSE, .since = "0.3",
     .errors = "ledger.unavailable", .handler = ledger_stream},
    {.id = "ledger.verify", .result = verify_result, .effects = ABX_EFF_ADMIN,
     .summary = "Check the ledger's hash chain over every segment and give its head (hash and ordinal).",
     .http = {"GET /ledger/verify"}, .since = "0.3", .errors = "ledger.unavailable", .handler = ledger_verify},
    {0},
};

const abx_namespace abx_ns_ledger = {.name = "ledger", .ops = ledger_ops};
