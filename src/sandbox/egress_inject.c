/* egress_inject.c — inject rules (see egress_tls.h) and the pure parsers interception
 * reads upstream responses and chunked bodies with: bounded, no allocation. */
#include "sandbox/egress_tls.h"
#include "sandbox/egress.h"

#include "core/util.h"

#include <ctype.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

static bool is_token(const char *s)
{
    if (!*s || strlen(s) > 64)
        return false;
    for (; *s; s++)
        if (!isalnum((unsigned char)*s) && !strchr("!#$%&'*+-.^_`|~", *s))
            return false;
    return true;
}

/* headers the proxy frames requests with: an inject rule may not replace them */
static bool is_framing(const char *h)
{
    static const char *const no[] = {"host",       "content-length", "transfer-encoding", "connection",
                                     "keep-alive", "upgrade",        "te",                "trailer",
                                     "expect",     "proxy-connection", "proxy-authorization"};
    for (size_t i = 0; i < ABX_ARRAY_LEN(no); i++)
        if (strcasecmp(h, no[i]) == 0)
            return true;
    return false;
}

int abx_egress_inject_add(abx_egress_injects *l, const char *host, const char *header, const char *value, char *err,
                          size_t errlen)
{
    char h[ABX_EGRESS_HOST_MAX];
    if (!host || snprintf(h, sizeof h, "%s", host) >= (int)sizeof h || !abx_egress_host_norm(h) || strchr(h, '*')) {
        snprintf(err, errlen, "inject: 'host' must be a host name (no wildcard)");
        return -1;
    }
    if (!header || !is_token(header) || is_framing(header)) {
        snprintf(err, errlen, "inject: 'header' must be a header name other than the framing ones (Host, Content-Length...)");
        return -1;
    }
    if (!value || strpbrk(value, "\r\n") || strlen(value) > 8192) {
        snprintf(err, errlen, "inject: the value of header '%s' must be one line of at most 8 KiB", header);
        return -1;
    }
    abx_egress_inject *v = realloc(l->v, (l->n + 1) * sizeof *v);
    if (!v) {
        snprintf(err, errlen, "out of memory");
        return -1;
    }
    l->v = v;
    abx_egress_inject *r = &v[l->n];
    r->host = abx_strdup(h);
    r->header = abx_strdup(header);
    r->value = abx_strdup(value);
    if (!r->host || !r->header || !r->value) {
        abx_free(r->host);
        abx_free(r->header);
        abx_free(r->value);
        snprintf(err, errlen, "out of memory");
        return -1;
    }
    l->n++;
    return 0;
}

int abx_egress_inject_secret(abx_egress_injects *l, const char *secret)
{
    if (!secret || !*secret)
        return 0;
    for (size_t i = 0; i < l->nsecrets; i++)
        if (strcmp(l->secrets[i], secret) == 0)
            return 0;
    char **s = realloc(l->secrets, (l->nsecrets + 1) * sizeof *s);
    if (!s)
        return -1;
    l->secrets = s;
    if (!(s[l->nsecrets] = abx_strdup(secret)))
        return -1;
    l->nsecrets++;
    return 0;
}

static void wipe_free(char *s)
{
    if (s) {
        explicit_bzero(s, strlen(s));
        abx_free(s);
    }
}

int abx_egress_injects_copy(abx_egress_injects *to, const abx_egress_injects *from)
{
    char err[64];
    memset(to, 0, sizeof *to);
    for (size_t i = 0; from && i < from->n; i++)
        if (abx_egress_inject_add(to, from->v[i].host, from->v[i].header, from->v[i].value, err, sizeof err) != 0)
            return -1;
    for (size_t i = 0; from && i < from->nsecrets; i++)
        if (abx_egress_inject_secret(to, from->secrets[i]) != 0)
            return -1;
    return 0;
}

void abx_egress_injects_free(abx_egress_injects *l)
{
    for (size_t i = 0; i < l->n; i++) {
        abx_free(l->v[i].host);
        abx_free(l->v[i].header);
        wipe_free(l->v[i].value);
    }
    for (size_t i = 0; i < l->nsecrets; i++)
        wipe_free(l->secrets[i]);
    free(l->v);
    free(l->secrets);
    memset(l, 0, sizeof *l);
}

bool abx_egress_injects_host(const abx_egress_injects *l, const char *host)
{
    for (size_t i = 0; l && i < l->n; i++)
        if (strcmp(l->v[i].host, host) == 0)
            return true;
    return false;
}

/* ---- an HTTP/1.x response head ---- */

static bool hdr_is(const char *h, size_t n, const char *name, const char **val, size_t *vlen)
{
    size_t k = strlen(name);
    if (n < k + 1 || h[k] != ':' || strncasecmp(h, name, k) != 0)
        return false;
    const char *v = h + k + 1, *e = h + n;
    while (v < e && (*v == ' ' || *v == '\t'))
        v++;
    while (e > v && (e[-1] == ' ' || e[-1] == '\t'))
        e--;
    *val = v;
    *vlen = (size_t)(e - v);
    return true;
}

static bool parse_resp_header(const char *h, size_t n, abx_http_resp *r)
{
    const char *v;
    size_t vl;
    if (memchr(h, '\0', n) || memchr(h, '\r', n))
        return false;
    if (hdr_is(h, n, "content-length", &v, &vl)) {
        int64_t x = 0;
        if (vl == 0 || vl > 18 || r->content_length >= 0)
            return false; /* empty, absurd or duplicate: ambiguous framing */
        for (size_t i = 0; i < vl; i++) {
            if (!isdigit((unsigned char)v[i]))
                return false;
            x = x * 10 + (v[i] - '0');
        }
        r->content_length = x;
    } else if (hdr_is(h, n, "transfer-encoding", &v, &vl)) {
        if (!(vl == 8 && strncasecmp(v, "identity", 8) == 0))
            r->chunked = true; /* only chunked is understood; anything else is refused below */
        if (!(vl >= 7 && strncasecmp(v + vl - 7, "chunked", 7) == 0) && r->chunked)
            return false;
    } else if (hdr_is(h, n, "connection", &v, &vl)) {
        if (vl == 5 && strncasecmp(v, "close", 5) == 0)
            r->close = true;
    }
    return true;
}

int abx_egress_parse_resp(const char *buf, size_t len, abx_http_resp *r)
{
    memset(r, 0, sizeof *r);
    r->content_length = -1;
    size_t lim = len < ABX_EGRESS_HEAD_MAX ? len : ABX_EGRESS_HEAD_MAX;
    const char *end = memmem(buf, lim, "\r\n\r\n", 4);
    if (!end)
        return len >= ABX_EGRESS_HEAD_MAX ? ABX_EG_BAD : ABX_EG_MORE;
    size_t head = (size_t)(end - buf) + 4;
    if (head < 16 || memcmp(buf, "HTTP/1.", 7) != 0 || (buf[7] != '0' && buf[7] != '1') || buf[8] != ' ' ||
        !isdigit((unsigned char)buf[9]) || !isdigit((unsigned char)buf[10]) || !isdigit((unsigned char)buf[11]) ||
        (buf[12] != ' ' && buf[12] != '\r'))
        return ABX_EG_BAD;
    r->status = (buf[9] - '0') * 100 + (buf[10] - '0') * 10 + (buf[11] - '0');
    if (r->status < 100)
        return ABX_EG_BAD;
    r->close = buf[7] == '0';
    const char *p = memmem(buf, head, "\r\n", 2) + 2;
    while (p < buf + head - 2) {
        const char *e = memmem(p, (size_t)(buf + head - p), "\r\n", 2);
        if (!e || e == p || *p == ' ' || *p == '\t' || !parse_resp_header(p, (size_t)(e - p), r))
            return ABX_EG_BAD;
        p = e + 2;
    }
    if (r->chunked && r->content_length >= 0)
        return ABX_EG_BAD;
    r->head_len = head;
    return (int)head;
}

/* ---- chunked bodies ---- */

enum { CS_SIZE, CS_EXT, CS_SIZE_LF, CS_DATA, CS_DATA_CR, CS_DATA_LF, CS_TRAILER, CS_TRAILER_LF, CS_DONE };

static int hexval(unsigned char ch)
{
    if (isdigit(ch))
        return ch - '0';
    ch = (unsigned char)tolower(ch);
    return ch >= 'a' && ch <= 'f' ? ch - 'a' + 10 : -1;
}

int abx_egress_chunk_step(abx_chunked *c, const unsigned char *in, size_t len, size_t *used, size_t *doff,
                          size_t *dlen)
{
    size_t i = 0;
    *doff = *dlen = *used = 0;
    while (i < len) {
        unsigned char ch = in[i];
        switch (c->state) {
        case CS_SIZE:
            if (hexval(ch) >= 0) {
                if (c->linelen++ >= 15)
                    return ABX_CH_BAD;
                c->left = c->left * 16 + (uint64_t)hexval(ch);
            } else if (c->linelen && (ch == ';' || ch == ' ' || ch == '\t')) {
                c->state = CS_EXT;
            } else if (c->linelen && ch == '\r') {
                c->state = CS_SIZE_LF;
            } else {
                return ABX_CH_BAD;
            }
            i++;
            break;
        case CS_EXT:
            if (ch == '\r')
                c->state = CS_SIZE_LF;
            else if (ch == '\n' || ch == 0 || ++c->linelen > 4096)
                return ABX_CH_BAD;
            i++;
            break;
        case CS_SIZE_LF:
            if (ch != '\n')
                return ABX_CH_BAD;
            i++;
            c->linelen = 0;
            c->state = c->left ? CS_DATA : CS_TRAILER;
            break;
        case CS_DATA: {
            size_t k = (uint64_t)(len - i) < c->left ? len - i : (size_t)c->left;
            c->left -= k;
            if (!c->left)
                c->state = CS_DATA_CR;
            *doff = i;
            *dlen = k;
            *used = i + k;
            return ABX_CH_MORE;
        }
        case CS_DATA_CR:
            if (ch != '\r')
                return ABX_CH_BAD;
            c->state = CS_DATA_LF;
            i++;
            break;
        case CS_DATA_LF:
            if (ch != '\n')
                return ABX_CH_BAD;
            c->state = CS_SIZE;
            c->left = 0;
            c->linelen = 0;
            i++;
            break;
        case CS_TRAILER: /* trailer lines until an empty one; linelen counts the line */
            if (ch == '\r') {
                c->state = CS_TRAILER_LF;
            } else if (ch == '\n' || ++c->linelen > 4096) {
                return ABX_CH_BAD;
            }
            i++;
            break;
        case CS_TRAILER_LF:
            if (ch != '\n')
                return ABX_CH_BAD;
            i++;
            if (c->linelen == 0) {
                c->state = CS_DONE;
                *used = i;
                return ABX_CH_DONE;
            }
            c->linelen = 0;
            c->state = CS_TRAILER;
            break;
        default:
            *used = i;
            return ABX_CH_DONE;
        }
    }
    *used = i;
    return c->state == CS_DONE ? ABX_CH_DONE : ABX_CH_MORE;
}
