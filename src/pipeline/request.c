/* request.c — the request value: its birth (arena, id, start time), its end, and what a
 * handler may ask of the transport it came through and of the server above. Neither is
 * named here: a listener that can answer header lookups installs one (r->header_fn,
 * r->header_ud), and a request without one (in-process calls, batch, MCP's inner calls)
 * has no headers; the server installs its reload (s->reload) when it starts. */
#include "pipeline/pipeline.h"
#include <stdio.h>
#include <string.h>
#include <unistd.h>

const char *abx_door_name(abx_door d)
{
    static const char *const names[] = {
#define ABX_DOOR(id, name, summary) [ABX_DOOR_##id] = name,
#include "core/doors.def"
#undef ABX_DOOR
    };
    return (unsigned)d < ABX_ARRAY_LEN(names) ? names[d] : "?";
}

static atomic_ulong request_counter;
static char boot_prefix[9];
_Static_assert(sizeof ((abx_request *)0)->id >= ABX_REQUEST_ID_MAX, "an id holds any counter");
static pthread_once_t boot_once = PTHREAD_ONCE_INIT;

static void boot_init(void)
{
    unsigned char r[4];
    if (abx_random(r, sizeof r) != 0)
        memset(r, 0x5a, sizeof r);
    abx_hex(r, sizeof r, boot_prefix);
}

abx_request *abx_request_new(abx_server *s, abx_door door)
{
    pthread_once(&boot_once, boot_init);
    abx_arena *a = abx_arena_new();
    if (!a)
        return NULL;
    abx_request *r = abx_arena_alloc(a, sizeof *r);
    if (!r) {
        abx_arena_free(a);
        return NULL;
    }
    r->arena = a;
    r->server = s;
    r->door = door;
    r->slot = -1;
    r->ticket_target = -1;
    r->reply.fd = -1;
    r->conn_fd = -1;
    r->start_us = abx_now_us();
    r->ctx.req = r;
    unsigned long n = atomic_fetch_add_explicit(&request_counter, 1, memory_order_relaxed) + 1;
    abx_request_id_format(r->id, boot_prefix, n);
    abx_buf_init(&r->body, 0);
    return r;
}

void abx_reply_reset(abx_reply *rep)
{
    abx_free(rep->message);
    json_decref(rep->details);
    json_decref(rep->body);
    json_decref(rep->headers);
    abx_free(rep->raw);
    if (rep->stream_free && rep->stream_state)
        rep->stream_free(rep->stream_state);
    if (rep->ws_ops && rep->ws_state)
        rep->ws_ops->free_fn(rep->ws_state);
    if (rep->fd >= 0)
        close(rep->fd);
    memset(rep, 0, sizeof *rep);
    rep->fd = -1;
}

void abx_request_free(abx_request *r)
{
    if (!r)
        return;
    if (r->sink.free_fn && r->sink.state)
        r->sink.free_fn(r->sink.state);
    if (r->policy) {
        abx_release(r->policy, &r->decision);
        abx_policy_unref(r->policy);
    }
    abx_decision_release(&r->decision);
    json_decref(r->args);
    abx_reply_reset(&r->reply);
    abx_buf_release(&r->body);
    abx_arena_free(r->arena);
}

const char *abx_ctx_header(const abx_ctx *ctx, const char *name)
{
    const abx_request *r = ctx->req;
    return r->header_fn ? r->header_fn(r->header_ud, name) : NULL;
}

const char *abx_ctx_raw_query(const abx_ctx *ctx, size_t *len)
{
    const abx_request *r = ctx->req;
    *len = r->op && r->op->def->raw_query ? r->query_len : 0;
    return *len ? r->query : NULL;
}

const void *abx_ctx_raw_body(const abx_ctx *ctx, size_t *len)
{
    const abx_request *r = ctx->req;
    *len = r->op && r->op->def->raw_query && r->door == ABX_DOOR_HTTP && r->has_body ? r->body.len : 0;
    return *len ? r->body.data : NULL;
}

const char *abx_ctx_method(const abx_ctx *ctx)
{
    const abx_request *r = ctx->req;
    return r->door == ABX_DOOR_HTTP ? r->method : NULL;
}

void abx_ctx_headers_each(const abx_ctx *ctx, abx_header_visit_fn visit, void *ud)
{
    const abx_request *r = ctx->req;
    if (r->headers_each)
        r->headers_each(r->header_ud, visit, ud);
}

int abx_ctx_reload(abx_ctx *ctx, abx_diags *diags)
{
    abx_server *s = ctx->req->server;
    if (!s->reload.fn) {
        abx_diag_add(diags, "error", "config.reload_failed", 0, "this server cannot reload its config");
        return -1;
    }
    return s->reload.fn(s->reload.ud, diags);
}
