/* ports_proxy.c — ports.proxy's relay: one HTTP/1.0 request to a listener the caller's
 * processes hold (ports.c found it), and its answer back.
 *
 * The connection is made at the listener's own address (loopback for a wildcard bind)
 * inside the owner's network namespace: a worker thread enters it (setns on that thread
 * only) to connect. The request carries the caller's method, headers and body, except
 * the hop-by-hop headers and abx's own credentials (Authorization, X-Access-Token,
 * E2B-Traffic-Access-Token), which never reach the server. The answer's status and
 * headers come back (hop-by-hop ones dropped); a body of known length up to
 * SMALL_BODY is relayed whole, anything larger or unsized is streamed through a pump
 * (bounded memory, no size cap). HTTP/1.0 keeps the framing simple: the server ends
 * the body by closing, or says its length; chunked answers are refused. A WebSocket
 * upgrade goes as HTTP/1.1 with the caller's key; after the server's 101 the session
 * is bytes both ways (abx_ws_ops.raw), so the frames are the server's own. */
#include "builtin/ports.h"
#include <arpa/inet.h>
#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <pthread.h>
#include <sched.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/time.h>
#include <unistd.h>

#define HEAD_MAX (64 * 1024)          /* the server's status line and headers */
#define SMALL_BODY (1024 * 1024)      /* relayed whole (with a Content-Length) up to this */
#define IO_TIMEOUT_S 30               /* a server silent this long ends the exchange */

typedef struct connect_job {
    int nsfd;                  /* the owner's network namespace, or -1: abx's own */
    struct sockaddr_storage sa;
    socklen_t salen;
    int fd;                    /* out */
    int err;                   /* out: errno */
} connect_job;

static void *connect_in_ns(void *arg)
{
    connect_job *j = arg;
    j->fd = -1;
    if (j->nsfd >= 0 && setns(j->nsfd, CLONE_NEWNET) != 0) { /* this thread only, and it ends here */
        j->err = errno;
        return NULL;
    }
    int fd = socket(j->sa.ss_family, SOCK_STREAM | SOCK_CLOEXEC, 0);
    if (fd < 0) {
        j->err = errno;
        return NULL;
    }
    struct timeval tv = {.tv_sec = IO_TIMEOUT_S};
    setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof tv);
    setsockopt(fd, SOL_SOCKET, SO_SNDTIMEO, &tv, sizeof tv);
    if (connect(fd, (struct sockaddr *)&j->sa, j->salen) != 0) {
        j->err = errno;
        close(fd);
        return NULL;
    }
    j->fd = fd;
    return NULL;
}

static bool same_netns(int pid)
{
    struct stat a, b;
    char path[64];
    snprintf(path, sizeof path, "/proc/%d/ns/net", pid);
    return stat("/proc/self/ns/net", &a) == 0 && stat(path, &b) == 0 && a.st_ino == b.st_ino && a.st_dev == b.st_dev;
}

/* A connection to the listener, at its own address (loopback for a wildcard bind),
 * inside its owner's network namespace. fd or -errno. */
static int open_listener(const listener *l)
{
    static const unsigned char any6[16] = {0};
    connect_job j = {.nsfd = -1};
    if (l->family == AF_INET) {
        struct sockaddr_in *s4 = (struct sockaddr_in *)&j.sa;
        s4->sin_family = AF_INET;
        s4->sin_port = htons((unsigned short)l->port);
        memcpy(&s4->sin_addr, l->addr, 4);
        if (s4->sin_addr.s_addr == htonl(INADDR_ANY))
            s4->sin_addr.s_addr = htonl(INADDR_LOOPBACK);
        j.salen = sizeof *s4;
    } else {
        struct sockaddr_in6 *s6 = (struct sockaddr_in6 *)&j.sa;
        s6->sin6_family = AF_INET6;
        s6->sin6_port = htons((unsigned short)l->port);
        memcpy(&s6->sin6_addr, memcmp(l->addr, any6, 16) == 0 ? in6addr_loopback.s6_addr : l->addr, 16);
        j.salen = sizeof *s6;
    }
    if (!same_netns(l->pid)) {
        char path[64];
        snprintf(path, sizeof path, "/proc/%d/ns/net", l->pid);
        j.nsfd = open(path, O_RDONLY | O_CLOEXEC);
        if (j.nsfd < 0)
            return -errno;
    }
    pthread_t t;
    if (j.nsfd < 0) /* abx's own namespace: no thread to enter it */
        connect_in_ns(&j);
    else if (pthread_create(&t, NULL, connect_in_ns, &j) != 0) {
        close(j.nsfd);
        return -EAGAIN;
    } else {
        pthread_join(t, NULL);
        close(j.nsfd);
    }
    return j.fd >= 0 ? j.fd : -j.err;
}

static bool send_all(int fd, const char *p, size_t n)
{
    while (n) {
        ssize_t k = send(fd, p, n, MSG_NOSIGNAL);
        if (k <= 0)
            return false;
        p += k;
        n -= (size_t)k;
    }
    return true;
}

/* Whether name is one of the comma-separated tokens of list (case-insensitive). */
static bool in_token_list(const char *list, const char *name)
{
    size_t nl = strlen(name);
    for (const char *p = list; p && *p;) {
        p += strspn(p, " \t,");
        size_t n = strcspn(p, ",");
        size_t t = n;
        while (t && (p[t - 1] == ' ' || p[t - 1] == '\t'))
            t--;
        if (t == nl && strncasecmp(p, name, nl) == 0)
            return true;
        p += n;
    }
    return false;
}

/* Hop-by-hop headers (RFC 9110 7.6.1) and the framing the relay sets itself. */
static bool hop_by_hop(const char *name)
{
    static const char *const hop[] = {"Connection", "Keep-Alive", "Proxy-Connection", "Proxy-Authenticate",
                                      "Proxy-Authorization", "TE", "Trailer", "Transfer-Encoding", "Upgrade",
                                      "Content-Length"};
    for (size_t i = 0; i < sizeof hop / sizeof hop[0]; i++)
        if (strcasecmp(name, hop[i]) == 0)
            return true;
    return false;
}

/* The Cookie header without abx's own port-origin session (ABX_PORT_COOKIE). */
static int forward_cookies(abx_buf *b, const char *value)
{
    static const char own[] = ABX_PORT_COOKIE "=";
    size_t mark = b->len;
    bool any = false;
    abx_buf_puts(b, "Cookie: ");
    for (const char *p = value; *p;) {
        while (*p == ' ' || *p == ';')
            p++;
        const char *end = strchr(p, ';');
        size_t n = end ? (size_t)(end - p) : strlen(p);
        if (n && !(n >= sizeof own - 1 && memcmp(p, own, sizeof own - 1) == 0)) {
            abx_buf_printf(b, "%s%.*s", any ? "; " : "", (int)n, p);
            any = true;
        }
        p += n;
    }
    if (any)
        abx_buf_puts(b, "\r\n");
    else
        b->len = mark; /* only abx's cookie: no Cookie header at all */
    return 0;
}

typedef struct fwd {
    abx_buf *b;
    const char *connection; /* the Connection header: the headers it names are hop-by-hop too */
} fwd;

static int forward_header(void *ud, const char *name, const char *value)
{
    fwd *f = ud;
    /* abx's credentials stay in abx; Host names the upstream; Expect is answered by abx */
    static const char *const own[] = {"Authorization", "X-Access-Token", "E2B-Traffic-Access-Token", "Host",
                                      "Expect", "Sec-WebSocket-Extensions"};
    for (size_t i = 0; i < sizeof own / sizeof own[0]; i++)
        if (strcasecmp(name, own[i]) == 0)
            return 0;
    if (hop_by_hop(name) || (f->connection && in_token_list(f->connection, name)) || strpbrk(name, "\r\n:") ||
        strpbrk(value, "\r\n"))
        return 0;
    if (strcasecmp(name, "Cookie") == 0)
        return forward_cookies(f->b, value);
    abx_buf_printf(f->b, "%s: %s\r\n", name, value);
    return 0;
}

/* The request head: the caller's method (GET over RPC), the path below /ports/{port}/
 * (encoded again) with the raw query, the caller's headers but abx's own. */
static char *request_head(abx_ctx *ctx, const char *method, int port, const char *rest, size_t body_len, bool ws)
{
    static const char keep[] = "-._~!$&'()*+,;=:@/";
    abx_buf b;
    abx_buf_init(&b, 0);
    abx_buf_printf(&b, "%s /", method);
    for (const unsigned char *p = (const unsigned char *)rest; *p; p++) {
        if ((*p >= 'a' && *p <= 'z') || (*p >= 'A' && *p <= 'Z') || (*p >= '0' && *p <= '9') || strchr(keep, *p))
            abx_buf_putc(&b, (char)*p);
        else
            abx_buf_printf(&b, "%%%02X", *p);
    }
    size_t qlen;
    const char *q = abx_ctx_raw_query(ctx, &qlen);
    if (q)
        abx_buf_printf(&b, "?%.*s", (int)qlen, q);
    abx_buf_printf(&b, " HTTP/1.%d\r\nHost: 127.0.0.1:%d\r\n", ws ? 1 : 0, port);
    fwd f = {&b, abx_ctx_header(ctx, "Connection")};
    abx_ctx_headers_each(ctx, forward_header, &f);
    if (!abx_ctx_header(ctx, "Accept"))
        abx_buf_printf(&b, "Accept: */*\r\n");
    if (body_len || (strcmp(method, "GET") && strcmp(method, "HEAD") && strcmp(method, "OPTIONS") &&
                     strcmp(method, "DELETE")))
        abx_buf_printf(&b, "Content-Length: %zu\r\n", body_len);
    abx_buf_printf(&b, ws ? "Connection: Upgrade\r\nUpgrade: websocket\r\n\r\n" : "Connection: close\r\n\r\n");
    abx_buf_putc(&b, '\0');
    return abx_buf_detach(&b);
}

/* ---- the answer ---- */

typedef struct body_stream {
    int fd;
    char *pending;      /* body bytes read with the head */
    size_t n_pending, off;
    char ctype[200];
} body_stream;

static long body_read(void *state, char *buf, size_t max)
{
    body_stream *s = state;
    if (s->off < s->n_pending) {
        size_t n = s->n_pending - s->off < max ? s->n_pending - s->off : max;
        memcpy(buf, s->pending + s->off, n);
        s->off += n;
        return (long)n;
    }
    ssize_t k = recv(s->fd, buf, max, 0);
    return k > 0 ? (long)k : k == 0 ? 0 : -1;
}

static void body_free(void *state)
{
    body_stream *s = state;
    close(s->fd);
    abx_free(s->pending);
    abx_free(s);
}

/* The server's head (len bytes, ending in the blank line): status, Content-Type,
 * Content-Length, chunked, and every header but the hop-by-hop ones and those abx sets
 * itself handed to add. false when it is not an HTTP head (a NUL in it included). */
bool abx_ports_parse_head(const char *data, size_t len, ports_head *h,
                          void (*add)(void *ud, const char *name, const char *value), void *ud)
{
    memset(h, 0, sizeof *h);
    h->length = -1;
    snprintf(h->ctype, sizeof h->ctype, "application/octet-stream");
    if (len < 4 || memcmp(data + len - 4, "\r\n\r\n", 4) != 0 || memchr(data, '\0', len))
        return false;
    char *head = abx_strndup(data, len); /* NUL-terminated from here on */
    if (!head)
        return false;
    const char *eoh = head + len - 2;     /* the blank line's CRLF */
    if (sscanf(head, "HTTP/%*d.%*d %d", &h->status) != 1 || h->status < 100 || h->status > 599) {
        abx_free(head);
        return false;
    }
    static const char *const skip[] = {"Content-Type", "Cache-Control", "X-Content-Type-Options", "X-Request-Id",
                                       "X-ABX-Server", "Date", "Server"};
    char *conn = NULL;
    for (int pass = 0; pass < 2; pass++)
        for (const char *v = strstr(head, "\r\n") + 2; v < eoh; v = strstr(v, "\r\n") + 2) {
            const char *le = strstr(v, "\r\n"), *colon = memchr(v, ':', (size_t)(le - v));
            if (!colon || colon == v || (size_t)(colon - v) >= 128)
                continue;
            char name[128];
            snprintf(name, sizeof name, "%.*s", (int)(colon - v), v);
            const char *val = colon + 1 + strspn(colon + 1, " \t");
            int vlen = (int)(le - val);
            while (vlen > 0 && (val[vlen - 1] == ' ' || val[vlen - 1] == '\t'))
                vlen--;
            char *value = abx_strndup(val, vlen > 0 ? (size_t)vlen : 0);
            if (!value)
                continue;
            if (pass == 0) { /* the Connection header first: the headers it names are hop-by-hop */
                if (strcasecmp(name, "Connection") == 0 && !conn)
                    conn = value;
                else
                    abx_free(value);
                continue;
            }
            if (strcasecmp(name, "Content-Type") == 0)
                snprintf(h->ctype, sizeof h->ctype, "%s", value);
            else if (strcasecmp(name, "Content-Length") == 0)
                h->length = strtoll(value, NULL, 10);
            else if (strcasecmp(name, "Transfer-Encoding") == 0)
                h->chunked = true;
            bool drop = hop_by_hop(name) || (conn && in_token_list(conn, name)) || strpbrk(name, " \t\r\n") ||
                        strpbrk(value, "\r\n"); /* a bare CR inside a line: never relayed */
            for (size_t i = 0; i < sizeof skip / sizeof skip[0] && !drop; i++)
                drop = strcasecmp(name, skip[i]) == 0;
            if (!drop && add)
                add(ud, name, value);
            abx_free(value);
        }
    abx_free(conn);
    abx_free(head);
    return true;
}

static void add_to_reply(void *ud, const char *name, const char *value) { abx_reply_header_add(ud, name, value); }

/* Read up to the end of the head; the bytes after it stay in *buf past *head_len. */
static bool read_head(abx_ctx *ctx, int fd, abx_buf *b, size_t *head_len)
{
    char chunk[16384];
    while (b->len < HEAD_MAX && !abx_ctx_cancelled(ctx)) {
        ssize_t k = recv(fd, chunk, sizeof chunk, 0);
        if (k <= 0)
            break;
        abx_buf_append(b, chunk, (size_t)k);
        const char *eoh = memmem(b->data, b->len, "\r\n\r\n", 4);
        if (eoh) {
            *head_len = (size_t)(eoh + 4 - b->data);
            return true;
        }
    }
    return false;
}

static abx_err relay_answer(abx_ctx *ctx, int fd, const char *method, abx_reply *r)
{
    abx_buf b;
    abx_buf_init(&b, 0);
    size_t head_len = 0;
    ports_head h;
    if (!read_head(ctx, fd, &b, &head_len) || !abx_ports_parse_head(b.data, head_len, &h, add_to_reply, r)) {
        abx_buf_release(&b);
        close(fd);
        return abx_reply_error(r, ABX_E_PORTS_UPSTREAM, NULL, "the server on the port did not answer with HTTP");
    }
    if (h.chunked) {
        abx_buf_release(&b);
        close(fd);
        return abx_reply_error(r, ABX_E_PORTS_UPSTREAM, NULL,
                               "the server answered an HTTP/1.0 request with a chunked body");
    }
    abx_reply_status(r, h.status);
    bool no_body = strcmp(method, "HEAD") == 0 || h.status == 204 || h.status == 304 || h.status < 200;
    if (no_body || (h.length >= 0 && h.length <= SMALL_BODY)) {
        size_t want = no_body ? 0 : (size_t)h.length;
        char chunk[16384];
        ssize_t k;
        while (b.len - head_len < want && !abx_ctx_cancelled(ctx) && (k = recv(fd, chunk, sizeof chunk, 0)) > 0)
            abx_buf_append(&b, chunk, (size_t)k);
        size_t got = b.len - head_len < want ? b.len - head_len : want;
        abx_reply_bytes(r, b.data + head_len, got, h.ctype);
        abx_buf_release(&b);
        close(fd);
        return ABX_OK;
    }
    body_stream *s = abx_calloc(1, sizeof *s);
    if (!s) {
        abx_buf_release(&b);
        close(fd);
        return abx_reply_error(r, ABX_E_SERVER_UNAVAILABLE, NULL, "out of memory");
    }
    s->fd = fd;
    s->n_pending = b.len - head_len;
    s->pending = s->n_pending ? abx_malloc(s->n_pending) : NULL; /* binary: not a string */
    if (s->pending)
        memcpy(s->pending, b.data + head_len, s->n_pending);
    else
        s->n_pending = 0;
    snprintf(s->ctype, sizeof s->ctype, "%s", h.ctype);
    abx_buf_release(&b);
    abx_reply_stream(r, s->ctype, body_read, s, body_free);
    return ABX_OK;
}

/* ---- WebSocket: after both 101s, bytes both ways ---- */

typedef struct ws_relay {
    int fd;             /* the server */
    char *pending;      /* the server's bytes read with its 101 */
    size_t n_pending;
} ws_relay;

static bool pass(int from, int to)
{
    char buf[16384];
    ssize_t k = recv(from, buf, sizeof buf, 0);
    return k > 0 && send_all(to, buf, (size_t)k);
}

static void ws_raw(void *state, int sock, const char *extra, size_t extra_len)
{
    ws_relay *w = state;
    struct timeval none = {0};
    setsockopt(w->fd, SOL_SOCKET, SO_RCVTIMEO, &none, sizeof none); /* a session may idle */
    if ((extra_len && !send_all(w->fd, extra, extra_len)) || (w->n_pending && !send_all(sock, w->pending, w->n_pending)))
        return;
    for (;;) {
        struct pollfd p[2] = {{.fd = sock, .events = POLLIN}, {.fd = w->fd, .events = POLLIN}};
        if (poll(p, 2, -1) < 0) {
            if (errno == EINTR)
                continue;
            return;
        }
        if ((p[0].revents && !pass(sock, w->fd)) || (p[1].revents && !pass(w->fd, sock)))
            return;
    }
}

static void ws_free(void *state)
{
    ws_relay *w = state;
    close(w->fd);
    abx_free(w->pending);
    abx_free(w);
}

static const abx_ws_ops proxy_ws_ops = {NULL, NULL, ws_free, ws_raw};

/* The server's 101: the caller's upgrade completes with the same key, so the frames on
 * both sides are the same bytes. Any other answer is relayed as an answer. */
static abx_err relay_upgrade(abx_ctx *ctx, int fd, abx_reply *r)
{
    abx_buf b;
    abx_buf_init(&b, 0);
    size_t head_len = 0;
    int status = 0;
    if (!read_head(ctx, fd, &b, &head_len) || sscanf(b.data, "HTTP/1.%*d %d", &status) != 1) {
        abx_buf_release(&b);
        close(fd);
        return abx_reply_error(r, ABX_E_PORTS_UPSTREAM, NULL, "the server on the port did not answer with HTTP");
    }
    if (status != 101) {
        abx_buf_release(&b);
        close(fd);
        return abx_reply_error(r, ABX_E_PORTS_UPSTREAM, NULL, "the server refused the WebSocket upgrade (HTTP %d)",
                               status);
    }
    ws_relay *w = abx_calloc(1, sizeof *w);
    if (!w) {
        abx_buf_release(&b);
        close(fd);
        return abx_reply_error(r, ABX_E_SERVER_UNAVAILABLE, NULL, "out of memory");
    }
    w->fd = fd;
    w->n_pending = b.len - head_len;
    w->pending = w->n_pending ? abx_malloc(w->n_pending) : NULL;
    if (w->pending)
        memcpy(w->pending, b.data + head_len, w->n_pending);
    else
        w->n_pending = 0;
    const char *proto = strcasestr(b.data, "\r\nSec-WebSocket-Protocol:");
    if (proto && proto < b.data + head_len) {
        proto += 25;
        proto += strspn(proto, " \t");
        char value[256];
        snprintf(value, sizeof value, "%.*s", (int)strcspn(proto, "\r\n"), proto);
        abx_reply_header(r, "Sec-WebSocket-Protocol", value);
    }
    abx_buf_release(&b);
    abx_reply_websocket(r, &proxy_ws_ops, w);
    return ABX_OK;
}

abx_err abx_ports_relay(abx_ctx *ctx, const listener *l, int port, const char *rest, abx_reply *r)
{
    int fd = open_listener(l);
    if (fd < 0)
        return abx_reply_error(r, ABX_E_PORTS_UPSTREAM, NULL, "cannot connect to port %d: %s", port, strerror(-fd));
    const char *method = abx_ctx_method(ctx);
    if (!method)
        method = "GET";
    size_t body_len;
    const char *body = abx_ctx_raw_body(ctx, &body_len);
    bool ws = abx_ctx_ws_requested(ctx) && strcmp(method, "GET") == 0;
    char *head = request_head(ctx, method, port, rest, body_len, ws);
    bool sent = head && send_all(fd, head, strlen(head)) && (!body_len || send_all(fd, body, body_len));
    abx_free(head);
    if (!sent) {
        close(fd);
        return abx_reply_error(r, ABX_E_PORTS_UPSTREAM, NULL, "cannot send the request to port %d", port);
    }
    if (ws)
        return relay_upgrade(ctx, fd, r);
    shutdown(fd, SHUT_WR);
    return relay_answer(ctx, fd, method, r);
}
