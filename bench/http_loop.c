/* http_loop.c — N sequential HTTP/1.1 requests over one keep-alive connection, timed
 * one by one on the client side.
 *
 * usage: http_loop PORT N METHOD PATH [TOKEN [BODY [EXPECT]]]
 *
 * Connects to 127.0.0.1:PORT, sends METHOD PATH (with "Authorization: Bearer TOKEN"
 * unless TOKEN is empty, and BODY as application/json unless empty) N times, each
 * after the previous response has been read completely (Content-Length or chunked).
 * Reconnects when the server closes the connection (counted). Prints each request's
 * time in microseconds (from the first byte written to the last byte read) on stdout,
 * one a line, and "n=N p50=… p99=… reconnects=R us" on stderr. A response that is not
 * 2xx, or whose body lacks the substring EXPECT, is an error: the first one is printed
 * and the exit status is 1. N is in 1..1000000; every read and write times out after
 * 30 s. */
#define _GNU_SOURCE
#include <arpa/inet.h>
#include <errno.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/socket.h>
#include <sys/time.h>
#include <time.h>
#include <unistd.h>

static double now_us(void)
{
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return (double)t.tv_sec * 1e6 + (double)t.tv_nsec / 1e3;
}

static int connect_to(int port)
{
    int fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
    if (fd < 0)
        return -1;
    struct sockaddr_in a = {.sin_family = AF_INET, .sin_port = htons((unsigned short)port)};
    a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    int one = 1;
    setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
    struct timeval tv = {.tv_sec = 30};
    setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof tv);
    setsockopt(fd, SOL_SOCKET, SO_SNDTIMEO, &tv, sizeof tv);
    if (connect(fd, (struct sockaddr *)&a, sizeof a) != 0) {
        close(fd);
        return -1;
    }
    return fd;
}

static int write_all(int fd, const char *p, size_t n)
{
    while (n) {
        ssize_t k = write(fd, p, n);
        if (k < 0 && errno == EINTR)
            continue;
        if (k <= 0)
            return -1;
        p += k;
        n -= (size_t)k;
    }
    return 0;
}

/* the receive buffer: bytes [0, len) are unread data */
static char *rb;
static size_t rlen, rcap;

static int fill(int fd)
{
    if (rlen == rcap) {
        size_t nc = rcap ? rcap * 2 : 65536;
        char *n = realloc(rb, nc + 1);
        if (!n)
            return -1;
        rb = n;
        rcap = nc;
    }
    ssize_t k;
    do
        k = read(fd, rb + rlen, rcap - rlen);
    while (k < 0 && errno == EINTR);
    if (k <= 0)
        return -1;
    rlen += (size_t)k;
    rb[rlen] = '\0';
    return 0;
}

static void consume(size_t n)
{
    memmove(rb, rb + n, rlen - n);
    rlen -= n;
    rb[rlen] = '\0';
}

/* Read one response. Returns the status (or -1), the body in *body (malloc'd, NUL-
 * terminated) and whether the server will close the connection. */
static int read_response(int fd, char **body, int *closing)
{
    char *end;
    while (!(end = rlen ? strstr(rb, "\r\n\r\n") : NULL))
        if (fill(fd) != 0)
            return -1;
    size_t hlen = (size_t)(end - rb) + 4;
    int status = 0;
    if (sscanf(rb, "HTTP/1.%*d %d", &status) != 1)
        return -1;
    long clen = -1;
    int chunked = 0;
    *closing = 0;
    for (char *line = strstr(rb, "\r\n") + 2; line < end; line = strstr(line, "\r\n") + 2) {
        if (strncasecmp(line, "Content-Length:", 15) == 0)
            clen = strtol(line + 15, NULL, 10);
        else if (strncasecmp(line, "Transfer-Encoding:", 18) == 0 && strstr(line, "chunked") &&
                 strstr(line, "chunked") < strstr(line, "\r\n"))
            chunked = 1;
        else if (strncasecmp(line, "Connection:", 11) == 0 && strcasestr(line, "close") &&
                 strcasestr(line, "close") < strstr(line, "\r\n"))
            *closing = 1;
    }
    consume(hlen);
    size_t bcap = 4096, blen = 0;
    char *b = malloc(bcap);
    if (!b)
        return -1;
    if (chunked) {
        for (;;) {
            char *eol;
            while (!(eol = rlen ? strstr(rb, "\r\n") : NULL))
                if (fill(fd) != 0)
                    goto fail;
            long sz = strtol(rb, NULL, 16);
            consume((size_t)(eol - rb) + 2);
            if (sz < 0)
                goto fail;
            while (rlen < (size_t)sz + 2)
                if (fill(fd) != 0)
                    goto fail;
            if (sz == 0) { /* no trailers expected: the final CRLF */
                consume(2);
                break;
            }
            if (blen + (size_t)sz + 1 > bcap) {
                bcap = (blen + (size_t)sz + 1) * 2;
                char *nb = realloc(b, bcap);
                if (!nb)
                    goto fail;
                b = nb;
            }
            memcpy(b + blen, rb, (size_t)sz);
            blen += (size_t)sz;
            consume((size_t)sz + 2);
        }
    } else if (clen >= 0) {
        while (rlen < (size_t)clen)
            if (fill(fd) != 0)
                goto fail;
        if ((size_t)clen + 1 > bcap) {
            bcap = (size_t)clen + 1;
            char *nb = realloc(b, bcap);
            if (!nb)
                goto fail;
            b = nb;
        }
        memcpy(b, rb, (size_t)clen);
        blen = (size_t)clen;
        consume((size_t)clen);
    } else { /* body until close */
        while (fill(fd) == 0)
            ;
        *closing = 1;
        if (rlen + 1 > bcap) {
            char *nb = realloc(b, rlen + 1);
            if (!nb)
                goto fail;
            b = nb;
        }
        memcpy(b, rb, rlen);
        blen = rlen;
        consume(rlen);
    }
    b[blen] = '\0';
    *body = b;
    return status;
fail:
    free(b);
    return -1;
}

static int cmp(const void *a, const void *b)
{
    double x = *(const double *)a, y = *(const double *)b;
    return x < y ? -1 : x > y;
}

static double pct(const double *sorted, long n, double p)
{
    long r = (long)(p / 100.0 * (double)n + 0.999999);
    if (r < 1)
        r = 1;
    if (r > n)
        r = n;
    return sorted[r - 1];
}

int main(int argc, char **argv)
{
    if (argc < 5 || argc > 8) {
        fprintf(stderr, "usage: http_loop PORT N METHOD PATH [TOKEN [BODY [EXPECT]]]\n");
        return 2;
    }
    int port = atoi(argv[1]);
    long n = atol(argv[2]);
    const char *method = argv[3], *path = argv[4];
    const char *token = argc > 5 ? argv[5] : "", *body = argc > 6 ? argv[6] : "", *expect = argc > 7 ? argv[7] : "";
    if (port < 1 || port > 65535 || n < 1 || n > 1000000) {
        fprintf(stderr, "http_loop: bad PORT or N\n");
        return 2;
    }
    size_t qcap = strlen(path) + strlen(token) + strlen(body) + 512;
    char *req = malloc(qcap);
    double *t = malloc((size_t)n * sizeof *t);
    if (!req || !t)
        return 1;
    int qlen = snprintf(req, qcap, "%s %s HTTP/1.1\r\nHost: 127.0.0.1:%d\r\n", method, path, port);
    if (*token)
        qlen += snprintf(req + qlen, qcap - (size_t)qlen, "Authorization: Bearer %s\r\n", token);
    if (*body)
        qlen += snprintf(req + qlen, qcap - (size_t)qlen, "Content-Type: application/json\r\nContent-Length: %zu\r\n",
                         strlen(body));
    qlen += snprintf(req + qlen, qcap - (size_t)qlen, "\r\n%s", body);

    int fd = -1, reconnects = 0, bad = 0;
    for (long i = 0; i < n; i++) {
        if (fd < 0) {
            fd = connect_to(port);
            if (fd < 0) {
                fprintf(stderr, "http_loop: cannot connect to 127.0.0.1:%d: %s\n", port, strerror(errno));
                return 1;
            }
            rlen = 0;
            if (i > 0)
                reconnects++;
        }
        double t0 = now_us();
        char *rbody = NULL;
        int closing = 0, status = -1;
        if (write_all(fd, req, (size_t)qlen) == 0)
            status = read_response(fd, &rbody, &closing);
        t[i] = now_us() - t0;
        if (status < 0) {
            fprintf(stderr, "http_loop: request %ld: connection failed (%s)\n", i + 1, strerror(errno));
            return 1;
        }
        if (status < 200 || status > 299 || (*expect && !strstr(rbody, expect))) {
            if (!bad++)
                fprintf(stderr, "http_loop: request %ld: status %d, body: %.400s\n", i + 1, status, rbody);
        }
        free(rbody);
        if (closing) {
            close(fd);
            fd = -1;
        }
    }
    if (fd >= 0)
        close(fd);
    for (long i = 0; i < n; i++)
        printf("%.1f\n", t[i]);
    qsort(t, (size_t)n, sizeof *t, cmp);
    fprintf(stderr, "n=%ld p50=%.1f p99=%.1f min=%.1f max=%.1f reconnects=%d bad=%d us\n", n, pct(t, n, 50),
            pct(t, n, 99), t[0], t[n - 1], reconnects, bad);
    free(t);
    free(req);
    free(rb);
    return bad ? 1 : 0;
}
