/* commands.c — the commands namespace: run a command to completion (or a soft
 * timeout), stream it as SSE, and sessions that keep cwd and environment between
 * commands at the API level (one process per command, no prompt scraping).
 * The argv is always the policy's canonical one; nothing here invokes a shell. */
#include "builtin/exec.h"
#include "builtin/results.h"
#include <signal.h>
#include <stdio.h>
#include <string.h>

static int64_t seconds_ms(const json_t *v) { return json_is_number(v) ? (int64_t)(json_number_value(v) * 1000) : 0; }

/* Run to completion, soft timeout, hard timeout or cancellation; the reply is the result. */
static abx_err run_command(abx_ctx *ctx, const json_t *args, abx_reply *r, const char *cwd, const json_t *base_env)
{
    abx_exec_opts o = {.hard_timeout_ms = seconds_ms(json_object_get(args, "hard_timeout")), .cwd = cwd,
                       .base_env = base_env};
    return abx_exec_run(ctx, args, &o, seconds_ms(json_object_get(args, "timeout")), r);
}

static abx_err commands_run(abx_ctx *ctx, const json_t *args, abx_reply *r)
{
    return run_command(ctx, args, r, NULL, NULL);
}

static abx_err commands_stream(abx_ctx *ctx, const json_t *args, abx_reply *r)
{
    int64_t hard = seconds_ms(json_object_get(args, "hard_timeout"));
    const json_t *stdin_v = json_object_get(args, "stdin");
    abx_exec_opts o = {.keep_stdin = stdin_v != NULL, .hard_timeout_ms = hard};
    abx_proc *p = abx_exec_start(ctx, args, &o, r);
    if (!p)
        return abx_exec_start_failed(r);
    if (stdin_v)
        abx_proc_write_stdin(p, json_string_value(stdin_v), json_string_length(stdin_v), true, abx_now_ms() + 30000);
    abx_exec_reply_sse(r, p, 0, 0, true, false);
    return ABX_OK;
}

/* ---- sessions ---- */

typedef struct session {
    char id[33];
    char *owner;
    char *cwd;       /* canonical, admitted when it was set */
    json_t *env;     /* allowlisted when it was set */
    int64_t created_ms;
    struct session *next;
} session;

struct abx_sessions {
    pthread_mutex_t mu;
    session *head;
    size_t n;
};

#define MAX_SESSIONS 256

/* The namespace's state, one per server (abx_ns_commands: the server makes it at start
 * and frees it with itself). */
static void *sessions_new(void)
{
    struct abx_sessions *ss = abx_calloc(1, sizeof *ss);
    if (ss)
        pthread_mutex_init(&ss->mu, NULL);
    return ss;
}

static void sessions_free(void *state)
{
    struct abx_sessions *ss = state;
    if (!ss)
        return;
    for (session *x = ss->head, *nx; x; x = nx) {
        nx = x->next;
        abx_free(x->owner);
        abx_free(x->cwd);
        json_decref(x->env);
        abx_free(x);
    }
    pthread_mutex_destroy(&ss->mu);
    abx_free(ss);
}

static struct abx_sessions *sessions_of(abx_ctx *ctx) { return abx_ctx_ns_state(ctx, &abx_ns_commands); }

static session *find_session(struct abx_sessions *ss, const char *id, const char *owner)
{
    for (session *x = ss->head; x; x = x->next)
        if (strcmp(x->id, id) == 0 && strcmp(x->owner, owner) == 0)
            return x;
    return NULL;
}

static json_t *session_json(const session *x)
{
    char ts[32];
    abx_iso8601(x->created_ms, ts);
    return json_pack("{s:s, s:s?, s:O, s:s}", "id", x->id, "cwd", x->cwd, "env", x->env, "created_at", ts);
}

/* The approval binder's question (abx_namespace.bind_cwd): the directory a held
 * commands.sessions.exec will start in is the one its session remembers for the
 * caller. malloc'd; NULL for other ops, unknown sessions and sessions without one. */
static char *sessions_bind_cwd(abx_ctx *ctx, const json_t *args)
{
    if (strcmp(abx_ctx_op_id(ctx), "commands.sessions.exec") != 0)
        return NULL;
    const char *id = json_string_value(json_object_get(args, "id"));
    const char *owner = abx_ctx_principal(ctx);
    struct abx_sessions *ss = id && owner ? abx_ctx_ns_state(ctx, &abx_ns_commands) : NULL;
    if (!ss)
        return NULL;
    pthread_mutex_lock(&ss->mu);
    session *x = find_session(ss, id, owner);
    char *cwd = x && x->cwd ? abx_strdup(x->cwd) : NULL;
    pthread_mutex_unlock(&ss->mu);
    return cwd;
}

static abx_err sessions_create(abx_ctx *ctx, const json_t *args, abx_reply *r)
{
    struct abx_sessions *ss = sessions_of(ctx);
    if (!ss)
        return abx_reply_error(r, ABX_E_SERVER_UNAVAILABLE, NULL, "out of memory");
    session *x = abx_calloc(1, sizeof *x);
    unsigned char rnd[16];
    if (!x || abx_random(rnd, sizeof rnd) != 0) {
        abx_free(x);
        return abx_reply_error(r, ABX_E_SERVER_UNAVAILABLE, NULL, "out of memory");
    }
    abx_hex(rnd, sizeof rnd, x->id);
    x->owner = abx_strdup(abx_ctx_principal(ctx));
    x->cwd = abx_ctx_path(ctx, "cwd") ? abx_strdup(abx_ctx_path(ctx, "cwd")) : NULL;
    const json_t *env = json_object_get(args, "env");
    x->env = env ? json_deep_copy(env) : json_object();
    x->created_ms = abx_wall_ms();
    pthread_mutex_lock(&ss->mu);
    if (ss->n >= MAX_SESSIONS) {
        pthread_mutex_unlock(&ss->mu);
        abx_free(x->owner);
        abx_free(x->cwd);
        json_decref(x->env);
        abx_free(x);
        return abx_reply_error(r, ABX_E_LIMIT_CONCURRENCY, NULL, "at most %d command sessions; close some",
                               MAX_SESSIONS);
    }
    x->next = ss->head;
    ss->head = x;
    ss->n++;
    json_t *out = session_json(x);
    pthread_mutex_unlock(&ss->mu);
    abx_reply_json(r, out);
    return ABX_OK;
}

static abx_err sessions_exec(abx_ctx *ctx, const json_t *args, abx_reply *r)
{
    struct abx_sessions *ss = sessions_of(ctx);
    const char *id = json_string_value(json_object_get(args, "id"));
    pthread_mutex_lock(&ss->mu);
    session *x = find_session(ss, id, abx_ctx_principal(ctx));
    if (!x) {
        pthread_mutex_unlock(&ss->mu);
        return abx_reply_error(r, ABX_E_SESSION_NOT_FOUND, NULL, "no session '%s'", id);
    }
    /* a cwd or env given here persists in the session (the way `cd` and `export` would) */
    if (abx_ctx_path(ctx, "cwd")) {
        abx_free(x->cwd);
        x->cwd = abx_strdup(abx_ctx_path(ctx, "cwd"));
    }
    const json_t *env = json_object_get(args, "env");
    if (env)
        json_object_update(x->env, (json_t *)env);
    char *cwd = x->cwd ? abx_strdup(x->cwd) : NULL;
    json_t *base = json_deep_copy(x->env);
    pthread_mutex_unlock(&ss->mu);
    abx_err e = run_command(ctx, args, r, abx_ctx_path(ctx, "cwd") ? NULL : cwd, base);
    if (e == ABX_OK && abx_reply_body(r))
        json_object_set_new(abx_reply_body(r), "session", json_string(id));
    abx_free(cwd);
    json_decref(base);
    return e;
}

static abx_err sessions_close(abx_ctx *ctx, const json_t *args, abx_reply *r)
{
    struct abx_sessions *ss = sessions_of(ctx);
    const char *id = json_string_value(json_object_get(args, "id"));
    pthread_mutex_lock(&ss->mu);
    for (session **pp = &ss->head; *pp; pp = &(*pp)->next) {
        session *x = *pp;
        if (strcmp(x->id, id) == 0 && strcmp(x->owner, abx_ctx_principal(ctx)) == 0) {
            *pp = x->next;
            ss->n--;
            pthread_mutex_unlock(&ss->mu);
            abx_free(x->owner);
            abx_free(x->cwd);
            json_decref(x->env);
            abx_free(x);
            abx_reply_json(r, json_pack("{s:s, s:b}", "id", id, "closed", 1));
            return ABX_OK;
        }
    }
    pthread_mutex_unlock(&ss->mu);
    return abx_reply_error(r, ABX_E_SESSION_NOT_FOUND, NULL, "no session '%s'", id);
}

static abx_err sessions_list(abx_ctx *ctx, const json_t *args, abx_reply *r)
{
    struct abx_sessions *ss = sessions_of(ctx);
    json_t *arr = json_array();
    pthread_mutex_lock(&ss->mu);
    for (session *x = ss->head; x; x = x->next)
        if (strcmp(x->owner, abx_ctx_principal(ctx)) == 0)
            json_array_append_new(arr, session_json(x));
    pthread_mutex_unlock(&ss->mu);
    abx_reply_json(r, json_pack("{s:o}", "sessions", arr));
    return ABX_OK;
}

#define COMMAND_PARAMS                                                                                                \
    {"command", ABX_T_STRING, .kind = ABX_KIND_COMMAND,                                                               \
     .doc = "Command line: split into words like a POSIX shell does, without expansion (shell syntax refused), "    \
            "or run by /bin/sh -c where the scope says shell: true (the default preset does)"},                     \
        {"argv", ABX_T_LIST, .item = ABX_T_STRING, .kind = ABX_KIND_COMMAND,                                          \
         .doc = "The program and its arguments, used as given"},                                                      \
        {"cwd", ABX_T_STRING, .kind = ABX_KIND_PATH, .access = ABX_ACC_READ,                                          \
         .doc = "Working directory (default: the scope root)"},                                                       \
        {"env", ABX_T_MAP, .item = ABX_T_STRING, .kind = ABX_KIND_COMMAND,                                            \
         .doc = "Environment variables (only names the scope's env allowlist names)"},                                \
        {"stdin", ABX_T_STRING, .doc = "Text written to the process's stdin, then closed"},                         \
        {"hard_timeout", ABX_T_NUMBER, ABX_MIN(0),                                                                    \
         .doc = "Seconds after which the whole process group is killed (status timed_out)"}

static const abx_param run_params[] = {
    COMMAND_PARAMS,
    {"timeout", ABX_T_NUMBER, ABX_MIN(0),
     .doc = "Soft timeout in seconds: answer status running with the pid; the process goes on in the background "
            "(wait for it with process.wait). MCP and /tools/call default to limits.tool_soft_timeout (50 s); 0 = none"},
    {"max_output_bytes", ABX_T_INT, ABX_MIN(1), .doc = "Keep at most this many bytes of each stream (truncated flag)"},
    {0},
};

static const abx_param stream_params[] = {COMMAND_PARAMS, ABX_TOOL_STREAM_PARAMS, {0}};

static const abx_param session_create_params[] = {
    {"cwd", ABX_T_STRING, .kind = ABX_KIND_PATH, .access = ABX_ACC_READ, .doc = "Working directory of the session"},
    {"env", ABX_T_MAP, .item = ABX_T_STRING, .kind = ABX_KIND_COMMAND, .doc = "Environment of the session"},
    {0},
};

static const abx_param session_exec_params[] = {
    {"id", ABX_T_STRING, .required = true, .doc = "Session id"},
    COMMAND_PARAMS,
    {"timeout", ABX_T_NUMBER, ABX_MIN(0), .doc = "Soft timeout in seconds"},
    {"max_output_bytes", ABX_T_INT, ABX_MIN(1), .doc = "Keep at most this many bytes of each stream"},
    {0},
};

static const abx_param session_id_params[] = {{"id", ABX_T_STRING, .required = true, .doc = "Session id"}, {0}};

#define EXEC_LIMITS                                                                                                   \
    (ABX_LIM_TIMEOUT | ABX_LIM_MAX_OUTPUT_BYTES | ABX_LIM_RATE | ABX_LIM_CONCURRENCY | ABX_LIM_MEMORY |              \
     ABX_LIM_PIDS | ABX_LIM_CPU)

/* results: what each op answers */
static const abx_param run_result[] = {
    ABX_RUN_FIELDS,
    {0},
};

static const abx_param session_exec_result[] = {
    ABX_RUN_FIELDS,
    {"session", ABX_T_STRING, .required = true},
    {0},
};

static const abx_param session_fields[] = {
    {"id", ABX_T_STRING, .required = true},
    {"cwd", ABX_T_STRING, .required = true, .nullable = true},
    {"env", ABX_T_MAP, ABX_T_STRING, .required = true},
    {"created_at", ABX_T_STRING, .required = true},
    {0},
};

static const abx_param session_close_result[] = {
    {"id", ABX_T_STRING, .required = true},
    {"closed", ABX_T_BOOL, .required = true},
    {0},
};

static const abx_param session_list_result[] = {
    {"sessions", ABX_T_LIST, ABX_T_OBJECT, .required = true, .fields = session_fields},
    {0},
};

ABX_OUTPUT_EVENT_ROWS(cmd_stream);

static const abx_op_def commands_ops[] = {
    {.id = "commands.run", .result = run_result, .effects = ABX_EFF_EXEC,
     .summary = "Run a command confined; answer its exit code, stdout and stderr, or status running with the pid at "
                "the soft timeout (then process.wait {pid, timeout} waits for the exit).",
     .http = {"POST /commands/run"}, .params = run_params, .one_of = "command|argv", .limits = EXEC_LIMITS,
     .since = "0.1",
     .errors = "files.not_found files.not_a_directory files.access files.io process.spawn_failed sandbox.unavailable",
     .handler = commands_run},
    {.id = "commands.stream", .events = cmd_stream_events, .effects = ABX_EFF_EXEC,
     .summary = "Run a command confined and stream stdout, stderr and exit as server-sent events (on tool doors: "
                "bounded by duration and max_events; the command is killed at the bound).",
     .http = {"POST /commands/stream"}, .params = stream_params, .one_of = "command|argv", .limits = EXEC_LIMITS,
     .stream = ABX_STREAM_SSE, .since = "0.1",
     .errors = "files.not_found files.not_a_directory files.access files.io process.spawn_failed sandbox.unavailable",
     .handler = commands_stream},
    {.id = "commands.sessions.create", .result = session_fields, .effects = ABX_EFF_EXEC,
     .summary = "Create a command session that keeps cwd and environment between commands.",
     .http = {"POST /commands/sessions"}, .params = session_create_params, .since = "0.1",
     .errors = "limit.concurrency", .handler = sessions_create},
    {.id = "commands.sessions.exec", .result = session_exec_result, .effects = ABX_EFF_EXEC,
     .summary = "Run a command in a session; a cwd or env given here persists in the session.",
     .http = {"POST /commands/sessions/{id}/exec"}, .params = session_exec_params, .one_of = "command|argv",
     .limits = EXEC_LIMITS, .since = "0.1",
     .errors = "session.not_found process.spawn_failed", .handler = sessions_exec},
    {.id = "commands.sessions.close", .result = session_close_result, .effects = ABX_EFF_EXEC, .summary = "Close a command session.",
     .http = {"DELETE /commands/sessions/{id}"}, .params = session_id_params, .since = "0.1",
     .errors = "session.not_found", .handler = sessions_close},
    {.id = "commands.sessions.list", .result = session_list_result, .effects = ABX_EFF_READ, .summary = "The caller's command sessions.",
     .http = {"GET /commands/sessions/list"}, .since = "0.1", .handler = sessions_list},
    {0},
};

const abx_namespace abx_ns_commands = {.name = "commands", .ops = commands_ops, .state_new = sessions_new,
                                         .state_free = sessions_free, .bind_cwd = sessions_bind_cwd};
