/* fuzz_stream.c — libFuzzer target for the streaming transports' input side:
 *  - WebSocket framing (src/http/websocket.c over wslay): the input, after a one-byte
 *    split point, is what a client sends on an upgraded connection — part of it as
 *    bytes the HTTP layer had already read past the handshake ("extra"), the rest on
 *    the socket. The session runs against a socketpair until the peer's bytes end. Only
 *    complete text or binary messages may reach on_message, each at most 1 MiB; the
 *    session must end (EOF) without crashing or hanging;
 *  - the resumable-stream id of commands.stream / process.stream (abx_parse_event_id,
 *    "O,E"): accepted ids print back to the same numbers;
 *  - the Sec-WebSocket-Key check (abx_ws_accept_key): accepted keys are 24 base64
 *    characters, the answer is 28 characters.
 * The first input byte chooses how much of the rest goes to "extra". */
#include <errno.h>
#include <fcntl.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include "builtin/exec.h"
#include "http/websocket.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

typedef struct sink {
    size_t messages;
} sink;

static void on_message(void *state, int opcode, const uint8_t *msg, size_t len)
{
    sink *s = state;
    if ((opcode != 1 && opcode != 2) || len > (1u << 20) || (len && !msg)) {
        fprintf(stderr, "on_message: opcode %d, %zu bytes\n", opcode, len);
        abort();
    }
    s->messages++;
}

static long pull(void *state, char *buf, size_t max)
{
    (void)state, (void)buf, (void)max;
    return 0; /* the op has nothing to say: the session ends when the peer does */
}

static void nop_free(void *state) { (void)state; }

static const abx_ws_ops ops = {on_message, pull, nop_free};

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    if (size < 1 || size > 65536)
        return 0;
    size_t split = (size_t)data[0] * (size - 1) / 255;
    const char *body = (const char *)data + 1;
    size_t n = size - 1;

    /* event ids and keys: short NUL-terminated prefixes of the input */
    char text[64];
    size_t tl = n < sizeof text - 1 ? n : sizeof text - 1;
    memcpy(text, body, tl);
    text[tl] = '\0';
    uint64_t o = 7, e = 9;
    if (abx_parse_event_id(text, &o, &e)) {
        char again[64];
        snprintf(again, sizeof again, "%llu,%llu", (unsigned long long)o, (unsigned long long)e);
        uint64_t o2, e2;
        if (!abx_parse_event_id(again, &o2, &e2) || o2 != o || e2 != e)
            abort();
    }
    char acc[32];
    if (abx_ws_accept_key(text, acc) && (strlen(text) != 24 || strlen(acc) != 28))
        abort();

    int sv[2];
    if (socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, sv) != 0)
        return 0;
    /* the peer's bytes, then EOF; whatever does not fit the socket buffer is cut (the
     * session then sees a truncated stream, which is an input too) */
    fcntl(sv[1], F_SETFL, O_NONBLOCK);
    size_t off = split;
    while (off < n) {
        ssize_t w = write(sv[1], body + off, n - off);
        if (w <= 0)
            break;
        off += (size_t)w;
    }
    shutdown(sv[1], SHUT_WR);
    sink s = {0};
    abx_ws_run(sv[0], body, split, &ops, &s);
    close(sv[0]);
    close(sv[1]);
    return 0;
}
