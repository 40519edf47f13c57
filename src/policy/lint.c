/* lint.c — warnings and lint errors about a policy that compiles (check-config prints
 * them; serve logs them): statements without the scope an op needs, deny globs that
 * processes are not masked from. Decisions never read them. */
#include "policy/internal.h"
#include "core/util.h"
#include <stdio.h>
#include <string.h>

/* Whether the pattern at [k][j] of s already appeared earlier in s (any access). */
static bool pattern_seen_before(const abx_stmt *s, int k, size_t j)
{
    const char *g = s->paths[k][j].glob;
    for (int k2 = 0; k2 <= k; k2++)
        for (size_t j2 = 0; j2 < (k2 == k ? j : s->n_paths[k2]); j2++)
            if (strcmp(s->paths[k2][j2].glob, g) == 0)
                return true;
    return false;
}

/* A deny glob no mount can express (anything but a literal path or "X/ **", no space)
 * binds abx's own file ops only: processes read what it matches. Said once per pattern
 * when some statement lets processes run. */
void abx_pol_lint_unmaskable_denies(const abx_policy *p, abx_diags *diags)
{
    bool processes = false;
    for (size_t i = 0; i < p->n_allow && !processes; i++)
        processes = p->allow[i].has_commands;
    for (size_t i = 0; processes && i < p->n_deny; i++) {
        const abx_stmt *s = &p->deny[i];
        if (strncmp(s->label, "preset:", 7) == 0)
            continue;
        for (int k = 0; k < ABX_ACC_IDX__N; k++)
            for (size_t j = 0; j < s->n_paths[k]; j++) {
                const char *g = s->paths[k][j].glob;
                if (pattern_seen_before(s, k, j))
                    continue; /* one pattern is usually listed for read, write and delete */
                char *t = abx_pol_deny_target(g);
                if (!t)
                    abx_diag_add(diags, "warning", "config.deny_not_masked", s->line,
                                 "%s: the deny pattern '%s' binds abx's file operations only; processes started by "
                                 "commands can still read what it matches (a literal path or 'X/**' is masked for "
                                 "them too)",
                                 s->label, g);
                abx_free(t);
            }
    }
}

/* scope_required: a statement mounting an op with a declared path, command, url,
 * language or agent parameter must carry the matching scope. A lint error: with
 * allow_lint_errors the server starts and such calls get 403 policy.scope_required
 * (there is no "no scope, no check" fallback). */
/* Does the statement name op by its id, an alias or its namespace (not only by `*`,
 * `effect:` or `group:`)? */
static bool names_op(const abx_stmt *s, const abx_op *op)
{
    for (size_t i = 0; i < s->n_ops; i++)
        if ((s->ops[i].kind == ABX_SEL_EXACT || s->ops[i].kind == ABX_SEL_NS) && abx_pol_sel_match(&s->ops[i], op, true))
            return true;
    return false;
}

void abx_pol_lint_scope_required(const abx_policy *p, bool allow_lint_errors, abx_diags *diags)
{
    for (size_t a = 0; a < p->n_allow; a++) {
        const abx_stmt *s = &p->allow[a];
        for (size_t o = 0; o < abx_registry_count(p->reg); o++) {
            const abx_op *op = abx_registry_at(p->reg, o);
            const char *missing = abx_pol_scope_missing(s, op);
            /* a url scope is only demanded of statements that name the op (browser.*): a
             * `*` statement written before browser.* existed still loads, and its browser
             * calls are refused at call time (403 policy.scope_required) */
            if (missing && abx_pol_stmt_has_op(s, op, true) && (strcmp(missing, "urls") != 0 || names_op(s, op))) {
                abx_diag_add(diags, allow_lint_errors ? "warning" : "error", "config.scope_required", s->line,
                             "%s mounts '%s', which has %s parameters, but carries no '%s' scope", s->label, op->id,
                             missing, missing);
                break;
            }
        }
    }
}
