/* egress_dns.c — the DNS messages of the resolver inside each process's namespace
 * (egress.h, transparent mode): one question read from a query, answers built for it.
 * Pure and bounded; fuzzed by tests/fuzz/fuzz_dns.c. */
#include "sandbox/egress.h"
#include <string.h>

static uint16_t get16(const unsigned char *p) { return (uint16_t)(p[0] << 8 | p[1]); }

static void put16(unsigned char *p, unsigned v)
{
    p[0] = (unsigned char)(v >> 8);
    p[1] = (unsigned char)v;
}

static bool name_byte(unsigned char ch)
{
    return (ch >= 'a' && ch <= 'z') || (ch >= '0' && ch <= '9') || ch == '-' || ch == '_';
}

/* The question's name at off (labels, no compression) into q->name; the offset after
 * it, or 0. */
static size_t read_name(const unsigned char *b, size_t len, size_t off, abx_dns_query *q)
{
    size_t n = 0;
    for (;;) {
        if (off >= len)
            return 0;
        unsigned l = b[off++];
        if (l == 0)
            break;
        size_t grown = n + (n ? 1 : 0) + l; /* the dot before this label counts too */
        if (l > 63 || off + l > len || grown >= ABX_EGRESS_HOST_MAX || grown > 253)
            return 0; /* a pointer (0xc0) or an extended label type lands here too */
        if (n)
            q->name[n++] = '.';
        for (unsigned i = 0; i < l; i++) {
            unsigned char ch = b[off + i];
            if (ch >= 'A' && ch <= 'Z')
                ch = (unsigned char)(ch - 'A' + 'a');
            if (!name_byte(ch))
                return 0;
            q->name[n++] = (char)ch;
        }
        off += l;
    }
    q->name[n] = '\0';
    return n ? off : 0; /* the root itself is no name to answer */
}

int abx_dns_parse_query(const unsigned char *b, size_t len, abx_dns_query *q)
{
    memset(q, 0, sizeof *q);
    if (len < 12 || len > 65535)
        return -1;
    q->id = get16(b);
    q->flags = get16(b + 2);
    if ((q->flags & 0x8000) || (q->flags & 0x7800) || get16(b + 4) != 1 || get16(b + 6) || get16(b + 8))
        return -1; /* a response, an opcode other than QUERY, not one question, or answers */
    size_t off = read_name(b, len, 12, q);
    if (!off || off + 4 > len)
        return -1;
    q->qtype = get16(b + off);
    q->qclass = get16(b + off + 2);
    q->qend = off + 4;
    return 0;
}

static void header(unsigned char *out, uint16_t id, uint16_t qflags, int rcode, unsigned qd, unsigned an)
{
    put16(out, id);
    /* QR, the query's RD, RA, rcode */
    put16(out + 2, 0x8000u | (qflags & 0x0100u) | 0x0080u | ((unsigned)rcode & 0xf));
    put16(out + 4, qd);
    put16(out + 6, an);
    put16(out + 8, 0);
    put16(out + 10, 0);
}

size_t abx_dns_answer(const unsigned char *query, const abx_dns_query *q, int rcode, const unsigned char *a4,
                      unsigned char *out, size_t cap)
{
    size_t need = q->qend + (a4 ? 16 : 0);
    if (q->qend < 12 || need > cap)
        return 0;
    header(out, q->id, q->flags, rcode, 1, a4 ? 1 : 0);
    memcpy(out + 12, query + 12, q->qend - 12);
    if (!a4)
        return q->qend;
    unsigned char *r = out + q->qend;
    put16(r, 0xc00c); /* the question's name */
    put16(r + 2, 1);  /* A */
    put16(r + 4, 1);  /* IN */
    put16(r + 6, 0);  /* TTL: 300 s */
    put16(r + 8, 300);
    put16(r + 10, 4);
    memcpy(r + 12, a4, 4);
    return need;
}

size_t abx_dns_error(const unsigned char *query, size_t len, int rcode, unsigned char *out, size_t cap)
{
    if (len < 12 || cap < 12 || (get16(query + 2) & 0x8000))
        return 0; /* never answer an answer */
    header(out, get16(query), get16(query + 2), rcode, 0, 0);
    return 12;
}
