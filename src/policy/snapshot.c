/* snapshot.c — a compiled policy's lifetime (free, ref, unref), who a token or an id is,
 * what is mounted for whom, and admission: GCRA rates and concurrency held by a call
 * until it ends. Compiling lives in compile.c, deciding in decide.c. */
#include "policy/internal.h"
#include "core/util.h"
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

/* ---- freeing ---- */

void abx_pol_stmt_release(abx_stmt *s)
{
    for (size_t i = 0; i < s->n_ops; i++)
        abx_free(s->ops[i].text);
    abx_free(s->ops);
    for (size_t i = 0; i < s->n_principals; i++)
        abx_free(s->principals[i]);
    abx_free(s->principals);
    for (int k = 0; k < ABX_ACC_IDX__N; k++) {
        for (size_t i = 0; i < s->n_paths[k]; i++)
            abx_free(s->paths[k][i].glob);
        abx_free(s->paths[k]);
    }
    for (size_t i = 0; i < s->n_cmds; i++)
        abx_cmd_pattern_release(&s->cmds[i]);
    abx_free(s->cmds);
    abx_free(s->cmd_path);
    abx_pol_net_release(s);
    abx_pol_net_inject_free(s);
    char **lists[] = {s->env_allow, s->urls, s->languages, s->agents, s->ports};
    size_t counts[] = {s->n_env, s->n_urls, s->n_languages, s->n_agents, s->n_ports};
    for (size_t l = 0; l < 5; l++) {
        for (size_t i = 0; i < counts[l]; i++)
            abx_free(lists[l][i]);
        abx_free(lists[l]);
    }
}

void abx_pol_policy_free(abx_policy *p)
{
    for (size_t i = 0; i < p->n_principals; i++) {
        abx_free(p->principals[i].id);
        if (p->principals[i].sign_secret) {
            explicit_bzero(p->principals[i].sign_secret, strlen(p->principals[i].sign_secret));
            abx_free(p->principals[i].sign_secret);
        }
        for (size_t r = 0; r < p->principals[i].n_roles; r++)
            abx_free(p->principals[i].roles[r]);
        abx_free(p->principals[i].roles);
    }
    abx_free(p->principals);
    abx_egress_resolver_free(&p->egress_resolve);
    for (size_t i = 0; i < p->n_allow; i++)
        abx_pol_stmt_release(&p->allow[i]);
    for (size_t i = 0; i < p->n_deny; i++)
        abx_pol_stmt_release(&p->deny[i]);
    abx_free(p->allow);
    abx_free(p->deny);
    for (size_t i = 0; i < p->n_roots; i++) {
        abx_free(p->roots[i]);
        if (p->rootfds[i] >= 0)
            close(p->rootfds[i]);
    }
    abx_free(p->roots);
    abx_free(p->rootfds);
    for (size_t i = 0; i < p->n_protected; i++)
        abx_free(p->protected_files[i]);
    abx_free(p->protected_files);
    abx_free(p->protected_what);
    abx_free(p->idents);
    abx_pol_free_identset(p);
    for (size_t i = 0; i < p->n_mask_ident; i++) {
        abx_free(p->mask_ident[i].path);
        abx_free(p->mask_ident[i].stmts);
        if (p->mask_ident[i].fd >= 0)
            close(p->mask_ident[i].fd);
    }
    abx_free(p->mask_ident);
    abx_free(p->mount_off);
    abx_free(p->mount_cnt);
    abx_free(p->mount_stmts);
    abx_free(p->concurrency);
    abx_free(p->rate_tat);
    abx_free(p->workspace);
    abx_policy_derived *d = atomic_load(&p->derived);
    if (d)
        d->free_fn(d);
    abx_free(p);
}

void abx_policy_ref(abx_policy *p) { atomic_fetch_add_explicit(&p->refs, 1, memory_order_relaxed); }

void abx_policy_unref(abx_policy *p)
{
    if (p && atomic_fetch_sub_explicit(&p->refs, 1, memory_order_acq_rel) == 1)
        abx_pol_policy_free(p);
}

/* ---- decisions ---- */

int abx_policy_auth(const abx_policy *p, const char *token, size_t len, int64_t now_wall_ms)
{
    unsigned char h[32];
    abx_sha256 c;
    abx_sha256_init(&c);
    abx_sha256_update(&c, token, len);
    abx_sha256_final(&c, h);
    int found = -1;
    /* compare against every token, no early exit: timing does not reveal which matched */
    for (size_t i = 0; i < p->n_principals; i++) {
        bool eq = p->principals[i].has_token && abx_ct_equal(h, p->principals[i].token_sha256, 32);
        if (eq)
            found = (int)i;
    }
    if (found >= 0 && p->principals[found].expires_at_ms && now_wall_ms >= p->principals[found].expires_at_ms)
        return -1;
    return found;
}

int abx_policy_signed(const abx_policy *p, const char *prefix, size_t plen, const char *suffix, size_t slen,
                      const unsigned char want[32], int64_t now_wall_ms)
{
    int found = -1;
    for (size_t i = 0; i < p->n_principals; i++) {
        const char *sec = p->principals[i].sign_secret;
        if (!sec)
            continue;
        unsigned char h[32];
        abx_sha256 c;
        abx_sha256_init(&c);
        abx_sha256_update(&c, prefix, plen);
        abx_sha256_update(&c, sec, strlen(sec));
        abx_sha256_update(&c, suffix, slen);
        abx_sha256_final(&c, h);
        if (abx_ct_equal(h, want, 32))
            found = (int)i;
    }
    if (found >= 0 && p->principals[found].expires_at_ms && now_wall_ms >= p->principals[found].expires_at_ms)
        return -1;
    return found;
}

int abx_policy_principal_slot(const abx_policy *p, const char *id)
{
    if (!id)
        return (int)p->n_principals;
    for (size_t i = 0; i < p->n_principals; i++)
        if (strcmp(p->principals[i].id, id) == 0)
            return (int)i;
    return -1;
}

bool abx_policy_principal_expired(const abx_policy *p, int slot, int64_t now_wall_ms)
{
    return slot >= 0 && slot < (int)p->n_principals && p->principals[slot].expires_at_ms &&
           now_wall_ms >= p->principals[slot].expires_at_ms;
}

const char *abx_policy_principal_id(const abx_policy *p, int slot)
{
    if (slot < 0 || slot > (int)p->n_principals)
        return "";
    return slot == (int)p->n_principals ? "anonymous" : p->principals[slot].id;
}

bool abx_policy_mounted(const abx_policy *p, int slot, size_t op_index)
{
    if (slot < 0 || slot > (int)p->n_principals || op_index >= p->n_ops)
        return false;
    return p->mount_cnt[(size_t)slot * p->n_ops + op_index] > 0;
}

/* GCRA: one atomic "theoretical arrival time" per (principal, statement); "N/min"
 * admits a burst of N and then one call every minute/N. */
static bool gcra_take(_Atomic int64_t *tat, int64_t count, int64_t window_ms, int64_t now_us, int *retry_after_s)
{
    int64_t interval = window_ms * 1000 / (count > 0 ? count : 1);
    int64_t tolerance = interval * ((count > 0 ? count : 1) - 1);
    int64_t old = atomic_load_explicit(tat, memory_order_relaxed);
    for (;;) {
        int64_t t = old > now_us ? old : now_us;
        if (t - now_us > tolerance) {
            int64_t wait = t - tolerance - now_us;
            *retry_after_s = (int)((wait + 999999) / 1000000);
            if (*retry_after_s < 1)
                *retry_after_s = 1;
            return false;
        }
        if (atomic_compare_exchange_weak_explicit(tat, &old, t + interval, memory_order_relaxed,
                                                  memory_order_relaxed))
            return true;
    }
}

abx_err abx_admit(abx_policy *p, int slot, abx_decision *d, int64_t now_us, int *retry_after_s)
{
    for (size_t i = 0; i < d->n_admitting; i++) {
        const abx_stmt *s = &p->allow[d->admitting[i]];
        int64_t rate = s->limits[__builtin_ctz(ABX_LIM_RATE)];
        if (rate > 0 && !gcra_take(&p->rate_tat[(size_t)slot * p->n_allow + d->admitting[i]], s->rate_count,
                                   s->rate_window_ms, now_us, retry_after_s)) {
            snprintf(d->message, sizeof d->message, "rate limit of %s exceeded", s->label);
            return ABX_E_LIMIT_RATE;
        }
    }
    if (d->n_admitting && !d->held && !(d->held = abx_calloc(d->n_admitting, sizeof *d->held)))
        return ABX_E_SERVER_UNAVAILABLE;
    for (size_t i = 0; i < d->n_admitting; i++) {
        const abx_stmt *s = &p->allow[d->admitting[i]];
        int64_t lim = s->limits[__builtin_ctz(ABX_LIM_CONCURRENCY)];
        if (lim <= 0)
            continue;
        int now = atomic_fetch_add(&p->concurrency[d->admitting[i]], 1) + 1;
        d->held[d->n_held++] = d->admitting[i];
        if (now > lim) {
            snprintf(d->message, sizeof d->message, "%s allows %lld concurrent calls", s->label, (long long)lim);
            abx_release(p, d);
            return ABX_E_LIMIT_CONCURRENCY;
        }
    }
    return ABX_OK;
}

void abx_release(abx_policy *p, abx_decision *d)
{
    for (size_t i = 0; i < d->n_held; i++)
        atomic_fetch_sub(&p->concurrency[d->held[i]], 1);
    d->n_held = 0;
}

void abx_decision_release(abx_decision *d)
{
    for (size_t i = 0; i < d->n_paths; i++) {
        abx_free(d->paths[i].canonical);
        if (d->paths[i].own_fd && d->paths[i].rootfd >= 0)
            close(d->paths[i].rootfd);
    }
    abx_free(d->paths);
    d->paths = NULL;
    d->n_paths = 0;
    abx_argv_release(&d->argv);
    abx_free(d->admitting);
    abx_free(d->held);
    d->admitting = d->held = NULL;
    d->n_admitting = 0;
}
