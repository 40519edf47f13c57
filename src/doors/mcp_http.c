/* mcp_http.c — MCP's Streamable HTTP transport at /mcp: sessions by Mcp-Session-Id,
 * POST (one message; a streaming tools/call answers as SSE), DELETE (end the session),
 * and the refusals the transport owns (version, session, Accept, method). */
#include "doors/mcp_int.h"
#include <errno.h>
#include <poll.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <unistd.h>

/* ---- Streamable HTTP ---- */

/* A refusal of the HTTP request itself: the abx code for logs, metrics and the ledger,
 * a JSON-RPC error as the body. */
static void http_refuse(abx_request *r, abx_err e, const json_t *id, int rpc_code, const char *msg)
{
    abx_fail(r, e, "%s", msg);
    r->reply.body = abx_mcp_error(id, rpc_code, msg, e);
    r->reply.protocol_body = true;
}

static void http_answer(abx_request *r, int status, json_t *body)
{
    r->reply.status = status;
    r->reply.body = body;
    r->reply.protocol_body = true;
}

typedef struct http_stream {
    abx_mcp *m;
    abx_mcp_conv *conv;         /* one reference */
    abx_mcp_call *call;         /* owned */
    abx_buf out;                /* framed bytes not handed out yet */
    bool ended;
} http_stream;

static long http_stream_read(void *state, char *buf, size_t max)
{
    http_stream *st = state;
    for (;;) {
        if (st->out.len) {
            size_t n = st->out.len < max ? st->out.len : max;
            memcpy(buf, st->out.data, n);
            memmove(st->out.data, st->out.data + n, st->out.len - n);
            st->out.len -= n;
            return (long)n;
        }
        if (st->ended)
            return 0;
        bool final;
        json_t *msg = abx_mcp_call_next(st->call, &final);
        char *js = msg ? json_dumps(msg, JSON_COMPACT) : NULL;
        json_decref(msg);
        if (js)
            abx_buf_printf(&st->out, "event: message\ndata: %s\n\n", js);
        else
            abx_buf_puts(&st->out, ": keepalive\n\n");
        free(js);
        if (st->out.failed)
            return -1;
        st->ended = final;
    }
}

static void http_stream_free(void *state)
{
    http_stream *st = state;
    abx_mcp_call_free(st->call); /* a client that left cancels what still runs */
    abx__mcp_conv_unref(st->m, st->conv);
    abx_buf_release(&st->out);
    abx_free(st);
}

/* An answer as a finished SSE stream: the notification, then the answer (both owned). */
typedef struct canned {
    abx_buf text;
    size_t off;
} canned;

static long canned_read(void *state, char *buf, size_t max)
{
    canned *c = state;
    size_t n = c->text.len - c->off < max ? c->text.len - c->off : max;
    memcpy(buf, c->text.data + c->off, n);
    c->off += n;
    return (long)n;
}

static void canned_free(void *state)
{
    canned *c = state;
    abx_buf_release(&c->text);
    abx_free(c);
}

static bool sse_answer(abx_request *r, json_t *note, json_t *reply)
{
    canned *c = abx_calloc(1, sizeof *c);
    char *a = json_dumps(note, JSON_COMPACT), *b = json_dumps(reply, JSON_COMPACT);
    bool ok = c && a && b;
    if (ok) {
        abx_buf_init(&c->text, 0);
        abx_buf_printf(&c->text, "event: message\ndata: %s\n\nevent: message\ndata: %s\n\n", a, b);
        ok = !c->text.failed;
    }
    free(a);
    free(b);
    if (!ok) {
        if (c)
            abx_buf_release(&c->text);
        abx_free(c);
        return false;
    }
    json_decref(note);
    json_decref(reply);
    abx_reply_stream(&r->reply, "text/event-stream", canned_read, c, canned_free);
    return true;
}

static bool accepts_sse(abx_request *r)
{
    const char *a = abx_ctx_header(&r->ctx, "Accept");
    return a && strcasestr(a, "text/event-stream") != NULL;
}

void abx_mcp_http(abx_request *r)
{
    abx_server *s = r->server;
    abx_mcp *m = s->mcp;
    if (r->slot == (int)r->policy->n_principals) {
        abx_reply_header(&r->reply, "WWW-Authenticate", "Bearer");
        abx_fail(r, ABX_E_AUTH_REQUIRED, "credentials are required: Authorization: Bearer <token>");
        return;
    }
    const char *principal = abx_policy_principal_id(r->policy, r->slot);
    bool post = strcmp(r->method, "POST") == 0, del = strcmp(r->method, "DELETE") == 0;
    if (!post && !del) { /* GET would open a server-to-client stream: this server sends none */
        snprintf(r->reply.allow, sizeof r->reply.allow, "POST, DELETE");
        http_refuse(r, ABX_E_REQUEST_METHOD_NOT_ALLOWED, NULL, RPC_SERVER_ERROR,
                    "Method not allowed: POST JSON-RPC messages to /mcp (DELETE ends a session)");
        return;
    }
    const char *sid = abx_ctx_header(&r->ctx, "Mcp-Session-Id");
    const char *ver = abx_ctx_header(&r->ctx, "MCP-Protocol-Version");
    if (ver && !abx__mcp_version_supported(ver)) {
        http_refuse(r, ABX_E_MCP_BAD_PROTOCOL_VERSION, NULL, RPC_SERVER_ERROR,
                    "Bad Request: unsupported MCP-Protocol-Version (supported: 2025-11-25, 2025-06-18, 2025-03-26)");
        return;
    }
    if (del) {
        abx_mcp_conv *c = sid ? abx__mcp_session_find(m, sid, principal) : NULL;
        if (!sid)
            http_refuse(r, ABX_E_MCP_SESSION_REQUIRED, NULL, RPC_SERVER_ERROR,
                        "Bad Request: the Mcp-Session-Id header is required");
        else if (!c)
            http_refuse(r, ABX_E_MCP_SESSION_NOT_FOUND, NULL, RPC_SERVER_ERROR - 1, "Session not found");
        else
            http_answer(r, 204, NULL);
        if (c) {
            abx__mcp_session_end(m, c);
            abx__mcp_conv_unref(m, c);
        }
        return;
    }
    json_t *err = NULL;
    json_t *msg = abx_mcp_parse(r->body.data, r->body.len, &err);
    if (!msg) {
        const char *text = json_string_value(json_object_get(json_object_get(err, "error"), "message"));
        abx_fail(r, ABX_E_REQUEST_BAD_JSON, "%s", text ? text : "bad JSON-RPC message");
        http_answer(r, 400, err);
        return;
    }
    const json_t *id = json_object_get(msg, "id");
    const char *method = json_string_value(json_object_get(msg, "method"));
    bool init = method && id && strcmp(method, "initialize") == 0;
    abx_mcp_conv *conv = NULL;
    if (init) {
        conv = abx_mcp_conv_new(m, principal);
    } else if (!sid) {
        http_refuse(r, ABX_E_MCP_SESSION_REQUIRED, NULL, RPC_SERVER_ERROR,
                    "Bad Request: the Mcp-Session-Id header is required (send initialize first)");
        json_decref(msg);
        return;
    } else if (!(conv = abx__mcp_session_find(m, sid, principal))) {
        http_refuse(r, ABX_E_MCP_SESSION_NOT_FOUND, NULL, RPC_SERVER_ERROR - 1, "Session not found");
        json_decref(msg);
        return;
    }
    if (!conv) {
        http_refuse(r, ABX_E_SERVER_UNAVAILABLE, NULL, RPC_INTERNAL, "out of memory");
        json_decref(msg);
        return;
    }
    abx_mcp_in in = {.server = s, .conv = conv, .can_stream = accepts_sse(r), .conn_fd = r->conn_fd,
                     .client = r->client};
    abx_mcp_out out;
    abx_mcp_handle(&in, msg, &out);
    json_decref(msg);
    if (init && json_object_get(out.reply, "result")) {
        if (!abx__mcp_session_insert(m, conv)) {
            json_decref(out.reply);
            abx__mcp_conv_unref(m, conv);
            http_refuse(r, ABX_E_SERVER_UNAVAILABLE, NULL, RPC_SERVER_ERROR,
                        "too many MCP sessions in use; end one (DELETE /mcp) and try again");
            return;
        }
        abx_reply_header(&r->reply, "Mcp-Session-Id", conv->id);
    }
    if (out.call) {
        json_decref(out.note);
        http_stream *st = abx_calloc(1, sizeof *st);
        if (!st) {
            abx_mcp_call_free(out.call);
            abx__mcp_conv_unref(m, conv);
            http_refuse(r, ABX_E_SERVER_UNAVAILABLE, NULL, RPC_INTERNAL, "out of memory");
            return;
        }
        st->m = m;
        st->conv = conv; /* the request's reference moves to the stream */
        st->call = out.call;
        abx_buf_init(&st->out, 8 * MCP_RESULT_MAX);
        abx_reply_stream(&r->reply, "text/event-stream", http_stream_read, st, http_stream_free);
        return;
    }
    abx__mcp_conv_unref(m, conv);
    if (out.reply && out.note && accepts_sse(r) && sse_answer(r, out.note, out.reply))
        return;
    json_decref(out.note);
    if (out.reply)
        http_answer(r, 200, out.reply);
    else
        http_answer(r, 202, NULL); /* a notification or a response: accepted, no body */
}
