/* websocket.c — WebSocket sessions: handshake key, and a poll loop that moves frames
 * between the socket (wslay does the RFC 6455 framing) and an op's state. Text and
 * binary messages go to on_message; pull() output goes out as binary messages. */
#include "http/websocket.h"
#include "core/util.h"
#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <stdio.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>
#include <wslay/wslay.h>

bool abx_ws_accept_key(const char *key, char out[32])
{
    size_t kl = key ? strlen(key) : 0;
    size_t dl = 0;
    unsigned char *raw = kl == 24 ? abx_base64_decode(key, kl, &dl) : NULL;
    abx_free(raw);
    if (dl != 16)
        return false;
    static const char guid[] = "258EAFA5-E914-47DA-95CA-C5AB0DC85B11";
    char buf[64];
    memcpy(buf, key, kl);
    memcpy(buf + kl, guid, sizeof guid - 1);
    unsigned char sha[20];
    abx_sha1(buf, kl + sizeof guid - 1, sha);
    char *b64 = abx_base64_encode(sha, sizeof sha, NULL);
    if (!b64)
        return false;
    snprintf(out, 32, "%s", b64);
    abx_free(b64);
    return true;
}

typedef struct session {
    int sock;
    const char *extra;
    size_t extra_len;
    const abx_ws_ops *ops;
    void *state;
} session;

static ssize_t recv_cb(wslay_event_context_ptr ctx, uint8_t *buf, size_t len, int flags, void *ud)
{
    session *s = ud;
    if (s->extra_len) {
        size_t n = len < s->extra_len ? len : s->extra_len;
        memcpy(buf, s->extra, n);
        s->extra += n;
        s->extra_len -= n;
        return (ssize_t)n;
    }
    ssize_t r;
    while ((r = recv(s->sock, buf, len, 0)) < 0 && errno == EINTR) {
    }
    if (r < 0) {
        wslay_event_set_error(ctx, errno == EAGAIN || errno == EWOULDBLOCK ? WSLAY_ERR_WOULDBLOCK : WSLAY_ERR_CALLBACK_FAILURE);
        return -1;
    }
    if (r == 0) {
        wslay_event_set_error(ctx, WSLAY_ERR_CALLBACK_FAILURE);
        return -1;
    }
    return r;
}

static ssize_t send_cb(wslay_event_context_ptr ctx, const uint8_t *data, size_t len, int flags, void *ud)
{
    session *s = ud;
    ssize_t r;
    while ((r = send(s->sock, data, len, MSG_NOSIGNAL)) < 0 && errno == EINTR) {
    }
    if (r < 0) {
        wslay_event_set_error(ctx, errno == EAGAIN || errno == EWOULDBLOCK ? WSLAY_ERR_WOULDBLOCK : WSLAY_ERR_CALLBACK_FAILURE);
        return -1;
    }
    return r;
}

static void msg_cb(wslay_event_context_ptr ctx, const struct wslay_event_on_msg_recv_arg *arg, void *ud)
{
    session *s = ud;
    if (!wslay_is_ctrl_frame(arg->opcode))
        s->ops->on_message(s->state, arg->opcode, arg->msg, arg->msg_length);
}

void abx_ws_run(int sock, const char *extra, size_t extra_len, const abx_ws_ops *ops, void *state)
{
    session s = {sock, extra, extra_len, ops, state};
    struct wslay_event_callbacks cb = {recv_cb, send_cb, NULL, NULL, NULL, NULL, msg_cb};
    wslay_event_context_ptr ctx;
    if (wslay_event_context_server_init(&ctx, &cb, &s) != 0)
        return;
    wslay_event_config_set_max_recv_msg_length(ctx, 1 << 20); /* input messages are keystrokes */
    int fl = fcntl(sock, F_GETFL);
    fcntl(sock, F_SETFL, fl | O_NONBLOCK);
    char buf[16384];
    bool source_done = false;
    while (wslay_event_want_read(ctx) || wslay_event_want_write(ctx)) {
        if (s.extra_len && wslay_event_recv(ctx) != 0)
            break;
        /* the op's output, as long as the socket's send queue is not backed up */
        if (!source_done && wslay_event_get_queued_msg_count(ctx) < 64) {
            long n;
            while ((n = ops->pull(state, buf, sizeof buf)) > 0) {
                struct wslay_event_msg m = {WSLAY_BINARY_FRAME, (const uint8_t *)buf, (size_t)n};
                if (wslay_event_queue_msg(ctx, &m) != 0)
                    break;
                if (wslay_event_get_queued_msg_count(ctx) >= 64)
                    break;
            }
            if (n < 0) {
                source_done = true;
                wslay_event_queue_close(ctx, WSLAY_CODE_NORMAL_CLOSURE, (const uint8_t *)"ended", 5);
            }
        }
        struct pollfd pf = {.fd = sock, .events = (short)((wslay_event_want_read(ctx) ? POLLIN : 0) |
                                                          (wslay_event_want_write(ctx) ? POLLOUT : 0))};
        int pr = poll(&pf, 1, 20);
        if (pr < 0 && errno != EINTR)
            break;
        if (pr > 0 && (pf.revents & (POLLERR | POLLNVAL)))
            break;
        if (pr > 0 && (pf.revents & (POLLIN | POLLHUP)) && wslay_event_recv(ctx) != 0)
            break;
        if (pr > 0 && (pf.revents & POLLOUT) && wslay_event_send(ctx) != 0)
            break;
    }
    wslay_event_context_free(ctx);
}
