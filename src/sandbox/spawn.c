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
#include "sandbox/spawn.h"
#include "sandbox/seccomp.h"
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
#include <sys/mman.h>
#include <sys/mount.h>
#include <sys/prctl.h>
#include <sys/stat.h>
#include <sys/socket.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <unistd.h>

/* Under AddressSanitizer the child's frames poison the shadow of the stack we mmap for
 * it; that shadow must be cleared before the memory goes back, or a later mapping of
 * the same addresses (libmicrohttpd's pools) reads as a stack overflow. */
#if defined(__SANITIZE_ADDRESS__)
#define ABX_ASAN 1
#elif defined(__has_feature)
#if __has_feature(address_sanitizer)
#define ABX_ASAN 1
#endif
#endif
#ifdef ABX_ASAN
#include <sanitizer/asan_interface.h>
#define UNPOISON(p, n) __asan_unpoison_memory_region((p), (n))
#else
#define UNPOISON(p, n) ((void)(p), (void)(n))
#endif

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

struct abx_sandbox {
    abx_sandbox_caps caps;
    bool required;
    int netns_fd;               /* an empty network namespace, -1 if none */
    char cg_parent[ABX_CG_SLOTS][ABX_CG_PATH]; /* [0] pids (or the v2 dir), [1] memory (v1), [2] cpu (v1) */
    int cap_last;
    char *runtime_dir;          /* owned */
    char mask_file[160];        /* an empty file with mode 000: bound over masked files */
    char tag[64];               /* <pid>-s<start>-<random>: names the live abx that owns a cgroup,
                                   and never meets a dead process's leftovers */
    int *etc_fds;               /* O_PATH fds of /etc entries granted read-only (secrets left out) */
    size_t n_etc;
    atomic_ulong seq;
    abx_seccomp_prog filter[2];  /* [0] without net, [1] with net */
    abx_watchdog wd;
    char missing[256];
};

/* ---- probing ---- */

static int landlock_abi(void)
{
    long abi = syscall(SYS_landlock_create_ruleset, NULL, 0, LANDLOCK_CREATE_RULESET_VERSION);
    return abi > 0 ? (int)abi : 0;
}

/* Create an empty network namespace held by an fd: a helper child unshares, the parent
 * opens /proc/<child>/ns/net, the child exits. Costs one fork at start, then each
 * spawn only setns()es (creating a namespace per process costs milliseconds). */
static int make_empty_netns(void)
{
    int up[2], down[2]; /* child → parent: ready; parent → child: EOF when done */
    if (pipe2(up, O_CLOEXEC) != 0)
        return -1;
    if (pipe2(down, O_CLOEXEC) != 0) {
        close(up[0]);
        close(up[1]);
        return -1;
    }
    pid_t pid = fork();
    if (pid == 0) {
        close(up[0]);
        close(down[1]);
        char ok = unshare(CLONE_NEWNET) == 0 ? 'y' : 'n';
        if (write(up[1], &ok, 1) != 1)
            _exit(1);
        char c;
        ssize_t r = read(down[0], &c, 1); /* EOF once the parent holds the namespace */
        (void)r;
        _exit(0);
    }
    close(up[1]);
    close(down[0]);
    char ok = 'n';
    int fd = -1;
    if (pid > 0 && read(up[0], &ok, 1) == 1 && ok == 'y') {
        char path[64];
        snprintf(path, sizeof path, "/proc/%d/ns/net", (int)pid);
        fd = open(path, O_RDONLY | O_CLOEXEC);
    }
    close(down[1]);
    close(up[0]);
    int st;
    while (pid > 0 && waitpid(pid, &st, 0) < 0 && errno == EINTR) {
    }
    return fd;
}

static bool probe_mntns(void)
{
    pid_t pid = fork();
    if (pid < 0)
        return false;
    /* what a child needs, not just unshare(): in a chroot "/" is no mount point and
     * making it private fails (EINVAL); then no mask can be applied and saying so at
     * start (sandbox.unavailable naming the layer) beats a spawn failing on each call */
    if (pid == 0)
        _exit(unshare(CLONE_NEWNS) == 0 && mount(NULL, "/", NULL, MS_REC | MS_PRIVATE, NULL) == 0 ? 0 : 1);
    int st;
    while (waitpid(pid, &st, 0) < 0 && errno == EINTR) {
    }
    return WIFEXITED(st) && WEXITSTATUS(st) == 0;
}

static bool write_file(const char *path, const char *text)
{
    int fd = open(path, O_WRONLY | O_CLOEXEC);
    if (fd < 0)
        return false;
    ssize_t n = write(fd, text, strlen(text));
    close(fd);
    return n == (ssize_t)strlen(text);
}

/* Our own cgroup path in a v1 hierarchy ("pids", "memory") or v2 (controller ""). */
static bool own_cgroup(const char *controller, char *out, size_t outlen)
{
    FILE *f = fopen("/proc/self/cgroup", "re");
    if (!f)
        return false;
    char line[512];
    bool found = false;
    while (fgets(line, sizeof line, f)) {
        line[strcspn(line, "\n")] = '\0';
        char *c1 = strchr(line, ':');
        char *c2 = c1 ? strchr(c1 + 1, ':') : NULL;
        if (!c2)
            continue;
        *c2 = '\0';
        const char *ctrls = c1 + 1, *path = c2 + 1;
        bool match = false;
        if (!*controller)
            match = strcmp(line, "0") == 0 && !*ctrls;
        else
            for (char *save = NULL, *t = strtok_r((char *)ctrls, ",", &save); t; t = strtok_r(NULL, ",", &save))
                match = match || strcmp(t, controller) == 0;
        if (match) {
            snprintf(out, outlen, "%s", strcmp(path, "/") == 0 ? "" : path);
            found = true;
            break;
        }
    }
    fclose(f);
    return found;
}

/* When process pid started (clock ticks since boot, /proc/<pid>/stat field 22); 0 when
 * it is gone. Paired with the pid it names one process for good: a reused pid has
 * another start time. */
static unsigned long long proc_start(int pid)
{
    char path[64], buf[1024];
    snprintf(path, sizeof path, "/proc/%d/stat", pid);
    int fd = open(path, O_RDONLY | O_CLOEXEC);
    if (fd < 0)
        return 0;
    ssize_t n = read(fd, buf, sizeof buf - 1);
    close(fd);
    if (n <= 0)
        return 0;
    buf[n] = '\0';
    char *p = strrchr(buf, ')'); /* the command name may hold spaces and parentheses */
    unsigned long long start = 0;
    for (int field = 2; p && *p && field < 22; field++)
        p = strchr(p + 1, ' ');
    if (p && sscanf(p + 1, "%llu", &start) != 1)
        start = 0;
    return start;
}

/* Is the abx that made this cgroup parent (abx-<pid>-s<start>-<tag>) dead? Older names
 * (abx-<pid>-<tag>) only have the pid to go by. */
static bool owner_dead(const char *name)
{
    int pid;
    unsigned long long start;
    if (sscanf(name, "abx-%d-s%llu-", &pid, &start) == 2 && pid > 0)
        return proc_start(pid) != start;
    if (sscanf(name, "abx-%d", &pid) == 1 && pid > 0)
        return kill(pid, 0) != 0 && errno == ESRCH;
    return false;
}

/* Empty and remove what a dead abx left in a cgroup hierarchy: its processes (a killed
 * server cannot end them, and setsid'd ones escape its process groups) are killed,
 * then the per-call groups and the parent are removed. */
static void sweep_dead(const char *dir)
{
    DIR *d = opendir(dir);
    if (!d)
        return;
    struct dirent *de;
    while ((de = readdir(d)) != NULL) {
        if (strncmp(de->d_name, "abx-", 4) != 0 || !owner_dead(de->d_name))
            continue;
        char top[ABX_CG_PATH + 64];
        if ((size_t)snprintf(top, sizeof top, "%s/%s", dir, de->d_name) < sizeof top)
            abx_cgroup_kill_tree(top);
    }
    closedir(d);
}

static void sweep_parent_of(const char *cg)
{
    char dir[256];
    snprintf(dir, sizeof dir, "%s", cg);
    char *slash = strrchr(dir, '/');
    if (slash) {
        *slash = '\0';
        sweep_dead(dir);
    }
}

static void setup_cgroups(abx_sandbox *sb)
{
    char path[256];
    /* cgroup v1 pids + memory (what this kind of machine mounts), else v2 */
    struct stat st;
    if (stat("/sys/fs/cgroup/pids/cgroup.procs", &st) == 0 && own_cgroup("pids", path, sizeof path)) {
        snprintf(sb->cg_parent[0], sizeof sb->cg_parent[0], "/sys/fs/cgroup/pids%s/abx-%s", path, sb->tag);
        sweep_parent_of(sb->cg_parent[0]);
        if (mkdir(sb->cg_parent[0], 0755) == 0 || errno == EEXIST) {
            sb->caps.cgroup_pids = true;
            sb->caps.cgroup_version = 1;
        } else {
            sb->cg_parent[0][0] = '\0';
        }
        if (stat("/sys/fs/cgroup/memory/cgroup.procs", &st) == 0 && own_cgroup("memory", path, sizeof path)) {
            snprintf(sb->cg_parent[1], sizeof sb->cg_parent[1], "/sys/fs/cgroup/memory%s/abx-%s", path, sb->tag);
            sweep_parent_of(sb->cg_parent[1]);
            if (mkdir(sb->cg_parent[1], 0755) == 0 || errno == EEXIST)
                sb->caps.cgroup_memory = true;
            else
                sb->cg_parent[1][0] = '\0';
        }
        if (stat("/sys/fs/cgroup/cpu/cgroup.procs", &st) == 0 && own_cgroup("cpu", path, sizeof path)) {
            snprintf(sb->cg_parent[2], sizeof sb->cg_parent[2], "/sys/fs/cgroup/cpu%s/abx-%s", path, sb->tag);
            sweep_parent_of(sb->cg_parent[2]);
            if (mkdir(sb->cg_parent[2], 0755) == 0 || errno == EEXIST)
                sb->caps.cgroup_cpu = true;
            else
                sb->cg_parent[2][0] = '\0';
        }
        return;
    }
    if (stat("/sys/fs/cgroup/cgroup.controllers", &st) == 0 && own_cgroup("", path, sizeof path)) {
        /* v2: a child cgroup with pids and memory delegated to it */
        char base[256], ctl[300];
        snprintf(base, sizeof base, "/sys/fs/cgroup%s", path);
        snprintf(sb->cg_parent[0], sizeof sb->cg_parent[0], "%s/abx-%s", base, sb->tag);
        sweep_parent_of(sb->cg_parent[0]);
        snprintf(ctl, sizeof ctl, "%s/cgroup.subtree_control", base);
        if ((mkdir(sb->cg_parent[0], 0755) == 0 || errno == EEXIST) && write_file(ctl, "+pids +memory")) {
            snprintf(ctl, sizeof ctl, "%s/cgroup.subtree_control", sb->cg_parent[0]);
            if (write_file(ctl, "+pids +memory")) {
                sb->caps.cgroup_pids = sb->caps.cgroup_memory = true;
                snprintf(ctl, sizeof ctl, "%s/cgroup.subtree_control", base);
                if (write_file(ctl, "+cpu")) {
                    snprintf(ctl, sizeof ctl, "%s/cgroup.subtree_control", sb->cg_parent[0]);
                    sb->caps.cgroup_cpu = write_file(ctl, "+cpu");
                }
                sb->caps.cgroup_version = 2;
                return;
            }
        }
        rmdir(sb->cg_parent[0]);
        sb->cg_parent[0][0] = '\0';
    }
}

/* /etc is granted read-only entry by entry, leaving out what holds secrets: a process
 * that runs as uid 0 without capabilities still owns root's files. Opened once. */
static void open_etc(abx_sandbox *sb)
{
    static const char *const secret[] = {"shadow", "shadow-", "gshadow", "gshadow-", "sudoers", "sudoers.d",
                                         "ssh", "abx", "security", "ssl", "krb5.keytab", "credstore",
                                         "credstore.encrypted", "machine-id"};
    static const char *const ssl_keep[] = {"certs", "openssl.cnf"};
    DIR *d = opendir("/etc");
    if (!d)
        return;
    size_t cap = 256;
    sb->etc_fds = abx_calloc(cap, sizeof *sb->etc_fds);
    struct dirent *de;
    while (sb->etc_fds && (de = readdir(d)) != NULL) {
        if (strcmp(de->d_name, ".") == 0 || strcmp(de->d_name, "..") == 0)
            continue;
        bool skip = false;
        for (size_t i = 0; i < ABX_ARRAY_LEN(secret); i++)
            skip = skip || strcmp(de->d_name, secret[i]) == 0;
        if (skip)
            continue;
        if (sb->n_etc + 4 >= cap) {
            int *g = abx_realloc(sb->etc_fds, cap * 2 * sizeof *g);
            if (!g)
                break;
            sb->etc_fds = g;
            cap *= 2;
        }
        int fd = openat(dirfd(d), de->d_name, O_PATH | O_CLOEXEC);
        if (fd >= 0)
            sb->etc_fds[sb->n_etc++] = fd;
    }
    closedir(d);
    for (size_t i = 0; sb->etc_fds && i < ABX_ARRAY_LEN(ssl_keep); i++) { /* CA certificates, not private keys */
        char path[64];
        snprintf(path, sizeof path, "/etc/ssl/%s", ssl_keep[i]);
        int fd = open(path, O_PATH | O_CLOEXEC);
        if (fd >= 0)
            sb->etc_fds[sb->n_etc++] = fd;
    }
}

abx_sandbox *abx_sandbox_new(const char *runtime_dir, bool required, char *err, size_t errlen)
{
    abx_sandbox *sb = abx_calloc(1, sizeof *sb);
    if (!sb) {
        snprintf(err, errlen, "out of memory");
        return NULL;
    }
    sb->wd.pid = -1;
    sb->wd.sock = -1;
    sb->required = required;
    sb->netns_fd = -1;
    sb->caps.root = geteuid() == 0;
    sb->caps.landlock_abi = landlock_abi();
    sb->netns_fd = make_empty_netns();
    sb->caps.netns = sb->netns_fd >= 0;
    sb->caps.mntns = probe_mntns();
    unsigned char rnd[8];
    if (abx_random(rnd, sizeof rnd) != 0)
        memset(rnd, 0x42, sizeof rnd);
    char hex[17];
    abx_hex(rnd, sizeof rnd, hex);
    snprintf(sb->tag, sizeof sb->tag, "%d-s%llu-%s", (int)getpid(), proc_start((int)getpid()), hex);
    setup_cgroups(sb);
    sb->caps.seccomp = abx_seccomp_available() && abx_seccomp_build(false, &sb->filter[0]) == 0 &&
                       abx_seccomp_build(true, &sb->filter[1]) == 0;
    sb->caps.watchdog = abx_watchdog_start(&sb->wd, (const char(*)[ABX_CG_PATH])sb->cg_parent) == 0;
    sb->cap_last = CAP_LAST_CAP;
    FILE *f = fopen("/proc/sys/kernel/cap_last_cap", "re");
    if (f) {
        if (fscanf(f, "%d", &sb->cap_last) != 1)
            sb->cap_last = CAP_LAST_CAP;
        fclose(f);
    }
    sb->runtime_dir = abx_strdup(runtime_dir ? runtime_dir : "/tmp");
    open_etc(sb);
    mkdir(sb->runtime_dir, 0711);
    snprintf(sb->mask_file, sizeof sb->mask_file, "%s/mask", sb->runtime_dir);
    int mf = open(sb->mask_file, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC | O_NOFOLLOW, 0000);
    if (mf >= 0) {
        fchmod(mf, 0000); /* unreadable even for uid 0 once capabilities are gone */
        close(mf);
    }
    size_t o = 0;
    const struct {
        bool ok;
        const char *what;
    } layers[] = {
        {sb->caps.landlock_abi > 0, "landlock"},   {sb->caps.netns, "network namespace"},
        {sb->caps.mntns, "mount namespace"},       {sb->caps.cgroup_pids, "cgroup pids"},
        {sb->caps.cgroup_memory, "cgroup memory"}, {sb->caps.root, "root (capability dropping, run_as)"},
        {sb->caps.seccomp, "seccomp"},             {sb->caps.watchdog, "watchdog"},
    };
    for (size_t i = 0; i < ABX_ARRAY_LEN(layers); i++)
        if (!layers[i].ok)
            o += (size_t)snprintf(sb->missing + o, o < sizeof sb->missing ? sizeof sb->missing - o : 0, "%s%s",
                                  o ? ", " : "", layers[i].what);
    if (required && (sb->caps.landlock_abi == 0 || !sb->caps.netns || !sb->caps.cgroup_pids || !sb->caps.seccomp ||
                     !sb->caps.watchdog)) {
        snprintf(err, errlen, "confine: required, but the kernel lacks: %s", sb->missing);
        abx_sandbox_free(sb);
        return NULL;
    }
    return sb;
}

void abx_sandbox_free(abx_sandbox *sb)
{
    if (!sb)
        return;
    abx_watchdog_stop(&sb->wd); /* it kills what is left and removes the groups too */
    if (sb->netns_fd >= 0)
        close(sb->netns_fd);
    for (int i = 0; i < 3; i++)
        if (sb->cg_parent[i][0])
            rmdir(sb->cg_parent[i]);
    if (sb->mask_file[0])
        unlink(sb->mask_file);
    abx_free(sb->runtime_dir);
    for (size_t i = 0; i < sb->n_etc; i++)
        close(sb->etc_fds[i]);
    abx_free(sb->etc_fds);
    abx_free(sb);
}

const abx_sandbox_caps *abx_sandbox_caps_get(const abx_sandbox *sb) { return &sb->caps; }
const char *abx_sandbox_missing(const abx_sandbox *sb) { return sb->missing; }

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

static int add_fd_rule(int ruleset, int fd, uint64_t allowed, uint64_t handled)
{
    struct stat st;
    if (fstat(fd, &st) == 0 && !S_ISDIR(st.st_mode))
        allowed &= FILE_ONLY_RIGHTS;
    struct landlock_path_beneath_attr pb = {.allowed_access = allowed & handled, .parent_fd = fd};
    return syscall(SYS_landlock_add_rule, ruleset, LANDLOCK_RULE_PATH_BENEATH, &pb, 0) == 0 ? 0 : -errno;
}

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

static int build_ruleset(const abx_sandbox *sb, const abx_spawn_req *req, char *err, size_t errlen)
{
    int abi = sb->caps.landlock_abi;
    const abx_confine *c = req->confine;
    struct ll_ruleset_attr attr = {.handled_access_fs = fs_rights(abi)};
    size_t attr_size = sizeof(uint64_t);
    if (abi >= 4 && !c->net) { /* belt and braces besides the empty namespace */
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
    static const char *const system_ro[] = {"/usr", "/lib", "/lib32", "/lib64", "/libx32", "/bin", "/sbin",
                                            "/proc"};
    static const char *const dev_rw[] = {"/dev/null", "/dev/zero", "/dev/urandom", "/dev/random", "/dev/tty",
                                         "/dev/full"};
    int rc = 0;
    for (size_t i = 0; i < ABX_ARRAY_LEN(system_ro) && rc == 0; i++)
        rc = add_path_rule(rs, system_ro[i], ro, handled);
    for (size_t i = 0; i < sb->n_etc && rc == 0; i++)
        rc = add_fd_rule(rs, sb->etc_fds[i], ro, handled);
    for (size_t i = 0; i < ABX_ARRAY_LEN(dev_rw) && rc == 0; i++)
        rc = add_path_rule(rs, dev_rw[i], LANDLOCK_ACCESS_FS_READ_FILE | LANDLOCK_ACCESS_FS_WRITE_FILE, handled);
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
    if (rc != 0) {
        snprintf(err, errlen, "landlock: cannot add a rule: %s", strerror(-rc));
        close(rs);
        return -1;
    }
    return rs;
}

/* ---- cgroups (parent side) ---- */

static int make_cgroups(abx_sandbox *sb, const abx_confine *c, abx_child *out, int procs_fd[3], char *err,
                        size_t errlen)
{
    unsigned long n = atomic_fetch_add(&sb->seq, 1) + 1;
    procs_fd[0] = procs_fd[1] = procs_fd[2] = -1;
    for (int i = 0; i < 3; i++) {
        if (!sb->cg_parent[i][0] || (sb->caps.cgroup_version == 2 && i > 0) || (i == 2 && c->cpu_milli <= 0))
            continue; /* v2: one directory for everything; v1 cpu only when a cpu limit is set */
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
            if (!write_file(file, val)) {
                snprintf(err, errlen, "cgroup: cannot set pids.max: %s", strerror(errno));
                return -1;
            }
        }
        if (mem && c->memory_max > 0) {
            snprintf(file, sizeof file, "%s/%s", out->cgroup[i],
                     sb->caps.cgroup_version == 2 ? "memory.max" : "memory.limit_in_bytes");
            snprintf(val, sizeof val, "%lld", (long long)c->memory_max);
            if (!write_file(file, val)) {
                snprintf(err, errlen, "cgroup: cannot set the memory limit: %s", strerror(errno));
                return -1;
            }
            if (sb->caps.cgroup_version == 2) {
                snprintf(file, sizeof file, "%s/memory.swap.max", out->cgroup[i]);
                write_file(file, "0");
            }
        }
        if (c->cpu_milli > 0 && ((i == 2) || (i == 0 && sb->caps.cgroup_version == 2)) && sb->caps.cgroup_cpu) {
            bool ok;
            if (sb->caps.cgroup_version == 2) {
                snprintf(file, sizeof file, "%s/cpu.max", out->cgroup[i]);
                snprintf(val, sizeof val, "%lld 100000", (long long)c->cpu_milli * 100);
                ok = write_file(file, val);
            } else {
                snprintf(file, sizeof file, "%s/cpu.cfs_period_us", out->cgroup[i]);
                ok = write_file(file, "100000");
                snprintf(file, sizeof file, "%s/cpu.cfs_quota_us", out->cgroup[i]);
                snprintf(val, sizeof val, "%lld", (long long)c->cpu_milli * 100);
                ok = ok && write_file(file, val);
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
    bool use_netns, use_mntns, use_caps, use_ll, use_seccomp;
} child_args;

typedef struct child_err {
    int step;
    int err;
} child_err;

enum { ST_SIG = 1, ST_SETSID, ST_PDEATH, ST_CGROUP, ST_NETNS, ST_MNTNS, ST_MASK, ST_STDIO, ST_CTTY, ST_CWD,
       ST_FDS, ST_SECBITS, ST_BSET, ST_AMBIENT, ST_IDS, ST_CAPS, ST_NNP, ST_LANDLOCK, ST_SECCOMP, ST_EXEC };

static const char *const step_names[] = {"?", "signals", "setsid", "pdeathsig", "cgroup", "netns", "mount namespace",
                                         "mask", "stdio", "controlling tty", "cwd", "descriptors", "securebits",
                                         "capability bounding set", "ambient capabilities", "uid/gid",
                                         "capabilities", "no_new_privs", "landlock", "seccomp", "execve"};

static void child_fail(child_args *a, int step)
{
    child_err e = {step, errno};
    ssize_t w = write(a->err_fd, &e, sizeof e);
    (void)w;
    _exit(127);
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
    if (a->use_netns && setns(a->sb->netns_fd, CLONE_NEWNET) != 0)
        child_fail(a, ST_NETNS);
    if (a->use_mntns) {
        if (unshare(CLONE_NEWNS) != 0 || mount(NULL, "/", NULL, MS_REC | MS_PRIVATE, NULL) != 0)
            child_fail(a, ST_MNTNS);
        /* pins first: recursive, so what is mounted below stays (and a later mask or
         * read-only mount lands on top of them) */
        for (size_t i = 0; i < c->n_pins; i++)
            if (mount(c->pins[i], c->pins[i], NULL, MS_BIND | MS_REC, NULL) != 0)
                child_fail(a, ST_MASK);
        for (size_t i = 0; i < c->n_readonly; i++)
            if (mount(c->readonly[i], c->readonly[i], NULL, MS_BIND | MS_REC, NULL) != 0 ||
                mount(NULL, c->readonly[i], NULL, MS_BIND | MS_REMOUNT | MS_RDONLY, NULL) != 0)
                child_fail(a, ST_MASK);
        for (size_t i = 0; i < c->n_masks; i++) {
            struct stat st;
            if (stat(c->masks[i], &st) != 0)
                continue;
            int rc;
            if (S_ISDIR(st.st_mode))
                rc = mount("abx-mask", c->masks[i], "tmpfs", MS_RDONLY | MS_NOSUID | MS_NODEV | MS_NOEXEC,
                           "size=4k,mode=000");
            else
                rc = mount(a->sb->mask_file, c->masks[i], NULL, MS_BIND, NULL) ||
                     mount(NULL, c->masks[i], NULL, MS_BIND | MS_REMOUNT | MS_RDONLY, NULL);
            if (rc != 0)
                child_fail(a, ST_MASK);
        }
    }
    int in = req->stdin_fd >= 0 ? req->stdin_fd : a->devnull, out = req->stdout_fd >= 0 ? req->stdout_fd : a->devnull,
        er = req->stderr_fd >= 0 ? req->stderr_fd : a->devnull;
    if (dup2(in, 0) < 0 || dup2(out, 1) < 0 || dup2(er, 2) < 0)
        child_fail(a, ST_STDIO);
    if (req->ctty && ioctl(0, TIOCSCTTY, 0) != 0)
        child_fail(a, ST_CTTY);
    if (req->cwd_fd >= 0 ? fchdir(req->cwd_fd) != 0 : chdir("/") != 0)
        child_fail(a, ST_CWD);
    if (a->use_mntns && req->cwd_fd >= 0 && req->cwd_path) {
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
        if (c->set_ids) {
            if (setgroups(0, NULL) != 0 || setresgid(c->gid, c->gid, c->gid) != 0 ||
                setresuid(c->uid, c->uid, c->uid) != 0)
                child_fail(a, ST_IDS);
        }
        struct __user_cap_header_struct h = {.version = _LINUX_CAPABILITY_VERSION_3, .pid = 0};
        struct __user_cap_data_struct d[2];
        memset(d, 0, sizeof d);
        if (syscall(SYS_capset, &h, d) != 0)
            child_fail(a, ST_CAPS);
    }
    if (prctl(PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0) != 0)
        child_fail(a, ST_NNP);
    if (a->use_ll && syscall(SYS_landlock_restrict_self, a->ruleset, 0) != 0)
        child_fail(a, ST_LANDLOCK);
    if (a->use_seccomp) {
        const abx_seccomp_prog *f = &a->sb->filter[c->net ? 1 : 0];
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

int abx_spawn(abx_sandbox *sb, const abx_spawn_req *req, abx_child *out, char *err, size_t errlen)
{
    memset(out, 0, sizeof *out);
    out->pid = -1;
    out->pidfd = -1;
    const abx_confine *c = req->confine;
    bool required = c->required || sb->required;
    child_args a = {.req = req, .sb = sb, .err_fd = -1, .devnull = -1, .procs_fd = {-1, -1, -1}, .ruleset = -1};
    int pipefd[2] = {-1, -1};
    void *stack = MAP_FAILED;
    const size_t stack_size = 256 * 1024;
    int rc = -1;
    if (required && (sb->caps.landlock_abi == 0 || (!c->net && !sb->caps.netns) || !sb->caps.cgroup_pids ||
                     !sb->caps.seccomp || !sb->caps.watchdog || ((c->n_masks || c->n_readonly) && !sb->caps.mntns))) {
        snprintf(err, errlen, "confinement required but unavailable: %s", sb->missing);
        errno = ENOSYS;
        return -1;
    }
    a.use_netns = !c->net && sb->caps.netns;
    /* masks and read-only mounts are needed; pins only keep them on their files, so
     * without mount namespaces (where no mask can be applied either) they are left out */
    a.use_mntns = c->n_masks || c->n_readonly || (c->n_pins && sb->caps.mntns);
    a.use_caps = sb->caps.root;
    a.use_ll = sb->caps.landlock_abi > 0;
    a.use_seccomp = sb->caps.seccomp;
    a.devnull = open("/dev/null", O_RDWR | O_CLOEXEC);
    if (a.devnull < 0 || pipe2(pipefd, O_CLOEXEC) != 0) {
        snprintf(err, errlen, "cannot prepare the child: %s", strerror(errno));
        goto out;
    }
    a.err_fd = pipefd[1];
    if (a.use_ll && (a.ruleset = build_ruleset(sb, req, err, errlen)) < 0)
        goto out;
    if ((sb->caps.cgroup_pids || sb->caps.cgroup_memory) && make_cgroups(sb, c, out, a.procs_fd, err, errlen) != 0) {
        if (required)
            goto out;
        for (int i = 0; i < 3; i++) { /* best effort: run without cgroups */
            if (a.procs_fd[i] >= 0)
                close(a.procs_fd[i]);
            a.procs_fd[i] = -1;
            if (out->cgroup[i][0])
                rmdir(out->cgroup[i]);
            out->cgroup[i][0] = '\0';
        }
    }
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
    if (watch(sb, out, req->deadline_ms) != 0 && required) {
        /* confinement required: a process the watchdog does not know could outlive abx */
        abx_child_kill(out, SIGKILL);
        int st;
        while (waitpid(pid, &st, 0) < 0 && errno == EINTR) {
        }
        close(pidfd);
        out->pid = -1;
        out->pidfd = -1;
        snprintf(err, errlen, "confinement required but unavailable: the watchdog is not running");
        errno = ENOSYS;
        goto out;
    }
    rc = 0;
out:
    if (stack != MAP_FAILED) {
        UNPOISON(stack, stack_size);
        munmap(stack, stack_size);
    }
    for (int i = 0; i < 2; i++)
        if (pipefd[i] >= 0)
            close(pipefd[i]);
    if (a.devnull >= 0)
        close(a.devnull);
    if (a.ruleset >= 0)
        close(a.ruleset);
    for (int i = 0; i < 3; i++)
        if (a.procs_fd[i] >= 0)
            close(a.procs_fd[i]);
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

void abx_child_cleanup(abx_child *c)
{
    for (int i = 0; i < 3; i++) {
        if (!c->cgroup[i][0])
            continue;
        abx_cgroup_kill(c->cgroup[i], true);
        c->cgroup[i][0] = '\0';
    }
    if (c->pidfd >= 0) {
        close(c->pidfd);
        c->pidfd = -1;
    }
}
