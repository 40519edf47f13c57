/* e2b.c — the E2B door: what arrives on the envd listener (e2b.envd_listen). Connect-RPC
 * (unary: a plain POST of application/json or application/proto; server streams:
 * application/connect+json or +proto, 5-byte envelopes and an end-of-stream message)
 * for envd's filesystem.Filesystem and process.Process services, and envd's REST routes
 * (e2b_rest.c). Each method is an alternate binding of abx ops (e2b_fs.c, e2b_proc.c):
 * it calls them in process, as the principal whose abx token came as X-Access-Token,
 * so policy, limits, approvals and the ledger (door e2b) hold as for any call. */
#include "doors/e2b.h"
#include <stdlib.h>
#include <string.h>

int abx_e2b_op(e2b_call *c, const char *op, json_t *args, json_t **body)
{
    *body = NULL;
    int st = abx_call_internal(c->server, ABX_DOOR_E2B, c->principal, op, args, 0, NULL, body);
    json_decref(args);
    return st;
}

const char *abx_e2b_connect_code(int status)
{
    switch (status) {
    case 400: case 422: return "invalid_argument";
    case 401: return "unauthenticated";
    case 403: return "permission_denied";
    case 404: return "not_found";
    case 405: case 501: return "unimplemented";
    case 408: case 504: return "deadline_exceeded";
    case 409: return "already_exists";
    case 412: return "failed_precondition";
    case 413: case 429: case 507: return "resource_exhausted";
    case 499: return "canceled";
    case 503: return "unavailable";
    default: return "internal";
    }
}

static abx_err err_of(int status, const json_t *body, const char **msg)
{
    const json_t *e = json_object_get(body, "error");
    *msg = json_string_value(json_object_get(e, "message"));
    const char *code = json_string_value(json_object_get(e, "code"));
    int x = code ? abx_err_by_code(code) : -1;
    if (x > 0)
        return (abx_err)x;
    return status == 404 ? ABX_E_OP_NOT_ENABLED : status == 403 ? ABX_E_POLICY_DENIED : ABX_E_SERVER_UNAVAILABLE;
}

/* A Connect error: the abx error (its HTTP status, in the ledger) with Connect's
 * {code, message} as the body, which Connect clients read. */
void abx_e2b_fail(e2b_call *c, int status, const json_t *body)
{
    const char *msg;
    abx_err e = err_of(status, body, &msg);
    abx_fail(c->r, e, "%s", msg ? msg : abx_err_meaning(e));
    abx_reply *rep = &c->r->reply;
    json_decref(rep->body);
    /* abx's code leads the message: Connect's details carry protobuf Any values only */
    char *m = abx_asprintf("%s: %s", abx_err_code(e), rep->message ? rep->message : abx_err_meaning(e));
    rep->body = json_pack("{s:s, s:s}", "code", abx_e2b_connect_code(abx_err_status(e)), "message", m ? m : "");
    abx_free(m);
    rep->protocol_body = true;
    rep->content_type = "application/json";
    if (!c->stream)
        return;
    /* a stream's error travels in its end-of-stream message, under 200 (Connect clients read
     * the message only there); the inner call that failed is in the ledger with its code */
    size_t n = 0;
    char *f = abx_e2b_frame(c, NULL, json_pack("{s:O}", "error", rep->body), 2, &n);
    json_decref(rep->body);
    rep->body = NULL;
    rep->err = ABX_OK;
    rep->status = 200;
    rep->protocol_body = false;
    if (f)
        abx_reply_bytes(rep, f, n, c->proto ? "application/connect+proto" : "application/connect+json");
    free(f);
}

void abx_e2b_fail_msg(e2b_call *c, abx_err e, const char *msg)
{
    json_t *b = abx_error_json(e, msg, NULL);
    abx_e2b_fail(c, abx_err_status(e), b);
    json_decref(b);
}

/* The message in the call's encoding; NULL when JSON does not fit the message. */
static char *encode(const e2b_call *c, const ProtobufCMessageDescriptor *out, json_t *msg, size_t *len)
{
    if (!c->proto) {
        char *s = json_dumps(msg, JSON_COMPACT);
        *len = s ? strlen(s) : 0;
        return s;
    }
    char err[160] = "";
    ProtobufCMessage *m = abx_e2b_pb_from_json(out, msg, err, sizeof err);
    if (!m)
        return NULL;
    *len = protobuf_c_message_get_packed_size(m);
    char *buf = malloc(*len ? *len : 1);
    if (buf)
        protobuf_c_message_pack(m, (uint8_t *)buf);
    protobuf_c_message_free_unpacked(m, NULL);
    return buf;
}

char *abx_e2b_frame(const e2b_call *c, const ProtobufCMessageDescriptor *out, json_t *msg, uint8_t flags, size_t *len)
{
    size_t n = 0;
    char *body = NULL;
    if (flags & 2) { /* end of stream: always JSON */
        body = json_dumps(msg, JSON_COMPACT);
        n = body ? strlen(body) : 0;
    } else {
        body = encode(c, out, msg, &n);
    }
    json_decref(msg);
    if (!body)
        return NULL;
    char *f = malloc(n + 5);
    if (f) {
        f[0] = (char)flags;
        f[1] = (char)(n >> 24);
        f[2] = (char)(n >> 16);
        f[3] = (char)(n >> 8);
        f[4] = (char)n;
        memcpy(f + 5, body, n);
        *len = n + 5;
    }
    free(body);
    return f;
}

void abx_e2b_unary(e2b_call *c, const ProtobufCMessageDescriptor *out, json_t *resp)
{
    size_t n = 0;
    char *b = encode(c, out, resp, &n);
    json_decref(resp);
    if (!b) {
        abx_e2b_fail_msg(c, ABX_E_SERVER_UNAVAILABLE, "cannot encode the reply");
        return;
    }
    abx_reply_bytes(&c->r->reply, b, n, c->proto ? "application/proto" : "application/json");
    free(b);
}

json_t *abx_e2b_decode(e2b_call *c, const ProtobufCMessageDescriptor *d, const char *data, size_t len)
{
    if (!c->proto) {
        json_error_t je;
        json_t *j = len ? json_loadb(data, len, 0, &je) : json_object();
        if (!json_is_object(j)) {
            json_decref(j);
            abx_e2b_fail_msg(c, ABX_E_REQUEST_BAD_JSON, "the request is not a JSON object");
            return NULL;
        }
        /* through the message and back: names and types checked against the .proto */
        char err[160] = "";
        ProtobufCMessage *pm = abx_e2b_pb_from_json(d, j, err, sizeof err);
        json_decref(j);
        if (!pm) {
            abx_e2b_fail_msg(c, ABX_E_ARGS_INVALID, err[0] ? err : "bad request");
            return NULL;
        }
        j = abx_e2b_pb_to_json(pm);
        protobuf_c_message_free_unpacked(pm, NULL);
        return j;
    }
    ProtobufCMessage *pm = protobuf_c_message_unpack(d, NULL, len, (const uint8_t *)data);
    if (!pm) {
        abx_e2b_fail_msg(c, ABX_E_ARGS_INVALID, "the request is not a valid protobuf message");
        return NULL;
    }
    json_t *j = abx_e2b_pb_to_json(pm);
    protobuf_c_message_free_unpacked(pm, NULL);
    if (!j)
        abx_e2b_fail_msg(c, ABX_E_ARGS_INVALID, "a string field is not UTF-8");
    return j;
}

long abx_e2b_envelope(const char *data, size_t len, size_t *at, const char **msg, size_t *mlen)
{
    if (*at == len)
        return 0;
    if (len - *at < 5)
        return -1;
    const uint8_t *h = (const uint8_t *)data + *at;
    size_t n = (size_t)h[1] << 24 | (size_t)h[2] << 16 | (size_t)h[3] << 8 | h[4];
    if ((h[0] & 1) || n > len - *at - 5)
        return -1; /* compressed (abx offers no compression) or cut short */
    *msg = data + *at + 5;
    *mlen = n;
    *at += 5 + n;
    return 1 + h[0];
}

/* The request message as JSON, from either encoding (a stream's in its envelope). */
static json_t *decode(e2b_call *c, const e2b_method *m)
{
    const char *data = c->r->body.data ? c->r->body.data : "";
    size_t len = c->r->body.len, at = 0;
    if (c->stream) {
        const char *msg;
        size_t mlen;
        if (abx_e2b_envelope(data, len, &at, &msg, &mlen) != 1 || at != len) {
            abx_e2b_fail_msg(c, ABX_E_REQUEST_BAD_JSON, "a stream request is one uncompressed envelope");
            return NULL;
        }
        data = msg;
        len = mlen;
    }
    return abx_e2b_decode(c, m->in, data, len);
}

static const e2b_method *find_method(const abx_request *r)
{
    const e2b_method *const tables[] = {abx_e2b_fs_methods, abx_e2b_proc_methods};
    for (size_t t = 0; t < 2; t++)
        for (const e2b_method *m = tables[t]; m->path; m++)
            if (strlen(m->path) == r->path_len && memcmp(m->path, r->path, r->path_len) == 0)
                return m;
    return NULL;
}

static bool type_is(const char *ct, const char *want)
{
    size_t n = strlen(want);
    return ct && strncasecmp(ct, want, n) == 0 && (ct[n] == 0 || ct[n] == ';' || ct[n] == ' ');
}

void abx_e2b_envd(abx_request *r)
{
    e2b_call c = {.r = r, .server = r->server};
    bool anonymous = r->slot == (int)r->policy->n_principals;
    c.principal = anonymous ? NULL : abx_policy_principal_id(r->policy, r->slot);
    /* envd's own health check answers without a token; everything else wants one */
    bool health = r->path_len == 7 && memcmp(r->path, "/health", 7) == 0;
    if (anonymous && !health) {
        /* no token: only a pre-signed /files URL (downloadUrl/uploadUrl) names a caller */
        const char *why = "missing or invalid X-Access-Token";
        bool files = r->path_len == 6 && memcmp(r->path, "/files", 6) == 0;
        c.principal = files ? abx_e2b_signed_principal(&c, &why) : NULL;
        if (!c.principal) {
            abx_e2b_fail_msg(&c, ABX_E_AUTH_REQUIRED, why);
            return;
        }
    }
    if (abx_e2b_rest(&c) || abx_e2b_interp(&c))
        return;
    const e2b_method *m = find_method(r);
    if (!m) {
        abx_e2b_fail_msg(&c, ABX_E_OP_NOT_ENABLED, "no such envd method");
        return;
    }
    if (strcmp(r->method, "POST") != 0) {
        abx_e2b_fail_msg(&c, ABX_E_REQUEST_METHOD_NOT_ALLOWED, "Connect calls are POST");
        return;
    }
    const char *ct = r->content_type;
    if (m->client_stream && (type_is(ct, "application/connect+json") || type_is(ct, "application/connect+proto"))) {
        c.stream = true; /* the whole request stream was read: the method walks its envelopes */
        c.proto = type_is(ct, "application/connect+proto");
        m->run(&c, NULL);
        return;
    }
    if (m->server_stream && (type_is(ct, "application/connect+json") || type_is(ct, "application/connect+proto"))) {
        c.stream = true;
        c.proto = type_is(ct, "application/connect+proto");
    } else if (!m->server_stream && (type_is(ct, "application/json") || type_is(ct, "application/proto"))) {
        c.proto = type_is(ct, "application/proto");
    } else {
        abx_fail(r, ABX_E_REQUEST_BAD_CONTENT_TYPE, "unsupported content type for %s", m->path);
        return;
    }
    json_t *req = decode(&c, m);
    if (!req)
        return;
    m->run(&c, req);
    json_decref(req);
}
