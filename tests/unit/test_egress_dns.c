/* test_egress_dns.c — unit tests of src/sandbox/egress_dns.c (the resolver's DNS query
 * parser and answers) and the transparent-mode helpers of egress_match.c (names the
 * resolver answers, the ports transparent listeners take). Pure: no sockets. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include <string.h>

#include "sandbox/egress.h"

/* a query for name (dotted) with type qt; its length */
static size_t query(unsigned char *b, const char *name, uint16_t qt, uint16_t flags)
{
    unsigned char h[12] = {0x12, 0x34, (unsigned char)(flags >> 8), (unsigned char)flags, 0, 1, 0, 0, 0, 0, 0, 0};
    memcpy(b, h, 12);
    size_t n = 12;
    const char *p = name;
    while (*p) {
        const char *dot = strchr(p, '.');
        size_t l = dot ? (size_t)(dot - p) : strlen(p);
        b[n++] = (unsigned char)l;
        memcpy(b + n, p, l);
        n += l;
        p += l + (dot ? 1 : 0);
    }
    b[n++] = 0;
    b[n++] = (unsigned char)(qt >> 8);
    b[n++] = (unsigned char)qt;
    b[n++] = 0;
    b[n++] = 1;
    return n;
}

static void test_parse(void **state)
{
    (void)state;
    unsigned char b[512];
    abx_dns_query q;
    size_t n = query(b, "Up.Test", 1, 0x0100);
    assert_int_equal(abx_dns_parse_query(b, n, &q), 0);
    assert_string_equal(q.name, "up.test");
    assert_int_equal(q.qtype, 1);
    assert_int_equal(q.qclass, 1);
    assert_int_equal(q.id, 0x1234);
    assert_int_equal(q.qend, n);
    for (size_t k = 0; k < n; k++) /* every prefix is refused, never read past */
        assert_int_equal(abx_dns_parse_query(b, k, &q), -1);
    n = query(b, "up.test", 1, 0x8000); /* a response */
    assert_int_equal(abx_dns_parse_query(b, n, &q), -1);
    n = query(b, "up.test", 1, 0x2800); /* opcode UPDATE */
    assert_int_equal(abx_dns_parse_query(b, n, &q), -1);
    n = query(b, "up.test", 1, 0);
    b[12] = 0xc0; /* a compression pointer in a question */
    assert_int_equal(abx_dns_parse_query(b, n, &q), -1);
    n = query(b, "a b.test", 1, 0); /* a byte a host name cannot have */
    assert_int_equal(abx_dns_parse_query(b, n, &q), -1);
    n = query(b, "", 1, 0); /* the root */
    assert_int_equal(abx_dns_parse_query(b, n, &q), -1);
    /* 253 bytes is the longest name; the dot before the last label counts (fuzz_dns found
     * a 254-byte name let through when the check left it out) */
    char name[300];
    memset(name, 'a', sizeof name);
    name[63] = name[127] = name[191] = '.';
    name[253] = '\0'; /* labels of 63, 63, 63, 61 */
    n = query(b, name, 1, 0);
    assert_int_equal(abx_dns_parse_query(b, n, &q), 0);
    assert_int_equal(strlen(q.name), 253);
    name[253] = 'a';
    name[254] = '\0'; /* 63, 63, 63, 62: 254 bytes */
    n = query(b, name, 1, 0);
    assert_int_equal(abx_dns_parse_query(b, n, &q), -1);
}

static void test_answers(void **state)
{
    (void)state;
    unsigned char b[512], out[512];
    abx_dns_query q;
    size_t n = query(b, "up.test", 1, 0x0100);
    assert_int_equal(abx_dns_parse_query(b, n, &q), 0);
    static const unsigned char a4[4] = {127, 100, 0, 7};
    size_t m = abx_dns_answer(b, &q, 0, a4, out, sizeof out);
    assert_int_equal(m, n + 16);
    assert_memory_equal(out, "\x12\x34\x81\x80\x00\x01\x00\x01", 8); /* QR RD RA, NOERROR, one answer */
    assert_memory_equal(out + 12, b + 12, n - 12);
    assert_memory_equal(out + m - 4, a4, 4);
    assert_int_equal(abx_dns_parse_query(out, m, &q), -1); /* an answer is not a query */
    assert_int_equal(abx_dns_parse_query(b, n, &q), 0);
    m = abx_dns_answer(b, &q, 3, NULL, out, sizeof out);
    assert_int_equal(m, n);
    assert_int_equal(out[3] & 0xf, 3); /* NXDOMAIN */
    assert_int_equal(out[7], 0);
    assert_int_equal(abx_dns_answer(b, &q, 0, a4, out, n + 15), 0); /* does not fit */
    assert_int_equal(abx_dns_error(b, 11, 1, out, sizeof out), 0);
    assert_int_equal(abx_dns_error(b, n, 1, out, sizeof out), 12);
    assert_int_equal(out[3] & 0xf, 1);
    assert_int_equal(abx_dns_error(out, 12, 1, out + 100, 100), 0); /* never answer an answer */
}

static void test_names_and_ports(void **state)
{
    (void)state;
    abx_egress_allow a = {0};
    char err[200];
    static const char *const entries[] = {"up.test:8443", "*.wild.test", "10.0.0.0/8", "pypi.org", "x.test:3128",
                                          "y.test:53"};
    for (size_t i = 0; i < sizeof entries / sizeof *entries; i++)
        assert_int_equal(abx_egress_allow_add(&a, entries[i], err, sizeof err), 0);
    assert_non_null(abx_egress_name_listed(&a, "up.test"));
    assert_non_null(abx_egress_name_listed(&a, "a.b.wild.test"));
    assert_null(abx_egress_name_listed(&a, "wild.test"));
    assert_null(abx_egress_name_listed(&a, "evil.test"));
    assert_null(abx_egress_name_listed(&a, "10.1.2.3")); /* addresses are not names */
    int ports[16];
    size_t n = abx_egress_transparent_ports(&a, 3128, ports, 16);
    assert_int_equal(n, 3); /* 80, 443, 8443: never the proxy's port or 53 */
    assert_int_equal(ports[0], 80);
    assert_int_equal(ports[1], 443);
    assert_int_equal(ports[2], 8443);
    assert_int_equal(abx_egress_transparent_ports(&a, 3128, ports, 2), 2);
    abx_egress_allow_free(&a);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_parse),
        cmocka_unit_test(test_answers),
        cmocka_unit_test(test_names_and_ports),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
