/* startup.c — start-to-serving time of `abx serve`, one measurement per run.
 *
 * usage: startup PORT TIMEOUT_MS -- PROGRAM [ARGS...]
 *
 * Records CLOCK_MONOTONIC, fork+execs PROGRAM, then every 200 µs tries to connect
 * to 127.0.0.1:PORT and send `GET /health HTTP/1.1`, until a response whose status
 * line reads 200 comes back. Prints the elapsed milliseconds on stdout, then stops
 * the child (SIGTERM, SIGKILL after 2 s) and reaps it. Should this program die
 * first (Ctrl-C, SIGTERM), the child gets SIGTERM too: it never outlives us.
 * Exit status: 0 measured; 1 timed out, child died early or bad usage. */
#define _GNU_SOURCE
#include <arpa/inet.h>
#include <errno.h>
#include <netinet/in.h>
#include <poll.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

static double now_ms(void)
{
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return (double)t.tv_sec * 1e3 + (double)t.tv_nsec / 1e6;
}

/* 1: got a 200 status line; 0: not (yet) — refused, reset, other status, or no answer in time */
static int try_health(int port, int read_timeout_ms)
{
    int fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
    if (fd < 0)
        return 0;
    struct sockaddr_in a = {.sin_family = AF_INET, .sin_port = htons((uint16_t)port)};
    a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    if (connect(fd, (struct sockaddr *)&a, sizeof a) != 0) {
        close(fd);
        return 0;
    }
    static const char req[] = "GET /health HTTP/1.1\r\nHost: 127.0.0.1\r\n\r\n";
    if (send(fd, req, sizeof req - 1, MSG_NOSIGNAL) != (ssize_t)(sizeof req - 1)) {
        close(fd);
        return 0;
    }
    char buf[256];
    size_t have = 0;
    double deadline = now_ms() + read_timeout_ms;
    while (have < sizeof buf - 1 && !memchr(buf, '\n', have)) {
        int left = (int)(deadline - now_ms());
        if (left <= 0)
            break;
        struct pollfd p = {.fd = fd, .events = POLLIN};
        int pr = poll(&p, 1, left);
        if (pr < 0 && errno == EINTR)
            continue;
        if (pr <= 0)
            break;
        ssize_t n = recv(fd, buf + have, sizeof buf - 1 - have, 0);
        if (n < 0 && errno == EINTR)
            continue;
        if (n <= 0)
            break;
        have += (size_t)n;
    }
    close(fd);
    buf[have] = '\0';
    /* "HTTP/1.x 200 ..." */
    return have >= 12 && strncmp(buf, "HTTP/1.", 7) == 0 && strncmp(buf + 8, " 200", 4) == 0;
}

static volatile pid_t child_pid;

static void on_signal(int sig)
{
    if (child_pid > 0)
        kill(child_pid, SIGTERM);
    signal(sig, SIG_DFL);
    raise(sig);
}

static void stop_child(pid_t pid)
{
    kill(pid, SIGTERM);
    double deadline = now_ms() + 2000;
    for (;;) {
        pid_t w = waitpid(pid, NULL, WNOHANG);
        if (w == pid || (w < 0 && errno == ECHILD))
            return;
        if (now_ms() > deadline) {
            kill(pid, SIGKILL);
            waitpid(pid, NULL, 0);
            return;
        }
        struct timespec ts = {0, 1000000};
        nanosleep(&ts, NULL);
    }
}

int main(int argc, char **argv)
{
    if (argc < 5 || strcmp(argv[3], "--") != 0) {
        fprintf(stderr, "usage: %s PORT TIMEOUT_MS -- PROGRAM [ARGS...]\n", argv[0]);
        return 1;
    }
    int port = atoi(argv[1]);
    int timeout_ms = atoi(argv[2]);
    if (port <= 0 || port > 65535 || timeout_ms <= 0) {
        fprintf(stderr, "startup: bad PORT or TIMEOUT_MS\n");
        return 1;
    }
    char **child_argv = argv + 4;

    pid_t parent = getpid();
    double t0 = now_ms();
    pid_t pid = fork();
    if (pid < 0) {
        perror("startup: fork");
        return 1;
    }
    if (pid == 0) {
        prctl(PR_SET_PDEATHSIG, SIGTERM);
        if (getppid() != parent)
            _exit(127);
        execvp(child_argv[0], child_argv);
        perror("startup: exec");
        _exit(127);
    }
    child_pid = pid;
    signal(SIGINT, on_signal);
    signal(SIGTERM, on_signal);
    signal(SIGHUP, on_signal);
    int ok = 0;
    while (now_ms() - t0 < timeout_ms) {
        int status;
        if (waitpid(pid, &status, WNOHANG) == pid) {
            fprintf(stderr, "startup: the server exited before serving (%s %d)\n",
                    WIFEXITED(status) ? "exit status" : "signal",
                    WIFEXITED(status) ? WEXITSTATUS(status) : WTERMSIG(status));
            return 1;
        }
        if (try_health(port, 1000)) {
            ok = 1;
            break;
        }
        struct timespec ts = {0, 200000}; /* 200 µs */
        nanosleep(&ts, NULL);
    }
    double elapsed = now_ms() - t0;
    stop_child(pid);
    if (!ok) {
        fprintf(stderr, "startup: no 200 from GET /health within %d ms\n", timeout_ms);
        return 1;
    }
    printf("%.3f\n", elapsed);
    return 0;
}
