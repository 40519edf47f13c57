/* compile.c — auth + policy config compiled into an immutable snapshot: statements
 * (presets expanded), the mount table (principal x op -> mounting statements), the
 * identities of literal deny paths and protected files, and the process masks. The
 * algebra the snapshot serves is described in decide.c. */
#include "policy/internal.h"
#include "core/util.h"
#include "policy/paths.h"
#include <fcntl.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

static bool expand_preset(cctx *c, const char *name, int line, const json_t *net)
{
    if (strcmp(name, "workspace") != 0) {
        abx_diag_add(c->d, "error", "config.unknown_preset", line, "unknown preset '%s' (known: workspace)", name);
        return false;
    }
    /* preset workspace: every non-admin op for every authenticated principal, files
     * confined to the workspace; any program may run, because the kernel confines it to
     * the workspace (Landlock), without network and without capabilities; kernels
     * likewise, in the languages abx can start. A command string runs through /bin/sh -c
     * (pipes, &&): shell syntax lets nothing run that the unrestricted scope does not
     * already allow, and the kernel confines the shell like any other program. */
    json_t *st = json_pack("{s:[s], s:[s], s:[s], s:{s:b, s:b, s:b, s:[s,s,s,s]}, s:[s,s]}", "ops", "*",
                           "principals", "*", "paths", "**", "commands", "unrestricted", 1, "unsafe", 1, "shell", 1,
                           "env", "LANG", "TZ", "TERM", "PYTHONPATH", "languages", "python", "r");
    json_object_set_new(st, "ports", json_pack("[s]", "*")); /* its own processes' servers (ports.*) */
    if (net) /* abx serve --net: the embedded default grows a network */
        json_object_set_new(st, "net", json_deep_copy(net));
    abx_stmt s;
    c->in_preset = true;
    bool ok = abx_pol_parse_stmt(c, &s, st, true, "preset:workspace[0]");
    c->in_preset = false;
    json_decref(st);
    if (!ok || !abx_pol_add_stmt(&c->p->allow, &c->p->n_allow, &s)) {
        abx_pol_stmt_release(&s);
        return false;
    }
    return true;
}

static bool build_mount_table(cctx *c)
{
    abx_policy *p = c->p;
    size_t slots = p->n_principals + 1, nops = abx_registry_count(p->reg);
    p->n_ops = nops;
    p->mount_off = abx_calloc(slots * nops + 1, sizeof *p->mount_off);
    p->mount_cnt = abx_calloc(slots * nops + 1, sizeof *p->mount_cnt);
    size_t total = 0, cap = 64;
    p->mount_stmts = abx_calloc(cap, sizeof *p->mount_stmts);
    if (!p->mount_off || !p->mount_cnt || !p->mount_stmts)
        return false;
    if (p->n_allow > UINT16_MAX)
        return false;
    for (size_t s = 0; s < slots; s++)
        for (size_t o = 0; o < nops; o++) {
            const abx_op *op = abx_registry_at(p->reg, o);
            p->mount_off[s * nops + o] = (uint32_t)total;
            for (size_t a = 0; a < p->n_allow; a++) {
                if (!abx_pol_stmt_has_principal(p, &p->allow[a], (int)s) ||
                    !abx_pol_stmt_has_op(&p->allow[a], op, true))
                    continue;
                if (total == cap) {
                    uint16_t *g = abx_realloc(p->mount_stmts, cap * 2 * sizeof *g);
                    if (!g)
                        return false;
                    p->mount_stmts = g;
                    cap *= 2;
                }
                p->mount_stmts[total++] = (uint16_t)a;
                p->mount_cnt[s * nops + o]++;
            }
        }
    return true;
}

static bool no_lookup(const char *prefix, void *arg)
{
    (void)prefix;
    (void)arg;
    return false;
}

/* cp (owned) joins the list unless it is there already. */
static void protect_one(abx_policy *p, char *cp, const char *what)
{
    for (size_t i = 0; i < p->n_protected; i++)
        if (strcmp(p->protected_files[i], cp) == 0) {
            abx_free(cp);
            return;
        }
    char **g = abx_realloc(p->protected_files, (p->n_protected + 1) * sizeof *g);
    if (g)
        p->protected_files = g;
    const char **w = g ? abx_realloc(p->protected_what, (p->n_protected + 1) * sizeof *w) : NULL;
    if (!w) {
        abx_free(cp);
        return;
    }
    p->protected_what = w;
    p->protected_files[p->n_protected] = cp;
    p->protected_what[p->n_protected++] = what;
}

typedef struct link_walk {
    abx_policy *p;
    const char *what;
} link_walk;

/* The canonicalizer's gate, used to see every name it looks up: each symlink on the way
 * to a piece of state is part of how abx reaches it (a link in a writable folder can be
 * pointed at a planted config). Nothing is gated. */
static bool protect_links(const char *prefix, void *arg)
{
    link_walk *lw = arg;
    struct stat st;
    char *copy;
    if (lstat(prefix, &st) == 0 && S_ISLNK(st.st_mode) && (copy = abx_strdup(prefix)))
        protect_one(lw->p, copy, lw->what);
    return true;
}

/* One piece of abx's own state, with what it is (for the layout check and the
 * protected areas): where it really is (symlinks resolved) and every symlink met on the
 * way there, since replacing any of them redirects abx. A relative name is where abx
 * itself opens it: below abx's working folder, not the workspace (a config started as
 * `--config abx.yaml` from a folder a statement can write is in that folder). A name
 * whose symlinks cannot be resolved (a loop) is kept as written, folded, rather than
 * dropped. Without a working folder (deleted), a relative name cannot be reached by any
 * path a statement names. */
void abx_pol_add_protected(abx_policy *p, const char *path, const char *what)
{
    char cwd[PATH_MAX], *cp;
    const char *anchor = "/";
    if (path[0] != '/') {
        if (!getcwd(cwd, sizeof cwd) || cwd[0] != '/')
            return;
        anchor = cwd;
    }
    link_walk lw = {p, what};
    if (abx_path_canon_gated(anchor, path, protect_links, &lw, &cp) != 0 &&
        abx_path_canon_gated(anchor, path, no_lookup, NULL, &cp) != 0)
        return;
    protect_one(p, cp, what);
}

static bool add_ident(abx_policy *p, const char *path, bool subtree_pattern, int stmt)
{
    struct stat st;
    if (stat(path, &st) != 0)
        return true; /* not there yet: the name alone applies */
    abx_ident *g = abx_realloc(p->idents, (p->n_idents + 1) * sizeof *g);
    if (!g)
        return false;
    p->idents = g;
    bool subtree = S_ISDIR(st.st_mode) && subtree_pattern;
    p->idents[p->n_idents++] = (abx_ident){st.st_dev, st.st_ino, subtree, stmt};
    if (subtree)
        p->has_subtree_idents = true;
    return true;
}

/* A deny pattern names one file when it has no glob character, or one directory and
 * everything below it when it is "X/ **" (no space) with X literal. Other globs have no
 * identity to bind: they stay names. */
static bool ident_pattern(const char *glob, char *out, size_t outlen, bool *subtree)
{
    size_t n = strlen(glob);
    *subtree = n > 3 && strcmp(glob + n - 3, "/**") == 0;
    if (*subtree)
        n -= 3;
    if (n == 0 || n >= outlen || memchr(glob, '*', n) || memchr(glob, '?', n))
        return false;
    memcpy(out, glob, n);
    out[n] = '\0';
    return true;
}

/* Resolve every literal deny path and protected file to (st_dev, st_ino), once per
 * snapshot: a reload recompiles them. */
static bool compile_idents(abx_policy *p)
{
    char path[PATH_MAX];
    bool subtree;
    for (size_t i = 0; i < p->n_deny; i++)
        for (int a = 0; a < ABX_ACC_IDX__N; a++)
            for (size_t k = 0; k < p->deny[i].n_paths[a]; k++)
                if (ident_pattern(p->deny[i].paths[a][k].glob, path, sizeof path, &subtree) &&
                    !add_ident(p, path, subtree, (int)i))
                    return false;
    for (size_t i = 0; i < p->n_protected; i++)
        if (!add_ident(p, p->protected_files[i], true, -1))
            return false;
    return true;
}

/* ---- process masks: the deny targets and their identities at compile time ---- */

/* The path a deny pattern names literally: the pattern itself when it has no wildcard,
 * X for "X/ **" (no space) (X and everything in it, also what is created there later). NULL for
 * other patterns (no mount can express them) and on failure. Caller frees. */
char *abx_pol_deny_target(const char *glob)
{
    size_t n = strlen(glob);
    char *t = n > 3 && strcmp(glob + n - 3, "/**") == 0 ? abx_strndup(glob, n - 3) : abx_strdup(glob);
    if (t && strpbrk(t, "*?")) {
        abx_free(t);
        t = NULL;
    }
    return t;
}

static bool ident_add_stmt(abx_mask_ident *m, size_t stmt)
{
    for (size_t i = 0; i < m->n_stmts; i++)
        if (m->stmts[i] == stmt)
            return true;
    size_t *g = abx_realloc(m->stmts, (m->n_stmts + 1) * sizeof *g);
    if (!g)
        return false;
    m->stmts = g;
    m->stmts[m->n_stmts++] = stmt;
    return true;
}

/* One entry per distinct deny target, with the deny statements that name it. The O_PATH
 * descriptor keeps the file's identity (and finds its current name) for as long as the
 * snapshot lives, without reading it. */
static bool record_mask_ident(abx_policy *p, char *t, size_t stmt)
{
    for (size_t i = 0; i < p->n_mask_ident; i++)
        if (strcmp(p->mask_ident[i].path, t) == 0) {
            abx_free(t);
            return ident_add_stmt(&p->mask_ident[i], stmt);
        }
    abx_mask_ident *g = abx_realloc(p->mask_ident, (p->n_mask_ident + 1) * sizeof *g);
    if (!g) {
        abx_free(t);
        return false;
    }
    p->mask_ident = g;
    abx_mask_ident *m = &g[p->n_mask_ident++];
    memset(m, 0, sizeof *m);
    m->path = t;
    m->fd = open(t, O_PATH | O_NOFOLLOW | O_CLOEXEC);
    struct stat st;
    if (m->fd >= 0 && fstat(m->fd, &st) == 0) {
        m->known = true;
        m->dev = st.st_dev;
        m->ino = st.st_ino;
    } else if (m->fd >= 0) {
        close(m->fd);
        m->fd = -1;
    }
    return ident_add_stmt(m, stmt);
}

static bool record_mask_idents(abx_policy *p)
{
    for (size_t i = 0; i < p->n_deny; i++)
        for (int k = 0; k < ABX_ACC_IDX__N; k++)
            for (size_t j = 0; j < p->deny[i].n_paths[k]; j++) {
                char *t = abx_pol_deny_target(p->deny[i].paths[k][j].glob); /* NULL: a glob no mount expresses */
                if (t && !record_mask_ident(p, t, i))
                    return false;
            }
    return true;
}

/* The policy block itself: a mapping of known keys; sets c->strict. */
static bool read_policy_block(cctx *c, const json_t *pol)
{
    static const char *const pkeys[] = {"strict", "presets", "allow", "deny", NULL};
    if (pol && !json_is_object(pol)) {
        abx_diag_add(c->d, "error", "config.invalid", abx_pol_line_of(c, pol, NULL), "'policy' must be a mapping");
        return false;
    }
    if (pol && !abx_pol_check_keys(c, pol, pkeys, "policy"))
        return false;
    const json_t *strict = pol ? json_object_get(pol, "strict") : NULL;
    if (strict && !json_is_boolean(strict)) {
        abx_diag_add(c->d, "error", "config.bad_value", abx_pol_line_of(c, pol, "strict"),
                     "'strict' must be a boolean");
        return false;
    }
    c->strict = !strict || json_is_true(strict);
    return true;
}

/* anonymous ops: an implicit statement (default: core.health only) */
static bool add_anonymous(cctx *c, json_t *anon)
{
    json_t *st = json_pack("{s:O?, s:[s]}", "ops", anon, "principals", "anonymous");
    if (!anon)
        json_object_set_new(st, "ops", json_pack("[s]", "core.health"));
    abx_stmt s;
    bool ok = abx_pol_parse_stmt(c, &s, st, true, "auth.anonymous");
    json_decref(st);
    if (!ok || !abx_pol_add_stmt(&c->p->allow, &c->p->n_allow, &s)) {
        abx_pol_stmt_release(&s);
        return false;
    }
    return true;
}

static bool preset_named(const json_t *pol, const char *name)
{
    size_t i;
    json_t *it;
    json_array_foreach(json_object_get(pol, "presets"), i, it) if (json_is_string(it) &&
                                                                   !strcmp(json_string_value(it), name)) return true;
    return false;
}

/* No policy block means the workspace preset; otherwise the presets it names; a file
 * that extends the embedded default has it too. */
static bool add_presets(cctx *c, const json_t *pol)
{
    if (!pol || (c->in->extends_default && !preset_named(pol, "workspace")))
        if (!expand_preset(c, "workspace", 0, c->in->default_net))
            return false;
    if (!pol || !json_object_get(pol, "presets"))
        return true;
    char **names;
    size_t n;
    if (!abx_pol_strlist(c, pol, "presets", &names, &n))
        return false;
    bool ok = true;
    for (size_t i = 0; i < n && ok; i++)
        ok = expand_preset(c, names[i], abx_pol_line_of(c, pol, "presets"), NULL);
    abx_pol_free_strlist(names, n);
    return ok;
}

/* policy.allow and policy.deny, labelled "allow[i]" and "deny[i]". */
static bool add_statements(cctx *c, const json_t *pol)
{
    static const char *const sides[] = {"allow", "deny"};
    abx_policy *p = c->p;
    for (int side = 0; side < 2 && pol; side++) {
        const json_t *list = json_object_get(pol, sides[side]);
        if (!list)
            continue;
        if (!json_is_array(list)) {
            abx_diag_add(c->d, "error", "config.invalid", abx_pol_line_of(c, pol, sides[side]),
                         "'policy.%s' must be a list", sides[side]);
            return false;
        }
        size_t i;
        json_t *it;
        json_array_foreach(list, i, it)
        {
            char label[32];
            snprintf(label, sizeof label, "%s[%zu]", sides[side], i);
            abx_stmt s;
            if (!abx_pol_parse_stmt(c, &s, it, side == 0, label) ||
                !abx_pol_add_stmt(side == 0 ? &p->allow : &p->deny, side == 0 ? &p->n_allow : &p->n_deny, &s)) {
                abx_pol_stmt_release(&s);
                return false;
            }
        }
    }
    return true;
}

/* What the snapshot precomputes once the statements stand: deny identities, the
 * admission counters, the mount table and the process masks. */
static bool derive_tables(cctx *c)
{
    abx_policy *p = c->p;
    for (size_t i = 0; i < p->n_principals; i++)
        for (size_t r = 0; r < p->principals[i].n_roles; r++)
            if (strcmp(p->principals[i].roles[r], "approver") == 0)
                p->has_approver = true;
    if (!compile_idents(p) || !abx_pol_build_identset(p)) {
        abx_diag_add(c->d, "error", "config.internal", 0, "out of memory resolving deny identities");
        return false;
    }
    p->concurrency = abx_calloc(p->n_allow + 1, sizeof *p->concurrency);
    p->rate_tat = abx_calloc((p->n_principals + 1) * p->n_allow + 1, sizeof *p->rate_tat);
    if (!build_mount_table(c) || !p->concurrency || !p->rate_tat || !record_mask_idents(p)) {
        abx_diag_add(c->d, "error", "config.internal", 0, "out of memory building the mount table");
        return false;
    }
    return true;
}

abx_policy *abx_policy_compile(const abx_policy_input *in, abx_diags *diags)
{
    abx_policy *p = abx_calloc(1, sizeof *p);
    if (!p)
        return NULL;
    atomic_init(&p->refs, 1);
    p->reg = in->reg;
    if (abx_path_canon("/", in->workspace ? in->workspace : "/", &p->workspace) != 0) {
        abx_diag_add(diags, "error", "config.bad_value", 0, "workspace '%s' cannot be canonicalized", in->workspace);
        abx_pol_policy_free(p);
        return NULL;
    }
    cctx c = {p, in, diags, true};
    size_t errors_before = diags->errors;
    for (size_t i = 0; i < in->n_protected; i++)
        if (in->protected_files[i])
            abx_pol_add_protected(p, in->protected_files[i],
                                  in->protected_what ? in->protected_what[i] : "abx's own file");
    json_t *anon = NULL;
    if (!abx_pol_parse_auth(&c, in->auth, &anon) || !read_policy_block(&c, in->policy) || !abx_pol_parse_egress(&c, in->egress) || !add_anonymous(&c, anon) ||
        !add_presets(&c, in->policy) || !add_statements(&c, in->policy))
        goto fail;
    abx_pol_lint_scope_required(p, in->allow_lint_errors, diags);
    abx_pol_check_state_layout(&c);
    if (diags->errors > errors_before || !derive_tables(&c))
        goto fail;
    abx_pol_lint_unmaskable_denies(p, diags);
    return p;
fail:
    abx_pol_policy_free(p);
    return NULL;
}
