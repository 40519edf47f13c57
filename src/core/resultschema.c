/* resultschema.c — the result side of an op's declaration: its JSON result object and
 * its SSE events, declared with the same abx_param rows as its arguments, as JSON Schema
 * (2020-12) for the catalog, OpenAPI, MCP's outputSchema and the generated clients; and
 * an example value made from a schema for the documents. */
#include "core/core.h"
#include <string.h>

/* A result field's .dflt is its example: "default" becomes "examples", at every depth. */
static void examples_not_defaults(json_t *s)
{
    json_t *d = json_object_get(s, "default");
    if (d) {
        json_object_set_new(s, "examples", json_pack("[O]", d));
        json_object_del(s, "default");
    }
    const char *k;
    json_t *v;
    json_object_foreach(json_object_get(s, "properties"), k, v)
        examples_not_defaults(v);
    if (json_is_object(json_object_get(s, "items")))
        examples_not_defaults(json_object_get(s, "items"));
    if (json_is_object(json_object_get(s, "additionalProperties")))
        examples_not_defaults(json_object_get(s, "additionalProperties"));
}

json_t *abx_fields_schema(const abx_param *fields)
{
    json_t *s = json_object(), *props = json_object(), *req = json_array();
    json_object_set_new(s, "type", json_string("object"));
    for (const abx_param *p = fields; p && p->name; p++) {
        json_t *ps = abx_param_schema(p);
        examples_not_defaults(ps); /* a result has no default: .dflt is its example */
        json_object_set_new(props, p->name, ps);
        if (p->required)
            json_array_append_new(req, json_string(p->name));
    }
    json_object_set_new(s, "properties", props);
    if (json_array_size(req))
        json_object_set_new(s, "required", req);
    else
        json_decref(req);
    json_object_set_new(s, "additionalProperties", json_false());
    return s;
}

json_t *abx_op_result_schema(const abx_op *op)
{
    if (!op->def->result || op->def->stream != ABX_STREAM_NONE)
        return NULL;
    return abx_fields_schema(op->def->result);
}

json_t *abx_op_events_schema(const abx_op *op)
{
    if (!op->def->events)
        return NULL;
    json_t *ev = json_object();
    for (const abx_param *p = op->def->events; p->name; p++) {
        json_t *s = p->type == ABX_T_OBJECT ? abx_fields_schema(p->fields) : abx_param_schema(p);
        if (p->doc)
            json_object_set_new(s, "description", json_string(p->doc));
        json_object_set_new(ev, p->name, s);
    }
    return ev;
}

static json_t *first_type_example(const json_t *schema, const char *t)
{
    const json_t *en = json_object_get(schema, "enum");
    if (json_is_array(en) && json_array_size(en))
        return json_deep_copy(json_array_get(en, 0));
    const json_t *min = json_object_get(schema, "minimum");
    if (!strcmp(t, "string"))
        return json_string(json_object_get(schema, "contentEncoding") ? "aGVsbG8K" : "string");
    if (!strcmp(t, "integer"))
        return json_integer(json_is_integer(min) ? json_integer_value(min) : 0);
    if (!strcmp(t, "number"))
        return json_real(json_is_integer(min) ? (double)json_integer_value(min) : 0.0);
    if (!strcmp(t, "boolean"))
        return json_false();
    if (!strcmp(t, "null"))
        return json_null();
    if (!strcmp(t, "array")) {
        json_t *a = json_array(), *it = json_object_get(schema, "items");
        if (it && json_object_size(it))
            json_array_append_new(a, abx_schema_example(it));
        return a;
    }
    if (!strcmp(t, "object")) {
        json_t *o = json_object();
        const char *k;
        json_t *v;
        json_object_foreach((json_t *)json_object_get(schema, "properties"), k, v)
            json_object_set_new(o, k, abx_schema_example(v));
        return o;
    }
    return json_null();
}

json_t *abx_schema_example(const json_t *schema)
{
    const json_t *ex = json_object_get(schema, "examples");
    if (json_is_array(ex) && json_array_size(ex))
        return json_deep_copy(json_array_get(ex, 0));
    const json_t *t = json_object_get(schema, "type");
    if (json_is_array(t))
        t = json_array_get(t, 0);
    return first_type_example(schema, json_is_string(t) ? json_string_value(t) : "null");
}
