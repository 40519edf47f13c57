/* fuzz_inject.c — what credential injection parses: the ${secret:NAME} template parser
 * and expansion (config/secrets.c), and the upstream response head and chunked-body
 * parsers of interception (sandbox/egress_inject.c). The first byte picks the target.
 * Invariants: the template parser moves forward and never past the end, a name it
 * returns is one it accepts again, expansion of a parsed template succeeds with every
 * name known; a response head never claims more than it was given, its framing is not
 * ambiguous; the chunk parser never consumes more than it was given nor returns payload
 * outside it. */
#include "config/secrets.h"
#include "sandbox/egress.h"
#include "sandbox/egress_tls.h"
#include "core/util.h"
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static void tpl(const uint8_t *d, size_t n)
{
    char *s = malloc(n + 1);
    memcpy(s, d, n);
    s[n] = '\0';
    size_t len = strlen(s), pos = 0, lit;
    char name[ABX_SECRET_NAME_MAX + 1];
    abx_secret v[16];
    abx_secrets sec = {v, 0};
    int r;
    while ((r = abx_secret_tpl_next(s, &pos, &lit, name)) > 0) {
        if (pos > len || strlen(name) > ABX_SECRET_NAME_MAX)
            abort();
        if (r == 1 && sec.n < 16 && !abx_secret_value(&sec, name)) {
            v[sec.n].name = strdup(name);
            v[sec.n].value = strdup("V");
            sec.n++;
        }
    }
    if (pos > len)
        abort();
    char err[200];
    char *out = abx_secret_expand(s, &sec, NULL, NULL, err, sizeof err);
    if (r == 0 && sec.n < 16 && !out)
        abort(); /* every reference was made known: expansion must succeed */
    abx_free(out);
    for (size_t i = 0; i < sec.n; i++) {
        free(v[i].name);
        free(v[i].value);
    }
    free(s);
}

static void resp(const uint8_t *d, size_t n)
{
    abx_http_resp r;
    int h = abx_egress_parse_resp((const char *)d, n, &r);
    if (h > 0 && ((size_t)h > n || (r.chunked && r.content_length >= 0) || r.status < 100 || r.status > 999))
        abort();
}

static void chunks(const uint8_t *d, size_t n)
{
    abx_chunked c = {0};
    size_t at = 0;
    while (at < n) {
        size_t step = 1 + d[at] % 7, used, off, dl; /* feed in small pieces */
        if (step > n - at)
            step = n - at;
        int st = abx_egress_chunk_step(&c, d + at, step, &used, &off, &dl);
        if (used > step || off + dl > step || (dl && off + dl > used))
            abort();
        if (st != ABX_CH_MORE)
            return;
        at += used ? used : step;
        if (!used)
            return;
    }
}

int LLVMFuzzerTestOneInput(const uint8_t *d, size_t n)
{
    if (n == 0)
        return 0;
    switch (d[0] % 3) {
    case 0: tpl(d + 1, n - 1); break;
    case 1: resp(d + 1, n - 1); break;
    default: chunks(d + 1, n - 1); break;
    }
    return 0;
}
