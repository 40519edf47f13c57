/* offload.c — the worker pool and the stream pumps of offload.h. The I/O threads never
 * wait here: submitting is a queue push, a pump's content reader copies what is buffered
 * or suspends the connection. */
#include "http/offload.h"
#include "core/util.h"
#include <pthread.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>

/* ---- the worker pool ---- */

typedef struct job {
    abx_job_fn fn;
    void *arg;
    struct job *next;
} job;

struct abx_workers {
    pthread_mutex_t mu;
    pthread_cond_t more, idle_cv;
    job *head, *tail;
    int queued, running, idle, threads, max_threads, max_queue;
    bool stopping;
    pthread_t *tids;
};

abx_workers *abx_workers_new(int max_threads, int max_queue)
{
    abx_workers *w = abx_calloc(1, sizeof *w);
    if (!w)
        return NULL;
    w->tids = abx_calloc((size_t)(max_threads > 0 ? max_threads : 1), sizeof *w->tids);
    if (!w->tids) {
        abx_free(w);
        return NULL;
    }
    pthread_mutex_init(&w->mu, NULL);
    pthread_cond_init(&w->more, NULL);
    pthread_cond_init(&w->idle_cv, NULL);
    w->max_threads = max_threads > 0 ? max_threads : 1;
    w->max_queue = max_queue > 0 ? max_queue : 1;
    return w;
}

static void *worker_main(void *arg)
{
    abx_workers *w = arg;
    pthread_mutex_lock(&w->mu);
    for (;;) {
        while (!w->head && !w->stopping) {
            w->idle++;
            pthread_cond_wait(&w->more, &w->mu);
            w->idle--;
        }
        if (!w->head)
            break; /* stopping and nothing left */
        job *j = w->head;
        w->head = j->next;
        if (!w->head)
            w->tail = NULL;
        w->queued--;
        w->running++;
        pthread_mutex_unlock(&w->mu);
        j->fn(j->arg);
        abx_free(j);
        pthread_mutex_lock(&w->mu);
        w->running--;
        if (!w->running && !w->queued)
            pthread_cond_broadcast(&w->idle_cv);
    }
    pthread_mutex_unlock(&w->mu);
    return NULL;
}

bool abx_workers_submit(abx_workers *w, abx_job_fn fn, void *arg)
{
    job *j = abx_malloc(sizeof *j);
    if (!j)
        return false;
    *j = (job){fn, arg, NULL};
    pthread_mutex_lock(&w->mu);
    bool ok = !w->stopping && w->queued < w->max_queue;
    /* a new thread when none is idle to take it, up to the bound; past it the job waits */
    if (ok && w->idle <= w->queued && w->threads < w->max_threads) {
        pthread_attr_t at;
        pthread_attr_init(&at);
        pthread_attr_setstacksize(&at, 512 * 1024); /* the pipeline's depth, like the I/O threads */
        if (pthread_create(&w->tids[w->threads], &at, worker_main, w) == 0)
            w->threads++;
        else if (w->threads == 0)
            ok = false; /* no thread at all would ever run it */
        pthread_attr_destroy(&at);
    }
    if (ok) {
        if (w->tail)
            w->tail->next = j;
        else
            w->head = j;
        w->tail = j;
        w->queued++;
        pthread_cond_signal(&w->more);
    }
    pthread_mutex_unlock(&w->mu);
    if (!ok)
        abx_free(j);
    return ok;
}

void abx_workers_stop(abx_workers *w)
{
    if (!w)
        return;
    pthread_mutex_lock(&w->mu);
    w->stopping = true;
    pthread_cond_broadcast(&w->more);
    int n = w->threads;
    pthread_mutex_unlock(&w->mu);
    for (int i = 0; i < n; i++)
        pthread_join(w->tids[i], NULL);
    pthread_mutex_lock(&w->mu);
    w->threads = 0;
    pthread_mutex_unlock(&w->mu);
}

void abx_workers_free(abx_workers *w)
{
    if (!w)
        return;
    abx_workers_stop(w);
    pthread_mutex_destroy(&w->mu);
    pthread_cond_destroy(&w->more);
    pthread_cond_destroy(&w->idle_cv);
    abx_free(w->tids);
    abx_free(w);
}

int abx_workers_busy(abx_workers *w)
{
    if (!w)
        return 0;
    pthread_mutex_lock(&w->mu);
    int n = w->running + w->queued;
    pthread_mutex_unlock(&w->mu);
    return n;
}

/* ---- stream pumps ----
 * A pump has two owners: the pump thread (until its last read and free_fn) and the MHD
 * response (until libmicrohttpd drops it: stream end or client gone). The last to let go
 * frees it. The connection is only resumed under the lock and only while the response
 * still holds the pump: a suspended connection cannot be closed by libmicrohttpd, and
 * once the response let go the connection may be gone. */

typedef struct pump {
    pthread_mutex_t mu;
    pthread_cond_t space;
    abx_pumps *ps;
    struct MHD_Connection *c;
    abx_pump_read_fn read_fn;
    void (*free_fn)(void *);
    void *state;
    char *buf;
    size_t cap, start, len;
    bool eof, error, suspended, closed, stopping;
    int refs;
    struct pump *prev, *next; /* the registry's list */
} pump;

struct abx_pumps {
    pthread_mutex_t mu;
    pthread_cond_t gone;
    pump *list;
    int live;
    bool stopping; /* pumps made from now on end at once */
};

abx_pumps *abx_pumps_new(void)
{
    abx_pumps *ps = abx_calloc(1, sizeof *ps);
    if (!ps)
        return NULL;
    pthread_mutex_init(&ps->mu, NULL);
    pthread_cond_init(&ps->gone, NULL);
    return ps;
}

static void pump_unref(pump *p)
{
    pthread_mutex_lock(&p->mu);
    bool last = --p->refs == 0;
    pthread_mutex_unlock(&p->mu);
    if (!last)
        return;
    pthread_mutex_destroy(&p->mu);
    pthread_cond_destroy(&p->space);
    abx_free(p->buf);
    abx_free(p);
}

/* Under p->mu: whether the reader waits for bytes; the caller resumes the connection
 * after unlocking (libmicrohttpd takes its own locks there). While suspended the
 * connection cannot be closed, so it is still there when resumed. */
static bool pump_wake(pump *p)
{
    if (!p->suspended || p->closed)
        return false;
    p->suspended = false;
    return true;
}

static void *pump_main(void *arg)
{
    pump *p = arg;
    char chunk[16 * 1024];
    for (;;) {
        pthread_mutex_lock(&p->mu);
        bool stop = p->closed || p->stopping;
        pthread_mutex_unlock(&p->mu);
        if (stop)
            break;
        long n = p->read_fn(p->state, chunk, sizeof chunk < p->cap ? sizeof chunk : p->cap);
        pthread_mutex_lock(&p->mu);
        if (n <= 0) {
            p->eof = true;
            p->error = n < 0;
            bool wake = pump_wake(p);
            pthread_mutex_unlock(&p->mu);
            if (wake)
                MHD_resume_connection(p->c);
            break;
        }
        /* back-pressure: wait for the reader to make room (or the client to leave) */
        while (p->cap - p->len < (size_t)n && !p->closed && !p->stopping)
            pthread_cond_wait(&p->space, &p->mu);
        bool wake = false;
        if (!p->closed && !p->stopping) {
            size_t end = p->start + p->len;
            if (end + (size_t)n > p->cap) { /* compact: the buffer is linear */
                memmove(p->buf, p->buf + p->start, p->len);
                p->start = 0;
                end = p->len;
            }
            memcpy(p->buf + end, chunk, (size_t)n);
            p->len += (size_t)n;
            wake = pump_wake(p);
        }
        pthread_mutex_unlock(&p->mu);
        if (wake)
            MHD_resume_connection(p->c);
    }
    if (p->free_fn)
        p->free_fn(p->state); /* after the last read: the handler cancels what still runs */
    pthread_mutex_lock(&p->mu);
    p->eof = true;
    bool wake = pump_wake(p); /* stopping: the daemon needs the connection back */
    pthread_mutex_unlock(&p->mu);
    if (wake)
        MHD_resume_connection(p->c);
    abx_pumps *ps = p->ps;
    pthread_mutex_lock(&ps->mu);
    if (p->prev)
        p->prev->next = p->next;
    else
        ps->list = p->next;
    if (p->next)
        p->next->prev = p->prev;
    ps->live--;
    pthread_cond_broadcast(&ps->gone);
    pthread_mutex_unlock(&ps->mu);
    pump_unref(p);
    return NULL;
}

static ssize_t pump_reader(void *cls, uint64_t pos, char *out, size_t max)
{
    (void)pos;
    pump *p = cls;
    pthread_mutex_lock(&p->mu);
    ssize_t n;
    if (p->len) {
        n = (ssize_t)(p->len < max ? p->len : max);
        memcpy(out, p->buf + p->start, (size_t)n);
        p->start += (size_t)n;
        p->len -= (size_t)n;
        if (!p->len)
            p->start = 0;
        pthread_cond_signal(&p->space);
    } else if (p->eof) {
        n = p->error ? MHD_CONTENT_READER_END_WITH_ERROR : MHD_CONTENT_READER_END_OF_STREAM;
    } else {
        /* nothing yet: park the connection until the pump has bytes (returning 0 without
         * suspending would make the I/O thread spin) */
        p->suspended = true;
        MHD_suspend_connection(p->c);
        n = 0;
    }
    pthread_mutex_unlock(&p->mu);
    return n;
}

static void pump_response_done(void *cls)
{
    pump *p = cls;
    pthread_mutex_lock(&p->mu);
    p->closed = true;
    p->suspended = false;
    pthread_cond_signal(&p->space);
    pthread_mutex_unlock(&p->mu);
    pump_unref(p);
}

struct MHD_Response *abx_pump_response(abx_pumps *ps, struct MHD_Connection *c, abx_pump_read_fn read_fn,
                                       void *state, void (*free_fn)(void *), size_t cap)
{
    pump *p = abx_calloc(1, sizeof *p);
    char *buf = cap ? abx_malloc(cap) : NULL;
    struct MHD_Response *resp =
        p && buf ? MHD_create_response_from_callback(MHD_SIZE_UNKNOWN, 16 * 1024, pump_reader, p, pump_response_done)
                 : NULL;
    if (!resp) {
        abx_free(buf);
        abx_free(p);
        if (free_fn)
            free_fn(state);
        return NULL;
    }
    pthread_mutex_init(&p->mu, NULL);
    pthread_cond_init(&p->space, NULL);
    p->ps = ps;
    p->c = c;
    p->read_fn = read_fn;
    p->free_fn = free_fn;
    p->state = state;
    p->buf = buf;
    p->cap = cap;
    p->refs = 2;
    pthread_attr_t at;
    pthread_attr_init(&at);
    pthread_attr_setdetachstate(&at, PTHREAD_CREATE_DETACHED);
    pthread_attr_setstacksize(&at, 256 * 1024);
    pthread_mutex_lock(&ps->mu);
    p->stopping = ps->stopping; /* made while the server stops: it ends at once */
    pthread_t t;
    bool started = pthread_create(&t, &at, pump_main, p) == 0;
    if (started) {
        p->next = ps->list;
        if (ps->list)
            ps->list->prev = p;
        ps->list = p;
        ps->live++;
    }
    pthread_mutex_unlock(&ps->mu);
    pthread_attr_destroy(&at);
    if (!started) {
        /* the response holds one reference; the thread's never ran */
        p->eof = p->error = true;
        p->refs = 1;
        if (free_fn)
            free_fn(state);
        p->free_fn = NULL;
    }
    return resp;
}

void abx_pumps_stop(abx_pumps *ps)
{
    if (!ps)
        return;
    pthread_mutex_lock(&ps->mu);
    ps->stopping = true;
    for (pump *p = ps->list; p; p = p->next) {
        pthread_mutex_lock(&p->mu);
        p->stopping = true;
        pthread_cond_signal(&p->space);
        pthread_mutex_unlock(&p->mu);
    }
    while (ps->live)
        pthread_cond_wait(&ps->gone, &ps->mu); /* each read returns within ~2 s (abx.h) */
    pthread_mutex_unlock(&ps->mu);
}

void abx_pumps_free(abx_pumps *ps)
{
    if (!ps)
        return;
    abx_pumps_stop(ps);
    pthread_mutex_destroy(&ps->mu);
    pthread_cond_destroy(&ps->gone);
    abx_free(ps);
}

int abx_pumps_live(abx_pumps *ps)
{
    if (!ps)
        return 0;
    pthread_mutex_lock(&ps->mu);
    int n = ps->live;
    pthread_mutex_unlock(&ps->mu);
    return n;
}
