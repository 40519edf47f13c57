/* registry.c — the registry of operations: register (validating the declaration),
 * copy-on-write children, freeze, and the frozen sorted index with aliases.
 * Every rule about what a declaration may say is checked here, once, and names
 * the offending id. After freeze nothing changes: lookups take no lock.
 * Knows no namespace: the process-wide default registry, filled with the built-in
 * tables, is made in builtin/builtin.c. */
#include "core/core.h"
#include "core/util.h"
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

abx_registry *abx_registry_new(abx_registry *parent)
{
    abx_registry *r = abx_calloc(1, sizeof *r);
    if (!r)
        return NULL;
    pthread_mutex_init(&r->mu, NULL);
    r->parent = parent;
    return r;
}

static void op_free(abx_op *op)
{
    if (!op)
        return;
    for (size_t i = 0; i < op->n_bindings; i++)
        abx_free(op->bindings[i].path);
    abx_free(op);
}

void abx_registry_free(abx_registry *reg)
{
    if (!reg || reg->process_wide)
        return;
    for (size_t i = 0; i < reg->n_own; i++)
        op_free(reg->own[i]);
    abx_free(reg->own);
    abx_free(reg->lints);
    abx_free(reg->all);
    abx_free(reg->aliases);
    pthread_mutex_destroy(&reg->mu);
    abx_free(reg);
}

bool abx_registry_frozen(const abx_registry *reg) { return reg->frozen; }

/* Iterate every op visible from reg (own first, then ancestors'). */
#define FOR_VISIBLE(reg, r, i) \
    for (const abx_registry *r = (reg); r; r = r->parent) \
        for (size_t i = 0; i < r->n_own; i++)

static void add_lint(abx_registry *reg, const char *code, const char *id, const char *fmt, ...)
    __attribute__((format(printf, 4, 5)));
static void add_lint(abx_registry *reg, const char *code, const char *id, const char *fmt, ...)
{
    if (reg->n_lints == reg->cap_lints) {
        size_t cap = reg->cap_lints ? reg->cap_lints * 2 : 8;
        abx_lint *n = abx_realloc(reg->lints, cap * sizeof *n);
        if (!n)
            return;
        reg->lints = n;
        reg->cap_lints = cap;
    }
    abx_lint *l = &reg->lints[reg->n_lints++];
    snprintf(l->code, sizeof l->code, "%s", code);
    snprintf(l->id, sizeof l->id, "%s", id);
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(l->message, sizeof l->message, fmt, ap);
    va_end(ap);
}

/* Two bindings conflict when method matches and every segment is either the same
 * literal or a variable in both: equally specific, so no rule could order them. */
static bool bindings_conflict(const abx_binding *a, const abx_binding *b)
{
    if (strcmp(a->method, b->method) != 0)
        return false;
    const char *p = a->path, *q = b->path;
    for (;;) {
        while (*p == '/')
            p++;
        while (*q == '/')
            q++;
        if (!*p || !*q)
            return !*p && !*q;
        size_t lp = strcspn(p, "/"), lq = strcspn(q, "/");
        bool vp = *p == '{', vq = *q == '{';
        if (vp != vq)
            return false;
        if (!vp && (lp != lq || strncmp(p, q, lp) != 0))
            return false;
        p += lp;
        q += lq;
    }
}

static const char *const path_like[] = {"path", "file", "dir", "directory", "cwd", "root", "target",
                                        "dest", "src", "filename", "folder"};

static int check_param(const abx_op_def *d, const abx_param *p, int depth, char *err, size_t errlen)
{
    if (!p->name || !*p->name) {
        snprintf(err, errlen, "op '%s': a parameter has no name", d->id);
        return -1;
    }
    for (const char *c = p->name; *c; c++)
        if (!((*c >= 'a' && *c <= 'z') || (*c >= '0' && *c <= '9') || *c == '_')) {
            snprintf(err, errlen, "op '%s': parameter name '%s' must be [a-z0-9_]", d->id, p->name);
            return -1;
        }
    if (p->type <= ABX_T_NONE || p->type > ABX_T_ANY) {
        snprintf(err, errlen, "op '%s': parameter '%s' has no supported type", d->id, p->name);
        return -1;
    }
    if ((p->type == ABX_T_LIST || p->type == ABX_T_MAP) &&
        (p->item <= ABX_T_NONE || p->item > ABX_T_ANY || p->item == ABX_T_LIST || p->item == ABX_T_MAP)) {
        snprintf(err, errlen, "op '%s': parameter '%s' needs a scalar or object item type", d->id, p->name);
        return -1;
    }
    if ((p->type == ABX_T_ENUM || p->item == ABX_T_ENUM) && (!p->choices || !*p->choices)) {
        snprintf(err, errlen, "op '%s': enum parameter '%s' has no choices", d->id, p->name);
        return -1;
    }
    if ((p->type == ABX_T_OBJECT || p->item == ABX_T_OBJECT) && !p->fields) {
        snprintf(err, errlen, "op '%s': object parameter '%s' has no fields", d->id, p->name);
        return -1;
    }
    if (p->kind == ABX_KIND_PATH) {
        bool strings = p->type == ABX_T_STRING || (p->type == ABX_T_LIST && p->item == ABX_T_STRING);
        if (!strings || depth > 0) {
            snprintf(err, errlen, "op '%s': path parameter '%s' must be a top-level string or list of strings", d->id,
                     p->name);
            return -1;
        }
        if (!p->access) {
            snprintf(err, errlen, "op '%s': path parameter '%s' declares no access kinds (read/write/delete)", d->id,
                     p->name);
            return -1;
        }
    }
    /* limit-style integers (limit, max_*) must be ≥ 1: derived here, so no op can forget */
    if (p->type == ABX_T_INT && (strcmp(p->name, "limit") == 0 || strncmp(p->name, "max_", 4) == 0) &&
        (!(p->bounds & ABX_HAS_MIN) || p->min < 1)) {
        snprintf(err, errlen, "op '%s': limit-style parameter '%s' must declare a minimum of at least 1", d->id,
                 p->name);
        return -1;
    }
    if (p->dflt) {
        json_error_t je;
        json_t *v = json_loads(p->dflt, JSON_DECODE_ANY, &je);
        if (!v) {
            snprintf(err, errlen, "op '%s': default of '%s' is not JSON text: %s", d->id, p->name, p->dflt);
            return -1;
        }
        json_decref(v);
    }
    if (p->fields) {
        for (const abx_param *f = p->fields; f->name; f++)
            if (check_param(d, f, depth + 1, err, errlen) != 0)
                return -1;
    }
    return 0;
}

/* The declaration's own facts: a valid id outside the reserved namespaces (unless
 * built in), a handler, known effect bits. */
static int check_decl(const abx_op_def *d, bool builtin, char *err, size_t errlen)
{
    char why[200];
    if (!abx_id_valid(d->id, why, sizeof why)) {
        snprintf(err, errlen, "invalid op id: %s", why);
        return -1;
    }
    if (!builtin && abx_id_reserved_ns(d->id)) {
        snprintf(err, errlen, "op '%s': namespace is reserved for abx's built-in operations", d->id);
        return -1;
    }
    if (!d->handler) {
        snprintf(err, errlen, "op '%s' has no handler", d->id);
        return -1;
    }
    if (d->effects & ~((1u << ABX_EFF__COUNT) - 1)) {
        snprintf(err, errlen, "op '%s' declares unknown effect bits", d->id);
        return -1;
    }
    return 0;
}

/* Parameters: each valid, none twice, at most 32; the path and scoped-kind masks. */
static int add_params(abx_op *op, const abx_op_def *d, char *err, size_t errlen)
{
    for (const abx_param *p = d->params; p && p->name; p++) {
        if (check_param(d, p, 0, err, errlen) != 0)
            return -1;
        for (const abx_param *q = d->params; q != p; q++)
            if (strcmp(q->name, p->name) == 0) {
                snprintf(err, errlen, "op '%s': parameter '%s' is declared twice", d->id, p->name);
                return -1;
            }
        if (op->n_params >= 32) {
            snprintf(err, errlen, "op '%s' has more than 32 parameters", d->id);
            return -1;
        }
        if (p->kind == ABX_KIND_PATH)
            op->path_params |= 1u << op->n_params;
        if (p->kind != ABX_KIND_PLAIN)
            op->scoped_kinds |= 1u << p->kind;
        op->n_params++;
    }
    return 0;
}

/* one_of names parameters; errors names codes of errors.def; aliases are ids' size. */
static int check_names(const abx_op *op, const abx_op_def *d, char *err, size_t errlen)
{
    if (d->one_of) {
        char tmp[128];
        snprintf(tmp, sizeof tmp, "%s", d->one_of);
        for (char *save = NULL, *t = strtok_r(tmp, "|", &save); t; t = strtok_r(NULL, "|", &save))
            if (!abx_op_param(op, t)) {
                snprintf(err, errlen, "op '%s': one_of names '%s', which is not a parameter", d->id, t);
                return -1;
            }
    }
    for (const char *e = d->errors; e && *e;) {
        size_t n = strcspn(e, " ");
        char code[64];
        snprintf(code, sizeof code, "%.*s", (int)n, e);
        if (n && (n >= sizeof code || abx_err_by_code(code) < 0)) {
            snprintf(err, errlen, "op '%s': errors names '%s', which is not a code in errors.def", d->id, code);
            return -1;
        }
        e += n + (e[n] == ' ');
    }
    for (size_t i = 0; i < ABX_MAX_ALIASES && d->aliases[i]; i++) {
        const char *a = d->aliases[i];
        if (!*a || strlen(a) >= ABX_ID_MAX) {
            snprintf(err, errlen, "op '%s': alias '%s' is empty or too long", d->id, a);
            return -1;
        }
    }
    return 0;
}

/* A binding's path: '/'-separated non-empty segments; every {var} names a declared
 * scalar parameter; no braces or '%' inside a literal segment. */
static int check_binding_path(const abx_op *op, const char *path, char *err, size_t errlen)
{
    const char *id = op->id;
    for (const char *s = path; *s;) {
        if (*s != '/') {
            snprintf(err, errlen, "op '%s': binding path '%s' is malformed", id, path);
            return -1;
        }
        s++;
        size_t n = strcspn(s, "/");
        if (n == 0) { /* also "/" alone: every binding names at least one segment */
            snprintf(err, errlen, "op '%s': binding path '%s' has an empty segment", id, path);
            return -1;
        }
        if (s[0] == '{') {
            if (s[n - 1] != '}' || n < 3) {
                snprintf(err, errlen, "op '%s': binding path '%s' has a malformed variable", id, path);
                return -1;
            }
            char var[64];
            bool rest = s[n - 2] == '*'; /* {name*}: the rest of the path; the last segment only */
            snprintf(var, sizeof var, "%.*s", (int)(n - 2 - rest), s + 1);
            if (rest && (s[n] != '\0' || n < 4)) {
                snprintf(err, errlen, "op '%s': binding path '%s' has a {name*} variable before its end", id, path);
                return -1;
            }
            const abx_param *p = abx_op_param(op, var);
            if (!p || p->type == ABX_T_LIST || p->type == ABX_T_MAP || p->type == ABX_T_OBJECT || p->type == ABX_T_ANY) {
                snprintf(err, errlen, "op '%s': path variable '{%s}' is not a declared scalar parameter", id, var);
                return -1;
            }
        } else if (memchr(s, '{', n) || memchr(s, '}', n) || memchr(s, '%', n)) {
            snprintf(err, errlen, "op '%s': binding path '%s' has a malformed segment", id, path);
            return -1;
        }
        s += n;
    }
    return 0;
}

/* HTTP bindings: each "METHOD /path" with a known method and a well-formed path. */
static int add_bindings(abx_op *op, const abx_op_def *d, char *err, size_t errlen)
{
    static const char *const methods[] = {"GET", "POST", "PUT", "PATCH", "DELETE", "HEAD", "OPTIONS"};
    for (size_t i = 0; i < ABX_MAX_BINDINGS && d->http[i]; i++) {
        const char *b = d->http[i];
        const char *sp = strchr(b, ' ');
        bool mok = false;
        for (size_t m = 0; sp && m < ABX_ARRAY_LEN(methods); m++)
            if ((size_t)(sp - b) == strlen(methods[m]) && strncmp(b, methods[m], (size_t)(sp - b)) == 0)
                mok = true;
        if (!mok || sp[1] != '/') {
            snprintf(err, errlen, "op '%s': binding '%s' must read 'METHOD /path'", d->id, b);
            return -1;
        }
        abx_binding *bd = &op->bindings[op->n_bindings++];
        memcpy(bd->method, b, (size_t)(sp - b));
        bd->path = abx_strdup(sp + 1);
        if (!bd->path) {
            snprintf(err, errlen, "out of memory");
            return -1;
        }
        if (check_binding_path(op, bd->path, err, errlen) != 0)
            return -1;
    }
    return 0;
}

static int build_op(abx_registry *reg, const abx_op_def *d, bool builtin, abx_op **out, char *err, size_t errlen)
{
    (void)reg;
    if (check_decl(d, builtin, err, errlen) != 0)
        return -1;
    abx_op *op = abx_calloc(1, sizeof *op);
    if (!op) {
        snprintf(err, errlen, "out of memory");
        return -1;
    }
    op->def = d;
    op->id = d->id;
    op->effects_declared = d->effects != 0;
    op->effects = d->effects ? d->effects : ABX_EFF_ADMIN;
    op->explicit_only = (op->effects & (ABX_EFF_ADMIN | ABX_EFF_SCRIPT)) != 0;
    if (add_params(op, d, err, errlen) != 0 || check_names(op, d, err, errlen) != 0 ||
        add_bindings(op, d, err, errlen) != 0) {
        op_free(op);
        return -1;
    }
    *out = op;
    return 0;
}

/* Does `name` (id or alias) already exist anywhere visible from reg, or in the batch? */
static const abx_op *find_name(const abx_registry *reg, abx_op **batch, size_t nb, const char *name)
{
    FOR_VISIBLE(reg, r, i)
    {
        const abx_op *o = r->own[i];
        if (strcmp(o->id, name) == 0)
            return o;
        for (size_t a = 0; a < ABX_MAX_ALIASES && o->def->aliases[a]; a++)
            if (strcmp(o->def->aliases[a], name) == 0)
                return o;
    }
    for (size_t j = 0; j < nb; j++) {
        if (strcmp(batch[j]->id, name) == 0)
            return batch[j];
        for (size_t a = 0; a < ABX_MAX_ALIASES && batch[j]->def->aliases[a]; a++)
            if (strcmp(batch[j]->def->aliases[a], name) == 0)
                return batch[j];
    }
    return NULL;
}

static int check_against(const abx_op *op, const abx_op *o, char *err, size_t errlen)
{
    if (abx_id_is_prefix(op->id, o->id) || abx_id_is_prefix(o->id, op->id)) {
        snprintf(err, errlen, "op '%s': ids may not be prefixes of each other ('%s')", op->id, o->id);
        return -1;
    }
    for (size_t a = 0; a < op->n_bindings; a++)
        for (size_t b = 0; b < o->n_bindings; b++)
            if (bindings_conflict(&op->bindings[a], &o->bindings[b])) {
                snprintf(err, errlen, "op '%s': binding '%s %s' is as specific as '%s %s' of '%s'", op->id,
                         op->bindings[a].method, op->bindings[a].path, o->bindings[b].method, o->bindings[b].path,
                         o->id);
                return -1;
            }
    return 0;
}

int abx__registry_add(abx_registry *reg, const abx_op_def *ops, bool builtin, char *err, size_t errlen)
{
    pthread_mutex_lock(&reg->mu);
    int rc = -1;
    size_t n = 0;
    abx_op **batch = NULL;
    if (reg->frozen) {
        snprintf(err, errlen, "RegistryFrozen: register ops before starting the server (op '%s')",
                 ops && ops->id ? ops->id : "?");
        goto out;
    }
    for (const abx_op_def *d = ops; d && d->id; d++)
        n++;
    batch = abx_calloc(n ? n : 1, sizeof *batch);
    if (!batch) {
        snprintf(err, errlen, "out of memory");
        goto out;
    }
    for (size_t i = 0; i < n; i++) {
        if (build_op(reg, &ops[i], builtin, &batch[i], err, errlen) != 0)
            goto out_batch;
        abx_op *op = batch[i];
        if (find_name(reg, batch, i, op->id)) {
            snprintf(err, errlen, "op '%s' is already registered", op->id);
            i++;
            goto out_batch_i;
        }
        for (size_t a = 0; a < ABX_MAX_ALIASES && op->def->aliases[a]; a++)
            if (find_name(reg, batch, i + 1, op->def->aliases[a]) != op ||
                find_name(reg, batch, i, op->def->aliases[a])) {
                snprintf(err, errlen, "op '%s': alias '%s' is already taken", op->id, op->def->aliases[a]);
                i++;
                goto out_batch_i;
            }
        FOR_VISIBLE(reg, r, k)
        {
            if (check_against(op, r->own[k], err, errlen) != 0) {
                i++;
                goto out_batch_i;
            }
        }
        for (size_t j = 0; j < i; j++)
            if (check_against(op, batch[j], err, errlen) != 0) {
                i++;
                goto out_batch_i;
            }
        continue;
    out_batch_i:
        for (size_t j = 0; j < i; j++)
            op_free(batch[j]);
        abx_free(batch);
        batch = NULL;
        goto out;
    }
    if (reg->n_own + n > reg->cap_own) {
        size_t cap = reg->cap_own ? reg->cap_own : 16;
        while (cap < reg->n_own + n)
            cap *= 2;
        abx_op **grown = abx_realloc(reg->own, cap * sizeof *grown);
        if (!grown) {
            snprintf(err, errlen, "out of memory");
            goto out_batch;
        }
        reg->own = grown;
        reg->cap_own = cap;
    }
    for (size_t i = 0; i < n; i++) {
        abx_op *op = batch[i];
        reg->own[reg->n_own++] = op;
        if (!op->effects_declared)
            add_lint(reg, "core.effects_undeclared", op->id,
                     "op '%s' declares no effects; it is treated as admin (explicit-only)", op->id);
        if (!abx_id_known_verb(op->id))
            add_lint(reg, "core.unknown_verb", op->id, "op '%s' ends in an unconventional verb", op->id);
        for (size_t p = 0; p < op->n_params; p++) {
            const abx_param *pa = &op->def->params[p];
            if (pa->kind != ABX_KIND_PLAIN)
                continue;
            bool cmd = (op->scoped_kinds & (1u << ABX_KIND_COMMAND)) != 0;
            for (size_t k = 0; k < ABX_ARRAY_LEN(path_like); k++)
                if (strcmp(pa->name, path_like[k]) == 0 && !(cmd && strcmp(pa->name, "cwd") == 0))
                    add_lint(reg, "core.path_like_param", op->id,
                             "op '%s': parameter %s looks like a path but is not declared in paths=; path scopes "
                             "will not protect it",
                             op->id, pa->name);
        }
    }
    rc = 0;
    abx_free(batch);
    batch = NULL;
    goto out;
out_batch:
    for (size_t j = 0; j < n; j++)
        op_free(batch[j]);
    abx_free(batch);
out:
    pthread_mutex_unlock(&reg->mu);
    return rc;
}

int abx_registry_add(abx_registry *reg, const abx_op_def *ops, char *errbuf, size_t errlen)
{
    return abx__registry_add(reg, ops, false, errbuf, errlen);
}

static int cmp_op(const void *a, const void *b)
{
    return strcmp((*(abx_op *const *)a)->id, (*(abx_op *const *)b)->id);
}

static int cmp_alias(const void *a, const void *b)
{
    return strcmp(((const struct abx_alias *)a)->name, ((const struct abx_alias *)b)->name);
}

void abx_registry_freeze(abx_registry *reg)
{
    if (reg->parent)
        abx_registry_freeze(reg->parent);
    pthread_mutex_lock(&reg->mu);
    if (reg->frozen) {
        pthread_mutex_unlock(&reg->mu);
        return;
    }
    size_t n = 0, na = 0;
    FOR_VISIBLE(reg, r, i)
    {
        n++;
        for (size_t a = 0; a < ABX_MAX_ALIASES && r->own[i]->def->aliases[a]; a++)
            na++;
    }
    reg->all = abx_calloc(n ? n : 1, sizeof *reg->all);
    reg->aliases = abx_calloc(na ? na : 1, sizeof *reg->aliases);
    if (!reg->all || !reg->aliases) {
        fprintf(stderr, "abx: out of memory freezing the registry\n");
        abort();
    }
    FOR_VISIBLE(reg, r, i)
    {
        abx_op *o = r->own[i];
        reg->all[reg->n_all++] = o;
        for (size_t a = 0; a < ABX_MAX_ALIASES && o->def->aliases[a]; a++)
            reg->aliases[reg->n_aliases++] = (struct abx_alias){o->def->aliases[a], o};
    }
    qsort(reg->all, reg->n_all, sizeof *reg->all, cmp_op);
    qsort(reg->aliases, reg->n_aliases, sizeof *reg->aliases, cmp_alias);
    /* Index positions are per frozen view; an op shared by two children has one
     * index per child, so metrics use (registry, index) — the child owns the arrays. */
    reg->frozen = true;
    pthread_mutex_unlock(&reg->mu);
}

const abx_op *abx_registry_get(const abx_registry *reg, const char *id)
{
    size_t lo = 0, hi = reg->n_all;
    while (lo < hi) {
        size_t mid = (lo + hi) / 2;
        int c = strcmp(reg->all[mid]->id, id);
        if (c == 0)
            return reg->all[mid];
        if (c < 0)
            lo = mid + 1;
        else
            hi = mid;
    }
    return NULL;
}

const abx_op *abx_registry_resolve(const abx_registry *reg, const char *name)
{
    const abx_op *op = abx_registry_get(reg, name);
    if (op)
        return op;
    size_t lo = 0, hi = reg->n_aliases;
    while (lo < hi) {
        size_t mid = (lo + hi) / 2;
        int c = strcmp(reg->aliases[mid].name, name);
        if (c == 0)
            return reg->aliases[mid].op;
        if (c < 0)
            lo = mid + 1;
        else
            hi = mid;
    }
    return NULL;
}

size_t abx_registry_count(const abx_registry *reg) { return reg->n_all; }

size_t abx_registry_index_of(const abx_registry *reg, const abx_op *op)
{
    size_t lo = 0, hi = reg->n_all;
    while (lo < hi) {
        size_t mid = (lo + hi) / 2;
        int c = strcmp(reg->all[mid]->id, op->id);
        if (c == 0)
            return mid;
        if (c < 0)
            lo = mid + 1;
        else
            hi = mid;
    }
    return reg->n_all;
}
const abx_op *abx_registry_at(const abx_registry *reg, size_t i) { return i < reg->n_all ? reg->all[i] : NULL; }

size_t abx_registry_lints(const abx_registry *reg, const abx_lint **out)
{
    *out = reg->lints;
    return reg->n_lints;
}

const abx_op *abx_registry_resolve_tool(const abx_registry *reg, const char *name)
{
    if (!name || !*name)
        return NULL;
    if (strchr(name, '.'))
        return abx_registry_resolve(reg, name);
    /* '.' → "__" is not invertible in general ("a.b_" and "a.b" + "_…"), so compare
     * each op's tool name; ids and aliases both answer to their tool spelling. */
    char tn[2 * ABX_ID_MAX];
    for (size_t i = 0; i < reg->n_all; i++)
        if (abx_id_tool_name(reg->all[i]->id, tn, sizeof tn) && strcmp(tn, name) == 0)
            return reg->all[i];
    for (size_t i = 0; i < reg->n_aliases; i++)
        if (abx_id_tool_name(reg->aliases[i].name, tn, sizeof tn) && strcmp(tn, name) == 0)
            return reg->aliases[i].op;
    return NULL;
}
