/* linemap.c — where each node and each mapping key of a parsed YAML/JSON document
 * stood: the line map abx_yaml_load fills and the config loader asks, so every
 * diagnostic names its line.
 *
 * Notes (see also yaml.h):
 *   - every node created here is recorded by pointer with its start line; every
 *     key of every mapping is recorded by (mapping pointer, key) with its line.
 *   - jansson's true/false/null are process-wide singletons, so a pointer lookup
 *     for them is ambiguous: it returns the line of their last occurrence in the
 *     document. Use abx_linemap_key_line(parent, key) to locate such a value
 *     inside a mapping; for a boolean/null array element use the array's line.
 *     Strings, numbers, objects and arrays are never shared: their lines are exact.
 *   - lookups are by address: the map is only meaningful while the value it was
 *     built with is alive and unmodified (a freed node's address may be reused). */
#include "core/yaml.h"

#include <stdint.h>
#include <stdlib.h>
#include <string.h>

/* ---- line map: one open-addressing table, keyed by node or by (mapping, key) ---- */

/* 16 bytes a slot: a 4 MiB input can hold ~2M nodes, so the table stays compact. */
typedef struct lm_slot {
    const json_t *node; /* NULL: empty slot */
    int32_t line;
    uint32_t key;       /* 0: the node's own line; else 1 + index in keys of a key of mapping `node` */
} lm_slot;

struct abx_linemap {
    lm_slot *slots;
    size_t cap;  /* power of two, or 0 */
    size_t used;
    char **keys; /* owned copies of the recorded keys */
    size_t nkeys, keycap;
};

static size_t lm_hash(const json_t *node, const char *key)
{
    uint64_t h = (uint64_t)(uintptr_t)node; /* splitmix64's finalizer */
    h ^= h >> 30;
    h *= 0xbf58476d1ce4e5b9ULL;
    h ^= h >> 27;
    h *= 0x94d049bb133111ebULL;
    h ^= h >> 31;
    if (key) {
        uint64_t f = 1469598103934665603ULL; /* FNV-1a */
        for (const unsigned char *p = (const unsigned char *)key; *p; p++) {
            f ^= *p;
            f *= 1099511628211ULL;
        }
        h ^= f + 0x9e3779b97f4a7c15ULL + (h << 6) + (h >> 2);
        h ^= h >> 29;
    }
    return (size_t)h;
}

static const char *lm_key(const abx_linemap *m, uint32_t key)
{
    return key ? m->keys[key - 1] : NULL;
}

static lm_slot *lm_find(const abx_linemap *m, const json_t *node, const char *key)
{
    size_t mask = m->cap - 1;
    size_t i = lm_hash(node, key) & mask;
    for (;;) {
        lm_slot *s = &m->slots[i];
        if (!s->node)
            return s;
        if (s->node == node) {
            if (!key && !s->key)
                return s;
            if (key && s->key && strcmp(key, lm_key(m, s->key)) == 0)
                return s;
        }
        i = (i + 1) & mask;
    }
}

static bool lm_grow(abx_linemap *m)
{
    size_t ncap = m->cap ? m->cap * 2 : 64;
    if (ncap < m->cap || ncap > SIZE_MAX / sizeof(lm_slot))
        return false;
    lm_slot *ns = calloc(ncap, sizeof *ns);
    if (!ns)
        return false;
    lm_slot *old = m->slots;
    size_t oldcap = m->cap;
    m->slots = ns;
    m->cap = ncap;
    for (size_t i = 0; i < oldcap; i++) {
        if (old[i].node)
            *lm_find(m, old[i].node, lm_key(m, old[i].key)) = old[i];
    }
    free(old);
    return true;
}

/* Records (or, for a node seen again — a singleton — overwrites) a line. */
bool abx__linemap_put(abx_linemap *m, const json_t *node, const char *key, int line)
{
    if ((m->used + 1) * 2 > m->cap && !lm_grow(m))
        return false;
    lm_slot *s = lm_find(m, node, key);
    if (s->node) {
        s->line = line;
        return true;
    }
    uint32_t k = 0;
    if (key) {
        if (m->nkeys == m->keycap) {
            size_t ncap = m->keycap ? m->keycap * 2 : 32;
            if (ncap > UINT32_MAX - 1 || ncap > SIZE_MAX / sizeof(char *))
                return false;
            char **nk = realloc(m->keys, ncap * sizeof *nk);
            if (!nk)
                return false;
            m->keys = nk;
            m->keycap = ncap;
        }
        char *copy = strdup(key);
        if (!copy)
            return false;
        m->keys[m->nkeys++] = copy;
        k = (uint32_t)m->nkeys;
    }
    s->node = node;
    s->line = line;
    s->key = k;
    m->used++;
    return true;
}

int abx_linemap_line(const abx_linemap *m, const json_t *node)
{
    if (!m || !node || !m->cap)
        return 0;
    const lm_slot *s = lm_find(m, node, NULL);
    return s->node ? s->line : 0;
}

int abx_linemap_key_line(const abx_linemap *m, const json_t *object, const char *key)
{
    if (!m || !object || !key || !m->cap)
        return 0;
    const lm_slot *s = lm_find(m, object, key);
    return s->node ? s->line : 0;
}

void abx_linemap_free(abx_linemap *m)
{
    if (!m)
        return;
    for (size_t i = 0; i < m->nkeys; i++)
        free(m->keys[i]);
    free(m->keys);
    free(m->slots);
    free(m);
}

abx_linemap *abx__linemap_new(void) { return calloc(1, sizeof(abx_linemap)); }
