/* jupyter.c — the Jupyter messaging protocol (v5.3) client: signing, the strict
 * decoder, and the ZeroMQ sockets of one kernel connection (see jupyter.h). */
#include "builtin/jupyter.h"
#include "core/util.h"
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <unistd.h>
#include "builtin/zmq_lazy.h"

#define DELIM "<IDS|MSG>"

/* ---- HMAC-SHA256 over the project's SHA-256 ---- */

void abx_hmac_sha256(const unsigned char *key, size_t keylen, const abx_jpart *parts, size_t n, unsigned char out[32])
{
    unsigned char k[64] = {0}, pad[64], inner[32];
    if (keylen > sizeof k) { /* a long key is hashed first (RFC 2104) */
        abx_sha256 h;
        abx_sha256_init(&h);
        abx_sha256_update(&h, key, keylen);
        abx_sha256_final(&h, k);
    } else if (keylen) {
        memcpy(k, key, keylen);
    }
    abx_sha256 h;
    for (int i = 0; i < 64; i++)
        pad[i] = k[i] ^ 0x36;
    abx_sha256_init(&h);
    abx_sha256_update(&h, pad, sizeof pad);
    for (size_t i = 0; i < n; i++)
        abx_sha256_update(&h, parts[i].data, parts[i].len);
    abx_sha256_final(&h, inner);
    for (int i = 0; i < 64; i++)
        pad[i] = k[i] ^ 0x5c;
    abx_sha256_init(&h);
    abx_sha256_update(&h, pad, sizeof pad);
    abx_sha256_update(&h, inner, sizeof inner);
    abx_sha256_final(&h, out);
}

/* ---- the decoder ---- */

static int fail(char *why, size_t whylen, const char *msg)
{
    snprintf(why, whylen, "%s", msg);
    return -1;
}

static json_t *load_object(const abx_jpart *p)
{
    json_t *j = json_loadb(p->data ? p->data : "", p->len, JSON_REJECT_DUPLICATES | JSON_ALLOW_NUL, NULL);
    if (j && !json_is_object(j)) {
        json_decref(j);
        return NULL;
    }
    return j;
}

int abx_jmsg_decode(const abx_jpart *parts, size_t n, const unsigned char *key, size_t keylen, abx_jmsg *m,
                    char *why, size_t whylen)
{
    memset(m, 0, sizeof *m);
    if (n > ABX_JMSG_MAX_PARTS)
        return fail(why, whylen, "too many parts");
    size_t d = 0, total = 0;
    for (size_t i = 0; i < n; i++) {
        if (parts[i].len > ABX_JMSG_MAX_BYTES - total)
            return fail(why, whylen, "message too large");
        total += parts[i].len;
    }
    while (d < n && !(parts[d].len == strlen(DELIM) && memcmp(parts[d].data, DELIM, parts[d].len) == 0))
        d++;
    if (d == n)
        return fail(why, whylen, "no <IDS|MSG> delimiter");
    if (n - d < 6)
        return fail(why, whylen, "fewer than the five parts after the delimiter");
    const abx_jpart *sig = &parts[d + 1], *body = &parts[d + 2];
    if (keylen) {
        unsigned char want[32], got[32];
        if (sig->len != 64 || abx_unhex(sig->data, 64, got, sizeof got) != 32)
            return fail(why, whylen, "the signature is not 64 hex digits");
        abx_hmac_sha256(key, keylen, body, 4, want);
        if (!abx_ct_equal(want, got, sizeof want))
            return fail(why, whylen, "bad signature");
    } else if (sig->len) {
        return fail(why, whylen, "a signature where none is expected");
    }
    m->header = load_object(&body[0]);
    m->parent = load_object(&body[1]);
    m->metadata = load_object(&body[2]);
    m->content = load_object(&body[3]);
    if (!m->header || !m->parent || !m->metadata || !m->content) {
        abx_jmsg_release(m);
        return fail(why, whylen, "a part is not a JSON object");
    }
    m->msg_type = json_string_value(json_object_get(m->header, "msg_type"));
    m->msg_id = json_string_value(json_object_get(m->header, "msg_id"));
    m->parent_id = json_string_value(json_object_get(m->parent, "msg_id"));
    if (!m->msg_type || !m->msg_id) {
        abx_jmsg_release(m);
        return fail(why, whylen, "the header lacks msg_type or msg_id");
    }
    if (!m->parent_id)
        m->parent_id = "";
    return 0;
}

void abx_jmsg_release(abx_jmsg *m)
{
    json_decref(m->header);
    json_decref(m->parent);
    json_decref(m->metadata);
    json_decref(m->content);
    memset(m, 0, sizeof *m);
}

/* ---- one connection ---- */

struct abx_jconn {
    void *zctx;
    void *sock[ABX_J_N];
    int listen_fd[ABX_J_N];
    char endpoint[ABX_J_N][120];
    char file[128];
    unsigned char key[32];      /* random; the protocol key is its hex text, as the file says */
    char keyhex[65];
    char session[33];
    uint64_t seq, dropped;
    int watch_fd;
    short watch_events;
};

static int listen_unix(const char *path)
{
    struct sockaddr_un a = {.sun_family = AF_UNIX};
    if (strlen(path) >= sizeof a.sun_path)
        return -ENAMETOOLONG;
    memcpy(a.sun_path, path, strlen(path) + 1);
    int fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
    if (fd < 0)
        return -errno;
    if (bind(fd, (struct sockaddr *)&a, sizeof a) != 0 || listen(fd, 16) != 0) {
        int e = errno;
        close(fd);
        return -e;
    }
    return fd;
}

static int write_conn_file(abx_jconn *c, const char *dir, char sep)
{
    char ip[120];
    snprintf(ip, sizeof ip, "%s/k", dir);
    json_t *j = json_pack("{s:s, s:s, s:s, s:s, s:s, s:i, s:i, s:i, s:i, s:i}", "transport", "ipc", "ip", ip,
                          "key", c->keyhex, "signature_scheme", "hmac-sha256", "kernel_name", "abx", "shell_port",
                          1 + ABX_J_SHELL, "iopub_port", 1 + ABX_J_IOPUB, "control_port", 1 + ABX_J_CONTROL,
                          "stdin_port", 1 + ABX_J_STDIN, "hb_port", 1 + ABX_J_HB);
    (void)sep;
    int fd = open(c->file, O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC | O_NOFOLLOW, 0600);
    int rc = (j && fd >= 0 && json_dumpfd(j, fd, JSON_COMPACT) == 0) ? 0 : -1;
    if (fd >= 0)
        close(fd);
    json_decref(j);
    return rc;
}

abx_jconn *abx_jconn_new(const char *dir, char sep, char *why, size_t whylen)
{
    abx_jconn *c = abx_calloc(1, sizeof *c);
    if (!c) {
        snprintf(why, whylen, "out of memory");
        return NULL;
    }
    for (int i = 0; i < ABX_J_N; i++)
        c->listen_fd[i] = -1;
    c->watch_fd = -1;
    unsigned char sess[16];
    if (abx_random(c->key, sizeof c->key) != 0 || abx_random(sess, sizeof sess) != 0) {
        snprintf(why, whylen, "no randomness");
        abx_jconn_free(c);
        return NULL;
    }
    abx_hex(c->key, sizeof c->key, c->keyhex);
    abx_hex(sess, sizeof sess, c->session);
    snprintf(c->file, sizeof c->file, "%s/kernel.json", dir);
    for (int i = 0; i < ABX_J_N; i++) {
        char path[120];
        snprintf(path, sizeof path, "%s/k%c%d", dir, sep, i + 1);
        snprintf(c->endpoint[i], sizeof c->endpoint[i], "ipc://%s", path);
        c->listen_fd[i] = listen_unix(path);
        if (c->listen_fd[i] < 0) {
            snprintf(why, whylen, "cannot make the kernel's socket %s: %s", path, strerror(-c->listen_fd[i]));
            abx_jconn_free(c);
            return NULL;
        }
    }
    if (write_conn_file(c, dir, sep) != 0) {
        snprintf(why, whylen, "cannot write %s: %s", c->file, strerror(errno));
        abx_jconn_free(c);
        return NULL;
    }
    return c;
}

const char *abx_jconn_file(const abx_jconn *c) { return c->file; }
const int *abx_jconn_listen_fds(const abx_jconn *c) { return c->listen_fd; }
uint64_t abx_jconn_dropped(const abx_jconn *c) { return c->dropped; }

void abx_jconn_watch_fd(abx_jconn *c, int fd, short events)
{
    c->watch_fd = fd;
    c->watch_events = events;
}

json_t *abx_jconn_fd_map(const abx_jconn *c)
{
    json_t *o = json_object();
    for (int i = 0; i < ABX_J_N; i++)
        json_object_set_new(o, c->endpoint[i], json_integer(c->listen_fd[i]));
    return o;
}

int abx_jconn_connect(abx_jconn *c, char *why, size_t whylen)
{
    static const int types[ABX_J_N] = {ZMQ_DEALER, ZMQ_SUB, ZMQ_DEALER, ZMQ_DEALER, ZMQ_REQ, ZMQ_REP};
    if (abx_zmq_load(why, whylen) != 0) /* libzmq is opened on the first kernel */
        return -1;
    c->zctx = zmq_ctx_new();
    if (!c->zctx) {
        snprintf(why, whylen, "zmq_ctx_new: %s", zmq_strerror(errno));
        return -1;
    }
    zmq_ctx_set(c->zctx, ZMQ_IO_THREADS, 1);
    for (int i = 0; i < ABX_J_N; i++) {
        int zero = 0;
        c->sock[i] = zmq_socket(c->zctx, types[i]);
        if (!c->sock[i] || zmq_setsockopt(c->sock[i], ZMQ_LINGER, &zero, sizeof zero) != 0 ||
            (i == ABX_J_IOPUB && zmq_setsockopt(c->sock[i], ZMQ_SUBSCRIBE, "", 0) != 0) ||
            zmq_connect(c->sock[i], c->endpoint[i]) != 0) {
            snprintf(why, whylen, "cannot connect %s: %s", c->endpoint[i], zmq_strerror(errno));
            return -1;
        }
    }
    for (int i = 0; i < ABX_J_N; i++) { /* the kernel holds them now */
        close(c->listen_fd[i]);
        c->listen_fd[i] = -1;
    }
    return 0;
}

static int send_part(void *s, const void *p, size_t n, bool more)
{
    return zmq_send(s, p, n, more ? ZMQ_SNDMORE : 0) < 0 ? -1 : 0;
}

int abx_jconn_send(abx_jconn *c, enum abx_jchan ch, const char *msg_type, json_t *content, char msg_id[40])
{
    char ts[32];
    abx_iso8601(abx_wall_ms(), ts);
    snprintf(msg_id, 40, "%.16s-%llu", c->session, (unsigned long long)++c->seq);
    json_t *hdr = json_pack("{s:s, s:s, s:s, s:s, s:s, s:s}", "msg_id", msg_id, "session", c->session, "username",
                            "abx", "date", ts, "msg_type", msg_type, "version", "5.3");
    char *h = hdr ? json_dumps(hdr, JSON_COMPACT) : NULL, *b = content ? json_dumps(content, JSON_COMPACT) : NULL;
    const char *js[4] = {h, "{}", "{}", b}; /* no parent: abx starts every exchange */
    json_decref(hdr);
    json_decref(content);
    int rc = -1;
    if (js[0] && js[1] && js[2] && js[3]) {
        abx_jpart parts[4];
        for (int i = 0; i < 4; i++)
            parts[i] = (abx_jpart){js[i], strlen(js[i])};
        unsigned char mac[32];
        char hex[65];
        abx_hmac_sha256((const unsigned char *)c->keyhex, 64, parts, 4, mac);
        abx_hex(mac, sizeof mac, hex);
        void *s = c->sock[ch];
        rc = send_part(s, DELIM, strlen(DELIM), true) || send_part(s, hex, 64, true);
        for (int i = 0; i < 4 && rc == 0; i++)
            rc = send_part(s, parts[i].data, parts[i].len, i < 3);
    }
    free(h);
    free(b);
    return rc ? -1 : 0;
}

/* Read every part of one message (already readable); parts past the bounds are read
 * and discarded so the socket stays in step. 0 ok, -1 over the bounds. */
static int recv_parts(void *s, zmq_msg_t *msgs, size_t *n)
{
    size_t total = 0;
    bool over = false;
    int more = 1;
    *n = 0;
    while (more) {
        zmq_msg_t tmp, *m = *n < ABX_JMSG_MAX_PARTS ? &msgs[*n] : &tmp;
        zmq_msg_init(m);
        if (zmq_msg_recv(m, s, ZMQ_DONTWAIT) < 0) {
            zmq_msg_close(m);
            return -1;
        }
        more = zmq_msg_more(m);
        total += zmq_msg_size(m);
        if (m == &tmp || total > ABX_JMSG_MAX_BYTES) {
            over = true;
            zmq_msg_close(m);
            continue;
        }
        (*n)++;
    }
    return over ? -1 : 0;
}

static int recv_one(abx_jconn *c, void *s, abx_jmsg *out)
{
    zmq_msg_t msgs[ABX_JMSG_MAX_PARTS];
    abx_jpart parts[ABX_JMSG_MAX_PARTS];
    size_t n;
    int rc = recv_parts(s, msgs, &n);
    for (size_t i = 0; i < n; i++)
        parts[i] = (abx_jpart){zmq_msg_data(&msgs[i]), zmq_msg_size(&msgs[i])};
    char why[128];
    if (rc == 0)
        rc = abx_jmsg_decode(parts, n, (const unsigned char *)c->keyhex, 64, out, why, sizeof why);
    for (size_t i = 0; i < n; i++)
        zmq_msg_close(&msgs[i]);
    if (rc != 0)
        c->dropped++;
    return rc;
}

int abx_jconn_recv(abx_jconn *c, unsigned mask, int timeout_ms, enum abx_jchan *ch, abx_jmsg *m)
{
    int64_t deadline = abx_now_ms() + (timeout_ms > 0 ? timeout_ms : 0);
    for (;;) {
        zmq_pollitem_t items[ABX_J_N + 1];
        int idx[ABX_J_N + 1], n = 0;
        for (int i = 0; i < ABX_J_N; i++)
            if ((mask & (1u << i)) && c->sock[i]) {
                items[n] = (zmq_pollitem_t){.socket = c->sock[i], .events = ZMQ_POLLIN};
                idx[n++] = i;
            }
        if (c->watch_fd >= 0) {
            items[n] = (zmq_pollitem_t){.fd = c->watch_fd, .events = c->watch_events};
            idx[n++] = ABX_J_N;
        }
        int64_t left = deadline - abx_now_ms();
        int rc = zmq_poll(items, n, left > 0 ? (long)left : 0);
        if (rc < 0 && errno != EINTR)
            return 0;
        for (int k = 0; rc > 0 && k < n; k++) {
            if (!items[k].revents)
                continue;
            *ch = (enum abx_jchan)idx[k];
            if (idx[k] == ABX_J_HOST || idx[k] == ABX_J_N) {
                memset(m, 0, sizeof *m);
                return 1;
            }
            if (recv_one(c, c->sock[idx[k]], m) == 0)
                return 1;
        }
        if (abx_now_ms() >= deadline)
            return 0;
    }
}

int abx_jconn_host_recv(abx_jconn *c, int timeout_ms, json_t **req)
{
    zmq_pollitem_t it = {.socket = c->sock[ABX_J_HOST], .events = ZMQ_POLLIN};
    *req = NULL;
    if (zmq_poll(&it, 1, timeout_ms) <= 0)
        return 0;
    zmq_msg_t msgs[ABX_JMSG_MAX_PARTS];
    size_t n;
    int rc = recv_parts(c->sock[ABX_J_HOST], msgs, &n);
    if (rc == 0 && n == 1)
        *req = json_loadb(zmq_msg_data(&msgs[0]), zmq_msg_size(&msgs[0]), JSON_REJECT_DUPLICATES, NULL);
    for (size_t i = 0; i < n; i++)
        zmq_msg_close(&msgs[i]);
    if (*req && !json_is_object(*req)) {
        json_decref(*req);
        *req = NULL;
    }
    return *req ? 1 : -1;
}

int abx_jconn_host_reply(abx_jconn *c, const json_t *reply)
{
    static const char oom[] = "{\"error\":{\"code\":\"server.unavailable\",\"message\":\"out of memory\"}}";
    char *s = json_dumps(reply, JSON_COMPACT);
    int rc = send_part(c->sock[ABX_J_HOST], s ? s : oom, s ? strlen(s) : strlen(oom), false);
    free(s);
    return rc;
}

void abx_jconn_free(abx_jconn *c)
{
    if (!c)
        return;
    for (int i = 0; i < ABX_J_N; i++) {
        if (c->sock[i])
            zmq_close(c->sock[i]);
        if (c->listen_fd[i] >= 0)
            close(c->listen_fd[i]);
    }
    if (c->zctx)
        zmq_ctx_term(c->zctx);
    abx_free(c);
}
