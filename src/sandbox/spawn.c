/* spawn.c — confined process creation (see spawn.h for the layers).
 *
 * The parent prepares everything that needs memory or paths: the Landlock ruleset
 * (an fd), the cgroup directories (and open cgroup.procs fds), /dev/null. The child
 * is a clone(CLONE_VM | CLONE_VFORK) like posix_spawn's: it only makes system calls,
 * in a fixed order, and reports the first failure through a close-on-exec pipe before
 * _exit(127). The parent is suspended until the child has exec'd or failed.
 *
 * Child order: signals → setsid → PDEATHSIG → cgroups → netns → mount masks → stdio →
 * ctty → cwd → mark fds close-on-exec → securebits, capability bounding set, ambient →
 * ids → capabilities → no_new_privs → Landlock → seccomp → execve.
 *
 * After the exec, the process is reported to the watchdog (watchdog.h), which kills it
 * and everything in its cgroups if abx dies, and at its deadline if abx has not. */
#include "sandbox/sandbox_int.h"
#include "sandbox/seccomp.h"
#include "sandbox/tiers.h"
#include "sandbox/watchdog.h"
#include "core/util.h"
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <grp.h>
#include <linux/capability.h>
#include <linux/audit.h>
#include <linux/close_range.h>
#include <linux/filter.h>
#include <linux/landlock.h>
#include <linux/seccomp.h>
#include <linux/securebits.h>
#include <sched.h>
#include <signal.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ioctl.h>
#include <net/if.h>
#include <netinet/in.h>
#include <arpa/inet.h>
#include <sys/socket.h>
#include <sys/mman.h>
#include <sys/mount.h>
#include <sys/prctl.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <sys/socket.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <unistd.h>

#ifndef LANDLOCK_ACCESS_FS_REFER
#define LANDLOCK_ACCESS_FS_REFER (1ULL << 13)
#endif
#ifndef LANDLOCK_ACCESS_FS_TRUNCATE
#define LANDLOCK_ACCESS_FS_TRUNCATE (1ULL << 14)
#endif
#ifndef LANDLOCK_ACCESS_FS_IOCTL_DEV
#define LANDLOCK_ACCESS_FS_IOCTL_DEV (1ULL << 15)
#endif
#ifndef LANDLOCK_ACCESS_NET_BIND_TCP
#define LANDLOCK_ACCESS_NET_BIND_TCP (1ULL << 0)
#define LANDLOCK_ACCESS_NET_CONNECT_TCP (1ULL << 1)
#endif
#ifndef LANDLOCK_SCOPE_ABSTRACT_UNIX_SOCKET
#define LANDLOCK_SCOPE_ABSTRACT_UNIX_SOCKET (1ULL << 0)
#define LANDLOCK_SCOPE_SIGNAL (1ULL << 1)
#endif

/* The ruleset attr grew over ABIs; declare the largest layout we use. */
struct ll_ruleset_attr {
    uint64_t handled_access_fs;
    uint64_t handled_access_net;
    uint64_t scoped;
};

/* struct abx_sandbox: sandbox/sandbox_int.h */

/* ---- Landlock ruleset (parent side) ---- */

static uint64_t fs_rights(int abi)
{
    uint64_t r = LANDLOCK_ACCESS_FS_EXECUTE | LANDLOCK_ACCESS_FS_WRITE_FILE | LANDLOCK_ACCESS_FS_READ_FILE |
                 LANDLOCK_ACCESS_FS_READ_DIR | LANDLOCK_ACCESS_FS_REMOVE_DIR | LANDLOCK_ACCESS_FS_REMOVE_FILE |
                 LANDLOCK_ACCESS_FS_MAKE_CHAR | LANDLOCK_ACCESS_FS_MAKE_DIR | LANDLOCK_ACCESS_FS_MAKE_REG |
                 LANDLOCK_ACCESS_FS_MAKE_SOCK | LANDLOCK_ACCESS_FS_MAKE_FIFO | LANDLOCK_ACCESS_FS_MAKE_BLOCK |
                 LANDLOCK_ACCESS_FS_MAKE_SYM;
    if (abi >= 2)
        r |= LANDLOCK_ACCESS_FS_REFER;
    if (abi >= 3)
        r |= LANDLOCK_ACCESS_FS_TRUNCATE;
    if (abi >= 5)
        r |= LANDLOCK_ACCESS_FS_IOCTL_DEV;
    return r;
}

#define FILE_ONLY_RIGHTS                                                                                              \
    (LANDLOCK_ACCESS_FS_EXECUTE | LANDLOCK_ACCESS_FS_WRITE_FILE | LANDLOCK_ACCESS_FS_READ_FILE |                      \
     LANDLOCK_ACCESS_FS_TRUNCATE | LANDLOCK_ACCESS_FS_IOCTL_DEV)

static int add_path_rule(int ruleset, const char *path, uint64_t allowed, uint64_t handled)
{
    int fd = open(path, O_PATH | O_CLOEXEC);
    if (fd < 0)
        return errno == ENOENT ? 0 : -errno; /* a system directory this machine lacks is fine */
    struct stat st;
    if (fstat(fd, &st) == 0 && !S_ISDIR(st.st_mode))
        allowed &= FILE_ONLY_RIGHTS;
    struct landlock_path_beneath_attr pb = {.allowed_access = allowed & handled, .parent_fd = fd};
    long rc = syscall(SYS_landlock_add_rule, ruleset, LANDLOCK_RULE_PATH_BENEATH, &pb, 0);
    int e = errno;
    close(fd);
    return rc == 0 ? 0 : -e;
}

int abx__build_ruleset(const abx_sandbox *sb, const abx_spawn_req *req, char *err, size_t errlen)
{
    int abi = sb->caps.landlock_abi;
    const abx_confine *c = req->confine;
    struct ll_ruleset_attr attr = {.handled_access_fs = fs_rights(abi)};
    size_t attr_size = sizeof(uint64_t);
    /* without a namespace of its own (no loopback to keep) Landlock refuses TCP too; with
     * one, connect() must reach loopback (the process's own servers, the egress proxy) */
    if (abi >= 4 && !c->net && !sb->caps.netns) {
        attr.handled_access_net = LANDLOCK_ACCESS_NET_BIND_TCP | LANDLOCK_ACCESS_NET_CONNECT_TCP;
        attr_size = 2 * sizeof(uint64_t);
    }
    if (abi >= 6) {
        /* no signals to processes outside the sandbox (abx itself), no abstract sockets */
        attr.scoped = LANDLOCK_SCOPE_ABSTRACT_UNIX_SOCKET | LANDLOCK_SCOPE_SIGNAL;
        attr_size = 3 * sizeof(uint64_t);
    }
    int rs = (int)syscall(SYS_landlock_create_ruleset, &attr, attr_size, 0);
    if (rs < 0) {
        snprintf(err, errlen, "landlock: cannot create a ruleset: %s", strerror(errno));
        return -1;
    }
    uint64_t handled = attr.handled_access_fs;
    uint64_t ro = LANDLOCK_ACCESS_FS_EXECUTE | LANDLOCK_ACCESS_FS_READ_FILE | LANDLOCK_ACCESS_FS_READ_DIR;
    int rc = 0;
    /* the system directories, /etc without its secrets, a few devices: opened once
     * (sandbox.c), one system call each here */
    for (size_t i = 0; i < sb->n_fixed && rc == 0; i++) {
        const abx_fixed_rule *f = &sb->fixed[i];
        uint64_t allowed = f->rw ? LANDLOCK_ACCESS_FS_READ_FILE | LANDLOCK_ACCESS_FS_WRITE_FILE : ro;
        if (!f->dir)
            allowed &= FILE_ONLY_RIGHTS;
        struct landlock_path_beneath_attr pb = {.allowed_access = allowed & handled, .parent_fd = f->fd};
        rc = syscall(SYS_landlock_add_rule, rs, LANDLOCK_RULE_PATH_BENEATH, &pb, 0) == 0 ? 0 : -errno;
    }
    /* /dev/pts for terminals the process was given */
    if (rc == 0 && req->ctty)
        rc = add_path_rule(rs, "/dev/pts", LANDLOCK_ACCESS_FS_READ_FILE | LANDLOCK_ACCESS_FS_WRITE_FILE |
                                               LANDLOCK_ACCESS_FS_IOCTL_DEV, handled);
    for (size_t i = 0; i < c->n_read && rc == 0; i++)
        rc = add_path_rule(rs, c->read_roots[i], ro, handled);
    for (size_t i = 0; i < c->n_write && rc == 0; i++)
        rc = add_path_rule(rs, c->write_roots[i], handled, handled);
    if (rc == 0 && req->tmpdir)
        rc = add_path_rule(rs, req->tmpdir, handled, handled);
    if (rc == 0 && req->home)
        rc = add_path_rule(rs, req->home, handled, handled);
    if (rc != 0) {
        snprintf(err, errlen, "landlock: cannot add a rule: %s", strerror(-rc));
        close(rs);
        return -1;
    }
    return rs;
}

/* ---- cgroups (parent side) ---- */

int abx__make_cgroups(abx_sandbox *sb, const abx_confine *c, abx_child *out, int procs_fd[3], char *err,
                      size_t errlen)
{
    unsigned long n = atomic_fetch_add(&sb->seq, 1) + 1;
    procs_fd[0] = procs_fd[1] = procs_fd[2] = -1;
    for (int i = 0; i < 3; i++) {
        if (!sb->cg_parent[i][0] || (sb->caps.cgroup_version == 2 && i > 0) || (i == 2 && c->cpu_milli <= 0))
            continue; /* v2: one directory for everything; v1 cpu only when a cpu limit is set */
        if (i == 1 && c->memory_max <= 0 && sb->cg_parent[0][0])
            continue; /* v1 memory only for a limit: the pids hierarchy holds the tree (a memory
                         cgroup costs a mkdir, a migration and a charge on every page fault) */
        snprintf(out->cgroup[i], sizeof out->cgroup[i], "%s/p%lu", sb->cg_parent[i], n);
        if (mkdir(out->cgroup[i], 0755) != 0) {
            snprintf(err, errlen, "cgroup: mkdir %s: %s", out->cgroup[i], strerror(errno));
            out->cgroup[i][0] = '\0';
            return -1;
        }
        char file[320], val[32];
        bool pids = i == 0 && sb->caps.cgroup_pids;
        bool mem = (i == 1 || sb->caps.cgroup_version == 2) && sb->caps.cgroup_memory;
        if (pids) {
            snprintf(file, sizeof file, "%s/pids.max", out->cgroup[i]);
            snprintf(val, sizeof val, "%lld", (long long)(c->pids_max > 0 ? c->pids_max : 256));
            if (!abx__sandbox_write_file(file, val)) {
                snprintf(err, errlen, "cgroup: cannot set pids.max: %s", strerror(errno));
                return -1;
            }
        }
        if (mem && c->memory_max > 0) {
            snprintf(file, sizeof file, "%s/%s", out->cgroup[i],
                     sb->caps.cgroup_version == 2 ? "memory.max" : "memory.limit_in_bytes");
            snprintf(val, sizeof val, "%lld", (long long)c->memory_max);
            if (!abx__sandbox_write_file(file, val)) {
                snprintf(err, errlen, "cgroup: cannot set the memory limit: %s", strerror(errno));
                return -1;
            }
            if (sb->caps.cgroup_version == 2) {
                snprintf(file, sizeof file, "%s/memory.swap.max", out->cgroup[i]);
                abx__sandbox_write_file(file, "0");
            }
        }
        if (c->cpu_milli > 0 && ((i == 2) || (i == 0 && sb->caps.cgroup_version == 2)) && sb->caps.cgroup_cpu) {
            bool ok;
            if (sb->caps.cgroup_version == 2) {
                snprintf(file, sizeof file, "%s/cpu.max", out->cgroup[i]);
                snprintf(val, sizeof val, "%lld 100000", (long long)c->cpu_milli * 100);
                ok = abx__sandbox_write_file(file, val);
            } else {
                snprintf(file, sizeof file, "%s/cpu.cfs_period_us", out->cgroup[i]);
                ok = abx__sandbox_write_file(file, "100000");
                snprintf(file, sizeof file, "%s/cpu.cfs_quota_us", out->cgroup[i]);
                snprintf(val, sizeof val, "%lld", (long long)c->cpu_milli * 100);
                ok = ok && abx__sandbox_write_file(file, val);
            }
            if (!ok) {
                snprintf(err, errlen, "cgroup: cannot set the cpu limit: %s", strerror(errno));
                return -1;
            }
        }
        snprintf(file, sizeof file, "%s/cgroup.procs", out->cgroup[i]);
        procs_fd[i] = open(file, O_WRONLY | O_CLOEXEC);
        if (procs_fd[i] < 0) {
            snprintf(err, errlen, "cgroup: cannot open %s: %s", file, strerror(errno));
            return -1;
        }
    }
    return 0;
}

/* ---- the child ---- */

/* ---- seccomp ----
 *
 * Every process runs under the filter of seccomp.h: the kernel keyrings, io_uring and
 * the socket families its statement does not grant are refused. Without `net`, AF_UNIX
 * is refused too: Landlock (up to ABI 7) does not govern connect() on a pathname Unix
 * socket and the empty network namespace does not separate them (they live in the file
 * system), so a process could reach any socket on the host whose path it knows — a
 * container runtime's, the system bus, a user's ssh-agent in /tmp. socketpair() stays:
 * it connects nothing outside the process tree. */

typedef struct child_args {
    const abx_spawn_req *req;
    const abx_sandbox *sb;
    int err_fd;
    int devnull;
    int procs_fd[3];
    int ruleset;
    int netns_fd;                /* a namespace of the pool (netpool.c) to enter, or -1: make one */
    int slot_mntns;              /* a prepared view's mount namespace to enter (slots.c), or -1 */
    bool ruleset_borrowed;       /* the ruleset is the slot's: not closed here */
    int egress_sock;             /* where the child sends the proxy's listening sockets, or -1 */
    uint32_t ns[ABX_EGRESS_NS_MAX]; /* nameservers to make addresses of lo (egress_ns.c) */
    size_t nns;
    long nproc;                  /* RLIMIT_NPROC to set; 0 = none (the cgroup holds pids) */
    const abx_seccomp_prog *filter; /* the sandbox's for the statement, or one with the signal guard */
    const abx_seccomp_prog *filter_unix; /* the same with Unix sockets, once the view is entered */
    abx_view view;               /* the process's own file-system view (view.c) */
    bool use_netns, use_mntns, use_view, use_caps, use_ll, use_seccomp, set_ids;
    bool view_entered;           /* set by the child: Unix sockets are allowed */
} child_args;

typedef struct child_err {
    int step;
    int err;
} child_err;

enum { ST_SIG = 1, ST_SETSID, ST_PDEATH, ST_CGROUP, ST_NETNS, ST_LOOPBACK, ST_EGRESS, ST_MNTNS, ST_MASK, ST_STDIO, ST_CTTY, ST_CWD,
       ST_FDS, ST_SECBITS, ST_BSET, ST_AMBIENT, ST_IDS, ST_CAPS, ST_RLIMIT, ST_NNP, ST_LANDLOCK, ST_SECCOMP,
       ST_EXEC };

static const char *const step_names[] = {"?", "signals", "setsid", "pdeathsig", "cgroup", "netns", "loopback",
                                         "egress listeners", "mount namespace",
                                         "mask", "stdio", "controlling tty", "cwd", "descriptors", "securebits",
                                         "capability bounding set", "ambient capabilities", "uid/gid",
                                         "capabilities", "rlimit", "no_new_privs", "landlock", "seccomp", "execve"};

static void child_fail(child_args *a, int step)
{
    child_err e = {step, errno};
    ssize_t w = write(a->err_fd, &e, sizeof e);
    (void)w;
    _exit(127);
}

int abx__mounts_private(const abx_confine *c, const char *mask_file)
{
    if (unshare(CLONE_NEWNS) != 0 || mount(NULL, "/", NULL, MS_REC | MS_PRIVATE, NULL) != 0)
        return -1;
    /* pins first: recursive, so what is mounted below stays (and a later mask or
     * read-only mount lands on top of them) */
    for (size_t i = 0; i < c->n_pins; i++)
        if (mount(c->pins[i], c->pins[i], NULL, MS_BIND | MS_REC, NULL) != 0)
            return -2;
    for (size_t i = 0; i < c->n_readonly; i++)
        if (mount(c->readonly[i], c->readonly[i], NULL, MS_BIND | MS_REC, NULL) != 0 ||
            mount(NULL, c->readonly[i], NULL, MS_BIND | MS_REMOUNT | MS_RDONLY, NULL) != 0)
            return -2;
    for (size_t i = 0; i < c->n_masks; i++) {
        struct stat st;
        if (stat(c->masks[i], &st) != 0)
            continue;
        int rc;
        if (S_ISDIR(st.st_mode))
            rc = mount("abx-mask", c->masks[i], "tmpfs", MS_RDONLY | MS_NOSUID | MS_NODEV | MS_NOEXEC,
                       "size=4k,mode=000");
        else
            rc = mount(mask_file, c->masks[i], NULL, MS_BIND, NULL) ||
                 mount(NULL, c->masks[i], NULL, MS_BIND | MS_REMOUNT | MS_RDONLY, NULL);
        if (rc != 0)
            return -2;
    }
    return 0;
}

static int child_main(void *arg)
{
    child_args *a = arg;
    const abx_spawn_req *req = a->req;
    const abx_confine *c = req->confine;
    sigset_t all;
    sigemptyset(&all);
    for (int s = 1; s < NSIG; s++) {
        if (s == SIGKILL || s == SIGSTOP)
            continue;
        struct sigaction sa = {.sa_handler = SIG_DFL};
        sigaction(s, &sa, NULL); /* ignored signals (SIGPIPE) would survive execve */
    }
    if (sigprocmask(SIG_SETMASK, &all, NULL) != 0)
        child_fail(a, ST_SIG);
    if (setsid() < 0)
        child_fail(a, ST_SETSID);
    if (prctl(PR_SET_PDEATHSIG, SIGKILL) != 0)
        child_fail(a, ST_PDEATH);
    for (int i = 0; i < 3; i++)
        if (a->procs_fd[i] >= 0 && write(a->procs_fd[i], "0", 1) != 1)
            child_fail(a, ST_CGROUP);
    /* a network namespace of its own (made ahead, or new): loopback up, this tree's only */
    if (a->use_netns && (a->netns_fd >= 0 ? setns(a->netns_fd, CLONE_NEWNET) : unshare(CLONE_NEWNET)) != 0)
        child_fail(a, ST_NETNS);
    if (a->use_netns && a->netns_fd < 0 && abx__loopback_up() != 0)
        child_fail(a, ST_LOOPBACK);
    if (a->egress_sock >= 0 && abx__egress_ns_setup(a->egress_sock, c, a->ns, a->nns) != 0)
        child_fail(a, ST_EGRESS);
    if (a->slot_mntns >= 0) { /* a prepared view (slots.c): its masks and mounts are made */
        if (setns(a->slot_mntns, CLONE_NEWNS) != 0)
            child_fail(a, ST_MNTNS);
        a->view_entered = true;
    } else {
        int m = a->use_mntns ? abx__mounts_private(c, a->sb->mask_file) : 0;
        if (m != 0)
            child_fail(a, m == -1 ? ST_MNTNS : ST_MASK);
        /* the view (view.c) after the masks, which its bind mounts carry along; a view
         * that cannot be entered leaves Unix sockets refused */
        a->view_entered = a->use_view && abx__view_enter(&a->view) == 0;
    }
    int in = req->stdin_fd >= 0 ? req->stdin_fd : a->devnull, out = req->stdout_fd >= 0 ? req->stdout_fd : a->devnull,
        er = req->stderr_fd >= 0 ? req->stderr_fd : a->devnull;
    if (dup2(in, 0) < 0 || dup2(out, 1) < 0 || dup2(er, 2) < 0)
        child_fail(a, ST_STDIO);
    if (req->ctty && ioctl(0, TIOCSCTTY, 0) != 0)
        child_fail(a, ST_CTTY);
    if (req->cwd_fd >= 0 ? fchdir(req->cwd_fd) != 0 : chdir("/") != 0)
        child_fail(a, ST_CWD);
    if ((a->use_mntns || a->slot_mntns >= 0) && req->cwd_fd >= 0 && req->cwd_path) {
        /* enter the same directory again inside the private mount namespace, so relative
         * paths meet the masks too; it must be the very directory the jail opened */
        struct stat want, got;
        if (fstat(req->cwd_fd, &want) != 0 || chdir(req->cwd_path) != 0 || stat(".", &got) != 0 ||
            want.st_dev != got.st_dev || want.st_ino != got.st_ino)
            child_fail(a, ST_CWD);
    }
    /* every descriptor but 0–2 closes at exec; the error pipe stays usable until then */
    if (syscall(SYS_close_range, 3, ~0U, CLOSE_RANGE_CLOEXEC) != 0)
        child_fail(a, ST_FDS);
    for (size_t i = 0; i < req->n_keep_fds; i++) /* but those the caller hands over */
        if (fcntl(req->keep_fds[i], F_SETFD, 0) != 0)
            child_fail(a, ST_FDS);
    if (a->use_caps) {
        if (prctl(PR_SET_SECUREBITS, SECBIT_KEEP_CAPS_LOCKED | SECBIT_NO_SETUID_FIXUP | SECBIT_NO_SETUID_FIXUP_LOCKED |
                                         SECBIT_NOROOT | SECBIT_NOROOT_LOCKED) != 0)
            child_fail(a, ST_SECBITS);
        for (int cap = 0; cap <= a->sb->cap_last; cap++)
            if (prctl(PR_CAPBSET_DROP, cap, 0, 0, 0) != 0 && errno != EINVAL)
                child_fail(a, ST_BSET);
        if (prctl(PR_CAP_AMBIENT, PR_CAP_AMBIENT_CLEAR_ALL, 0, 0, 0) != 0 && errno != EINVAL)
            child_fail(a, ST_AMBIENT);
        if (a->set_ids) {
            /* the system calls, not glibc's wrappers: those would signal every thread of abx
             * (their "set ids in every thread" broadcast) from a child that shares its memory */
            if (syscall(SYS_setgroups, 0, NULL) != 0 || syscall(SYS_setresgid, c->gid, c->gid, c->gid) != 0 ||
                syscall(SYS_setresuid, c->uid, c->uid, c->uid) != 0)
                child_fail(a, ST_IDS);
        }
        struct __user_cap_header_struct h = {.version = _LINUX_CAPABILITY_VERSION_3, .pid = 0};
        struct __user_cap_data_struct d[2];
        memset(d, 0, sizeof d);
        if (syscall(SYS_capset, &h, d) != 0)
            child_fail(a, ST_CAPS);
    }
    if (a->nproc > 0) {
        struct rlimit rl = {.rlim_cur = (rlim_t)a->nproc, .rlim_max = (rlim_t)a->nproc};
        if (setrlimit(RLIMIT_NPROC, &rl) != 0)
            child_fail(a, ST_RLIMIT);
    }
    if (prctl(PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0) != 0)
        child_fail(a, ST_NNP);
    if (a->use_ll && syscall(SYS_landlock_restrict_self, a->ruleset, 0) != 0)
        child_fail(a, ST_LANDLOCK);
    if (a->use_seccomp) {
        const abx_seccomp_prog *f = a->view_entered ? a->filter_unix : a->filter;
        struct sock_fprog prog = {.len = f->len, .filter = (struct sock_filter *)f->insn};
        if (prctl(PR_SET_SECCOMP, SECCOMP_MODE_FILTER, &prog, 0, 0) != 0)
            child_fail(a, ST_SECCOMP);
    }
    execve(req->argv[0], req->argv, req->envp);
    child_fail(a, ST_EXEC);
    return 127;
}

/* Report a started process to the watchdog. One that died (killed by hand, by the OOM
 * killer) is replaced: the calls it knew stay covered at abx's death by the new one's
 * sweep of abx's cgroups, though not their deadlines while abx is wedged. Spawns of one
 * sandbox come from one thread (the process manager's), so nothing races here. */
static int watch(abx_sandbox *sb, const abx_child *c, int64_t deadline_ms)
{
    const char(*cg)[ABX_CG_PATH] = (const char(*)[ABX_CG_PATH])c->cgroup;
    if (abx_watchdog_watch(&sb->wd, c->pidfd, c->pid, cg, deadline_ms) == 0)
        return 0;
    if (!abx_watchdog_reap_if_dead(&sb->wd) ||
        abx_watchdog_start(&sb->wd, (const char(*)[ABX_CG_PATH])sb->cg_parent) != 0)
        return -1;
    return abx_watchdog_watch(&sb->wd, c->pidfd, c->pid, cg, deadline_ms);
}

/* The statement's filter; with the same uid as abx and no Landlock signal scoping the
 * kernel would let the process signal abx and its watchdog, so the filter is built
 * with a guard naming them (seccomp.h). NULL when that cannot be built. */
static const abx_seccomp_prog *choose_filter(const abx_sandbox *sb, const abx_confine_plan *plan, int mode,
                                             abx_seccomp_prog *guarded)
{
    if (!plan->guard_signals || !sb->caps.seccomp)
        return &sb->filter[mode];
    abx_seccomp_guard g = {.pids = {(int)getpid(), sb->wd.pid > 0 ? (int)sb->wd.pid : (int)getpid()},
                           .pgid = (int)getpgrp()};
    return abx_seccomp_build_guarded((enum abx_seccomp_net)mode, &g, guarded) == 0 ? guarded : NULL;
}

/* What the plan decides for the child: refused when a needed layer is missing (required,
 * or deny masks in any mode), else which layers and which filter it gets. */
static int plan_child(const abx_sandbox *sb, const abx_confine *c, bool required, child_args *a,
                      abx_seccomp_prog guarded[2], char *err, size_t errlen)
{
    abx_confine_plan plan;
    abx_sandbox_plan(sb, c, &plan);
    if ((required && plan.missing[0]) || plan.masks_unavailable) {
        snprintf(err, errlen, "confinement required but unavailable: %s (tier %s%s)", plan.missing, plan.tier,
                 required ? "" : "; deny masks are kept even with best_effort");
        errno = ENOSYS;
        return -1;
    }
    a->use_netns = !c->net && sb->caps.netns;
    if (c->egress_port > 0 && !a->use_netns) { /* an allowlist is only as good as the namespace */
        snprintf(err, errlen, "confinement required but unavailable: %s", c->net ? "egress allowlist with net" :
                 "an egress allowlist needs a network namespace");
        errno = ENOSYS;
        return -1;
    }
    /* masks and read-only mounts are needed (the plan refused the spawn without them);
     * pins only keep them on their files */
    a->use_mntns = sb->caps.mntns && (c->n_masks || c->n_readonly || c->n_pins);
    a->use_caps = sb->caps.root;
    a->set_ids = c->set_ids && sb->tiers.can_set_ids;
    a->use_ll = sb->caps.landlock_abi > 0;
    a->use_seccomp = sb->caps.seccomp;
    a->filter_unix = NULL;
    if (!(a->filter = choose_filter(sb, &plan, plan.seccomp_mode, &guarded[0])) ||
        (plan.seccomp_mode == ABX_SC_NONET_NS &&
         !(a->filter_unix = choose_filter(sb, &plan, ABX_SC_NONET_UNIX, &guarded[1])))) {
        snprintf(err, errlen, "seccomp: cannot build the signal guard");
        errno = ENOMEM;
        return -1;
    }
    a->nproc = plan.nproc;
    /* a prepared view (slots.c), where the process would get a view of its own */
    if (a->req->slot && a->filter_unix && sb->view && a->use_netns && a->use_ll && abx__view_covers(a->req)) {
        a->slot_mntns = a->req->slot->mntns;
        a->use_view = a->use_mntns = false;
        return 0;
    }
    /* a view of only its roots lets a process without the network have Unix sockets;
     * planned only where it can be built, entered or not by the child (fail closed) */
    a->use_view = a->filter_unix && sb->view && a->use_netns && abx__view_plan(sb, a->req, &a->view) == 0;
    a->use_mntns = a->use_mntns || a->use_view;
    return 0;
}

/* What a spare must have been made with to run this process (slots.c, spare.c); false
 * when it cannot have one: not a slot's process, or a layer or filter of its own. The
 * slot's view and ruleset, its namespaces and the streams are the call's or the slot's,
 * the rest is here. */
static bool spare_recipe(const abx_sandbox *sb, const abx_spawn_req *req, const child_args *a, abx_spare_recipe *r)
{
    const abx_confine *c = req->confine;
    if (a->slot_mntns < 0 || req->ctty || req->n_keep_fds || c->egress_port > 0 || !a->use_seccomp ||
        !a->use_ll || !a->use_netns || !sb->caps.cgroup_pids || a->filter_unix != &sb->filter[ABX_SC_NONET_UNIX])
        return false;
    memset(r, 0, sizeof *r); /* compared whole, padding too */
    r->pids_max = c->pids_max;
    r->memory_max = c->memory_max;
    r->cpu_milli = c->cpu_milli;
    r->nproc = a->nproc;
    r->use_caps = a->use_caps;
    r->set_ids = a->set_ids;
    r->uid = a->set_ids ? c->uid : 0;
    r->gid = a->set_ids ? c->gid : 0;
    r->filter = a->filter_unix;
    return true;
}

/* The slot's spare (made while its last process ran) runs the program when it was made
 * for the same recipe: true, out filled. Else it is killed, and the caller spawns as
 * usual; either way the slot remembers this recipe for its next spare. */
static bool use_spare(abx_sandbox *sb, const abx_spawn_req *req, const child_args *a, abx_child *out)
{
    abx_slot *sl = req->slot;
    abx_spare *sp = sl->spare;
    abx_spare_recipe recipe;
    sl->spare = NULL;
    if (!(sl->has_recipe = spare_recipe(sb, req, a, &recipe)) || (sp && !abx__spare_fits(sp, &recipe))) {
        abx__spare_discard(sp);
        sp = NULL;
    }
    if (sl->has_recipe)
        sl->recipe = recipe;
    if (!sp || abx__spare_use(sp, req, a->devnull, out) != 0)
        return false;
    atomic_fetch_add(&sb->sp_used, 1);
    return true;
}

/* Kill and reap a child that started but must not run. */
static void unstart(abx_child *out)
{
    abx_child_kill(out, SIGKILL);
    int st;
    while (waitpid(out->pid, &st, 0) < 0 && errno == EINTR) {
    }
    close(out->pidfd);
    out->pid = -1;
    out->pidfd = -1;
}

/* Where the child sends the egress proxy's listening sockets it makes (egress_ns.c). */
static int egress_pair(const abx_confine *c, child_args *a, int egress[2], char *err, size_t errlen)
{
    if (socketpair(AF_UNIX, SOCK_DGRAM | SOCK_CLOEXEC, 0, egress) != 0) {
        snprintf(err, errlen, "cannot prepare the egress listener: %s", strerror(errno));
        return -1;
    }
    a->egress_sock = egress[1];
    a->nns = c->egress_dns ? abx__egress_ns_nameservers(a->ns) : 0;
    return 0;
}

/* Drop the cgroups made so far: the process runs without (best effort). */
static void no_cgroups(child_args *a, abx_child *out)
{
    for (int i = 0; i < 3; i++) {
        if (a->procs_fd[i] >= 0)
            close(a->procs_fd[i]);
        a->procs_fd[i] = -1;
        if (out->cgroup[i][0])
            rmdir(out->cgroup[i]);
        out->cgroup[i][0] = '\0';
    }
}

/* What the parent prepared for the child, once it has exec'd or failed. */
static void args_free(child_args *a)
{
    if (a->devnull >= 0)
        close(a->devnull);
    if (a->ruleset >= 0 && !a->ruleset_borrowed)
        close(a->ruleset);
    abx__view_free(&a->view); /* planned or not (zeroed) */
    for (int i = 0; i < 3; i++)
        if (a->procs_fd[i] >= 0)
            close(a->procs_fd[i]);
}

int abx_spawn(abx_sandbox *sb, const abx_spawn_req *req, abx_child *out, char *err, size_t errlen)
{
    memset(out, 0, sizeof *out);
    out->pid = -1;
    out->pidfd = -1;
    out->netns = -1;
    const abx_confine *c = req->confine;
    bool required = c->required || sb->required;
    child_args a = {.req = req, .sb = sb, .err_fd = -1, .devnull = -1, .procs_fd = {-1, -1, -1}, .ruleset = -1,
                    .netns_fd = -1, .slot_mntns = -1, .egress_sock = -1};
    int pipefd[2] = {-1, -1}, egress[2] = {-1, -1};
    void *stack = MAP_FAILED;
    const size_t stack_size = 256 * 1024;
    int rc = -1;
    abx_seccomp_prog guarded[2];
    bool ran = false; /* the process exec'd: its slot may have been changed */
    if (plan_child(sb, c, required, &a, guarded, err, errlen) != 0) {
        abx__slot_put(req->slot, true);
        return -1;
    }
    a.devnull = open("/dev/null", O_RDWR | O_CLOEXEC);
    if (a.devnull < 0 || pipe2(pipefd, O_CLOEXEC) != 0) {
        snprintf(err, errlen, "cannot prepare the child: %s", strerror(errno));
        goto out;
    }
    a.err_fd = pipefd[1];
    if (req->slot && (ran = use_spare(sb, req, &a, out)))
        goto started;
    if (c->egress_port > 0 && egress_pair(c, &a, egress, err, errlen) != 0)
        goto out;
    if (a.slot_mntns >= 0) {
        a.ruleset = req->slot->ruleset;
        a.ruleset_borrowed = true;
    } else if (a.use_ll && (a.ruleset = abx__build_ruleset(sb, req, err, errlen)) < 0) {
        goto out;
    }
    if ((sb->caps.cgroup_pids || sb->caps.cgroup_memory) && abx__make_cgroups(sb, c, out, a.procs_fd, err, errlen) != 0) {
        if (required)
            goto out;
        no_cgroups(&a, out); /* best effort: run without */
    }
    /* a namespace made ahead, unless the egress proxy's listeners and addresses are to be
     * made in it (such a namespace never comes back to the pool) */
    if (a.use_netns && c->egress_port <= 0)
        a.netns_fd = out->netns = abx__netpool_take(sb);
    stack = mmap(NULL, stack_size, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS | MAP_STACK, -1, 0);
    if (stack == MAP_FAILED) {
        snprintf(err, errlen, "cannot map the child's stack: %s", strerror(errno));
        goto out;
    }
    int pidfd = -1;
    pid_t pid = clone(child_main, (char *)stack + stack_size, CLONE_VM | CLONE_VFORK | CLONE_PIDFD | SIGCHLD, &a,
                      &pidfd);
    if (pid < 0) {
        snprintf(err, errlen, "clone: %s", strerror(errno));
        goto out;
    }
    close(pipefd[1]);
    pipefd[1] = -1;
    child_err ce;
    ssize_t got = read(pipefd[0], &ce, sizeof ce);
    if (got == (ssize_t)sizeof ce) {
        /* the child failed before exec: reap it and say which step */
        int st;
        while (waitpid(pid, &st, 0) < 0 && errno == EINTR) {
        }
        close(pidfd);
        snprintf(err, errlen, "%s: %s", ce.step > 0 && ce.step <= ST_EXEC ? step_names[ce.step] : "?",
                 strerror(ce.err));
        errno = ce.err;
        goto out;
    }
    out->pid = pid;
    out->pidfd = pidfd;
    ran = true;
started:
    if (a.egress_sock >= 0 && abx__egress_ns_receive(egress[0], c, &out->egress) != 0) {
        unstart(out);
        snprintf(err, errlen, "the egress listener did not arrive");
        errno = EIO;
        goto out;
    }
    if (watch(sb, out, req->deadline_ms) != 0 && required) {
        /* confinement required: a process the watchdog does not know could outlive abx */
        unstart(out);
        snprintf(err, errlen, "confinement required but unavailable: the watchdog is not running");
        errno = ENOSYS;
        goto out;
    }
    rc = 0;
    out->slot = req->slot;
out:
    if (stack != MAP_FAILED) {
        abx__unpoison(stack, stack_size);
        munmap(stack, stack_size);
    }
    for (int i = 0; i < 2; i++) {
        if (pipefd[i] >= 0)
            close(pipefd[i]);
        if (egress[i] >= 0)
            close(egress[i]);
    }
    if (rc != 0) {
        for (size_t i = 0; i < out->egress.n; i++)
            close(out->egress.fd[i]);
        out->egress.n = 0;
        if (out->netns >= 0) /* a process that failed to start may have entered it: not reused */
            close(out->netns);
        out->netns = -1;
        abx__slot_put(req->slot, !ran); /* unchanged unless the process ran */
    }
    args_free(&a);
    if (rc != 0)
        for (int i = 0; i < 3; i++)
            if (out->cgroup[i][0]) {
                abx_cgroup_kill(out->cgroup[i], true);
                out->cgroup[i][0] = '\0';
            }
    return rc;
}

static void kill_cgroup(const char *dir, int sig)
{
    char file[320];
    snprintf(file, sizeof file, "%s/cgroup.procs", dir);
    FILE *f = fopen(file, "re");
    if (!f)
        return;
    int pid;
    while (fscanf(f, "%d", &pid) == 1)
        kill(pid, sig);
    fclose(f);
}

void abx_child_kill(const abx_child *c, int sig)
{
    if (c->pid > 0)
        kill(-c->pid, sig); /* the whole process group */
    for (int i = 0; i < 3; i++)
        if (c->cgroup[i][0])
            kill_cgroup(c->cgroup[i], sig); /* members that left the group (setsid) too */
}

/* The slot's next process, made and confined now for the slot's next call (spare.c):
 * c's tree is gone and the slot still c's, before it goes back (nothing else touches it).
 * Made here rather than as soon as c's program had started: then its making ran beside
 * that program on a small machine and slowed it, and it held a namespace and a cgroup
 * while the slot could not be used anyway. */
static void prepare_next(abx_sandbox *sb, abx_child *c)
{
    abx_slot *sl = c->slot;
    if (sl->has_recipe && !sl->spare && (sl->spare_stack || (sl->spare_stack = abx__spare_stack())) &&
        (sl->spare = abx__spare_make(sb, sl->mntns, sl->ruleset, &sl->recipe, sl->spare_stack)) != NULL)
        atomic_fetch_add(&sb->sp_made, 1);
}

/* Remove the cgroups (killing stragglers) and close what the child holds. The network
 * namespace goes back to sb's pool when the tree is known gone: its pids cgroup (every
 * process of the tree, wherever it moved in its session) was emptied and removed. */
static void cleanup(abx_sandbox *sb, abx_child *c)
{
    bool tree_gone = c->cgroup[0][0] != '\0';
    for (int i = 0; i < 3; i++) {
        if (!c->cgroup[i][0])
            continue;
        int rc = abx_cgroup_kill(c->cgroup[i], true);
        if (i == 0 && rc != 0)
            tree_gone = false;
        c->cgroup[i][0] = '\0';
    }
    if (c->slot) {
        if (sb && tree_gone)
            prepare_next(sb, c);
        abx__slot_put(c->slot, tree_gone);
        c->slot = NULL;
    }
    if (c->netns >= 0) {
        if (sb)
            abx__netpool_give(sb, c->netns, tree_gone);
        else
            close(c->netns);
        c->netns = -1;
    }
    if (c->pidfd >= 0) {
        close(c->pidfd);
        c->pidfd = -1;
    }
    for (size_t i = 0; i < c->egress.n; i++)
        close(c->egress.fd[i]);
    c->egress.n = 0;
}


void abx_child_cleanup(abx_child *c) { cleanup(NULL, c); }

void abx_child_release(abx_sandbox *sb, abx_child *c) { cleanup(sb, c); }
