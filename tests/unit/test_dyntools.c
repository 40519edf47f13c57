/* test_dyntools.c — unit tests of src/core/dyndef.c and src/core/overlay.c: the canonical
 * form does not depend on key order, the hash is its SHA-256; the overlay shows a tool to
 * its author only until a promotion (by principal or role), resolves a name to the newest
 * version (the caller's own before others'), keeps old hashes callable, expires by ttl and
 * by the end of its session, refuses past the per-author cap, and memoizes per generation. */
#include <stdarg.h>
#include <stddef.h>
#include <setjmp.h>
#include <stdint.h>
#include <cmocka.h>

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "core/dyndef.h"

static abx_err nop(abx_ctx *ctx, const json_t *args, abx_reply *r)
{
    (void)ctx;
    (void)args;
    (void)r;
    return ABX_OK;
}

static abx_dyndef *parse(const char *text)
{
    json_t *j = json_loads(text, 0, NULL);
    assert_non_null(j);
    abx_dyndef *d = NULL;
    char err[300] = "";
    int rc = abx_dyndef_parse(j, &d, err, sizeof err);
    json_decref(j);
    if (rc != 0)
        fail_msg("refused: %s", err);
    return d;
}

#define DEF(name, code)                                                                                          \
    "{\"name\":\"" name "\",\"description\":\"d\",\"language\":\"python\",\"code\":\"" code "\","              \
    "\"parameters\":{\"type\":\"object\",\"properties\":{\"b\":{\"type\":\"integer\"},\"a\":{\"type\":\"string\"}}}}"

static void test_canonical_form_and_hash(void **state)
{
    (void)state;
    abx_dyndef *x = parse(DEF("t", "def run(**a): return 1"));
    abx_dyndef *y = parse("{\"parameters\":{\"properties\":{\"a\":{\"type\":\"string\"},\"b\":{\"type\":\"integer\"}},"
                          "\"additionalProperties\":false,\"type\":\"object\"},\"code\":\"def run(**a): return 1\","
                          "\"language\":\"python\",\"description\":\"d\",\"name\":\"t\",\"effects\":[\"exec\"]}");
    assert_string_equal(x->canonical, y->canonical);
    assert_string_equal(x->hash, y->hash);
    char hex[65];
    abx_sha256_hex(x->canonical, strlen(x->canonical), hex);
    assert_string_equal(hex, x->hash);
    assert_string_equal(x->id, "dyn.t");
    assert_int_equal(x->n_params, 2);
    assert_string_equal(x->params[0].name, "a"); /* sorted */
    abx_dyndef *z = parse(DEF("t", "def run(**a): return 2"));
    assert_string_not_equal(x->hash, z->hash);
    abx_dyndef_free(x);
    abx_dyndef_free(y);
    abx_dyndef_free(z);
}

static void test_visibility_promotion_and_versions(void **state)
{
    (void)state;
    abx_overlay *ov = abx_overlay_new();
    char err[200];
    char *viewer_roles[] = {"viewer"};
    abx_dyn_who alice = {.principal = "alice"}, bob = {.principal = "bob", .roles = viewer_roles, .n_roles = 1},
                carol = {.principal = "carol"};
    assert_false(abx_overlay_any(ov));
    abx_dyn_entry *v1 = abx_overlay_add(ov, parse(DEF("t", "v1")), "alice", 0, NULL, nop, err, sizeof err);
    assert_non_null(v1);
    uint64_t g = abx_overlay_gen(ov);
    assert_ptr_equal(abx_overlay_by_name(ov, "dyn.t", &alice), v1);
    assert_null(abx_overlay_by_name(ov, "t", &bob));
    assert_null(abx_overlay_by_hash(ov, v1->def->hash, &bob));
    abx_dyn_entry *v2 = abx_overlay_add(ov, parse(DEF("t", "v2")), "alice", 0, NULL, nop, err, sizeof err);
    assert_ptr_equal(abx_overlay_by_name(ov, "t", &alice), v2);        /* the newest */
    assert_ptr_equal(abx_overlay_by_hash(ov, v1->def->hash, &alice), v1); /* the old hash still */
    json_t *to = json_pack("[s]", "role:viewer");
    assert_int_equal(abx_overlay_promote(ov, v1->def->hash, to), 0);
    json_decref(to);
    assert_true(abx_overlay_gen(ov) > g);
    assert_ptr_equal(abx_overlay_by_name(ov, "t", &bob), v1);          /* what bob may see */
    assert_null(abx_overlay_by_name(ov, "t", &carol));
    /* bob's own tool of that name wins over the promoted one */
    abx_dyn_entry *b = abx_overlay_add(ov, parse(DEF("t", "bob's")), "bob", 0, NULL, nop, err, sizeof err);
    assert_ptr_equal(abx_overlay_by_name(ov, "t", &bob), b);
    assert_int_equal(abx_overlay_delete(ov, v1->def->hash, "bob"), -1);  /* only the author */
    assert_int_equal(abx_overlay_delete(ov, v2->def->hash, "alice"), 0);
    assert_ptr_equal(abx_overlay_by_name(ov, "t", &alice), v1);
    abx_overlay_free(ov);
}

static void count(void *ud, abx_dyn_entry *e)
{
    (void)e;
    (*(int *)ud)++;
}

static void test_expiry_sessions_cap_and_memo(void **state)
{
    (void)state;
    abx_overlay *ov = abx_overlay_new();
    char err[200];
    abx_dyn_who alice = {.principal = "alice"};
    abx_dyn_entry *s = abx_overlay_add(ov, parse(DEF("s", "x")), "alice", 0, NULL, nop, err, sizeof err);
    abx_overlay_bind_session(ov, s, "mcp-1");
    abx_dyn_entry *t = abx_overlay_add(ov, parse(DEF("t", "x")), "alice", 50, NULL, nop, err, sizeof err);
    abx_arena *a = abx_arena_new();
    abx_overlay_memo_put(ov, "k", "[1]", 3, abx_overlay_gen(ov));
    size_t len = 0;
    assert_non_null(abx_overlay_memo_get(ov, "k", a, &len));
    usleep(80 * 1000);
    assert_null(abx_overlay_memo_get(ov, "k", a, &len));   /* an entry expired since */
    assert_null(abx_overlay_by_hash(ov, t->def->hash, &alice));
    abx_overlay_end_session(ov, "mcp-2");
    assert_non_null(abx_overlay_by_name(ov, "s", &alice));
    abx_overlay_end_session(ov, "mcp-1");
    assert_null(abx_overlay_by_name(ov, "s", &alice));
    assert_false(abx_overlay_any(ov));
    for (int i = 0; i < ABX_DYN_PER_AUTHOR; i++) {
        char name[16], text[512];
        snprintf(name, sizeof name, "n%d", i);
        snprintf(text, sizeof text, DEF("%s", "x"), name);
        assert_non_null(abx_overlay_add(ov, parse(text), "alice", 0, NULL, nop, err, sizeof err));
    }
    abx_dyndef *over = parse(DEF("over", "x"));
    assert_null(abx_overlay_add(ov, over, "alice", 0, NULL, nop, err, sizeof err));
    assert_non_null(strstr(err, "delete one"));
    abx_dyndef_free(over);
    int n = 0;
    abx_overlay_each(ov, &alice, count, &n);
    assert_int_equal(n, ABX_DYN_PER_AUTHOR);
    abx_arena_free(a);
    abx_overlay_free(ov);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_canonical_form_and_hash),
        cmocka_unit_test(test_visibility_promotion_and_versions),
        cmocka_unit_test(test_expiry_sessions_cap_and_memo),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
