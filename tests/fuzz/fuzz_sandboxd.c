/* fuzz_sandboxd.c — libFuzzer target for the sandboxd door's parsers.
 *
 * First input byte picks the mode, the rest is the payload:
 *  - 0 mod 3: bytes from a gRPC client after HTTP/2's connection preface, fed to a
 *    connection of the gRPC listener (server/sandboxd_grpc.c) in chunks whose sizes the
 *    second byte varies: nghttp2's framing and HPACK, the gRPC length prefix, then each
 *    complete request decoded as its method's protobuf message (process.v1 and
 *    abx.sandboxd.v1); in this mode no method runs. Invariant: no crash, no leak, and the
 *    connection ends or goes on without touching freed streams (ASan).
 *  - 1 mod 3: a request target through abx_sandboxd_target_ok (%2F as a separator):
 *    whatever it accepts, with %2F read as '/', has no "." or ".." segment.
 *  - 2 mod 3: grpc-message's percent-encoding: the output is printable ASCII, fits, and
 *    decodes back to the input (up to the buffer's bound).
 * Owns no state across inputs. */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "doors/sandboxd.h"
#include "server/sandboxd_grpc.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

static void fail(const char *what)
{
    fprintf(stderr, "fuzz_sandboxd: %s\n", what);
    abort();
}

static void h2_mode(const uint8_t *data, size_t size)
{
    static const char preface[] = "PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n";
    sbx_gconn *c = abx_sbx_gconn_new(NULL, NULL, -1);
    if (!c)
        return;
    size_t step = size ? (size_t)data[0] % 64 + 1 : 1;
    bool live = abx_sbx_gconn_input(c, (const uint8_t *)preface, sizeof preface - 1);
    for (size_t at = 1; live && at < size; at += step) {
        size_t n = size - at < step ? size - at : step;
        live = abx_sbx_gconn_input(c, data + at, n);
    }
    abx_sbx_gconn_close(c);
}

static void target_mode(const uint8_t *data, size_t size)
{
    char *t = malloc(size + 2);
    if (!t)
        return;
    t[0] = '/';
    memcpy(t + 1, data, size);
    t[size + 1] = '\0';
    if (abx_sandboxd_target_ok(t, size + 1)) {
        /* the path with %2F as '/': no "." or ".." segment */
        char *p = malloc(size + 2);
        size_t o = 0;
        for (size_t i = 0; i <= size && t[i] != '?'; i++) {
            if (t[i] == '%' && i + 2 <= size && t[i + 1] == '2' && (t[i + 2] == 'F' || t[i + 2] == 'f')) {
                p[o++] = '/';
                i += 2;
            } else {
                p[o++] = t[i];
            }
        }
        p[o] = '\0';
        for (char *s = p; (s = strchr(s, '/')) != NULL; s++)
            if ((s[1] == '.' && (s[2] == '/' || s[2] == 0)) ||
                (s[1] == '.' && s[2] == '.' && (s[3] == '/' || s[3] == 0)))
                fail("a dot segment passed the target check");
        free(p);
    }
    free(t);
}

static void message_mode(const uint8_t *data, size_t size)
{
    char in[256], out[768];
    size_t n = size < 250 ? size : 250; /* 3 bytes each at most: fits out */
    memcpy(in, data, n);
    in[n] = '\0';
    abx_sbx_grpc_message_encode(in, out, sizeof out);
    size_t ol = strlen(out), k = 0;
    if (ol >= sizeof out)
        fail("the encoding overflowed");
    for (size_t i = 0; i < ol; i++) {
        if ((unsigned char)out[i] < 0x20 || (unsigned char)out[i] > 0x7e)
            fail("the encoding is not printable");
        char ch = out[i];
        if (ch == '%') {
            unsigned v = 0;
            if (i + 2 >= ol || sscanf(out + i + 1, "%2X", &v) != 1)
                fail("a bad escape");
            ch = (char)v;
            i += 2;
        }
        if (in[k++] != ch)
            fail("the encoding does not decode back");
    }
    if (k != strlen(in))
        fail("the encoding lost bytes");
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    if (size < 1)
        return 0;
    switch (data[0] % 3) {
    case 0: h2_mode(data + 1, size - 1); break;
    case 1: target_mode(data + 1, size - 1); break;
    default: message_mode(data + 1, size - 1); break;
    }
    return 0;
}
