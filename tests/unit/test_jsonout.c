/* test_jsonout.c — src/core/jsonout.c writes what json_dumps writes (JSON_COMPACT |
 * JSON_ENCODE_ANY, with and without JSON_SORT_KEYS), byte for byte: the ledger's hash
 * chain and verify depend on it. Edge cases first, then random trees compared whole. */
#include <stdarg.h>
#include <stddef.h>
#include <setjmp.h>
#include <stdint.h>
#include <cmocka.h>

#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "core/jsonout.h"

static void same(const json_t *v)
{
    for (int sort = 0; sort < 2; sort++) {
        char *want = json_dumps(v, JSON_COMPACT | JSON_ENCODE_ANY | (sort ? JSON_SORT_KEYS : 0));
        size_t n = 0;
        char *got = abx_json_compact(v, sort, &n);
        if (!want) {
            assert_null(got);
            continue;
        }
        assert_non_null(got);
        assert_string_equal(got, want);
        assert_int_equal(n, strlen(want));
        free(want);
        free(got);
    }
}

static void test_scalars(void **state)
{
    (void)state;
    json_t *vals[] = {json_null(), json_true(), json_false(), json_integer(0), json_integer(-1),
                      json_integer(INT64_MAX), json_integer(INT64_MIN), json_real(0.0), json_real(-0.0),
                      json_real(0.1), json_real(3.0), json_real(1e20), json_real(1.5e-7), json_real(-2.5e300),
                      json_real(12.345), json_real(1e16), json_real(1e17), json_real(5e-324), json_real(1e-5),
                      json_real(1.7976931348623157e308), json_real(123456789012345678.0), json_real(-1e-300),
                      json_string(""), json_string("plain"), json_string("caf\xc3\xa9 \xe2\x82\xac"),
                      json_string("\xf0\x9f\x98\x80/\x7f"), json_stringn("a\0b", 3),
                      json_string("a long plain run of text, then \"quotes\", then caf\xc3\xa9, then a\ttab!"),
                      json_string("0123456789abcdef\\0123456789abcdef\x1f" "0123456789abcdef\xe2\x82\xac" "01234567")};
    for (size_t i = 0; i < sizeof vals / sizeof vals[0]; i++) {
        same(vals[i]);
        json_decref(vals[i]);
    }
}

static void test_every_control_and_escape(void **state)
{
    (void)state;
    char s[40];
    for (int c = 0; c < 0x20; c++)
        s[c] = (char)c;
    memcpy(s + 0x20, "\"\\/'<>\x7f", 8);
    json_t *v = json_stringn(s, 0x20 + 8);
    same(v);
    json_decref(v);
}

static void test_invalid_utf8_fails_like_jansson(void **state)
{
    (void)state;
    const char *bad[] = {"\xff", "\xc3", "\xed\xa0\x80", "\xc0\xaf", "ok\xf5\x80\x80\x80",
                         "eight by\xfftes and more after it", "0123456789abcdef\xc3(0123456789abcdef"};
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        json_t *v = json_stringn_nocheck(bad[i], strlen(bad[i]));
        json_t *o = json_pack("{s:o}", "k", v);
        assert_null(json_dumps(o, JSON_COMPACT));
        assert_null(abx_json_compact(o, false, NULL));
        json_decref(o);
    }
}

/* Long strings go sixteen bytes at a time: every special byte at every offset of a
 * 70-byte run (across three blocks, and the tail), valid or not as UTF-8. */
static void test_long_strings_every_offset(void **state)
{
    (void)state;
    static const char *const special[] = {"\"", "\\", "\x01", "\x1f", "\n", "\x7f", " ", "\xc3\xa9",
                                          "\xe2\x82\xac", "\xff", "\xc3", "\xed\xa0\x80"};
    char buf[80];
    for (size_t k = 0; k < sizeof special / sizeof special[0]; k++)
        for (size_t at = 0; at + strlen(special[k]) <= 70; at++) {
            memset(buf, 'a', 70);
            memcpy(buf + at, special[k], strlen(special[k]));
            json_t *o = json_pack("{s:o}", "k", json_stringn_nocheck(buf, 70));
            same(o); /* invalid UTF-8: both refuse */
            json_decref(o);
            if (at + strlen(special[k]) + 2 < 70) { /* and an escape right after it, same block */
                buf[at + strlen(special[k]) + 1] = '"';
                o = json_pack("{s:o}", "k", json_stringn_nocheck(buf, 70));
                same(o);
                json_decref(o);
            }
        }
}

/* Reals go through a 128-bit path for 1e-4 <= |d| < 1e15 (every duration_ms of the
 * ledger): byte for byte jansson's "%.17g" text, around every edge of that range. */
static void real_same(double d)
{
    json_t *v = json_real(d);
    same(v);
    json_decref(v);
}

static void test_reals_like_jansson(void **state)
{
    (void)state;
    static const double edge[] = {0.0, -0.0, 1e-4, 9.9999999999999991e-5, 1.0000000000000002e-4, 0.1, 0.2, 0.3,
                                  0.5, 1.0, 2.0, 10.0, 100.0, 1e14, 9.9999999999999e14, 1e15, 1.0000000000000002e15,
                                  123456789012345.6, 0.123456789012345678, 4503599627370496.0, 9007199254740993.0,
                                  1.7976931348623157e308, 4.9e-324, 2.2250738585072014e-308, 0.042, 3.14159};
    for (size_t i = 0; i < sizeof edge / sizeof edge[0]; i++) {
        real_same(edge[i]);
        real_same(-edge[i]);
    }
    for (int k = 0; k <= 200000; k++) /* durations: microseconds over 1000, as audit.c makes them */
        real_same((double)k / 1000.0);
    double t = 1e-5;
    for (int p = -5; p <= 16; p++, t *= 10.0) { /* near powers of ten, three doubles each side */
        uint64_t b;
        memcpy(&b, &t, sizeof b);
        for (int j = -3; j <= 3; j++) {
            uint64_t n = b + (uint64_t)(int64_t)j;
            double u;
            memcpy(&u, &n, sizeof u);
            real_same(u);
        }
    }
    uint64_t x = 88172645463325252ull; /* random bit patterns, and random values in range */
    for (int i = 0; i < 300000; i++) {
        x ^= x << 13;
        x ^= x >> 7;
        x ^= x << 17;
        double d;
        memcpy(&d, &x, sizeof d);
        if (isfinite(d))
            real_same(d);
        real_same((double)(x >> 11) / (double)(1ull << (x % 63))); /* 2^53 down to 2^-10 */
        real_same((double)(x >> 11) / 9007199254740992.0 / (double)(1ull << (x % 14)));
    }
}

static void test_key_order(void **state)
{
    (void)state;
    json_t *o = json_object();
    const char *keys[] = {"b", "ab", "a", "", "\xc3\xa9", "B", "a\"", "aa", "z1", "z", "k\n", "m", "n", "o", "p", "q",
                          "r", "s", "t", "u"};
    for (size_t i = 0; i < sizeof keys / sizeof keys[0]; i++)
        json_object_set_new(o, keys[i], json_integer((json_int_t)i));
    json_object_setn_new(o, "a\0c", 3, json_true());
    same(o);
    json_t *small = json_pack("{s:i, s:i, s:[i, s, {}], s:{}}", "y", 1, "x", 2, "w", 3, "v", "u", "t");
    same(small);
    json_decref(small);
    json_decref(o);
    json_t *empty[] = {json_object(), json_array()};
    same(empty[0]);
    same(empty[1]);
    json_decref(empty[0]);
    json_decref(empty[1]);
}

/* what the ledger writes for an event: the object without kind and at, keys sorted */
static void test_except_equals_a_copy_without_the_keys(void **state)
{
    (void)state;
    json_t *ev = json_pack("{s:s, s:s, s:i, s:{s:s, s:b}, s:n, s:s}", "kind", "finished", "status", "x", "at", 200,
                           "args", "path", "f", "kind", 1, "code", "zeta", "last");
    static const char *const skip[] = {"kind", "at", NULL};
    json_t *copy = json_object();
    const char *k;
    json_t *v;
    json_object_foreach(ev, k, v)
    {
        if (strcmp(k, "kind") != 0 && strcmp(k, "at") != 0)
            json_object_set(copy, k, v);
    }
    for (int sort = 0; sort < 2; sort++) {
        char *want = json_dumps(copy, JSON_COMPACT | (sort ? JSON_SORT_KEYS : 0));
        char *got = abx_json_compact_except(ev, sort, skip, NULL);
        assert_non_null(got);
        assert_string_equal(got, want);
        free(want);
        free(got);
    }
    json_decref(copy);
    json_decref(ev);
}

static unsigned rnd(unsigned *s)
{
    *s = *s * 1103515245u + 12345u;
    return (*s >> 16) & 0x7fff;
}

static json_t *random_value(unsigned *s, int depth)
{
    static const char *pieces[] = {"a", "\"", "\\", "\n", "\x01", "\xc3\xa9", "\xe2\x82\xac", " ", "/", "key", "\x1f"};
    char buf[64];
    size_t n = 0;
    switch (depth > 4 ? rnd(s) % 5 : rnd(s) % 7) {
    case 0: return json_integer((json_int_t)rnd(s) * 7919 - 100000);
    case 1: return json_real((double)rnd(s) / 7.0 - 1000.0);
    case 2: return rnd(s) % 2 ? json_true() : json_null();
    case 3:
    case 4:
        for (unsigned k = rnd(s) % 8; k-- && n < 48;) {
            const char *p = pieces[rnd(s) % (sizeof pieces / sizeof pieces[0])];
            memcpy(buf + n, p, strlen(p));
            n += strlen(p);
        }
        return json_stringn(buf, n);
    case 5: {
        json_t *a = json_array();
        for (unsigned k = rnd(s) % 5; k--;)
            json_array_append_new(a, random_value(s, depth + 1));
        return a;
    }
    default: {
        json_t *o = json_object();
        for (unsigned k = rnd(s) % 20; k--;) {
            snprintf(buf, sizeof buf, "%c%u", 'a' + (int)(rnd(s) % 26), rnd(s) % 50);
            json_object_set_new(o, buf, random_value(s, depth + 1));
        }
        return o;
    }
    }
}

static void test_random_trees(void **state)
{
    (void)state;
    unsigned seed = 12345;
    for (int i = 0; i < 2000; i++) {
        json_t *v = random_value(&seed, 0);
        same(v);
        json_decref(v);
    }
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_scalars),
        cmocka_unit_test(test_every_control_and_escape),
        cmocka_unit_test(test_invalid_utf8_fails_like_jansson),
        cmocka_unit_test(test_long_strings_every_offset),
        cmocka_unit_test(test_reals_like_jansson),
        cmocka_unit_test(test_key_order),
        cmocka_unit_test(test_random_trees),
        cmocka_unit_test(test_except_equals_a_copy_without_the_keys),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
