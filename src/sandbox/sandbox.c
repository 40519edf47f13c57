/* sandbox.c — the sandbox value: what this machine lets abx use (probed at start,
 * tiers.c), the cgroup parents it makes and sweeps (a dead abx's leftovers are emptied,
 * never a live one's), the empty network namespace, the /etc entries granted read-only,
 * and its life. spawn.c starts one confined process from it. */
#include "sandbox/sandbox_int.h"
#include "core/util.h"
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <linux/capability.h>
#include <sched.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mount.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <unistd.h>

/* ---- probing ---- */

/* Create an empty network namespace held by an fd: a helper child unshares, the parent
 * opens /proc/<child>/ns/net, the child exits. Costs one fork at start, then each
 * spawn only setns()es (creating a namespace per process costs milliseconds). */
static int make_empty_netns(int *why)
{
    int up[2], down[2]; /* child → parent: ready; parent → child: EOF when done */
    *why = EMFILE;
    if (pipe2(up, O_CLOEXEC) != 0)
        return -1;
    if (pipe2(down, O_CLOEXEC) != 0) {
        close(up[0]);
        close(up[1]);
        return -1;
    }
    pid_t pid = fork();
    if (pid == 0) {
        /* keep only its two pipe ends: another thread's concurrent make_empty_netns (two
         * servers in one process) must not find its pipe's write end held open here, or
         * both children wait for an EOF that never comes */
        unsigned a = (unsigned)(up[1] < down[0] ? up[1] : down[0]), b = (unsigned)(up[1] < down[0] ? down[0] : up[1]);
        if (a > 3)
            close_range(3, a - 1, 0);
        if (b > a + 1)
            close_range(a + 1, b - 1, 0);
        close_range(b + 1, ~0U, 0);
        close(up[0]);
        close(down[1]);
        /* 'y', or the errno that refused it (tiers.h reports the reason) */
        char ok = unshare(CLONE_NEWNET) == 0 ? 'y' : (char)(errno & 0x7f ? errno & 0x7f : 0x7f);
        if (write(up[1], &ok, 1) != 1)
            _exit(1);
        char c;
        ssize_t r = read(down[0], &c, 1); /* EOF once the parent holds the namespace */
        (void)r;
        _exit(0);
    }
    close(up[1]);
    close(down[0]);
    char ok = 0;
    int fd = -1;
    *why = pid < 0 ? errno : 0;
    if (pid > 0 && read(up[0], &ok, 1) == 1 && ok == 'y') {
        char path[64];
        snprintf(path, sizeof path, "/proc/%d/ns/net", (int)pid);
        fd = open(path, O_RDONLY | O_CLOEXEC);
    }
    if (pid > 0 && ok != 'y')
        *why = ok ? ok : EIO;
    close(down[1]);
    close(up[0]);
    int st;
    while (pid > 0 && waitpid(pid, &st, 0) < 0 && errno == EINTR) {
    }
    return fd;
}

bool abx__sandbox_write_file(const char *path, const char *text)
{
    int fd = open(path, O_WRONLY | O_CLOEXEC);
    if (fd < 0)
        return false;
    ssize_t n = write(fd, text, strlen(text));
    close(fd);
    return n == (ssize_t)strlen(text);
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
    if (stat("/sys/fs/cgroup/pids/cgroup.procs", &st) == 0 && abx_own_cgroup("pids", path, sizeof path) == 0) {
        snprintf(sb->cg_parent[0], sizeof sb->cg_parent[0], "/sys/fs/cgroup/pids%s/abx-%s", path, sb->tag);
        sweep_parent_of(sb->cg_parent[0]);
        if (mkdir(sb->cg_parent[0], 0755) == 0 || errno == EEXIST) {
            sb->caps.cgroup_pids = true;
            sb->caps.cgroup_version = 1;
        } else {
            sb->cg_errno = errno;
            sb->cg_parent[0][0] = '\0';
        }
        if (stat("/sys/fs/cgroup/memory/cgroup.procs", &st) == 0 && abx_own_cgroup("memory", path, sizeof path) == 0) {
            snprintf(sb->cg_parent[1], sizeof sb->cg_parent[1], "/sys/fs/cgroup/memory%s/abx-%s", path, sb->tag);
            sweep_parent_of(sb->cg_parent[1]);
            if (mkdir(sb->cg_parent[1], 0755) == 0 || errno == EEXIST)
                sb->caps.cgroup_memory = true;
            else
                sb->cg_parent[1][0] = '\0';
        }
        if (stat("/sys/fs/cgroup/cpu/cgroup.procs", &st) == 0 && abx_own_cgroup("cpu", path, sizeof path) == 0) {
            snprintf(sb->cg_parent[2], sizeof sb->cg_parent[2], "/sys/fs/cgroup/cpu%s/abx-%s", path, sb->tag);
            sweep_parent_of(sb->cg_parent[2]);
            if (mkdir(sb->cg_parent[2], 0755) == 0 || errno == EEXIST)
                sb->caps.cgroup_cpu = true;
            else
                sb->cg_parent[2][0] = '\0';
        }
        return;
    }
    if (stat("/sys/fs/cgroup/cgroup.controllers", &st) == 0 && abx_own_cgroup("", path, sizeof path) == 0) {
        /* v2: a child cgroup with pids and memory delegated to it */
        char base[256], ctl[300];
        snprintf(base, sizeof base, "/sys/fs/cgroup%s", path);
        snprintf(sb->cg_parent[0], sizeof sb->cg_parent[0], "%s/abx-%s", base, sb->tag);
        sweep_parent_of(sb->cg_parent[0]);
        snprintf(ctl, sizeof ctl, "%s/cgroup.subtree_control", base);
        if ((mkdir(sb->cg_parent[0], 0755) == 0 || errno == EEXIST) && abx__sandbox_write_file(ctl, "+pids +memory")) {
            snprintf(ctl, sizeof ctl, "%s/cgroup.subtree_control", sb->cg_parent[0]);
            if (abx__sandbox_write_file(ctl, "+pids +memory")) {
                sb->caps.cgroup_pids = sb->caps.cgroup_memory = true;
                snprintf(ctl, sizeof ctl, "%s/cgroup.subtree_control", base);
                if (abx__sandbox_write_file(ctl, "+cpu")) {
                    snprintf(ctl, sizeof ctl, "%s/cgroup.subtree_control", sb->cg_parent[0]);
                    sb->caps.cgroup_cpu = abx__sandbox_write_file(ctl, "+cpu");
                }
                sb->caps.cgroup_version = 2;
                return;
            }
        }
        sb->cg_errno = errno;
        rmdir(sb->cg_parent[0]);
        sb->cg_parent[0][0] = '\0';
    }
}

static void add_fixed(abx_sandbox *sb, size_t *cap, int dirfd, const char *name, bool rw)
{
    if (sb->n_fixed == *cap) {
        size_t ncap = *cap ? *cap * 2 : 256;
        abx_fixed_rule *g = abx_realloc(sb->fixed, ncap * sizeof *g);
        if (!g)
            return; /* a grant left out: the process sees less, never more */
        sb->fixed = g;
        *cap = ncap;
    }
    int fd = openat(dirfd, name, O_PATH | O_CLOEXEC);
    struct stat st;
    if (fd < 0)
        return; /* a system directory this machine lacks */
    if (fstat(fd, &st) != 0) {
        close(fd);
        return;
    }
    sb->fixed[sb->n_fixed++] = (abx_fixed_rule){.fd = fd, .dir = S_ISDIR(st.st_mode), .rw = rw};
}

/* What every process is granted, opened once: the system directories, /etc entry by
 * entry leaving out what holds secrets (a process that runs as uid 0 without
 * capabilities still owns root's files), and a few devices. */
static void open_fixed(abx_sandbox *sb)
{
    static const char *const system_ro[] = {"/usr", "/lib", "/lib32", "/lib64", "/libx32", "/bin", "/sbin", "/proc"};
    static const char *const dev_rw[] = {"/dev/null", "/dev/zero", "/dev/urandom", "/dev/random", "/dev/tty",
                                         "/dev/full"};
    static const char *const secret[] = {"shadow", "shadow-", "gshadow", "gshadow-", "sudoers", "sudoers.d",
                                         "ssh", "abx", "security", "ssl", "krb5.keytab", "credstore",
                                         "credstore.encrypted", "machine-id"};
    static const char *const ssl_keep[] = {"/etc/ssl/certs", "/etc/ssl/openssl.cnf"}; /* CA certificates, not keys */
    size_t cap = 0;
    for (size_t i = 0; i < ABX_ARRAY_LEN(system_ro); i++)
        add_fixed(sb, &cap, AT_FDCWD, system_ro[i], false);
    DIR *d = opendir("/etc");
    struct dirent *de;
    while (d && (de = readdir(d)) != NULL) {
        if (strcmp(de->d_name, ".") == 0 || strcmp(de->d_name, "..") == 0)
            continue;
        bool skip = false;
        for (size_t i = 0; i < ABX_ARRAY_LEN(secret); i++)
            skip = skip || strcmp(de->d_name, secret[i]) == 0;
        if (!skip)
            add_fixed(sb, &cap, dirfd(d), de->d_name, false);
    }
    if (d)
        closedir(d);
    for (size_t i = 0; i < ABX_ARRAY_LEN(ssl_keep); i++)
        add_fixed(sb, &cap, AT_FDCWD, ssl_keep[i], false);
    for (size_t i = 0; i < ABX_ARRAY_LEN(dev_rw); i++)
        add_fixed(sb, &cap, AT_FDCWD, dev_rw[i], true);
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
    abx_tiers_probe(&sb->tiers, false);
    sb->caps.root = sb->tiers.can_drop_caps;
    sb->caps.landlock_abi = sb->tiers.landlock_abi;
    sb->caps.mntns = abx_tiers_active(&sb->tiers, ABX_L_MNTNS);
    int netns_err = 0;
    sb->netns_fd = make_empty_netns(&netns_err);
    sb->caps.netns = sb->netns_fd >= 0;
    if (!sb->caps.netns) /* not probed: the layer reads active until this says otherwise */
        abx_tiers_set(&sb->tiers, ABX_L_NETNS, ABX_LAYER_UNAVAILABLE, "unshare(CLONE_NEWNET): %s",
                      strerror(netns_err ? netns_err : EPERM));
    unsigned char rnd[8];
    if (abx_random(rnd, sizeof rnd) != 0)
        memset(rnd, 0x42, sizeof rnd);
    char hex[17];
    abx_hex(rnd, sizeof rnd, hex);
    snprintf(sb->tag, sizeof sb->tag, "%d-s%llu-%s", (int)getpid(), proc_start((int)getpid()), hex);
    setup_cgroups(sb);
    if (!sb->caps.cgroup_pids && abx_tiers_active(&sb->tiers, ABX_L_CGROUP))
        abx_tiers_set(&sb->tiers, ABX_L_CGROUP, ABX_LAYER_UNAVAILABLE, "cannot create a child cgroup: %s",
                      strerror(sb->cg_errno));
    sb->caps.seccomp = abx_tiers_active(&sb->tiers, ABX_L_SECCOMP) &&
                       abx_seccomp_build_mode(ABX_SC_NONET_NS, &sb->filter[ABX_SC_NONET_NS]) == 0 &&
                       abx_seccomp_build_mode(ABX_SC_NET, &sb->filter[ABX_SC_NET]) == 0 &&
                       abx_seccomp_build_mode(ABX_SC_NONET_STRICT, &sb->filter[ABX_SC_NONET_STRICT]) == 0 &&
                       abx_seccomp_build_mode(ABX_SC_NONET_UNIX, &sb->filter[ABX_SC_NONET_UNIX]) == 0;
    sb->caps.watchdog = abx_watchdog_start(&sb->wd, (const char(*)[ABX_CG_PATH])sb->cg_parent) == 0;
    if (!sb->caps.watchdog)
        abx_tiers_set(&sb->tiers, ABX_L_WATCHDOG, ABX_LAYER_UNAVAILABLE, "cannot start it: %s", strerror(errno));
    abx_tiers_pick(&sb->tiers);
    abx__netpool_init(sb);
    abx__cloner_init(sb);
    sb->cap_last = CAP_LAST_CAP;
    FILE *f = fopen("/proc/sys/kernel/cap_last_cap", "re");
    if (f) {
        if (fscanf(f, "%d", &sb->cap_last) != 1)
            sb->cap_last = CAP_LAST_CAP;
        fclose(f);
    }
    sb->runtime_dir = abx_strdup(runtime_dir ? runtime_dir : "/tmp");
    open_fixed(sb);
    mkdir(sb->runtime_dir, 0711);
    snprintf(sb->mask_file, sizeof sb->mask_file, "%s/mask", sb->runtime_dir);
    char view[220]; /* where each process's view is built (view.c); a view needs a mount namespace */
    snprintf(view, sizeof view, "%s/view", sb->runtime_dir);
    sb->view = sb->caps.mntns && (mkdir(view, 0700) == 0 || errno == EEXIST) && strlen(view) < 200;
    abx__slots_init(sb); /* needs the view's place */
    int mf = open(sb->mask_file, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC | O_NOFOLLOW, 0000);
    if (mf >= 0) {
        fchmod(mf, 0000); /* unreadable even for uid 0 once capabilities are gone */
        close(mf);
    }
    /* a missing layer no longer stops the server: each call that needs it is refused
     * (required) or runs without it and says so (best effort), see abx_sandbox_plan */
    size_t o = 0;
    for (int i = 0; i < ABX_L__N; i++)
        if (sb->tiers.layer[i].state == ABX_LAYER_UNAVAILABLE && i != ABX_L_USERNS)
            o += (size_t)snprintf(sb->missing + o, o < sizeof sb->missing ? sizeof sb->missing - o : 0, "%s%s",
                                  o ? ", " : "", abx_layer_name((enum abx_layer_id)i));
    return sb;
}

void abx_sandbox_free(abx_sandbox *sb)
{
    if (!sb)
        return;
    abx_watchdog_stop(&sb->wd); /* it kills what is left and removes the groups too */
    abx__slots_free(sb);
    abx__cloner_free(sb); /* no spare left: slots_free discarded them */
    abx__netpool_free(sb);
    if (sb->netns_fd >= 0)
        close(sb->netns_fd);
    for (int i = 0; i < 3; i++)
        if (sb->cg_parent[i][0])
            rmdir(sb->cg_parent[i]);
    if (sb->mask_file[0])
        unlink(sb->mask_file);
    if (sb->runtime_dir) {
        char view[220];
        snprintf(view, sizeof view, "%s/view", sb->runtime_dir);
        rmdir(view);
    }
    abx_free(sb->runtime_dir);
    for (size_t i = 0; i < sb->n_fixed; i++)
        close(sb->fixed[i].fd);
    abx_free(sb->fixed);
    abx_free(sb);
}

void abx_sandbox_prepare(abx_sandbox *sb) { abx__netpool_fill(sb); }
bool abx_sandbox_wants_prepare(abx_sandbox *sb) { return abx__netpool_wants(sb); }

void abx_sandbox_slot_stats(abx_sandbox *sb, abx_slot_stats *out)
{
    out->on = sb && sb->sl_on;
    out->made = sb ? atomic_load(&sb->sl_made) : 0;
    out->reused = sb ? atomic_load(&sb->sl_reused) : 0;
    out->spares_made = sb ? atomic_load(&sb->sp_made) : 0;
    out->spares_used = sb ? atomic_load(&sb->sp_used) : 0;
}

abx_slot *abx_sandbox_slot_take(abx_sandbox *sb, const abx_confine *c, const char *home, uid_t uid, gid_t gid,
                                char *dir, size_t dirlen)
{
    abx_slot *s = sb ? abx__slot_take(sb, c, home, uid, gid) : NULL;
    struct stat st;
    if (s && s->next_tmp[0] && strlen(s->next_tmp) < dirlen && lstat(s->next_tmp, &st) == 0 &&
        S_ISDIR(st.st_mode) && st.st_uid == uid && (st.st_mode & 07777) == 0700) {
        memcpy(dir, s->next_tmp, strlen(s->next_tmp) + 1); /* made when the slot came back */
        s->next_tmp[0] = '\0';
        return s;
    }
    /* the process's own TMPDIR in it, a name no earlier process had (the slot's ids are
     * uid and gid: it was taken for them) */
    if (s && abx__slot_tmpdir(s, dir, dirlen) != 0) {
        abx__slot_put(s, false);
        dir[0] = '\0';
        s = NULL;
    }
    return s;
}

void abx_sandbox_slot_put(abx_slot *s) { abx__slot_put(s, true); }

void abx_sandbox_netpool_stats(abx_sandbox *sb, bool *reuse, unsigned long *made, unsigned long *reused)
{
    *reuse = sb && sb->caps.netns && sb->np_reuse;
    *made = sb ? atomic_load(&sb->np_made) : 0;
    *reused = sb ? atomic_load(&sb->np_reused) : 0;
}

const abx_sandbox_caps *abx_sandbox_caps_get(const abx_sandbox *sb) { return &sb->caps; }
const char *abx_sandbox_missing(const abx_sandbox *sb) { return sb->missing; }
const abx_tiers *abx_sandbox_tiers(const abx_sandbox *sb) { return &sb->tiers; }
