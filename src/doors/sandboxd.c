/* sandboxd.c — the sandboxd door's common part: authentication (the pod's own token from
 * sandboxd.token_file, or abx's tokens), the in-process calls every binding makes (door
 * sandboxd, the router's traceparent in each ledger group) and abx errors as gRPC status
 * codes, which REST's error documents name too ({"code": "PERMISSION_DENIED"}). */
#include "doors/sandboxd.h"
#include <protobuf-c/protobuf-c.h>
#include <stdlib.h>
#include <string.h>

int abx_sbx_op(const sbx_caller *c, const char *op, json_t *args, json_t **body)
{
    *body = NULL;
    int st = abx_call_internal_traced(c->server, ABX_DOOR_SANDBOXD, c->principal, op, args, c->client, c->traceparent,
                                      body);
    json_decref(args);
    return st;
}

abx_err abx_sbx_err_of(int status, const json_t *body, const char **msg)
{
    const json_t *e = json_object_get(body, "error");
    *msg = json_string_value(json_object_get(e, "message"));
    const char *code = json_string_value(json_object_get(e, "code"));
    int x = code ? abx_err_by_code(code) : -1;
    if (x > 0)
        return (abx_err)x;
    return status == 404 ? ABX_E_OP_NOT_ENABLED : status == 403 ? ABX_E_POLICY_DENIED : ABX_E_SERVER_UNAVAILABLE;
}

int abx_sbx_grpc_code(abx_err e)
{
    if (e == ABX_E_FILES_EXISTS)
        return SBX_ALREADY_EXISTS;
    switch (abx_err_status(e)) {
    case 200: return SBX_OK;
    case 400: case 415: case 422: return SBX_INVALID_ARGUMENT;
    case 401: return SBX_UNAUTHENTICATED;
    case 403: return SBX_PERMISSION_DENIED;
    case 404: return SBX_NOT_FOUND;
    case 405: case 501: return SBX_UNIMPLEMENTED;
    case 408: case 504: return SBX_DEADLINE_EXCEEDED;
    case 409: case 412: return SBX_FAILED_PRECONDITION;
    case 413: case 429: case 507: return SBX_RESOURCE_EXHAUSTED;
    case 416: return SBX_OUT_OF_RANGE;
    case 499: return SBX_CANCELLED;
    case 502: case 503: return SBX_UNAVAILABLE;
    default: return SBX_INTERNAL;
    }
}

const char *abx_sbx_grpc_name(int code)
{
    static const char *const names[] = {"OK", "CANCELLED", "UNKNOWN", "INVALID_ARGUMENT", "DEADLINE_EXCEEDED",
                                        "NOT_FOUND", "ALREADY_EXISTS", "PERMISSION_DENIED", "RESOURCE_EXHAUSTED",
                                        "FAILED_PRECONDITION", "ABORTED", "OUT_OF_RANGE", "UNIMPLEMENTED",
                                        "INTERNAL", "UNAVAILABLE", "DATA_LOSS", "UNAUTHENTICATED"};
    return code >= 0 && code <= 16 ? names[code] : "UNKNOWN";
}

void abx_sbx_fail(sbx_status *st, int status, const json_t *body)
{
    const char *msg;
    abx_err e = abx_sbx_err_of(status, body, &msg);
    st->code = abx_sbx_grpc_code(e);
    /* abx's own code leads the message: the ledger and docs/errors.md name it */
    snprintf(st->message, sizeof st->message, "%s: %s", abx_err_code(e), msg ? msg : abx_err_meaning(e));
}

void abx_sbx_fail_msg(sbx_status *st, int code, const char *msg)
{
    st->code = code;
    snprintf(st->message, sizeof st->message, "%s", msg);
}

char *abx_sbx_authenticate(abx_server *s, const char *authorization, const char *client, int *wait)
{
    *wait = 0;
    if (!authorization || strncasecmp(authorization, "Bearer ", 7) != 0)
        return NULL;
    const char *tok = authorization + 7;
    while (*tok == ' ')
        tok++;
    size_t n = strlen(tok);
    if (!n)
        return NULL;
    /* failed attempts count against abx's limiter (limits.auth_failures), as on the main listener */
    char fp[65];
    abx_sha256_hex(tok, n, fp);
    fp[16] = '\0'; /* a fingerprint, never the token */
    int64_t now = abx_now_ms();
    if ((*wait = abx_auth_limited(s->limiter, fp, client, now)) > 0)
        return NULL;
    const abx_config *cfg = &s->cfg;
    char *who = NULL;
    if (cfg->sandboxd_token) {
        size_t want = strlen(cfg->sandboxd_token);
        if (n == want && abx_ct_equal(tok, cfg->sandboxd_token, n))
            who = abx_strdup(cfg->sandboxd_principal);
    } else {
        abx_policy *p = abx_server_snapshot(s);
        int slot = p ? abx_policy_auth(p, tok, n, abx_wall_ms()) : -1;
        who = slot >= 0 ? abx_strdup(abx_policy_principal_id(p, slot)) : NULL;
        if (p)
            abx_policy_unref(p);
    }
    if (who)
        abx_auth_succeeded(s->limiter, client, now);
    else
        abx_auth_failed(s->limiter, fp, client, now);
    return who;
}

bool abx_sbx_traceparent_ok(const char *v)
{
    if (!v || strlen(v) != 55 || v[2] != '-' || v[35] != '-' || v[52] != '-')
        return false;
    for (size_t i = 0; i < 55; i++)
        if (i != 2 && i != 35 && i != 52 && !strchr("0123456789abcdef", v[i]))
            return false;
    return true;
}

const sbx_method *abx_sbx_method(const char *path, size_t len)
{
    const sbx_method *const tables[] = {abx_sbx_proc_methods, abx_sbx_ctx_methods};
    for (size_t t = 0; t < 2; t++)
        for (const sbx_method *m = tables[t]; m->path; m++)
            if (strlen(m->path) == len && memcmp(m->path, path, len) == 0)
                return m;
    return NULL;
}

void abx_sbx_grpc_message_encode(const char *msg, char *out, size_t outlen)
{
    size_t o = 0;
    for (const unsigned char *p = (const unsigned char *)msg; *p && o + 4 < outlen; p++) {
        if (*p >= 0x20 && *p <= 0x7e && *p != '%') {
            out[o++] = (char)*p;
        } else {
            snprintf(out + o, 4, "%%%02X", *p);
            o += 3;
        }
    }
    out[o] = '\0';
}

bool abx_sbx_method_decodes(const sbx_method *m, const uint8_t *msg, size_t len)
{
    ProtobufCMessage *pm = protobuf_c_message_unpack(m->in, NULL, len, msg);
    if (pm)
        protobuf_c_message_free_unpacked(pm, NULL);
    return pm != NULL;
}
