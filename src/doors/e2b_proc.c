/* e2b_proc.c — envd's process.Process as alternate bindings of process.*: Start →
 * process.start, then its output as envd's event stream (start, data, keepalive, end),
 * relayed from process.stream's (one admitted call for the stream's life); Connect → the same stream of a running process
 * by pid or tag, from the first byte abx still holds (output replay); List →
 * process.list; SendInput / CloseStdin → process.write; SendSignal → process.signal. */
#include "doors/e2b.h"
#include "process/process.pb-c.h"
#include <stdlib.h>
#include <string.h>

typedef struct proc_stream {
    e2b_call call;               /* encoding */
    const ProtobufCMessageDescriptor *out;
    bool pty;                    /* a terminal: its output is envd's pty data */
    abx_request *inner;          /* process.stream: its reply reads the process's SSE events */
    abx_buf sse;                 /* what it sent, not yet a whole event */
    abx_buf pending;             /* frames made, not yet read */
    size_t sent;
    bool done;
} proc_stream;

static void stream_free(void *p)
{
    proc_stream *s = p;
    abx_request_free(s->inner); /* the process goes on: envd's streams do not own it either */
    abx_buf_release(&s->sse);
    abx_buf_release(&s->pending);
    abx_free(s);
}

static void push(proc_stream *s, json_t *event, uint8_t flags)
{
    size_t n = 0;
    json_t *msg = flags & 2 ? event : json_pack("{s:o}", "event", event);
    char *f = abx_e2b_frame(&s->call, s->out, msg, flags, &n);
    if (f)
        abx_buf_append(&s->pending, f, n);
    free(f);
}

/* process.stream was asked for base64: the raw bytes, as envd's bytes fields carry them */
static void push_data(proc_stream *s, const char *which, const json_t *b64)
{
    if (json_string_length(b64))
        push(s, json_pack("{s:{s:O}}", "data", which, b64), 0);
}

/* process.stream's exit event (the process's record) → envd's end event and the end */
static void push_end(proc_stream *s, const json_t *rec)
{
    const json_t *code = json_object_get(rec, "exit_code");
    const char *sig = json_string_value(json_object_get(rec, "signal"));
    int ec = json_is_integer(code) ? (int)json_integer_value(code) : -1;
    char text[64];
    if (json_is_integer(code))
        snprintf(text, sizeof text, "exit status %d", ec);
    else
        snprintf(text, sizeof text, "signal: %s", sig ? sig : "killed");
    push(s, json_pack("{s:{s:i, s:b, s:s}}", "end", "exitCode", ec, "exited", json_is_integer(code), "status", text),
         0);
    push(s, json_object(), 2);
    s->done = true;
}

/* One server-sent event of process.stream → envd's events. */
static void one_event(proc_stream *s, const char *ev, size_t len)
{
    if (len && ev[0] == ':') {
        push(s, json_pack("{s:{}}", "keepalive"), 0);
        return;
    }
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
    if (strcmp(name, "start") == 0)
        push(s, json_pack("{s:{s:O}}", "start", "pid", json_object_get(d, "pid")), 0);
    else if (strcmp(name, "stdout") == 0)
        push_data(s, s->pty ? "pty" : "stdout", json_object_get(d, "data"));
    else if (strcmp(name, "stderr") == 0)
        push_data(s, "stderr", json_object_get(d, "data"));
    else if (strcmp(name, "exit") == 0)
        push_end(s, d);
    json_decref(d);
}

static bool take_event(void *ud, const char *ev, size_t len)
{
    proc_stream *s = ud;
    one_event(s, ev, len);
    return !s->done;
}

static long stream_read(void *p, char *buf, size_t max)
{
    proc_stream *s = p;
    while (s->sent == s->pending.len) {
        s->pending.len = 0;
        s->sent = 0;
        if (s->done)
            return 0;
        char in[16384];
        abx_reply *r = &s->inner->reply;
        long n = r->stream_read(r->stream_state, in, sizeof in);
        if (n <= 0) { /* ended without its exit event (the server stops) */
            push(s, json_pack("{s:{s:s, s:s}}", "error", "code", "unavailable", "message", "the stream ended"), 2);
            s->done = true;
            continue;
        }
        abx_buf_append(&s->sse, in, (size_t)n);
        abx_sse_take(&s->sse, take_event, s);
    }
    size_t n = s->pending.len - s->sent;
    if (n > max)
        n = max;
    memcpy(buf, s->pending.data + s->sent, n);
    s->sent += n;
    return (long)n;
}

/* The process's events from its first byte abx still holds: process.stream, admitted
 * once, relayed for the stream's life. */
static void answer_stream(e2b_call *c, int pid, bool pty, const ProtobufCMessageDescriptor *out)
{
    json_t *args = json_pack("{s:i, s:s}", "pid", pid, "encoding", "base64");
    abx_call_in in = {.door = ABX_DOOR_E2B, .principal = c->principal, .op = "process.stream", .args = args,
                      .conn_fd = -1, .client = c->r->client};
    abx_request *x = abx_call_begin(c->server, &in);
    json_decref(args);
    abx_err e = !x ? ABX_E_SERVER_UNAVAILABLE : x->reply.err ? x->reply.err
                                              : !x->reply.stream_read ? ABX_E_SERVER_UNAVAILABLE : ABX_OK;
    proc_stream *s = e == ABX_OK ? abx_calloc(1, sizeof *s) : NULL;
    if (!s) {
        json_t *b = abx_error_json(e ? e : ABX_E_SERVER_UNAVAILABLE, x ? x->reply.message : NULL, NULL);
        abx_e2b_fail(c, abx_err_status(e ? e : ABX_E_SERVER_UNAVAILABLE), b);
        json_decref(b);
        abx_request_free(x);
        return;
    }
    s->call = (e2b_call){.server = c->server, .proto = c->proto, .stream = true};
    s->out = out;
    s->pty = pty;
    s->inner = x;
    abx_buf_init(&s->sse, 4 << 20);
    abx_buf_init(&s->pending, 0);
    abx_reply_stream(&c->r->reply, c->proto ? "application/connect+proto" : "application/connect+json", stream_read, s,
                     stream_free);
}

/* envd's cmd and args as one command line for terminal.create (each word single-quoted) */
static json_t *command_line(const json_t *pc)
{
    abx_buf b;
    abx_buf_init(&b, 0);
    const char *cmd = json_string_value(json_object_get(pc, "cmd"));
    abx_buf_puts(&b, cmd ? cmd : "bash");
    size_t i;
    const json_t *a;
    json_array_foreach(json_object_get(pc, "args"), i, a) {
        abx_buf_puts(&b, " '");
        for (const char *q = json_string_value(a); q && *q; q++)
            abx_buf_puts(&b, *q == '\'' ? "'\\''" : (char[]){*q, 0});
        abx_buf_putc(&b, '\'');
    }
    json_t *j = b.failed ? NULL : json_string(b.data ? b.data : "");
    abx_buf_release(&b);
    return j;
}

static json_t *start_args(const json_t *req, bool pty)
{
    const json_t *pc = json_object_get(req, "process");
    json_t *args;
    if (pty) {
        const json_t *size = json_object_get(json_object_get(req, "pty"), "size");
        args = json_pack("{s:o*}", "command", command_line(pc));
        if (json_integer_value(json_object_get(size, "cols")) > 0)
            json_object_set(args, "cols", json_object_get(size, "cols"));
        if (json_integer_value(json_object_get(size, "rows")) > 0)
            json_object_set(args, "rows", json_object_get(size, "rows"));
    } else {
        json_t *argv = json_array();
        const char *cmd = json_string_value(json_object_get(pc, "cmd"));
        json_array_append_new(argv, json_string(cmd ? cmd : ""));
        size_t i;
        const json_t *a;
        json_array_foreach(json_object_get(pc, "args"), i, a) json_array_append(argv, (json_t *)a);
        args = json_pack("{s:o}", "argv", argv);
        if (json_string_length(json_object_get(req, "tag")))
            json_object_set(args, "tag", json_object_get(req, "tag"));
    }
    if (args && json_object_size(json_object_get(pc, "envs")))
        json_object_set(args, "env", json_object_get(pc, "envs"));
    if (args && json_string_length(json_object_get(pc, "cwd")))
        json_object_set(args, "cwd", json_object_get(pc, "cwd"));
    return args;
}

/* Start → process.start, or terminal.create with a PTY; then the event stream. */
static void proc_start(e2b_call *c, const json_t *req)
{
    bool pty = json_object_get(req, "pty") != NULL;
    json_t *args = start_args(req, pty);
    if (!args) {
        abx_e2b_fail_msg(c, ABX_E_SERVER_UNAVAILABLE, "out of memory");
        return;
    }
    json_t *body;
    int st = abx_e2b_op(c, pty ? "terminal.create" : "process.start", args, &body);
    if (st != 200) {
        abx_e2b_fail(c, st, body);
        json_decref(body);
        return;
    }
    int pid = (int)json_integer_value(json_object_get(body, "pid"));
    json_decref(body);
    /* stdin: false (the SDK's default) is a process without input: envd gives it EOF at
     * once; absent keeps it open, as envd does for older clients */
    if (!pty && json_is_false(json_object_get(req, "stdin"))) {
        st = abx_e2b_op(c, "process.write", json_pack("{s:i, s:s, s:b}", "pid", pid, "data", "", "eof", 1), &body);
        json_decref(body);
    }
    answer_stream(c, pid, pty, &process__start_response__descriptor);
}

/* The pid a ProcessSelector names ({pid} or {tag}, the caller's own processes), or 0. */
static int pid_of(e2b_call *c, const json_t *req)
{
    const json_t *sel = json_object_get(req, "process");
    if (json_is_integer(json_object_get(sel, "pid")))
        return (int)json_integer_value(json_object_get(sel, "pid"));
    const char *tag = json_string_value(json_object_get(sel, "tag"));
    json_t *body;
    int pid = 0;
    if (tag && abx_e2b_op(c, "process.list", json_pack("{s:b}", "running", 1), &body) == 200) {
        size_t i;
        const json_t *p;
        json_array_foreach(json_object_get(body, "processes"), i, p) {
            const char *t = json_string_value(json_object_get(p, "tag"));
            if (t && strcmp(t, tag) == 0)
                pid = (int)json_integer_value(json_object_get(p, "pid"));
        }
    }
    if (tag)
        json_decref(body);
    if (!pid)
        abx_e2b_fail_msg(c, ABX_E_PROCESS_NOT_FOUND, "no such process");
    return pid;
}

static void proc_connect(e2b_call *c, const json_t *req)
{
    int pid = pid_of(c, req);
    if (!pid)
        return;
    json_t *body; /* it must exist and be the caller's: process.get says so */
    int st = abx_e2b_op(c, "process.get", json_pack("{s:i}", "pid", pid), &body);
    if (st != 200)
        abx_e2b_fail(c, st, body);
    else
        answer_stream(c, pid, json_is_true(json_object_get(body, "pty")), &process__connect_response__descriptor);
    json_decref(body);
}

static void proc_list(e2b_call *c, const json_t *req)
{
    (void)req;
    json_t *body;
    int st = abx_e2b_op(c, "process.list", json_pack("{s:b}", "running", 1), &body);
    if (st != 200) {
        abx_e2b_fail(c, st, body);
        json_decref(body);
        return;
    }
    json_t *list = json_array();
    size_t i;
    const json_t *p;
    json_array_foreach(json_object_get(body, "processes"), i, p) {
        const json_t *argv = json_object_get(p, "argv");
        json_t *args = json_array();
        for (size_t k = 1; k < json_array_size(argv); k++)
            json_array_append(args, json_array_get(argv, k));
        const char *cmd = json_string_value(json_array_get(argv, 0));
        json_t *info = json_pack("{s:{s:s, s:o}, s:i}", "config", "cmd", cmd ? cmd : "", "args", args, "pid",
                                 (int)json_integer_value(json_object_get(p, "pid")));
        if (json_is_string(json_object_get(p, "tag")))
            json_object_set(info, "tag", json_object_get(p, "tag"));
        json_array_append_new(list, info);
    }
    json_decref(body);
    abx_e2b_unary(c, &process__list_response__descriptor, json_pack("{s:o}", "processes", list));
}

static void simple(e2b_call *c, const char *op, json_t *args, const ProtobufCMessageDescriptor *out)
{
    json_t *body;
    int st = abx_e2b_op(c, op, args, &body);
    if (st != 200)
        abx_e2b_fail(c, st, body);
    else
        abx_e2b_unary(c, out, json_object());
    json_decref(body);
}

/* One ProcessInput (stdin or pty bytes) → process.write; false with the call failed. */
static bool write_input(e2b_call *c, int pid, const json_t *in)
{
    const char *b64 = json_string_value(json_object_get(in, "stdin"));
    if (!b64)
        b64 = json_string_value(json_object_get(in, "pty"));
    json_t *body; /* the bytes as they came: process.write takes base64 */
    int st = abx_e2b_op(c, "process.write",
                        json_pack("{s:i, s:s, s:s}", "pid", pid, "data", b64 ? b64 : "", "encoding", "base64"), &body);
    if (st != 200)
        abx_e2b_fail(c, st, body);
    json_decref(body);
    return st == 200;
}

static void proc_send_input(e2b_call *c, const json_t *req)
{
    int pid = pid_of(c, req);
    if (pid && write_input(c, pid, json_object_get(req, "input")))
        abx_e2b_unary(c, &process__send_input_response__descriptor, json_object());
}

static void proc_close_stdin(e2b_call *c, const json_t *req)
{
    int pid = pid_of(c, req);
    if (pid)
        simple(c, "process.write", json_pack("{s:i, s:b}", "pid", pid, "eof", 1),
               &process__close_stdin_response__descriptor);
}

static void proc_signal(e2b_call *c, const json_t *req)
{
    int pid = pid_of(c, req);
    if (!pid)
        return;
    const char *sig = json_string_value(json_object_get(req, "signal"));
    const char *name = sig && strcmp(sig, "SIGNAL_SIGKILL") == 0 ? "KILL" : "TERM";
    simple(c, "process.signal", json_pack("{s:i, s:s}", "pid", pid, "signal", name),
           &process__send_signal_response__descriptor);
}

/* Update {pty: {size}} → terminal.resize */
static void proc_update(e2b_call *c, const json_t *req)
{
    int pid = pid_of(c, req);
    if (!pid)
        return;
    const json_t *size = json_object_get(json_object_get(req, "pty"), "size");
    if (!size) { /* nothing to change */
        abx_e2b_unary(c, &process__update_response__descriptor, json_object());
        return;
    }
    simple(c, "terminal.resize",
           json_pack("{s:i, s:I, s:I}", "id", pid, "cols", json_integer_value(json_object_get(size, "cols")), "rows",
                     json_integer_value(json_object_get(size, "rows"))),
           &process__update_response__descriptor);
}

/* StreamInput (a client stream, read whole): start{process}, then data{input} events in
 * order, each a process.write; the answer is one StreamInputResponse and the end. */
static void proc_stream_input(e2b_call *c, const json_t *req)
{
    (void)req;
    const char *body = c->r->body.data ? c->r->body.data : "", *msg;
    size_t len = c->r->body.len, at = 0, mlen;
    long k;
    int pid = 0;
    while ((k = abx_e2b_envelope(body, len, &at, &msg, &mlen)) > 0) {
        if ((k - 1) & 2) /* the client's end-of-stream */
            break;
        json_t *ev = abx_e2b_decode(c, &process__stream_input_request__descriptor, msg, mlen);
        if (!ev)
            return;
        const json_t *start = json_object_get(ev, "start"), *data = json_object_get(ev, "data");
        bool ok = true;
        if (start)
            ok = (pid = pid_of(c, start)) != 0;
        else if (data && !pid)
            ok = (abx_e2b_fail_msg(c, ABX_E_ARGS_INVALID, "data before the start event"), false);
        else if (data)
            ok = write_input(c, pid, json_object_get(data, "input"));
        json_decref(ev);
        if (!ok)
            return;
    }
    if (k < 0) {
        abx_e2b_fail_msg(c, ABX_E_REQUEST_BAD_JSON, "a malformed envelope in the request stream");
        return;
    }
    abx_buf out;
    abx_buf_init(&out, 0);
    size_t n = 0;
    char *f = abx_e2b_frame(c, &process__stream_input_response__descriptor, json_object(), 0, &n);
    if (f)
        abx_buf_append(&out, f, n);
    free(f);
    f = abx_e2b_frame(c, NULL, json_object(), 2, &n);
    if (f)
        abx_buf_append(&out, f, n);
    free(f);
    abx_reply_bytes(&c->r->reply, out.data ? out.data : "", out.len,
                    c->proto ? "application/connect+proto" : "application/connect+json");
    abx_buf_release(&out);
}

const e2b_method abx_e2b_proc_methods[] = {
    {"/process.Process/Start", &process__start_request__descriptor, &process__start_response__descriptor, true,
     proc_start},
    {"/process.Process/Connect", &process__connect_request__descriptor, &process__connect_response__descriptor, true,
     proc_connect},
    {"/process.Process/List", &process__list_request__descriptor, &process__list_response__descriptor, false,
     proc_list},
    {"/process.Process/SendInput", &process__send_input_request__descriptor,
     &process__send_input_response__descriptor, false, proc_send_input},
    {"/process.Process/CloseStdin", &process__close_stdin_request__descriptor,
     &process__close_stdin_response__descriptor, false, proc_close_stdin},
    {"/process.Process/SendSignal", &process__send_signal_request__descriptor,
     &process__send_signal_response__descriptor, false, proc_signal},
    {"/process.Process/Update", &process__update_request__descriptor, &process__update_response__descriptor, false,
     proc_update},
    {"/process.Process/StreamInput", &process__stream_input_request__descriptor,
     &process__stream_input_response__descriptor, false, proc_stream_input, true},
    {NULL, NULL, NULL, false, NULL},
};
