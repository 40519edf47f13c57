/* cdp.c — the CDP pipe client (cdp.h): framing, the strict message parser, request ids,
 * waiting callers, continuations and events. One reader thread per browser. */
#include "builtin/cdp.h"
#include "core/util.h"
#include <errno.h>
#include <poll.h>
#include <pthread.h>
#include <signal.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>

/* ---- parser ---- */

void abx_cdp_msg_release(abx_cdp_msg *m)
{
    json_decref(m->root);
    memset(m, 0, sizeof *m);
}

int abx_cdp_parse(const char *frame, size_t len, abx_cdp_msg *out)
{
    memset(out, 0, sizeof *out);
    out->id = -1;
    json_error_t je;
    json_t *root = json_loadb(frame, len, JSON_REJECT_DUPLICATES, &je);
    if (!json_is_object(root)) {
        json_decref(root);
        return -1;
    }
    out->root = root;
    json_t *id = json_object_get(root, "id"), *method = json_object_get(root, "method"),
           *sess = json_object_get(root, "sessionId");
    if (sess && !json_is_string(sess))
        goto bad;
    out->session = json_string_value(sess);
    if (id) {
        json_t *res = json_object_get(root, "result"), *err = json_object_get(root, "error");
        if (!json_is_integer(id) || json_integer_value(id) < 1 || method || (!res == !err) ||
            (res && !json_is_object(res)) || (err && !json_is_object(err)))
            goto bad;
        out->id = json_integer_value(id);
        out->body = res;
        out->error = err;
        return 0;
    }
    json_t *params = json_object_get(root, "params");
    if (!json_is_string(method) || !json_string_length(method) || (params && !json_is_object(params)))
        goto bad;
    out->method = json_string_value(method);
    out->body = params;
    return 0;
bad:
    abx_cdp_msg_release(out);
    out->id = -1;
    return -1;
}

int abx_cdp_framer_feed(abx_cdp_framer *f, const char *data, size_t n)
{
    if (f->len - f->scanned + n > 2 * (size_t)ABX_CDP_FRAME_MAX)
        return -1; /* next() refuses an over-long frame before the buffer gets here */
    if (f->len + n > f->cap) {
        size_t cap = f->cap ? f->cap : 65536;
        while (cap < f->len + n)
            cap *= 2;
        char *g = abx_realloc(f->buf, cap);
        if (!g)
            return -1;
        f->buf = g;
        f->cap = cap;
    }
    memcpy(f->buf + f->len, data, n);
    f->len += n;
    return 0;
}

int abx_cdp_framer_next(abx_cdp_framer *f, const char **frame, size_t *len)
{
    /* drop the frame handed out last time */
    if (f->scanned && f->scanned <= f->len) {
        memmove(f->buf, f->buf + f->scanned, f->len - f->scanned);
        f->len -= f->scanned;
        f->scanned = 0;
    }
    char *nul = f->len ? memchr(f->buf, 0, f->len) : NULL;
    if (!nul)
        return f->len > ABX_CDP_FRAME_MAX ? -1 : 0;
    *frame = f->buf;
    *len = (size_t)(nul - f->buf);
    f->scanned = *len + 1;
    return *len > ABX_CDP_FRAME_MAX ? -1 : 1;
}

void abx_cdp_framer_release(abx_cdp_framer *f)
{
    abx_free(f->buf);
    memset(f, 0, sizeof *f);
}

/* ---- connection ---- */

typedef struct pending {
    int64_t id;
    bool done;
    json_t *result, *error;     /* owned when done (a waiting caller) */
    abx_cdp_reply_fn fn;        /* or a continuation */
    void *arg;
    struct pending *next;
} pending;

struct abx_cdp {
    int rfd, wfd;
    pthread_t reader;
    pthread_mutex_t mu;         /* pending, next_id, closed */
    pthread_mutex_t wmu;        /* one writer at a time: frames never interleave */
    pthread_cond_t cv;
    pending *list;
    int64_t next_id;
    bool closed;
    abx_cdp_event_fn on_event;
    void *ud;
};

static pending *take(abx_cdp *c, int64_t id)
{
    for (pending **pp = &c->list; *pp; pp = &(*pp)->next)
        if ((*pp)->id == id) {
            pending *p = *pp;
            *pp = p->next;
            return p;
        }
    return NULL;
}

static void deliver(abx_cdp *c, abx_cdp_msg *m)
{
    pthread_mutex_lock(&c->mu);
    pending *p = NULL;
    for (pending *q = c->list; q; q = q->next)
        if (q->id == m->id)
            p = q;
    if (p && p->fn) {
        take(c, m->id);
        pthread_mutex_unlock(&c->mu);
        p->fn(c->ud, p->arg, m->session, m->body, m->error);
        abx_free(p);
        return;
    }
    if (p && !p->done) {
        p->done = true;
        p->result = json_incref(m->body);
        p->error = json_incref(m->error);
        pthread_cond_broadcast(&c->cv);
    }
    pthread_mutex_unlock(&c->mu);
}

static void close_all(abx_cdp *c)
{
    pthread_mutex_lock(&c->mu);
    c->closed = true;
    pending *conts = NULL;
    for (pending **pp = &c->list; *pp;) {
        pending *p = *pp;
        if (p->fn) {
            *pp = p->next;
            p->next = conts;
            conts = p;
        } else {
            p->done = true;
            pp = &p->next;
        }
    }
    pthread_cond_broadcast(&c->cv);
    pthread_mutex_unlock(&c->mu);
    while (conts) {
        pending *p = conts;
        conts = p->next;
        p->fn(c->ud, p->arg, NULL, NULL, NULL);
        abx_free(p);
    }
}

static void *reader_main(void *arg)
{
    abx_cdp *c = arg;
    abx_cdp_framer f = {0};
    char chunk[65536];
    for (;;) {
        ssize_t n = read(c->rfd, chunk, sizeof chunk);
        if (n < 0 && errno == EINTR)
            continue;
        if (n <= 0 || abx_cdp_framer_feed(&f, chunk, (size_t)n) != 0)
            break;
        const char *frame;
        size_t len;
        int got;
        bool broken = false;
        while ((got = abx_cdp_framer_next(&f, &frame, &len)) == 1) {
            abx_cdp_msg m;
            if (abx_cdp_parse(frame, len, &m) != 0) {
                broken = true; /* a browser that breaks the protocol is not spoken to again */
                break;
            }
            if (m.id > 0)
                deliver(c, &m);
            else if (c->on_event)
                c->on_event(c->ud, m.method, m.session, m.body);
            abx_cdp_msg_release(&m);
        }
        if (broken || got < 0)
            break;
    }
    abx_cdp_framer_release(&f);
    close_all(c);
    return NULL;
}

abx_cdp *abx_cdp_new(int rfd, int wfd, abx_cdp_event_fn on_event, void *ud)
{
    abx_cdp *c = abx_calloc(1, sizeof *c);
    if (!c) {
        close(rfd);
        close(wfd);
        return NULL;
    }
    c->rfd = rfd;
    c->wfd = wfd;
    c->on_event = on_event;
    c->ud = ud;
    pthread_mutex_init(&c->mu, NULL);
    pthread_mutex_init(&c->wmu, NULL);
    pthread_cond_init(&c->cv, NULL);
    sigset_t all, old;
    sigfillset(&all);
    pthread_sigmask(SIG_SETMASK, &all, &old);
    int rc = pthread_create(&c->reader, NULL, reader_main, c);
    pthread_sigmask(SIG_SETMASK, &old, NULL);
    if (rc != 0) {
        close(rfd);
        close(wfd);
        pthread_cond_destroy(&c->cv);
        pthread_mutex_destroy(&c->wmu);
        pthread_mutex_destroy(&c->mu);
        abx_free(c);
        return NULL;
    }
    return c;
}

static int write_all(int fd, const char *p, size_t n)
{
    while (n) {
        ssize_t w = write(fd, p, n);
        if (w < 0 && errno == EINTR)
            continue;
        if (w <= 0)
            return -1;
        p += w;
        n -= (size_t)w;
    }
    return 0;
}

/* Register the id and write the frame; the pending entry is on the list on success. */
static int submit(abx_cdp *c, const char *session, const char *method, json_t *params, pending *p)
{
    pthread_mutex_lock(&c->mu);
    if (c->closed) {
        pthread_mutex_unlock(&c->mu);
        json_decref(params);
        return -1;
    }
    p->id = ++c->next_id;
    p->next = c->list;
    c->list = p;
    pthread_mutex_unlock(&c->mu);
    json_t *msg = json_pack("{s:I, s:s, s:o}", "id", (json_int_t)p->id, "method", method, "params",
                            params ? params : json_object());
    if (msg && session)
        json_object_set_new(msg, "sessionId", json_string(session));
    char *text = msg ? json_dumps(msg, JSON_COMPACT) : NULL;
    json_decref(msg);
    int rc = -1;
    if (text) {
        pthread_mutex_lock(&c->wmu);
        rc = write_all(c->wfd, text, strlen(text) + 1); /* with its NUL */
        pthread_mutex_unlock(&c->wmu);
    }
    free(text);
    if (rc != 0) {
        pthread_mutex_lock(&c->mu);
        take(c, p->id);
        pthread_mutex_unlock(&c->mu);
    }
    return rc;
}

static void ignore(void *ud, void *arg, const char *session, json_t *result, json_t *error)
{
    (void)ud, (void)arg, (void)session, (void)result, (void)error;
}

int abx_cdp_send(abx_cdp *c, const char *session, const char *method, json_t *params, abx_cdp_reply_fn fn,
                 void *arg)
{
    pending *p = abx_calloc(1, sizeof *p);
    if (!p) {
        json_decref(params);
        return -1;
    }
    p->fn = fn ? fn : ignore; /* nobody waits: the answer is dropped */
    p->arg = arg;
    if (submit(c, session, method, params, p) != 0) {
        abx_free(p);
        return -1;
    }
    return 0;
}

int abx_cdp_call(abx_cdp *c, const char *session, const char *method, json_t *params, int64_t deadline,
                 json_t **result, char *err, size_t errlen)
{
    if (result)
        *result = NULL;
    pending p = {0};
    if (submit(c, session, method, params, &p) != 0) {
        snprintf(err, errlen, "the browser's pipe is closed");
        return -1;
    }
    pthread_mutex_lock(&c->mu);
    while (!p.done) {
        int64_t left = deadline - abx_now_ms();
        if (left <= 0)
            break;
        struct timespec ts;
        clock_gettime(CLOCK_REALTIME, &ts);
        int64_t ns = ts.tv_nsec + (left % 1000) * 1000000;
        ts.tv_sec += left / 1000 + ns / 1000000000;
        ts.tv_nsec = ns % 1000000000;
        pthread_cond_timedwait(&c->cv, &c->mu, &ts);
    }
    bool done = p.done;
    take(c, p.id); /* answered or abandoned: off the list either way */
    pthread_mutex_unlock(&c->mu);
    int rc = -1;
    if (!done)
        snprintf(err, errlen, "%s: the browser did not answer in time", method);
    else if (p.error)
        snprintf(err, errlen, "%s: %.200s", method, json_string_value(json_object_get(p.error, "message")) ?
                 json_string_value(json_object_get(p.error, "message")) : "error");
    else if (!p.result)
        snprintf(err, errlen, "%s: the browser's pipe closed", method);
    else {
        rc = 0;
        if (result)
            *result = json_incref(p.result);
    }
    json_decref(p.result);
    json_decref(p.error);
    return rc;
}

bool abx_cdp_closed(abx_cdp *c)
{
    pthread_mutex_lock(&c->mu);
    bool closed = c->closed;
    pthread_mutex_unlock(&c->mu);
    return closed;
}

void abx_cdp_free(abx_cdp *c)
{
    if (!c)
        return;
    close(c->wfd); /* the caller killed the browser: its end of the reading pipe is closed */
    pthread_join(c->reader, NULL);
    close(c->rfd);
    while (c->list) { /* only abandoned entries remain */
        pending *p = c->list;
        c->list = p->next;
        if (p->fn)
            abx_free(p);
    }
    pthread_cond_destroy(&c->cv);
    pthread_mutex_destroy(&c->wmu);
    pthread_mutex_destroy(&c->mu);
    abx_free(c);
}
