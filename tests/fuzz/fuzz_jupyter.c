/* fuzz_jupyter.c — libFuzzer target for the Jupyter message decoder (src/builtin/jupyter.c),
 * the one place bytes a kernel sends become values. The input is a list of parts, each a
 * 2-byte big-endian length and its bytes. The first byte picks the mode:
 *  - bit 0 clear: the parts are decoded as received (routing ids, delimiter, signature,
 *    JSON parts), unsigned when bit 1 is clear and under a fixed key when it is set —
 *    almost everything must be refused, nothing may crash;
 *  - bit 0 set: the parts are the four JSON parts and any buffers; the harness puts the
 *    delimiter and a correct signature in front, so the JSON checks are reached.
 * Invariants on success: msg_type, msg_id and parent_id are strings, the four parts are
 * objects; with a key, a message whose signature was not made by the harness never
 * decodes. */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "builtin/jupyter.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

static const unsigned char key[] = "0123456789abcdef0123456789abcdef";

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    if (size < 1)
        return 0;
    uint8_t mode = data[0];
    abx_jpart parts[ABX_JMSG_MAX_PARTS + 4];
    size_t n = 0, off = 1;
    bool wrap = mode & 1, keyed = (mode & 2) || wrap;
    size_t first = wrap ? 2 : 0;
    while (off + 2 <= size && first + n < ABX_JMSG_MAX_PARTS + 4) {
        size_t len = ((size_t)data[off] << 8) | data[off + 1];
        off += 2;
        if (len > size - off)
            len = size - off;
        parts[first + n++] = (abx_jpart){data + off, len};
        off += len;
    }
    char hex[65];
    if (wrap) {
        if (n < 4)
            return 0;
        unsigned char mac[32];
        abx_hmac_sha256(key, sizeof key - 1, &parts[2], 4, mac);
        for (int i = 0; i < 32; i++)
            snprintf(hex + 2 * i, 3, "%02x", mac[i]);
        parts[0] = (abx_jpart){"<IDS|MSG>", 9};
        parts[1] = (abx_jpart){hex, 64};
        n += 2;
    }
    abx_jmsg m;
    char why[128];
    int rc = abx_jmsg_decode(parts, n, key, keyed ? sizeof key - 1 : 0, &m, why, sizeof why);
    if (rc == 0) {
        if (!m.msg_type || !m.msg_id || !m.parent_id || !json_is_object(m.header) || !json_is_object(m.parent) ||
            !json_is_object(m.metadata) || !json_is_object(m.content)) {
            fprintf(stderr, "decoded message breaks the invariants\n");
            abort();
        }
        abx_jmsg_release(&m);
    } else if (!why[0]) {
        fprintf(stderr, "refusal without a reason\n");
        abort();
    }
    return 0;
}
