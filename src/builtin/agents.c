/* agents.c — the agents namespace: coding agent CLIs as operations (docs/agents.md).
 *
 * Per adapter (codex, claude_code): agents.<a>.run and agents.<a>.sessions.create /
 * send_event / get / list / delete. The generic agents.sessions.* ops (and their /v1
 * routes) choose the adapter in the seed's order (select() below) and then need the
 * adapter's own op mounted too: the two-level gate. Ops that start a CLI carry an
 * `agent` parameter of kind agent, so every statement that mounts them needs an
 * `agents:` scope naming the adapter (policy.scope_required otherwise), and they are
 * mounted only by statements that name them ("agents.*", "agents.codex.*", an id), never
 * by "*" or an effect selector. They declare the install requirement of their CLI
 * (step 8 installs it under install.allow). Sessions live in memory, per principal. */
#include "builtin/agents.h"
#include "builtin/results.h"
#include <stdio.h>
#include <string.h>

static void *st_new(void)
{
    agents_state *st = abx_calloc(1, sizeof *st);
    if (st)
        pthread_mutex_init(&st->mu, NULL);
    return st;
}

static void sess_free(agents_session *s)
{
    abx_free(s->owner);
    abx_free(s->cwd);
    abx_free(s->model);
    abx_free(s->thread);
    abx_free(s->last_final);
    abx_free(s);
}

static void st_free(void *p)
{
    agents_state *st = p;
    while (st->list) {
        agents_session *s = st->list;
        st->list = s->next;
        sess_free(s);
    }
    pthread_mutex_destroy(&st->mu);
    abx_free(st);
}

static agents_state *state(abx_ctx *ctx) { return abx_ctx_ns_state(ctx, &abx_ns_agents); }

static agents_session *find(agents_state *st, const char *id, const char *owner) /* under st->mu */
{
    for (agents_session *s = st->list; s; s = s->next)
        if (id && strcmp(s->id, id) == 0 && strcmp(s->owner, owner) == 0)
            return s;
    return NULL;
}

static json_t *sess_json(const agents_session *s)
{
    char at[32];
    abx_iso8601(s->created_ms, at);
    return json_pack("{s:s, s:s, s:s?, s:s?, s:s?, s:i, s:b, s:s?, s:s}", "id", s->id, "adapter", s->ad->id, "cwd",
                     s->cwd, "model", s->model, "thread", s->thread, "turns", s->turns, "busy", s->busy,
                     "last_final", s->last_final, "created_at", at);
}

/* ---- adapter selection (operation-model §5 rule 5) ---- */

static bool mounted(abx_ctx *ctx, const agents_adapter *ad, const char *verb)
{
    char id[96];
    snprintf(id, sizeof id, "agents.%s.%s", ad->id, verb);
    return abx_ctx_visible_op(ctx, id) != NULL;
}

static const agents_adapter *not_enabled(abx_reply *r)
{
    abx_reply_error(r, ABX_E_OP_NOT_ENABLED, NULL, "%s", abx_err_meaning(ABX_E_OP_NOT_ENABLED));
    return NULL;
}

/* The adapter of a generic call: (1) the path prefix /agents/<a>/v1/... (the adapter
 * argument), (2) X-ABX-Adapter, (3) a model string that is an adapter's name, (4) config
 * agents.default, (5) the only adapter whose op is mounted for the caller; else 400
 * agents.adapter_required, or 404 when none is. A selected adapter whose op is not
 * mounted is the same 404 as an unknown one. *by says which rule chose it. */
static const agents_adapter *select_adapter(abx_ctx *ctx, const json_t *args, const char *verb, abx_reply *r,
                                            const char **by)
{
    const agents_adapter *ad = NULL;
    const char *v;
    if ((v = json_string_value(json_object_get(args, "adapter")))) {
        if (!(ad = agents_adapter_find(v)))
            return not_enabled(r);
        *by = "path";
    } else if ((v = abx_ctx_header(ctx, "X-ABX-Adapter"))) {
        if (!(ad = agents_adapter_find(v)))
            return not_enabled(r);
        *by = "header";
    } else if ((ad = agents_adapter_find(json_string_value(json_object_get(args, "model"))))) {
        *by = "model";
    } else if ((ad = agents_adapter_find(json_string_value(json_object_get(abx_ctx_agents_config(ctx), "default"))))) {
        *by = "default";
    } else {
        size_t n = 0;
        for (size_t i = 0; i < ABX_ARRAY_LEN(agents_adapters); i++)
            if (mounted(ctx, &agents_adapters[i], verb)) {
                ad = &agents_adapters[i];
                n++;
            }
        if (n == 0)
            return not_enabled(r);
        if (n > 1) {
            abx_reply_error(r, ABX_E_AGENTS_ADAPTER_REQUIRED, NULL,
                            "several agent adapters are mounted: choose one with /agents/<adapter>/v1/..., the "
                            "X-ABX-Adapter header, model: <adapter> or config agents.default");
            return NULL;
        }
        *by = "only_mounted";
    }
    if (!mounted(ctx, ad, verb))
        return not_enabled(r);
    return ad;
}

/* Step 7 again with the chosen adapter as the agent argument, for the generic op and
 * for the adapter's own op: the agents: scope of a statement that mounts each must name
 * it (and the adapter op's paths and limits must admit the call too). */
static bool agent_admitted(abx_ctx *ctx, const json_t *args, const agents_adapter *ad, const char *verb, abx_reply *r)
{
    json_t *a = json_deep_copy(args);
    json_object_set_new(a, "agent", json_string(ad->id));
    json_object_del(a, "adapter");
    abx_decision d;
    abx_ctx_decide(ctx, a, &d);
    if (d.err == ABX_OK) {
        abx_decision_release(&d);
        char id[96];
        snprintf(id, sizeof id, "agents.%s.%s", ad->id, verb);
        abx_ctx_decide_op(ctx, id, a, &d);
    }
    json_decref(a);
    bool ok = d.err == ABX_OK;
    if (!ok)
        abx_reply_error(r, d.err, NULL, "%s", d.message);
    abx_decision_release(&d);
    return ok;
}

/* The adapter of an adapter op (its udata) or of a generic call. */
static const agents_adapter *adapter_of(abx_ctx *ctx, const json_t *args, const char *verb, bool scoped,
                                        abx_reply *r, const char **by)
{
    const agents_adapter *ad = abx_ctx_udata(ctx);
    *by = "op";
    if (ad)
        return ad;
    ad = select_adapter(ctx, args, verb, r, by);
    if (ad && scoped && !agent_admitted(ctx, args, ad, verb, r))
        return NULL;
    if (ad && scoped && abx_ctx_require(ctx, ad->requirement) != ABX_OK) /* step 8's install, now it is known */
        return NULL;
    return ad;
}

static const char *model_of(abx_ctx *ctx, const json_t *args, const agents_adapter *ad)
{
    const char *m = json_string_value(json_object_get(args, "model"));
    if (m && !agents_adapter_find(m)) /* real model names pass through */
        return m;
    const char *c = agents_setting(abx_ctx_agents_config(ctx), ad, "model");
    return c ? c : ad->model;
}

static int64_t timeout_of(const json_t *args)
{
    const json_t *t = json_object_get(args, "timeout");
    return json_is_number(t) && json_number_value(t) > 0 ? (int64_t)(json_number_value(t) * 1000) : 30 * 60 * 1000;
}

/* ---- handlers ---- */

static abx_err op_run(abx_ctx *ctx, const json_t *args, abx_reply *r)
{
    const char *by;
    const agents_adapter *ad = adapter_of(ctx, args, "run", true, r, &by);
    if (!ad)
        return abx_reply_err(r);
    agents_turn_in in = {.ad = ad, .cwd = NULL, .model = model_of(ctx, args, ad),
                         .prompt = json_string_value(json_object_get(args, "prompt")),
                         .timeout_ms = timeout_of(args), .config = abx_ctx_agents_config(ctx)};
    agents_turn *t = agents_turn_start(ctx, &in, r);
    if (!t)
        return abx_reply_err(r) ? abx_reply_err(r) : ABX_E_PROCESS_SPAWN_FAILED;
    json_t *res = NULL;
    abx_err e = agents_turn_finish(ctx, t, r, &res);
    json_decref(res);
    return e;
}

static abx_err op_create(abx_ctx *ctx, const json_t *args, abx_reply *r)
{
    const char *by;
    const agents_adapter *ad = adapter_of(ctx, args, "sessions.create", true, r, &by);
    if (!ad)
        return abx_reply_err(r);
    agents_state *st = state(ctx);
    agents_session *s = abx_calloc(1, sizeof *s);
    unsigned char rnd[8];
    if (!s || abx_random(rnd, sizeof rnd) != 0) {
        abx_free(s);
        return abx_reply_error(r, ABX_E_SERVER_UNAVAILABLE, NULL, "out of memory");
    }
    char hex[17];
    abx_hex(rnd, sizeof rnd, hex);
    snprintf(s->id, sizeof s->id, "ag-%s", hex);
    s->owner = abx_strdup(abx_ctx_principal(ctx) ? abx_ctx_principal(ctx) : "");
    s->ad = ad;
    s->cwd = agents_default_cwd(ctx);
    s->model = abx_strdup(model_of(ctx, args, ad));
    s->created_ms = abx_wall_ms();
    pthread_mutex_lock(&st->mu);
    s->next = st->list;
    st->list = s;
    json_t *out = sess_json(s);
    pthread_mutex_unlock(&st->mu);
    json_object_set_new(out, "selected_by", json_string(by));
    abx_reply_json(r, out);
    return ABX_OK;
}

/* The caller's session for an id-bearing call, checked against the adapter the call
 * names (an adapter op, or a generic call that chose one explicitly). */
static agents_session *session_for(abx_ctx *ctx, const json_t *args, const char *verb, abx_reply *r)
{
    agents_state *st = state(ctx);
    const char *id = json_string_value(json_object_get(args, "id"));
    const agents_adapter *want = abx_ctx_udata(ctx);
    const char *v = json_string_value(json_object_get(args, "adapter"));
    if (!want && v && !(want = agents_adapter_find(v)))
        return (agents_session *)not_enabled(r);
    if (!want && (v = abx_ctx_header(ctx, "X-ABX-Adapter")) && !(want = agents_adapter_find(v)))
        return (agents_session *)not_enabled(r);
    agents_session *s = find(st, id, abx_ctx_principal(ctx) ? abx_ctx_principal(ctx) : "");
    if (!s || (want && s->ad != want)) {
        abx_reply_error(r, ABX_E_AGENTS_SESSION_NOT_FOUND, NULL, "no agent session %s of this caller", id ? id : "");
        return NULL;
    }
    if (!abx_ctx_udata(ctx) && !mounted(ctx, s->ad, verb)) /* the two-level gate */
        return (agents_session *)not_enabled(r);
    return s;
}

typedef struct turn_end {
    agents_state *st;
    char id[24];
    char owner[128];
} turn_end;

static void on_turn_end(void *ud, const json_t *result)
{
    turn_end *te = ud;
    pthread_mutex_lock(&te->st->mu);
    agents_session *s = find(te->st, te->id, te->owner);
    if (s) {
        s->busy = false;
        if (result) {
            s->turns++;
            const char *th = json_string_value(json_object_get(result, "thread"));
            if (th && !s->thread)
                s->thread = abx_strdup(th);
            const char *fin = json_string_value(json_object_get(result, "final"));
            abx_free(s->last_final);
            s->last_final = fin ? abx_strdup(fin) : NULL;
        }
    }
    pthread_mutex_unlock(&te->st->mu);
}

static void te_free(void *ud) { abx_free(ud); }

static abx_err op_send(abx_ctx *ctx, const json_t *args, abx_reply *r)
{
    agents_state *st = state(ctx);
    pthread_mutex_lock(&st->mu);
    agents_session *s = session_for(ctx, args, "sessions.send_event", r);
    if (!s || (!abx_ctx_udata(ctx) && (!agent_admitted(ctx, args, s->ad, "sessions.send_event", r) ||
                                       abx_ctx_require(ctx, s->ad->requirement) != ABX_OK))) {
        pthread_mutex_unlock(&st->mu);
        return abx_reply_err(r);
    }
    if (s->busy) {
        pthread_mutex_unlock(&st->mu);
        return abx_reply_error(r, ABX_E_AGENTS_SESSION_BUSY, NULL, "session %s is running a turn", s->id);
    }
    s->busy = true;
    turn_end *te = abx_calloc(1, sizeof *te);
    agents_turn_in in = {.ad = s->ad, .cwd = s->cwd, .model = s->model, .resume = s->thread,
                         .prompt = json_string_value(json_object_get(args, "text")), .session_id = s->id,
                         .timeout_ms = timeout_of(args), .config = abx_ctx_agents_config(ctx)};
    char *cwd = abx_strdup(s->cwd), *model = abx_strdup(s->model), *thread = s->thread ? abx_strdup(s->thread) : NULL;
    in.cwd = cwd;
    in.model = model;
    in.resume = thread;
    if (te) {
        te->st = st;
        snprintf(te->id, sizeof te->id, "%s", s->id);
        snprintf(te->owner, sizeof te->owner, "%s", s->owner);
    }
    pthread_mutex_unlock(&st->mu);
    agents_turn *t = te ? agents_turn_start(ctx, &in, r) : NULL;
    abx_free(cwd);
    abx_free(model);
    abx_free(thread);
    if (!t) {
        if (te)
            on_turn_end(te, NULL);
        abx_free(te);
        return abx_reply_err(r) ? abx_reply_err(r) : ABX_E_SERVER_UNAVAILABLE;
    }
    if (json_is_false(json_object_get(args, "stream"))) {
        json_t *res = NULL;
        abx_err e = agents_turn_finish(ctx, t, r, &res);
        on_turn_end(te, res);
        json_decref(res);
        abx_free(te);
        return e;
    }
    agents_turn_stream(t, r, on_turn_end, te, te_free);
    return ABX_OK;
}

static abx_err op_get(abx_ctx *ctx, const json_t *args, abx_reply *r)
{
    agents_state *st = state(ctx);
    pthread_mutex_lock(&st->mu);
    agents_session *s = session_for(ctx, args, "sessions.get", r);
    json_t *out = s ? sess_json(s) : NULL;
    pthread_mutex_unlock(&st->mu);
    if (!out)
        return abx_reply_err(r);
    abx_reply_json(r, out);
    return ABX_OK;
}

static abx_err op_delete(abx_ctx *ctx, const json_t *args, abx_reply *r)
{
    agents_state *st = state(ctx);
    pthread_mutex_lock(&st->mu);
    agents_session *s = session_for(ctx, args, "sessions.delete", r);
    if (s && s->busy) {
        pthread_mutex_unlock(&st->mu);
        return abx_reply_error(r, ABX_E_AGENTS_SESSION_BUSY, NULL, "session %s is running a turn", s->id);
    }
    if (s)
        for (agents_session **pp = &st->list; *pp; pp = &(*pp)->next)
            if (*pp == s) {
                *pp = s->next;
                break;
            }
    pthread_mutex_unlock(&st->mu);
    if (!s)
        return abx_reply_err(r);
    abx_reply_json(r, json_pack("{s:s, s:b}", "id", s->id, "deleted", 1));
    sess_free(s);
    return ABX_OK;
}

static abx_err op_list(abx_ctx *ctx, const json_t *args, abx_reply *r)
{
    agents_state *st = state(ctx);
    const agents_adapter *want = abx_ctx_udata(ctx);
    const char *v = json_string_value(json_object_get(args, "adapter"));
    if (!want && v && !(want = agents_adapter_find(v)))
        return abx_reply_err((not_enabled(r), r));
    if (!want && (v = abx_ctx_header(ctx, "X-ABX-Adapter")) && !(want = agents_adapter_find(v)))
        return abx_reply_err((not_enabled(r), r));
    json_t *out = json_array();
    const char *me = abx_ctx_principal(ctx) ? abx_ctx_principal(ctx) : "";
    pthread_mutex_lock(&st->mu);
    for (agents_session *s = st->list; s; s = s->next)
        if (strcmp(s->owner, me) == 0 && (!want || s->ad == want) &&
            (abx_ctx_udata(ctx) || mounted(ctx, s->ad, "sessions.list")))
            json_array_append_new(out, sess_json(s));
    pthread_mutex_unlock(&st->mu);
    abx_reply_json(r, json_pack("{s:o}", "sessions", out));
    return ABX_OK;
}


/* ---- the op tables ---- */

#define P_MODEL {"model", ABX_T_STRING, .doc = "The upstream model (default agents.<adapter>.model, else the adapter's)"}
#define P_CWD                                                                                                         \
    {"cwd", ABX_T_STRING, .kind = ABX_KIND_PATH, .access = ABX_ACC_READ | ABX_ACC_WRITE,                             \
     .doc = "The agent's working folder (default: the scope root)"}
#define P_TIMEOUT {"timeout", ABX_T_NUMBER, ABX_RANGE(1, 86400), .doc = "Seconds before the turn is killed (default 1800)"}
#define P_AGENT(a)                                                                                                    \
    {"agent", ABX_T_ENUM, .choices = a, .dflt = "\"" a "\"", .kind = ABX_KIND_AGENT,                                 \
     .doc = "The adapter (fixed by this op), checked against the statement's agents: scope"}
#define P_ID(what) {"id", ABX_T_STRING, .required = true, .doc = what}
#define P_TEXT {"text", ABX_T_STRING, .required = true, .doc = "The user's turn"}
#define P_STREAM {"stream", ABX_T_BOOL, .dflt = "true", .doc = "false: answer with the turn's result as JSON"}
#define P_ADAPTER                                                                                                     \
    {"adapter", ABX_T_STRING, .doc = "The adapter (the /agents/<adapter>/v1/... prefix); see docs/agents.md for the order"}
#define P_GAGENT                                                                                                      \
    {"agent", ABX_T_STRING, .kind = ABX_KIND_AGENT, .doc = "Set from the selected adapter for the agents: scope check"}

#define ADAPTER_PARAMS(sfx, a)                                                                                        \
    static const abx_param run_##sfx[] = {{"prompt", ABX_T_STRING, .required = true, .doc = "The task"},             \
                                          P_CWD, P_MODEL, P_TIMEOUT, P_AGENT(a), {0}};                               \
    static const abx_param create_##sfx[] = {P_CWD, P_MODEL, P_AGENT(a), {0}};                                       \
    static const abx_param send_##sfx[] = {P_ID("Session id"), P_TEXT, P_STREAM, P_TIMEOUT, P_AGENT(a),              \
                                           ABX_TOOL_STREAM_PARAMS, {0}};
ADAPTER_PARAMS(codex, "codex")
ADAPTER_PARAMS(claude, "claude_code")
static const abx_param id_params[] = {P_ID("Session id"), {0}};
static const abx_param g_create[] = {P_CWD, P_MODEL, P_GAGENT, P_ADAPTER, {0}};
static const abx_param g_send[] = {P_ID("Session id"), P_TEXT, P_STREAM, P_TIMEOUT, P_GAGENT, P_ADAPTER,
                                   ABX_TOOL_STREAM_PARAMS, {0}};
static const abx_param g_id[] = {P_ID("Session id"), P_ADAPTER, {0}};
static const abx_param g_list[] = {P_ADAPTER, {0}};

/* results: a session, a turn's result and its events (the CLI's own lines mapped by
 * agents_cli.c; values taken from them as they are are typed loosely) */
#define SESSION_FIELDS                                                                                            \
    {"id", ABX_T_STRING, .required = true}, {"adapter", ABX_T_STRING, .required = true},                          \
        {"cwd", ABX_T_STRING, .required = true, .nullable = true},                                                \
        {"model", ABX_T_STRING, .required = true, .nullable = true},                                              \
        {"thread", ABX_T_STRING, .required = true, .nullable = true, .doc = "The CLI's own session id"},         \
        {"turns", ABX_T_INT, .required = true}, {"busy", ABX_T_BOOL, .required = true},                          \
        {"last_final", ABX_T_STRING, .required = true, .nullable = true, .doc = "The last turn's final message"}, \
        {"created_at", ABX_T_STRING, .required = true}
static const abx_param session_result[] = {SESSION_FIELDS, {0}};
static const abx_param create_result[] = {
    SESSION_FIELDS, {"selected_by", ABX_T_STRING, .required = true, .doc = "How the adapter was chosen"}, {0}};
static const abx_param list_result[] = {
    {"sessions", ABX_T_LIST, ABX_T_OBJECT, .required = true, .fields = session_result}, {0}};
static const abx_param delete_result[] = {
    {"id", ABX_T_STRING, .required = true}, {"deleted", ABX_T_BOOL, .required = true}, {0}};

#define EV_TYPE {"type", ABX_T_STRING, .required = true}
#define EV_ID {"id", ABX_T_STRING, .nullable = true, .doc = "Pairs a tool_call with its tool_result"}
#define EV_CALL                                                                                                   \
    {"tool", ABX_T_STRING, .doc = "command, or the CLI's own tool name"},                                       \
        {"command", ABX_T_ANY, .nullable = true, .doc = "A command tool's command line"},                         \
        {"input", ABX_T_ANY, .nullable = true, .doc = "The tool's input as the CLI gave it"}
#define EV_OUT                                                                                                    \
    {"output", ABX_T_STRING, .nullable = true}, {"exit_code", ABX_T_INT, .nullable = true},                       \
        {"error", ABX_T_BOOL, .doc = "The tool failed"}
static const abx_param ev_session[] = {EV_TYPE, {"thread", ABX_T_STRING, .required = true, .nullable = true}, {0}};
static const abx_param ev_message[] = {EV_TYPE, {"text", ABX_T_STRING, .required = true, .nullable = true}, {0}};
static const abx_param ev_tool_call[] = {EV_TYPE, EV_ID, EV_CALL, {0}};
static const abx_param ev_tool_result[] = {EV_TYPE, EV_ID, EV_OUT, {0}};
static const abx_param ev_file_change[] = {EV_TYPE, {"path", ABX_T_STRING, .required = true, .nullable = true},
                                           {"kind", ABX_T_STRING, .required = true, .nullable = true}, {0}};
static const abx_param ev_final[] = {EV_TYPE, {"text", ABX_T_STRING, .nullable = true},
                                     {"usage", ABX_T_ANY, .required = true, .nullable = true, .doc = "Tokens used"},
                                     {0}};
static const abx_param ev_problem[] = {EV_TYPE, {"message", ABX_T_STRING, .required = true, .nullable = true},
                                       {"exit_code", ABX_T_INT, .nullable = true}, {0}};
static const abx_param ev_any[] = {EV_TYPE, EV_ID, EV_CALL, EV_OUT,
                                   {"thread", ABX_T_STRING, .nullable = true},
                                   {"text", ABX_T_STRING, .nullable = true},
                                   {"path", ABX_T_STRING, .nullable = true},
                                   {"kind", ABX_T_STRING, .nullable = true},
                                   {"usage", ABX_T_ANY, .nullable = true},
                                   {"message", ABX_T_STRING, .nullable = true},
                                   {0}};
static const abx_param tool_call_fields[] = {EV_TYPE, EV_ID, EV_CALL, EV_OUT, {0}};
#define TURN_FIELDS                                                                                               \
    {"adapter", ABX_T_STRING, .required = true},                                                                  \
        {"session", ABX_T_STRING, .required = true, .nullable = true},                                            \
        {"final", ABX_T_STRING, .required = true, .nullable = true, .doc = "The final message (null: none came)"}, \
        {"thread", ABX_T_STRING, .required = true, .nullable = true},                                             \
        {"tool_calls", ABX_T_LIST, ABX_T_OBJECT, .required = true, .fields = tool_call_fields,                    \
         .doc = "Each with its result's output, exit_code and error"},                                           \
        {"files_changed", ABX_T_LIST, ABX_T_STRING, .required = true, .doc = "Modified under its folder"},        \
        {"exit_code", ABX_T_INT, .required = true, .nullable = true},                                             \
        {"status", ABX_T_ENUM, .required = true, .choices = ABX_PROC_STATUS_CHOICES},                              \
        {"ok", ABX_T_BOOL, .required = true, .doc = "A final answer came"}
static const abx_param run_result[] = {
    TURN_FIELDS, {"events", ABX_T_LIST, ABX_T_OBJECT, .required = true, .fields = ev_any}, {0}};
static const abx_param turn_end_fields[] = {TURN_FIELDS, {0}};
static const abx_param start_fields[] = {{"pid", ABX_T_INT, .required = true}, {0}};
static const abx_param send_events[] = {
    {"start", ABX_T_OBJECT, .fields = start_fields, .doc = "The CLI started"},
    {"session", ABX_T_OBJECT, .fields = ev_session, .doc = "The CLI's own session (thread) id"},
    {"message", ABX_T_OBJECT, .fields = ev_message},
    {"tool_call", ABX_T_OBJECT, .fields = ev_tool_call},
    {"tool_result", ABX_T_OBJECT, .fields = ev_tool_result},
    {"file_change", ABX_T_OBJECT, .fields = ev_file_change},
    {"warning", ABX_T_OBJECT, .fields = ev_problem},
    {"error", ABX_T_OBJECT, .fields = ev_problem},
    {"final", ABX_T_OBJECT, .fields = ev_final},
    {"result", ABX_T_OBJECT, .fields = turn_end_fields, .doc = "The turn's result without its events (the last event)"},
    {0},
};

#define ERRS_RUN "install.not_allowed install.failed"
#define ERRS_SESS "agents.session_not_found agents.session_busy"

#define ADAPTER_OPS(a, sfx, req, name)                                                                                \
    {.id = "agents." a ".run", .result = run_result, .effects = ABX_EFF_EXEC | ABX_EFF_NET,                                                \
     .summary = "Run " name " once on a prompt: the final message, the files changed, its tool calls.",              \
     .params = run_##sfx, .install = {req}, .since = "0.3", .errors = ERRS_RUN, .handler = op_run,                   \
     .udata = (void *)&agents_adapters[AD_##sfx]},                                                                    \
        {.id = "agents." a ".sessions.create", .result = create_result, .effects = ABX_EFF_EXEC | ABX_EFF_NET,                                \
         .summary = "Open a " name " session in a folder.", .params = create_##sfx, .install = {req},               \
         .since = "0.3", .errors = ERRS_RUN, .handler = op_create, .udata = (void *)&agents_adapters[AD_##sfx]},      \
        {.id = "agents." a ".sessions.send_event", .events = send_events, .effects = ABX_EFF_EXEC | ABX_EFF_NET,                            \
         .summary = "A user turn in a " name " session; streams the agent's events (SSE).", .params = send_##sfx,    \
         .install = {req}, .stream = ABX_STREAM_SSE, .since = "0.3", .errors = ERRS_RUN " " ERRS_SESS,               \
         .handler = op_send, .udata = (void *)&agents_adapters[AD_##sfx]},                                           \
        {.id = "agents." a ".sessions.get", .result = session_result, .effects = ABX_EFF_READ, .summary = "A " name " session.",               \
         .params = id_params, .since = "0.3", .errors = ERRS_SESS, .handler = op_get,                                \
         .udata = (void *)&agents_adapters[AD_##sfx]},                                                                \
        {.id = "agents." a ".sessions.list", .result = list_result, .effects = ABX_EFF_READ, .summary = "The caller's " name " sessions.",  \
         .since = "0.3", .handler = op_list, .udata = (void *)&agents_adapters[AD_##sfx]},                            \
        {.id = "agents." a ".sessions.delete", .result = delete_result, .effects = ABX_EFF_WRITE, .summary = "Close a " name " session.",     \
         .params = id_params, .since = "0.3", .errors = ERRS_SESS, .handler = op_delete,                             \
         .udata = (void *)&agents_adapters[AD_##sfx]}

enum { AD_codex = 0, AD_claude = 1 };

static const abx_op_def adapter_ops[] = {
    ADAPTER_OPS("codex", codex, "codex-cli", "Codex"),
    ADAPTER_OPS("claude_code", claude, "claude-code", "Claude Code"),
    {0},
};

#define ERRS_GEN "agents.adapter_required op.not_enabled"
static const abx_op_def generic_ops[] = {
    {.id = "agents.sessions.create", .result = create_result, .effects = ABX_EFF_EXEC | ABX_EFF_NET,
     .summary = "Open an agent session; the adapter is chosen as docs/agents.md says (two-level gate).",
     .http = {"POST /v1/agents/sessions", "POST /agents/{adapter}/v1/agents/sessions"}, .params = g_create,
     .since = "0.3", .errors = ERRS_GEN " " ERRS_RUN, .handler = op_create},
    {.id = "agents.sessions.send_event", .events = send_events, .effects = ABX_EFF_EXEC | ABX_EFF_NET,
     .summary = "A user turn in an agent session; streams the agent's events (SSE).",
     .http = {"POST /v1/agents/sessions/{id}/events", "POST /agents/{adapter}/v1/agents/sessions/{id}/events"},
     .params = g_send, .stream = ABX_STREAM_SSE, .since = "0.3", .errors = ERRS_GEN " " ERRS_RUN " " ERRS_SESS,
     .handler = op_send},
    {.id = "agents.sessions.get", .result = session_result, .effects = ABX_EFF_READ, .summary = "An agent session.",
     .http = {"GET /v1/agents/sessions/{id}", "GET /agents/{adapter}/v1/agents/sessions/{id}"}, .params = g_id,
     .since = "0.3", .errors = ERRS_GEN " " ERRS_SESS, .handler = op_get},
    {.id = "agents.sessions.list", .result = list_result, .effects = ABX_EFF_READ, .summary = "The caller's agent sessions.",
     .http = {"GET /v1/agents/sessions", "GET /agents/{adapter}/v1/agents/sessions"}, .params = g_list,
     .since = "0.3", .errors = ERRS_GEN, .handler = op_list},
    {.id = "agents.sessions.delete", .result = delete_result, .effects = ABX_EFF_WRITE, .summary = "Close an agent session.",
     .http = {"DELETE /v1/agents/sessions/{id}", "DELETE /agents/{adapter}/v1/agents/sessions/{id}"},
     .params = g_id, .since = "0.3", .errors = ERRS_GEN " " ERRS_SESS, .handler = op_delete},
    {0},
};

static const abx_op_def *const agents_op_tables[] = {adapter_ops, generic_ops, NULL};

const abx_namespace abx_ns_agents = {.name = "agents", .op_tables = agents_op_tables, .state_new = st_new,
                                     .state_free = st_free};
