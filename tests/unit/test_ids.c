/* test_ids.c — unit tests of src/core/ids.c: the op id grammar (v2.1), the segment-wise
 * prefix rule, reserved namespaces, conventional verbs, legacy-name mangling and the
 * capped edit distance used for did-you-mean. Random inputs come from a fixed-seed
 * generator so a failure reproduces. */
#include <stdarg.h>
#include <stddef.h>
#include <setjmp.h>
#include <stdint.h>
#include <cmocka.h>

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/core.h"

static uint64_t rng_state = 0x243f6a8885a308d3u;

static uint64_t rng_next(void)
{
    rng_state ^= rng_state >> 12;
    rng_state ^= rng_state << 25;
    rng_state ^= rng_state >> 27;
    return rng_state * 0x2545f4914f6cdd1du;
}

static unsigned rng_below(unsigned n) { return (unsigned)((rng_next() >> 33) % n); }

/* ---- abx_id_valid ------------------------------------------------------------------ */

static void expect_valid(const char *id)
{
    char err[256] = "untouched";
    if (!abx_id_valid(id, err, sizeof err))
        fail_msg("'%s' should be a valid id, got: %s", id, err);
}

/* Invalid, and the message names the id (or, for over-long ids, its first 40 bytes). */
static void expect_invalid(const char *id)
{
    char err[256] = "";
    if (abx_id_valid(id, err, sizeof err))
        fail_msg("'%s' should be refused", id);
    assert_true(err[0] != '\0');
    char named[48];
    snprintf(named, sizeof named, "%.40s", id);
    if (named[0] && !strstr(err, named))
        fail_msg("message for '%s' does not name it: %s", id, err);
}

static void test_id_valid_accepts(void **state)
{
    (void)state;
    expect_valid("core.health");
    expect_valid("files.read");
    expect_valid("a.b");
    expect_valid("a.b.c.d.e");            /* 5 segments: the maximum */
    expect_valid("core.ops.describe");
    expect_valid("x1.y_2.z__3");          /* digits and underscores after the first letter */
    expect_valid("a_.b_");                /* trailing underscore in a segment is allowed */
    expect_valid("custom.hello_world_v2");
}

static void test_id_valid_segment_count(void **state)
{
    (void)state;
    expect_invalid("core");               /* 1 segment */
    expect_invalid("a.b.c.d.e.f");        /* 6 segments */
    char err[256];
    assert_false(abx_id_valid("core", err, sizeof err));
    assert_non_null(strstr(err, "1 segment"));
    assert_false(abx_id_valid("a.b.c.d.e.f", err, sizeof err));
    assert_non_null(strstr(err, "6 segments"));
}

static void test_id_valid_rejects_characters(void **state)
{
    (void)state;
    expect_invalid("Core.health");        /* uppercase first letter */
    expect_invalid("core.Health");
    expect_invalid("core.healtH");        /* uppercase later in a segment */
    expect_invalid("core.he-alth");       /* hyphen */
    expect_invalid("core-x.health");
    expect_invalid("core..health");       /* empty segment */
    expect_invalid(".core.health");       /* empty first segment */
    expect_invalid("core.health.");       /* empty last segment */
    expect_invalid("core.9health");       /* leading digit */
    expect_invalid("9core.health");
    expect_invalid("core._health");       /* leading underscore */
    expect_invalid("core.hea lth");       /* space */
    expect_invalid("core.h\xc3\xa9");     /* non-ASCII */
    expect_invalid("core/health");
    expect_invalid("core.health*");
}

static void test_id_valid_empty_and_null(void **state)
{
    (void)state;
    char err[128] = "";
    assert_false(abx_id_valid("", err, sizeof err));
    assert_non_null(strstr(err, "empty"));
    err[0] = '\0';
    assert_false(abx_id_valid(NULL, err, sizeof err));
    assert_non_null(strstr(err, "empty"));
}

static void test_id_valid_length(void **state)
{
    (void)state;
    char id[ABX_ID_MAX + 8];
    /* "a...a.b" of exactly ABX_ID_MAX-1 = 127 characters is the longest valid id */
    memset(id, 'a', sizeof id);
    id[ABX_ID_MAX - 3] = '.';
    id[ABX_ID_MAX - 2] = 'b';
    id[ABX_ID_MAX - 1] = '\0';
    assert_int_equal(strlen(id), ABX_ID_MAX - 1);
    expect_valid(id);
    /* one more character is too long */
    id[ABX_ID_MAX - 1] = 'b';
    id[ABX_ID_MAX] = '\0';
    assert_int_equal(strlen(id), ABX_ID_MAX);
    expect_invalid(id);
    char err[256];
    assert_false(abx_id_valid(id, err, sizeof err));
    assert_non_null(strstr(err, "longer than"));
}

static void test_id_valid_small_errbuf(void **state)
{
    (void)state;
    /* a tiny (or absent) error buffer must not be overrun, and still refuse */
    char err[8];
    memset(err, 'x', sizeof err);
    assert_false(abx_id_valid("Core.health", err, 4));
    assert_int_equal(err[3], '\0');
    assert_int_equal(err[4], 'x');
    assert_false(abx_id_valid("Core.health", NULL, 0));
    assert_true(abx_id_valid("core.health", NULL, 0));
}

/* Reference grammar written independently: split on '.', check each segment. */
static bool ref_id_valid(const char *id)
{
    size_t n = strlen(id);
    if (n == 0 || n >= ABX_ID_MAX)
        return false;
    int segs = 0;
    const char *s = id;
    for (;;) {
        const char *dot = strchr(s, '.');
        size_t l = dot ? (size_t)(dot - s) : strlen(s);
        if (l == 0 || !(s[0] >= 'a' && s[0] <= 'z'))
            return false;
        for (size_t i = 1; i < l; i++)
            if (!((s[i] >= 'a' && s[i] <= 'z') || (s[i] >= '0' && s[i] <= '9') || s[i] == '_'))
                return false;
        segs++;
        if (!dot)
            break;
        s = dot + 1;
    }
    return segs >= 2 && segs <= 5;
}

static void test_id_valid_random_against_reference(void **state)
{
    (void)state;
    static const char alphabet[] = "abz09_.A-. ";
    char id[40];
    for (int iter = 0; iter < 20000; iter++) {
        size_t len = rng_below(sizeof id - 1);
        for (size_t i = 0; i < len; i++)
            id[i] = alphabet[rng_below(sizeof alphabet - 1)];
        id[len] = '\0';
        char err[256] = "";
        bool got = abx_id_valid(id, err, sizeof err);
        if (got != ref_id_valid(id))
            fail_msg("abx_id_valid(\"%s\") = %d, reference says %d", id, got, !got);
        if (!got && err[0] == '\0')
            fail_msg("refused \"%s\" without a message", id);
    }
}

/* ---- prefix, namespaces, verbs ------------------------------------------------------ */

static void test_id_is_prefix(void **state)
{
    (void)state;
    assert_true(abx_id_is_prefix("system.env", "system.env.get"));
    assert_true(abx_id_is_prefix("a.b", "a.b.c.d"));
    assert_false(abx_id_is_prefix("system.env.get", "system.env")); /* not symmetric */
    assert_false(abx_id_is_prefix("system.env", "system.env"));     /* equal is not a prefix */
    assert_false(abx_id_is_prefix("system.en", "system.env.get"));  /* segment-wise, not byte-wise */
    assert_false(abx_id_is_prefix("system.env", "system.envx.get"));
    assert_false(abx_id_is_prefix("files.read", "files.list"));
    assert_true(abx_id_is_prefix("files", "files.read"));           /* namespace selectors use it */
    assert_false(abx_id_is_prefix("file", "files.read"));
}

static void test_id_reserved_ns(void **state)
{
    (void)state;
    static const char *const reserved[] = {"core.x", "files.x", "commands.x", "process.x", "terminal.x",
                                           "system.x", "devtools.x", "browser.x", "agents.x", "ext.x",
                                           "ledger.x", "approvals.x", "kernels.x", "tools.x"};
    for (size_t i = 0; i < sizeof reserved / sizeof reserved[0]; i++)
        if (!abx_id_reserved_ns(reserved[i]))
            fail_msg("'%s' should be in a reserved namespace", reserved[i]);
    assert_true(abx_id_reserved_ns("files"));        /* bare namespace */
    assert_false(abx_id_reserved_ns("custom.files"));
    assert_false(abx_id_reserved_ns("file.read"));   /* whole-segment comparison */
    assert_false(abx_id_reserved_ns("filesx.read"));
    assert_false(abx_id_reserved_ns("cor.health"));
    assert_false(abx_id_reserved_ns("myapp.core.get"));
}

static void test_id_known_verb(void **state)
{
    (void)state;
    assert_true(abx_id_known_verb("files.read"));
    assert_true(abx_id_known_verb("core.health"));
    assert_true(abx_id_known_verb("a.b.c.list"));
    assert_true(abx_id_known_verb("custom.thing.get"));
    assert_true(abx_id_known_verb("get"));
    assert_false(abx_id_known_verb("custom.thing.frobnicate"));
    assert_false(abx_id_known_verb("custom.list.thing")); /* the LAST segment counts */
    assert_false(abx_id_known_verb("custom.lists"));
    assert_false(abx_id_known_verb("custom.lis"));
    assert_false(abx_id_known_verb("custom.LIST"));
}

/* ---- abx_id_mangle ------------------------------------------------------------------ */

static void expect_mangle(const char *in, const char *want)
{
    char out[ABX_ID_MAX];
    memset(out, 0x7f, sizeof out);
    if (!abx_id_mangle(in, out, sizeof out))
        fail_msg("mangle(\"%s\") failed, want \"%s\"", in, want);
    if (strcmp(out, want) != 0)
        fail_msg("mangle(\"%s\") = \"%s\", want \"%s\"", in, out, want);
}

static void test_id_mangle_examples(void **state)
{
    (void)state;
    expect_mangle("Hello-World.v2", "hello_world_v2");
    expect_mangle("9lives", "c_9lives");
    expect_mangle("--a--b--", "a_b");
    expect_mangle("build", "build");
    expect_mangle("RUN_TESTS", "run_tests");
    expect_mangle("a__b", "a_b");                /* runs of '_' collapse too */
    expect_mangle("_x_", "x");                   /* leading/trailing '_' trimmed */
    expect_mangle("  spaced out  ", "spaced_out");
    expect_mangle("caf\xc3\xa9 bar", "caf_bar"); /* non-ASCII bytes are separators */
    expect_mangle("-9", "c_9");                  /* leading digit after trimming */
    expect_mangle("a9", "a9");
    expect_mangle("x.9", "x_9");                 /* digit not at the start: no prefix */
}

static void test_id_mangle_nothing_left(void **state)
{
    (void)state;
    char out[32] = "sentinel";
    assert_false(abx_id_mangle("", out, sizeof out));
    assert_false(abx_id_mangle("---", out, sizeof out));
    assert_false(abx_id_mangle("___", out, sizeof out));
    assert_false(abx_id_mangle("\xff\xfe", out, sizeof out));
}

static void test_id_mangle_output_capacity(void **state)
{
    (void)state;
    char out[16];
    memset(out, 'Z', sizeof out);
    /* exactly fits: 5 chars + NUL in 6 bytes */
    assert_true(abx_id_mangle("abcde", out, 6));
    assert_string_equal(out, "abcde");
    /* one too many: refused, and nothing written past the given length */
    memset(out, 'Z', sizeof out);
    assert_false(abx_id_mangle("abcdef", out, 6));
    for (size_t i = 6; i < sizeof out; i++)
        assert_int_equal(out[i], 'Z');
    /* the "c_" prefix counts against the capacity */
    memset(out, 'Z', sizeof out);
    assert_false(abx_id_mangle("9abcd", out, 6));
    for (size_t i = 6; i < sizeof out; i++)
        assert_int_equal(out[i], 'Z');
    assert_false(abx_id_mangle("ab", out, 3)); /* capacity below 4 is refused outright */
}

/* Property: whatever the input, a successful mangle forms a valid id tail. */
static void test_id_mangle_random_forms_valid_ids(void **state)
{
    (void)state;
    char in[64], out[ABX_ID_MAX - 7], id[ABX_ID_MAX + 8];
    for (int iter = 0; iter < 20000; iter++) {
        size_t len = rng_below(sizeof in - 1);
        for (size_t i = 0; i < len; i++)
            in[i] = (char)(1 + rng_below(255));
        in[len] = '\0';
        if (!abx_id_mangle(in, out, sizeof out))
            continue;
        snprintf(id, sizeof id, "custom.%s", out);
        char err[256];
        if (!abx_id_valid(id, err, sizeof err))
            fail_msg("mangled output does not form a valid id: %s", err);
        /* idempotent: mangling a mangled name gives it back */
        char again[ABX_ID_MAX];
        assert_true(abx_id_mangle(out, again, sizeof again));
        assert_string_equal(again, out);
    }
}

/* ---- abx_edit_distance -------------------------------------------------------------- */

/* The reference: optimal string alignment (Levenshtein plus swaps of neighbours), the
 * measure did-you-mean uses so that "files.lsit" is one edit from "files.list". */
static int ref_levenshtein(const char *a, const char *b)
{
    size_t la = strlen(a), lb = strlen(b);
    int d[64][64];
    for (size_t i = 0; i <= la; i++)
        d[i][0] = (int)i;
    for (size_t j = 0; j <= lb; j++)
        d[0][j] = (int)j;
    for (size_t i = 1; i <= la; i++)
        for (size_t j = 1; j <= lb; j++) {
            int best = d[i - 1][j - 1] + (a[i - 1] != b[j - 1]);
            if (d[i - 1][j] + 1 < best)
                best = d[i - 1][j] + 1;
            if (d[i][j - 1] + 1 < best)
                best = d[i][j - 1] + 1;
            if (i > 1 && j > 1 && a[i - 1] == b[j - 2] && a[i - 2] == b[j - 1] && d[i - 2][j - 2] + 1 < best)
                best = d[i - 2][j - 2] + 1;
            d[i][j] = best;
        }
    return d[la][lb];
}

static void test_edit_distance_examples(void **state)
{
    (void)state;
    assert_int_equal(abx_edit_distance("", "", 5), 0);
    assert_int_equal(abx_edit_distance("files.read", "files.read", 2), 0);
    assert_int_equal(abx_edit_distance("files.lsit", "files.list", 3), 1); /* a swap is one edit */
    assert_int_equal(abx_edit_distance("kitten", "sitting", 5), 3);
    assert_int_equal(abx_edit_distance("abc", "", 5), 3);
    assert_int_equal(abx_edit_distance("", "abc", 5), 3);
    assert_int_equal(abx_edit_distance("files.reed", "files.read", 2), 1);
    /* capped at max+1 */
    assert_int_equal(abx_edit_distance("abcdef", "", 2), 3);
    assert_int_equal(abx_edit_distance("kitten", "sitting", 1), 2);
    assert_int_equal(abx_edit_distance("aaaa", "bbbb", 0), 1);
    /* too long strings are "far" */
    char big[200];
    memset(big, 'a', sizeof big - 1);
    big[sizeof big - 1] = '\0';
    assert_int_equal(abx_edit_distance(big, big, 2), 3);
}

/* Regression test, fixed since (src/core/ids.c abx_edit_distance): the header promises the result is "capped at
 * max+1", but when every row's minimum stays <= max the function returns the full
 * distance, which can exceed max+1: abx_edit_distance("xyab", "abzw", 2) returns 4. */
static void test_edit_distance_capped_at_max_plus_one(void **state)
{
    (void)state;
    assert_int_equal(abx_edit_distance("xyab", "abzw", 2), 3);
}

/* Exactness within max must hold; the final "capped at max+1" comparison fails because of
 * the regression described above (same root cause, found by the random inputs). */
static void test_edit_distance_random_against_reference(void **state)
{
    (void)state;
    char a[24], b[24];
    int bad = 0;
    char first[128] = "";
    for (int iter = 0; iter < 20000; iter++) {
        size_t la = rng_below(sizeof a - 1), lb = rng_below(sizeof b - 1);
        for (size_t i = 0; i < la; i++)
            a[i] = (char)('a' + rng_below(3));
        for (size_t i = 0; i < lb; i++)
            b[i] = (char)('a' + rng_below(3));
        a[la] = b[lb] = '\0';
        int max = (int)rng_below(6);
        int ref = ref_levenshtein(a, b);
        int want = ref <= max ? ref : max + 1;
        int got = abx_edit_distance(a, b, max);
        /* symmetric (once clamped: the unclamped excess is the bug reported below) */
        int rev = abx_edit_distance(b, a, max);
        assert_int_equal(got > max ? max + 1 : got, rev > max ? max + 1 : rev);
        /* exact whenever the true distance is within max (did-you-mean relies on it) */
        if (ref <= max)
            assert_int_equal(got, ref);
        else
            assert_true(got > max);
        if (got != want && bad++ == 0)
            snprintf(first, sizeof first, "(\"%s\", \"%s\", %d) = %d, want %d", a, b, max, got, want);
    }
    if (bad)
        fail_msg("regression: %d results not capped at max+1, first: %s", bad, first);
}

/* ---- abx_request_id_format ---------------------------------------------------------- */

static void expect_id_like_snprintf(unsigned long n)
{
    char got[ABX_REQUEST_ID_MAX + 8], want[64];
    memset(got, 'X', sizeof got);
    abx_request_id_format(got, "0a1b2c3d", n);
    snprintf(want, sizeof want, "%s-%08lx", "0a1b2c3d", n);
    assert_true(strlen(want) < ABX_REQUEST_ID_MAX);
    assert_string_equal(got, want);
    assert_int_equal(got[ABX_REQUEST_ID_MAX], 'X'); /* nothing written past the bound */
}

static void test_request_id_format(void **state)
{
    (void)state;
    static const unsigned long edges[] = {0, 1, 9, 10, 15, 16, 255, 0xfffffff, 0x10000000, 0xffffffff,
                                          0x100000000ul, 0x123456789abcul, ~0ul >> 4, ~0ul};
    for (size_t i = 0; i < sizeof edges / sizeof edges[0]; i++)
        expect_id_like_snprintf(edges[i]);
    for (int i = 0; i < 20000; i++)
        expect_id_like_snprintf((unsigned long)(rng_next() >> rng_below(64)));
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_id_valid_accepts),
        cmocka_unit_test(test_id_valid_segment_count),
        cmocka_unit_test(test_id_valid_rejects_characters),
        cmocka_unit_test(test_id_valid_empty_and_null),
        cmocka_unit_test(test_id_valid_length),
        cmocka_unit_test(test_id_valid_small_errbuf),
        cmocka_unit_test(test_id_valid_random_against_reference),
        cmocka_unit_test(test_id_is_prefix),
        cmocka_unit_test(test_id_reserved_ns),
        cmocka_unit_test(test_id_known_verb),
        cmocka_unit_test(test_id_mangle_examples),
        cmocka_unit_test(test_id_mangle_nothing_left),
        cmocka_unit_test(test_id_mangle_output_capacity),
        cmocka_unit_test(test_id_mangle_random_forms_valid_ids),
        cmocka_unit_test(test_edit_distance_examples),
        cmocka_unit_test(test_edit_distance_capped_at_max_plus_one),
        cmocka_unit_test(test_edit_distance_random_against_reference),
        cmocka_unit_test(test_request_id_format),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
