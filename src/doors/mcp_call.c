/* mcp_call.c — MCP tools/call: the inner pipeline call, its result as a CallToolResult,
 * streamed ops' events as progress notifications, bounds on streams (duration,
 * max_events), and long plain calls run on a worker thread so that the transport can
 * send notifications/progress while they run (a client's resetTimeoutOnProgress). */
#include "doors/mcp_int.h"
#include <errno.h>
#include <pthread.h>
#include <time.h>
#include <poll.h>
#include <string.h>
#include <strings.h>
#include <unistd.h>

/* ---- tools/call: results ---- */

static json_t *text_block(const char *text, size_t n)
{
    return json_pack("{s:s, s:s%}", "type", "text", "text", text, n);
}

/* A CallToolResult; _meta names the pipeline's request (the ledger and the logs use it). */
static json_t *tool_result(const abx_request *inner, json_t *content, bool is_error, json_t *meta)
{
    if (!meta)
        meta = json_object();
    json_object_set_new(meta, "abx/request_id", json_string(inner->id));
    return json_pack("{s:o, s:b, s:o}", "content", content, "isError", is_error, "_meta", meta);
}

static bool textual_type(const char *ct)
{
    return ct && (strncasecmp(ct, "text/", 5) == 0 || strstr(ct, "json") || strstr(ct, "xml") || strstr(ct, "yaml"));
}

/* Bytes for the model: text when the type is textual and the bytes are UTF-8, else an
 * embedded resource with the bytes in base64. */
static json_t *bytes_content(const abx_request *inner, const char *ct, const char *data, size_t n, bool truncated)
{
    json_t *content = json_array();
    if (!ct)
        ct = "application/octet-stream";
    if (textual_type(ct) && abx_utf8_valid(data, n)) {
        json_array_append_new(content, text_block(data, n));
    } else {
        char *b64 = abx_base64_encode(data, n, NULL);
        char uri[96];
        snprintf(uri, sizeof uri, "abx://results/%s", inner->id);
        json_array_append_new(content, json_pack("{s:s, s:{s:s, s:s, s:s}}", "type", "resource", "resource", "uri",
                                                 uri, "mimeType", ct, "blob", b64 ? b64 : ""));
        abx_free(b64);
    }
    if (truncated) {
        char note[96];
        int k = snprintf(note, sizeof note, "[truncated: only the first %u bytes are shown]", MCP_RESULT_MAX);
        json_array_append_new(content, text_block(note, (size_t)k));
    }
    return content;
}

static json_t *json_text_content(const json_t *v)
{
    char *s = json_dumps(v, JSON_COMPACT | JSON_ENCODE_ANY);
    json_t *content = json_array();
    json_array_append_new(content, text_block(s ? s : "null", s ? strlen(s) : 4));
    free(s);
    return content;
}

/* A refused or failed call as a result the model can read: "code: message". */
static json_t *error_result(const abx_request *inner, int status)
{
    const abx_reply *rep = &inner->reply;
    const char *code = abx_err_code(rep->err), *msg = rep->message ? rep->message : abx_err_meaning(rep->err);
    char *det = rep->details ? json_dumps(rep->details, JSON_COMPACT) : NULL;
    char *text = abx_asprintf("%s: %s%s%s", code, msg, det ? " " : "", det ? det : "");
    free(det);
    json_t *content = json_array();
    json_array_append_new(content, text_block(text ? text : code, text ? strlen(text) : strlen(code)));
    abx_free(text);
    return tool_result(inner, content, true, json_pack("{s:i, s:s}", "abx/status", status, "abx/code", code));
}

/* A call held for human approval (202): not a result yet, so an error the model reads. */
static json_t *held_result(const abx_request *inner)
{
    const char *aid = json_string_value(json_object_get(inner->reply.body, "approval_id"));
    char *text = abx_asprintf("held for human approval (approval id %s): nothing has run yet; an approver decides "
                              "it, then it runs once. Check its state with approvals__get {\"id\": \"%s\"}.",
                              aid ? aid : "?", aid ? aid : "?");
    json_t *content = json_array();
    json_array_append_new(content, text_block(text ? text : "held for approval", text ? strlen(text) : 17));
    abx_free(text);
    json_t *meta = json_pack("{s:i, s:s?}", "abx/status", 202, "abx/approval_id", aid);
    return tool_result(inner, content, true, meta);
}

static json_t *final_result(abx_mcp_call *c)
{
    if (c->cancelled)
        return tool_result(c->inner, json_pack("[{s:s, s:s}]", "type", "text", "text", "cancelled by the client"),
                           true, NULL);
    const abx_reply *rep = &c->inner->reply;
    json_t *content;
    if (c->framing == ABX_STREAM_SSE || c->framing == ABX_STREAM_NDJSON) {
        json_t *doc = json_pack("{s:O, s:b, s:s}", "events", c->events, "truncated", c->truncated, "ended",
                                c->truncated ? "truncated" : c->ended_by ? c->ended_by : "end");
        content = json_text_content(doc);
        json_decref(doc);
    } else {
        content = bytes_content(c->inner, rep->content_type, c->bytes.data ? c->bytes.data : "", c->bytes.len,
                                c->truncated);
    }
    if (c->failed) {
        json_array_append_new(content, json_pack("{s:s, s:s}", "type", "text", "text",
                                                 "[the stream ended with an error before its end]"));
    }
    return tool_result(c->inner, content, c->failed, NULL);
}

/* ---- tools/call: streams ---- */

static void queue_progress(abx_mcp_call *c, const char *name, const json_t *data)
{
    if (!c->token)
        return;
    const json_t *inner = json_is_object(data) ? json_object_get(data, "data") : NULL;
    char *dumped = NULL;
    const char *text = json_string_value(inner);
    if (!text) {
        dumped = json_dumps(data, JSON_COMPACT | JSON_ENCODE_ANY);
        text = dumped ? dumped : "";
    }
    char *msg = abx_asprintf("%s: %s", name, text);
    free(dumped);
    json_t *n = json_pack("{s:s, s:s, s:{s:O, s:i, s:s}}", "jsonrpc", "2.0", "method", "notifications/progress",
                          "params", "progressToken", c->token, "progress", ++c->progress, "message", msg ? msg : name);
    abx_free(msg);
    json_array_append_new(c->queue, n);
}

static void on_event(abx_mcp_call *c, const char *name, const char *data, size_t n)
{
    if (c->kept + n + strlen(name) > MCP_RESULT_MAX) {
        c->truncated = true;
        return;
    }
    c->kept += n + strlen(name);
    json_t *d = json_loadb(data, n, JSON_DECODE_ANY, NULL);
    if (!d) /* not JSON: the text as it is, when it is text */
        d = json_stringn(data, n);
    if (!d)
        d = json_string("(data that is not UTF-8 text)");
    queue_progress(c, name, d);
    json_array_append_new(c->events, json_pack("{s:s, s:o}", "event", name, "data", d));
    if (++c->n_events >= c->max_events && c->max_events > 0) {
        c->ended_by = "max_events";
        c->done = true;
    }
}

/* One line of an SSE or NDJSON stream (without its newline). */
static void on_line(abx_mcp_call *c, char *ln, size_t n)
{
    if (n && ln[n - 1] == '\r')
        ln[--n] = '\0';
    if (c->framing == ABX_STREAM_NDJSON) {
        if (n)
            on_event(c, "message", ln, n);
        return;
    }
    if (n == 0) { /* the end of an event */
        if (c->has_data)
            on_event(c, c->event[0] ? c->event : "message", c->data.data ? c->data.data : "", c->data.len);
        c->event[0] = '\0';
        c->data.len = 0;
        c->has_data = false;
        return;
    }
    if (ln[0] == ':') /* a comment (keepalive) */
        return;
    char *colon = memchr(ln, ':', n);
    size_t fl = colon ? (size_t)(colon - ln) : n;
    const char *v = colon ? colon + 1 : ln + n;
    if (*v == ' ')
        v++;
    size_t vl = (size_t)(ln + n - v);
    if (fl == 5 && memcmp(ln, "event", 5) == 0) {
        snprintf(c->event, sizeof c->event, "%.*s", (int)vl, v);
    } else if (fl == 4 && memcmp(ln, "data", 4) == 0) {
        if (c->has_data)
            abx_buf_putc(&c->data, '\n');
        abx_buf_append(&c->data, v, vl);
        c->has_data = true;
        if (c->data.failed)
            c->truncated = true;
    }
}

static void feed(abx_mcp_call *c, const char *p, size_t n)
{
    if (c->framing != ABX_STREAM_SSE && c->framing != ABX_STREAM_NDJSON) {
        size_t room = MCP_RESULT_MAX - c->bytes.len;
        if (!abx_buf_append(&c->bytes, p, n < room ? n : room) || n > room)
            c->truncated = true;
        return;
    }
    for (size_t i = 0; i < n && !c->truncated; i++) {
        if (p[i] != '\n') {
            if (!abx_buf_putc(&c->line, p[i]))
                c->truncated = true;
            continue;
        }
        char empty[1] = "";
        on_line(c, c->line.len ? c->line.data : empty, c->line.len);
        c->line.len = 0;
    }
}

static bool hung_up(int fd)
{
    if (fd < 0)
        return false;
    struct pollfd pf = {.fd = fd, .events = POLLRDHUP};
    return poll(&pf, 1, 0) > 0 && (pf.revents & (POLLRDHUP | POLLHUP | POLLERR));
}

/* ---- long plain calls on a worker thread ---- */

static void *worker_main(void *arg)
{
    abx_mcp_call *c = arg;
    abx_call_in ci = {.door = ABX_DOOR_MCP, .principal = c->conv->principal, .op = c->op->id, .args = c->args,
                      .cancel = &c->fl->cancel, .conn_fd = c->worker_fd, .client = c->client, .session = c->conv->tag};
    abx_request *r = abx_call_begin(c->server, &ci);
    pthread_mutex_lock(&c->wmu);
    c->inner = r;
    c->worker_done = true;
    pthread_cond_broadcast(&c->wcv);
    pthread_mutex_unlock(&c->wmu);
    return NULL;
}

static void worker_join(abx_mcp_call *c)
{
    if (c->threaded && !c->joined) {
        pthread_join(c->worker, NULL);
        c->joined = true;
    }
}

static bool answer(abx_mcp_call *c, abx_mcp_out *out);
static void stream_bounds(abx_mcp_call *c, const abx_server *s, const json_t *args);

/* The worker has not finished: wait (a second at most, so a stopping transport is not held
 * up), and when a progress interval has passed say it still runs; NULL: nothing yet. */
static json_t *worker_wait(abx_mcp_call *c, bool *final)
{
    int64_t now = abx_now_ms();
    if (!c->next_progress_ms)
        c->next_progress_ms = c->started_ms + c->interval_ms;
    int64_t until = c->next_progress_ms < now + 1000 ? c->next_progress_ms : now + 1000;
    pthread_mutex_lock(&c->wmu);
    while (!c->worker_done) {
        int64_t left = until - abx_now_ms();
        if (left <= 0)
            break;
        if (left > 250) /* a cancel or a hang-up is noticed within a quarter second */
            left = 250;
        struct timespec ts;
        clock_gettime(CLOCK_REALTIME, &ts);
        ts.tv_nsec += (long)(left % 1000) * 1000000;
        ts.tv_sec += left / 1000 + ts.tv_nsec / 1000000000;
        ts.tv_nsec %= 1000000000;
        pthread_cond_timedwait(&c->wcv, &c->wmu, &ts);
        if (!c->worker_done && (atomic_load(&c->fl->cancel) || hung_up(c->conn_fd)))
            atomic_store(&c->fl->cancel, true); /* the handler sees it and stops */
    }
    bool done = c->worker_done;
    pthread_mutex_unlock(&c->wmu);
    if (!done && abx_now_ms() < c->next_progress_ms)
        return NULL;
    if (!done) {
        c->next_progress_ms = abx_now_ms() + c->interval_ms;
        char msg[96];
        snprintf(msg, sizeof msg, "%s: still running after %lld s", c->op->id,
                 (long long)((abx_now_ms() - c->started_ms) / 1000));
        return json_pack("{s:s, s:s, s:{s:O, s:i, s:s}}", "jsonrpc", "2.0", "method", "notifications/progress",
                         "params", "progressToken", c->token, "progress", ++c->progress, "message", msg);
    }
    worker_join(c);
    abx_mcp_out o = {0};
    if (answer(c, &o)) { /* a stream: go on reading it, bounded */
        stream_bounds(c, c->server, c->args);
        return NULL;
    }
    *final = true;
    c->cancelled = c->cancelled || o.cancelled;
    return o.reply;
}

json_t *abx_mcp_call_next(abx_mcp_call *c, bool *final)
{
    *final = false;
    if (c->threaded && !c->joined) {
        json_t *m = worker_wait(c, final);
        if (m || *final || !c->joined)
            return m;
    }
    for (;;) {
        if (json_array_size(c->queue)) {
            json_t *n = json_incref(json_array_get(c->queue, 0));
            json_array_remove(c->queue, 0);
            return n;
        }
        if (c->done) {
            *final = true;
            return abx__mcp_result(c->id, final_result(c));
        }
        if ((c->fl && atomic_load(&c->fl->cancel)) || hung_up(c->conn_fd)) {
            c->cancelled = true;
            c->done = true;
            continue;
        }
        if (c->deadline_ms && abx_now_ms() >= c->deadline_ms) { /* the call's bound: answer what came */
            c->ended_by = "duration";
            c->done = true;
            continue;
        }
        char buf[16384];
        const abx_reply *rep = &c->inner->reply;
        long n = rep->stream_read(rep->stream_state, buf, sizeof buf);
        if (n <= 0) {
            c->failed = n < 0;
            c->done = true;
            continue;
        }
        feed(c, buf, (size_t)n);
        if (c->truncated) /* kept what the model can use: stop (the stream's free ends its work) */
            c->done = true;
        if (!json_array_size(c->queue) && !c->done)
            return NULL;
    }
}

bool abx_mcp_call_cancelled(const abx_mcp_call *c) { return c->cancelled; }

void abx_mcp_call_free(abx_mcp_call *c)
{
    if (!c)
        return;
    if (c->threaded && !c->joined) { /* the transport gave up: stop the call, then wait for it */
        if (c->fl)
            atomic_store(&c->fl->cancel, true);
        worker_join(c);
    }
    if (c->threaded) {
        pthread_mutex_destroy(&c->wmu);
        pthread_cond_destroy(&c->wcv);
    }
    abx_request_free(c->inner); /* a stream still running ends here (commands.stream kills its command) */
    abx__mcp_inflight_remove(c->m, c->conv, c->fl);
    json_decref(c->id);
    json_decref(c->token);
    json_decref(c->events);
    json_decref(c->queue);
    json_decref(c->args);
    abx_free(c->client);
    abx_free(c->name);
    abx_buf_release(&c->line);
    abx_buf_release(&c->data);
    abx_buf_release(&c->bytes);
    abx_free(c);
}

/* ---- tools/call ---- */

static json_t *unknown_tool(const json_t *id, const char *name)
{
    char msg[200];
    snprintf(msg, sizeof msg, "Unknown tool: %.*s", abx__mcp_utf8_prefix(name, 120), name);
    return abx_mcp_error(id, RPC_INVALID_PARAMS, msg, ABX_E_OP_NOT_ENABLED);
}

/* The bound of a streaming call: its own duration and max_events, else the door's. */
static void stream_bounds(abx_mcp_call *c, const abx_server *s, const json_t *args)
{
    const json_t *d = json_object_get(args, "duration"), *e = json_object_get(args, "max_events");
    int64_t ms = json_is_number(d) ? (int64_t)(json_number_value(d) * 1000) : s->cfg.tool_stream_duration_ms;
    c->deadline_ms = abx_now_ms() + (ms > 0 ? ms : 1);
    c->max_events = json_is_integer(e) ? (size_t)json_integer_value(e) : (size_t)s->cfg.tool_stream_events;
}

/* c->inner has answered: out->reply is set, or true when it is a stream to read (c goes on). */
static bool answer(abx_mcp_call *c, abx_mcp_out *out)
{
    abx_request *r = c->inner;
    const json_t *id = c->id;
    if (!r) {
        out->reply = abx_mcp_error(id, RPC_INTERNAL, "out of memory", ABX_E_SERVER_UNAVAILABLE);
        return false;
    }
    int status = abx_reply_http_status(&r->reply);
    if (r->reply.err == ABX_E_OP_NOT_ENABLED) { /* unmounted reads like unknown, as everywhere */
        out->reply = unknown_tool(id, c->name);
    } else if (r->reply.err) {
        out->reply = abx__mcp_result(id, error_result(r, status));
    } else if (status == 202 && (r->decision.approval || c->op->def->requires_approval)) { /* held at step 8 */
        out->reply = abx__mcp_result(id, held_result(r));
    } else if (r->reply.stream_read) {
        return true;
    } else if (r->reply.raw) {
        size_t n = r->reply.raw_len < MCP_RESULT_MAX ? r->reply.raw_len : MCP_RESULT_MAX;
        json_t *res = tool_result(r, bytes_content(r, r->reply.content_type, r->reply.raw, n, n < r->reply.raw_len),
                                  false, NULL);
        /* a JSON result served as prepared bytes (discovery's cached documents) is typed too */
        json_t *typed = res && c->op->def->result && abx__mcp_structured(c->conv)
                            ? json_loadb(r->reply.raw, r->reply.raw_len, 0, NULL)
                            : NULL;
        if (json_is_object(typed))
            json_object_set(res, "structuredContent", typed);
        json_decref(typed);
        out->reply = abx__mcp_result(id, res);
    } else if (r->reply.fd >= 0) {
        size_t n = r->reply.length < MCP_RESULT_MAX ? (size_t)r->reply.length : MCP_RESULT_MAX;
        char *buf = abx_malloc(n + 1);
        ssize_t got = buf ? pread(r->reply.fd, buf, n, (off_t)r->reply.offset) : -1;
        if (got < 0)
            out->reply = abx_mcp_error(id, RPC_INTERNAL, "cannot read the result", ABX_E_FILES_IO);
        else
            out->reply = abx__mcp_result(id, tool_result(r, bytes_content(r, r->reply.content_type, buf,
                                                                          (size_t)got, (uint64_t)got < r->reply.length),
                                                         false, NULL));
        abx_free(buf);
    } else {
        json_t *res = tool_result(r, json_text_content(r->reply.body ? r->reply.body : json_null()), false, NULL);
        /* the typed result beside the text, for revisions that list outputSchema */
        if (res && c->op->def->result && json_is_object(r->reply.body) && abx__mcp_structured(c->conv))
            json_object_set(res, "structuredContent", r->reply.body);
        out->reply = abx__mcp_result(id, res);
    }
    if (c->fl && atomic_load(&c->fl->cancel))
        out->cancelled = true;
    return false;
}

static abx_mcp_call *call_new(const abx_mcp_in *in, const abx_op *op, const char *name, const json_t *id,
                              const json_t *token, json_t *args)
{
    abx_server *s = in->server;
    abx_mcp_call *c = abx_calloc(1, sizeof *c);
    if (!c || !(c->name = abx_strdup(name))) {
        abx_free(c);
        json_decref(args);
        return NULL;
    }
    c->m = s->mcp;
    c->server = s;
    c->op = op;
    c->conv = in->conv;
    c->id = json_deep_copy(id);
    c->token = token ? json_deep_copy(token) : NULL;
    c->args = args;
    c->framing = op->def->stream;
    c->conn_fd = in->conn_fd;
    c->worker_fd = -1; /* a worker's call is cancelled through the flag (the transport's free) */
    c->events = json_array();
    c->queue = json_array();
    c->interval_ms = s->cfg.progress_interval_ms;
    c->started_ms = abx_now_ms();
    abx_buf_init(&c->line, MCP_RESULT_MAX);
    abx_buf_init(&c->data, MCP_RESULT_MAX);
    abx_buf_init(&c->bytes, MCP_RESULT_MAX);
    c->fl = abx__mcp_inflight_add(s->mcp, in->conv, id); /* before the handler: a cancel can reach it */
    return c;
}

/* A plain (not streamed) call with a progress token on a transport that can stream: run
 * it on a worker so the transport sends progress while it runs. False: run it here. */
static bool start_worker(abx_mcp_call *c, const abx_mcp_in *in)
{
    if (!c->token || !in->can_stream || c->op->def->stream != ABX_STREAM_NONE || !c->fl)
        return false;
    c->client = in->client ? abx_strdup(in->client) : NULL;
    pthread_mutex_init(&c->wmu, NULL);
    pthread_cond_init(&c->wcv, NULL);
    c->threaded = true;
    if (pthread_create(&c->worker, NULL, worker_main, c) != 0) {
        pthread_mutex_destroy(&c->wmu);
        pthread_cond_destroy(&c->wcv);
        c->threaded = false;
        return false;
    }
    c->conn_fd = -1; /* the transport watches its own connection */
    return true;
}

void abx__mcp_tools_call(const abx_mcp_in *in, const json_t *id, const json_t *params, abx_mcp_out *out)
{
    abx_server *s = in->server;
    const char *name = json_string_value(json_object_get(params, "name"));
    const json_t *args = json_object_get(params, "arguments");
    if (!name) {
        out->reply = abx_mcp_error(id, RPC_INVALID_PARAMS, "Invalid params: tools/call needs params.name",
                                   ABX_E_ARGS_MISSING);
        return;
    }
    if (args && !json_is_object(args) && !json_is_null(args)) {
        out->reply = abx_mcp_error(id, RPC_INVALID_PARAMS, "Invalid params: arguments must be an object",
                                   ABX_E_ARGS_INVALID);
        return;
    }
    const abx_op *op = abx_registry_resolve_tool(s->reg, name);
    if (!op)
        op = abx__dyn_tool_op(s, in->conv->principal, name); /* the overlay, after the registry */
    if (!op || !abx_tool_offered(op)) {
        out->reply = unknown_tool(id, name);
        return;
    }
    const json_t *token = json_object_get(json_object_get(params, "_meta"), "progressToken");
    if (token && !json_is_string(token) && !json_is_integer(token))
        token = NULL;
    const json_t *given = args && json_is_object(args) ? args : NULL;
    json_t *own = abx_door_tool_args(s, op->id, given);
    if (!own)
        own = given ? json_incref((json_t *)given) : json_object();
    abx_mcp_call *c = own ? call_new(in, op, name, id, token, own) : NULL;
    if (!c) {
        out->reply = abx_mcp_error(id, RPC_INTERNAL, "out of memory", ABX_E_SERVER_UNAVAILABLE);
        return;
    }
    if (start_worker(c, in)) {
        out->call = c;
        return;
    }
    abx_call_in ci = {.door = ABX_DOOR_MCP, .principal = in->conv->principal, .op = op->id, .args = c->args,
                      .cancel = c->fl ? &c->fl->cancel : NULL, .conn_fd = in->conn_fd, .client = in->client,
                      .session = in->conv->tag};
    c->inner = c->fl ? abx_call_begin(s, &ci) : NULL;
    if (answer(c, out)) { /* a stream */
        stream_bounds(c, s, c->args);
        if (c->token && in->can_stream) { /* progress as the output arrives: the transport pulls */
            c->conn_fd = -1;               /* the transport watches its own connection */
            out->call = c;
            return;
        }
        bool final = false;
        json_t *msg = NULL;
        while (!final) { /* collect (bounded) into one result */
            msg = abx_mcp_call_next(c, &final);
            if (!final)
                json_decref(msg);
        }
        out->reply = msg;
        if (c->fl && atomic_load(&c->fl->cancel))
            out->cancelled = true;
    }
    abx_mcp_call_free(c);
}
