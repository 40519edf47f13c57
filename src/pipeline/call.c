/* call.c — the pipeline's in-process entries: abx_server_call (the public API),
 * abx_call_begin (a call whose reply the caller reads itself, streams included: MCP) and
 * abx_call_internal (a call rendered to a status and a JSON body: batch, tools/call,
 * approvals). Each builds an abx_request with the caller's principal already trusted
 * and enters abx_dispatch like every other door; nothing here knows the transport.
 * Moved out of http/server.c so the doors above the pipeline call down into it. */
#include "pipeline/pipeline.h"
#include <string.h>
#include <unistd.h>

int abx_server_call(abx_server *s, const char *op_id, const char *principal, const json_t *args, json_t **body)
{
    return abx_call_internal(s, ABX_DOOR_INPROC, principal, op_id, args, 0, NULL, body);
}

static abx_request *internal_request(abx_server *s, abx_door door, const char *principal, const char *op_id,
                                     const json_t *args)
{
    abx_request *r = s->started ? abx_request_new(s, door) : NULL;
    if (!r)
        return NULL;
    r->method = "CALL";
    r->trusted_principal = true;
    r->principal_name = principal;
    r->op_name = op_id;
    r->args_in = args;
    return r;
}

abx_request *abx_call_begin(abx_server *s, const abx_call_in *in)
{
    abx_request *r = internal_request(s, in->door, in->principal, in->op, in->args);
    if (!r)
        return NULL;
    r->cancel = in->cancel;
    r->conn_fd = in->conn_fd;
    if (in->client)
        r->client = abx_arena_strdup(r->arena, in->client);
    if (in->traceparent)
        r->traceparent = abx_arena_strdup(r->arena, in->traceparent);
    if (in->session)
        r->session = abx_arena_strdup(r->arena, in->session);
    abx_dispatch(r);
    /* the caller may read a stream after the connection is gone: the socket number could
     * then name another connection, and the borrowed inputs are no longer needed */
    r->conn_fd = -1;
    r->principal_name = NULL;
    r->args_in = NULL;
    return r;
}

/* Events complete in what was read so far: SSE blocks with a data line, or NDJSON lines. */
typedef struct ev_count {
    bool sse, line_start, has_data;
    char prev;
    size_t n;
} ev_count;

static void count_events(ev_count *ec, const char *p, size_t n)
{
    for (size_t i = 0; i < n; i++) {
        char ch = p[i];
        if (!ec->sse) {
            if (ch == '\n' && ec->prev != '\n')
                ec->n++;
        } else if (ch == '\n') {
            if (ec->prev == '\n') { /* a blank line ends an event */
                ec->n += ec->has_data;
                ec->has_data = false;
            }
        } else if (ec->prev == '\n' || ec->line_start) {
            ec->has_data = ec->has_data || ch == 'd'; /* "data:" (comments start with ':') */
        }
        ec->line_start = false;
        ec->prev = ch;
    }
}

/* in-process: drain the stream, bounded by the call's duration and max_events (else the
 * server's tool_stream_duration and tool_stream_events) and 16 MiB, and return it as
 * text with why it ended */
static json_t *drain_stream(abx_server *s, abx_request *r, const json_t *args)
{
    const json_t *d = json_object_get(args, "duration"), *e = json_object_get(args, "max_events");
    int64_t ms = json_is_number(d) ? (int64_t)(json_number_value(d) * 1000) : s->cfg.tool_stream_duration_ms;
    size_t max_ev = json_is_integer(e) ? (size_t)json_integer_value(e) : (size_t)s->cfg.tool_stream_events;
    int64_t until = abx_now_ms() + (ms > 0 ? ms : 1);
    const char *ct = r->reply.content_type ? r->reply.content_type : "text/event-stream";
    ev_count ec = {.sse = strstr(ct, "event-stream") != NULL, .line_start = true, .prev = '\n'};
    const char *ended = "end";
    abx_buf b;
    abx_buf_init(&b, 16 * 1024 * 1024);
    char chunk[16384];
    for (;;) {
        if (max_ev && ec.n >= max_ev) {
            ended = "max_events";
            break;
        }
        if (abx_now_ms() >= until) { /* a stream reads at least every 2 s (keepalives) */
            ended = "duration";
            break;
        }
        long n = r->reply.stream_read(r->reply.stream_state, chunk, sizeof chunk);
        if (n <= 0)
            break;
        count_events(&ec, chunk, (size_t)n);
        if (!abx_buf_append(&b, chunk, (size_t)n)) {
            ended = "truncated";
            break;
        }
    }
    json_t *body = json_pack("{s:s, s:s%, s:b, s:s, s:I}", "content_type", ct, "text", b.data ? b.data : "", b.len,
                             "truncated", b.failed, "ended", ended, "events", (json_int_t)ec.n);
    abx_buf_release(&b);
    return body;
}

typedef struct call_origin {
    const char *client, *traceparent;
} call_origin;

static int call_internal(abx_server *s, abx_door door, const char *principal, const char *op_id, const json_t *args,
                         uint64_t batch_group, abx_approval *approved, call_origin o, json_t **body);

int abx_call_internal(abx_server *s, abx_door door, const char *principal, const char *op_id, const json_t *args,
                      uint64_t batch_group, abx_approval *approved, json_t **body)
{
    return call_internal(s, door, principal, op_id, args, batch_group, approved, (call_origin){0}, body);
}

int abx_call_internal_traced(abx_server *s, abx_door door, const char *principal, const char *op_id,
                             const json_t *args, const char *client, const char *traceparent, json_t **body)
{
    return call_internal(s, door, principal, op_id, args, 0, NULL, (call_origin){client, traceparent}, body);
}

static int call_internal(abx_server *s, abx_door door, const char *principal, const char *op_id, const json_t *args,
                         uint64_t batch_group, abx_approval *approved, call_origin o, json_t **body)
{
    *body = NULL;
    abx_request *r = internal_request(s, door, principal, op_id, args);
    if (!r) {
        *body = abx_error_json(ABX_E_SERVER_UNAVAILABLE, s->started ? "out of memory" : "server not started", NULL);
        return 503;
    }
    r->batch_group = batch_group;
    r->approved = approved;
    if (o.traceparent)
        r->traceparent = abx_arena_strdup(r->arena, o.traceparent);
    if (o.client)
        r->client = abx_arena_strdup(r->arena, o.client);
    abx_dispatch(r);
    int status = abx_reply_http_status(&r->reply);
    if (r->reply.err) {
        *body = abx_error_json(r->reply.err, r->reply.message ? r->reply.message : "", r->reply.details);
    } else if (r->reply.stream_read) {
        *body = drain_stream(s, r, args);
    } else if (r->reply.raw && r->reply.content_type && strncmp(r->reply.content_type, "application/json", 16) == 0 &&
               (*body = json_loadb(r->reply.raw, r->reply.raw_len, 0, NULL)) != NULL) {
        /* a JSON result served pre-rendered (the discovery cache): hand it back as JSON */
    } else if (r->reply.raw) {
        char *b64 = abx_base64_encode(r->reply.raw, r->reply.raw_len, NULL);
        *body = json_pack("{s:s, s:I, s:s?, s:b}", "content_type",
                          r->reply.content_type ? r->reply.content_type : "application/octet-stream", "length",
                          (json_int_t)r->reply.raw_len, "content_base64", b64, "truncated", 0);
        abx_free(b64);
    } else if (r->reply.fd >= 0) {
        /* bytes results in-process: content (up to 1 MiB) as base64 with its type */
        size_t n = r->reply.length > (1u << 20) ? (1u << 20) : (size_t)r->reply.length;
        char *buf = abx_malloc(n + 1);
        ssize_t got = buf ? pread(r->reply.fd, buf, n, (off_t)r->reply.offset) : -1;
        char *b64 = got >= 0 ? abx_base64_encode(buf, (size_t)got, NULL) : NULL;
        *body = json_pack("{s:s, s:I, s:s?, s:b}", "content_type",
                          r->reply.content_type ? r->reply.content_type : "application/octet-stream", "length",
                          (json_int_t)r->reply.length, "content_base64", b64, "truncated", r->reply.length > n);
        abx_free(b64);
        abx_free(buf);
    } else {
        *body = r->reply.body ? json_incref(r->reply.body) : json_object();
    }
    abx_request_free(r);
    return status;
}
