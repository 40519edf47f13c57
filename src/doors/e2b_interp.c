/* e2b_interp.c — E2B's code-interpreter protocol on abx kernels: POST /execute streams
 * a cell as NDJSON (stdout, stderr, result, error, number_of_executions,
 * end_of_execution) relayed from kernels.stream's in-process event stream, so a client
 * that goes away interrupts the cell (kernels.stream's own rule); /contexts are kernels
 * (kernels.create, kernels.list, kernels.restart, kernels.delete). A call without a
 * context runs in the caller's default kernel of that language, created on first use. */
#include "doors/e2b.h"
#include <pthread.h>
#include <stdlib.h>
#include <string.h>

/* ---- the default contexts: one kernel per (server, principal, language) ---- */
#define DEFAULTS 64
static struct { const abx_server *s; char principal[64], language[16], id[64]; } defaults[DEFAULTS];
static pthread_mutex_t defaults_mu = PTHREAD_MUTEX_INITIALIZER;

static bool default_get(const abx_server *s, const char *principal, const char *lang, char *id, size_t idlen)
{
    bool found = false;
    pthread_mutex_lock(&defaults_mu);
    for (size_t i = 0; i < DEFAULTS && !found; i++)
        if (defaults[i].s == s && strcmp(defaults[i].principal, principal) == 0 &&
            strcmp(defaults[i].language, lang) == 0) {
            snprintf(id, idlen, "%s", defaults[i].id);
            found = true;
        }
    pthread_mutex_unlock(&defaults_mu);
    return found;
}

static void default_set(const abx_server *s, const char *principal, const char *lang, const char *id)
{
    pthread_mutex_lock(&defaults_mu);
    size_t slot = DEFAULTS;
    for (size_t i = 0; i < DEFAULTS; i++) {
        bool same = defaults[i].s == s && strcmp(defaults[i].principal, principal) == 0 &&
                    strcmp(defaults[i].language, lang) == 0;
        if (same || (!defaults[i].s && slot == DEFAULTS))
            slot = i;
        if (same)
            break;
    }
    if (slot == DEFAULTS) /* full: the oldest goes (its kernel stays, reaped when idle) */
        slot = (size_t)abx_now_ms() % DEFAULTS;
    defaults[slot].s = s;
    snprintf(defaults[slot].principal, sizeof defaults[slot].principal, "%s", principal);
    snprintf(defaults[slot].language, sizeof defaults[slot].language, "%s", lang);
    snprintf(defaults[slot].id, sizeof defaults[slot].id, "%s", id);
    pthread_mutex_unlock(&defaults_mu);
}

/* abx's error envelope with its status (the SDK shows the status and the text) */
static void fail_with(e2b_call *c, int status, json_t *body)
{
    const json_t *e = json_object_get(body, "error");
    const char *code = json_string_value(json_object_get(e, "code"));
    int x = code ? abx_err_by_code(code) : -1;
    abx_fail(c->r, x > 0 ? (abx_err)x : ABX_E_SERVER_UNAVAILABLE, "%s",
             json_string_value(json_object_get(e, "message")) ?: "the call failed");
    (void)status;
    json_decref(body);
}

static json_t *context_of(const json_t *k)
{
    return json_pack("{s:O, s:O, s:s}", "id", json_object_get(k, "id"), "language", json_object_get(k, "language"),
                     "cwd", json_string_value(json_object_get(k, "cwd")) ?: "");
}

/* The kernel a cell runs in: context_id, or the caller's default for the language. */
static bool kernel_for(e2b_call *c, const json_t *req, char *id, size_t idlen)
{
    const char *ctx = json_string_value(json_object_get(req, "context_id"));
    if (ctx) {
        snprintf(id, idlen, "%s", ctx);
        return true;
    }
    const char *lang = json_string_value(json_object_get(req, "language")) ?: "python";
    json_t *body;
    if (default_get(c->server, c->principal, lang, id, idlen)) {
        if (abx_e2b_op(c, "kernels.get", json_pack("{s:s}", "id", id), &body) == 200) {
            json_decref(body);
            return true;
        }
        json_decref(body); /* gone (deleted, reaped): a new one */
    }
    int st = abx_e2b_op(c, "kernels.create", json_pack("{s:s}", "language", lang), &body);
    if (st != 200) {
        fail_with(c, st, body);
        return false;
    }
    snprintf(id, idlen, "%s", json_string_value(json_object_get(body, "id")) ?: "");
    json_decref(body);
    default_set(c->server, c->principal, lang, id);
    return true;
}

/* ---- the NDJSON relay of kernels.stream ---- */
typedef struct cell_relay {
    abx_request *inner;          /* kernels.stream: its reply reads the cell's SSE events */
    abx_buf sse, pending;
    size_t sent;
    bool done;
    int64_t last_line;           /* when the last line went out (ms) */
} cell_relay;

static void relay_free(void *p)
{
    cell_relay *w = p;
    abx_request_free(w->inner); /* a cell still running is interrupted there */
    abx_buf_release(&w->sse);
    abx_buf_release(&w->pending);
    abx_free(w);
}

static void line(cell_relay *w, json_t *msg)
{
    char *s = msg ? json_dumps(msg, JSON_COMPACT) : NULL;
    json_decref(msg);
    if (s) {
        abx_buf_puts(&w->pending, s);
        abx_buf_putc(&w->pending, '\n');
        w->last_line = abx_now_ms();
    }
    free(s);
}

/* A Jupyter MIME bundle as E2B's result: text, html, png, ... by short name. */
static json_t *result_of(const json_t *bundle)
{
    static const char *const names[][2] = {
        {"text/plain", "text"},  {"text/html", "html"},         {"text/markdown", "markdown"},
        {"image/svg+xml", "svg"}, {"image/png", "png"},          {"image/jpeg", "jpeg"},
        {"application/pdf", "pdf"}, {"text/latex", "latex"},    {"application/json", "json"},
        {"application/javascript", "javascript"},
    };
    json_t *r = json_pack("{s:s, s:b}", "type", "result", "is_main_result",
                          json_is_true(json_object_get(bundle, "is_main_result")));
    json_t *extra = json_object();
    const char *k;
    const json_t *v;
    json_object_foreach((json_t *)bundle, k, v) {
        if (strcmp(k, "is_main_result") == 0)
            continue;
        const char *shortname = NULL;
        for (size_t i = 0; i < sizeof names / sizeof names[0] && !shortname; i++)
            if (strcmp(k, names[i][0]) == 0)
                shortname = names[i][1];
        json_object_set(shortname ? r : extra, shortname ? shortname : k, (json_t *)v);
    }
    if (json_object_size(extra))
        json_object_set(r, "extra", extra);
    json_decref(extra);
    return r;
}

static void one_event(cell_relay *w, const char *ev, size_t len)
{
    char name[32] = "";
    const char *data = NULL;
    for (const char *l = ev; l < ev + len;) {
        const char *nl = memchr(l, '\n', (size_t)(ev + len - l));
        size_t ll = nl ? (size_t)(nl - l) : (size_t)(ev + len - l);
        if (ll > 7 && memcmp(l, "event: ", 7) == 0)
            snprintf(name, sizeof name, "%.*s", (int)(ll - 7), l + 7);
        else if (ll > 6 && memcmp(l, "data: ", 6) == 0)
            data = l + 6;
        l += ll + 1;
    }
    json_error_t je;
    json_t *d = data ? json_loadb(data, strcspn(data, "\n"), 0, &je) : NULL;
    if (strcmp(name, "stdout") == 0 || strcmp(name, "stderr") == 0) {
        line(w, json_pack("{s:s, s:O, s:I}", "type", name, "text", json_object_get(d, "text"), "timestamp",
                          (json_int_t)abx_now_ms() * 1000));
    } else if (strcmp(name, "result") == 0) {
        line(w, result_of(d));
    } else if (strcmp(name, "error") == 0) {
        const json_t *tb = json_object_get(d, "traceback");
        abx_buf t;
        abx_buf_init(&t, 0);
        size_t i;
        const json_t *x;
        json_array_foreach(tb, i, x) {
            abx_buf_puts(&t, json_string_value(x) ?: "");
            abx_buf_putc(&t, '\n');
        }
        const char *ename = json_string_value(json_object_get(d, "name")) ?: json_string_value(json_object_get(d, "code"));
        const char *value = json_string_value(json_object_get(d, "value")) ?: json_string_value(json_object_get(d, "message"));
        line(w, json_pack("{s:s, s:s, s:s, s:s}", "type", "error", "name", ename ?: "Error", "value", value ?: "",
                          "traceback", t.data ? t.data : ""));
        abx_buf_release(&t);
    } else if (strcmp(name, "") == 0 && !data && abx_now_ms() - w->last_line >= 1000) {
        /* a quiet second: a line the SDK skips (an unknown type), so that a client that
         * left is noticed while a quiet cell runs, and the cell interrupted */
        line(w, json_pack("{s:s}", "type", "keepalive"));
    } else if (strcmp(name, "end") == 0) {
        line(w, json_pack("{s:s, s:O}", "type", "number_of_executions", "execution_count",
                          json_object_get(d, "execution_count")));
        line(w, json_pack("{s:s}", "type", "end_of_execution"));
        w->done = true;
    }
    json_decref(d);
}

static bool take_event(void *ud, const char *ev, size_t len)
{
    cell_relay *w = ud;
    one_event(w, ev, len);
    return !w->done;
}

static long relay_read(void *p, char *buf, size_t max)
{
    cell_relay *w = p;
    while (w->sent == w->pending.len) {
        w->pending.len = 0;
        w->sent = 0;
        if (w->done)
            return 0;
        char in[16384];
        abx_reply *r = &w->inner->reply;
        long n = r->stream_read(r->stream_state, in, sizeof in);
        if (n <= 0) {
            w->done = true;
            return 0;
        }
        abx_buf_append(&w->sse, in, (size_t)n);
        abx_sse_take(&w->sse, take_event, w); /* a ": keepalive" comment: a keepalive line */
    }
    size_t n = w->pending.len - w->sent;
    if (n > max)
        n = max;
    memcpy(buf, w->pending.data + w->sent, n);
    w->sent += n;
    return (long)n;
}

static void execute(e2b_call *c, const json_t *req)
{
    const char *code = json_string_value(json_object_get(req, "code"));
    if (!code) {
        abx_fail(c->r, ABX_E_ARGS_INVALID, "the body must be {code, context_id | language, env_vars}");
        return;
    }
    const json_t *env = json_object_get(req, "env_vars");
    if (env && !json_is_null(env) && !json_is_object(env)) {
        abx_fail(c->r, ABX_E_ARGS_INVALID, "env_vars must be an object of strings");
        return;
    }
    char id[64];
    if (!kernel_for(c, req, id, sizeof id))
        return;
    json_t *args = json_pack("{s:s, s:s}", "id", id, "code", code);
    if (json_object_size(env)) /* the cell's own env: kernels.stream sets and restores it */
        json_object_set(args, "env", (json_t *)env);
    abx_call_in in = {.door = ABX_DOOR_E2B, .principal = c->principal, .op = "kernels.stream", .args = args,
                      .conn_fd = -1, .client = c->r->client};
    abx_request *x = abx_call_begin(c->server, &in);
    json_decref(args);
    if (!x || x->reply.err || !x->reply.stream_read) {
        abx_err e = x && x->reply.err ? x->reply.err : ABX_E_SERVER_UNAVAILABLE;
        abx_fail(c->r, e, "%s", x && x->reply.message ? x->reply.message : abx_err_meaning(e));
        abx_request_free(x);
        return;
    }
    cell_relay *w = abx_calloc(1, sizeof *w);
    if (!w) {
        abx_request_free(x);
        abx_fail(c->r, ABX_E_SERVER_UNAVAILABLE, "out of memory");
        return;
    }
    w->inner = x;
    w->last_line = abx_now_ms();
    abx_buf_init(&w->sse, 4 << 20);
    abx_buf_init(&w->pending, 0);
    abx_reply_stream(&c->r->reply, "application/x-ndjson", relay_read, w, relay_free);
}

/* /contexts, /contexts/{id}, /contexts/{id}/restart */
static void contexts(e2b_call *c, const json_t *req, const char *rest, size_t rlen)
{
    const char *m = c->r->method;
    json_t *body;
    int st;
    if (rlen == 0 && strcmp(m, "POST") == 0) {
        const char *lang = json_string_value(json_object_get(req, "language")) ?: "python";
        json_t *args = json_pack("{s:s}", "language", lang);
        if (json_string_length(json_object_get(req, "cwd")))
            json_object_set(args, "cwd", json_object_get(req, "cwd"));
        st = abx_e2b_op(c, "kernels.create", args, &body);
        if (st == 200) {
            json_t *ctx = context_of(body);
            json_object_set_new(ctx, "cwd", json_string(json_string_value(json_object_get(req, "cwd")) ?: ""));
            abx_reply_json(&c->r->reply, ctx);
        }
    } else if (rlen == 0 && strcmp(m, "GET") == 0) {
        st = abx_e2b_op(c, "kernels.list", json_object(), &body);
        if (st == 200) {
            json_t *list = json_array();
            size_t i;
            const json_t *k;
            json_array_foreach(json_object_get(body, "kernels"), i, k) json_array_append_new(list, context_of(k));
            abx_reply_json(&c->r->reply, list);
        }
    } else {
        const char *slash = rlen > 1 ? memchr(rest + 1, '/', rlen - 1) : NULL;
        size_t idlen = slash ? (size_t)(slash - rest - 1) : rlen - 1;
        char *id = abx_arena_strndup(c->r->arena, rest + 1, idlen);
        bool restart = slash && (size_t)(rest + rlen - slash) == 8 && memcmp(slash, "/restart", 8) == 0;
        if (!id || !idlen || (slash && !restart) || strcmp(m, restart ? "POST" : "DELETE") != 0) {
            abx_fail(c->r, ABX_E_OP_NOT_ENABLED, "no such route");
            return;
        }
        st = abx_e2b_op(c, restart ? "kernels.restart" : "kernels.delete", json_pack("{s:s}", "id", id), &body);
        if (st == 200)
            c->r->reply.status = 204, c->r->reply.protocol_body = true;
    }
    if (st != 200)
        fail_with(c, st, body);
    else
        json_decref(body);
}

bool abx_e2b_interp(e2b_call *c)
{
    abx_request *r = c->r;
    bool exec = r->path_len == 8 && memcmp(r->path, "/execute", 8) == 0;
    bool ctx = r->path_len >= 9 && memcmp(r->path, "/contexts", 9) == 0 && (r->path_len == 9 || r->path[9] == '/');
    if (!exec && !ctx)
        return false;
    json_error_t je;
    json_t *req = r->body.len ? json_loadb(r->body.data, r->body.len, 0, &je) : json_object();
    if (!json_is_object(req)) {
        json_decref(req);
        abx_fail(r, ABX_E_REQUEST_BAD_JSON, "the body must be a JSON object");
        return true;
    }
    if (exec && strcmp(r->method, "POST") != 0)
        abx_fail(r, ABX_E_REQUEST_METHOD_NOT_ALLOWED, "POST /execute");
    else if (exec)
        execute(c, req);
    else
        contexts(c, req, r->path + 9, r->path_len - 9);
    json_decref(req);
    return true;
}
