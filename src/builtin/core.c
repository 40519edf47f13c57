/* core.c — the core namespace: health, capabilities, discovery of the caller's ops,
 * OpenAPI and metrics. Everything it describes comes from the registry and the
 * caller's policy view; nothing here is typed twice. */
#include "builtin/builtin.h"
#include "discovery/discovery.h"
#include <string.h>

static abx_err core_health(abx_ctx *ctx, const json_t *args, abx_reply *r)
{
    abx_reply_json(r, json_pack("{s:s, s:s}", "status", "ok", "version", ABX_VERSION));
    return ABX_OK;
}

static abx_err core_capabilities(abx_ctx *ctx, const json_t *args, abx_reply *r)
{
    abx_server_facts s;
    abx_ctx_server_facts(ctx, &s);
    json_t *ns = abx_ctx_visible_namespaces(ctx);
    json_t *limits = json_pack("{s:I, s:I, s:i}", "request_max_bytes", (json_int_t)s.request_max_bytes,
                               "upload_max_bytes", (json_int_t)s.upload_max_bytes, "connections", s.connections);
    abx_reply_json(r, json_pack("{s:s, s:i, s:s, s:s, s:o, s:o}", "api", ABX_API_FAMILY, "catalog_version",
                                ABX_CATALOG_VERSION, "sdk_version", ABX_VERSION, "principal",
                                abx_ctx_principal(ctx), "namespaces", ns, "limits", limits));
    return ABX_OK;
}

static abx_err core_ops_list(abx_ctx *ctx, const json_t *args, abx_reply *r)
{
    size_t len;
    const char *text = abx_ctx_document(ctx, ABX_DOC_CATALOG, &len);
    if (!text)
        return abx_reply_error(r, ABX_E_SERVER_UNAVAILABLE, NULL, "out of memory");
    abx_reply_bytes(r, text, len, "application/json");
    return ABX_OK;
}

static abx_err core_ops_describe(abx_ctx *ctx, const json_t *args, abx_reply *r)
{
    const abx_op *op = abx_ctx_visible_op(ctx, json_string_value(json_object_get(args, "id")));
    if (!op)
        return abx_reply_error(r, ABX_E_OP_NOT_ENABLED, NULL, "No such operation is enabled for this caller");
    abx_reply_json(r, abx_catalog_entry(op));
    return ABX_OK;
}

/* The URL this request reached the server at: the scheme it listens with and the Host
 * header the client sent (step 0 admitted it: loopback or allowed_hosts), else the
 * listen address (in-process calls). */
static void served_url(abx_ctx *ctx, char *out, size_t cap)
{
    abx_server_facts s;
    abx_ctx_server_facts(ctx, &s);
    const char *scheme = s.tls ? "https" : "http";
    const char *host = abx_ctx_header(ctx, "Host");
    if (host && *host && strlen(host) < 256)
        snprintf(out, cap, "%s://%s", scheme, host);
    else
        snprintf(out, cap, "%s://%s:%d", scheme,
                 strchr(s.listen_host, ':') ? "[::1]" : s.listen_host, s.port);
}

static abx_err core_openapi_get(abx_ctx *ctx, const json_t *args, abx_reply *r)
{
    size_t len;
    const char *text = abx_ctx_document(ctx, ABX_DOC_OPENAPI, &len);
    char url[320];
    served_url(ctx, url, sizeof url);
    /* the cached document has every key but "servers": splice it in after the '{' */
    json_t *servers = json_pack("[{s:s}]", "url", url);
    char *head = servers ? json_dumps(servers, JSON_COMPACT) : NULL;
    json_decref(servers);
    abx_buf b;
    abx_buf_init(&b, 0);
    if (text && head && len > 2 && text[0] == '{') {
        abx_buf_puts(&b, "{\"servers\":");
        abx_buf_puts(&b, head);
        abx_buf_putc(&b, ',');
        abx_buf_append(&b, text + 1, len - 1);
    }
    free(head);
    if (!b.len || b.failed) {
        abx_buf_release(&b);
        return abx_reply_error(r, ABX_E_SERVER_UNAVAILABLE, NULL, "out of memory");
    }
    abx_reply_bytes(r, b.data, b.len, "application/json");
    abx_buf_release(&b);
    return ABX_OK;
}

static abx_err core_metrics(abx_ctx *ctx, const json_t *args, abx_reply *r)
{
    size_t len;
    char *text = abx_ctx_metrics_text(ctx, &len);
    if (!text)
        return abx_reply_error(r, ABX_E_SERVER_UNAVAILABLE, NULL, "out of memory");
    abx_reply_bytes(r, text, len, "text/plain; version=0.0.4; charset=utf-8");
    abx_free(text);
    return ABX_OK;
}

static abx_err core_explain(abx_ctx *ctx, const json_t *args, abx_reply *r)
{
    json_t *trace = abx_ctx_explain(ctx, json_string_value(json_object_get(args, "principal")),
                                    json_string_value(json_object_get(args, "op")), json_object_get(args, "args"));
    if (json_string_value(json_object_get(trace, "decision")) &&
        strcmp(json_string_value(json_object_get(trace, "decision")), "unknown_principal") == 0) {
        json_decref(trace);
        return abx_reply_error(r, ABX_E_ARGS_INVALID, NULL, "argument 'principal' names no configured principal");
    }
    abx_reply_json(r, trace);
    return ABX_OK;
}

static const abx_param explain_params[] = {
    {"op", ABX_T_STRING, .required = true, .doc = "Operation id (or alias) to explain"},
    {"args", ABX_T_MAP, .item = ABX_T_ANY, .dflt = "{}", .doc = "The call's arguments"},
    {"principal", ABX_T_STRING, .doc = "Principal to decide for (default: the caller)"},
    {0},
};

static const abx_param describe_params[] = {
    {"id", ABX_T_STRING, .required = true, .doc = "Operation id (or alias)"},
    {0},
};

/* results: what each op answers */
static const abx_param health_result[] = {
    {"status", ABX_T_ENUM, .required = true, .choices = "ok"},
    {"version", ABX_T_STRING, .required = true, .dflt = "\"" ABX_VERSION "\""},
    {0},
};

static const abx_param capabilities_limits_fields[] = {
    {"request_max_bytes", ABX_T_INT, .required = true},
    {"upload_max_bytes", ABX_T_INT, .required = true},
    {"connections", ABX_T_INT, .required = true},
    {0},
};

static const abx_param capabilities_result[] = {
    {"api", ABX_T_STRING, .required = true},
    {"catalog_version", ABX_T_INT, .required = true},
    {"sdk_version", ABX_T_STRING, .required = true},
    {"principal", ABX_T_STRING, .required = true, .doc = "Who the caller is"},
    {"namespaces", ABX_T_LIST, ABX_T_STRING, .required = true, .doc = "Namespaces of the caller's mounted ops"},
    {"limits", ABX_T_OBJECT, .required = true, .fields = capabilities_limits_fields},
    {0},
};

static const abx_param binding_fields[] = {
    {"method", ABX_T_STRING, .required = true},
    {"path", ABX_T_STRING, .required = true},
    {0},
};

/* a catalog entry (operations.json's ops[]; catalog.c writes it) */
static const abx_param catalog_entry_fields[] = {
    {"id", ABX_T_STRING, .required = true},
    {"summary", ABX_T_STRING, .required = true},
    {"effects", ABX_T_LIST, ABX_T_STRING, .required = true},
    {"group", ABX_T_STRING, .required = true, .nullable = true},
    {"http", ABX_T_LIST, ABX_T_OBJECT, .required = true, .fields = binding_fields},
    {"rpc", ABX_T_STRING, .required = true},
    {"params", ABX_T_LIST, ABX_T_MAP, .required = true, .doc = "name, type, required, doc, default, ..."},
    {"result", ABX_T_MAP, ABX_T_ANY, .required = true, .doc = "kind (json, bytes, sse); fields and schema when declared"},
    {"limits", ABX_T_LIST, ABX_T_STRING, .required = true},
    {"stream", ABX_T_STRING, .required = true},
    {"install", ABX_T_LIST, ABX_T_STRING, .required = true},
    {"since", ABX_T_STRING, .required = true},
    {"aliases", ABX_T_LIST, ABX_T_STRING, .required = true},
    {"deprecated", ABX_T_STRING, .required = true, .nullable = true},
    {"requires_approval", ABX_T_BOOL},
    {"one_of", ABX_T_LIST, ABX_T_STRING},
    {"body", ABX_T_STRING},
    {"query", ABX_T_STRING},
    {0},
};

static const abx_param ops_list_result[] = {
    {"catalog_version", ABX_T_INT, .required = true},
    {"sdk_version", ABX_T_STRING, .required = true},
    {"ops", ABX_T_LIST, ABX_T_OBJECT, .required = true, .fields = catalog_entry_fields},
    {0},
};

static const abx_param openapi_result[] = {
    {"openapi", ABX_T_STRING, .required = true},
    {"info", ABX_T_MAP, ABX_T_ANY, .required = true},
    {"servers", ABX_T_LIST, ABX_T_MAP},
    {"paths", ABX_T_MAP, ABX_T_ANY, .required = true},
    {"components", ABX_T_MAP, ABX_T_ANY},
    {"security", ABX_T_LIST, ABX_T_MAP},
    {"tags", ABX_T_LIST, ABX_T_MAP},
    {"jsonSchemaDialect", ABX_T_STRING},
    {0},
};

static const abx_param explain_result[] = {
    {"decision", ABX_T_STRING, .required = true, .doc = "allow, deny, approval, not_mounted, invalid, ..."},
    {"principal", ABX_T_STRING},
    {"op", ABX_T_STRING},
    {"code", ABX_T_STRING, .nullable = true, .doc = "The error a denied call answers"},
    {"message", ABX_T_STRING},
    {"args", ABX_T_MAP, ABX_T_ANY, .doc = "The arguments as validated (defaults filled in)"},
    {"argv", ABX_T_ANY},
    {"mounting", ABX_T_LIST, ABX_T_STRING, .doc = "Statements that mount the op"},
    {"deny_hits", ABX_T_LIST, ABX_T_STRING},
    {"statements", ABX_T_LIST, ABX_T_MAP, .doc = "Each statement's checks and verdict"},
    {"determining", ABX_T_STRING, .nullable = true},
    {"limits", ABX_T_MAP, ABX_T_ANY},
    {"paths", ABX_T_LIST, ABX_T_MAP},
    {"net", ABX_T_ANY},
    {"confinement", ABX_T_MAP, ABX_T_ANY},
    {0},
};

static const abx_op_def core_ops[] = {
    {.id = "core.health", .result = health_result, .effects = ABX_EFF_READ, .summary = "Liveness check; anonymous by default.",
     .http = {"GET /health"}, .since = "0.1", .handler = core_health},
    {.id = "core.capabilities", .result = capabilities_result, .effects = ABX_EFF_READ,
     .summary = "API family, catalog and SDK versions, the caller's namespaces and listener limits.",
     .http = {"GET /capabilities"}, .since = "0.1", .handler = core_capabilities},
    {.id = "core.ops.list", .result = ops_list_result, .effects = ABX_EFF_READ,
     .summary = "The operations catalog (operations.json shape), filtered to the caller's operations.",
     .http = {"GET /ops"}, .since = "0.1", .handler = core_ops_list},
    {.id = "core.ops.describe", .result = catalog_entry_fields, .effects = ABX_EFF_READ, .summary = "One catalog entry of an operation the caller may call.",
     .http = {"GET /ops/{id}"}, .params = describe_params, .since = "0.1",
     .errors = "op.not_enabled", .handler = core_ops_describe},
    {.id = "core.openapi.get", .result = openapi_result, .effects = ABX_EFF_READ,
     .summary = "OpenAPI 3.1 document of the operations the caller may call.", .http = {"GET /openapi.json"},
     .since = "0.1", .handler = core_openapi_get},
    {.id = "core.metrics", .effects = ABX_EFF_READ,
     .summary = "Prometheus text metrics: requests by op and status, latency histograms, denials, connections.",
     .http = {"GET /metrics"}, .stream = ABX_STREAM_BYTES, .result_content_type = "text/plain; version=0.0.4",
     .since = "0.1", .handler = core_metrics},
    {.id = "core.explain", .result = explain_result, .effects = ABX_EFF_ADMIN,
     .summary = "Decision trace for a call (mounting statements, deny hits, scope verdicts, limits); nothing runs.",
     .http = {"POST /explain"}, .params = explain_params, .since = "0.1", .handler = core_explain},
    {0},
};

const abx_namespace abx_ns_core = {.name = "core", .ops = core_ops};
