/* terminal.c — the terminal namespace: pseudo-terminal sessions (confined like every
 * process) reached over WebSocket. The upgrade request is the policed call; the
 * decision holds for the socket's life. Output is kept in the process's ring, so a
 * client can disconnect and reconnect and see recent output again.
 *
 * WebSocket protocol: binary frames both ways carry raw terminal bytes; a text frame
 * from the client is JSON: {"type": "input", "data": "..."} or
 * {"type": "resize", "cols": N, "rows": N}. */
#include "builtin/exec.h"
#include "builtin/results.h"
#include <signal.h>
#include <stdio.h>
#include <string.h>

#define REPLAY_BYTES (64 * 1024)

static abx_proc *own_terminal(abx_ctx *ctx, const json_t *args, abx_reply *r)
{
    int id = (int)json_integer_value(json_object_get(args, "id"));
    abx_proc *p = abx_proc_find(abx_ctx_procs(ctx), id);
    json_t *st = p ? abx_proc_json(p) : NULL;
    bool ok = p && json_is_true(json_object_get(st, "pty")) && strcmp(abx_proc_owner(p), abx_ctx_principal(ctx)) == 0;
    json_decref(st);
    if (!ok) {
        abx_proc_unref(p);
        abx_reply_error(r, ABX_E_PROCESS_NOT_FOUND, NULL, "no terminal %d of this caller", id);
        return NULL;
    }
    return p;
}

static json_t *terminal_json(abx_ctx *ctx, abx_proc *p)
{
    abx_server_facts s;
    abx_ctx_server_facts(ctx, &s);
    json_t *o = abx_proc_json(p);
    json_object_set_new(o, "id", json_integer(abx_proc_pid(p)));
    json_object_set_new(o, "ws_path", json_sprintf("/terminal/%d", abx_proc_pid(p)));
    if (s.terminal_port > 0)
        json_object_set_new(o, "ws_url", json_sprintf("ws://%s:%d/terminal/%d",
                                                      strchr(s.listen_host, ':') ? "[::1]" : s.listen_host,
                                                      s.terminal_port, abx_proc_pid(p)));
    return o;
}

static abx_err terminal_create(abx_ctx *ctx, const json_t *args, abx_reply *r)
{
    abx_exec_opts o = {.pty = true, .keep_stdin = true, .tag = "terminal",
                       .cols = (unsigned short)json_integer_value(json_object_get(args, "cols")),
                       .rows = (unsigned short)json_integer_value(json_object_get(args, "rows"))};
    abx_proc *p = abx_exec_start(ctx, args, &o, r);
    if (!p)
        return abx_exec_start_failed(r);
    abx_reply_json(r, terminal_json(ctx, p));
    abx_proc_unref(p);
    return ABX_OK;
}

static abx_err terminal_list(abx_ctx *ctx, const json_t *args, abx_reply *r)
{
    abx_proc **all;
    size_t n = abx_procs_list(abx_ctx_procs(ctx), abx_ctx_principal(ctx), &all);
    json_t *arr = json_array();
    for (size_t i = 0; i < n; i++) {
        json_t *st = abx_proc_json(all[i]);
        if (json_is_true(json_object_get(st, "pty")))
            json_array_append_new(arr, terminal_json(ctx, all[i]));
        json_decref(st);
        abx_proc_unref(all[i]);
    }
    abx_free(all);
    abx_reply_json(r, json_pack("{s:o}", "terminals", arr));
    return ABX_OK;
}

static abx_err terminal_resize(abx_ctx *ctx, const json_t *args, abx_reply *r)
{
    abx_proc *p = own_terminal(ctx, args, r);
    if (!p)
        return ABX_E_PROCESS_NOT_FOUND;
    int rc = abx_proc_resize(p, (unsigned short)json_integer_value(json_object_get(args, "cols")),
                             (unsigned short)json_integer_value(json_object_get(args, "rows")));
    abx_proc_unref(p);
    if (rc != 0)
        return abx_reply_error(r, ABX_E_PROCESS_NOT_RUNNING, NULL, "cannot resize: %s", strerror(-rc));
    abx_reply_json(r, json_pack("{s:O, s:O, s:O}", "id", json_object_get(args, "id"), "cols",
                                json_object_get(args, "cols"), "rows", json_object_get(args, "rows")));
    return ABX_OK;
}

static abx_err terminal_delete(abx_ctx *ctx, const json_t *args, abx_reply *r)
{
    abx_proc *p = own_terminal(ctx, args, r);
    if (!p)
        return ABX_E_PROCESS_NOT_FOUND;
    abx_proc_kill(p, SIGHUP, false);
    if (abx_proc_wait(p, abx_now_ms() + 1000, NULL, NULL) == 0)
        abx_proc_kill(p, SIGKILL, false);
    abx_proc_unref(p);
    abx_reply_json(r, json_pack("{s:O, s:b}", "id", json_object_get(args, "id"), "deleted", 1));
    return ABX_OK;
}

/* ---- the WebSocket session ---- */

typedef struct term_ws {
    abx_proc *proc; /* one reference */
    uint64_t off;
} term_ws;

static void ws_message(void *state, int opcode, const uint8_t *data, size_t len)
{
    term_ws *t = state;
    if (opcode == 2) {
        abx_proc_write_stdin(t->proc, data, len, false, abx_now_ms() + 1000);
        return;
    }
    json_t *j = json_loadb((const char *)data, len, 0, NULL);
    const char *type = json_string_value(json_object_get(j, "type"));
    if (type && strcmp(type, "resize") == 0) {
        json_int_t c = json_integer_value(json_object_get(j, "cols")), rw = json_integer_value(json_object_get(j, "rows"));
        if (c > 0 && c < 10000 && rw > 0 && rw < 10000)
            abx_proc_resize(t->proc, (unsigned short)c, (unsigned short)rw);
    } else if (type && strcmp(type, "input") == 0 && json_is_string(json_object_get(j, "data"))) {
        const json_t *d = json_object_get(j, "data");
        abx_proc_write_stdin(t->proc, json_string_value(d), json_string_length(d), false, abx_now_ms() + 1000);
    } else if (!j) { /* a plain text frame is input too */
        abx_proc_write_stdin(t->proc, data, len, false, abx_now_ms() + 1000);
    }
    json_decref(j);
}

static long ws_pull(void *state, char *buf, size_t max)
{
    term_ws *t = state;
    char *data;
    uint64_t start, total;
    bool dropped;
    bool running = abx_proc_running(t->proc);
    size_t n = abx_proc_read(t->proc, ABX_STDOUT, t->off, max, &data, &start, &dropped, &total);
    if (n)
        memcpy(buf, data, n);
    abx_free(data);
    t->off = start + n;
    if (n)
        return (long)n;
    return running ? 0 : -1;
}

static void ws_free(void *state)
{
    term_ws *t = state;
    abx_proc_unref(t->proc); /* disconnecting does not end the terminal: reconnect to it */
    abx_free(t);
}

static const abx_ws_ops terminal_ws_ops = {ws_message, ws_pull, ws_free, NULL};

static abx_err terminal_connect(abx_ctx *ctx, const json_t *args, abx_reply *r)
{
    if (!abx_ctx_ws_requested(ctx))
        return abx_reply_error(r, ABX_E_ARGS_INVALID, NULL,
                               "terminal.connect is a WebSocket: send Upgrade: websocket with a Sec-WebSocket-Key");
    int bound = abx_ctx_ticket_target(ctx);
    if (bound >= 0 && bound != (int)json_integer_value(json_object_get(args, "id")))
        return abx_reply_error(r, ABX_E_AUTH_INVALID_TOKEN, NULL, "the ticket is for another terminal");
    abx_proc *p = own_terminal(ctx, args, r);
    if (!p)
        return ABX_E_PROCESS_NOT_FOUND;
    term_ws *t = abx_calloc(1, sizeof *t);
    if (!t) {
        abx_proc_unref(p);
        return abx_reply_error(r, ABX_E_SERVER_UNAVAILABLE, NULL, "out of memory");
    }
    t->proc = p;
    /* replay recent output so a reconnecting client sees the screen's context */
    json_t *st = abx_proc_json(p);
    uint64_t total = (uint64_t)json_integer_value(json_object_get(st, "stdout_bytes"));
    json_decref(st);
    t->off = total > REPLAY_BYTES ? total - REPLAY_BYTES : 0;
    abx_reply_websocket(r, &terminal_ws_ops, t);
    return ABX_OK;
}

/* A single-use ticket for one WebSocket upgrade to this terminal within limits.ticket_ttl
 * (30 s), for a page
 * whose WebSocket API cannot send Authorization: GET /terminal/{id}?ticket=... */
static abx_err terminal_ticket(abx_ctx *ctx, const json_t *args, abx_reply *r)
{
    abx_proc *p = own_terminal(ctx, args, r);
    if (!p)
        return ABX_E_PROCESS_NOT_FOUND;
    int id = abx_proc_pid(p);
    abx_proc_unref(p);
    char tk[65];
    int64_t ttl = 0;
    if (abx_ctx_ticket_issue(ctx, id, tk, &ttl) != 0)
        return abx_reply_error(r, ABX_E_LIMIT_CONCURRENCY, NULL, "too many tickets outstanding; retry shortly");
    abx_reply_json(r, json_pack("{s:i, s:s, s:i, s:o}", "id", id, "ticket", tk, "expires_in", (int)(ttl / 1000),
                                "ws_path", json_sprintf("/terminal/%d?ticket=%s", id, tk)));
    return ABX_OK;
}

static const abx_param create_params[] = {
    {"command", ABX_T_STRING, .kind = ABX_KIND_COMMAND, .dflt = "\"bash -l\"",
     .doc = "Program to run on the terminal (default: a login shell)"},
    {"cwd", ABX_T_STRING, .kind = ABX_KIND_PATH, .access = ABX_ACC_READ, .doc = "Working directory"},
    {"env", ABX_T_MAP, .item = ABX_T_STRING, .kind = ABX_KIND_COMMAND, .doc = "Environment (allowlisted names)"},
    {"cols", ABX_T_INT, .dflt = "80", ABX_RANGE(1, 1000), .doc = "Columns"},
    {"rows", ABX_T_INT, .dflt = "24", ABX_RANGE(1, 1000), .doc = "Rows"},
    {0},
};
static const abx_param id_params[] = {{"id", ABX_T_INT, .required = true, ABX_MIN(1), .doc = "Terminal id"}, {0}};
static const abx_param connect_params[] = {
    {"id", ABX_T_INT, .required = true, ABX_MIN(1), .doc = "Terminal id"},
    {"ticket", ABX_T_STRING,
     .doc = "A ticket from terminal.ticket instead of Authorization (a browser's WebSocket cannot send headers); "
            "single use, 30 s, this terminal only; the ledger keeps only its digest"},
    {0},
};
static const abx_param resize_params[] = {
    {"id", ABX_T_INT, .required = true, ABX_MIN(1), .doc = "Terminal id"},
    {"cols", ABX_T_INT, .required = true, ABX_RANGE(1, 1000), .doc = "Columns"},
    {"rows", ABX_T_INT, .required = true, ABX_RANGE(1, 1000), .doc = "Rows"},
    {0},
};

/* results: what each op answers */
static const abx_param term_result[] = {
    ABX_PROC_FIELDS,
    {"id", ABX_T_INT, .required = true, .doc = "The terminal's id (its pid)"},
    {"ws_path", ABX_T_STRING, .required = true, .doc = "The WebSocket to connect to"},
    {"ws_url", ABX_T_STRING, .doc = "Its URL on the terminal listener, when one is configured"},
    {0},
};

static const abx_param term_list_result[] = {
    {"terminals", ABX_T_LIST, ABX_T_OBJECT, .required = true, .fields = term_result},
    {0},
};

static const abx_param ticket_result[] = {
    {"id", ABX_T_INT, .required = true},
    {"ticket", ABX_T_STRING, .required = true},
    {"expires_in", ABX_T_INT, .required = true, .doc = "Seconds"},
    {"ws_path", ABX_T_STRING, .required = true, .doc = "Connect here (the ticket is in the query)"},
    {0},
};

static const abx_param resize_result[] = {
    {"id", ABX_T_INT, .required = true},
    {"cols", ABX_T_INT, .required = true},
    {"rows", ABX_T_INT, .required = true},
    {0},
};

static const abx_param term_delete_result[] = {
    {"id", ABX_T_INT, .required = true},
    {"deleted", ABX_T_BOOL, .required = true},
    {0},
};

static const abx_op_def terminal_ops[] = {
    {.id = "terminal.create", .result = term_result, .effects = ABX_EFF_EXEC,
     .summary = "Start a program (a shell by default) on a confined pseudo-terminal; connect to it over WebSocket.",
     .http = {"POST /terminal"}, .params = create_params,
     .limits = ABX_LIM_TIMEOUT | ABX_LIM_RATE | ABX_LIM_CONCURRENCY | ABX_LIM_MEMORY | ABX_LIM_PIDS | ABX_LIM_CPU,
     .since = "0.1",
     .errors = "files.not_found files.not_a_directory files.access files.io process.spawn_failed sandbox.unavailable",
     .handler = terminal_create},
    {.id = "terminal.connect", .effects = ABX_EFF_EXEC,
     .summary = "WebSocket to a terminal: binary frames carry its bytes; recent output is replayed on (re)connect.",
     .http = {"GET /terminal/{id}"}, .params = connect_params, .stream = ABX_STREAM_WS, .since = "0.1",
     .errors = "process.not_found auth.invalid_token", .handler = terminal_connect},
    {.id = "terminal.ticket", .result = ticket_result, .effects = ABX_EFF_EXEC,
     .summary = "A single-use ticket for one WebSocket upgrade to the caller's terminal within 30 s "
                "(GET /terminal/{id}?ticket=...), for pages that cannot send Authorization.",
     .http = {"POST /terminal/{id}/ticket"}, .params = id_params, .since = "0.2",
     .errors = "process.not_found limit.concurrency", .handler = terminal_ticket},
    {.id = "terminal.resize", .result = resize_result, .effects = ABX_EFF_EXEC, .summary = "Resize a terminal.",
     .http = {"POST /terminal/{id}/resize"}, .params = resize_params, .since = "0.1",
     .errors = "process.not_found process.not_running", .handler = terminal_resize},
    {.id = "terminal.list", .result = term_list_result, .effects = ABX_EFF_READ, .summary = "The caller's terminals.",
     .http = {"GET /terminal/list"}, .since = "0.1", .handler = terminal_list},
    {.id = "terminal.delete", .result = term_delete_result, .effects = ABX_EFF_EXEC, .summary = "End a terminal (HUP, then KILL).",
     .http = {"DELETE /terminal/{id}"}, .params = id_params, .since = "0.1",
     .errors = "process.not_found", .handler = terminal_delete},
    {0},
};

const abx_namespace abx_ns_terminal = {.name = "terminal", .ops = terminal_ops};
