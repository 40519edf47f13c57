/* fuzz_id.c — libFuzzer target for src/core/ids.c.
 *
 * The input (up to its first NUL) is an op id candidate and a legacy command name:
 *  - abx_id_valid must agree with the grammar re-implemented below (split on '.',
 *    2–5 segments of [a-z][a-z0-9_]*, shorter than ABX_ID_MAX), and give a message
 *    whenever it refuses;
 *  - for a valid id, every proper segment-prefix is a prefix by abx_id_is_prefix and a
 *    byte-prefix that cuts a segment is not;
 *  - abx_id_mangle must agree with the reference mangler below, and a mangled name must
 *    form a valid id when prefixed "custom." (and mangle to itself again);
 *  - the input split at the first TAB gives two strings for abx_edit_distance, checked
 *    against a textbook Levenshtein: exact whenever the distance is within max, above
 *    max otherwise. (The stricter "capped at exactly max+1" is a known bug, covered by
 *    tests/unit/test_ids.c; it is not checked here so fuzzing can go on.)
 * The references must stay independent of ids.c. */
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/core.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

#define MAX_INPUT 512

static void fail(const char *what, const char *in)
{
    fprintf(stderr, "fuzz_id: %s\n  input: \"", what);
    for (const unsigned char *p = (const unsigned char *)in; *p; p++)
        fprintf(stderr, (*p >= 0x20 && *p < 0x7f && *p != '"' && *p != '\\') ? "%c" : "\\x%02x", *p);
    fprintf(stderr, "\"\n");
    abort();
}

static bool ref_valid(const char *id)
{
    size_t n = strlen(id);
    if (n == 0 || n >= ABX_ID_MAX)
        return false;
    int segs = 0;
    for (const char *s = id;;) {
        const char *dot = strchr(s, '.');
        size_t l = dot ? (size_t)(dot - s) : strlen(s);
        if (l == 0 || s[0] < 'a' || s[0] > 'z')
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

/* Reference mangler: collect the runs of ASCII letters/digits (lower-cased), join them
 * with '_', prefix "c_" if the result starts with a digit. Returns false when nothing
 * is left or the result (plus NUL) does not fit in outlen. */
static bool ref_mangle(const char *in, char *out, size_t outlen)
{
    char buf[3 * MAX_INPUT + 8];
    size_t o = 0;
    const char *p = in;
    while (*p) {
        while (*p && !((*p >= 'a' && *p <= 'z') || (*p >= 'A' && *p <= 'Z') || (*p >= '0' && *p <= '9')))
            p++;
        if (!*p)
            break;
        if (o)
            buf[o++] = '_';
        while ((*p >= 'a' && *p <= 'z') || (*p >= 'A' && *p <= 'Z') || (*p >= '0' && *p <= '9')) {
            buf[o++] = (char)((*p >= 'A' && *p <= 'Z') ? *p - 'A' + 'a' : *p);
            p++;
        }
    }
    buf[o] = '\0';
    if (o == 0 || outlen < 4)
        return false;
    char full[3 * MAX_INPUT + 16];
    snprintf(full, sizeof full, "%s%s", (buf[0] >= '0' && buf[0] <= '9') ? "c_" : "", buf);
    if (strlen(full) + 1 > outlen)
        return false;
    memcpy(out, full, strlen(full) + 1);
    return true;
}

/* the plain dynamic-programming reference: optimal string alignment distance */
static int ref_lev(const char *a, const char *b)
{
    size_t la = strlen(a), lb = strlen(b);
    static int d[65][65];
    for (size_t i = 0; i <= la; i++)
        d[i][0] = (int)i;
    for (size_t j = 0; j <= lb; j++)
        d[0][j] = (int)j;
    for (size_t i = 1; i <= la; i++)
        for (size_t j = 1; j <= lb; j++) {
            int v = d[i - 1][j - 1] + (a[i - 1] != b[j - 1]);
            if (d[i - 1][j] + 1 < v)
                v = d[i - 1][j] + 1;
            if (d[i][j - 1] + 1 < v)
                v = d[i][j - 1] + 1;
            if (i > 1 && j > 1 && a[i - 1] == b[j - 2] && a[i - 2] == b[j - 1] && d[i - 2][j - 2] + 1 < v)
                v = d[i - 2][j - 2] + 1; /* a swap of neighbours is one edit */
            d[i][j] = v;
        }
    return d[la][lb];
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    if (size > MAX_INPUT)
        return 0;
    char in[MAX_INPUT + 1];
    memcpy(in, data, size);
    in[size] = '\0';

    /* grammar */
    char err[256];
    err[0] = '\0';
    bool valid = abx_id_valid(in, err, sizeof err);
    if (valid != ref_valid(in))
        fail(valid ? "abx_id_valid accepts an id the grammar refuses" : "abx_id_valid refuses a grammatical id", in);
    if (!valid && err[0] == '\0')
        fail("refused without a message", in);
    if (abx_id_valid(in, NULL, 0) != valid)
        fail("result depends on the error buffer", in);

    /* prefix rule */
    if (valid) {
        if (abx_id_is_prefix(in, in))
            fail("an id is a prefix of itself", in);
        size_t n = strlen(in);
        for (size_t cut = 1; cut < n; cut++) {
            char pre[ABX_ID_MAX];
            memcpy(pre, in, cut);
            pre[cut] = '\0';
            bool want = in[cut] == '.';
            if (abx_id_is_prefix(pre, in) != want)
                fail(want ? "segment prefix not recognized" : "byte prefix taken for a segment prefix", in);
            if (abx_id_is_prefix(in, pre))
                fail("a longer id is a prefix of a shorter one", in);
        }
        (void)abx_id_reserved_ns(in);
        (void)abx_id_known_verb(in);
    }

    /* mangling */
    char out[ABX_ID_MAX - 7], want[ABX_ID_MAX - 7];
    memset(out, 0x5a, sizeof out);
    bool m = abx_id_mangle(in, out, sizeof out);
    bool rm = ref_mangle(in, want, sizeof want);
    if (m != rm)
        fail(m ? "mangle succeeds where the reference gives up" : "mangle gives up where the reference succeeds", in);
    if (m) {
        if (strcmp(out, want) != 0)
            fail("mangle differs from the reference", in);
        char id[ABX_ID_MAX + 16];
        snprintf(id, sizeof id, "custom.%s", out);
        if (!abx_id_valid(id, NULL, 0))
            fail("custom.<mangled> is not a valid id", in);
        char again[ABX_ID_MAX];
        if (!abx_id_mangle(out, again, sizeof again) || strcmp(again, out) != 0)
            fail("mangle is not idempotent", in);
    }
    /* a small output buffer must never be overrun */
    char tiny[8];
    memset(tiny, 0x5a, sizeof tiny);
    if (abx_id_mangle(in, tiny, 6) && strlen(tiny) > 5)
        fail("mangle wrote past outlen", in);
    if (tiny[6] != 0x5a || tiny[7] != 0x5a)
        fail("mangle wrote past outlen", in);

    /* edit distance */
    char *tab = strchr(in, '\t');
    if (tab) {
        *tab = '\0';
        const char *a = in, *b = tab + 1;
        if (strlen(a) <= 64 && strlen(b) <= 64) {
            int ref = ref_lev(a, b);
            for (int max = 0; max <= 4; max++) {
                int got = abx_edit_distance(a, b, max);
                if (ref <= max && got != ref)
                    fail("edit distance within max is not exact", in);
                if (ref > max && got <= max)
                    fail("edit distance above max reported within max", in);
            }
        }
    }
    return 0;
}
