/* tierwrap.c — run a program the way a hardened container would: as another uid with
 * every capability dropped, no_new_privs, and a seccomp filter that refuses what
 * Docker's default profile refuses to an unprivileged container (unshare, clone with
 * namespace flags, setns, mount and the new mount API: EPERM; clone3: ENOSYS so libc
 * falls back to clone). With --no-landlock it also answers landlock_* with ENOSYS, as
 * gVisor does. tests/security/test_tiers.py starts abx under it to get the
 * `unprivileged` and `minimal` tiers on a machine that has every feature.
 *
 *   abx-tierwrap [--uid N --gid N] [--no-landlock] [--ro-root --rw DIR ...] -- PROGRAM [ARGS...]
 *
 * --ro-root runs the program with the root file system read-only, as Docker's
 * --read-only does: a private mount namespace (made while the wrapper still has its
 * capabilities), each --rw DIR bound onto itself so it stays writable (the workspace,
 * abx's state folder, the runtime dir's parent), then / remounted read-only. Mounts
 * below / other than the --rw ones (/proc, /sys, /dev) keep their own flags.
 *
 * Without --uid the program keeps the uid (root stays uid 0, without capabilities). */
#define _GNU_SOURCE
#include <errno.h>
#include <grp.h>
#include <linux/audit.h>
#include <linux/capability.h>
#include <linux/filter.h>
#include <linux/seccomp.h>
#include <sched.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mount.h>
#include <sys/prctl.h>
#include <sys/syscall.h>
#include <unistd.h>

#if defined(__x86_64__)
#define WRAP_ARCH AUDIT_ARCH_X86_64
#elif defined(__aarch64__)
#define WRAP_ARCH AUDIT_ARCH_AARCH64
#endif

#define NS_FLAGS                                                                                                       \
    (CLONE_NEWNS | CLONE_NEWUTS | CLONE_NEWIPC | CLONE_NEWUSER | CLONE_NEWPID | CLONE_NEWNET | CLONE_NEWCGROUP)
#define RET_ERRNO(e) (SECCOMP_RET_ERRNO | ((e) & SECCOMP_RET_DATA))

static int die(const char *what)
{
    fprintf(stderr, "abx-tierwrap: %s: %s\n", what, strerror(errno));
    return 126;
}

#ifdef WRAP_ARCH
/* the program is straight-line: each refused call jumps to a return right after it */
static size_t refuse(struct sock_filter *f, size_t n, long nr, unsigned err)
{
    f[n++] = (struct sock_filter)BPF_JUMP(BPF_JMP | BPF_JEQ | BPF_K, (unsigned)nr, 0, 1);
    f[n++] = (struct sock_filter)BPF_STMT(BPF_RET | BPF_K, RET_ERRNO(err));
    return n;
}

static int install_filter(int no_landlock)
{
    struct sock_filter f[64];
    size_t n = 0;
    f[n++] = (struct sock_filter)BPF_STMT(BPF_LD | BPF_W | BPF_ABS, offsetof(struct seccomp_data, arch));
    f[n++] = (struct sock_filter)BPF_JUMP(BPF_JMP | BPF_JEQ | BPF_K, WRAP_ARCH, 1, 0);
    f[n++] = (struct sock_filter)BPF_STMT(BPF_RET | BPF_K, SECCOMP_RET_ALLOW);
    f[n++] = (struct sock_filter)BPF_STMT(BPF_LD | BPF_W | BPF_ABS, offsetof(struct seccomp_data, nr));
    static const long eperm[] = {SYS_unshare, SYS_setns, SYS_mount, SYS_umount2, SYS_pivot_root, SYS_open_tree,
                                 SYS_move_mount, SYS_fsopen, SYS_fsconfig, SYS_fsmount, SYS_fspick,
                                 SYS_mount_setattr};
    for (size_t i = 0; i < sizeof eperm / sizeof eperm[0]; i++)
        n = refuse(f, n, eperm[i], EPERM);
    n = refuse(f, n, SYS_clone3, ENOSYS);
    if (no_landlock) {
        n = refuse(f, n, SYS_landlock_create_ruleset, ENOSYS);
        n = refuse(f, n, SYS_landlock_add_rule, ENOSYS);
        n = refuse(f, n, SYS_landlock_restrict_self, ENOSYS);
    }
    /* clone(flags, ...): refused when a namespace flag is set (arg 0 on x86_64 and arm64) */
    f[n++] = (struct sock_filter)BPF_JUMP(BPF_JMP | BPF_JEQ | BPF_K, SYS_clone, 0, 3);
    f[n++] = (struct sock_filter)BPF_STMT(BPF_LD | BPF_W | BPF_ABS, offsetof(struct seccomp_data, args[0]));
    f[n++] = (struct sock_filter)BPF_JUMP(BPF_JMP | BPF_JSET | BPF_K, NS_FLAGS, 0, 1);
    f[n++] = (struct sock_filter)BPF_STMT(BPF_RET | BPF_K, RET_ERRNO(EPERM));
    f[n++] = (struct sock_filter)BPF_STMT(BPF_RET | BPF_K, SECCOMP_RET_ALLOW);
    struct sock_fprog prog = {.len = (unsigned short)n, .filter = f};
    return prctl(PR_SET_SECCOMP, SECCOMP_MODE_FILTER, &prog, 0, 0);
}
#endif

static int read_only_root(char **rw, int n_rw)
{
    if (unshare(CLONE_NEWNS) != 0)
        return die("unshare(CLONE_NEWNS)");
    if (mount(NULL, "/", NULL, MS_REC | MS_PRIVATE, NULL) != 0)
        return die("making / private");
    for (int i = 0; i < n_rw; i++)
        if (mount(rw[i], rw[i], NULL, MS_BIND | MS_REC, NULL) != 0)
            return die(rw[i]);
    if (mount(NULL, "/", NULL, MS_REMOUNT | MS_BIND | MS_RDONLY, NULL) != 0)
        return die("remounting / read-only");
    return 0;
}

static int drop_everything(long uid, long gid)
{
    for (int cap = 0; cap <= CAP_LAST_CAP; cap++)
        if (prctl(PR_CAPBSET_DROP, cap, 0, 0, 0) != 0 && errno != EINVAL && errno != EPERM)
            return die("PR_CAPBSET_DROP");
    if (prctl(PR_CAP_AMBIENT, PR_CAP_AMBIENT_CLEAR_ALL, 0, 0, 0) != 0 && errno != EINVAL)
        return die("PR_CAP_AMBIENT_CLEAR_ALL");
    if (uid >= 0) {
        if (setgroups(0, NULL) != 0 || setresgid((gid_t)gid, (gid_t)gid, (gid_t)gid) != 0 ||
            setresuid((uid_t)uid, (uid_t)uid, (uid_t)uid) != 0)
            return die("changing ids");
    }
    struct __user_cap_header_struct h = {.version = _LINUX_CAPABILITY_VERSION_3, .pid = 0};
    struct __user_cap_data_struct d[2];
    memset(d, 0, sizeof d);
    if (syscall(SYS_capset, &h, d) != 0)
        return die("capset");
    if (prctl(PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0) != 0)
        return die("no_new_privs");
    return 0;
}

int main(int argc, char **argv)
{
    long uid = -1, gid = -1;
    int no_landlock = 0, ro_root = 0, n_rw = 0, i = 1;
    char *rw[16];
    for (; i < argc && strcmp(argv[i], "--") != 0; i++) {
        if (strcmp(argv[i], "--uid") == 0 && i + 1 < argc)
            uid = strtol(argv[++i], NULL, 10);
        else if (strcmp(argv[i], "--gid") == 0 && i + 1 < argc)
            gid = strtol(argv[++i], NULL, 10);
        else if (strcmp(argv[i], "--no-landlock") == 0)
            no_landlock = 1;
        else if (strcmp(argv[i], "--ro-root") == 0)
            ro_root = 1;
        else if (strcmp(argv[i], "--rw") == 0 && i + 1 < argc && n_rw < 16)
            rw[n_rw++] = argv[++i];
        else
            break;
    }
    if (i >= argc - 1 || strcmp(argv[i], "--") != 0 || (uid >= 0) != (gid >= 0)) {
        fprintf(stderr, "usage: abx-tierwrap [--uid N --gid N] [--no-landlock] [--ro-root --rw DIR ...] -- "
                        "PROGRAM [ARGS...]\n");
        return 2;
    }
    if (ro_root && read_only_root(rw, n_rw) != 0)
        return 126;
    int rc = drop_everything(uid, gid);
    if (rc)
        return rc;
#ifdef WRAP_ARCH
    if (install_filter(no_landlock) != 0)
        return die("seccomp");
#else
    (void)no_landlock;
    fprintf(stderr, "abx-tierwrap: no filter for this architecture\n");
    return 126;
#endif
    execvp(argv[i + 1], argv + i + 1);
    return die(argv[i + 1]);
}
