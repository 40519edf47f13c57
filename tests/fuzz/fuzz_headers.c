/* fuzz_headers.c — libFuzzer target for the header rules of step 0 (src/http/target.c:
 * abx_headers_add / abx_headers_check), the part of HTTP desync defence abx owns on top
 * of libmicrohttpd.
 *
 * The input is a header block: lines "name:value" split at '\n' (the first ':' splits;
 * a line without one is a name with an empty value; any byte may appear, NUL too, as
 * the value's length says). Invariants, checked against a reference written here:
 *  - a header is refused exactly when its name is empty or holds a non-token byte, or
 *    its value holds a control byte other than TAB;
 *  - after all headers are accepted, the set is refused exactly when Content-Length,
 *    Transfer-Encoding, Host or Authorization repeats, Content-Length and
 *    Transfer-Encoding both appear, Transfer-Encoding is not "chunked" (any case), or
 *    Content-Length is not 1–18 ASCII digits; otherwise clen is that number or -1;
 *  - prefer_wait is always within 0..300.
 * The reference must stay independent of target.c. */
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include "http/http.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

static bool ref_tchar(unsigned char c)
{
    if (c >= '0' && c <= '9')
        return true;
    if ((c | 0x20) >= 'a' && (c | 0x20) <= 'z')
        return true;
    switch (c) {
    case '!': case '#': case '$': case '%': case '&': case '\'': case '*': case '+':
    case '-': case '.': case '^': case '_': case '`': case '|': case '~':
        return true;
    default:
        return false;
    }
}

static bool ieq(const char *a, size_t an, const char *b)
{
    size_t bn = strlen(b);
    if (an != bn)
        return false;
    for (size_t i = 0; i < an; i++) {
        unsigned char x = (unsigned char)a[i], y = (unsigned char)b[i];
        if (x >= 'A' && x <= 'Z')
            x = (unsigned char)(x + 32);
        if (y >= 'A' && y <= 'Z')
            y = (unsigned char)(y + 32);
        if (x != y)
            return false;
    }
    return true;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    if (size > 8192)
        return 0;
    char *buf = malloc(size + 1);
    if (!buf)
        return 0;
    memcpy(buf, data, size);
    buf[size] = '\0';
    abx_headers h;
    memset(&h, 0, sizeof h);
    int n_cl = 0, n_te = 0, n_host = 0, n_auth = 0;
    const char *cl = NULL, *te = NULL;
    size_t cl_len = 0, te_len = 0;
    bool refused = false;
    /* lines are NUL-terminated in place, as the transport hands them over */
    char *p = buf, *end = buf + size;
    while (p < end && !refused) {
        char *nl = memchr(p, '\n', (size_t)(end - p));
        char *line_end = nl ? nl : end;
        *line_end = '\0';
        char *colon = memchr(p, ':', (size_t)(line_end - p));
        size_t nlen = colon ? (size_t)(colon - p) : (size_t)(line_end - p);
        char *value = colon ? colon + 1 : line_end;
        size_t vlen = (size_t)(line_end - value);
        if (colon)
            *colon = '\0';
        bool want_ok = nlen > 0;
        for (size_t i = 0; i < nlen; i++)
            want_ok = want_ok && ref_tchar((unsigned char)p[i]);
        for (size_t i = 0; i < vlen; i++)
            want_ok = want_ok && !((unsigned char)value[i] < 0x20 && value[i] != '\t');
        bool got = abx_headers_add(&h, p, nlen, value, vlen);
        if (got != want_ok) {
            fprintf(stderr, "header add: got %d want %d (name %zu bytes, value %zu bytes)\n", got, want_ok, nlen, vlen);
            abort();
        }
        if (!got) {
            if (!h.why[0])
                abort(); /* a refusal always says why */
            refused = true;
            break;
        }
        if (ieq(p, nlen, "content-length"))
            n_cl++, cl = value, cl_len = strlen(value);
        else if (ieq(p, nlen, "transfer-encoding"))
            n_te++, te = value, te_len = strlen(value);
        else if (ieq(p, nlen, "host"))
            n_host++;
        else if (ieq(p, nlen, "authorization"))
            n_auth++;
        if (h.prefer_wait < 0 || h.prefer_wait > 300)
            abort();
        p = line_end + 1;
    }
    if (!refused) {
        bool want = !(n_cl > 1 || n_te > 1 || (n_cl && n_te) || n_host > 1 || n_auth > 1);
        if (want && te && !ieq(te, te_len, "chunked"))
            want = false;
        int64_t want_len = -1;
        if (want && cl) {
            bool digits = cl_len >= 1 && cl_len <= 18;
            for (size_t i = 0; digits && i < cl_len; i++)
                digits = cl[i] >= '0' && cl[i] <= '9';
            if (!digits)
                want = false;
            else
                for (size_t i = 0, v = 0; i < cl_len; i++)
                    want_len = (int64_t)(v = v * 10 + (size_t)(cl[i] - '0'));
        }
        int64_t clen = 12345;
        bool got = abx_headers_check(&h, &clen);
        if (got != want || (got && clen != want_len)) {
            fprintf(stderr, "headers check: got %d (clen %lld) want %d (clen %lld)\n", got, (long long)clen, want,
                    (long long)want_len);
            abort();
        }
        if (!got && !h.why[0])
            abort();
    }
    free(buf);
    return 0;
}
