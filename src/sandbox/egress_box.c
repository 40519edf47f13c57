/* egress_box.c — one process's egress proxy with owned copies of what it decides on
 * (egress_box.h). */
#include "sandbox/egress_box.h"
#include "core/util.h"
#include <errno.h>
#include <pthread.h>
#include <time.h>
#include <stdatomic.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>

struct abx_egress_box {
    abx_egress_allow allow;
    abx_egress_resolver res;
    abx_egress_sink sink;
    abx_egress_injects inj;
    abx_egress_tls *tls; /* NULL: no inject rules */
    abx_egress *proxy;
};

static atomic_uint_fast64_t n_allowed, n_denied;

void abx_egress_counts(uint64_t *allowed, uint64_t *denied)
{
    *allowed = (uint64_t)atomic_load(&n_allowed);
    *denied = (uint64_t)atomic_load(&n_denied);
}

static void on_record(const abx_egress_record *rec, void *ctx)
{
    abx_egress_box *b = ctx;
    atomic_fetch_add(rec->allowed ? &n_allowed : &n_denied, 1);
    if (b->sink.fn)
        b->sink.fn(rec, b->sink.ctx);
}

static int copy_allow(abx_egress_allow *to, const abx_egress_allow *from, char *err, size_t errlen)
{
    for (size_t i = 0; i < from->n; i++)
        if (abx_egress_allow_add(to, from->rules[i].text, err, errlen) != 0)
            return -1;
    return 0;
}

static int copy_resolver(abx_egress_resolver *to, const abx_egress_resolver *from)
{
    if (!from || !from->n)
        return 0;
    if (!(to->pins = abx_calloc(from->n, sizeof *to->pins)))
        return -1;
    for (size_t i = 0; i < from->n; i++) {
        to->pins[i] = from->pins[i];
        to->pins[i].host = abx_strdup(from->pins[i].host);
        to->n = i + 1;
        if (!to->pins[i].host)
            return -1;
    }
    return 0;
}

static void box_free(abx_egress_box *b)
{
    abx_egress_allow_free(&b->allow);
    abx_egress_resolver_free(&b->res);
    abx_egress_tls_free(b->tls);
    abx_egress_injects_free(&b->inj);
    if (b->sink.ctx_free)
        b->sink.ctx_free(b->sink.ctx);
    abx_free(b);
}

abx_egress_box *abx_egress_box_start(int listen_fd, const abx_egress_allow *allow, const abx_egress_resolver *res,
                                     abx_egress_sink sink, char *err, size_t errlen)
{
    return abx_egress_box_start_tls(listen_fd, allow, res, NULL, sink, err, errlen);
}

/* the box's own copy of the inject rules and its interceptor; 0, or -1 with err */
static int box_tls(abx_egress_box *b, const abx_egress_box_tls *tls, char *err, size_t errlen)
{
    if (!tls || !tls->inj || !tls->inj->n)
        return 0;
    if (!tls->ca) {
        snprintf(err, errlen, "the egress CA is unavailable: inject rules cannot be kept");
        return -1;
    }
    if (abx_egress_injects_copy(&b->inj, tls->inj) != 0) {
        snprintf(err, errlen, "out of memory");
        return -1;
    }
    b->tls = abx_egress_tls_new(tls->ca, &b->inj, tls->upstream_ca, err, errlen);
    return b->tls ? 0 : -1;
}

abx_egress_box *abx_egress_box_start_tls(int listen_fd, const abx_egress_allow *allow, const abx_egress_resolver *res,
                                         const abx_egress_box_tls *tls, abx_egress_sink sink, char *err,
                                         size_t errlen)
{
    abx_egress_listeners l = {.fd = {listen_fd}, .kind = {ABX_EGL_PROXY}, .n = 1};
    return abx_egress_box_start_multi(&l, allow, res, tls, sink, err, errlen);
}

static void close_all(const abx_egress_listeners *l)
{
    for (size_t i = 0; i < l->n; i++)
        close(l->fd[i]);
}

abx_egress_box *abx_egress_box_start_multi(const abx_egress_listeners *l, const abx_egress_allow *allow,
                                           const abx_egress_resolver *res, const abx_egress_box_tls *tls,
                                           abx_egress_sink sink, char *err, size_t errlen)
{
    abx_egress_box *b = abx_calloc(1, sizeof *b);
    if (!b) {
        close_all(l);
        if (sink.ctx_free)
            sink.ctx_free(sink.ctx);
        snprintf(err, errlen, "out of memory");
        return NULL;
    }
    b->sink = sink;
    err[0] = '\0';
    if (copy_allow(&b->allow, allow, err, errlen) != 0 || copy_resolver(&b->res, res) != 0 ||
        box_tls(b, tls, err, errlen) != 0) {
        if (!err[0])
            snprintf(err, errlen, "out of memory");
        close_all(l);
        box_free(b);
        return NULL;
    }
    abx_egress_config cfg = {
        .allow = &b->allow, .resolver = &b->res, .system_dns = true, .record = on_record, .ctx = b, .tls = b->tls};
    if (!(b->proxy = abx_egress_start_multi(l, &cfg))) { /* it closed the fds */
        snprintf(err, errlen, "the egress proxy cannot start: %s", strerror(errno));
        box_free(b);
        return NULL;
    }
    return b;
}

void abx_egress_box_stop(abx_egress_box *b)
{
    if (!b)
        return;
    abx_egress_stop(b->proxy);
    box_free(b);
}

/* ---- stopping without blocking the caller for long ----
 * A connection thread inside getaddrinfo cannot be interrupted, so a stop may take as
 * long as the system resolver does; the process manager must not. A stopper thread
 * stops the box; the caller waits for it a bounded time, and abx_egress_box_drain (at
 * shutdown, before the sinks' ledger closes) waits for every stopper still running. */

static pthread_mutex_t stoppers_mu = PTHREAD_MUTEX_INITIALIZER;
static pthread_cond_t stoppers_cv = PTHREAD_COND_INITIALIZER;
static int stoppers;

typedef struct stopper {
    abx_egress_box *b;
    bool done;
    int refs; /* the thread's and the waiter's; under stoppers_mu */
} stopper;

static void stopper_unref(stopper *s)
{
    if (--s->refs == 0)
        abx_free(s);
}

static void *stopper_main(void *arg)
{
    stopper *s = arg;
    abx_egress_box_stop(s->b);
    pthread_mutex_lock(&stoppers_mu);
    s->done = true;
    stoppers--;
    stopper_unref(s);
    pthread_cond_broadcast(&stoppers_cv);
    pthread_mutex_unlock(&stoppers_mu);
    return NULL;
}

void abx_egress_box_stop_within(abx_egress_box *b, int ms)
{
    if (!b)
        return;
    stopper *s = abx_calloc(1, sizeof *s);
    pthread_attr_t at;
    pthread_t t;
    if (!s) {
        abx_egress_box_stop(b);
        return;
    }
    *s = (stopper){.b = b, .refs = 2};
    pthread_attr_init(&at);
    pthread_attr_setdetachstate(&at, PTHREAD_CREATE_DETACHED);
    pthread_mutex_lock(&stoppers_mu);
    stoppers++;
    if (pthread_create(&t, &at, stopper_main, s) != 0) {
        stoppers--;
        pthread_mutex_unlock(&stoppers_mu);
        pthread_attr_destroy(&at);
        abx_free(s);
        abx_egress_box_stop(b);
        return;
    }
    pthread_attr_destroy(&at);
    struct timespec until;
    clock_gettime(CLOCK_REALTIME, &until);
    until.tv_sec += ms / 1000;
    until.tv_nsec += (long)(ms % 1000) * 1000000L;
    if (until.tv_nsec >= 1000000000L) {
        until.tv_sec++;
        until.tv_nsec -= 1000000000L;
    }
    while (!s->done && pthread_cond_timedwait(&stoppers_cv, &stoppers_mu, &until) == 0) {
    }
    stopper_unref(s);
    pthread_mutex_unlock(&stoppers_mu);
}

void abx_egress_box_drain(void)
{
    pthread_mutex_lock(&stoppers_mu);
    while (stoppers > 0)
        pthread_cond_wait(&stoppers_cv, &stoppers_mu);
    pthread_mutex_unlock(&stoppers_mu);
}
