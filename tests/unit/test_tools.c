/* test_tools.c — unit tests of the LLM provider tool formats: the schema translation of
 * src/discovery/tools.c walked over every built-in op for each provider (root object,
 * only the keywords the provider's subset accepts, OpenAI strict's all-required /
 * nullable / closed objects, Gemini's upper-case types and nullable), hand-made schemas
 * for the rewrites (const, type arrays, defaults, base64, maps and any-values falling
 * back), which ops are offered, and the pure decode/encode of src/pipeline/toolcall.c
 * on provider-shaped payloads. */
#include <stdarg.h>
#include <stddef.h>
#include <setjmp.h>
#include <stdint.h>
#include <cmocka.h>

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/core.h"
#include "discovery/discovery.h"
#include "doors/toolcall.h"

static abx_err ok_handler(abx_ctx *ctx, const json_t *args, abx_reply *reply)
{
    (void)ctx;
    (void)args;
    (void)reply;
    return ABX_OK;
}

static bool in_list(const char *k, const char *const *list)
{
    for (; *list; list++)
        if (strcmp(*list, k) == 0)
            return true;
    return false;
}

static const char *const openai_keys[] = {"type", "description", "enum", "minimum", "maximum", "exclusiveMinimum",
                                          "exclusiveMaximum", "multipleOf", "pattern", "minItems", "maxItems", "$ref",
                                          "format", "items", "anyOf", "$defs", "properties", "required",
                                          "additionalProperties", NULL};
static const char *const gemini_keys[] = {"type", "format", "description", "nullable", "enum", "items", "properties",
                                          "required", "minItems", "maxItems", "minimum", "maximum", "minLength",
                                          "maxLength", "pattern", "anyOf", "propertyOrdering", "title", NULL};
static const char *const gemini_types[] = {"STRING", "NUMBER", "INTEGER", "BOOLEAN", "ARRAY", "OBJECT", NULL};

static bool has_null_type(const json_t *s)
{
    const json_t *t = json_object_get(s, "type");
    size_t i;
    json_t *x;
    json_array_foreach(t, i, x) if (strcmp(json_string_value(x), "null") == 0) return true;
    json_array_foreach(json_object_get(s, "anyOf"), i, x) if (has_null_type(x)) return true;
    return false;
}

/* OpenAI strict: allowed keywords only; every object closed with all keys required. */
static void check_openai_strict(const json_t *s, const char *where)
{
    assert_true(json_is_object(s));
    const char *k;
    json_t *v;
    json_object_foreach((json_t *)s, k, v)
    {
        if (!in_list(k, openai_keys))
            fail_msg("%s: keyword '%s' is not accepted by strict mode", where, k);
    }
    const json_t *t = json_object_get(s, "type");
    bool object = (json_is_string(t) && strcmp(json_string_value(t), "object") == 0);
    size_t i;
    json_t *x;
    json_array_foreach(t, i, x) object |= strcmp(json_string_value(x), "object") == 0;
    if (object) {
        assert_true(json_is_false(json_object_get(s, "additionalProperties")));
        const json_t *props = json_object_get(s, "properties"), *req = json_object_get(s, "required");
        assert_true(json_is_object(props));
        assert_int_equal(json_array_size(req), json_object_size(props));
        json_array_foreach(req, i, x) assert_non_null(json_object_get(props, json_string_value(x)));
        json_object_foreach((json_t *)props, k, v) check_openai_strict(v, k);
    }
    if (json_object_get(s, "items"))
        check_openai_strict(json_object_get(s, "items"), where);
    json_array_foreach(json_object_get(s, "anyOf"), i, x) check_openai_strict(x, where);
}

static void check_gemini(const json_t *s, const char *where)
{
    assert_true(json_is_object(s));
    const char *k;
    json_t *v;
    json_object_foreach((json_t *)s, k, v)
    {
        if (!in_list(k, gemini_keys))
            fail_msg("%s: keyword '%s' is outside Gemini's schema subset", where, k);
    }
    const char *t = json_string_value(json_object_get(s, "type"));
    if (!t || !in_list(t, gemini_types))
        fail_msg("%s: type must be one upper-case name", where);
    size_t i;
    json_t *x;
    json_array_foreach(json_object_get(s, "enum"), i, x) assert_true(json_is_string(x));
    if (strcmp(t, "OBJECT") == 0) {
        assert_true(json_object_size(json_object_get(s, "properties")) > 0);
        json_object_foreach(json_object_get(s, "properties"), k, v) check_gemini(v, k);
    }
    if (json_object_get(s, "items"))
        check_gemini(json_object_get(s, "items"), where);
}

static void check_no_vendor_keys(const json_t *s)
{
    const char *k;
    json_t *v;
    json_object_foreach((json_t *)s, k, v)
    {
        assert_false(strncmp(k, "x-", 2) == 0);
        if (json_is_object(v))
            check_no_vendor_keys(v);
    }
}

/* Does an op declare a value strict mode / Gemini's subset cannot say (a map, any)? */
static bool needs_fallback(const abx_param *ps)
{
    for (const abx_param *p = ps; p && p->name; p++)
        if (p->type == ABX_T_MAP || p->type == ABX_T_ANY || p->item == ABX_T_ANY ||
            (p->fields && needs_fallback(p->fields)))
            return true;
    return false;
}

static void test_every_builtin_op_translates(void **state)
{
    (void)state;
    abx_registry *reg = abx_registry_default();
    abx_registry_freeze(reg);
    size_t strict = 0, fallback = 0;
    for (size_t i = 0; i < abx_registry_count(reg); i++) {
        const abx_op *op = abx_registry_at(reg, i);
        json_t *args = abx_op_args_schema(op);
        for (int f = 0; f < ABX_TOOLS__COUNT; f++) {
            bool native = false;
            json_t *s = abx_tool_schema(args, (abx_tool_format)f, &native);
            assert_non_null(s);
            check_no_vendor_keys(s);
            const char *t = json_string_value(json_object_get(s, "type"));
            assert_non_null(t);
            assert_string_equal(t, f == ABX_TOOLS_GEMINI && native ? "OBJECT" : "object");
            if (f != ABX_TOOLS_GEMINI) /* strict mode takes every op: maps and any-values reshaped */
                assert_true(native);
            else if (native == needs_fallback(op->def->params))
                fail_msg("%s (%s): native=%d", op->id, abx_tool_format_name((abx_tool_format)f), native);
            if ((f == ABX_TOOLS_OPENAI || f == ABX_TOOLS_RESPONSES) && native) {
                check_openai_strict(s, op->id);
                /* what the op does not require may be null (= absent) */
                const char *k;
                json_t *v;
                json_object_foreach(json_object_get(s, "properties"), k, v)
                {
                    bool req = false;
                    size_t x;
                    json_t *r;
                    json_array_foreach(json_object_get(args, "required"), x, r) req |= strcmp(json_string_value(r), k) == 0;
                    if (!req && !has_null_type(v))
                        fail_msg("%s: optional '%s' is not nullable", op->id, k);
                }
                strict++;
            }
            if (f == ABX_TOOLS_GEMINI && native && json_object_size(json_object_get(s, "properties")))
                check_gemini(s, op->id);
            if (!native) { /* the portable schema: no default for gemini's JSON Schema field */
                fallback++;
                char *text = json_dumps(s, JSON_COMPACT);
                if (f == ABX_TOOLS_GEMINI && strstr(text, "\"default\""))
                    fail_msg("%s: default left in gemini's JSON Schema", op->id);
                free(text);
            }
            json_decref(s);
        }
        json_decref(args);
    }
    assert_true(strict > 50);
    assert_true(fallback > 0);
}

static json_t *j(const char *text)
{
    json_error_t e;
    json_t *v = json_loads(text, 0, &e);
    if (!v)
        fail_msg("bad test JSON: %s: %s", e.text, text);
    return v;
}

static void assert_json(const json_t *got, const char *want_text)
{
    json_t *want = j(want_text);
    if (!json_equal(got, want)) {
        char *g = json_dumps(got, JSON_COMPACT | JSON_SORT_KEYS);
        fail_msg("got %s\nwant %s", g, want_text);
    }
    json_decref(want);
}

static void test_openai_rewrites(void **state)
{
    (void)state;
    json_t *in = j("{\"type\":\"object\",\"properties\":{"
                   "\"a\":{\"type\":\"string\",\"minLength\":1,\"format\":\"uri\",\"x-abx-kind\":\"path\"},"
                   "\"b\":{\"type\":\"integer\",\"default\":3,\"description\":\"Count\",\"minimum\":0},"
                   "\"c\":{\"type\":\"string\",\"enum\":[\"x\",\"y\"]},"
                   "\"d\":{\"type\":\"string\",\"contentEncoding\":\"base64\"},"
                   "\"e\":{\"const\":\"k\"},"
                   "\"f\":{\"type\":\"string\",\"format\":\"date-time\"},"
                   "\"o\":{\"type\":\"object\",\"properties\":{\"z\":{\"type\":[\"boolean\",\"null\"]}}}},"
                   "\"required\":[\"a\",\"e\"],\"additionalProperties\":false}");
    bool native = false;
    json_t *out = abx_tool_schema(in, ABX_TOOLS_OPENAI, &native);
    assert_true(native);
    assert_json(out, "{\"type\":\"object\",\"properties\":{"
                     "\"a\":{\"type\":\"string\"},"
                     "\"b\":{\"type\":[\"integer\",\"null\"],\"description\":\"Count. Default: 3.\",\"minimum\":0},"
                     "\"c\":{\"type\":[\"string\",\"null\"],\"enum\":[\"x\",\"y\",null]},"
                     "\"d\":{\"type\":[\"string\",\"null\"],\"description\":\"Base64-encoded.\"},"
                     "\"e\":{\"enum\":[\"k\"]},"
                     "\"f\":{\"type\":[\"string\",\"null\"],\"format\":\"date-time\"},"
                     "\"o\":{\"type\":[\"object\",\"null\"],\"properties\":{\"z\":{\"type\":[\"boolean\",\"null\"]}},"
                     "\"required\":[\"z\"],\"additionalProperties\":false}},"
                     "\"required\":[\"a\",\"b\",\"c\",\"d\",\"e\",\"f\",\"o\"],\"additionalProperties\":false}");
    json_decref(out);
    json_decref(in);
}

static void test_long_description_keeps_its_default(void **state)
{
    (void)state;
    char doc[3000];
    memset(doc, 'd', sizeof doc - 1);
    doc[sizeof doc - 1] = '\0';
    json_t *in = json_pack("{s:s, s:{s:{s:s, s:s, s:s}}}", "type", "object", "properties", "p", "type", "string",
                           "description", doc, "default", "z");
    for (int f = 0; f < ABX_TOOLS__COUNT; f++) {
        if (f == ABX_TOOLS_ANTHROPIC)
            continue; /* keeps default as a keyword */
        json_t *out = abx_tool_schema(in, (abx_tool_format)f, NULL);
        const char *d = json_string_value(json_object_get(json_object_get(json_object_get(out, "properties"), "p"),
                                                          "description"));
        assert_non_null(d);
        assert_int_equal(strlen(d), strlen(doc) + strlen(". Default: \"z\"."));
        json_decref(out);
    }
    json_decref(in);
}

static void test_fallbacks(void **state)
{
    (void)state;
    const char *cases[] = {
        /* a map with free keys */
        "{\"type\":\"object\",\"properties\":{\"env\":{\"type\":\"object\",\"additionalProperties\":{\"type\":\"string\"},"
        "\"x-abx-kind\":\"command\",\"default\":{}}},\"additionalProperties\":false}",
        /* a value of any type */
        "{\"type\":\"object\",\"properties\":{\"v\":{\"description\":\"anything\"}},\"additionalProperties\":false}",
    };
    for (size_t i = 0; i < 2; i++) {
        json_t *in = j(cases[i]);
        for (int f = 0; f < ABX_TOOLS__COUNT; f++) {
            bool native = true;
            json_t *out = abx_tool_schema(in, (abx_tool_format)f, &native);
            assert_int_equal(native, f != ABX_TOOLS_GEMINI);
            check_no_vendor_keys(out);
            assert_string_equal(json_string_value(json_object_get(out, "type")), "object");
            const json_t *p = json_object_get(json_object_get(out, "properties"), i == 0 ? "env" : "v");
            assert_non_null(p);
            if (f == ABX_TOOLS_OPENAI || f == ABX_TOOLS_RESPONSES) {
                /* strict: a map is a list of {name, value}, an any-value its JSON text; nullable (optional) */
                check_openai_strict(out, "fallback case");
                if (i == 0) {
                    assert_json(json_object_get(p, "items"),
                                "{\"type\":\"object\",\"properties\":{\"name\":{\"type\":\"string\"},"
                                "\"value\":{\"type\":\"string\"}},\"required\":[\"name\",\"value\"],"
                                "\"additionalProperties\":false}");
                    assert_json(json_object_get(p, "type"), "[\"array\",\"null\"]");
                } else {
                    assert_json(json_object_get(p, "type"), "[\"string\",\"null\"]");
                    assert_non_null(strstr(json_string_value(json_object_get(p, "description")), "JSON text"));
                }
            } else if (i == 0) { /* the portable schema keeps the JSON Schema meaning */
                assert_non_null(json_object_get(p, "additionalProperties"));
                assert_int_equal(json_object_get(p, "default") != NULL, f != ABX_TOOLS_GEMINI);
            }
            json_decref(out);
        }
        json_decref(in);
    }
}

static void test_gemini_rewrites(void **state)
{
    (void)state;
    json_t *in = j("{\"$schema\":\"https://json-schema.org/draft/2020-12/schema\",\"type\":\"object\",\"properties\":{"
                   "\"a\":{\"type\":[\"string\",\"null\"],\"description\":\"A\"},"
                   "\"b\":{\"const\":\"only\"},"
                   "\"c\":{\"type\":\"string\",\"enum\":[\"x\",null],\"default\":\"x\"},"
                   "\"d\":{\"type\":\"string\",\"contentEncoding\":\"base64\"},"
                   "\"l\":{\"type\":\"array\",\"items\":{\"type\":\"integer\",\"maximum\":9}},"
                   "\"o\":{\"type\":\"object\",\"properties\":{\"z\":{\"type\":\"boolean\"}},"
                   "\"additionalProperties\":false,\"required\":[\"z\"]}},"
                   "\"required\":[\"a\"],\"additionalProperties\":false}");
    bool native = false;
    json_t *out = abx_tool_schema(in, ABX_TOOLS_GEMINI, &native);
    assert_true(native);
    check_gemini(out, "root");
    assert_json(out, "{\"type\":\"OBJECT\",\"properties\":{"
                     "\"a\":{\"type\":\"STRING\",\"nullable\":true,\"description\":\"A\"},"
                     "\"b\":{\"type\":\"STRING\",\"enum\":[\"only\"]},"
                     "\"c\":{\"type\":\"STRING\",\"enum\":[\"x\"],\"nullable\":true,\"description\":\"Default: \\\"x\\\".\"},"
                     "\"d\":{\"type\":\"STRING\",\"format\":\"byte\"},"
                     "\"l\":{\"type\":\"ARRAY\",\"items\":{\"type\":\"INTEGER\",\"maximum\":9}},"
                     "\"o\":{\"type\":\"OBJECT\",\"properties\":{\"z\":{\"type\":\"BOOLEAN\"}},"
                     "\"propertyOrdering\":[\"z\"],\"required\":[\"z\"]}},"
                     "\"propertyOrdering\":[\"a\",\"b\",\"c\",\"d\",\"l\",\"o\"],\"required\":[\"a\"]}");
    json_decref(out);
    json_decref(in);
    /* a union of two real types, an integer enum, a $ref, an empty nested object: outside the subset */
    const char *outside[] = {
        "{\"type\":\"object\",\"properties\":{\"u\":{\"type\":[\"string\",\"integer\"]}}}",
        "{\"type\":\"object\",\"properties\":{\"u\":{\"type\":\"integer\",\"enum\":[1,2]}}}",
        "{\"type\":\"object\",\"properties\":{\"u\":{\"$ref\":\"#/$defs/x\"}}}",
        "{\"type\":\"object\",\"properties\":{\"u\":{\"type\":\"object\",\"properties\":{}}}}",
    };
    for (size_t i = 0; i < 4; i++) {
        in = j(outside[i]);
        native = true;
        out = abx_tool_schema(in, ABX_TOOLS_GEMINI, &native);
        assert_false(native);
        assert_string_equal(json_string_value(json_object_get(out, "type")), "object");
        json_decref(out);
        json_decref(in);
    }
}

static const abx_param one_param[] = {{.name = "path", .type = ABX_T_STRING, .required = true}, {0}};
static const abx_param map_param[] = {{.name = "env", .type = ABX_T_MAP, .item = ABX_T_STRING}, {0}};

static const abx_op_def decl_ops[] = {
    {.id = "custom.thing.get", .effects = ABX_EFF_READ, .summary = "Get a thing.", .params = one_param,
     .handler = ok_handler},
    {.id = "custom.empty.get", .effects = ABX_EFF_READ, .summary = "Nothing to say.", .handler = ok_handler},
    {.id = "custom.envy.run", .effects = ABX_EFF_EXEC, .summary = "With a map.", .params = map_param,
     .handler = ok_handler},
    {.id = "custom.upload.put", .effects = ABX_EFF_WRITE, .summary = "Raw body.", .raw_body = true,
     .handler = ok_handler},
    {.id = "custom.term.connect", .effects = ABX_EFF_EXEC, .summary = "A socket.", .stream = ABX_STREAM_WS,
     .handler = ok_handler},
    {.id = "custom.aaaaaaaaaaaaaaaaaaaa.bbbbbbbbbbbbbbbbbbbb.cccccccccccccccccccc.get", .effects = ABX_EFF_READ,
     .summary = "Too long a tool name.", .handler = ok_handler},
    {0},
};

static abx_registry *decl_registry(void)
{
    char err[256];
    abx_registry *reg = abx_registry_new(NULL);
    assert_non_null(reg);
    if (abx_registry_add(reg, decl_ops, err, sizeof err) != 0)
        fail_msg("registry: %s", err);
    abx_registry_freeze(reg);
    return reg;
}

static void test_declarations(void **state)
{
    (void)state;
    abx_registry *reg = decl_registry();
    const abx_op *thing = abx_registry_get(reg, "custom.thing.get");
    const abx_op *empty = abx_registry_get(reg, "custom.empty.get");
    const abx_op *envy = abx_registry_get(reg, "custom.envy.run");
    assert_false(abx_tool_offered(abx_registry_get(reg, "custom.upload.put")));
    assert_false(abx_tool_offered(abx_registry_get(reg, "custom.term.connect")));
    assert_false(abx_tool_offered(
        abx_registry_get(reg, "custom.aaaaaaaaaaaaaaaaaaaa.bbbbbbbbbbbbbbbbbbbb.cccccccccccccccccccc.get")));
    assert_true(abx_tool_offered(thing));

    json_t *d = abx_tool_declaration(thing, ABX_TOOLS_OPENAI);
    assert_json(d, "{\"type\":\"function\",\"function\":{\"name\":\"custom__thing__get\",\"description\":\"Get a thing.\","
                   "\"parameters\":{\"type\":\"object\",\"properties\":{\"path\":{\"type\":\"string\"}},"
                   "\"required\":[\"path\"],\"additionalProperties\":false},\"strict\":true}}");
    json_decref(d);
    d = abx_tool_declaration(thing, ABX_TOOLS_RESPONSES);
    assert_json(d, "{\"type\":\"function\",\"name\":\"custom__thing__get\",\"description\":\"Get a thing.\","
                   "\"parameters\":{\"type\":\"object\",\"properties\":{\"path\":{\"type\":\"string\"}},"
                   "\"required\":[\"path\"],\"additionalProperties\":false},\"strict\":true}");
    json_decref(d);
    d = abx_tool_declaration(thing, ABX_TOOLS_ANTHROPIC);
    assert_json(d, "{\"name\":\"custom__thing__get\",\"description\":\"Get a thing.\",\"input_schema\":{"
                   "\"type\":\"object\",\"properties\":{\"path\":{\"type\":\"string\"}},\"required\":[\"path\"],"
                   "\"additionalProperties\":false}}");
    json_decref(d);
    d = abx_tool_declaration(empty, ABX_TOOLS_GEMINI); /* no properties: no parameters at all */
    assert_json(d, "{\"name\":\"custom__empty__get\",\"description\":\"Nothing to say.\"}");
    json_decref(d);
    d = abx_tool_declaration(envy, ABX_TOOLS_GEMINI);
    assert_non_null(json_object_get(d, "parametersJsonSchema"));
    assert_null(json_object_get(d, "parameters"));
    json_decref(d);
    d = abx_tool_declaration(envy, ABX_TOOLS_OPENAI);
    assert_true(json_is_true(json_object_get(json_object_get(d, "function"), "strict")));
    json_decref(d);

    json_t *all = abx_tools(reg, NULL, 0, ABX_TOOLS_GEMINI);
    const json_t *tools = json_object_get(all, "tools");
    assert_int_equal(json_array_size(tools), 1);
    assert_int_equal(json_array_size(json_object_get(json_array_get(tools, 0), "functionDeclarations")), 3);
    json_decref(all);
    all = abx_tools(reg, NULL, 0, ABX_TOOLS_ANTHROPIC);
    assert_int_equal(json_array_size(json_object_get(all, "tools")), 3);
    json_decref(all);
    abx_registry_free(reg);
}

static void test_format_names(void **state)
{
    (void)state;
    abx_tool_format f;
    for (int i = 0; i < ABX_TOOLS__COUNT; i++) {
        const char *n = abx_tool_format_name((abx_tool_format)i);
        assert_true(abx_tool_format_parse(n, strlen(n), &f));
        assert_int_equal(f, i);
        assert_non_null(strstr(ABX_TOOL_FORMATS, n));
    }
    assert_false(abx_tool_format_parse("OpenAI", 6, &f));
    assert_false(abx_tool_format_parse("openai2", 7, &f));
    assert_false(abx_tool_format_parse("open", 4, &f));
    assert_false(abx_tool_format_parse("", 0, &f));
}

/* ---- decode / encode ---- */

static abx_err decode(abx_tool_format f, const char *text, abx_toolcalls *out, char *msg)
{
    json_t *doc = j(text);
    abx_err e = abx_toolcalls_decode(f, doc, out, msg, 300);
    json_decref(doc);
    return e;
}

static void test_decode_openai(void **state)
{
    (void)state;
    abx_toolcalls c;
    char msg[300];
    assert_int_equal(decode(ABX_TOOLS_OPENAI,
                            "{\"role\":\"assistant\",\"content\":null,\"tool_calls\":["
                            "{\"id\":\"call_1\",\"type\":\"function\",\"function\":{\"name\":\"files__read\","
                            "\"arguments\":\"{\\\"path\\\":\\\"a.txt\\\"}\"}},"
                            "{\"id\":\"call_2\",\"type\":\"function\",\"function\":{\"name\":\"x\",\"arguments\":\"{bad\"}},"
                            "{\"id\":\"call_3\",\"type\":\"function\",\"function\":{\"name\":\"y\",\"arguments\":\"[1]\"}},"
                            "{\"id\":\"call_4\",\"type\":\"function\",\"function\":{\"name\":\"z\",\"arguments\":\"\"}},"
                            "{\"id\":\"call_5\",\"type\":\"custom\",\"custom\":{\"name\":\"w\",\"input\":\"hi\"}}]}",
                            &c, msg),
                     ABX_OK);
    assert_int_equal(c.n, 5);
    assert_string_equal(c.v[0].id, "call_1");
    assert_string_equal(c.v[0].name, "files__read");
    assert_string_equal(json_string_value(json_object_get(c.v[0].args, "path")), "a.txt");
    assert_null(c.v[1].args);
    assert_non_null(strstr(c.v[1].error, "not valid JSON"));
    assert_null(c.v[2].args);
    assert_non_null(strstr(c.v[2].error, "object"));
    assert_int_equal(json_object_size(c.v[3].args), 0);
    assert_null(c.v[4].args);
    assert_string_equal(c.v[4].name, "w");
    assert_non_null(strstr(c.v[4].error, "custom"));

    /* encode: one tool message per call, in order, errors as text */
    abx_toolresult res[5];
    json_t *okb = j("{\"content\":\"hi\"}"), *errb = j("{\"error\":{\"code\":\"args.invalid\",\"message\":\"m\"}}");
    for (int i = 0; i < 5; i++)
        res[i] = (abx_toolresult){i == 0 ? 200 : 400, i == 0 ? okb : errb};
    json_t *a = abx_toolcalls_answer(ABX_TOOLS_OPENAI, &c, res);
    const json_t *msgs = json_object_get(a, "messages");
    assert_int_equal(json_array_size(msgs), 5);
    assert_json(json_array_get(msgs, 0), "{\"role\":\"tool\",\"tool_call_id\":\"call_1\",\"content\":\"{\\\"content\\\":\\\"hi\\\"}\"}");
    assert_string_equal(json_string_value(json_object_get(json_array_get(msgs, 4), "tool_call_id")), "call_5");
    json_decref(a);
    abx_toolcalls_release(&c);

    /* the whole request is refused for a wrong shape, no calls, or a call without an id */
    assert_int_equal(decode(ABX_TOOLS_OPENAI, "{\"content\":\"just text\"}", &c, msg), ABX_E_ARGS_INVALID);
    assert_int_equal(decode(ABX_TOOLS_OPENAI, "{\"tool_calls\":[]}", &c, msg), ABX_E_ARGS_INVALID);
    assert_non_null(strstr(msg, "no tool calls"));
    assert_int_equal(decode(ABX_TOOLS_OPENAI, "{\"tool_calls\":[{\"type\":\"function\",\"function\":{\"name\":\"a\"}}]}",
                            &c, msg),
                     ABX_E_ARGS_INVALID);
    assert_non_null(strstr(msg, "tool_calls[0]"));
    assert_int_equal(c.n, 0);
    /* a type that is empty names nothing (found by fuzz_toolcall) */
    assert_int_equal(decode(ABX_TOOLS_OPENAI, "{\"tool_calls\":[{\"id\":\"c\",\"type\":\"\",\"function\":{\"name\":\"a\"}}]}",
                            &c, msg),
                     ABX_E_ARGS_INVALID);
    json_decref(okb);
    json_decref(errb);
}

static void test_decode_too_many(void **state)
{
    (void)state;
    char msg[300];
    abx_toolcalls c;
    json_t *doc = json_pack("{s:[]}", "tool_calls");
    for (int i = 0; i < 101; i++) {
        char id[16];
        snprintf(id, sizeof id, "call_%d", i);
        json_array_append_new(json_object_get(doc, "tool_calls"),
                              json_pack("{s:s, s:s, s:{s:s, s:s}}", "id", id, "type", "function", "function", "name",
                                        "core__health", "arguments", "{}"));
    }
    assert_int_equal(abx_toolcalls_decode(ABX_TOOLS_OPENAI, doc, &c, msg, sizeof msg), ABX_E_ARGS_INVALID);
    assert_non_null(strstr(msg, "at most 100"));
    json_array_remove(json_object_get(doc, "tool_calls"), 0);
    assert_int_equal(abx_toolcalls_decode(ABX_TOOLS_OPENAI, doc, &c, msg, sizeof msg), ABX_OK);
    assert_int_equal(c.n, 100);
    abx_toolcalls_release(&c);
    json_decref(doc);
}

static void test_decode_responses(void **state)
{
    (void)state;
    abx_toolcalls c;
    char msg[300];
    assert_int_equal(decode(ABX_TOOLS_RESPONSES,
                            "{\"id\":\"resp_1\",\"output\":["
                            "{\"type\":\"reasoning\",\"id\":\"rs_1\",\"summary\":[]},"
                            "{\"type\":\"function_call\",\"id\":\"fc_1\",\"call_id\":\"call_A\",\"name\":\"files__stat\","
                            "\"arguments\":\"{\\\"path\\\":\\\"b\\\"}\",\"status\":\"completed\"},"
                            "{\"type\":\"message\",\"role\":\"assistant\",\"content\":[]}]}",
                            &c, msg),
                     ABX_OK);
    assert_int_equal(c.n, 1);
    assert_string_equal(c.v[0].id, "call_A");
    abx_toolresult res[1] = {{200, json_object()}};
    json_t *a = abx_toolcalls_answer(ABX_TOOLS_RESPONSES, &c, res);
    assert_json(a, "{\"input\":[{\"type\":\"function_call_output\",\"call_id\":\"call_A\",\"output\":\"{}\"}]}");
    json_decref(a);
    json_decref((json_t *)res[0].body);
    abx_toolcalls_release(&c);
    assert_int_equal(decode(ABX_TOOLS_RESPONSES, "{\"output\":[{\"type\":\"message\"}]}", &c, msg), ABX_E_ARGS_INVALID);
    assert_int_equal(decode(ABX_TOOLS_RESPONSES, "{\"output\":[{\"type\":\"function_call\",\"name\":\"a\"}]}", &c, msg),
                     ABX_E_ARGS_INVALID);
    assert_int_equal(decode(ABX_TOOLS_RESPONSES, "{\"output\":[7]}", &c, msg), ABX_E_ARGS_INVALID);
}

static void test_decode_anthropic(void **state)
{
    (void)state;
    abx_toolcalls c;
    char msg[300];
    assert_int_equal(decode(ABX_TOOLS_ANTHROPIC,
                            "{\"id\":\"msg_1\",\"type\":\"message\",\"role\":\"assistant\",\"content\":["
                            "{\"type\":\"text\",\"text\":\"Let me look.\"},"
                            "{\"type\":\"tool_use\",\"id\":\"toolu_1\",\"name\":\"files__list\",\"input\":{\"path\":\".\"}},"
                            "{\"type\":\"tool_use\",\"id\":\"toolu_2\",\"name\":\"files__list\",\"input\":\"oops\"}],"
                            "\"stop_reason\":\"tool_use\"}",
                            &c, msg),
                     ABX_OK);
    assert_int_equal(c.n, 2);
    assert_string_equal(c.v[1].id, "toolu_2");
    assert_null(c.v[1].args);
    abx_toolresult res[2] = {{200, json_object()}, {403, j("{\"error\":{\"code\":\"policy.denied\",\"message\":\"no\"}}")}};
    json_t *a = abx_toolcalls_answer(ABX_TOOLS_ANTHROPIC, &c, res);
    assert_json(a, "{\"role\":\"user\",\"content\":["
                   "{\"type\":\"tool_result\",\"tool_use_id\":\"toolu_1\",\"content\":\"{}\",\"is_error\":false},"
                   "{\"type\":\"tool_result\",\"tool_use_id\":\"toolu_2\",\"content\":"
                   "\"{\\\"error\\\":{\\\"code\\\":\\\"policy.denied\\\",\\\"message\\\":\\\"no\\\"}}\",\"is_error\":true}]}");
    json_decref(a);
    json_decref((json_t *)res[0].body);
    json_decref((json_t *)res[1].body);
    abx_toolcalls_release(&c);
    assert_int_equal(decode(ABX_TOOLS_ANTHROPIC, "{\"content\":\"a string\"}", &c, msg), ABX_E_ARGS_INVALID);
    assert_int_equal(decode(ABX_TOOLS_ANTHROPIC, "{\"content\":[{\"type\":\"text\",\"text\":\"no tools\"}]}", &c, msg),
                     ABX_E_ARGS_INVALID);
    assert_int_equal(decode(ABX_TOOLS_ANTHROPIC, "{\"content\":[{\"type\":\"tool_use\",\"id\":\"\",\"name\":\"a\"}]}",
                            &c, msg),
                     ABX_E_ARGS_INVALID);
}

static void test_decode_gemini(void **state)
{
    (void)state;
    abx_toolcalls c;
    char msg[300];
    assert_int_equal(decode(ABX_TOOLS_GEMINI,
                            "{\"role\":\"model\",\"parts\":["
                            "{\"functionCall\":{\"name\":\"files__read\",\"args\":{\"path\":\"a\"}},"
                            "\"thoughtSignature\":\"c2ln\"},"
                            "{\"text\":\"and\"},"
                            "{\"functionCall\":{\"name\":\"core__health\"}},"
                            "{\"functionCall\":{\"id\":\"fc-7\",\"name\":\"files__stat\",\"args\":[1]}}]}",
                            &c, msg),
                     ABX_OK);
    assert_int_equal(c.n, 3);
    assert_null(c.v[0].id);
    assert_int_equal(json_object_size(c.v[1].args), 0);
    assert_string_equal(c.v[2].id, "fc-7");
    assert_null(c.v[2].args);
    json_t *errb = j("{\"error\":{\"code\":\"args.invalid\",\"message\":\"m\"}}");
    abx_toolresult res[3] = {{200, j("{\"content\":\"x\"}")}, {200, json_object()}, {400, errb}};
    json_t *a = abx_toolcalls_answer(ABX_TOOLS_GEMINI, &c, res);
    assert_json(a, "{\"role\":\"user\",\"parts\":["
                   "{\"functionResponse\":{\"name\":\"files__read\",\"response\":{\"output\":{\"content\":\"x\"}}}},"
                   "{\"functionResponse\":{\"name\":\"core__health\",\"response\":{\"output\":{}}}},"
                   "{\"functionResponse\":{\"id\":\"fc-7\",\"name\":\"files__stat\",\"response\":"
                   "{\"error\":{\"code\":\"args.invalid\",\"message\":\"m\"}}}}]}");
    json_decref(a);
    for (int i = 0; i < 3; i++)
        json_decref((json_t *)res[i].body);
    abx_toolcalls_release(&c);
    assert_int_equal(decode(ABX_TOOLS_GEMINI, "{\"candidates\":[]}", &c, msg), ABX_E_ARGS_INVALID);
    assert_int_equal(decode(ABX_TOOLS_GEMINI, "{\"parts\":[{\"functionCall\":{\"args\":{}}}]}", &c, msg),
                     ABX_E_ARGS_INVALID);
    assert_int_equal(decode(ABX_TOOLS_GEMINI, "{\"parts\":[\"x\"]}", &c, msg), ABX_E_ARGS_INVALID);
    assert_int_equal(decode(ABX_TOOLS_GEMINI, "{\"parts\":[{\"text\":\"only text\"}]}", &c, msg), ABX_E_ARGS_INVALID);
    json_t *arr = j("[1]");
    assert_int_equal(abx_toolcalls_decode(ABX_TOOLS_GEMINI, arr, &c, msg, sizeof msg), ABX_E_ARGS_INVALID);
    json_decref(arr);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_every_builtin_op_translates),
        cmocka_unit_test(test_openai_rewrites),
        cmocka_unit_test(test_long_description_keeps_its_default),
        cmocka_unit_test(test_fallbacks),
        cmocka_unit_test(test_gemini_rewrites),
        cmocka_unit_test(test_declarations),
        cmocka_unit_test(test_format_names),
        cmocka_unit_test(test_decode_openai),
        cmocka_unit_test(test_decode_too_many),
        cmocka_unit_test(test_decode_responses),
        cmocka_unit_test(test_decode_anthropic),
        cmocka_unit_test(test_decode_gemini),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
