/* dyntools.c — the tools namespace (issue 23): tools an agent writes for itself during a
 * session. tools.define checks a definition (core/dyndef.c), runs its tests in a fresh
 * confined Python process (dyntools_run.c) and puts it in the server's overlay as the op
 * dyn.<name>, visible to its author only; tools.call {hash, args} and dyn.<name> run it,
 * each call a new confined process with at most the caller's grants (the author's, until
 * a promotion); tools.promote (held for an approval by someone else, bound to the hash)
 * opens it to other principals or roles, who then run it with their own grants.
 * The registry stays frozen: dyn.* ops exist only in the overlay, which dispatch (step 4)
 * and discovery consult after the registry. */
#include "builtin/builtin.h"
#include "builtin/dyntools.h"
#include <stdio.h>
#include <string.h>

static void ledger_event(abx_ctx *ctx, json_t *e)
{
    abx_ledger *l = abx_ctx_ledger(ctx);
    uint64_t group = abx_ctx_ledger_group(ctx);
    if (l && group && e) {
        char at[32];
        abx_iso8601(abx_wall_ms(), at);
        json_object_set_new(e, "at", json_string(at));
        json_t *events = json_pack("[O]", e);
        abx_ledger_append(l, group, events, true);
        json_decref(events);
    }
    json_decref(e);
}

static json_t *iso(int64_t ms)
{
    char at[32];
    if (!ms)
        return json_null();
    abx_iso8601(ms, at);
    return json_string(at);
}

static json_t *summary(const abx_dyn_entry *e, const char *caller)
{
    json_t *to = json_array();
    size_t n_to = atomic_load(&e->n_to);
    for (size_t i = 0; i < n_to; i++)
        json_array_append_new(to, json_string(e->to[i]));
    return json_pack("{s:s, s:s, s:s, s:s, s:s, s:o, s:o, s:o, s:b}", "id", e->def->id, "name", e->def->name,
                     "hash", e->def->hash, "author", e->author, "description", e->def->description, "created_at",
                     iso(e->created_ms), "expires_at", iso(e->expires_ms), "promoted_to", to, "mine",
                     strcmp(e->author, caller) == 0);
}

/* Run entry e for the caller with args (validated against its parameters). */
static abx_err run_entry(abx_ctx *ctx, abx_dyn_entry *e, const json_t *args, abx_reply *r)
{
    json_t *out = NULL;
    const char *caller = abx_ctx_principal(ctx);
    abx_err rc = abx__dyn_exec(ctx, e->def, args, caller, &out, r);
    ledger_event(ctx, json_pack("{s:s, s:s, s:s, s:s, s:s}", "kind", "dyn_tool.call", "hash", e->def->hash, "tool",
                                e->def->id, "author", e->author, "outcome", rc == ABX_OK ? "ok" : abx_err_code(rc)));
    if (rc == ABX_OK)
        abx_reply_json(r, json_incref(json_object_get(out, "result")));
    json_decref(out);
    return rc;
}

/* The handler of every dyn.<name> op (the overlay's entries): step 6 validated args. */
static abx_err dyn_op_call(abx_ctx *ctx, const json_t *args, abx_reply *r)
{
    return run_entry(ctx, abx_ctx_udata(ctx), args, r);
}

static abx_dyn_entry *visible_entry(abx_ctx *ctx, const char *hash)
{
    abx_dyn_who who;
    abx_ctx_dyn_who(ctx, &who);
    return abx_overlay_by_hash(abx_ctx_overlay(ctx), hash, &who);
}

static abx_err not_found(abx_reply *r)
{
    return abx_reply_error(r, ABX_E_TOOLS_NOT_FOUND, NULL, "No dynamic tool with this hash is visible to this caller");
}

static abx_err tools_define(abx_ctx *ctx, const json_t *args, abx_reply *r)
{
    json_t *def = json_deep_copy(args);
    json_object_del(def, "ttl");
    abx_dyndef *d = NULL;
    char err[300];
    int prc = abx_dyndef_parse(def, &d, err, sizeof err);
    json_decref(def);
    if (prc != 0)
        return abx_reply_error(r, ABX_E_ARGS_INVALID, NULL, "%s", err);
    abx_server_facts f;
    abx_ctx_server_facts(ctx, &f);
    int64_t ttl = f.dynamic_tool_ttl_ms;
    const json_t *t = json_object_get(args, "ttl");
    if (t && json_integer_value(t) < ttl / 1000) /* seconds; the limit caps it */
        ttl = json_integer_value(t) * 1000;
    json_t *out = NULL;
    abx_err rc = abx__dyn_exec(ctx, d, NULL, abx_ctx_principal(ctx), &out, r);
    json_t *tests = rc == ABX_OK ? json_incref(json_object_get(out, "tests")) : NULL;
    json_decref(out);
    bool passed = rc == ABX_OK;
    size_t i;
    json_t *v;
    json_array_foreach(tests, i, v) passed = passed && json_is_true(json_object_get(v, "ok"));
    ledger_event(ctx, json_pack("{s:s, s:s, s:s, s:O?, s:s}", "kind", "dyn_tool.define", "hash", d->hash, "tool",
                                d->id, "tests", tests, "outcome", passed ? "defined" : "refused"));
    if (rc != ABX_OK) {
        abx_dyndef_free(d);
        return rc;
    }
    if (!passed) {
        abx_err e = abx_reply_error(r, ABX_E_TOOLS_TEST_FAILED, json_pack("{s:s, s:o}", "hash", d->hash, "tests", tests),
                                    "a test of %s failed; the definition is refused", d->id);
        abx_dyndef_free(d);
        return e;
    }
    abx_dyn_entry *e = abx_overlay_add(abx_ctx_overlay(ctx), d, abx_ctx_principal(ctx), ttl, tests, dyn_op_call, err,
                                       sizeof err);
    if (!e) {
        abx_dyndef_free(d);
        json_decref(tests);
        return abx_reply_error(r, ABX_E_TOOLS_TOO_MANY, NULL, "%s", err);
    }
    if (!t && abx_ctx_session(ctx)) /* no ttl: it lives as long as the session it was defined in */
        abx_overlay_bind_session(abx_ctx_overlay(ctx), e, abx_ctx_session(ctx));
    abx_reply_json(r, json_pack("{s:s, s:s, s:s, s:o, s:o, s:b}", "id", e->def->id, "name", e->def->name, "hash",
                                e->def->hash, "expires_at", iso(e->expires_ms), "tests", tests, "session",
                                !t && abx_ctx_session(ctx)));
    return ABX_OK;
}

static void list_one(void *ud, abx_dyn_entry *e)
{
    void **u = ud;
    json_array_append_new(u[0], summary(e, u[1]));
}

static abx_err tools_list(abx_ctx *ctx, const json_t *args, abx_reply *r)
{
    (void)args;
    abx_dyn_who who;
    abx_ctx_dyn_who(ctx, &who);
    json_t *a = json_array();
    void *u[2] = {a, (void *)who.principal};
    abx_overlay_each_version(abx_ctx_overlay(ctx), &who, list_one, u);
    abx_reply_json(r, json_pack("{s:o}", "tools", a));
    return ABX_OK;
}

static abx_err tools_get(abx_ctx *ctx, const json_t *args, abx_reply *r)
{
    abx_dyn_entry *e = visible_entry(ctx, json_string_value(json_object_get(args, "hash")));
    if (!e)
        return not_found(r);
    json_t *s = summary(e, abx_ctx_principal(ctx));
    json_object_set_new(s, "definition", json_loads(e->def->canonical, 0, NULL));
    json_object_set(s, "tests", e->tests);
    abx_reply_json(r, s);
    return ABX_OK;
}

static abx_err tools_delete(abx_ctx *ctx, const json_t *args, abx_reply *r)
{
    const char *hash = json_string_value(json_object_get(args, "hash"));
    if (abx_overlay_delete(abx_ctx_overlay(ctx), hash, abx_ctx_principal(ctx)) != 0)
        return not_found(r);
    ledger_event(ctx, json_pack("{s:s, s:s}", "kind", "dyn_tool.delete", "hash", hash));
    abx_reply_json(r, json_pack("{s:s, s:b}", "hash", hash, "deleted", 1));
    return ABX_OK;
}

static abx_err tools_call(abx_ctx *ctx, const json_t *args, abx_reply *r)
{
    abx_dyn_entry *e = visible_entry(ctx, json_string_value(json_object_get(args, "hash")));
    if (!e)
        return not_found(r);
    const json_t *given = json_object_get(args, "args");
    json_t *a = given ? json_deep_copy(given) : json_object();
    char msg[300] = "";
    abx_err v = abx_args_validate(&e->op, a, msg, sizeof msg);
    abx_err rc = v == ABX_OK ? run_entry(ctx, e, a, r) : abx_reply_error(r, v, NULL, "%s: %s", e->def->id, msg);
    json_decref(a);
    return rc;
}

/* Runs once an approver other than the author allowed it (the op requires approval):
 * the approval was bound to {hash, to}, so it promotes exactly that content. */
static abx_err tools_promote(abx_ctx *ctx, const json_t *args, abx_reply *r)
{
    const char *hash = json_string_value(json_object_get(args, "hash"));
    abx_dyn_entry *e = visible_entry(ctx, hash);
    if (!e || strcmp(e->author, abx_ctx_principal(ctx)) != 0)
        return not_found(r);
    const json_t *to = json_object_get(args, "to");
    int prc = abx_overlay_promote(abx_ctx_overlay(ctx), hash, to);
    if (prc == -2)
        return abx_reply_error(r, ABX_E_TOOLS_TOO_MANY, NULL, "a tool may be promoted to at most %d principals and roles",
                               ABX_DYN_AUDIENCE_MAX);
    if (prc != 0)
        return abx_reply_error(r, ABX_E_SERVER_UNAVAILABLE, NULL, "out of memory");
    ledger_event(ctx, json_pack("{s:s, s:s, s:s, s:O}", "kind", "dyn_tool.promote", "hash", hash, "tool", e->def->id,
                                "to", to));
    json_t *s = summary(e, abx_ctx_principal(ctx));
    abx_reply_json(r, s);
    return ABX_OK;
}

static const abx_param define_params[] = {
    {"name", ABX_T_STRING, .required = true, .doc = "The tool's name: it becomes the op dyn.<name>"},
    {"description", ABX_T_STRING, .required = true, .doc = "What the tool does (the model reads it)"},
    {"parameters", ABX_T_ANY, .required = true,
     .doc = "A closed JSON Schema object: properties of type string, integer, number, boolean, array of those"},
    {"code", ABX_T_STRING, .required = true, .doc = "Python source defining run(**args)"},
    {"language", ABX_T_ENUM, .required = true, .choices = "python", .doc = "python"},
    {"effects", ABX_T_LIST, .item = ABX_T_STRING, .doc = "What the tool does: read write delete exec net (default exec)"},
    {"paths", ABX_T_ANY, .doc = "{read: [dirs], write: [dirs]}: the most it may reach, within the caller's scope"},
    {"net", ABX_T_BOOL, .dflt = "false", .doc = "It needs the network (and the effect net; the statement must grant it)"},
    {"tests", ABX_T_LIST, .item = ABX_T_ANY, .doc = "[{args, expect}]: run before the tool is accepted"},
    {"ttl", ABX_T_INT, ABX_MIN(1), .doc = "Seconds until it expires (at most limits.dynamic_tool_ttl, the default)"},
    {0},
};
static const abx_param hash_params[] = {{"hash", ABX_T_STRING, .required = true, .doc = "The tool's hash"}, {0}};
static const abx_param call_params[] = {
    {"hash", ABX_T_STRING, .required = true, .doc = "The tool's hash (stable: a redefinition is a new hash)"},
    {"args", ABX_T_ANY, .doc = "The tool's arguments (an object)"},
    {0},
};
static const abx_param promote_params[] = {
    {"hash", ABX_T_STRING, .required = true, .doc = "The tool's hash"},
    {"to", ABX_T_LIST, .item = ABX_T_STRING, .required = true, ABX_RANGE(1, ABX_DYN_AUDIENCE_MAX),
     .doc = "Principals or role:NAME that may call it (1 to 32)"},
    {0},
};

/* results (tools.call answers the tool's own result: any JSON, like dyn.<name>) */
static const abx_param test_fields[] = {
    {"index", ABX_T_INT, .required = true},
    {"ok", ABX_T_BOOL, .required = true},
    {"got", ABX_T_ANY, .nullable = true, .doc = "What run() returned"},
    {"error", ABX_T_STRING, .doc = "Why it raised"},
    {0},
};

#define TOOL_SUMMARY_FIELDS                                                                                       \
    {"id", ABX_T_STRING, .required = true, .doc = "The op: dyn.<name>"}, {"name", ABX_T_STRING, .required = true}, \
        {"hash", ABX_T_STRING, .required = true}, {"author", ABX_T_STRING, .required = true},                     \
        {"description", ABX_T_STRING, .required = true},                                                         \
        {"created_at", ABX_T_STRING, .required = true, .nullable = true},                                        \
        {"expires_at", ABX_T_STRING, .required = true, .nullable = true},                                        \
        {"promoted_to", ABX_T_LIST, ABX_T_STRING, .required = true, .doc = "Principals and role:NAME"},          \
        {"mine", ABX_T_BOOL, .required = true, .doc = "The caller defined it"}

static const abx_param tool_summary[] = {TOOL_SUMMARY_FIELDS, {0}};

static const abx_param tools_define_result[] = {
    {"id", ABX_T_STRING, .required = true},
    {"name", ABX_T_STRING, .required = true},
    {"hash", ABX_T_STRING, .required = true},
    {"expires_at", ABX_T_STRING, .required = true, .nullable = true},
    {"tests", ABX_T_LIST, ABX_T_OBJECT, .required = true, .fields = test_fields},
    {"session", ABX_T_BOOL, .required = true, .doc = "It lives as long as the session it was defined in"},
    {0},
};

static const abx_param tools_list_result[] = {
    {"tools", ABX_T_LIST, ABX_T_OBJECT, .required = true, .fields = tool_summary},
    {0},
};

static const abx_param tools_get_result[] = {
    TOOL_SUMMARY_FIELDS,
    {"definition", ABX_T_MAP, ABX_T_ANY, .required = true, .doc = "The canonical definition"},
    {"tests", ABX_T_LIST, ABX_T_OBJECT, .fields = test_fields},
    {0},
};

static const abx_param tools_delete_result[] = {
    {"hash", ABX_T_STRING, .required = true},
    {"deleted", ABX_T_BOOL, .required = true},
    {0},
};

static const abx_op_def tools_ops[] = {
    {.id = "tools.define", .result = tools_define_result, .effects = ABX_EFF_EXEC | ABX_EFF_WRITE,
     .summary = "Define a dynamic tool (Python) for yourself: checked, hashed, its tests run confined; it becomes "
                "dyn.<name>.",
     .params = define_params, .since = "0.2", .limits = ABX_LIM_TIMEOUT | ABX_LIM_MEMORY | ABX_LIM_PIDS,
     .errors = "tools.test_failed tools.raised sandbox.unavailable op.worker_failed tools.too_many",
     .handler = tools_define},
    {.id = "tools.list", .result = tools_list_result, .effects = ABX_EFF_READ, .summary = "The dynamic tools you may call (every live version).",
     .since = "0.2", .handler = tools_list},
    {.id = "tools.get", .result = tools_get_result, .effects = ABX_EFF_READ, .summary = "A dynamic tool's definition and test results.",
     .params = hash_params, .since = "0.2", .errors = "tools.not_found", .handler = tools_get},
    {.id = "tools.delete", .result = tools_delete_result, .effects = ABX_EFF_DELETE, .summary = "Delete one of your dynamic tools (by hash).",
     .params = hash_params, .since = "0.2", .errors = "tools.not_found", .handler = tools_delete},
    {.id = "tools.call", .effects = ABX_EFF_EXEC, .summary = "Call a dynamic tool by hash (confined, with your grants).",
     .params = call_params, .since = "0.2", .limits = ABX_LIM_TIMEOUT | ABX_LIM_MEMORY | ABX_LIM_PIDS,
     .errors = "tools.not_found tools.raised sandbox.unavailable op.worker_failed", .handler = tools_call},
    {.id = "tools.promote", .result = tool_summary, .effects = ABX_EFF_WRITE,
     .summary = "Open one of your dynamic tools to other principals or roles (held for an approver's decision).",
     .params = promote_params, .since = "0.2", .requires_approval = true, .errors = "tools.not_found tools.too_many",
     .handler = tools_promote},
    {0},
};

const abx_namespace abx_ns_tools = {.name = "tools", .ops = tools_ops};
