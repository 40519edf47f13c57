/* test_lazylib.c — unit tests of src/core/lazylib.c (a library opened on first use) and
 * its user src/builtin/zmq_lazy.c: a library that loads fills every slot; a missing
 * library or a missing symbol fails with the reason, again on every later call, and
 * leaves no slot set, so nothing is ever called through a half-filled table. */
#include <stdarg.h>
#include <stddef.h>
#include <setjmp.h>
#include <stdint.h>
#include <cmocka.h>

#include <string.h>

#include "builtin/zmq_lazy.h"
#include "sandbox/ossl_lazy.h"
#include "core/lazylib.h"

static void test_loads_every_symbol(void **state)
{
    (void)state;
    static const char *const names[] = {"cos", "sqrt"};
    void *slots[2] = {NULL, NULL};
    abx_lazylib l = {.soname = "libm.so.6", .names = names, .slots = slots, .n = 2};
    char why[200] = "";
    assert_int_equal(abx_lazylib_load(&l, why, sizeof why), 0);
    assert_non_null(slots[0]);
    assert_non_null(slots[1]);
    double (*sq)(double) = (double (*)(double))slots[1];
    assert_true(sq(16.0) == 4.0);
    assert_int_equal(abx_lazylib_load(&l, why, sizeof why), 0); /* once: a second call is a no-op */
}

static void test_missing_library_fails_each_time(void **state)
{
    (void)state;
    static const char *const names[] = {"nothing"};
    void *slots[1] = {NULL};
    abx_lazylib l = {.soname = "libabx-no-such-library.so.9", .names = names, .slots = slots, .n = 1};
    char why[200] = "";
    assert_int_equal(abx_lazylib_load(&l, why, sizeof why), -1);
    assert_non_null(strstr(why, "cannot load libabx-no-such-library.so.9"));
    why[0] = 0;
    assert_int_equal(abx_lazylib_load(&l, why, sizeof why), -1);
    assert_non_null(strstr(why, "cannot load libabx-no-such-library.so.9"));
    assert_null(slots[0]);
}

static void test_missing_symbol_leaves_no_slot(void **state)
{
    (void)state;
    static const char *const names[] = {"cos", "abx_no_such_symbol"};
    void *slots[2] = {NULL, NULL};
    abx_lazylib l = {.soname = "libm.so.6", .names = names, .slots = slots, .n = 2};
    char why[200] = "";
    assert_int_equal(abx_lazylib_load(&l, why, sizeof why), -1);
    assert_string_equal(why, "libm.so.6 has no symbol abx_no_such_symbol");
    assert_null(slots[0]);
    assert_null(slots[1]);
}

static void test_zmq_table(void **state)
{
    (void)state;
    char why[200] = "";
    assert_int_equal(abx_zmq_load(why, sizeof why), 0);
    for (int i = 0; i < ABX_ZMQ_N; i++)
        assert_non_null(abx_zmq_slot[i]);
    void *ctx = zmq_ctx_new(); /* the macro calls through the loaded slot */
    assert_non_null(ctx);
    assert_int_equal(zmq_ctx_term(ctx), 0);
}

static void test_ossl_table(void **state)
{
    (void)state;
    char why[200] = "";
    assert_int_equal(abx_ossl_load(why, sizeof why), 0);
    for (int i = 0; i < ABX_OSSL_N; i++)
        assert_non_null(abx_ossl_slot[i]);
    EVP_MD_CTX *md = EVP_MD_CTX_new(); /* through the slots: SHA-256 of "abc" */
    unsigned char dg[32];
    unsigned int dl = 0;
    assert_non_null(md);
    assert_int_equal(EVP_DigestInit_ex(md, EVP_sha256(), NULL), 1);
    assert_int_equal(EVP_DigestUpdate(md, "abc", 3), 1);
    assert_int_equal(EVP_DigestFinal_ex(md, dg, &dl), 1);
    EVP_MD_CTX_free(md);
    assert_int_equal(dl, 32);
    assert_int_equal(dg[0], 0xba);
    assert_int_equal(dg[31], 0xad);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_loads_every_symbol),
        cmocka_unit_test(test_missing_library_fails_each_time),
        cmocka_unit_test(test_missing_symbol_leaves_no_slot),
        cmocka_unit_test(test_zmq_table),
        cmocka_unit_test(test_ossl_table),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
