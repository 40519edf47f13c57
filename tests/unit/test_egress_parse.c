/* test_egress_parse.c — unit tests of src/sandbox/egress_parse.c: the HTTP proxy request
 * head (absolute form, CONNECT, origin form with Host; smuggling shapes refused), the
 * SOCKS5 greeting and request (domain, IPv4, IPv6), and ClientHello server names — each
 * on whole, partial (every prefix says "more") and malformed input. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "sandbox/egress.h"
#include "egress_hello.h"

static int http(const char *s, abx_http_req *r)
{
    return abx_egress_parse_http(s, strlen(s), r);
}

static void test_http_forms(void **state)
{
    (void)state;
    abx_http_req r;
    const char *s = "GET http://Example.COM:8080/a/b?q=1 HTTP/1.1\r\nHost: example.com:8080\r\n"
                    "Content-Length: 5\r\n\r\nhello";
    assert_int_equal(http(s, &r), (int)strlen(s) - 5);
    assert_string_equal(r.method, "GET");
    assert_string_equal(r.host, "example.com");
    assert_int_equal(r.port, 8080);
    assert_true(r.absolute);
    assert_int_equal(r.content_length, 5);
    assert_memory_equal(s + r.path_off, "/a/b?q=1", r.path_len);
    assert_memory_equal(s + r.ver_off, "HTTP/1.1", 8);
    assert_int_equal(http("GET http://x.test HTTP/1.0\r\n\r\n", &r), 30);
    assert_int_equal(r.port, 80);
    assert_int_equal(r.path_len, 0);
    assert_true(http("CONNECT [::1]:443 HTTP/1.1\r\n\r\n", &r) > 0);
    assert_true(r.connect);
    assert_string_equal(r.host, "::1");
    assert_int_equal(r.port, 443);
    assert_true(http("GET / HTTP/1.1\r\nhost: origin.test\r\n\r\n", &r) > 0);
    assert_string_equal(r.host, "origin.test");
    assert_int_equal(r.port, 80);
    assert_true(http("POST http://a.test/ HTTP/1.1\r\nTransfer-Encoding: chunked\r\n\r\n", &r) > 0);
    assert_true(r.chunked);
}

static void test_http_partial_and_bad(void **state)
{
    (void)state;
    abx_http_req r;
    const char *whole = "GET http://a.test/ HTTP/1.1\r\nHost: a.test\r\n\r\n";
    for (size_t i = 0; i < strlen(whole); i++)
        assert_int_equal(abx_egress_parse_http(whole, i, &r), ABX_EG_MORE);
    const char *bad[] = {
        "GET https://a.test/ HTTP/1.1\r\n\r\n",          /* https goes through CONNECT */
        "GET http://u:p@a.test/ HTTP/1.1\r\n\r\n",       /* userinfo */
        "CONNECT a.test HTTP/1.1\r\n\r\n",               /* CONNECT needs a port */
        "CONNECT a.test:0 HTTP/1.1\r\n\r\n",
        "CONNECT a.test:65536 HTTP/1.1\r\n\r\n",
        "get http://a.test/ HTTP/1.1\r\n\r\n",
        "GET http://a.test/ HTTP/2.0\r\n\r\n",
        "GET / HTTP/1.1\r\n\r\n",                        /* origin form without Host */
        "GET http://a..test/ HTTP/1.1\r\n\r\n",
        "GET http://a.test/ HTTP/1.1\r\n folded\r\n\r\n",
        "GET http://a.test/ HTTP/1.1\r\nBad Name: x\r\n\r\n",
        "GET http://a.test/ HTTP/1.1\r\nHost: a.test\r\nHost: b.test\r\n\r\n",
        "GET http://a.test/ HTTP/1.1\r\nContent-Length: 1\r\nContent-Length: 2\r\n\r\n",
        "GET http://a.test/ HTTP/1.1\r\nContent-Length: x\r\n\r\n",
        "GET http://a.test/ HTTP/1.1\r\nContent-Length: 1\r\nTransfer-Encoding: chunked\r\n\r\n",
        "GET http://a.test/ HTTP/1.1\r\nX: a\rb\r\n\r\n",
        "GET http://a.test/\x01 HTTP/1.1\r\n\r\n",
    };
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++)
        if (http(bad[i], &r) != ABX_EG_BAD)
            fail_msg("accepted: %s", bad[i]);
    char *big = malloc(ABX_EGRESS_HEAD_MAX + 10);
    memset(big, 'a', ABX_EGRESS_HEAD_MAX + 10);
    assert_int_equal(abx_egress_parse_http(big, ABX_EGRESS_HEAD_MAX + 10, &r), ABX_EG_BAD);
    free(big);
}

static void test_socks(void **state)
{
    (void)state;
    bool noauth;
    assert_int_equal(abx_egress_parse_socks_hello((const unsigned char *)"\x05\x02\x02\x00", 4, &noauth), 4);
    assert_true(noauth);
    assert_int_equal(abx_egress_parse_socks_hello((const unsigned char *)"\x05\x01\x02", 3, &noauth), 3);
    assert_false(noauth);
    assert_int_equal(abx_egress_parse_socks_hello((const unsigned char *)"\x05\x02\x00", 3, &noauth), ABX_EG_MORE);
    assert_int_equal(abx_egress_parse_socks_hello((const unsigned char *)"\x04\x01", 2, &noauth), ABX_EG_BAD);
    assert_int_equal(abx_egress_parse_socks_hello((const unsigned char *)"\x05\x00", 2, &noauth), ABX_EG_BAD);

    int cmd, port;
    char host[ABX_EGRESS_HOST_MAX];
    const unsigned char dom[] = "\x05\x01\x00\x03\x06Pypi.O\x01\xbb";
    assert_int_equal(abx_egress_parse_socks_req(dom, 13, &cmd, host, &port), 13);
    assert_int_equal(cmd, 1);
    assert_string_equal(host, "pypi.o");
    assert_int_equal(port, 443);
    for (size_t i = 0; i < 13; i++)
        assert_int_equal(abx_egress_parse_socks_req(dom, i, &cmd, host, &port), ABX_EG_MORE);
    const unsigned char v4[] = {5, 1, 0, 1, 127, 0, 0, 1, 0, 80};
    assert_int_equal(abx_egress_parse_socks_req(v4, sizeof v4, &cmd, host, &port), 10);
    assert_string_equal(host, "127.0.0.1");
    unsigned char v6[22] = {5, 1, 0, 4};
    v6[19] = 1, v6[20] = 0x1f, v6[21] = 0x90;
    assert_int_equal(abx_egress_parse_socks_req(v6, sizeof v6, &cmd, host, &port), 22);
    assert_string_equal(host, "::1");
    assert_int_equal(port, 8080);
    const unsigned char badtype[] = {5, 1, 0, 9, 0, 0, 0};
    assert_int_equal(abx_egress_parse_socks_req(badtype, sizeof badtype, &cmd, host, &port), ABX_EG_BAD);
    const unsigned char port0[] = {5, 1, 0, 1, 1, 2, 3, 4, 0, 0};
    assert_int_equal(abx_egress_parse_socks_req(port0, sizeof port0, &cmd, host, &port), ABX_EG_BAD);
    const unsigned char badname[] = "\x05\x01\x00\x03\x03" "a b\x00\x50";
    assert_int_equal(abx_egress_parse_socks_req(badname, 10, &cmd, host, &port), ABX_EG_BAD);
}

static void test_sni(void **state)
{
    (void)state;
    unsigned char h[600];
    char sni[ABX_EGRESS_HOST_MAX];
    size_t n = build_hello(h, "API.Example.com");
    assert_int_equal(abx_egress_parse_sni(h, n, sni), ABX_SNI_FOUND);
    assert_string_equal(sni, "api.example.com");
    for (size_t i = 0; i < n; i++)
        assert_int_equal(abx_egress_parse_sni(h, i, sni), ABX_SNI_MORE);
    n = build_hello(h, NULL);
    assert_int_equal(abx_egress_parse_sni(h, n, sni), ABX_SNI_NONE);
    assert_int_equal(abx_egress_parse_sni((const unsigned char *)"GET / HTTP/1.1", 14, sni), ABX_SNI_NOT_TLS);
    n = build_hello(h, "a.test");
    h[5] = 2; /* a ServerHello */
    assert_int_equal(abx_egress_parse_sni(h, n, sni), ABX_SNI_BAD);
    n = build_hello(h, "a.test");
    h[8] = (unsigned char)(h[8] + 40); /* handshake longer than its record */
    assert_int_equal(abx_egress_parse_sni(h, n, sni), ABX_SNI_BAD);
    n = build_hello(h, "a b");
    assert_int_equal(abx_egress_parse_sni(h, n, sni), ABX_SNI_BAD);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_http_forms),
        cmocka_unit_test(test_http_partial_and_bad),
        cmocka_unit_test(test_socks),
        cmocka_unit_test(test_sni),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
