/* fuzz_paths.c — libFuzzer target for abx_path_canon (src/policy/paths.c), the
 * canonicalization every path parameter goes through before the policy sees it.
 *
 * The first input byte picks the anchor: "/" (so the input may walk the real, read-only
 * file system — symlinks in /proc, /etc, /usr included) or a directory that does not
 * exist. The rest is the path. Invariants:
 *  - -EINVAL exactly for an empty (C) string; otherwise 0, -ENAMETOOLONG or -ELOOP;
 *  - a result is absolute, has no "//", no "." or ".." segment and no trailing slash
 *    (except "/"), and is at most 4095 bytes;
 *  - canonicalizing a result again gives the same result (a fixpoint);
 *  - under the missing anchor, for input without ".." segments and not starting with
 *    '/', the result equals the lexical reference below (nothing there exists, so no
 *    symlink can be involved).
 * The reference must stay independent of paths.c. */
#include <errno.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/util.h"
#include "policy/paths.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

#define MISSING "/nonexistent-abx-fuzz-root"

static void check_shape(const char *in, const char *out)
{
    size_t n = strlen(out);
    bool bad = n == 0 || out[0] != '/' || n > 4095 || strstr(out, "//") || (n > 1 && out[n - 1] == '/') ||
               strstr(out, "/./") || strstr(out, "/../") || (n >= 2 && strcmp(out + n - 2, "/.") == 0) ||
               (n >= 3 && strcmp(out + n - 3, "/..") == 0);
    if (bad) {
        fprintf(stderr, "canon(%s) = \"%s\" is not canonical\n", in, out);
        abort();
    }
}

/* MISSING + "/" + input with "" and "." segments dropped (input has no ".."). */
static char *ref_lexical(const char *in)
{
    size_t cap = strlen(MISSING) + strlen(in) + 2;
    char *out = malloc(cap);
    if (!out)
        return NULL;
    size_t o = (size_t)snprintf(out, cap, "%s", MISSING);
    const char *p = in;
    while (*p) {
        const char *s = p;
        while (*p && *p != '/')
            p++;
        size_t len = (size_t)(p - s);
        if (len && !(len == 1 && s[0] == '.')) {
            out[o++] = '/';
            memcpy(out + o, s, len);
            o += len;
        }
        if (*p == '/')
            p++;
    }
    out[o] = '\0';
    return out;
}

static bool has_dotdot(const char *in)
{
    for (const char *p = in; *p;) {
        const char *s = p;
        while (*p && *p != '/')
            p++;
        if (p - s == 2 && s[0] == '.' && s[1] == '.')
            return true;
        if (*p == '/')
            p++;
    }
    return false;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    if (size < 1 || size > 6000)
        return 0;
    const char *anchor = (data[0] & 1) ? MISSING : "/";
    size_t n = size - 1;
    char *in = malloc(n + 1);
    if (!in)
        return 0;
    memcpy(in, data + 1, n);
    in[n] = '\0';
    char *out = NULL;
    int rc = abx_path_canon(anchor, in, &out);
    /* a NUL inside cuts the C string: only an empty one is -EINVAL */
    if ((in[0] == '\0') != (rc == -EINVAL)) {
        fprintf(stderr, "canon(\"%s\") = %d\n", in, rc);
        abort();
    }
    if (rc != 0 && rc != -EINVAL && rc != -ENAMETOOLONG && rc != -ELOOP) {
        fprintf(stderr, "canon(\"%s\") gave an unexpected %d\n", in, rc);
        abort();
    }
    if (rc == 0) {
        check_shape(in, out);
        char *again = NULL;
        int rc2 = abx_path_canon("/", out, &again);
        if (rc2 != 0 || strcmp(again, out) != 0) {
            fprintf(stderr, "canon is not a fixpoint: \"%s\" -> \"%s\" -> \"%s\" (%d)\n", in, out,
                    again ? again : "", rc2);
            abort();
        }
        abx_free(again);
        if (anchor[1] && in[0] != '/' && !has_dotdot(in)) {
            char *want = ref_lexical(in);
            if (want && strcmp(want, out) != 0) {
                fprintf(stderr, "canon(\"%s\") under a missing root = \"%s\", want \"%s\"\n", in, out, want);
                abort();
            }
            free(want);
        }
    }
    abx_free(out);
    free(in);
    return 0;
}
