/* enforce.c — statements against the confinement tier of this machine (enforce.h).
 *
 * The same needs as the spawn's plan (sandbox/spawn.c, abx_sandbox_plan), read from the
 * statement instead of one call: paths need Landlock, deny targets inside its roots a
 * mount namespace, net: false a network namespace or seccomp, memory and cpu limits a
 * delegated cgroup, pids a cgroup or (for a uid other than 0) RLIMIT_NPROC. */
#include "policy/enforce.h"
#include "sandbox/tiers.h"
#include <stdio.h>
#include <string.h>
#include <unistd.h>

/* Whether a statement can start processes: it mounts commands.*, process.*, terminal.*
 * (or everything), or has a command scope. */
static bool starts_processes(const abx_stmt *s)
{
    static const char *const ns[] = {"commands", "process", "terminal"};
    if (s->has_commands)
        return true;
    for (size_t i = 0; i < s->n_ops; i++) {
        const abx_sel *o = &s->ops[i];
        if (o->kind == ABX_SEL_ALL || (o->kind == ABX_SEL_EFFECT && (o->effects & ABX_EFF_EXEC)))
            return true;
        for (size_t k = 0; k < sizeof ns / sizeof ns[0]; k++) {
            size_t n = strlen(ns[k]);
            if ((o->kind == ABX_SEL_NS || o->kind == ABX_SEL_EXACT) && o->text && strncmp(o->text, ns[k], n) == 0 &&
                (o->text[n] == '\0' || o->text[n] == '.'))
                return true;
        }
    }
    return false;
}

/* Whether a deny target of the policy lies inside one of the statement's roots. */
static bool masks_inside(const abx_policy *p, const abx_stmt *s)
{
    for (int a = 0; a < ABX_ACC_IDX__N; a++)
        for (size_t i = 0; i < s->n_paths[a]; i++) {
            const char *root = p->roots[s->paths[a][i].root];
            size_t n = strlen(root);
            for (size_t m = 0; m < p->n_mask_ident; m++) {
                const char *mp = p->mask_ident[m].path;
                if (strncmp(mp, root, n) == 0 && (mp[n] == '/' || mp[n] == '\0' || (n == 1 && root[0] == '/')))
                    return true;
            }
        }
    return false;
}

static void need(abx_diags *d, const abx_tiers *t, const abx_stmt *s, enum abx_layer_id id, const char *what)
{
    abx_diag_add(d, "warning", "config.not_enforceable", s->line,
                 "%s: %s needs %s, unavailable on this machine (tier %s: %s); calls are refused with "
                 "sandbox.unavailable (confine: required) or run without it (best_effort)",
                 s->label, what, abx_layer_name(id), abx_tier_name(t->tier), t->layer[id].reason);
}

void abx_policy_check_enforceable(const abx_policy *p, const abx_config *cfg, abx_diags *d)
{
    if (!p)
        return;
    abx_tiers t;
    abx_tiers_probe(&t, true);
    bool cgroup = abx_tiers_active(&t, ABX_L_CGROUP);
    for (size_t i = 0; i < p->n_allow; i++) {
        const abx_stmt *s = &p->allow[i];
        if (!starts_processes(s))
            continue;
        if (!abx_tiers_active(&t, ABX_L_LANDLOCK_FS))
            need(d, &t, s, ABX_L_LANDLOCK_FS, "confining its processes to their paths");
        if (!abx_tiers_active(&t, ABX_L_MNTNS) && masks_inside(p, s))
            need(d, &t, s, ABX_L_MNTNS, "hiding deny targets inside its roots");
        if (!s->net && !abx_tiers_active(&t, ABX_L_NETNS) && !abx_tiers_active(&t, ABX_L_SECCOMP))
            need(d, &t, s, ABX_L_NETNS, "net: false");
        if (s->net_allow && !abx_tiers_active(&t, ABX_L_NETNS)) /* the proxy listens in the namespace */
            need(d, &t, s, ABX_L_NETNS, "net: {allow: [...]}");
        if (!cgroup && s->limits[__builtin_ctz(ABX_LIM_MEMORY)] > 0)
            need(d, &t, s, ABX_L_CGROUP, "its memory limit");
        if (!cgroup && s->limits[__builtin_ctz(ABX_LIM_CPU)] > 0)
            need(d, &t, s, ABX_L_CGROUP, "its cpu limit");
        if (!cgroup && cfg->run_as_set && cfg->run_uid == 0)
            need(d, &t, s, ABX_L_CGROUP, "a pids limit for processes running as uid 0");
    }
    if (cfg->run_as_set && (cfg->run_uid != geteuid() || cfg->run_gid != getegid()) && !t.can_set_ids)
        abx_diag_add(d, "warning", "config.not_enforceable", 0,
                     "run_as %u:%u is not this user's %u:%u and abx cannot switch ids here (no CAP_SETUID/CAP_SETGID): "
                     "abx serve refuses to start with it",
                     cfg->run_uid, cfg->run_gid, (unsigned)geteuid(), (unsigned)getegid());
}
