/* egress_bench.c — what the egress proxy (src/sandbox/egress.c) costs, in-process on
 * loopback: an upstream HTTP server thread, the proxy allowing it through the resolver
 * table, and a client timing the same work direct and through the proxy, interleaved.
 *
 * usage: egress_bench [MIB] [ROUNDS] [SMALL]
 *
 * (a) throughput: GET of MIB MiB (default 100) direct, through a CONNECT tunnel and
 *     through HTTP forward proxying, ROUNDS times each (default 3), round-robin.
 * (b) latency: SMALL (default 2000) small requests, each on a new connection (what a
 *     client without keep-alive pays), direct and through the forward proxy, in
 *     alternating batches of 100. Issue 17's targets: throughput >= 0.7x direct, added
 *     latency <= 1 ms.
 * Output: a table, then "result<TAB>name<TAB>value" lines for bench/egress.sh. Exit 0,
 * or 1 when something did not answer as expected. */
#include <arpa/inet.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

#include "core/util.h"
#include "sandbox/egress.h"

static int up_port, px_port;

static int listen_lo(int *port)
{
    int fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0), one = 1;
    struct sockaddr_in a = {.sin_family = AF_INET, .sin_addr.s_addr = htonl(INADDR_LOOPBACK)};
    socklen_t l = sizeof a;
    setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof one);
    if (fd < 0 || bind(fd, (struct sockaddr *)&a, sizeof a) < 0 || listen(fd, 512) < 0 ||
        getsockname(fd, (struct sockaddr *)&a, &l) < 0) {
        perror("listen");
        exit(1);
    }
    *port = ntohs(a.sin_port);
    return fd;
}

static int dial(int port)
{
    int fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0), one = 1;
    struct sockaddr_in a = {.sin_family = AF_INET, .sin_port = htons((uint16_t)port),
                            .sin_addr.s_addr = htonl(INADDR_LOOPBACK)};
    setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
    if (connect(fd, (struct sockaddr *)&a, sizeof a) < 0) {
        perror("connect");
        exit(1);
    }
    return fd;
}

static bool send_str(int fd, const char *s)
{
    return send(fd, s, strlen(s), MSG_NOSIGNAL) == (ssize_t)strlen(s);
}

/* read a response head; its Content-Length (-1 when the head is bad) and the body bytes
 * already read (in *extra) */
static long read_head(int fd, char *buf, size_t cap, size_t *extra)
{
    size_t len = 0;
    for (;;) {
        ssize_t n = recv(fd, buf + len, cap - len - 1, 0);
        if (n <= 0)
            return -1;
        len += (size_t)n;
        buf[len] = '\0';
        char *end = strstr(buf, "\r\n\r\n");
        if (end) {
            char *cl = strstr(buf, "Content-Length: ");
            if (strncmp(buf, "HTTP/1.1 200", 12) != 0 || !cl)
                return -1;
            *extra = len - (size_t)(end + 4 - buf);
            return atol(cl + 16);
        }
        if (len + 1 >= cap)
            return -1;
    }
}

static void *upstream_conn(void *arg)
{
    int fd = (int)(intptr_t)arg;
    static char chunk[65536];
    char buf[4096];
    size_t len = 0;
    for (;;) {
        ssize_t n = recv(fd, buf + len, sizeof buf - len - 1, 0);
        if (n <= 0)
            break;
        len += (size_t)n;
        buf[len] = '\0';
        char *end = strstr(buf, "\r\n\r\n");
        if (!end)
            continue;
        long size = strncmp(buf, "GET /big-", 9) == 0 ? atol(buf + 9) : 2;
        char head[128];
        snprintf(head, sizeof head, "HTTP/1.1 200 OK\r\nContent-Length: %ld\r\n\r\n", size);
        if (!send_str(fd, head))
            break;
        for (long left = size; left > 0;) {
            ssize_t w = send(fd, chunk, left < (long)sizeof chunk ? (size_t)left : sizeof chunk, MSG_NOSIGNAL);
            if (w <= 0)
                goto out;
            left -= w;
        }
        len = 0;
    }
out:
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

static double now_s(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec / 1e9;
}

/* one GET over fd (already connected to whatever answers it); false on a bad answer */
static bool get(int fd, const char *target, long want)
{
    char req[256], buf[8192];
    snprintf(req, sizeof req, "GET %s HTTP/1.1\r\nHost: bench.test:%d\r\n\r\n", target, up_port);
    size_t extra;
    if (!send_str(fd, req))
        return false;
    long size = read_head(fd, buf, sizeof buf, &extra);
    if (size != want)
        return false;
    static char sink[1 << 20];
    for (long left = size - (long)extra; left > 0;) {
        ssize_t n = recv(fd, sink, sizeof sink, 0);
        if (n <= 0)
            return false;
        left -= n;
    }
    return true;
}

enum { DIRECT, TUNNEL, FORWARD };

static bool fetch(int how, long bytes)
{
    char target[128];
    int fd = dial(how == DIRECT ? up_port : px_port);
    if (how == TUNNEL) {
        char req[128], buf[512];
        snprintf(req, sizeof req, "CONNECT bench.test:%d HTTP/1.1\r\n\r\n", up_port);
        ssize_t n = send_str(fd, req) ? recv(fd, buf, sizeof buf - 1, 0) : -1;
        if (n <= 0 || strncmp(buf, "HTTP/1.1 200", 12) != 0) {
            close(fd);
            return false;
        }
    }
    if (how == FORWARD)
        snprintf(target, sizeof target, "http://bench.test:%d/%s%ld", up_port, bytes > 2 ? "big-" : "small", bytes);
    else
        snprintf(target, sizeof target, "/%s%ld", bytes > 2 ? "big-" : "small", bytes);
    bool ok = get(fd, target, bytes);
    close(fd);
    return ok;
}

static int cmp_double(const void *a, const void *b)
{
    double x = *(const double *)a, y = *(const double *)b;
    return x < y ? -1 : x > y;
}

int main(int argc, char **argv)
{
    long mib = argc > 1 ? atol(argv[1]) : 100, rounds = argc > 2 ? atol(argv[2]) : 3;
    long small = argc > 3 ? atol(argv[3]) : 2000;
    if (mib < 1 || rounds < 1 || small < 100) {
        fprintf(stderr, "usage: egress_bench [MIB>=1] [ROUNDS>=1] [SMALL>=100]\n");
        return 2;
    }
    pthread_t t;
    pthread_create(&t, NULL, upstream_main, (void *)(intptr_t)listen_lo(&up_port));
    abx_egress_allow allow = {0};
    abx_egress_resolver res = {0};
    char e[128], err[200];
    snprintf(e, sizeof e, "bench.test:%d", up_port);
    abx_egress_allow_add(&allow, e, err, sizeof err);
    snprintf(e, sizeof e, "bench.test:%d:127.0.0.1", up_port);
    abx_egress_resolve_add(&res, e, err, sizeof err);
    abx_egress_config cfg = {.allow = &allow, .resolver = &res, .max_conns = 256};
    abx_egress *px = abx_egress_start(listen_lo(&px_port), &cfg);
    if (!px)
        return 1;

    const char *names[] = {"direct", "connect", "forward"};
    double best[3] = {0, 0, 0};
    long bytes = mib << 20;
    printf("(a) GET of %ld MiB, %ld rounds, MB/s per round\n", mib, rounds);
    for (long r = 0; r < rounds; r++)
        for (int how = 0; how < 3; how++) {
            double t0 = now_s();
            if (!fetch(how, bytes)) {
                fprintf(stderr, "%s fetch failed\n", names[how]);
                return 1;
            }
            double mbs = (double)bytes / 1e6 / (now_s() - t0);
            printf("  round %ld %-8s %9.0f MB/s\n", r + 1, names[how], mbs);
            if (mbs > best[how])
                best[how] = mbs;
        }
    printf("best: direct %.0f, connect %.0f (%.2fx), forward %.0f (%.2fx) MB/s (target >= 0.70x)\n", best[0],
           best[1], best[1] / best[0], best[2], best[2] / best[0]);

    double *lat[2] = {calloc((size_t)small, sizeof(double)), calloc((size_t)small, sizeof(double))};
    for (long i = 0; i < small; i += 100)
        for (int side = 0; side < 2; side++)
            for (long j = i; j < i + 100 && j < small; j++) {
                double t0 = now_s();
                if (!fetch(side ? FORWARD : DIRECT, 2)) {
                    fprintf(stderr, "small request failed\n");
                    return 1;
                }
                lat[side][j] = (now_s() - t0) * 1e6;
            }
    double p50[2], p99[2];
    for (int side = 0; side < 2; side++) {
        qsort(lat[side], (size_t)small, sizeof(double), cmp_double);
        p50[side] = lat[side][small / 2];
        p99[side] = lat[side][small * 99 / 100];
    }
    printf("(b) %ld small requests, new connection each: direct p50 %.0f us p99 %.0f us; forward p50 %.0f us p99 "
           "%.0f us; added p50 %.0f us (target <= 1000)\n",
           small, p50[0], p99[0], p50[1], p99[1], p50[1] - p50[0]);
    printf("result\tdirect_mbs\t%.0f\nresult\tconnect_mbs\t%.0f\nresult\tforward_mbs\t%.0f\n", best[0], best[1],
           best[2]);
    printf("result\tconnect_ratio\t%.2f\nresult\tforward_ratio\t%.2f\n", best[1] / best[0], best[2] / best[0]);
    printf("result\tdirect_p50_us\t%.0f\nresult\tforward_p50_us\t%.0f\nresult\tadded_p50_us\t%.0f\n", p50[0], p50[1],
           p50[1] - p50[0]);
    abx_egress_stop(px);
    abx_egress_allow_free(&allow);
    abx_egress_resolver_free(&res);
    free(lat[0]);
    free(lat[1]);
    return 0;
}
