/* flood.c — hold N idle connections to a server and time a fresh client meanwhile.
 *
 *   flood PORT N SERVER_PID TOKEN STAT_PATH [SAMPLES] [OPEN_MS]
 *
 * Opens N loopback connections to PORT, in three kinds taken in turn: idle (connected,
 * never sends), half-open (sends "GET /health HTTP/1.1\r\nHost: x\r\n" and never ends
 * the header), keep-alive (sends a whole GET /health, never reads the answer, stays
 * open). Opening stops at N or after OPEN_MS (default 10000). Then, with all of them
 * still held, SAMPLES (default 20) new connections each ask GET /health, and SAMPLES
 * more an authenticated GET STAT_PATH, one at a time, each bounded by 2 s; a request
 * with no status line in time counts as unanswered. It prints key=value lines: the
 * server's VmRSS before and during the flood, how many flood connections the server
 * still holds open, and the latencies (ms). Loopback only; everything it opens is
 * closed when it exits.
 */
#define _GNU_SOURCE
#include <arpa/inet.h>
#include <errno.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

static double now_ms(void)
{
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return (double)t.tv_sec * 1e3 + (double)t.tv_nsec / 1e6;
}

static long status_kb(int pid, const char *field)
{
    char path[64], line[256];
    snprintf(path, sizeof path, "/proc/%d/status", pid);
    FILE *f = fopen(path, "r");
    long v = -1;
    size_t n = strlen(field);
    while (f && fgets(line, sizeof line, f))
        if (strncmp(line, field, n) == 0 && line[n] == ':')
            v = strtol(line + n + 1, NULL, 10);
    if (f)
        fclose(f);
    return v;
}

static int open_conn(int port, int nonblock)
{
    int fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC | (nonblock ? SOCK_NONBLOCK : 0), 0);
    if (fd < 0)
        return -1;
    struct sockaddr_in a = {.sin_family = AF_INET, .sin_port = htons((uint16_t)port)};
    a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    if (connect(fd, (struct sockaddr *)&a, sizeof a) != 0 && errno != EINPROGRESS) {
        close(fd);
        return -1;
    }
    return fd;
}

/* One request on a new connection; the time from connect to the status line, or -1. */
static double timed_request(int port, const char *req, int *status)
{
    double t0 = now_ms();
    *status = 0;
    int fd = open_conn(port, 1);
    if (fd < 0)
        return -1;
    struct pollfd p = {.fd = fd, .events = POLLOUT};
    if (poll(&p, 1, 2000) != 1 || (p.revents & (POLLERR | POLLHUP))) {
        close(fd);
        return -1;
    }
    size_t len = strlen(req), off = 0;
    while (off < len) {
        ssize_t w = send(fd, req + off, len - off, MSG_NOSIGNAL);
        if (w <= 0) {
            close(fd);
            return -1;
        }
        off += (size_t)w;
    }
    char buf[512];
    size_t got = 0;
    while (got < 12) {
        double left = 2000 - (now_ms() - t0);
        p = (struct pollfd){.fd = fd, .events = POLLIN};
        if (left <= 0 || poll(&p, 1, (int)left) != 1)
            break;
        ssize_t r = recv(fd, buf + got, sizeof buf - 1 - got, 0);
        if (r <= 0)
            break;
        got += (size_t)r;
    }
    close(fd);
    if (got < 12)
        return -1;
    buf[got] = '\0';
    *status = atoi(buf + 9);
    return now_ms() - t0;
}

static int cmp_d(const void *a, const void *b)
{
    double x = *(const double *)a, y = *(const double *)b;
    return x < y ? -1 : x > y;
}

static void report(const char *name, double *v, int n, int samples, const int *codes)
{
    int ok = 0;
    for (int i = 0; i < samples; i++)
        ok += codes[i] == 200;
    qsort(v, (size_t)n, sizeof *v, cmp_d);
    printf("%s_answered=%d\n%s_ok=%d\n%s_samples=%d\n", name, n, name, ok, name, samples);
    if (n) {
        printf("%s_p50_ms=%.2f\n%s_p99_ms=%.2f\n%s_max_ms=%.2f\n", name, v[n / 2], name, v[(n * 99) / 100 < n ? (n * 99) / 100 : n - 1],
               name, v[n - 1]);
    } else {
        printf("%s_p50_ms=inf\n%s_p99_ms=inf\n%s_max_ms=inf\n", name, name, name);
    }
    for (int i = 0; i < samples; i++)
        if (codes[i] != 200) {
            printf("%s_first_failure=%d\n", name, codes[i]); /* 0: no answer in 2 s */
            break;
        }
}

int main(int argc, char **argv)
{
    if (argc < 6) {
        fprintf(stderr, "usage: flood PORT N SERVER_PID TOKEN STAT_PATH [SAMPLES] [OPEN_MS]\n");
        return 2;
    }
    int port = atoi(argv[1]), n = atoi(argv[2]), pid = atoi(argv[3]);
    const char *token = argv[4], *stat_path = argv[5];
    int samples = argc > 6 ? atoi(argv[6]) : 20;
    double open_ms = argc > 7 ? atof(argv[7]) : 10000;
    if (samples < 1 || samples > 10000 || n < 0)
        return 2;
    int *fds = calloc((size_t)n + 1, sizeof *fds);
    double *lat = calloc((size_t)samples, sizeof *lat);
    int *codes = calloc((size_t)samples, sizeof *codes);
    if (!fds || !lat || !codes)
        return 1;
    long rss0 = status_kb(pid, "VmRSS"), thr0 = status_kb(pid, "Threads");
    static const char half[] = "GET /health HTTP/1.1\r\nHost: x\r\n";
    static const char whole[] = "GET /health HTTP/1.1\r\nHost: x\r\n\r\n";
    double t0 = now_ms();
    int opened = 0, failed = 0;
    for (int i = 0; i < n && now_ms() - t0 < open_ms; i++) {
        int fd = open_conn(port, 1);
        if (fd < 0) {
            failed++;
            fds[i] = -1;
            continue;
        }
        fds[i] = fd;
        opened++;
        int kind = i % 3;
        if (kind) { /* the connect may still be in progress: wait for it briefly */
            struct pollfd p = {.fd = fd, .events = POLLOUT};
            if (poll(&p, 1, 10) == 1 && !(p.revents & (POLLERR | POLLHUP))) {
                const char *m = kind == 1 ? half : whole;
                ssize_t w = send(fd, m, strlen(m), MSG_NOSIGNAL);
                (void)w;
            }
        }
    }
    double took = now_ms() - t0;
    usleep(1500 * 1000); /* let the server accept what is in its backlog (a SYN dropped from a full
                           * backlog is retried after 1 s: that would time the storm, not the hold) */
    long rss1 = status_kb(pid, "VmRSS"), thr1 = status_kb(pid, "Threads");
    printf("flood_requested=%d\nflood_opened=%d\nflood_connect_errors=%d\nflood_open_ms=%.0f\n", n, opened, failed, took);
    printf("rss_before_kib=%ld\nrss_during_kib=%ld\nrss_growth_kib=%ld\nthreads_before=%ld\nthreads_during=%ld\n", rss0, rss1,
           rss1 - rss0, thr0, thr1);

    char req[1024];
    snprintf(req, sizeof req, "GET /health HTTP/1.1\r\nHost: 127.0.0.1\r\nConnection: close\r\n\r\n");
    int k = 0;
    for (int i = 0; i < samples; i++) {
        double ms = timed_request(port, req, &codes[i]);
        if (ms >= 0)
            lat[k++] = ms;
    }
    report("health", lat, k, samples, codes);
    snprintf(req, sizeof req,
             "GET %s HTTP/1.1\r\nHost: 127.0.0.1\r\nAuthorization: Bearer %s\r\nConnection: close\r\n\r\n", stat_path,
             token);
    k = 0;
    for (int i = 0; i < samples; i++) {
        double ms = timed_request(port, req, &codes[i]);
        if (ms >= 0)
            lat[k++] = ms;
    }
    report("stat", lat, k, samples, codes);

    /* which flood connections the server still holds: a closed one reads EOF or an error */
    int open_now = 0;
    char c;
    for (int i = 0; i < n; i++) {
        if (fds[i] <= 0)
            continue;
        ssize_t r = recv(fds[i], &c, 1, MSG_PEEK | MSG_DONTWAIT);
        if (r > 0 || (r < 0 && (errno == EAGAIN || errno == EWOULDBLOCK)))
            open_now++;
    }
    printf("flood_still_open=%d\nflood_held_ms=%.0f\n", open_now, now_ms() - t0);
    for (int i = 0; i < n; i++)
        if (fds[i] > 0)
            close(fds[i]);
    free(fds);
    free(lat);
    free(codes);
    return 0;
}
