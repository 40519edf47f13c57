/* catfloor.c — the floor under files.upload and files.download: what `cat SRC > DST`
 * does (read and write in 128 KiB blocks, like GNU cat), timed inside the process so
 * that its exec is not counted (the abx side is timed by curl's time_total, which does
 * not count curl's start-up either).
 *
 * usage: catfloor SRC DST      (DST is created or truncated; /dev/null works)
 *
 * Prints "BYTES SECONDS" on stdout: the bytes copied and the time from opening SRC to
 * closing DST. Exit status 1 on any error. */
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#define BLOCK (128 * 1024)

static double now_s(void)
{
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return (double)t.tv_sec + (double)t.tv_nsec / 1e9;
}

int main(int argc, char **argv)
{
    if (argc != 3) {
        fprintf(stderr, "usage: catfloor SRC DST\n");
        return 2;
    }
    static char buf[BLOCK];
    double t0 = now_s();
    int in = open(argv[1], O_RDONLY | O_CLOEXEC);
    int out = open(argv[2], O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
    if (in < 0 || out < 0) {
        fprintf(stderr, "catfloor: open: %s\n", strerror(errno));
        return 1;
    }
    long long total = 0;
    for (;;) {
        ssize_t n = read(in, buf, sizeof buf);
        if (n < 0 && errno == EINTR)
            continue;
        if (n < 0) {
            fprintf(stderr, "catfloor: read: %s\n", strerror(errno));
            return 1;
        }
        if (n == 0)
            break;
        for (ssize_t off = 0; off < n;) {
            ssize_t w = write(out, buf + off, (size_t)(n - off));
            if (w < 0 && errno == EINTR)
                continue;
            if (w <= 0) {
                fprintf(stderr, "catfloor: write: %s\n", strerror(errno));
                return 1;
            }
            off += w;
        }
        total += n;
    }
    if (close(out) != 0) {
        fprintf(stderr, "catfloor: close: %s\n", strerror(errno));
        return 1;
    }
    double t1 = now_s();
    close(in);
    printf("%lld %.6f\n", total, t1 - t0);
    return 0;
}
