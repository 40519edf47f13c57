/* test_schema.c — unit tests of src/core/schema.c: abx_args_validate over an op that
 * declares every parameter type (with bounds, defaults, nullables, a nested object and a
 * one_of pair), abx_args_add_text typing of query-string values, and the JSON Schema
 * that abx_op_args_schema generates. */
#include <stdarg.h>
#include <stddef.h>
#include <setjmp.h>
#include <stdint.h>
#include <cmocka.h>

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/core.h"

static abx_err ok_handler(abx_ctx *ctx, const json_t *args, abx_reply *reply)
{
    (void)ctx;
    (void)args;
    (void)reply;
    return ABX_OK;
}

static const abx_param opts_fields[] = {
    {.name = "depth", .type = ABX_T_INT, .required = true, ABX_RANGE(1, 5)},
    {.name = "label", .type = ABX_T_STRING, .nullable = true},
    {.name = "level", .type = ABX_T_INT, .dflt = "1"},
    {0},
};

static const abx_param all_params[] = {
    {.name = "name", .type = ABX_T_STRING, .required = true, .doc = "a name"},
    {.name = "count", .type = ABX_T_INT, .dflt = "3", ABX_RANGE(0, 10)},
    {.name = "ratio", .type = ABX_T_NUMBER, ABX_RANGE(0, 1)},
    {.name = "flag", .type = ABX_T_BOOL, .dflt = "false"},
    {.name = "blob", .type = ABX_T_BYTES},
    {.name = "nums", .type = ABX_T_LIST, .item = ABX_T_INT},
    {.name = "env", .type = ABX_T_MAP, .item = ABX_T_STRING},
    {.name = "mode", .type = ABX_T_ENUM, .choices = "fast|slow", .dflt = "\"fast\""},
    {.name = "opts", .type = ABX_T_OBJECT, .fields = opts_fields},
    {.name = "note", .type = ABX_T_STRING, .nullable = true},
    {.name = "command", .type = ABX_T_STRING},
    {.name = "argv", .type = ABX_T_LIST, .item = ABX_T_STRING},
    {0},
};

/* header: min/max bound "INT (and LIST length)" */
static const abx_param bounded_list[] = {
    {.name = "tags", .type = ABX_T_LIST, .item = ABX_T_STRING, ABX_RANGE(1, 2)},
    {0},
};

static const abx_op_def test_ops[] = {
    {.id = "custom.schema.run", .effects = ABX_EFF_EXEC, .params = all_params, .one_of = "command|argv",
     .handler = ok_handler},
    {.id = "custom.noparams.get", .effects = ABX_EFF_READ, .handler = ok_handler},
    {.id = "custom.bounded.get", .effects = ABX_EFF_READ, .params = bounded_list, .handler = ok_handler},
    {0},
};

static abx_registry *reg;
static const abx_op *op, *noparams, *bounded;

static int group_setup(void **state)
{
    (void)state;
    char err[256];
    reg = abx_registry_new(NULL);
    if (!reg || abx_registry_add(reg, test_ops, err, sizeof err) != 0) {
        fprintf(stderr, "setup: %s\n", err);
        return -1;
    }
    abx_registry_freeze(reg);
    op = abx_registry_get(reg, "custom.schema.run");
    noparams = abx_registry_get(reg, "custom.noparams.get");
    bounded = abx_registry_get(reg, "custom.bounded.get");
    return op && noparams && bounded ? 0 : -1;
}

static int group_teardown(void **state)
{
    (void)state;
    abx_registry_free(reg);
    return 0;
}

/* ---- helpers ----------------------------------------------------------------------------- */

static json_t *parse(const char *text)
{
    json_error_t je;
    json_t *v = json_loads(text, JSON_DECODE_ANY, &je);
    if (!v)
        fail_msg("bad JSON in test: %s: %s", text, je.text);
    return v;
}

/* Validate JSON text; expect code, and (when frag) a message containing frag. */
static void expect_validate(const abx_op *o, const char *text, abx_err want, const char *frag)
{
    json_t *args = parse(text);
    char msg[300] = "";
    abx_err got = abx_args_validate(o, args, msg, sizeof msg);
    json_decref(args);
    if (got != want)
        fail_msg("validate(%s) = %s (%s), want %s", text, abx_err_code(got), msg, abx_err_code(want));
    if (frag && !strstr(msg, frag))
        fail_msg("validate(%s): message does not name '%s': %s", text, frag, msg);
}

/* a minimal valid argument object */
#define BASE "\"name\": \"n\", \"command\": \"ls\""

/* ---- abx_args_validate --------------------------------------------------------------------- */

static void test_validate_accepts_all_types(void **state)
{
    (void)state;
    json_t *args = parse("{\"name\": \"x\", \"count\": 10, \"ratio\": 0.5, \"flag\": true, \"blob\": \"aGk=\","
                         " \"nums\": [1, -2, 3], \"env\": {\"A\": \"1\", \"B\": \"\"}, \"mode\": \"slow\","
                         " \"opts\": {\"depth\": 2, \"label\": \"l\"}, \"note\": \"hi\", \"argv\": [\"ls\", \"-l\"]}");
    char msg[300] = "";
    assert_int_equal(abx_args_validate(op, args, msg, sizeof msg), ABX_OK);
    /* given values are kept as they are */
    assert_int_equal(json_integer_value(json_object_get(args, "count")), 10);
    assert_string_equal(json_string_value(json_object_get(args, "mode")), "slow");
    assert_true(json_is_true(json_object_get(args, "flag")));
    /* nested default filled in */
    assert_int_equal(json_integer_value(json_object_get(json_object_get(args, "opts"), "level")), 1);
    json_decref(args);
    /* numbers accept integers; bounds are inclusive */
    expect_validate(op, "{" BASE ", \"ratio\": 1}", ABX_OK, NULL);
    expect_validate(op, "{" BASE ", \"ratio\": 0}", ABX_OK, NULL);
    expect_validate(op, "{" BASE ", \"count\": 0}", ABX_OK, NULL);
    expect_validate(op, "{" BASE ", \"nums\": [], \"env\": {}}", ABX_OK, NULL);
    expect_validate(noparams, "{}", ABX_OK, NULL);
}

static void test_validate_fills_defaults(void **state)
{
    (void)state;
    json_t *args = parse("{" BASE "}");
    char msg[300];
    assert_int_equal(abx_args_validate(op, args, msg, sizeof msg), ABX_OK);
    assert_int_equal(json_integer_value(json_object_get(args, "count")), 3);
    assert_true(json_is_false(json_object_get(args, "flag")));
    assert_string_equal(json_string_value(json_object_get(args, "mode")), "fast");
    /* no default, not given: stays absent */
    assert_null(json_object_get(args, "ratio"));
    assert_null(json_object_get(args, "opts"));
    assert_null(json_object_get(args, "argv"));
    assert_int_equal(json_object_size(args), 5);
    /* validating again is a no-op */
    json_t *copy = json_deep_copy(args);
    assert_int_equal(abx_args_validate(op, args, msg, sizeof msg), ABX_OK);
    assert_true(json_equal(copy, args));
    json_decref(copy);
    json_decref(args);
}

static void test_validate_unknown(void **state)
{
    (void)state;
    expect_validate(op, "{" BASE ", \"bogus\": 1}", ABX_E_ARGS_UNKNOWN, "bogus");
    expect_validate(op, "{" BASE ", \"Name\": \"x\"}", ABX_E_ARGS_UNKNOWN, "Name");
    expect_validate(noparams, "{\"x\": null}", ABX_E_ARGS_UNKNOWN, "x");
    /* nested object: the unknown field is named with its parent */
    expect_validate(op, "{" BASE ", \"opts\": {\"depth\": 1, \"zzz\": 2}}", ABX_E_ARGS_UNKNOWN, "opts.zzz");
}

static void test_validate_missing(void **state)
{
    (void)state;
    expect_validate(op, "{\"command\": \"ls\"}", ABX_E_ARGS_MISSING, "name");
    expect_validate(op, "{" BASE ", \"opts\": {}}", ABX_E_ARGS_MISSING, "opts.depth");
    expect_validate(op, "{" BASE ", \"opts\": {\"label\": \"x\"}}", ABX_E_ARGS_MISSING, "opts.depth");
}

static void test_validate_wrong_types(void **state)
{
    (void)state;
    static const struct {
        const char *extra;
        const char *name;
    } cases[] = {
        {"\"count\": \"3\"", "count"},
        {"\"count\": 1.5", "count"},
        {"\"count\": 1.0", "count"},           /* a real, even if integral */
        {"\"count\": 11", "count"},            /* above max */
        {"\"count\": -1", "count"},            /* below min */
        {"\"count\": true", "count"},
        {"\"ratio\": \"0.5\"", "ratio"},
        {"\"ratio\": 1.5", "ratio"},
        {"\"ratio\": -0.1", "ratio"},
        {"\"flag\": 1", "flag"},
        {"\"flag\": \"true\"", "flag"},
        {"\"blob\": \"not base64!\"", "blob"},
        {"\"blob\": \"aGk\"", "blob"},         /* unpadded */
        {"\"blob\": 5", "blob"},
        {"\"nums\": 5", "nums"},
        {"\"nums\": [1, \"2\"]", "nums[1]"},
        {"\"nums\": {\"a\": 1}", "nums"},
        {"\"env\": [\"a\"]", "env"},
        {"\"env\": {\"A\": 1}", "env.A"},
        {"\"env\": {\"\": \"x\"}", "env"},     /* empty key */
        {"\"mode\": \"medium\"", "mode"},
        {"\"mode\": \"FAST\"", "mode"},
        {"\"mode\": \"fast|slow\"", "mode"},
        {"\"mode\": \"\"", "mode"},
        {"\"opts\": 5", "opts"},
        {"\"opts\": {\"depth\": \"x\"}", "opts.depth"},
        {"\"opts\": {\"depth\": 9}", "opts.depth"},
        {"\"name\": null", "name"},            /* required: null is not "given" */
        {"\"name\": [\"x\"]", "name"},
        {"\"argv\": [\"ls\", 1]", "argv[1]"},
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        char text[300];
        /* `name` may be overridden by the case: JSON objects keep the last duplicate key */
        snprintf(text, sizeof text, "{" BASE ", %s}", cases[i].extra);
        expect_validate(op, text, ABX_E_ARGS_INVALID, cases[i].name);
    }
    expect_validate(op, "[]", ABX_E_ARGS_INVALID, NULL);
    expect_validate(op, "\"x\"", ABX_E_ARGS_INVALID, NULL);
    expect_validate(op, "null", ABX_E_ARGS_INVALID, NULL);
}

static void test_validate_null_optional_is_absent(void **state)
{
    (void)state;
    /* an optional argument sent as null is "not given" on every door: its default applies */
    json_t *args = parse("{" BASE ", \"count\": null}");
    char msg[300] = "";
    assert_int_equal(abx_args_validate(op, args, msg, sizeof msg), ABX_OK);
    assert_int_equal(json_integer_value(json_object_get(args, "count")), 3);
    json_decref(args);
}

static void test_validate_unknown_lists_valid_names(void **state)
{
    (void)state;
    json_t *args = parse("{" BASE ", \"cuont\": 1}");
    char msg[300] = "";
    assert_int_equal(abx_args_validate(op, args, msg, sizeof msg), ABX_E_ARGS_UNKNOWN);
    assert_non_null(strstr(msg, "'cuont'"));
    assert_non_null(strstr(msg, "did you mean 'count'?"));
    assert_non_null(strstr(msg, "valid: name, count"));
    json_decref(args);
    args = parse("{" BASE ", \"zzzzzzzz\": 1}");
    assert_int_equal(abx_args_validate(op, args, msg, sizeof msg), ABX_E_ARGS_UNKNOWN);
    assert_null(strstr(msg, "did you mean"));
    json_decref(args);
}

static void test_validate_nullable_removed(void **state)
{
    (void)state;
    json_t *args = parse("{" BASE ", \"note\": null, \"opts\": {\"depth\": 1, \"label\": null}}");
    char msg[300] = "";
    assert_int_equal(abx_args_validate(op, args, msg, sizeof msg), ABX_OK);
    assert_null(json_object_get(args, "note"));
    assert_null(json_object_get(json_object_get(args, "opts"), "label"));
    json_decref(args);
}

static void test_validate_nul_in_string(void **state)
{
    (void)state;
    char msg[300] = "";
    json_t *args = parse("{\"command\": \"ls\"}");
    json_object_set_new(args, "name", json_stringn("a\0b", 3));
    assert_int_equal(abx_args_validate(op, args, msg, sizeof msg), ABX_E_ARGS_INVALID);
    assert_non_null(strstr(msg, "name"));
    assert_non_null(strstr(msg, "NUL"));
    json_decref(args);
    /* in a list element and in a map value too */
    args = parse("{" BASE "}");
    json_t *argv = json_array();
    json_array_append_new(argv, json_stringn("x\0", 2));
    json_object_del(args, "command");
    json_object_set_new(args, "argv", argv);
    assert_int_equal(abx_args_validate(op, args, msg, sizeof msg), ABX_E_ARGS_INVALID);
    assert_non_null(strstr(msg, "argv[0]"));
    json_decref(args);
    args = parse("{" BASE ", \"env\": {}}");
    json_object_set_new(json_object_get(args, "env"), "K", json_stringn("v\0w", 3));
    assert_int_equal(abx_args_validate(op, args, msg, sizeof msg), ABX_E_ARGS_INVALID);
    assert_non_null(strstr(msg, "env.K"));
    json_decref(args);
}

static void test_validate_one_of(void **state)
{
    (void)state;
    expect_validate(op, "{\"name\": \"n\"}", ABX_E_ARGS_INVALID, "command/argv");
    expect_validate(op, "{\"name\": \"n\", \"command\": \"ls\", \"argv\": [\"ls\"]}", ABX_E_ARGS_INVALID,
                    "command/argv");
    expect_validate(op, "{\"name\": \"n\", \"argv\": [\"ls\"]}", ABX_OK, NULL);
    expect_validate(op, "{\"name\": \"n\", \"command\": \"ls\"}", ABX_OK, NULL);
}

/* Regression test, fixed since (src/core/schema.c check_value): abx.h documents abx_param.min/max as bounds "for
 * INT (and LIST length)", but a LIST parameter's length is never checked against them
 * (the bounds are applied to integer items instead). */
static void test_validate_list_length_bounds(void **state)
{
    (void)state;
    expect_validate(bounded, "{\"tags\": [\"a\"]}", ABX_OK, NULL);
    expect_validate(bounded, "{\"tags\": [\"a\", \"b\"]}", ABX_OK, NULL);
    expect_validate(bounded, "{\"tags\": []}", ABX_E_ARGS_INVALID, "tags");
    expect_validate(bounded, "{\"tags\": [\"a\", \"b\", \"c\"]}", ABX_E_ARGS_INVALID, "tags");
}

/* ---- abx_args_add_text -------------------------------------------------------------------------- */

static abx_err add(json_t *args, const char *name, const char *value, char *msg)
{
    return abx_args_add_text(op, args, name, value, strlen(value), msg, 300);
}

static void test_add_text_ints(void **state)
{
    (void)state;
    static const struct {
        const char *text;
        long long want;
    } good[] = {{"5", 5}, {"-3", -3}, {"0", 0}, {"007", 7}, {"-0", 0},
                {"9223372036854775807", INT64_MAX}, {"-9223372036854775808", INT64_MIN}};
    for (size_t i = 0; i < sizeof good / sizeof good[0]; i++) {
        json_t *args = json_object();
        char msg[300] = "";
        if (add(args, "count", good[i].text, msg) != ABX_OK)
            fail_msg("count=%s refused: %s", good[i].text, msg);
        json_t *v = json_object_get(args, "count");
        assert_true(json_is_integer(v));
        assert_true(json_integer_value(v) == good[i].want);
        json_decref(args);
    }
    static const char *const bad[] = {"+1", " 1", "1 ", "1.0", "0x10", "", "-", "1e3", "one", "1_000",
                                      "9223372036854775808", "99999999999999999999", "--1", "\t1", "1\n"};
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        json_t *args = json_object();
        char msg[300] = "";
        abx_err e = add(args, "count", bad[i], msg);
        if (e != ABX_E_ARGS_INVALID)
            fail_msg("count=\"%s\" gave %s, want args.invalid", bad[i], abx_err_code(e));
        assert_non_null(strstr(msg, "count"));
        assert_null(json_object_get(args, "count"));
        json_decref(args);
    }
    /* an embedded NUL is not a digit */
    json_t *args = json_object();
    char msg[300];
    assert_int_equal(abx_args_add_text(op, args, "count", "1\0002", 3, msg, sizeof msg), ABX_E_ARGS_INVALID);
    json_decref(args);
}

static void test_add_text_bools(void **state)
{
    (void)state;
    static const struct {
        const char *text;
        bool want;
    } good[] = {{"true", true}, {"1", true}, {"false", false}, {"0", false}};
    for (size_t i = 0; i < sizeof good / sizeof good[0]; i++) {
        json_t *args = json_object();
        char msg[300] = "";
        assert_int_equal(add(args, "flag", good[i].text, msg), ABX_OK);
        json_t *v = json_object_get(args, "flag");
        assert_true(json_is_boolean(v));
        assert_int_equal(json_is_true(v), good[i].want);
        json_decref(args);
    }
    static const char *const bad[] = {"TRUE", "True", "yes", "no", "", "2", "truex", "t", "01", "-1"};
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        json_t *args = json_object();
        char msg[300] = "";
        if (add(args, "flag", bad[i], msg) != ABX_E_ARGS_INVALID)
            fail_msg("flag=\"%s\" should be refused", bad[i]);
        assert_non_null(strstr(msg, "flag"));
        json_decref(args);
    }
}

static void test_add_text_numbers(void **state)
{
    (void)state;
    json_t *args = json_object();
    char msg[300] = "";
    assert_int_equal(add(args, "ratio", "0.25", msg), ABX_OK);
    assert_true(json_is_real(json_object_get(args, "ratio")));
    assert_true(json_real_value(json_object_get(args, "ratio")) == 0.25);
    json_decref(args);
    static const char *const bad[] = {"", " 1", "0x10", "0X10", "inf", "nan", "-inf", "1e999", "1.5x", "abc"};
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        args = json_object();
        if (add(args, "ratio", bad[i], msg) != ABX_E_ARGS_INVALID)
            fail_msg("ratio=\"%s\" should be refused", bad[i]);
        assert_non_null(strstr(msg, "ratio"));
        json_decref(args);
    }
}

/* Regression test, fixed since (src/core/schema.c text_value, ABX_T_NUMBER): the parser means to refuse a leading
 * space and hex ("0x..."), but only looks at the first byte, so strtod() still accepts
 * "\t1", "\n1", "-0x10" and "+0x10" as numbers. */
static void test_add_text_numbers_strict(void **state)
{
    (void)state;
    static const char *const bad[] = {"\t1", "\n1", "-0x10", "+0x10"};
    static const char *const shown[] = {"\\t1", "\\n1", "-0x10", "+0x10"};
    int accepted = 0;
    char list[128] = "";
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        json_t *args = json_object();
        char msg[300];
        if (add(args, "ratio", bad[i], msg) == ABX_OK) {
            accepted++;
            strncat(list, shown[i], sizeof list - strlen(list) - 2);
            strcat(list, " ");
        }
        json_decref(args);
    }
    if (accepted)
        fail_msg("%d non-canonical numbers accepted: %s", accepted, list);
}

static void test_add_text_strings_and_enums(void **state)
{
    (void)state;
    json_t *args = json_object();
    char msg[300] = "";
    assert_int_equal(add(args, "name", "a b%c/d", msg), ABX_OK);
    assert_string_equal(json_string_value(json_object_get(args, "name")), "a b%c/d");
    assert_int_equal(add(args, "note", "", msg), ABX_OK); /* empty string is a string */
    assert_string_equal(json_string_value(json_object_get(args, "note")), "");
    assert_int_equal(add(args, "mode", "slow", msg), ABX_OK);
    assert_string_equal(json_string_value(json_object_get(args, "mode")), "slow");
    assert_int_equal(add(args, "command", "ls", msg), ABX_OK);
    assert_int_equal(abx_args_validate(op, args, msg, sizeof msg), ABX_OK);
    json_decref(args);
    /* NUL and invalid UTF-8 are refused */
    args = json_object();
    assert_int_equal(abx_args_add_text(op, args, "name", "a\0b", 3, msg, sizeof msg), ABX_E_ARGS_INVALID);
    assert_non_null(strstr(msg, "name"));
    assert_int_equal(add(args, "name", "\xc3\x28", msg), ABX_E_ARGS_INVALID);
    assert_int_equal(add(args, "name", "\xed\xa0\x80", msg), ABX_E_ARGS_INVALID); /* surrogate */
    assert_int_equal(add(args, "name", "caf\xc3\xa9", msg), ABX_OK);
    json_decref(args);
    /* an enum value outside the choices is typed now and refused by validation */
    args = parse("{" BASE "}");
    assert_int_equal(add(args, "mode", "medium", msg), ABX_OK);
    assert_int_equal(abx_args_validate(op, args, msg, sizeof msg), ABX_E_ARGS_INVALID);
    assert_non_null(strstr(msg, "mode"));
    json_decref(args);
}

static void test_add_text_lists_and_repeats(void **state)
{
    (void)state;
    json_t *args = json_object();
    char msg[300] = "";
    assert_int_equal(add(args, "argv", "ls", msg), ABX_OK);
    assert_int_equal(add(args, "argv", "-l", msg), ABX_OK);
    assert_int_equal(add(args, "argv", "", msg), ABX_OK);
    json_t *argv = json_object_get(args, "argv");
    assert_true(json_is_array(argv));
    assert_int_equal(json_array_size(argv), 3);
    assert_string_equal(json_string_value(json_array_get(argv, 0)), "ls");
    assert_string_equal(json_string_value(json_array_get(argv, 1)), "-l");
    assert_int_equal(add(args, "nums", "1", msg), ABX_OK);
    assert_int_equal(add(args, "nums", "-2", msg), ABX_OK);
    json_t *nums = json_object_get(args, "nums");
    assert_int_equal(json_array_size(nums), 2);
    assert_int_equal(json_integer_value(json_array_get(nums, 1)), -2);
    assert_int_equal(add(args, "nums", "x", msg), ABX_E_ARGS_INVALID); /* items are typed */
    assert_non_null(strstr(msg, "nums"));
    assert_int_equal(json_array_size(nums), 2);
    /* a second value for a scalar is refused, the first stays */
    assert_int_equal(add(args, "name", "first", msg), ABX_OK);
    assert_int_equal(add(args, "name", "second", msg), ABX_E_ARGS_INVALID);
    assert_non_null(strstr(msg, "name"));
    assert_string_equal(json_string_value(json_object_get(args, "name")), "first");
    assert_int_equal(add(args, "flag", "1", msg), ABX_OK);
    assert_int_equal(add(args, "flag", "1", msg), ABX_E_ARGS_INVALID);
    /* the result validates (argv alone satisfies one_of) */
    assert_int_equal(abx_args_validate(op, args, msg, sizeof msg), ABX_OK);
    json_decref(args);
}

static void test_add_text_refusals(void **state)
{
    (void)state;
    json_t *args = json_object();
    char msg[300] = "";
    assert_int_equal(add(args, "bogus", "1", msg), ABX_E_ARGS_UNKNOWN);
    assert_non_null(strstr(msg, "bogus"));
    assert_int_equal(add(args, "Name", "1", msg), ABX_E_ARGS_UNKNOWN);
    assert_int_equal(add(args, "", "1", msg), ABX_E_ARGS_UNKNOWN);
    /* maps and objects cannot come from a query string */
    assert_int_equal(add(args, "env", "A=1", msg), ABX_E_ARGS_INVALID);
    assert_non_null(strstr(msg, "env"));
    assert_int_equal(add(args, "opts", "{}", msg), ABX_E_ARGS_INVALID);
    assert_non_null(strstr(msg, "opts"));
    assert_int_equal(json_object_size(args), 0);
    json_decref(args);
    /* an op without parameters knows no names */
    args = json_object();
    assert_int_equal(abx_args_add_text(noparams, args, "x", "1", 1, msg, sizeof msg), ABX_E_ARGS_UNKNOWN);
    json_decref(args);
}

/* ---- JSON Schema ---------------------------------------------------------------------------------- */

static void test_op_args_schema(void **state)
{
    (void)state;
    json_t *s = abx_op_args_schema(op);
    assert_non_null(s);
    assert_string_equal(json_string_value(json_object_get(s, "type")), "object");
    assert_true(json_is_false(json_object_get(s, "additionalProperties")));
    json_t *props = json_object_get(s, "properties");
    assert_true(json_is_object(props));
    assert_int_equal(json_object_size(props), 12);
    for (const abx_param *p = all_params; p->name; p++)
        if (!json_object_get(props, p->name))
            fail_msg("schema lacks property '%s'", p->name);
    json_t *req = json_object_get(s, "required");
    assert_true(json_is_array(req));
    assert_int_equal(json_array_size(req), 1);
    assert_string_equal(json_string_value(json_array_get(req, 0)), "name");

    json_t *count = json_object_get(props, "count");
    assert_string_equal(json_string_value(json_object_get(count, "type")), "integer");
    assert_int_equal(json_integer_value(json_object_get(count, "minimum")), 0);
    assert_int_equal(json_integer_value(json_object_get(count, "maximum")), 10);
    assert_int_equal(json_integer_value(json_object_get(count, "default")), 3);
    assert_string_equal(json_string_value(json_object_get(json_object_get(props, "ratio"), "type")), "number");
    assert_string_equal(json_string_value(json_object_get(json_object_get(props, "flag"), "type")), "boolean");
    json_t *blob = json_object_get(props, "blob");
    assert_string_equal(json_string_value(json_object_get(blob, "type")), "string");
    assert_string_equal(json_string_value(json_object_get(blob, "contentEncoding")), "base64");
    json_t *nums = json_object_get(props, "nums");
    assert_string_equal(json_string_value(json_object_get(nums, "type")), "array");
    assert_string_equal(json_string_value(json_object_get(json_object_get(nums, "items"), "type")), "integer");
    json_t *env = json_object_get(props, "env");
    assert_string_equal(json_string_value(json_object_get(env, "type")), "object");
    assert_string_equal(json_string_value(json_object_get(json_object_get(env, "additionalProperties"), "type")),
                        "string");
    json_t *mode = json_object_get(props, "mode");
    json_t *want_enum = parse("[\"fast\", \"slow\"]");
    assert_true(json_equal(json_object_get(mode, "enum"), want_enum));
    json_decref(want_enum);
    assert_string_equal(json_string_value(json_object_get(mode, "default")), "fast");
    json_t *note_type = json_object_get(json_object_get(props, "note"), "type");
    json_t *want_nullable = parse("[\"string\", \"null\"]");
    assert_true(json_equal(note_type, want_nullable));
    json_decref(want_nullable);
    json_t *opts = json_object_get(props, "opts");
    assert_string_equal(json_string_value(json_object_get(opts, "type")), "object");
    assert_true(json_is_false(json_object_get(opts, "additionalProperties")));
    assert_int_equal(json_object_size(json_object_get(opts, "properties")), 3);
    assert_string_equal(json_string_value(json_array_get(json_object_get(opts, "required"), 0)), "depth");
    assert_string_equal(json_string_value(json_object_get(json_object_get(props, "name"), "description")), "a name");
    json_decref(s);

    /* no parameters: an empty closed object without "required" */
    s = abx_op_args_schema(noparams);
    assert_string_equal(json_string_value(json_object_get(s, "type")), "object");
    assert_int_equal(json_object_size(json_object_get(s, "properties")), 0);
    assert_null(json_object_get(s, "required"));
    assert_true(json_is_false(json_object_get(s, "additionalProperties")));
    json_decref(s);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_validate_accepts_all_types),
        cmocka_unit_test(test_validate_fills_defaults),
        cmocka_unit_test(test_validate_unknown),
        cmocka_unit_test(test_validate_missing),
        cmocka_unit_test(test_validate_wrong_types),
        cmocka_unit_test(test_validate_nullable_removed),
        cmocka_unit_test(test_validate_null_optional_is_absent),
        cmocka_unit_test(test_validate_unknown_lists_valid_names),
        cmocka_unit_test(test_validate_nul_in_string),
        cmocka_unit_test(test_validate_one_of),
        cmocka_unit_test(test_validate_list_length_bounds),
        cmocka_unit_test(test_add_text_ints),
        cmocka_unit_test(test_add_text_bools),
        cmocka_unit_test(test_add_text_numbers),
        cmocka_unit_test(test_add_text_numbers_strict),
        cmocka_unit_test(test_add_text_strings_and_enums),
        cmocka_unit_test(test_add_text_lists_and_repeats),
        cmocka_unit_test(test_add_text_refusals),
        cmocka_unit_test(test_op_args_schema),
    };
    return cmocka_run_group_tests(tests, group_setup, group_teardown);
}
