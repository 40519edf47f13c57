/* catalog.c — operations.json (spec section 7.1) and the docs tables, generated from
 * the registry. Nothing here is typed twice: ids, bindings, params and limits all
 * come from the declarations. */
#include "discovery/discovery.h"
#include "core/util.h"
#include <string.h>

static json_t *effects_array(unsigned effects)
{
    json_t *a = json_array();
    for (unsigned i = 0; i < ABX_EFF__COUNT; i++)
        if (effects & (1u << i))
            json_array_append_new(a, json_string(abx_effect_name(i)));
    return a;
}

static json_t *param_entry(const abx_param *p)
{
    json_t *o = json_pack("{s:s, s:s, s:b}", "name", p->name, "type", abx_type_name(p->type), "required", p->required);
    if (p->type == ABX_T_LIST || p->type == ABX_T_MAP)
        json_object_set_new(o, "items", json_string(abx_type_name(p->item)));
    if (p->nullable)
        json_object_set_new(o, "nullable", json_true());
    if (p->kind != ABX_KIND_PLAIN)
        json_object_set_new(o, "kind", json_string(abx_kind_name(p->kind)));
    if (p->kind == ABX_KIND_PATH) {
        json_t *acc = json_array();
        if (p->access & ABX_ACC_READ)
            json_array_append_new(acc, json_string("read"));
        if (p->access & ABX_ACC_WRITE)
            json_array_append_new(acc, json_string("write"));
        if (p->access & ABX_ACC_DELETE)
            json_array_append_new(acc, json_string("delete"));
        json_object_set_new(o, "access", acc);
    }
    if (p->dflt) {
        json_t *d = json_loads(p->dflt, JSON_DECODE_ANY, NULL);
        if (d)
            json_object_set_new(o, "default", d);
    }
    if (p->choices) {
        json_t *s = abx_param_schema(p);
        json_t *e = json_object_get(s, "enum");
        if (!e && json_object_get(s, "items"))
            e = json_object_get(json_object_get(s, "items"), "enum");
        if (e)
            json_object_set(o, "choices", e);
        json_decref(s);
    }
    if (p->bounds & ABX_HAS_MIN)
        json_object_set_new(o, "min", json_integer(p->min));
    if (p->bounds & ABX_HAS_MAX)
        json_object_set_new(o, "max", json_integer(p->max));
    if (p->fields) {
        json_t *fs = json_array();
        for (const abx_param *f = p->fields; f->name; f++)
            json_array_append_new(fs, param_entry(f));
        json_object_set_new(o, "fields", fs);
    }
    if (p->doc)
        json_object_set_new(o, "doc", json_string(p->doc));
    return o;
}

/* A result field as params are listed; its .dflt is an example, not a default. */
static json_t *result_entry(const abx_param *p)
{
    json_t *o = param_entry(p);
    json_t *d = json_object_get(o, "default");
    if (d) {
        json_object_set(o, "example", d);
        json_object_del(o, "default");
    }
    json_t *fs = json_object_get(o, "fields");
    if (fs) {
        json_array_clear(fs);
        for (const abx_param *f = p->fields; f->name; f++)
            json_array_append_new(fs, result_entry(f));
    }
    return o;
}

json_t *abx_catalog_entry(const abx_op *op)
{
    const abx_op_def *d = op->def;
    json_t *http = json_array(), *params = json_array(), *limits = json_array(), *install = json_array(),
           *aliases = json_array();
    for (size_t i = 0; i < op->n_bindings; i++)
        json_array_append_new(http, json_pack("{s:s, s:s}", "method", op->bindings[i].method, "path",
                                              op->bindings[i].path));
    for (const abx_param *p = d->params; p && p->name; p++)
        json_array_append_new(params, param_entry(p));
    for (int i = 0; i < ABX_LIM__COUNT; i++)
        if (d->limits & (1u << i))
            json_array_append_new(limits, json_string(abx_limit_name((enum abx_limit)(1u << i))));
    for (size_t i = 0; i < ABX_MAX_INSTALL && d->install[i]; i++)
        json_array_append_new(install, json_string(d->install[i]));
    for (size_t i = 0; i < ABX_MAX_ALIASES && d->aliases[i]; i++)
        json_array_append_new(aliases, json_string(d->aliases[i]));
    json_t *result;
    if (d->stream == ABX_STREAM_BYTES)
        result = json_pack("{s:s, s:s}", "kind", "bytes", "content_type",
                           d->result_content_type ? d->result_content_type : "application/octet-stream");
    else if (d->stream == ABX_STREAM_SSE)
        result = json_pack("{s:s, s:s}", "kind", "sse", "content_type", "text/event-stream");
    else
        result = json_pack("{s:s}", "kind", "json");
    json_t *rs = abx_op_result_schema(op), *es = abx_op_events_schema(op);
    if (rs) { /* the declared result: its fields (as params are listed) and its JSON Schema */
        json_t *fs = json_array();
        for (const abx_param *f = d->result; f->name; f++)
            json_array_append_new(fs, result_entry(f));
        json_object_set_new(result, "fields", fs);
        json_object_set_new(result, "schema", rs);
    }
    if (es)
        json_object_set_new(result, "events", es);
    char rpc[ABX_ID_MAX + 8];
    snprintf(rpc, sizeof rpc, "/ops/%s", op->id);
    json_t *e = json_pack("{s:s, s:s, s:o, s:s?, s:o, s:s, s:o, s:o, s:o, s:s, s:o, s:s, s:o, s:s?}", "id", op->id,
                          "summary", d->summary ? d->summary : "", "effects", effects_array(op->effects), "group",
                          d->group, "http", http, "rpc", rpc, "params", params, "result", result, "limits", limits,
                          "stream", abx_stream_name(d->stream), "install", install, "since",
                          d->since ? d->since : ABX_VERSION, "aliases", aliases, "deprecated", d->deprecated);
    if (e && !d->group)
        json_object_set_new(e, "group", json_null());
    if (e && !d->deprecated)
        json_object_set_new(e, "deprecated", json_null());
    if (e && d->requires_approval)
        json_object_set_new(e, "requires_approval", json_true());
    if (e && d->one_of) { /* exactly one of these parameters must be given */
        json_t *names = json_array();
        const char *c = d->one_of;
        while (*c) {
            size_t n = strcspn(c, "|");
            json_array_append_new(names, json_stringn(c, n));
            c += n + (c[n] == '|');
        }
        json_object_set_new(e, "one_of", names);
    }
    if (e && d->raw_body) /* the request body is the data; other parameters in the query */
        json_object_set_new(e, "body", json_string("raw"));
    if (e && d->raw_query) /* the query string is the data (ports.proxy); not a tool */
        json_object_set_new(e, "query", json_string("raw"));
    return e;
}

json_t *abx_catalog(const abx_registry *reg, const abx_policy *policy, int slot)
{
    json_t *ops = json_array();
    for (size_t i = 0; i < abx_registry_count(reg); i++) {
        if (policy && !abx_policy_mounted(policy, slot, i))
            continue;
        json_array_append_new(ops, abx_catalog_entry(abx_registry_at(reg, i)));
    }
    return json_pack("{s:i, s:s, s:o}", "catalog_version", ABX_CATALOG_VERSION, "sdk_version", ABX_VERSION, "ops",
                     ops);
}

static void md_escape(abx_buf *b, const char *s)
{
    for (; s && *s; s++) {
        if (*s == '|')
            abx_buf_puts(b, "\\|");
        else if (*s == '\n')
            abx_buf_putc(b, ' ');
        else
            abx_buf_putc(b, *s);
    }
}

/* The result column: the JSON result's fields, a stream's event names, bytes' media type. */
static void docs_result(abx_buf *b, const abx_op_def *d)
{
    const abx_param *list = d->stream == ABX_STREAM_SSE ? d->events : d->stream == ABX_STREAM_NONE ? d->result : NULL;
    if (d->stream == ABX_STREAM_BYTES)
        abx_buf_printf(b, "bytes (`%s`)", d->result_content_type ? d->result_content_type : "application/octet-stream");
    else if (d->stream == ABX_STREAM_SSE)
        abx_buf_puts(b, list ? "events " : "events");
    else if (d->stream == ABX_STREAM_NONE && !list)
        abx_buf_puts(b, "object (undeclared)");
    for (const abx_param *p = list; p && p->name; p++) {
        if (d->stream == ABX_STREAM_SSE)
            abx_buf_printf(b, "%s`%s`", p == list ? "" : ", ", p->name);
        else if (p->type == ABX_T_LIST || p->type == ABX_T_MAP)
            abx_buf_printf(b, "%s`%s`%s: %s of %s", p == list ? "" : ", ", p->name, p->required ? "" : "?",
                           abx_type_name(p->type), abx_type_name(p->item));
        else
            abx_buf_printf(b, "%s`%s`%s: %s%s", p == list ? "" : ", ", p->name, p->required ? "" : "?",
                           abx_type_name(p->type), p->nullable ? " or null" : "");
    }
}

char *abx_docs_ops_markdown(const abx_registry *reg)
{
    abx_buf b;
    abx_buf_init(&b, 0);
    abx_buf_puts(&b, "<!-- generated by `abx docs ops`; do not edit (a test fails on drift) -->\n"
                     "# Operations reference\n\n"
                     "Every operation is also callable as `POST /ops/{id}` with a JSON body.\n\n"
                     "| id | effects | binding | stream | parameters | result | summary |\n"
                     "|---|---|---|---|---|---|---|\n");
    for (size_t i = 0; i < abx_registry_count(reg); i++) {
        const abx_op *op = abx_registry_at(reg, i);
        char eff[64];
        abx_buf_printf(&b, "| `%s` | %s | ", op->id, abx_effects_text(op->effects, eff, sizeof eff));
        for (size_t k = 0; k < op->n_bindings; k++)
            abx_buf_printf(&b, "%s`%s %s`", k ? "<br>" : "", op->bindings[k].method, op->bindings[k].path);
        if (!op->n_bindings)
            abx_buf_puts(&b, "RPC only");
        abx_buf_printf(&b, " | %s | ", abx_stream_name(op->def->stream));
        bool first = true;
        for (const abx_param *p = op->def->params; p && p->name; p++) {
            abx_buf_printf(&b, "%s`%s`%s: %s%s%s", first ? "" : ", ", p->name, p->required ? "" : "?",
                           abx_type_name(p->type), p->kind == ABX_KIND_PATH ? " (path)" : "",
                           p->dflt ? "" : "");
            if (p->dflt) {
                abx_buf_puts(&b, " = ");
                md_escape(&b, p->dflt);
            }
            first = false;
        }
        abx_buf_puts(&b, " | ");
        docs_result(&b, op->def);
        abx_buf_puts(&b, " | ");
        md_escape(&b, op->def->summary);
        abx_buf_puts(&b, " |\n");
    }
    return abx_buf_detach(&b);
}

char *abx_docs_errors_markdown(void)
{
    abx_buf b;
    abx_buf_init(&b, 0);
    abx_buf_puts(&b, "<!-- generated by `abx docs errors`; do not edit (a test fails on drift) -->\n"
                     "# Error codes\n\n"
                     "Every error body is `{\"error\": {\"code\": \"...\", \"message\": \"...\"}}` (sometimes with "
                     "`details`); the request id is in the `X-Request-Id` header.\n\n"
                     "| code | HTTP status | meaning |\n|---|---|---|\n");
    for (int e = 1; e < ABX_E__COUNT; e++) {
        abx_buf_printf(&b, "| `%s` | %d | ", abx_err_code((abx_err)e), abx_err_status((abx_err)e));
        md_escape(&b, abx_err_meaning((abx_err)e));
        abx_buf_puts(&b, " |\n");
    }
    return abx_buf_detach(&b);
}
