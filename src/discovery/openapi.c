/* openapi.c — OpenAPI 3.1 from the registry: every op's REST bindings and its RPC
 * binding, request schemas from the parameter declarations, the error responses the
 * pipeline can give, bearer security. Filtered to the caller when a policy is given. */
#include "discovery/discovery.h"
#include "core/util.h"
#include <string.h>

static json_t *error_response(const char *desc)
{
    return json_pack("{s:s, s:{s:{s:{s:s}}}}", "description", desc, "content", "application/json", "schema", "$ref",
                     "#/components/schemas/Error");
}

static json_t *success_response(const abx_op *op)
{
    const abx_op_def *d = op->def;
    if (d->stream == ABX_STREAM_BYTES)
        return json_pack("{s:s, s:{s:{s:{s:s, s:s}}}}", "description", "The bytes", "content",
                         d->result_content_type ? d->result_content_type : "application/octet-stream", "schema",
                         "type", "string", "format", "binary");
    if (d->stream == ABX_STREAM_SSE)
        return json_pack("{s:s, s:{s:{s:{s:s}}}}", "description", "Server-sent events", "content",
                         "text/event-stream", "schema", "type", "string");
    return json_pack("{s:s, s:{s:{s:{s:s}}}}", "description", "The result", "content", "application/json", "schema",
                     "type", "object");
}

static json_t *responses(const abx_op *op, bool has_args, bool get_like)
{
    json_t *r = json_object();
    json_object_set_new(r, op->def->requires_approval ? "202" : "200", success_response(op));
    if (op->def->requires_approval)
        json_object_set_new(r, "200", success_response(op));
    json_object_set_new(r, "400", error_response("Bad request: request.*, args.* codes"));
    json_object_set_new(r, "401", error_response("Authentication required or failed (auth.*)"));
    json_object_set_new(r, "403", error_response("Refused by policy (policy.*) or request.host_denied/origin_denied"));
    json_object_set_new(r, "404", error_response("op.not_enabled, or a resource that does not exist"));
    if (!get_like) {
        json_object_set_new(r, "413", error_response("limit.request_too_large"));
        json_object_set_new(r, "415", error_response("request.bad_content_type"));
    }
    json_object_set_new(r, "429", error_response("limit.rate, limit.concurrency, auth.rate_limited"));
    json_object_set_new(r, "500", error_response("server.internal"));
    json_object_set_new(r, "503", error_response("request.busy, server.unavailable"));
    (void)has_args;
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

static json_t *operation(const abx_op *op, const char *method, const char *path, bool rpc)
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
    json_t *body_schema = rpc || !query ? abx_op_args_schema(op) : NULL;
    /* path variables */
    for (const char *s = path; !rpc && (s = strchr(s, '{')) != NULL; s++) {
        const char *e = strchr(s, '}');
        char name[64];
        snprintf(name, sizeof name, "%.*s", (int)(e - s - 1), s + 1);
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
    json_object_set_new(o, "responses", responses(op, true, query));
    return o;
}

json_t *abx_openapi(const abx_registry *reg, const abx_policy *policy, int slot, const char *server_url)
{
    json_t *paths = json_object();
    for (size_t i = 0; i < abx_registry_count(reg); i++) {
        if (policy && !abx_policy_mounted(policy, slot, i))
            continue;
        const abx_op *op = abx_registry_at(reg, i);
        for (size_t b = 0; b < op->n_bindings; b++) {
            json_t *item = json_object_get(paths, op->bindings[b].path);
            if (!item) {
                item = json_object();
                json_object_set_new(paths, op->bindings[b].path, item);
            }
            char m[8];
            size_t k;
            for (k = 0; op->bindings[b].method[k] && k < sizeof m - 1; k++)
                m[k] = (char)(op->bindings[b].method[k] - 'A' + 'a');
            m[k] = '\0';
            json_object_set_new(item, m, operation(op, op->bindings[b].method, op->bindings[b].path, false));
        }
        char rpc[ABX_ID_MAX + 8];
        snprintf(rpc, sizeof rpc, "/ops/%s", op->id);
        json_t *item = json_object_get(paths, rpc);
        if (!item) {
            item = json_object();
            json_object_set_new(paths, rpc, item);
        }
        json_object_set_new(item, "post", operation(op, "POST", rpc, true));
    }
    json_t *error_schema = json_pack(
        "{s:s, s:[s], s:{s:{s:s, s:[s,s], s:{s:{s:s}, s:{s:s}, s:{s:s}}}}}", "type", "object", "required", "error",
        "properties", "error", "type", "object", "required", "code", "message", "properties", "code", "type", "string",
        "message", "type", "string", "details", "type", "object");
    json_t *doc = json_pack("{s:s, s:s, s:{s:s, s:s, s:s, s:{s:s, s:s}}, s:o, s:{s:o, s:{s:{s:s, s:s}}}, s:[{s:[]}]}",
                            "openapi", "3.1.0", "jsonSchemaDialect", "https://json-schema.org/draft/2020-12/schema",
                            "info", "title", "abx", "version", ABX_VERSION, "description",
                            "abx operations: every capability of the sandbox as an operation, behind one policy.",
                            "license", "name", "MIT", "identifier", "MIT", "paths", paths, "components", "schemas",
                            json_pack("{s:o}", "Error", error_schema), "securitySchemes", "bearer", "type", "http",
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
    json_object_set_new(doc, "tags", tags);
    return doc;
}
