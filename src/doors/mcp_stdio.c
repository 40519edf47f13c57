/* mcp_stdio.c — MCP over stdio (abx mcp): newline-delimited JSON-RPC on stdin and
 * stdout, each tools/call on its own thread so notifications/cancelled reaches it. */
#include "doors/mcp_int.h"
#include <errno.h>
#include <poll.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <unistd.h>

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
    if (out.note && !(out.cancelled && !atomic_load(&st->eof)))
        stdio_send(st, out.note); /* notifications/tools/list_changed: before the answer */
    else
        json_decref(out.note);
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
