/* e2b_watch.c — envd's WatchDir stream on files.watch: the in-process call's own event
 * stream (inotify as server-sent events) re-framed as WatchDirResponse messages (start,
 * filesystem events, keepalives). The inner request lives as long as the stream: the
 * watch reads through its context. */
#include "doors/e2b.h"
#include "filesystem/filesystem.pb-c.h"
#include <pthread.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>

typedef struct watch_relay {
    e2b_call call;
    char *principal;
    abx_request *inner;          /* files.watch, its reply a text/event-stream reader */
    abx_buf sse;                 /* what the watch sent, not yet a whole event */
    abx_buf pending;             /* frames made, not yet read */
    size_t sent;
    bool started, done;
} watch_relay;

static void relay_free(void *p)
{
    watch_relay *w = p;
    abx_request_free(w->inner); /* ends the watch's stream too */
    abx_buf_release(&w->sse);
    abx_buf_release(&w->pending);
    abx_free(w->principal);
    abx_free(w);
}

static void push(watch_relay *w, json_t *msg, uint8_t flags)
{
    size_t n = 0;
    char *f = abx_e2b_frame(&w->call, &filesystem__watch_dir_response__descriptor, msg, flags, &n);
    if (f)
        abx_buf_append(&w->pending, f, n);
    free(f);
}

static const char *event_type(const char *kind)
{
    static const char *const map[][2] = {{"create", "EVENT_TYPE_CREATE"}, {"modify", "EVENT_TYPE_WRITE"},
                                         {"delete", "EVENT_TYPE_REMOVE"}, {"move", "EVENT_TYPE_RENAME"}};
    for (size_t i = 0; kind && i < sizeof map / sizeof map[0]; i++)
        if (strcmp(kind, map[i][0]) == 0)
            return map[i][1];
    return NULL;
}

/* One server-sent event of files.watch (its lines) → envd's FilesystemEvent JSON, or
 * NULL (a keepalive comment sets *keepalive; ready, dropped and abx's temporaries are
 * nothing to show). */
static json_t *fs_event(const char *ev, size_t len, bool *keepalive)
{
    *keepalive = len >= 1 && ev[0] == ':';
    const char *data = NULL;
    for (const char *line = ev; line < ev + len;) {
        const char *nl = memchr(line, '\n', (size_t)(ev + len - line));
        size_t ll = nl ? (size_t)(nl - line) : (size_t)(ev + len - line);
        if (ll > 6 && memcmp(line, "data: ", 6) == 0)
            data = line + 6;
        line += ll + 1;
    }
    json_error_t je;
    json_t *d = data ? json_loadb(data, strcspn(data, "\n"), 0, &je) : NULL;
    const char *type = event_type(json_string_value(json_object_get(d, "type")));
    const char *path = json_string_value(json_object_get(d, "path"));
    /* abx writes files atomically through a hidden temporary beside them: not the user's */
    const char *base = path ? strrchr(path, '/') : NULL;
    base = base ? base + 1 : path;
    size_t bl = base ? strlen(base) : 0;
    bool temp = bl > 9 && base[0] == '.' && strcmp(base + bl - 8, ".abx-tmp") == 0;
    json_t *e = type && path && !temp ? json_pack("{s:s, s:s}", "name", path, "type", type) : NULL;
    json_decref(d);
    return e;
}

typedef struct split_to {
    void (*fn)(void *ud, json_t *event, bool keepalive);
    void *ud;
} split_to;

static bool split_one(void *ud, const char *ev, size_t len)
{
    split_to *t = ud;
    bool ka;
    json_t *e = fs_event(ev, len, &ka);
    if (e || ka)
        t->fn(t->ud, e, ka);
    return true;
}

/* Whole events at the front of sse, each handed to fn; the rest stays. */
static void split_events(abx_buf *sse, void (*fn)(void *ud, json_t *event, bool keepalive), void *ud)
{
    split_to t = {fn, ud};
    abx_sse_take(sse, split_one, &t);
}

static void to_frame(void *ud, json_t *event, bool keepalive)
{
    watch_relay *w = ud;
    push(w, keepalive ? json_pack("{s:{}}", "keepalive") : json_pack("{s:o}", "filesystem", event), 0);
}

static void step(watch_relay *w)
{
    if (!w->started) {
        push(w, json_pack("{s:{}}", "start"), 0);
        w->started = true;
        return;
    }
    char buf[16384];
    abx_reply *in = &w->inner->reply;
    long n = in->stream_read(in->stream_state, buf, sizeof buf);
    if (n <= 0) {
        push(w, json_object(), 2);
        w->done = true;
        return;
    }
    abx_buf_append(&w->sse, buf, (size_t)n);
    split_events(&w->sse, to_frame, w);
}

static long relay_read(void *p, char *buf, size_t max)
{
    watch_relay *w = p;
    while (w->sent == w->pending.len) {
        w->pending.len = 0;
        w->sent = 0;
        if (w->done)
            return 0;
        step(w);
    }
    size_t n = w->pending.len - w->sent;
    if (n > max)
        n = max;
    memcpy(buf, w->pending.data + w->sent, n);
    w->sent += n;
    return (long)n;
}

/* files.watch in process as the caller: its request (the reply a stream), or NULL with
 * the call failed. */
static abx_request *start_watch(e2b_call *c, const json_t *req)
{
    const char *path = json_string_value(json_object_get(req, "path"));
    json_t *args = json_pack("{s:s, s:b}", "path", path && *path ? path : ".", "recursive",
                             json_is_true(json_object_get(req, "recursive")));
    abx_call_in in = {.door = ABX_DOOR_E2B, .principal = c->principal, .op = "files.watch", .args = args,
                      .conn_fd = -1, .client = c->r->client};
    abx_request *x = abx_call_begin(c->server, &in);
    json_decref(args);
    abx_err e = !x ? ABX_E_SERVER_UNAVAILABLE : x->reply.err ? x->reply.err
                                              : !x->reply.stream_read ? ABX_E_SERVER_UNAVAILABLE : ABX_OK;
    if (e == ABX_OK)
        return x;
    json_t *b = abx_error_json(e, x ? x->reply.message : "the server is not ready", NULL);
    abx_e2b_fail(c, abx_err_status(e), b);
    json_decref(b);
    abx_request_free(x);
    return NULL;
}

void abx_e2b_watch_dir(e2b_call *c, const json_t *req)
{
    abx_request *x = start_watch(c, req);
    if (!x)
        return;
    watch_relay *w = abx_calloc(1, sizeof *w);
    char *pr = abx_strdup(c->principal);
    if (!w || !pr) {
        abx_free(w);
        abx_free(pr);
        abx_request_free(x);
        abx_e2b_fail_msg(c, ABX_E_SERVER_UNAVAILABLE, "out of memory");
        return;
    }
    w->principal = pr;
    w->inner = x;
    w->call = (e2b_call){.server = c->server, .principal = pr, .proto = c->proto, .stream = true};
    abx_buf_init(&w->sse, 4 << 20);
    abx_buf_init(&w->pending, 0);
    abx_reply_stream(&c->r->reply, c->proto ? "application/connect+proto" : "application/connect+json", relay_read, w,
                     relay_free);
}

/* ---- CreateWatcher / GetWatcherEvents / RemoveWatcher: a watch that a thread of its
 * own reads into a bounded queue, polled by id (the caller's own watchers only) ---- */
#define WATCHERS 64
#define WATCHER_EVENTS 4096

typedef struct watcher {
    char id[32];
    char *principal;
    const abx_server *server;
    json_t *args;                /* CreateWatcher's request: a renewal asks for the same watch */
    abx_request *inner;          /* files.watch, admitted under inner->policy */
    pthread_t thread;
    atomic_bool stop;
    pthread_mutex_t mu;          /* guards events */
    json_t *events;
} watcher;

static watcher *watchers[WATCHERS];
static pthread_mutex_t watchers_mu = PTHREAD_MUTEX_INITIALIZER;
static atomic_ulong watcher_seq;

static void queue_event(void *ud, json_t *event, bool keepalive)
{
    watcher *w = ud;
    (void)keepalive;
    if (!event)
        return;
    pthread_mutex_lock(&w->mu);
    if (json_array_size(w->events) < WATCHER_EVENTS) /* past it, new events are dropped until read */
        json_array_append(w->events, event);
    pthread_mutex_unlock(&w->mu);
    json_decref(event);
}

static void *watcher_main(void *p)
{
    watcher *w = p;
    abx_buf sse;
    abx_buf_init(&sse, 4 << 20);
    char buf[16384];
    abx_reply *in = &w->inner->reply;
    while (!atomic_load(&w->stop)) { /* the watch answers at least every 2 s (a keepalive) */
        long n = in->stream_read(in->stream_state, buf, sizeof buf);
        if (n <= 0)
            break;
        abx_buf_append(&sse, buf, (size_t)n);
        split_events(&sse, queue_event, w);
    }
    abx_buf_release(&sse);
    return NULL;
}

/* Everything a watcher holds, its thread already gone (or never started). */
static void watcher_release(watcher *w)
{
    abx_request_free(w->inner);
    json_decref(w->events);
    json_decref(w->args);
    pthread_mutex_destroy(&w->mu);
    abx_free(w->principal);
    abx_free(w);
}

static void watcher_free(watcher *w)
{
    atomic_store(&w->stop, true);
    pthread_join(w->thread, NULL);
    watcher_release(w);
}

/* The first free slot of the table (WATCHERS: none); watchers_mu held. */
static size_t free_slot(void)
{
    size_t slot = 0;
    while (slot < WATCHERS && watchers[slot])
        slot++;
    return slot;
}

static void create_watcher(e2b_call *c, const json_t *req)
{
    abx_request *x = start_watch(c, req);
    if (!x)
        return;
    watcher *w = abx_calloc(1, sizeof *w);
    if (!w || !(w->principal = abx_strdup(c->principal)) || !(w->args = json_deep_copy(req))) {
        if (w)
            abx_free(w->principal);
        abx_free(w);
        abx_request_free(x);
        abx_e2b_fail_msg(c, ABX_E_SERVER_UNAVAILABLE, "out of memory");
        return;
    }
    snprintf(w->id, sizeof w->id, "w-%lu", atomic_fetch_add(&watcher_seq, 1) + 1);
    w->server = c->server;
    w->inner = x;
    w->events = json_array();
    pthread_mutex_init(&w->mu, NULL);
    pthread_mutex_lock(&watchers_mu);
    size_t slot = free_slot();
    bool ok = slot < WATCHERS && pthread_create(&w->thread, NULL, watcher_main, w) == 0;
    if (ok)
        watchers[slot] = w;
    pthread_mutex_unlock(&watchers_mu);
    if (!ok) {
        watcher_release(w); /* x with it */
        abx_e2b_fail_msg(c, ABX_E_LIMIT_CONCURRENCY, "too many watchers (at most 64): remove one first");
        return;
    }
    abx_e2b_unary(c, &filesystem__create_watcher_response__descriptor, json_pack("{s:s}", "watcherId", w->id));
}

/* The caller's watcher by id (index in the table), or -1 with the call failed. */
static int find_watcher(e2b_call *c, const json_t *req)
{
    const char *id = json_string_value(json_object_get(req, "watcherId"));
    for (int i = 0; id && i < WATCHERS; i++)
        if (watchers[i] && watchers[i]->server == c->server && strcmp(watchers[i]->id, id) == 0 &&
            strcmp(watchers[i]->principal, c->principal) == 0)
            return i;
    abx_e2b_fail_msg(c, ABX_E_OP_NOT_ENABLED, "no such watcher of this caller");
    return -1;
}

/* Events still queued that the renewed watch's caller may see (its ctx decides, as
 * files.watch's own events are decided). */
static void refilter(watcher *w)
{
    abx_ctx *ctx = &w->inner->ctx;
    const char *root = abx_ctx_path(ctx, "path");
    json_t *kept = json_array();
    size_t i;
    json_t *e;
    json_array_foreach(w->events, i, e) {
        const char *name = json_string_value(json_object_get(e, "name"));
        char *canon = root && name ? abx_asprintf("%s/%s", strcmp(root, "/") == 0 ? "" : root, name) : NULL;
        if (canon && abx_ctx_path_visible(ctx, canon))
            json_array_append(kept, e);
        abx_free(canon);
    }
    json_decref(w->events);
    w->events = kept;
}

/* The policy was reloaded since the watch was admitted: the same files.watch again, as
 * the caller, under the policy in force (refused: the watcher ends with that answer).
 * w is out of the table meanwhile; false when the call failed and w is gone. */
static bool renew(e2b_call *c, watcher *w)
{
    abx_request *x = start_watch(c, w->args); /* fails the call itself */
    atomic_store(&w->stop, true);
    pthread_join(w->thread, NULL);
    abx_request_free(w->inner);
    w->inner = x;
    atomic_store(&w->stop, false);
    bool ok = x != NULL;
    if (ok) {
        refilter(w);
        ok = pthread_create(&w->thread, NULL, watcher_main, w) == 0;
        if (!ok)
            abx_e2b_fail_msg(c, ABX_E_SERVER_UNAVAILABLE, "cannot restart the watcher");
    }
    if (ok) {
        pthread_mutex_lock(&watchers_mu);
        size_t slot = free_slot();
        if (slot < WATCHERS)
            watchers[slot] = w;
        pthread_mutex_unlock(&watchers_mu);
        if (slot < WATCHERS)
            return true;
        abx_e2b_fail_msg(c, ABX_E_LIMIT_CONCURRENCY, "too many watchers (at most 64): remove one first");
        watcher_free(w);
        return false;
    }
    watcher_release(w); /* its thread was joined above */
    return false;
}

static void get_watcher_events(e2b_call *c, const json_t *req)
{
    pthread_mutex_lock(&watchers_mu);
    int i = find_watcher(c, req);
    watcher *w = i >= 0 ? watchers[i] : NULL;
    bool stale = false;
    if (w) {
        /* each poll is a call of its own: under the policy in force, not the one that
         * admitted the watch (a reload may have taken files.* away or denied a name) */
        abx_policy *now = abx_server_snapshot(c->server);
        stale = now != w->inner->policy;
        if (now)
            abx_policy_unref(now);
        if (stale)
            watchers[i] = NULL;
    }
    pthread_mutex_unlock(&watchers_mu);
    if (!w || (stale && !renew(c, w)))
        return;
    pthread_mutex_lock(&w->mu);
    json_t *events = w->events;
    w->events = json_array();
    pthread_mutex_unlock(&w->mu);
    if (events)
        abx_e2b_unary(c, &filesystem__get_watcher_events_response__descriptor, json_pack("{s:o}", "events", events));
}

static void remove_watcher(e2b_call *c, const json_t *req)
{
    pthread_mutex_lock(&watchers_mu);
    int i = find_watcher(c, req);
    watcher *w = i >= 0 ? watchers[i] : NULL;
    if (w)
        watchers[i] = NULL;
    pthread_mutex_unlock(&watchers_mu);
    if (!w)
        return;
    watcher_free(w);
    abx_e2b_unary(c, &filesystem__remove_watcher_response__descriptor, json_object());
}

void abx_e2b_watchers_stop(const abx_server *s)
{
    watcher *gone[WATCHERS];
    size_t n = 0;
    pthread_mutex_lock(&watchers_mu);
    for (size_t i = 0; i < WATCHERS; i++)
        if (watchers[i] && watchers[i]->server == s) {
            gone[n++] = watchers[i];
            watchers[i] = NULL;
        }
    pthread_mutex_unlock(&watchers_mu);
    for (size_t i = 0; i < n; i++)
        watcher_free(gone[i]);
}

void abx_e2b_watcher_call(e2b_call *c, const json_t *req, int which)
{
    if (which == 0)
        create_watcher(c, req);
    else if (which == 1)
        get_watcher_events(c, req);
    else
        remove_watcher(c, req);
}
