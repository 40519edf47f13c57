/* spare.c — a slot's next process, started and confined ahead, waiting for its program.
 *
 * A confined spawn pays, after its view and ruleset are prepared (slots.c), for a cgroup
 * (mkdir, knobs, migration), a clone, and in the child: setns into the network and mount
 * namespaces, 41 capability drops, the ids, Landlock's merge of ~160 rules into a domain,
 * the seccomp filter's load and compilation — a third of a `commands.run` of /bin/true
 * (bench/README.md); the drops and the filter are done once, by the cloner below. A
 * slot whose process tree is gone gets a *spare* before it goes back (spawn.c,
 * prepare_next): a child of abx made with everything above done, for the settings of
 * the call that used the slot last
 * (its recipe: limits, ids, filter). It then waits, holding no descriptor of abx but its
 * channel, for a call of the same slot and recipe, which sends it its standard
 * streams and working directory (SCM_RIGHTS) and the address of its argv and
 * environment; the spare puts them in place and execs. A call pays a message and an
 * execve. What it runs is confined exactly as a spawn of its own would be, because the
 * steps are the same system calls in the same order; only the per-call ones (streams,
 * cwd) come after the restrictions instead of before, which the filter and Landlock
 * allow (dup3, fchdir, chdir, fstat, execve).
 *
 * The spare shares abx's memory (CLONE_VM, like posix_spawn's child) but not its wait:
 * abx goes on while it sets itself up and waits. So it runs system calls only, through
 * the kernel's interface directly (spare_sys): a libc wrapper would write errno in the
 * thread-local storage of the thread that made it, which runs meanwhile, and a
 * sanitizer's interceptors keep per-thread state the same way.
 *
 * Fail closed: a spare that failed a step has exited and said which; one that cannot be
 * used (another recipe, a slot destroyed, no namespace ready) is killed, reaped and its
 * cgroup removed. Any failure of a spare sends the call to the ordinary spawn, which
 * reports errors as it always has. If abx dies, PR_SET_PDEATHSIG kills an idle spare
 * (and the watchdog's sweep of abx's cgroups covers a race at start). Spares exist only
 * on x86_64 and aarch64 (the two system-call conventions spare_sys knows). */
#include "sandbox/sandbox_int.h"
#include "core/util.h"
#include <errno.h>
#include <fcntl.h>
#include <linux/capability.h>
#include <linux/close_range.h>
#include <linux/securebits.h>
#include <linux/seccomp.h>
#include <sched.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/prctl.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <pthread.h>
#include <unistd.h>

#if defined(__x86_64__) || defined(__aarch64__)
#define SPARE_ARCH 1
#endif

#define SPARE_STACK (128 * 1024)

struct abx_spare {
    abx_spare_recipe r;
    pid_t pid;                  /* not reaped until it is discarded or has run its program */
    int ctl;                    /* abx's end of the channel: "r" when set up, the request, then
                                   a spare_err if a step failed, or EOF once it exec'd */
    int netns;                  /* from the pool (netpool.c); its tree's, given back as any */
    char cgroup[ABX_CG_SLOTS][ABX_CG_PATH];
    void *stack;                /* the slot's (abx__spare_stack): borrowed */
    bool inherited;             /* cloned by the cloner: born under the filter, without a
                                   bounding set (both from that thread, the very same) */
    /* what the child reads while it sets itself up (its own descriptor numbers, the same
     * as abx's at the clone) */
    pid_t abx_pid;
    int c_ctl, procs_fd[ABX_CG_SLOTS], mntns_fd, ruleset, cap_last;
};

typedef struct spare_err {
    int step;
    int err;
} spare_err;

/* The request: the address of the call's spawn request (abx's memory, which the spare
 * shares; abx keeps it until the exec is reported) and whether a cwd descriptor follows
 * the three streams. */
typedef struct spare_msg {
    const abx_spawn_req *req;
    int has_cwd;
} spare_msg;

#ifdef SPARE_ARCH
/* A system call without libc: -errno on failure, never errno. */
__attribute__((no_sanitize_address)) static long spare_sys(long n, long a, long b, long c, long d, long e)
{
#if defined(__x86_64__)
    register long r10 __asm__("r10") = d, r8 __asm__("r8") = e;
    long ret;
    __asm__ volatile("syscall" : "=a"(ret) : "a"(n), "D"(a), "S"(b), "d"(c), "r"(r10), "r"(r8) : "rcx", "r11", "memory");
    return ret;
#else
    register long x8 __asm__("x8") = n, x0 __asm__("x0") = a, x1 __asm__("x1") = b, x2 __asm__("x2") = c,
                  x3 __asm__("x3") = d, x4 __asm__("x4") = e;
    __asm__ volatile("svc 0" : "+r"(x0) : "r"(x8), "r"(x1), "r"(x2), "r"(x3), "r"(x4) : "memory", "cc");
    return x0;
#endif
}
#define SYS0(n) spare_sys((n), 0, 0, 0, 0, 0)
#define SYS1(n, a) spare_sys((n), (long)(a), 0, 0, 0, 0)
#define SYS2(n, a, b) spare_sys((n), (long)(a), (long)(b), 0, 0, 0)
#define SYS3(n, a, b, c) spare_sys((n), (long)(a), (long)(b), (long)(c), 0, 0)
#define SYS4(n, a, b, c, d) spare_sys((n), (long)(a), (long)(b), (long)(c), (long)(d), 0)

enum { SP_SIG = 1, SP_SETSID, SP_PDEATH, SP_CGROUP, SP_NETNS, SP_MNTNS, SP_SECBITS, SP_BSET, SP_AMBIENT, SP_IDS,
       SP_CAPS, SP_RLIMIT, SP_NNP, SP_LANDLOCK, SP_SECCOMP, SP_FDS, SP_RECV, SP_STDIO, SP_CWD, SP_EXEC };

__attribute__((no_sanitize_address, noreturn)) static void spare_fail(const abx_spare *s, int step, long rc)
{
    spare_err e = {step, (int)-rc};
    SYS4(SYS_sendto, s->c_ctl, &e, sizeof e, MSG_NOSIGNAL);
    for (;;)
        SYS1(SYS_exit_group, 127);
}

/* Close every descriptor but those in keep (-1 entries ignored): the copies of abx's
 * that the clone gave it (another process's pipe would not see EOF while it held one). */
__attribute__((no_sanitize_address)) static long keep_only(const int *keep, int n)
{
    int k[8], m = 0;
    for (int i = 0; i < n && m < 8; i++) { /* sorted, without -1 and repeats */
        if (keep[i] < 0)
            continue;
        int j = m;
        while (j > 0 && k[j - 1] > keep[i])
            j--;
        if (j > 0 && k[j - 1] == keep[i])
            continue;
        for (int t = m; t > j; t--)
            k[t] = k[t - 1];
        k[j] = keep[i];
        m++;
    }
    long rc = 0;
    unsigned lo = 0;
    for (int i = 0; i <= m && rc == 0; i++) {
        unsigned hi = i < m ? (unsigned)k[i] : ~0U; /* close [lo, hi) */
        if (hi > lo)
            rc = SYS3(SYS_close_range, lo, i < m ? hi - 1 : ~0U, 0);
        lo = i < m ? (unsigned)k[i] + 1 : lo;
    }
    return rc;
}

/* The confinement, in the order of spawn.c's child (its comment there), up to the
 * filter; system calls only. */
__attribute__((no_sanitize_address)) static void spare_confine(const abx_spare *s)
{
    int keep[] = {s->c_ctl, s->procs_fd[0], s->procs_fd[1], s->procs_fd[2], s->netns, s->mntns_fd, s->ruleset};
    long rc = keep_only(keep, (int)ABX_ARRAY_LEN(keep)); /* first: abx's other descriptors */
    if (rc != 0)
        spare_fail(s, SP_FDS, rc);
    long zero[4] = {0, 0, 0, 0}; /* struct sigaction with SIG_DFL, no flags, empty mask */
    for (int sig = 1; sig < 65; sig++)
        if (sig != SIGKILL && sig != SIGSTOP)
            SYS4(SYS_rt_sigaction, sig, zero, 0, 8); /* ignored signals would survive execve */
    unsigned long none = 0;
    if ((rc = SYS4(SYS_rt_sigprocmask, SIG_SETMASK, &none, 0, 8)) != 0)
        spare_fail(s, SP_SIG, rc);
    if ((rc = SYS0(SYS_setsid)) < 0)
        spare_fail(s, SP_SETSID, rc);
    if ((rc = SYS2(SYS_prctl, PR_SET_PDEATHSIG, SIGKILL)) != 0)
        spare_fail(s, SP_PDEATH, rc);
    if (SYS0(SYS_getppid) != s->abx_pid) /* abx died before the line above */
        spare_fail(s, SP_PDEATH, -ESRCH);
    SYS2(SYS_prctl, PR_SET_NAME, "abx-spare");
    for (int i = 0; i < ABX_CG_SLOTS; i++)
        if (s->procs_fd[i] >= 0 && (rc = SYS3(SYS_write, s->procs_fd[i], "0", 1)) != 1)
            spare_fail(s, SP_CGROUP, rc < 0 ? rc : -EIO);
    if ((rc = SYS2(SYS_setns, s->netns, CLONE_NEWNET)) != 0)
        spare_fail(s, SP_NETNS, rc);
    if ((rc = SYS2(SYS_setns, s->mntns_fd, CLONE_NEWNS)) != 0)
        spare_fail(s, SP_MNTNS, rc);
    if (s->r.use_caps) {
        if ((rc = SYS2(SYS_prctl, PR_SET_SECUREBITS,
                       SECBIT_KEEP_CAPS_LOCKED | SECBIT_NO_SETUID_FIXUP | SECBIT_NO_SETUID_FIXUP_LOCKED | SECBIT_NOROOT |
                           SECBIT_NOROOT_LOCKED)) != 0)
            spare_fail(s, SP_SECBITS, rc);
        for (int cap = 0; !s->inherited && cap <= s->cap_last; cap++)
            if ((rc = SYS2(SYS_prctl, PR_CAPBSET_DROP, cap)) != 0 && rc != -EINVAL)
                spare_fail(s, SP_BSET, rc);
        if ((rc = SYS2(SYS_prctl, PR_CAP_AMBIENT, PR_CAP_AMBIENT_CLEAR_ALL)) != 0 && rc != -EINVAL)
            spare_fail(s, SP_AMBIENT, rc);
        if (s->r.set_ids && ((rc = SYS2(SYS_setgroups, 0, 0)) != 0 ||
                             (rc = SYS3(SYS_setresgid, s->r.gid, s->r.gid, s->r.gid)) != 0 ||
                             (rc = SYS3(SYS_setresuid, s->r.uid, s->r.uid, s->r.uid)) != 0))
            spare_fail(s, SP_IDS, rc);
        struct __user_cap_header_struct h = {.version = _LINUX_CAPABILITY_VERSION_3, .pid = 0};
        struct __user_cap_data_struct d[2] = {{0, 0, 0}, {0, 0, 0}};
        if ((rc = SYS2(SYS_capset, &h, d)) != 0)
            spare_fail(s, SP_CAPS, rc);
    }
    if (s->r.nproc > 0) {
        struct rlimit rl = {.rlim_cur = (rlim_t)s->r.nproc, .rlim_max = (rlim_t)s->r.nproc};
        if ((rc = SYS4(SYS_prlimit64, 0, RLIMIT_NPROC, &rl, 0)) != 0)
            spare_fail(s, SP_RLIMIT, rc);
    }
    if ((rc = SYS2(SYS_prctl, PR_SET_NO_NEW_PRIVS, 1)) != 0)
        spare_fail(s, SP_NNP, rc);
    if ((rc = SYS2(SYS_landlock_restrict_self, s->ruleset, 0)) != 0)
        spare_fail(s, SP_LANDLOCK, rc);
    struct sock_fprog prog = {.len = s->r.filter->len, .filter = (struct sock_filter *)s->r.filter->insn};
    if (!s->inherited && (rc = SYS3(SYS_prctl, PR_SET_SECCOMP, SECCOMP_MODE_FILTER, &prog)) != 0)
        spare_fail(s, SP_SECCOMP, rc);
    if ((rc = keep_only(&s->c_ctl, 1)) != 0)
        spare_fail(s, SP_FDS, rc);
}

/* Fresh descriptors land on the lowest free numbers: 0–2 once everything was closed. */
__attribute__((no_sanitize_address)) static void spare_stdio(const abx_spare *s, const int *fd)
{
    for (int i = 0; i < 3; i++) {
        long rc = fd[i] == i ? SYS3(SYS_fcntl, i, F_SETFD, 0) : SYS3(SYS_dup3, fd[i], i, 0);
        if (rc < 0)
            spare_fail(s, SP_STDIO, rc);
    }
}

__attribute__((no_sanitize_address)) static int spare_main(void *arg)
{
    const abx_spare *s = arg;
    spare_confine(s);
    long rc = SYS4(SYS_sendto, s->c_ctl, "r", 1, MSG_NOSIGNAL); /* ready */
    if (rc != 1)
        spare_fail(s, SP_RECV, rc < 0 ? rc : -EIO);
    spare_msg m;
    union {
        struct cmsghdr h;
        char buf[CMSG_SPACE(4 * sizeof(int))];
    } cb;
    struct iovec iov = {.iov_base = &m, .iov_len = sizeof m};
    struct msghdr mh = {.msg_iov = &iov, .msg_iovlen = 1, .msg_control = cb.buf, .msg_controllen = sizeof cb.buf};
    do
        rc = SYS3(SYS_recvmsg, s->c_ctl, &mh, MSG_CMSG_CLOEXEC);
    while (rc == -EINTR);
    if (rc == 0) /* abx let go of it */
        for (;;)
            SYS1(SYS_exit_group, 0);
    struct cmsghdr *ch = (struct cmsghdr *)cb.buf;
    if (rc != (long)sizeof m || (mh.msg_flags & (MSG_CTRUNC | MSG_TRUNC)) || mh.msg_controllen < sizeof *ch ||
        ch->cmsg_level != SOL_SOCKET || ch->cmsg_type != SCM_RIGHTS ||
        ch->cmsg_len != CMSG_LEN((size_t)(3 + (m.has_cwd ? 1 : 0)) * sizeof(int)))
        spare_fail(s, SP_RECV, rc < 0 ? rc : -EPROTO);
    int fd[4] = {-1, -1, -1, -1};
    const int *sent = (const int *)CMSG_DATA(ch);
    for (int i = 0; i < 3 + (m.has_cwd ? 1 : 0); i++) /* no libc (memcpy is a sanitizer's too) */
        fd[i] = sent[i];
    spare_stdio(s, fd);
    const abx_spawn_req *req = m.req;
    if (!m.has_cwd) {
        if ((rc = SYS1(SYS_chdir, "/")) != 0)
            spare_fail(s, SP_CWD, rc);
    } else {
        /* the directory the jail opened, entered again by path inside the view so that
         * relative paths meet its masks: it must be the very same */
        struct stat want, got;
        if ((rc = SYS1(SYS_fchdir, fd[3])) != 0 ||
            (rc = SYS4(SYS_newfstatat, fd[3], "", &want, AT_EMPTY_PATH)) != 0 ||
            (req->cwd_path && ((rc = SYS1(SYS_chdir, req->cwd_path)) != 0 ||
                               (rc = SYS4(SYS_newfstatat, AT_FDCWD, ".", &got, 0)) != 0 ||
                               ((want.st_dev != got.st_dev || want.st_ino != got.st_ino) && (rc = -ESTALE)))))
            spare_fail(s, SP_CWD, rc);
    }
    rc = SYS3(SYS_execve, req->argv[0], req->argv, req->envp);
    spare_fail(s, SP_EXEC, rc);
}
#endif

static void spare_free(abx_spare *s)
{
    int fds[] = {s->ctl, s->netns};
    for (size_t i = 0; i < ABX_ARRAY_LEN(fds); i++)
        if (fds[i] >= 0)
            close(fds[i]);
    abx_free(s);
}

/* Kill, reap, remove its cgroup. */
void abx__spare_discard(abx_spare *s)
{
    if (!s)
        return;
    if (s->pid > 0) {
        kill(s->pid, SIGKILL); /* not reaped yet: the pid is still its */
        int st;
        while (waitpid(s->pid, &st, __WALL) < 0 && errno == EINTR) {
        }
    }
    for (int i = 0; i < ABX_CG_SLOTS; i++)
        if (s->cgroup[i][0])
            abx_cgroup_kill(s->cgroup[i], true);
    spare_free(s);
}

/* A spare's stack is its slot's, made once and used by each spare in turn: a spare is
 * done with it when it has exec'd (abx saw its channel close) or been reaped, and a
 * mapping made and unmapped per call cost page faults, and an unmap of memory the spare
 * shared with abx's threads a TLB shoot-down on every CPU they ran on. */
void *abx__spare_stack(void)
{
#ifndef SPARE_ARCH
    return NULL;
#else
    void *st = mmap(NULL, SPARE_STACK, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS | MAP_STACK, -1, 0);
    return st == MAP_FAILED ? NULL : st;
#endif
}

void abx__spare_stack_free(void *stack)
{
    if (stack) {
        abx__unpoison(stack, SPARE_STACK);
        munmap(stack, SPARE_STACK);
    }
}

/* The cloner. Loading the filter cost each spare ~0.25 ms of CPU (the kernel checks,
 * converts and JIT-compiles it, in memory it maps for the purpose) and dropping the
 * bounding set 41 system calls; on a machine of two CPUs that work runs beside the
 * program of the call before, and slows it. A filter and a bounding set belong to a
 * thread, and a child cloned by the thread starts with the very same (the kernel shares
 * the filter, copies the credentials). So one thread of abx, started with the first spare,
 * loads the spares' filter and drops its bounding set once, and clones each spare whose
 * recipe asks for exactly that; the spare skips those two steps. The cloner does nothing
 * else, holds every signal blocked (no handler of abx runs under its filter), and lives
 * until the sandbox is freed: its spares' PR_SET_PDEATHSIG follows it (after the slots,
 * so no spare is left then). Where it cannot set itself up, spares do both themselves. */
#ifdef SPARE_ARCH
/* The one filter the cloner carries, and so the one a spare it clones is born under. */
static const abx_seccomp_prog *cloner_filter(const abx_sandbox *sb) { return &sb->filter[ABX_SC_NONET_UNIX]; }

/* s started on its stack, sharing abx's memory, as the calling thread's child. */
static pid_t clone_spare(abx_spare *s)
{
    return clone(spare_main, (char *)s->stack + SPARE_STACK, CLONE_VM | SIGCHLD, s);
}

static void *cloner_main(void *arg)
{
    abx_sandbox *sb = arg;
    sigset_t all;
    sigfillset(&all);
    pthread_sigmask(SIG_SETMASK, &all, NULL);
    prctl(PR_SET_NAME, "abx-cloner", 0, 0, 0);
    bool ok = true;
    for (int cap = 0; ok && cap <= sb->cap_last; cap++)
        ok = prctl(PR_CAPBSET_DROP, cap, 0, 0, 0) == 0 || errno == EINVAL;
    const abx_seccomp_prog *f = cloner_filter(sb);
    struct sock_fprog prog = {.len = f->len, .filter = (struct sock_filter *)f->insn};
    ok = ok && f->len > 0 && prctl(PR_SET_SECCOMP, SECCOMP_MODE_FILTER, &prog, 0, 0) == 0;
    pthread_mutex_lock(&sb->cl_mu);
    sb->cl_state = ok ? 1 : -1;
    pthread_cond_broadcast(&sb->cl_cv);
    while (ok) {
        while (!sb->cl_req && !sb->cl_stop)
            pthread_cond_wait(&sb->cl_cv, &sb->cl_mu);
        if (!sb->cl_req)
            break;
        abx_spare *s = sb->cl_req;
        sb->cl_req = NULL;
        pthread_mutex_unlock(&sb->cl_mu);
        pid_t pid = clone_spare(s);
        long rc = pid > 0 ? pid : -errno;
        pthread_mutex_lock(&sb->cl_mu);
        sb->cl_rc = rc;
        sb->cl_done = true;
        pthread_cond_broadcast(&sb->cl_cv);
    }
    pthread_mutex_unlock(&sb->cl_mu);
    return NULL;
}

/* s cloned by the cloner (s->inherited), when its recipe is what the cloner carries and
 * the cloner is up; else by this thread, to confine itself entirely. */
static pid_t spare_clone(abx_sandbox *sb, abx_spare *s)
{
    if (s->r.use_caps && s->r.filter == cloner_filter(sb)) {
        pthread_mutex_lock(&sb->cl_mu);
        if (sb->cl_state == 0 && !sb->cl_stop) {
            sb->cl_joinable = pthread_create(&sb->cl_thread, NULL, cloner_main, sb) == 0;
            sb->cl_state = sb->cl_joinable ? 2 : -1; /* 2: setting itself up */
            while (sb->cl_state == 2)
                pthread_cond_wait(&sb->cl_cv, &sb->cl_mu);
        }
        long rc = 0;
        if (sb->cl_state == 1 && !sb->cl_stop) {
            s->inherited = true;
            sb->cl_req = s;
            sb->cl_done = false;
            pthread_cond_broadcast(&sb->cl_cv);
            while (!sb->cl_done)
                pthread_cond_wait(&sb->cl_cv, &sb->cl_mu);
            rc = sb->cl_rc;
        }
        pthread_mutex_unlock(&sb->cl_mu);
        if (s->inherited) {
            if (rc < 0)
                errno = (int)-rc;
            return rc > 0 ? (pid_t)rc : -1;
        }
    }
    return clone_spare(s);
}
#endif

void abx__cloner_init(abx_sandbox *sb)
{
    pthread_mutex_init(&sb->cl_mu, NULL);
    pthread_cond_init(&sb->cl_cv, NULL);
    sb->cl_state = 0;
    sb->cl_stop = sb->cl_done = sb->cl_joinable = false;
    sb->cl_req = NULL;
}

void abx__cloner_free(abx_sandbox *sb)
{
    pthread_mutex_lock(&sb->cl_mu);
    sb->cl_stop = true;
    pthread_cond_broadcast(&sb->cl_cv);
    pthread_mutex_unlock(&sb->cl_mu);
    if (sb->cl_joinable)
        pthread_join(sb->cl_thread, NULL);
    pthread_cond_destroy(&sb->cl_cv);
    pthread_mutex_destroy(&sb->cl_mu);
}

abx_spare *abx__spare_make(abx_sandbox *sb, int mntns, int ruleset, const abx_spare_recipe *r, void *stack)
{
#ifndef SPARE_ARCH
    (void)sb, (void)mntns, (void)ruleset, (void)r, (void)stack;
    return NULL;
#else
    if (!stack)
        return NULL;
    abx_spare *s = abx_calloc(1, sizeof *s);
    if (!s)
        return NULL;
    s->r = *r;
    s->pid = -1;
    s->ctl = s->c_ctl = s->netns = -1;
    for (int i = 0; i < ABX_CG_SLOTS; i++)
        s->procs_fd[i] = -1;
    s->abx_pid = getpid();
    s->mntns_fd = mntns;
    s->ruleset = ruleset;
    s->cap_last = sb->cap_last;
    int ctl[2] = {-1, -1};
    abx_confine c = {.pids_max = r->pids_max, .memory_max = r->memory_max, .cpu_milli = r->cpu_milli};
    abx_child cg;
    char why[256];
    memset(&cg, 0, sizeof cg);
    if ((s->netns = abx__netpool_take(sb)) < 0) { /* none ready: made now, by the manager, not by a call */
        abx__netpool_fill(sb);
        s->netns = abx__netpool_take(sb);
    }
    bool ok = s->netns >= 0 &&
              abx__make_cgroups(sb, &c, &cg, s->procs_fd, why, sizeof why) == 0 && cg.cgroup[0][0] &&
              socketpair(AF_UNIX, SOCK_SEQPACKET | SOCK_CLOEXEC, 0, ctl) == 0;
    if (ok && ctl[1] < 3) { /* its end above 0–2, where the call's streams go */
        int hi = fcntl(ctl[1], F_DUPFD_CLOEXEC, 3);
        close(ctl[1]);
        ok = (ctl[1] = hi) >= 0;
    }
    memcpy(s->cgroup, cg.cgroup, sizeof s->cgroup);
    s->ctl = ctl[0];
    s->c_ctl = ctl[1];
    s->stack = stack;
    pid_t pid = -1;
    if (ok)
        pid = spare_clone(sb, s);
    /* the child has its own copies of what it needs */
    int theirs[] = {ctl[1], s->procs_fd[0], s->procs_fd[1], s->procs_fd[2]};
    for (size_t i = 0; i < ABX_ARRAY_LEN(theirs); i++)
        if (theirs[i] >= 0)
            close(theirs[i]);
    if (pid < 0) {
        abx__spare_discard(s);
        return NULL;
    }
    s->pid = pid;
    return s;
#endif
}

bool abx__spare_fits(const abx_spare *s, const abx_spare_recipe *r)
{
    return s && memcmp(&s->r, r, sizeof *r) == 0;
}

/* One message from the spare: 1 ("r"), sizeof(spare_err) (a step failed), 0 (EOF). */
static ssize_t spare_recv(const abx_spare *s, void *buf, size_t len)
{
    ssize_t n;
    do
        n = recv(s->ctl, buf, len, 0);
    while (n < 0 && errno == EINTR);
    return n;
}

int abx__spare_use(abx_spare *s, const abx_spawn_req *req, int devnull, abx_child *out)
{
    int fd[4] = {req->stdin_fd >= 0 ? req->stdin_fd : devnull, req->stdout_fd >= 0 ? req->stdout_fd : devnull,
                 req->stderr_fd >= 0 ? req->stderr_fd : devnull, req->cwd_fd};
    int n = req->cwd_fd >= 0 ? 4 : 3;
    spare_msg m = {.req = req, .has_cwd = n == 4};
    union {
        struct cmsghdr h;
        char buf[CMSG_SPACE(4 * sizeof(int))];
    } cb;
    memset(&cb, 0, sizeof cb);
    struct iovec iov = {.iov_base = &m, .iov_len = sizeof m};
    struct msghdr mh = {.msg_iov = &iov, .msg_iovlen = 1, .msg_control = cb.buf,
                        .msg_controllen = CMSG_SPACE((size_t)n * sizeof(int))};
    struct cmsghdr *ch = CMSG_FIRSTHDR(&mh);
    ch->cmsg_level = SOL_SOCKET;
    ch->cmsg_type = SCM_RIGHTS;
    ch->cmsg_len = CMSG_LEN((size_t)n * sizeof(int));
    memcpy(CMSG_DATA(ch), fd, (size_t)n * sizeof(int));
    spare_err e;
    int pidfd = -1;
    ssize_t w = spare_recv(s, &e, sizeof e); /* set up (1), or a step failed and it exited */
    if (w == 1 && (pidfd = (int)syscall(SYS_pidfd_open, s->pid, 0)) >= 0) {
        do
            w = sendmsg(s->ctl, &mh, MSG_NOSIGNAL);
        while (w < 0 && errno == EINTR);
        if (w == (ssize_t)sizeof m && spare_recv(s, &e, sizeof e) == 0) { /* EOF: it exec'd */
            out->pid = s->pid;
            out->pidfd = pidfd;
            out->netns = s->netns;
            memcpy(out->cgroup, s->cgroup, sizeof out->cgroup);
            s->netns = -1; /* the process's now */
            spare_free(s);
            return 0;
        }
    }
    if (pidfd >= 0)
        close(pidfd);
    abx__spare_discard(s);
    return -1;
}
