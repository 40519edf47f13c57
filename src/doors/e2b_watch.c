/* e2b_watch.c — envd's WatchDir stream on files.watch: the in-process call's own event
 * stream (inotify as server-sent events) re-framed as WatchDirResponse messages (start,
 * filesystem events, keepalives). The inner request lives as long as the stream: the
 * watch reads through its context. */
#include "doors/e2b.h"
#include "filesystem/filesystem.pb-c.h"
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

/* One server-sent event (its lines) → a frame: file events and keepalives. */
static void one_event(watch_relay *w, const char *ev, size_t len)
{
    if (len >= 1 && ev[0] == ':') {
        push(w, json_pack("{s:{}}", "keepalive"), 0);
        return;
    }
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
    if (type && path && !temp)
        push(w, json_pack("{s:{s:s, s:s}}", "filesystem", "name", path, "type", type), 0);
    json_decref(d);
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
    char *end;
    while (w->sse.len && (end = memmem(w->sse.data, w->sse.len, "\n\n", 2))) {
        size_t evlen = (size_t)(end - w->sse.data);
        one_event(w, w->sse.data, evlen);
        memmove(w->sse.data, end + 2, w->sse.len - evlen - 2);
        w->sse.len -= evlen + 2;
    }
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

void abx_e2b_watch_dir(e2b_call *c, const json_t *req)
{
    const char *path = json_string_value(json_object_get(req, "path"));
    json_t *args = json_pack("{s:s, s:b}", "path", path && *path ? path : ".", "recursive",
                             json_is_true(json_object_get(req, "recursive")));
    abx_call_in in = {.door = ABX_DOOR_E2B, .principal = c->principal, .op = "files.watch", .args = args,
                      .conn_fd = -1, .client = c->r->client};
    abx_request *x = abx_call_begin(c->server, &in);
    json_decref(args);
    if (!x) {
        abx_e2b_fail_msg(c, ABX_E_SERVER_UNAVAILABLE, "the server is not ready");
        return;
    }
    if (x->reply.err || !x->reply.stream_read) {
        json_t *b = abx_error_json(x->reply.err ? x->reply.err : ABX_E_SERVER_UNAVAILABLE, x->reply.message, NULL);
        abx_e2b_fail(c, abx_err_status(x->reply.err ? x->reply.err : ABX_E_SERVER_UNAVAILABLE), b);
        json_decref(b);
        abx_request_free(x);
        return;
    }
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
