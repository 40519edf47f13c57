/* genresult.c — typed results in the generated clients: for each op that declares its
 * result (the catalog's result.fields), a TypedDict in Python (fields always present are
 * required keys, the others optional) and an interface in TypeScript; the op's method
 * returns that type. Undeclared results stay Result / JsonObject. */
#include "discovery/genclient_int.h"
#include <string.h>

static const json_t *result_fields(const json_t *e)
{
    const json_t *f = json_object_get(json_object_get(e, "result"), "fields");
    return json_is_array(f) ? f : NULL;
}

bool abx__gen_result_name(abx_buf *b, const json_t *e)
{
    const char *id = json_string_value(json_object_get(e, "id"));
    if (!result_fields(e) || !id)
        return false;
    abx__gen_camel(b, id, strlen(id));
    abx_buf_puts(b, "Result");
    return true;
}

static void py_field(abx_buf *b, const json_t *f, const char *cls)
{
    abx_buf sub;
    abx_buf_init(&sub, 0);
    char *n = abx_asprintf("%s_%s", cls, json_string_value(json_object_get(f, "name")));
    abx__gen_camel(&sub, n, strlen(n));
    abx_free(n);
    bool nullable = json_is_true(json_object_get(f, "nullable"));
    abx_buf_printf(b, "    %s: %s", json_string_value(json_object_get(f, "name")), nullable ? "Optional[" : "");
    abx__gen_py_type(b, f, json_array_size(json_object_get(f, "fields")) ? sub.data : NULL);
    abx_buf_puts(b, nullable ? "]\n" : "\n");
    abx_buf_release(&sub);
}

/* one class, its nested classes first; required keys in a base class when both kinds exist */
static void py_dict(abx_buf *b, const json_t *fields, const char *cls)
{
    size_t i, nreq = 0;
    json_t *f;
    json_array_foreach(fields, i, f)
    {
        nreq += json_is_true(json_object_get(f, "required"));
        if (!json_array_size(json_object_get(f, "fields")))
            continue;
        abx_buf sub;
        abx_buf_init(&sub, 0);
        char *n = abx_asprintf("%s_%s", cls, json_string_value(json_object_get(f, "name")));
        abx__gen_camel(&sub, n, strlen(n));
        abx_free(n);
        py_dict(b, json_object_get(f, "fields"), sub.data);
        abx_buf_release(&sub);
    }
    size_t nopt = json_array_size(fields) - nreq;
    for (int pass = 0; pass < 2; pass++) {
        bool req = pass == 0;
        if (req && nreq && nopt)
            abx_buf_printf(b, "\n\nclass _%sRequired(TypedDict):\n", cls);
        else if (req)
            continue;
        else if (nreq && nopt)
            abx_buf_printf(b, "\n\nclass %s(_%sRequired, total=False):\n", cls, cls);
        else
            abx_buf_printf(b, "\n\nclass %s(TypedDict%s):\n", cls, nreq ? "" : ", total=False");
        bool any = false;
        json_array_foreach(fields, i, f)
        {
            if (nreq && nopt && json_is_true(json_object_get(f, "required")) != req)
                continue;
            py_field(b, f, cls);
            any = true;
        }
        if (!any)
            abx_buf_puts(b, "    pass\n");
    }
}

void abx__gen_py_result(abx_buf *b, const json_t *e)
{
    abx_buf cls;
    abx_buf_init(&cls, 0);
    if (abx__gen_result_name(&cls, e))
        py_dict(b, result_fields(e), cls.data);
    abx_buf_release(&cls);
}

void abx__gen_ts_result(abx_buf *b, const json_t *e)
{
    abx_buf cls;
    abx_buf_init(&cls, 0);
    if (abx__gen_result_name(&cls, e)) {
        char *doc = abx_asprintf("The result of `%s`.", json_string_value(json_object_get(e, "id")));
        abx__gen_ts_interface(b, result_fields(e), cls.data, doc);
        abx_free(doc);
    }
    abx_buf_release(&cls);
}
