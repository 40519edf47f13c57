/* toolcall.c — the LLM provider tool-format front doors: GET /tools?format=F (the
 * caller's mounted ops as F's tool declarations, from discovery/tools.c) and POST
 * /tools/call?format=F (the model's output verbatim in, F's result messages out).
 * Decoding and encoding are pure functions at the provider boundary (toolcall.h); in
 * between a call is only (call id, op, args) and runs like any /batch call: through the
 * whole pipeline with the caller's principal, its own ledger group (door "tools")
 * linked to this request's, scheduled by lanes.c. Calls that cannot run (arguments that
 * do not parse, an op that is not offered as a tool) become that call's error result
 * and are listed in the door's own ledger event; they never fail the whole request. */
#include "doors/toolcall.h"
#include "doors/doors.h"
#include <stdarg.h>
#include <stdio.h>
#include <string.h>

/* a tool-call request holds as many calls as a batch */
_Static_assert(ABX_TOOLCALLS_MAX == ABX_FRONT_MAX_CALLS, "one cap for every multi-call front door");

/* ---- decoding (pure) ---- */

static abx_err bad(char *msg, size_t msglen, const char *fmt, ...) __attribute__((format(printf, 3, 4)));
static abx_err bad(char *msg, size_t msglen, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(msg, msglen, fmt, ap);
    va_end(ap);
    return ABX_E_ARGS_INVALID;
}

static const char *nonempty(const json_t *v)
{
    const char *s = json_string_value(v);
    return s && *s && strlen(s) == json_string_length(v) ? s : NULL;
}

static void set_error(abx_toolcall *c, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
static void set_error(abx_toolcall *c, const char *fmt, ...)
{
    char buf[400];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(buf, sizeof buf, fmt, ap);
    va_end(ap);
    json_decref(c->args);
    c->args = NULL;
    abx_free(c->error);
    c->error = abx_strdup(buf);
}

/* Arguments as the model wrote them: an object, a JSON string holding one (OpenAI), or
 * nothing (no arguments). Anything else marks the call. */
static void take_args(abx_toolcall *c, const json_t *v, const char *field)
{
    if (!v || json_is_null(v)) {
        c->args = json_object();
    } else if (json_is_object(v)) {
        c->args = json_deep_copy(v);
    } else if (json_is_string(v)) {
        const char *s = json_string_value(v);
        size_t n = json_string_length(v), i = 0;
        while (i < n && (s[i] == ' ' || s[i] == '\t' || s[i] == '\n' || s[i] == '\r'))
            i++;
        if (i == n) { /* "" — some models send it for no arguments */
            c->args = json_object();
            return;
        }
        json_error_t je;
        json_t *a = json_loadb(s, n, JSON_REJECT_DUPLICATES | JSON_ALLOW_NUL, &je);
        if (!a)
            set_error(c, "%s is not valid JSON: %s (at character %d)", field, je.text, je.position);
        else if (!json_is_object(a))
            set_error(c, "%s must encode a JSON object", field);
        else
            c->args = json_incref(a);
        json_decref(a);
    } else {
        set_error(c, "%s must be a JSON object", field);
    }
    if (!c->args && !c->error)
        set_error(c, "out of memory");
}

/* Append a call; false on out of memory or past the cap (reported by the caller). */
static bool add_call(abx_toolcalls *out, size_t *cap, const char *id, const char *name)
{
    if (out->n == *cap) {
        size_t ncap = *cap ? *cap * 2 : 8;
        abx_toolcall *nv = abx_realloc(out->v, ncap * sizeof *nv);
        if (!nv)
            return false;
        out->v = nv;
        *cap = ncap;
    }
    abx_toolcall *c = &out->v[out->n];
    *c = (abx_toolcall){.id = id ? abx_strdup(id) : NULL, .name = abx_strdup(name)};
    out->n++;
    return c->name && (!id || c->id);
}

static abx_err decode_openai(const json_t *doc, abx_toolcalls *out, size_t *cap, char *msg, size_t ml)
{
    const json_t *tc = json_object_get(doc, "tool_calls");
    if (!json_is_array(tc))
        return bad(msg, ml, "format=openai takes {\"tool_calls\": [...]} or the whole assistant message");
    size_t i;
    json_t *it;
    json_array_foreach(tc, i, it)
    {
        const char *id = nonempty(json_object_get(it, "id"));
        const json_t *type = json_object_get(it, "type");
        const char *tname = nonempty(type); /* a call's type names it when it is not a function */
        bool function = !type || (tname && strcmp(tname, "function") == 0);
        const json_t *fn = json_object_get(it, function ? "function" : tname ? tname : "");
        const char *name = nonempty(json_object_get(fn, "name"));
        if (!json_is_object(it) || !id || (type && !tname) || (function && !name))
            return bad(msg, ml,
                       "tool_calls[%zu] must be {\"id\", \"type\": \"function\", \"function\": {\"name\", \"arguments\"}}",
                       i);
        if (out->n == ABX_TOOLCALLS_MAX)
            return bad(msg, ml, "at most %d tool calls in one request", ABX_TOOLCALLS_MAX);
        if (!add_call(out, cap, id, name ? name : tname))
            return ABX_E_SERVER_UNAVAILABLE;
        abx_toolcall *c = &out->v[out->n - 1];
        if (!function)
            set_error(c, "only function tool calls run here (this one is of type '%.60s')", tname);
        else
            take_args(c, json_object_get(fn, "arguments"), "function.arguments");
    }
    return ABX_OK;
}

static abx_err decode_responses(const json_t *doc, abx_toolcalls *out, size_t *cap, char *msg, size_t ml)
{
    const json_t *items = json_object_get(doc, "output");
    if (!json_is_array(items))
        return bad(msg, ml, "format=responses takes {\"output\": [...]} (the response's output items)");
    size_t i;
    json_t *it;
    json_array_foreach(items, i, it)
    {
        const char *type = json_string_value(json_object_get(it, "type"));
        if (!json_is_object(it) || !type)
            return bad(msg, ml, "output[%zu] must be an item with a \"type\"", i);
        if (strcmp(type, "function_call") != 0)
            continue; /* messages, reasoning, built-in tool calls: not ours */
        const char *id = nonempty(json_object_get(it, "call_id"));
        const char *name = nonempty(json_object_get(it, "name"));
        if (!id || !name)
            return bad(msg, ml, "output[%zu] must be {\"type\": \"function_call\", \"call_id\", \"name\", \"arguments\"}",
                       i);
        if (out->n == ABX_TOOLCALLS_MAX)
            return bad(msg, ml, "at most %d tool calls in one request", ABX_TOOLCALLS_MAX);
        if (!add_call(out, cap, id, name))
            return ABX_E_SERVER_UNAVAILABLE;
        take_args(&out->v[out->n - 1], json_object_get(it, "arguments"), "arguments");
    }
    return ABX_OK;
}

static abx_err decode_anthropic(const json_t *doc, abx_toolcalls *out, size_t *cap, char *msg, size_t ml)
{
    const json_t *blocks = json_object_get(doc, "content");
    if (!json_is_array(blocks))
        return bad(msg, ml, "format=anthropic takes {\"content\": [...]} or the whole assistant message");
    size_t i;
    json_t *it;
    json_array_foreach(blocks, i, it)
    {
        const char *type = json_string_value(json_object_get(it, "type"));
        if (!json_is_object(it) || !type)
            return bad(msg, ml, "content[%zu] must be a block with a \"type\"", i);
        if (strcmp(type, "tool_use") != 0)
            continue; /* text, thinking, server tools: not ours */
        const char *id = nonempty(json_object_get(it, "id"));
        const char *name = nonempty(json_object_get(it, "name"));
        if (!id || !name)
            return bad(msg, ml, "content[%zu] must be {\"type\": \"tool_use\", \"id\", \"name\", \"input\"}", i);
        if (out->n == ABX_TOOLCALLS_MAX)
            return bad(msg, ml, "at most %d tool calls in one request", ABX_TOOLCALLS_MAX);
        if (!add_call(out, cap, id, name))
            return ABX_E_SERVER_UNAVAILABLE;
        take_args(&out->v[out->n - 1], json_object_get(it, "input"), "input");
    }
    return ABX_OK;
}

static abx_err decode_gemini(const json_t *doc, abx_toolcalls *out, size_t *cap, char *msg, size_t ml)
{
    const json_t *parts = json_object_get(doc, "parts");
    if (!json_is_array(parts))
        return bad(msg, ml, "format=gemini takes {\"parts\": [...]} or the whole candidate content");
    size_t i;
    json_t *it;
    json_array_foreach(parts, i, it)
    {
        if (!json_is_object(it))
            return bad(msg, ml, "parts[%zu] must be an object", i);
        const json_t *fc = json_object_get(it, "functionCall");
        if (!fc)
            continue; /* text, thoughts, code: not ours */
        const char *name = nonempty(json_object_get(fc, "name"));
        const json_t *idv = json_object_get(fc, "id");
        if (!json_is_object(fc) || !name || (idv && !json_is_null(idv) && !nonempty(idv)))
            return bad(msg, ml, "parts[%zu].functionCall must be {\"name\", \"args\"}", i);
        if (out->n == ABX_TOOLCALLS_MAX)
            return bad(msg, ml, "at most %d tool calls in one request", ABX_TOOLCALLS_MAX);
        if (!add_call(out, cap, nonempty(idv), name))
            return ABX_E_SERVER_UNAVAILABLE;
        take_args(&out->v[out->n - 1], json_object_get(fc, "args"), "functionCall.args");
    }
    return ABX_OK;
}

abx_err abx_toolcalls_decode(abx_tool_format f, const json_t *doc, abx_toolcalls *out, char *msg, size_t msglen)
{
    *out = (abx_toolcalls){0};
    if (!json_is_object(doc))
        return bad(msg, msglen, "the body must be a JSON object: the model's output for format=%s",
                   abx_tool_format_name(f));
    size_t cap = 0;
    abx_err e;
    switch (f) {
    case ABX_TOOLS_OPENAI: e = decode_openai(doc, out, &cap, msg, msglen); break;
    case ABX_TOOLS_RESPONSES: e = decode_responses(doc, out, &cap, msg, msglen); break;
    case ABX_TOOLS_ANTHROPIC: e = decode_anthropic(doc, out, &cap, msg, msglen); break;
    case ABX_TOOLS_GEMINI: e = decode_gemini(doc, out, &cap, msg, msglen); break;
    default: e = bad(msg, msglen, "unknown format"); break;
    }
    if (e == ABX_E_SERVER_UNAVAILABLE)
        snprintf(msg, msglen, "out of memory");
    if (e == ABX_OK && out->n == 0)
        e = bad(msg, msglen, "the payload holds no tool calls");
    if (e != ABX_OK)
        abx_toolcalls_release(out);
    return e;
}

void abx_toolcalls_release(abx_toolcalls *c)
{
    for (size_t i = 0; i < c->n; i++) {
        abx_free(c->v[i].id);
        abx_free(c->v[i].name);
        json_decref(c->v[i].args);
        abx_free(c->v[i].error);
    }
    abx_free(c->v);
    *c = (abx_toolcalls){0};
}

/* ---- encoding (pure) ---- */

json_t *abx_toolcalls_answer(abx_tool_format f, const abx_toolcalls *calls, const abx_toolresult *results)
{
    json_t *list = json_array();
    if (!list)
        return NULL;
    for (size_t i = 0; i < calls->n; i++) {
        const abx_toolcall *c = &calls->v[i];
        const json_t *body = results[i].body;
        bool is_error = results[i].status >= 400;
        char *text = json_dumps(body ? body : json_null(), JSON_COMPACT | JSON_ENCODE_ANY);
        json_t *m = NULL;
        switch (f) {
        case ABX_TOOLS_OPENAI:
            m = json_pack("{s:s, s:s?, s:s}", "role", "tool", "tool_call_id", c->id, "content", text ? text : "null");
            break;
        case ABX_TOOLS_RESPONSES:
            m = json_pack("{s:s, s:s?, s:s}", "type", "function_call_output", "call_id", c->id, "output",
                          text ? text : "null");
            break;
        case ABX_TOOLS_ANTHROPIC:
            m = json_pack("{s:s, s:s?, s:s, s:b}", "type", "tool_result", "tool_use_id", c->id, "content",
                          text ? text : "null", "is_error", is_error);
            break;
        case ABX_TOOLS_GEMINI: {
            /* Gemini's convention: {"output": ...} or {"error": ...} */
            json_t *resp = is_error && json_object_get(body, "error")
                               ? json_pack("{s:O}", "error", json_object_get(body, "error"))
                               : json_pack("{s:O}", "output", body ? (json_t *)body : json_null());
            json_t *fr = json_pack("{s:s, s:o}", "name", c->name, "response", resp);
            if (fr && c->id)
                json_object_set_new(fr, "id", json_string(c->id));
            m = fr ? json_pack("{s:o}", "functionResponse", fr) : NULL;
            break;
        }
        default:
            break;
        }
        free(text);
        if (!m || json_array_append_new(list, m) != 0) {
            json_decref(list);
            return NULL;
        }
    }
    switch (f) {
    case ABX_TOOLS_OPENAI: return json_pack("{s:o}", "messages", list);
    case ABX_TOOLS_RESPONSES: return json_pack("{s:o}", "input", list);
    case ABX_TOOLS_ANTHROPIC: return json_pack("{s:s, s:o}", "role", "user", "content", list);
    case ABX_TOOLS_GEMINI: return json_pack("{s:s, s:o}", "role", "user", "parts", list);
    default: json_decref(list); return NULL;
    }
}

/* ---- the door ---- */

typedef struct fmt_q {
    bool have, bad_value;
    abx_tool_format f;
    char unknown[64];
} fmt_q;

static int query_arg(void *ud, const char *name, size_t nlen, const char *val, size_t vlen)
{
    fmt_q *q = ud;
    if (nlen == 6 && memcmp(name, "format", 6) == 0) {
        q->have = true;
        q->bad_value |= !abx_tool_format_parse(val, vlen, &q->f);
        return 0;
    }
    snprintf(q->unknown, sizeof q->unknown, "%.*s", (int)(nlen < 40 ? nlen : 40), name);
    for (char *c = q->unknown; *c; c++)
        if ((unsigned char)*c < 0x20 || (unsigned char)*c >= 0x7f)
            *c = '?';
    return 1;
}

/* The format from the query (the only parameter); false when the reply says why. */
static bool query_format(abx_request *r, abx_tool_format *f)
{
    fmt_q q = {0};
    int rc = r->query && r->query_len ? abx_query_each(r->query, r->query_len, query_arg, &q) : 0;
    if (rc == -1) {
        abx_fail(r, ABX_E_ARGS_INVALID, "the query string has a malformed escape");
        return false;
    }
    if (q.unknown[0]) {
        abx_fail(r, ABX_E_ARGS_UNKNOWN, "unknown query parameter '%s'; this door takes only format=(%s)", q.unknown,
                 ABX_TOOL_FORMATS);
        return false;
    }
    if (!q.have || q.bad_value) {
        abx_fail(r, ABX_E_ARGS_INVALID, "%s: format must be one of %s",
                 q.have ? "unknown format" : "format is required", ABX_TOOL_FORMATS);
        return false;
    }
    *f = q.f;
    return true;
}

/* A value the strict declaration carried as JSON text (tools.c: openai_any_as_text). */
static bool any_from_text(json_t *holder, const char *key, size_t idx, const char *name, char *why, size_t wl)
{
    json_t *v = key ? json_object_get(holder, key) : json_array_get(holder, idx);
    if (!json_is_string(v))
        return true; /* already a JSON value: as is */
    json_error_t je;
    json_t *parsed = json_loads(json_string_value(v), JSON_DECODE_ANY | JSON_REJECT_DUPLICATES, &je);
    if (!parsed) {
        snprintf(why, wl, "'%.60s' is the value as JSON text in this format: %.100s", name, je.text);
        return false;
    }
    if (key)
        json_object_set_new(holder, key, parsed);
    else
        json_array_set_new(holder, idx, parsed);
    return true;
}

/* A map the strict declaration carried as [{name, value}] (tools.c: openai_map_as_list). */
static bool map_from_list(json_t *obj, const abx_param *p, char *why, size_t wl)
{
    json_t *list = json_object_get(obj, p->name);
    if (!json_is_array(list))
        return true; /* already a map (or wrong, which validation says) */
    json_t *map = json_object();
    size_t i;
    json_t *it;
    json_array_foreach(list, i, it)
    {
        const char *k = json_string_value(json_object_get(it, "name"));
        json_t *v = json_object_get(it, "value");
        if (!json_is_object(it) || !k || !v || json_object_size(it) != 2 || json_object_get(map, k)) {
            snprintf(why, wl, "'%.60s' is a list of {name, value} pairs with distinct names in this format", p->name);
            json_decref(map);
            return false;
        }
        json_object_set(map, k, v);
        if (p->item == ABX_T_ANY && !any_from_text(map, k, 0, p->name, why, wl)) {
            json_decref(map);
            return false;
        }
    }
    json_object_set_new(obj, p->name, map);
    return true;
}

/* OpenAI strict declarations make optional parameters nullable (null means absent),
 * carry maps as lists of pairs and values of any type as JSON text: back to the op's
 * own shapes before validation. */
static bool from_strict(const abx_param *params, json_t *obj, char *why, size_t wl)
{
    for (const abx_param *p = params; p && p->name; p++) {
        json_t *v = json_object_get(obj, p->name);
        if (!v)
            continue;
        if (json_is_null(v)) { /* absent when optional; a required one fails validation */
            if (!p->required)
                json_object_del(obj, p->name);
            continue;
        }
        /* each branch may replace obj's value (v is freed then): decide once, never look again */
        bool ok = true;
        if (p->type == ABX_T_MAP)
            ok = map_from_list(obj, p, why, wl);
        else if (p->type == ABX_T_ANY)
            ok = any_from_text(obj, p->name, 0, p->name, why, wl);
        else if (json_is_object(v) && p->type == ABX_T_OBJECT)
            ok = from_strict(p->fields, v, why, wl);
        else if (json_is_array(v) && p->type == ABX_T_LIST && p->item == ABX_T_OBJECT) {
            size_t i;
            json_t *it;
            json_array_foreach(v, i, it) if (ok && json_is_object(it)) ok = from_strict(p->fields, it, why, wl);
        } else if (json_is_array(v) && p->type == ABX_T_LIST && p->item == ABX_T_ANY) {
            for (size_t i = 0; ok && i < json_array_size(v); i++)
                ok = any_from_text(v, NULL, i, p->name, why, wl);
        }
        if (!ok)
            return false;
    }
    return true;
}

static void tools_call(abx_request *r, abx_tool_format f)
{
    json_error_t je;
    json_t *doc = r->body.len ? json_loadb(r->body.data, r->body.len, JSON_REJECT_DUPLICATES, &je) : NULL;
    if (!doc) {
        abx_fail(r, ABX_E_REQUEST_BAD_JSON, "the body must be the model's output as JSON%s%s", r->body.len ? ": " : "",
                 r->body.len ? je.text : "");
        return;
    }
    abx_toolcalls calls;
    char msg[300];
    abx_err e = abx_toolcalls_decode(f, doc, &calls, msg, sizeof msg);
    json_decref(doc);
    if (e) {
        abx_fail(r, e, "%s", msg);
        return;
    }
    size_t n = calls.n;
    abx_lane_call *lane = abx_calloc(n, sizeof *lane);
    size_t *which = abx_calloc(n, sizeof *which);   /* lane slot → call index */
    abx_toolresult *res = abx_calloc(n, sizeof *res);
    json_t **own = abx_calloc(n, sizeof *own);      /* each call's body, owned */
    json_t *refused = json_array();
    if (!lane || !which || !res || !own || !refused) {
        abx_fail(r, ABX_E_SERVER_UNAVAILABLE, "out of memory");
        goto out;
    }
    const abx_registry *reg = r->server->reg;
    size_t m = 0;
    for (size_t i = 0; i < n; i++) {
        abx_toolcall *c = &calls.v[i];
        const abx_op *op = abx_registry_resolve_tool(reg, c->name);
        if (!op) /* the overlay, after the registry */
            op = abx__dyn_tool_op(r->server, abx_policy_principal_id(r->policy, r->slot), c->name);
        char why[300] = "";
        if (!c->args) {
            res[i].status = abx_err_status(ABX_E_ARGS_INVALID);
            own[i] = abx_error_json(ABX_E_ARGS_INVALID, c->error, NULL);
            snprintf(why, sizeof why, "%s", c->error);
        } else if (op && !abx_tool_offered(op)) {
            /* the same answer as an unknown tool: the model was never offered it */
            snprintf(why, sizeof why, "no tool '%.100s' is available to this caller", c->name);
            res[i].status = abx_err_status(ABX_E_OP_NOT_ENABLED);
            own[i] = abx_error_json(ABX_E_OP_NOT_ENABLED, why, NULL);
        } else if (op && (f == ABX_TOOLS_OPENAI || f == ABX_TOOLS_RESPONSES) &&
                   !from_strict(op->def->params, c->args, why, sizeof why)) {
            res[i].status = abx_err_status(ABX_E_ARGS_INVALID);
            own[i] = abx_error_json(ABX_E_ARGS_INVALID, why, NULL);
        } else {
            json_t *own_args = op ? abx_door_tool_args(r->server, op->id, c->args) : NULL;
            if (own_args) { /* the door's soft timeout for commands */
                json_decref(c->args);
                c->args = own_args;
            }
            /* unknown names go in as asked: the pipeline answers (and records) its 404 */
            lane[m] = (abx_lane_call){.op = op ? op->id : c->name, .args = c->args};
            which[m++] = i;
            continue;
        }
        json_array_append_new(refused, json_pack("{s:i, s:s, s:s}", "index", (int)i, "tool", c->name, "why", why));
    }
    abx_front_door_record(r, "tools", n,
                          json_pack("{s:s, s:O}", "format", abx_tool_format_name(f), "refused", refused));
    abx_lanes_run(r, ABX_DOOR_TOOLS, lane, m);
    for (size_t k = 0; k < m; k++) {
        size_t i = which[k];
        res[i].status = lane[k].status;
        own[i] = lane[k].body;
        lane[k].body = NULL;
        const char *code = json_string_value(json_object_get(json_object_get(own[i], "error"), "code"));
        if (code && strcmp(code, abx_err_code(ABX_E_OP_NOT_ENABLED)) == 0) {
            /* the model reads this: name the tool it asked for (unknown and unmounted alike) */
            char text[300];
            snprintf(text, sizeof text, "no tool '%.100s' is available to this caller", calls.v[i].name);
            json_decref(own[i]);
            own[i] = abx_error_json(ABX_E_OP_NOT_ENABLED, text, NULL);
        }
    }
    for (size_t i = 0; i < n; i++)
        res[i].body = own[i];
    json_t *answer = abx_toolcalls_answer(f, &calls, res);
    if (!answer) {
        abx_fail(r, ABX_E_SERVER_UNAVAILABLE, "out of memory");
        goto out;
    }
    abx_reply_json(&r->reply, answer);
    if (r->group_id) {
        char g[24];
        snprintf(g, sizeof g, "%llu", (unsigned long long)r->group_id);
        abx_reply_header(&r->reply, "X-ABX-Tools-Group", g);
    }
out:
    for (size_t i = 0; own && i < n; i++)
        json_decref(own[i]);
    json_decref(refused);
    abx_free(own);
    abx_free(res);
    abx_free(which);
    abx_free(lane);
    abx_toolcalls_release(&calls);
}

void abx_tools_run(abx_request *r)
{
    if (r->slot == (int)r->policy->n_principals) {
        abx_fail(r, ABX_E_AUTH_REQUIRED, "credentials are required: Authorization: Bearer <token>");
        return;
    }
    r->op_name = "tools"; /* the ledger's and the log's label for this door */
    bool list = r->path_len == 6;
    const char *method = list ? "GET" : "POST";
    if (strcmp(r->method, method) != 0) {
        snprintf(r->reply.allow, sizeof r->reply.allow, "%s", method);
        abx_fail(r, ABX_E_REQUEST_METHOD_NOT_ALLOWED, "method %s is not allowed here; allowed: %s", r->method,
                 method);
        return;
    }
    abx_tool_format f;
    if (!query_format(r, &f))
        return;
    if (list) {
        json_t *doc = abx_tools(r->server->reg, r->policy, r->slot, f);
        json_t *dyn = doc ? abx__dyn_entries(r->server, r->policy, r->slot, -1, f) : NULL;
        if (dyn) { /* the caller's dynamic tools after the registry's */
            json_t *into = json_object_get(doc, "tools");
            if (f == ABX_TOOLS_GEMINI) {
                if (!json_array_size(into))
                    json_array_append_new(into, json_pack("{s:[]}", "functionDeclarations"));
                into = json_object_get(json_array_get(into, 0), "functionDeclarations");
            }
            json_array_extend(into, dyn);
            json_decref(dyn);
        }
        if (!doc)
            abx_fail(r, ABX_E_SERVER_UNAVAILABLE, "out of memory");
        else
            abx_reply_json(&r->reply, doc);
        return;
    }
    tools_call(r, f);
}
