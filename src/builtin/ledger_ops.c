/* ledger_ops.c — the ledger namespace: the redacted, field-bounded projection of the
 * action ledger (timeline pages and single groups). Principals see their own calls;
 * role admin sees every call. Raw wire state never leaves the store. */
#include "builtin/builtin.h"
#include <string.h>

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

static const abx_op_def ledger_ops[] = {
    {.id = "ledger.timeline", .result = timeline_result, .effects = ABX_EFF_READ,
     .summary = "Redacted, field-bounded pages of the action ledger: the latest window first, then by ordinal.",
     .http = {"GET /ledger/timeline"}, .params = timeline_params, .since = "0.1",
     .errors = "ledger.unavailable", .handler = ledger_timeline},
    {.id = "ledger.get", .result = group_result, .effects = ABX_EFF_READ, .summary = "One call's group with its events and attempts, redacted.",
     .http = {"GET /ledger/{group_id}"}, .params = get_params, .since = "0.1",
     .errors = "ledger.not_found ledger.unavailable", .handler = ledger_get},
    {0},
};

const abx_namespace abx_ns_ledger = {.name = "ledger", .ops = ledger_ops};
