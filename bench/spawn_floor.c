/* spawn_floor.c — the floor under commands.run: how long posix_spawn of a program
 * plus waitpid takes on this machine, with nothing else around it.
 *
 * usage: spawn_floor N [PROGRAM]      (N in 1..1000000; PROGRAM default /bin/true)
 *
 * Spawns PROGRAM (no arguments, stdin/stdout/stderr to /dev/null, the caller's
 * environment) N times in a row, waiting for each to exit. Prints each call's
 * elapsed time in microseconds (CLOCK_MONOTONIC, spawn to reaped) on stdout, one a
 * line, and "n=N p50=… p99=… min=… max=… us" on stderr. Exit status 1 when a spawn
 * fails or the program does not exit 0. */
#define _GNU_SOURCE
#include <fcntl.h>
#include <spawn.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

extern char **environ;

static double now_us(void)
{
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return (double)t.tv_sec * 1e6 + (double)t.tv_nsec / 1e3;
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
    long n = argc > 1 ? atol(argv[1]) : 0;
    const char *prog = argc > 2 ? argv[2] : "/bin/true";
    if (n < 1 || n > 1000000 || argc > 3) {
        fprintf(stderr, "usage: spawn_floor N [PROGRAM]\n");
        return 2;
    }
    double *t = malloc((size_t)n * sizeof *t);
    if (!t)
        return 1;
    posix_spawn_file_actions_t fa;
    posix_spawn_file_actions_init(&fa);
    posix_spawn_file_actions_addopen(&fa, 0, "/dev/null", O_RDONLY, 0);
    posix_spawn_file_actions_addopen(&fa, 1, "/dev/null", O_WRONLY, 0);
    posix_spawn_file_actions_addopen(&fa, 2, "/dev/null", O_WRONLY, 0);
    char *const args[] = {(char *)prog, NULL};
    for (long i = 0; i < n; i++) {
        double t0 = now_us();
        pid_t pid;
        int rc = posix_spawn(&pid, prog, &fa, NULL, args, environ);
        if (rc != 0) {
            fprintf(stderr, "spawn_floor: posix_spawn %s: %s\n", prog, strerror(rc));
            return 1;
        }
        int st;
        if (waitpid(pid, &st, 0) != pid || !WIFEXITED(st) || WEXITSTATUS(st) != 0) {
            fprintf(stderr, "spawn_floor: %s did not exit 0\n", prog);
            return 1;
        }
        t[i] = now_us() - t0;
    }
    posix_spawn_file_actions_destroy(&fa);
    for (long i = 0; i < n; i++)
        printf("%.1f\n", t[i]);
    qsort(t, (size_t)n, sizeof *t, cmp);
    fprintf(stderr, "n=%ld p50=%.1f p99=%.1f min=%.1f max=%.1f us\n", n, pct(t, n, 50), pct(t, n, 99), t[0], t[n - 1]);
    free(t);
    return 0;
}
