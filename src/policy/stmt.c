/* stmt.c — one statement of the config (allow, deny, a preset's, auth.anonymous) parsed
 * into an abx_stmt: ops, principals, path patterns canonicalized against the workspace,
 * limits, command, url, language and agent scopes. Every refusal is a diagnostic with
 * the config line; nothing here decides a call. */
#include "policy/internal.h"
#include "core/util.h"
#include "policy/paths.h"
#include "policy/url.h"
#include "sandbox/jail.h"
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

int abx_pol_line_of(cctx *c, const json_t *obj, const char *key)
{
    if (!c->in->lines)
        return 0;
    int l = key ? abx_linemap_key_line(c->in->lines, obj, key) : 0;
    return l ? l : abx_linemap_line(c->in->lines, obj);
}

bool abx_pol_strlist(cctx *c, const json_t *parent, const char *key, char ***out, size_t *n)
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
        abx_diag_add(c->d, "error", "config.invalid", abx_pol_line_of(c, parent, key),
                     "'%s' must be a list of strings", key);
        return false;
    }
    *out = abx_calloc(json_array_size(v) + 1, sizeof **out);
    size_t i;
    json_t *it;
    json_array_foreach(v, i, it)
    {
        if (!json_is_string(it)) {
            abx_diag_add(c->d, "error", "config.invalid", abx_pol_line_of(c, it, NULL),
                         "'%s' must contain only strings", key);
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

void abx_pol_free_strlist(char **l, size_t n)
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
char *abx_pol_canon_glob(const char *workspace, const char *pat, char *err, size_t errlen)
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
    char *out = abx_pol_canon_glob(c->p->workspace, pat, err, sizeof err);
    if (!out)
        abx_diag_add(c->d, "error", "config.bad_glob", line, "path pattern '%s': %s", pat, err);
    return out;
}

bool abx_pol_add_patterns(cctx *c, abx_stmt *s, int k, const json_t *list, int line)
{
    if (json_is_string(list)) {
        json_t *tmp = json_pack("[O]", list);
        bool ok = abx_pol_add_patterns(c, s, k, tmp, line);
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

bool abx_pol_parse_paths(cctx *c, abx_stmt *s, const json_t *stmt)
{
    const json_t *v = json_object_get(stmt, "paths");
    if (!v)
        return true;
    int line = abx_pol_line_of(c, stmt, "paths");
    s->has_paths = true;
    if (json_is_array(v) || json_is_string(v)) { /* shorthand: read, write and delete */
        for (int k = 0; k < ABX_ACC_IDX__N; k++)
            if (!abx_pol_add_patterns(c, s, k, v, line))
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
            abx_diag_add(c->d, "error", "config.unknown_key", abx_pol_line_of(c, v, key),
                         "unknown access kind '%s' in paths (read, write, delete)", key);
            return false;
        }
        if (!abx_pol_add_patterns(c, s, k, val, abx_pol_line_of(c, v, key)))
            return false;
    }
    return true;
}


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
        abx_diag_add(c->d, "error", "config.invalid", abx_pol_line_of(c, stmt, "limits"), "'limits' must be a mapping");
        return false;
    }
    const char *key;
    json_t *val;
    json_object_foreach((json_t *)v, key, val)
    {
        int k = -1;
        for (int i = 0; i < ABX_LIM__COUNT; i++)
            if (strcmp(abx_limit_name((enum abx_limit)(1u << i)), key) == 0)
                k = i;
        int line = abx_pol_line_of(c, v, key);
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
    if (!abx_pol_strlist(c, stmt, "ops", &list, &n))
        return false;
    int line = abx_pol_line_of(c, stmt, "ops");
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
                    abx_pol_free_strlist(list, n);
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
                abx_diag_add(c->d, "warning", "config.alias_used", line,
                             "'%s' is a deprecated alias of '%s': rewritten to the canonical id (write '%s')", t, op->id, op->id);
                sel->text = abx_strdup(op->id);
            } else {
                sel->text = abx_strdup(t);
            }
        }
        /* strict: a selector that matches no registered op is an error */
        bool any = false;
        for (size_t o = 0; o < abx_registry_count(c->p->reg) && !any; o++)
            any = abx_pol_sel_match(sel, abx_registry_at(c->p->reg, o), false);
        if (!any) {
            char sug[ABX_ID_MAX];
            suggest(c, t, sug, sizeof sug);
            abx_diag_add(c->d, c->strict ? "error" : "warning", "config.unknown_selector", line,
                         "selector '%s' matches no registered operation%s%s%s", t, sug[0] ? " (did you mean '" : "",
                         sug, sug[0] ? "'?)" : "");
            if (c->strict) {
                abx_pol_free_strlist(list, n);
                return false;
            }
        }
    }
    (void)allow_side;
    abx_pol_free_strlist(list, n);
    return true;
}

bool abx_pol_check_keys(cctx *c, const json_t *obj, const char *const *allowed, const char *what)
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
            abx_diag_add(c->d, "error", "config.unknown_key", abx_pol_line_of(c, obj, key), "unknown key '%s' in %s",
                         key,
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
    int line = abx_pol_line_of(c, stmt, "commands");
    s->has_commands = true;
    const json_t *list = v;
    if (json_is_object(v)) {
        static const char *const keys[] = {"allow", "path", "env", "shell", "unrestricted", "unsafe", NULL};
        if (!abx_pol_check_keys(c, v, keys, "commands"))
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
        if (!abx_pol_strlist(c, v, "env", &s->env_allow, &s->n_env))
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
    if (!abx_pol_strlist(c, stmt, key, out, n))
        return false;
    if (strcmp(key, "ports") == 0)
        for (size_t i = 0; i < *n; i++)
            if (!abx_pol_port_in((*out)[i], -1)) {
                abx_diag_add(c->d, "error", "config.bad_value", abx_pol_line_of(c, stmt, key),
                             "ports entry '%s' must read PORT, LOW-HIGH (1..65535) or *", (*out)[i]);
                return false;
            }
    if (strcmp(key, "urls") == 0)
        for (size_t i = 0; i < *n; i++) {
            char err[200];
            if (!abx_url_pattern_valid((*out)[i], err, sizeof err)) {
                abx_diag_add(c->d, "error", "config.bad_url_pattern", abx_pol_line_of(c, stmt, key),
                             "url pattern '%s': %s",
                             (*out)[i], err);
                return false;
            }
        }
    return true;
}

bool abx_pol_parse_stmt(cctx *c, abx_stmt *s, const json_t *stmt, bool allow_side, const char *label)
{
    static const char *const allow_keys[] = {"id", "ops", "principals", "paths", "limits", "approval", "unsafe",
                                             "commands", "net", "urls", "languages", "agents", "ports", NULL};
    static const char *const deny_keys[] = {"id", "ops", "principals", "paths", "commands", "urls", NULL};
    memset(s, 0, sizeof *s);
    snprintf(s->label, sizeof s->label, "%s", label);
    for (int i = 0; i < ABX_LIM__COUNT; i++)
        s->limits[i] = -1;
    if (!json_is_object(stmt)) {
        abx_diag_add(c->d, "error", "config.invalid", abx_pol_line_of(c, stmt, NULL), "%s must be a mapping", label);
        return false;
    }
    s->line = abx_pol_line_of(c, stmt, NULL);
    if (!abx_pol_check_keys(c, stmt, allow_side ? allow_keys : deny_keys, label))
        return false;
    const json_t *id = json_object_get(stmt, "id");
    if (id) {
        if (!json_is_string(id)) {
            abx_diag_add(c->d, "error", "config.invalid", abx_pol_line_of(c, stmt, "id"), "'id' must be a string");
            return false;
        }
        snprintf(s->label, sizeof s->label, "%s", json_string_value(id));
    }
    if (!parse_ops(c, s, stmt, allow_side))
        return false;
    if (!abx_pol_strlist(c, stmt, "principals", &s->principals, &s->n_principals))
        return false;
    if (allow_side && s->n_ops == 0) {
        abx_diag_add(c->d, "error", "config.invalid", s->line, "%s needs 'ops'", label);
        return false;
    }
    if (allow_side && s->n_principals == 0) {
        abx_diag_add(c->d, "error", "config.invalid", s->line, "%s needs 'principals'", label);
        return false;
    }
    if (!abx_pol_parse_paths(c, s, stmt) || !parse_commands(c, s, stmt) ||
        !parse_name_scope(c, stmt, "urls", &s->has_urls, &s->urls, &s->n_urls))
        return false;
    if (!allow_side && s->has_commands && (s->cmd_unrestricted || s->cmd_shell || s->n_env)) {
        abx_diag_add(c->d, "error", "config.invalid", s->line, "a deny statement's commands are a list of patterns");
        return false;
    }
    if (allow_side) {
        if (!parse_name_scope(c, stmt, "languages", &s->has_languages, &s->languages, &s->n_languages) ||
            !parse_name_scope(c, stmt, "agents", &s->has_agents, &s->agents, &s->n_agents) ||
            !parse_name_scope(c, stmt, "ports", &s->has_ports, &s->ports, &s->n_ports))
            return false;
        if (!abx_pol_parse_net(c, s, stmt) || !parse_limits(c, s, stmt))
            return false;
        const json_t *ap = json_object_get(stmt, "approval");
        if (ap) {
            if (!json_is_string(ap) || (strcmp(json_string_value(ap), "required") != 0 &&
                                        strcmp(json_string_value(ap), "none") != 0)) {
                abx_diag_add(c->d, "error", "config.bad_value", abx_pol_line_of(c, stmt, "approval"),
                             "'approval' must be 'required' or 'none'");
                return false;
            }
            s->approval = strcmp(json_string_value(ap), "required") == 0;
        }
        const json_t *un = json_object_get(stmt, "unsafe");
        if (un && !json_is_boolean(un)) {
            abx_diag_add(c->d, "error", "config.bad_value", abx_pol_line_of(c, stmt, "unsafe"),
                         "'unsafe' must be a boolean");
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

bool abx_pol_add_stmt(abx_stmt **arr, size_t *n, abx_stmt *s)
{
    abx_stmt *g = abx_realloc(*arr, (*n + 1) * sizeof *g);
    if (!g)
        return false;
    *arr = g;
    (*arr)[(*n)++] = *s;
    return true;
}
