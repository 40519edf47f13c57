/* tiers.c — detecting the confinement layers this machine allows (see tiers.h).
 *
 * Nothing is assumed from the kernel version or from being root: Docker's default
 * seccomp profile refuses unshare() to root, a chroot refuses to make "/" private,
 * gVisor answers landlock_* with ENOSYS, a pod runs without capabilities. Each probe
 * that could change the calling process runs in a forked child that only makes the
 * system call and exits with its errno. */
#include "sandbox/tiers.h"
#include "sandbox/seccomp.h"
#include <errno.h>
#include <linux/capability.h>
#include <linux/landlock.h>
#include <sched.h>
#include <stdarg.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>
#include <sys/mount.h>
#include <sys/prctl.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <unistd.h>

static const char *const layer_names[ABX_L__N] = {
    [ABX_L_USERNS] = "user namespace",       [ABX_L_MNTNS] = "mount namespace",
    [ABX_L_NETNS] = "network namespace",     [ABX_L_CGROUP] = "cgroup",
    [ABX_L_RLIMIT] = "rlimit",               [ABX_L_LANDLOCK_FS] = "landlock",
    [ABX_L_LANDLOCK_NET] = "landlock tcp",   [ABX_L_LANDLOCK_SCOPE] = "landlock scoping",
    [ABX_L_SECCOMP] = "seccomp",             [ABX_L_NNP] = "no_new_privs",
    [ABX_L_CAPS] = "capabilities",           [ABX_L_RUN_AS] = "run_as",
    [ABX_L_WATCHDOG] = "watchdog",
};

const char *abx_layer_name(enum abx_layer_id id) { return id < ABX_L__N ? layer_names[id] : "?"; }

const char *abx_layer_state_name(enum abx_layer_state st)
{
    return st == ABX_LAYER_ACTIVE ? "active" : st == ABX_LAYER_NOT_NEEDED ? "not_needed" : "unavailable";
}

const char *abx_tier_name(enum abx_tier tier)
{
    static const char *const names[] = {"full", "unprivileged", "minimal", "none"};
    return tier <= ABX_TIER_NONE ? names[tier] : "none";
}

void abx_tiers_set(abx_tiers *t, enum abx_layer_id id, enum abx_layer_state st, const char *fmt, ...)
{
    t->layer[id].state = st;
    t->layer[id].reason[0] = '\0';
    if (fmt) {
        va_list ap;
        va_start(ap, fmt);
        vsnprintf(t->layer[id].reason, sizeof t->layer[id].reason, fmt, ap);
        va_end(ap);
    }
}

bool abx_tiers_active(const abx_tiers *t, enum abx_layer_id id) { return t->layer[id].state == ABX_LAYER_ACTIVE; }

/* ---- probes in a forked child ---- */

enum probe { P_USERNS, P_MNTNS, P_NETNS, P_NNP };

/* 0 when the child managed, else the errno it met. */
static int probe_child(enum probe what)
{
    pid_t pid = fork();
    if (pid < 0)
        return errno;
    if (pid == 0) {
        int rc = 0;
        switch (what) {
        case P_USERNS:
            rc = unshare(CLONE_NEWUSER);
            break;
        case P_MNTNS:
            /* what a spawn does, not just unshare(): in a chroot "/" is no mount point and
             * making it private fails with EINVAL; that step's errno comes back + 128 */
            if (unshare(CLONE_NEWNS) != 0)
                _exit(errno & 0x7f ? errno & 0x7f : 127);
            _exit(mount(NULL, "/", NULL, MS_REC | MS_PRIVATE, NULL) == 0 ? 0 : 128 + (errno & 0x7f));
        case P_NETNS:
            rc = unshare(CLONE_NEWNET);
            break;
        case P_NNP:
            rc = prctl(PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0);
            break;
        }
        _exit(rc == 0 ? 0 : (errno & 0x7f) ? (errno & 0x7f) : 127);
    }
    int st = 0;
    while (waitpid(pid, &st, 0) < 0)
        if (errno != EINTR)
            return ECHILD;
    if (!WIFEXITED(st))
        return EINTR;
    return WEXITSTATUS(st);
}

static void probe_namespaces(abx_tiers *t, bool netns)
{
    if (geteuid() == 0 && t->can_drop_caps) {
        abx_tiers_set(t, ABX_L_USERNS, ABX_LAYER_NOT_NEEDED, "abx has the capabilities to make namespaces itself");
    } else {
        int e = probe_child(P_USERNS);
        if (e)
            abx_tiers_set(t, ABX_L_USERNS, ABX_LAYER_UNAVAILABLE, "unshare(CLONE_NEWUSER): %s", strerror(e));
        else
            abx_tiers_set(t, ABX_L_USERNS, ABX_LAYER_UNAVAILABLE,
                          "the kernel allows them, but abx makes namespaces only with CAP_SYS_ADMIN");
    }
    int e = probe_child(P_MNTNS);
    if (e == 0)
        abx_tiers_set(t, ABX_L_MNTNS, ABX_LAYER_ACTIVE, NULL);
    else if (e < 128)
        abx_tiers_set(t, ABX_L_MNTNS, ABX_LAYER_UNAVAILABLE, "unshare(CLONE_NEWNS): %s", strerror(e));
    else
        abx_tiers_set(t, ABX_L_MNTNS, ABX_LAYER_UNAVAILABLE, "making / private: %s%s", strerror(e - 128),
                      e - 128 == EINVAL ? " (/ is no mount point: a chroot?)" : "");
    if (netns) {
        if ((e = probe_child(P_NETNS)) != 0)
            abx_tiers_set(t, ABX_L_NETNS, ABX_LAYER_UNAVAILABLE, "unshare(CLONE_NEWNET): %s", strerror(e));
        else
            abx_tiers_set(t, ABX_L_NETNS, ABX_LAYER_ACTIVE, NULL);
    }
    if ((e = probe_child(P_NNP)) != 0)
        abx_tiers_set(t, ABX_L_NNP, ABX_LAYER_UNAVAILABLE, "prctl(PR_SET_NO_NEW_PRIVS): %s", strerror(e));
    else
        abx_tiers_set(t, ABX_L_NNP, ABX_LAYER_ACTIVE, NULL);
}

/* ---- capabilities ---- */

static bool cap_in(const struct __user_cap_data_struct d[2], int cap, int set)
{
    uint32_t w = set == 0 ? d[cap / 32].effective : set == 1 ? d[cap / 32].permitted : d[cap / 32].inheritable;
    return (w >> (cap % 32)) & 1u;
}

static void own_caps(struct __user_cap_data_struct d[2])
{
    struct __user_cap_header_struct h = {.version = _LINUX_CAPABILITY_VERSION_3, .pid = 0};
    memset(d, 0, 2 * sizeof *d);
    if (syscall(SYS_capget, &h, d) != 0)
        memset(d, 0, 2 * sizeof *d);
}

bool abx_tiers_can_set_ids(void)
{
    struct __user_cap_data_struct d[2];
    own_caps(d);
    return cap_in(d, CAP_SETUID, 0) && cap_in(d, CAP_SETGID, 0);
}

int abx_run_as_check(bool explicit_ids, unsigned *uid, unsigned *gid, char *err, size_t errlen)
{
    if ((*uid == geteuid() && *gid == getegid()) || abx_tiers_can_set_ids())
        return 0;
    if (explicit_ids) {
        snprintf(err, errlen,
                 "config: run_as %u:%u is not abx's own uid %u:%u, and abx has no CAP_SETUID/CAP_SETGID to switch "
                 "(an unprivileged deployment): remove run_as or set it to %u:%u",
                 *uid, *gid, (unsigned)geteuid(), (unsigned)getegid(), (unsigned)geteuid(), (unsigned)getegid());
        return -1;
    }
    *uid = geteuid();
    *gid = getegid();
    return 0;
}

static void probe_caps(abx_tiers *t)
{
    struct __user_cap_data_struct d[2];
    own_caps(d);
    t->can_drop_caps = cap_in(d, CAP_SETPCAP, 0);
    t->can_set_ids = cap_in(d, CAP_SETUID, 0) && cap_in(d, CAP_SETGID, 0);
    bool holds = d[0].permitted || d[1].permitted || d[0].inheritable || d[1].inheritable;
    for (int cap = 0; cap <= CAP_LAST_CAP && !holds; cap++)
        holds = prctl(PR_CAP_AMBIENT, PR_CAP_AMBIENT_IS_SET, cap, 0, 0) == 1;
    /* uid 0 gets its bounding set back at every execve, no_new_privs or not */
    bool bset = false;
    for (int cap = 0; cap <= CAP_LAST_CAP && !bset; cap++)
        bset = prctl(PR_CAPBSET_READ, cap, 0, 0, 0) == 1;
    if (t->can_drop_caps)
        abx_tiers_set(t, ABX_L_CAPS, ABX_LAYER_ACTIVE, NULL);
    else if (!holds && (geteuid() != 0 || !bset))
        abx_tiers_set(t, ABX_L_CAPS, ABX_LAYER_NOT_NEEDED, "abx holds no capabilities a process could inherit");
    else
        abx_tiers_set(t, ABX_L_CAPS, ABX_LAYER_UNAVAILABLE,
                      "abx holds capabilities (or runs as uid 0 with a bounding set) but not CAP_SETPCAP to drop them");
    if (t->can_set_ids)
        abx_tiers_set(t, ABX_L_RUN_AS, ABX_LAYER_ACTIVE, NULL);
    else
        /* not a gap: run_as other than abx's own ids is then a config error (procs.h) */
        abx_tiers_set(t, ABX_L_RUN_AS, ABX_LAYER_NOT_NEEDED,
                      "no CAP_SETUID/CAP_SETGID: processes run as abx's own uid %u", (unsigned)geteuid());
}

/* ---- Landlock, seccomp ---- */

static void probe_landlock(abx_tiers *t)
{
    long abi = syscall(SYS_landlock_create_ruleset, NULL, 0, LANDLOCK_CREATE_RULESET_VERSION);
    int e = errno;
    t->landlock_abi = abi > 0 ? (int)abi : 0;
    if (abi <= 0) {
        const char *why = e == ENOSYS ? " (not in this kernel, or filtered)" : e == EOPNOTSUPP ? " (disabled at boot)" : "";
        abx_tiers_set(t, ABX_L_LANDLOCK_FS, ABX_LAYER_UNAVAILABLE, "landlock_create_ruleset: %s%s", strerror(e), why);
        abx_tiers_set(t, ABX_L_LANDLOCK_NET, ABX_LAYER_UNAVAILABLE, "no Landlock");
        abx_tiers_set(t, ABX_L_LANDLOCK_SCOPE, ABX_LAYER_UNAVAILABLE, "no Landlock");
        return;
    }
    abx_tiers_set(t, ABX_L_LANDLOCK_FS, ABX_LAYER_ACTIVE, NULL);
    if (abi >= 4)
        abx_tiers_set(t, ABX_L_LANDLOCK_NET, ABX_LAYER_ACTIVE, NULL);
    else
        abx_tiers_set(t, ABX_L_LANDLOCK_NET, ABX_LAYER_UNAVAILABLE, "Landlock ABI %ld < 4", abi);
    if (abi >= 6)
        abx_tiers_set(t, ABX_L_LANDLOCK_SCOPE, ABX_LAYER_ACTIVE, NULL);
    else
        abx_tiers_set(t, ABX_L_LANDLOCK_SCOPE, ABX_LAYER_UNAVAILABLE, "Landlock ABI %ld < 6", abi);
}

static void probe_seccomp(abx_tiers *t)
{
    abx_seccomp_prog p;
    if (!abx_seccomp_available())
        abx_tiers_set(t, ABX_L_SECCOMP, ABX_LAYER_UNAVAILABLE, "the kernel has no seccomp filters returning errno");
    else if (abx_seccomp_build(false, &p) != 0)
        abx_tiers_set(t, ABX_L_SECCOMP, ABX_LAYER_UNAVAILABLE, "no filter for this architecture");
    else
        abx_tiers_set(t, ABX_L_SECCOMP, ABX_LAYER_ACTIVE, NULL);
}

/* ---- cgroups: judged by write access, nothing is created ---- */

int abx_own_cgroup(const char *controller, char *out, size_t outlen)
{
    FILE *f = fopen("/proc/self/cgroup", "re");
    if (!f)
        return -1;
    char line[512];
    int found = -1;
    while (found < 0 && fgets(line, sizeof line, f)) {
        line[strcspn(line, "\n")] = '\0';
        char *c1 = strchr(line, ':');
        char *c2 = c1 ? strchr(c1 + 1, ':') : NULL;
        if (!c2)
            continue;
        *c2 = '\0';
        char *ctrls = c1 + 1;
        const char *path = c2 + 1;
        bool match = false;
        if (!*controller)
            match = strcmp(line, "0") == 0 && !*ctrls;
        else
            for (char *save = NULL, *tok = strtok_r(ctrls, ",", &save); tok; tok = strtok_r(NULL, ",", &save))
                match = match || strcmp(tok, controller) == 0;
        if (match) {
            snprintf(out, outlen, "%s", strcmp(path, "/") == 0 ? "" : path);
            found = 0;
        }
    }
    fclose(f);
    return found;
}

static void probe_cgroup(abx_tiers *t)
{
    char own[256], dir[300], ctl[340];
    struct stat st;
    if (stat("/sys/fs/cgroup/pids/cgroup.procs", &st) == 0 && abx_own_cgroup("pids", own, sizeof own) == 0) {
        snprintf(dir, sizeof dir, "/sys/fs/cgroup/pids%s", own);
        if (access(dir, W_OK) == 0)
            abx_tiers_set(t, ABX_L_CGROUP, ABX_LAYER_ACTIVE, NULL);
        else
            abx_tiers_set(t, ABX_L_CGROUP, ABX_LAYER_UNAVAILABLE, "cgroup v1 %s not writable: %s", dir,
                          strerror(errno));
        return;
    }
    if (stat("/sys/fs/cgroup/cgroup.controllers", &st) != 0 || abx_own_cgroup("", own, sizeof own) != 0) {
        abx_tiers_set(t, ABX_L_CGROUP, ABX_LAYER_UNAVAILABLE, "no cgroup hierarchy with a pids controller mounted");
        return;
    }
    snprintf(dir, sizeof dir, "/sys/fs/cgroup%s", own);
    snprintf(ctl, sizeof ctl, "%s/cgroup.subtree_control", dir);
    if (access(dir, W_OK) != 0 || access(ctl, W_OK) != 0)
        abx_tiers_set(t, ABX_L_CGROUP, ABX_LAYER_UNAVAILABLE, "cgroup v2 subtree %s not delegated: %s", dir,
                      strerror(errno));
    else
        abx_tiers_set(t, ABX_L_CGROUP, ABX_LAYER_ACTIVE, NULL);
}

void abx_tiers_probe(abx_tiers *t, bool netns)
{
    memset(t, 0, sizeof *t);
    probe_caps(t);
    probe_namespaces(t, netns);
    probe_landlock(t);
    probe_seccomp(t);
    probe_cgroup(t);
    abx_tiers_set(t, ABX_L_WATCHDOG, ABX_LAYER_ACTIVE, NULL); /* the sandbox says whether it started */
    abx_tiers_pick(t);
}

void abx_tiers_pick(abx_tiers *t)
{
    /* rlimits stand in for the pids controller wherever cgroups are not delegated */
    if (abx_tiers_active(t, ABX_L_CGROUP))
        abx_tiers_set(t, ABX_L_RLIMIT, ABX_LAYER_NOT_NEEDED, "cgroups limit pids");
    else
        abx_tiers_set(t, ABX_L_RLIMIT, ABX_LAYER_ACTIVE, NULL);
    if (!abx_tiers_active(t, ABX_L_SECCOMP))
        t->tier = ABX_TIER_NONE;
    else if (!abx_tiers_active(t, ABX_L_LANDLOCK_FS))
        t->tier = ABX_TIER_MINIMAL;
    else if (abx_tiers_active(t, ABX_L_MNTNS) && abx_tiers_active(t, ABX_L_NETNS) && abx_tiers_active(t, ABX_L_CGROUP))
        t->tier = ABX_TIER_FULL;
    else
        t->tier = ABX_TIER_UNPRIVILEGED;
}

json_t *abx_tiers_json(const abx_tiers *t)
{
    json_t *layers = json_object();
    for (int i = 0; i < ABX_L__N; i++) {
        json_t *l = json_pack("{s:s}", "state", abx_layer_state_name(t->layer[i].state));
        if (t->layer[i].reason[0])
            json_object_set_new(l, "reason", json_string(t->layer[i].reason));
        json_object_set_new(layers, layer_names[i], l);
    }
    return json_pack("{s:s, s:o}", "tier", abx_tier_name(t->tier), "layers", layers);
}

void abx_tiers_line(const abx_tiers *t, char *out, size_t outlen)
{
    size_t o = (size_t)snprintf(out, outlen, "confinement tier %s", abx_tier_name(t->tier));
    bool first = true;
    for (int i = 0; i < ABX_L__N && o < outlen; i++) {
        if (t->layer[i].state != ABX_LAYER_UNAVAILABLE || i == ABX_L_USERNS)
            continue;
        o += (size_t)snprintf(out + o, outlen - o, "%s%s (%s)", first ? "; unavailable: " : ", ", layer_names[i],
                              t->layer[i].reason);
        first = false;
    }
}
