/* openapi.c — OpenAPI 3.1 from the registry: every op's REST bindings and its RPC
 * binding, request schemas from the parameter declarations, the error responses the
 * pipeline can give, bearer security. Filtered to the caller when a policy is given. */
#include "discovery/discovery.h"
#include "core/util.h"
#include <string.h>

/* The codes one binding of an op can answer: the pipeline's, which follow from the
 * declaration (how arguments arrive, parameter kinds, effects, limits, approval), and
 * the handler's own (abx_op_def.errors). 405 is left out: it answers a path, not an op. */
static void op_errors(const abx_op *op, bool json_body, bool any_body, bool e[ABX_E__COUNT])
{
    static const abx_err always[] = {
        ABX_E_REQUEST_BAD_TARGET, ABX_E_REQUEST_BAD_HEADER,  ABX_E_REQUEST_HEADERS_TOO_LARGE, ABX_E_REQUEST_HOST_DENIED, ABX_E_REQUEST_ORIGIN_DENIED,
        ABX_E_REQUEST_BUSY,       ABX_E_AUTH_REQUIRED,       ABX_E_AUTH_INVALID_TOKEN,  ABX_E_AUTH_CONFLICTING_CREDENTIALS,
        ABX_E_AUTH_RATE_LIMITED,  ABX_E_OP_NOT_ENABLED,      ABX_E_ARGS_UNKNOWN,        ABX_E_POLICY_DENIED,
        ABX_E_LIMIT_RATE,         ABX_E_LIMIT_CONCURRENCY,   ABX_E_SERVER_INTERNAL,     ABX_E_SERVER_UNAVAILABLE,
    };
    const abx_op_def *d = op->def;
    memset(e, 0, ABX_E__COUNT * sizeof *e);
    for (size_t i = 0; i < ABX_ARRAY_LEN(always); i++)
        e[always[i]] = true;
    if (any_body)
        e[ABX_E_LIMIT_REQUEST_TOO_LARGE] = true;
    if (json_body)
        e[ABX_E_REQUEST_BAD_CONTENT_TYPE] = e[ABX_E_REQUEST_BAD_JSON] = true;
    if (d->one_of)
        e[ABX_E_ARGS_MISSING] = e[ABX_E_ARGS_INVALID] = true;
    for (const abx_param *p = d->params; p && p->name; p++) {
        e[ABX_E_ARGS_INVALID] = true;
        if (p->required)
            e[ABX_E_ARGS_MISSING] = true;
        if (p->kind != ABX_KIND_PLAIN && p->kind != ABX_KIND_AGENT)
            e[ABX_E_POLICY_SCOPE_REQUIRED] = true;
        if (p->kind == ABX_KIND_PATH)
            e[ABX_E_POLICY_PATH_DENIED] = e[ABX_E_POLICY_PATH_NOT_ALLOWED] = true;
        else if (p->kind == ABX_KIND_COMMAND)
            e[ABX_E_POLICY_COMMAND_NOT_ALLOWED] = true;
        else if (p->kind == ABX_KIND_URL)
            e[ABX_E_POLICY_URL_NOT_ALLOWED] = true;
        else if (p->kind == ABX_KIND_LANGUAGE)
            e[ABX_E_POLICY_LANGUAGE_NOT_ALLOWED] = true;
    }
    if (d->limits & ABX_LIM_MAX_BYTES)
        e[ABX_E_LIMIT_MAX_BYTES] = true;
    if (op->effects & ~(unsigned)ABX_EFF_READ) /* recorded before and after the handler; Idempotency-Key */
        e[ABX_E_LEDGER_UNAVAILABLE] = e[ABX_E_REQUEST_IDEMPOTENCY_CONFLICT] = true;
    if (d->requires_approval)
        e[ABX_E_APPROVAL_NO_APPROVER] = e[ABX_E_APPROVAL_DENIED] = e[ABX_E_APPROVAL_EXPIRED] = true;
    for (const char *c = d->errors; c && *c;) { /* checked against errors.def at registration */
        size_t n = strcspn(c, " ");
        char code[64];
        snprintf(code, sizeof code, "%.*s", (int)n, c);
        int k = n ? abx_err_by_code(code) : -1;
        if (k > 0)
            e[k] = true;
        c += n + (c[n] == ' ');
    }
}

/* One response per status the op can answer, each naming its codes. Ops share most
 * of these sets, so each distinct (status, codes) response is written once under
 * components.responses, named by its status and a hash of its codes (the same name in
 * every filtered view), and the op refers to it. */
static void error_responses(json_t *r, const bool e[ABX_E__COUNT], json_t *shared)
{
    int statuses[ABX_E__COUNT];
    size_t n = 0;
    for (int k = 1; k < ABX_E__COUNT; k++) { /* the distinct statuses, ascending */
        if (!e[k])
            continue;
        int st = abx_err_status((abx_err)k);
        size_t at = 0;
        while (at < n && statuses[at] < st)
            at++;
        if (at < n && statuses[at] == st)
            continue;
        memmove(statuses + at + 1, statuses + at, (n - at) * sizeof *statuses);
        statuses[at] = st;
        n++;
    }
    for (size_t i = 0; i < n; i++) {
        abx_buf b;
        abx_buf_init(&b, 0);
        for (int k = 1; k < ABX_E__COUNT; k++)
            if (e[k] && abx_err_status((abx_err)k) == statuses[i])
                abx_buf_printf(&b, "%s%s", b.len ? ", " : "", abx_err_code((abx_err)k));
        char hash[65], name[32], ref[64], key[8];
        abx_sha256_hex(b.data ? b.data : "", b.len, hash);
        snprintf(name, sizeof name, "Error%d-%.10s", statuses[i], hash);
        snprintf(ref, sizeof ref, "#/components/responses/%s", name);
        snprintf(key, sizeof key, "%d", statuses[i]);
        if (!json_object_get(shared, name)) {
            json_t *codes = json_array();
            for (int k = 1; k < ABX_E__COUNT; k++)
                if (e[k] && abx_err_status((abx_err)k) == statuses[i])
                    json_array_append_new(codes, json_string(abx_err_code((abx_err)k)));
            json_t *schema = json_pack("{s:[{s:s}, {s:{s:{s:{s:{s:o}}}}}]}", "allOf", "$ref",
                                       "#/components/schemas/Error", "properties", "error", "properties", "code",
                                       "enum", codes);
            json_object_set_new(shared, name, json_pack("{s:s, s:{s:{s:o}}}", "description", b.data ? b.data : "",
                                                        "content", "application/json", "schema", schema));
        }
        json_object_set_new(r, key, json_pack("{s:s}", "$ref", ref));
        abx_buf_release(&b);
    }
}

static json_t *success_response(const abx_op *op)
{
    const abx_op_def *d = op->def;
    if (d->stream == ABX_STREAM_BYTES)
        return json_pack("{s:s, s:{s:{s:{s:s, s:s}}}}", "description", "The bytes", "content",
                         d->result_content_type ? d->result_content_type : "application/octet-stream", "schema",
                         "type", "string", "format", "binary");
    if (d->stream == ABX_STREAM_SSE) /* x-abx-events: each event's data, by name */
        return json_pack("{s:s, s:{s:{s:{s:s}, s:o*}}}", "description",
                         "Server-sent events: `event:` names the frame, `data:` is JSON, `id:` resumes "
                         "(Last-Event-ID)",
                         "content", "text/event-stream", "schema", "type", "string", "x-abx-events",
                         abx_op_events_schema(op));
    json_t *rs = abx_op_result_schema(op);
    if (!rs)
        return json_pack("{s:s, s:{s:{s:{s:s}}}}", "description", "The result", "content", "application/json",
                         "schema", "type", "object");
    json_t *ex = abx_schema_example(rs);
    return json_pack("{s:s, s:{s:{s:o, s:o}}}", "description", "The result", "content", "application/json", "schema",
                     rs, "example", ex);
}

static json_t *responses(const abx_op *op, bool json_body, bool any_body, json_t *shared)
{
    json_t *r = json_object();
    if (op->def->requires_approval) {
        json_object_set_new(r, "200", success_response(op));
        json_object_set_new(r, "202",
                            json_pack("{s:s, s:{s:{s:{s:s}}}}", "description",
                                      "Held for approval: poll GET /approvals/{id} (or send Prefer: wait=N)",
                                      "content", "application/json", "schema", "type", "object"));
    } else {
        json_object_set_new(r, "200", success_response(op));
    }
    bool e[ABX_E__COUNT];
    op_errors(op, json_body, any_body, e);
    error_responses(r, e, shared);
    return r;
}

static char *op_id_for(const abx_op *op, const char *suffix)
{
    char *s = abx_asprintf("%s%s", op->id, suffix);
    for (char *c = s; c && *c; c++)
        if (*c == '.')
            *c = '_';
    return s;
}

static json_t *operation(const abx_op *op, const char *method, const char *path, bool rpc, json_t *shared)
{
    char eff[64];
    bool query = !rpc && (strcmp(method, "GET") == 0 || strcmp(method, "DELETE") == 0);
    bool bytes_body = !rpc && op->def->raw_body && !query;
    char *opid = op_id_for(op, rpc ? "_rpc" : "");
    size_t nsl = strcspn(op->id, ".");
    json_t *o = json_pack("{s:s, s:s, s:[s%], s:s}", "operationId", opid, "summary",
                          op->def->summary ? op->def->summary : op->id, "tags", op->id, nsl, "x-abx-op", op->id);
    abx_free(opid);
    abx_effects_text(op->effects, eff, sizeof eff);
    json_object_set_new(o, "description",
                        json_sprintf("%s\n\nEffects: %s.%s", op->def->summary ? op->def->summary : op->id, eff,
                                     rpc ? " RPC binding: arguments in the JSON body." : ""));
    json_t *params = json_array();
    bool json_body = rpc || (!query && !bytes_body);
    json_t *body_schema = rpc || !query ? abx_op_args_schema(op) : NULL;
    /* path variables */
    for (const char *s = path; !rpc && (s = strchr(s, '{')) != NULL; s++) {
        const char *e = strchr(s, '}');
        char name[64];
        snprintf(name, sizeof name, "%.*s", (int)(e - s - 1 - (e[-1] == '*')), s + 1);
        const abx_param *p = abx_op_param(op, name);
        json_array_append_new(params, json_pack("{s:s, s:s, s:b, s:o}", "name", name, "in", "path", "required", 1,
                                                "schema", abx_param_schema(p)));
        if (body_schema) {
            json_object_del(json_object_get(body_schema, "properties"), name);
            json_t *req = json_object_get(body_schema, "required");
            for (size_t i = 0; req && i < json_array_size(req); i++)
                if (strcmp(json_string_value(json_array_get(req, i)), name) == 0) {
                    json_array_remove(req, i);
                    break;
                }
        }
    }
    if (query || bytes_body) {
        for (const abx_param *p = op->def->params; p && p->name; p++) {
            char var[72];
            snprintf(var, sizeof var, "{%s}", p->name);
            if (strstr(path, var))
                continue; /* already a path parameter */
            json_t *q = json_pack("{s:s, s:s, s:b, s:o}", "name", p->name, "in", "query", "required", p->required,
                                  "schema", abx_param_schema(p));
            if (p->doc)
                json_object_set_new(q, "description", json_string(p->doc));
            if (p->type == ABX_T_LIST)
                json_object_set_new(q, "explode", json_true());
            json_array_append_new(params, q);
        }
    }
    if (json_array_size(params))
        json_object_set_new(o, "parameters", params);
    else
        json_decref(params);
    if (bytes_body) {
        json_object_set_new(o, "requestBody",
                            json_pack("{s:b, s:{s:{s:{s:s, s:s}}}}", "required", 1, "content",
                                      "application/octet-stream", "schema", "type", "string", "format", "binary"));
        json_decref(body_schema);
    } else if (body_schema) {
        json_object_set_new(o, "requestBody", json_pack("{s:b, s:{s:{s:o}}}", "required", rpc ? 0 : 1, "content",
                                                        "application/json", "schema", body_schema));
    }
    json_object_set_new(o, "responses", responses(op, json_body, json_body || bytes_body, shared));
    return o;
}

json_t *abx_openapi_rpc_path(const abx_op *op)
{
    json_t *shared = json_object();
    char rpc[ABX_ID_MAX + 8];
    snprintf(rpc, sizeof rpc, "/ops/%s", op->id);
    json_t *o = operation(op, "POST", rpc, true, shared);
    json_t *resp = json_object_get(o, "responses");
    const char *k;
    json_t *v;
    json_object_foreach(resp, k, v) { /* inline: the document's components hold the registry's sets */
        const char *ref = json_string_value(json_object_get(v, "$ref"));
        static const char pre[] = "#/components/responses/";
        if (ref && strncmp(ref, pre, sizeof pre - 1) == 0 && json_object_get(shared, ref + sizeof pre - 1))
            json_object_set(resp, k, json_object_get(shared, ref + sizeof pre - 1));
    }
    json_decref(shared);
    return json_pack("{s:{s:o}}", rpc, "post", o);
}

/* "POST" → "post": an OpenAPI path item's key. */
static void lower_method(const char *method, char out[8])
{
    size_t k;
    for (k = 0; method[k] && k < 7; k++)
        out[k] = (char)(method[k] - 'A' + 'a');
    out[k] = '\0';
}

/* The front doors (core/doors.def) besides POST /ops/{id}, which every op lists as its
 * own path above: each is one path item, documented with its method. */
static void door_paths(json_t *paths, json_t *shared)
{
    static const struct {
        const char *door, *method, *path, *summary;
        bool segment;
    } rows[] = {
#define ABX_DOOR_ROUTE(id, method, methods, path, match, order, handler, summary)                                  \
    {#id, method, path, summary, ABX_DOOR_MATCH_##match},
#define ABX_DOOR_MATCH_EXACT false
#define ABX_DOOR_MATCH_SEGMENT true
#include "core/doors.def"
#undef ABX_DOOR_MATCH_SEGMENT
#undef ABX_DOOR_MATCH_EXACT
#undef ABX_DOOR_ROUTE
    };
    for (size_t i = 0; i < ABX_ARRAY_LEN(rows); i++) {
        if (strcmp(rows[i].door, "RPC") == 0)
            continue;
        char path[64], m[8], opid[64];
        snprintf(path, sizeof path, "%s%s", rows[i].path, rows[i].segment ? "{name}" : "");
        lower_method(rows[i].method, m);
        snprintf(opid, sizeof opid, "door_%s_%s", m, rows[i].path + 1);
        for (char *c = opid; *c; c++)
            if (*c == '/')
                *c = '_';
        json_t *o = json_pack("{s:s, s:s, s:[s], s:s, s:{s:{s:s, s:{s:{s:{s:s}}}}}}", "operationId", opid, "summary",
                              rows[i].summary, "tags", "doors", "x-abx-door", rows[i].door, "responses", "200",
                              "description", "The door's answer", "content", "application/json", "schema", "type",
                              "object");
        /* what every front door can answer before its calls run (each call's own errors
         * come inside the door's answer, as its protocol carries them) */
        bool post = strcmp(rows[i].method, "POST") == 0, e[ABX_E__COUNT] = {false};
        e[ABX_E_AUTH_REQUIRED] = e[ABX_E_AUTH_INVALID_TOKEN] = e[ABX_E_AUTH_RATE_LIMITED] = true;
        e[ABX_E_REQUEST_HEADERS_TOO_LARGE] = e[ABX_E_REQUEST_BUSY] = true;
        e[ABX_E_REQUEST_BAD_JSON] = e[ABX_E_REQUEST_BAD_CONTENT_TYPE] = e[ABX_E_LIMIT_REQUEST_TOO_LARGE] = post;
        e[ABX_E_OP_NOT_ENABLED] = rows[i].segment;
        error_responses(json_object_get(o, "responses"), e, shared);
        if (strcmp(rows[i].method, "POST") == 0)
            json_object_set_new(o, "requestBody", json_pack("{s:b, s:{s:{s:{s:s}}}}", "required", 1, "content",
                                                            "application/json", "schema", "type", "object"));
        if (rows[i].segment)
            json_object_set_new(o, "parameters", json_pack("[{s:s, s:s, s:b, s:{s:s}}]", "name", "name", "in", "path",
                                                           "required", 1, "schema", "type", "string"));
        json_t *item = json_object_get(paths, path);
        if (!item) {
            item = json_object();
            json_object_set_new(paths, path, item);
        }
        json_object_set_new(item, m, o);
    }
}

json_t *abx_openapi(const abx_registry *reg, const abx_policy *policy, int slot, const char *server_url)
{
    json_t *paths = json_object();
    json_t *shared = json_object(); /* components.responses */
    for (size_t i = 0; i < abx_registry_count(reg); i++) {
        if (policy && !abx_policy_mounted(policy, slot, i))
            continue;
        const abx_op *op = abx_registry_at(reg, i);
        for (size_t b = 0; b < op->n_bindings; b++) {
            /* {name*} (the rest of the path, slashes and all) is {name} in OpenAPI's template */
            char key[256];
            const char *star = strstr(op->bindings[b].path, "*}");
            snprintf(key, sizeof key, "%.*s%s", (int)(star ? star - op->bindings[b].path : (long)sizeof key),
                     op->bindings[b].path, star ? "}" : "");
            json_t *item = json_object_get(paths, key);
            if (!item) {
                item = json_object();
                json_object_set_new(paths, key, item);
            }
            char m[8];
            lower_method(op->bindings[b].method, m);
            json_t *o = operation(op, op->bindings[b].method, op->bindings[b].path, false, shared);
            if (b > 0 && o) { /* one op bound to several methods (ports.proxy): ids stay unique */
                char sfx[12];
                snprintf(sfx, sizeof sfx, "_%s", m);
                char *opid = op_id_for(op, sfx);
                json_object_set_new(o, "operationId", json_string(opid));
                abx_free(opid);
            }
            json_object_set_new(item, m, o);
        }
        char rpc[ABX_ID_MAX + 8];
        snprintf(rpc, sizeof rpc, "/ops/%s", op->id);
        json_t *item = json_object_get(paths, rpc);
        if (!item) {
            item = json_object();
            json_object_set_new(paths, rpc, item);
        }
        json_object_set_new(item, "post", operation(op, "POST", rpc, true, shared));
    }
    door_paths(paths, shared);
    json_t *error_schema = json_pack(
        "{s:s, s:[s], s:{s:{s:s, s:[s,s], s:{s:{s:s}, s:{s:s}, s:{s:s}}}}}", "type", "object", "required", "error",
        "properties", "error", "type", "object", "required", "code", "message", "properties", "code", "type", "string",
        "message", "type", "string", "details", "type", "object");
    json_t *doc = json_pack("{s:s, s:s, s:{s:s, s:s, s:s, s:{s:s, s:s}}, s:o, s:{s:o, s:o, s:{s:{s:s, s:s}}}, s:[{s:[]}]}",
                            "openapi", "3.1.0", "jsonSchemaDialect", "https://json-schema.org/draft/2020-12/schema",
                            "info", "title", "abx", "version", ABX_VERSION, "description",
                            "abx operations: every capability of the sandbox as an operation, behind one policy.",
                            "license", "name", "MIT", "identifier", "MIT", "paths", paths, "components", "schemas",
                            json_pack("{s:o}", "Error", error_schema), "responses", shared, "securitySchemes",
                            "bearer", "type", "http",
                            "scheme", "bearer", "security", "bearer");
    json_t *servers = json_array();
    json_array_append_new(servers, json_pack("{s:s}", "url", server_url ? server_url : "http://127.0.0.1:8080"));
    json_object_set_new(doc, "servers", servers);
    json_t *tags = json_array();
    char last[64] = "";
    for (size_t i = 0; i < abx_registry_count(reg); i++) {
        if (policy && !abx_policy_mounted(policy, slot, i))
            continue;
        const char *id = abx_registry_at(reg, i)->id;
        size_t n = strcspn(id, ".");
        if (strlen(last) == n && strncmp(last, id, n) == 0)
            continue;
        snprintf(last, sizeof last, "%.*s", (int)n, id);
        json_array_append_new(tags, json_pack("{s:s, s:s}", "name", last, "description", last));
    }
    json_array_append_new(tags, json_pack("{s:s, s:s}", "name", "doors", "description",
                                          "The front doors: batches, LLM tool formats, MCP, legacy commands"));
    json_object_set_new(doc, "tags", tags);
    return doc;
}
