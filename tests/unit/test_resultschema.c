/* test_resultschema.c — unit tests of src/core/resultschema.c: the JSON Schema of a
 * declared result (closed objects, required and nullable fields, lists and maps of
 * objects), SSE event schemas, examples made from a schema, and the rule that every
 * builtin op with a JSON result declares it (all but the held call's own answers). */
#include <stdarg.h>
#include <stddef.h>
#include <setjmp.h>
#include <stdint.h>
#include <cmocka.h>

#include <string.h>

#include "core/core.h"

static abx_err ok_handler(abx_ctx *ctx, const json_t *args, abx_reply *reply)
{
    (void)ctx;
    (void)args;
    (void)reply;
    return ABX_OK;
}

static const abx_param item_fields[] = {
    {"name", ABX_T_STRING, .required = true, .dflt = "\"a.txt\""},
    {"size", ABX_T_INT},
    {0},
};

static const abx_param result_fields[] = {
    {"path", ABX_T_STRING, .required = true, .doc = "where"},
    {"code", ABX_T_INT, .required = true, .nullable = true},
    {"kind", ABX_T_ENUM, .required = true, .choices = "file|dir"},
    {"items", ABX_T_LIST, ABX_T_OBJECT, .required = true, .fields = item_fields},
    {"env", ABX_T_MAP, ABX_T_STRING},
    {"rows", ABX_T_LIST, ABX_T_MAP},
    {"blob", ABX_T_BYTES},
    {"any", ABX_T_ANY},
    {0},
};

static const abx_param event_fields[] = {{"data", ABX_T_STRING, .required = true}, {0}};
static const abx_param events[] = {
    {"chunk", ABX_T_OBJECT, .fields = event_fields, .doc = "output"},
    {"note", ABX_T_ANY},
    {0},
};

static const abx_op_def defs[] = {
    {.id = "custom.typed.get", .effects = ABX_EFF_READ, .result = result_fields, .handler = ok_handler},
    {.id = "custom.typed.watch", .effects = ABX_EFF_READ, .stream = ABX_STREAM_SSE, .events = events,
     .result = result_fields, .handler = ok_handler},
    {.id = "custom.untyped.get", .effects = ABX_EFF_READ, .handler = ok_handler},
    {0},
};

static abx_registry *reg;

static int setup(void **state)
{
    (void)state;
    char err[200];
    reg = abx_registry_new(NULL);
    if (!reg || abx_registry_add(reg, defs, err, sizeof err) != 0)
        return -1;
    abx_registry_freeze(reg);
    return 0;
}

static int teardown(void **state)
{
    (void)state;
    abx_registry_free(reg);
    return 0;
}

static const char *type_of(const json_t *s) { return json_string_value(json_object_get(s, "type")); }

static void test_result_schema(void **state)
{
    (void)state;
    json_t *s = abx_op_result_schema(abx_registry_get(reg, "custom.typed.get"));
    assert_non_null(s);
    assert_string_equal(type_of(s), "object");
    assert_true(json_is_false(json_object_get(s, "additionalProperties"))); /* closed */
    json_t *req = json_object_get(s, "required");
    assert_int_equal(json_array_size(req), 4);
    assert_string_equal(json_string_value(json_array_get(req, 3)), "items");
    json_t *p = json_object_get(s, "properties");
    assert_string_equal(json_string_value(json_object_get(json_object_get(p, "path"), "description")), "where");
    json_t *code = json_object_get(json_object_get(p, "code"), "type"); /* nullable: [integer, null] */
    assert_string_equal(json_string_value(json_array_get(code, 0)), "integer");
    assert_string_equal(json_string_value(json_array_get(code, 1)), "null");
    json_t *item = json_object_get(json_object_get(p, "items"), "items");
    assert_string_equal(type_of(item), "object");
    assert_true(json_is_false(json_object_get(item, "additionalProperties")));
    json_t *name = json_object_get(json_object_get(item, "properties"), "name");
    assert_null(json_object_get(name, "default")); /* a result's .dflt is an example */
    assert_string_equal(json_string_value(json_array_get(json_object_get(name, "examples"), 0)), "a.txt");
    assert_string_equal(type_of(json_object_get(json_object_get(p, "env"), "additionalProperties")), "string");
    assert_string_equal(type_of(json_object_get(json_object_get(p, "rows"), "items")), "object");
    assert_string_equal(json_string_value(json_object_get(json_object_get(p, "blob"), "contentEncoding")), "base64");
    assert_int_equal(json_object_size(json_object_get(p, "any")), 0);
    json_decref(s);
    /* undeclared, and a stream (its events, not a result) */
    assert_null(abx_op_result_schema(abx_registry_get(reg, "custom.untyped.get")));
    assert_null(abx_op_result_schema(abx_registry_get(reg, "custom.typed.watch")));
    assert_null(abx_op_events_schema(abx_registry_get(reg, "custom.untyped.get")));
}

static void test_events_schema(void **state)
{
    (void)state;
    json_t *ev = abx_op_events_schema(abx_registry_get(reg, "custom.typed.watch"));
    assert_non_null(ev);
    assert_int_equal(json_object_size(ev), 2);
    json_t *chunk = json_object_get(ev, "chunk");
    assert_string_equal(type_of(chunk), "object");
    assert_string_equal(json_string_value(json_object_get(chunk, "description")), "output");
    assert_string_equal(json_string_value(json_array_get(json_object_get(chunk, "required"), 0)), "data");
    assert_null(json_object_get(json_object_get(ev, "note"), "type")); /* any JSON */
    json_decref(ev);
}

static void test_example(void **state)
{
    (void)state;
    json_t *s = abx_op_result_schema(abx_registry_get(reg, "custom.typed.get"));
    json_t *ex = abx_schema_example(s);
    assert_true(json_is_object(ex));
    assert_string_equal(json_string_value(json_object_get(ex, "path")), "string");
    assert_true(json_is_integer(json_object_get(ex, "code")));
    assert_string_equal(json_string_value(json_object_get(ex, "kind")), "file"); /* the first choice */
    json_t *items = json_object_get(ex, "items");
    assert_int_equal(json_array_size(items), 1);
    assert_string_equal(json_string_value(json_object_get(json_array_get(items, 0), "name")), "a.txt");
    assert_true(json_is_object(json_object_get(ex, "env")));
    assert_true(json_is_null(json_object_get(ex, "any")));
    json_decref(ex);
    json_decref(s);
}

/* every builtin op whose result is JSON declares it, except answers that are another
 * call's own (a held call's, a dynamic tool's) */
static void test_builtins_declare_their_results(void **state)
{
    (void)state;
    abx_registry *d = abx_registry_new(abx_registry_default());
    abx_registry_freeze(d);
    size_t typed = 0, missing = 0;
    for (size_t i = 0; i < abx_registry_count(d); i++) {
        const abx_op *op = abx_registry_at(d, i);
        if (op->def->stream == ABX_STREAM_SSE) {
            if (!op->def->events && ++missing)
                print_error("%s declares no events\n", op->id);
            continue;
        }
        if (op->def->stream != ABX_STREAM_NONE || op->def->raw_query)
            continue;
        /* the answer is another call's own: the held call's (approvals.get, decide) or the
         * dynamic tool's, whatever its run() returns (tools.call, like dyn.<name>) */
        if (!strcmp(op->id, "approvals.get") || !strcmp(op->id, "approvals.decide") || !strcmp(op->id, "tools.call"))
            continue;
        if (!op->def->result && ++missing)
            print_error("%s declares no result\n", op->id);
        typed++;
    }
    assert_int_equal(missing, 0); /* each one is printed above */
    assert_in_range(typed, 40, 1000);
    abx_registry_free(d);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_result_schema),
        cmocka_unit_test(test_events_schema),
        cmocka_unit_test(test_example),
        cmocka_unit_test(test_builtins_declare_their_results),
    };
    return cmocka_run_group_tests(tests, setup, teardown);
}
