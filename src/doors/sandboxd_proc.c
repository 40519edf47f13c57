/* sandboxd_proc.c — process.v1.ProcessService (third_party/agent-sandbox/process/v1/
 * process.proto) as alternate bindings of abx ops: Start → process.start (a PTY:
 * terminal.create), an InitEvent, then the process's output relayed from process.stream
 * (one admitted call for the stream's life) as stdout/stderr events and its ExitEvent;
 * Execute → commands.run (waits, whole output); WriteStdin → process.write;
 * SendSignal → process.signal; ResizeTTY → terminal.resize. A process killed by a
 * signal exits with -1, as Go's ExitCode() says (the reference daemon's language). */
#include "doors/sandboxd.h"
#include "process/v1/process.pb-c.h"
#include <stdlib.h>
#include <string.h>

#define UNPACK(T, fn)                                                                                               \
    T *q = fn(NULL, len, req);                                                                                      \
    if (!q) {                                                                                                       \
        abx_sbx_fail_msg(st, SBX_INVALID_ARGUMENT, "the request is not a valid " #T " message");                    \
        return;                                                                                                     \
    }

/* Pack and send one message; false when the call is gone. */
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

/* A ProcessConfig's env_vars as an abx env object (NULL when none). */
static json_t *env_of(const Process__V1__ProcessConfig *pc)
{
    if (!pc->n_env_vars)
        return NULL;
    json_t *env = json_object();
    for (size_t i = 0; i < pc->n_env_vars; i++)
        if (pc->env_vars[i]->key)
            json_object_set_new(env, pc->env_vars[i]->key, json_string(pc->env_vars[i]->value ? pc->env_vars[i]->value : ""));
    return env;
}

/* The command words as argv; NULL when there is none (or one is not UTF-8). */
static json_t *argv_of(const Process__V1__ProcessConfig *pc)
{
    if (!pc || !pc->n_command || !pc->command[0][0])
        return NULL;
    json_t *a = json_array();
    for (size_t i = 0; i < pc->n_command; i++) {
        json_t *w = json_string(pc->command[i]);
        if (!w) {
            json_decref(a);
            return NULL;
        }
        json_array_append_new(a, w);
    }
    return a;
}

static void add_common(json_t *args, const Process__V1__ProcessConfig *pc)
{
    json_t *env = env_of(pc);
    if (env)
        json_object_set_new(args, "env", env);
    if (pc->cwd && pc->cwd[0])
        json_object_set_new(args, "cwd", json_string(pc->cwd));
}

/* The words as one command line for terminal.create (each single-quoted). */
static json_t *command_line(const json_t *argv)
{
    abx_buf b;
    abx_buf_init(&b, 0);
    size_t i;
    const json_t *w;
    json_array_foreach(argv, i, w) {
        abx_buf_puts(&b, i ? " '" : "'");
        for (const char *q = json_string_value(w); *q; q++)
            abx_buf_puts(&b, *q == '\'' ? "'\\''" : (char[]){*q, 0});
        abx_buf_putc(&b, '\'');
    }
    json_t *j = b.failed ? NULL : json_string(b.data ? b.data : "");
    abx_buf_release(&b);
    return j;
}

/* ---- Start: the output stream ---- */

typedef struct relay {
    const sbx_sink *out;
    abx_buf sse;
    bool done, gone;
} relay;

/* process.stream was asked for base64: the bytes as the process wrote them */
static void relay_data(relay *rl, bool err, const json_t *b64)
{
    size_t n = 0;
    unsigned char *raw = json_string_length(b64) ? abx_base64_decode(json_string_value(b64), json_string_length(b64), &n)
                                                 : NULL;
    if (!raw || !n) {
        free(raw);
        return;
    }
    Process__V1__StartResponse m = PROCESS__V1__START_RESPONSE__INIT;
    m.event_case = err ? PROCESS__V1__START_RESPONSE__EVENT_STDERR : PROCESS__V1__START_RESPONSE__EVENT_STDOUT;
    ProtobufCBinaryData bd = {n, raw};
    if (err)
        m.stderr = bd;
    else
        m.stdout = bd;
    rl->gone = rl->gone || !send_msg(rl->out, &m.base);
    free(raw);
}

static void relay_exit(relay *rl, const json_t *rec)
{
    const json_t *code = json_object_get(rec, "exit_code");
    Process__V1__ExitEvent ex = PROCESS__V1__EXIT_EVENT__INIT;
    ex.exit_code = json_is_integer(code) ? (int32_t)json_integer_value(code) : -1;
    Process__V1__StartResponse m = PROCESS__V1__START_RESPONSE__INIT;
    m.event_case = PROCESS__V1__START_RESPONSE__EVENT_EXIT;
    m.exit = &ex;
    rl->gone = rl->gone || !send_msg(rl->out, &m.base);
    rl->done = true;
}

/* One server-sent event of process.stream → the response events. */
static void relay_event(relay *rl, const char *ev, size_t len)
{
    char name[16] = "";
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
    json_error_t je;
    json_t *d = data ? json_loadb(data, strcspn(data, "\n"), 0, &je) : NULL;
    if (strcmp(name, "stdout") == 0 || strcmp(name, "stderr") == 0)
        relay_data(rl, name[3] == 'e', json_object_get(d, "data"));
    else if (strcmp(name, "exit") == 0)
        relay_exit(rl, d);
    json_decref(d);
}

static bool take_event(void *ud, const char *ev, size_t len)
{
    relay *rl = ud;
    relay_event(rl, ev, len);
    return !rl->done;
}

static void relay_stream(const sbx_caller *c, int pid, const sbx_sink *out, sbx_status *st)
{
    json_t *args = json_pack("{s:i, s:s}", "pid", pid, "encoding", "base64");
    abx_call_in in = {.door = ABX_DOOR_SANDBOXD, .principal = c->principal, .op = "process.stream", .args = args,
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
    relay rl = {.out = out};
    abx_buf_init(&rl.sse, 4 << 20);
    abx_reply *r = &x->reply;
    while (!rl.done && !rl.gone && !atomic_load(out->cancelled)) {
        char buf[16384];
        long n = r->stream_read(r->stream_state, buf, sizeof buf);
        if (n <= 0)
            break;
        abx_buf_append(&rl.sse, buf, (size_t)n);
        abx_sse_take(&rl.sse, take_event, &rl);
    }
    abx_buf_release(&rl.sse);
    abx_request_free(x); /* the process goes on if the client left: SendSignal ends it */
    if (!rl.done && !rl.gone && !atomic_load(out->cancelled))
        abx_sbx_fail_msg(st, SBX_UNAVAILABLE, "the process's output stream ended before its exit");
}

static void proc_start(const sbx_caller *c, const uint8_t *req, size_t len, const sbx_sink *out, sbx_status *st)
{
    UNPACK(Process__V1__StartRequest, process__v1__start_request__unpack)
    json_t *argv = argv_of(q->config);
    if (!argv) {
        process__v1__start_request__free_unpacked(q, NULL);
        abx_sbx_fail_msg(st, SBX_INVALID_ARGUMENT, "config.command must name a program (UTF-8 words)");
        return;
    }
    json_t *args;
    if (q->pty) {
        args = json_pack("{s:o*}", "command", command_line(argv));
        if (q->pty->cols)
            json_object_set_new(args, "cols", json_integer(q->pty->cols));
        if (q->pty->rows)
            json_object_set_new(args, "rows", json_integer(q->pty->rows));
        json_decref(argv);
    } else {
        args = json_pack("{s:o}", "argv", argv);
    }
    add_common(args, q->config);
    json_t *body;
    int s = abx_sbx_op(c, q->pty ? "terminal.create" : "process.start", args, &body);
    process__v1__start_request__free_unpacked(q, NULL);
    if (s != 200) {
        abx_sbx_fail(st, s, body);
        json_decref(body);
        return;
    }
    int pid = (int)json_integer_value(json_object_get(body, "pid"));
    json_decref(body);
    Process__V1__InitEvent init = PROCESS__V1__INIT_EVENT__INIT;
    init.process_id = pid;
    Process__V1__StartResponse m = PROCESS__V1__START_RESPONSE__INIT;
    m.event_case = PROCESS__V1__START_RESPONSE__EVENT_INIT;
    m.init = &init;
    if (send_msg(out, &m.base))
        relay_stream(c, pid, out, st);
}

/* ---- the unary methods ---- */

static void proc_execute(const sbx_caller *c, const uint8_t *req, size_t len, const sbx_sink *out, sbx_status *st)
{
    UNPACK(Process__V1__ExecuteRequest, process__v1__execute_request__unpack)
    json_t *argv = argv_of(q->config);
    if (!argv) {
        process__v1__execute_request__free_unpacked(q, NULL);
        abx_sbx_fail_msg(st, SBX_INVALID_ARGUMENT, "config.command must name a program (UTF-8 words)");
        return;
    }
    json_t *args = json_pack("{s:o}", "argv", argv);
    add_common(args, q->config);
    process__v1__execute_request__free_unpacked(q, NULL);
    json_t *body;
    int s = abx_sbx_op(c, "commands.run", args, &body);
    if (s != 200) {
        abx_sbx_fail(st, s, body);
        json_decref(body);
        return;
    }
    const json_t *code = json_object_get(body, "exit_code"), *o = json_object_get(body, "stdout"),
                 *e = json_object_get(body, "stderr");
    Process__V1__ExecuteResponse m = PROCESS__V1__EXECUTE_RESPONSE__INIT;
    m.exit_code = json_is_integer(code) ? (int32_t)json_integer_value(code) : -1;
    m.stdout = (ProtobufCBinaryData){json_string_length(o), (uint8_t *)json_string_value(o)};
    m.stderr = (ProtobufCBinaryData){json_string_length(e), (uint8_t *)json_string_value(e)};
    send_msg(out, &m.base);
    json_decref(body);
}

/* An op whose answer is an empty message of the given descriptor. */
static void empty_answer(const sbx_caller *c, const char *op, json_t *args, const ProtobufCMessageDescriptor *d,
                         const sbx_sink *out, sbx_status *st)
{
    json_t *body;
    int s = abx_sbx_op(c, op, args, &body);
    if (s != 200) {
        abx_sbx_fail(st, s, body);
    } else {
        ProtobufCMessage m;
        protobuf_c_message_init(d, &m);
        send_msg(out, &m);
    }
    json_decref(body);
}

static void proc_write_stdin(const sbx_caller *c, const uint8_t *req, size_t len, const sbx_sink *out,
                             sbx_status *st)
{
    UNPACK(Process__V1__WriteStdinRequest, process__v1__write_stdin_request__unpack)
    json_t *args = NULL;
    if (q->payload_case == PROCESS__V1__WRITE_STDIN_REQUEST__PAYLOAD_EOF)
        args = json_pack("{s:i, s:b}", "pid", q->process_id, "eof", 1);
    else if (q->payload_case == PROCESS__V1__WRITE_STDIN_REQUEST__PAYLOAD_INPUT) {
        size_t bl = 0; /* the bytes as sent: process.write takes base64 */
        char *b64 = abx_base64_encode((const char *)q->input.data, q->input.len, &bl);
        args = b64 ? json_pack("{s:i, s:s%, s:s}", "pid", q->process_id, "data", b64, bl, "encoding", "base64")
                   : NULL;
        free(b64);
    }
    process__v1__write_stdin_request__free_unpacked(q, NULL);
    if (!args) {
        abx_sbx_fail_msg(st, SBX_INTERNAL, "out of memory");
        return;
    }
    empty_answer(c, "process.write", args, &process__v1__write_stdin_response__descriptor, out, st);
}

static void proc_signal(const sbx_caller *c, const uint8_t *req, size_t len, const sbx_sink *out, sbx_status *st)
{
    UNPACK(Process__V1__SendSignalRequest, process__v1__send_signal_request__unpack)
    const char *name = q->signal == PROCESS__V1__SIGNAL__SIGNAL_SIGINT    ? "INT"
                       : q->signal == PROCESS__V1__SIGNAL__SIGNAL_SIGKILL ? "KILL"
                       : q->signal == PROCESS__V1__SIGNAL__SIGNAL_SIGTERM ? "TERM"
                                                                         : NULL;
    int pid = q->process_id;
    process__v1__send_signal_request__free_unpacked(q, NULL);
    if (!name) {
        abx_sbx_fail_msg(st, SBX_INVALID_ARGUMENT, "signal must be SIGINT, SIGTERM or SIGKILL");
        return;
    }
    empty_answer(c, "process.signal", json_pack("{s:i, s:s}", "pid", pid, "signal", name),
                 &process__v1__send_signal_response__descriptor, out, st);
}

static void proc_resize(const sbx_caller *c, const uint8_t *req, size_t len, const sbx_sink *out, sbx_status *st)
{
    UNPACK(Process__V1__ResizeTTYRequest, process__v1__resize_ttyrequest__unpack)
    json_t *args = json_pack("{s:i, s:i, s:i}", "id", q->process_id, "cols", (int)q->cols, "rows", (int)q->rows);
    process__v1__resize_ttyrequest__free_unpacked(q, NULL);
    empty_answer(c, "terminal.resize", args, &process__v1__resize_ttyresponse__descriptor, out, st);
}

const sbx_method abx_sbx_proc_methods[] = {
    {"/process.v1.ProcessService/Start", &process__v1__start_request__descriptor, proc_start},
    {"/process.v1.ProcessService/Execute", &process__v1__execute_request__descriptor, proc_execute},
    {"/process.v1.ProcessService/WriteStdin", &process__v1__write_stdin_request__descriptor, proc_write_stdin},
    {"/process.v1.ProcessService/SendSignal", &process__v1__send_signal_request__descriptor, proc_signal},
    {"/process.v1.ProcessService/ResizeTTY", &process__v1__resize_ttyrequest__descriptor, proc_resize},
    {NULL, NULL, NULL},
};
