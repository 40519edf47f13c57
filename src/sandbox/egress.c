/* egress.c — the egress proxy (see egress.h): one acceptor thread on the listening
 * socket and one thread per client connection (at most max_conns), each speaking HTTP
 * forward proxying, CONNECT or SOCKS5 as the client's first byte says, deciding on the
 * name and its addresses (egress_match.c), and relaying with fixed buffers.
 *
 * Plain HTTP on a kept-alive connection: the connection is bound to the first request's
 * host and port; each later request head is parsed (request bodies framed by
 * Content-Length) and one naming another host, or a CONNECT, is refused. A chunked
 * request body ends the scanning: the rest of the connection goes to the same upstream
 * untouched (it can reach nothing the first decision did not allow).
 *
 * A tunnel (CONNECT, SOCKS5) is checked once more on its first bytes: a TLS ClientHello
 * whose server name is not the host asked for, a malformed one, or a CONNECT request
 * inside the tunnel closes it. */
#include "sandbox/egress.h"
#include "sandbox/egress_int.h"
#include "sandbox/egress_tls.h"

#include "core/util.h"

#include <arpa/inet.h>
#include <ctype.h>
#include <errno.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <poll.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/eventfd.h>
#include <sys/socket.h>
#include <unistd.h>

/* ---- I/O ---- */

/* 1 when fd is ready for ev, 0 on timeout, -1 when the proxy stops or fd fails */
int wait_fd(conn *c, int fd, short ev, int ms)
{
    struct pollfd p[2] = {{fd, ev, 0}, {c->e->stopfd, POLLIN, 0}};
    int r;
    do
        r = poll(p, 2, ms);
    while (r < 0 && errno == EINTR);
    if (r < 0 || p[1].revents)
        return -1;
    return r == 0 ? 0 : 1;
}

/* read more client bytes into buf: >0, or 0 at EOF, -1 on error, timeout or a full buffer */
ssize_t fill(conn *c)
{
    if (c->len == BUF_CAP || wait_fd(c, c->cfd, POLLIN, c->e->cfg.idle_ms) != 1)
        return -1;
    ssize_t n;
    do
        n = recv(c->cfd, c->buf + c->len, BUF_CAP - c->len, 0);
    while (n < 0 && errno == EINTR);
    if (n > 0)
        c->len += (size_t)n;
    return n;
}

bool send_all(int fd, const void *p, size_t n)
{
    const char *s = p;
    while (n > 0) {
        ssize_t w = send(fd, s, n, MSG_NOSIGNAL);
        if (w < 0 && errno == EINTR)
            continue;
        if (w <= 0)
            return false;
        s += w;
        n -= (size_t)w;
    }
    return true;
}

static void consume(conn *c, size_t n)
{
    memmove(c->buf, c->buf + n, c->len - n);
    c->len -= n;
}

static void set_timeouts(conn *c, int fd)
{
    struct timeval tv = {c->e->cfg.idle_ms / 1000, (c->e->cfg.idle_ms % 1000) * 1000};
    setsockopt(fd, SOL_SOCKET, SO_SNDTIMEO, &tv, sizeof tv);
}

/* ---- records and refusals ---- */

void emit(conn *c, bool allowed, const char *reason)
{
    if (!c->e->cfg.record)
        return;
    abx_egress_record r = {c->proto, c->host, c->port, c->addr, allowed, c->rule, reason ? reason : "",
                           c->method, c->path, c->up, c->down, abx_now_ms() - c->t0};
    c->e->cfg.record(&r, c->e->cfg.ctx);
}

void begin(conn *c, const char *proto, const char *host, int port)
{
    c->proto = proto;
    snprintf(c->host, sizeof c->host, "%s", host);
    c->port = port;
    c->addr[0] = c->rule[0] = c->method[0] = c->path[0] = '\0';
    c->up = c->down = 0;
    c->t0 = abx_now_ms();
}

void http_error(conn *c, int code, const char *status, const char *body)
{
    char head[200];
    int n = snprintf(head, sizeof head,
                     "HTTP/1.1 %d %s\r\nContent-Type: text/plain\r\nContent-Length: %zu\r\nConnection: close\r\n\r\n",
                     code, status, strlen(body) + 1);
    if (send_all(c->cfd, head, (size_t)n) && send_all(c->cfd, body, strlen(body)))
        send_all(c->cfd, "\n", 1);
    /* a lingering close: the client's request may still be unread (a transparent listener
     * only peeked at it), and closing over unread bytes sends a reset that can destroy the
     * answer before the client reads it; so end our side and drain a little first */
    shutdown(c->cfd, SHUT_WR);
    char sink[4096];
    for (size_t drained = 0; drained < 256 * 1024 && wait_fd(c, c->cfd, POLLIN, 500) == 1;) {
        ssize_t k = recv(c->cfd, sink, sizeof sink, MSG_DONTWAIT);
        if (k <= 0)
            break;
        drained += (size_t)k;
    }
}

void http_deny(conn *c, const char *host)
{
    char body[ABX_EGRESS_HOST_MAX + 64];
    snprintf(body, sizeof body, "abx: egress to %s denied by policy", host);
    http_error(c, 403, "Forbidden", body);
}

/* decide on host:port; on a refusal record it and return false */
bool decide(conn *c, abx_egress_decision *d)
{
    const abx_egress_config *cfg = &c->e->cfg;
    abx_egress_decide(cfg->allow, cfg->resolver, cfg->system_dns, c->host, c->port, d);
    snprintf(c->rule, sizeof c->rule, "%s", d->rule ? d->rule : "");
    if (!d->allow)
        emit(c, false, d->reason);
    return d->allow;
}

static void sockaddr_of(const abx_ip *ip, int port, struct sockaddr_storage *ss, socklen_t *sl)
{
    memset(ss, 0, sizeof *ss);
    if (ip->family == AF_INET) {
        struct sockaddr_in *s4 = (struct sockaddr_in *)ss;
        s4->sin_family = AF_INET;
        s4->sin_port = htons((uint16_t)port);
        memcpy(&s4->sin_addr, ip->a, 4);
        *sl = sizeof *s4;
    } else {
        struct sockaddr_in6 *s6 = (struct sockaddr_in6 *)ss;
        s6->sin6_family = AF_INET6;
        s6->sin6_port = htons((uint16_t)port);
        memcpy(&s6->sin6_addr, ip->a, 16);
        *sl = sizeof *s6;
    }
}

static int dial_one(conn *c, const abx_ip *ip)
{
    struct sockaddr_storage ss;
    socklen_t sl;
    sockaddr_of(ip, c->port, &ss, &sl);
    int fd = socket(ip->family, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
    if (fd < 0)
        return -1;
    int err = 0;
    socklen_t el = sizeof err;
    if (connect(fd, (struct sockaddr *)&ss, sl) < 0 &&
        (errno != EINPROGRESS || wait_fd(c, fd, POLLOUT, c->e->cfg.connect_ms) != 1 ||
         getsockopt(fd, SOL_SOCKET, SO_ERROR, &err, &el) < 0 || err != 0)) {
        close(fd);
        return -1;
    }
    fcntl(fd, F_SETFL, fcntl(fd, F_GETFL) & ~O_NONBLOCK);
    set_timeouts(c, fd);
    return fd;
}

/* connect to the first address of d that answers; false (recorded) when none does */
bool dial(conn *c, const abx_egress_decision *d)
{
    for (size_t i = 0; i < d->naddrs; i++) {
        int fd = dial_one(c, &d->addrs[i]);
        if (fd >= 0) {
            abx_ip_format(&d->addrs[i], c->addr);
            pthread_mutex_lock(&c->e->mu);
            c->ufd = fd;
            pthread_mutex_unlock(&c->e->mu);
            return true;
        }
    }
    emit(c, true, "upstream unreachable");
    return false;
}

/* ---- relaying ---- */

static bool scan_client(conn *c);

bool forward_raw(conn *c)
{
    bool ok = send_all(c->ufd, c->buf, c->len);
    c->up += c->len;
    c->len = 0;
    return ok;
}

/* Move what from has to to through the kernel (splice via the pipe p), no copy through
 * user space: the bytes the proxy does not read (responses, tunnels) go this way.
 * false at EOF or on an error. */
static bool pump(int from, int to, const int p[2], uint64_t *count)
{
    ssize_t n = splice(from, NULL, p[1], NULL, PUMP_MAX, SPLICE_F_MOVE | SPLICE_F_NONBLOCK);
    if (n < 0 && (errno == EAGAIN || errno == EINTR))
        return true;
    if (n <= 0)
        return false;
    *count += (uint64_t)n;
    while (n > 0) {
        ssize_t w = splice(p[0], NULL, to, NULL, (size_t)n, SPLICE_F_MOVE);
        if (w < 0 && errno == EINTR)
            continue;
        if (w <= 0)
            return false;
        n -= w;
    }
    return true;
}

/* the same by copying, when no pipe could be had */
static bool copy_down(conn *c)
{
    ssize_t n = recv(c->ufd, c->relay, sizeof c->relay, 0);
    if (n <= 0 || !send_all(c->cfd, c->relay, (size_t)n))
        return false;
    c->down += (uint64_t)n;
    return true;
}

static bool make_pipe(int p[2])
{
    if (pipe2(p, O_CLOEXEC) < 0) {
        p[0] = p[1] = -1;
        return false;
    }
    fcntl(p[1], F_SETPIPE_SZ, PUMP_MAX); /* fewer, larger moves; the default 64 KiB if refused */
    return true;
}

static void close_pipe(int p[2])
{
    if (p[0] >= 0) {
        close(p[0]);
        close(p[1]);
    }
}

static void relay_loop(conn *c, bool scan, const int down[2], const int up[2]);

/* Relay until either side ends, idles out, or the proxy stops. scan: client bytes are
 * HTTP requests, checked and rewritten by scan_client. */
void relay(conn *c, bool scan)
{
    int down[2], up[2] = {-1, -1};
    if (make_pipe(down) && !scan && !make_pipe(up))
        up[0] = up[1] = -1;
    relay_loop(c, scan, down, up);
    close_pipe(down);
    close_pipe(up);
}

static void relay_loop(conn *c, bool scan, const int down[2], const int up[2])
{
    bool client_open = true;
    for (;;) {
        /* a closed client leaves the set: its POLLHUP would wake poll at once, for ever */
        struct pollfd p[3] = {{client_open ? c->cfd : -1, POLLIN, 0}, {c->ufd, POLLIN, 0}, {c->e->stopfd, POLLIN, 0}};
        int r = poll(p, 3, c->e->cfg.idle_ms);
        if (r < 0 && errno == EINTR)
            continue;
        if (r <= 0 || p[2].revents)
            return;
        if (p[1].revents && !(down[0] >= 0 ? pump(c->ufd, c->cfd, down, &c->down) : copy_down(c)))
            return;
        if (client_open && p[0].revents && up[0] >= 0) {
            if (!pump(c->cfd, c->ufd, up, &c->up)) {
                shutdown(c->ufd, SHUT_WR);
                client_open = false;
            }
        } else if (client_open && p[0].revents) {
            ssize_t n = recv(c->cfd, c->buf + c->len, BUF_CAP - c->len, 0);
            if (n > 0)
                c->len += (size_t)n;
            if (n <= 0 || !(scan ? scan_client(c) : forward_raw(c))) {
                shutdown(c->ufd, SHUT_WR); /* let the upstream finish what it was asked */
                client_open = false;
            }
        }
    }
}

static bool header_is(const char *h, size_t n, const char *name)
{
    size_t k = strlen(name);
    return n > k && h[k] == ':' && strncasecmp(h, name, k) == 0;
}

/* Send the head of r to the upstream in origin form, without the proxy's own headers. */
static bool forward_head(conn *c, const abx_http_req *r, size_t head)
{
    const char *b = (const char *)c->buf;
    char out[ABX_EGRESS_HEAD_MAX + 512];
    bool slash = r->path_len == 0 || b[r->path_off] != '/'; /* "http://h?q" asks for "/?q" */
    int n = snprintf(out, sizeof out, "%s %s%.*s %.8s\r\n", r->method, slash ? "/" : "", (int)r->path_len,
                     b + r->path_off, b + r->ver_off);
    if (!r->hosthdr[0])
        n += snprintf(out + n, sizeof out - (size_t)n, "Host: %s%s%s:%d\r\n", strchr(r->host, ':') ? "[" : "",
                      r->host, strchr(r->host, ':') ? "]" : "", r->port);
    for (size_t i = r->line_len; i + 2 <= head;) {
        const char *e = memmem(b + i, head - i, "\r\n", 2);
        size_t ll = (size_t)(e - (b + i)) + 2;
        if (!header_is(b + i, ll, "proxy-connection") && !header_is(b + i, ll, "proxy-authorization") &&
            (size_t)n + ll < sizeof out) {
            memcpy(out + n, b + i, ll);
            n += (int)ll;
        }
        i += ll;
    }
    c->up += (uint64_t)n;
    return send_all(c->ufd, out, (size_t)n);
}

static void note_request(conn *c, const abx_http_req *r)
{
    if (c->method[0])
        return; /* the record keeps the connection's first request */
    snprintf(c->method, sizeof c->method, "%s", r->method);
    const char *p = r->path_len ? (const char *)c->buf + r->path_off : "/";
    size_t n = r->path_len ? strcspn(p, "?") : 1;
    if (n > r->path_len && r->path_len)
        n = r->path_len;
    snprintf(c->path, sizeof c->path, "%.*s", (int)n, p);
}

/* A request on a connection bound to c->host:c->port: refuse another host, a CONNECT, or
 * a Host header that disagrees with the absolute-form target. */
static const char *request_refusal(conn *c, const abx_http_req *r)
{
    if (r->connect)
        return "CONNECT on a forward-proxy connection";
    if (strcmp(r->host, c->host) != 0 || r->port != c->port)
        return "another host on a kept-alive connection";
    if (r->hosthdr[0] && strcmp(r->hosthdr, r->host) != 0)
        return "Host header names another host";
    return NULL;
}

/* Handle the client bytes in buf on a plain-HTTP connection. false: stop reading the
 * client (a refusal is left in denied_host, or the stream went bad). */
static bool scan_client(conn *c)
{
    while (c->len > 0) {
        if (c->opaque)
            return forward_raw(c);
        if (c->body_left > 0) {
            size_t k = (uint64_t)c->body_left < c->len ? (size_t)c->body_left : c->len;
            if (!send_all(c->ufd, c->buf, k))
                return false;
            c->up += k;
            c->body_left -= (int64_t)k;
            consume(c, k);
            continue;
        }
        abx_http_req r;
        int h = abx_egress_parse_http((const char *)c->buf, c->len, &r);
        if (h == ABX_EG_MORE)
            return true;
        const char *why = h == ABX_EG_BAD ? "malformed request" : request_refusal(c, &r);
        if (why) {
            abx_egress_record rec = {"http", h > 0 ? r.host : c->host, h > 0 ? r.port : c->port, "", false, "", why,
                                     h > 0 ? r.method : "", "", 0, 0, 0};
            if (c->e->cfg.record)
                c->e->cfg.record(&rec, c->e->cfg.ctx);
            snprintf(c->denied_host, sizeof c->denied_host, "%s", h > 0 ? r.host : c->host);
            return false;
        }
        note_request(c, &r);
        if (!forward_head(c, &r, (size_t)h))
            return false;
        consume(c, (size_t)h);
        c->body_left = r.content_length > 0 ? r.content_length : 0;
        /* past a chunked body or an upgrade (a WebSocket's frames after its 101), the rest
         * of the connection is relayed as it is: still only to the host it is bound to */
        c->opaque = r.chunked || r.upgrade;
    }
    return true;
}

/* A host with inject rules: interception (egress_tls.c) instead of a tunnel or a relay.
 * false when the host has none. */
bool intercepted(conn *c, bool tls)
{
    if (!abx_egress_tls_wants(c->e->cfg.tls, c->host))
        return false;
    abx_egress_session s = {.cfd = c->cfd, .ufd = c->ufd, .stopfd = c->e->stopfd, .idle_ms = c->e->cfg.idle_ms,
                            .host = c->host, .port = c->port, .tls = tls, .pre = c->buf, .prelen = c->len,
                            .transparent = c->kind == ABX_EGL_TRANSPARENT};
    abx_egress_intercept(c->e->cfg.tls, &s);
    c->up = s.up;
    c->down = s.down;
    if (!tls)
        snprintf(c->method, sizeof c->method, "%s", s.method);
    snprintf(c->path, sizeof c->path, "%s", s.path);
    emit(c, !s.refused, s.reason);
    return true;
}

void serve_http(conn *c, const abx_http_req *r)
{
    begin(c, c->kind == ABX_EGL_TRANSPARENT ? "transparent" : "http", r->host, r->port);
    abx_egress_decision d;
    if (r->hosthdr[0] && strcmp(r->hosthdr, r->host) != 0) {
        emit(c, false, "Host header names another host");
        http_deny(c, r->hosthdr);
        return;
    }
    if (!decide(c, &d)) {
        http_deny(c, r->host);
        return;
    }
    if (!dial(c, &d)) {
        http_error(c, 502, "Bad Gateway", "abx: egress upstream unreachable");
        return;
    }
    if (intercepted(c, false))
        return;
    if (scan_client(c))
        relay(c, true);
    emit(c, true, NULL);
    if (c->denied_host[0])
        http_deny(c, c->denied_host);
}

/* ---- tunnels ---- */

/* Plain first bytes in a tunnel: a proxy request relayed through the allowed host (a
 * CONNECT, or an absolute-form request to another host) is refused. *more: the bytes
 * look like a request line still without its CRLF. */
static const char *plain_check(conn *c, bool *more)
{
    *more = false;
    if (!isupper(c->buf[0]))
        return NULL; /* binary protocols go on at once */
    const unsigned char *eol = memmem(c->buf, c->len, "\r\n", 2);
    if (!eol) {
        for (size_t i = 0; i < c->len; i++)
            if (c->buf[i] < 0x20 || c->buf[i] > 0x7e)
                return NULL;
        *more = true;
        return NULL;
    }
    char line[1024];
    size_t n = (size_t)(eol - c->buf);
    if (n + 4 > sizeof line)
        return NULL;
    memcpy(line, c->buf, n);
    memcpy(line + n, "\r\n\r\n", 4);
    abx_http_req r;
    if (abx_egress_parse_http(line, n + 4, &r) <= 0)
        return NULL; /* not a proxy request line (an origin-form one has no Host here) */
    if (r.connect)
        return "CONNECT inside a tunnel";
    return r.absolute && strcmp(r.host, c->host) != 0 ? "proxy request to another host inside a tunnel" : NULL;
}

/* Look at the tunnel's first client bytes: NULL to go on, or why it is closed. */
static const char *tunnel_check(conn *c)
{
    for (;;) {
        char sni[ABX_EGRESS_HOST_MAX];
        abx_sni_result s = abx_egress_parse_sni(c->buf, c->len, sni);
        if (s == ABX_SNI_FOUND)
            return strcmp(sni, c->host) == 0 ? NULL : "TLS server name differs from the host asked for";
        if (s == ABX_SNI_NONE)
            return NULL;
        if (s == ABX_SNI_BAD)
            return "malformed TLS ClientHello";
        if (s == ABX_SNI_NOT_TLS) {
            bool more;
            const char *why = plain_check(c, &more);
            if (why || !more)
                return why;
        }
        /* more bytes: from the client, unless the upstream speaks first (not TLS, then) */
        struct pollfd p[3] = {{c->cfd, POLLIN, 0}, {c->ufd, POLLIN, 0}, {c->e->stopfd, POLLIN, 0}};
        int r = poll(p, 3, c->e->cfg.idle_ms);
        if (r <= 0 || p[2].revents)
            return "no first bytes";
        if (!p[0].revents && p[1].revents)
            return NULL;
        if (fill(c) <= 0)
            return "no first bytes";
    }
}

static void tunnel(conn *c)
{
    const char *why = tunnel_check(c);
    if (why) {
        emit(c, false, why);
        return;
    }
    if (forward_raw(c))
        relay(c, false);
    emit(c, true, NULL);
}

static void serve_connect(conn *c, const abx_http_req *r)
{
    begin(c, "connect", r->host, r->port);
    snprintf(c->method, sizeof c->method, "CONNECT");
    abx_egress_decision d;
    if (!decide(c, &d)) {
        http_deny(c, r->host);
        return;
    }
    if (!dial(c, &d)) {
        http_error(c, 502, "Bad Gateway", "abx: egress upstream unreachable");
        return;
    }
    if (intercepted(c, true))
        return;
    static const char ok[] = "HTTP/1.1 200 Connection established\r\n\r\n";
    if (send_all(c->cfd, ok, sizeof ok - 1))
        tunnel(c);
}

static void socks_reply(conn *c, unsigned char code)
{
    unsigned char rep[10] = {5, code, 0, 1, 0, 0, 0, 0, 0, 0};
    send_all(c->cfd, rep, sizeof rep);
}

static void serve_socks(conn *c)
{
    bool noauth;
    int h;
    while ((h = abx_egress_parse_socks_hello(c->buf, c->len, &noauth)) == ABX_EG_MORE)
        if (fill(c) <= 0)
            return;
    if (h < 0 || !send_all(c->cfd, noauth ? "\x05\x00" : "\x05\xff", 2) || !noauth)
        return;
    consume(c, (size_t)h);
    int cmd = 0, port = 0;
    char host[ABX_EGRESS_HOST_MAX];
    while ((h = abx_egress_parse_socks_req(c->buf, c->len, &cmd, host, &port)) == ABX_EG_MORE)
        if (fill(c) <= 0)
            return;
    if (h < 0 || cmd != 1) {
        socks_reply(c, h < 0 ? 1 : 7);
        return;
    }
    consume(c, (size_t)h);
    begin(c, "socks5", host, port);
    abx_egress_decision d;
    if (!decide(c, &d)) {
        socks_reply(c, 2); /* connection not allowed by ruleset */
        return;
    }
    if (!dial(c, &d)) {
        socks_reply(c, 5);
        return;
    }
    socks_reply(c, 0);
    tunnel(c);
}

/* ---- connections ---- */

static void serve(conn *c)
{
    if (c->kind == ABX_EGL_TRANSPARENT) {
        abx__egress_serve_transparent(c);
        return;
    }
    if (c->kind == ABX_EGL_DNS_TCP) {
        abx__egress_serve_dns_tcp(c);
        return;
    }
    if (fill(c) <= 0)
        return;
    if (c->buf[0] == 5) {
        serve_socks(c);
        return;
    }
    abx_http_req r;
    int h;
    while ((h = abx_egress_parse_http((const char *)c->buf, c->len, &r)) == ABX_EG_MORE)
        if (fill(c) <= 0)
            return;
    if (h < 0) {
        http_error(c, 400, "Bad Request", "abx: malformed proxy request");
        return;
    }
    if (r.connect) {
        consume(c, (size_t)h);
        serve_connect(c, &r);
    } else {
        serve_http(c, &r);
    }
}

static void *conn_main(void *arg)
{
    conn *c = arg;
    abx_egress *e = c->e;
    set_timeouts(c, c->cfd);
    serve(c);
    pthread_mutex_lock(&e->mu);
    e->slots[c->slot] = NULL;
    if (c->ufd >= 0)
        close(c->ufd);
    close(c->cfd);
    e->active--;
    pthread_cond_broadcast(&e->cv);
    pthread_mutex_unlock(&e->mu);
    abx_free(c);
    return NULL;
}

static void admit(abx_egress *e, int fd, int kind)
{
    conn *c = NULL;
    pthread_mutex_lock(&e->mu);
    int slot = 0;
    while (slot < e->cfg.max_conns && e->slots[slot])
        slot++;
    if (slot < e->cfg.max_conns && (c = abx_calloc(1, sizeof *c))) {
        *c = (conn){.e = e, .slot = slot, .cfd = fd, .ufd = -1, .kind = kind};
        e->slots[slot] = c;
        e->active++;
    }
    pthread_mutex_unlock(&e->mu);
    if (!c) {
        close(fd); /* over max_conns, or out of memory: the client sees the connection end */
        return;
    }
    pthread_attr_t at;
    pthread_t t;
    pthread_attr_init(&at);
    pthread_attr_setdetachstate(&at, PTHREAD_CREATE_DETACHED);
    pthread_attr_setstacksize(&at, 256 * 1024);
    if (pthread_create(&t, &at, conn_main, c) != 0) {
        pthread_mutex_lock(&e->mu);
        e->slots[slot] = NULL;
        e->active--;
        pthread_mutex_unlock(&e->mu);
        close(fd);
        abx_free(c);
    }
    pthread_attr_destroy(&at);
}

static void *accept_main(void *arg)
{
    abx_egress *e = arg;
    size_t n = e->l.n;
    for (;;) {
        struct pollfd p[ABX_EGRESS_LISTEN_MAX + 1];
        for (size_t i = 0; i < n; i++)
            p[i] = (struct pollfd){e->l.fd[i], POLLIN, 0};
        p[n] = (struct pollfd){e->stopfd, POLLIN, 0};
        if (poll(p, n + 1, -1) < 0 && errno != EINTR)
            break;
        if (p[n].revents)
            break;
        for (size_t i = 0; i < n; i++) {
            if (!p[i].revents)
                continue;
            if (e->l.kind[i] == ABX_EGL_DNS_UDP) {
                abx__egress_dns_udp(e, e->l.fd[i]);
                continue;
            }
            int fd = accept4(e->l.fd[i], NULL, NULL, SOCK_CLOEXEC);
            if (fd >= 0)
                admit(e, fd, e->l.kind[i]);
            else if (errno == EMFILE || errno == ENFILE)
                poll(p + n, 1, 100); /* out of descriptors: breathe rather than spin */
        }
    }
    return NULL;
}

static void close_listeners(const abx_egress_listeners *l)
{
    for (size_t i = 0; i < l->n; i++)
        close(l->fd[i]);
}

abx_egress *abx_egress_start(int listen_fd, const abx_egress_config *cfg)
{
    abx_egress_listeners l = {.fd = {listen_fd}, .kind = {ABX_EGL_PROXY}, .n = 1};
    return abx_egress_start_multi(&l, cfg);
}

abx_egress *abx_egress_start_multi(const abx_egress_listeners *l, const abx_egress_config *cfg)
{
    abx_egress *e = abx_calloc(1, sizeof *e);
    if (!e || !cfg || !cfg->allow || l->n == 0 || l->n > ABX_EGRESS_LISTEN_MAX) {
        abx_free(e);
        close_listeners(l);
        errno = e ? EINVAL : ENOMEM;
        return NULL;
    }
    e->cfg = *cfg;
    e->cfg.max_conns = cfg->max_conns > 0 ? cfg->max_conns : 64;
    e->cfg.idle_ms = cfg->idle_ms > 0 ? cfg->idle_ms : 60000;
    e->cfg.connect_ms = cfg->connect_ms > 0 ? cfg->connect_ms : 10000;
    e->l = *l;
    e->stopfd = eventfd(0, EFD_CLOEXEC);
    e->slots = abx_calloc((size_t)e->cfg.max_conns, sizeof *e->slots);
    pthread_mutex_init(&e->mu, NULL);
    pthread_cond_init(&e->cv, NULL);
    if (e->stopfd < 0 || !e->slots || pthread_create(&e->acceptor, NULL, accept_main, e) != 0) {
        int err = e->slots ? errno : ENOMEM;
        if (e->stopfd >= 0)
            close(e->stopfd);
        close_listeners(l);
        pthread_mutex_destroy(&e->mu);
        pthread_cond_destroy(&e->cv);
        abx_free(e->slots);
        abx_free(e);
        errno = err;
        return NULL;
    }
    return e;
}

void abx_egress_stop(abx_egress *e)
{
    if (!e)
        return;
    uint64_t one = 1;
    if (write(e->stopfd, &one, sizeof one) < 0) {
        /* an eventfd write fails only on overflow; the flag is set either way */
    }
    pthread_join(e->acceptor, NULL);
    pthread_mutex_lock(&e->mu);
    for (int i = 0; i < e->cfg.max_conns; i++)
        if (e->slots[i]) { /* unblock a send stuck on a peer that does not read */
            shutdown(e->slots[i]->cfd, SHUT_RDWR);
            if (e->slots[i]->ufd >= 0)
                shutdown(e->slots[i]->ufd, SHUT_RDWR);
        }
    while (e->active > 0)
        pthread_cond_wait(&e->cv, &e->mu);
    pthread_mutex_unlock(&e->mu);
    close_listeners(&e->l);
    close(e->stopfd);
    abx__egress_names_free(e);
    pthread_mutex_destroy(&e->mu);
    pthread_cond_destroy(&e->cv);
    abx_free(e->slots);
    abx_free(e);
}
