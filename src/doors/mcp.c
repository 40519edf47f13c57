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
#include "doors/mcp_int.h"
#include "discovery/discovery.h"
#include <errno.h>
#include <poll.h>
#include <string.h>
#include <strings.h>
#include <unistd.h>

static const char *const versions[] = {"2025-11-25", "2025-06-18", "2025-03-26"}; /* newest first */

static const char instructions[] =
    "Each tool is an abx operation this principal may call; the dotted operation id is the tool's title. "
    "Every call goes through abx's policy: a refused call comes back as an error result naming the code "
    "(policy.*, args.*) and why; a call held for human approval says so with its approval id "
    "(check it with approvals__get). A command still running at the soft timeout (50 s unless the call gives "
    "timeout) answers status running with its pid: wait for it with process__wait {pid, timeout} or read it with "
    "process__output. Streaming tools (files__watch, commands__stream, process__stream) answer with what they "
    "collected within duration seconds or max_events. A terminal is a process: type with process__write, read "
    "with process__output.";

/* ---- small helpers ---- */

bool abx__mcp_structured(const abx_mcp_conv *c)
{
    return c && strcmp(c->version, "2025-06-18") >= 0; /* revisions are dates: they sort as text */
}

bool abx__mcp_version_supported(const char *v)
{
    for (size_t i = 0; v && i < ABX_ARRAY_LEN(versions); i++)
        if (strcmp(versions[i], v) == 0)
            return true;
    return false;
}

/* How many bytes of s to quote so that at most max are shown and no character is cut. */
int abx__mcp_utf8_prefix(const char *s, size_t max)
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

json_t *abx__mcp_result(const json_t *id, json_t *result)
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
    abx_overlay_end_session(c->overlay, c->tag); /* its session-bound dynamic tools end with it */
    abx_free(c->principal);
    abx_free(c);
}

static void conv_unref_locked(abx_mcp_conv *c)
{
    if (--c->refs == 0)
        conv_destroy(c);
}

void abx__mcp_conv_unref(abx_mcp *m, abx_mcp_conv *c)
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

void abx_mcp_set_overlay(abx_mcp *m, struct abx_overlay *ov) { m->overlay = ov; }

abx_mcp_conv *abx_mcp_conv_new(abx_mcp *m, const char *principal)
{
    abx_mcp_conv *c = abx_calloc(1, sizeof *c);
    if (!c || !(c->principal = abx_strdup(principal))) {
        abx_free(c);
        return NULL;
    }
    pthread_mutex_lock(&m->mu);
    snprintf(c->tag, sizeof c->tag, "mcp-%llu", (unsigned long long)++m->convs);
    c->overlay = m->overlay;
    pthread_mutex_unlock(&m->mu);
    snprintf(c->version, sizeof c->version, "%s", versions[ABX_ARRAY_LEN(versions) - 1]);
    c->refs = 1;
    c->used_ms = abx_now_ms();
    return c;
}

void abx_mcp_conv_free(abx_mcp *m, abx_mcp_conv *c)
{
    if (c)
        abx__mcp_conv_unref(m, c);
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
bool abx__mcp_session_insert(abx_mcp *m, abx_mcp_conv *c)
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
abx_mcp_conv *abx__mcp_session_find(abx_mcp *m, const char *id, const char *principal)
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

void abx__mcp_session_end(abx_mcp *m, abx_mcp_conv *c)
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

inflight *abx__mcp_inflight_add(abx_mcp *m, abx_mcp_conv *c, const json_t *id)
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

void abx__mcp_inflight_remove(abx_mcp *m, abx_mcp_conv *c, inflight *f)
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
    json_t *dyn = tools ? abx__dyn_entries(s, p, slot, ABX_DOC_MCP_TOOLS, 0) : NULL;
    if (dyn) { /* the caller's dynamic tools after the registry's (a copy: the cached list stays) */
        json_t *all = json_array();
        json_array_extend(all, tools);
        json_array_extend(all, dyn);
        json_decref(tools);
        tools = all;
    }
    json_decref(dyn);
    abx__mcp_dyn_seen(s, in->conv, p, slot);
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
    bool typed = abx__mcp_structured(in->conv);
    for (size_t i = (size_t)offset; i < n && i < (size_t)offset + MCP_PAGE; i++) {
        json_t *t = json_array_get(tools, i);
        if (!typed && json_object_get(t, "outputSchema")) { /* an older revision: no outputSchema */
            t = json_copy(t);
            json_object_del(t, "outputSchema");
            json_array_append_new(page, t);
        } else {
            json_array_append(page, t);
        }
    }
    json_t *result = json_pack("{s:o}", "tools", page);
    if ((size_t)offset + MCP_PAGE < n)
        json_object_set_new(result, "nextCursor", cursor_encode((size_t)offset + MCP_PAGE));
    json_decref(tools);
    return abx__mcp_result(id, result);
}

/* ---- the core: one message ---- */

static json_t *initialize(const abx_mcp_in *in, const json_t *id, const json_t *params)
{
    const char *asked = json_string_value(json_object_get(params, "protocolVersion"));
    if (!asked)
        return abx_mcp_error(id, RPC_INVALID_PARAMS, "Invalid params: initialize needs params.protocolVersion",
                             ABX_E_ARGS_MISSING);
    /* a revision we speak is echoed; otherwise we offer our newest and the client decides */
    snprintf(in->conv->version, sizeof in->conv->version, "%s", abx__mcp_version_supported(asked) ? asked : versions[0]);
    json_t *result = json_pack("{s:s, s:{s:{s:b}}, s:{s:s, s:s, s:s}, s:s}", "protocolVersion", in->conv->version,
                               "capabilities", "tools", "listChanged", 1, "serverInfo", "name", "abx", "title", "abx",
                               "version", ABX_VERSION, "instructions", instructions);
    return abx__mcp_result(id, result);
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
        out->reply = abx__mcp_result(id, json_object());
    else if (strcmp(name, "tools/list") == 0)
        out->reply = tools_list(in, id, params);
    else if (strcmp(name, "tools/call") == 0) {
        abx__mcp_tools_call(in, id, params, out);
        out->note = abx__mcp_dyn_changed(in->server, in->conv);
    }
    else {
        char m[200];
        snprintf(m, sizeof m, "Method not found: %.*s", abx__mcp_utf8_prefix(name, 120), name);
        out->reply = abx_mcp_error(id, RPC_METHOD_NOT_FOUND, m, ABX_E_OP_NOT_ENABLED);
    }
}
