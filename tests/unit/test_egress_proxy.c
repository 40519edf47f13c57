/* test_egress_proxy.c — the egress proxy (src/sandbox/egress.c) end to end on loopback:
 * an upstream on 127.0.0.1 (HTTP answers echoing the request line; raw bytes echoed),
 * named through the resolver table. Allowed host works (forward, CONNECT, SOCKS5);
 * unlisted host gets 403 with the policy message (SOCKS: reply 2); a wildcard name
 * pinned to loopback (rebinding) is refused; a ClientHello naming another host, or a
 * CONNECT inside the tunnel, closes it; another host on a kept-alive connection is
 * refused; every connection is reported to the record callback; stop ends idle clients. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include <arpa/inet.h>
#include <netinet/in.h>
#include <poll.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include "core/util.h"
#include "sandbox/egress.h"
#include "egress_hello.h"

static int listen_lo(int *port)
{
    int fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
    struct sockaddr_in a = {.sin_family = AF_INET, .sin_addr.s_addr = htonl(INADDR_LOOPBACK)};
    socklen_t l = sizeof a;
    if (fd < 0 || bind(fd, (struct sockaddr *)&a, sizeof a) < 0 || listen(fd, 16) < 0 ||
        getsockname(fd, (struct sockaddr *)&a, &l) < 0)
        fail_msg("listen");
    *port = ntohs(a.sin_port);
    return fd;
}

/* ---- the upstream: one thread per connection ---- */

static void *upstream_conn(void *arg)
{
    int fd = (int)(intptr_t)arg;
    char buf[8192];
    size_t len = 0;
    for (;;) {
        ssize_t n = recv(fd, buf + len, sizeof buf - len - 1, 0);
        if (n <= 0)
            break;
        len += (size_t)n;
        buf[len] = '\0';
        if ((unsigned char)buf[0] == 0x16 || buf[0] == 'R') { /* raw: echo */
            send(fd, buf, len, MSG_NOSIGNAL);
            len = 0;
            continue;
        }
        char *end = strstr(buf, "\r\n\r\n");
        if (!end)
            continue;
        size_t line = strcspn(buf, "\r");
        char *host = strstr(buf, "\r\nHost: ");
        size_t hl = host ? strcspn(host + 8, "\r") : 0;
        char resp[1024], body[600];
        int bl = snprintf(body, sizeof body, "%.*s|%.*s|%s", (int)line, buf, (int)hl, host ? host + 8 : "",
                          strstr(buf, "Proxy-Authorization") ? "leaked" : "clean");
        int rl = snprintf(resp, sizeof resp, "HTTP/1.1 200 OK\r\nContent-Length: %d\r\n\r\n%s", bl, body);
        send(fd, resp, (size_t)rl, MSG_NOSIGNAL);
        size_t used = (size_t)(end + 4 - buf);
        memmove(buf, buf + used, len - used);
        len -= used;
    }
    close(fd);
    return NULL;
}

static void *upstream_main(void *arg)
{
    int lfd = (int)(intptr_t)arg;
    for (;;) {
        int fd = accept(lfd, NULL, NULL);
        if (fd < 0)
            return NULL;
        pthread_t t;
        pthread_create(&t, NULL, upstream_conn, (void *)(intptr_t)fd);
        pthread_detach(t);
    }
}

/* ---- records ---- */

static pthread_mutex_t rec_mu = PTHREAD_MUTEX_INITIALIZER;
static char rec_log[64][400];
static int rec_n;

static void on_record(const abx_egress_record *r, void *ctx)
{
    (void)ctx;
    pthread_mutex_lock(&rec_mu);
    if (rec_n < 64)
        snprintf(rec_log[rec_n++], sizeof rec_log[0], "%s %s:%d addr=%s %s rule=%s reason=%s %s %s up=%llu down=%llu",
                 r->proto, r->host, r->port, r->addr, r->allowed ? "allow" : "deny", r->rule, r->reason, r->method,
                 r->path, (unsigned long long)r->bytes_up, (unsigned long long)r->bytes_down);
    pthread_mutex_unlock(&rec_mu);
}

/* wait (up to 2 s) for a record containing all of a and b */
static void want_record(const char *a, const char *b)
{
    for (int tries = 0; tries < 200; tries++) {
        pthread_mutex_lock(&rec_mu);
        for (int i = 0; i < rec_n; i++)
            if (strstr(rec_log[i], a) && (!b || strstr(rec_log[i], b))) {
                pthread_mutex_unlock(&rec_mu);
                return;
            }
        pthread_mutex_unlock(&rec_mu);
        usleep(10000);
    }
    for (int i = 0; i < rec_n; i++)
        fprintf(stderr, "record: %s\n", rec_log[i]);
    fail_msg("no record with '%s' and '%s'", a, b ? b : "");
}

/* ---- the fixture ---- */

static int up_port, px_port, up_lfd, dead_port;
static abx_egress *px;
static abx_egress_allow allow;
static abx_egress_resolver resolver;

static int setup(void **state)
{
    (void)state;
    up_lfd = listen_lo(&up_port);
    pthread_t t;
    pthread_create(&t, NULL, upstream_main, (void *)(intptr_t)up_lfd);
    pthread_detach(t);
    char e[200], err[200];
    close(listen_lo(&dead_port)); /* a port nothing listens on */
    snprintf(e, sizeof e, "dead.test:%d:127.0.0.1", dead_port);
    if (abx_egress_resolve_add(&resolver, e, err, sizeof err) < 0 ||
        (snprintf(e, sizeof e, "dead.test:%d", dead_port), abx_egress_allow_add(&allow, e, err, sizeof err)) < 0)
        fail_msg("%s", err);
    const char *names[] = {"allowed.test", "pinned.test", "evil.wild.test"};
    for (size_t i = 0; i < 3; i++) {
        snprintf(e, sizeof e, "%s:%d:127.0.0.1", names[i], up_port);
        if (abx_egress_resolve_add(&resolver, e, err, sizeof err) < 0)
            fail_msg("%s", err);
    }
    const char *entries[] = {"allowed.test", "*.wild.test", "[::1]"};
    for (size_t i = 0; i < 3; i++) {
        snprintf(e, sizeof e, "%s:%d", entries[i], up_port);
        if (abx_egress_allow_add(&allow, e, err, sizeof err) < 0)
            fail_msg("%s", err);
    }
    abx_egress_config cfg = {.allow = &allow, .resolver = &resolver, .idle_ms = 3000, .record = on_record};
    px = abx_egress_start(listen_lo(&px_port), &cfg);
    return px ? 0 : -1;
}

static int teardown(void **state)
{
    (void)state;
    abx_egress_stop(px);
    abx_egress_allow_free(&allow);
    abx_egress_resolver_free(&resolver);
    shutdown(up_lfd, SHUT_RDWR);
    close(up_lfd);
    return 0;
}

static int dial_proxy(void)
{
    int fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
    struct sockaddr_in a = {.sin_family = AF_INET, .sin_port = htons((uint16_t)px_port),
                            .sin_addr.s_addr = htonl(INADDR_LOOPBACK)};
    struct timeval tv = {5, 0};
    setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof tv);
    if (connect(fd, (struct sockaddr *)&a, sizeof a) < 0)
        fail_msg("connect proxy");
    return fd;
}

static void put(int fd, const void *p, size_t n)
{
    if (send(fd, p, n, MSG_NOSIGNAL) != (ssize_t)n)
        fail_msg("send");
}

static void puts_fmt(int fd, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
static void puts_fmt(int fd, const char *fmt, ...)
{
    char b[1024];
    va_list ap;
    va_start(ap, fmt);
    int n = vsnprintf(b, sizeof b, fmt, ap);
    va_end(ap);
    put(fd, b, (size_t)n);
}

/* read until want appears (true), or EOF/timeout (false); the bytes land in out */
static bool read_until(int fd, char *out, size_t cap, const char *want)
{
    size_t len = 0;
    out[0] = '\0';
    while (len + 1 < cap) {
        ssize_t n = recv(fd, out + len, cap - len - 1, 0);
        if (n <= 0)
            return false;
        len += (size_t)n;
        out[len] = '\0';
        if (want && strstr(out, want))
            return true;
    }
    return false;
}

static bool closed(int fd)
{
    char b[256];
    ssize_t n;
    while ((n = recv(fd, b, sizeof b, 0)) > 0) {
    }
    return n == 0;
}

/* ---- the tests ---- */

static void test_forward_allowed(void **state)
{
    (void)state;
    int fd = dial_proxy();
    puts_fmt(fd, "GET http://allowed.test:%d/hello?secret=1 HTTP/1.1\r\nHost: allowed.test:%d\r\n"
                 "Proxy-Authorization: Basic eA==\r\n\r\n", up_port, up_port);
    char b[2048];
    assert_true(read_until(fd, b, sizeof b, "clean"));
    assert_non_null(strstr(b, "200 OK"));
    assert_non_null(strstr(b, "GET /hello?secret=1 HTTP/1.1|allowed.test:"));
    /* same host again on the kept-alive connection: served */
    puts_fmt(fd, "GET http://allowed.test:%d/second HTTP/1.1\r\nHost: allowed.test:%d\r\n\r\n", up_port, up_port);
    assert_true(read_until(fd, b, sizeof b, "clean"));
    assert_non_null(strstr(b, "GET /second"));
    /* a query without a path asks for "/?q" */
    puts_fmt(fd, "GET http://allowed.test:%d?q=1 HTTP/1.1\r\nHost: allowed.test:%d\r\n\r\n", up_port, up_port);
    assert_true(read_until(fd, b, sizeof b, "clean"));
    assert_non_null(strstr(b, "GET /?q=1 HTTP/1.1|"));
    /* another host on it: refused */
    puts_fmt(fd, "GET http://evil.wild.test:%d/ HTTP/1.1\r\n\r\n", up_port);
    assert_true(read_until(fd, b, sizeof b, "denied by policy"));
    assert_non_null(strstr(b, "403 Forbidden"));
    assert_non_null(strstr(b, "abx: egress to evil.wild.test denied by policy"));
    close(fd);
    want_record("http allowed.test", "allow rule=allowed.test:");
    want_record("GET /hello up=", NULL); /* the path without its query */
    want_record("deny", "another host on a kept-alive connection");
}

static void test_forward_denied(void **state)
{
    (void)state;
    int fd = dial_proxy();
    puts_fmt(fd, "GET http://unlisted.test:%d/ HTTP/1.1\r\n\r\n", up_port);
    char b[2048];
    assert_true(read_until(fd, b, sizeof b, "\n\n") || strstr(b, "denied"));
    assert_non_null(strstr(b, "HTTP/1.1 403"));
    assert_non_null(strstr(b, "abx: egress to unlisted.test denied by policy"));
    close(fd);
    want_record("http unlisted.test", "not in the allowlist");
    /* a wildcard name pinned to loopback: rebinding */
    fd = dial_proxy();
    puts_fmt(fd, "GET http://evil.wild.test:%d/ HTTP/1.1\r\n\r\n", up_port);
    assert_true(read_until(fd, b, sizeof b, "denied by policy"));
    close(fd);
    want_record("http evil.wild.test", "127.0.0.1 (loopback)");
    /* Host header disagreeing with the target */
    fd = dial_proxy();
    puts_fmt(fd, "GET http://allowed.test:%d/ HTTP/1.1\r\nHost: other.test\r\n\r\n", up_port);
    assert_true(read_until(fd, b, sizeof b, "denied by policy"));
    close(fd);
    want_record("Host header names another host", NULL);
    fd = dial_proxy(); /* allowed, but nothing answers */
    puts_fmt(fd, "GET http://dead.test:%d/ HTTP/1.1\r\n\r\n", dead_port);
    assert_true(read_until(fd, b, sizeof b, "unreachable"));
    assert_non_null(strstr(b, "502 Bad Gateway"));
    close(fd);
    want_record("http dead.test", "upstream unreachable");
    fd = dial_proxy(); /* a CONNECT after a forwarded request */
    puts_fmt(fd, "GET http://allowed.test:%d/ HTTP/1.1\r\n\r\n", up_port);
    assert_true(read_until(fd, b, sizeof b, "clean"));
    puts_fmt(fd, "CONNECT allowed.test:%d HTTP/1.1\r\n\r\n", up_port);
    assert_true(read_until(fd, b, sizeof b, "denied by policy"));
    close(fd);
    want_record("CONNECT on a forward-proxy connection", NULL);
    fd = dial_proxy();
    puts_fmt(fd, "GARBAGE\r\n\r\n");
    assert_true(read_until(fd, b, sizeof b, "malformed"));
    assert_non_null(strstr(b, "400 Bad Request"));
    close(fd);
}

static int connect_tunnel(const char *host)
{
    int fd = dial_proxy();
    puts_fmt(fd, "CONNECT %s:%d HTTP/1.1\r\nHost: %s:%d\r\n\r\n", host, up_port, host, up_port);
    char b[512];
    if (!read_until(fd, b, sizeof b, "\r\n\r\n") || !strstr(b, " 200 "))
        fail_msg("CONNECT %s: %s", host, b);
    return fd;
}

static void test_connect(void **state)
{
    (void)state;
    unsigned char h[600];
    char b[2048];
    size_t n = build_hello(h, "allowed.test");
    int fd = connect_tunnel("allowed.test");
    put(fd, h, n);
    ssize_t got = recv(fd, b, n, MSG_WAITALL);
    assert_int_equal(got, (ssize_t)n); /* echoed through the tunnel */
    assert_memory_equal(b, h, n);
    close(fd);
    want_record("connect allowed.test", "allow");

    fd = connect_tunnel("allowed.test");
    n = build_hello(h, "evil.example");
    put(fd, h, n);
    assert_true(closed(fd));
    close(fd);
    want_record("connect allowed.test", "TLS server name differs");

    fd = connect_tunnel("allowed.test");
    puts_fmt(fd, "CONNECT evil.example:443 HTTP/1.1\r\n\r\n");
    assert_true(closed(fd));
    close(fd);
    want_record("CONNECT inside a tunnel", NULL);

    fd = connect_tunnel("allowed.test"); /* a request for another host relayed through the tunnel */
    puts_fmt(fd, "GET http://evil.example/ HTTP/1.1\r\n\r\n");
    assert_true(closed(fd));
    close(fd);
    want_record("proxy request to another host inside a tunnel", NULL);

    fd = connect_tunnel("allowed.test"); /* plain HTTP to the host itself, absolute form: fine */
    puts_fmt(fd, "GET http://allowed.test/in HTTP/1.1\r\nHost: allowed.test\r\n\r\n");
    assert_true(read_until(fd, b, sizeof b, "clean"));
    assert_non_null(strstr(b, "GET http://allowed.test/in"));
    close(fd);

    fd = connect_tunnel("allowed.test"); /* not TLS, not a request: tunneled untouched */
    puts_fmt(fd, "RAW bytes\r\n");
    assert_true(read_until(fd, b, sizeof b, "RAW bytes"));
    close(fd);

    fd = connect_tunnel("allowed.test"); /* a handshake record that is no ClientHello */
    put(fd, "\x16\x03\x01\x00\x05\x02\x00\x00\x01\x00", 10);
    assert_true(closed(fd));
    close(fd);
    want_record("malformed TLS ClientHello", NULL);

    fd = dial_proxy();
    puts_fmt(fd, "CONNECT dead.test:%d HTTP/1.1\r\n\r\n", dead_port);
    assert_true(read_until(fd, b, sizeof b, "unreachable"));
    assert_non_null(strstr(b, "502"));
    close(fd);

    fd = dial_proxy();
    puts_fmt(fd, "CONNECT unlisted.test:443 HTTP/1.1\r\n\r\n");
    assert_true(read_until(fd, b, sizeof b, "denied by policy"));
    assert_non_null(strstr(b, "403"));
    close(fd);
}

static int socks_connect(const char *host, int port, unsigned char *reply)
{
    int fd = dial_proxy();
    put(fd, "\x05\x01\x00", 3);
    unsigned char b[16];
    if (recv(fd, b, 2, MSG_WAITALL) != 2 || b[0] != 5 || b[1] != 0)
        fail_msg("socks greeting");
    unsigned char req[300] = {5, 1, 0, 3, (unsigned char)strlen(host)};
    memcpy(req + 5, host, strlen(host));
    size_t n = 5 + strlen(host);
    req[n++] = (unsigned char)(port >> 8);
    req[n++] = (unsigned char)port;
    put(fd, req, n);
    if (recv(fd, reply, 10, MSG_WAITALL) != 10)
        fail_msg("socks reply");
    return fd;
}

static void test_socks(void **state)
{
    (void)state;
    unsigned char rep[10], h[600];
    char b[1024];
    int fd = socks_connect("allowed.test", up_port, rep);
    assert_int_equal(rep[1], 0);
    size_t n = build_hello(h, "allowed.test");
    put(fd, h, n);
    assert_int_equal(recv(fd, b, n, MSG_WAITALL), (ssize_t)n);
    close(fd);
    want_record("socks5 allowed.test", "allow");
    fd = socks_connect("unlisted.test", up_port, rep);
    assert_int_equal(rep[1], 2);
    assert_true(closed(fd));
    close(fd);
    want_record("socks5 unlisted.test", "deny");
    fd = socks_connect("evil.wild.test", up_port, rep);
    assert_int_equal(rep[1], 2);
    close(fd);
    /* BIND is not spoken (7); a malformed request is a general failure (1) */
    unsigned char g[2], r10[10];
    fd = dial_proxy();
    put(fd, "\x05\x01\x00", 3);
    assert_int_equal(recv(fd, g, 2, MSG_WAITALL), 2);
    put(fd, "\x05\x02\x00\x01\x7f\x00\x00\x01\x00\x50", 10);
    assert_int_equal(recv(fd, r10, 10, MSG_WAITALL), 10);
    assert_int_equal(r10[1], 7);
    close(fd);
    fd = dial_proxy();
    put(fd, "\x05\x01\x00", 3);
    assert_int_equal(recv(fd, g, 2, MSG_WAITALL), 2);
    put(fd, "\x05\x01\x00\x09\x00\x00", 6);
    assert_int_equal(recv(fd, r10, 10, MSG_WAITALL), 10);
    assert_int_equal(r10[1], 1);
    close(fd);
    fd = socks_connect("dead.test", dead_port, rep); /* allowed, nothing answers: 5 */
    assert_int_equal(rep[1], 5);
    close(fd);
    /* only "no authentication" is spoken */
    fd = dial_proxy();
    put(fd, "\x05\x01\x02", 3);
    assert_int_equal(recv(fd, g, 2, MSG_WAITALL), 2);
    assert_int_equal(g[1], 0xff);
    close(fd);
}

static void test_stop_with_idle_client(void **state)
{
    (void)state;
    int port;
    abx_egress_config cfg = {.allow = &allow, .resolver = &resolver, .idle_ms = 60000};
    abx_egress *p = abx_egress_start(listen_lo(&port), &cfg);
    assert_non_null(p);
    int fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
    struct sockaddr_in a = {.sin_family = AF_INET, .sin_port = htons((uint16_t)port),
                            .sin_addr.s_addr = htonl(INADDR_LOOPBACK)};
    assert_int_equal(connect(fd, (struct sockaddr *)&a, sizeof a), 0);
    put(fd, "GET http://allowed.test", 23); /* half a head, then nothing */
    usleep(50000);
    int64_t t0 = abx_now_ms();
    abx_egress_stop(p);
    assert_true(abx_now_ms() - t0 < 2000);
    assert_true(closed(fd));
    close(fd);
    /* over max_conns: closed at once */
    cfg.max_conns = 1;
    p = abx_egress_start(listen_lo(&port), &cfg);
    a.sin_port = htons((uint16_t)port);
    int first = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0), second = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
    assert_int_equal(connect(first, (struct sockaddr *)&a, sizeof a), 0);
    usleep(50000);
    assert_int_equal(connect(second, (struct sockaddr *)&a, sizeof a), 0);
    assert_true(closed(second));
    abx_egress_stop(p);
    close(first);
    close(second);
    abx_egress_config none = {0};
    assert_null(abx_egress_start(listen_lo(&port), &none)); /* no allowlist: refused */
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_forward_allowed), cmocka_unit_test(test_forward_denied),
        cmocka_unit_test(test_connect),         cmocka_unit_test(test_socks),
        cmocka_unit_test(test_stop_with_idle_client),
    };
    return cmocka_run_group_tests(tests, setup, teardown);
}
