/* fuzz_glob.c — libFuzzer target for the pattern code of src/policy/paths.c.
 *
 * The input is "pattern NUL path". Every input runs through abx_glob_valid,
 * abx_glob_root and abx_glob_match (none may crash, whatever the bytes). When the
 * pattern is valid and the path canonical, abx_glob_match must agree with the
 * deliberately naive recursive matcher below, and every match must lie under the
 * pattern's jail root. This file owns only that oracle; it must never share code
 * with the matcher it checks (an oracle that reuses the code under test proves
 * nothing), and it must stay slow-but-obvious rather than clever. */
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "policy/paths.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

/* Inputs beyond this only make the naive oracle slow without finding more. */
#define MAX_INPUT 1024
/* The oracle is exponential on purpose; past this many steps we skip the compare. */
#define REF_BUDGET 300000L

/* ---------------------------------------------------- reference matcher ---- */

/* Bytes in the character at s: a well-formed UTF-8 sequence (decoded to a code
 * point and checked for overlong form, surrogates and range) or else one byte.
 * Written differently from paths.c on purpose (decode-then-check instead of
 * per-lead-byte ranges). Continuation bytes are >= 0x80, so this never walks past
 * a '/' or the terminating NUL. */
static size_t ref_clen(const char *s)
{
    const unsigned char *u = (const unsigned char *)s;
    size_t n;
    uint32_t cp;
    if (u[0] < 0x80)
        return 1;
    if ((u[0] & 0xE0) == 0xC0) {
        n = 2;
        cp = u[0] & 0x1F;
    } else if ((u[0] & 0xF0) == 0xE0) {
        n = 3;
        cp = u[0] & 0x0F;
    } else if ((u[0] & 0xF8) == 0xF0) {
        n = 4;
        cp = u[0] & 0x07;
    } else {
        return 1;
    }
    for (size_t i = 1; i < n; i++) {
        if ((u[i] & 0xC0) != 0x80)
            return 1;
        cp = (cp << 6) | (u[i] & 0x3F);
    }
    static const uint32_t min_cp[5] = {0, 0, 0x80, 0x800, 0x10000};
    if (cp < min_cp[n] || cp > 0x10FFFF || (cp >= 0xD800 && cp <= 0xDFFF))
        return 1;
    return n;
}

static int ref_path(const char *p, const char *t, long *budget);

/* Inside one segment: p and t point into their segments, which end at '/' or NUL.
 * Returns 1 match, 0 no match, -1 out of budget. */
static int ref_seg(const char *p, const char *t, long *budget)
{
    if (--*budget < 0)
        return -1;
    bool p_end = *p == '/' || *p == '\0';
    bool t_end = *t == '/' || *t == '\0';
    if (p_end)
        return t_end ? ref_path(p, t, budget) : 0;
    if (*p == '*') {
        int r = ref_seg(p + 1, t, budget); /* the star takes nothing more */
        if (r != 0)
            return r;
        return t_end ? 0 : ref_seg(p, t + ref_clen(t), budget); /* or one more char */
    }
    if (t_end)
        return 0;
    if (*p == '?')
        return ref_seg(p + 1, t + ref_clen(t), budget);
    size_t pl = ref_clen(p), tl = ref_clen(t);
    if (pl != tl || memcmp(p, t, pl) != 0)
        return 0;
    return ref_seg(p + pl, t + tl, budget);
}

/* At a segment boundary: p and t are "" or "/seg/seg...". */
static int ref_path(const char *p, const char *t, long *budget)
{
    if (--*budget < 0)
        return -1;
    if (*p == '\0')
        return *t == '\0';
    if (p[1] == '*' && p[2] == '*' && (p[3] == '/' || p[3] == '\0')) {
        int r = ref_path(p + 3, t, budget); /* `**` as zero segments */
        if (r != 0)
            return r;
        if (*t == '\0')
            return 0;
        const char *next = strchr(t + 1, '/'); /* or swallow one more segment */
        return ref_path(p, next ? next : t + strlen(t), budget);
    }
    if (*t == '\0')
        return 0;
    return ref_seg(p + 1, t + 1, budget);
}

static int ref_match(const char *pattern, const char *path)
{
    long budget = REF_BUDGET;
    /* "/" is the path with no segments at all; write it as "". */
    return ref_path(strcmp(pattern, "/") == 0 ? "" : pattern,
                    strcmp(path, "/") == 0 ? "" : path, &budget);
}

/* ------------------------------------------------------------- helpers ---- */

/* Canonical as abx_path_canon produces: absolute, no empty, "." or ".." segment,
 * no trailing slash except "/" itself. */
static bool is_canonical(const char *t)
{
    if (t[0] != '/')
        return false;
    if (t[1] == '\0')
        return true;
    const char *s = t + 1;
    for (;;) {
        const char *e = strchr(s, '/');
        size_t n = e ? (size_t)(e - s) : strlen(s);
        if (n == 0 || (n == 1 && s[0] == '.') || (n == 2 && s[0] == '.' && s[1] == '.'))
            return false;
        if (!e)
            return true;
        s = e + 1;
    }
}

static bool has_glob(const char *p)
{
    return strchr(p, '*') || strchr(p, '?');
}

static void fail(const char *what, const char *pattern, const char *path)
{
    fprintf(stderr, "fuzz_glob: %s\n  pattern: \"%s\"\n  path:    \"%s\"\n", what, pattern,
            path);
    abort();
}

/* ----------------------------------------------------------------- entry ---- */

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    if (size > MAX_INPUT)
        return 0;
    /* One copy, NUL-terminated twice over: pattern is up to the first NUL, path is
     * the rest up to the next NUL (or the end). */
    char *buf = malloc(size + 2);
    if (!buf)
        return 0;
    memcpy(buf, data, size);
    buf[size] = '\0';
    buf[size + 1] = '\0';
    const char *pattern = buf;
    const char *path = buf + strlen(buf) + 1;

    char err[96];
    bool valid = abx_glob_valid(pattern, err, sizeof err);
    if (!valid && err[0] == '\0')
        fail("invalid pattern without a message", pattern, path);
    bool got = abx_glob_match(pattern, path); /* must not crash even when invalid */
    char *root = abx_glob_root(pattern);
    if (valid != (root != NULL))
        fail("abx_glob_root disagrees with abx_glob_valid", pattern, path);

    if (valid) {
        /* A pattern without glob characters is a canonical path naming itself. */
        if (!has_glob(pattern) && !abx_glob_match(pattern, pattern))
            fail("literal pattern does not match itself", pattern, pattern);
        /* The root is itself a canonical path and a valid literal pattern. */
        if (!is_canonical(root) || has_glob(root) || !abx_glob_valid(root, NULL, 0) ||
            !abx_glob_match(root, root))
            fail("root is not a canonical literal path", pattern, root);
        if (is_canonical(path)) {
            int want = ref_match(pattern, path);
            if (want >= 0 && (want == 1) != got)
                fail(got ? "matched, reference says no" : "no match, reference says yes",
                     pattern, path);
            const char *rel = NULL;
            if (got && !abx_path_under(root, path, &rel))
                fail("a matched path lies outside the pattern's root", pattern, path);
        }
    }
    free(root);
    free(buf);
    return 0;
}
