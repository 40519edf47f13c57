/* conns.c — per-address accounting and the header deadline of conns.h. One mutex guards
 * the address table and the list of connections; every call holds it for a table probe
 * or a list link, never across I/O (the sweeper's shutdown(2) does not block). */
#include "server/conns.h"
#include "core/core.h"
#include "core/util.h"
#include "http/offload.h"
#include "pipeline/pipeline.h"
#include <errno.h>
#include <arpa/inet.h>
#include <netinet/in.h>
#include <stdio.h>
#include <sys/resource.h>
#include <pthread.h>
#include <string.h>
#include <time.h>

#define ADDR_SLOTS 16384 /* distinct addresses with unauthenticated connections at once */
#define SWEEP_MS 250

typedef struct addr_slot {
    unsigned char key[17]; /* family byte + up to 16 address bytes */
    bool used;             /* ever used: probing goes on past it */
    int count;             /* unauthenticated connections open now */
} addr_slot;

struct abx_conn {
    abx_conn *prev, *next;
    int fd;
    int slot;           /* address slot, -1 when not counted */
    bool in_request;    /* the header section is complete: no deadline */
    bool exempt;        /* upgraded to a WebSocket session */
    bool shut;
    int64_t since_ms;   /* when the deadline started */
    char client[INET6_ADDRSTRLEN]; /* the peer's address as text ("-" unknown), for every request's record */
};

struct abx_conns {
    pthread_mutex_t mu;
    pthread_cond_t cv;
    pthread_t sweeper;
    bool stop, sweeping;
    int per_address;
    int64_t header_ms;
    abx_conn *list;
    addr_slot *slots;
    int unauth;
    atomic_ullong refused_address, closed_slow, opened, closed;
};

static int64_t mono_ms(void)
{
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return (int64_t)t.tv_sec * 1000 + t.tv_nsec / 1000000;
}

static bool addr_key(const struct sockaddr *a, unsigned char key[17])
{
    memset(key, 0, 17);
    if (!a)
        return false;
    if (a->sa_family == AF_INET) {
        key[0] = 4;
        memcpy(key + 1, &((const struct sockaddr_in *)a)->sin_addr, 4);
        return true;
    }
    if (a->sa_family == AF_INET6) {
        key[0] = 6;
        memcpy(key + 1, &((const struct sockaddr_in6 *)a)->sin6_addr, 16);
        return true;
    }
    return false;
}

/* Under mu: the key's slot, or (create) the first reusable one; -1 when none. A key is
 * searched along its whole probe chain before a free slot is taken, so it never has two
 * slots with live counts. */
static int slot_find(abx_conns *t, const unsigned char key[17], bool create)
{
    uint32_t h = 2166136261u;
    for (int i = 0; i < 17; i++)
        h = (h ^ key[i]) * 16777619u;
    int reuse = -1;
    for (int n = 0; n < ADDR_SLOTS; n++) {
        int i = (int)((h + (uint32_t)n) % ADDR_SLOTS);
        addr_slot *s = &t->slots[i];
        if (!s->used) {
            if (reuse < 0)
                reuse = i;
            break;
        }
        if (memcmp(s->key, key, 17) == 0)
            return i;
        if (s->count == 0 && reuse < 0)
            reuse = i;
    }
    if (!create || reuse < 0)
        return -1;
    memcpy(t->slots[reuse].key, key, 17);
    t->slots[reuse].used = true;
    t->slots[reuse].count = 0;
    return reuse;
}

static void *sweeper_main(void *arg)
{
    abx_conns *t = arg;
    pthread_mutex_lock(&t->mu);
    while (!t->stop) {
        struct timespec ts;
        clock_gettime(CLOCK_REALTIME, &ts);
        ts.tv_nsec += SWEEP_MS * 1000000L;
        if (ts.tv_nsec >= 1000000000L) {
            ts.tv_sec++;
            ts.tv_nsec -= 1000000000L;
        }
        pthread_cond_timedwait(&t->cv, &t->mu, &ts);
        int64_t now = mono_ms();
        for (abx_conn *c = t->list; c && !t->stop; c = c->next) {
            if (c->in_request || c->exempt || c->shut || now - c->since_ms <= t->header_ms)
                continue;
            /* the fd is still libmicrohttpd's (it closes it only after the close
             * notification, which takes this mutex): wake it with end-of-stream */
            shutdown(c->fd, SHUT_RDWR);
            c->shut = true;
            atomic_fetch_add_explicit(&t->closed_slow, 1, memory_order_relaxed);
        }
    }
    pthread_mutex_unlock(&t->mu);
    return NULL;
}

abx_conns *abx_conns_new(int per_address, int64_t header_ms)
{
    abx_conns *t = abx_calloc(1, sizeof *t);
    if (!t)
        return NULL;
    t->slots = abx_calloc(ADDR_SLOTS, sizeof *t->slots);
    if (!t->slots) {
        abx_free(t);
        return NULL;
    }
    t->per_address = per_address;
    t->header_ms = header_ms;
    pthread_mutex_init(&t->mu, NULL);
    pthread_cond_init(&t->cv, NULL);
    pthread_attr_t at;
    pthread_attr_init(&at);
    pthread_attr_setstacksize(&at, 256 * 1024); /* not less: the process's static TLS lives there too */
    t->sweeping = pthread_create(&t->sweeper, &at, sweeper_main, t) == 0;
    pthread_attr_destroy(&at);
    if (!t->sweeping) {
        abx_conns_free(t);
        return NULL;
    }
    return t;
}

void abx_conns_free(abx_conns *t)
{
    if (!t)
        return;
    if (t->sweeping) {
        pthread_mutex_lock(&t->mu);
        t->stop = true;
        pthread_cond_signal(&t->cv);
        pthread_mutex_unlock(&t->mu);
        pthread_join(t->sweeper, NULL);
    }
    for (abx_conn *c = t->list, *n; c; c = n) { /* none left after the daemon stopped */
        n = c->next;
        abx_free(c);
    }
    pthread_mutex_destroy(&t->mu);
    pthread_cond_destroy(&t->cv);
    abx_free(t->slots);
    abx_free(t);
}

bool abx_conns_admit(abx_conns *t, const struct sockaddr *a)
{
    unsigned char key[17];
    if (!t || t->per_address <= 0 || !addr_key(a, key))
        return true;
    pthread_mutex_lock(&t->mu);
    int i = slot_find(t, key, false);
    bool ok = i < 0 || t->slots[i].count < t->per_address;
    pthread_mutex_unlock(&t->mu);
    if (!ok)
        atomic_fetch_add_explicit(&t->refused_address, 1, memory_order_relaxed);
    return ok;
}

static void addr_text(const struct sockaddr *a, char out[INET6_ADDRSTRLEN])
{
    snprintf(out, INET6_ADDRSTRLEN, "-");
    if (a && a->sa_family == AF_INET)
        inet_ntop(AF_INET, &((const struct sockaddr_in *)a)->sin_addr, out, INET6_ADDRSTRLEN);
    else if (a && a->sa_family == AF_INET6)
        inet_ntop(AF_INET6, &((const struct sockaddr_in6 *)a)->sin6_addr, out, INET6_ADDRSTRLEN);
}

const char *abx_conn_client(const abx_conn *c, const struct sockaddr *a, char buf[INET6_ADDRSTRLEN])
{
    if (c)
        return c->client;
    addr_text(a, buf);
    return buf;
}

abx_conn *abx_conns_open(abx_conns *t, const struct sockaddr *a, int fd)
{
    abx_conn *c = abx_calloc(1, sizeof *c);
    if (!c)
        return NULL; /* not tracked: no deadline, not counted */
    unsigned char key[17];
    c->fd = fd;
    c->slot = -1;
    c->since_ms = mono_ms();
    addr_text(a, c->client);
    bool over = false;
    pthread_mutex_lock(&t->mu);
    if (addr_key(a, key) && (c->slot = slot_find(t, key, true)) >= 0) {
        /* the accept-time check (abx_conns_admit) and this count are not one step: two I/O
         * threads accepting from one address at once could both pass it. The firm check is
         * here; a connection past the cap is shut down at once (libmicrohttpd then closes
         * it) and counted as refused. */
        if (t->per_address > 0 && t->slots[c->slot].count >= t->per_address) {
            c->slot = -1;
            over = true;
        } else {
            t->slots[c->slot].count++;
            t->unauth++;
        }
    }
    c->next = t->list;
    if (t->list)
        t->list->prev = c;
    t->list = c;
    pthread_mutex_unlock(&t->mu);
    atomic_fetch_add_explicit(&t->opened, 1, memory_order_relaxed);
    if (over) {
        atomic_fetch_add_explicit(&t->refused_address, 1, memory_order_relaxed);
        if (fd >= 0)
            shutdown(fd, SHUT_RDWR);
    }
    return c;
}

/* under mu */
static void uncount(abx_conns *t, abx_conn *c)
{
    if (c->slot >= 0) {
        t->slots[c->slot].count--;
        t->unauth--;
        c->slot = -1;
    }
}

void abx_conns_close(abx_conns *t, abx_conn *c)
{
    atomic_fetch_add_explicit(&t->closed, 1, memory_order_relaxed);
    if (!c)
        return;
    pthread_mutex_lock(&t->mu);
    uncount(t, c);
    if (c->prev)
        c->prev->next = c->next;
    else
        t->list = c->next;
    if (c->next)
        c->next->prev = c->prev;
    pthread_mutex_unlock(&t->mu);
    abx_free(c);
}

void abx_conns_request_begun(abx_conns *t, abx_conn *c)
{
    if (!c)
        return;
    pthread_mutex_lock(&t->mu);
    c->in_request = true;
    pthread_mutex_unlock(&t->mu);
}

void abx_conns_request_ended(abx_conns *t, abx_conn *c)
{
    if (!c)
        return;
    pthread_mutex_lock(&t->mu);
    c->in_request = false;
    c->since_ms = mono_ms();
    pthread_mutex_unlock(&t->mu);
}

void abx_conns_authenticated(abx_conns *t, abx_conn *c)
{
    if (!c)
        return;
    pthread_mutex_lock(&t->mu);
    uncount(t, c);
    pthread_mutex_unlock(&t->mu);
}

void abx_conns_upgraded(abx_conns *t, abx_conn *c)
{
    if (!c)
        return;
    pthread_mutex_lock(&t->mu);
    c->exempt = true;
    pthread_mutex_unlock(&t->mu);
}

void abx_conns_stats_get(abx_conns *t, abx_conns_stats *out)
{
    memset(out, 0, sizeof *out);
    if (!t)
        return;
    out->refused_address = atomic_load_explicit(&t->refused_address, memory_order_relaxed);
    out->closed_slow = atomic_load_explicit(&t->closed_slow, memory_order_relaxed);
    out->opened = atomic_load_explicit(&t->opened, memory_order_relaxed);
    out->closed = atomic_load_explicit(&t->closed, memory_order_relaxed);
    pthread_mutex_lock(&t->mu);
    out->unauthenticated = t->unauth;
    pthread_mutex_unlock(&t->mu);
}

/* ---- the listener's connection layer, as a whole ---- */

static void conn_metrics(abx_server *s, abx_conn_metrics *out)
{
    abx_conns_stats st;
    abx_conns_stats_get(s->conn_table, &st);
    out->unauthenticated = st.unauthenticated;
    out->opened = st.opened;
    out->closed = st.closed;
    out->refused_address = st.refused_address;
    out->closed_slow = st.closed_slow;
    out->refused_busy = atomic_load(&s->refused_busy);
    out->closed_timeout = atomic_load(&s->closed_timeout);
    out->aborted = atomic_load(&s->aborted);
    out->workers_busy = abx_workers_busy(s->workers);
    out->streams = abx_pumps_live(s->pumps);
}

int abx_conn_layer_start(abx_server *s, int spare_fds, char *errbuf, size_t errlen)
{
    struct rlimit rl;
    rlim_t want = (rlim_t)s->cfg.connections + (rlim_t)spare_fds;
    if (getrlimit(RLIMIT_NOFILE, &rl) == 0 && rl.rlim_cur < want) {
        rl.rlim_cur = rl.rlim_max == RLIM_INFINITY || rl.rlim_max > want ? want : rl.rlim_max;
        if (setrlimit(RLIMIT_NOFILE, &rl) != 0)
            abx_log("warn", NULL, "cannot raise the open-file limit to %llu: %s", (unsigned long long)want,
                    strerror(errno));
    }
    s->conn_table = abx_conns_new(s->cfg.connections_per_address, s->cfg.read_timeout_ms);
    s->workers = abx_workers_new(s->cfg.workers, s->cfg.workers * 4);
    s->pumps = abx_pumps_new();
    if (!s->conn_table || !s->workers || !s->pumps) {
        snprintf(errbuf, errlen, "cannot start the connection layer (out of memory or threads)");
        return -1;
    }
    s->conn_metrics = conn_metrics;
    return 0;
}

void abx_conn_layer_free(abx_server *s)
{
    abx_workers_free(s->workers);
    abx_pumps_free(s->pumps);
    abx_conns_free(s->conn_table);
    s->workers = s->pumps = s->conn_table = NULL;
    s->conn_metrics = NULL;
}
