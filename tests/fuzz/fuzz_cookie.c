/* fuzz_cookie.c — libFuzzer target for the Cookie header parser (src/core/text.c), which
 * reads a browser's cookies on a port's own origin (pipeline/port_origin.c) and takes
 * abx's session cookie out before a request reaches the agent's server (ports_proxy.c).
 *
 * The input (up to its first NUL) is a Cookie header value:
 *  - abx_cookie_next yields pairs inside the input, in order, never empty, never holding
 *    ';', never starting or ending with a space or tab, and ends;
 *  - the pairs agree with a reference split written here (on ';', trimmed);
 *  - abx_cookie_get("abx_port") finds the first pair named exactly abx_port, as the
 *    reference does, and its value lies inside the input. */
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/text.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

static void fail(const char *what) { fprintf(stderr, "fuzz_cookie: %s\n", what), abort(); }

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    if (size > 4096)
        return 0;
    char *in = malloc(size + 1);
    if (!in)
        return 0;
    memcpy(in, data, size);
    in[size] = '\0';
    size_t n_in = strlen(in);
    /* the reference: split on ';', trim spaces and tabs, drop empty pieces */
    const char *ref[2048];
    size_t ref_len[2048], nref = 0;
    for (const char *s = in; *s && nref < 2048;) {
        const char *e = strchr(s, ';');
        size_t n = e ? (size_t)(e - s) : strlen(s);
        const char *a = s, *b = s + n;
        while (a < b && (*a == ' ' || *a == '\t'))
            a++;
        while (b > a && (b[-1] == ' ' || b[-1] == '\t'))
            b--;
        if (b > a) {
            ref[nref] = a;
            ref_len[nref++] = (size_t)(b - a);
        }
        s = e ? e + 1 : s + n;
    }
    const char *p = in, *pair;
    size_t len, k = 0, steps = 0;
    while (abx_cookie_next(&p, &pair, &len)) {
        if (++steps > n_in + 1)
            fail("does not end");
        if (pair < in || pair + len > in + n_in || len == 0)
            fail("pair outside the input or empty");
        if (memchr(pair, ';', len) || pair[0] == ' ' || pair[0] == '\t' || pair[len - 1] == ' ' ||
            pair[len - 1] == '\t')
            fail("pair holds ';' or untrimmed space");
        if (k < nref && (ref[k] != pair || ref_len[k] != len))
            fail("pair differs from the reference split");
        k++;
    }
    if (nref < 2048 && k != nref)
        fail("a different number of pairs than the reference");
    size_t vl = 0;
    const char *v = abx_cookie_get(in, "abx_port", &vl);
    const char *want = NULL;
    size_t wl = 0;
    for (size_t i = 0; i < nref && !want; i++)
        if (ref_len[i] >= 9 && memcmp(ref[i], "abx_port=", 9) == 0) {
            want = ref[i] + 9;
            wl = ref_len[i] - 9;
        }
    if (nref < 2048 && (v != want || (v && vl != wl)))
        fail("abx_cookie_get disagrees with the reference");
    free(in);
    return 0;
}
