/* watchdog.c — see watchdog.h. The watchdog is a fork() of a multi-threaded server that
 * never execs: it must not touch anything another thread may have held at the fork
 * (malloc, stdio, locks), so it uses system calls, fixed tables and stack buffers only.
 * The cgroup helpers follow the same rule, so abx's start-up sweep can share them. */
#include "sandbox/watchdog.h"
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <linux/capability.h>
#include <poll.h>
#include <signal.h>
#include <stddef.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/socket.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#define WD_MAX 1024        /* calls tracked at once; more are left to abx alone */
#define WD_GRACE_MS 500    /* abx's own deadline kill goes first (its record says timed_out) */
#define WD_REPEAT_MS 1000  /* a group past its deadline is killed again until it is gone */
#define WD_TICK_MS 50      /* while calls are tracked: how often their messages and exits are read */
#define WD_SEND_WAIT_MS 250 /* how long a report waits for room in the socket (ticks drain it) */

typedef struct wd_msg {
    int32_t pid;
    int32_t pad;
    int64_t deadline_ms;
    char cg[ABX_CG_SLOTS][ABX_CG_PATH];
} wd_msg;

typedef struct wd_entry {
    int pidfd;          /* -1 once the first process has exited */
    pid_t pid;          /* also its process group */
    int64_t next_kill;  /* 0: no deadline */
    char cg[ABX_CG_SLOTS][ABX_CG_PATH];
} wd_entry;

/* the watchdog's state: only the forked process ever writes these */
static wd_entry wd_ents[WD_MAX];
static size_t wd_n;
static char wd_parents[ABX_CG_SLOTS][ABX_CG_PATH];
static int64_t wd_last_msg; /* when abx last reported a call */

static int64_t mono_ms(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (int64_t)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

static void nap_ms(long ms)
{
    struct timespec ts = {.tv_sec = ms / 1000, .tv_nsec = (ms % 1000) * 1000000};
    while (nanosleep(&ts, &ts) != 0 && errno == EINTR) {
    }
}

/* dir + "/" + name into out; false when it does not fit */
static bool join(char *out, size_t outlen, const char *dir, const char *name)
{
    size_t a = strlen(dir), b = strlen(name);
    if (a + 1 + b + 1 > outlen)
        return false;
    memcpy(out, dir, a);
    out[a] = '/';
    memcpy(out + a + 1, name, b + 1);
    return true;
}

/* Send sig to every pid listed in dir/cgroup.procs. How many were listed, or -1 when
 * the file cannot be opened (errno says why: ENOENT once the group is gone). */
static int signal_members(const char *dir, int sig)
{
    char file[ABX_CG_PATH + 32];
    if (!join(file, sizeof file, dir, "cgroup.procs")) {
        errno = ENAMETOOLONG;
        return -1;
    }
    int fd = open(file, O_RDONLY | O_CLOEXEC);
    if (fd < 0)
        return -1;
    char buf[4096];
    long cur = -1;
    int n = 0;
    pid_t self = getpid();
    ssize_t r;
    while ((r = read(fd, buf, sizeof buf)) > 0 || (r < 0 && errno == EINTR))
        for (ssize_t i = 0; i < r; i++) {
            if (buf[i] >= '0' && buf[i] <= '9') {
                cur = (cur < 0 ? 0 : cur * 10) + (buf[i] - '0');
                continue;
            }
            if (cur > 1 && cur != self)
                kill((pid_t)cur, sig);
            n += cur >= 0;
            cur = -1;
        }
    if (cur > 1 && cur != self)
        kill((pid_t)cur, sig);
    n += cur >= 0;
    close(fd);
    return n;
}

int abx_cgroup_kill(const char *dir, bool remove)
{
    char file[ABX_CG_PATH + 32];
    if (join(file, sizeof file, dir, "cgroup.kill")) { /* v2 (5.14+): the kernel kills the lot, forks included */
        int fd = open(file, O_WRONLY | O_CLOEXEC);
        if (fd >= 0) {
            ssize_t w = write(fd, "1", 1);
            (void)w;
            close(fd);
        }
    }
    /* v1, or v2 without cgroup.kill: SIGKILL whatever is listed until nothing is. A
     * member with SIGKILL pending cannot complete a fork, so each pass can only shrink
     * the group; pids.max bounds the first one. */
    for (int tries = 0; tries < 400; tries++) {
        int n = signal_members(dir, SIGKILL);
        if (n < 0)
            return errno == ENOENT ? 0 : -1;
        if (remove) {
            if (rmdir(dir) == 0 || errno == ENOENT)
                return 0;
            if (errno != EBUSY)
                return -1; /* not ours to remove (EPERM, EACCES): killing more will not help */
        } else if (n == 0) {
            return 0;
        }
        nap_ms(5);
    }
    return -1;
}

void abx_cgroup_kill_tree(const char *parent)
{
    int dfd = open(parent, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
    if (dfd < 0)
        return;
    _Alignas(8) char buf[4096]; /* records are 8-byte aligned within it */
    long r;
    while ((r = syscall(SYS_getdents64, dfd, buf, sizeof buf)) > 0)
        for (long off = 0; off < r;) {
            struct {
                uint64_t ino;
                int64_t off;
                unsigned short reclen;
                unsigned char type;
                char name[];
            } *de = (void *)(buf + off);
            off += de->reclen;
            char child[ABX_CG_PATH + 64];
            if (de->type != DT_DIR || strcmp(de->name, ".") == 0 || strcmp(de->name, "..") == 0 ||
                !join(child, sizeof child, parent, de->name))
                continue;
            abx_cgroup_kill(child, true);
        }
    close(dfd);
    abx_cgroup_kill(parent, true);
}

/* ---- the watchdog process ---- */

static void entry_kill(wd_entry *e)
{
    if (e->pidfd >= 0) /* the first process is alive: the group's number is still its own */
        kill(-e->pid, SIGKILL);
    for (int i = 0; i < ABX_CG_SLOTS; i++)
        if (e->cg[i][0])
            abx_cgroup_kill(e->cg[i], false); /* setsid'd members too */
}

static bool entry_done(const wd_entry *e)
{
    if (e->pidfd >= 0)
        return false;
    for (int i = 0; i < ABX_CG_SLOTS; i++)
        if (e->cg[i][0] && access(e->cg[i], F_OK) == 0)
            return false; /* abx removes a call's groups when it has reaped the call */
    return true;
}

/* One message from abx: 1, 0 when none is waiting, -1 when abx's end is closed. */
static int wd_receive(int sock)
{
    wd_msg m;
    union {
        char buf[CMSG_SPACE(sizeof(int))];
        struct cmsghdr align;
    } ctl;
    struct iovec iov = {.iov_base = &m, .iov_len = sizeof m};
    struct msghdr mh = {.msg_iov = &iov, .msg_iovlen = 1, .msg_control = ctl.buf, .msg_controllen = sizeof ctl.buf};
    ssize_t r = recvmsg(sock, &mh, MSG_CMSG_CLOEXEC | MSG_DONTWAIT);
    if (r < 0)
        return errno == EINTR ? 1 : errno == EAGAIN || errno == EWOULDBLOCK ? 0 : -1;
    if (r == 0)
        return -1;
    wd_last_msg = mono_ms();
    int fd = -1;
    struct cmsghdr *c = CMSG_FIRSTHDR(&mh);
    if (c && c->cmsg_level == SOL_SOCKET && c->cmsg_type == SCM_RIGHTS && c->cmsg_len == CMSG_LEN(sizeof(int)))
        memcpy(&fd, CMSG_DATA(c), sizeof fd);
    if (fd < 0 || r != (ssize_t)sizeof m || wd_n == WD_MAX) {
        if (fd >= 0)
            close(fd);
        return 1;
    }
    wd_entry *e = &wd_ents[wd_n++];
    e->pidfd = fd;
    e->pid = m.pid;
    e->next_kill = m.deadline_ms > 0 ? m.deadline_ms + WD_GRACE_MS : 0;
    for (int i = 0; i < ABX_CG_SLOTS; i++) {
        memcpy(e->cg[i], m.cg[i], ABX_CG_PATH);
        e->cg[i][ABX_CG_PATH - 1] = '\0';
    }
    return 1;
}

/* Every message waiting; false when abx's end is closed. */
static bool wd_drain(int sock)
{
    int r;
    while ((r = wd_receive(sock)) > 0) {
    }
    return r == 0;
}

/* Which tracked first processes have exited, in one look at all their pidfds. */
static void wd_exits(void)
{
    static struct pollfd pf[WD_MAX];
    static size_t owner[WD_MAX];
    nfds_t np = 0;
    for (size_t i = 0; i < wd_n; i++)
        if (wd_ents[i].pidfd >= 0) {
            pf[np] = (struct pollfd){.fd = wd_ents[i].pidfd, .events = POLLIN};
            owner[np++] = i;
        }
    if (np == 0 || poll(pf, np, 0) <= 0)
        return;
    for (nfds_t k = 0; k < np; k++)
        if (pf[k].revents) { /* exited: its number may be another process's from now on */
            close(wd_ents[owner[k]].pidfd);
            wd_ents[owner[k]].pidfd = -1;
        }
}

/* abx is gone (or stopped): nothing it started may stay, including what it reported just
 * before (still in the socket) and nothing of another process that took an exited
 * one's number. */
static _Noreturn void wd_final(int sock)
{
    wd_drain(sock);
    wd_exits();
    for (size_t i = 0; i < wd_n; i++)
        entry_kill(&wd_ents[i]);
    for (int i = 0; i < ABX_CG_SLOTS; i++)
        if (wd_parents[i][0])
            abx_cgroup_kill_tree(wd_parents[i]);
    _exit(0);
}

/* While abx reports calls (one in the last second), their messages and exits are read
 * every WD_TICK_MS, not as each comes: that was two wake-ups of this process per call
 * (the report, the first process's exit), on a small machine beside the call's own
 * program. Otherwise a message wakes it, and it looks once a second. abx's death wakes
 * it at once either way, and what abx reported is read before the final sweep; the
 * exits are read before any kill. Deadlines are a tick late at most (after WD_GRACE_MS).
 * Without a pidfd of abx the socket's end is the news of its death: then every message
 * wakes it, as before. */
static void wd_loop(int abx_pidfd, int sock)
{
    for (;;) {
        int64_t now = mono_ms(), wait = WD_REPEAT_MS;
        for (size_t i = 0; i < wd_n; i++)
            if (wd_ents[i].next_kill && wd_ents[i].next_kill - now < wait)
                wait = wd_ents[i].next_kill - now;
        bool batch = wd_n > 0 && abx_pidfd >= 0 && now - wd_last_msg < 1000;
        if (batch && wait > WD_TICK_MS)
            wait = WD_TICK_MS;
        struct pollfd pf[2] = {{.fd = abx_pidfd, .events = POLLIN}, {.fd = batch ? -1 : sock, .events = POLLIN}};
        if (poll(pf, 2, wait > 0 ? (int)wait : 0) < 0 && errno != EINTR) /* -1: ignored by poll */
            wd_final(sock);
        if (pf[0].revents || !wd_drain(sock))
            wd_final(sock);
        wd_exits();
        now = mono_ms();
        for (size_t i = 0; i < wd_n;) {
            wd_entry *e = &wd_ents[i];
            if (e->next_kill && now >= e->next_kill) { /* abx did not end it in time */
                entry_kill(e);
                e->next_kill = now + WD_REPEAT_MS;
            }
            if (entry_done(e))
                wd_ents[i] = wd_ents[--wd_n];
            else
                i++;
        }
    }
}

/* Keep only CAP_KILL (run_as processes have another uid); the cgroup files and
 * directories are root's own, so uid 0 needs no capability for them. */
static void wd_drop_privileges(void)
{
    prctl(PR_SET_DUMPABLE, 0, 0, 0, 0);
    if (geteuid() == 0) {
        for (int cap = 0; cap < 64; cap++)
            if (cap != CAP_KILL)
                prctl(PR_CAPBSET_DROP, cap, 0, 0, 0);
        struct __user_cap_header_struct h = {.version = _LINUX_CAPABILITY_VERSION_3, .pid = 0};
        struct __user_cap_data_struct d[2];
        memset(d, 0, sizeof d);
        d[0].effective = d[0].permitted = 1u << CAP_KILL;
        syscall(SYS_capset, &h, d);
    }
    prctl(PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0);
}

static void close_all_but(int a, int b)
{
    int lo = a < b ? a : b, hi = a < b ? b : a;
    if (lo > 3)
        syscall(SYS_close_range, 3u, (unsigned)lo - 1, 0u);
    if (hi > lo + 1)
        syscall(SYS_close_range, (unsigned)lo + 1, (unsigned)hi - 1, 0u);
    syscall(SYS_close_range, (unsigned)hi + 1, ~0u, 0u);
}

static _Noreturn void wd_main(pid_t abx, int sock, const char (*parents)[ABX_CG_PATH])
{
    memcpy(wd_parents, parents, sizeof wd_parents);
    prctl(PR_SET_NAME, "abx-watchdog", 0, 0, 0);
    /* abx's handlers and its signal mask (a sigwait thread) are not ours; the polite
     * stop signals reach abx's whole process group, and the watchdog must outlive abx */
    sigset_t none;
    sigemptyset(&none);
    for (int s = 1; s < NSIG; s++) {
        if (s == SIGKILL || s == SIGSTOP)
            continue;
        bool ignore = s == SIGINT || s == SIGTERM || s == SIGHUP || s == SIGQUIT || s == SIGPIPE || s == SIGUSR1 ||
                      s == SIGUSR2;
        struct sigaction sa = {.sa_handler = ignore ? SIG_IGN : SIG_DFL};
        sigaction(s, &sa, NULL);
    }
    sigprocmask(SIG_SETMASK, &none, NULL);
    int pidfd = (int)syscall(SYS_pidfd_open, abx, 0);
    int devnull = open("/dev/null", O_RDWR | O_CLOEXEC);
    for (int fd = 0; fd < 3 && devnull >= 0; fd++)
        if (fd != devnull && fd != sock && fd != pidfd)
            dup2(devnull, fd);
    close_all_but(sock, pidfd < 0 ? sock : pidfd); /* abx's listening sockets, files, netns */
    wd_drop_privileges();
    if (getppid() != abx)
        wd_final(sock); /* abx died before we held it */
    /* without a pidfd (a kernel before 5.3), the end of abx's socket alone says abx is
     * gone: abx's end is close-on-exec and no other process keeps it */
    wd_loop(pidfd, sock);
    _exit(0);
}

int abx_watchdog_start(abx_watchdog *wd, const char (*parents)[ABX_CG_PATH])
{
    wd->pid = -1;
    wd->sock = -1;
    int sv[2];
    if (socketpair(AF_UNIX, SOCK_SEQPACKET | SOCK_CLOEXEC, 0, sv) != 0)
        return -1;
    char mine[ABX_CG_SLOTS][ABX_CG_PATH]; /* this thread's stack: the child's copy carries it over */
    memcpy(mine, parents, sizeof mine);
    pid_t abx = getpid();
    pid_t pid = fork();
    if (pid == 0) {
        close(sv[0]);
        wd_main(abx, sv[1], (const char(*)[ABX_CG_PATH])mine);
    }
    int e = errno;
    close(sv[1]);
    if (pid < 0) {
        close(sv[0]);
        errno = e;
        return -1;
    }
    wd->pid = pid;
    wd->sock = sv[0];
    return 0;
}

int abx_watchdog_watch(abx_watchdog *wd, int pidfd, pid_t pid, const char (*cgroups)[ABX_CG_PATH],
                       int64_t deadline_ms)
{
    if (wd->sock < 0 || pidfd < 0)
        return -1;
    wd_msg m;
    memset(&m, 0, sizeof m);
    m.pid = pid;
    m.deadline_ms = deadline_ms;
    for (int i = 0; i < ABX_CG_SLOTS; i++)
        memcpy(m.cg[i], cgroups[i], ABX_CG_PATH);
    union {
        char buf[CMSG_SPACE(sizeof(int))];
        struct cmsghdr align;
    } ctl;
    memset(&ctl, 0, sizeof ctl);
    struct iovec iov = {.iov_base = &m, .iov_len = sizeof m};
    struct msghdr mh = {.msg_iov = &iov, .msg_iovlen = 1, .msg_control = ctl.buf, .msg_controllen = sizeof ctl.buf};
    struct cmsghdr *c = CMSG_FIRSTHDR(&mh);
    c->cmsg_level = SOL_SOCKET;
    c->cmsg_type = SCM_RIGHTS;
    c->cmsg_len = CMSG_LEN(sizeof(int));
    memcpy(CMSG_DATA(c), &pidfd, sizeof pidfd);
    ssize_t r;
    int64_t until = mono_ms() + WD_SEND_WAIT_MS;
    for (;;) {
        r = sendmsg(wd->sock, &mh, MSG_DONTWAIT | MSG_NOSIGNAL);
        if (r >= 0 || (errno != EINTR && errno != EAGAIN && errno != EWOULDBLOCK))
            break;
        /* full: the watchdog reads a tick's reports at once (wd_loop); wait for room */
        int64_t left = until - mono_ms();
        struct pollfd pf = {.fd = wd->sock, .events = POLLOUT};
        if (errno != EINTR && (left <= 0 || poll(&pf, 1, (int)left) < 0 || !(pf.revents & POLLOUT)))
            break;
    }
    return r == (ssize_t)sizeof m ? 0 : -1;
}

bool abx_watchdog_reap_if_dead(abx_watchdog *wd)
{
    int st;
    if (wd->pid <= 0 || waitpid(wd->pid, &st, WNOHANG) != wd->pid)
        return false;
    close(wd->sock);
    wd->sock = -1;
    wd->pid = -1;
    return true;
}

void abx_watchdog_stop(abx_watchdog *wd)
{
    if (wd->sock >= 0)
        close(wd->sock);
    wd->sock = -1;
    int st;
    while (wd->pid > 0 && waitpid(wd->pid, &st, 0) < 0 && errno == EINTR) {
    }
    wd->pid = -1;
}
