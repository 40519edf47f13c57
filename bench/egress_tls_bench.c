/* egress_tls_bench.c — what credential injection costs (bench/egress_tls.sh): the egress
 * proxy in process, an HTTPS upstream thread (its certificate from a throwaway CA), and a
 * client that CONNECTs and speaks TLS. Side by side, round-robin: (a) a MIB MiB GET
 * through a plain tunnel (host without inject rules) and through interception (TLS
 * terminated, header injected, body scanned for the secret and re-chunked); (b) small
 * requests on new connections through each (p50 of CONNECT + two handshakes + GET).
 * Prints "result\tNAME\tVALUE" lines.
 *   egress_tls_bench MIB ROUNDS SMALL */
#include "core/util.h"
#include "sandbox/egress.h"
#include "sandbox/egress_ca_int.h"
#include "sandbox/egress_tls.h"

#include <arpa/inet.h>
#include <netinet/in.h>
#include <openssl/err.h>
#include <openssl/ssl.h>
#include <pthread.h>
#include <signal.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

static size_t body_bytes;
static SSL_CTX *up_ctx;

typedef struct upstream {
    int lfd, port;
    abx_egress_ca *ca;
    const char *name;
} upstream;

static double now_s(void)
{
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return (double)t.tv_sec + (double)t.tv_nsec / 1e9;
}

static int listen_lo(int *port)
{
    int fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
    struct sockaddr_in a = {.sin_family = AF_INET, .sin_addr.s_addr = htonl(INADDR_LOOPBACK)};
    socklen_t l = sizeof a;
    if (fd < 0 || bind(fd, (struct sockaddr *)&a, sizeof a) < 0 || listen(fd, 128) < 0 ||
        getsockname(fd, (struct sockaddr *)&a, &l) < 0) {
        perror("listen");
        exit(1);
    }
    *port = ntohs(a.sin_port);
    return fd;
}

typedef struct uconn {
    upstream *u;
    int fd;
} uconn;

/* GET /big: body_bytes of 'x'; anything else: a short body */
static void *upstream_conn(void *arg)
{
    uconn *uc = arg;
    SSL *s = SSL_new(up_ctx);
    SSL_set_fd(s, uc->fd);
    char buf[4096];
    size_t len = 0;
    if (abx_egress_ca_use_leaf(uc->u->ca, s, uc->u->name) && SSL_accept(s) == 1) {
        int n;
        while (len + 1 < sizeof buf && (n = SSL_read(s, buf + len, (int)(sizeof buf - len - 1))) > 0) {
            len += (size_t)n;
            buf[len] = '\0';
            if (strstr(buf, "\r\n\r\n"))
                break;
        }
        bool big = strncmp(buf, "GET /big", 8) == 0;
        size_t total = big ? body_bytes : 2;
        char h[200];
        int hl = snprintf(h, sizeof h, "HTTP/1.1 200 OK\r\nContent-Length: %zu\r\nConnection: close\r\n\r\n", total);
        SSL_write(s, h, hl);
        static char chunk[65536];
        memset(chunk, 'x', sizeof chunk);
        for (size_t sent = 0; sent < total;) {
            size_t k = total - sent < sizeof chunk ? total - sent : sizeof chunk;
            if (SSL_write(s, chunk, (int)k) <= 0)
                break;
            sent += k;
        }
        SSL_shutdown(s);
    }
    SSL_free(s);
    ERR_clear_error();
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

static int px_port;

/* CONNECT host:port, TLS trusting cafile, GET path; the body bytes read (-1 on failure) */
static long long fetch(const char *host, int port, const char *cafile, const char *path)
{
    int fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
    struct sockaddr_in a = {.sin_family = AF_INET, .sin_port = htons((uint16_t)px_port),
                            .sin_addr.s_addr = htonl(INADDR_LOOPBACK)};
    if (connect(fd, (struct sockaddr *)&a, sizeof a) < 0)
        return -1;
    char b[512];
    int n = snprintf(b, sizeof b, "CONNECT %s:%d HTTP/1.1\r\nHost: %s:%d\r\n\r\n", host, port, host, port);
    send(fd, b, (size_t)n, MSG_NOSIGNAL);
    size_t len = 0;
    b[0] = '\0';
    while (len + 1 < sizeof b && !strstr(b, "\r\n\r\n") && recv(fd, b + len, 1, 0) == 1)
        b[++len] = '\0';
    long long body = -1;
    if (strstr(b, " 200 ")) {
        static __thread SSL_CTX *cx;
        static __thread const char *cx_file;
        if (cx_file != cafile) {
            SSL_CTX_free(cx);
            cx = SSL_CTX_new(TLS_client_method());
            SSL_CTX_load_verify_locations(cx, cafile, NULL);
            SSL_CTX_set_verify(cx, SSL_VERIFY_PEER, NULL);
            cx_file = cafile;
        }
        SSL *s = SSL_new(cx);
        SSL_set_fd(s, fd);
        SSL_set_tlsext_host_name(s, host);
        SSL_set1_host(s, host);
        if (SSL_connect(s) == 1) {
            n = snprintf(b, sizeof b, "GET %s HTTP/1.1\r\nHost: %s\r\n\r\n", path, host);
            SSL_write(s, b, n);
            static __thread char buf[1 << 16];
            long long total = 0;
            int r;
            while ((r = SSL_read(s, buf, sizeof buf)) > 0)
                total += r;
            body = total;
        }
        SSL_free(s);
    }
    ERR_clear_error();
    close(fd);
    return body;
}

static int cmp_d(const void *a, const void *b)
{
    double x = *(const double *)a, y = *(const double *)b;
    return x < y ? -1 : x > y;
}

int main(int argc, char **argv)
{
    signal(SIGPIPE, SIG_IGN);
    int mib = argc > 1 ? atoi(argv[1]) : 100, rounds = argc > 2 ? atoi(argv[2]) : 3;
    int small = argc > 3 ? atoi(argv[3]) : 500;
    body_bytes = (size_t)mib << 20;
    char dir[] = "/tmp/abx-egtls-bench-XXXXXX", updir[] = "/tmp/abx-egtls-up-XXXXXX", err[300];
    if (!mkdtemp(dir) || !mkdtemp(updir))
        return 1;
    abx_egress_ca *ca = abx_egress_ca_open(dir, err, sizeof err), *test_ca = abx_egress_ca_open(updir, err, sizeof err);
    if (!ca || !test_ca) {
        fprintf(stderr, "%s\n", err);
        return 1;
    }
    up_ctx = SSL_CTX_new(TLS_server_method());
    static upstream ua, up;
    ua = (upstream){.ca = test_ca, .name = "api.test"};
    up = (upstream){.ca = test_ca, .name = "plain.test"};
    ua.lfd = listen_lo(&ua.port);
    up.lfd = listen_lo(&up.port);
    pthread_t t;
    pthread_create(&t, NULL, upstream_main, &ua);
    pthread_create(&t, NULL, upstream_main, &up);
    abx_egress_allow allow = {0};
    abx_egress_resolver res = {0};
    abx_egress_injects inj = {0};
    char e[200];
    snprintf(e, sizeof e, "api.test:%d:127.0.0.1", ua.port);
    abx_egress_resolve_add(&res, e, err, sizeof err);
    snprintf(e, sizeof e, "plain.test:%d:127.0.0.1", up.port);
    abx_egress_resolve_add(&res, e, err, sizeof err);
    snprintf(e, sizeof e, "api.test:%d", ua.port);
    abx_egress_allow_add(&allow, e, err, sizeof err);
    snprintf(e, sizeof e, "plain.test:%d", up.port);
    abx_egress_allow_add(&allow, e, err, sizeof err);
    abx_egress_inject_add(&inj, "api.test", "Authorization", "Bearer bench-secret-0123456789", err, sizeof err);
    abx_egress_inject_secret(&inj, "bench-secret-0123456789");
    abx_egress_tls *tls = abx_egress_tls_new(ca, &inj, abx_egress_ca_cert_path(test_ca), err, sizeof err);
    abx_egress_config cfg = {.allow = &allow, .resolver = &res, .tls = tls};
    abx_egress *px = tls ? abx_egress_start(listen_lo(&px_port), &cfg) : NULL;
    if (!px) {
        fprintf(stderr, "proxy: %s\n", err);
        return 1;
    }
    const char *abx_ca = abx_egress_ca_cert_path(ca), *up_ca = abx_egress_ca_cert_path(test_ca);
    double best_t = 0, best_i = 0;
    for (int r = 0; r < rounds; r++) {
        double t0 = now_s();
        long long nt = fetch("plain.test", up.port, up_ca, "/big");
        double t1 = now_s();
        long long ni = fetch("api.test", ua.port, abx_ca, "/big");
        double t2 = now_s();
        if (nt < (long long)body_bytes || ni < (long long)body_bytes) {
            fprintf(stderr, "short read: tunnel %lld, intercepted %lld of %zu\n", nt, ni, body_bytes);
            return 1;
        }
        double mt = (double)mib / (t1 - t0), mi = (double)mib / (t2 - t1);
        printf("round %d: tunnel %.0f MiB/s, intercepted %.0f MiB/s\n", r + 1, mt, mi);
        best_t = mt > best_t ? mt : best_t;
        best_i = mi > best_i ? mi : best_i;
    }
    double *lt = calloc((size_t)small, sizeof *lt), *li = calloc((size_t)small, sizeof *li);
    for (int i = 0; i < small; i++) {
        double t0 = now_s();
        if (fetch("plain.test", up.port, up_ca, "/s") < 0)
            return 1;
        double t1 = now_s();
        if (fetch("api.test", ua.port, abx_ca, "/s") < 0)
            return 1;
        lt[i] = (t1 - t0) * 1e6;
        li[i] = (now_s() - t1) * 1e6;
    }
    qsort(lt, (size_t)small, sizeof *lt, cmp_d);
    qsort(li, (size_t)small, sizeof *li, cmp_d);
    printf("result\ttunnel_mbs\t%.1f\nresult\tintercept_mbs\t%.1f\nresult\tintercept_ratio\t%.3f\n", best_t, best_i,
           best_i / best_t);
    printf("result\ttunnel_p50_us\t%.0f\nresult\tintercept_p50_us\t%.0f\nresult\tadded_p50_us\t%.0f\n",
           lt[small / 2], li[small / 2], li[small / 2] - lt[small / 2]);
    abx_egress_stop(px);
    abx_egress_tls_free(tls);
    abx_egress_injects_free(&inj);
    abx_egress_ca_free(ca);
    abx_egress_ca_free(test_ca);
    char cmd[200];
    snprintf(cmd, sizeof cmd, "rm -rf %s %s", dir, updir);
    return system(cmd) == 0 ? 0 : 1;
}
