/* target.c — step 0b: the raw request target is checked before anything decodes it,
 * and query strings are decoded here. Pure byte functions (fuzzed). */
#include "http/http.h"
#include <stdio.h>
#include <stdlib.h>
#include <strings.h>
#include <string.h>

static int hexval(unsigned char c)
{
    if (c >= '0' && c <= '9')
        return c - '0';
    if (c >= 'a' && c <= 'f')
        return c - 'a' + 10;
    if (c >= 'A' && c <= 'F')
        return c - 'A' + 10;
    return -1;
}

bool abx_target_ok(const char *raw, size_t n)
{
    if (n == 0 || raw[0] != '/')
        return false;
    size_t qpos = n;
    for (size_t i = 0; i < n; i++)
        if (raw[i] == '?') {
            qpos = i;
            break;
        }
    /* path part */
    for (size_t i = 0; i < qpos; i++) {
        unsigned char c = (unsigned char)raw[i];
        if (c < 0x20 || c == 0x7f || c >= 0x80 || c == '\\' || c == '#' || c == ' ')
            return false;
        if (c == '%') {
            if (i + 2 >= qpos) /* two hex digits must follow inside the path */
                return false;
            int h = hexval((unsigned char)raw[i + 1]), l = hexval((unsigned char)raw[i + 2]);
            if (h < 0 || l < 0)
                return false;
            int v = h * 16 + l;
            if (v == '/' || v == '.' || v == '\\' || v < 0x20 || v == 0x7f || v == '%')
                return false;
            i += 2;
            continue;
        }
        if (c == '/') {
            /* segment starting here: refuse empty, "." and ".." segments */
            size_t j = i + 1;
            if (j < qpos && raw[j] == '/')
                return false;
            if (j < qpos && raw[j] == '.') {
                if (j + 1 == qpos || raw[j + 1] == '/')
                    return false;
                if (raw[j + 1] == '.' && (j + 2 == qpos || raw[j + 2] == '/'))
                    return false;
            }
        }
    }
    /* query part */
    for (size_t i = qpos + 1; i < n; i++) {
        unsigned char c = (unsigned char)raw[i];
        if (c < 0x21 || c == 0x7f || c == '#')
            return false;
        if (c == '%') {
            if (i + 2 >= n)
                return false;
            if (hexval((unsigned char)raw[i + 1]) < 0 || hexval((unsigned char)raw[i + 2]) < 0)
                return false;
            i += 2;
        }
    }
    return true;
}

long abx_pct_decode(const char *src, size_t n, char *dst, bool plus_space)
{
    size_t o = 0;
    for (size_t i = 0; i < n; i++) {
        char c = src[i];
        if (c == '%') {
            if (i + 2 >= n)
                return -1;
            int h = hexval((unsigned char)src[i + 1]), l = hexval((unsigned char)src[i + 2]);
            if (h < 0 || l < 0)
                return -1;
            dst[o++] = (char)(h * 16 + l);
            i += 2;
        } else if (c == '+' && plus_space) {
            dst[o++] = ' ';
        } else {
            dst[o++] = c;
        }
    }
    dst[o] = '\0';
    return (long)o;
}

int abx_query_each(const char *q, size_t n, abx_query_cb cb, void *ud)
{
    char stackbuf[1024];
    size_t i = 0;
    while (i < n) {
        size_t start = i;
        while (i < n && q[i] != '&')
            i++;
        size_t len = i - start;
        i++; /* skip '&' */
        if (len == 0)
            continue;
        const char *pair = q + start;
        const char *eq = memchr(pair, '=', len);
        size_t nl = eq ? (size_t)(eq - pair) : len;
        size_t vl = eq ? len - nl - 1 : 0;
        char *buf = len + 2 <= sizeof stackbuf ? stackbuf : NULL;
        char *heap = NULL;
        if (!buf) {
            heap = malloc(len + 2);
            if (!heap)
                return -1;
            buf = heap;
        }
        long dn = abx_pct_decode(pair, nl, buf, true);
        long dv = dn < 0 ? -1 : abx_pct_decode(eq ? eq + 1 : "", vl, buf + dn + 1, true);
        int rc = 0;
        if (dn < 0 || dv < 0)
            rc = -1;
        else
            rc = cb(ud, buf, (size_t)dn, buf + dn + 1, (size_t)dv);
        free(heap);
        if (rc)
            return rc;
    }
    return 0;
}

/* ---- headers ---- */

static bool token_char(unsigned char ch)
{
    return (ch >= 'a' && ch <= 'z') || (ch >= 'A' && ch <= 'Z') || (ch >= '0' && ch <= '9') ||
           (ch && strchr("!#$%&'*+-.^_`|~", ch) != NULL);
}

static bool name_is(const char *name, size_t nlen, const char *want)
{
    return strlen(want) == nlen && strncasecmp(name, want, nlen) == 0;
}

/* "wait=N" anywhere in a Prefer value: N clamped to 0..300, no overflow */
static int prefer_wait(const char *v)
{
    const char *w = v ? strstr(v, "wait=") : NULL;
    if (!w)
        return 0;
    int n = 0;
    for (const char *p = w + 5; *p >= '0' && *p <= '9'; p++)
        if ((n = n * 10 + (*p - '0')) > 300)
            return 300;
    return n;
}

bool abx_headers_add(abx_headers *h, const char *name, size_t nlen, const char *value, size_t vlen)
{
    if (nlen == 0) {
        snprintf(h->why, sizeof h->why, "empty header name");
        return false;
    }
    for (size_t i = 0; i < nlen; i++)
        if (!token_char((unsigned char)name[i])) {
            snprintf(h->why, sizeof h->why, "header name has an invalid character (space before the colon?)");
            return false;
        }
    for (size_t i = 0; value && i < vlen; i++)
        if ((unsigned char)value[i] < 0x20 && value[i] != '\t') {
            snprintf(h->why, sizeof h->why, "header value has a control character");
            return false;
        }
    if (!value)
        value = "";
    if (name_is(name, nlen, "Content-Length")) {
        h->n_cl++;
        h->cl = value;
    } else if (name_is(name, nlen, "Transfer-Encoding")) {
        h->n_te++;
        h->te = value;
    } else if (name_is(name, nlen, "Host")) {
        h->n_host++;
        h->host = value;
    } else if (name_is(name, nlen, "Origin")) {
        h->origin = value;
    } else if (name_is(name, nlen, "Content-Type")) {
        h->content_type = value;
    } else if (name_is(name, nlen, "Authorization")) {
        h->n_auth++;
        if (strncasecmp(value, "Bearer ", 7) == 0 && value[7])
            h->bearer = value + 7;
        else
            h->auth_bad_scheme = true;
    } else if (name_is(name, nlen, "Idempotency-Key")) {
        h->idem_key = value;
    } else if (name_is(name, nlen, "Prefer")) {
        h->prefer_wait = prefer_wait(value);
    } else if (name_is(name, nlen, "Sec-WebSocket-Key")) {
        h->ws_key = value;
    } else if (name_is(name, nlen, "Upgrade")) {
        h->ws_upgrade = strcasecmp(value, "websocket") == 0;
    } else if (name_is(name, nlen, "Last-Event-ID")) {
        h->last_event_id = value;
    } else if (name_is(name, nlen, "X-Access-Token")) {
        h->x_token = value;
    } else if (name_is(name, nlen, "Cookie")) {
        h->cookie = value;
    }
    return true;
}

bool abx_headers_check(abx_headers *h, int64_t *clen)
{
    *clen = -1;
    if (h->n_cl > 1 || h->n_te > 1 || (h->n_cl && h->n_te) || h->n_host > 1 || h->n_auth > 1) {
        snprintf(h->why, sizeof h->why,
                 "ambiguous framing or duplicate headers (Content-Length, Transfer-Encoding, Host, Authorization)");
        return false;
    }
    if (h->te && strcasecmp(h->te, "chunked") != 0) {
        snprintf(h->why, sizeof h->why, "only Transfer-Encoding: chunked is accepted");
        return false;
    }
    if (h->cl) {
        size_t n = strlen(h->cl);
        if (!n || strspn(h->cl, "0123456789") != n || n > 18) {
            snprintf(h->why, sizeof h->why, "Content-Length must be digits only");
            return false;
        }
        *clen = strtoll(h->cl, NULL, 10);
    }
    return true;
}
