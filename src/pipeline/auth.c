/* auth.c — rate limiting of failed authentication, per credential fingerprint and per
 * client address (POLICY.md: after 10 failures within a minute, 429 with Retry-After).
 * A small fixed table under one mutex: only failures and the limited check touch it,
 * and the check is skipped entirely when the table has no entries (success path).
 *
 * A client with many source addresses (any local user has all of 127/8) would get 10
 * tries per address and could evict the table's entries. So failures are also counted
 * globally: past limits.auth_failures (100) failures in a minute, addresses that have not authenticated
 * recently are refused before their token is checked; addresses that have (a lock-free
 * table of recent successes, written on the success path) keep their own budget. */
#include "core/util.h"
#include "pipeline/pipeline.h"
#include <string.h>

#define SLOTS 256
#define WINDOW_MS 60000
#define MAX_FAILS 10
#define GOOD_SLOTS 128   /* addresses that authenticated recently (hashed, lossy) */
#define GOOD_MS (10 * 60000)

typedef struct entry {
    char key[72];     /* "f:<fingerprint>" or "a:<address>" */
    int64_t window_start;
    int fails;
} entry;

struct abx_auth_limiter {
    pthread_mutex_t mu;
    atomic_int used;
    entry e[SLOTS];
    int64_t global_start;   /* under mu */
    int global_fails;
    int global_max;         /* limits.auth_failures: failures per minute, all addresses */
    /* recent successes: slot = hash % GOOD_SLOTS holds (hash, time); lossy on collision */
    _Atomic uint64_t good_hash[GOOD_SLOTS];
    _Atomic int64_t good_at[GOOD_SLOTS];
};

static uint64_t addr_hash(const char *client)
{
    uint64_t h = 1469598103934665603u; /* FNV-1a; 0 is never stored */
    for (const char *c = client ? client : "-"; *c; c++)
        h = (h ^ (unsigned char)*c) * 1099511628211u;
    return h ? h : 1;
}

void abx_auth_succeeded(abx_auth_limiter *l, const char *client, int64_t now_ms)
{
    uint64_t h = addr_hash(client);
    size_t i = h % GOOD_SLOTS;
    /* a relaxed load first: the common case (already there, recently) writes nothing */
    if (atomic_load_explicit(&l->good_hash[i], memory_order_relaxed) == h &&
        now_ms - atomic_load_explicit(&l->good_at[i], memory_order_relaxed) < GOOD_MS / 2)
        return;
    atomic_store_explicit(&l->good_at[i], now_ms, memory_order_relaxed);
    atomic_store_explicit(&l->good_hash[i], h, memory_order_relaxed);
}

static bool recently_good(abx_auth_limiter *l, const char *client, int64_t now_ms)
{
    uint64_t h = addr_hash(client);
    size_t i = h % GOOD_SLOTS;
    return atomic_load_explicit(&l->good_hash[i], memory_order_relaxed) == h &&
           now_ms - atomic_load_explicit(&l->good_at[i], memory_order_relaxed) < GOOD_MS;
}

abx_auth_limiter *abx_auth_limiter_new(int global_max)
{
    abx_auth_limiter *l = abx_calloc(1, sizeof *l);
    if (l) {
        pthread_mutex_init(&l->mu, NULL);
        l->global_max = global_max > 0 ? global_max : 100;
    }
    return l;
}

void abx_auth_limiter_free(abx_auth_limiter *l)
{
    if (!l)
        return;
    pthread_mutex_destroy(&l->mu);
    abx_free(l);
}

static entry *find(abx_auth_limiter *l, const char *key, bool create, int64_t now)
{
    entry *oldest = NULL;
    for (int i = 0; i < SLOTS; i++) {
        entry *e = &l->e[i];
        if (e->key[0] && strcmp(e->key, key) == 0)
            return e;
        if (!oldest || !e->key[0] || (oldest->key[0] && e->window_start < oldest->window_start))
            oldest = e;
    }
    if (!create)
        return NULL;
    if (!oldest->key[0])
        atomic_fetch_add(&l->used, 1);
    snprintf(oldest->key, sizeof oldest->key, "%s", key);
    oldest->window_start = now;
    oldest->fails = 0;
    return oldest;
}

static int wait_for(abx_auth_limiter *l, const char *key, int64_t now)
{
    entry *e = find(l, key, false, now);
    if (!e || now - e->window_start >= WINDOW_MS || e->fails < MAX_FAILS)
        return 0;
    int s = (int)((WINDOW_MS - (now - e->window_start) + 999) / 1000);
    return s > 0 ? s : 1;
}

int abx_auth_limited(abx_auth_limiter *l, const char *fingerprint, const char *client, int64_t now_ms)
{
    if (atomic_load_explicit(&l->used, memory_order_relaxed) == 0)
        return 0;
    char k1[72], k2[72];
    snprintf(k1, sizeof k1, "f:%s", fingerprint);
    snprintf(k2, sizeof k2, "a:%s", client ? client : "-");
    pthread_mutex_lock(&l->mu);
    int a = wait_for(l, k1, now_ms), b = wait_for(l, k2, now_ms), g = 0;
    if (l->global_fails >= l->global_max && now_ms - l->global_start < WINDOW_MS && !recently_good(l, client, now_ms))
        g = (int)((WINDOW_MS - (now_ms - l->global_start) + 999) / 1000);
    pthread_mutex_unlock(&l->mu);
    int w = a > b ? a : b;
    return w > g ? w : g;
}

void abx_auth_failed(abx_auth_limiter *l, const char *fingerprint, const char *client, int64_t now_ms)
{
    char k1[72], k2[72];
    snprintf(k1, sizeof k1, "f:%s", fingerprint);
    snprintf(k2, sizeof k2, "a:%s", client ? client : "-");
    pthread_mutex_lock(&l->mu);
    const char *keys[2] = {k1, k2};
    for (int i = 0; i < 2; i++) {
        entry *e = find(l, keys[i], true, now_ms);
        if (now_ms - e->window_start >= WINDOW_MS) {
            e->window_start = now_ms;
            e->fails = 0;
        }
        e->fails++;
    }
    if (now_ms - l->global_start >= WINDOW_MS) {
        l->global_start = now_ms;
        l->global_fails = 0;
    }
    l->global_fails++;
    pthread_mutex_unlock(&l->mu);
}
