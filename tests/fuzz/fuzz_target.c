/* fuzz_target.c — libFuzzer target for src/http/target.c: the step-0 request-target
 * check and query-string decoding.
 *
 * The input is a raw request target (any bytes, NULs included, length-delimited).
 *  1. Invariant: whenever abx_target_ok accepts, the path part (before the first '?')
 *     starts with '/', contains no "//", "/./", "/../", does not end in "/." or "/..",
 *     and contains no "%2f", "%2e", "%5c" in any case, no backslash, NUL, control byte
 *     or byte >= 0x80.
 *  2. Differential: abx_target_ok must agree exactly with ref_target_ok below, a
 *     segment-by-segment re-implementation of the rule in http.h (plus the stricter
 *     refusals the implementation documents: '#', space, and encoded '%' or control
 *     bytes in the path).
 *  3. abx_query_each over the query part (and over the whole input) must report exactly
 *     the non-empty '&'-separated pairs, decoded as the reference decoder says, and
 *     return -1 exactly when a pair holds a malformed escape; after an accepted target
 *     it must never return -1.
 * The references must stay independent of target.c. */
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "http/http.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

#define MAX_INPUT 4096

static const char *g_raw;
static size_t g_n;

static void fail(const char *what)
{
    fprintf(stderr, "fuzz_target: %s\n  target: \"", what);
    for (size_t i = 0; i < g_n; i++) {
        unsigned char c = (unsigned char)g_raw[i];
        fprintf(stderr, (c >= 0x20 && c < 0x7f && c != '"' && c != '\\') ? "%c" : "\\x%02x", c);
    }
    fprintf(stderr, "\"\n");
    abort();
}

static int hex(unsigned char c)
{
    if (c >= '0' && c <= '9')
        return c - '0';
    c = (unsigned char)(c | 0x20);
    return c >= 'a' && c <= 'f' ? c - 'a' + 10 : -1;
}

/* One path segment (between slashes), `last` when nothing follows it. */
static bool ref_segment(const char *s, size_t n, bool last)
{
    if (n == 0)
        return last; /* only a trailing slash (or "/" itself) may leave an empty segment */
    if ((n == 1 && s[0] == '.') || (n == 2 && s[0] == '.' && s[1] == '.'))
        return false;
    for (size_t i = 0; i < n; i++) {
        unsigned char c = (unsigned char)s[i];
        if (c < 0x20 || c >= 0x7f || c == '\\' || c == '#' || c == ' ')
            return false;
        if (c == '%') {
            if (n - i < 3) /* two hex digits must follow inside the segment */
                return false;
            int h = hex((unsigned char)s[i + 1]), l = hex((unsigned char)s[i + 2]);
            if (h < 0 || l < 0)
                return false;
            int v = h * 16 + l;
            if (v == '/' || v == '.' || v == '\\' || v == '%' || v < 0x20 || v == 0x7f)
                return false;
            i += 2;
        }
    }
    return true;
}

static bool ref_query(const char *q, size_t n)
{
    for (size_t i = 0; i < n; i++) {
        unsigned char c = (unsigned char)q[i];
        if (c <= 0x20 || c == 0x7f || c == '#')
            return false;
        if (c == '%') {
            if (n - i < 3 || hex((unsigned char)q[i + 1]) < 0 || hex((unsigned char)q[i + 2]) < 0)
                return false;
            i += 2;
        }
    }
    return true;
}

static bool ref_target_ok(const char *raw, size_t n, size_t *path_len)
{
    const char *qm = memchr(raw, '?', n);
    size_t pl = qm ? (size_t)(qm - raw) : n;
    *path_len = pl;
    if (pl == 0 || raw[0] != '/')
        return false;
    size_t start = 1;
    for (size_t i = 1; i <= pl; i++)
        if (i == pl || raw[i] == '/') {
            if (!ref_segment(raw + start, i - start, i == pl))
                return false;
            start = i + 1;
        }
    return qm ? ref_query(qm + 1, n - pl - 1) : true;
}

static bool contains_ci(const char *s, size_t n, const char *needle)
{
    size_t m = strlen(needle);
    for (size_t i = 0; i + m <= n; i++) {
        size_t k = 0;
        while (k < m && (s[i + k] | 0x20) == (needle[k] | 0x20))
            k++;
        if (k == m)
            return true;
    }
    return false;
}

static bool contains(const char *s, size_t n, const char *needle)
{
    size_t m = strlen(needle);
    for (size_t i = 0; i + m <= n; i++)
        if (memcmp(s + i, needle, m) == 0)
            return true;
    return false;
}

/* ---- query pairs ---- */

typedef struct walk {
    const char *q;
    size_t n;
    size_t pos;     /* where the reference expects the next pair to start */
    int calls;
} walk;

/* reference decoding of q[a..b): -1 if malformed, else writes into out */
static long ref_decode(const char *s, size_t n, char *out)
{
    size_t o = 0;
    for (size_t i = 0; i < n; i++) {
        if (s[i] == '%') {
            if (n - i < 3)
                return -1;
            int h = hex((unsigned char)s[i + 1]), l = hex((unsigned char)s[i + 2]);
            if (h < 0 || l < 0)
                return -1;
            out[o++] = (char)(h * 16 + l);
            i += 2;
        } else {
            out[o++] = s[i] == '+' ? ' ' : s[i];
        }
    }
    return (long)o;
}

/* The next non-empty pair at or after pos: [a, b). False when none is left. */
static bool next_pair(const walk *w, size_t pos, size_t *a, size_t *b)
{
    while (pos < w->n) {
        size_t e = pos;
        while (e < w->n && w->q[e] != '&')
            e++;
        if (e > pos) {
            *a = pos;
            *b = e;
            return true;
        }
        pos = e + 1;
    }
    return false;
}

static int on_pair(void *ud, const char *name, size_t nlen, const char *val, size_t vlen)
{
    walk *w = ud;
    size_t a, b;
    if (!next_pair(w, w->pos, &a, &b))
        fail("abx_query_each reported a pair the reference does not see");
    const char *pair = w->q + a;
    size_t len = b - a;
    const char *eq = memchr(pair, '=', len);
    size_t nl = eq ? (size_t)(eq - pair) : len;
    static char rn[MAX_INPUT + 1], rv[MAX_INPUT + 1];
    long dn = ref_decode(pair, nl, rn);
    long dv = eq ? ref_decode(eq + 1, len - nl - 1, rv) : 0;
    if (dn < 0 || dv < 0)
        fail("a pair with a malformed escape reached the callback");
    if ((size_t)dn != nlen || memcmp(rn, name, nlen) != 0)
        fail("decoded name differs from the reference");
    if ((size_t)dv != vlen || memcmp(rv, val, vlen) != 0)
        fail("decoded value differs from the reference");
    if (name[nlen] != '\0' || val[vlen] != '\0')
        fail("decoded name/value not NUL-terminated");
    w->pos = b + 1;
    w->calls++;
    return 0;
}

/* Run abx_query_each on q[0..n) and check it against the reference; returns its rc. */
static int check_query(const char *q, size_t n)
{
    /* exactly-sized heap copy: reads past n are caught by ASan */
    char *copy = malloc(n ? n : 1);
    if (!copy)
        return 0;
    memcpy(copy, q, n);
    walk w = {copy, n, 0, 0};
    int rc = abx_query_each(copy, n, on_pair, &w);
    /* what the reference expects: pairs in order until the first malformed one */
    size_t a, b, pos = 0;
    int want_calls = 0, want_rc = 0;
    static char tmp[MAX_INPUT + 1];
    while (next_pair(&w, pos, &a, &b)) {
        const char *eq = memchr(copy + a, '=', b - a);
        size_t nl = eq ? (size_t)(eq - (copy + a)) : b - a;
        if (ref_decode(copy + a, nl, tmp) < 0 || (eq && ref_decode(eq + 1, b - a - nl - 1, tmp) < 0)) {
            want_rc = -1;
            break;
        }
        want_calls++;
        pos = b + 1;
    }
    if (rc != want_rc)
        fail(rc == -1 ? "abx_query_each refused a well-formed query" : "abx_query_each accepted a malformed escape");
    if (w.calls != want_calls)
        fail("abx_query_each reported the wrong number of pairs");
    free(copy);
    return rc;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    if (size > MAX_INPUT)
        return 0;
    char *raw = malloc(size ? size : 1); /* exactly sized: no NUL terminator to lean on */
    if (!raw)
        return 0;
    memcpy(raw, data, size);
    g_raw = raw;
    g_n = size;

    bool ok = abx_target_ok(raw, size);
    size_t pl;
    bool want = ref_target_ok(raw, size, &pl);

    if (ok) {
        /* 1. the invariant, stated plainly */
        if (pl == 0 || raw[0] != '/')
            fail("accepted a target not starting with '/'");
        if (contains(raw, pl, "//") || contains(raw, pl, "/./") || contains(raw, pl, "/../"))
            fail("accepted a path with //, /./ or /../");
        if ((pl >= 2 && memcmp(raw + pl - 2, "/.", 2) == 0) || (pl >= 3 && memcmp(raw + pl - 3, "/..", 3) == 0))
            fail("accepted a path ending in /. or /..");
        if (contains_ci(raw, pl, "%2f") || contains_ci(raw, pl, "%2e") || contains_ci(raw, pl, "%5c"))
            fail("accepted a path with an encoded slash, dot or backslash");
        for (size_t i = 0; i < pl; i++) {
            unsigned char c = (unsigned char)raw[i];
            if (c < 0x20 || c >= 0x7f || c == '\\')
                fail("accepted a path with a control, non-ASCII or backslash byte");
        }
    }
    /* 2. differential */
    if (ok != want)
        fail(ok ? "abx_target_ok accepts, the reference refuses" : "abx_target_ok refuses, the reference accepts");

    /* 3. query decoding */
    if (pl < size) {
        int rc = check_query(raw + pl + 1, size - pl - 1);
        if (ok && rc == -1)
            fail("an accepted target has an undecodable query");
    }
    check_query(raw, size);

    /* percent-decoding never writes more than n+1 bytes */
    char *dst = malloc(size + 1);
    if (dst) {
        long dn = abx_pct_decode(raw, size, dst, false);
        if (dn > (long)size)
            fail("abx_pct_decode grew the input");
        free(dst);
    }
    free(raw);
    return 0;
}
