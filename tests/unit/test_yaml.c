/* test_yaml.c — unit tests of src/core/yaml.c: scalar typing, block/flow/JSON
 * input, the line map, every refusal with its line, limits, and the empty cases.
 * Owns nothing but its own fixtures; must never read files or depend on other
 * abx modules. Memory is checked by running it under ASan/UBSan (LeakSanitizer). */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include <limits.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/yaml.h"

/* ---- helpers ---- */

typedef struct loaded {
    json_t *v;
    abx_linemap *m;
} loaded;

static loaded load_ok(const char *text)
{
    char err[256] = "";
    int line = -1;
    loaded l = {NULL, NULL};
    l.v = abx_yaml_load(text, strlen(text), &l.m, err, sizeof err, &line);
    if (!l.v)
        fprintf(stderr, "unexpected failure at line %d: %s\ninput:\n%s\n", line, err, text);
    assert_non_null(l.v);
    assert_non_null(l.m);
    assert_string_equal(err, "");
    assert_int_equal(line, 0);
    return l;
}

static void unload(loaded *l)
{
    json_decref(l->v);
    abx_linemap_free(l->m);
    l->v = NULL;
    l->m = NULL;
}

/* Expects failure; checks the line and that the message contains `needle`. */
static void is_err_len(const char *text, size_t len, int want_line, const char *needle)
{
    char err[256];
    int line = -1;
    abx_linemap *m = (abx_linemap *)(uintptr_t)1; /* must be reset to NULL */
    memset(err, 'Z', sizeof err);
    err[sizeof err - 1] = '\0';
    json_t *v = abx_yaml_load(text, len, &m, err, sizeof err, &line);
    if (v || !strstr(err, needle) || line != want_line)
        fprintf(stderr, "input:\n%.200s\n-> line %d: %s (wanted line %d, '%s')\n", text, line, err,
                want_line, needle);
    assert_null(v);
    assert_null(m);
    assert_non_null(strstr(err, needle));
    assert_int_equal(line, want_line);
}

static void is_err(const char *text, int want_line, const char *needle)
{
    is_err_len(text, strlen(text), want_line, needle);
}

/* The value of `a` in a one-key document "a: <scalar>". */
static json_t *scalar_of(loaded *l)
{
    assert_true(json_is_object(l->v));
    json_t *a = json_object_get(l->v, "a");
    assert_non_null(a);
    return a;
}

static void is_string(const char *scalar, const char *want)
{
    char doc[256];
    snprintf(doc, sizeof doc, "a: %s\n", scalar);
    loaded l = load_ok(doc);
    json_t *a = scalar_of(&l);
    if (!json_is_string(a))
        fprintf(stderr, "'%s' is not a string\n", scalar);
    assert_true(json_is_string(a));
    assert_string_equal(json_string_value(a), want);
    unload(&l);
}

static void is_int(const char *scalar, long long want)
{
    char doc[256];
    snprintf(doc, sizeof doc, "a: %s\n", scalar);
    loaded l = load_ok(doc);
    json_t *a = scalar_of(&l);
    if (!json_is_integer(a))
        fprintf(stderr, "'%s' is not an integer\n", scalar);
    assert_true(json_is_integer(a));
    assert_true(json_integer_value(a) == want);
    unload(&l);
}

static void is_real(const char *scalar, double want)
{
    char doc[256];
    snprintf(doc, sizeof doc, "a: %s\n", scalar);
    loaded l = load_ok(doc);
    json_t *a = scalar_of(&l);
    if (!json_is_real(a))
        fprintf(stderr, "'%s' is not a real\n", scalar);
    assert_true(json_is_real(a));
    assert_true(json_real_value(a) == want);
    unload(&l);
}

static void is_type(const char *scalar, json_type want)
{
    char doc[256];
    snprintf(doc, sizeof doc, "a: %s\n", scalar);
    loaded l = load_ok(doc);
    json_t *a = scalar_of(&l);
    if (json_typeof(a) != want)
        fprintf(stderr, "'%s' has type %d, wanted %d\n", scalar, (int)json_typeof(a), (int)want);
    assert_int_equal(json_typeof(a), want);
    unload(&l);
}

static const char *sample_config =
    "listen: 127.0.0.1:8080\n"                                        /* 1 */
    "auth:\n"                                                         /* 2 */
    "  tokens:\n"                                                     /* 3 */
    "    - principal: agent\n"                                        /* 4 */
    "      roles: [agent]\n"                                          /* 5 */
    "      token_sha256: \"9f86d0\"\n"                                /* 6 */
    "policy:\n"                                                       /* 7 */
    "  allow:\n"                                                      /* 8 */
    "    - ops: [\"files.*\"]\n"                                      /* 9 */
    "      principals: [\"role:agent\"]\n"                            /* 10 */
    "      paths: {read: [\"/workspace/**\"], write: [\"/workspace/**\"]}\n" /* 11 */
    "      limits: {max_bytes: 10MiB, rate: 50/s}\n"                  /* 12 */
    "      enabled: true\n"                                           /* 13 */
    "      quota:\n"                                                  /* 14 */
    "      note: ~\n";                                                /* 15 */

/* ---- scalar typing ---- */

static void test_scalar_null(void **state)
{
    (void)state;
    is_type("~", JSON_NULL);
    is_type("null", JSON_NULL);
    is_type("Null", JSON_NULL);
    is_type("NULL", JSON_NULL);
    is_type("", JSON_NULL);
    is_string("nULL", "nULL");
    is_string("'null'", "null");
    is_string("\"~\"", "~");
}

static void test_scalar_bool(void **state)
{
    (void)state;
    is_type("true", JSON_TRUE);
    is_type("True", JSON_TRUE);
    is_type("TRUE", JSON_TRUE);
    is_type("false", JSON_FALSE);
    is_type("False", JSON_FALSE);
    is_type("FALSE", JSON_FALSE);
    /* YAML 1.1 booleans are plain strings in the 1.2 core schema */
    is_string("yes", "yes");
    is_string("no", "no");
    is_string("on", "on");
    is_string("off", "off");
    is_string("tRUE", "tRUE");
    is_string("\"true\"", "true");
}

static void test_scalar_int(void **state)
{
    (void)state;
    is_int("0", 0);
    is_int("-0", 0);
    is_int("42", 42);
    is_int("+42", 42);
    is_int("-17", -17);
    is_int("0x1F", 31);
    is_int("0xff", 255);
    is_int("0o755", 493);
    is_int("9223372036854775807", LLONG_MAX);
    is_int("-9223372036854775808", LLONG_MIN);
    is_int("0x7FFFFFFFFFFFFFFF", LLONG_MAX);
}

static void test_scalar_real(void **state)
{
    (void)state;
    is_real("2.5", 2.5);
    is_real("-2.5", -2.5);
    is_real("+0.5", 0.5);
    is_real(".5", 0.5);
    is_real("1.", 1.0);
    is_real("1e3", 1000.0);
    is_real("1.5E-3", 0.0015);
    is_real("-2.5e+2", -250.0);
    is_real("0.0", 0.0);
    is_real("1e-999", 0.0); /* underflow is a tiny number, not an error */
}

static void test_scalar_strings(void **state)
{
    (void)state;
    /* everything the config actually writes unquoted */
    is_string("10MiB", "10MiB");
    is_string("50/s", "50/s");
    is_string("127.0.0.1:8080", "127.0.0.1:8080");
    is_string("9f86d0", "9f86d0");
    is_string("/workspace/**", "/workspace/**");
    is_string("role:agent", "role:agent");
    is_string("files.*", "files.*");
    /* leading zeros stay text (a file mode must not silently become 755) */
    is_string("0755", "0755");
    is_string("00", "00");
    is_string("-0755", "-0755");
    is_string("00.5", "00.5");
    /* near-numbers */
    is_string("1_000", "1_000");
    is_string("0b101", "0b101");
    is_string("0x", "0x");
    is_string("0xG", "0xG");
    is_string("0o8", "0o8");
    is_string("0X1F", "0X1F");
    is_string("-0x1", "-0x1");
    is_string("1e", "1e");
    is_string("1.2.3", "1.2.3");
    is_string(".", ".");
    is_string("+", "+");
    is_string("inf", "inf");
    is_string("NaN", "NaN");
    is_string("99999999999999999999x", "99999999999999999999x");
    /* quoted scalars are always strings */
    is_string("'42'", "42");
    is_string("\"2.5\"", "2.5");
    is_string("\"9f86d0\"", "9f86d0");
    is_string("''", "");
    /* escapes and non-ASCII */
    is_string("\"a\\tb\\u00e9\"", "a\tb\xc3\xa9");
    is_string("h\xc3\xa9llo", "h\xc3\xa9llo");
    is_string("'it''s'", "it's");
    is_string("a b  c", "a b  c");
}

static void test_block_scalars(void **state)
{
    (void)state;
    loaded l = load_ok("a: |\n  line1\n  line2\nb: >\n  folded\n  text\nc: |-\n  42\n");
    assert_string_equal(json_string_value(json_object_get(l.v, "a")), "line1\nline2\n");
    assert_string_equal(json_string_value(json_object_get(l.v, "b")), "folded text\n");
    assert_true(json_is_string(json_object_get(l.v, "c")));
    assert_string_equal(json_string_value(json_object_get(l.v, "c")), "42");
    unload(&l);
}

static void test_tags_applied(void **state)
{
    (void)state;
    is_string("!!str 123", "123");
    is_string("!!str true", "true");
    is_string("!!str ~", "~");
    is_string("!!str 0755", "0755");
    is_int("!!int \"42\"", 42);
    is_int("!!int 0x10", 16);
    is_real("!!float 3", 3.0);
    is_real("!!float '2.5'", 2.5);
    is_type("!!bool \"True\"", JSON_TRUE);
    is_type("!!bool false", JSON_FALSE);
    is_type("!!null ''", JSON_NULL);
    is_type("!!null", JSON_NULL);
    is_type("!!map {}", JSON_OBJECT);
    is_type("!!seq []", JSON_ARRAY);
    is_type("!<tag:yaml.org,2002:int> 7", JSON_INTEGER);
    /* a %TAG handle that expands to the core prefix is the same tag */
    loaded l = load_ok("%TAG !e! tag:yaml.org,2002:\n---\na: !e!int 5\n");
    assert_int_equal(json_integer_value(json_object_get(l.v, "a")), 5);
    assert_int_equal(abx_linemap_key_line(l.m, l.v, "a"), 3);
    unload(&l);
}

/* ---- structure ---- */

static void test_sample_config(void **state)
{
    (void)state;
    loaded l = load_ok(sample_config);
    json_t *v = l.v;
    assert_string_equal(json_string_value(json_object_get(v, "listen")), "127.0.0.1:8080");
    json_t *tokens = json_object_get(json_object_get(v, "auth"), "tokens");
    assert_true(json_is_array(tokens));
    assert_int_equal(json_array_size(tokens), 1);
    json_t *tok = json_array_get(tokens, 0);
    assert_string_equal(json_string_value(json_object_get(tok, "principal")), "agent");
    assert_string_equal(json_string_value(json_array_get(json_object_get(tok, "roles"), 0)), "agent");
    assert_string_equal(json_string_value(json_object_get(tok, "token_sha256")), "9f86d0");

    json_t *rule = json_array_get(json_object_get(json_object_get(v, "policy"), "allow"), 0);
    assert_true(json_is_object(rule));
    assert_string_equal(json_string_value(json_array_get(json_object_get(rule, "ops"), 0)), "files.*");
    assert_string_equal(json_string_value(json_array_get(json_object_get(rule, "principals"), 0)),
                        "role:agent");
    json_t *paths = json_object_get(rule, "paths");
    assert_string_equal(json_string_value(json_array_get(json_object_get(paths, "read"), 0)),
                        "/workspace/**");
    assert_string_equal(json_string_value(json_array_get(json_object_get(paths, "write"), 0)),
                        "/workspace/**");
    json_t *limits = json_object_get(rule, "limits");
    assert_string_equal(json_string_value(json_object_get(limits, "max_bytes")), "10MiB");
    assert_string_equal(json_string_value(json_object_get(limits, "rate")), "50/s");
    assert_true(json_is_true(json_object_get(rule, "enabled")));
    assert_true(json_is_null(json_object_get(rule, "quota")));
    assert_true(json_is_null(json_object_get(rule, "note")));
    assert_int_equal(json_object_size(rule), 7);
    unload(&l);
}

static void test_nesting(void **state)
{
    (void)state;
    loaded l = load_ok("a:\n  b:\n    c:\n      - - d: [1, [2, {e: f}]]\n");
    json_t *inner = json_array_get(json_array_get(json_object_get(json_object_get(json_object_get(l.v, "a"), "b"), "c"), 0), 0);
    json_t *d = json_object_get(inner, "d");
    assert_int_equal(json_integer_value(json_array_get(d, 0)), 1);
    json_t *e = json_object_get(json_array_get(json_array_get(d, 1), 1), "e");
    assert_string_equal(json_string_value(e), "f");
    unload(&l);
}

static void test_flow_equals_block(void **state)
{
    (void)state;
    loaded block = load_ok("a:\n  - 1\n  - x: y\n    z: [true, ~]\nb: {}\nc: []\n");
    loaded flow = load_ok("{a: [1, {x: y, z: [true, ~]}], b: {}, c: []}");
    loaded json = load_ok("{\"a\": [1, {\"x\": \"y\", \"z\": [true, null]}], \"b\": {}, \"c\": []}");
    assert_true(json_equal(block.v, flow.v));
    assert_true(json_equal(block.v, json.v));
    assert_int_equal(json_object_size(block.v), 3);
    /* indentless sequences under a key are the same thing */
    loaded indentless = load_ok("a:\n- 1\n- x: y\n  z: [true, ~]\nb: {}\nc: []\n");
    assert_true(json_equal(block.v, indentless.v));
    unload(&block);
    unload(&flow);
    unload(&json);
    unload(&indentless);
}

static void test_json_input(void **state)
{
    (void)state;
    loaded l = load_ok("{\"a\": [1, 2.5, \"x\", null, true]}");
    json_t *a = json_object_get(l.v, "a");
    assert_int_equal(json_array_size(a), 5);
    assert_true(json_is_integer(json_array_get(a, 0)));
    assert_int_equal(json_integer_value(json_array_get(a, 0)), 1);
    assert_true(json_is_real(json_array_get(a, 1)));
    assert_true(json_real_value(json_array_get(a, 1)) == 2.5);
    assert_string_equal(json_string_value(json_array_get(a, 2)), "x");
    assert_true(json_is_null(json_array_get(a, 3)));
    assert_true(json_is_true(json_array_get(a, 4)));
    json_t *again = json_loads("{\"a\": [1, 2.5, \"x\", null, true]}", 0, NULL);
    assert_non_null(again);
    assert_true(json_equal(l.v, again));
    json_decref(again);
    unload(&l);

    /* multi-line JSON, compact JSON, escapes, tabs, exponents, negative numbers */
    const char *text =
        "{\n"
        "\t\"s\":\"q\\\"\\\\\\/\\n\\u00e9\",\n"
        "\t\"n\":-1.5e2,\"i\":-3,\"z\":0,\n"
        "\t\"o\":{\"e\":[],\"f\":false}\n"
        "}\n";
    l = load_ok(text);
    json_t *want = json_loads(text, 0, NULL);
    assert_non_null(want);
    assert_true(json_equal(l.v, want));
    assert_string_equal(json_string_value(json_object_get(l.v, "s")), "q\"\\/\n\xc3\xa9");
    assert_int_equal(abx_linemap_key_line(l.m, l.v, "n"), 3);
    assert_int_equal(abx_linemap_key_line(l.m, l.v, "o"), 4);
    json_decref(want);
    unload(&l);
}

static void test_root_not_mapping(void **state)
{
    (void)state;
    loaded l = load_ok("- 1\n- 2\n");
    assert_true(json_is_array(l.v));
    assert_int_equal(json_array_size(l.v), 2);
    unload(&l);
    l = load_ok("42");
    assert_true(json_is_integer(l.v));
    assert_int_equal(abx_linemap_line(l.m, l.v), 1);
    unload(&l);
    l = load_ok("\n\n\"text\"\n");
    assert_string_equal(json_string_value(l.v), "text");
    assert_int_equal(abx_linemap_line(l.m, l.v), 3);
    unload(&l);
    l = load_ok("~");
    assert_true(json_is_null(l.v));
    unload(&l);
}

static void test_document_markers(void **state)
{
    (void)state;
    loaded l = load_ok("%YAML 1.2\n---\na: 1\n...\n");
    assert_int_equal(json_integer_value(json_object_get(l.v, "a")), 1);
    assert_int_equal(abx_linemap_key_line(l.m, l.v, "a"), 3);
    unload(&l);
    l = load_ok("\xef\xbb\xbf" "a: 1\n"); /* UTF-8 BOM */
    assert_int_equal(json_integer_value(json_object_get(l.v, "a")), 1);
    unload(&l);
}

/* ---- lines ---- */

static void test_lines_sample(void **state)
{
    (void)state;
    loaded l = load_ok(sample_config);
    const abx_linemap *m = l.m;
    json_t *v = l.v;
    assert_int_equal(abx_linemap_line(m, v), 1);
    assert_int_equal(abx_linemap_key_line(m, v, "listen"), 1);
    assert_int_equal(abx_linemap_line(m, json_object_get(v, "listen")), 1);
    assert_int_equal(abx_linemap_key_line(m, v, "auth"), 2);
    json_t *auth = json_object_get(v, "auth");
    assert_int_equal(abx_linemap_line(m, auth), 3); /* the mapping starts at its first key */
    assert_int_equal(abx_linemap_key_line(m, auth, "tokens"), 3);
    json_t *tokens = json_object_get(auth, "tokens");
    assert_int_equal(abx_linemap_line(m, tokens), 4);
    json_t *tok = json_array_get(tokens, 0);
    assert_int_equal(abx_linemap_line(m, tok), 4);
    assert_int_equal(abx_linemap_key_line(m, tok, "principal"), 4);
    assert_int_equal(abx_linemap_key_line(m, tok, "roles"), 5);
    assert_int_equal(abx_linemap_line(m, json_object_get(tok, "roles")), 5);
    assert_int_equal(abx_linemap_line(m, json_array_get(json_object_get(tok, "roles"), 0)), 5);
    assert_int_equal(abx_linemap_key_line(m, tok, "token_sha256"), 6);
    assert_int_equal(abx_linemap_line(m, json_object_get(tok, "token_sha256")), 6);

    json_t *policy = json_object_get(v, "policy");
    assert_int_equal(abx_linemap_key_line(m, v, "policy"), 7);
    assert_int_equal(abx_linemap_key_line(m, policy, "allow"), 8);
    json_t *rule = json_array_get(json_object_get(policy, "allow"), 0);
    assert_int_equal(abx_linemap_line(m, rule), 9);
    assert_int_equal(abx_linemap_key_line(m, rule, "ops"), 9);
    assert_int_equal(abx_linemap_key_line(m, rule, "principals"), 10);
    json_t *paths = json_object_get(rule, "paths");
    assert_int_equal(abx_linemap_key_line(m, rule, "paths"), 11);
    assert_int_equal(abx_linemap_line(m, paths), 11);
    assert_int_equal(abx_linemap_key_line(m, paths, "write"), 11);
    assert_int_equal(abx_linemap_line(m, json_array_get(json_object_get(paths, "write"), 0)), 11);
    json_t *limits = json_object_get(rule, "limits");
    assert_int_equal(abx_linemap_key_line(m, rule, "limits"), 12);
    assert_int_equal(abx_linemap_key_line(m, limits, "rate"), 12);
    assert_int_equal(abx_linemap_line(m, json_object_get(limits, "rate")), 12);
    /* booleans and nulls are singletons: their key line is the reliable answer */
    assert_int_equal(abx_linemap_key_line(m, rule, "enabled"), 13);
    assert_int_equal(abx_linemap_key_line(m, rule, "quota"), 14);
    assert_int_equal(abx_linemap_key_line(m, rule, "note"), 15);
    /* ...and a pointer lookup gives the most recent occurrence */
    assert_int_equal(abx_linemap_line(m, json_null()), 15);
    assert_int_equal(abx_linemap_line(m, json_true()), 13);
    /* unknown keys, unknown nodes, foreign objects */
    assert_int_equal(abx_linemap_key_line(m, rule, "nope"), 0);
    assert_int_equal(abx_linemap_key_line(m, paths, "ops"), 0);
    assert_int_equal(abx_linemap_line(m, json_false()), 0);
    json_t *foreign = json_string("x");
    assert_int_equal(abx_linemap_line(m, foreign), 0);
    assert_int_equal(abx_linemap_key_line(m, foreign, "listen"), 0);
    json_decref(foreign);
    unload(&l);
}

static void test_lines_value_on_next_line(void **state)
{
    (void)state;
    loaded l = load_ok("# header\n\nk:\n\n  - a\n  -\n    b: |\n      text\n    c:\n      d\n");
    json_t *k = json_object_get(l.v, "k");
    assert_int_equal(abx_linemap_key_line(l.m, l.v, "k"), 3);
    assert_int_equal(abx_linemap_line(l.m, k), 5);
    assert_int_equal(abx_linemap_line(l.m, json_array_get(k, 0)), 5);
    json_t *second = json_array_get(k, 1);
    assert_int_equal(abx_linemap_line(l.m, second), 7);
    assert_int_equal(abx_linemap_key_line(l.m, second, "b"), 7);
    assert_int_equal(abx_linemap_line(l.m, json_object_get(second, "b")), 7);
    assert_int_equal(abx_linemap_key_line(l.m, second, "c"), 9);
    assert_int_equal(abx_linemap_line(l.m, json_object_get(second, "c")), 10);
    unload(&l);
}

static void test_lines_flow_multiline(void **state)
{
    (void)state;
    loaded l = load_ok("{\n  \"a\": [\n    1,\n    \"two\"\n  ],\n  \"b\": {\"c\":\n    3}\n}\n");
    json_t *a = json_object_get(l.v, "a");
    assert_int_equal(abx_linemap_line(l.m, l.v), 1);
    assert_int_equal(abx_linemap_key_line(l.m, l.v, "a"), 2);
    assert_int_equal(abx_linemap_line(l.m, a), 2);
    assert_int_equal(abx_linemap_line(l.m, json_array_get(a, 0)), 3);
    assert_int_equal(abx_linemap_line(l.m, json_array_get(a, 1)), 4);
    json_t *b = json_object_get(l.v, "b");
    assert_int_equal(abx_linemap_key_line(l.m, b, "c"), 6);
    assert_int_equal(abx_linemap_line(l.m, json_object_get(b, "c")), 7);
    unload(&l);
}

static void test_linemap_null_safety(void **state)
{
    (void)state;
    assert_int_equal(abx_linemap_line(NULL, json_null()), 0);
    assert_int_equal(abx_linemap_key_line(NULL, json_null(), "a"), 0);
    abx_linemap_free(NULL);
    loaded l = load_ok("a: 1\n");
    assert_int_equal(abx_linemap_line(l.m, NULL), 0);
    assert_int_equal(abx_linemap_key_line(l.m, NULL, "a"), 0);
    assert_int_equal(abx_linemap_key_line(l.m, l.v, NULL), 0);
    assert_int_equal(abx_linemap_key_line(l.m, l.v, "a"), 1);
    unload(&l);
}

static void test_optional_outputs(void **state)
{
    (void)state;
    json_t *v = abx_yaml_load("a: [1, 2]\n", 10, NULL, NULL, 0, NULL);
    assert_non_null(v);
    assert_int_equal(json_array_size(json_object_get(v, "a")), 2);
    json_decref(v);
    v = abx_yaml_load("a: [1, 2\n", 9, NULL, NULL, 0, NULL);
    assert_null(v);
    /* a tiny error buffer is truncated, never overrun */
    char small[8];
    memset(small, 'Z', sizeof small);
    int line = 0;
    v = abx_yaml_load("a: 1\na: 2\n", 10, NULL, small, 5, &line);
    assert_null(v);
    assert_int_equal(line, 2);
    assert_int_equal(strlen(small), 4);
    assert_memory_equal(small, "dupl", 4);
    assert_int_equal(small[5], 'Z');
}

static void test_length_not_nul(void **state)
{
    (void)state;
    /* only `len` bytes are read: the text need not be NUL-terminated */
    const char text[] = "a: 1\nb: 2\nc: 3";
    loaded l = {NULL, NULL};
    l.v = abx_yaml_load(text, 9, &l.m, NULL, 0, NULL);
    assert_non_null(l.v);
    assert_int_equal(json_object_size(l.v), 2);
    assert_null(json_object_get(l.v, "c"));
    assert_int_equal(json_integer_value(json_object_get(l.v, "b")), 2);
    unload(&l);
}

/* ---- empty inputs ---- */

static void test_empty_inputs(void **state)
{
    (void)state;
    const char *empties[] = {"", "\n\n", "# only a comment\n", "# one\n\n   # two\n# three",
                             "---\n", "--- # nothing\n", "---\n...\n", "   \n \n"};
    for (size_t i = 0; i < sizeof empties / sizeof empties[0]; i++) {
        loaded l = load_ok(empties[i]);
        assert_true(json_is_object(l.v));
        assert_int_equal(json_object_size(l.v), 0);
        assert_true(abx_linemap_line(l.m, l.v) > 0);
        unload(&l);
    }
    loaded l = {NULL, NULL};
    l.v = abx_yaml_load(NULL, 0, &l.m, NULL, 0, NULL);
    assert_true(json_is_object(l.v));
    assert_int_equal(json_object_size(l.v), 0);
    assert_int_equal(abx_linemap_line(l.m, l.v), 1);
    unload(&l);
    is_err_len(NULL, 3, 0, "no input");
}

/* ---- refusals ---- */

static void test_err_duplicate_key(void **state)
{
    (void)state;
    is_err("a: 1\nb: 2\na: 3\n", 3, "duplicate key 'a'");
    is_err("x:\n  y: 1\n  z: 2\n\n  y: 3\n", 5, "duplicate key 'y'");
    is_err("{\"k\": 1,\n \"k\": 2}", 2, "duplicate key 'k'");
    is_err("a: 1\n'a': 2\n", 2, "duplicate key 'a'");
    /* different nesting levels are not duplicates */
    loaded l = load_ok("a: {a: {a: 1}}\n");
    assert_int_equal(json_integer_value(json_object_get(json_object_get(json_object_get(l.v, "a"), "a"), "a")), 1);
    unload(&l);
}

static void test_err_anchors_aliases(void **state)
{
    (void)state;
    is_err("a: &x 1\nb: *x\n", 1, "YAML anchors and aliases are not supported");
    is_err("a: 1\nb: &x [1]\n", 2, "YAML anchors and aliases are not supported");
    is_err("a: 1\n\nb: *x\n", 3, "YAML anchors and aliases are not supported");
    is_err("a: 1\nb:\n  &m c: 1\n", 3, "YAML anchors and aliases are not supported");
    is_err("a: 1\n*k : 2\n", 2, "YAML anchors and aliases are not supported");
    is_err("&r\na: 1\n", 1, "YAML anchors and aliases are not supported");
    /* billion laughs */
    is_err("a: &a [\"lol\",\"lol\"]\nb: &b [*a,*a]\nc: [*b,*b]\n", 1, "anchors and aliases");
}

static void test_err_tags(void **state)
{
    (void)state;
    is_err("a: 1\nb: !foo x\n", 2, "unsupported tag '!foo'");
    is_err("a: !!binary aGk=\n", 1, "unsupported tag '!!binary'");
    is_err("a: !!set {x}\n", 1, "unsupported tag '!!set'");
    is_err("a: ! x\n", 1, "unsupported tag");
    is_err("\n!custom {a: 1}\n", 2, "unsupported tag '!custom'");
    is_err("a: !!map x\n", 1, "does not fit a scalar");
    is_err("a: !!seq {b: 1}\n", 1, "does not fit a mapping");
    is_err("a: !!str [1]\n", 1, "does not fit a sequence");
    is_err("a: 1\nb: !!int abc\n", 2, "'abc' is not a valid !!int");
    is_err("a: !!int 0755\n", 1, "not a valid !!int");
    is_err("a: !!bool yes\n", 1, "'yes' is not a valid !!bool");
    is_err("a: !!null 0\n", 1, "not a valid !!null");
    is_err("a: !!float x1\n", 1, "not a valid !!float");
    is_err("a: !!int 99999999999999999999\n", 1, "does not fit in 64 bits");
}

static void test_err_multiple_documents(void **state)
{
    (void)state;
    is_err("a: 1\n---\nb: 2\n", 2, "multiple YAML documents are not supported");
    is_err("---\na: 1\n...\n---\n", 4, "multiple YAML documents");
    is_err("a: 1\n...\n\n--- x\n", 4, "multiple YAML documents");
}

static void test_err_non_scalar_keys(void **state)
{
    (void)state;
    is_err("a: 1\n{b: 1}: 2\n", 2, "mapping keys must be scalars, not mappings");
    is_err("[x, y]: 1\n", 1, "mapping keys must be scalars, not sequences");
    is_err("a: 1\n? [x]\n: 1\n", 2, "mapping keys must be scalars");
    is_err("{{a: 1}: 2}", 1, "mapping keys must be scalars, not mappings");
    is_err("a: 1\n!!int 5: x\n", 2, "mapping keys must be strings, not '!!int'");
    is_err("a: 1\n!bad 5: x\n", 2, "unsupported tag '!bad'");
    is_err("a: 1\n? \n: x\n", 2, "empty (null) mapping key");
    /* scalar keys are used by their text, whatever they look like */
    loaded l = load_ok("1: one\ntrue: t\n~: n\n!!str 5: five\n\"q\": quoted\n");
    assert_string_equal(json_string_value(json_object_get(l.v, "1")), "one");
    assert_string_equal(json_string_value(json_object_get(l.v, "true")), "t");
    assert_string_equal(json_string_value(json_object_get(l.v, "~")), "n");
    assert_string_equal(json_string_value(json_object_get(l.v, "5")), "five");
    assert_int_equal(abx_linemap_key_line(l.m, l.v, "q"), 5);
    unload(&l);
}

static char *nested(int depth, int block)
{
    size_t cap = block ? (size_t)depth * ((size_t)depth + 8) + 16 : (size_t)depth * 2 + 16;
    char *s = malloc(cap);
    assert_non_null(s);
    size_t n = 0;
    if (block) {
        /* a: / b: / ... one mapping per line, indented one space deeper each time */
        for (int i = 0; i < depth; i++) {
            for (int j = 0; j < i; j++)
                s[n++] = ' ';
            const char *line = i == depth - 1 ? "k: v\n" : "k:\n";
            memcpy(s + n, line, strlen(line));
            n += strlen(line);
        }
    } else {
        for (int i = 0; i < depth; i++)
            s[n++] = '[';
        for (int i = 0; i < depth; i++)
            s[n++] = ']';
    }
    s[n] = '\0';
    assert_true(n < cap);
    return s;
}

static void test_err_depth(void **state)
{
    (void)state;
    char *ok = nested(64, 0);
    loaded l = load_ok(ok);
    json_t *v = l.v;
    for (int i = 1; i < 64; i++) {
        assert_true(json_is_array(v));
        v = json_array_get(v, 0);
    }
    assert_true(json_is_array(v));
    assert_int_equal(json_array_size(v), 0);
    unload(&l);
    free(ok);

    char *deep = nested(65, 0);
    is_err(deep, 1, "nesting deeper than 64 levels");
    free(deep);

    ok = nested(64, 1);
    l = load_ok(ok);
    assert_true(json_is_object(l.v));
    unload(&l);
    free(ok);

    deep = nested(65, 1);
    is_err(deep, 65, "nesting deeper than 64 levels");
    free(deep);

    /* very deep input is refused without exhausting anything */
    deep = nested(100000, 0);
    is_err(deep, 1, "nesting deeper than 64 levels");
    free(deep);
}

static void test_err_size(void **state)
{
    (void)state;
    size_t max = (size_t)4 * 1024 * 1024;
    char *big = malloc(max + 2);
    assert_non_null(big);
    memcpy(big, "a: ", 3);
    memset(big + 3, 'x', max - 3);
    big[max] = '\0';
    loaded l = {NULL, NULL};
    l.v = abx_yaml_load(big, max, &l.m, NULL, 0, NULL);
    assert_non_null(l.v);
    assert_int_equal(json_string_length(json_object_get(l.v, "a")), max - 3);
    unload(&l);
    big[max] = 'x';
    big[max + 1] = '\0';
    is_err_len(big, max + 1, 0, "larger than 4 MiB");
    free(big);
}

static void test_err_integer_overflow(void **state)
{
    (void)state;
    is_err("a: 1\nb: 9223372036854775808\n", 2, "integer '9223372036854775808' does not fit in 64 bits");
    is_err("a:\n  - 1\n  - -9223372036854775809\n", 3, "does not fit in 64 bits");
    is_err("a: 0x8000000000000000\n", 1, "does not fit in 64 bits");
    is_err("a: 0o1000000000000000000000\n", 1, "does not fit in 64 bits");
    is_err("{\"n\":\n 123456789012345678901234567890}", 2, "does not fit in 64 bits");
    is_err("a: 1e999\n", 1, "out of range");
    is_err("a: [1,\n -.inf]\n", 2, "cannot be represented in JSON");
    is_err("a: .nan\n", 1, "cannot be represented in JSON");
}

static void test_err_syntax(void **state)
{
    (void)state;
    /* libyaml's problem text and line come through */
    is_err("a: 1\nb: [1, 2\nc: 3\n", 3, "did not find expected ',' or ']'");
    is_err("a: 1\n  b: 2\n", 2, "mapping values are not allowed in this context");
    is_err("a: 1\nb: \"open\n", 3, "found unexpected end of stream");
    is_err("a: 1\n\tb: 2\n", 2, "found a tab character that violates indentation");
    is_err("a: 1\nb: @x\n", 2, "found character that cannot start any token");
    is_err("a: \"\\q\"\n", 1, "found unknown escape character");
    is_err("a: 1\n- b\n", 2, "did not find expected key");
    /* the context (what libyaml was parsing and where) is included */
    is_err("a: [1, 2\n", 2, "while parsing a flow sequence at line 1");
}

static void test_err_encoding_and_nul(void **state)
{
    (void)state;
    is_err("a: 1\nb: \xff\n", 2, "invalid leading UTF-8 octet");
    is_err("a: 1\n\nb: \xc3\x28\n", 3, "invalid trailing UTF-8 octet");
    is_err("a: 1\nb: \"x\\0y\"\n", 2, "NUL characters in scalars are not supported");
    is_err("a: 1\n\"k\\0\": 2\n", 2, "NUL characters in keys are not supported");
    is_err_len("a: 1\nb: x\0y\n", 11, 2, "control characters are not allowed");
    is_err("a: \"\\ud800\"\n", 1, "invalid Unicode character escape code");
}

static void test_err_message_sanitized(void **state)
{
    (void)state;
    char err[256];
    int line = 0;
    /* a key with control characters and a long length is shown short and printable
     * (1000: libyaml caps implicit keys at 1024 characters) */
    size_t n = 1000;
    char *text = malloc(2 * n + 64);
    assert_non_null(text);
    size_t k = 0;
    for (int rep = 0; rep < 2; rep++) {
        text[k++] = '"';
        text[k++] = '\\';
        text[k++] = 't';
        memset(text + k, 'k', n);
        k += n;
        k += (size_t)sprintf(text + k, "\": %d\n", rep);
    }
    json_t *v = abx_yaml_load(text, k, NULL, err, sizeof err, &line);
    assert_null(v);
    assert_int_equal(line, 2);
    assert_non_null(strstr(err, "duplicate key '?kkk"));
    assert_non_null(strstr(err, "...'"));
    assert_true(strlen(err) < 100);
    for (const char *p = err; *p; p++)
        assert_true((unsigned char)*p >= 0x20);
    free(text);

    /* a long non-ASCII key is cut on a character boundary: the message stays UTF-8 */
    char doc[512];
    size_t d = 0;
    for (int rep = 0; rep < 2; rep++) {
        doc[d++] = 'a';
        for (int i = 0; i < 60; i++) {
            doc[d++] = '\xc3';
            doc[d++] = '\xa9';
        }
        d += (size_t)sprintf(doc + d, ": %d\n", rep);
    }
    doc[d] = '\0';
    v = abx_yaml_load(doc, d, NULL, err, sizeof err, &line);
    assert_null(v);
    assert_int_equal(line, 2);
    assert_non_null(strstr(err, "duplicate key 'a\xc3\xa9"));
    json_t *as_json = json_string(err); /* NULL when err is not valid UTF-8 */
    assert_non_null(as_json);
    json_decref(as_json);
}

/* ---- sizes ---- */

static void test_thousand_element_list(void **state)
{
    (void)state;
    size_t cap = 1000 * 16 + 16;
    char *text = malloc(cap);
    assert_non_null(text);
    size_t n = 0;
    for (int i = 0; i < 1000; i++)
        n += (size_t)snprintf(text + n, cap - n, "- item%d\n", i);
    loaded l = load_ok(text);
    assert_true(json_is_array(l.v));
    assert_int_equal(json_array_size(l.v), 1000);
    assert_string_equal(json_string_value(json_array_get(l.v, 0)), "item0");
    assert_string_equal(json_string_value(json_array_get(l.v, 999)), "item999");
    for (size_t i = 0; i < 1000; i += 111)
        assert_int_equal(abx_linemap_line(l.m, json_array_get(l.v, i)), (int)i + 1);
    assert_int_equal(abx_linemap_line(l.m, json_array_get(l.v, 999)), 1000);
    unload(&l);

    /* the same as a flow list of integers, and as a mapping of 1000 keys */
    n = 0;
    text[n++] = '[';
    for (int i = 0; i < 1000; i++)
        n += (size_t)snprintf(text + n, cap - n, "%s%d", i ? "," : "", i * 3);
    text[n++] = ']';
    text[n] = '\0';
    l = load_ok(text);
    assert_int_equal(json_array_size(l.v), 1000);
    assert_int_equal(json_integer_value(json_array_get(l.v, 999)), 2997);
    unload(&l);

    n = 0;
    for (int i = 0; i < 1000; i++)
        n += (size_t)snprintf(text + n, cap - n, "k%d: %d\n", i, i);
    l = load_ok(text);
    assert_int_equal(json_object_size(l.v), 1000);
    assert_int_equal(json_integer_value(json_object_get(l.v, "k777")), 777);
    assert_int_equal(abx_linemap_key_line(l.m, l.v, "k777"), 778);
    assert_int_equal(abx_linemap_key_line(l.m, l.v, "k0"), 1);
    unload(&l);
    free(text);
}

static void test_reload_independent(void **state)
{
    (void)state;
    /* two live parses keep independent maps */
    loaded a = load_ok("x: 1\n");
    loaded b = load_ok("\n\nx: 1\n");
    assert_int_equal(abx_linemap_key_line(a.m, a.v, "x"), 1);
    assert_int_equal(abx_linemap_key_line(b.m, b.v, "x"), 3);
    assert_int_equal(abx_linemap_key_line(a.m, b.v, "x"), 0);
    assert_int_equal(abx_linemap_line(b.m, json_object_get(a.v, "x")), 0);
    unload(&a);
    unload(&b);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_scalar_null),
        cmocka_unit_test(test_scalar_bool),
        cmocka_unit_test(test_scalar_int),
        cmocka_unit_test(test_scalar_real),
        cmocka_unit_test(test_scalar_strings),
        cmocka_unit_test(test_block_scalars),
        cmocka_unit_test(test_tags_applied),
        cmocka_unit_test(test_sample_config),
        cmocka_unit_test(test_nesting),
        cmocka_unit_test(test_flow_equals_block),
        cmocka_unit_test(test_json_input),
        cmocka_unit_test(test_root_not_mapping),
        cmocka_unit_test(test_document_markers),
        cmocka_unit_test(test_lines_sample),
        cmocka_unit_test(test_lines_value_on_next_line),
        cmocka_unit_test(test_lines_flow_multiline),
        cmocka_unit_test(test_linemap_null_safety),
        cmocka_unit_test(test_optional_outputs),
        cmocka_unit_test(test_length_not_nul),
        cmocka_unit_test(test_empty_inputs),
        cmocka_unit_test(test_err_duplicate_key),
        cmocka_unit_test(test_err_anchors_aliases),
        cmocka_unit_test(test_err_tags),
        cmocka_unit_test(test_err_multiple_documents),
        cmocka_unit_test(test_err_non_scalar_keys),
        cmocka_unit_test(test_err_depth),
        cmocka_unit_test(test_err_size),
        cmocka_unit_test(test_err_integer_overflow),
        cmocka_unit_test(test_err_syntax),
        cmocka_unit_test(test_err_encoding_and_nul),
        cmocka_unit_test(test_err_message_sanitized),
        cmocka_unit_test(test_thousand_element_list),
        cmocka_unit_test(test_reload_independent),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
