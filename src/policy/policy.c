/* policy.c — compile auth + policy config into an immutable snapshot, and decide.
 * The algebra (POLICY.md): default deny; a matching deny wins; protected areas are
 * denied unless an unsafe statement names them; otherwise at least one mounting
 * statement must admit the call with all its scopes; limits are the tightest over
 * admitting statements. Decisions never depend on statement order or duplication.
 * Nothing outside the caller's scope is looked up while deciding (no existence
 * oracle). Literal deny paths and protected files are also bound by identity
 * (st_dev, st_ino, resolved at compile time) for the handlers' opens to re-check.
 * Must never touch file contents or spawn anything. */
#include "policy/policy.h"
#include "core/yaml.h"
#include "core/util.h"
#include "policy/paths.h"
#include "policy/url.h"
#include "sandbox/jail.h"
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

/* ---- freeing ---- */

static void stmt_release(abx_stmt *s)
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
    char **lists[] = {s->env_allow, s->urls, s->languages, s->agents};
    size_t counts[] = {s->n_env, s->n_urls, s->n_languages, s->n_agents};
    for (size_t l = 0; l < 4; l++) {
        for (size_t i = 0; i < counts[l]; i++)
            abx_free(lists[l][i]);
        abx_free(lists[l]);
    }
}

static void policy_free(abx_policy *p)
{
    for (size_t i = 0; i < p->n_principals; i++) {
        abx_free(p->principals[i].id);
        for (size_t r = 0; r < p->principals[i].n_roles; r++)
            abx_free(p->principals[i].roles[r]);
        abx_free(p->principals[i].roles);
    }
    abx_free(p->principals);
    for (size_t i = 0; i < p->n_allow; i++)
        stmt_release(&p->allow[i]);
    for (size_t i = 0; i < p->n_deny; i++)
        stmt_release(&p->deny[i]);
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
        policy_free(p);
}

/* ---- compile helpers ---- */

typedef struct cctx {
    abx_policy *p;
    const abx_policy_input *in;
    abx_diags *d;
    bool strict;
    bool in_preset;  /* abx's own presets: their deliberate choices are not lint errors */
} cctx;

static void add_protected(abx_policy *p, const char *path, const char *what);

static int line_of(cctx *c, const json_t *obj, const char *key)
{
    if (!c->in->lines)
        return 0;
    int l = key ? abx_linemap_key_line(c->in->lines, obj, key) : 0;
    return l ? l : abx_linemap_line(c->in->lines, obj);
}

static bool strlist(cctx *c, const json_t *parent, const char *key, char ***out, size_t *n)
{
    const json_t *v = json_object_get(parent, key);
    *out = NULL;
    *n = 0;
    if (!v)
        return true;
    if (json_is_string(v)) { /* a single string is accepted as a one-element list */
        *out = abx_calloc(1, sizeof **out);
        (*out)[0] = abx_strdup(json_string_value(v));
        *n = 1;
        return true;
    }
    if (!json_is_array(v)) {
        abx_diag_add(c->d, "error", "config.invalid", line_of(c, parent, key), "'%s' must be a list of strings", key);
        return false;
    }
    *out = abx_calloc(json_array_size(v) + 1, sizeof **out);
    size_t i;
    json_t *it;
    json_array_foreach(v, i, it)
    {
        if (!json_is_string(it)) {
            abx_diag_add(c->d, "error", "config.invalid", line_of(c, it, NULL), "'%s' must contain only strings", key);
            for (size_t k = 0; k < *n; k++)
                abx_free((*out)[k]);
            abx_free(*out);
            *out = NULL;
            *n = 0;
            return false;
        }
        (*out)[(*n)++] = abx_strdup(json_string_value(it));
    }
    return true;
}

static void free_strlist(char **l, size_t n)
{
    for (size_t i = 0; i < n; i++)
        abx_free(l[i]);
    abx_free(l);
}

static size_t root_index(cctx *c, const char *root)
{
    abx_policy *p = c->p;
    for (size_t i = 0; i < p->n_roots; i++)
        if (strcmp(p->roots[i], root) == 0)
            return i;
    char **r = abx_realloc(p->roots, (p->n_roots + 1) * sizeof *r);
    int *f = abx_realloc(p->rootfds, (p->n_roots + 1) * sizeof *f);
    if (r)
        p->roots = r;
    if (f)
        p->rootfds = f;
    if (!r || !f)
        return (size_t)-1;
    p->roots[p->n_roots] = abx_strdup(root);
    int fd = abx_jail_open_root(root);
    p->rootfds[p->n_roots] = fd >= 0 ? fd : -1;
    return p->n_roots++;
}

/* A pattern as written → canonical pattern: "~" is not expanded; relative patterns are
 * anchored at the workspace; the literal prefix is canonicalized (symlinks resolved)
 * so that patterns and arguments are compared in the same space. */
static char *canon_glob(const char *workspace, const char *pat, char *err, size_t errlen)
{
    char *joined = NULL;
    if (pat[0] != '/')
        joined = abx_asprintf("%s/%s", strcmp(workspace, "/") == 0 ? "" : workspace, pat);
    const char *use = joined ? joined : pat;
    if (!abx_glob_valid(use, err, errlen)) {
        abx_free(joined);
        return NULL;
    }
    char *root = abx_glob_root(use);
    char *croot = NULL;
    char *out = NULL;
    /* the literal part of the pattern: canonicalize it, keep the glob tail */
    size_t rl = strlen(root);
    bool exact = strpbrk(use, "*?") == NULL;
    if (exact) {
        if (abx_path_canon("/", use, &out) != 0)
            out = abx_strdup(use);
    } else if (abx_path_canon("/", root, &croot) == 0) {
        const char *tail = use + rl;
        if (strcmp(root, "/") == 0)
            tail = use; /* pattern root "/" : tail starts with '/' already */
        out = abx_asprintf("%s%s", strcmp(croot, "/") == 0 ? "" : croot, tail);
    } else {
        out = abx_strdup(use);
    }
    abx_free(croot);
    abx_free(root);
    abx_free(joined);
    return out;
}

static char *canon_pattern(cctx *c, const char *pat, int line)
{
    char err[160];
    char *out = canon_glob(c->p->workspace, pat, err, sizeof err);
    if (!out)
        abx_diag_add(c->d, "error", "config.bad_glob", line, "path pattern '%s': %s", pat, err);
    return out;
}

/* The intrinsic jail of a path parameter (abx_param.roots, patterns joined by '|'):
 * the canonical value must match one of them whatever the statement grants. */
static bool intrinsic_admits(const abx_policy *p, const abx_param *pa, const char *canonical)
{
    if (!pa->roots)
        return true;
    char buf[4096];
    snprintf(buf, sizeof buf, "%s", pa->roots);
    bool hit = false;
    for (char *save = NULL, *t = strtok_r(buf, "|", &save); t && !hit; t = strtok_r(NULL, "|", &save)) {
        char err[160];
        char *g = canon_glob(p->workspace, t, err, sizeof err);
        hit = g && abx_glob_match(g, canonical);
        abx_free(g);
    }
    return hit;
}

static bool add_patterns(cctx *c, abx_stmt *s, int k, const json_t *list, int line)
{
    if (json_is_string(list)) {
        json_t *tmp = json_pack("[O]", list);
        bool ok = add_patterns(c, s, k, tmp, line);
        json_decref(tmp);
        return ok;
    }
    if (!json_is_array(list)) {
        abx_diag_add(c->d, "error", "config.invalid", line, "path scope must be a list of patterns");
        return false;
    }
    size_t i;
    json_t *it;
    json_array_foreach(list, i, it)
    {
        if (!json_is_string(it)) {
            abx_diag_add(c->d, "error", "config.invalid", line, "path patterns must be strings");
            return false;
        }
        char *g = canon_pattern(c, json_string_value(it), line);
        if (!g)
            return false;
        char *root = abx_glob_root(g);
        size_t ri = root ? root_index(c, root) : (size_t)-1;
        abx_free(root);
        abx_pattern *grown = abx_realloc(s->paths[k], (s->n_paths[k] + 1) * sizeof *grown);
        if (!grown || ri == (size_t)-1) {
            abx_free(g);
            abx_diag_add(c->d, "error", "config.internal", line, "out of memory");
            return false;
        }
        s->paths[k] = grown;
        s->paths[k][s->n_paths[k]++] = (abx_pattern){g, ri};
    }
    return true;
}

static bool parse_paths(cctx *c, abx_stmt *s, const json_t *stmt)
{
    const json_t *v = json_object_get(stmt, "paths");
    if (!v)
        return true;
    int line = line_of(c, stmt, "paths");
    s->has_paths = true;
    if (json_is_array(v) || json_is_string(v)) { /* shorthand: read, write and delete */
        for (int k = 0; k < ABX_ACC_IDX__N; k++)
            if (!add_patterns(c, s, k, v, line))
                return false;
        return true;
    }
    if (!json_is_object(v)) {
        abx_diag_add(c->d, "error", "config.invalid", line, "'paths' must be a list or {read, write, delete}");
        return false;
    }
    static const char *const names[] = {"read", "write", "delete"};
    const char *key;
    json_t *val;
    json_object_foreach((json_t *)v, key, val)
    {
        int k = -1;
        for (int i = 0; i < 3; i++)
            if (strcmp(key, names[i]) == 0)
                k = i;
        if (k < 0) {
            abx_diag_add(c->d, "error", "config.unknown_key", line_of(c, v, key),
                         "unknown access kind '%s' in paths (read, write, delete)", key);
            return false;
        }
        if (!add_patterns(c, s, k, val, line_of(c, v, key)))
            return false;
    }
    return true;
}

static const char *const limit_keys[ABX_LIM__COUNT] = {"timeout", "max_output_bytes", "max_bytes", "max_entries",
                                                       "rate", "concurrency", "memory", "pids", "cpu"};

static int64_t parse_rate_per_min(const char *s)
{
    char *end;
    double n = strtod(s, &end);
    if (end == s || n <= 0)
        return -1;
    if (strcmp(end, "/s") == 0)
        return (int64_t)(n * 60);
    if (strcmp(end, "/min") == 0 || strcmp(end, "/m") == 0)
        return (int64_t)n;
    if (strcmp(end, "/h") == 0)
        return (int64_t)(n / 60) > 0 ? (int64_t)(n / 60) : 1;
    return -1;
}

static bool parse_limits(cctx *c, abx_stmt *s, const json_t *stmt)
{
    for (int i = 0; i < ABX_LIM__COUNT; i++)
        s->limits[i] = -1;
    const json_t *v = json_object_get(stmt, "limits");
    if (!v)
        return true;
    if (!json_is_object(v)) {
        abx_diag_add(c->d, "error", "config.invalid", line_of(c, stmt, "limits"), "'limits' must be a mapping");
        return false;
    }
    const char *key;
    json_t *val;
    json_object_foreach((json_t *)v, key, val)
    {
        int k = -1;
        for (int i = 0; i < ABX_LIM__COUNT; i++)
            if (strcmp(limit_keys[i], key) == 0)
                k = i;
        int line = line_of(c, v, key);
        if (k < 0) {
            abx_diag_add(c->d, "error", "config.unknown_key", line, "unknown limit '%s'", key);
            return false;
        }
        int64_t x = -1;
        char num[64];
        const char *text = json_is_string(val) ? json_string_value(val) : NULL;
        if (!text && json_is_number(val)) {
            snprintf(num, sizeof num, "%.17g", json_number_value(val));
            text = num;
        }
        if (text) {
            unsigned bit = 1u << k;
            if (bit == ABX_LIM_TIMEOUT)
                x = abx_parse_duration_ms(text);
            else if (bit == ABX_LIM_MAX_OUTPUT_BYTES || bit == ABX_LIM_MAX_BYTES || bit == ABX_LIM_MEMORY)
                x = abx_parse_size(text);
            else if (bit == ABX_LIM_RATE) {
                x = parse_rate_per_min(text);
                char *end;
                double cnt = strtod(text, &end);
                s->rate_count = cnt >= 1 ? (int64_t)cnt : 1;
                s->rate_window_ms = strcmp(end, "/s") == 0 ? 1000 : strcmp(end, "/h") == 0 ? 3600000 : 60000;
            }
            else if (bit == ABX_LIM_CPU) {
                char *end;
                double d = strtod(text, &end);
                x = (end != text && !*end && d > 0) ? (int64_t)(d * 1000) : -1;
            } else if (json_is_integer(val) && json_integer_value(val) >= 1)
                x = json_integer_value(val);
        }
        if (x < 0 || (x == 0 && (1u << k) != ABX_LIM_TIMEOUT)) {
            abx_diag_add(c->d, "error", "config.bad_value", line, "limit '%s' has an invalid value", key);
            return false;
        }
        s->limits[k] = x;
    }
    return true;
}

/* Does an op selector match? allow_side: explicit-only ops match only exact ids. */
static bool sel_match(const abx_sel *s, const abx_op *op, bool allow_side)
{
    switch (s->kind) {
    case ABX_SEL_EXACT:
        if (strcmp(s->text, op->id) == 0)
            return true;
        for (size_t a = 0; a < ABX_MAX_ALIASES && op->def->aliases[a]; a++)
            if (strcmp(s->text, op->def->aliases[a]) == 0)
                return true;
        return false;
    case ABX_SEL_ALL:
        return !(allow_side && op->explicit_only);
    case ABX_SEL_NS:
        return !(allow_side && op->explicit_only) && abx_id_is_prefix(s->text, op->id);
    case ABX_SEL_GROUP:
        return !(allow_side && op->explicit_only) && op->def->group && strcmp(op->def->group, s->text) == 0;
    case ABX_SEL_EFFECT:
        if (allow_side)
            return !op->explicit_only && (op->effects & ~s->effects) == 0;
        return (op->effects & s->effects) != 0;
    }
    return false;
}

static void suggest(cctx *c, const char *text, char *out, size_t outlen)
{
    int best = 3;
    out[0] = '\0';
    for (size_t i = 0; i < abx_registry_count(c->p->reg); i++) {
        const abx_op *op = abx_registry_at(c->p->reg, i);
        int d = abx_edit_distance(text, op->id, 2);
        if (d < best) {
            best = d;
            snprintf(out, outlen, "%s", op->id);
        }
    }
}

static bool parse_ops(cctx *c, abx_stmt *s, const json_t *stmt, bool allow_side)
{
    char **list;
    size_t n;
    if (!strlist(c, stmt, "ops", &list, &n))
        return false;
    int line = line_of(c, stmt, "ops");
    s->ops = abx_calloc(n + 1, sizeof *s->ops);
    for (size_t i = 0; i < n; i++) {
        const char *t = list[i];
        abx_sel *sel = &s->ops[s->n_ops++];
        if (strcmp(t, "*") == 0) {
            sel->kind = ABX_SEL_ALL;
            sel->text = abx_strdup("*");
        } else if (strncmp(t, "group:", 6) == 0) {
            sel->kind = ABX_SEL_GROUP;
            sel->text = abx_strdup(t + 6);
        } else if (strncmp(t, "effect:", 7) == 0) {
            sel->kind = ABX_SEL_EFFECT;
            sel->text = abx_strdup(t + 7);
            char tmp[128];
            snprintf(tmp, sizeof tmp, "%s", t + 7);
            for (char *save = NULL, *e = strtok_r(tmp, ",", &save); e; e = strtok_r(NULL, ",", &save)) {
                unsigned bit = abx_effect_parse(e);
                if (!bit) {
                    abx_diag_add(c->d, "error", "config.unknown_selector", line, "unknown effect '%s' in '%s'", e, t);
                    free_strlist(list, n);
                    return false;
                }
                sel->effects |= bit;
            }
        } else if (strlen(t) > 2 && strcmp(t + strlen(t) - 2, ".*") == 0) {
            sel->kind = ABX_SEL_NS;
            sel->text = abx_strndup(t, strlen(t) - 2);
        } else {
            sel->kind = ABX_SEL_EXACT;
            const abx_op *op = abx_registry_resolve(c->p->reg, t);
            if (op && strcmp(op->id, t) != 0) {
                abx_diag_add(c->d, "warning", "config.alias_used", line, "'%s' is a deprecated alias of '%s': rewritten to the canonical id (write '%s')", t, op->id, op->id);
                sel->text = abx_strdup(op->id);
            } else {
                sel->text = abx_strdup(t);
            }
        }
        /* strict: a selector that matches no registered op is an error */
        bool any = false;
        for (size_t o = 0; o < abx_registry_count(c->p->reg) && !any; o++)
            any = sel_match(sel, abx_registry_at(c->p->reg, o), false);
        if (!any) {
            char sug[ABX_ID_MAX];
            suggest(c, t, sug, sizeof sug);
            abx_diag_add(c->d, c->strict ? "error" : "warning", "config.unknown_selector", line,
                         "selector '%s' matches no registered operation%s%s%s", t, sug[0] ? " (did you mean '" : "",
                         sug, sug[0] ? "'?)" : "");
            if (c->strict) {
                free_strlist(list, n);
                return false;
            }
        }
    }
    (void)allow_side;
    free_strlist(list, n);
    return true;
}

static bool check_keys(cctx *c, const json_t *obj, const char *const *allowed, const char *what)
{
    const char *key;
    json_t *val;
    json_object_foreach((json_t *)obj, key, val)
    {
        bool ok = false;
        for (const char *const *a = allowed; *a; a++)
            if (strcmp(*a, key) == 0)
                ok = true;
        if (!ok) {
            abx_diag_add(c->d, "error", "config.unknown_key", line_of(c, obj, key), "unknown key '%s' in %s", key,
                         what);
            return false;
        }
    }
    return true;
}


static bool parse_commands(cctx *c, abx_stmt *s, const json_t *stmt)
{
    const json_t *v = json_object_get(stmt, "commands");
    if (!v)
        return true;
    int line = line_of(c, stmt, "commands");
    s->has_commands = true;
    const json_t *list = v;
    if (json_is_object(v)) {
        static const char *const keys[] = {"allow", "path", "env", "shell", "unrestricted", "unsafe", NULL};
        if (!check_keys(c, v, keys, "commands"))
            return false;
        list = json_object_get(v, "allow");
        const json_t *path = json_object_get(v, "path"), *shell = json_object_get(v, "shell"),
                     *unr = json_object_get(v, "unrestricted"), *uns = json_object_get(v, "unsafe");
        if ((path && !json_is_string(path)) || (shell && !json_is_boolean(shell)) || (unr && !json_is_boolean(unr)) ||
            (uns && !json_is_boolean(uns))) {
            abx_diag_add(c->d, "error", "config.bad_value", line,
                         "commands: 'path' is a string; 'shell', 'unrestricted', 'unsafe' are booleans");
            return false;
        }
        if (path)
            s->cmd_path = abx_strdup(json_string_value(path));
        s->cmd_shell = json_is_true(shell);
        s->cmd_unrestricted = json_is_true(unr);
        if (s->cmd_unrestricted && !json_is_true(uns)) {
            abx_diag_add(c->d, "error", "config.unsafe_scope", line,
                         "commands: {unrestricted: true} must also say unsafe: true");
            return false;
        }
        if (s->cmd_unrestricted && !c->in_preset)
            abx_diag_add(c->d, c->in->allow_lint_errors ? "warning" : "error", "config.unsafe_scope", line,
                         "%s allows any command (unrestricted); set allow_lint_errors: true to accept this",
                         s->label);
        if (!strlist(c, v, "env", &s->env_allow, &s->n_env))
            return false;
    }
    if (list && !json_is_array(list)) {
        abx_diag_add(c->d, "error", "config.invalid", line, "command patterns must be a list of strings");
        return false;
    }
    size_t n = json_array_size(list);
    s->cmds = abx_calloc(n + 1, sizeof *s->cmds);
    for (size_t i = 0; i < n; i++) {
        const json_t *it = json_array_get(list, i);
        char err[300];
        if (!json_is_string(it) ||
            abx_cmd_pattern_compile(json_string_value(it), s->cmd_path, &s->cmds[s->n_cmds], err, sizeof err) != 0) {
            abx_diag_add(c->d, "error", "config.bad_command_pattern", line, "%s",
                         json_is_string(it) ? err : "command patterns must be strings");
            return false;
        }
        s->n_cmds++;
    }
    if (!s->n_cmds && !s->cmd_unrestricted) {
        abx_diag_add(c->d, "warning", "config.never_matches", line, "%s has an empty command scope", s->label);
    }
    return true;
}

static bool parse_name_scope(cctx *c, const json_t *stmt, const char *key, bool *has, char ***out, size_t *n)
{
    if (!json_object_get(stmt, key))
        return true;
    *has = true;
    if (!strlist(c, stmt, key, out, n))
        return false;
    if (strcmp(key, "urls") == 0)
        for (size_t i = 0; i < *n; i++) {
            char err[200];
            if (!abx_url_pattern_valid((*out)[i], err, sizeof err)) {
                abx_diag_add(c->d, "error", "config.bad_url_pattern", line_of(c, stmt, key), "url pattern '%s': %s",
                             (*out)[i], err);
                return false;
            }
        }
    return true;
}

static bool parse_stmt(cctx *c, abx_stmt *s, const json_t *stmt, bool allow_side, const char *label)
{
    static const char *const allow_keys[] = {"id", "ops", "principals", "paths", "limits", "approval", "unsafe",
                                             "commands", "net", "urls", "languages", "agents", NULL};
    static const char *const deny_keys[] = {"id", "ops", "principals", "paths", "commands", "urls", NULL};
    memset(s, 0, sizeof *s);
    snprintf(s->label, sizeof s->label, "%s", label);
    for (int i = 0; i < ABX_LIM__COUNT; i++)
        s->limits[i] = -1;
    if (!json_is_object(stmt)) {
        abx_diag_add(c->d, "error", "config.invalid", line_of(c, stmt, NULL), "%s must be a mapping", label);
        return false;
    }
    s->line = line_of(c, stmt, NULL);
    if (!check_keys(c, stmt, allow_side ? allow_keys : deny_keys, label))
        return false;
    const json_t *id = json_object_get(stmt, "id");
    if (id) {
        if (!json_is_string(id)) {
            abx_diag_add(c->d, "error", "config.invalid", line_of(c, stmt, "id"), "'id' must be a string");
            return false;
        }
        snprintf(s->label, sizeof s->label, "%s", json_string_value(id));
    }
    if (!parse_ops(c, s, stmt, allow_side))
        return false;
    if (!strlist(c, stmt, "principals", &s->principals, &s->n_principals))
        return false;
    if (allow_side && s->n_ops == 0) {
        abx_diag_add(c->d, "error", "config.invalid", s->line, "%s needs 'ops'", label);
        return false;
    }
    if (allow_side && s->n_principals == 0) {
        abx_diag_add(c->d, "error", "config.invalid", s->line, "%s needs 'principals'", label);
        return false;
    }
    if (!parse_paths(c, s, stmt) || !parse_commands(c, s, stmt) ||
        !parse_name_scope(c, stmt, "urls", &s->has_urls, &s->urls, &s->n_urls))
        return false;
    if (!allow_side && s->has_commands && (s->cmd_unrestricted || s->cmd_shell || s->n_env)) {
        abx_diag_add(c->d, "error", "config.invalid", s->line, "a deny statement's commands are a list of patterns");
        return false;
    }
    if (allow_side) {
        if (!parse_name_scope(c, stmt, "languages", &s->has_languages, &s->languages, &s->n_languages) ||
            !parse_name_scope(c, stmt, "agents", &s->has_agents, &s->agents, &s->n_agents))
            return false;
        const json_t *net = json_object_get(stmt, "net");
        if (net && !json_is_boolean(net)) {
            abx_diag_add(c->d, "error", "config.bad_value", line_of(c, stmt, "net"), "'net' must be a boolean");
            return false;
        }
        s->has_net = net != NULL;
        s->net = json_is_true(net);
        if (!parse_limits(c, s, stmt))
            return false;
        const json_t *ap = json_object_get(stmt, "approval");
        if (ap) {
            if (!json_is_string(ap) || (strcmp(json_string_value(ap), "required") != 0 &&
                                        strcmp(json_string_value(ap), "none") != 0)) {
                abx_diag_add(c->d, "error", "config.bad_value", line_of(c, stmt, "approval"),
                             "'approval' must be 'required' or 'none'");
                return false;
            }
            s->approval = strcmp(json_string_value(ap), "required") == 0;
        }
        const json_t *un = json_object_get(stmt, "unsafe");
        if (un && !json_is_boolean(un)) {
            abx_diag_add(c->d, "error", "config.bad_value", line_of(c, stmt, "unsafe"), "'unsafe' must be a boolean");
            return false;
        }
        s->unsafe = json_is_true(un);
        if (s->unsafe)
            abx_diag_add(c->d, c->in->allow_lint_errors ? "warning" : "error", "config.unsafe_scope", s->line,
                         "%s is unsafe: it may reach protected areas; set allow_lint_errors: true to accept this",
                         s->label);
    }
    return true;
}

static bool principal_matches(const abx_policy *p, int slot, const char *sel)
{
    bool anon = slot == (int)p->n_principals;
    if (strcmp(sel, "anonymous") == 0)
        return anon;
    if (anon)
        return false;
    const abx_principal *pr = &p->principals[slot];
    if (strcmp(sel, "*") == 0)
        return true;
    if (strncmp(sel, "role:", 5) == 0) {
        for (size_t r = 0; r < pr->n_roles; r++)
            if (strcmp(pr->roles[r], sel + 5) == 0)
                return true;
        return false;
    }
    return strcmp(pr->id, sel) == 0;
}

static bool stmt_has_principal(const abx_policy *p, const abx_stmt *s, int slot)
{
    for (size_t i = 0; i < s->n_principals; i++)
        if (principal_matches(p, slot, s->principals[i]))
            return true;
    return false;
}

static bool stmt_has_op(const abx_stmt *s, const abx_op *op, bool allow_side)
{
    for (size_t i = 0; i < s->n_ops; i++)
        if (sel_match(&s->ops[i], op, allow_side))
            return true;
    return false;
}

static bool read_token_source(cctx *c, const json_t *t, int line, unsigned char sha[32], bool *has)
{
    const json_t *hex = json_object_get(t, "token_sha256"), *env = json_object_get(t, "token_env"),
                 *file = json_object_get(t, "token_file"), *plain = json_object_get(t, "token");
    int n = !!hex + !!env + !!file + !!plain;
    *has = false;
    if (n != 1) {
        abx_diag_add(c->d, "error", "config.invalid", line,
                     "a token needs exactly one of token_sha256, token_env, token_file, token");
        return false;
    }
    if (hex) {
        const char *h = json_is_string(hex) ? json_string_value(hex) : "";
        if (strlen(h) != 64 || abx_unhex(h, 64, sha, 32) != 32) {
            abx_diag_add(c->d, "error", "config.bad_value", line, "token_sha256 must be 64 hex digits");
            return false;
        }
        *has = true;
        return true;
    }
    char *secret = NULL;
    if (env) {
        const char *v = json_is_string(env) ? getenv(json_string_value(env)) : NULL;
        if (!v || !*v) {
            abx_diag_add(c->d, "error", "config.token_unavailable", line, "environment variable '%s' is not set",
                         json_is_string(env) ? json_string_value(env) : "?");
            return false;
        }
        secret = abx_strdup(v);
    } else if (file) {
        const char *path = json_is_string(file) ? json_string_value(file) : "";
        FILE *f = fopen(path, "re");
        char buf[4096];
        size_t got = f ? fread(buf, 1, sizeof buf - 1, f) : 0;
        if (f)
            fclose(f);
        if (!f || got == 0) {
            abx_diag_add(c->d, "error", "config.token_unavailable", line, "cannot read token_file '%s'", path);
            return false;
        }
        add_protected(c->p, path, "a principal's token_file");
        buf[got] = '\0';
        while (got && (buf[got - 1] == '\n' || buf[got - 1] == '\r' || buf[got - 1] == ' '))
            buf[--got] = '\0';
        secret = abx_strdup(buf);
    } else {
        abx_diag_add(c->d, "warning", "config.plaintext_token", line,
                     "token in plain text; prefer token_sha256, token_env or token_file");
        secret = abx_strdup(json_is_string(plain) ? json_string_value(plain) : "");
    }
    if (!secret || strlen(secret) < 16) {
        abx_diag_add(c->d, "error", "config.weak_token", line, "a token must have at least 16 characters");
        abx_free(secret);
        return false;
    }
    abx_sha256 h;
    abx_sha256_init(&h);
    abx_sha256_update(&h, secret, strlen(secret));
    abx_sha256_final(&h, sha);
    explicit_bzero(secret, strlen(secret));
    abx_free(secret);
    *has = true;
    return true;
}

static bool parse_auth(cctx *c, const json_t *auth, json_t **anon_ops)
{
    abx_policy *p = c->p;
    static const char *const keys[] = {"tokens", "anonymous", NULL};
    *anon_ops = NULL;
    if (!auth) {
        if (c->in->default_token_sha256_hex) {
            p->principals = abx_calloc(1, sizeof *p->principals);
            p->principals[0].id = abx_strdup("local");
            p->principals[0].roles = abx_calloc(1, sizeof(char *));
            p->principals[0].roles[0] = abx_strdup("owner");
            p->principals[0].n_roles = 1;
            abx_unhex(c->in->default_token_sha256_hex, 64, p->principals[0].token_sha256, 32);
            p->principals[0].has_token = true;
            p->n_principals = 1;
        }
        return true;
    }
    if (!json_is_object(auth)) {
        abx_diag_add(c->d, "error", "config.invalid", line_of(c, auth, NULL), "'auth' must be a mapping");
        return false;
    }
    if (!check_keys(c, auth, keys, "auth"))
        return false;
    const json_t *tokens = json_object_get(auth, "tokens");
    if (tokens && !json_is_array(tokens)) {
        abx_diag_add(c->d, "error", "config.invalid", line_of(c, auth, "tokens"), "'auth.tokens' must be a list");
        return false;
    }
    size_t n = json_array_size(tokens);
    p->principals = abx_calloc(n + 1, sizeof *p->principals);
    static const char *const tkeys[] = {"principal", "roles", "token_sha256", "token_env", "token_file", "token",
                                        "expires_at", NULL};
    for (size_t i = 0; i < n; i++) {
        const json_t *t = json_array_get(tokens, i);
        int line = line_of(c, t, NULL);
        if (!json_is_object(t)) {
            abx_diag_add(c->d, "error", "config.invalid", line, "auth.tokens[%zu] must be a mapping", i);
            return false;
        }
        if (!check_keys(c, t, tkeys, "auth.tokens[]"))
            return false;
        const json_t *pid = json_object_get(t, "principal");
        if (!json_is_string(pid) || !*json_string_value(pid) || strncmp(json_string_value(pid), "role:", 5) == 0 ||
            strcmp(json_string_value(pid), "*") == 0 || strcmp(json_string_value(pid), "anonymous") == 0) {
            abx_diag_add(c->d, "error", "config.invalid", line, "auth.tokens[%zu] needs a plain 'principal' id", i);
            return false;
        }
        abx_principal *pr = NULL;
        for (size_t k = 0; k < p->n_principals; k++)
            if (strcmp(p->principals[k].id, json_string_value(pid)) == 0) {
                abx_diag_add(c->d, "error", "config.duplicate_principal", line,
                             "principal '%s' has more than one token entry", json_string_value(pid));
                return false;
            }
        pr = &p->principals[p->n_principals++];
        pr->id = abx_strdup(json_string_value(pid));
        if (!strlist(c, t, "roles", &pr->roles, &pr->n_roles))
            return false;
        if (!read_token_source(c, t, line, pr->token_sha256, &pr->has_token))
            return false;
        for (size_t k = 0; k + 1 < p->n_principals; k++)
            if (p->principals[k].has_token && abx_ct_equal(p->principals[k].token_sha256, pr->token_sha256, 32)) {
                abx_diag_add(c->d, "error", "config.duplicate_token", line,
                             "principals '%s' and '%s' have the same token", p->principals[k].id, pr->id);
                return false;
            }
        const json_t *exp = json_object_get(t, "expires_at");
        if (exp) {
            struct tm tm = {0};
            const char *s = json_is_string(exp) ? json_string_value(exp) : "";
            const char *end = strptime(s, "%Y-%m-%dT%H:%M:%S", &tm);
            if (!end || (*end && strcmp(end, "Z") != 0)) {
                abx_diag_add(c->d, "error", "config.bad_value", line_of(c, t, "expires_at"),
                             "expires_at must read YYYY-MM-DDTHH:MM:SSZ (UTC)");
                return false;
            }
            pr->expires_at_ms = (int64_t)timegm(&tm) * 1000;
        }
    }
    *anon_ops = json_object_get(auth, "anonymous");
    return true;
}

static bool add_stmt(abx_stmt **arr, size_t *n, abx_stmt *s)
{
    abx_stmt *g = abx_realloc(*arr, (*n + 1) * sizeof *g);
    if (!g)
        return false;
    *arr = g;
    (*arr)[(*n)++] = *s;
    return true;
}

static bool expand_preset(cctx *c, const char *name, int line)
{
    if (strcmp(name, "workspace") != 0) {
        abx_diag_add(c->d, "error", "config.unknown_preset", line, "unknown preset '%s' (known: workspace)", name);
        return false;
    }
    /* preset workspace: every non-admin op for every authenticated principal, files
     * confined to the workspace; any program may run, because the kernel confines it to
     * the workspace (Landlock), without network and without capabilities; kernels
     * likewise, in the languages abx can start. */
    json_t *st = json_pack("{s:[s], s:[s], s:[s], s:{s:b, s:b, s:[s,s,s,s]}, s:[s,s]}", "ops", "*", "principals", "*",
                           "paths", "**", "commands", "unrestricted", 1, "unsafe", 1, "env", "LANG", "TZ", "TERM",
                           "PYTHONPATH", "languages", "python", "r");
    abx_stmt s;
    c->in_preset = true;
    bool ok = parse_stmt(c, &s, st, true, "preset:workspace[0]");
    c->in_preset = false;
    json_decref(st);
    if (!ok || !add_stmt(&c->p->allow, &c->p->n_allow, &s)) {
        stmt_release(&s);
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
                if (!stmt_has_principal(p, &p->allow[a], (int)s) || !stmt_has_op(&p->allow[a], op, true))
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

/* The scope kind an op needs that a statement lacks ("paths", "commands", ...), or NULL. */
static const char *scope_missing(const abx_stmt *s, const abx_op *op)
{
    if ((op->scoped_kinds & (1u << ABX_KIND_PATH)) && !s->has_paths)
        return "paths";
    if ((op->scoped_kinds & (1u << ABX_KIND_COMMAND)) && !s->has_commands)
        return "commands";
    if ((op->scoped_kinds & (1u << ABX_KIND_URL)) && !s->has_urls)
        return "urls";
    if ((op->scoped_kinds & (1u << ABX_KIND_LANGUAGE)) && !s->has_languages)
        return "languages";
    if ((op->scoped_kinds & (1u << ABX_KIND_AGENT)) && !s->has_agents)
        return "agents";
    return NULL;
}

/* One piece of abx's own state, canonical, with what it is (for the layout check). */
static void add_protected(abx_policy *p, const char *path, const char *what)
{
    char *cp;
    if (abx_path_canon(p->workspace, path, &cp) != 0)
        return;
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

static bool under_dir(const char *dir, const char *path);
static bool within(const char *dir, const char *path)
{
    return strcmp(dir, "/") == 0 ? path[0] == '/' : under_dir(dir, path);
}

/* abx's state must lie outside every root that any statement lets anyone write or
 * delete in: a confined process (or files.move) could otherwise rename it away, plant
 * a config, a plugin or a token, or swap the ledger. A name-based protection cannot
 * survive a rename of a parent folder; this layout rule can. Checked at every compile
 * (serve, check-config, reload: a reload that breaks it keeps the policy in force). */
static void check_state_layout(cctx *c)
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
                    if (!state || (!within(root, state) && !within(state, root)))
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
            add_protected(p, in->protected_files[i], in->protected_what ? in->protected_what[i] : "abx's own file");
    const json_t *pol = in->policy, *allow = pol ? json_object_get(pol, "allow") : NULL;
    const json_t *presets = pol ? json_object_get(pol, "presets") : NULL;
    bool workspace_preset = !pol;
    size_t i;
    json_t *it;
    json_array_foreach(presets, i, it) workspace_preset |= json_is_string(it) && !strcmp(json_string_value(it), "workspace");
    if (workspace_preset) {
        abx_stmt st = {.label = "preset:workspace[0]"};
        char *all = abx_asprintf("%s/**", strcmp(p->workspace, "/") == 0 ? "" : p->workspace);
        json_t *ws = all ? json_pack("[s]", all) : NULL;
        abx_free(all);
        if (ws && add_patterns(&c, &st, ABX_ACC_IDX_WRITE, ws, 0) && add_stmt(&p->allow, &p->n_allow, &st))
            memset(&st, 0, sizeof st);
        stmt_release(&st);
        json_decref(ws);
    }
    json_array_foreach(allow, i, it)
    {
        if (!json_is_object(it))
            continue;
        abx_stmt st = {.line = line_of(&c, it, NULL)};
        snprintf(st.label, sizeof st.label, "allow[%zu]", i);
        if (parse_paths(&c, &st, it) && add_stmt(&p->allow, &p->n_allow, &st))
            memset(&st, 0, sizeof st);
        stmt_release(&st);
    }
    c.d = diags;
    check_state_layout(&c);
out:
    abx_diags_release(&scratch);
    policy_free(p);
    return 0;
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
static char *deny_target(const char *glob)
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
                char *t = deny_target(p->deny[i].paths[k][j].glob); /* NULL: a glob no mount expresses */
                if (t && !record_mask_ident(p, t, i))
                    return false;
            }
    return true;
}

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
static void lint_unmaskable_denies(const abx_policy *p, abx_diags *diags)
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
                char *t = deny_target(g);
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

abx_policy *abx_policy_compile(const abx_policy_input *in, abx_diags *diags)
{
    abx_policy *p = abx_calloc(1, sizeof *p);
    if (!p)
        return NULL;
    atomic_init(&p->refs, 1);
    p->reg = in->reg;
    if (abx_path_canon("/", in->workspace ? in->workspace : "/", &p->workspace) != 0) {
        abx_diag_add(diags, "error", "config.bad_value", 0, "workspace '%s' cannot be canonicalized", in->workspace);
        policy_free(p);
        return NULL;
    }
    cctx c = {p, in, diags, true};
    size_t errors_before = diags->errors;
    for (size_t i = 0; i < in->n_protected; i++)
        if (in->protected_files[i])
            add_protected(p, in->protected_files[i], in->protected_what ? in->protected_what[i] : "abx's own file");
    json_t *anon = NULL;
    if (!parse_auth(&c, in->auth, &anon))
        goto fail;
    const json_t *pol = in->policy;
    static const char *const pkeys[] = {"strict", "presets", "allow", "deny", NULL};
    if (pol && !json_is_object(pol)) {
        abx_diag_add(diags, "error", "config.invalid", line_of(&c, pol, NULL), "'policy' must be a mapping");
        goto fail;
    }
    if (pol && !check_keys(&c, pol, pkeys, "policy"))
        goto fail;
    const json_t *strict = pol ? json_object_get(pol, "strict") : NULL;
    if (strict && !json_is_boolean(strict)) {
        abx_diag_add(diags, "error", "config.bad_value", line_of(&c, pol, "strict"), "'strict' must be a boolean");
        goto fail;
    }
    c.strict = !strict || json_is_true(strict);
    /* anonymous ops: an implicit statement (default: core.health only) */
    {
        json_t *st = json_pack("{s:O?, s:[s]}", "ops", anon, "principals", "anonymous");
        if (!anon)
            json_object_set_new(st, "ops", json_pack("[s]", "core.health"));
        abx_stmt s;
        bool ok = parse_stmt(&c, &s, st, true, "auth.anonymous");
        json_decref(st);
        if (!ok || !add_stmt(&p->allow, &p->n_allow, &s)) {
            stmt_release(&s);
            goto fail;
        }
    }
    const json_t *presets = pol ? json_object_get(pol, "presets") : NULL;
    if (!pol) {
        if (!expand_preset(&c, "workspace", 0))
            goto fail;
    } else if (presets) {
        char **names;
        size_t n;
        if (!strlist(&c, pol, "presets", &names, &n))
            goto fail;
        for (size_t i = 0; i < n; i++)
            if (!expand_preset(&c, names[i], line_of(&c, pol, "presets"))) {
                free_strlist(names, n);
                goto fail;
            }
        free_strlist(names, n);
    }
    static const char *const sides[] = {"allow", "deny"};
    for (int side = 0; side < 2 && pol; side++) {
        const json_t *list = json_object_get(pol, sides[side]);
        if (!list)
            continue;
        if (!json_is_array(list)) {
            abx_diag_add(diags, "error", "config.invalid", line_of(&c, pol, sides[side]), "'policy.%s' must be a list",
                         sides[side]);
            goto fail;
        }
        size_t i;
        json_t *it;
        json_array_foreach(list, i, it)
        {
            char label[32];
            snprintf(label, sizeof label, "%s[%zu]", sides[side], i);
            abx_stmt s;
            if (!parse_stmt(&c, &s, it, side == 0, label) ||
                !add_stmt(side == 0 ? &p->allow : &p->deny, side == 0 ? &p->n_allow : &p->n_deny, &s)) {
                stmt_release(&s);
                goto fail;
            }
        }
    }
    /* scope_required: a statement mounting an op with a declared path, command, url,
     * language or agent parameter must carry the matching scope */
    for (size_t a = 0; a < p->n_allow; a++) {
        const abx_stmt *s = &p->allow[a];
        for (size_t o = 0; o < abx_registry_count(p->reg); o++) {
            const abx_op *op = abx_registry_at(p->reg, o);
            const char *missing = scope_missing(s, op);
            if (missing && stmt_has_op(s, op, true)) {
                /* a lint error: with allow_lint_errors the server starts and such calls get
                 * 403 policy.scope_required (there is no "no scope, no check" fallback) */
                abx_diag_add(diags, in->allow_lint_errors ? "warning" : "error", "config.scope_required", s->line,
                             "%s mounts '%s', which has %s parameters, but carries no '%s' scope", s->label, op->id,
                             missing, missing);
                break;
            }
        }
    }
    check_state_layout(&c);
    for (size_t i = 0; i < p->n_principals; i++)
        for (size_t r = 0; r < p->principals[i].n_roles; r++)
            if (strcmp(p->principals[i].roles[r], "approver") == 0)
                p->has_approver = true;
    if (diags->errors > errors_before)
        goto fail;
    if (!compile_idents(p)) {
        abx_diag_add(diags, "error", "config.internal", 0, "out of memory resolving deny identities");
        goto fail;
    }
    p->concurrency = abx_calloc(p->n_allow + 1, sizeof *p->concurrency);
    p->rate_tat = abx_calloc((p->n_principals + 1) * p->n_allow + 1, sizeof *p->rate_tat);
    if (!build_mount_table(&c) || !p->concurrency || !p->rate_tat || !record_mask_idents(p)) {
        abx_diag_add(diags, "error", "config.internal", 0, "out of memory building the mount table");
        goto fail;
    }
    lint_unmaskable_denies(p, diags);
    return p;
fail:
    policy_free(p);
    return NULL;
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

int abx_policy_principal_slot(const abx_policy *p, const char *id)
{
    if (!id)
        return (int)p->n_principals;
    for (size_t i = 0; i < p->n_principals; i++)
        if (strcmp(p->principals[i].id, id) == 0)
            return (int)i;
    return -1;
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

static void set_err(abx_decision *d, abx_err e, const char *fmt, ...) __attribute__((format(printf, 3, 4)));
static void set_err(abx_decision *d, abx_err e, const char *fmt, ...)
{
    d->err = e;
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(d->message, sizeof d->message, fmt, ap);
    va_end(ap);
}

static bool pattern_list_match(const abx_pattern *pats, size_t n, const char *path, const abx_pattern **hit)
{
    for (size_t i = 0; i < n; i++)
        if (abx_glob_match(pats[i].glob, path)) {
            if (hit)
                *hit = &pats[i];
            return true;
        }
    return false;
}

static bool under_dir(const char *dir, const char *path)
{
    size_t n = strlen(dir);
    return strncmp(path, dir, n) == 0 && (path[n] == '\0' || path[n] == '/');
}

/* Protected areas: the system's pseudo-filesystems, abx's own files, and (for writes)
 * code that the host runs later. */
static bool protected_path(const abx_policy *p, const char *path, unsigned access)
{
    static const char *const dev_ok[] = {"/dev/null", "/dev/zero", "/dev/urandom"};
    if (under_dir("/proc", path) || under_dir("/sys", path) || under_dir("/boot", path))
        return true;
    if (under_dir("/dev", path)) {
        for (size_t i = 0; i < ABX_ARRAY_LEN(dev_ok); i++)
            if (strcmp(path, dev_ok[i]) == 0)
                return false;
        return true;
    }
    for (size_t i = 0; i < p->n_protected; i++)
        if (under_dir(p->protected_files[i], path))
            return true;
    if (access & (ABX_ACC_WRITE | ABX_ACC_DELETE)) {
        if (abx_glob_match("/**/.git/hooks/**", path) || abx_glob_match("/**/.git/config", path))
            return true;
    }
    return false;
}

static void append_label(char *buf, size_t len, const char *label)
{
    size_t o = strlen(buf);
    if (o + strlen(label) + 2 >= len)
        return;
    snprintf(buf + o, len - o, "%s%s", o ? "," : "", label);
}

/* The caller's path scope for one call: every pattern (any access kind) of the
 * statements that mount the op for the principal. Lookups while canonicalizing and
 * the first verdict on a path are taken against it, so that nothing outside it is
 * ever asked of the file system. */
typedef struct call_scope {
    const abx_policy *p;
    const uint16_t *mounting;
    size_t n_mounting;
} call_scope;

static bool scope_has_paths(const call_scope *cs)
{
    for (size_t m = 0; m < cs->n_mounting; m++)
        if (cs->p->allow[cs->mounting[m]].has_paths)
            return true;
    return false;
}

/* The canonicalizer's gate: a prefix is looked up only when it, or a path below it,
 * could match a pattern of the scope. */
static bool scope_may_look(const char *prefix, void *arg)
{
    const call_scope *cs = arg;
    for (size_t m = 0; m < cs->n_mounting; m++) {
        const abx_stmt *s = &cs->p->allow[cs->mounting[m]];
        for (int a = 0; a < ABX_ACC_IDX__N; a++)
            for (size_t i = 0; i < s->n_paths[a]; i++)
                if (abx_glob_prefix_match(s->paths[a][i].glob, prefix))
                    return true;
    }
    return false;
}

static bool scope_admits(const call_scope *cs, const char *canonical)
{
    for (size_t m = 0; m < cs->n_mounting; m++) {
        const abx_stmt *s = &cs->p->allow[cs->mounting[m]];
        for (int a = 0; a < ABX_ACC_IDX__N; a++)
            if (pattern_list_match(s->paths[a], s->n_paths[a], canonical, NULL))
                return true;
    }
    return false;
}

/* A gate that refuses every lookup: the path folded as written. */
static bool scope_never(const char *prefix, void *arg)
{
    (void)prefix;
    (void)arg;
    return false;
}

static int canon_scoped(const char *anchor, const char *input, const call_scope *cs, char **out)
{
    return abx_path_canon_gated(anchor, input, scope_may_look, (void *)cs, out);
}

/* Canonicalize the parent of `input` and append its last component unresolved. */
static int canon_keep_last(const char *anchor, const char *input, const call_scope *cs, char **out)
{
    size_t n = strlen(input);
    while (n > 1 && input[n - 1] == '/')
        n--;
    const char *slash = memrchr(input, '/', n);
    const char *base = slash ? slash + 1 : input;
    size_t bl = (size_t)(input + n - base);
    if (bl == 0 || (bl == 1 && base[0] == '.') || (bl == 2 && base[0] == '.' && base[1] == '.') || bl > 255)
        return canon_scoped(anchor, input, cs, out);
    char *dir = slash ? abx_strndup(input, (size_t)(slash - input) ? (size_t)(slash - input) : 1) : abx_strdup(".");
    char *cdir = NULL;
    int rc = dir ? canon_scoped(anchor, dir, cs, &cdir) : -ENOMEM;
    abx_free(dir);
    if (rc != 0)
        return rc;
    *out = abx_asprintf("%s/%.*s", strcmp(cdir, "/") == 0 ? "" : cdir, (int)bl, base);
    abx_free(cdir);
    if (!*out)
        return -ENOMEM;
    if (strlen(*out) > 4095) {
        abx_free(*out);
        *out = NULL;
        return -ENAMETOOLONG;
    }
    return 0;
}

/* A path that could not be canonicalized. Outside the scope (judged on the path as
 * written, folded without any lookup) every failure is the one answer a path outside
 * the scope gets, whatever the lookup met: a loop, EACCES, a vanished /proc entry. */
static void path_error(const abx_policy *p, const call_scope *cs, const abx_param *pa, const char *input, int rc,
                       abx_decision *d)
{
    char *lex = NULL;
    bool outside = scope_has_paths(cs) && abx_path_canon_gated(p->workspace, input, scope_never, NULL, &lex) == 0 &&
                   !scope_admits(cs, lex);
    abx_free(lex);
    if (outside)
        set_err(d, ABX_E_POLICY_PATH_NOT_ALLOWED, "path '%s' is outside the allowed paths", pa->name);
    else if (rc == -ELOOP)
        set_err(d, ABX_E_POLICY_PATH_DENIED, "path '%s': too many levels of symbolic links", pa->name);
    else
        set_err(d, ABX_E_ARGS_INVALID, "argument '%s' is not a usable path (%s)", pa->name, strerror(-rc));
}

static bool collect_paths(const abx_policy *p, const call_scope *cs, const abx_op *op, const json_t *args,
                          abx_decision *d)
{
    size_t count = 0;
    for (size_t i = 0; i < op->n_params; i++) {
        if (!(op->path_params & (1u << i)))
            continue;
        const json_t *v = json_object_get(args, op->def->params[i].name);
        count += json_is_array(v) ? json_array_size(v) : (v ? 1 : 0);
    }
    d->paths = abx_calloc(count + 1, sizeof *d->paths);
    if (!d->paths) {
        set_err(d, ABX_E_SERVER_UNAVAILABLE, "out of memory");
        return false;
    }
    for (size_t i = 0; i < op->n_params; i++) {
        if (!(op->path_params & (1u << i)))
            continue;
        const abx_param *pa = &op->def->params[i];
        const json_t *v = json_object_get(args, pa->name);
        size_t n = json_is_array(v) ? json_array_size(v) : (v ? 1 : 0);
        for (size_t k = 0; k < n; k++) {
            const json_t *s = json_is_array(v) ? json_array_get(v, k) : v;
            abx_path_value *pv = &d->paths[d->n_paths++];
            pv->param = pa->name;
            pv->index = k;
            pv->rootfd = -1;
            /* a parameter that deletes (or moves away) acts on the name itself: a symlink
             * is the link, not its target, so only the parent is resolved */
            const char *in = json_string_value(s);
            int rc = (pa->access & ABX_ACC_DELETE) ? canon_keep_last(p->workspace, in, cs, &pv->canonical)
                                                   : canon_scoped(p->workspace, in, cs, &pv->canonical);
            if (rc != 0) {
                path_error(p, cs, pa, in, rc, d);
                return false;
            }
        }
    }
    return true;
}

static const abx_param *param_of(const abx_op *op, const char *name) { return abx_op_param(op, name); }

static unsigned acc_bits_to_idx_mask(unsigned access)
{
    return access & (ABX_ACC_READ | ABX_ACC_WRITE | ABX_ACC_DELETE);
}

/* The values of an op's command parameter: a `command` string (kind command, string)
 * or an `argv` list (kind command, list of strings). */
typedef struct cmd_input {
    const char *command;   /* borrowed, or NULL */
    const json_t *argv;    /* borrowed array, or NULL */
    const json_t *env;     /* borrowed object, or NULL */
} cmd_input;

static void command_input(const abx_op *op, const json_t *args, cmd_input *ci)
{
    memset(ci, 0, sizeof *ci);
    for (size_t i = 0; i < op->n_params; i++) {
        const abx_param *pa = &op->def->params[i];
        const json_t *v = json_object_get(args, pa->name);
        if (pa->kind == ABX_KIND_COMMAND && json_is_string(v))
            ci->command = json_string_value(v);
        else if (pa->kind == ABX_KIND_COMMAND && json_is_array(v))
            ci->argv = v;
    }
    ci->env = json_object_get(args, "env");
    if (!json_is_object(ci->env))
        ci->env = NULL;
}

/* Build the argv a statement would run: split (or sh -c with shell: true), program
 * resolved through the statement's search path. Returns 0 or -1 with why. */
static int build_argv(const abx_stmt *s, const cmd_input *ci, abx_argv *out, char *why, size_t whylen)
{
    memset(out, 0, sizeof *out);
    if (ci->command) {
        if (s && s->cmd_shell) {
            abx_argv_push(out, "/bin/sh", 7);
            abx_argv_push(out, "-c", 2);
            abx_argv_push(out, ci->command, strlen(ci->command));
        } else if (abx_shell_split(ci->command, out, why, whylen) != 0) {
            return -1;
        }
    } else if (ci->argv) {
        size_t i;
        json_t *it;
        json_array_foreach(ci->argv, i, it)
        {
            if (!abx_argv_push(out, json_string_value(it), json_string_length(it))) {
                snprintf(why, whylen, "argv is too long");
                abx_argv_release(out);
                return -1;
            }
        }
        if (out->n == 0) {
            snprintf(why, whylen, "argv is empty");
            return -1;
        }
    } else {
        return -1;
    }
    char *prog = abx_resolve_program(out->v[0], s ? s->cmd_path : NULL);
    if (!prog) {
        snprintf(why, whylen, "program '%s' is not an executable on the scope's search path", out->v[0]);
        abx_argv_release(out);
        return -1;
    }
    abx_free(out->v[0]);
    out->v[0] = prog;
    return 0;
}

static bool name_in(char *const *list, size_t n, const char *name)
{
    for (size_t i = 0; i < n; i++)
        if (strcmp(list[i], name) == 0)
            return true;
    return false;
}

static json_t *trace_stmt(json_t *trace, const abx_stmt *s)
{
    if (!trace)
        return NULL;
    json_t *st = json_pack("{s:s, s:i, s:[]}", "statement", s->label, "line", s->line, "checks");
    json_array_append_new(json_object_get(trace, "statements"), st);
    return st;
}

static void trace_check(json_t *st, const char *scope, const char *what, bool ok, const char *why)
{
    if (!st)
        return;
    json_t *c = json_pack("{s:s, s:s, s:s}", "scope", scope, "value", what ? what : "", "verdict",
                          ok ? "admits" : "refuses");
    if (why)
        json_object_set_new(c, "why", json_string(why));
    json_array_append_new(json_object_get(st, "checks"), c);
}

static void finish_trace(json_t *trace, const abx_decision *d)
{
    if (!trace)
        return;
    const char *decision = d->err == ABX_E_OP_NOT_ENABLED ? "not_mounted"
                           : d->err                     ? "deny"
                           : d->approval                ? "approval"
                                                        : "allow";
    json_object_set_new(trace, "decision", json_string(decision));
    json_object_set_new(trace, "code", d->err ? json_string(abx_err_code(d->err)) : json_null());
    if (d->err)
        json_object_set_new(trace, "message", json_string(d->message));
    json_object_set_new(trace, "determining", json_string(d->determining));
    json_t *lim = json_object();
    for (int i = 0; i < ABX_LIM__COUNT; i++)
        if (d->limits[i] >= 0)
            json_object_set_new(lim, abx_limit_name((enum abx_limit)(1u << i)), json_integer(d->limits[i]));
    json_object_set_new(trace, "limits", lim);
    json_t *paths = json_array();
    for (size_t i = 0; i < d->n_paths; i++)
        json_array_append_new(paths, json_pack("{s:s, s:s}", "param", d->paths[i].param, "canonical",
                                               d->paths[i].canonical ? d->paths[i].canonical : ""));
    json_object_set_new(trace, "paths", paths);
    if (d->argv.n) {
        json_t *a = json_array();
        for (size_t i = 0; i < d->argv.n; i++)
            json_array_append_new(a, json_string(d->argv.v[i]));
        json_object_set_new(trace, "argv", a);
    }
}

void abx_decide(const abx_policy *p, int slot, const abx_op *op, size_t op_index, const json_t *args,
                abx_decision *d, json_t *trace)
{
    memset(d, 0, sizeof *d);
    d->chosen = -1;
    for (int i = 0; i < ABX_LIM__COUNT; i++)
        d->limits[i] = -1;
    if (trace) {
        json_object_set_new(trace, "op", json_string(op->id));
        json_object_set_new(trace, "principal", json_string(abx_policy_principal_id(p, slot)));
        json_object_set_new(trace, "mounting", json_array());
        json_object_set_new(trace, "deny_hits", json_array());
        json_object_set_new(trace, "statements", json_array());
    }
    if (!abx_policy_mounted(p, slot, op_index)) {
        set_err(d, ABX_E_OP_NOT_ENABLED, "not mounted");
        finish_trace(trace, d);
        return;
    }
    size_t base = (size_t)slot * p->n_ops + op_index;
    const uint16_t *mounting = &p->mount_stmts[p->mount_off[base]];
    size_t n_mounting = p->mount_cnt[base];
    for (size_t m = 0; trace && m < n_mounting; m++)
        json_array_append_new(json_object_get(trace, "mounting"), json_string(p->allow[mounting[m]].label));
    call_scope cs = {p, mounting, n_mounting};
    if (!collect_paths(p, &cs, op, args, d)) {
        finish_trace(trace, d);
        return;
    }
    /* 0. a path outside every pattern of the caller's scope gets one answer, before any
     * deny or protected-area verdict: those would tell a name outside apart */
    for (size_t k = 0; k < d->n_paths && scope_has_paths(&cs); k++) {
        if (scope_admits(&cs, d->paths[k].canonical))
            continue;
        set_err(d, ABX_E_POLICY_PATH_NOT_ALLOWED, "path '%s' is outside the allowed paths", d->paths[k].param);
        finish_trace(trace, d);
        return;
    }
    for (size_t k = 0; k < d->n_paths; k++) {
        const abx_param *pa = abx_op_param(op, d->paths[k].param);
        if (!intrinsic_admits(p, pa, d->paths[k].canonical)) {
            set_err(d, ABX_E_POLICY_PATH_NOT_ALLOWED, "path '%s' is outside the operation's own jail (%s)",
                    d->paths[k].param, pa->roots);
            snprintf(d->determining, sizeof d->determining, "op:%s", op->id);
            finish_trace(trace, d);
            return;
        }
    }
    cmd_input ci;
    command_input(op, args, &ci);
    bool has_cmd = ci.command || ci.argv;
    /* 1. deny statements: ops, principals, canonical paths, argv. Every statement is
     * looked at, so the outcome does not depend on their order: a path hit is the more
     * specific code, and all hits are determining. */
    abx_err deny_code = ABX_OK;
    const char *deny_param = NULL;
    for (size_t i = 0; i < p->n_deny; i++) {
        const abx_stmt *s = &p->deny[i];
        if (s->n_ops && !stmt_has_op(s, op, false))
            continue;
        if (s->n_principals && !stmt_has_principal(p, s, slot))
            continue;
        abx_err hit = ABX_OK;
        const char *what = NULL;
        if (!s->has_paths && !s->has_commands && !s->has_urls)
            hit = ABX_E_POLICY_DENIED;
        for (size_t k = 0; !hit && s->has_paths && k < d->n_paths; k++)
            for (int a = 0; !hit && a < ABX_ACC_IDX__N; a++)
                if (pattern_list_match(s->paths[a], s->n_paths[a], d->paths[k].canonical, NULL)) {
                    hit = ABX_E_POLICY_PATH_DENIED;
                    what = d->paths[k].param;
                }
        if (!hit && s->has_commands && has_cmd) {
            abx_argv av;
            char why[200];
            if (build_argv(NULL, &ci, &av, why, sizeof why) == 0) {
                for (size_t k = 0; k < s->n_cmds && !hit; k++)
                    if (abx_cmd_pattern_match(&s->cmds[k], (const char *const *)av.v, av.n))
                        hit = ABX_E_POLICY_DENIED;
                abx_argv_release(&av);
            }
        }
        if (!hit)
            continue;
        append_label(d->determining, sizeof d->determining, s->label);
        if (trace)
            json_array_append_new(json_object_get(trace, "deny_hits"), json_string(s->label));
        if (hit == ABX_E_POLICY_PATH_DENIED && (deny_code != ABX_E_POLICY_PATH_DENIED ||
                                                (deny_param && strcmp(what, deny_param) < 0)))
            deny_param = what;
        if (deny_code != ABX_E_POLICY_PATH_DENIED)
            deny_code = hit;
    }
    if (deny_code) {
        if (deny_code == ABX_E_POLICY_PATH_DENIED)
            set_err(d, deny_code, "path '%s' is denied by %s", deny_param, d->determining);
        else
            set_err(d, deny_code, "denied by %s", d->determining);
        finish_trace(trace, d);
        return;
    }
    /* 2. protected areas, unless an unsafe mounting statement's scope names the path */
    for (size_t k = 0; k < d->n_paths; k++) {
        const abx_param *pa = param_of(op, d->paths[k].param);
        if (!protected_path(p, d->paths[k].canonical, pa->access))
            continue;
        bool waived = false;
        for (size_t m = 0; m < n_mounting && !waived; m++) {
            const abx_stmt *s = &p->allow[mounting[m]];
            if (s->unsafe)
                for (int a = 0; a < ABX_ACC_IDX__N && !waived; a++)
                    waived = pattern_list_match(s->paths[a], s->n_paths[a], d->paths[k].canonical, NULL);
        }
        if (!waived) {
            set_err(d, ABX_E_POLICY_PATH_DENIED, "path '%s' lies in a protected area", d->paths[k].param);
            snprintf(d->determining, sizeof d->determining, "protected");
            finish_trace(trace, d);
            return;
        }
    }
    /* 3. allow: admitted by at least one mounting statement with all its scopes; the
     * reason for a refusal is the most specific one found */
    abx_err reason = ABX_E_POLICY_SCOPE_REQUIRED;
    char reason_msg[300] = "";
    int chosen = -1;
    bool net_all = true;
    for (size_t m = 0; m < n_mounting; m++) {
        const abx_stmt *s = &p->allow[mounting[m]];
        json_t *st = trace_stmt(trace, s);
        const char *missing = scope_missing(s, op);
        if (missing) {
            trace_check(st, missing, NULL, false, "scope required");
            if (reason == ABX_E_POLICY_SCOPE_REQUIRED)
                snprintf(reason_msg, sizeof reason_msg, "%s mounts '%s' but carries no '%s' scope", s->label, op->id,
                         missing);
            continue;
        }
        bool ok = true;
        for (size_t k = 0; ok && k < d->n_paths; k++) {
            unsigned need = acc_bits_to_idx_mask(param_of(op, d->paths[k].param)->access);
            for (int a = 0; ok && a < ABX_ACC_IDX__N; a++) {
                if (!(need & (1u << a)))
                    continue;
                bool hit = pattern_list_match(s->paths[a], s->n_paths[a], d->paths[k].canonical, NULL);
                static const char *const kinds[] = {"paths.read", "paths.write", "paths.delete"};
                trace_check(st, kinds[a], d->paths[k].canonical, hit, NULL);
                if (!hit) {
                    ok = false;
                    reason = ABX_E_POLICY_PATH_NOT_ALLOWED;
                    snprintf(reason_msg, sizeof reason_msg, "path '%s' is outside the allowed paths",
                             d->paths[k].param);
                }
            }
        }
        abx_argv av = {0};
        if (ok && (has_cmd || ci.env)) {
            char why[300] = "";
            bool cok = !has_cmd || build_argv(s, &ci, &av, why, sizeof why) == 0;
            if (cok && has_cmd && !s->cmd_unrestricted) {
                cok = false;
                for (size_t k = 0; k < s->n_cmds && !cok; k++)
                    cok = abx_cmd_pattern_match(&s->cmds[k], (const char *const *)av.v, av.n);
                if (!cok)
                    snprintf(why, sizeof why, "the command matches no pattern of %s", s->label);
            }
            const char *kk;
            json_t *vv;
            if (cok && ci.env && !s->cmd_unrestricted)
                json_object_foreach((json_t *)ci.env, kk, vv)
                {
                    if (!name_in(s->env_allow, s->n_env, kk)) {
                        cok = false;
                        snprintf(why, sizeof why, "environment variable '%.100s' is not in the env allowlist of %s",
                                 kk, s->label);
                        break;
                    }
                }
            trace_check(st, has_cmd ? "commands" : "commands.env", av.n ? av.v[0] : (ci.command ? ci.command : ""),
                        cok, cok ? NULL : why);
            if (!cok) {
                ok = false;
                if (reason != ABX_E_POLICY_PATH_NOT_ALLOWED) {
                    reason = ABX_E_POLICY_COMMAND_NOT_ALLOWED;
                    snprintf(reason_msg, sizeof reason_msg, "%s", why);
                }
                abx_argv_release(&av);
            }
        }
        for (size_t i = 0; ok && i < op->n_params; i++) {
            const abx_param *pa = &op->def->params[i];
            const json_t *v = json_object_get(args, pa->name);
            if (!json_is_string(v))
                continue;
            if (pa->kind == ABX_KIND_URL) {
                char err[200];
                char *cu = abx_url_canon(json_string_value(v), err, sizeof err);
                bool uok = false;
                for (size_t k = 0; cu && k < s->n_urls && !uok; k++)
                    uok = abx_url_match(s->urls[k], cu);
                trace_check(st, "urls", cu ? cu : json_string_value(v), uok, cu ? NULL : err);
                abx_free(cu);
                if (!uok) {
                    ok = false;
                    reason = ABX_E_POLICY_URL_NOT_ALLOWED;
                    snprintf(reason_msg, sizeof reason_msg, "url '%s' is outside the allowed urls", pa->name);
                }
            } else if (pa->kind == ABX_KIND_LANGUAGE || pa->kind == ABX_KIND_AGENT) {
                bool lang = pa->kind == ABX_KIND_LANGUAGE;
                bool lok = lang ? name_in(s->languages, s->n_languages, json_string_value(v))
                                : name_in(s->agents, s->n_agents, json_string_value(v));
                trace_check(st, lang ? "languages" : "agents", json_string_value(v), lok, NULL);
                if (!lok) {
                    ok = false;
                    reason = ABX_E_POLICY_LANGUAGE_NOT_ALLOWED;
                    snprintf(reason_msg, sizeof reason_msg, "%s '%s' is not allowed", lang ? "language" : "agent",
                             json_string_value(v));
                }
            }
        }
        if (!ok) {
            abx_argv_release(&av);
            continue;
        }
        if (st)
            json_object_set_new(st, "admits", json_true());
        if (chosen < 0) {
            chosen = mounting[m];
            d->chosen = chosen;
            d->argv = av;
        } else {
            abx_argv_release(&av);
        }
        if (!d->admitting)
            d->admitting = abx_calloc(n_mounting, sizeof *d->admitting);
        if (d->admitting)
            d->admitting[d->n_admitting++] = mounting[m];
        append_label(d->determining, sizeof d->determining, s->label);
        if (s->approval)
            d->approval = true;
        if (!s->has_net || !s->net)
            net_all = false;
        for (int i = 0; i < ABX_LIM__COUNT; i++)
            if (s->limits[i] >= 0 && (d->limits[i] < 0 || s->limits[i] < d->limits[i]))
                d->limits[i] = s->limits[i];
    }
    if (chosen < 0) {
        set_err(d, reason, "%s", reason_msg[0] ? reason_msg : "no statement admits the call");
        finish_trace(trace, d);
        return;
    }
    d->net = net_all;
    /* jail roots: for each path, the root of a matching pattern of the first admitting
     * statement (for the access kinds the parameter needs) */
    for (size_t k = 0; k < d->n_paths; k++) {
        abx_path_value *pv = &d->paths[k];
        unsigned need = acc_bits_to_idx_mask(param_of(op, pv->param)->access);
        const abx_pattern *hit = NULL;
        const abx_stmt *s = &p->allow[chosen];
        for (int a = 0; a < ABX_ACC_IDX__N && !hit; a++)
            if (need & (1u << a))
                pattern_list_match(s->paths[a], s->n_paths[a], pv->canonical, &hit);
        if (!hit) {
            set_err(d, ABX_E_SERVER_INTERNAL, "no jail root for '%s'", pv->param);
            finish_trace(trace, d);
            return;
        }
        const char *root = p->roots[hit->root];
        if (!abx_path_under(root, pv->canonical, &pv->rel)) {
            set_err(d, ABX_E_SERVER_INTERNAL, "path '%s' is not under its jail root", pv->param);
            finish_trace(trace, d);
            return;
        }
        pv->root = root;
        pv->rootfd = p->rootfds[hit->root];
        if (pv->rootfd < 0) { /* the root did not exist at compile time: try now, never an error here */
            int fd = abx_jail_open_root(root);
            if (fd >= 0) {
                pv->rootfd = fd;
                pv->own_fd = true;
            }
        }
    }
    d->err = ABX_OK;
    finish_trace(trace, d);
}

/* Whether identity i binds this call: its deny statement applies to the op and the
 * principal; a protected area binds unless an unsafe statement admitted the call
 * (the waiver of protected areas by name, see abx_decide). */
static bool ident_applies(const abx_policy *p, int slot, const abx_op *op, const abx_decision *d, const abx_ident *id)
{
    if (id->stmt >= 0) {
        const abx_stmt *s = &p->deny[id->stmt];
        return !(s->n_ops && !stmt_has_op(s, op, false)) && !(s->n_principals && !stmt_has_principal(p, s, slot));
    }
    for (size_t i = 0; i < d->n_admitting; i++)
        if (p->allow[d->admitting[i]].unsafe)
            return false;
    return true;
}

static bool ident_hit(const abx_policy *p, int slot, const abx_op *op, const abx_decision *d, const struct stat *st,
                      bool subtree_only)
{
    for (size_t i = 0; i < p->n_idents; i++) {
        const abx_ident *id = &p->idents[i];
        if (id->dev == st->st_dev && id->ino == st->st_ino && (!subtree_only || id->subtree) &&
            ident_applies(p, slot, op, d, id))
            return true;
    }
    return false;
}

bool abx_policy_ident_denied(const abx_policy *p, int slot, const abx_op *op, const abx_decision *d,
                             const struct stat *st)
{
    return p->n_idents && ident_hit(p, slot, op, d, st, false);
}

/* Walk up from directory fd (borrowed) to the file system's root, comparing every
 * directory with the denied directory identities. ".." of an fd is the directory's
 * current parent, whatever names lead there. */
static bool under_denied_dir(const abx_policy *p, int slot, const abx_op *op, const abx_decision *d, int dirfd)
{
    int cur = dup(dirfd);
    bool hit = false;
    struct stat st, up;
    for (int depth = 0; cur >= 0 && depth < 2048 && !hit; depth++) {
        if (fstat(cur, &st) != 0)
            break;
        hit = ident_hit(p, slot, op, d, &st, true);
        int next = openat(cur, "..", O_PATH | O_DIRECTORY | O_CLOEXEC);
        close(cur);
        cur = next;
        if (cur < 0 || fstat(cur, &up) != 0 || (up.st_dev == st.st_dev && up.st_ino == st.st_ino))
            break;
    }
    if (cur >= 0)
        close(cur);
    return hit;
}

int abx_policy_fd_check(const abx_policy *p, int slot, const abx_op *op, const abx_decision *d, int fd, int dirfd)
{
    if (!p->n_idents)
        return 0;
    struct stat st;
    if (fd >= 0 && fstat(fd, &st) == 0) {
        if (ident_hit(p, slot, op, d, &st, false))
            return -ABX_EIDENT;
        if (S_ISDIR(st.st_mode))
            dirfd = fd;
    }
    if (p->has_subtree_idents && dirfd >= 0 && under_denied_dir(p, slot, op, d, dirfd))
        return -ABX_EIDENT;
    return 0;
}

bool abx_policy_path_visible(const abx_policy *p, int slot, const abx_op *op, const abx_decision *d,
                             const char *canonical)
{
    if (d->err || abx_policy_path_hidden(p, slot, op, canonical))
        return false;
    for (size_t i = 0; i < d->n_admitting; i++) {
        const abx_stmt *s = &p->allow[d->admitting[i]];
        if (pattern_list_match(s->paths[ABX_ACC_IDX_READ], s->n_paths[ABX_ACC_IDX_READ], canonical, NULL))
            return true;
    }
    return false;
}

static bool list_add(char ***arr, size_t *n, const char *s)
{
    for (size_t i = 0; i < *n; i++)
        if (strcmp((*arr)[i], s) == 0)
            return true;
    char **g = abx_realloc(*arr, (*n + 2) * sizeof *g);
    if (!g)
        return false;
    *arr = g;
    if (!(g[*n] = abx_strdup(s)))
        return false;
    (*n)++;
    g[*n] = NULL;
    return true;
}

/* The outermost of roots that holds path, or NULL. */
static const char *outer_root(char *const *roots, size_t n, const char *path)
{
    const char *best = NULL;
    for (size_t i = 0; i < n; i++)
        if (within(roots[i], path) && (!best || strlen(roots[i]) < strlen(best)))
            best = roots[i];
    return best;
}

/* Pin each folder between path and the outermost write root that holds it, and path
 * itself when self: in the child's mount namespace they are mount points, which no
 * rename or removal can touch (EBUSY), so a confined process cannot carry a denied file
 * away from its name, for itself or for a later process. Renames need write access to
 * both parents, so outside write roots there is nothing to pin. */
static bool add_pins(abx_fs_view *v, const char *path, bool self)
{
    const char *root = outer_root(v->rw, v->n_rw, path);
    char buf[PATH_MAX];
    size_t rl = root ? (strcmp(root, "/") == 0 ? 0 : strlen(root)) : 0;
    if (!root || strlen(path) <= rl + 1 || strlen(path) >= sizeof buf)
        return true;
    memcpy(buf, path, strlen(path) + 1);
    struct stat st;
    for (char *s = buf + rl + 1; (s = strchr(s, '/')) != NULL; *s++ = '/') {
        *s = '\0';
        if (lstat(buf, &st) == 0 && S_ISDIR(st.st_mode) && !list_add(&v->pins, &v->n_pins, buf))
            return false;
    }
    if (self && lstat(path, &st) == 0 && !S_ISLNK(st.st_mode) && !list_add(&v->pins, &v->n_pins, path))
        return false;
    return true;
}

/* A file to hide (mask) or only to keep in place (pin), when the call's roots hold it. */
static int view_place(abx_fs_view *v, const char *path, bool mask)
{
    if (!outer_root(v->rw, v->n_rw, path) && !outer_root(v->ro, v->n_ro, path))
        return 0;
    if (!add_pins(v, path, !mask) || (mask && !list_add(&v->masks, &v->n_masks, path)))
        return -1;
    return 0;
}

/* The name of a deny target no longer leads to the file recorded at compile time: the
 * host (outside abx's pins) moved, replaced or deleted it. Deleted (no link left):
 * nothing to follow. Otherwise the compile-time descriptor says where the file is now,
 * and the mask goes there too; a file that cannot be found again refuses the spawn. */
static int view_follow(abx_fs_view *v, const abx_mask_ident *m, bool mask)
{
    struct stat st, now;
    if (fstat(m->fd, &st) == 0 && st.st_nlink == 0)
        return 0;
    char link[64], where[PATH_MAX];
    snprintf(link, sizeof link, "/proc/self/fd/%d", m->fd);
    ssize_t n = readlink(link, where, sizeof where - 1);
    if (n > 0)
        where[n] = '\0';
    if (n <= 0 || where[0] != '/' || lstat(where, &now) != 0 || now.st_dev != m->dev || now.st_ino != m->ino) {
        v->moved = abx_strdup(m->path);
        return v->moved ? -2 : -1;
    }
    return view_place(v, where, mask);
}

/* Whether one of the deny statements naming m applies to this call. */
static bool mask_ident_applies(const abx_policy *p, int slot, const abx_op *op, const abx_mask_ident *m)
{
    for (size_t i = 0; i < m->n_stmts; i++) {
        const abx_stmt *ds = &p->deny[m->stmts[i]];
        if ((!ds->n_ops || stmt_has_op(ds, op, false)) && (!ds->n_principals || stmt_has_principal(p, ds, slot)))
            return true;
    }
    return false;
}

/* Deny targets: masked when a statement naming them applies to the call, pinned in
 * place whatever principal or op they were written for (any process could otherwise
 * move a folder for another principal's later process). */
static int view_deny_targets(const abx_policy *p, int slot, const abx_op *op, abx_fs_view *v)
{
    for (size_t i = 0; i < p->n_mask_ident; i++) {
        const abx_mask_ident *m = &p->mask_ident[i];
        bool mask = mask_ident_applies(p, slot, op, m);
        struct stat st;
        bool exists = lstat(m->path, &st) == 0;
        if (m->known && !(exists && st.st_dev == m->dev && st.st_ino == m->ino)) {
            int rc = view_follow(v, m, mask);
            if (rc != 0)
                return rc;
        }
        if (exists && view_place(v, m->path, mask) != 0)
            return -1;
    }
    return 0;
}

/* .git at the top of each write root: pinned (a directory) or read-only (a gitfile),
 * its hooks and config read-only — code and settings the host runs later. A repository
 * without a hooks folder gets an empty one (owned like .git), which git ignores: else the
 * process could create it and plant a hook where no mount could be put. */
static bool view_git(abx_fs_view *v)
{
    struct stat st, hooks;
    char path[PATH_MAX];
    for (size_t i = 0; i < v->n_rw; i++) {
        const char *top = strcmp(v->rw[i], "/") == 0 ? "" : v->rw[i];
        snprintf(path, sizeof path, "%s/.git", top);
        bool found = lstat(path, &st) == 0, dir = found && S_ISDIR(st.st_mode);
        if ((dir || (found && S_ISREG(st.st_mode))) &&
            !list_add(dir ? &v->pins : &v->readonly, dir ? &v->n_pins : &v->n_readonly, path))
            return false;
        if (dir && strlen(path) + sizeof "/hooks" <= sizeof path) {
            strcat(path, "/hooks");
            if (lstat(path, &hooks) != 0 && errno == ENOENT && mkdir(path, 0755) == 0 &&
                lchown(path, st.st_uid, st.st_gid) != 0)
                rmdir(path);
        }
        static const char *const ro_names[] = {".git/hooks", ".git/config"};
        for (size_t k = 0; k < ABX_ARRAY_LEN(ro_names); k++) {
            snprintf(path, sizeof path, "%s/%s", top, ro_names[k]);
            if (lstat(path, &st) == 0 && !S_ISLNK(st.st_mode) && !list_add(&v->readonly, &v->n_readonly, path))
                return false;
        }
    }
    return true;
}

int abx_policy_fs_view(const abx_policy *p, int slot, const abx_op *op, const abx_decision *d, abx_fs_view *v)
{
    memset(v, 0, sizeof *v);
    if (d->err || d->chosen < 0 || (size_t)d->chosen >= p->n_allow)
        return -1;
    const abx_stmt *s = &p->allow[d->chosen];
    for (int k = 0; k < ABX_ACC_IDX__N; k++)
        for (size_t i = 0; i < s->n_paths[k]; i++) {
            const char *root = p->roots[s->paths[k][i].root];
            if (k == ABX_ACC_IDX_READ ? !list_add(&v->ro, &v->n_ro, root) : !list_add(&v->rw, &v->n_rw, root))
                goto oom;
        }
    v->cwd_root = v->n_rw ? v->rw[0] : v->n_ro ? v->ro[0] : NULL;
    int rc = view_deny_targets(p, slot, op, v);
    if (rc == -2) {
        char *moved = v->moved;
        v->moved = NULL;
        abx_fs_view_release(v);
        v->moved = moved;
        return -2;
    }
    if (rc != 0)
        goto oom;
    struct stat st;
    for (size_t i = 0; i < p->n_protected; i++) {
        const char *f = p->protected_files[i];
        if (lstat(f, &st) == 0 && view_place(v, f, true) != 0)
            goto oom;
    }
    if (!view_git(v))
        goto oom;
    return 0;
oom:
    abx_fs_view_release(v);
    return -1;
}

void abx_fs_view_release(abx_fs_view *v)
{
    char **lists[] = {v->ro, v->rw, v->masks, v->readonly, v->pins};
    size_t counts[] = {v->n_ro, v->n_rw, v->n_masks, v->n_readonly, v->n_pins};
    for (size_t l = 0; l < ABX_ARRAY_LEN(lists); l++) {
        for (size_t i = 0; i < counts[l]; i++)
            abx_free(lists[l][i]);
        abx_free(lists[l]);
    }
    abx_free(v->moved);
    memset(v, 0, sizeof *v);
}

bool abx_policy_move_pinned(const abx_policy *p, const char *path)
{
    struct stat st; /* a name with no file behind it carries nothing away */
    for (size_t i = 0; i < p->n_mask_ident; i++)
        if (within(path, p->mask_ident[i].path) && lstat(p->mask_ident[i].path, &st) == 0)
            return true;
    for (size_t i = 0; i < p->n_protected; i++)
        if (within(path, p->protected_files[i]) && lstat(p->protected_files[i], &st) == 0)
            return true;
    for (size_t i = 0; i < p->n_roots; i++) {
        const char *r = p->roots[i];
        size_t n = strlen(r);
        if (strncmp(path, r, n) == 0 && strcmp(path + (strcmp(r, "/") == 0 ? 0 : n), "/.git") == 0)
            return true;
    }
    return false;
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

bool abx_policy_path_hidden(const abx_policy *p, int slot, const abx_op *op, const char *canonical)
{
    for (size_t i = 0; i < p->n_deny; i++) {
        const abx_stmt *s = &p->deny[i];
        if (!s->has_paths || (s->n_ops && !stmt_has_op(s, op, false)) ||
            (s->n_principals && !stmt_has_principal(p, s, slot)))
            continue;
        for (int a = 0; a < ABX_ACC_IDX__N; a++)
            if (pattern_list_match(s->paths[a], s->n_paths[a], canonical, NULL))
                return true;
    }
    return protected_path(p, canonical, ABX_ACC_READ);
}
