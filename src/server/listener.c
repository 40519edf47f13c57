/* listener.c — the HTTP front door on libmicrohttpd: a small fixed pool of epoll I/O
 * threads owns every socket. Calls that may wait (commands, approval waits, long polls,
 * other doors, custom and Python ops) run on a bounded worker pool while their connection
 * is suspended; streamed replies are pumped by a thread of their own through a bounded
 * buffer (http/offload.h); the read timeout, a deadline for the header section and a
 * per-address cap on unauthenticated connections come from server/conns.h. Owns step 0
 * (raw target, header bounds and sanity, Host/Origin and port origins, busy slot, read
 * timeout) and the transport half of step 1 (size cap, Content-Type), then hands the
 * request to the doors (abx_doors_begin) and renders the reply (/ui: console.c). Never decides policy. */
#include "server/server.h"
#include "doors/doors.h"
#include "http/offload.h"
#include "server/conns.h"
#include "server/checks.h"
#include "server/console.h"
#include <arpa/inet.h>
#include <errno.h>
#include <stdatomic.h>
#include <sys/resource.h>
#include <microhttpd.h>
#include <netinet/in.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <unistd.h>

#define HEALTH_RESERVE 16 /* connections kept beyond the limit so core.health still answers */
#define IO_THREADS 2      /* epoll threads: the I/O never waits, so the core count is enough */
#define STREAM_BUFFER (256 * 1024) /* bytes a streamed reply may hold for a slow reader */

/* per-request transport state: made by the URI log callback, freed at completion */
typedef struct conn_req {
    abx_request *r;
    char *raw;          /* raw request target; owned by the request arena */
    size_t raw_len;
    bool started;
    bool responded;
    bool bytes_body;    /* route is a bytes-stream op: body goes to the handler raw */
    bool streaming;     /* the pipeline ran at the first call; the body feeds the sink */
    bool failed;        /* an error is decided mid-body: answer it at the final call */
    uint64_t discarded; /* body bytes dropped after the error (cut past a grace) */
    int64_t max_body;
    bool offloaded;     /* the pipeline runs on a worker; the connection is suspended */
    atomic_bool done;   /* ... and has finished: the reply can be sent */
    struct MHD_Connection *c;
    bool console;       /* a /ui file (console.c), answered once the request is in */
} conn_req;

static enum MHD_Result on_request(void *cls, struct MHD_Connection *c, const char *url, const char *method,
                                  const char *version, const char *upload, size_t *upload_size, void **con_cls);
static void *on_uri_terminal(void *cls, const char *uri, struct MHD_Connection *c);
static void *on_uri_e2b(void *cls, const char *uri, struct MHD_Connection *c);

static void on_completed(void *cls, struct MHD_Connection *c, void **con_cls, enum MHD_RequestTerminationCode t);
static void on_connection(void *cls, struct MHD_Connection *c, void **socket_context,
                          enum MHD_ConnectionNotificationCode code);

static void mhd_log(void *cls, const char *fmt, va_list ap) __attribute__((format(printf, 2, 0)));
static void mhd_log(void *cls, const char *fmt, va_list ap)
{
    char msg[512];
    vsnprintf(msg, sizeof msg, fmt, ap);
    size_t n = strlen(msg);
    while (n && (msg[n - 1] == '\n'))
        msg[--n] = '\0';
    abx_log("debug", NULL, "microhttpd: %s", msg);
}

static char *read_file_text(const char *path)
{
    FILE *f = fopen(path, "re");
    if (!f)
        return NULL;
    abx_buf b;
    abx_buf_init(&b, 1 << 20);
    char chunk[4096];
    size_t n;
    while ((n = fread(chunk, 1, sizeof chunk, f)) > 0)
        abx_buf_append(&b, chunk, n);
    fclose(f);
    if (b.failed) {
        abx_buf_release(&b);
        return NULL;
    }
    return abx_buf_detach(&b);
}

static enum MHD_Result on_accept(void *cls, const struct sockaddr *addr, socklen_t addrlen)
{
    (void)addrlen;
    abx_server *s = cls;
    return abx_conns_admit(s->conn_table, addr) ? MHD_YES : MHD_NO;
}

/* A listener beside the main one (terminal, E2B envd): the same handlers, its own URI
 * callback (which marks its requests). NULL when it cannot open (errno says why). */
struct MHD_Daemon *abx_side_listener(abx_server *s, const char *host, int port, const side_listen *sl,
                                     void *(*uri_cb)(void *, const char *, struct MHD_Connection *), int *bound)
{
    struct sockaddr_storage ts = {0};
    struct sockaddr_in *t4 = (struct sockaddr_in *)&ts;
    struct sockaddr_in6 *t6 = (struct sockaddr_in6 *)&ts;
    const char *th = strcmp(host, "localhost") == 0 ? "127.0.0.1" : host;
    unsigned flags = sl->flags | (sl->tls_opts ? MHD_USE_TLS : 0);
    if (inet_pton(AF_INET, th, &t4->sin_addr) == 1) {
        t4->sin_family = AF_INET;
        t4->sin_port = htons((uint16_t)port);
    } else if (inet_pton(AF_INET6, th, &t6->sin6_addr) == 1) {
        t6->sin6_family = AF_INET6;
        t6->sin6_port = htons((uint16_t)port);
        flags |= MHD_USE_IPv6;
    } else {
        errno = EINVAL;
        return NULL;
    }
    struct MHD_OptionItem none[] = {{MHD_OPTION_END, 0, NULL}};
    struct MHD_Daemon *d = MHD_start_daemon(
        flags, 0, on_accept, s, on_request, s, MHD_OPTION_SOCK_ADDR, (struct sockaddr *)&ts,
        MHD_OPTION_CONNECTION_LIMIT, (unsigned)(s->cfg.connections + HEALTH_RESERVE), MHD_OPTION_CONNECTION_TIMEOUT,
        sl->timeout_s, MHD_OPTION_URI_LOG_CALLBACK, uri_cb, s, MHD_OPTION_NOTIFY_COMPLETED, on_completed, s,
        MHD_OPTION_NOTIFY_CONNECTION, on_connection, s, MHD_OPTION_THREAD_STACK_SIZE, (size_t)(512 * 1024),
        MHD_OPTION_EXTERNAL_LOGGER, mhd_log, s, MHD_OPTION_ARRAY, sl->tls_opts ? sl->tls_opts : none, MHD_OPTION_END);
    if (d) {
        const union MHD_DaemonInfo *ti = MHD_get_daemon_info(d, MHD_DAEMON_INFO_BIND_PORT);
        *bound = ti ? ti->port : port;
    }
    return d;
}

/* The E2B listeners when the config has an e2b section (e2b.envd_listen, e2b.interpreter_listen):
 * the same door and routes on both. */
static int e2b_listener_start(abx_server *s, side_listen *sl, struct MHD_OptionItem *tls_opts, char *errbuf,
                              size_t errlen)
{
    const struct { const char *key, *host; int port; void **mhd; int *bound; } l[] = {
        {"e2b.envd_listen", s->cfg.e2b_envd_host, s->cfg.e2b_envd_port, &s->mhd_e2b, &s->e2b_port},
        {"e2b.interpreter_listen", s->cfg.e2b_interp_host, s->cfg.e2b_interp_port, &s->mhd_e2b_interp, &s->e2b_port},
    };
    for (size_t i = 0; s->cfg.e2b_on && i < 2; i++) {
        int bound = 0;
        if (!l[i].host || l[i].port < 0)
            continue;
        if (!abx_host_is_loopback(l[i].host) && !tls_opts && !s->cfg.allow_plaintext) {
            snprintf(errbuf, errlen, "%s %s is not loopback: configure tls: {cert, key} or allow_plaintext: true",
                     l[i].key, l[i].host);
            return -1;
        }
        sl->tls_opts = tls_opts;
        *l[i].mhd = abx_side_listener(s, l[i].host, l[i].port, sl, on_uri_e2b, i == 0 ? l[i].bound : &bound);
        sl->tls_opts = NULL;
        if (!*l[i].mhd) {
            snprintf(errbuf, errlen, "cannot listen on %s %s:%d: %s", l[i].key, l[i].host, l[i].port,
                     strerror(errno ? errno : EADDRINUSE));
            return -1;
        }
    }
    return 0;
}

/* libmicrohttpd's per-connection memory pool: the header section up to
 * limits.header_bytes and 8 KiB more (a request just past the limit must still reach
 * abx, which answers it with the error table's 431; the parsed header list and the
 * reply's headers live there too), and over 32 KiB: libmicrohttpd maps larger pools
 * with mmap, whose untouched pages cost an idle connection nothing (a 24 KiB pool from
 * malloc held 9.7 KiB per flood connection, 95 MiB for 10,000; bench/flood.sh). Not
 * more: libmicrohttpd zeroes the whole pool between two requests of a keep-alive
 * connection, and the half its read buffer gives back after the headers, so every KiB
 * is paid one and a half times per request (80 KiB: 14 % of the CPU of GET /health).
 * What overflows the pool (36 KiB of pages by default) libmicrohttpd answers: 431. */
#define MHD_MMAP_POOL (33 * 1024)
static size_t conn_pool_bytes(const abx_config *cfg)
{
    size_t want = (size_t)cfg->header_bytes + 8 * 1024;
    return want > MHD_MMAP_POOL ? want : MHD_MMAP_POOL;
}

int abx_listener_start(abx_server *s, bool *tls, char *errbuf, size_t errlen)
{
    if (!abx_host_is_loopback(s->cfg.listen_host) && !s->cfg.tls_cert && !s->cfg.allow_plaintext) {
        snprintf(errbuf, errlen, "listen address %s is not loopback: configure tls: {cert, key} or allow_plaintext: true",
                 s->cfg.listen_host);
        return -1;
    }
    struct sockaddr_storage ss = {0};
    socklen_t sl;
    struct sockaddr_in *v4 = (struct sockaddr_in *)&ss;
    struct sockaddr_in6 *v6 = (struct sockaddr_in6 *)&ss;
    const char *h = strcmp(s->cfg.listen_host, "localhost") == 0 ? "127.0.0.1" : s->cfg.listen_host;
    unsigned flags = MHD_USE_EPOLL_INTERNAL_THREAD | MHD_USE_ERROR_LOG | MHD_ALLOW_UPGRADE |
                     MHD_ALLOW_SUSPEND_RESUME;
    if (inet_pton(AF_INET, h, &v4->sin_addr) == 1) {
        v4->sin_family = AF_INET;
        v4->sin_port = htons((uint16_t)s->cfg.listen_port);
        sl = sizeof *v4;
    } else if (inet_pton(AF_INET6, h, &v6->sin6_addr) == 1) {
        v6->sin6_family = AF_INET6;
        v6->sin6_port = htons((uint16_t)s->cfg.listen_port);
        sl = sizeof *v6;
        flags |= MHD_USE_IPv6;
    } else {
        snprintf(errbuf, errlen, "listen host '%s' must be an IP address or localhost", s->cfg.listen_host);
        return -1;
    }
    (void)sl;
    char *cert = NULL, *key = NULL;
    if (s->cfg.tls_cert) {
        cert = read_file_text(s->cfg.tls_cert);
        key = read_file_text(s->cfg.tls_key);
        if (!cert || !key) {
            snprintf(errbuf, errlen, "cannot read tls cert/key");
            abx_free(cert);
            abx_free(key);
            return -1;
        }
        flags |= MHD_USE_TLS;
    }
    if (abx_conn_layer_start(s, HEALTH_RESERVE + 512, errbuf, errlen) != 0) {
        abx_free(cert);
        abx_free(key);
        abx_conn_layer_free(s);
        return -1;
    }
    unsigned timeout_s = (unsigned)((s->cfg.read_timeout_ms + 999) / 1000);
    /* an idle connection is closed after timeout_s (counted in whole seconds, so as early
     * as a second before): every reply says so, or a client that keeps sockets alive
     * longer (Node's fetch: 4 s) reuses one being closed and its next call fails (a poll
     * after a long call over MCP) */
    snprintf(s->keepalive_header, sizeof s->keepalive_header, "timeout=%u", timeout_s > 2 ? timeout_s - 1 : 1);
    struct MHD_OptionItem tls_opts[] = {
        {cert ? MHD_OPTION_HTTPS_MEM_CERT : MHD_OPTION_END, 0, cert},
        {key ? MHD_OPTION_HTTPS_MEM_KEY : MHD_OPTION_END, 0, key},
        {MHD_OPTION_END, 0, NULL},
    };
    side_listen side = {.flags = flags & ~(unsigned)(MHD_USE_IPv6 | MHD_USE_TLS), .timeout_s = timeout_s};
    /* the terminal listener: same pipeline, WebSocket ops only, plaintext loopback; a busy
     * port is reported, not fatal (terminals stay reachable on the main listener) */
    if (s->cfg.terminal_port >= 0 && s->cfg.terminal_host) {
        bool loop = abx_host_is_loopback(s->cfg.terminal_host);
        struct MHD_Daemon *d1 = loop ? abx_side_listener(s, s->cfg.terminal_host, s->cfg.terminal_port, &side,
                                                     on_uri_terminal, &s->terminal_port)
                                     : NULL;
        if (d1)
            s->mhd_terminal = d1;
        else
            abx_log("warn", NULL,
                    "terminal listener %s:%d not started (%s); terminals stay reachable on the main listener",
                    s->cfg.terminal_host, s->cfg.terminal_port,
                    !loop ? "it must be a loopback address" : strerror(errno ? errno : EADDRINUSE));
    }
    /* the E2B envd listener (door e2b): as the main listener, TLS or loopback or plaintext allowed */
    int rc = e2b_listener_start(s, &side, cert ? tls_opts : NULL, errbuf, errlen);
    if (rc == 0)
        rc = abx_sandboxd_listen_start(s, &side, cert ? tls_opts : NULL, errbuf, errlen);
    if (rc != 0) {
        abx_free(cert);
        abx_free(key);
        abx_listener_stop(s);
        return -1;
    }
    /* the main listener last: its GET /health is what a supervisor, a pod's readiness
     * probe and the tests wait for, so when it answers every other listener is bound */
    struct MHD_Daemon *d0 = MHD_start_daemon(
        flags, 0, on_accept, s, on_request, s, MHD_OPTION_SOCK_ADDR, (struct sockaddr *)&ss,
        MHD_OPTION_CONNECTION_LIMIT, (unsigned)(s->cfg.connections + HEALTH_RESERVE), MHD_OPTION_CONNECTION_TIMEOUT,
        timeout_s, MHD_OPTION_CONNECTION_MEMORY_LIMIT, conn_pool_bytes(&s->cfg), MHD_OPTION_URI_LOG_CALLBACK, abx_listener_on_uri, s, MHD_OPTION_NOTIFY_COMPLETED, on_completed, s,
        MHD_OPTION_NOTIFY_CONNECTION, on_connection, s, MHD_OPTION_THREAD_STACK_SIZE, (size_t)(512 * 1024),
        MHD_OPTION_THREAD_POOL_SIZE, (unsigned)IO_THREADS,
        MHD_OPTION_EXTERNAL_LOGGER, mhd_log, s, MHD_OPTION_LISTENING_ADDRESS_REUSE, (unsigned)1,
        MHD_OPTION_ARRAY, tls_opts, MHD_OPTION_END);
    abx_free(cert);
    abx_free(key);
    if (!d0) {
        snprintf(errbuf, errlen, "cannot listen on %s:%d: %s", s->cfg.listen_host, s->cfg.listen_port,
                 strerror(errno ? errno : EADDRINUSE));
        abx_listener_stop(s);
        return -1;
    }
    s->mhd = d0;
    const union MHD_DaemonInfo *info = MHD_get_daemon_info(d0, MHD_DAEMON_INFO_BIND_PORT);
    s->port = info ? info->port : s->cfg.listen_port;
    *tls = s->cfg.tls_cert != NULL;
    return 0;
}

void abx_listener_stop(abx_server *s)
{
    /* suspended connections must be back before libmicrohttpd stops: calls in flight
     * finish (and resume theirs), pumps end after their current read */
    abx_workers_stop(s->workers);
    abx_e2b_watchers_stop(s);
    abx_pumps_stop(s->pumps);
    if (s->mhd_terminal) {
        MHD_stop_daemon(s->mhd_terminal);
        s->mhd_terminal = NULL;
    }
    abx_sbx_grpc_stop(s);
    void **e2b[] = {&s->mhd_e2b, &s->mhd_e2b_interp, &s->mhd_sandboxd};
    for (size_t i = 0; i < 3; i++)
        if (*e2b[i]) {
            MHD_stop_daemon(*e2b[i]);
            *e2b[i] = NULL;
        }
    if (s->mhd) {
        MHD_stop_daemon(s->mhd);
        s->mhd = NULL;
    }
    abx_conn_layer_free(s);
}


static abx_conn *conn_of(struct MHD_Connection *c)
{
    const union MHD_ConnectionInfo *ci = MHD_get_connection_info(c, MHD_CONNECTION_INFO_SOCKET_CONTEXT);
    return ci ? ci->socket_context : NULL;
}

void *abx_listener_on_uri(void *cls, const char *uri, struct MHD_Connection *c)
{
    abx_server *s = cls;
    abx_request *r = abx_request_new(s, ABX_DOOR_HTTP);
    if (!r)
        return NULL;
    conn_req *cr = abx_arena_alloc(r->arena, sizeof *cr);
    if (!cr) {
        abx_request_free(r);
        return NULL;
    }
    cr->r = r;
    cr->raw_len = strlen(uri);
    cr->raw = abx_arena_strndup(r->arena, uri, cr->raw_len);
    char addr[INET6_ADDRSTRLEN]; /* the peer's address: made once per connection (abx_conns_open) */
    abx_conn *k = conn_of(c);
    const union MHD_ConnectionInfo *ci = k ? NULL : MHD_get_connection_info(c, MHD_CONNECTION_INFO_CLIENT_ADDRESS);
    r->client = abx_arena_strdup(r->arena, abx_conn_client(k, ci ? ci->client_addr : NULL, addr));
    const union MHD_ConnectionInfo *fdi = MHD_get_connection_info(c, MHD_CONNECTION_INFO_CONNECTION_FD);
    r->conn_fd = fdi ? fdi->connect_fd : -1;
    r->header_fn = abx_connection_header;
    r->header_ud = c;
    r->headers_each = abx_connection_headers;
    return cr;
}

static void *on_uri_terminal(void *cls, const char *uri, struct MHD_Connection *c)
{
    conn_req *cr = abx_listener_on_uri(cls, uri, c);
    if (cr)
        cr->r->terminal_listener = true;
    return cr;
}

static void *on_uri_e2b(void *cls, const char *uri, struct MHD_Connection *c)
{
    conn_req *cr = abx_listener_on_uri(cls, uri, c);
    if (cr)
        cr->r->e2b_listener = true;
    return cr;
}

static void on_completed(void *cls, struct MHD_Connection *c, void **con_cls, enum MHD_RequestTerminationCode t)
{
    abx_server *s = cls;
    conn_req *cr = *con_cls;
    if (t == MHD_REQUEST_TERMINATED_TIMEOUT_REACHED)
        atomic_fetch_add(&s->closed_timeout, 1);
    else if (t == MHD_REQUEST_TERMINATED_CLIENT_ABORT || t == MHD_REQUEST_TERMINATED_READ_ERROR)
        atomic_fetch_add(&s->aborted, 1);
    abx_conn *k = conn_of(c);
    if (cr) {
        const abx_request *r = cr->r;
        /* a principal (not anonymous) answered on this connection: it stops counting
         * against its address's cap of unauthenticated connections */
        if (r->policy && r->slot >= 0 && r->slot < (int)r->policy->n_principals)
            abx_conns_authenticated(s->conn_table, k);
        abx_request_free(cr->r);
    }
    abx_conns_request_ended(s->conn_table, k);
    *con_cls = NULL;
}

static void on_connection(void *cls, struct MHD_Connection *c, void **socket_context,
                          enum MHD_ConnectionNotificationCode code)
{
    abx_server *s = cls;
    if (code == MHD_CONNECTION_NOTIFY_STARTED) {
        atomic_fetch_add(&s->conns, 1);
        const union MHD_ConnectionInfo *ai = MHD_get_connection_info(c, MHD_CONNECTION_INFO_CLIENT_ADDRESS);
        const union MHD_ConnectionInfo *fi = MHD_get_connection_info(c, MHD_CONNECTION_INFO_CONNECTION_FD);
        *socket_context = abx_conns_open(s->conn_table, ai ? ai->client_addr : NULL, fi ? fi->connect_fd : -1);
    } else {
        atomic_fetch_sub(&s->conns, 1);
        abx_conns_close(s->conn_table, *socket_context);
        *socket_context = NULL;
    }
}

static void add_common_headers(abx_server *s, abx_request *r, struct MHD_Response *resp)
{
    const char *hk;
    json_t *hv;
    json_object_foreach(r->reply.headers, hk, hv) {
        if (json_is_array(hv)) { /* a header given more than once (a relayed Set-Cookie) */
            size_t i;
            json_t *one;
            json_array_foreach(hv, i, one) MHD_add_response_header(resp, hk, json_string_value(one));
        } else {
            MHD_add_response_header(resp, hk, json_string_value(hv));
        }
    }
    MHD_add_response_header(resp, "X-ABX-Server", s->version_header);
    MHD_add_response_header(resp, "X-Request-Id", r->id);
    MHD_add_response_header(resp, "Cache-Control", "no-store");
    MHD_add_response_header(resp, "X-Content-Type-Options", "nosniff");
    MHD_add_response_header(resp, "Keep-Alive", s->keepalive_header);
}

/* WebSocket replies: after the 101, the session runs on its own thread. */
typedef struct ws_ctx {
    const abx_ws_ops *ops;
    void *state;
    struct MHD_UpgradeResponseHandle *urh;
    int sock;
    char *extra;
    size_t extra_len;
} ws_ctx;

static void *ws_thread(void *arg)
{
    ws_ctx *w = arg;
    if (w->ops->raw)
        w->ops->raw(w->state, w->sock, w->extra, w->extra_len);
    else
        abx_ws_run(w->sock, w->extra, w->extra_len, w->ops, w->state);
    w->ops->free_fn(w->state);
    MHD_upgrade_action(w->urh, MHD_UPGRADE_ACTION_CLOSE);
    free(w->extra);
    free(w);
    return NULL;
}

static void on_upgrade(void *cls, struct MHD_Connection *c, void *con_cls, const char *extra_in, size_t extra_in_size,
                       MHD_socket sock, struct MHD_UpgradeResponseHandle *urh)
{
    ws_ctx *w = cls;
    w->urh = urh;
    w->sock = sock;
    if (extra_in_size) {
        w->extra = malloc(extra_in_size);
        if (w->extra) {
            memcpy(w->extra, extra_in, extra_in_size);
            w->extra_len = extra_in_size;
        }
    }
    pthread_t t;
    pthread_attr_t at;
    pthread_attr_init(&at);
    pthread_attr_setdetachstate(&at, PTHREAD_CREATE_DETACHED);
    pthread_attr_setstacksize(&at, 256 * 1024);
    if (pthread_create(&t, &at, ws_thread, w) != 0) {
        w->ops->free_fn(w->state);
        MHD_upgrade_action(urh, MHD_UPGRADE_ACTION_CLOSE);
        free(w->extra);
        free(w);
    }
    pthread_attr_destroy(&at);
}

static enum MHD_Result send_reply(struct MHD_Connection *c, conn_req *cr)
{
    abx_request *r = cr->r;
    abx_server *s = r->server;
    struct MHD_Response *resp;
    int status = abx_reply_http_status(&r->reply);
    cr->responded = true;
    if (!r->reply.err && r->reply.ws_ops) {
        char accept[32];
        ws_ctx *w = calloc(1, sizeof *w);
        if (!w || !abx_ws_accept_key(r->ws_key, accept)) {
            free(w);
            return MHD_NO;
        }
        w->ops = r->reply.ws_ops;
        w->state = r->reply.ws_state;
        resp = MHD_create_response_for_upgrade(on_upgrade, w);
        if (!resp) {
            free(w);
            return MHD_NO;
        }
        r->reply.ws_ops = NULL; /* the session owns the state now */
        r->reply.ws_state = NULL;
        abx_conns_upgraded(s->conn_table, conn_of(c)); /* a session: no header deadline */
        MHD_add_response_header(resp, MHD_HTTP_HEADER_UPGRADE, "websocket");
        MHD_add_response_header(resp, "Sec-WebSocket-Accept", accept);
        add_common_headers(s, r, resp);
        enum MHD_Result rc = MHD_queue_response(c, MHD_HTTP_SWITCHING_PROTOCOLS, resp);
        MHD_destroy_response(resp);
        return rc;
    }
    if (!r->reply.err && r->reply.stream_read) {
        /* the handler's reader blocks: a pump runs it off the I/O threads (the pump
         * owns the stream now, and frees it also when the response cannot be made) */
        resp = abx_pump_response(s->pumps, c, r->reply.stream_read, r->reply.stream_state, r->reply.stream_free,
                                 STREAM_BUFFER);
        r->reply.stream_read = NULL;
        r->reply.stream_state = NULL;
        r->reply.stream_free = NULL;
        if (resp) {
            MHD_add_response_header(resp, "Content-Type", r->reply.content_type ? r->reply.content_type
                                                                                 : "text/event-stream");
            MHD_add_response_header(resp, "X-Accel-Buffering", "no");
            /* a stream outlives the read timeout; keepalives flow at least every 2 s */
            MHD_set_connection_option(c, MHD_CONNECTION_OPTION_TIMEOUT, (unsigned)60);
        }
    } else if (!r->reply.err && r->reply.raw) {
        /* the bytes (from malloc) go to libmicrohttpd, which frees them */
        resp = MHD_create_response_from_buffer(r->reply.raw_len, r->reply.raw, MHD_RESPMEM_MUST_FREE);
        if (resp) {
            r->reply.raw = NULL;
            MHD_add_response_header(resp, "Content-Type",
                                    r->reply.content_type ? r->reply.content_type : "application/octet-stream");
        }
    } else if (!r->reply.err && r->reply.fd >= 0) {
        resp = MHD_create_response_from_fd_at_offset64(r->reply.length, r->reply.fd, r->reply.offset);
        if (resp) {
            r->reply.fd = -1; /* MHD owns and closes it */
            MHD_add_response_header(resp, "Content-Type",
                                    r->reply.content_type ? r->reply.content_type : "application/octet-stream");
        }
    } else {
        size_t len;
        char *body = abx_reply_render(&r->reply, &len);
        resp = body ? MHD_create_response_from_buffer(len, body, MHD_RESPMEM_MUST_FREE) : NULL;
        if (!resp)
            free(body);
        else if (len) /* a protocol reply may have no body at all (MCP: 202, 204) */
            MHD_add_response_header(resp, "Content-Type", "application/json");
    }
    if (!resp)
        return MHD_NO;
    add_common_headers(s, r, resp);
    if (r->reply.allow[0])
        MHD_add_response_header(resp, "Allow", r->reply.allow);
    if (r->reply.retry_after > 0) {
        char ra[16];
        snprintf(ra, sizeof ra, "%d", r->reply.retry_after);
        MHD_add_response_header(resp, "Retry-After", ra);
    }
    if (r->reply.err && status >= 400 && !cr->started)
        MHD_add_response_header(resp, MHD_HTTP_HEADER_CONNECTION, "close");
    enum MHD_Result rc = MHD_queue_response(c, (unsigned)status, resp);
    MHD_destroy_response(resp);
    return rc;
}

/* A transport-level rejection (steps 0 and 1): audited like any call, then answered. */
static enum MHD_Result reject(struct MHD_Connection *c, conn_req *cr, abx_err e, const char *msg)
{
    abx_request *r = cr->r;
    if (e == ABX_E_REQUEST_BUSY)
        atomic_fetch_add(&r->server->refused_busy, 1);
    abx_fail(r, e, "%s", msg);
    abx_doors_dispatch(r); /* with an error set, only the audit runs */
    return send_reply(c, cr);
}

typedef struct hdr_scan {
    abx_headers h;
    bool bad;
} hdr_scan;

static enum MHD_Result scan_header(void *cls, enum MHD_ValueKind kind, const char *key, size_t klen,
                                   const char *value, size_t vlen)
{
    hdr_scan *hs = cls;
    if (!abx_headers_add(&hs->h, key, klen, value, vlen)) {
        hs->bad = true;
        return MHD_NO;
    }
    return MHD_YES;
}

/* First call for a request: step 0 and the transport half of step 1. */
static enum MHD_Result first_call(struct MHD_Connection *c, conn_req *cr, const char *method,
                                  const char *version)
{
    abx_request *r = cr->r;
    abx_server *s = r->server;
    r->method = abx_arena_strdup(r->arena, method);
    /* step 0a: bounded headers, before anything reads them (and before authentication) */
    if (!abx_headers_within_limits(c, &s->cfg, method, cr->raw_len, version))
        return reject(c, cr, ABX_E_REQUEST_HEADERS_TOO_LARGE,
                      "the request line and headers exceed limits.header_bytes or limits.headers");
    /* step 0b: the raw target */
    if (!(r->sandboxd_listener ? abx_sandboxd_target_ok(cr->raw, cr->raw_len) : abx_target_ok(cr->raw, cr->raw_len)))
        return reject(c, cr, ABX_E_REQUEST_BAD_TARGET, "the request target is malformed");
    const char *q = memchr(cr->raw, '?', cr->raw_len);
    r->path = cr->raw;
    r->path_len = q ? (size_t)(q - cr->raw) : cr->raw_len;
    if (q) {
        r->query = q + 1;
        r->query_len = cr->raw_len - r->path_len - 1;
    }
    /* header sanity: the desync cases libmicrohttpd lets through */
    hdr_scan hs = {0};
    MHD_get_connection_values_n(c, MHD_HEADER_KIND, scan_header, &hs);
    int64_t clen = -1;
    if (hs.bad || !abx_headers_check(&hs.h, &clen))
        return reject(c, cr, ABX_E_REQUEST_BAD_HEADER, hs.h.why);
    abx_headers *h = &hs.h;
    r->content_type = h->content_type;
    r->bearer = h->bearer;
    r->auth_bad_scheme = h->auth_bad_scheme;
    r->x_token = h->x_token;
    if (r->e2b_listener && !r->x_token) /* E2B's code-interpreter SDK sends only this on /contexts */
        r->x_token = MHD_lookup_connection_value(c, MHD_HEADER_KIND, "E2B-Traffic-Access-Token");
    r->idem_key = h->idem_key;
    r->prefer_wait = h->prefer_wait;
    r->ws_key = h->ws_key;
    r->ws_upgrade = h->ws_upgrade;
    r->last_event_id = h->last_event_id;
    /* step 0c: Host and Origin */
    if (!abx_host_allowed(s, h->host))
        return reject(c, cr, ABX_E_REQUEST_HOST_DENIED, "the Host header is not allowed");
    if (h->origin && !abx_origin_allowed(s, h->origin, h->host))
        return reject(c, cr, ABX_E_REQUEST_ORIGIN_DENIED, "the Origin header is not allowed");
    if (!r->e2b_listener && !r->terminal_listener && !r->sandboxd_listener &&
        !abx_port_origin_take(s, r, h, cr->raw, cr->raw_len))
        return reject(c, cr, ABX_E_SERVER_UNAVAILABLE, "out of memory");
    if (!r->terminal_listener && !r->e2b_listener && !r->sandboxd_listener && abx_console_path(r->path, r->path_len))
        return (cr->console = true) ? MHD_YES : MHD_NO; /* static files: no principal (answered below) */
    /* step 2 early (pure trie walk): the busy slot and the body rules depend on the op */
    abx_doors_route(r);
    const abx_op *op = r->route == ABX_ROUTE_FOUND ? r->match.op : NULL;
    bool health = op && strcmp(op->id, "core.health") == 0;
    /* the terminal listener serves WebSocket ops only; anything else is the one 404 */
    if (r->terminal_listener && (!op || op->def->stream != ABX_STREAM_WS)) {
        r->route = ABX_ROUTE_NONE;
        r->door = ABX_DOOR_HTTP;
        r->op_name = NULL;
        r->door_run = NULL;
        memset(&r->match, 0, sizeof r->match);
        op = NULL;
    }
    /* step 0a: bounded connections, with a reserved slot for health */
    if (atomic_load(&s->conns) > s->cfg.connections && !health)
        return reject(c, cr, ABX_E_REQUEST_BUSY, "too many connections; try again");
    cr->bytes_body = op && op->def->raw_body && r->door == ABX_DOOR_HTTP;
    cr->max_body = cr->bytes_body || r->e2b_listener || r->sandboxd_listener ? s->cfg.upload_max_bytes : s->cfg.request_max_bytes;
    /* step 1: size cap before reading; JSON bodies must say so */
    bool has_body = clen > 0 || h->te != NULL;
    if (clen > cr->max_body) {
        char msg[120];
        snprintf(msg, sizeof msg, "the body (%lld bytes) is larger than the limit of %lld bytes", (long long)clen,
                 (long long)cr->max_body);
        return reject(c, cr, ABX_E_LIMIT_REQUEST_TOO_LARGE, msg);
    }
    /* the E2B door reads Connect's protobuf and JSON, and envd's uploads, itself */
    bool raw_data = op && op->def->raw_query && r->door == ABX_DOOR_HTTP; /* ports.proxy: any type */
    if (has_body && !cr->bytes_body && !raw_data && !r->e2b_listener && !r->sandboxd_listener && !abx_is_json_type(r->content_type))
        return reject(c, cr, ABX_E_REQUEST_BAD_CONTENT_TYPE, "send the body as Content-Type: application/json");
    r->has_body = has_body;
    abx_buf_init(&r->body, (size_t)cr->max_body);
    if (cr->bytes_body && has_body) {
        /* streamed body: run the pipeline now (arguments come from the query); the
         * handler registers a sink and the body flows to it chunk by chunk */
        abx_doors_begin(r);
        cr->streaming = true;
        if (!abx_body_wanted(r)) { /* refused (or done) before any byte was read */
            abx_body_end(r);
            abx_audit(r);
            return send_reply(c, cr);
        }
    }
    return MHD_YES;
}

/* Whether the pipeline may run on the I/O thread: only calls that cannot wait. Plain HTTP calls of the built-in
 * files, core, ledger and system namespaces that neither stream nor execute nor ask to wait (Prefer: wait) answer
 * in microseconds; everything else (commands, processes and their long polls, approvals, terminals, batch, MCP,
 * tool calls, custom and Python ops) goes to a worker. Unrouted calls are answered inline (404/405). */
static bool runs_inline(const abx_request *r)
{
    if (r->door != ABX_DOOR_HTTP || r->prefer_wait > 0)
        return false;
    const abx_op *op = r->route == ABX_ROUTE_FOUND ? r->match.op : NULL;
    if (!op)
        return true;
    abx_stream st = op->def->stream; /* bytes results (downloads, metrics) do not wait */
    if (st == ABX_STREAM_SSE || st == ABX_STREAM_NDJSON || st == ABX_STREAM_WS || (op->effects & ABX_EFF_EXEC))
        return false;
    static const char *const quick[] = {"files.", "core.", "ledger.", "system."};
    for (size_t i = 0; i < sizeof quick / sizeof quick[0]; i++)
        if (strncmp(op->id, quick[i], strlen(quick[i])) == 0)
            return true;
    return false;
}

static void offload_run(void *arg)
{
    conn_req *cr = arg;
    abx_doors_dispatch(cr->r);
    atomic_store(&cr->done, true);
    MHD_resume_connection(cr->c); /* libmicrohttpd calls on_request again: the reply goes out */
}

/* Suspend the connection and run the call on a worker; when the pool is full, answer
 * 503 request.busy (after resuming: a reply cannot be queued on a suspended connection). */
static enum MHD_Result offload(struct MHD_Connection *c, conn_req *cr)
{
    abx_server *s = cr->r->server;
    cr->offloaded = true;
    cr->c = c;
    MHD_suspend_connection(c);
    if (abx_workers_submit(s->workers, offload_run, cr))
        return MHD_YES;
    atomic_fetch_add(&s->refused_busy, 1);
    abx_fail(cr->r, ABX_E_REQUEST_BUSY, "every worker is busy; try again");
    abx_doors_dispatch(cr->r); /* with an error set, only the audit runs */
    atomic_store(&cr->done, true);
    MHD_resume_connection(c);
    return MHD_YES;
}

static enum MHD_Result on_request(void *cls, struct MHD_Connection *c, const char *url, const char *method,
                                  const char *version, const char *upload, size_t *upload_size, void **con_cls)
{
    conn_req *cr = *con_cls;
    if (!cr)
        return MHD_NO; /* out of memory in the URI callback: drop the connection */
    if (cr->responded) {
        *upload_size = 0; /* a rejection was queued; discard what follows */
        return MHD_YES;
    }
    /* libmicrohttpd cannot queue a reply while it hands us body data: after an error
     * decided mid-body, the rest is dropped and the reply goes out at the final call.
     * Past a grace of 1 MiB (or the cap) the connection is cut instead. */
    if (cr->failed) {
        cr->discarded += *upload_size;
        *upload_size = 0;
        uint64_t grace = cr->max_body > (1 << 20) ? (uint64_t)cr->max_body : (1u << 20);
        if (upload && cr->discarded > grace)
            return MHD_NO;
        if (upload)
            return MHD_YES;
        if (cr->streaming)
            abx_body_end(cr->r);
        abx_audit(cr->r);
        return send_reply(c, cr);
    }
    if (!cr->started) {
        abx_conns_request_begun(cr->r->server->conn_table, conn_of(c)); /* the headers are in */
        enum MHD_Result rc = first_call(c, cr, method, version);
        cr->started = true;
        return rc;
    }
    if (*upload_size && cr->streaming) {
        size_t n = *upload_size;
        *upload_size = 0;
        if ((int64_t)(cr->r->sink.received + n) > cr->max_body) {
            char msg[96];
            snprintf(msg, sizeof msg, "the body is larger than the limit of %lld bytes", (long long)cr->max_body);
            abx_fail(cr->r, ABX_E_LIMIT_REQUEST_TOO_LARGE, "%s", msg);
        } else {
            abx_body_feed(cr->r, upload, n);
        }
        if (cr->r->reply.err) /* answered at the final call; the rest of the body is dropped */
            cr->failed = true;
        return MHD_YES;
    }
    if (*upload_size) {
        size_t n = *upload_size;
        if (!abx_buf_append(&cr->r->body, upload, n)) {
            *upload_size = 0;
            char msg[96];
            snprintf(msg, sizeof msg, "the body is larger than the limit of %lld bytes", (long long)cr->max_body);
            abx_fail(cr->r, cr->r->body.len + n > (size_t)cr->max_body ? ABX_E_LIMIT_REQUEST_TOO_LARGE
                                                                        : ABX_E_SERVER_UNAVAILABLE,
                     "%s", msg);
            cr->failed = true;
            abx_buf_release(&cr->r->body);
            return MHD_YES;
        }
        *upload_size = 0;
        return MHD_YES;
    }
    if (cr->streaming) {
        abx_body_end(cr->r);
        abx_audit(cr->r);
        return send_reply(c, cr);
    }
    if (cr->console && (cr->responded = true))
        return (enum MHD_Result)abx_console_queue(c, method, cr->r->path, cr->r->path_len);
    if (cr->offloaded) /* resumed: the worker is done */
        return atomic_load(&cr->done) ? send_reply(c, cr) : MHD_YES;
    if (!runs_inline(cr->r))
        return offload(c, cr);
    abx_doors_dispatch(cr->r);
    return send_reply(c, cr);
}
