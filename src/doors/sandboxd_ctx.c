/* sandboxd_ctx.c — KEP-539.2's Full level on abx ops, in abx's own
 * proto/abx/sandboxd/v1 (the published specs have no messages for it yet):
 * ContextService (CreateContext → kernels.create, ExecuteCode → kernels.execute,
 * DeleteContext → kernels.delete) and WatchService (Watch → files.watch's events, relayed
 * for the stream's life). */
#include "doors/sandboxd.h"
#include "abx/sandboxd/v1/sandboxd.pb-c.h"
#include <stdlib.h>
#include <string.h>

#define UNPACK(T, fn)                                                                                               \
    T *q = fn(NULL, len, req);                                                                                      \
    if (!q) {                                                                                                       \
        abx_sbx_fail_msg(st, SBX_INVALID_ARGUMENT, "the request is not a valid " #T " message");                    \
        return;                                                                                                     \
    }

static bool send_msg(const sbx_sink *out, const ProtobufCMessage *m)
{
    size_t n = protobuf_c_message_get_packed_size(m);
    uint8_t *b = malloc(n ? n : 1);
    if (!b)
        return false;
    protobuf_c_message_pack(m, b);
    bool ok = out->emit(out->ud, b, n);
    free(b);
    return ok;
}

static void create_context(const sbx_caller *c, const uint8_t *req, size_t len, const sbx_sink *out,
                           sbx_status *st)
{
    UNPACK(Abx__Sandboxd__V1__CreateContextRequest, abx__sandboxd__v1__create_context_request__unpack)
    json_t *args = json_pack("{s:s}", "language", q->language && q->language[0] ? q->language : "python");
    if (q->cwd && q->cwd[0])
        json_object_set_new(args, "cwd", json_string(q->cwd));
    abx__sandboxd__v1__create_context_request__free_unpacked(q, NULL);
    json_t *body;
    int s = abx_sbx_op(c, "kernels.create", args, &body);
    if (s != 200) {
        abx_sbx_fail(st, s, body);
    } else {
        Abx__Sandboxd__V1__CreateContextResponse m = ABX__SANDBOXD__V1__CREATE_CONTEXT_RESPONSE__INIT;
        m.context_id = (char *)(json_string_value(json_object_get(body, "id")) ?: "");
        m.language = (char *)(json_string_value(json_object_get(body, "language")) ?: "");
        send_msg(out, &m.base);
    }
    json_decref(body);
}

/* kernels.execute's logs.stdout / logs.stderr (arrays of text) joined */
static char *joined(const json_t *list, size_t *n)
{
    abx_buf b;
    abx_buf_init(&b, 0);
    size_t i;
    const json_t *t;
    json_array_foreach(list, i, t) abx_buf_append(&b, json_string_value(t) ?: "", json_string_length(t));
    *n = b.len;
    return b.failed ? (abx_buf_release(&b), *n = 0, NULL) : abx_buf_detach(&b);
}

/* kernels.execute's result → ExecuteCodeResponse (results: one Output per MIME type) */
static void answer_execution(const json_t *body, const sbx_sink *out)
{
    Abx__Sandboxd__V1__ExecuteCodeResponse m = ABX__SANDBOXD__V1__EXECUTE_CODE_RESPONSE__INIT;
    m.execution_count = (int32_t)json_integer_value(json_object_get(body, "execution_count"));
    size_t no = 0, ne = 0;
    char *so = joined(json_object_get(json_object_get(body, "logs"), "stdout"), &no);
    char *se = joined(json_object_get(json_object_get(body, "logs"), "stderr"), &ne);
    m.stdout = (ProtobufCBinaryData){no, (uint8_t *)so};
    m.stderr = (ProtobufCBinaryData){ne, (uint8_t *)se};
    Abx__Sandboxd__V1__Output outs[32], *po[32];
    size_t i;
    const json_t *res;
    json_array_foreach(json_object_get(body, "results"), i, res) {
        const char *mime;
        const json_t *v;
        json_object_foreach((json_t *)res, mime, v) {
            if (!json_is_string(v) || m.n_results >= 32)
                continue;
            abx__sandboxd__v1__output__init(&outs[m.n_results]);
            outs[m.n_results].mime_type = (char *)mime;
            outs[m.n_results].data = (char *)json_string_value(v);
            po[m.n_results] = &outs[m.n_results];
            m.n_results++;
            if (strcmp(mime, "text/plain") == 0 && json_is_true(json_object_get(res, "is_main_result")))
                m.text = (char *)json_string_value(v);
        }
    }
    m.results = po;
    const json_t *err = json_object_get(body, "error");
    Abx__Sandboxd__V1__ExecutionError ee = ABX__SANDBOXD__V1__EXECUTION_ERROR__INIT;
    const char *tb[64];
    if (json_is_object(err)) {
        ee.name = (char *)(json_string_value(json_object_get(err, "name")) ?: "");
        ee.value = (char *)(json_string_value(json_object_get(err, "value")) ?: "");
        const json_t *t;
        json_array_foreach(json_object_get(err, "traceback"), i, t) if (ee.n_traceback < 64 && json_is_string(t))
            tb[ee.n_traceback++] = json_string_value(t);
        ee.traceback = (char **)tb;
        m.error = &ee;
    }
    send_msg(out, &m.base);
    free(so);
    free(se);
}

static void execute_code(const sbx_caller *c, const uint8_t *req, size_t len, const sbx_sink *out, sbx_status *st)
{
    UNPACK(Abx__Sandboxd__V1__ExecuteCodeRequest, abx__sandboxd__v1__execute_code_request__unpack)
    json_t *args = json_pack("{s:s, s:s}", "id", q->context_id ?: "", "code", q->code ?: "");
    if (args && q->timeout_seconds > 0)
        json_object_set_new(args, "timeout", json_real(q->timeout_seconds));
    abx__sandboxd__v1__execute_code_request__free_unpacked(q, NULL);
    if (!args) {
        abx_sbx_fail_msg(st, SBX_INVALID_ARGUMENT, "context_id and code must be UTF-8");
        return;
    }
    json_t *body;
    int s = abx_sbx_op(c, "kernels.execute", args, &body);
    if (s != 200)
        abx_sbx_fail(st, s, body);
    else
        answer_execution(body, out);
    json_decref(body);
}

static void delete_context(const sbx_caller *c, const uint8_t *req, size_t len, const sbx_sink *out,
                           sbx_status *st)
{
    UNPACK(Abx__Sandboxd__V1__DeleteContextRequest, abx__sandboxd__v1__delete_context_request__unpack)
    json_t *args = json_pack("{s:s}", "id", q->context_id ?: "");
    abx__sandboxd__v1__delete_context_request__free_unpacked(q, NULL);
    json_t *body;
    int s = abx_sbx_op(c, "kernels.delete", args, &body);
    if (s != 200) {
        abx_sbx_fail(st, s, body);
    } else {
        Abx__Sandboxd__V1__DeleteContextResponse m = ABX__SANDBOXD__V1__DELETE_CONTEXT_RESPONSE__INIT;
        send_msg(out, &m.base);
    }
    json_decref(body);
}

/* ---- Watch: files.watch's server-sent events as WatchEvents ---- */

static Abx__Sandboxd__V1__WatchEvent__Type type_of(const char *name)
{
    if (strcmp(name, "create") == 0)
        return ABX__SANDBOXD__V1__WATCH_EVENT__TYPE__TYPE_CREATED;
    if (strcmp(name, "modify") == 0)
        return ABX__SANDBOXD__V1__WATCH_EVENT__TYPE__TYPE_MODIFIED;
    if (strcmp(name, "delete") == 0)
        return ABX__SANDBOXD__V1__WATCH_EVENT__TYPE__TYPE_DELETED;
    if (strncmp(name, "rename", 6) == 0 || strncmp(name, "move", 4) == 0)
        return ABX__SANDBOXD__V1__WATCH_EVENT__TYPE__TYPE_RENAMED;
    return ABX__SANDBOXD__V1__WATCH_EVENT__TYPE__TYPE_UNSPECIFIED;
}

/* One event block; false when the call is gone. */
static bool watch_event(const sbx_sink *out, const char *ev, size_t len)
{
    char name[24] = "";
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
    Abx__Sandboxd__V1__WatchEvent__Type t = type_of(name);
    if (t == ABX__SANDBOXD__V1__WATCH_EVENT__TYPE__TYPE_UNSPECIFIED || !data)
        return true; /* ready, keepalives, overflow notices */
    json_error_t je;
    json_t *d = json_loadb(data, strcspn(data, "\n"), 0, &je);
    Abx__Sandboxd__V1__WatchEvent m = ABX__SANDBOXD__V1__WATCH_EVENT__INIT;
    m.type = t;
    m.path = (char *)(json_string_value(json_object_get(d, "path")) ?: "");
    bool ok = send_msg(out, &m.base);
    json_decref(d);
    return ok;
}

typedef struct watch_take {
    const sbx_sink *out;
    bool live;
} watch_take;

static bool take_event(void *ud, const char *ev, size_t len)
{
    watch_take *wt = ud;
    return wt->live = watch_event(wt->out, ev, len);
}

static void watch(const sbx_caller *c, const uint8_t *req, size_t len, const sbx_sink *out, sbx_status *st)
{
    UNPACK(Abx__Sandboxd__V1__WatchRequest, abx__sandboxd__v1__watch_request__unpack)
    json_t *args = json_pack("{s:s, s:b}", "path", q->path && q->path[0] ? q->path : ".", "recursive", q->recursive);
    abx__sandboxd__v1__watch_request__free_unpacked(q, NULL);
    abx_call_in in = {.door = ABX_DOOR_SANDBOXD, .principal = c->principal, .op = "files.watch", .args = args,
                      .conn_fd = -1, .client = c->client, .traceparent = c->traceparent};
    abx_request *x = abx_call_begin(c->server, &in);
    json_decref(args);
    if (!x || x->reply.err || !x->reply.stream_read) {
        abx_err e = x && x->reply.err ? x->reply.err : ABX_E_SERVER_UNAVAILABLE;
        st->code = abx_sbx_grpc_code(e);
        snprintf(st->message, sizeof st->message, "%s: %s", abx_err_code(e),
                 x && x->reply.message ? x->reply.message : abx_err_meaning(e));
        abx_request_free(x);
        return;
    }
    abx_buf sse;
    abx_buf_init(&sse, 4 << 20);
    abx_reply *r = &x->reply;
    watch_take wt = {out, true};
    while (wt.live && !atomic_load(out->cancelled)) {
        char buf[8192];
        long n = r->stream_read(r->stream_state, buf, sizeof buf);
        if (n <= 0)
            break;
        abx_buf_append(&sse, buf, (size_t)n);
        abx_sse_take(&sse, take_event, &wt);
    }
    abx_buf_release(&sse);
    abx_request_free(x); /* the watch ends with its call (duration, or the client left) */
}

const sbx_method abx_sbx_ctx_methods[] = {
    {"/abx.sandboxd.v1.ContextService/CreateContext", &abx__sandboxd__v1__create_context_request__descriptor,
     create_context},
    {"/abx.sandboxd.v1.ContextService/ExecuteCode", &abx__sandboxd__v1__execute_code_request__descriptor,
     execute_code},
    {"/abx.sandboxd.v1.ContextService/DeleteContext", &abx__sandboxd__v1__delete_context_request__descriptor,
     delete_context},
    {"/abx.sandboxd.v1.WatchService/Watch", &abx__sandboxd__v1__watch_request__descriptor, watch},
    {NULL, NULL, NULL},
};
