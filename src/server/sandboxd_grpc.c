/* sandboxd_grpc.c — the sandboxd door's gRPC listener: HTTP/2 with prior knowledge (h2c)
 * over libnghttp2, server side; with top-level tls: {cert, key}, HTTP/2 over TLS (OpenSSL,
 * ALPN h2). One thread per connection owns its nghttp2 session and
 * socket; each call, once its request message is in (unary or server-streaming: one
 * message), runs on a thread of its own (doors/sandboxd_proc.c, sandboxd_ctx.c) and hands
 * its response messages back through a per-stream buffer and a wake-up pipe, so a Start
 * stream's output and the WriteStdin / SendSignal calls that drive it share one
 * connection, as gRPC clients multiplex them. Responses: HEADERS (:status 200,
 * application/grpc), length-prefixed messages, then trailers with grpc-status and a
 * percent-encoded grpc-message. Credentials come as `authorization: Bearer` metadata;
 * `traceparent` metadata goes into each call's ledger group. */
#include "server/server.h"
#include "doors/sandboxd.h"
#include "server/sandboxd_grpc.h"
#include <arpa/inet.h>
#include <errno.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <nghttp2/nghttp2.h>
#include <openssl/err.h>
#include <openssl/ssl.h>
#include <poll.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>
#include "sandbox/ossl_lazy.h" /* last: OpenSSL, opened on first use */

#define MAX_CONNS 64          /* connections at once; more are closed at accept */
#define MAX_CALLS 256         /* calls running at once (all connections); more: RESOURCE_EXHAUSTED */
#define MAX_REQUEST (16 << 20) /* bytes of one request message */
#define OUT_HIGH (4 << 20)    /* a stream's unsent output past which its method waits */

typedef struct grpc_server {
    abx_server *s;
    SSL_CTX *tls;             /* with top-level tls: {cert, key}, HTTPS with ALPN h2; else NULL */
    int lfd;
    int stop[2];              /* readable once stopping: every thread's poll sees it */
    pthread_t accept_thread;
    atomic_int conns, calls;
} grpc_server;

/* ---- one connection ---- */

/* Wait until the socket can do what OpenSSL asked for; false on timeout or error. */
static bool tls_wait(sbx_gconn *c, int ret)
{
    int e = SSL_get_error(c->tls, ret);
    if (e != SSL_ERROR_WANT_READ && e != SSL_ERROR_WANT_WRITE)
        return false;
    struct pollfd p = {.fd = c->fd, .events = e == SSL_ERROR_WANT_READ ? POLLIN : POLLOUT};
    return poll(&p, 1, 5000) > 0;
}

static ssize_t tls_send(sbx_gconn *c, const uint8_t *data, size_t len)
{
    size_t off = 0;
    while (off < len) {
        int n = SSL_write(c->tls, data + off, (int)(len - off > 65536 ? 65536 : len - off));
        if (n > 0)
            off += (size_t)n;
        else if (!tls_wait(c, n))
            return NGHTTP2_ERR_CALLBACK_FAILURE;
    }
    return (ssize_t)len;
}

/* The TLS handshake (ALPN must pick h2), bounded by the waits; false: drop the connection. */
static bool tls_accept(sbx_gconn *c, SSL_CTX *ctx)
{
    c->tls = SSL_new(ctx);
    if (!c->tls || SSL_set_fd(c->tls, c->fd) != 1)
        return false;
    for (int i = 0; i < 64; i++) {
        int r = SSL_accept(c->tls);
        if (r == 1) {
            const unsigned char *proto = NULL;
            unsigned plen = 0;
            SSL_get0_alpn_selected(c->tls, &proto, &plen);
            return plen == 2 && memcmp(proto, "h2", 2) == 0;
        }
        if (!tls_wait(c, r))
            return false;
    }
    return false;
}

/* Bytes from the client: TLS or the socket. 0 at the end, -1 an error, -2 nothing now. */
static ssize_t conn_read(sbx_gconn *c, uint8_t *buf, size_t len)
{
    if (!c->tls) {
        ssize_t n = recv(c->fd, buf, len, 0);
        return n < 0 && (errno == EAGAIN || errno == EINTR) ? -2 : n;
    }
    int n = SSL_read(c->tls, buf, (int)len);
    if (n > 0)
        return n;
    int e = SSL_get_error(c->tls, n);
    return e == SSL_ERROR_WANT_READ || e == SSL_ERROR_WANT_WRITE ? -2 : e == SSL_ERROR_ZERO_RETURN ? 0 : -1;
}

static int alpn_h2(SSL *ssl, const unsigned char **out, unsigned char *outlen, const unsigned char *in,
                   unsigned int inlen, void *arg)
{
    (void)ssl;
    (void)arg;
    for (unsigned i = 0; i + 1 <= inlen && i + 1 + in[i] <= inlen; i += 1u + in[i])
        if (in[i] == 2 && memcmp(in + i + 1, "h2", 2) == 0) {
            *out = in + i + 1;
            *outlen = 2;
            return SSL_TLSEXT_ERR_OK;
        }
    return SSL_TLSEXT_ERR_ALERT_FATAL;
}

static SSL_CTX *tls_context(const abx_config *cfg, char *errbuf, size_t errlen)
{
    if (abx_ossl_load(errbuf, errlen) != 0)
        return NULL;
    SSL_CTX *ctx = SSL_CTX_new(TLS_server_method());
    if (!ctx || SSL_CTX_set_min_proto_version(ctx, TLS1_2_VERSION) != 1 ||
        SSL_CTX_use_certificate_chain_file(ctx, cfg->tls_cert) != 1 ||
        SSL_CTX_use_PrivateKey_file(ctx, cfg->tls_key, SSL_FILETYPE_PEM) != 1 || SSL_CTX_check_private_key(ctx) != 1) {
        snprintf(errbuf, errlen, "sandboxd.grpc_listen: cannot load tls cert/key (%s)",
                 ERR_reason_error_string(ERR_get_error()) ?: "unknown error");
        SSL_CTX_free(ctx);
        return NULL;
    }
    SSL_CTX_set_alpn_select_cb(ctx, alpn_h2, NULL);
    return ctx;
}

static ssize_t on_send(nghttp2_session *h2, const uint8_t *data, size_t len, int flags, void *ud)
{
    (void)h2;
    (void)flags;
    sbx_gconn *c = ud;
    if (c->fd < 0) /* fuzzing: nothing is sent */
        return (ssize_t)len;
    if (c->tls)
        return tls_send(c, data, len);
    size_t off = 0;
    while (off < len) {
        ssize_t n = send(c->fd, data + off, len - off, MSG_NOSIGNAL);
        if (n < 0 && errno == EINTR)
            continue;
        if (n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK)) {
            struct pollfd p = {.fd = c->fd, .events = POLLOUT};
            if (poll(&p, 1, 5000) <= 0)
                return NGHTTP2_ERR_CALLBACK_FAILURE;
            continue;
        }
        if (n <= 0)
            return NGHTTP2_ERR_CALLBACK_FAILURE;
        off += (size_t)n;
    }
    return (ssize_t)len;
}

void abx_sbx_gconn_wake(sbx_gconn *c)
{
    if (c->wake[1] >= 0) {
        char b = 1;
        ssize_t n = write(c->wake[1], &b, 1);
        (void)n; /* a full pipe already wakes the thread */
    }
}

static void stream_free(sbx_gstream *g)
{
    abx_buf_release(&g->in);
    abx_buf_release(&g->out);
    abx_free(g->authz);
    abx_free(g->traceparent);
    abx_free(g);
}

static void conn_unref(sbx_gconn *c)
{
    pthread_mutex_lock(&c->mu);
    bool last = --c->refs == 0;
    pthread_mutex_unlock(&c->mu);
    if (!last)
        return;
    for (sbx_gstream *g = c->streams, *nx; g; g = nx) {
        nx = g->next;
        stream_free(g);
    }
    if (c->wake[0] >= 0)
        close(c->wake[0]);
    if (c->wake[1] >= 0)
        close(c->wake[1]);
    pthread_mutex_destroy(&c->mu);
    abx_free(c);
}

/* Unlink and free a stream that nghttp2 closed and no method holds (mu held). */
static void stream_reap(sbx_gconn *c, sbx_gstream *g)
{
    for (sbx_gstream **p = &c->streams; *p; p = &(*p)->next)
        if (*p == g) {
            *p = g->next;
            stream_free(g);
            return;
        }
}

static ssize_t read_out(nghttp2_session *h2, int32_t id, uint8_t *buf, size_t length, uint32_t *flags,
                        nghttp2_data_source *src, void *ud)
{
    sbx_gconn *c = ud;
    sbx_gstream *g = src->ptr;
    pthread_mutex_lock(&c->mu);
    size_t avail = g->out.len - g->out_sent, n = avail < length ? avail : length;
    if (n) {
        memcpy(buf, g->out.data + g->out_sent, n);
        g->out_sent += n;
        if (g->out_sent == g->out.len)
            g->out.len = g->out_sent = 0;
        pthread_mutex_unlock(&c->mu);
        return (ssize_t)n;
    }
    if (!g->done) {
        g->deferred = true;
        pthread_mutex_unlock(&c->mu);
        return NGHTTP2_ERR_DEFERRED;
    }
    char code[16], msg[3 * sizeof g->msg];
    snprintf(code, sizeof code, "%d", g->code);
    abx_sbx_grpc_message_encode(g->msg, msg, sizeof msg);
    pthread_mutex_unlock(&c->mu);
    *flags |= NGHTTP2_DATA_FLAG_EOF | NGHTTP2_DATA_FLAG_NO_END_STREAM;
    nghttp2_nv tr[] = {
        {(uint8_t *)"grpc-status", (uint8_t *)code, 11, strlen(code), NGHTTP2_NV_FLAG_NONE},
        {(uint8_t *)"grpc-message", (uint8_t *)msg, 12, strlen(msg), NGHTTP2_NV_FLAG_NONE},
    };
    if (nghttp2_submit_trailer(h2, id, tr, msg[0] ? 2 : 1) != 0)
        return NGHTTP2_ERR_TEMPORAL_CALLBACK_FAILURE;
    return 0;
}

/* Answer what changed since the last wake-up: headers once, then resume the data. */
static void flush_dirty(sbx_gconn *c)
{
    int32_t ids[64];
    sbx_gstream *gs[64];
    size_t n;
    do {
        n = 0;
        pthread_mutex_lock(&c->mu);
        for (sbx_gstream *g = c->streams; g && n < 64; g = g->next)
            if (g->dirty && !g->closed) {
                g->dirty = false;
                ids[n] = g->id;
                gs[n++] = g;
            }
        pthread_mutex_unlock(&c->mu);
        for (size_t i = 0; i < n; i++) {
            if (!gs[i]->responded) {
                gs[i]->responded = true;
                nghttp2_nv h[] = {
                    {(uint8_t *)":status", (uint8_t *)"200", 7, 3, NGHTTP2_NV_FLAG_NONE},
                    {(uint8_t *)"content-type", (uint8_t *)"application/grpc", 12, 16, NGHTTP2_NV_FLAG_NONE},
                };
                nghttp2_data_provider dp = {.source.ptr = gs[i], .read_callback = read_out};
                nghttp2_submit_response(c->h2, ids[i], h, 2, &dp);
            } else {
                nghttp2_session_resume_data(c->h2, ids[i]);
            }
        }
    } while (n == 64);
}

/* ---- the method's side (its own thread) ---- */

static bool emit(void *ud, const uint8_t *msg, size_t len)
{
    sbx_gstream *g = ud;
    sbx_gconn *c = g->conn;
    for (;;) {
        if (atomic_load(&g->cancelled))
            return false;
        pthread_mutex_lock(&c->mu);
        size_t pending = g->out.len - g->out_sent;
        if (pending < OUT_HIGH) {
            uint8_t h[5] = {0, (uint8_t)(len >> 24), (uint8_t)(len >> 16), (uint8_t)(len >> 8), (uint8_t)len};
            bool ok = abx_buf_append(&g->out, h, 5) && abx_buf_append(&g->out, msg, len);
            g->dirty = true;
            pthread_mutex_unlock(&c->mu);
            abx_sbx_gconn_wake(c);
            return ok;
        }
        pthread_mutex_unlock(&c->mu);
        usleep(10000); /* a slow reader: wait for the connection to drain it */
    }
}

void abx_sbx_gstream_finish(sbx_gstream *g, int code, const char *msg)
{
    sbx_gconn *c = g->conn;
    pthread_mutex_lock(&c->mu);
    g->done = true;
    g->code = code;
    snprintf(g->msg, sizeof g->msg, "%s", msg ? msg : "");
    g->dirty = true;
    pthread_mutex_unlock(&c->mu);
    abx_sbx_gconn_wake(c);
}

typedef struct call_job {
    sbx_gstream *g;
    const sbx_method *m;
    char *principal;
    grpc_server *srv;
} call_job;

static void *call_thread(void *arg)
{
    call_job *j = arg;
    sbx_gstream *g = j->g;
    sbx_gconn *c = g->conn;
    sbx_caller who = {.server = c->s, .principal = j->principal, .client = c->client[0] ? c->client : NULL,
                      .traceparent = g->traceparent};
    sbx_sink sink = {.ud = g, .emit = emit, .cancelled = &g->cancelled};
    sbx_status st = {SBX_OK, ""};
    const uint8_t *msg = (const uint8_t *)g->in.data + 5;
    j->m->run(&who, msg, g->in.len - 5, &sink, &st);
    abx_sbx_gstream_finish(g, st.code, st.message);
    pthread_mutex_lock(&c->mu);
    g->worker = false;
    if (g->closed)
        stream_reap(c, g);
    pthread_mutex_unlock(&c->mu);
    atomic_fetch_sub(&j->srv->calls, 1);
    abx_free(j->principal);
    abx_free(j);
    conn_unref(c);
    return NULL;
}

/* ---- a request is in: check it and start its method ---- */

static void answer_now(sbx_gstream *g, int code, const char *msg)
{
    abx_sbx_gstream_finish(g, code, msg);
}

/* The request message of a call: one uncompressed length-prefixed message. */
static bool one_message(const sbx_gstream *g)
{
    if (g->in.len < 5 || g->in.data[0] != 0)
        return false;
    const uint8_t *h = (const uint8_t *)g->in.data;
    size_t n = (size_t)h[1] << 24 | (size_t)h[2] << 16 | (size_t)h[3] << 8 | h[4];
    return n == g->in.len - 5;
}

static void dispatch(sbx_gconn *c, sbx_gstream *g)
{
    grpc_server *srv = c->srv;
    if (!g->grpc_ct)
        return answer_now(g, SBX_UNIMPLEMENTED, "content-type must be application/grpc");
    if (g->too_large)
        return answer_now(g, SBX_RESOURCE_EXHAUSTED, "the request message is larger than 16 MiB");
    if (!one_message(g))
        return answer_now(g, SBX_INTERNAL, "the request is not one uncompressed gRPC message");
    const sbx_method *m = abx_sbx_method(g->path, g->path_len);
    if (!m)
        return answer_now(g, SBX_UNIMPLEMENTED, "no such method");
    if (!srv) { /* fuzzing: decode the message, run nothing */
        abx_sbx_method_decodes(m, (const uint8_t *)g->in.data + 5, g->in.len - 5);
        return answer_now(g, SBX_OK, "");
    }
    int wait = 0;
    char *who = abx_sbx_authenticate(c->s, g->authz, c->client, &wait);
    if (wait > 0)
        return answer_now(g, SBX_RESOURCE_EXHAUSTED, "auth.rate_limited: too many failed authentication attempts");
    if (!who)
        return answer_now(g, SBX_UNAUTHENTICATED, "authorization: Bearer <the pod's token> is required");
    if (atomic_fetch_add(&srv->calls, 1) >= MAX_CALLS) {
        atomic_fetch_sub(&srv->calls, 1);
        abx_free(who);
        return answer_now(g, SBX_RESOURCE_EXHAUSTED, "too many calls at once");
    }
    call_job *j = abx_calloc(1, sizeof *j);
    pthread_t t;
    pthread_attr_t at;
    pthread_attr_init(&at);
    pthread_attr_setdetachstate(&at, PTHREAD_CREATE_DETACHED);
    pthread_attr_setstacksize(&at, 512 * 1024);
    if (j) {
        *j = (call_job){.g = g, .m = m, .principal = who, .srv = srv};
        pthread_mutex_lock(&c->mu);
        g->worker = true;
        c->refs++;
        pthread_mutex_unlock(&c->mu);
    }
    if (!j || pthread_create(&t, &at, call_thread, j) != 0) {
        if (j) {
            pthread_mutex_lock(&c->mu);
            g->worker = false;
            c->refs--;
            pthread_mutex_unlock(&c->mu);
        }
        atomic_fetch_sub(&srv->calls, 1);
        abx_free(who);
        abx_free(j);
        answer_now(g, SBX_UNAVAILABLE, "cannot start the call");
    }
    pthread_attr_destroy(&at);
}

/* ---- nghttp2's callbacks ---- */

static int on_begin_headers(nghttp2_session *h2, const nghttp2_frame *f, void *ud)
{
    sbx_gconn *c = ud;
    if (f->hd.type != NGHTTP2_HEADERS || f->headers.cat != NGHTTP2_HCAT_REQUEST)
        return 0;
    sbx_gstream *g = abx_calloc(1, sizeof *g);
    if (!g)
        return NGHTTP2_ERR_CALLBACK_FAILURE;
    g->conn = c;
    g->id = f->hd.stream_id;
    abx_buf_init(&g->in, MAX_REQUEST + 5);
    abx_buf_init(&g->out, 0);
    pthread_mutex_lock(&c->mu);
    g->next = c->streams;
    c->streams = g;
    pthread_mutex_unlock(&c->mu);
    nghttp2_session_set_stream_user_data(h2, g->id, g);
    return 0;
}

static int on_header(nghttp2_session *h2, const nghttp2_frame *f, const uint8_t *name, size_t nl, const uint8_t *value,
                     size_t vl, uint8_t flags, void *ud)
{
    (void)flags;
    (void)ud;
    sbx_gstream *g = nghttp2_session_get_stream_user_data(h2, f->hd.stream_id);
    if (!g || f->hd.type != NGHTTP2_HEADERS)
        return 0;
#define NAME(s) (nl == sizeof s - 1 && memcmp(name, s, nl) == 0)
    if (NAME(":path") && vl < sizeof g->path) {
        memcpy(g->path, value, vl);
        g->path_len = vl;
    } else if (NAME("content-type")) {
        g->grpc_ct = vl >= 16 && memcmp(value, "application/grpc", 16) == 0 && (vl == 16 || value[16] == '+' ||
                                                                              value[16] == ';');
    } else if (NAME("authorization") && !g->authz && vl < 4096) {
        g->authz = abx_strndup((const char *)value, vl);
    } else if (NAME("traceparent") && !g->traceparent && vl == 55) {
        char tp[56];
        memcpy(tp, value, 55);
        tp[55] = '\0';
        if (abx_sbx_traceparent_ok(tp))
            g->traceparent = abx_strdup(tp);
    }
#undef NAME
    return 0;
}

static int on_data(nghttp2_session *h2, uint8_t flags, int32_t id, const uint8_t *data, size_t len, void *ud)
{
    (void)flags;
    (void)ud;
    sbx_gstream *g = nghttp2_session_get_stream_user_data(h2, id);
    if (g && !g->too_large && !abx_buf_append(&g->in, data, len))
        g->too_large = true;
    return 0;
}

static int on_frame_recv(nghttp2_session *h2, const nghttp2_frame *f, void *ud)
{
    sbx_gconn *c = ud;
    if ((f->hd.type != NGHTTP2_HEADERS && f->hd.type != NGHTTP2_DATA) || !(f->hd.flags & NGHTTP2_FLAG_END_STREAM))
        return 0;
    sbx_gstream *g = nghttp2_session_get_stream_user_data(h2, f->hd.stream_id);
    if (g && !g->dispatched) {
        g->dispatched = true;
        dispatch(c, g);
    }
    return 0;
}

static int on_close(nghttp2_session *h2, int32_t id, uint32_t error_code, void *ud)
{
    (void)error_code;
    sbx_gconn *c = ud;
    sbx_gstream *g = nghttp2_session_get_stream_user_data(h2, id);
    if (!g)
        return 0;
    nghttp2_session_set_stream_user_data(h2, id, NULL);
    atomic_store(&g->cancelled, true);
    pthread_mutex_lock(&c->mu);
    g->closed = true;
    if (!g->worker)
        stream_reap(c, g);
    pthread_mutex_unlock(&c->mu);
    return 0;
}

sbx_gconn *abx_sbx_gconn_new(abx_server *s, void *srv, int fd)
{
    sbx_gconn *c = abx_calloc(1, sizeof *c);
    if (!c)
        return NULL;
    c->s = s;
    c->srv = srv;
    c->fd = fd;
    c->refs = 1;
    c->wake[0] = c->wake[1] = -1;
    pthread_mutex_init(&c->mu, NULL);
    if (fd >= 0 && (pipe2(c->wake, O_CLOEXEC | O_NONBLOCK) != 0)) {
        conn_unref(c);
        return NULL;
    }
    nghttp2_session_callbacks *cb;
    nghttp2_session_callbacks_new(&cb);
    nghttp2_session_callbacks_set_send_callback(cb, on_send);
    nghttp2_session_callbacks_set_on_begin_headers_callback(cb, on_begin_headers);
    nghttp2_session_callbacks_set_on_header_callback(cb, on_header);
    nghttp2_session_callbacks_set_on_data_chunk_recv_callback(cb, on_data);
    nghttp2_session_callbacks_set_on_frame_recv_callback(cb, on_frame_recv);
    nghttp2_session_callbacks_set_on_stream_close_callback(cb, on_close);
    int rc = nghttp2_session_server_new(&c->h2, cb, c);
    nghttp2_session_callbacks_del(cb);
    nghttp2_settings_entry st[] = {{NGHTTP2_SETTINGS_MAX_CONCURRENT_STREAMS, 128}};
    if (rc != 0 || nghttp2_submit_settings(c->h2, NGHTTP2_FLAG_NONE, st, 1) != 0) {
        conn_unref(c);
        return NULL;
    }
    return c;
}

/* Feed bytes that arrived; then send what is due. false: the connection is over. */
bool abx_sbx_gconn_input(sbx_gconn *c, const uint8_t *data, size_t len)
{
    if (len && nghttp2_session_mem_recv(c->h2, data, len) < 0)
        return false;
    flush_dirty(c);
    if (nghttp2_session_send(c->h2) != 0)
        return false;
    return nghttp2_session_want_read(c->h2) || nghttp2_session_want_write(c->h2);
}

void abx_sbx_gconn_close(sbx_gconn *c)
{
    pthread_mutex_lock(&c->mu);
    for (sbx_gstream *g = c->streams; g; g = g->next)
        atomic_store(&g->cancelled, true);
    pthread_mutex_unlock(&c->mu);
    nghttp2_session_del(c->h2); /* closes the streams: on_close reaps those no method holds */
    c->h2 = NULL;
    conn_unref(c);
}

static void *conn_thread(void *arg)
{
    sbx_gconn *c = arg;
    grpc_server *srv = c->srv;
    uint8_t buf[16384];
    bool live = (!srv->tls || tls_accept(c, srv->tls)) && abx_sbx_gconn_input(c, NULL, 0);
    while (live) {
        struct pollfd p[3] = {{.fd = c->fd, .events = POLLIN}, {.fd = c->wake[0], .events = POLLIN},
                              {.fd = srv->stop[0], .events = POLLIN}};
        bool buffered = c->tls && SSL_pending(c->tls) > 0; /* decrypted bytes poll cannot see */
        if (poll(p, 3, buffered ? 0 : 30000) < 0 && errno != EINTR)
            break;
        if (buffered)
            p[0].revents |= POLLIN;
        if (p[2].revents) {
            nghttp2_submit_goaway(c->h2, NGHTTP2_FLAG_NONE, nghttp2_session_get_last_proc_stream_id(c->h2),
                                  NGHTTP2_NO_ERROR, NULL, 0);
            nghttp2_session_send(c->h2);
            break;
        }
        if (p[1].revents) {
            char drain[256];
            while (read(c->wake[0], drain, sizeof drain) > 0) {
            }
        }
        ssize_t n = 0;
        if (p[0].revents) {
            n = conn_read(c, buf, sizeof buf);
            if (n == 0 || n == -1)
                break;
        }
        live = abx_sbx_gconn_input(c, buf, n > 0 ? (size_t)n : 0);
    }
    int fd = c->fd;
    SSL *tls = c->tls;
    abx_sbx_gconn_close(c); /* may free c: the connection's TLS and socket are closed here */
    if (tls) {
        SSL_shutdown(tls);
        SSL_free(tls);
    }
    close(fd);
    atomic_fetch_sub(&srv->conns, 1);
    return NULL;
}

/* ---- the listener ---- */

static void *accept_loop(void *arg)
{
    grpc_server *srv = arg;
    for (;;) {
        struct pollfd p[2] = {{.fd = srv->lfd, .events = POLLIN}, {.fd = srv->stop[0], .events = POLLIN}};
        if (poll(p, 2, -1) < 0 && errno != EINTR)
            break;
        if (p[1].revents)
            break;
        if (!p[0].revents)
            continue;
        struct sockaddr_storage ss;
        socklen_t sl = sizeof ss;
        int fd = accept4(srv->lfd, (struct sockaddr *)&ss, &sl, SOCK_CLOEXEC | SOCK_NONBLOCK);
        if (fd < 0)
            continue;
        if (atomic_fetch_add(&srv->conns, 1) >= MAX_CONNS) {
            atomic_fetch_sub(&srv->conns, 1);
            close(fd);
            continue;
        }
        int one = 1;
        setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
        sbx_gconn *c = abx_sbx_gconn_new(srv->s, srv, fd);
        if (c) {
            if (ss.ss_family == AF_INET)
                inet_ntop(AF_INET, &((struct sockaddr_in *)&ss)->sin_addr, c->client, sizeof c->client);
            else if (ss.ss_family == AF_INET6)
                inet_ntop(AF_INET6, &((struct sockaddr_in6 *)&ss)->sin6_addr, c->client, sizeof c->client);
        }
        pthread_t t;
        pthread_attr_t at;
        pthread_attr_init(&at);
        pthread_attr_setdetachstate(&at, PTHREAD_CREATE_DETACHED);
        pthread_attr_setstacksize(&at, 256 * 1024);
        if (!c || pthread_create(&t, &at, conn_thread, c) != 0) {
            if (c)
                abx_sbx_gconn_close(c);
            close(fd);
            atomic_fetch_sub(&srv->conns, 1);
        }
        pthread_attr_destroy(&at);
    }
    return NULL;
}

static int listen_on(const char *host, int port, int *bound)
{
    struct sockaddr_storage ss = {0};
    struct sockaddr_in *v4 = (struct sockaddr_in *)&ss;
    struct sockaddr_in6 *v6 = (struct sockaddr_in6 *)&ss;
    socklen_t sl;
    const char *h = strcmp(host, "localhost") == 0 ? "127.0.0.1" : host;
    if (inet_pton(AF_INET, h, &v4->sin_addr) == 1) {
        v4->sin_family = AF_INET;
        v4->sin_port = htons((uint16_t)port);
        sl = sizeof *v4;
    } else if (inet_pton(AF_INET6, h, &v6->sin6_addr) == 1) {
        v6->sin6_family = AF_INET6;
        v6->sin6_port = htons((uint16_t)port);
        sl = sizeof *v6;
    } else {
        errno = EINVAL;
        return -1;
    }
    int fd = socket(ss.ss_family, SOCK_STREAM | SOCK_CLOEXEC | SOCK_NONBLOCK, 0);
    int one = 1;
    if (fd < 0)
        return -1;
    setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof one);
    if (bind(fd, (struct sockaddr *)&ss, sl) != 0 || listen(fd, 64) != 0) {
        int e = errno;
        close(fd);
        errno = e;
        return -1;
    }
    struct sockaddr_storage got;
    socklen_t gl = sizeof got;
    *bound = port;
    if (getsockname(fd, (struct sockaddr *)&got, &gl) == 0)
        *bound = ntohs(got.ss_family == AF_INET ? ((struct sockaddr_in *)&got)->sin_port
                                                : ((struct sockaddr_in6 *)&got)->sin6_port);
    return fd;
}

int abx_sbx_grpc_start(abx_server *s, char *errbuf, size_t errlen)
{
    grpc_server *srv = abx_calloc(1, sizeof *srv);
    if (!srv || pipe2(srv->stop, O_CLOEXEC) != 0) {
        abx_free(srv);
        snprintf(errbuf, errlen, "sandboxd.grpc_listen: out of resources");
        return -1;
    }
    srv->s = s;
    if (s->cfg.tls_cert && !(srv->tls = tls_context(&s->cfg, errbuf, errlen))) {
        close(srv->stop[0]);
        close(srv->stop[1]);
        abx_free(srv);
        return -1;
    }
    srv->lfd = listen_on(s->cfg.sandboxd_grpc_host, s->cfg.sandboxd_grpc_port, &s->sandboxd_grpc_port);
    if (srv->lfd < 0 || pthread_create(&srv->accept_thread, NULL, accept_loop, srv) != 0) {
        snprintf(errbuf, errlen, "cannot listen on sandboxd.grpc_listen %s:%d: %s", s->cfg.sandboxd_grpc_host,
                 s->cfg.sandboxd_grpc_port, strerror(errno ? errno : EADDRINUSE));
        if (srv->lfd >= 0)
            close(srv->lfd);
        if (srv->tls) /* without TLS, OpenSSL was never loaded */
            SSL_CTX_free(srv->tls);
        close(srv->stop[0]);
        close(srv->stop[1]);
        abx_free(srv);
        return -1;
    }
    s->sandboxd_grpc = srv;
    return 0;
}

void abx_sbx_grpc_stop(abx_server *s)
{
    grpc_server *srv = s->sandboxd_grpc;
    if (!srv)
        return;
    s->sandboxd_grpc = NULL;
    char b = 1;
    if (write(srv->stop[1], &b, 1) != 1)
        abx_log("warn", NULL, "sandboxd gRPC: cannot signal the stop");
    pthread_join(srv->accept_thread, NULL);
    close(srv->lfd);
    /* connections end at once (GOAWAY); calls see cancelled and end at their next read */
    for (int i = 0; i < 1000 && (atomic_load(&srv->conns) > 0 || atomic_load(&srv->calls) > 0); i++)
        usleep(10000);
    if (atomic_load(&srv->conns) > 0 || atomic_load(&srv->calls) > 0) {
        abx_log("warn", NULL, "sandboxd gRPC: %d calls still running at stop", atomic_load(&srv->calls));
        return; /* leaked on purpose: a running call still reads it */
    }
    close(srv->stop[0]);
    close(srv->stop[1]);
    if (srv->tls)
        SSL_CTX_free(srv->tls);
    abx_free(srv);
}
