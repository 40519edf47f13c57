/* netpool.c — network namespaces made before the processes that use them.
 *
 * A process without the network gets a network namespace of its own (loopback up, no
 * other interface). Making one costs the kernel about half a millisecond (every
 * protocol's per-namespace set-up) and tearing it down as much again in a kernel worker:
 * most of what a confined `commands.run` of /bin/true cost (bench/README.md). So abx
 * keeps a few made ahead, while it is idle, and hands each to one process tree.
 *
 * A namespace is used by one tree at a time, never by two at once. When its tree is gone
 * (its pids cgroup emptied and removed: no process of it is left anywhere) and the
 * namespace holds no socket of any family (no listener, no connection, no TIME_WAIT, no
 * Unix socket; read from inside it), it goes back to the pool for a later process, as
 * empty as a new one: its processes had no capability to change its interfaces, routes
 * or firewall, and Landlock kept them from its sysctls. Anything else — a socket left,
 * no cgroup to prove the tree gone, no Landlock, an egress allowlist (whose listeners and
 * addresses live in the namespace) — and it is closed, and the kernel tears it down.
 * The look inside is the checker thread's (checker_main), off the process manager's
 * thread, which a helper process per namespace kept busy for ~0.3 ms a call while the
 * next spawn waited behind it. */
#include "sandbox/sandbox_int.h"
#include "core/util.h"
#include <errno.h>
#include <fcntl.h>
#include <net/if.h>
#include <sched.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ioctl.h>
#include <sys/mman.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#define CHILD_STACK (64 * 1024)

int abx__loopback_up(void)
{
    int s = socket(AF_INET, SOCK_DGRAM | SOCK_CLOEXEC, 0);
    if (s < 0)
        return -1;
    struct ifreq ifr;
    memset(&ifr, 0, sizeof ifr);
    memcpy(ifr.ifr_name, "lo", 3);
    int rc = ioctl(s, SIOCGIFFLAGS, &ifr);
    if (rc == 0) {
        ifr.ifr_flags |= IFF_UP | IFF_RUNNING;
        rc = ioctl(s, SIOCSIFFLAGS, &ifr);
    }
    int e = errno;
    close(s);
    errno = e;
    return rc;
}

/* What a helper child (abx__run_helper) reads and writes. */
typedef struct helper {
    int fd;            /* make: the new namespace (out); check: the namespace to look into (in) */
    char text[3][4096]; /* check: sockstat, sockstat6, unix (out) */
    ssize_t len[3];
} helper;

static int make_main(void *arg)
{
    helper *h = arg;
    if (unshare(CLONE_NEWNET) != 0 || abx__loopback_up() != 0)
        return 1;
    h->fd = open("/proc/self/ns/net", O_RDONLY | O_CLOEXEC);
    return h->fd >= 0 ? 0 : 1;
}

/* Reads a namespace's sockstat, sockstat6 and unix from dir (/proc/self/net in a helper
 * child, /proc/thread-self/net in a thread that entered the namespace) into h. False when
 * one could not be opened, but for sockstat6 missing (no IPv6: nothing to count there);
 * no_sockets judges what was read. */
static bool read_net(helper *h, const char *dir)
{
    static const char *const files[3] = {"sockstat", "sockstat6", "unix"};
    bool all = true;
    for (int i = 0; i < 3; i++) {
        char path[64];
        snprintf(path, sizeof path, "%s/%s", dir, files[i]);
        h->len[i] = -1;
        int fd = open(path, O_RDONLY | O_CLOEXEC);
        if (fd < 0) {
            all = all && i == 1 && errno == ENOENT;
            continue;
        }
        h->len[i] = read(fd, h->text[i], sizeof h->text[i] - 1);
        close(fd);
    }
    return all;
}

static int check_main(void *arg)
{
    helper *h = arg;
    if (setns(h->fd, CLONE_NEWNET) != 0)
        return 1;
    read_net(h, "/proc/self/net");
    return 0;
}

typedef struct trampoline {
    int (*fn)(void *);
    void *arg;
} trampoline;

/* the child: no signal handler of abx's may run on its stack */
static int run_in_child(void *arg)
{
    trampoline *t = arg;
    sigset_t all;
    sigfillset(&all);
    sigprocmask(SIG_SETMASK, &all, NULL);
    _exit(t->fn(t->arg) == 0 ? 0 : 1);
}

int abx__run_helper(int (*fn)(void *), void *arg)
{
    trampoline t = {fn, arg};
    void *stack = mmap(NULL, CHILD_STACK, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS | MAP_STACK, -1, 0);
    if (stack == MAP_FAILED)
        return -1;
    pid_t pid = clone(run_in_child, (char *)stack + CHILD_STACK, CLONE_VM | CLONE_VFORK | CLONE_FILES | SIGCHLD, &t);
    int st = 0, rc = -1;
    if (pid > 0) {
        while (waitpid(pid, &st, 0) < 0 && errno == EINTR) {
        }
        rc = WIFEXITED(st) && WEXITSTATUS(st) == 0 ? 0 : -1;
    }
    abx__unpoison(stack, CHILD_STACK);
    munmap(stack, CHILD_STACK);
    return rc;
}

/* Every "inuse N" and "tw N" of sockstat and sockstat6 is 0, and net/unix lists nothing
 * but its header. Text that cannot be read or parsed counts as sockets left. */
static bool no_sockets(helper *h)
{
    if (h->len[0] <= 0 || h->len[2] <= 0)
        return false; /* sockstat6 is missing without IPv6: nothing to count there */
    for (int i = 0; i < 2; i++) {
        if (h->len[i] < 0)
            continue;
        h->text[i][h->len[i]] = '\0';
        for (const char *p = h->text[i]; (p = strstr(p, " ")) != NULL; p++) {
            if (strncmp(p, " inuse ", 7) != 0 && strncmp(p, " tw ", 4) != 0)
                continue;
            const char *v = strchr(p + 1, ' ') + 1;
            if (*v < '0' || *v > '9' || strtol(v, NULL, 10) != 0)
                return false;
        }
    }
    h->text[2][h->len[2]] = '\0';
    const char *nl = strchr(h->text[2], '\n');
    return nl && nl[1] == '\0' && (size_t)h->len[2] < sizeof h->text[2] - 1;
}

void abx__netpool_init(abx_sandbox *sb)
{
    pthread_mutex_init(&sb->np_mu, NULL);
    pthread_cond_init(&sb->np_cv, NULL);
    sb->np_n = sb->np_nc = 0;
    sb->np_thread_on = sb->np_stop = false;
    /* reuse needs what proves a namespace empty: the tree's cgroup, and Landlock
     * keeping its processes from its sysctls and (ABI 6) other trees' abstract sockets */
    sb->np_reuse = sb->caps.cgroup_pids && sb->caps.landlock_abi >= 6;
}

void abx__netpool_free(abx_sandbox *sb)
{
    pthread_mutex_lock(&sb->np_mu);
    sb->np_stop = true;
    pthread_cond_signal(&sb->np_cv);
    pthread_mutex_unlock(&sb->np_mu);
    if (sb->np_thread_on)
        pthread_join(sb->np_thread, NULL);
    for (size_t i = 0; i < sb->np_nc; i++)
        close(sb->np_check[i]);
    for (size_t i = 0; i < sb->np_n; i++)
        close(sb->np_fd[i]);
    sb->np_n = sb->np_nc = 0;
    pthread_cond_destroy(&sb->np_cv);
    pthread_mutex_destroy(&sb->np_mu);
}

int abx__netpool_take(abx_sandbox *sb)
{
    if (!sb->caps.netns)
        return -1;
    pthread_mutex_lock(&sb->np_mu);
    int fd = sb->np_n ? sb->np_fd[--sb->np_n] : -1;
    pthread_mutex_unlock(&sb->np_mu);
    return fd;
}

static void put(abx_sandbox *sb, int fd)
{
    pthread_mutex_lock(&sb->np_mu);
    if (sb->np_n < ABX_NETPOOL_MAX) {
        sb->np_fd[sb->np_n++] = fd;
        fd = -1;
    }
    pthread_mutex_unlock(&sb->np_mu);
    if (fd >= 0)
        close(fd);
}

/* Whether the namespace fd holds no socket: read from inside it by this thread, which
 * enters it (a thread has a network namespace of its own: /proc/thread-self/net is its)
 * and leaves again for home (abx's own, so that a namespace closed for a socket left is
 * not kept alive by the thread still in it), or, where that cannot be read, by a helper
 * child as before. */
static bool empty_inside(int fd, int home)
{
    helper *h = abx_malloc(sizeof *h);
    if (!h)
        return false;
    h->fd = fd;
    /* without a way home the thread would keep the namespace alive: the helper reads it */
    bool read_here = home >= 0 && setns(fd, CLONE_NEWNET) == 0;
    if (read_here) {
        read_here = read_net(h, "/proc/thread-self/net");
        read_here = setns(home, CLONE_NEWNET) == 0 && read_here;
    }
    bool empty = (read_here || abx__run_helper(check_main, h) == 0) && no_sockets(h);
    abx_free(h);
    return empty;
}

/* The checker thread: each namespace given back is looked into off the process
 * manager's thread (a helper process per namespace cost the manager ~0.3 ms a call,
 * while the next call's spawn waited behind it), then pooled or closed. This thread
 * does nothing else: which namespace it is in never matters to anyone. */
static void *checker_main(void *arg)
{
    abx_sandbox *sb = arg;
    int home = open("/proc/thread-self/ns/net", O_RDONLY | O_CLOEXEC);
    pthread_mutex_lock(&sb->np_mu);
    for (;;) {
        while (!sb->np_nc && !sb->np_stop)
            pthread_cond_wait(&sb->np_cv, &sb->np_mu);
        if (!sb->np_nc)
            break;
        int fd = sb->np_check[--sb->np_nc];
        pthread_mutex_unlock(&sb->np_mu);
        bool empty = empty_inside(fd, home);
        pthread_mutex_lock(&sb->np_mu);
        if (empty && sb->np_n < ABX_NETPOOL_MAX && !sb->np_stop) {
            sb->np_fd[sb->np_n++] = fd;
            atomic_fetch_add(&sb->np_reused, 1);
        } else {
            close(fd);
        }
    }
    pthread_mutex_unlock(&sb->np_mu);
    if (home >= 0)
        close(home);
    return NULL;
}

/* Under np_mu: the checker thread running (started with the first namespace given back). */
static bool checker_on(abx_sandbox *sb)
{
    if (sb->np_thread_on || sb->np_stop)
        return sb->np_thread_on;
    pthread_attr_t at;
    pthread_attr_init(&at);
    pthread_attr_setstacksize(&at, 128 * 1024);
    sb->np_thread_on = pthread_create(&sb->np_thread, &at, checker_main, sb) == 0;
    pthread_attr_destroy(&at);
    return sb->np_thread_on;
}

void abx__netpool_give(abx_sandbox *sb, int fd, bool tree_gone)
{
    if (fd < 0)
        return;
    if (tree_gone && sb->np_reuse) {
        pthread_mutex_lock(&sb->np_mu);
        bool queued = sb->np_nc < ABX_NETPOOL_MAX && checker_on(sb);
        if (queued) {
            sb->np_check[sb->np_nc++] = fd;
            pthread_cond_signal(&sb->np_cv);
        }
        pthread_mutex_unlock(&sb->np_mu);
        if (queued)
            return;
    }
    close(fd); /* not provably empty, or more are waiting than the pool would keep */
}

bool abx__netpool_wants(abx_sandbox *sb)
{
    if (!sb || !sb->caps.netns)
        return false;
    pthread_mutex_lock(&sb->np_mu);
    bool want = sb->np_n < ABX_NETPOOL_FILL;
    pthread_mutex_unlock(&sb->np_mu);
    return want;
}

void abx__netpool_fill(abx_sandbox *sb)
{
    while (abx__netpool_wants(sb)) {
        helper h = {.fd = -1};
        if (abx__run_helper(make_main, &h) != 0 || h.fd < 0) {
            if (h.fd >= 0)
                close(h.fd);
            return;
        }
        atomic_fetch_add(&sb->np_made, 1);
        put(sb, h.fd);
    }
}
