/* kernel_exec.c — one cell in a kernel: execute_request on shell, then the iopub
 * messages whose parent is that request until the kernel is idle again and the reply
 * has come, gathered into an Execution close to E2B's:
 *   {execution_count, results: [MIME bundle + is_main_result], logs: {stdout, stderr},
 *    error: {name, value, traceback} | null, truncated, timed_out}
 * While the cell runs, its host.* calls are served: each enters the pipeline as the
 * kernel's creator through door `kernel`, its ledger group linked to the cell's. A cell
 * past its timeout gets SIGINT (the kernel and its state stay); a kernel whose process
 * goes away is reported by the process, not by a heartbeat. */
#include "builtin/exec.h"
#include "builtin/kernels.h"
#include <signal.h>
#include <stdio.h>
#include <string.h>

#define DEFAULT_OUTPUT (1024 * 1024)
#define DEFAULT_CELL_MS (60 * 1000)
#define INTERRUPT_GRACE_MS 5000

/* One output stream under max_output_bytes: every chunk while under the cap; past it,
 * the first and the last half of the cap (head and tail) and the total. */
typedef struct outcap {
    json_t *chunks;
    abx_buf head, tail;
    uint64_t total;
    size_t half;
} outcap;

static void cap_init(outcap *o, size_t cap)
{
    o->chunks = json_array();
    o->half = cap / 2 ? cap / 2 : 1;
    o->total = 0;
    abx_buf_init(&o->head, o->half);
    abx_buf_init(&o->tail, 2 * o->half + 1);
}

static void cap_add(outcap *o, const char *p, size_t n)
{
    o->total += n;
    if (o->total <= 2 * o->half)
        json_array_append_new(o->chunks, abx_text_json(p, n));
    if (o->head.len < o->half) {
        size_t take = n < o->half - o->head.len ? n : o->half - o->head.len;
        abx_buf_append(&o->head, p, take);
    }
    if (n >= o->half) {
        o->tail.len = 0;
        abx_buf_append(&o->tail, p + n - o->half, o->half);
        return;
    }
    if (o->tail.len + n > 2 * o->half) { /* keep the last half only */
        size_t keep = o->tail.len > o->half ? o->half : o->tail.len;
        memmove(o->tail.data, o->tail.data + o->tail.len - keep, keep);
        o->tail.len = keep;
    }
    abx_buf_append(&o->tail, p, n);
}

/* The stream's list (stolen into the Execution); true when it was cut. */
static bool cap_finish(outcap *o, json_t **out)
{
    bool cut = o->total > 2 * o->half;
    if (cut) {
        json_decref(o->chunks);
        size_t keep = o->tail.len > o->half ? o->half : o->tail.len;
        *out = json_pack("[o, s, o]", abx_text_json(o->head.data ? o->head.data : "", o->head.len),
                         "\n[... output truncated ...]\n",
                         abx_text_json(o->tail.data ? o->tail.data + o->tail.len - keep : "", keep));
    } else {
        *out = o->chunks;
    }
    o->chunks = NULL;
    abx_buf_release(&o->head);
    abx_buf_release(&o->tail);
    return cut;
}

typedef struct cell {
    abx_host *srv;              /* host calls enter its pipeline */
    uint64_t group;             /* the cell's ledger group: its host calls link to it */
    abx_buf *events;            /* kernels.stream: SSE frames go here as they happen; NULL: gather */
    kernel *k;
    char msg_id[40];
    outcap out[2];
    json_t *results, *error;
    int count;
    bool idle, replied, timed_out, mem_pressure;
    int64_t deadline;
    size_t result_bytes, result_cap;
    bool results_cut;
    bool sent;                  /* the execute_request went out */
    bool env_set;               /* the cell's env was set: restore it after the cell */
} cell;

static json_t *mime_bundle(const json_t *data, bool main_result)
{
    json_t *b = json_is_object(data) ? json_deep_copy(data) : json_object();
    if (!json_is_string(json_object_get(b, "text/plain"))) /* E2B always has text */
        json_object_set_new(b, "text/plain", json_string(""));
    json_object_set_new(b, "is_main_result", json_boolean(main_result));
    return b;
}

static void emit(cell *c, const char *event, json_t *data)
{
    char *js = data ? json_dumps(data, JSON_COMPACT) : NULL;
    json_decref(data);
    abx_buf_printf(c->events, "event: %s\ndata: %s\n\n", event, js ? js : "{}");
    free(js);
}

static void on_iopub(cell *c, const abx_jmsg *m)
{
    const char *t = m->msg_type;
    if (strcmp(t, "status") == 0) {
        if (strcmp(json_string_value(json_object_get(m->content, "execution_state")) ?: "", "idle") == 0)
            c->idle = true;
    } else if (strcmp(t, "stream") == 0) {
        const char *name = json_string_value(json_object_get(m->content, "name"));
        const json_t *text = json_object_get(m->content, "text");
        if (name && json_is_string(text)) {
            outcap *o = &c->out[strcmp(name, "stderr") == 0];
            bool under = o->total + json_string_length(text) <= 2 * o->half;
            cap_add(o, json_string_value(text), json_string_length(text));
            if (c->events && under)
                emit(c, o == &c->out[1] ? "stderr" : "stdout", json_pack("{s:O}", "text", text));
        }
    } else if (strcmp(t, "execute_result") == 0 || strcmp(t, "display_data") == 0) {
        json_t *b = mime_bundle(json_object_get(m->content, "data"), t[0] == 'e');
        char *s = json_dumps(b, JSON_COMPACT);
        size_t n = s ? strlen(s) : 0;
        free(s);
        if (c->result_bytes + n > c->result_cap) { /* results count against the cap too */
            c->results_cut = true;
            json_decref(b);
            return;
        }
        c->result_bytes += n;
        if (c->events)
            emit(c, "result", b);
        else
            json_array_append_new(c->results, b);
    } else if (strcmp(t, "error") == 0) {
        json_decref(c->error);
        c->error = json_pack("{s:O?, s:O?, s:O?}", "name", json_object_get(m->content, "ename"), "value",
                             json_object_get(m->content, "evalue"), "traceback",
                             json_object_get(m->content, "traceback"));
        if (c->events)
            emit(c, "error", json_incref(c->error));
    }
}

/* One host.* request from the cell: checked against the kernel's credential, then a
 * call through the whole pipeline as the kernel's creator. */
static void serve_host(cell *c)
{
    json_t *req = NULL, *reply = NULL;
    int rc = abx_jconn_host_recv(c->k->conn, 0, &req);
    if (rc == 0)
        return;
    const char *cred = json_string_value(json_object_get(req, "credential"));
    const char *op = json_string_value(json_object_get(req, "op"));
    if (rc < 0 || !cred || strlen(cred) != strlen(c->k->credential) ||
        !abx_ct_equal(cred, c->k->credential, strlen(cred))) {
        reply = json_pack("{s:{s:s, s:s}}", "error", "code", "auth.invalid_token", "message",
                          "the host channel's credential is wrong");
    } else if (json_object_get(req, "submit_output")) {
        char msg[160];
        abx_err e = !c->k->run[0] ? ABX_E_RUN_NOT_FOUND
                                  : abx_run_complete(c->srv, c->k->run, c->k->owner,
                                                     json_object_get(req, "submit_output"), "submit_output", msg,
                                                     sizeof msg);
        if (!c->k->run[0])
            snprintf(msg, sizeof msg, "this kernel belongs to no run (kernels.create run:)");
        reply = e == ABX_OK ? json_pack("{s:s, s:s}", "run", c->k->run, "status", "completed")
                            : json_pack("{s:{s:s, s:s}}", "error", "code", abx_err_code(e), "message", msg);
    } else if (!op) {
        reply = json_pack("{s:{s:s, s:s}}", "error", "code", "args.invalid", "message", "a host call needs an op");
    } else {
        json_t *args = json_object_get(req, "args"), *body = NULL;
        int status = abx_host_call_kernel(c->srv, c->k->owner, op, json_is_object(args) ? args : NULL, c->group,
                                          &body);
        if (status >= 300 && !json_object_get(body, "error")) {
            json_decref(body);
            body = json_pack("{s:{s:s, s:i}}", "error", "code", "server.internal", "status", status);
        }
        reply = body;
    }
    abx_jconn_host_reply(c->k->conn, reply);
    json_decref(reply);
    json_decref(req);
}

/* The cause of a kernel's death from its process record. */
/* Why the kernel died, from its process record: the message and {exit_code, signal}. */
static json_t *death_of(cell *c, char *msg, size_t msglen)
{
    json_t *st = c->k->proc ? abx_proc_json(c->k->proc) : NULL;
    const char *sig = json_string_value(json_object_get(st, "signal")); /* "KILL", "SEGV", or null */
    json_int_t code = json_integer_value(json_object_get(st, "exit_code"));
    json_t *d = json_pack("{s:I, s:s?}", "exit_code", code, "signal", sig);
    if (sig)
        snprintf(msg, msglen, "the kernel died by SIG%s%s", sig,
                 strcmp(sig, "KILL") == 0 ? " (the OOM killer, a deletion or a limit sends it)" : "");
    else
        snprintf(msg, msglen, "the kernel exited with code %d", (int)code);
    json_decref(st);
    return d;
}

static abx_err died(cell *c, abx_reply *r)
{
    char msg[200];
    json_t *d = death_of(c, msg, sizeof msg);
    return abx_reply_error(r, ABX_E_KERNEL_DIED, d, "%s", msg);
}

/* One step of the cell (up to wait_ms): 1 done (idle + reply, or an interrupt not
 * honoured in its grace), 0 not yet, -1 the kernel died. Past the deadline the cell gets
 * SIGINT and a grace. */
static int cell_step(cell *c, int wait_ms)
{
    unsigned mask = (1u << ABX_J_SHELL) | (1u << ABX_J_IOPUB) | (1u << ABX_J_HOST);
    if (c->idle && c->replied)
        return 1;
    enum abx_jchan ch;
    abx_jmsg m;
    int got = abx_jconn_recv(c->k->conn, mask, wait_ms, &ch, &m);
    if (got == 1 && ch == ABX_J_HOST) {
        serve_host(c);
        return 0;
    }
    if (got == 1 && ch == ABX_J_N) { /* the memory watch (kernel_mem.c) */
        if (abx_kmem_fired(c->k) && !c->mem_pressure && !c->timed_out) {
            c->mem_pressure = true;
            abx_proc_signal(c->k->proc, SIGINT);
            c->deadline = abx_now_ms() + INTERRUPT_GRACE_MS;
        }
        return 0;
    }
    if (got == 1) {
        if (strcmp(m.parent_id, c->msg_id) == 0) {
            if (ch == ABX_J_IOPUB)
                on_iopub(c, &m);
            else if (strcmp(m.msg_type, "execute_reply") == 0) {
                c->replied = true;
                c->count = (int)json_integer_value(json_object_get(m.content, "execution_count"));
                const char *st = json_string_value(json_object_get(m.content, "status"));
                if (st && strncmp(st, "abort", 5) == 0 && !c->error) /* IRkernel's answer to SIGINT */
                    c->error = json_pack("{s:s, s:s, s:[]}", "name", "Interrupted", "value",
                                         "the kernel aborted the cell (interrupted)", "traceback");
            }
        }
        abx_jmsg_release(&m);
        return c->idle && c->replied;
    }
    if (!abx_proc_running(c->k->proc))
        return -1;
    if (abx_now_ms() >= c->deadline) {
        if (c->timed_out || c->mem_pressure) /* the interrupt was not honoured in the grace either */
            return 1;
        c->timed_out = true;
        abx_proc_signal(c->k->proc, SIGINT);
        c->deadline = abx_now_ms() + INTERRUPT_GRACE_MS;
    }
    return 0;
}

/* Admit a cell: the caller's kernel, its FIFO turn, the limits, the execute_request
 * sent. ABX_OK with *c ready (and a kernel reference and turn to give back), or the
 * error on r. */
static abx_err cell_begin(abx_ctx *ctx, const json_t *args, cell *c, abx_reply *r)
{
    const json_t *env = json_object_get(args, "env");
    abx_err e = abx_kenv_check(env, r);
    if (e != ABX_OK)
        return e;
    kernel *k = abx_kernel_find(ctx, args, r, false);
    if (!k)
        return ABX_E_KERNEL_NOT_FOUND;
    kstate *st = abx_ctx_ns_state(ctx, &abx_ns_kernels);
    e = abx_kernel_acquire(k, !json_is_false(json_object_get(args, "wait")), r);
    if (e == ABX_OK && json_object_size(env) && (e = abx_kenv_apply(k, env, r)) != ABX_OK)
        abx_kernel_release(k);
    if (e != ABX_OK) {
        abx_kernel_unref(st, k);
        return e;
    }
    int64_t timeout = DEFAULT_CELL_MS, lim = abx_ctx_limit(ctx, ABX_LIM_TIMEOUT);
    const json_t *t = json_object_get(args, "timeout");
    if (json_is_number(t) && json_number_value(t) > 0)
        timeout = (int64_t)(json_number_value(t) * 1000);
    if (lim > 0 && timeout > lim)
        timeout = lim;
    int64_t cap = abx_ctx_limit(ctx, ABX_LIM_MAX_OUTPUT_BYTES);
    if (cap <= 0)
        cap = DEFAULT_OUTPUT;
    *c = (cell){.srv = abx_ctx_host(ctx), .group = abx_ctx_ledger_group(ctx), .k = k,
                .results = json_array(), .result_cap = (size_t)cap, .deadline = abx_now_ms() + timeout};
    cap_init(&c->out[0], (size_t)cap);
    cap_init(&c->out[1], (size_t)cap);
    c->sent = false;
    c->env_set = json_object_size(env) > 0;
    abx_kmem_reset(k);
    if (k->proc && abx_proc_running(k->proc)) {
        /* stop_on_error off: ipykernel would otherwise abort the next cell that arrives
         * soon after an error (an interrupted cell is one) */
        json_t *req = json_pack("{s:s, s:b, s:b, s:{}, s:b, s:b}", "code",
                                json_string_value(json_object_get(args, "code")), "silent", 0, "store_history", 1,
                                "user_expressions", "allow_stdin", 0, "stop_on_error", 0);
        c->sent = abx_jconn_send(k->conn, ABX_J_SHELL, "execute_request", req, c->msg_id) == 0;
    }
    return ABX_OK;
}

static void cell_end(cell *c, kstate *st)
{
    if (c->count)
        c->k->exec_count = c->count;
    if (c->env_set) /* after the cell, also an errored or interrupted one */
        abx_kenv_restore(c->k);
    abx_kernel_release(c->k);
    abx_kernel_unref(st, c->k);
}

abx_err abx_kernels_execute(abx_ctx *ctx, const json_t *args, abx_reply *r)
{
    cell c;
    abx_err e = cell_begin(ctx, args, &c, r);
    if (e != ABX_OK)
        return e;
    int rc = c.sent ? 0 : -1;
    while (rc == 0)
        rc = cell_step(&c, 100);
    json_t *logs[2];
    bool cut_out = cap_finish(&c.out[0], &logs[0]); /* both always run: each makes its logs */
    bool cut_err = cap_finish(&c.out[1], &logs[1]);
    bool cut = cut_out || cut_err;
    if (rc < 0) {
        e = died(&c, r);
        json_decref(logs[0]);
        json_decref(logs[1]);
        json_decref(c.results);
        json_decref(c.error);
    } else {
        json_t *out = json_pack("{s:i, s:o, s:{s:o, s:o}, s:o, s:b, s:b, s:I, s:I}", "execution_count", c.count,
                                "results", c.results, "logs", "stdout", logs[0], "stderr", logs[1], "error",
                                c.error ? c.error : json_null(), "truncated", cut || c.results_cut, "timed_out",
                                c.timed_out, "stdout_bytes", (json_int_t)c.out[0].total, "stderr_bytes",
                                (json_int_t)c.out[1].total);
        if (out && c.mem_pressure) {
            json_t *d = abx_kmem_json(c.k);
            json_object_set_new(d, "execution", out);
            e = abx_reply_error(r, ABX_E_KERNEL_MEMORY_PRESSURE, d,
                                "the cell neared the kernel's memory limit and was interrupted; the kernel and its "
                                "state are kept");
        } else if (out) {
            abx_reply_json(r, out);
            e = ABX_OK;
        } else {
            e = abx_reply_error(r, ABX_E_SERVER_UNAVAILABLE, NULL, "out of memory");
        }
    }
    cell_end(&c, abx_ctx_ns_state(ctx, &abx_ns_kernels));
    return e;
}

/* ---- kernels.stream: the same items as SSE events while they happen ---- */

typedef struct cell_sse {
    cell c;
    kstate *st;
    abx_buf pending;
    bool done;
} cell_sse;

static long sse_read(void *state, char *buf, size_t max)
{
    cell_sse *s = state;
    for (;;) {
        if (s->pending.len) {
            size_t n = s->pending.len < max ? s->pending.len : max;
            memcpy(buf, s->pending.data, n);
            memmove(s->pending.data, s->pending.data + n, s->pending.len - n);
            s->pending.len -= n;
            return (long)n;
        }
        if (s->done)
            return 0;
        int rc = s->c.sent ? cell_step(&s->c, 2000) : -1;
        if (rc < 0) {
            char msg[200];
            json_t *d = death_of(&s->c, msg, sizeof msg);
            emit(&s->c, "error", json_pack("{s:s, s:s, s:o?}", "code", "kernel.died", "message", msg, "details", d));
        }
        if (rc > 0 && s->c.mem_pressure)
            emit(&s->c, "error", json_pack("{s:s, s:s, s:o?}", "code", "kernel.memory_pressure", "message",
                                           "the cell neared the kernel's memory limit and was interrupted",
                                           "details", abx_kmem_json(s->c.k)));
        if (rc != 0) {
            emit(&s->c, "end", json_pack("{s:i, s:b, s:b, s:I, s:I}", "execution_count", s->c.count, "timed_out",
                                         s->c.timed_out, "truncated",
                                         s->c.out[0].total > 2 * s->c.out[0].half ||
                                             s->c.out[1].total > 2 * s->c.out[1].half || s->c.results_cut,
                                         "stdout_bytes", (json_int_t)s->c.out[0].total, "stderr_bytes",
                                         (json_int_t)s->c.out[1].total));
            s->done = true;
        } else if (!s->pending.len) {
            abx_buf_puts(&s->pending, ": keepalive\n\n");
        }
    }
}

static void sse_free(void *state)
{
    cell_sse *s = state;
    if (!s->done && s->c.k->proc) { /* the client left: the cell stops, the kernel stays */
        abx_proc_signal(s->c.k->proc, SIGINT);
        if (s->c.env_set && s->c.sent) { /* its env is restored once the interrupt took */
            s->c.timed_out = true;
            s->c.deadline = abx_now_ms() + INTERRUPT_GRACE_MS;
            while (cell_step(&s->c, 100) == 0)
                ;
        }
    }
    json_t *logs[2];
    cap_finish(&s->c.out[0], &logs[0]);
    cap_finish(&s->c.out[1], &logs[1]);
    json_decref(logs[0]);
    json_decref(logs[1]);
    json_decref(s->c.results);
    json_decref(s->c.error);
    cell_end(&s->c, s->st);
    abx_buf_release(&s->pending);
    abx_free(s);
}

abx_err abx_kernels_stream(abx_ctx *ctx, const json_t *args, abx_reply *r)
{
    cell_sse *s = abx_calloc(1, sizeof *s);
    if (!s)
        return abx_reply_error(r, ABX_E_SERVER_UNAVAILABLE, NULL, "out of memory");
    abx_err e = cell_begin(ctx, args, &s->c, r);
    if (e != ABX_OK) {
        abx_free(s);
        return e;
    }
    s->st = abx_ctx_ns_state(ctx, &abx_ns_kernels);
    abx_buf_init(&s->pending, (size_t)64 << 20);
    s->c.events = &s->pending;
    abx_reply_stream(r, "text/event-stream", sse_read, s, sse_free);
    return ABX_OK;
}
