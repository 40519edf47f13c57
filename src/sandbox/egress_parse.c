/* egress_parse.c — the bounded parsers of the egress proxy (see egress.h): an HTTP/1.x
 * proxy request head, a SOCKS5 greeting and request, and the server name of a TLS
 * ClientHello. Pure: no allocation, no I/O; every read is checked against the length. */
#include "sandbox/egress.h"

#include <arpa/inet.h>
#include <ctype.h>
#include <stdio.h>
#include <string.h>
#include <strings.h>
#include <sys/socket.h>

/* ---- HTTP ---- */

static bool copy_host(const char *s, size_t n, char out[ABX_EGRESS_HOST_MAX])
{
    if (n == 0 || n >= ABX_EGRESS_HOST_MAX || memchr(s, '\0', n))
        return false;
    memcpy(out, s, n);
    out[n] = '\0';
    return abx_egress_host_norm(out);
}

/* "host", "host:port", "[v6]" or "[v6]:port"; no userinfo. Without a port: defport, or
 * false when defport is -1 (CONNECT). */
static bool parse_authority(const char *s, size_t n, char host[ABX_EGRESS_HOST_MAX], int *port, int defport)
{
    const char *hs = s, *he, *rest;
    if (n > 0 && s[0] == '[') {
        const char *close = memchr(s, ']', n);
        if (!close || !memchr(hs, ':', (size_t)(close - hs)))
            return false;
        hs = s + 1;
        he = close;
        rest = close + 1;
    } else {
        he = memchr(s, ':', n);
        if (!he)
            he = s + n;
        rest = he;
    }
    if (memchr(s, '@', n) || !copy_host(hs, (size_t)(he - hs), host))
        return false;
    size_t left = (size_t)(s + n - rest);
    *port = defport;
    if (left == 0)
        return defport >= 0;
    if (rest[0] != ':' || left < 2 || left > 6)
        return false;
    int p = 0;
    for (size_t i = 1; i < left; i++) {
        if (!isdigit((unsigned char)rest[i]))
            return false;
        p = p * 10 + (rest[i] - '0');
    }
    *port = p;
    return p >= 1 && p <= 65535;
}

static bool parse_target(const char *t, size_t n, abx_http_req *r, size_t base)
{
    if (r->connect)
        return parse_authority(t, n, r->host, &r->port, -1);
    if (n > 0 && t[0] == '/') {
        r->path_off = base;
        r->path_len = n;
        return true;
    }
    if (n < 8 || strncasecmp(t, "http://", 7) != 0)
        return false; /* https:// and other schemes go through CONNECT */
    const char *a = t + 7, *slash = memchr(a, '/', n - 7);
    size_t alen = slash ? (size_t)(slash - a) : n - 7;
    const char *q = memchr(a, '?', alen);
    if (q)
        alen = (size_t)(q - a);
    if (!parse_authority(a, alen, r->host, &r->port, 80))
        return false;
    r->absolute = true;
    r->path_off = base + 7 + alen;
    r->path_len = n - 7 - alen;
    return true;
}

static bool parse_line(const char *b, size_t n, abx_http_req *r)
{
    const char *sp1 = memchr(b, ' ', n);
    if (!sp1 || sp1 == b || (size_t)(sp1 - b) >= sizeof r->method)
        return false;
    for (const char *p = b; p < sp1; p++)
        if (!isupper((unsigned char)*p))
            return false;
    memcpy(r->method, b, (size_t)(sp1 - b));
    r->method[sp1 - b] = '\0';
    r->connect = strcmp(r->method, "CONNECT") == 0;
    const char *t = sp1 + 1, *sp2 = memchr(t, ' ', (size_t)(b + n - t));
    if (!sp2 || (size_t)(b + n - sp2) != 9 || strncmp(sp2 + 1, "HTTP/1.", 7) != 0 ||
        (sp2[8] != '0' && sp2[8] != '1'))
        return false;
    r->ver_off = (size_t)(sp2 + 1 - b);
    for (const char *p = t; p < sp2; p++)
        if ((unsigned char)*p <= ' ' || *p == 0x7f)
            return false;
    return parse_target(t, (size_t)(sp2 - t), r, (size_t)(t - b));
}

static bool parse_length(const char *v, size_t n, int64_t *out)
{
    if (n == 0 || n > 18)
        return false;
    int64_t x = 0;
    for (size_t i = 0; i < n; i++) {
        if (!isdigit((unsigned char)v[i]))
            return false;
        x = x * 10 + (v[i] - '0');
    }
    if (*out >= 0 && *out != x)
        return false; /* two different lengths: a smuggling attempt */
    *out = x;
    return true;
}

static bool parse_header(const char *h, size_t n, abx_http_req *r)
{
    const char *colon = memchr(h, ':', n);
    if (!colon || colon == h)
        return false;
    size_t nl = (size_t)(colon - h);
    for (size_t i = 0; i < nl; i++)
        if (!isalnum((unsigned char)h[i]) && !strchr("!#$%&'*+-.^_`|~", h[i]))
            return false;
    const char *v = colon + 1, *e = h + n;
    while (v < e && (*v == ' ' || *v == '\t'))
        v++;
    while (e > v && (e[-1] == ' ' || e[-1] == '\t'))
        e--;
    size_t vl = (size_t)(e - v);
    if (nl == 4 && strncasecmp(h, "host", 4) == 0) {
        if (r->hosthdr[0])
            return false;
        return parse_authority(v, vl, r->hosthdr, &r->hostport, 0) || (r->hosthdr[0] = '\0', false);
    }
    if (nl == 14 && strncasecmp(h, "content-length", 14) == 0)
        return parse_length(v, vl, &r->content_length);
    if (nl == 17 && strncasecmp(h, "transfer-encoding", 17) == 0)
        r->chunked = r->chunked || !(vl == 8 && strncasecmp(v, "identity", 8) == 0);
    if (nl == 7 && strncasecmp(h, "upgrade", 7) == 0)
        r->upgrade = true;
    return true;
}

int abx_egress_parse_http(const char *buf, size_t len, abx_http_req *r)
{
    memset(r, 0, sizeof *r);
    r->content_length = -1;
    size_t lim = len < ABX_EGRESS_HEAD_MAX ? len : ABX_EGRESS_HEAD_MAX;
    const char *end = memmem(buf, lim, "\r\n\r\n", 4);
    if (!end)
        return len >= ABX_EGRESS_HEAD_MAX || memchr(buf, '\0', lim) ? ABX_EG_BAD : ABX_EG_MORE;
    size_t head = (size_t)(end - buf) + 4;
    if (memchr(buf, '\0', head))
        return ABX_EG_BAD;
    const char *eol = memmem(buf, head, "\r\n", 2);
    if (!parse_line(buf, (size_t)(eol - buf), r))
        return ABX_EG_BAD;
    r->line_len = (size_t)(eol - buf) + 2;
    for (const char *h = eol + 2; h < end + 2;) {
        const char *e = memmem(h, (size_t)(end + 2 - h), "\r\n", 2);
        if (*h == ' ' || *h == '\t' || memchr(h, '\n', (size_t)(e - h)) || memchr(h, '\r', (size_t)(e - h)) ||
            !parse_header(h, (size_t)(e - h), r))
            return ABX_EG_BAD; /* folded lines, bare CR/LF, malformed headers */
        h = e + 2;
    }
    if (r->chunked && r->content_length >= 0)
        return ABX_EG_BAD;
    if (!r->connect && !r->absolute) {
        if (!r->hosthdr[0])
            return ABX_EG_BAD;
        memcpy(r->host, r->hosthdr, sizeof r->host);
        r->port = r->hostport ? r->hostport : 80;
    }
    return (int)head;
}

/* ---- SOCKS5 ---- */

int abx_egress_parse_socks_hello(const unsigned char *b, size_t len, bool *noauth)
{
    *noauth = false;
    if (len >= 1 && b[0] != 5)
        return ABX_EG_BAD;
    if (len >= 2 && b[1] == 0)
        return ABX_EG_BAD;
    if (len < 2 || len < 2u + b[1])
        return ABX_EG_MORE;
    for (size_t i = 0; i < b[1]; i++)
        *noauth = *noauth || b[2 + i] == 0;
    return 2 + b[1];
}

int abx_egress_parse_socks_req(const unsigned char *b, size_t len, int *cmd, char host[ABX_EGRESS_HOST_MAX], int *port)
{
    if ((len >= 1 && b[0] != 5) || (len >= 3 && b[2] != 0))
        return ABX_EG_BAD;
    if (len < 5)
        return ABX_EG_MORE;
    *cmd = b[1];
    size_t alen;
    switch (b[3]) {
    case 1: alen = 4; break;
    case 4: alen = 16; break;
    case 3: alen = 1u + b[4]; break;
    default: return ABX_EG_BAD;
    }
    if (len < 4 + alen + 2)
        return ABX_EG_MORE;
    if (b[3] == 3) {
        if (!copy_host((const char *)b + 5, b[4], host))
            return ABX_EG_BAD;
    } else if (!inet_ntop(b[3] == 1 ? AF_INET : AF_INET6, b + 4, host, ABX_EGRESS_HOST_MAX) ||
               !abx_egress_host_norm(host)) {
        return ABX_EG_BAD;
    }
    *port = b[4 + alen] << 8 | b[5 + alen];
    if (*port == 0)
        return ABX_EG_BAD;
    return (int)(4 + alen + 2);
}

/* ---- TLS ClientHello ---- */

typedef struct cur {
    const unsigned char *p;
    size_t n;
    bool bad;
} cur;

static size_t take(cur *c, size_t k) /* a big-endian integer of k bytes */
{
    size_t v = 0;
    if (c->n < k) {
        c->bad = true;
        c->n = 0;
        return 0;
    }
    for (size_t i = 0; i < k; i++)
        v = v << 8 | c->p[i];
    c->p += k;
    c->n -= k;
    return v;
}

static cur sub(cur *c, size_t k) /* the next k bytes as their own cursor */
{
    cur s = {c->p, k, false};
    if (c->n < k) {
        c->bad = true;
        s.n = 0;
        s.bad = true;
        c->n = 0;
        return s;
    }
    c->p += k;
    c->n -= k;
    return s;
}

static abx_sni_result server_name(cur ext, char out[ABX_EGRESS_HOST_MAX])
{
    cur list = sub(&ext, take(&ext, 2));
    while (!list.bad && list.n > 0) {
        size_t type = take(&list, 1);
        cur name = sub(&list, take(&list, 2));
        if (list.bad)
            break;
        if (type == 0)
            return copy_host((const char *)name.p, name.n, out) ? ABX_SNI_FOUND : ABX_SNI_BAD;
    }
    return list.bad ? ABX_SNI_BAD : ABX_SNI_NONE;
}

abx_sni_result abx_egress_parse_sni(const unsigned char *b, size_t len, char out[ABX_EGRESS_HOST_MAX])
{
    out[0] = '\0';
    if (len == 0)
        return ABX_SNI_MORE;
    if (b[0] != 0x16)
        return ABX_SNI_NOT_TLS;
    if (len < 5)
        return ABX_SNI_MORE;
    size_t rec = (size_t)b[3] << 8 | b[4];
    if (b[1] != 3 || rec > 16384 + 2048 || rec < 4)
        return ABX_SNI_BAD;
    if (len < 5 + rec)
        return ABX_SNI_MORE;
    cur c = {b + 5, rec, false};
    if (take(&c, 1) != 1)
        return ABX_SNI_BAD; /* not a ClientHello */
    cur hello = sub(&c, take(&c, 3)); /* a hello spread over records fails closed */
    take(&hello, 2 + 32);             /* version, random */
    sub(&hello, take(&hello, 1));     /* session id */
    sub(&hello, take(&hello, 2));     /* cipher suites */
    sub(&hello, take(&hello, 1));     /* compression methods */
    if (hello.bad)
        return ABX_SNI_BAD;
    if (hello.n == 0)
        return ABX_SNI_NONE;
    cur exts = sub(&hello, take(&hello, 2));
    while (!exts.bad && exts.n > 0) {
        size_t type = take(&exts, 2);
        cur ext = sub(&exts, take(&exts, 2));
        if (exts.bad)
            break;
        if (type == 0)
            return server_name(ext, out);
    }
    return exts.bad || hello.bad ? ABX_SNI_BAD : ABX_SNI_NONE;
}
