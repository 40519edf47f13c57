/* spawn.h — start one confined process. Every process abx starts goes through
 * abx_spawn(): its own session and process group, PDEATHSIG, no_new_privs, all
 * capabilities dropped, run_as uid/gid, seccomp (seccomp.h), Landlock (read roots, write roots, system
 * directories), a network namespace of its own with only loopback (up) unless net is
 * allowed, cgroup pids/memory
 * limits, masks over denied paths inside granted roots, no inherited descriptors.
 * The child never runs library code that allocates or locks: it is a vfork-style
 * clone that only makes system calls and then execve()s. */
#ifndef ABX_SANDBOX_SPAWN_H
#define ABX_SANDBOX_SPAWN_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

#include "sandbox/egress.h"

typedef struct abx_sandbox abx_sandbox;
typedef struct abx_slot abx_slot;

/* What the kernel can do here, probed once (abx_sandbox_new). */
typedef struct abx_sandbox_caps {
    int landlock_abi;       /* 0 = none */
    bool netns;             /* an empty network namespace could be created */
    bool mntns;             /* mount namespaces (for masks) */
    bool cgroup_pids;       /* a pids controller we can write */
    bool cgroup_memory;     /* a memory controller we can write */
    bool cgroup_cpu;        /* a cpu controller we can write (cfs quota) */
    int cgroup_version;     /* 1 or 2; 0 = none */
    bool root;              /* abx runs as uid 0 (can change ids and drop capabilities) */
    bool seccomp;           /* system-call filters (seccomp.h) */
    bool watchdog;          /* the watchdog process runs (watchdog.h) */
} abx_sandbox_caps;

/* Shared, long-lived confinement resources: the empty network namespace (an fd), the
 * cgroup parent directories, the runtime dir for private TMPDIRs, the watchdog process.
 * At start it empties and removes the cgroups a dead abx left (their processes are
 * killed, setsid'd ones included). required: fail when something is missing instead of
 * warning. */
abx_sandbox *abx_sandbox_new(const char *runtime_dir, bool required, char *err, size_t errlen);
void abx_sandbox_free(abx_sandbox *sb);
const abx_sandbox_caps *abx_sandbox_caps_get(const abx_sandbox *sb);
/* Human-readable list of what is missing (empty when nothing is). */
const char *abx_sandbox_missing(const abx_sandbox *sb);
/* The layers and the tier (tiers.h). */
const struct abx_tiers *abx_sandbox_tiers(const abx_sandbox *sb);

typedef struct abx_confine {
    const char *const *read_roots;   /* canonical paths granted read-only */
    size_t n_read;
    const char *const *write_roots;  /* canonical paths granted read-write (and delete) */
    size_t n_write;
    const char *const *masks;        /* existing paths inside granted roots to hide */
    size_t n_masks;
    const char *const *readonly;     /* existing paths inside write roots to make read-only */
    size_t n_readonly;
    const char *const *pins;         /* existing paths to bind onto themselves: the process
                                        can neither rename nor remove a mount point */
    size_t n_pins;
    bool net;                        /* keep the host network */
    int egress_port;                 /* without net: a listening socket on 127.0.0.1:port is
                                        made inside the process's own network namespace and
                                        handed back (abx_child.egress_fd) for abx's egress
                                        proxy; 0 = none */
    const int *egress_tports;        /* with egress_port: transparent listeners (0.0.0.0:port) */
    size_t n_egress_tports;          /*   at most ABX_EGRESS_TPORTS */
    bool egress_dns;                 /* with egress_port: the resolver's sockets on port 53, and
                                        the host's non-loopback nameservers (resolv.conf) as
                                        addresses of lo, so queries to them reach it */
    int64_t pids_max;                /* cgroup pids.max; <= 0 → 256 */
    int64_t memory_max;              /* bytes; <= 0 → unlimited */
    int64_t cpu_milli;               /* millicores; <= 0 → unlimited */
    uid_t uid;                       /* run_as */
    gid_t gid;
    bool set_ids;
    bool required;                   /* fail (not warn) when a layer cannot be applied */
} abx_confine;

/* How one process will be confined on this machine: what its statement needs that the
 * tier lacks (with confine: required the spawn is refused, naming it; best effort runs
 * without it and records it), and the stand-ins used where a layer is missing. */
typedef struct abx_confine_plan {
    char missing[240];               /* "landlock, mount namespace"; "" when every need is met */
    const char *tier;                /* static name: full | unprivileged | minimal | none */
    int seccomp_mode;                /* enum abx_seccomp_net: strict when no empty namespace */
    bool rlimit_nproc;               /* pids held by RLIMIT_NPROC (no cgroup) */
    long nproc;                      /*   its value: the statement's pids on top of what the uid runs */
    bool masks_unavailable;          /* deny masks need a mount namespace: refused in any mode */
    bool guard_signals;              /* abx's uid without Landlock scoping: seccomp guards abx's pids */
} abx_confine_plan;
void abx_sandbox_plan(const abx_sandbox *sb, const abx_confine *c, abx_confine_plan *out);
/* Log the tier and what is unavailable once, when the sandbox is built (err: why it could
 * not be, when sb is NULL). log has abx_log's shape; NULL logs nothing. */
void abx_sandbox_log_tier(const abx_sandbox *sb, const char *err,
                          void (*log)(const char *level, const char *request_id, const char *fmt, ...));
/* Make ahead what later spawns take (network namespaces, netpool.c): the process
 * manager calls it once the sandbox is built and whenever it has been idle while
 * abx_sandbox_wants_prepare says so (false for NULL). */
void abx_sandbox_prepare(abx_sandbox *sb);
bool abx_sandbox_wants_prepare(abx_sandbox *sb);
/* A process's confinement prepared once for its key (roots, masks, HOME) and used by
 * one process at a time (slots.c); dir gets its TMPDIR. NULL when slots are off here
 * (no view, no cgroup, Landlock < 6) or with an egress allowlist. Hand it to abx_spawn
 * in the request, or back with abx_sandbox_slot_put when no process was started. */
abx_slot *abx_sandbox_slot_take(abx_sandbox *sb, const abx_confine *c, const char *home, uid_t uid, gid_t gid,
                                char *dir, size_t dirlen);
void abx_sandbox_slot_put(abx_slot *s);
/* Whether slots are used here; how many were built and reused; how many processes were
 * made ahead for idle slots (spares) and how many of those ran a call's program. */
typedef struct abx_slot_stats {
    bool on;
    unsigned long made, reused, spares_made, spares_used;
} abx_slot_stats;
void abx_sandbox_slot_stats(abx_sandbox *sb, abx_slot_stats *out);
/* Whether a network namespace may come back for a later process (netpool.c), how many
 * were made ahead, and how many came back. */
void abx_sandbox_netpool_stats(abx_sandbox *sb, bool *reuse, unsigned long *made, unsigned long *reused);
/* The tier's name ("none" without a sandbox). */
const char *abx_sandbox_tier_name(const abx_sandbox *sb);

typedef struct abx_spawn_req {
    char *const *argv;               /* argv[0] absolute */
    char *const *envp;
    int cwd_fd;                      /* directory fd (opened through the jail); -1 = "/" */
    const char *cwd_path;            /* its canonical path: re-entered inside a private mount
                                        namespace (an fd from before would see no masks) */
    int stdin_fd, stdout_fd, stderr_fd; /* child ends; -1 = /dev/null */
    bool ctty;                       /* stdin is a terminal slave: make it the controlling tty */
    const abx_confine *confine;
    const char *tmpdir;              /* private TMPDIR granted read-write, or NULL */
    const char *home;                /* the principal's private HOME granted read-write, or NULL */
    const int *keep_fds;             /* descriptors the child keeps under their numbers (a
                                        kernel's listening sockets), or NULL */
    size_t n_keep_fds;
    int64_t deadline_ms;             /* CLOCK_MONOTONIC ms after which the watchdog kills the
                                        process's group and cgroup if abx has not; 0 = none */
    abx_slot *slot;                  /* its confinement prepared (abx_sandbox_slot_take; tmpdir is
                                        the slot's), or NULL; abx_spawn takes it either way */
} abx_spawn_req;

typedef struct abx_child {
    pid_t pid;                       /* also the process group and session id */
    int pidfd;                       /* owned; poll for exit */
    char cgroup[3][256];             /* cgroup directories created for it: pids (v2: all), memory, cpu */
    abx_egress_listeners egress;     /* owned until taken: the proxy's listening sockets inside the
                                        process's namespace (confine.egress_port), n = 0 without */
    int netns;                       /* owned: its network namespace when one made ahead was
                                        taken (netpool.c), else -1 */
    abx_slot *slot;                  /* owned: its prepared confinement (slots.c), or NULL */
} abx_child;

/* Start the process. 0, or -1 with why (errno-like reason in err). With required
 * confinement, any layer that cannot be applied fails the spawn. Must be called from
 * the thread that should be the child's parent (PDEATHSIG follows that thread). */
int abx_spawn(abx_sandbox *sb, const abx_spawn_req *req, abx_child *out, char *err, size_t errlen);
/* Kill every process of the child (process group and cgroup) with sig. */
void abx_child_kill(const abx_child *c, int sig);
/* After the child is reaped: remove its cgroups (killing any stragglers) and close fds. */
void abx_child_cleanup(abx_child *c);
/* The same, and its network namespace goes back to sb's pool when every process of the
 * tree is gone and the namespace holds no socket (netpool.c). */
void abx_child_release(abx_sandbox *sb, abx_child *c);

#endif
