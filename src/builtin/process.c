/* process.c — the process namespace: background processes started confined, visible
 * and signalable only to the principal that started them (admins see all), with
 * output kept in bounded rings whether or not anyone listens. */
#include "builtin/exec.h"
#include "builtin/results.h"
#include <errno.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static bool is_admin(abx_ctx *ctx) { return abx_ctx_has_role(ctx, "admin"); }

/* The caller's process, or a 404 that says nothing about other principals' processes. */
static abx_proc *own_proc(abx_ctx *ctx, const json_t *args, abx_reply *r)
{
    int pid = (int)json_integer_value(json_object_get(args, "pid"));
    abx_proc *p = abx_proc_find(abx_ctx_procs(ctx), pid);
    if (p && !is_admin(ctx) && strcmp(abx_proc_owner(p), abx_ctx_principal(ctx)) != 0) {
        abx_proc_unref(p);
        p = NULL;
    }
    if (!p)
        abx_reply_error(r, ABX_E_PROCESS_NOT_FOUND, NULL, "no process %d started by this caller", pid);
    return p;
}

static abx_err process_start(abx_ctx *ctx, const json_t *args, abx_reply *r)
{
    abx_exec_opts o = {.keep_stdin = true, .tag = json_string_value(json_object_get(args, "tag"))};
    abx_proc *p = abx_exec_start(ctx, args, &o, r);
    if (!p)
        return abx_exec_start_failed(r);
    const json_t *stdin_v = json_object_get(args, "stdin");
    if (stdin_v)
        abx_proc_write_stdin(p, json_string_value(stdin_v), json_string_length(stdin_v), false, abx_now_ms() + 5000);
    abx_reply_json(r, abx_proc_json(p));
    abx_proc_unref(p);
    return ABX_OK;
}

static abx_err process_list(abx_ctx *ctx, const json_t *args, abx_reply *r)
{
    abx_proc **all;
    size_t n = abx_procs_list(abx_ctx_procs(ctx), is_admin(ctx) ? NULL : abx_ctx_principal(ctx), &all);
    json_t *arr = json_array();
    bool running_only = json_is_true(json_object_get(args, "running"));
    for (size_t i = 0; i < n; i++) {
        if (!running_only || abx_proc_running(all[i]))
            json_array_append_new(arr, abx_proc_json(all[i]));
        abx_proc_unref(all[i]);
    }
    abx_free(all);
    abx_reply_json(r, json_pack("{s:o}", "processes", arr));
    return ABX_OK;
}

static abx_err process_get(abx_ctx *ctx, const json_t *args, abx_reply *r)
{
    abx_proc *p = own_proc(ctx, args, r);
    if (!p)
        return ABX_E_PROCESS_NOT_FOUND;
    abx_reply_json(r, abx_proc_json(p));
    abx_proc_unref(p);
    return ABX_OK;
}

static abx_err process_output(abx_ctx *ctx, const json_t *args, abx_reply *r)
{
    abx_proc *p = own_proc(ctx, args, r);
    if (!p)
        return ABX_E_PROCESS_NOT_FOUND;
    uint64_t off[2] = {(uint64_t)json_integer_value(json_object_get(args, "offset")),
                       (uint64_t)json_integer_value(json_object_get(args, "stderr_offset"))};
    double wait = json_number_value(json_object_get(args, "wait"));
    int64_t max = abx_ctx_limit(ctx, ABX_LIM_MAX_BYTES);
    if (max <= 0 || max > 16 * 1024 * 1024)
        max = 1024 * 1024;
    if (wait > 0) /* long-poll: until new output, exit, or the wait passes */
        abx_proc_wait_output(p, off[0], off[1], abx_now_ms() + (int64_t)(wait * 1000));
    json_t *out = json_object();
    static const char *const names[] = {"stdout", "stderr"};
    static const char *const off_names[] = {"offset", "stderr_offset"};
    for (int i = 0; i < 2; i++) {
        char *data;
        uint64_t start, total;
        bool dropped;
        size_t n = abx_proc_read(p, (enum abx_stream_id)i, off[i], (size_t)max, &data, &start, &dropped, &total);
        json_object_set_new(out, names[i], abx_text_json(data ? data : "", n));
        char key[40];
        snprintf(key, sizeof key, "%s_start", names[i]);
        json_object_set_new(out, key, json_integer((json_int_t)start));
        json_object_set_new(out, off_names[i], json_integer((json_int_t)(start + n)));
        snprintf(key, sizeof key, "%s_dropped", names[i]);
        /* the asked offset fell off the ring: say so, and from where the data starts */
        json_object_set_new(out, key, json_boolean(dropped));
        snprintf(key, sizeof key, "%s_total", names[i]);
        json_object_set_new(out, key, json_integer((json_int_t)total));
        abx_free(data);
    }
    json_t *st = abx_proc_json(p);
    json_object_set(out, "running", json_object_get(st, "running"));
    json_object_set(out, "status", json_object_get(st, "status"));
    json_object_set(out, "exit_code", json_object_get(st, "exit_code"));
    json_object_set(out, "pid", json_object_get(st, "pid"));
    json_decref(st);
    abx_proc_unref(p);
    abx_reply_json(r, out);
    return ABX_OK;
}

static bool wait_cancelled(void *ud) { return abx_ctx_cancelled(ud); }

/* Wait (bounded) for the process to exit: its state then, with running true at the timeout. */
static abx_err process_wait(abx_ctx *ctx, const json_t *args, abx_reply *r)
{
    abx_proc *p = own_proc(ctx, args, r);
    if (!p)
        return ABX_E_PROCESS_NOT_FOUND;
    double t = json_number_value(json_object_get(args, "timeout"));
    int w = abx_proc_wait(p, abx_now_ms() + (int64_t)(t * 1000), wait_cancelled, ctx);
    json_t *out = abx_proc_json(p);
    abx_proc_unref(p);
    json_object_set_new(out, "timed_out_waiting", json_boolean(w == 0));
    abx_reply_json(r, out);
    return ABX_OK;
}

static abx_err process_stream(abx_ctx *ctx, const json_t *args, abx_reply *r)
{
    abx_proc *p = own_proc(ctx, args, r);
    if (!p)
        return ABX_E_PROCESS_NOT_FOUND;
    uint64_t o = (uint64_t)json_integer_value(json_object_get(args, "offset")),
             e = (uint64_t)json_integer_value(json_object_get(args, "stderr_offset"));
    abx_parse_event_id(abx_ctx_last_event_id(ctx), &o, &e); /* resume where the client stopped */
    const json_t *enc = json_object_get(args, "encoding");
    abx_exec_reply_sse(r, p, o, e, false, enc && strcmp(json_string_value(enc), "base64") == 0);
    return ABX_OK;
}

static abx_err process_write(abx_ctx *ctx, const json_t *args, abx_reply *r)
{
    abx_proc *p = own_proc(ctx, args, r);
    if (!p)
        return ABX_E_PROCESS_NOT_FOUND;
    const json_t *data = json_object_get(args, "data");
    bool eof = json_is_true(json_object_get(args, "eof"));
    if (!abx_proc_running(p)) {
        abx_proc_unref(p);
        return abx_reply_error(r, ABX_E_PROCESS_NOT_RUNNING, NULL, "the process has exited");
    }
    const json_t *enc = json_object_get(args, "encoding");
    unsigned char *raw = NULL;
    size_t rawn = 0;
    if (data && enc && strcmp(json_string_value(enc), "base64") == 0) {
        raw = abx_base64_decode(json_string_value(data), json_string_length(data), &rawn);
        if (!raw) {
            abx_proc_unref(p);
            return abx_reply_error(r, ABX_E_ARGS_INVALID, NULL, "data is not valid base64");
        }
    }
    long n = raw ? abx_proc_write_stdin(p, (const char *)raw, rawn, eof, abx_now_ms() + 5000)
                 : abx_proc_write_stdin(p, data ? json_string_value(data) : "", data ? json_string_length(data) : 0,
                                        eof, abx_now_ms() + 5000);
    free(raw);
    abx_proc_unref(p);
    if (n < 0)
        return abx_reply_error(r, ABX_E_PROCESS_STDIN_CLOSED, NULL, "stdin is closed");
    abx_reply_json(r, json_pack("{s:I, s:b}", "written", (json_int_t)n, "eof", eof));
    return ABX_OK;
}

static abx_err process_signal(abx_ctx *ctx, const json_t *args, abx_reply *r)
{
    const char *name = json_string_value(json_object_get(args, "signal"));
    int sig = abx_signal_by_name(name);
    if (sig <= 0)
        return abx_reply_error(r, ABX_E_ARGS_INVALID, NULL, "argument 'signal': unknown signal '%s' (TERM, KILL, INT, "
                                                            "HUP, USR1, ...)", name);
    abx_proc *p = own_proc(ctx, args, r);
    if (!p)
        return ABX_E_PROCESS_NOT_FOUND;
    int rc = abx_proc_signal(p, sig);
    abx_proc_unref(p);
    if (rc == -ESRCH)
        return abx_reply_error(r, ABX_E_PROCESS_NOT_RUNNING, NULL, "the process has exited");
    if (rc < 0)
        return abx_reply_error(r, ABX_E_SERVER_INTERNAL, NULL, "kill: %s", strerror(-rc));
    abx_reply_json(r, json_pack("{s:i, s:s}", "pid", (int)json_integer_value(json_object_get(args, "pid")), "signal",
                                sigabbrev_np(sig)));
    return ABX_OK;
}

static const abx_param start_params[] = {
    {"command", ABX_T_STRING, .kind = ABX_KIND_COMMAND, .doc = "Command line (split like a POSIX shell, no expansion)"},
    {"argv", ABX_T_LIST, .item = ABX_T_STRING, .kind = ABX_KIND_COMMAND, .doc = "The program and its arguments"},
    {"cwd", ABX_T_STRING, .kind = ABX_KIND_PATH, .access = ABX_ACC_READ, .doc = "Working directory"},
    {"env", ABX_T_MAP, .item = ABX_T_STRING, .kind = ABX_KIND_COMMAND, .doc = "Environment (allowlisted names)"},
    {"stdin", ABX_T_STRING, .doc = "Text written to stdin at start (stdin stays open for process.write)"},
    {"tag", ABX_T_STRING, .doc = "Free text shown in listings"},
    {0},
};
static const abx_param pid_params[] = {{"pid", ABX_T_INT, .required = true, ABX_MIN(1), .doc = "Process id"}, {0}};
static const abx_param list_params[] = {{"running", ABX_T_BOOL, .dflt = "false", .doc = "Only running processes"}, {0}};
static const abx_param output_params[] = {
    {"pid", ABX_T_INT, .required = true, ABX_MIN(1), .doc = "Process id"},
    {"offset", ABX_T_INT, .dflt = "0", ABX_MIN(0), .doc = "Byte offset in stdout to read from"},
    {"stderr_offset", ABX_T_INT, .dflt = "0", ABX_MIN(0), .doc = "Byte offset in stderr to read from"},
    {"wait", ABX_T_NUMBER, .dflt = "0", ABX_RANGE(0, 60), .doc = "Long-poll: seconds to wait for new output"},
    {0},
};
static const abx_param wait_params[] = {
    {"pid", ABX_T_INT, .required = true, ABX_MIN(1), .doc = "Process id"},
    {"timeout", ABX_T_NUMBER, .dflt = "30", ABX_RANGE(0, 50),
     .doc = "Seconds to wait for the exit (at most 50, under an MCP client's 60 s timeout); then status running"},
    {0},
};
static const abx_param stream_params[] = {
    {"pid", ABX_T_INT, .required = true, ABX_MIN(1), .doc = "Process id"},
    {"offset", ABX_T_INT, .dflt = "0", ABX_MIN(0), .doc = "Start at this stdout offset (Last-Event-ID wins)"},
    {"stderr_offset", ABX_T_INT, .dflt = "0", ABX_MIN(0), .doc = "Start at this stderr offset"},
    {"encoding", ABX_T_ENUM, .dflt = "\"utf8\"", .choices = "utf8|base64",
     .doc = "utf8: output as text (bytes that are not text become U+FFFD); base64: the raw bytes, encoding base64"},
    ABX_TOOL_STREAM_PARAMS,
    {0},
};
static const abx_param write_params[] = {
    {"pid", ABX_T_INT, .required = true, ABX_MIN(1), .doc = "Process id"},
    {"data", ABX_T_STRING, .doc = "Text to write to stdin"},
    {"eof", ABX_T_BOOL, .dflt = "false", .doc = "Close stdin after writing"},
    {"encoding", ABX_T_ENUM, .dflt = "\"utf8\"", .choices = "utf8|base64",
     .doc = "utf8: data is the text itself; base64: data is base64 of the bytes to write"},
    {0},
};
static const abx_param signal_params[] = {
    {"pid", ABX_T_INT, .required = true, ABX_MIN(1), .doc = "Process id"},
    {"signal", ABX_T_STRING, .dflt = "\"TERM\"", .doc = "Signal name: TERM, KILL, INT, HUP, USR1, ..."},
    {0},
};

/* results: what each op answers */
static const abx_param proc_result[] = {
    ABX_PROC_FIELDS,
    {0},
};

static const abx_param proc_list_result[] = {
    {"processes", ABX_T_LIST, ABX_T_OBJECT, .required = true, .fields = proc_result},
    {0},
};

static const abx_param output_result[] = {
    {"stdout", ABX_T_STRING, .required = true},
    {"stdout_start", ABX_T_INT, .required = true, .doc = "The offset stdout starts at"},
    {"offset", ABX_T_INT, .required = true, .doc = "The next stdout offset to ask for"},
    {"stdout_dropped", ABX_T_BOOL, .required = true, .doc = "The asked offset fell off the ring"},
    {"stdout_total", ABX_T_INT, .required = true},
    {"stderr", ABX_T_STRING, .required = true},
    {"stderr_start", ABX_T_INT, .required = true},
    {"stderr_offset", ABX_T_INT, .required = true, .doc = "The next stderr offset to ask for"},
    {"stderr_dropped", ABX_T_BOOL, .required = true},
    {"stderr_total", ABX_T_INT, .required = true},
    {"running", ABX_T_BOOL, .required = true},
    {"status", ABX_T_ENUM, .required = true, .choices = ABX_PROC_STATUS_CHOICES},
    {"exit_code", ABX_T_INT, .required = true, .nullable = true},
    {"pid", ABX_T_INT, .required = true},
    {0},
};

static const abx_param wait_result[] = {
    ABX_PROC_FIELDS,
    {"timed_out_waiting", ABX_T_BOOL, .required = true, .doc = "The wait ended before the process"},
    {0},
};

static const abx_param write_result[] = {
    {"written", ABX_T_INT, .required = true, .doc = "Bytes written"},
    {"eof", ABX_T_BOOL, .required = true, .doc = "stdin was closed"},
    {0},
};

static const abx_param signal_result[] = {
    {"pid", ABX_T_INT, .required = true},
    {"signal", ABX_T_STRING, .required = true},
    {0},
};

ABX_OUTPUT_EVENT_ROWS(proc_stream);

static const abx_op_def process_ops[] = {
    {.id = "process.start", .result = proc_result, .effects = ABX_EFF_EXEC,
     .summary = "Start a confined background process; its output is kept whether or not anyone listens.",
     .http = {"POST /process"}, .params = start_params, .one_of = "command|argv",
     .limits = ABX_LIM_TIMEOUT | ABX_LIM_RATE | ABX_LIM_CONCURRENCY | ABX_LIM_MEMORY | ABX_LIM_PIDS | ABX_LIM_CPU,
     .since = "0.1",
     .errors = "files.not_found files.not_a_directory files.access files.io process.spawn_failed sandbox.unavailable",
     .handler = process_start},
    {.id = "process.list", .result = proc_list_result, .effects = ABX_EFF_READ, .summary = "The caller's processes (admins see all).",
     .http = {"GET /process/list"}, .params = list_params, .since = "0.1", .handler = process_list},
    {.id = "process.get", .result = proc_result, .effects = ABX_EFF_READ, .summary = "State, exit code and timing of a process.",
     .http = {"GET /process/{pid}"}, .params = pid_params, .since = "0.1",
     .errors = "process.not_found", .handler = process_get},
    {.id = "process.output", .result = output_result, .effects = ABX_EFF_READ,
     .summary = "Output by byte offset (with optional long-poll); says when the offset fell off the ring.",
     .http = {"GET /process/{pid}/output"}, .params = output_params, .limits = ABX_LIM_MAX_BYTES, .since = "0.1",
     .errors = "process.not_found", .handler = process_output},
    {.id = "process.wait", .result = wait_result, .effects = ABX_EFF_READ,
     .summary = "Wait (at most timeout seconds) for a process to exit: its exit code and status, or status running.",
     .http = {"POST /process/{pid}/wait"}, .params = wait_params, .since = "0.2",
     .errors = "process.not_found", .handler = process_wait},
    {.id = "process.stream", .events = proc_stream_events, .effects = ABX_EFF_READ,
     .summary = "Output as server-sent events; resumable with Last-Event-ID.", .http = {"GET /process/{pid}/stream"},
     .params = stream_params, .stream = ABX_STREAM_SSE, .since = "0.1",
     .errors = "process.not_found", .handler = process_stream},
    {.id = "process.write", .result = write_result, .effects = ABX_EFF_EXEC, .summary = "Write to a process's stdin, optionally closing it.",
     .http = {"POST /process/{pid}/stdin"}, .params = write_params, .since = "0.1",
     .errors = "process.not_found process.not_running process.stdin_closed", .handler = process_write},
    {.id = "process.signal", .result = signal_result, .effects = ABX_EFF_EXEC, .summary = "Send a signal by name to the process group.",
     .http = {"POST /process/{pid}/signal"}, .params = signal_params, .since = "0.1",
     .errors = "process.not_found process.not_running", .handler = process_signal},
    {0},
};

const abx_namespace abx_ns_process = {.name = "process", .ops = process_ops};
