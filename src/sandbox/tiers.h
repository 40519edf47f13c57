/* tiers.h — what confinement this machine allows, detected at start and never assumed.
 *
 * Each layer abx can put around a process is probed the way it will be used (a forked
 * child tries unshare() and makes "/" private, landlock_create_ruleset answers its ABI,
 * the kernel is asked which seccomp actions it knows, capget() says which capabilities
 * abx holds) and reported as active, unavailable (with the reason) or not needed. From
 * the layers follows the tier:
 *   full          Landlock, mount and network namespaces, cgroups, seccomp
 *   unprivileged  no namespaces or cgroups (a non-root container): Landlock for paths,
 *                 seccomp refusing internet, raw and Unix sockets for net: false,
 *                 rlimits where cgroups are not delegated
 *   minimal       no Landlock (gVisor, old kernels): seccomp only
 *   none          not even seccomp
 * What a call needs and the tier lacks is decided per call (spawn.h, abx_sandbox_plan). */
#ifndef ABX_SANDBOX_TIERS_H
#define ABX_SANDBOX_TIERS_H

#include <jansson.h>
#include <stdbool.h>
#include <sys/types.h>

enum abx_layer_id {
    ABX_L_USERNS,        /* user namespaces (reported; abx makes namespaces only with privileges) */
    ABX_L_MNTNS,         /* private mount namespace: masks and read-only mounts */
    ABX_L_NETNS,         /* an empty network namespace for net: false */
    ABX_L_CGROUP,        /* a writable (delegated) cgroup subtree: pids, memory, cpu, lifetimes */
    ABX_L_RLIMIT,        /* RLIMIT_NPROC where cgroups are not delegated */
    ABX_L_LANDLOCK_FS,   /* Landlock file system rules (ABI 1) */
    ABX_L_LANDLOCK_NET,  /* Landlock TCP bind/connect rules (ABI 4) */
    ABX_L_LANDLOCK_SCOPE,/* Landlock signal and abstract-socket scoping (ABI 6) */
    ABX_L_SECCOMP,       /* the system-call filter (seccomp.h) */
    ABX_L_NNP,           /* no_new_privs */
    ABX_L_CAPS,          /* dropping every capability in the child */
    ABX_L_RUN_AS,        /* setuid/setgid to the run_as ids */
    ABX_L_WATCHDOG,      /* the watchdog process (watchdog.h) */
    ABX_L__N
};

enum abx_layer_state { ABX_LAYER_ACTIVE, ABX_LAYER_UNAVAILABLE, ABX_LAYER_NOT_NEEDED };

enum abx_tier { ABX_TIER_FULL, ABX_TIER_UNPRIVILEGED, ABX_TIER_MINIMAL, ABX_TIER_NONE };

typedef struct abx_layer {
    enum abx_layer_state state;
    char reason[160];    /* why unavailable or not needed; "" when active */
} abx_layer;

typedef struct abx_tiers {
    abx_layer layer[ABX_L__N];
    int landlock_abi;    /* 0 = none */
    bool can_drop_caps;  /* CAP_SETPCAP: securebits and the bounding set */
    bool can_set_ids;    /* CAP_SETUID and CAP_SETGID */
    enum abx_tier tier;
} abx_tiers;

/* Probe every layer without changing anything outside forked children (no cgroup is
 * created: delegation is judged by write access). check-config uses this alone;
 * the sandbox refines the cgroup, network namespace and watchdog layers with what it
 * actually set up, then calls abx_tiers_pick. netns: probe the network namespace too
 * (the sandbox skips it: making the empty namespace it keeps is the probe). */
void abx_tiers_probe(abx_tiers *t, bool netns);
void abx_tiers_set(abx_tiers *t, enum abx_layer_id id, enum abx_layer_state st, const char *fmt, ...)
    __attribute__((format(printf, 4, 5)));
/* Decide the tier from the layers. */
void abx_tiers_pick(abx_tiers *t);
bool abx_tiers_active(const abx_tiers *t, enum abx_layer_id id);
/* Whether abx holds CAP_SETUID and CAP_SETGID (run_as other than itself), without forking. */
bool abx_tiers_can_set_ids(void);

const char *abx_layer_name(enum abx_layer_id id);
const char *abx_layer_state_name(enum abx_layer_state st);
const char *abx_tier_name(enum abx_tier tier);
/* {tier, layers: {name: {state, reason?}}} */
json_t *abx_tiers_json(const abx_tiers *t);
/* run_as against what abx may do: ids other than abx's own need CAP_SETUID and
 * CAP_SETGID. Without them an explicit run_as is a config error (-1 with why), and
 * auto (the workspace's owner) falls back to abx's own ids. */
int abx_run_as_check(bool explicit_ids, unsigned *uid, unsigned *gid, char *err, size_t errlen);
/* Our cgroup path ("" for the root) in the v1 hierarchy of controller, or in v2 when
 * controller is "". 0, or -1 when there is none. */
int abx_own_cgroup(const char *controller, char *out, size_t outlen);
/* One line for the start-up log: "tier unprivileged; unavailable: mount namespace (…), …". */
void abx_tiers_line(const abx_tiers *t, char *out, size_t outlen);

#endif
