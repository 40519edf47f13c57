/* egress_hello.h — a minimal TLS ClientHello for the egress tests (test_egress_parse.c,
 * test_egress_proxy.c): one record, one cipher suite, optional server_name extension. */
#ifndef ABX_TEST_EGRESS_HELLO_H
#define ABX_TEST_EGRESS_HELLO_H

#include <stddef.h>
#include <string.h>

/* Write a ClientHello naming sni (NULL: no extension) into out; its length. */
static size_t build_hello(unsigned char *out, const char *sni)
{
    unsigned char body[512];
    size_t n = 0, sl = sni ? strlen(sni) : 0;
    body[n++] = 3, body[n++] = 3;          /* version */
    memset(body + n, 0x42, 32), n += 32;   /* random */
    body[n++] = 0;                         /* session id */
    body[n++] = 0, body[n++] = 2, body[n++] = 0x13, body[n++] = 0x01; /* one suite */
    body[n++] = 1, body[n++] = 0;          /* null compression */
    if (sni) {
        size_t ext = 2 + 3 + sl;           /* list length, type, name length, name */
        body[n++] = (unsigned char)((ext + 4) >> 8), body[n++] = (unsigned char)(ext + 4);
        body[n++] = 0, body[n++] = 0;      /* server_name */
        body[n++] = (unsigned char)(ext >> 8), body[n++] = (unsigned char)ext;
        body[n++] = (unsigned char)((ext - 2) >> 8), body[n++] = (unsigned char)(ext - 2);
        body[n++] = 0;
        body[n++] = (unsigned char)(sl >> 8), body[n++] = (unsigned char)sl;
        memcpy(body + n, sni, sl), n += sl;
    } else {
        body[n++] = 0, body[n++] = 0;      /* no extensions */
    }
    size_t hs = n + 4;
    out[0] = 0x16, out[1] = 3, out[2] = 1, out[3] = (unsigned char)(hs >> 8), out[4] = (unsigned char)hs;
    out[5] = 1, out[6] = 0, out[7] = (unsigned char)(n >> 8), out[8] = (unsigned char)n;
    memcpy(out + 9, body, n);
    return 9 + n;
}

#endif
