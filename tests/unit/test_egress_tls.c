/* test_egress_tls.c — credential injection (src/sandbox/egress_tls.c, egress_ca.c,
 * egress_inject.c) end to end on loopback: the proxy in process, upstreams on 127.0.0.1
 * (HTTPS with a test CA — a second abx CA in a temp folder, trusted through upstream_ca —,
 * HTTPS with an untrusted CA, plain HTTP) that echo the request head they received in
 * the body. Checked: the header reaches the upstream (the client's own replaced), the
 * client sees a certificate the abx CA signed for the host, an echoed secret is redacted
 * (Content-Length, chunked with the secret split across chunks, close-delimited), an
 * untrusted upstream gets 502, a host without inject rules is tunneled untouched, plain
 * HTTP gets the header too; the CA is made once, kept 0600, and reused. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include <arpa/inet.h>
#include <netinet/in.h>
#include <openssl/err.h>
#include <openssl/ssl.h>
#include <pthread.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <unistd.h>

#include "core/util.h"
#include "sandbox/egress.h"
#include "sandbox/egress_ca_int.h"
#include "sandbox/egress_tls.h"

#define SECRET "s3cr3t-TOKEN-0123456789"

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

/* ---- upstreams ---- */

typedef struct upstream {
    int lfd, port;
    abx_egress_ca *ca; /* NULL: plain HTTP */
    const char *name;
} upstream;

static pthread_mutex_t seen_mu = PTHREAD_MUTEX_INITIALIZER;
static char seen[8192]; /* the last request head an upstream received */
static SSL_CTX *up_ctx;

typedef struct uconn {
    upstream *u;
    int fd;
} uconn;

static void uput(SSL *s, int fd, const void *p, size_t n)
{
    if (s)
        SSL_write(s, p, (int)n);
    else
        send(fd, p, n, MSG_NOSIGNAL);
}

/* One request, answered as its path says: /len (Content-Length), /chunked (the head in
 * two chunks split inside the secret), /close (close-delimited). Then close. */
static void *upstream_conn(void *arg)
{
    uconn *uc = arg;
    SSL *s = NULL;
    if (uc->u->ca) {
        s = SSL_new(up_ctx);
        SSL_set_fd(s, uc->fd);
        if (!abx_egress_ca_use_leaf(uc->u->ca, s, uc->u->name) || SSL_accept(s) != 1)
            goto out;
    }
    char buf[8192];
    size_t len = 0;
    while (len + 1 < sizeof buf) {
        int n = s ? SSL_read(s, buf + len, (int)(sizeof buf - len - 1)) : (int)recv(uc->fd, buf + len, sizeof buf - len - 1, 0);
        if (n <= 0)
            goto out;
        len += (size_t)n;
        buf[len] = '\0';
        if (strstr(buf, "\r\n\r\n"))
            break;
    }
    pthread_mutex_lock(&seen_mu);
    snprintf(seen, sizeof seen, "%s", buf);
    pthread_mutex_unlock(&seen_mu);
    char h[256];
    int hl;
    if (strncmp(buf, "GET /chunked", 12) == 0) {
        const char *cut = strstr(buf, "TOKEN");
        size_t a = cut ? (size_t)(cut - buf) : len / 2;
        hl = snprintf(h, sizeof h, "HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\nConnection: close\r\n\r\n%zx\r\n", a);
        uput(s, uc->fd, h, (size_t)hl);
        uput(s, uc->fd, buf, a);
        usleep(20000);
        hl = snprintf(h, sizeof h, "\r\n%zx;ext=1\r\n", len - a);
        uput(s, uc->fd, h, (size_t)hl);
        uput(s, uc->fd, buf + a, len - a);
        uput(s, uc->fd, "\r\n0\r\nX-Trailer: 1\r\n\r\n", 21);
    } else if (strncmp(buf, "GET /close", 10) == 0) {
        hl = snprintf(h, sizeof h, "HTTP/1.1 200 OK\r\nX-Echo: %s\r\n\r\n", strstr(buf, SECRET) ? SECRET : "none");
        uput(s, uc->fd, h, (size_t)hl);
        uput(s, uc->fd, buf, len);
    } else {
        hl = snprintf(h, sizeof h, "HTTP/1.1 200 OK\r\nContent-Length: %zu\r\nConnection: close\r\n\r\n", len);
        uput(s, uc->fd, h, (size_t)hl);
        uput(s, uc->fd, buf, len);
    }
out:
    if (s) {
        SSL_shutdown(s);
        SSL_free(s);
    }
    close(uc->fd);
    free(uc);
    return NULL;
}

static void *upstream_main(void *arg)
{
    upstream *u = arg;
    for (;;) {
        int fd = accept(u->lfd, NULL, NULL);
        if (fd < 0)
            return NULL;
        uconn *uc = malloc(sizeof *uc);
        *uc = (uconn){u, fd};
        pthread_t t;
        pthread_create(&t, NULL, upstream_conn, uc);
        pthread_detach(t);
    }
}

static upstream up_api, up_plain, up_bad, up_http;

static void start_upstream(upstream *u, abx_egress_ca *ca, const char *name)
{
    u->lfd = listen_lo(&u->port);
    u->ca = ca;
    u->name = name;
    pthread_t t;
    pthread_create(&t, NULL, upstream_main, u);
    pthread_detach(t);
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
        snprintf(rec_log[rec_n++], sizeof rec_log[0], "%s %s:%d %s reason=%s %s %s", r->proto, r->host, r->port,
                 r->allowed ? "allow" : "deny", r->reason, r->method, r->path);
    pthread_mutex_unlock(&rec_mu);
}

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

static char dir[64], updir[64], baddir[64];
static abx_egress_ca *ca, *test_ca, *bad_ca;
static abx_egress_injects inj;
static abx_egress_tls *tls;
static abx_egress_allow allow;
static abx_egress_resolver resolver;
static abx_egress *px;
static int px_port;

static void add(const char *name, int port)
{
    char e[200], err[200];
    snprintf(e, sizeof e, "%s:%d:127.0.0.1", name, port);
    if (abx_egress_resolve_add(&resolver, e, err, sizeof err) < 0)
        fail_msg("%s", err);
    snprintf(e, sizeof e, "%s:%d", name, port);
    if (abx_egress_allow_add(&allow, e, err, sizeof err) < 0)
        fail_msg("%s", err);
}

static int setup(void **state)
{
    (void)state;
    char err[300];
    snprintf(dir, sizeof dir, "/tmp/abx-eg-ca-XXXXXX");
    snprintf(updir, sizeof updir, "/tmp/abx-eg-up-XXXXXX");
    snprintf(baddir, sizeof baddir, "/tmp/abx-eg-bad-XXXXXX");
    if (!mkdtemp(dir) || !mkdtemp(updir) || !mkdtemp(baddir))
        return -1;
    ca = abx_egress_ca_open(dir, err, sizeof err);
    test_ca = abx_egress_ca_open(updir, err, sizeof err);
    bad_ca = abx_egress_ca_open(baddir, err, sizeof err);
    if (!ca || !test_ca || !bad_ca)
        fail_msg("%s", err);
    up_ctx = SSL_CTX_new(TLS_server_method());
    start_upstream(&up_api, test_ca, "api.test");
    start_upstream(&up_plain, test_ca, "plain.test");
    start_upstream(&up_bad, bad_ca, "bad.test");
    start_upstream(&up_http, NULL, "api.test");
    add("api.test", up_api.port);
    add("api.test", up_http.port);
    add("plain.test", up_plain.port);
    add("bad.test", up_bad.port);
    if (abx_egress_inject_add(&inj, "API.test", "Authorization", "Bearer " SECRET, err, sizeof err) < 0 ||
        abx_egress_inject_add(&inj, "bad.test", "X-Key", SECRET, err, sizeof err) < 0 ||
        abx_egress_inject_secret(&inj, SECRET) < 0)
        fail_msg("%s", err);
    if (!(tls = abx_egress_tls_new(ca, &inj, abx_egress_ca_cert_path(test_ca), err, sizeof err)))
        fail_msg("%s", err);
    abx_egress_config cfg = {.allow = &allow, .resolver = &resolver, .idle_ms = 3000, .record = on_record, .tls = tls};
    px = abx_egress_start(listen_lo(&px_port), &cfg);
    return px ? 0 : -1;
}

static void rm_dir(const char *d)
{
    char cmd[200];
    snprintf(cmd, sizeof cmd, "rm -rf %s", d);
    if (system(cmd) != 0)
        fprintf(stderr, "cannot remove %s\n", d);
}

static int teardown(void **state)
{
    (void)state;
    abx_egress_stop(px);
    abx_egress_tls_free(tls);
    abx_egress_injects_free(&inj);
    abx_egress_allow_free(&allow);
    abx_egress_resolver_free(&resolver);
    upstream *us[] = {&up_api, &up_plain, &up_bad, &up_http};
    for (size_t i = 0; i < 4; i++) {
        shutdown(us[i]->lfd, SHUT_RDWR);
        close(us[i]->lfd);
    }
    usleep(50000);
    abx_egress_ca_free(ca);
    abx_egress_ca_free(test_ca);
    abx_egress_ca_free(bad_ca);
    SSL_CTX_free(up_ctx);
    rm_dir(dir);
    rm_dir(updir);
    rm_dir(baddir);
    return 0;
}

/* ---- the client ---- */

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

/* CONNECT host:port; the proxy's answer head lands in out */
static int connect_via(const char *host, int port, char *out, size_t cap)
{
    int fd = dial_proxy();
    char b[300];
    int n = snprintf(b, sizeof b, "CONNECT %s:%d HTTP/1.1\r\nHost: %s:%d\r\n\r\n", host, port, host, port);
    send(fd, b, (size_t)n, MSG_NOSIGNAL);
    size_t len = 0;
    out[0] = '\0';
    while (len + 1 < cap && !strstr(out, "\r\n\r\n")) {
        ssize_t r = recv(fd, out + len, 1, 0); /* byte by byte: nothing after the head is eaten */
        if (r <= 0)
            break;
        out[++len] = '\0';
    }
    return fd;
}

/* TLS over fd trusting only cafile and checking host; the whole response (to EOF) in out.
 * false when the handshake fails. */
static bool https_get(int fd, const char *cafile, const char *host, const char *req, char *out, size_t cap)
{
    SSL_CTX *cx = SSL_CTX_new(TLS_client_method());
    SSL_CTX_load_verify_locations(cx, cafile, NULL);
    SSL_CTX_set_verify(cx, SSL_VERIFY_PEER, NULL);
    SSL *s = SSL_new(cx);
    SSL_set_fd(s, fd);
    SSL_set_tlsext_host_name(s, host);
    SSL_set1_host(s, host);
    bool ok = SSL_connect(s) == 1;
    size_t len = 0;
    out[0] = '\0';
    if (ok) {
        SSL_write(s, req, (int)strlen(req));
        int n;
        while (len + 1 < cap && (n = SSL_read(s, out + len, (int)(cap - len - 1))) > 0)
            len += (size_t)n;
        out[len] = '\0';
    }
    SSL_free(s);
    SSL_CTX_free(cx);
    ERR_clear_error();
    close(fd);
    return ok;
}

static void last_seen(char *out, size_t cap)
{
    pthread_mutex_lock(&seen_mu);
    snprintf(out, cap, "%s", seen);
    seen[0] = '\0';
    pthread_mutex_unlock(&seen_mu);
}

/* ---- the tests ---- */

static void test_ca_made_once(void **state)
{
    (void)state;
    char p[200], err[200];
    struct stat st;
    snprintf(p, sizeof p, "%s/egress-ca.key", dir);
    assert_int_equal(stat(p, &st), 0);
    assert_int_equal(st.st_mode & 0777, 0600);
    FILE *f = fopen(abx_egress_ca_cert_path(ca), "r");
    char a[4096] = "", b[4096] = "";
    assert_non_null(f);
    assert_true(fread(a, 1, sizeof a - 1, f) > 0);
    fclose(f);
    abx_egress_ca *again = abx_egress_ca_open(dir, err, sizeof err); /* a restart: the same CA */
    assert_non_null(again);
    f = fopen(abx_egress_ca_cert_path(again), "r");
    assert_true(fread(b, 1, sizeof b - 1, f) > 0);
    fclose(f);
    assert_string_equal(a, b);
    /* the bundle: the system store, then the CA */
    f = fopen(abx_egress_ca_bundle_path(again), "r");
    static char bundle[1 << 20];
    size_t n = fread(bundle, 1, sizeof bundle - 1, f);
    fclose(f);
    bundle[n] = '\0';
    assert_non_null(strstr(bundle, a));
    assert_true(n > strlen(a) + 1000); /* the system store came first */
    abx_env_pair env[ABX_EGRESS_CA_ENV];
    assert_int_equal(abx_egress_ca_env(again, env), 5);
    assert_string_equal(env[0].name, "SSL_CERT_FILE");
    assert_string_equal(env[0].value, abx_egress_ca_bundle_path(again));
    assert_string_equal(env[4].name, "NODE_EXTRA_CA_CERTS");
    assert_string_equal(env[4].value, abx_egress_ca_cert_path(again));
    abx_egress_ca_free(again);
    /* a state folder that cannot be made: a clear error */
    assert_null(abx_egress_ca_open("/proc/abx-no/ca", err, sizeof err));
    assert_non_null(strstr(err, "egress CA"));
}

static void test_inject_https(void **state)
{
    (void)state;
    char head[512], out[16384], up[8192];
    int fd = connect_via("api.test", up_api.port, head, sizeof head);
    assert_non_null(strstr(head, "200 Connection established"));
    /* trusting only the abx CA, verifying the name: the proxy's leaf is accepted */
    assert_true(https_get(fd, abx_egress_ca_cert_path(ca), "api.test",
                          "GET /len?q=1 HTTP/1.1\r\nHost: api.test\r\nAuthorization: Bearer fake\r\n"
                          "Accept-Encoding: gzip\r\n\r\n", out, sizeof out));
    last_seen(up, sizeof up);
    assert_non_null(strstr(up, "GET /len?q=1 HTTP/1.1\r\n"));
    assert_non_null(strstr(up, "\r\nAuthorization: Bearer " SECRET "\r\n"));
    assert_null(strstr(up, "Bearer fake"));
    assert_null(strstr(up, "Accept-Encoding"));
    assert_non_null(strstr(out, "200 OK"));
    assert_non_null(strstr(out, "Transfer-Encoding: chunked"));
    assert_non_null(strstr(out, "Authorization: Bearer [REDACTED]"));
    assert_null(strstr(out, SECRET));
    assert_null(strstr(out, "Content-Length"));
    want_record("connect api.test", "allow reason= CONNECT /len");
}

static void test_redact_chunked_and_close(void **state)
{
    (void)state;
    char head[512], out[16384];
    int fd = connect_via("api.test", up_api.port, head, sizeof head);
    assert_true(https_get(fd, abx_egress_ca_cert_path(ca), "api.test",
                          "GET /chunked HTTP/1.1\r\nHost: api.test\r\n\r\n", out, sizeof out));
    assert_non_null(strstr(out, "Authorization: Bearer [REDACTED]"));
    assert_null(strstr(out, SECRET));
    assert_null(strstr(out, "TOKEN"));
    assert_non_null(strstr(out, "\r\n0\r\n\r\n")); /* re-chunked to its end */
    fd = connect_via("api.test", up_api.port, head, sizeof head);
    assert_true(https_get(fd, abx_egress_ca_cert_path(ca), "api.test", "GET /close HTTP/1.1\r\nHost: api.test\r\n\r\n",
                          out, sizeof out));
    assert_non_null(strstr(out, "X-Echo: [REDACTED]")); /* in the head too */
    assert_non_null(strstr(out, "Bearer [REDACTED]"));
    assert_null(strstr(out, SECRET));
}

static void test_request_bodies(void **state)
{
    (void)state;
    char head[512], out[16384], up[8192];
    /* Expect: 100-continue is answered by the proxy, not sent on */
    int fd = connect_via("api.test", up_api.port, head, sizeof head);
    assert_true(https_get(fd, abx_egress_ca_cert_path(ca), "api.test",
                          "POST /len HTTP/1.1\r\nHost: api.test\r\nContent-Length: 5\r\nExpect: 100-continue\r\n\r\nhello",
                          out, sizeof out));
    last_seen(up, sizeof up);
    assert_non_null(strstr(up, "POST /len HTTP/1.1\r\n"));
    assert_null(strstr(up, "Expect"));
    assert_true(strncmp(out, "HTTP/1.1 100 Continue\r\n\r\nHTTP/1.1 200 OK", 40) == 0);
    /* a chunked request body goes on as it came */
    fd = connect_via("api.test", up_api.port, head, sizeof head);
    assert_true(https_get(fd, abx_egress_ca_cert_path(ca), "api.test",
                          "POST /len HTTP/1.1\r\nHost: api.test\r\nTransfer-Encoding: chunked\r\n\r\n"
                          "5\r\nhello\r\n0\r\n\r\n", out, sizeof out));
    last_seen(up, sizeof up);
    assert_non_null(strstr(up, "Transfer-Encoding: chunked\r\n"));
    assert_non_null(strstr(out, "200 OK"));
    assert_null(strstr(out, SECRET));
}

static void test_untrusted_upstream(void **state)
{
    (void)state;
    char head[512];
    int fd = connect_via("bad.test", up_bad.port, head, sizeof head);
    assert_non_null(strstr(head, "502 Bad Gateway"));
    close(fd);
    want_record("connect bad.test", "reason=upstream certificate not trusted");
}

static void test_other_host_untouched(void **state)
{
    (void)state;
    char head[512], out[16384], up[8192];
    /* the abx CA is not trusted for it: the upstream's own certificate comes through */
    int fd = connect_via("plain.test", up_plain.port, head, sizeof head);
    assert_non_null(strstr(head, "200 Connection established"));
    assert_false(https_get(fd, abx_egress_ca_cert_path(ca), "plain.test", "", out, sizeof out));
    fd = connect_via("plain.test", up_plain.port, head, sizeof head);
    assert_true(https_get(fd, abx_egress_ca_cert_path(test_ca), "plain.test",
                          "GET /len HTTP/1.1\r\nHost: plain.test\r\nAuthorization: mine\r\n\r\n", out, sizeof out));
    last_seen(up, sizeof up);
    assert_non_null(strstr(up, "Authorization: mine\r\n"));
    assert_null(strstr(up, SECRET));
    assert_non_null(strstr(out, "Content-Length:"));
}

static void test_plain_http_inject(void **state)
{
    (void)state;
    char b[600], out[16384], up[8192];
    int fd = dial_proxy();
    int n = snprintf(b, sizeof b, "GET http://api.test:%d/len HTTP/1.1\r\nHost: api.test:%d\r\n\r\n", up_http.port,
                     up_http.port);
    send(fd, b, (size_t)n, MSG_NOSIGNAL);
    size_t len = 0;
    ssize_t r;
    while (len + 1 < sizeof out && (r = recv(fd, out + len, sizeof out - len - 1, 0)) > 0)
        len += (size_t)r;
    out[len] = '\0';
    close(fd);
    last_seen(up, sizeof up);
    assert_non_null(strstr(up, "GET /len HTTP/1.1\r\n"));
    assert_non_null(strstr(up, "Authorization: Bearer " SECRET "\r\n"));
    assert_non_null(strstr(out, "Bearer [REDACTED]"));
    assert_null(strstr(out, SECRET));
    want_record("http api.test", "allow reason= GET /len");
    /* inside the intercepted TLS, a request naming another host: refused */
    char head[512];
    fd = connect_via("api.test", up_api.port, head, sizeof head);
    assert_true(https_get(fd, abx_egress_ca_cert_path(ca), "api.test", "GET / HTTP/1.1\r\nHost: evil.test\r\n\r\n", out,
                          sizeof out));
    assert_non_null(strstr(out, "403 Forbidden"));
    assert_non_null(strstr(out, "abx: egress to evil.test denied by policy"));
    want_record("connect api.test", "deny reason=another host on an intercepted connection");
}

static void test_inject_rules(void **state)
{
    (void)state;
    abx_egress_injects l = {0};
    char err[200];
    assert_int_equal(abx_egress_inject_add(&l, "*.x.test", "A", "v", err, sizeof err), -1);
    assert_int_equal(abx_egress_inject_add(&l, "x.test", "Content-Length", "1", err, sizeof err), -1);
    assert_int_equal(abx_egress_inject_add(&l, "x.test", "Bad Header", "1", err, sizeof err), -1);
    assert_int_equal(abx_egress_inject_add(&l, "x.test", "X-A", "a\r\nX-B: b", err, sizeof err), -1);
    assert_null(strstr(err, "X-B: b")); /* the value is never quoted */
    assert_int_equal(abx_egress_inject_add(&l, "X.Test", "X-A", "v", err, sizeof err), 0);
    assert_true(abx_egress_injects_host(&l, "x.test"));
    assert_false(abx_egress_injects_host(&l, "y.test"));
    abx_egress_injects_free(&l);
}

static void test_resp_parsers(void **state)
{
    (void)state;
    abx_http_resp r;
    const char *ok = "HTTP/1.1 200 OK\r\nContent-Length: 5\r\n\r\nhello";
    assert_int_equal(abx_egress_parse_resp(ok, strlen(ok), &r), (int)strlen(ok) - 5);
    assert_int_equal(r.status, 200);
    assert_int_equal(r.content_length, 5);
    assert_int_equal(abx_egress_parse_resp(ok, 20, &r), ABX_EG_MORE);
    const char *bad[] = {"HTTP/1.1 200 OK\r\nContent-Length: 5\r\nContent-Length: 6\r\n\r\n",
                         "HTTP/1.1 200 OK\r\nContent-Length: 5\r\nTransfer-Encoding: chunked\r\n\r\n",
                         "HTTP/1.1 200 OK\r\nTransfer-Encoding: gzip\r\n\r\n", "HTTP/2 200 OK\r\n\r\n",
                         "HTTP/1.1 200 OK\r\n folded\r\n\r\n"};
    for (size_t i = 0; i < 5; i++)
        assert_int_equal(abx_egress_parse_resp(bad[i], strlen(bad[i]), &r), ABX_EG_BAD);
    abx_chunked c = {0};
    const unsigned char *body = (const unsigned char *)"3\r\nabc\r\n0\r\n\r\n";
    size_t used, off, dl, at = 0, got = 0;
    int st;
    do {
        st = abx_egress_chunk_step(&c, body + at, 13 - at, &used, &off, &dl);
        got += dl;
        at += used;
    } while (st == ABX_CH_MORE && at < 13);
    assert_int_equal(st, ABX_CH_DONE);
    assert_int_equal(got, 3);
    abx_chunked c2 = {0};
    assert_int_equal(abx_egress_chunk_step(&c2, (const unsigned char *)"zz\r\n", 4, &used, &off, &dl), ABX_CH_BAD);
}

int main(void)
{
    signal(SIGPIPE, SIG_IGN); /* as abx does (src/cli/main.c): OpenSSL writes with write(2) */
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_ca_made_once),       cmocka_unit_test(test_inject_https),
        cmocka_unit_test(test_redact_chunked_and_close), cmocka_unit_test(test_request_bodies),
        cmocka_unit_test(test_untrusted_upstream),
        cmocka_unit_test(test_other_host_untouched), cmocka_unit_test(test_plain_http_inject),
        cmocka_unit_test(test_inject_rules),       cmocka_unit_test(test_resp_parsers),
    };
    return cmocka_run_group_tests(tests, setup, teardown);
}
