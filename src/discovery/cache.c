/* cache.c — the discovery documents a caller asks for again and again (GET /ops,
 * GET /openapi.json, MCP's tools/list), built once per policy snapshot and per view. A view is the
 * set of ops a principal slot has mounted: principals with the same mounts share one
 * document, so memory grows with distinct views, not with principals. The cache hangs
 * off the snapshot (abx_policy.derived) and is freed with it: a reload compiles a new
 * snapshot, which starts empty, so nothing is ever invalidated by hand. */
#include "discovery/discovery.h"
#include "core/util.h"
#include <pthread.h>
#include <string.h>

typedef struct view {
    uint8_t *mounted;           /* owned: [n_ops] 1 when the op is mounted */
    json_t *doc[ABX_DOC__COUNT]; /* owned: documents, NULL until first asked */
    char *text[ABX_DOC__COUNT]; /* owned: serialized documents, NULL until first asked */
    size_t len[ABX_DOC__COUNT];
} view;

typedef struct doc_cache {
    abx_policy_derived base;    /* first: the snapshot frees us through base.free_fn */
    pthread_mutex_t mu;         /* guards everything below */
    size_t n_slots, n_ops;
    int *slot_view;             /* owned: [n_slots] index into views, -1 not yet known */
    view *views;                /* owned: [n_views] */
    size_t n_views, cap_views;
} doc_cache;

static void cache_free(abx_policy_derived *d)
{
    doc_cache *c = (doc_cache *)d;
    for (size_t v = 0; v < c->n_views; v++) {
        abx_free(c->views[v].mounted);
        for (int k = 0; k < ABX_DOC__COUNT; k++) {
            json_decref(c->views[v].doc[k]);
            abx_free(c->views[v].text[k]);
        }
    }
    abx_free(c->views);
    abx_free(c->slot_view);
    pthread_mutex_destroy(&c->mu);
    abx_free(c);
}

/* The snapshot's cache, created on first use; NULL on OOM. */
static doc_cache *cache_of(abx_policy *p)
{
    abx_policy_derived *d = atomic_load(&p->derived);
    if (d)
        return (doc_cache *)d;
    doc_cache *c = abx_calloc(1, sizeof *c);
    if (!c)
        return NULL;
    c->base.free_fn = cache_free;
    c->n_slots = p->n_principals + 1;
    c->n_ops = p->n_ops;
    c->slot_view = abx_malloc(c->n_slots * sizeof *c->slot_view);
    if (!c->slot_view) {
        abx_free(c);
        return NULL;
    }
    for (size_t i = 0; i < c->n_slots; i++)
        c->slot_view[i] = -1;
    pthread_mutex_init(&c->mu, NULL);
    abx_policy_derived *expected = NULL;
    if (!atomic_compare_exchange_strong(&p->derived, &expected, &c->base)) {
        cache_free(&c->base); /* another thread installed one first */
        return (doc_cache *)expected;
    }
    return c;
}

/* The view of slot (found or added); -1 on OOM. Called with c->mu held. */
static int view_of(doc_cache *c, const abx_policy *p, int slot)
{
    if (c->slot_view[slot] >= 0)
        return c->slot_view[slot];
    uint8_t *m = abx_malloc(c->n_ops ? c->n_ops : 1);
    if (!m)
        return -1;
    for (size_t o = 0; o < c->n_ops; o++)
        m[o] = abx_policy_mounted(p, slot, o);
    for (size_t v = 0; v < c->n_views; v++)
        if (memcmp(c->views[v].mounted, m, c->n_ops) == 0) {
            abx_free(m);
            return c->slot_view[slot] = (int)v;
        }
    if (c->n_views == c->cap_views) {
        size_t cap = c->cap_views ? c->cap_views * 2 : 4;
        view *g = abx_realloc(c->views, cap * sizeof *g);
        if (!g) {
            abx_free(m);
            return -1;
        }
        c->views = g;
        c->cap_views = cap;
    }
    c->views[c->n_views] = (view){.mounted = m};
    return c->slot_view[slot] = (int)c->n_views++;
}

static json_t *build(abx_doc kind, const abx_registry *reg, const abx_policy *p, int slot)
{
    if (kind == ABX_DOC_CATALOG)
        return abx_catalog(reg, p, slot);
    if (kind == ABX_DOC_MCP_TOOLS)
        return abx_mcp_tools(reg, p, slot);
    json_t *doc = abx_openapi(reg, p, slot, NULL);
    json_object_del(doc, "servers"); /* depends on the request: the server splices it in */
    return doc;
}

const char *abx_discovery_text(abx_doc kind, const abx_registry *reg, abx_policy *p, int slot, size_t *len)
{
    if (kind < 0 || kind >= ABX_DOC__COUNT || slot < 0 || (size_t)slot > p->n_principals)
        return NULL;
    doc_cache *c = cache_of(p);
    if (!c)
        return NULL;
    const char *out = NULL;
    pthread_mutex_lock(&c->mu);
    int v = view_of(c, p, slot);
    if (v >= 0 && !c->views[v].text[kind]) {
        /* built under the lock: the first caller of a view pays once, the others wait
         * for it instead of building the same document again */
        json_t *doc = build(kind, reg, p, slot);
        char *s = doc ? json_dumps(doc, JSON_COMPACT | JSON_SORT_KEYS) : NULL;
        json_decref(doc);
        if (s) {
            c->views[v].len[kind] = strlen(s);
            c->views[v].text[kind] = abx_strndup(s, c->views[v].len[kind]);
            free(s);
        }
    }
    if (v >= 0 && c->views[v].text[kind]) { /* never changes again: safe to read unlocked */
        *len = c->views[v].len[kind];
        out = c->views[v].text[kind];
    }
    pthread_mutex_unlock(&c->mu);
    return out;
}

json_t *abx_discovery_json(abx_doc kind, const abx_registry *reg, abx_policy *p, int slot)
{
    if (kind < 0 || kind >= ABX_DOC__COUNT || slot < 0 || (size_t)slot > p->n_principals)
        return NULL;
    doc_cache *c = cache_of(p);
    if (!c)
        return NULL;
    json_t *out = NULL;
    pthread_mutex_lock(&c->mu);
    int v = view_of(c, p, slot);
    if (v >= 0 && !c->views[v].doc[kind])
        c->views[v].doc[kind] = build(kind, reg, p, slot); /* under the lock, as for the text */
    if (v >= 0 && c->views[v].doc[kind])
        out = json_incref(c->views[v].doc[kind]);
    pthread_mutex_unlock(&c->mu);
    return out;
}
