/* layout.c — the state-layout rule: abx's own state (config, ledger, plugins, tokens,
 * runtime folder) lies outside every root a statement lets anyone write or delete in.
 * Checked by every compile and, before any plugin runs, by abx_policy_state_precheck. */
#include "policy/internal.h"
#include "core/util.h"
#include "policy/paths.h"
#include <stdio.h>
#include <string.h>

/* abx's state must lie outside every root that any statement lets anyone write or
 * delete in: a confined process (or files.move) could otherwise rename it away, plant
 * a config, a plugin or a token, or swap the ledger. A name-based protection cannot
 * survive a rename of a parent folder; this layout rule can. Checked at every compile
 * (serve, check-config, reload: a reload that breaks it keeps the policy in force). */
void abx_pol_check_state_layout(cctx *c)
{
    const abx_policy *p = c->p;
    char *runtime = NULL; /* not a protected area: processes' own TMPDIRs live below it */
    if (c->in->runtime_dir && abx_path_canon("/", c->in->runtime_dir, &runtime) != 0)
        runtime = NULL;
    for (size_t a = 0; a < p->n_allow; a++) {
        const abx_stmt *s = &p->allow[a];
        for (int k = ABX_ACC_IDX_WRITE; k <= ABX_ACC_IDX_DELETE; k++)
            for (size_t i = 0; i < s->n_paths[k]; i++) {
                const char *root = p->roots[s->paths[k][i].root];
                for (size_t f = 0; f <= p->n_protected; f++) {
                    const char *state = f < p->n_protected ? p->protected_files[f] : runtime;
                    const char *what = f < p->n_protected ? p->protected_what[f] : "abx's runtime folder";
                    if (!state || (!abx_pol_within(root, state) && !abx_pol_within(state, root)))
                        continue;
                    abx_diag_add(c->d, "error", "config.state_writable", s->line,
                                 "%s lets principals %s in %s, which holds abx's own state: %s %s. Keep abx's "
                                 "state outside every root a statement can write (docs/security.md, \"abx's own "
                                 "state\")%s",
                                 s->label, k == ABX_ACC_IDX_WRITE ? "write" : "delete", root, what, state,
                                 s->line ? "" : "; start abx from another folder or set ABX_HOME");
                    abx_free(runtime);
                    return; /* one message per compile says what to fix */
                }
            }
    }
    abx_free(runtime);
}

/* The layout rule before anything from the config runs: plugins are dlopen()ed and
 * Python op modules imported (both execute code) before the full compile can resolve
 * their op ids, so the write roots are read from the statements' paths alone here.
 * Only config.state_writable is reported; everything else waits for the compile. */
int abx_policy_state_precheck(const abx_policy_input *in, abx_diags *diags)
{
    abx_policy *p = abx_calloc(1, sizeof *p);
    if (!p)
        return -1;
    atomic_init(&p->refs, 1);
    p->reg = in->reg;
    abx_diags scratch = {0};
    cctx c = {p, in, &scratch, true};
    if (abx_path_canon("/", in->workspace ? in->workspace : "/", &p->workspace) != 0)
        goto out;
    for (size_t i = 0; i < in->n_protected; i++)
        if (in->protected_files[i])
            abx_pol_add_protected(p, in->protected_files[i],
                                  in->protected_what ? in->protected_what[i] : "abx's own file");
    const json_t *pol = in->policy, *allow = pol ? json_object_get(pol, "allow") : NULL;
    const json_t *presets = pol ? json_object_get(pol, "presets") : NULL;
    bool workspace_preset = !pol || in->extends_default;
    size_t i;
    json_t *it;
    json_array_foreach(presets, i, it)
        workspace_preset |= json_is_string(it) && !strcmp(json_string_value(it), "workspace");
    if (workspace_preset) {
        abx_stmt st = {.label = "preset:workspace[0]"};
        char *all = abx_asprintf("%s/**", strcmp(p->workspace, "/") == 0 ? "" : p->workspace);
        json_t *ws = all ? json_pack("[s]", all) : NULL;
        abx_free(all);
        if (ws && abx_pol_add_patterns(&c, &st, ABX_ACC_IDX_WRITE, ws, 0) && abx_pol_add_stmt(&p->allow, &p->n_allow,
                                                                                              &st))
            memset(&st, 0, sizeof st);
        abx_pol_stmt_release(&st);
        json_decref(ws);
    }
    json_array_foreach(allow, i, it)
    {
        if (!json_is_object(it))
            continue;
        abx_stmt st = {.line = abx_pol_line_of(&c, it, NULL)};
        snprintf(st.label, sizeof st.label, "allow[%zu]", i);
        if (abx_pol_parse_paths(&c, &st, it) && abx_pol_add_stmt(&p->allow, &p->n_allow, &st))
            memset(&st, 0, sizeof st);
        abx_pol_stmt_release(&st);
    }
    c.d = diags;
    abx_pol_check_state_layout(&c);
out:
    abx_diags_release(&scratch);
    abx_pol_policy_free(p);
    return 0;
}
