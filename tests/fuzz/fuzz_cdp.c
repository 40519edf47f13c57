/* fuzz_cdp.c — libFuzzer target for the CDP pipe reader (src/builtin/cdp.c), the one place
 * bytes from the browser (untrusted: a page may own its renderer) become values. The first
 * byte sets the chunk size the stream is fed in; the rest is the stream, NUL-framed. Every
 * frame is parsed. Invariants on success: an answer has an id > 0 and exactly one of a
 * result object and an error object, an event a non-empty string method and an object or
 * no params; the session, when present, is a string. */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "builtin/cdp.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    if (size < 1)
        return 0;
    size_t chunk = (size_t)data[0] + 1, off = 1;
    abx_cdp_framer f = {0};
    while (off < size) {
        size_t n = size - off < chunk ? size - off : chunk;
        if (abx_cdp_framer_feed(&f, (const char *)data + off, n) != 0)
            break;
        off += n;
        const char *frame;
        size_t len;
        int got;
        while ((got = abx_cdp_framer_next(&f, &frame, &len)) == 1) {
            if (memchr(frame, 0, len))
                abort();
            abx_cdp_msg m;
            if (abx_cdp_parse(frame, len, &m) != 0) {
                if (m.root || m.method || m.body)
                    abort();
                continue;
            }
            if (m.id > 0) {
                if (m.method || (!m.body == !m.error) || (m.body && !json_is_object(m.body)))
                    abort();
            } else if (!m.method || !*m.method || (m.body && !json_is_object(m.body)) || m.error) {
                abort();
            }
            abx_cdp_msg_release(&m);
        }
        if (got < 0)
            break;
    }
    abx_cdp_framer_release(&f);
    return 0;
}
