/* match.c — the matching rules a compiled statement answers, shared by compile, decide
 * and the views: op selectors, principals, the scope kinds an op needs, path patterns,
 * an op's intrinsic jail and the protected areas. */
#include "policy/internal.h"
#include "core/util.h"
#include "policy/paths.h"
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* The intrinsic jail of a path parameter (abx_param.roots, patterns joined by '|'):
 * the canonical value must match one of them whatever the statement grants. */
bool abx_pol_intrinsic_admits(const abx_policy *p, const abx_param *pa, const char *canonical)
{
    if (!pa->roots)
        return true;
    char buf[4096];
    snprintf(buf, sizeof buf, "%s", pa->roots);
    bool hit = false;
    for (char *save = NULL, *t = strtok_r(buf, "|", &save); t && !hit; t = strtok_r(NULL, "|", &save)) {
        char err[160];
        char *g = abx_pol_canon_glob(p->workspace, t, err, sizeof err);
        hit = g && abx_glob_match(g, canonical);
        abx_free(g);
    }
    return hit;
}

/* Does an op selector match? allow_side: explicit-only ops match only exact ids. */
bool abx_pol_sel_match(const abx_sel *s, const abx_op *op, bool allow_side)
{
    /* ops that start an agent CLI (an agent parameter) are mounted only by statements
     * that name them: their namespace ("agents.*", "agents.codex.*") or their id */
    if (allow_side && (op->scoped_kinds & (1u << ABX_KIND_AGENT)) &&
        (s->kind == ABX_SEL_ALL || s->kind == ABX_SEL_GROUP || s->kind == ABX_SEL_EFFECT))
        return false;
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

bool abx_pol_stmt_has_principal(const abx_policy *p, const abx_stmt *s, int slot)
{
    for (size_t i = 0; i < s->n_principals; i++)
        if (principal_matches(p, slot, s->principals[i]))
            return true;
    return false;
}

bool abx_pol_stmt_has_op(const abx_stmt *s, const abx_op *op, bool allow_side)
{
    for (size_t i = 0; i < s->n_ops; i++)
        if (abx_pol_sel_match(&s->ops[i], op, allow_side))
            return true;
    return false;
}

bool abx_pol_deny_applies(const abx_policy *p, const abx_stmt *s, const abx_op *op, int slot)
{
    return (!s->n_ops || abx_pol_stmt_has_op(s, op, false)) &&
           (!s->n_principals || abx_pol_stmt_has_principal(p, s, slot));
}

bool abx_pol_port_in(const char *e, long port)
{
    if (strcmp(e, "*") == 0)
        return true;
    char *end;
    long lo = strtol(e, &end, 10), hi = lo;
    if (end == e || lo < 1 || lo > 65535)
        return false;
    if (*end == '-') {
        const char *h = end + 1;
        hi = strtol(h, &end, 10);
        if (end == h || hi < lo || hi > 65535)
            return false;
    }
    if (*end)
        return false;
    return port < 0 || (port >= lo && port <= hi);
}

/* The scope kind an op needs that a statement lacks ("paths", "commands", ...), or NULL. */
const char *abx_pol_scope_missing(const abx_stmt *s, const abx_op *op)
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
    if ((op->scoped_kinds & (1u << ABX_KIND_PORT)) && !s->has_ports)
        return "ports";
    return NULL;
}

static bool under_dir(const char *dir, const char *path);
bool abx_pol_within(const char *dir, const char *path)
{
    return strcmp(dir, "/") == 0 ? path[0] == '/' : under_dir(dir, path);
}

bool abx_pol_pattern_list_match(const abx_pattern *pats, size_t n, const char *path, const abx_pattern **hit)
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
bool abx_pol_protected_path(const abx_policy *p, const char *path, unsigned access)
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
