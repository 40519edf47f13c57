/* fuzz_dns.c — the egress resolver's DNS query parser and answer builder
 * (sandbox/egress_dns.c). Invariants: a parsed question lies inside the query; its name
 * is a normalized host name (lower case, no empty label, at most 253 bytes); an answer
 * to it fits the buffer it was built in, echoes the id and the question, and parses as a
 * response header; an error answer is never built for a response. */
#include "sandbox/egress.h"
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

int LLVMFuzzerTestOneInput(const uint8_t *d, size_t n)
{
    abx_dns_query q;
    unsigned char out[1300];
    if (abx_dns_parse_query(d, n, &q) == 0) {
        size_t nl = strlen(q.name);
        if (q.qend > n || q.qend < 12 + nl + 2 + 4 || nl == 0 || nl > 253)
            abort();
        char copy[ABX_EGRESS_HOST_MAX];
        memcpy(copy, q.name, nl + 1);
        if (!abx_egress_host_norm(copy) || strcmp(copy, q.name) != 0)
            abort();
        static const unsigned char a4[4] = {127, 100, 0, 1};
        size_t m = abx_dns_answer(d, &q, 0, n % 2 ? a4 : NULL, out, sizeof out);
        if (m > sizeof out || (m && (m < q.qend || memcmp(out, d, 2) != 0 || memcmp(out + 12, d + 12, q.qend - 12) ||
                                     !(out[2] & 0x80))))
            abort();
        abx_dns_query again;
        if (m && abx_dns_parse_query(out, m, &again) == 0)
            abort(); /* an answer is never read as a query */
    }
    size_t e = abx_dns_error(d, n, 1, out, sizeof out);
    if (e && (n < 12 || (d[2] & 0x80) || e != 12))
        abort();
    return 0;
}
