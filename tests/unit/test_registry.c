/* test_registry.c — unit tests of src/core/registry.c: every registration rule (each
 * refusal names the offending id), freeze, copy-on-write children, lints, the frozen
 * index and alias resolution, and the default registry of built-ins.
 * Op tables live in this file; their handlers only return ABX_OK. */
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

#define OP(ID, ...) {.id = (ID), .effects = ABX_EFF_READ, .handler = ok_handler, __VA_ARGS__}
#define OPX(ID, EFF, ...) {.id = (ID), .effects = (EFF), .handler = ok_handler, __VA_ARGS__}

/* ---- helpers -------------------------------------------------------------------------- */

/* Register into a fresh root registry; expect failure with a message containing each of
 * the given fragments (NULL-terminated list). */
static void expect_refused_in(abx_registry *reg, const abx_op_def *ops, bool builtin, ...)
{
    char err[512] = "";
    int rc = builtin ? abx__registry_add(reg, ops, true, err, sizeof err) : abx_registry_add(reg, ops, err, sizeof err);
    if (rc == 0)
        fail_msg("registration of '%s' should have been refused", ops[0].id);
    assert_int_equal(rc, -1);
    va_list ap;
    va_start(ap, builtin);
    for (const char *frag = va_arg(ap, const char *); frag; frag = va_arg(ap, const char *))
        if (!strstr(err, frag))
            fail_msg("message does not contain '%s': %s", frag, err);
    va_end(ap);
}

static void expect_added(abx_registry *reg, const abx_op_def *ops, bool builtin)
{
    char err[512] = "";
    int rc = builtin ? abx__registry_add(reg, ops, true, err, sizeof err) : abx_registry_add(reg, ops, err, sizeof err);
    if (rc != 0)
        fail_msg("registration of '%s' failed: %s", ops[0].id, err);
}

static size_t count_lints(const abx_registry *reg, const char *code, const char *id)
{
    const abx_lint *l;
    size_t n = abx_registry_lints(reg, &l), hits = 0;
    for (size_t i = 0; i < n; i++)
        if (strcmp(l[i].code, code) == 0 && (!id || strcmp(l[i].id, id) == 0))
            hits++;
    return hits;
}

/* ---- ids, duplicates, prefixes ------------------------------------------------------ */

static void test_bad_id_refused(void **state)
{
    (void)state;
    static const abx_op_def upper[] = {OP("Custom.thing.get"), {0}};
    static const abx_op_def one_seg[] = {OP("custom"), {0}};
    static const abx_op_def hyphen[] = {OP("custom.my-thing.get"), {0}};
    abx_registry *reg = abx_registry_new(NULL);
    expect_refused_in(reg, upper, false, "Custom.thing.get", NULL);
    expect_refused_in(reg, one_seg, false, "custom", "segment", NULL);
    expect_refused_in(reg, hyphen, false, "custom.my-thing.get", NULL);
    abx_registry_freeze(reg);
    assert_int_equal(abx_registry_count(reg), 0);
    abx_registry_free(reg);
}

static void test_duplicate_id_refused(void **state)
{
    (void)state;
    static const abx_op_def a[] = {OP("custom.dup.get"), {0}};
    static const abx_op_def twice_in_batch[] = {OP("custom.twice.get"), OP("custom.twice.get"), {0}};
    abx_registry *reg = abx_registry_new(NULL);
    expect_added(reg, a, false);
    expect_refused_in(reg, a, false, "custom.dup.get", "already registered", NULL);
    expect_refused_in(reg, twice_in_batch, false, "custom.twice.get", "already registered", NULL);
    abx_registry_freeze(reg);
    assert_int_equal(abx_registry_count(reg), 1); /* the failed batch left nothing behind */
    assert_non_null(abx_registry_get(reg, "custom.dup.get"));
    assert_null(abx_registry_get(reg, "custom.twice.get"));
    abx_registry_free(reg);
}

static void test_prefix_ids_refused_both_orders(void **state)
{
    (void)state;
    static const abx_op_def shorter[] = {OP("system.env"), {0}};
    static const abx_op_def longer[] = {OP("system.env.get"), {0}};
    /* shorter first */
    abx_registry *reg = abx_registry_new(NULL);
    expect_added(reg, shorter, true);
    expect_refused_in(reg, longer, true, "system.env.get", "system.env", "prefix", NULL);
    abx_registry_free(reg);
    /* longer first */
    reg = abx_registry_new(NULL);
    expect_added(reg, longer, true);
    expect_refused_in(reg, shorter, true, "system.env", "system.env.get", "prefix", NULL);
    abx_registry_free(reg);
    /* within one batch, and through the public entry point */
    static const abx_op_def batch[] = {OP("custom.env.get"), OP("custom.env"), {0}};
    reg = abx_registry_new(NULL);
    expect_refused_in(reg, batch, false, "custom.env", "prefix", NULL);
    /* segment-wise: custom.en and custom.env.get are not prefixes of each other */
    static const abx_op_def not_prefix[] = {OP("custom.en"), OP("custom.env.get"), {0}};
    expect_added(reg, not_prefix, false);
    abx_registry_free(reg);
}

static void test_failed_batch_is_atomic(void **state)
{
    (void)state;
    static const abx_op_def batch[] = {OP("custom.first.get"), OP("custom.Bad.get"), {0}};
    static const abx_op_def first[] = {OP("custom.first.get"), {0}};
    abx_registry *reg = abx_registry_new(NULL);
    expect_refused_in(reg, batch, false, "custom.Bad.get", NULL);
    expect_added(reg, first, false); /* not a duplicate: the failed batch added nothing */
    abx_registry_free(reg);
}

/* ---- aliases -------------------------------------------------------------------------- */

static void test_alias_taken_refused(void **state)
{
    (void)state;
    static const abx_op_def one[] = {OP("custom.one.get", .aliases = {"legacy_one"}), {0}};
    static const abx_op_def same_alias[] = {OP("custom.two.get", .aliases = {"legacy_one"}), {0}};
    static const abx_op_def alias_is_id[] = {OP("custom.three.get", .aliases = {"custom.one.get"}), {0}};
    static const abx_op_def id_is_alias[] = {OP("custom.four.get", .aliases = {"custom.later.get"}), {0}};
    static const abx_op_def later[] = {OP("custom.later.get"), {0}};
    abx_registry *reg = abx_registry_new(NULL);
    expect_added(reg, one, false);
    expect_refused_in(reg, same_alias, false, "custom.two.get", "legacy_one", "taken", NULL);
    expect_refused_in(reg, alias_is_id, false, "custom.three.get", "custom.one.get", "taken", NULL);
    expect_added(reg, id_is_alias, false);
    /* an id that is already someone's alias */
    expect_refused_in(reg, later, false, "custom.later.get", "already registered", NULL);
    abx_registry_free(reg);
}

static void test_resolve_alias(void **state)
{
    (void)state;
    static const abx_op_def ops[] = {
        OP("custom.thing.get", .aliases = {"get_thing", "thing"}),
        OP("custom.other.list", .aliases = {"others"}),
        {0},
    };
    abx_registry *reg = abx_registry_new(NULL);
    expect_added(reg, ops, false);
    abx_registry_freeze(reg);
    const abx_op *canon = abx_registry_get(reg, "custom.thing.get");
    assert_non_null(canon);
    assert_ptr_equal(abx_registry_resolve(reg, "get_thing"), canon);
    assert_ptr_equal(abx_registry_resolve(reg, "thing"), canon);
    assert_ptr_equal(abx_registry_resolve(reg, "custom.thing.get"), canon);
    assert_string_equal(abx_registry_resolve(reg, "others")->id, "custom.other.list");
    assert_null(abx_registry_get(reg, "get_thing")); /* get takes ids only */
    assert_null(abx_registry_resolve(reg, "nothing"));
    assert_null(abx_registry_resolve(reg, "custom.thing"));
    abx_registry_free(reg);
}

static void test_resolve_tool_name(void **state)
{
    (void)state;
    static const abx_op_def ops[] = {
        OP("custom.thing.get", .aliases = {"get_thing"}),
        OP("custom.b_.c"),   /* tool name custom__b___c */
        OP("custom.x__y"),   /* tool name custom__x__y: one segment with "__" inside */
        {0},
    };
    abx_registry *reg = abx_registry_new(NULL);
    expect_added(reg, ops, false);
    abx_registry_freeze(reg);
    const abx_op *canon = abx_registry_get(reg, "custom.thing.get");
    assert_ptr_equal(abx_registry_resolve_tool(reg, "custom__thing__get"), canon);
    assert_ptr_equal(abx_registry_resolve_tool(reg, "custom.thing.get"), canon); /* the dotted id too */
    assert_ptr_equal(abx_registry_resolve_tool(reg, "get_thing"), canon);        /* aliases by tool name */
    assert_string_equal(abx_registry_resolve_tool(reg, "custom__b___c")->id, "custom.b_.c");
    assert_string_equal(abx_registry_resolve_tool(reg, "custom__x__y")->id, "custom.x__y");
    assert_null(abx_registry_resolve_tool(reg, "custom__thing"));
    assert_null(abx_registry_resolve_tool(reg, "custom_thing_get"));
    assert_null(abx_registry_resolve_tool(reg, ""));
    assert_null(abx_registry_resolve_tool(reg, NULL));
    char out[64];
    assert_true(abx_id_tool_name("files.list", out, sizeof out));
    assert_string_equal(out, "files__list");
    assert_false(abx_id_tool_name("files.list", out, 11)); /* needs 12 bytes */
    assert_true(abx_id_tool_name("files.list", out, 12));
    abx_registry_free(reg);
}

/* ---- reserved namespaces --------------------------------------------------------------- */

static void test_reserved_namespace(void **state)
{
    (void)state;
    static const abx_op_def files_x[] = {OP("files.x"), {0}};
    static const abx_op_def core_x[] = {OP("core.thing.get"), {0}};
    abx_registry *reg = abx_registry_new(NULL);
    expect_refused_in(reg, files_x, false, "files.x", "reserved", NULL);
    expect_refused_in(reg, core_x, false, "core.thing.get", "reserved", NULL);
    expect_added(reg, files_x, true); /* the built-in path may use it */
    abx_registry_freeze(reg);
    assert_non_null(abx_registry_get(reg, "files.x"));
    abx_registry_free(reg);
}

/* ---- bindings ------------------------------------------------------------------------------ */

static const abx_param x_params[] = {{.name = "x", .type = ABX_T_STRING}, {0}};
static const abx_param y_params[] = {{.name = "y", .type = ABX_T_STRING}, {0}};
static const abx_param list_param[] = {{"items", ABX_T_LIST, .item = ABX_T_STRING}, {0}};

static void test_equally_specific_bindings_refused(void **state)
{
    (void)state;
    static const abx_op_def ax[] = {OP("custom.ax.get", .http = {"GET /a/{x}"}, .params = x_params), {0}};
    static const abx_op_def ay[] = {OP("custom.ay.get", .http = {"GET /a/{y}"}, .params = y_params), {0}};
    static const abx_op_def ay_post[] = {OP("custom.ay.create", .http = {"POST /a/{y}"}, .params = y_params), {0}};
    static const abx_op_def ab[] = {OP("custom.ab.get", .http = {"GET /a/b"}), {0}};
    static const abx_op_def ab2[] = {OP("custom.ab2.get", .http = {"GET /a/b"}), {0}};
    abx_registry *reg = abx_registry_new(NULL);
    expect_added(reg, ax, false);
    expect_refused_in(reg, ay, false, "custom.ay.get", "/a/{y}", "/a/{x}", "custom.ax.get", NULL);
    expect_added(reg, ay_post, false); /* another method: no conflict */
    expect_added(reg, ab, false);      /* literal vs variable: literal wins at match time */
    expect_refused_in(reg, ab2, false, "custom.ab2.get", "/a/b", NULL);
    abx_registry_free(reg);
}

static void test_literal_vs_variable_both_orders(void **state)
{
    (void)state;
    static const abx_op_def lit[] = {OP("custom.lit.get", .http = {"GET /p/list"}), {0}};
    static const abx_op_def var[] = {OP("custom.var.get", .http = {"GET /p/{x}"}, .params = x_params), {0}};
    abx_registry *reg = abx_registry_new(NULL);
    expect_added(reg, var, false);
    expect_added(reg, lit, false);
    abx_registry_free(reg);
    reg = abx_registry_new(NULL);
    expect_added(reg, lit, false);
    expect_added(reg, var, false);
    abx_registry_freeze(reg);
    const abx_op *op = abx_registry_get(reg, "custom.var.get");
    assert_int_equal(op->n_bindings, 1);
    assert_string_equal(op->bindings[0].method, "GET");
    assert_string_equal(op->bindings[0].path, "/p/{x}");
    abx_registry_free(reg);
}

static void test_binding_shape_refused(void **state)
{
    (void)state;
    static const abx_op_def unknown_var[] = {OP("custom.v.get", .http = {"GET /v/{nope}"}, .params = x_params), {0}};
    static const abx_op_def list_var[] = {OP("custom.l.get", .http = {"GET /l/{items}"}, .params = list_param), {0}};
    static const abx_op_def no_params_var[] = {OP("custom.n.get", .http = {"GET /n/{x}"}), {0}};
    static const abx_op_def bad_method[] = {OP("custom.m.get", .http = {"FETCH /m"}), {0}};
    static const abx_op_def no_slash[] = {OP("custom.s.get", .http = {"GET s"}), {0}};
    static const abx_op_def empty_seg[] = {OP("custom.e.get", .http = {"GET /e//f"}), {0}};
    static const abx_op_def trailing[] = {OP("custom.t.get", .http = {"GET /t/"}), {0}};
    static const abx_op_def bad_var[] = {OP("custom.b.get", .http = {"GET /b/{x"}, .params = x_params), {0}};
    static const abx_op_def brace_lit[] = {OP("custom.c.get", .http = {"GET /c/a{x}"}, .params = x_params), {0}};
    static const abx_op_def pct[] = {OP("custom.p.get", .http = {"GET /p%2f"}), {0}};
    abx_registry *reg = abx_registry_new(NULL);
    expect_refused_in(reg, unknown_var, false, "custom.v.get", "{nope}", NULL);
    expect_refused_in(reg, list_var, false, "custom.l.get", "{items}", NULL);
    expect_refused_in(reg, no_params_var, false, "custom.n.get", "{x}", NULL);
    expect_refused_in(reg, bad_method, false, "custom.m.get", "FETCH /m", NULL);
    expect_refused_in(reg, no_slash, false, "custom.s.get", NULL);
    expect_refused_in(reg, empty_seg, false, "custom.e.get", "empty segment", NULL);
    expect_refused_in(reg, trailing, false, "custom.t.get", NULL);
    expect_refused_in(reg, bad_var, false, "custom.b.get", NULL);
    expect_refused_in(reg, brace_lit, false, "custom.c.get", NULL);
    expect_refused_in(reg, pct, false, "custom.p.get", NULL);
    abx_registry_freeze(reg);
    assert_int_equal(abx_registry_count(reg), 0);
    abx_registry_free(reg);
}

/* ---- parameter rules ------------------------------------------------------------------------ */

static void test_limit_style_params(void **state)
{
    (void)state;
    static const abx_param limit_nobounds[] = {{.name = "limit", .type = ABX_T_INT}, {0}};
    static const abx_param limit_zero[] = {{"limit", ABX_T_INT, ABX_MIN(0)}, {0}};
    static const abx_param max_nobounds[] = {{"max_items", ABX_T_INT, .bounds = ABX_HAS_MAX, .max = 10}, {0}};
    static const abx_param limit_ok[] = {{"limit", ABX_T_INT, ABX_MIN(1)}, {"max_items", ABX_T_INT, ABX_RANGE(1, 9)}, {0}};
    static const abx_param nested[] = {{"opts", ABX_T_OBJECT, .fields = limit_zero}, {0}};
    static const abx_param not_int[] = {{.name = "limit", .type = ABX_T_STRING}, {0}}; /* only integers are limit-style */
    static const abx_op_def a[] = {OP("custom.a.list", .params = limit_nobounds), {0}};
    static const abx_op_def b[] = {OP("custom.b.list", .params = limit_zero), {0}};
    static const abx_op_def c[] = {OP("custom.c.list", .params = max_nobounds), {0}};
    static const abx_op_def d[] = {OP("custom.d.list", .params = limit_ok), {0}};
    static const abx_op_def e[] = {OP("custom.e.list", .params = nested), {0}};
    static const abx_op_def f[] = {OP("custom.f.list", .params = not_int), {0}};
    abx_registry *reg = abx_registry_new(NULL);
    expect_refused_in(reg, a, false, "custom.a.list", "'limit'", "minimum", NULL);
    expect_refused_in(reg, b, false, "custom.b.list", "'limit'", NULL);
    expect_refused_in(reg, c, false, "custom.c.list", "'max_items'", NULL);
    expect_added(reg, d, false);
    expect_refused_in(reg, e, false, "custom.e.list", "'limit'", NULL);
    expect_added(reg, f, false);
    abx_registry_free(reg);
}

static void test_path_params(void **state)
{
    (void)state;
    static const abx_param no_access[] = {{"path", ABX_T_STRING, .kind = ABX_KIND_PATH}, {0}};
    static const abx_param int_path[] = {{"path", ABX_T_INT, .kind = ABX_KIND_PATH, .access = ABX_ACC_READ}, {0}};
    static const abx_param ok[] = {
        {"path", ABX_T_STRING, .kind = ABX_KIND_PATH, .access = ABX_ACC_READ},
        {"more", ABX_T_LIST, .item = ABX_T_STRING, .kind = ABX_KIND_PATH, .access = ABX_ACC_WRITE},
        {0},
    };
    static const abx_param deep_f[] = {{"path", ABX_T_STRING, .kind = ABX_KIND_PATH, .access = ABX_ACC_READ}, {0}};
    static const abx_param deep[] = {{"obj", ABX_T_OBJECT, .fields = deep_f}, {0}};
    static const abx_op_def a[] = {OP("custom.a.read", .params = no_access), {0}};
    static const abx_op_def b[] = {OP("custom.b.read", .params = int_path), {0}};
    static const abx_op_def c[] = {OP("custom.c.read", .params = ok), {0}};
    static const abx_op_def d[] = {OP("custom.d.read", .params = deep), {0}};
    abx_registry *reg = abx_registry_new(NULL);
    expect_refused_in(reg, a, false, "custom.a.read", "'path'", "access", NULL);
    expect_refused_in(reg, b, false, "custom.b.read", "'path'", NULL);
    expect_added(reg, c, false);
    expect_refused_in(reg, d, false, "custom.d.read", "'path'", NULL);
    abx_registry_freeze(reg);
    const abx_op *op = abx_registry_get(reg, "custom.c.read");
    assert_int_equal(op->n_params, 2);
    assert_int_equal(op->path_params, 0x3u);
    assert_int_equal(op->scoped_kinds, 1u << ABX_KIND_PATH);
    abx_registry_free(reg);
}

static void test_other_declaration_rules(void **state)
{
    (void)state;
    static const abx_param twice[] = {{.name = "a", .type = ABX_T_STRING}, {.name = "a", .type = ABX_T_INT}, {0}};
    static const abx_param bad_name[] = {{.name = "Bad", .type = ABX_T_STRING}, {0}};
    static const abx_param no_type[] = {{.name = "a"}, {0}};
    static const abx_param enum_nochoices[] = {{.name = "mode", .type = ABX_T_ENUM}, {0}};
    static const abx_param bad_dflt[] = {{"a", ABX_T_STRING, .dflt = "not json"}, {0}};
    static const abx_param list_of_list[] = {{"a", ABX_T_LIST, .item = ABX_T_LIST}, {0}};
    static const abx_param cmd[] = {{.name = "command", .type = ABX_T_STRING}, {0}};
    static const abx_op_def defs[][2] = {
        {OP("custom.twice.get", .params = twice), {0}},
        {OP("custom.badname.get", .params = bad_name), {0}},
        {OP("custom.notype.get", .params = no_type), {0}},
        {OP("custom.enum.get", .params = enum_nochoices), {0}},
        {OP("custom.dflt.get", .params = bad_dflt), {0}},
        {OP("custom.lol.get", .params = list_of_list), {0}},
        {OP("custom.oneof.run", .params = cmd, .one_of = "command|argv"), {0}},
        {{.id = "custom.nohandler.get", .effects = ABX_EFF_READ}, {0}},
        {OPX("custom.effects.get", 1u << 12, .summary = "bad"), {0}},
        {OP("custom.errs.get", .errors = "files.not_found files.nope"), {0}},
    };
    abx_registry *reg = abx_registry_new(NULL);
    for (size_t i = 0; i < sizeof defs / sizeof defs[0]; i++)
        expect_refused_in(reg, defs[i], false, defs[i][0].id, NULL);
    abx_registry_freeze(reg);
    assert_int_equal(abx_registry_count(reg), 0);
    abx_registry_free(reg);
}

/* ---- freeze ------------------------------------------------------------------------------------ */

static void test_freeze(void **state)
{
    (void)state;
    static const abx_op_def a[] = {OP("custom.a.get"), {0}};
    static const abx_op_def b[] = {OP("custom.b.get"), {0}};
    abx_registry *reg = abx_registry_new(NULL);
    expect_added(reg, a, false);
    assert_false(abx_registry_frozen(reg));
    abx_registry_freeze(reg);
    assert_true(abx_registry_frozen(reg));
    char err[256] = "";
    assert_int_equal(abx_registry_add(reg, b, err, sizeof err), -1);
    assert_int_equal(strncmp(err, "RegistryFrozen", 14), 0);
    assert_non_null(strstr(err, "custom.b.get"));
    err[0] = '\0';
    assert_int_equal(abx__registry_add(reg, b, true, err, sizeof err), -1); /* builtin path too */
    assert_int_equal(strncmp(err, "RegistryFrozen", 14), 0);
    abx_registry_freeze(reg); /* idempotent */
    assert_int_equal(abx_registry_count(reg), 1);
    assert_null(abx_registry_get(reg, "custom.b.get"));
    abx_registry_free(reg);
}

/* ---- copy-on-write children ------------------------------------------------------------------ */

static void test_children_copy_on_write(void **state)
{
    (void)state;
    static const abx_op_def base[] = {OP("custom.base.get"), {0}};
    static const abx_op_def only_a[] = {OP("custom.only_a.get"), {0}};
    static const abx_op_def only_b[] = {OP("custom.only_b.get"), {0}};
    static const abx_op_def shared_name[] = {OP("custom.same.get"), {0}};
    static const abx_op_def dup_of_parent[] = {OP("custom.base.get"), {0}};
    static const abx_op_def prefix_of_parent[] = {OP("custom.base"), {0}};
    abx_registry *parent = abx_registry_new(NULL);
    expect_added(parent, base, false);
    abx_registry *ca = abx_registry_new(parent), *cb = abx_registry_new(parent);
    assert_non_null(ca);
    assert_non_null(cb);
    expect_added(ca, only_a, false);
    expect_added(cb, only_b, false);
    /* the same id in two siblings: each child has its own op */
    expect_added(ca, shared_name, false);
    expect_added(cb, shared_name, false);
    /* a child cannot shadow or prefix-collide with its parent's op */
    expect_refused_in(ca, dup_of_parent, false, "custom.base.get", "already registered", NULL);
    expect_refused_in(cb, prefix_of_parent, false, "custom.base", "prefix", NULL);

    abx_registry_freeze(ca);
    assert_true(abx_registry_frozen(ca));
    assert_true(abx_registry_frozen(parent)); /* freezing a child freezes its parent */
    assert_false(abx_registry_frozen(cb));
    assert_int_equal(abx_registry_count(ca), 3);
    assert_non_null(abx_registry_get(ca, "custom.base.get"));
    assert_non_null(abx_registry_get(ca, "custom.only_a.get"));
    assert_null(abx_registry_get(ca, "custom.only_b.get"));
    assert_int_equal(abx_registry_count(parent), 1); /* the parent never sees children's ops */
    assert_null(abx_registry_get(parent, "custom.only_a.get"));

    /* the frozen parent refuses, the unfrozen sibling still accepts */
    static const abx_op_def late[] = {OP("custom.late.get"), {0}};
    char err[256];
    assert_int_equal(abx_registry_add(parent, late, err, sizeof err), -1);
    assert_int_equal(strncmp(err, "RegistryFrozen", 14), 0);
    expect_added(cb, late, false);
    abx_registry_freeze(cb);
    assert_int_equal(abx_registry_count(cb), 4);
    assert_non_null(abx_registry_get(cb, "custom.base.get"));
    assert_non_null(abx_registry_get(cb, "custom.only_b.get"));
    assert_non_null(abx_registry_get(cb, "custom.late.get"));
    assert_null(abx_registry_get(cb, "custom.only_a.get"));
    assert_null(abx_registry_get(ca, "custom.late.get"));
    /* distinct op objects for the shared name; the parent's op is one object in both */
    const abx_op *sa = abx_registry_get(ca, "custom.same.get"), *sb = abx_registry_get(cb, "custom.same.get");
    assert_non_null(sa);
    assert_non_null(sb);
    assert_ptr_not_equal(sa, sb);
    assert_ptr_equal(abx_registry_get(ca, "custom.base.get"), abx_registry_get(cb, "custom.base.get"));
    assert_ptr_equal(abx_registry_get(parent, "custom.base.get"), abx_registry_get(ca, "custom.base.get"));
    abx_registry_free(ca);
    abx_registry_free(cb);
    abx_registry_free(parent);
}

static void test_frozen_index_sorted(void **state)
{
    (void)state;
    static const abx_op_def ops[] = {OP("custom.zeta.get"), OP("custom.alpha.get"), OP("custom.mid.get"), {0}};
    static const abx_op_def more[] = {OP("custom.beta.get"), {0}};
    abx_registry *parent = abx_registry_new(NULL);
    expect_added(parent, ops, false);
    abx_registry *child = abx_registry_new(parent);
    expect_added(child, more, false);
    abx_registry_freeze(child);
    size_t n = abx_registry_count(child);
    assert_int_equal(n, 4);
    for (size_t i = 0; i < n; i++) {
        const abx_op *op = abx_registry_at(child, i);
        assert_non_null(op);
        assert_int_equal(abx_registry_index_of(child, op), i);
        if (i)
            assert_true(strcmp(abx_registry_at(child, i - 1)->id, op->id) < 0);
    }
    assert_null(abx_registry_at(child, n));
    assert_string_equal(abx_registry_at(child, 0)->id, "custom.alpha.get");
    assert_string_equal(abx_registry_at(child, 1)->id, "custom.beta.get");
    abx_registry_free(child);
    abx_registry_free(parent);
}

/* ---- lints -------------------------------------------------------------------------------------- */

static void test_lint_effects_undeclared(void **state)
{
    (void)state;
    static const abx_op_def ops[] = {{.id = "custom.thing.get", .handler = ok_handler}, {0}};
    abx_registry *reg = abx_registry_new(NULL);
    expect_added(reg, ops, false);
    assert_int_equal(count_lints(reg, "core.effects_undeclared", "custom.thing.get"), 1);
    abx_registry_freeze(reg);
    const abx_op *op = abx_registry_get(reg, "custom.thing.get");
    assert_true(op->explicit_only);
    assert_false(op->effects_declared);
    assert_int_equal(op->effects, ABX_EFF_ADMIN);
    abx_registry_free(reg);
}

static void test_lint_unknown_verb_and_path_like(void **state)
{
    (void)state;
    static const abx_param file_param[] = {{.name = "file", .type = ABX_T_STRING}, {.name = "count", .type = ABX_T_INT}, {0}};
    static const abx_param real_path[] = {{"path", ABX_T_STRING, .kind = ABX_KIND_PATH, .access = ABX_ACC_READ}, {0}};
    static const abx_param cmd_cwd[] = {{"command", ABX_T_STRING, .kind = ABX_KIND_COMMAND}, {.name = "cwd", .type = ABX_T_STRING}, {0}};
    static const abx_param plain_cwd[] = {{.name = "cwd", .type = ABX_T_STRING}, {0}};
    static const abx_op_def ops[] = {
        OP("custom.thing.frobnicate"),
        OP("custom.file.get", .params = file_param),
        OP("custom.path.read", .params = real_path),
        OPX("custom.cmd.run", ABX_EFF_EXEC, .params = cmd_cwd),
        OP("custom.cwd.get", .params = plain_cwd),
        {0},
    };
    abx_registry *reg = abx_registry_new(NULL);
    expect_added(reg, ops, false);
    assert_int_equal(count_lints(reg, "core.unknown_verb", "custom.thing.frobnicate"), 1);
    assert_int_equal(count_lints(reg, "core.unknown_verb", NULL), 1);
    assert_int_equal(count_lints(reg, "core.path_like_param", "custom.file.get"), 1);
    assert_int_equal(count_lints(reg, "core.path_like_param", "custom.path.read"), 0); /* declared as a path */
    assert_int_equal(count_lints(reg, "core.path_like_param", "custom.cmd.run"), 0);   /* cwd of a command */
    assert_int_equal(count_lints(reg, "core.path_like_param", "custom.cwd.get"), 1);
    assert_int_equal(count_lints(reg, "core.effects_undeclared", NULL), 0);
    const abx_lint *l;
    size_t n = abx_registry_lints(reg, &l);
    for (size_t i = 0; i < n; i++)
        if (strcmp(l[i].id, "custom.file.get") == 0)
            assert_non_null(strstr(l[i].message, "file"));
    abx_registry_free(reg);
}

static void test_no_lints_for_clean_ops(void **state)
{
    (void)state;
    static const abx_param p[] = {{.name = "name", .type = ABX_T_STRING}, {0}};
    static const abx_op_def ops[] = {OP("custom.clean.get", .params = p),
                                     OP("custom.clean2.list", .errors = "files.not_found files.io"), {0}};
    abx_registry *reg = abx_registry_new(NULL);
    expect_added(reg, ops, false);
    const abx_lint *l;
    assert_int_equal(abx_registry_lints(reg, &l), 0);
    abx_registry_free(reg);
}

/* abx_registry_lints returns the registry's own lints (core.h); the chain is walked
 * through ->parent (the server does so when it reports them). */
static void test_lints_include_parents(void **state)
{
    (void)state;
    static const abx_op_def undeclared[] = {{.id = "custom.parent.get", .handler = ok_handler}, {0}};
    abx_registry *parent = abx_registry_new(NULL);
    expect_added(parent, undeclared, false);
    abx_registry *child = abx_registry_new(parent);
    assert_int_equal(count_lints(parent, "core.effects_undeclared", "custom.parent.get"), 1);
    assert_int_equal(count_lints(child, "core.effects_undeclared", "custom.parent.get"), 0);
    size_t got = 0;
    for (const abx_registry *r = child; r; r = r->parent)
        got += count_lints((abx_registry *)r, "core.effects_undeclared", "custom.parent.get");
    abx_registry_free(child);
    abx_registry_free(parent);
    assert_int_equal(got, 1);
}

/* ---- the default registry ------------------------------------------------------------------------ */

static void test_default_registry(void **state)
{
    (void)state;
    abx_registry *def = abx_registry_default(); /* aborts if a built-in table is refused */
    assert_non_null(def);
    assert_ptr_equal(abx_registry_default(), def);
    abx_registry *child = abx_registry_new(def);
    abx_registry_freeze(child);
    assert_true(abx_registry_frozen(def));
    const abx_op *health = abx_registry_get(child, "core.health");
    const abx_op *read = abx_registry_get(child, "files.read");
    assert_non_null(health);
    assert_non_null(read);
    assert_true(health->effects_declared);
    assert_false(health->explicit_only);
    assert_int_equal(read->effects, ABX_EFF_READ);
    assert_true(read->path_params != 0);
    assert_non_null(abx_op_param(read, "path"));
    assert_int_equal(abx_op_param(read, "path")->kind, ABX_KIND_PATH);
    assert_int_equal(abx_registry_count(child), abx_registry_count(def));
    /* every built-in id is valid and in a reserved namespace */
    for (size_t i = 0; i < abx_registry_count(child); i++) {
        const abx_op *op = abx_registry_at(child, i);
        assert_true(abx_id_valid(op->id, NULL, 0));
        assert_true(abx_id_reserved_ns(op->id));
    }
    /* registering a built-in id again in a child is a duplicate */
    static const abx_op_def dup[] = {OP("files.read"), {0}};
    abx_registry *child2 = abx_registry_new(def);
    expect_refused_in(child2, dup, true, "files.read", "already registered", NULL);
    abx_registry_free(child2);
    abx_registry_free(child);
    abx_registry_free(def); /* a no-op for the default registry */
    assert_non_null(abx_registry_get(def, "core.health"));
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_bad_id_refused),
        cmocka_unit_test(test_duplicate_id_refused),
        cmocka_unit_test(test_prefix_ids_refused_both_orders),
        cmocka_unit_test(test_failed_batch_is_atomic),
        cmocka_unit_test(test_alias_taken_refused),
        cmocka_unit_test(test_resolve_alias),
        cmocka_unit_test(test_reserved_namespace),
        cmocka_unit_test(test_equally_specific_bindings_refused),
        cmocka_unit_test(test_literal_vs_variable_both_orders),
        cmocka_unit_test(test_binding_shape_refused),
        cmocka_unit_test(test_limit_style_params),
        cmocka_unit_test(test_path_params),
        cmocka_unit_test(test_other_declaration_rules),
        cmocka_unit_test(test_freeze),
        cmocka_unit_test(test_children_copy_on_write),
        cmocka_unit_test(test_frozen_index_sorted),
        cmocka_unit_test(test_lint_effects_undeclared),
        cmocka_unit_test(test_lint_unknown_verb_and_path_like),
        cmocka_unit_test(test_no_lints_for_clean_ops),
        cmocka_unit_test(test_lints_include_parents),
        cmocka_unit_test(test_default_registry),
        cmocka_unit_test(test_resolve_tool_name),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
