/* fuzz_ports_head.c — libFuzzer target for abx_ports_parse_head (src/builtin/ports_proxy.c):
 * the head of an answer from a server an agent started, relayed by ports.proxy. The
 * server is untrusted: any bytes, NULs included, length-delimited.
 *  1. Never crashes or reads past len (ASan).
 *  2. When accepted: status in 100..599; the input ends in CRLF CRLF and holds no NUL;
 *     every header handed on has a non-empty name without ':', space, tab, CR or LF and a
 *     value without CR or LF, and is never a hop-by-hop or framing header
 *     (Connection, Transfer-Encoding, Content-Length, Keep-Alive, Upgrade...) nor one abx
 *     sets itself (Content-Type, Cache-Control, X-Request-Id...). */
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include "builtin/ports.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

static void check_header(void *ud, const char *name, const char *value)
{
    (void)ud;
    static const char *const never[] = {"Connection", "Transfer-Encoding", "Content-Length", "Keep-Alive",
                                        "Upgrade", "Proxy-Authenticate", "Trailer", "TE", "Content-Type",
                                        "Cache-Control", "X-Content-Type-Options", "X-Request-Id", "X-ABX-Server"};
    if (!name[0] || strpbrk(name, ":\r\n \t") || strpbrk(value, "\r\n"))
        abort();
    for (size_t i = 0; i < sizeof never / sizeof never[0]; i++)
        if (strcasecmp(name, never[i]) == 0)
            abort();
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    if (size > 65536)
        return 0;
    char *copy = malloc(size ? size : 1); /* exactly size bytes: ASan sees any overread */
    if (!copy)
        return 0;
    memcpy(copy, data, size);
    ports_head h;
    if (abx_ports_parse_head(copy, size, &h, check_header, NULL)) {
        if (h.status < 100 || h.status > 599 || size < 4 || memcmp(copy + size - 4, "\r\n\r\n", 4) != 0 ||
            memchr(copy, '\0', size))
            abort();
    }
    free(copy);
    return 0;
}
