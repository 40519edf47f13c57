/* router.c — the trie router built from the frozen registry's bindings. A node per
 * path segment; literal children are tried before the variable child, with
 * backtracking, so `GET /process/list` beats `GET /process/{pid}` whatever the
 * registration order. Equally specific bindings never reach here: the registry
 * refuses them at registration. Immutable after build; matching takes no lock. */
#include "core/util.h"
#include "http/http.h"
#include <string.h>

enum { M_GET, M_POST, M_PUT, M_PATCH, M_DELETE, M_HEAD, M_OPTIONS, M__N };
static const char *const method_names[M__N] = {"GET", "POST", "PUT", "PATCH", "DELETE", "HEAD", "OPTIONS"};

typedef struct node {
    char *seg;                 /* literal text; NULL for the variable child */
    struct node **kids;        /* literal children */
    size_t n_kids;
    struct node *var;          /* the {variable} child */
    struct node *rest;         /* the {variable*} child: the rest of the path, slashes and all */
    struct {
        const abx_op *op;
        size_t op_index;
        const char *path;      /* the binding's path (variable names come from it) */
    } h[M__N];
} node;

struct abx_router {
    node *root;
};

static int method_index(const char *m)
{
    for (int i = 0; i < M__N; i++)
        if (strcmp(m, method_names[i]) == 0)
            return i;
    return -1;
}

static void node_free(node *n)
{
    if (!n)
        return;
    for (size_t i = 0; i < n->n_kids; i++)
        node_free(n->kids[i]);
    abx_free(n->kids);
    node_free(n->var);
    node_free(n->rest);
    abx_free(n->seg);
    abx_free(n);
}

static node *child(node *n, const char *seg, size_t len, bool var)
{
    if (var && len > 2 && seg[len - 2] == '*') {
        if (!n->rest)
            n->rest = abx_calloc(1, sizeof(node));
        return n->rest;
    }
    if (var) {
        if (!n->var)
            n->var = abx_calloc(1, sizeof(node));
        return n->var;
    }
    for (size_t i = 0; i < n->n_kids; i++)
        if (strlen(n->kids[i]->seg) == len && memcmp(n->kids[i]->seg, seg, len) == 0)
            return n->kids[i];
    node **g = abx_realloc(n->kids, (n->n_kids + 1) * sizeof *g);
    if (!g)
        return NULL;
    n->kids = g;
    node *k = abx_calloc(1, sizeof *k);
    if (!k)
        return NULL;
    k->seg = abx_strndup(seg, len);
    if (!k->seg) {
        abx_free(k);
        return NULL;
    }
    n->kids[n->n_kids++] = k;
    return k;
}

abx_router *abx_router_build(const abx_registry *reg)
{
    abx_router *r = abx_calloc(1, sizeof *r);
    if (!r || !(r->root = abx_calloc(1, sizeof(node)))) {
        abx_free(r);
        return NULL;
    }
    for (size_t i = 0; i < abx_registry_count(reg); i++) {
        const abx_op *op = abx_registry_at(reg, i);
        for (size_t b = 0; b < op->n_bindings; b++) {
            const abx_binding *bd = &op->bindings[b];
            node *n = r->root;
            for (const char *s = bd->path; *s && n;) {
                s++; /* '/' */
                size_t len = strcspn(s, "/");
                if (len == 0)
                    break;
                n = child(n, s, len, s[0] == '{');
                s += len;
            }
            int m = method_index(bd->method);
            if (!n || m < 0) {
                abx_router_free(r);
                return NULL;
            }
            n->h[m].op = op;
            n->h[m].op_index = i;
            n->h[m].path = bd->path;
        }
    }
    return r;
}

void abx_router_free(abx_router *r)
{
    if (!r)
        return;
    node_free(r->root);
    abx_free(r);
}

/* Depth-first: literal first, then variable. Returns the terminal node or NULL. */
static const node *rest_of(const node *n, int method, bool need_method)
{
    const node *t = n->rest;
    if (!t)
        return NULL;
    if (!need_method)
        for (int i = 0; i < M__N; i++)
            if (t->h[i].op)
                return t;
    return need_method && t->h[method].op ? t : NULL;
}

static const node *walk(const node *n, const char *p, const char *end, int method, bool need_method)
{
    if (p < end && *p == '/' && n->rest) { /* {x*}: literal and variable children first */
        const node *t = NULL;
        if (p + 1 < end) {
            const char *se = memchr(p + 1, '/', (size_t)(end - p - 1));
            size_t len = (size_t)((se ? se : end) - (p + 1));
            for (size_t i = 0; i < n->n_kids && !t && len; i++)
                if (strlen(n->kids[i]->seg) == len && memcmp(n->kids[i]->seg, p + 1, len) == 0)
                    t = walk(n->kids[i], se ? se : end, end, method, need_method);
            if (!t && n->var && len)
                t = walk(n->var, se ? se : end, end, method, need_method);
        }
        return t ? t : rest_of(n, method, need_method);
    }
    if (p >= end || (p + 1 == end && *p == '/')) {
        if (p < end && *p == '/')
            return NULL; /* trailing slash: no route (the target check refuses "//" anyway) */
        if (!need_method)
            for (int i = 0; i < M__N; i++)
                if (n->h[i].op)
                    return n;
        return (need_method && n->h[method].op) ? n : NULL;
    }
    if (*p != '/')
        return NULL;
    p++;
    const char *seg_end = memchr(p, '/', (size_t)(end - p));
    if (!seg_end)
        seg_end = end;
    size_t len = (size_t)(seg_end - p);
    if (len == 0)
        return NULL;
    for (size_t i = 0; i < n->n_kids; i++) {
        const node *k = n->kids[i];
        if (strlen(k->seg) == len && memcmp(k->seg, p, len) == 0) {
            const node *t = walk(k, seg_end, end, method, need_method);
            if (t)
                return t;
        }
    }
    if (n->var)
        return walk(n->var, seg_end, end, method, need_method);
    return NULL;
}

static void extract_vars(const char *bpath, const char *path, const char *end, abx_route_match *m)
{
    const char *b = bpath, *p = path;
    m->n_vars = 0;
    while (*b && p < end) {
        b++;
        p++;
        size_t bl = strcspn(b, "/");
        const char *pe = memchr(p, '/', (size_t)(end - p));
        size_t pl = pe ? (size_t)(pe - p) : (size_t)(end - p);
        if (b[0] == '{' && bl > 2 && b[bl - 2] == '*' && m->n_vars < ABX_ROUTE_MAX_VARS) {
            size_t nl = bl - 3 < sizeof m->vars[0].name - 1 ? bl - 3 : sizeof m->vars[0].name - 1;
            memcpy(m->vars[m->n_vars].name, b + 1, nl);
            m->vars[m->n_vars].name[nl] = '\0';
            m->vars[m->n_vars].val = p;
            m->vars[m->n_vars].len = (size_t)(end - p);
            m->n_vars++;
            return;
        }
        if (b[0] == '{' && m->n_vars < ABX_ROUTE_MAX_VARS) {
            size_t nl = bl - 2 < sizeof m->vars[0].name - 1 ? bl - 2 : sizeof m->vars[0].name - 1;
            memcpy(m->vars[m->n_vars].name, b + 1, nl);
            m->vars[m->n_vars].name[nl] = '\0';
            m->vars[m->n_vars].val = p;
            m->vars[m->n_vars].len = pl;
            m->n_vars++;
        }
        b += bl;
        p += pl;
    }
}

enum abx_route_result abx_router_match(const abx_router *r, const char *method, const char *path, size_t plen,
                                       abx_route_match *m)
{
    memset(m, 0, sizeof *m);
    const char *end = path + plen;
    int mi = method_index(method);
    if (mi >= 0) {
        const node *n = walk(r->root, path, end, mi, true);
        if (n) {
            m->op = n->h[mi].op;
            m->op_index = n->h[mi].op_index;
            extract_vars(n->h[mi].path, path, end, m);
            return ABX_ROUTE_FOUND;
        }
    }
    const node *n = walk(r->root, path, end, 0, false);
    if (!n)
        return ABX_ROUTE_NONE;
    for (int i = 0; i < M__N && m->n_others < 8; i++)
        if (n->h[i].op) {
            m->others[m->n_others].method = method_names[i];
            m->others[m->n_others].op_index = n->h[i].op_index;
            m->n_others++;
        }
    return ABX_ROUTE_WRONG_METHOD;
}
