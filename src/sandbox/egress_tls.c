/* egress_tls.c — interception of connections to hosts with inject rules (see
 * egress_tls.h). A CONNECT: the upstream's TLS is set up first and verified (a failure
 * answers 502 and nothing reaches the process), then 200, then the client's TLS is
 * terminated with the host's leaf certificate. A plain-HTTP forward request: the same
 * loop without TLS. Either way requests are read one at a time (HTTP/1.1): each must name
 * the host the connection is bound to; the inject headers replace any the client sent;
 * Accept-Encoding is dropped so the response arrives readable. Each response body is
 * re-chunked to the client with every secret value replaced by [REDACTED] (its head too),
 * a value split across reads included. */
#include "sandbox/egress_tls.h"
#include "sandbox/egress_ca_int.h"

#include "core/util.h"
#include "sandbox/egress.h"

#include <errno.h>
#include <openssl/err.h>
#include <openssl/ssl.h>
#include <openssl/x509v3.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/socket.h>
#include <sys/time.h>
#include "sandbox/ossl_lazy.h" /* last: OpenSSL, opened on first use */

#define SIDE_CAP (ABX_EGRESS_HEAD_MAX + 4096)
#define WORK_CAP 32768
#define OUT_CAP 16384
#define OUT_PRE 16 /* room for a chunk's size line before its data */
static const char REDACTED[] = "[REDACTED]";

struct abx_egress_tls {
    abx_egress_ca *ca;
    const abx_egress_injects *inj;
    SSL_CTX *server, *client;
    size_t maxsecret;
    bool first[256]; /* the first bytes of the secrets: where a match may start */
};

typedef struct side {
    SSL *ssl;
    int fd;
    unsigned char buf[SIDE_CAP];
    size_t len;
} side;

typedef struct sess {
    const abx_egress_tls *t;
    abx_egress_session *s;
    side c, u;
    unsigned char work[WORK_CAP]; /* redaction: held bytes, then new ones */
    size_t wl;
    unsigned char out[OUT_PRE + OUT_CAP + sizeof REDACTED + 2]; /* chunk size line, data, CRLF */
    size_t ol;
    char head[ABX_EGRESS_HEAD_MAX + 9000];
    bool expect; /* the request asked for 100 Continue (answered here: Expect is dropped) */
} sess;

abx_egress_tls *abx_egress_tls_new(abx_egress_ca *ca, const abx_egress_injects *inj, const char *upstream_ca,
                                   char *err, size_t errlen)
{
    if (abx_ossl_load(err, errlen) != 0)
        return NULL;
    abx_egress_tls *t = abx_calloc(1, sizeof *t);
    if (!t || !ca || !inj) {
        abx_free(t);
        snprintf(err, errlen, "egress TLS: no CA or rules");
        return NULL;
    }
    t->ca = ca;
    t->inj = inj;
    for (size_t i = 0; i < inj->nsecrets; i++)
    {
        if (strlen(inj->secrets[i]) > t->maxsecret)
            t->maxsecret = strlen(inj->secrets[i]);
        t->first[(unsigned char)inj->secrets[i][0]] = true;
    }
    t->server = SSL_CTX_new(TLS_server_method());
    t->client = SSL_CTX_new(TLS_client_method());
    if (!t->server || !t->client || !SSL_CTX_set_min_proto_version(t->server, TLS1_2_VERSION) ||
        !SSL_CTX_set_min_proto_version(t->client, TLS1_2_VERSION) || !SSL_CTX_set_default_verify_paths(t->client) ||
        (upstream_ca && SSL_CTX_load_verify_locations(t->client, upstream_ca, NULL) != 1)) {
        unsigned long e = ERR_get_error();
        snprintf(err, errlen, "egress TLS: %s%s%s", upstream_ca ? "cannot load upstream_ca " : "setup failed",
                 upstream_ca ? upstream_ca : "", e ? "" : "");
        ERR_clear_error();
        abx_egress_tls_free(t);
        return NULL;
    }
    SSL_CTX_set_verify(t->client, SSL_VERIFY_PEER, NULL);
    SSL_CTX_set_mode(t->client, SSL_MODE_AUTO_RETRY);
    SSL_CTX_set_mode(t->server, SSL_MODE_AUTO_RETRY);
    return t;
}

void abx_egress_tls_free(abx_egress_tls *t)
{
    if (!t)
        return;
    SSL_CTX_free(t->server);
    SSL_CTX_free(t->client);
    abx_free(t);
}

bool abx_egress_tls_wants(const abx_egress_tls *t, const char *host)
{
    return t && abx_egress_injects_host(t->inj, host);
}

/* ---- I/O on either side ---- */

/* more bytes into sd->buf: >0, 0 at EOF, -1 on an error, a timeout or a full buffer */
static ssize_t fill(side *sd)
{
    if (sd->len == SIDE_CAP)
        return -1;
    ssize_t n;
    if (sd->ssl) {
        int r = SSL_read(sd->ssl, sd->buf + sd->len, (int)(SIDE_CAP - sd->len));
        n = r > 0 ? r : SSL_get_error(sd->ssl, r) == SSL_ERROR_ZERO_RETURN ? 0 : -1;
    } else {
        do
            n = recv(sd->fd, sd->buf + sd->len, SIDE_CAP - sd->len, 0);
        while (n < 0 && errno == EINTR);
    }
    if (n > 0)
        sd->len += (size_t)n;
    return n;
}

static bool put(side *sd, const void *p, size_t n)
{
    const char *s = p;
    while (n > 0) {
        ssize_t w;
        if (sd->ssl) {
            int r = SSL_write(sd->ssl, s, (int)(n > 65536 ? 65536 : n));
            w = r > 0 ? r : -1;
        } else {
            w = send(sd->fd, s, n, MSG_NOSIGNAL);
            if (w < 0 && errno == EINTR)
                continue;
        }
        if (w <= 0)
            return false;
        s += w;
        n -= (size_t)w;
    }
    return true;
}

static void consume(side *sd, size_t n)
{
    memmove(sd->buf, sd->buf + n, sd->len - n);
    sd->len -= n;
}

static void answer(side *sd, int code, const char *status, const char *body)
{
    char h[512];
    int n = snprintf(h, sizeof h, "HTTP/1.1 %d %s\r\nContent-Type: text/plain\r\nContent-Length: %zu\r\n"
                     "Connection: close\r\n\r\n%s\n", code, status, strlen(body) + 1, body);
    put(sd, h, (size_t)n);
}

/* ---- redaction, re-chunked to the client ---- */

static bool flush_out(sess *x)
{
    if (!x->ol)
        return true;
    char hdr[OUT_PRE];
    int n = snprintf(hdr, sizeof hdr, "%zx\r\n", x->ol);
    unsigned char *start = x->out + OUT_PRE - n; /* one write: size line, data, CRLF */
    memcpy(start, hdr, (size_t)n);
    memcpy(x->out + OUT_PRE + x->ol, "\r\n", 2);
    bool ok = put(&x->c, start, (size_t)n + x->ol + 2);
    x->s->down += x->ol;
    x->ol = 0;
    return ok;
}

static size_t secret_at(const abx_egress_tls *t, const unsigned char *p, size_t avail)
{
    for (size_t i = 0; i < t->inj->nsecrets; i++) {
        size_t k = strlen(t->inj->secrets[i]);
        if (k <= avail && memcmp(p, t->inj->secrets[i], k) == 0)
            return k;
    }
    return 0;
}

/* Redact work[0, wl) in place into out (at most ABX_EGRESS_HEAD_MAX + 9000 bytes of
 * result): used for heads, whole. Returns the new length. */
static size_t redact_all(const abx_egress_tls *t, const char *in, size_t n, char *out, size_t cap)
{
    size_t o = 0;
    for (size_t i = 0; i < n && o + sizeof REDACTED < cap;) {
        size_t k = t->maxsecret ? secret_at(t, (const unsigned char *)in + i, n - i) : 0;
        if (k) {
            memcpy(out + o, REDACTED, sizeof REDACTED - 1);
            o += sizeof REDACTED - 1;
            i += k;
        } else {
            out[o++] = in[i++];
        }
    }
    return o;
}

/* Scan work: every position a whole secret could start at is decided, the last
 * maxsecret-1 bytes are held for the next piece (all of them when final). */
static bool redact_scan(sess *x, bool final)
{
    size_t keep = x->t->maxsecret ? x->t->maxsecret - 1 : 0;
    size_t limit = final ? x->wl : x->wl > keep ? x->wl - keep : 0, i = 0;
    while (i < limit) {
        size_t j = i; /* a run no secret can start in: copied whole */
        while (j < limit && !x->t->first[x->work[j]])
            j++;
        while (i < j) {
            size_t k = OUT_CAP - x->ol < j - i ? OUT_CAP - x->ol : j - i;
            memcpy(x->out + OUT_PRE + x->ol, x->work + i, k);
            x->ol += k;
            i += k;
            if (x->ol >= OUT_CAP && !flush_out(x))
                return false;
        }
        if (i >= limit)
            break;
        size_t k = secret_at(x->t, x->work + i, x->wl - i);
        if (k) {
            memcpy(x->out + OUT_PRE + x->ol, REDACTED, sizeof REDACTED - 1);
            x->ol += sizeof REDACTED - 1;
            i += k;
        } else {
            x->out[OUT_PRE + x->ol++] = x->work[i++];
        }
        if (x->ol >= OUT_CAP && !flush_out(x))
            return false;
    }
    memmove(x->work, x->work + i, x->wl - i);
    x->wl -= i;
    return true;
}

static bool body_feed(sess *x, const unsigned char *d, size_t n)
{
    while (n > 0) {
        size_t k = WORK_CAP - x->wl < n ? WORK_CAP - x->wl : n;
        memcpy(x->work + x->wl, d, k);
        x->wl += k;
        d += k;
        n -= k;
        if (!redact_scan(x, false))
            return false;
    }
    return true;
}

static bool body_end(sess *x)
{
    return redact_scan(x, true) && flush_out(x) && put(&x->c, "0\r\n\r\n", 5);
}

/* ---- requests ---- */

static bool hdr_is(const char *h, size_t n, const char *name)
{
    size_t k = strlen(name);
    return n > k && h[k] == ':' && strncasecmp(h, name, k) == 0;
}

static bool dropped(const sess *x, const char *h, size_t n)
{
    static const char *const drop[] = {"proxy-connection", "proxy-authorization", "accept-encoding", "expect"};
    for (size_t i = 0; i < ABX_ARRAY_LEN(drop); i++)
        if (hdr_is(h, n, drop[i]))
            return true;
    const abx_egress_injects *l = x->t->inj;
    for (size_t i = 0; i < l->n; i++)
        if (strcmp(l->v[i].host, x->s->host) == 0 && hdr_is(h, n, l->v[i].header))
            return true;
    return false;
}

/* the request head, rewritten (origin form, the inject headers), to the upstream */
static bool send_request(sess *x, const abx_http_req *r, size_t head)
{
    const char *b = (const char *)x->c.buf;
    size_t cap = sizeof x->head;
    bool slash = r->path_len == 0 || b[r->path_off] != '/';
    int n = snprintf(x->head, cap, "%s %s%.*s %.8s\r\n", r->method, slash ? "/" : "", (int)r->path_len,
                     b + r->path_off, b + r->ver_off);
    if (!r->hosthdr[0])
        n += snprintf(x->head + n, cap - (size_t)n, "Host: %s\r\n", x->s->host);
    for (size_t i = r->line_len; i + 2 < head;) {
        const char *e = memmem(b + i, head - i, "\r\n", 2);
        size_t ll = (size_t)(e - (b + i)) + 2;
        if (hdr_is(b + i, ll, "expect"))
            x->expect = true;
        if (!dropped(x, b + i, ll) && (size_t)n + ll < cap) {
            memcpy(x->head + n, b + i, ll);
            n += (int)ll;
        }
        i += ll;
    }
    const abx_egress_injects *l = x->t->inj;
    for (size_t i = 0; i < l->n; i++)
        if (strcmp(l->v[i].host, x->s->host) == 0)
            n += snprintf(x->head + n, cap - (size_t)n, "%s: %s\r\n", l->v[i].header, l->v[i].value);
    if ((size_t)n + 2 >= cap)
        return false;
    memcpy(x->head + n, "\r\n", 2);
    n += 2;
    x->s->up += (uint64_t)n;
    bool ok = put(&x->u, x->head, (size_t)n);
    explicit_bzero(x->head, (size_t)n); /* it held the secret */
    return ok;
}

/* the request body, as framed (Content-Length, or chunked: forwarded as it came) */
static bool send_body(sess *x, const abx_http_req *r)
{
    int64_t left = r->content_length > 0 ? r->content_length : 0;
    abx_chunked ch = {0};
    for (;;) {
        if (!r->chunked && left == 0)
            return true;
        if (x->c.len == 0 && fill(&x->c) <= 0)
            return false;
        size_t k = x->c.len;
        int st = ABX_CH_MORE;
        if (r->chunked) {
            size_t off, dl;
            k = 0;
            while (k < x->c.len && st == ABX_CH_MORE) {
                size_t used;
                st = abx_egress_chunk_step(&ch, x->c.buf + k, x->c.len - k, &used, &off, &dl);
                k += used;
            }
            if (st == ABX_CH_BAD)
                return false;
        } else if ((int64_t)k > left) {
            k = (size_t)left;
        }
        if (!put(&x->u, x->c.buf, k))
            return false;
        x->s->up += k;
        left -= (int64_t)k;
        consume(&x->c, k);
        if (st == ABX_CH_DONE)
            return true;
    }
}

/* ---- responses ---- */

static bool send_resp_head(sess *x, const abx_http_resp *r, bool body)
{
    const char *b = (const char *)x->u.buf;
    char tmp[ABX_EGRESS_HEAD_MAX + 64];
    size_t n = 0, h = r->head_len;
    for (size_t i = 0; i + 2 < h;) {
        const char *e = memmem(b + i, h - i, "\r\n", 2);
        size_t ll = (size_t)(e - (b + i)) + 2;
        if (!hdr_is(b + i, ll, "content-length") && !hdr_is(b + i, ll, "transfer-encoding") && n + ll < sizeof tmp) {
            memcpy(tmp + n, b + i, ll);
            n += ll;
        }
        i += ll;
    }
    n += (size_t)snprintf(tmp + n, sizeof tmp - n, "%s\r\n", body ? "Transfer-Encoding: chunked\r\n" : "");
    size_t o = redact_all(x->t, tmp, n, x->head, sizeof x->head);
    x->s->down += o;
    return put(&x->c, x->head, o);
}

/* one response: false ends the connection */
static bool relay_response(sess *x, const abx_http_req *req)
{
    abx_http_resp r;
    int h;
    for (;;) {
        while ((h = abx_egress_parse_resp((const char *)x->u.buf, x->u.len, &r)) == ABX_EG_MORE)
            if (fill(&x->u) <= 0) {
                x->s->reason = "upstream closed before answering";
                answer(&x->c, 502, "Bad Gateway", "abx: egress upstream closed the connection");
                return false;
            }
        if (h < 0) {
            x->s->reason = "malformed upstream response";
            answer(&x->c, 502, "Bad Gateway", "abx: egress upstream sent a malformed response");
            return false;
        }
        if (r.status >= 200 || r.status == 101)
            break;
        consume(&x->u, (size_t)h); /* 1xx interim answers: Expect was dropped, so not needed */
    }
    if (r.status == 101) {
        x->s->reason = "protocol upgrade on an intercepted connection";
        answer(&x->c, 502, "Bad Gateway", "abx: egress cannot upgrade an intercepted connection");
        return false;
    }
    bool body = strcmp(req->method, "HEAD") != 0 && r.status != 204 && r.status != 304;
    if (!send_resp_head(x, &r, body))
        return false;
    consume(&x->u, (size_t)h);
    if (!body)
        return !r.close;
    int64_t left = r.content_length;
    abx_chunked ch = {0};
    x->wl = x->ol = 0;
    for (;;) {
        if (left == 0 && !r.chunked)
            return body_end(x) && !r.close;
        if (x->u.len == 0) {
            ssize_t n = fill(&x->u);
            if (n == 0 && left < 0 && !r.chunked)
            {
                body_end(x); /* close-delimited: ends with the connection */
                return false;
            }
            if (n <= 0)
                return false;
        }
        if (r.chunked) {
            size_t used, off, dl;
            int st = abx_egress_chunk_step(&ch, x->u.buf, x->u.len, &used, &off, &dl);
            if (st == ABX_CH_BAD || (dl && !body_feed(x, x->u.buf + off, dl)))
                return false;
            consume(&x->u, used);
            if (st == ABX_CH_DONE)
                return body_end(x) && !r.close;
        } else {
            size_t k = left >= 0 && (int64_t)x->u.len > left ? (size_t)left : x->u.len;
            if (!body_feed(x, x->u.buf, k))
                return false;
            consume(&x->u, k);
            if (left > 0)
                left -= (int64_t)k;
        }
    }
}

static void note(sess *x, const abx_http_req *r)
{
    if (x->s->method[0])
        return;
    snprintf(x->s->method, sizeof x->s->method, "%s", r->method);
    const char *p = r->path_len ? (const char *)x->c.buf + r->path_off : "/";
    size_t n = r->path_len ? strcspn(p, "?") : 1;
    if (r->path_len && n > r->path_len)
        n = r->path_len;
    snprintf(x->s->path, sizeof x->s->path, "%.*s", (int)n, p);
}

static const char *refusal(sess *x, const abx_http_req *r)
{
    if (r->connect)
        return "CONNECT on an intercepted connection";
    if (strcmp(r->host, x->s->host) != 0 || (r->absolute && r->port != x->s->port))
        return "another host on an intercepted connection";
    if (r->hosthdr[0] && strcmp(r->hosthdr, r->host) != 0)
        return "Host header names another host";
    return NULL;
}

static void http_loop(sess *x)
{
    for (;;) {
        abx_http_req r;
        int h;
        while ((h = abx_egress_parse_http((const char *)x->c.buf, x->c.len, &r)) == ABX_EG_MORE)
            if (fill(&x->c) <= 0)
                return; /* the client is done */
        if (h < 0) {
            x->s->reason = "malformed request";
            answer(&x->c, 400, "Bad Request", "abx: malformed request");
            return;
        }
        const char *why = refusal(x, &r);
        if (why) {
            char body[ABX_EGRESS_HOST_MAX + 64];
            snprintf(body, sizeof body, "abx: egress to %s denied by policy", r.hosthdr[0] ? r.hosthdr : r.host);
            x->s->reason = why;
            x->s->refused = true;
            answer(&x->c, 403, "Forbidden", body);
            return;
        }
        note(x, &r);
        x->expect = false;
        if (!send_request(x, &r, (size_t)h))
            return;
        consume(&x->c, (size_t)h);
        static const char cont[] = "HTTP/1.1 100 Continue\r\n\r\n";
        if (x->expect && (r.content_length > 0 || r.chunked) && !put(&x->c, cont, sizeof cont - 1))
            return;
        if (!send_body(x, &r) || !relay_response(x, &r))
            return;
    }
}

/* ---- TLS on both sides ---- */

static const char *upstream_tls(sess *x)
{
    SSL *s = SSL_new(x->t->client);
    x->u.ssl = s;
    abx_ip ip;
    bool literal = abx_ip_parse(x->s->host, &ip);
    if (!s || !SSL_set_fd(s, x->s->ufd) || (!literal && !SSL_set_tlsext_host_name(s, x->s->host)) ||
        (literal ? !X509_VERIFY_PARAM_set1_ip_asc(SSL_get0_param(s), x->s->host) : !SSL_set1_host(s, x->s->host)))
        return "upstream TLS setup failed";
    if (SSL_connect(s) != 1)
        return SSL_get_verify_result(s) != X509_V_OK ? "upstream certificate not trusted" : "upstream TLS failed";
    return NULL;
}

static const char *client_tls(sess *x)
{
    SSL *s = SSL_new(x->t->server);
    x->c.ssl = s;
    if (!s || !SSL_set_fd(s, x->s->cfd) || !abx_egress_ca_use_leaf(x->t->ca, s, x->s->host))
        return "TLS setup failed";
    if (SSL_accept(s) != 1)
        return "client TLS handshake failed";
    const char *sni = SSL_get_servername(s, TLSEXT_NAMETYPE_host_name);
    if (sni && strcasecmp(sni, x->s->host) != 0)
        return "TLS server name differs from the host asked for";
    return NULL;
}

static void set_rcvtimeo(int fd, int ms)
{
    struct timeval tv = {ms / 1000, (ms % 1000) * 1000};
    setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof tv);
}

static void intercept_tls(sess *x)
{
    static const char ok[] = "HTTP/1.1 200 Connection established\r\n\r\n";
    if (x->s->prelen) {
        x->s->reason = "client sent bytes before the tunnel was established";
        return;
    }
    const char *why = upstream_tls(x);
    if (why) {
        x->s->reason = why;
        side plain = {.fd = x->s->cfd};
        if (!x->s->transparent)
            answer(&plain, 502, "Bad Gateway", "abx: egress upstream TLS failed (certificate not trusted?)");
        return;
    }
    if (!x->s->transparent && send(x->s->cfd, ok, sizeof ok - 1, MSG_NOSIGNAL) != (ssize_t)sizeof ok - 1)
        return;
    if ((why = client_tls(x))) {
        x->s->reason = why;
        x->s->refused = strstr(why, "server name") != NULL;
        return;
    }
    http_loop(x);
}

void abx_egress_intercept(const abx_egress_tls *t, abx_egress_session *s)
{
    sess *x = abx_calloc(1, sizeof *x);
    if (!x) {
        s->reason = "out of memory";
        return;
    }
    x->t = t;
    x->s = s;
    x->c.fd = s->cfd;
    x->u.fd = s->ufd;
    set_rcvtimeo(s->cfd, s->idle_ms);
    set_rcvtimeo(s->ufd, s->idle_ms);
    if (s->tls) {
        intercept_tls(x);
    } else {
        size_t n = s->prelen < SIDE_CAP ? s->prelen : SIDE_CAP;
        memcpy(x->c.buf, s->pre, n);
        x->c.len = n;
        http_loop(x);
    }
    if (x->c.ssl) {
        SSL_shutdown(x->c.ssl);
        SSL_free(x->c.ssl);
    }
    if (x->u.ssl)
        SSL_free(x->u.ssl);
    ERR_clear_error();
    explicit_bzero(x, sizeof *x);
    abx_free(x);
}
