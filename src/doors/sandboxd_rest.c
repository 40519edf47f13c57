/* sandboxd_rest.c — sandboxd's REST API (third_party/agent-sandbox/filesystem/v1/
 * filesystem.yaml) on the sandboxd REST listener, each route an alternate binding of abx
 * ops: GET /v1/files/{path...} → files.stat, then files.list (a directory: the
 * DirectoryListing document) or files.download (a file: its bytes); HEAD → files.stat;
 * PUT → files.write (octet-stream or the multipart "file" part, parents made); DELETE →
 * files.delete. {path} is the rest of the path (slashes included), percent-decoded, and
 * relative to abx's workspace. GET /v1/health answers without credentials (the kubelet's
 * probe); everything else wants the pod's token. Errors are the spec's {code, message}
 * with gRPC's code names, under abx's status, and in the ledger like any call. */
#include "doors/sandboxd.h"
#include "http/http.h"
#include <stdlib.h>
#include <string.h>
#include <time.h>

extern char **environ;

static void rest_fail_e(abx_request *r, abx_err e, const char *msg)
{
    abx_fail(r, e, "%s", msg ? msg : abx_err_meaning(e));
    abx_reply *rep = &r->reply;
    json_decref(rep->body);
    char *m = abx_asprintf("%s: %s", abx_err_code(e), rep->message ? rep->message : abx_err_meaning(e));
    rep->body = json_pack("{s:s, s:s}", "code", abx_sbx_grpc_name(abx_sbx_grpc_code(e)), "message", m ? m : "");
    abx_free(m);
    rep->protocol_body = true;
    rep->content_type = "application/json";
}

static void rest_fail(abx_request *r, int status, const json_t *body)
{
    const char *msg;
    abx_err e = abx_sbx_err_of(status, body, &msg);
    rest_fail_e(r, e, msg);
}

/* The caller: authenticated by the listener (sandboxd_auth), the trace from the router. */
static sbx_caller caller_of(abx_request *r)
{
    return (sbx_caller){.server = r->server, .principal = r->principal_name, .client = r->client,
                        .traceparent = r->traceparent};
}

static void health(abx_request *r)
{
    int64_t up = (abx_now_ms() - r->server->started_ms) / 1000;
    abx_reply_json(&r->reply, json_pack("{s:s, s:I}", "status", "ok", "uptime_seconds", (json_int_t)(up > 0 ? up : 0)));
}

/* Workload metadata: abx's own SANDBOX_* environment variables (what the orchestrator
 * injects: sandbox id, workspace path); never anything else. */
static void metadata(abx_request *r)
{
    json_t *env = json_object();
    for (char **e = environ; e && *e; e++) {
        const char *eq = strchr(*e, '=');
        if (eq && strncmp(*e, "SANDBOX_", 8) == 0) {
            char *k = abx_strndup(*e, (size_t)(eq - *e));
            json_t *v = json_string(eq + 1);
            if (k && v)
                json_object_set_new(env, k, v);
            else
                json_decref(v);
            abx_free(k);
        }
    }
    abx_reply_json(&r->reply, json_pack("{s:o}", "env", env));
}

/* files.list's entry → the spec's FileEntry (file or directory; others left out) */
static json_t *file_entry(const json_t *e)
{
    const char *t = json_string_value(json_object_get(e, "type"));
    if (!t || (strcmp(t, "file") != 0 && strcmp(t, "directory") != 0))
        return NULL;
    return json_pack("{s:O, s:O, s:s, s:O, s:O}", "name", json_object_get(e, "name"), "size",
                     json_object_get(e, "size"), "type", t, "modified_at", json_object_get(e, "mtime"), "mode",
                     json_object_get(e, "mode"));
}

static void list_dir(abx_request *r, const sbx_caller *c, const char *path)
{
    json_t *body;
    int st = abx_sbx_op(c, "files.list", json_pack("{s:s, s:b}", "path", path, "include_hidden", 1), &body);
    if (st != 200) {
        rest_fail(r, st, body);
        json_decref(body);
        return;
    }
    json_t *entries = json_array();
    size_t i;
    const json_t *e;
    json_array_foreach(json_object_get(body, "entries"), i, e) {
        json_t *fe = file_entry(e);
        if (fe)
            json_array_append_new(entries, fe);
    }
    json_decref(body);
    char *shown = abx_asprintf("/%s", strcmp(path, ".") == 0 ? "" : path);
    abx_reply_json(&r->reply, json_pack("{s:s, s:o}", "path", shown ? shown : "/", "entries", entries));
    abx_free(shown);
}

static void download(abx_request *r, const sbx_caller *c, const char *path)
{
    json_t *args = json_pack("{s:s}", "path", path);
    abx_call_in in = {.door = ABX_DOOR_SANDBOXD, .principal = c->principal, .op = "files.download", .args = args,
                      .conn_fd = r->conn_fd, .client = r->client, .traceparent = c->traceparent};
    abx_request *x = abx_call_begin(r->server, &in);
    json_decref(args);
    if (!x) {
        rest_fail_e(r, ABX_E_SERVER_UNAVAILABLE, "the server is not ready");
        return;
    }
    abx_reply *from = &x->reply, *to = &r->reply;
    if (from->err) {
        rest_fail_e(r, from->err, from->message);
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

static void get_or_head(abx_request *r, const sbx_caller *c, const char *path, bool head)
{
    json_t *body;
    int st = abx_sbx_op(c, "files.stat", json_pack("{s:s}", "path", path), &body);
    if (st != 200) {
        rest_fail(r, st, body);
        json_decref(body);
        return;
    }
    if (json_is_false(json_object_get(body, "exists"))) { /* files.stat answers absence as a value */
        json_decref(body);
        rest_fail_e(r, ABX_E_FILES_NOT_FOUND, "the path does not exist within the sandbox");
        return;
    }
    const char *type = json_string_value(json_object_get(body, "type"));
    bool dir = type && strcmp(type, "directory") == 0;
    if (head) { /* existence and metadata, no body */
        abx_reply_header(&r->reply, "Content-Type", dir ? "application/json" : "application/octet-stream");
        time_t t = (time_t)(json_integer_value(json_object_get(body, "mtime_ms")) / 1000);
        struct tm tm;
        char date[40];
        if (gmtime_r(&t, &tm) && strftime(date, sizeof date, "%a, %d %b %Y %H:%M:%S GMT", &tm))
            abx_reply_header(&r->reply, "Last-Modified", date); /* an HTTP-date (RFC 9110) */
        r->reply.status = 200;
        r->reply.protocol_body = true;
    } else if (dir) {
        list_dir(r, c, path);
    } else {
        download(r, c, path);
    }
    json_decref(body);
}

typedef struct rest_query {
    abx_arena *arena;
    const char *mode, *recursive;
} rest_query;

static int on_query(void *ud, const char *name, size_t nlen, const char *val, size_t vlen)
{
    rest_query *q = ud;
    if (nlen == 4 && memcmp(name, "mode", 4) == 0)
        q->mode = abx_arena_strndup(q->arena, val, vlen);
    else if (nlen == 9 && memcmp(name, "recursive", 9) == 0)
        q->recursive = abx_arena_strndup(q->arena, val, vlen);
    return 0;
}

static bool mode_ok(const char *m)
{
    return strlen(m) == 4 && m[0] == '0' && strspn(m + 1, "01234567") == 3;
}

/* The content of a PUT: the body (octet-stream) or its multipart "file" part. */
static bool put_content(abx_request *r, const char **data, size_t *len)
{
    const char *ct = r->content_type ? r->content_type : "application/octet-stream";
    const char *body = r->body.data ? r->body.data : "";
    if (strncasecmp(ct, "multipart/form-data", 19) != 0) { /* octet-stream, or any other type: the bytes */
        *data = body;
        *len = r->body.len;
        return true;
    }
    const char *b = strstr(ct, "boundary=");
    char bd[192] = "";
    if (b) {
        b += 9;
        bool quoted = *b == '"';
        b += quoted;
        size_t n = strcspn(b, quoted ? "\"" : "; ");
        if (n && n < sizeof bd)
            memcpy(bd, b, n), bd[n] = '\0';
    }
    size_t pos = 0;
    const char *fn;
    if (!bd[0] || abx_e2b_multipart_next(body, r->body.len, bd, &pos, r->arena, &fn, data, len) != 1) {
        rest_fail_e(r, ABX_E_ARGS_INVALID, "malformed multipart/form-data body (one \"file\" part)");
        return false;
    }
    return true;
}

static void put_file(abx_request *r, const sbx_caller *c, const char *path, const rest_query *q)
{
    if (q->mode && !mode_ok(q->mode)) {
        rest_fail_e(r, ABX_E_ARGS_INVALID, "mode must match ^0[0-7]{3}$");
        return;
    }
    const char *data;
    size_t len;
    if (!put_content(r, &data, &len))
        return;
    size_t bl = 0;
    char *b64 = abx_base64_encode(data, len, &bl);
    if (!b64) {
        rest_fail_e(r, ABX_E_SERVER_UNAVAILABLE, "out of memory");
        return;
    }
    json_t *body;
    /* the spec's mode (default 0644) is the written file's permission bits */
    int st = abx_sbx_op(c, "files.write",
                        json_pack("{s:s, s:s%, s:s, s:b, s:s}", "path", path, "content", b64, bl, "encoding", "base64",
                                  "make_parents", 1, "permissions", q->mode ? q->mode : "0644"),
                        &body);
    free(b64);
    if (st != 200) {
        rest_fail(r, st, body);
    } else {
        r->reply.status = 204;
        r->reply.protocol_body = true;
    }
    json_decref(body);
}

/* files.delete answers a non-empty directory without recursive as a bad argument; the
 * spec's answer is 409: is it one? */
static bool nonempty_dir(const sbx_caller *c, const char *path)
{
    json_t *body;
    int st = abx_sbx_op(c, "files.list", json_pack("{s:s, s:b}", "path", path, "include_hidden", 1), &body);
    bool yes = st == 200 && json_array_size(json_object_get(body, "entries")) > 0;
    json_decref(body);
    return yes;
}

static void delete_path(abx_request *r, const sbx_caller *c, const char *path, const rest_query *q)
{
    bool rec = q->recursive && (strcmp(q->recursive, "true") == 0 || strcmp(q->recursive, "1") == 0);
    if (q->recursive && !rec && strcmp(q->recursive, "false") != 0 && strcmp(q->recursive, "0") != 0) {
        rest_fail_e(r, ABX_E_ARGS_INVALID, "recursive must be true or false");
        return;
    }
    json_t *body;
    int st = abx_sbx_op(c, "files.delete", json_pack("{s:s, s:b}", "path", path, "recursive", rec), &body);
    if (st != 200 && !rec && abx_sbx_err_of(st, body, &(const char *){NULL}) == ABX_E_ARGS_INVALID &&
        nonempty_dir(c, path)) {
        rest_fail_e(r, ABX_E_FILES_NOT_EMPTY, "the directory is not empty; pass recursive=true");
    } else if (st != 200) {
        rest_fail(r, st, body);
    } else {
        r->reply.status = 204;
        r->reply.protocol_body = true;
    }
    json_decref(body);
}

/* {path...}: the rest of the target after /v1/files/, percent-decoded ("." for none). */
static const char *rest_path(abx_request *r)
{
    const size_t pre = sizeof "/v1/files" - 1;
    if (r->path_len == pre)
        return ".";
    size_t n = r->path_len - pre - 1;
    char *p = abx_arena_alloc(r->arena, n + 1);
    if (!p || abx_pct_decode(r->path + pre + 1, n, p, false) < 0)
        return NULL;
    return p[0] ? p : ".";
}

static void files_route(abx_request *r, const sbx_caller *c)
{
    const char *path = rest_path(r);
    if (!path) {
        rest_fail_e(r, ABX_E_ARGS_INVALID, "the path is not valid percent-encoding");
        return;
    }
    rest_query q = {.arena = r->arena};
    if (r->query)
        abx_query_each(r->query, r->query_len, on_query, &q);
    const char *m = r->method;
    if (strcmp(m, "GET") == 0 || strcmp(m, "HEAD") == 0)
        get_or_head(r, c, path, m[0] == 'H');
    else if (strcmp(m, "PUT") == 0)
        put_file(r, c, path, &q);
    else if (strcmp(m, "DELETE") == 0)
        delete_path(r, c, path, &q);
    else {
        snprintf(r->reply.allow, sizeof r->reply.allow, "GET, HEAD, PUT, DELETE");
        rest_fail_e(r, ABX_E_REQUEST_METHOD_NOT_ALLOWED, "GET, HEAD, PUT or DELETE");
    }
}

/* The listener's step 2 for this door: the pod's token (or abx's) → a trusted principal;
 * anything else leaves the request anonymous (the door answers 401). The router's
 * traceparent is kept for the ledger. */
void abx_sandboxd_auth(abx_request *r)
{
    const char *tp = r->header_fn ? r->header_fn(r->header_ud, "traceparent") : NULL;
    if (abx_sbx_traceparent_ok(tp))
        r->traceparent = abx_arena_strdup(r->arena, tp);
    const char *authz = r->header_fn ? r->header_fn(r->header_ud, "Authorization") : NULL;
    int wait = 0;
    char *who = abx_sbx_authenticate(r->server, authz, r->client, &wait);
    r->bearer = NULL;
    r->x_token = NULL;
    r->auth_bad_scheme = false;
    if (wait > 0) {
        r->reply.retry_after = wait;
        rest_fail_e(r, ABX_E_AUTH_RATE_LIMITED, "too many failed attempts; see Retry-After");
    }
    if (who) {
        r->trusted_principal = true;
        r->principal_name = abx_arena_strdup(r->arena, who);
        abx_free(who);
    }
}

void abx_sandboxd_rest(abx_request *r)
{
#define IS(p) (r->path_len == sizeof p - 1 && memcmp(r->path, p, sizeof p - 1) == 0)
    bool get = strcmp(r->method, "GET") == 0 || strcmp(r->method, "HEAD") == 0;
    if (IS("/v1/health")) {
        if (get)
            health(r);
        else
            rest_fail_e(r, ABX_E_REQUEST_METHOD_NOT_ALLOWED, "GET");
        return;
    }
    if (!r->trusted_principal) {
        rest_fail_e(r, ABX_E_AUTH_REQUIRED, "Authorization: Bearer <the pod's token> is required");
        return;
    }
    sbx_caller c = caller_of(r);
    if (IS("/v1/metadata")) {
        if (get)
            metadata(r);
        else
            rest_fail_e(r, ABX_E_REQUEST_METHOD_NOT_ALLOWED, "GET");
    } else if (IS("/v1/files") || (r->path_len >= 10 && memcmp(r->path, "/v1/files/", 10) == 0)) {
        files_route(r, &c);
    } else {
        rest_fail_e(r, ABX_E_OP_NOT_ENABLED, "no such sandboxd route");
    }
#undef IS
}

/* The listener's target check for this door: sandboxd's clients send {path}'s slashes as
 * %2F (the Go SDK does), so an encoded slash counts as a separator here and the target
 * must pass abx's rules (no empty, "." or ".." segments, no other encoded dots) with it. */
bool abx_sandboxd_target_ok(const char *raw, size_t n)
{
    char *t = abx_malloc(n + 1);
    if (!t)
        return false;
    size_t o = 0;
    bool query = false;
    for (size_t i = 0; i < n; i++) {
        query = query || raw[i] == '?';
        if (!query && raw[i] == '%' && i + 2 < n && raw[i + 1] == '2' && (raw[i + 2] == 'F' || raw[i + 2] == 'f')) {
            t[o++] = '/';
            i += 2;
        } else {
            t[o++] = raw[i];
        }
    }
    bool ok = abx_target_ok(t, o);
    abx_free(t);
    return ok;
}
