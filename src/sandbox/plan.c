/* plan.c — what one process's statement needs against what the tier has (spawn.h,
 * abx_sandbox_plan): the layers it lacks (refused with confine: required, recorded as
 * not enforced with best_effort) and the stand-ins where a layer is missing — the
 * strict seccomp filter for net: false without a network namespace, RLIMIT_NPROC for
 * pids without a cgroup. */
#include "sandbox/spawn.h"
#include "sandbox/seccomp.h"
#include "sandbox/tiers.h"
#include <stdio.h>
#include <string.h>
#include <unistd.h>

/* RLIMIT_NPROC counts every task of the user, abx's own threads too when processes run
 * as abx's uid: the limit is the statement's pids on top of those. */
static long nproc_limit(const abx_tiers *t, const abx_confine *c)
{
    long base = 0;
    bool same_uid = !(c->set_ids && t->can_set_ids) || c->uid == geteuid();
    FILE *f = same_uid ? fopen("/proc/self/status", "re") : NULL;
    if (f) {
        char line[128];
        while (fgets(line, sizeof line, f))
            if (sscanf(line, "Threads: %ld", &base) == 1)
                break;
        fclose(f);
    }
    return base + (c->pids_max > 0 ? (long)c->pids_max : 256);
}

static void plan_miss(abx_confine_plan *p, const char *layer)
{
    size_t o = strlen(p->missing);
    snprintf(p->missing + o, sizeof p->missing - o, "%s%s", o ? ", " : "", layer);
}

void abx_sandbox_plan(const abx_sandbox *sb, const abx_confine *c, abx_confine_plan *p)
{
    memset(p, 0, sizeof *p);
    const abx_tiers *t = abx_sandbox_tiers(sb);
    const abx_sandbox_caps *caps = abx_sandbox_caps_get(sb);
    p->tier = abx_tier_name(t->tier);
    bool set_ids = c->set_ids && t->can_set_ids;
    uid_t child_uid = set_ids ? c->uid : geteuid();
    if (!caps->seccomp)
        plan_miss(p, "seccomp");
    if (!abx_tiers_active(t, ABX_L_NNP))
        plan_miss(p, "no_new_privs");
    if (t->layer[ABX_L_CAPS].state == ABX_LAYER_UNAVAILABLE)
        plan_miss(p, "capabilities");
    if (c->set_ids && !t->can_set_ids && (c->uid != geteuid() || c->gid != getegid()))
        plan_miss(p, "run_as");
    /* every process is confined to its statement's paths: only Landlock does that */
    if (caps->landlock_abi == 0)
        plan_miss(p, "landlock");
    /* masks carry deny statements, policy rather than hardening: never dropped, even
     * with best_effort */
    if ((c->n_masks || c->n_readonly) && !caps->mntns) {
        plan_miss(p, "mount namespace");
        p->masks_unavailable = true;
    }
    /* net: false — the empty namespace, else seccomp refusing internet and Unix sockets */
    p->seccomp_mode = c->net ? ABX_SC_NET : caps->netns ? ABX_SC_NONET_NS : ABX_SC_NONET_STRICT;
    if (!c->net && !caps->netns && !caps->seccomp)
        plan_miss(p, "network namespace");
    /* pids: the cgroup, else RLIMIT_NPROC (which the kernel does not apply to uid 0) */
    if (!caps->cgroup_pids) {
        if (child_uid != 0) {
            p->rlimit_nproc = true;
            p->nproc = nproc_limit(t, c);
        } else {
            plan_miss(p, "cgroup pids");
        }
    }
    if (c->memory_max > 0 && !caps->cgroup_memory)
        plan_miss(p, "cgroup memory");
    if (c->cpu_milli > 0 && !caps->cgroup_cpu)
        plan_miss(p, "cgroup cpu");
    if (!caps->watchdog)
        plan_miss(p, "watchdog");
    p->guard_signals = child_uid == geteuid() && !abx_tiers_active(t, ABX_L_LANDLOCK_SCOPE);
}

void abx_sandbox_log_tier(const abx_sandbox *sb, const char *err,
                          void (*log)(const char *level, const char *request_id, const char *fmt, ...))
{
    if (!log)
        return;
    char line[1024];
    if (sb)
        abx_tiers_line(abx_sandbox_tiers(sb), line, sizeof line);
    else
        snprintf(line, sizeof line, "confinement unavailable: %s", err);
    log(sb && abx_sandbox_tiers(sb)->tier == ABX_TIER_FULL ? "info" : "warn", NULL, "%s", line);
}

const char *abx_sandbox_tier_name(const abx_sandbox *sb) { return sb ? abx_tier_name(abx_sandbox_tiers(sb)->tier) : "none"; }
