/* test_audit.c — the ledger's hot events (a call that ran; GET /health) are written by
 * pipeline/audit.c without a jansson tree; their text must be byte for byte what the
 * tree path writes (abx_json_compact with sorted keys), since readers, verify and the
 * redacted projection see that text. Requests with every optional member, repeated
 * path parameters, argv, secrets in the arguments and strings that are not UTF-8. */
#include <stdarg.h>
#include <stddef.h>
#include <setjmp.h>
#include <stdint.h>
#include <cmocka.h>

#include <stdlib.h>
#include <string.h>

#include "pipeline/pipeline.h"
#include "ledger/ledger.h"

static void same(const abx_request *r, int status, int64_t dur_us, size_t want_n)
{
    char *direct[2] = {0}, *tree[2] = {0};
    size_t n = abx__audit_hot_texts(r, status, dur_us, direct, tree);
    assert_int_equal(n, want_n);
    for (size_t i = 0; i < n; i++) {
        assert_non_null(tree[i]);
        assert_non_null(direct[i]);
        assert_string_equal(direct[i], tree[i]);
        free(direct[i]);
        free(tree[i]);
    }
}

static void test_health_like(void **state)
{
    (void)state;
    abx_request r = {0};
    snprintf(r.id, sizeof r.id, "req-1");
    r.door = (abx_door)0;
    same(&r, 200, 123, 2);
    r.client = "127.0.0.1";
    r.path = "/health";
    r.path_len = 7;
    r.op_name = "core.health";
    r.batch_group = 42;
    same(&r, 200, 1, 2);
    same(&r, 503, 987654321, 2);
    srand(7);
    for (int i = 0; i < 2000; i++) /* durations of every magnitude: the real's text */
        same(&r, 200, (int64_t)((unsigned)rand() % 100000) << (i % 40), 2);
    same(&r, 200, INT64_MAX, 2);
    r.path = "/h\xff\xfe";
    r.path_len = 4; /* not UTF-8: jansson leaves "target" out */
    r.client = "c\"l\\i\n";
    same(&r, 200, 0, 2);
}

static void test_call_that_ran(void **state)
{
    (void)state;
    abx_op op = {0};
    op.id = "files.read";
    abx_request r = {0};
    snprintf(r.id, sizeof r.id, "req-2");
    r.op = &op;
    r.path = "/files/read";
    r.path_len = strlen(r.path);
    same(&r, 200, 55, 1); /* no args, no paths */
    r.args = json_pack("{s:s, s:i, s:b, s:[s]}", "path", "a.txt", "n", 1, "follow", 1, "names", "x");
    same(&r, 200, 55, 1); /* nothing to redact: written as they are */
    json_decref(r.args);
    r.args = json_pack("{s:s, s:{s:s}}", "path", "a.txt", "env", "K", "v");
    same(&r, 200, 55, 1);
    json_decref(r.args);
    r.args = json_pack("{s:s, s:{s:s}}", "op", "files.read", "args", "content", "x");
    same(&r, 200, 55, 1);
    json_decref(r.args);
    r.args = json_pack("{s:s, s:s, s:{s:s, s:i}, s:[i, s]}", "path", "a.txt", "token", "sekrit", "headers",
                       "Authorization", "Bearer x", "n", 3, "list", 1, "two");
    abx_path_value pv[20] = {0};
    const char *params[] = {"path", "dest", "path", "src", "aa", "a"};
    char *canon[20];
    for (size_t i = 0; i < 20; i++) {
        canon[i] = malloc(32);
        snprintf(canon[i], 32, i == 3 ? "/ws/\xc3(%zu" : "/ws/f%zu", i); /* one not UTF-8 */
        pv[i].param = params[i % 6];
        pv[i].canonical = canon[i];
    }
    r.decision.paths = pv;
    r.decision.n_paths = 6;
    snprintf(r.decision.determining, sizeof r.decision.determining, "allow[0],allow[2]");
    same(&r, 200, 1500, 1);
    r.decision.n_paths = 20; /* past the writer's stack array */
    char *argv[] = {"/bin/echo", "hi\t\"there\"", "\xff", "z", NULL};
    r.decision.argv.v = argv;
    r.decision.argv.n = 4;
    r.client = "10.0.0.1";
    r.batch_group = 7;
    same(&r, 201, 3, 1);
    r.decision.argv.n = 0;
    r.decision.paths = NULL;
    r.decision.n_paths = 0;
    same(&r, 200, 3, 1);
    json_decref(r.args);
    for (size_t i = 0; i < 20; i++)
        free(canon[i]);
}

/* abx_ledger_redact_keeps remembers names it keeps whatever their value; a name whose
 * redaction depends on the value's type ("content": only strings, objects, arrays) or
 * that names a secret in any case must never be remembered as kept. */
static bool keeps(const char *json)
{
    json_t *a = json_loads(json, 0, NULL);
    assert_non_null(a);
    bool k = abx_ledger_redact_keeps(a);
    json_decref(a);
    return k;
}

static void test_redact_keeps_remembers_only_plain_names(void **state)
{
    (void)state;
    for (int round = 0; round < 3; round++) { /* the second and third rounds hit the cache */
        assert_true(keeps("{\"path\":\"/w/a\",\"offset\":0}"));
        assert_true(keeps("{\"content\":5}")); /* a number is not contents */
        assert_false(keeps("{\"content\":\"x\"}"));
        assert_false(keeps("{\"path\":\"/w\",\"data\":[1]}"));
        assert_false(keeps("{\"Api_Key\":1}"));
        assert_false(keeps("{\"my_password\":\"p\"}"));
        assert_true(keeps("{\"env\":\"plain\"}")); /* env redacts objects only */
        assert_false(keeps("{\"env\":{\"A\":\"1\"}}"));
        assert_false(keeps("{\"args\":{\"path\":\"/x\"}}"));
        assert_true(keeps("{\"a_name_longer_than_the_cache_slots_hold\":1}"));
    }
    assert_false(keeps("[1]"));
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_health_like),
        cmocka_unit_test(test_call_that_ran),
        cmocka_unit_test(test_redact_keeps_remembers_only_plain_names),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
