/* websocket.h — RFC 6455 sessions over an upgraded connection, framed by wslay. The
 * pipeline admitted the upgrade request (authentication, policy): that decision holds
 * for the socket's life. A session pumps the peer's messages into on_message and the
 * op's output (pull) out as binary frames, until either side ends. */
#ifndef ABX_HTTP_WEBSOCKET_H
#define ABX_HTTP_WEBSOCKET_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

typedef struct abx_ws_ops {
    /* a complete message from the peer: opcode 1 text, 2 binary */
    void (*on_message)(void *state, int opcode, const uint8_t *data, size_t len);
    /* bytes to send now (> 0), 0 when nothing is pending, -1 when the source has ended */
    long (*pull)(void *state, char *buf, size_t max);
    void (*free_fn)(void *state);
    /* optional: run the upgraded socket as raw bytes instead of framed messages (a
     * relay whose other end speaks WebSocket itself: ports.proxy); on_message and pull
     * are then unused. Blocking; closes nothing. extra as for abx_ws_run. */
    void (*raw)(void *state, int sock, const char *extra, size_t extra_len);
} abx_ws_ops;

/* The Sec-WebSocket-Accept value for a key (out: 29 bytes with NUL). false if the key
 * is not 16 bytes of base64. */
bool abx_ws_accept_key(const char *key, char out[32]);
/* Run a session on sock (blocking; closes nothing — the caller closes). extra: bytes the
 * HTTP layer had already read past the handshake. */
void abx_ws_run(int sock, const char *extra, size_t extra_len, const abx_ws_ops *ops, void *state);

#endif
