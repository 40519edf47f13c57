/* overlay.c — the per-principal overlay of dynamic tools (dyndef.h). One list under one
 * mutex; lookups are linear (a principal holds at most ABX_DYN_PER_AUTHOR live tools)
 * and cheap when it is empty, which keeps discovery and dispatch free of cost for the
 * servers that never define one. */
#include "core/dyndef.h"
#include <stdatomic.h>
#include <stdio.h>
#include <string.h>

#define MEMO_SLOTS 16

typedef struct memo {
    char *key, *text;            /* owned */
    size_t len;
    uint64_t gen;
    int64_t until_ms;            /* the first expiry of a live entry when it was put (0: none) */
} memo;

struct abx_overlay {
    pthread_mutex_t mu;
    memo memos[MEMO_SLOTS];      /* under mu */
    unsigned next_memo;
    abx_dyn_entry *head;         /* newest first */
    _Atomic uint64_t gen;
    atomic_size_t live;          /* an estimate for abx_overlay_any */
};

abx_overlay *abx_overlay_new(void)
{
    abx_overlay *ov = abx_calloc(1, sizeof *ov);
    if (ov)
        pthread_mutex_init(&ov->mu, NULL);
    return ov;
}

static void entry_free(abx_dyn_entry *e)
{
    abx_dyndef_free(e->def);
    abx_free(e->author);
    json_decref(e->tests);
    for (size_t i = 0; i < atomic_load(&e->n_to); i++)
        abx_free(e->to[i]);
    abx_free(e);
}

void abx_overlay_free(abx_overlay *ov)
{
    if (!ov)
        return;
    for (abx_dyn_entry *e = ov->head, *n; e; e = n) {
        n = e->next;
        entry_free(e);
    }
    for (size_t i = 0; i < MEMO_SLOTS; i++) {
        abx_free(ov->memos[i].key);
        abx_free(ov->memos[i].text);
    }
    pthread_mutex_destroy(&ov->mu);
    abx_free(ov);
}

/* Live: not deleted, not expired (an expiry seen here counts as a change once). */
static bool live(abx_overlay *ov, abx_dyn_entry *e, int64_t now)
{
    if (e->deleted)
        return false;
    if (e->expires_ms && now >= e->expires_ms) {
        e->deleted = true;
        atomic_fetch_add(&ov->gen, 1);
        atomic_fetch_sub(&ov->live, 1);
        return false;
    }
    return true;
}

static bool visible(const abx_dyn_entry *e, const abx_dyn_who *who)
{
    if (!who || !who->principal)
        return false;
    if (strcmp(e->author, who->principal) == 0)
        return true;
    size_t n = atomic_load(&e->n_to);
    for (size_t i = 0; i < n; i++) {
        const char *t = e->to[i];
        if (strncmp(t, "role:", 5) == 0) {
            for (size_t r = 0; r < who->n_roles; r++)
                if (strcmp(t + 5, who->roles[r]) == 0)
                    return true;
        } else if (strcmp(t, who->principal) == 0 || strcmp(t, "*") == 0) {
            return true;
        }
    }
    return false;
}

abx_dyn_entry *abx_overlay_add(abx_overlay *ov, abx_dyndef *def, const char *author, int64_t ttl_ms, json_t *tests,
                               abx_handler handler, char *err, size_t errlen)
{
    abx_dyn_entry *e = abx_calloc(1, sizeof *e);
    if (!e || !(e->author = abx_strdup(author))) {
        abx_free(e);
        snprintf(err, errlen, "out of memory");
        return NULL;
    }
    e->def = def;
    e->tests = json_incref(tests);
    e->created_ms = abx_wall_ms();
    e->expires_ms = ttl_ms > 0 ? e->created_ms + ttl_ms : 0;
    e->opdef = (abx_op_def){.id = def->id, .effects = def->effects, .summary = def->description,
                            .params = def->params, .handler = handler, .udata = e,
                            .limits = ABX_LIM_TIMEOUT | ABX_LIM_MEMORY | ABX_LIM_PIDS,
                            .errors = "op.worker_failed sandbox.unavailable"};
    e->op = (abx_op){.def = &e->opdef, .id = def->id, .effects = def->effects, .effects_declared = true,
                     .n_params = def->n_params};
    pthread_mutex_lock(&ov->mu);
    int64_t now = abx_wall_ms();
    size_t mine = 0;
    for (abx_dyn_entry *x = ov->head; x; x = x->next)
        mine += live(ov, x, now) && strcmp(x->author, author) == 0;
    if (mine >= ABX_DYN_PER_AUTHOR) {
        pthread_mutex_unlock(&ov->mu);
        snprintf(err, errlen, "'%s' holds %d dynamic tools already: delete one first", author, ABX_DYN_PER_AUTHOR);
        e->def = NULL;
        entry_free(e);
        return NULL;
    }
    e->next = ov->head;
    ov->head = e;
    atomic_fetch_add(&ov->gen, 1);
    atomic_fetch_add(&ov->live, 1);
    pthread_mutex_unlock(&ov->mu);
    return e;
}

abx_dyn_entry *abx_overlay_by_hash(abx_overlay *ov, const char *hash, const abx_dyn_who *who)
{
    if (!ov || !hash)
        return NULL;
    abx_dyn_entry *found = NULL;
    pthread_mutex_lock(&ov->mu);
    int64_t now = abx_wall_ms();
    for (abx_dyn_entry *e = ov->head; e && !found; e = e->next)
        if (strcmp(e->def->hash, hash) == 0 && live(ov, e, now) && visible(e, who))
            found = e;
    pthread_mutex_unlock(&ov->mu);
    return found;
}

abx_dyn_entry *abx_overlay_by_name(abx_overlay *ov, const char *name, const abx_dyn_who *who)
{
    if (!ov || !name || !abx_overlay_any(ov))
        return NULL;
    if (strncmp(name, "dyn.", 4) == 0)
        name += 4;
    abx_dyn_entry *mine = NULL, *other = NULL;
    pthread_mutex_lock(&ov->mu);
    int64_t now = abx_wall_ms();
    for (abx_dyn_entry *e = ov->head; e && !mine; e = e->next) {
        if (strcmp(e->def->name, name) != 0 || !live(ov, e, now) || !visible(e, who))
            continue;
        if (strcmp(e->author, who->principal) == 0)
            mine = e;
        else if (!other)
            other = e;
    }
    pthread_mutex_unlock(&ov->mu);
    return mine ? mine : other;
}

static void each(abx_overlay *ov, const abx_dyn_who *who, bool versions, void (*fn)(void *, abx_dyn_entry *),
                 void *ud)
{
    if (!ov || !abx_overlay_any(ov))
        return;
    pthread_mutex_lock(&ov->mu);
    int64_t now = abx_wall_ms();
    for (int pass = 0; pass < 2; pass++) /* the caller's own first, then promoted ones */
        for (abx_dyn_entry *e = ov->head; e; e = e->next) {
            if (!live(ov, e, now) || !visible(e, who) || (strcmp(e->author, who->principal) == 0) != (pass == 0))
                continue;
            bool shadowed = false; /* one entry per name: the newest, the caller's own before others' */
            bool before = true; /* x is newer than e */
            for (abx_dyn_entry *x = ov->head; !versions && x && !shadowed; x = x->next) {
                if (x == e) {
                    before = false;
                    continue;
                }
                if (strcmp(x->def->name, e->def->name) != 0 || !live(ov, x, now) || !visible(x, who))
                    continue;
                bool own = strcmp(x->author, who->principal) == 0;
                shadowed = pass == 0 ? own && before : own || before;
            }
            if (!shadowed)
                fn(ud, e);
        }
    pthread_mutex_unlock(&ov->mu);
}

void abx_overlay_each(abx_overlay *ov, const abx_dyn_who *who, void (*fn)(void *ud, abx_dyn_entry *e), void *ud)
{
    each(ov, who, false, fn, ud);
}

void abx_overlay_each_version(abx_overlay *ov, const abx_dyn_who *who, void (*fn)(void *ud, abx_dyn_entry *e),
                              void *ud)
{
    each(ov, who, true, fn, ud);
}

int abx_overlay_delete(abx_overlay *ov, const char *hash, const char *author)
{
    int rc = -1;
    pthread_mutex_lock(&ov->mu);
    int64_t now = abx_wall_ms();
    for (abx_dyn_entry *e = ov->head; e && rc; e = e->next)
        if (strcmp(e->def->hash, hash) == 0 && strcmp(e->author, author) == 0 && live(ov, e, now)) {
            e->deleted = true;
            atomic_fetch_add(&ov->gen, 1);
            atomic_fetch_sub(&ov->live, 1);
            rc = 0;
        }
    pthread_mutex_unlock(&ov->mu);
    return rc;
}

int abx_overlay_promote(abx_overlay *ov, const char *hash, const json_t *to)
{
    int rc = -1;
    pthread_mutex_lock(&ov->mu);
    int64_t now = abx_wall_ms();
    for (abx_dyn_entry *e = ov->head; e && rc; e = e->next) {
        if (strcmp(e->def->hash, hash) != 0 || !live(ov, e, now))
            continue;
        rc = 0;
        size_t i;
        json_t *v;
        json_array_foreach(to, i, v) {
            const char *s = json_string_value(v);
            size_t n = atomic_load(&e->n_to);
            bool have = false;
            for (size_t k = 0; s && k < n && !have; k++)
                have = strcmp(e->to[k], s) == 0;
            if (!s || have)
                continue;
            if (n >= ABX_DYN_AUDIENCE_MAX) {
                rc = -2;
                break;
            }
            if (!(e->to[n] = abx_strdup(s))) {
                rc = -1;
                break;
            }
            atomic_store(&e->n_to, n + 1);
        }
        atomic_fetch_add(&ov->gen, 1);
    }
    pthread_mutex_unlock(&ov->mu);
    return rc;
}

uint64_t abx_overlay_gen(abx_overlay *ov) { return ov ? atomic_load(&ov->gen) : 0; }

bool abx_overlay_any(abx_overlay *ov) { return ov && atomic_load(&ov->live) > 0; }

const char *abx_overlay_memo_get(abx_overlay *ov, const char *key, abx_arena *a, size_t *len)
{
    char *out = NULL;
    pthread_mutex_lock(&ov->mu);
    int64_t now = abx_wall_ms();
    for (size_t i = 0; i < MEMO_SLOTS && !out; i++) {
        memo *m = &ov->memos[i];
        if (!m->key || strcmp(m->key, key) != 0)
            continue;
        if (m->gen == atomic_load(&ov->gen) && (!m->until_ms || now < m->until_ms)) {
            out = abx_arena_alloc(a, m->len + 1);
            if (out) {
                memcpy(out, m->text, m->len);
                out[m->len] = '\0';
                *len = m->len;
            }
        }
        break;
    }
    pthread_mutex_unlock(&ov->mu);
    return out;
}

void abx_overlay_memo_put(abx_overlay *ov, const char *key, const char *text, size_t len, uint64_t gen)
{
    char *k = abx_strdup(key), *t = abx_malloc(len + 1);
    if (!k || !t) {
        abx_free(k);
        abx_free(t);
        return;
    }
    memcpy(t, text, len);
    t[len] = '\0';
    pthread_mutex_lock(&ov->mu);
    int64_t until = 0;
    for (abx_dyn_entry *e = ov->head; e; e = e->next)
        if (!e->deleted && e->expires_ms && (!until || e->expires_ms < until))
            until = e->expires_ms;
    memo *m = NULL;
    for (size_t i = 0; i < MEMO_SLOTS && !m; i++)
        if (ov->memos[i].key && strcmp(ov->memos[i].key, key) == 0)
            m = &ov->memos[i];
    if (!m)
        m = &ov->memos[ov->next_memo++ % MEMO_SLOTS];
    abx_free(m->key);
    abx_free(m->text);
    *m = (memo){.key = k, .text = t, .len = len, .gen = gen, .until_ms = until};
    pthread_mutex_unlock(&ov->mu);
}

void abx_overlay_bind_session(abx_overlay *ov, abx_dyn_entry *e, const char *session)
{
    pthread_mutex_lock(&ov->mu);
    snprintf(e->session, sizeof e->session, "%s", session ? session : "");
    pthread_mutex_unlock(&ov->mu);
}

void abx_overlay_end_session(abx_overlay *ov, const char *session)
{
    if (!ov || !session || !*session)
        return;
    pthread_mutex_lock(&ov->mu);
    for (abx_dyn_entry *e = ov->head; e; e = e->next)
        if (!e->deleted && strcmp(e->session, session) == 0) {
            e->deleted = true;
            atomic_fetch_add(&ov->gen, 1);
            atomic_fetch_sub(&ov->live, 1);
        }
    pthread_mutex_unlock(&ov->mu);
}
