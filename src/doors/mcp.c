/* mcp.c — the Model Context Protocol front door (revision 2025-11-25; 2025-06-18 and
 * 2025-03-26 accepted in negotiation): Streamable HTTP at /mcp and newline-delimited
 * JSON-RPC over stdio (`abx mcp`). One transport-neutral core, abx_mcp_handle(),
 * answers one message for a conversation; both transports and the fuzz target use it.
 *
 * tools/list is the caller's mounted operations that discovery offers as tools
 * (abx_tool_offered, the rule GET /tools uses), served from discovery's per-snapshot
 * cache (ABX_DOC_MCP_TOOLS; a reload makes a new snapshot, so the cache follows it), and
 * tools/call enters the one pipeline through abx_call_begin() with the conversation's
 * principal: policy, approvals, limits and the ledger (door "mcp") apply exactly as for
 * HTTP. Nothing here decides policy or reaches a handler another way.
 *
 * Session lifecycle (HTTP): initialize makes a conversation (abx_mcp_conv_new) and, once
 * answered, lists it (session_insert: a random Mcp-Session-Id; when the table is full
 * the least recently used idle session is evicted) → each later request finds it by id
 * and principal (session_find takes a reference; unknown → 404) → DELETE /mcp ends it
 * (session_end: unlisted, its calls cancelled, freed at the last reference).
 *
 * A tools/call in flight is registered in its conversation (inflight) from before the
 * handler runs until its answer is sent, so notifications/cancelled can reach it: the
 * flag is the inner request's cancel pointer (abx_ctx_cancelled sees it, commands stop)
 * and streamed output stops being read (the stream's free function kills its command). */
#include "doors/doors.h"
#include "discovery/discovery.h"
#include <errno.h>
#include <poll.h>
#include <string.h>
#include <strings.h>
#include <unistd.h>

#define MCP_SESSIONS_MAX 256
#define MCP_PAGE 100                  /* tools per tools/list page */
#define MCP_RESULT_MAX (1u << 20)     /* bytes of a result kept for the model */
#define MCP_STDIO_CALLS_MAX 32        /* tools/call running at once on stdio */

/* JSON-RPC error codes */
#define RPC_PARSE_ERROR (-32700)
#define RPC_INVALID_REQUEST (-32600)
#define RPC_METHOD_NOT_FOUND (-32601)
#define RPC_INVALID_PARAMS (-32602)
#define RPC_INTERNAL (-32603)
#define RPC_SERVER_ERROR (-32000)     /* transport-level refusals (session, version, method) */

static const char *const versions[] = {"2025-11-25", "2025-06-18", "2025-03-26"}; /* newest first */

static const char instructions[] =
    "Each tool is an abx operation this principal may call; the dotted operation id is the tool's title. "
    "Every call goes through abx's policy: a refused call comes back as an error result naming the code "
    "(policy.*, args.*) and why; a call held for human approval says so with its approval id "
    "(check it with approvals__get).";

typedef struct inflight {
    json_t *id;                 /* owned: the request's JSON-RPC id */
    atomic_bool cancel;
    struct inflight *next;
} inflight;

struct abx_mcp_conv {
    char id[33];                /* Mcp-Session-Id (hex of 16 random bytes); "" when unlisted */
    char *principal;            /* owned */
    char version[16];           /* negotiated revision */
    int64_t used_ms;
    int refs;                   /* under abx_mcp.mu: the table's while listed, plus users' */
    inflight *calls;            /* under abx_mcp.mu */
};

struct abx_mcp {
    pthread_mutex_t mu;         /* the session table, every conversation's refs and calls */
    abx_mcp_conv *sessions[MCP_SESSIONS_MAX]; /* one reference each */
    size_t n_sessions;
};

struct abx_mcp_call {
    abx_mcp *m;
    abx_mcp_conv *conv;         /* borrowed: the transport holds a reference */
    inflight *fl;               /* registered in conv->calls until the call is freed */
    abx_request *inner;         /* owned: the pipeline's request, its reply holds the stream */
    json_t *id;                 /* owned */
    json_t *token;              /* owned progress token, or NULL */
    abx_stream framing;         /* SSE, NDJSON, or anything else as bytes */
    int conn_fd;                /* the client's socket to watch for a hang-up, -1 none */
    abx_buf line;               /* a partial line of the stream */
    char event[64];             /* SSE: the current event's name */
    abx_buf data;               /* SSE: the current event's data */
    bool has_data;
    json_t *events;             /* owned: parsed events kept for the result */
    abx_buf bytes;              /* bytes streams: what is kept for the result */
    size_t kept;
    bool truncated, done, cancelled, failed;
    json_t *queue;              /* owned: progress notifications not handed out yet */
    int progress;
};

/* ---- small helpers ---- */

static bool version_supported(const char *v)
{
    for (size_t i = 0; v && i < ABX_ARRAY_LEN(versions); i++)
        if (strcmp(versions[i], v) == 0)
            return true;
    return false;
}

/* How many bytes of s to quote so that at most max are shown and no character is cut. */
static int utf8_prefix(const char *s, size_t max)
{
    return (int)abx_utf8_complete_prefix(s, strnlen(s, max));
}

json_t *abx_mcp_error(const json_t *id, int code, const char *message, abx_err abx_code)
{
    if (!abx_utf8_valid(message, strlen(message))) /* names from the client may be anything */
        message = code == RPC_METHOD_NOT_FOUND ? "Method not found" : "Invalid params (text that is not UTF-8)";
    json_t *err = json_pack("{s:i, s:s}", "code", code, "message", message);
    if (err && abx_code != ABX_OK)
        json_object_set_new(err, "data", json_pack("{s:s}", "code", abx_err_code(abx_code)));
    return json_pack("{s:s, s:O, s:o}", "jsonrpc", "2.0", "id", id ? (json_t *)id : json_null(), "error", err);
}

static json_t *rpc_result(const json_t *id, json_t *result)
{
    return json_pack("{s:s, s:O, s:o}", "jsonrpc", "2.0", "id", (json_t *)id, "result", result);
}

json_t *abx_mcp_parse(const char *data, size_t len, json_t **error)
{
    *error = NULL;
    json_error_t je;
    json_t *m = data && len ? json_loadb(data, len, JSON_DECODE_ANY | JSON_REJECT_DUPLICATES, &je) : NULL;
    if (!m) {
        char msg[256];
        int n = snprintf(msg, sizeof msg, "Parse error: %s", data && len ? je.text : "the message is empty");
        for (int i = 0; i < n && i < (int)sizeof msg - 1; i++) /* jansson may quote the input's bytes */
            if ((unsigned char)msg[i] < 0x20 || (unsigned char)msg[i] > 0x7e)
                msg[i] = '?';
        *error = abx_mcp_error(NULL, RPC_PARSE_ERROR, msg, ABX_E_REQUEST_BAD_JSON);
        return NULL;
    }
    if (!json_is_object(m)) {
        *error = abx_mcp_error(NULL, RPC_INVALID_REQUEST,
                               json_is_array(m) ? "Invalid Request: batch arrays are not supported; send one "
                                                  "JSON-RPC message per request"
                                                : "Invalid Request: a JSON-RPC message is a JSON object",
                               ABX_E_REQUEST_BAD_JSON);
        json_decref(m);
        return NULL;
    }
    return m;
}

/* ---- conversations and the session table ---- */

abx_mcp *abx_mcp_new(void)
{
    abx_mcp *m = abx_calloc(1, sizeof *m);
    if (!m)
        return NULL;
    pthread_mutex_init(&m->mu, NULL);
    return m;
}

static void conv_destroy(abx_mcp_conv *c)
{
    for (inflight *f = c->calls, *nx; f; f = nx) { /* none normally: each call unregisters itself */
        nx = f->next;
        json_decref(f->id);
        abx_free(f);
    }
    abx_free(c->principal);
    abx_free(c);
}

static void conv_unref_locked(abx_mcp_conv *c)
{
    if (--c->refs == 0)
        conv_destroy(c);
}

static void conv_unref(abx_mcp *m, abx_mcp_conv *c)
{
    pthread_mutex_lock(&m->mu);
    conv_unref_locked(c);
    pthread_mutex_unlock(&m->mu);
}

void abx_mcp_free(abx_mcp *m)
{
    if (!m)
        return;
    for (size_t i = 0; i < m->n_sessions; i++)
        conv_unref_locked(m->sessions[i]);
    pthread_mutex_destroy(&m->mu);
    abx_free(m);
}

abx_mcp_conv *abx_mcp_conv_new(abx_mcp *m, const char *principal)
{
    (void)m;
    abx_mcp_conv *c = abx_calloc(1, sizeof *c);
    if (!c || !(c->principal = abx_strdup(principal))) {
        abx_free(c);
        return NULL;
    }
    snprintf(c->version, sizeof c->version, "%s", versions[ABX_ARRAY_LEN(versions) - 1]);
    c->refs = 1;
    c->used_ms = abx_now_ms();
    return c;
}

void abx_mcp_conv_free(abx_mcp *m, abx_mcp_conv *c)
{
    if (c)
        conv_unref(m, c);
}

static void cancel_all_locked(abx_mcp_conv *c)
{
    for (inflight *f = c->calls; f; f = f->next)
        atomic_store(&f->cancel, true);
}

void abx_mcp_conv_cancel_all(abx_mcp *m, abx_mcp_conv *c)
{
    pthread_mutex_lock(&m->mu);
    cancel_all_locked(c);
    pthread_mutex_unlock(&m->mu);
}

/* List c under a fresh random id (the table takes a reference). False when the table
 * is full of sessions in use, or without randomness. */
static bool session_insert(abx_mcp *m, abx_mcp_conv *c)
{
    unsigned char rnd[16];
    if (abx_random(rnd, sizeof rnd) != 0)
        return false;
    abx_hex(rnd, sizeof rnd, c->id);
    pthread_mutex_lock(&m->mu);
    if (m->n_sessions == MCP_SESSIONS_MAX) {
        size_t victim = MCP_SESSIONS_MAX;
        for (size_t i = 0; i < m->n_sessions; i++) {
            const abx_mcp_conv *x = m->sessions[i];
            if (x->refs == 1 && !x->calls && (victim == MCP_SESSIONS_MAX || x->used_ms < m->sessions[victim]->used_ms))
                victim = i;
        }
        if (victim == MCP_SESSIONS_MAX) {
            pthread_mutex_unlock(&m->mu);
            return false;
        }
        conv_unref_locked(m->sessions[victim]);
        m->sessions[victim] = m->sessions[--m->n_sessions];
    }
    c->refs++;
    m->sessions[m->n_sessions++] = c;
    pthread_mutex_unlock(&m->mu);
    return true;
}

/* The listed session with this id opened by this principal, with a reference; NULL when
 * unknown (ended, evicted, or another principal's: indistinguishable on purpose). */
static abx_mcp_conv *session_find(abx_mcp *m, const char *id, const char *principal)
{
    abx_mcp_conv *found = NULL;
    pthread_mutex_lock(&m->mu);
    for (size_t i = 0; i < m->n_sessions; i++) {
        abx_mcp_conv *c = m->sessions[i];
        if (strlen(id) == 32 && abx_ct_equal(c->id, id, 32) && strcmp(c->principal, principal) == 0) {
            c->refs++;
            c->used_ms = abx_now_ms();
            found = c;
            break;
        }
    }
    pthread_mutex_unlock(&m->mu);
    return found;
}

static void session_end(abx_mcp *m, abx_mcp_conv *c)
{
    pthread_mutex_lock(&m->mu);
    for (size_t i = 0; i < m->n_sessions; i++)
        if (m->sessions[i] == c) {
            m->sessions[i] = m->sessions[--m->n_sessions];
            cancel_all_locked(c);
            conv_unref_locked(c);
            break;
        }
    pthread_mutex_unlock(&m->mu);
}

static inflight *inflight_add(abx_mcp *m, abx_mcp_conv *c, const json_t *id)
{
    inflight *f = abx_calloc(1, sizeof *f);
    if (!f)
        return NULL;
    f->id = json_deep_copy(id);
    atomic_init(&f->cancel, false);
    pthread_mutex_lock(&m->mu);
    f->next = c->calls;
    c->calls = f;
    pthread_mutex_unlock(&m->mu);
    return f;
}

static void inflight_remove(abx_mcp *m, abx_mcp_conv *c, inflight *f)
{
    if (!f)
        return;
    pthread_mutex_lock(&m->mu);
    for (inflight **pp = &c->calls; *pp; pp = &(*pp)->next)
        if (*pp == f) {
            *pp = f->next;
            break;
        }
    pthread_mutex_unlock(&m->mu);
    json_decref(f->id);
    abx_free(f);
}

/* notifications/cancelled: every call in flight with this id stops. */
static void inflight_cancel(abx_mcp *m, abx_mcp_conv *c, const json_t *id)
{
    pthread_mutex_lock(&m->mu);
    for (inflight *f = c->calls; f; f = f->next)
        if (json_equal(f->id, (json_t *)id))
            atomic_store(&f->cancel, true);
    pthread_mutex_unlock(&m->mu);
}

/* ---- tools/list ---- */

/* Cursors are opaque to clients: base64 of "abx-tools:<offset>". */
static const char cursor_prefix[] = "abx-tools:";

static json_t *cursor_encode(size_t offset)
{
    char raw[48];
    int n = snprintf(raw, sizeof raw, "%s%zu", cursor_prefix, offset);
    char *b64 = abx_base64_encode(raw, (size_t)n, NULL);
    json_t *s = b64 ? json_string(b64) : NULL;
    abx_free(b64);
    return s;
}

/* The offset a cursor names, or -1 when it is not one of ours. */
static long cursor_decode(const char *s, size_t len)
{
    size_t n = 0;
    unsigned char *raw = len <= 64 && abx_base64_valid(s, len) ? abx_base64_decode(s, len, &n) : NULL;
    long off = -1;
    size_t pl = sizeof cursor_prefix - 1;
    if (raw && n > pl && n - pl <= 9 && memcmp(raw, cursor_prefix, pl) == 0) {
        off = 0;
        for (size_t i = pl; i < n && off >= 0; i++)
            off = raw[i] >= '0' && raw[i] <= '9' ? off * 10 + (raw[i] - '0') : -1;
    }
    abx_free(raw);
    return off;
}

static json_t *tools_list(const abx_mcp_in *in, const json_t *id, const json_t *params)
{
    abx_server *s = in->server;
    const json_t *cur = json_object_get(params, "cursor");
    long offset = 0;
    if (cur && !json_is_null(cur)) {
        offset = json_is_string(cur) ? cursor_decode(json_string_value(cur), json_string_length(cur)) : -1;
        if (offset <= 0 || offset % MCP_PAGE)
            return abx_mcp_error(id, RPC_INVALID_PARAMS, "Invalid params: the cursor is not one this server gave",
                                 ABX_E_ARGS_INVALID);
    }
    abx_policy *p = abx_server_snapshot(s);
    int slot = abx_policy_principal_slot(p, in->conv->principal);
    bool known = slot >= 0 && slot < (int)p->n_principals;
    /* discovery's list, cached with the snapshot: the same eligibility rule as GET /tools */
    json_t *tools = known ? abx_discovery_json(ABX_DOC_MCP_TOOLS, s->reg, p, slot) : NULL;
    abx_policy_unref(p);
    if (!known)
        return abx_mcp_error(id, RPC_INTERNAL, "the session's principal is no longer configured; initialize again",
                             ABX_E_AUTH_INVALID_TOKEN);
    if (!tools)
        return abx_mcp_error(id, RPC_INTERNAL, "out of memory", ABX_E_SERVER_UNAVAILABLE);
    size_t n = json_array_size(tools);
    if ((size_t)offset >= n && offset > 0) {
        json_decref(tools);
        return abx_mcp_error(id, RPC_INVALID_PARAMS, "Invalid params: the cursor is past the end of the list",
                             ABX_E_ARGS_INVALID);
    }
    json_t *page = json_array();
    for (size_t i = (size_t)offset; i < n && i < (size_t)offset + MCP_PAGE; i++)
        json_array_append(page, json_array_get(tools, i));
    json_t *result = json_pack("{s:o}", "tools", page);
    if ((size_t)offset + MCP_PAGE < n)
        json_object_set_new(result, "nextCursor", cursor_encode((size_t)offset + MCP_PAGE));
    json_decref(tools);
    return rpc_result(id, result);
}

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
        json_t *doc = json_pack("{s:O, s:b}", "events", c->events, "truncated", c->truncated);
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

json_t *abx_mcp_call_next(abx_mcp_call *c, bool *final)
{
    *final = false;
    for (;;) {
        if (json_array_size(c->queue)) {
            json_t *n = json_incref(json_array_get(c->queue, 0));
            json_array_remove(c->queue, 0);
            return n;
        }
        if (c->done) {
            *final = true;
            return rpc_result(c->id, final_result(c));
        }
        if ((c->fl && atomic_load(&c->fl->cancel)) || hung_up(c->conn_fd)) {
            c->cancelled = true;
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
    abx_request_free(c->inner); /* a stream still running ends here (commands.stream kills its command) */
    inflight_remove(c->m, c->conv, c->fl);
    json_decref(c->id);
    json_decref(c->token);
    json_decref(c->events);
    json_decref(c->queue);
    abx_buf_release(&c->line);
    abx_buf_release(&c->data);
    abx_buf_release(&c->bytes);
    abx_free(c);
}

/* ---- tools/call ---- */

static json_t *unknown_tool(const json_t *id, const char *name)
{
    char msg[200];
    snprintf(msg, sizeof msg, "Unknown tool: %.*s", utf8_prefix(name, 120), name);
    return abx_mcp_error(id, RPC_INVALID_PARAMS, msg, ABX_E_OP_NOT_ENABLED);
}

static void tools_call(const abx_mcp_in *in, const json_t *id, const json_t *params, abx_mcp_out *out)
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
    if (!op || !abx_tool_offered(op)) {
        out->reply = unknown_tool(id, name);
        return;
    }
    const json_t *token = json_object_get(json_object_get(params, "_meta"), "progressToken");
    if (token && !json_is_string(token) && !json_is_integer(token))
        token = NULL;
    abx_mcp_call *c = abx_calloc(1, sizeof *c);
    if (!c) {
        out->reply = abx_mcp_error(id, RPC_INTERNAL, "out of memory", ABX_E_SERVER_UNAVAILABLE);
        return;
    }
    c->m = s->mcp;
    c->conv = in->conv;
    c->id = json_deep_copy(id);
    c->token = token ? json_deep_copy(token) : NULL;
    c->framing = op->def->stream;
    c->conn_fd = in->conn_fd;
    c->events = json_array();
    c->queue = json_array();
    abx_buf_init(&c->line, MCP_RESULT_MAX);
    abx_buf_init(&c->data, MCP_RESULT_MAX);
    abx_buf_init(&c->bytes, MCP_RESULT_MAX);
    c->fl = inflight_add(s->mcp, in->conv, id); /* before the handler: a cancel can reach it */
    json_t *empty = args && json_is_object(args) ? NULL : json_object();
    abx_call_in ci = {.door = ABX_DOOR_MCP, .principal = in->conv->principal, .op = op->id,
                      .args = empty ? empty : args, .cancel = c->fl ? &c->fl->cancel : NULL, .conn_fd = in->conn_fd,
                      .client = in->client};
    c->inner = c->fl ? abx_call_begin(s, &ci) : NULL;
    json_decref(empty);
    if (!c->inner) {
        out->reply = abx_mcp_error(id, RPC_INTERNAL, "out of memory", ABX_E_SERVER_UNAVAILABLE);
        abx_mcp_call_free(c);
        return;
    }
    abx_request *r = c->inner;
    int status = abx_reply_http_status(&r->reply);
    if (r->reply.err == ABX_E_OP_NOT_ENABLED) { /* unmounted reads like unknown, as everywhere */
        out->reply = unknown_tool(id, name);
    } else if (r->reply.err) {
        out->reply = rpc_result(id, error_result(r, status));
    } else if (status == 202 && (r->decision.approval || op->def->requires_approval)) { /* held at step 8 */
        out->reply = rpc_result(id, held_result(r));
    } else if (r->reply.stream_read) {
        if (c->token && in->can_stream) { /* progress as the output arrives: the transport pulls */
            c->conn_fd = -1;               /* the transport watches its own connection */
            out->call = c;
            return;
        }
        bool final = false;
        json_t *msg;
        while (!final) { /* collect (bounded) into one result */
            msg = abx_mcp_call_next(c, &final);
            if (!final)
                json_decref(msg);
        }
        out->reply = msg;
    } else if (r->reply.raw) {
        size_t n = r->reply.raw_len < MCP_RESULT_MAX ? r->reply.raw_len : MCP_RESULT_MAX;
        out->reply = rpc_result(id, tool_result(r, bytes_content(r, r->reply.content_type, r->reply.raw, n,
                                                                 n < r->reply.raw_len),
                                                false, NULL));
    } else if (r->reply.fd >= 0) {
        size_t n = r->reply.length < MCP_RESULT_MAX ? (size_t)r->reply.length : MCP_RESULT_MAX;
        char *buf = abx_malloc(n + 1);
        ssize_t got = buf ? pread(r->reply.fd, buf, n, (off_t)r->reply.offset) : -1;
        if (got < 0)
            out->reply = abx_mcp_error(id, RPC_INTERNAL, "cannot read the result", ABX_E_FILES_IO);
        else
            out->reply = rpc_result(id, tool_result(r, bytes_content(r, r->reply.content_type, buf, (size_t)got,
                                                                     (uint64_t)got < r->reply.length),
                                                    false, NULL));
        abx_free(buf);
    } else {
        out->reply = rpc_result(id, tool_result(r, json_text_content(r->reply.body ? r->reply.body : json_null()),
                                                false, NULL));
    }
    if (c->fl && atomic_load(&c->fl->cancel))
        out->cancelled = true;
    abx_mcp_call_free(c);
}

/* ---- the core: one message ---- */

static json_t *initialize(const abx_mcp_in *in, const json_t *id, const json_t *params)
{
    const char *asked = json_string_value(json_object_get(params, "protocolVersion"));
    if (!asked)
        return abx_mcp_error(id, RPC_INVALID_PARAMS, "Invalid params: initialize needs params.protocolVersion",
                             ABX_E_ARGS_MISSING);
    /* a revision we speak is echoed; otherwise we offer our newest and the client decides */
    snprintf(in->conv->version, sizeof in->conv->version, "%s", version_supported(asked) ? asked : versions[0]);
    json_t *result = json_pack("{s:s, s:{s:{s:b}}, s:{s:s, s:s, s:s}, s:s}", "protocolVersion", in->conv->version,
                               "capabilities", "tools", "listChanged", 0, "serverInfo", "name", "abx", "title", "abx",
                               "version", ABX_VERSION, "instructions", instructions);
    return rpc_result(id, result);
}

static void notification(const abx_mcp_in *in, const char *method, const json_t *params)
{
    if (strcmp(method, "notifications/cancelled") == 0) {
        const json_t *rid = json_object_get(params, "requestId");
        if (json_is_string(rid) || json_is_integer(rid))
            inflight_cancel(in->server->mcp, in->conv, rid);
    }
    /* notifications/initialized and anything else: nothing to do */
}

void abx_mcp_handle(const abx_mcp_in *in, const json_t *msg, abx_mcp_out *out)
{
    memset(out, 0, sizeof *out);
    const json_t *id = json_object_get(msg, "id"), *method = json_object_get(msg, "method"),
                 *params = json_object_get(msg, "params");
    bool id_ok = json_is_string(id) || json_is_integer(id);
    const char *jv = json_string_value(json_object_get(msg, "jsonrpc"));
    if (!json_is_object(msg) || !jv || strcmp(jv, "2.0") != 0) {
        out->reply = abx_mcp_error(id_ok ? id : NULL, RPC_INVALID_REQUEST,
                                   "Invalid Request: \"jsonrpc\": \"2.0\" is required", ABX_E_REQUEST_BAD_JSON);
        return;
    }
    if (!method) {
        if (id && (json_object_get(msg, "result") || json_object_get(msg, "error")))
            return; /* a response to a request of ours: this server sends none, nothing to do */
        out->reply = abx_mcp_error(id_ok ? id : NULL, RPC_INVALID_REQUEST, "Invalid Request: \"method\" is missing",
                                   ABX_E_REQUEST_BAD_JSON);
        return;
    }
    if (!json_is_string(method)) {
        out->reply = abx_mcp_error(id_ok ? id : NULL, RPC_INVALID_REQUEST,
                                   "Invalid Request: \"method\" must be a string", ABX_E_REQUEST_BAD_JSON);
        return;
    }
    const char *name = json_string_value(method);
    if (!id) {
        notification(in, name, params);
        return;
    }
    if (!id_ok) {
        out->reply = abx_mcp_error(NULL, RPC_INVALID_REQUEST, "Invalid Request: the id must be a string or an integer",
                                   ABX_E_REQUEST_BAD_JSON);
        return;
    }
    if (params && !json_is_object(params)) {
        out->reply = abx_mcp_error(id, RPC_INVALID_PARAMS, "Invalid params: params must be an object",
                                   ABX_E_ARGS_INVALID);
        return;
    }
    if (strcmp(name, "initialize") == 0)
        out->reply = initialize(in, id, params);
    else if (strcmp(name, "ping") == 0)
        out->reply = rpc_result(id, json_object());
    else if (strcmp(name, "tools/list") == 0)
        out->reply = tools_list(in, id, params);
    else if (strcmp(name, "tools/call") == 0)
        tools_call(in, id, params, out);
    else {
        char m[200];
        snprintf(m, sizeof m, "Method not found: %.*s", utf8_prefix(name, 120), name);
        out->reply = abx_mcp_error(id, RPC_METHOD_NOT_FOUND, m, ABX_E_OP_NOT_ENABLED);
    }
}

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
    conv_unref(st->m, st->conv);
    abx_buf_release(&st->out);
    abx_free(st);
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
    if (ver && !version_supported(ver)) {
        http_refuse(r, ABX_E_MCP_BAD_PROTOCOL_VERSION, NULL, RPC_SERVER_ERROR,
                    "Bad Request: unsupported MCP-Protocol-Version (supported: 2025-11-25, 2025-06-18, 2025-03-26)");
        return;
    }
    if (del) {
        abx_mcp_conv *c = sid ? session_find(m, sid, principal) : NULL;
        if (!sid)
            http_refuse(r, ABX_E_MCP_SESSION_REQUIRED, NULL, RPC_SERVER_ERROR,
                        "Bad Request: the Mcp-Session-Id header is required");
        else if (!c)
            http_refuse(r, ABX_E_MCP_SESSION_NOT_FOUND, NULL, RPC_SERVER_ERROR - 1, "Session not found");
        else
            http_answer(r, 204, NULL);
        if (c) {
            session_end(m, c);
            conv_unref(m, c);
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
    } else if (!(conv = session_find(m, sid, principal))) {
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
        if (!session_insert(m, conv)) {
            json_decref(out.reply);
            conv_unref(m, conv);
            http_refuse(r, ABX_E_SERVER_UNAVAILABLE, NULL, RPC_SERVER_ERROR,
                        "too many MCP sessions in use; end one (DELETE /mcp) and try again");
            return;
        }
        abx_reply_header(&r->reply, "Mcp-Session-Id", conv->id);
    }
    if (out.call) {
        http_stream *st = abx_calloc(1, sizeof *st);
        if (!st) {
            abx_mcp_call_free(out.call);
            conv_unref(m, conv);
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
    conv_unref(m, conv);
    if (out.reply)
        http_answer(r, 200, out.reply);
    else
        http_answer(r, 202, NULL); /* a notification or a response: accepted, no body */
}

/* ---- stdio ---- */

typedef struct stdio_srv {
    abx_server *s;
    abx_mcp_conv *conv;         /* owned */
    FILE *out;
    pthread_mutex_t out_mu;     /* one message per line, never interleaved */
    pthread_mutex_t mu;
    pthread_cond_t cv;
    int running;                /* worker threads (tools/call) */
    atomic_bool eof;            /* input ended: calls stop, but what they answer is still sent */
} stdio_srv;

typedef struct stdio_job {
    stdio_srv *st;
    json_t *msg;                /* owned */
} stdio_job;

static void stdio_send(stdio_srv *st, json_t *msg)
{
    char *js = msg ? json_dumps(msg, JSON_COMPACT) : NULL; /* compact: no newline inside */
    json_decref(msg);
    if (!js)
        return;
    pthread_mutex_lock(&st->out_mu);
    fputs(js, st->out);
    fputc('\n', st->out);
    fflush(st->out);
    pthread_mutex_unlock(&st->out_mu);
    free(js);
}

static void stdio_run(stdio_srv *st, const json_t *msg)
{
    abx_mcp_in in = {.server = st->s, .conv = st->conv, .can_stream = true, .conn_fd = -1, .client = "stdio"};
    abx_mcp_out out;
    abx_mcp_handle(&in, msg, &out);
    /* a request the client cancelled gets no answer; at the end of input nobody cancelled
     * anything: whoever still reads stdout gets what the stopped calls answer */
    if (out.call) {
        for (bool final = false; !final;) {
            json_t *x = abx_mcp_call_next(out.call, &final);
            if (final && abx_mcp_call_cancelled(out.call) && !atomic_load(&st->eof))
                json_decref(x);
            else if (x)
                stdio_send(st, x);
        }
        abx_mcp_call_free(out.call);
    } else if (out.cancelled && !atomic_load(&st->eof)) {
        json_decref(out.reply);
    } else if (out.reply) {
        stdio_send(st, out.reply);
    }
}

static void *stdio_worker(void *arg)
{
    stdio_job *j = arg;
    stdio_srv *st = j->st;
    stdio_run(st, j->msg);
    json_decref(j->msg);
    abx_free(j);
    pthread_mutex_lock(&st->mu);
    st->running--;
    pthread_cond_broadcast(&st->cv);
    pthread_mutex_unlock(&st->mu);
    return NULL;
}

/* One line: tools/call runs on its own thread (a later notifications/cancelled must be
 * read while it runs); everything else answers at once. */
static void stdio_line(stdio_srv *st, const char *line, size_t len)
{
    json_t *err = NULL;
    json_t *msg = abx_mcp_parse(line, len, &err);
    if (!msg) {
        stdio_send(st, err);
        return;
    }
    const char *method = json_string_value(json_object_get(msg, "method"));
    if (!method || strcmp(method, "tools/call") != 0 || !json_object_get(msg, "id")) {
        stdio_run(st, msg);
        json_decref(msg);
        return;
    }
    pthread_mutex_lock(&st->mu);
    bool room = st->running < MCP_STDIO_CALLS_MAX;
    if (room)
        st->running++;
    pthread_mutex_unlock(&st->mu);
    stdio_job *j = room ? abx_calloc(1, sizeof *j) : NULL;
    pthread_t t;
    pthread_attr_t at;
    pthread_attr_init(&at);
    pthread_attr_setdetachstate(&at, PTHREAD_CREATE_DETACHED);
    if (j) {
        j->st = st;
        j->msg = msg;
    }
    if (!j || pthread_create(&t, &at, stdio_worker, j) != 0) {
        stdio_send(st, abx_mcp_error(json_object_get(msg, "id"), RPC_INTERNAL,
                                     room ? "cannot start the call" : "too many tool calls in flight; wait for one",
                                     room ? ABX_E_SERVER_UNAVAILABLE : ABX_E_LIMIT_CONCURRENCY));
        json_decref(msg);
        abx_free(j);
        if (room) {
            pthread_mutex_lock(&st->mu);
            st->running--;
            pthread_mutex_unlock(&st->mu);
        }
    }
    pthread_attr_destroy(&at);
}

int abx_mcp_stdio(abx_server *s, const char *principal, int in_fd, FILE *out)
{
    stdio_srv st = {.s = s, .out = out};
    st.conv = abx_mcp_conv_new(s->mcp, principal);
    if (!st.conv)
        return -1;
    pthread_mutex_init(&st.out_mu, NULL);
    pthread_mutex_init(&st.mu, NULL);
    pthread_cond_init(&st.cv, NULL);
    size_t cap = s->cfg.request_max_bytes > 0 ? (size_t)s->cfg.request_max_bytes : (1u << 20);
    abx_buf line;
    abx_buf_init(&line, cap);
    bool skipping = false; /* the rest of a line longer than the cap */
    int rc = 0;
    char buf[65536];
    for (;;) {
        ssize_t n = read(in_fd, buf, sizeof buf);
        if (n < 0 && errno == EINTR)
            continue;
        if (n <= 0) {
            rc = n < 0 ? -1 : 0;
            break;
        }
        for (ssize_t i = 0; i < n; i++) {
            if (buf[i] != '\n') {
                if (!skipping && !abx_buf_putc(&line, buf[i])) {
                    skipping = true;
                    char msg[96];
                    snprintf(msg, sizeof msg, "Invalid Request: a message is larger than %zu bytes", cap);
                    stdio_send(&st, abx_mcp_error(NULL, RPC_INVALID_REQUEST, msg, ABX_E_LIMIT_REQUEST_TOO_LARGE));
                }
                continue;
            }
            size_t len = line.len;
            while (len && (line.data[len - 1] == '\r' || line.data[len - 1] == ' '))
                len--;
            if (!skipping && len)
                stdio_line(&st, line.data, len);
            line.len = 0;
            if (skipping) { /* the failure is sticky: a fresh buffer for the next line */
                abx_buf_release(&line);
                abx_buf_init(&line, cap);
                skipping = false;
            }
        }
    }
    /* end of input: the client is gone, so is the work it started */
    atomic_store(&st.eof, true);
    abx_mcp_conv_cancel_all(s->mcp, st.conv);
    pthread_mutex_lock(&st.mu);
    while (st.running > 0)
        pthread_cond_wait(&st.cv, &st.mu);
    pthread_mutex_unlock(&st.mu);
    abx_buf_release(&line);
    abx_mcp_conv_free(s->mcp, st.conv);
    pthread_cond_destroy(&st.cv);
    pthread_mutex_destroy(&st.mu);
    pthread_mutex_destroy(&st.out_mu);
    return rc;
}
