/* e2b_rest.c — envd's REST routes (third_party/e2b-envd/envd.yaml) on abx ops: GET
 * /health (204, no token needed), GET /envs (the variables abx lets a caller see:
 * none), GET /files → files.download, POST /files (application/octet-stream, or
 * multipart/form-data with one or more "file" parts) → files.write per file. */
#include "doors/e2b.h"
#include <stdlib.h>
#include <string.h>

/* envd's REST error document {code, message} under abx's error (status, ledger) */
static void rest_fail(e2b_call *c, int status, const json_t *body)
{
    abx_e2b_fail(c, status, body);
    abx_reply *rep = &c->r->reply;
    json_t *connect_doc = rep->body; /* its message leads with abx's code */
    rep->body = json_pack("{s:i, s:O}", "code", abx_err_status(rep->err), "message",
                          json_object_get(connect_doc, "message"));
    json_decref(connect_doc);
}

static void rest_fail_msg(e2b_call *c, abx_err e, const char *msg)
{
    json_t *b = abx_error_json(e, msg, NULL);
    rest_fail(c, abx_err_status(e), b);
    json_decref(b);
}

typedef struct query_path {
    abx_arena *arena;
    const char *path, *username, *signature, *expiration;
} query_path;

static int on_query(void *ud, const char *name, size_t nlen, const char *val, size_t vlen)
{
    query_path *q = ud;
    const char **to = NULL;
#define NAMED(s) (nlen == sizeof s - 1 && memcmp(name, s, sizeof s - 1) == 0)
    if (NAMED("path"))
        to = &q->path;
    else if (NAMED("username"))
        to = &q->username;
    else if (NAMED("signature"))
        to = &q->signature;
    else if (NAMED("signature_expiration"))
        to = &q->expiration;
#undef NAMED
    if (to)
        *to = abx_arena_strndup(q->arena, val, vlen);
    return 0;
}

/* E2B's pre-signed /files URLs (sandbox.downloadUrl/uploadUrl): signature = "v1_" +
 * base64(SHA-256("path:operation:username:token[:expiration]")) without padding,
 * operation read (GET) or write (POST). The principal is the one whose token makes it
 * match; NULL with *why set otherwise. Only tokens abx read in plain text can match. */
const char *abx_e2b_signed_principal(e2b_call *c, const char **why)
{
    abx_request *r = c->r;
    query_path q = {.arena = r->arena};
    if (r->query && abx_query_each(r->query, r->query_len, on_query, &q) != 0)
        q.signature = NULL;
    *why = "missing or invalid X-Access-Token";
    if (!q.signature)
        return NULL;
    *why = "invalid signature";
    size_t sl = strlen(q.signature);
    if (sl < 4 || sl > 60 || memcmp(q.signature, "v1_", 3) != 0)
        return NULL;
    char b64[64];
    size_t n = 0;
    for (size_t i = 3; i < sl; i++) /* a bare '+' arrives as ' ' from the query decoder */
        b64[n++] = q.signature[i] == ' ' ? '+' : q.signature[i];
    while (n % 4)
        b64[n++] = '=';
    size_t dl = 0;
    unsigned char *want = abx_base64_decode(b64, n, &dl);
    int64_t now = abx_wall_ms();
    char suffix[32] = "";
    if (q.expiration) {
        char *end = NULL;
        long long exp = strtoll(q.expiration, &end, 10);
        if (!*q.expiration || *end || exp <= 0 || exp > 99999999999LL) {
            free(want);
            return NULL;
        }
        if (exp * 1000 < now) {
            free(want);
            *why = "the signature has expired";
            return NULL;
        }
        snprintf(suffix, sizeof suffix, ":%lld", exp);
    }
    const char *op = strcmp(r->method, "GET") == 0 || strcmp(r->method, "HEAD") == 0 ? "read" : "write";
    char *prefix = abx_arena_printf(r->arena, "%s:%s:%s:", q.path ? q.path : "", op, q.username ? q.username : "");
    int slot = want && dl == 32 && prefix
                   ? abx_policy_signed(r->policy, prefix, strlen(prefix), suffix, strlen(suffix), want, now)
                   : -1;
    free(want);
    return slot >= 0 ? abx_policy_principal_id(r->policy, slot) : NULL;
}

static void files_get(e2b_call *c, const char *path)
{
    json_t *args = json_pack("{s:s}", "path", path);
    abx_call_in in = {.door = ABX_DOOR_E2B, .principal = c->principal, .op = "files.download", .args = args,
                      .conn_fd = c->r->conn_fd, .client = c->r->client};
    abx_request *x = abx_call_begin(c->server, &in);
    json_decref(args);
    if (!x) {
        rest_fail_msg(c, ABX_E_SERVER_UNAVAILABLE, "the server is not ready");
        return;
    }
    abx_reply *from = &x->reply, *to = &c->r->reply;
    if (from->err) {
        json_t *b = abx_error_json(from->err, from->message, NULL);
        rest_fail(c, abx_err_status(from->err), b);
        json_decref(b);
    } else if (from->fd >= 0) {
        to->fd = from->fd;
        to->offset = from->offset;
        to->length = from->length;
        from->fd = -1;
        to->content_type = "application/octet-stream";
    } else {
        abx_reply_bytes(to, from->raw ? from->raw : "", from->raw ? from->raw_len : 0, "application/octet-stream");
    }
    abx_request_free(x);
}

/* Write one file (files.write, parents made) and add envd's EntryInfo to list. */
static bool write_one(e2b_call *c, const char *path, const char *data, size_t len, json_t *list)
{
    size_t bl = 0;
    char *b64 = abx_base64_encode(data, len, &bl);
    if (!b64) {
        rest_fail_msg(c, ABX_E_SERVER_UNAVAILABLE, "out of memory");
        return false;
    }
    json_t *body;
    int st = abx_e2b_op(c, "files.write",
                        json_pack("{s:s, s:s%, s:s, s:b}", "path", path, "content", b64, bl, "encoding", "base64",
                                  "make_parents", 1),
                        &body);
    free(b64);
    if (st != 200) {
        rest_fail(c, st, body);
        json_decref(body);
        return false;
    }
    const char *canon = json_string_value(json_object_get(body, "path"));
    const char *p = canon ? canon : path;
    const char *slash = strrchr(p, '/');
    json_array_append_new(list, json_pack("{s:s, s:s, s:s}", "path", p, "name", slash ? slash + 1 : p, "type", "file"));
    json_decref(body);
    return true;
}

static const char *find_mem(const char *h, size_t hl, const char *n, size_t nl)
{
    return nl && hl >= nl ? memmem(h, hl, n, nl) : NULL;
}

/* One multipart/form-data part after *pos: its filename (arena) and content.
 * 1: a part, 0: the end, -1: malformed. */
int abx_e2b_multipart_next(const char *body, size_t len, const char *boundary, size_t *pos, abx_arena *a,
                           const char **filename, const char **data, size_t *dlen)
{
    char delim[200];
    int dl = snprintf(delim, sizeof delim, "--%s", boundary);
    if (dl <= 2 || (size_t)dl >= sizeof delim)
        return -1;
    const char *p = find_mem(body + *pos, len - *pos, delim, (size_t)dl);
    if (!p)
        return -1;
    p += dl;
    size_t rest = len - (size_t)(p - body);
    if (rest >= 2 && p[0] == '-' && p[1] == '-')
        return 0;
    if (rest < 2 || p[0] != '\r' || p[1] != '\n')
        return -1;
    p += 2;
    const char *hend = find_mem(p, len - (size_t)(p - body), "\r\n\r\n", 4);
    if (!hend)
        return -1;
    *filename = NULL;
    const char *fn = find_mem(p, (size_t)(hend - p), "filename=\"", 10);
    if (fn) {
        fn += 10;
        const char *q = memchr(fn, '"', (size_t)(hend - fn));
        if (!q)
            return -1;
        *filename = abx_arena_strndup(a, fn, (size_t)(q - fn));
    }
    const char *start = hend + 4;
    char end_delim[204];
    int el = snprintf(end_delim, sizeof end_delim, "\r\n%s", delim);
    const char *stop = find_mem(start, len - (size_t)(start - body), end_delim, (size_t)el);
    if (!stop)
        return -1;
    *data = start;
    *dlen = (size_t)(stop - start);
    *pos = (size_t)(stop - body) + 2;
    return 1;
}

static const char *boundary_of(abx_arena *a, const char *ct)
{
    const char *b = ct ? strstr(ct, "boundary=") : NULL;
    if (!b)
        return NULL;
    b += 9;
    bool quoted = *b == '"';
    b += quoted;
    size_t n = strcspn(b, quoted ? "\"" : "; ");
    return n && n < 190 ? abx_arena_strndup(a, b, n) : NULL;
}

static void files_post(e2b_call *c, const char *path)
{
    abx_request *r = c->r;
    const char *ct = r->content_type ? r->content_type : "";
    const char *body = r->body.data ? r->body.data : "";
    json_t *list = json_array();
    bool ok = true;
    if (strncasecmp(ct, "multipart/form-data", 19) == 0) {
        const char *bd = boundary_of(r->arena, ct);
        size_t pos = 0, dlen = 0;
        const char *fn, *data;
        int k = bd ? 1 : -1;
        size_t parts = 0;
        while (ok && k == 1 && (k = abx_e2b_multipart_next(body, r->body.len, bd, &pos, r->arena, &fn, &data, &dlen)) == 1) {
            const char *dest = path ? path : fn;
            parts++;
            ok = dest ? write_one(c, dest, data, dlen, list) : (rest_fail_msg(c, ABX_E_ARGS_INVALID, "no path for a part"), false);
        }
        if (ok && (k < 0 || parts == 0)) {
            rest_fail_msg(c, ABX_E_ARGS_INVALID, "malformed multipart/form-data body");
            ok = false;
        }
    } else if (strncasecmp(ct, "application/octet-stream", 24) == 0) {
        ok = path ? write_one(c, path, body, r->body.len, list)
                  : (rest_fail_msg(c, ABX_E_ARGS_INVALID, "the path query parameter is required"), false);
    } else {
        rest_fail_msg(c, ABX_E_REQUEST_BAD_CONTENT_TYPE, "send multipart/form-data or application/octet-stream");
        ok = false;
    }
    if (ok)
        abx_reply_json(&r->reply, list);
    else
        json_decref(list);
}

bool abx_e2b_rest(e2b_call *c)
{
    abx_request *r = c->r;
    const char *m = r->method;
#define IS(p) (r->path_len == sizeof p - 1 && memcmp(r->path, p, sizeof p - 1) == 0)
    if (IS("/health")) {
        r->reply.status = 204;
        r->reply.protocol_body = true; /* no body */
        return true;
    }
    if (IS("/envs") && strcmp(m, "GET") == 0) {
        abx_reply_json(&r->reply, json_object());
        return true;
    }
    if (!IS("/files"))
        return false;
#undef IS
    query_path q = {.arena = r->arena};
    if (r->query)
        abx_query_each(r->query, r->query_len, on_query, &q);
    if (strcmp(m, "GET") == 0) {
        if (!q.path)
            rest_fail_msg(c, ABX_E_ARGS_INVALID, "the path query parameter is required");
        else
            files_get(c, q.path);
    } else if (strcmp(m, "POST") == 0) {
        files_post(c, q.path);
    } else {
        rest_fail_msg(c, ABX_E_REQUEST_METHOD_NOT_ALLOWED, "GET or POST");
    }
    return true;
}
