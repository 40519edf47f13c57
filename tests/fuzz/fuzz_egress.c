/* fuzz_egress.c — the egress proxy's parsers and allowlist (sandbox/egress_parse.c,
 * egress_match.c). The first byte picks the target. Invariants: a parser never claims
 * more bytes than it was given; what it returns as a host is already normalized (norm is
 * idempotent on it); a head's path and version lie inside the head; a found server name
 * is normalized too; every prefix of a complete message is "more" or the same verdict's
 * prefix, never a crash; an allowlist entry that parses is decided on without a crash. */
#include "sandbox/egress.h"
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

static void check_host(const char *h)
{
    char copy[ABX_EGRESS_HOST_MAX];
    memcpy(copy, h, strlen(h) + 1);
    if (!abx_egress_host_norm(copy) || strcmp(copy, h) != 0)
        abort();
}

static void http(const uint8_t *d, size_t n)
{
    abx_http_req r;
    int h = abx_egress_parse_http((const char *)d, n, &r);
    if (h <= 0)
        return;
    if ((size_t)h > n || r.path_off + r.path_len > (size_t)h || r.ver_off + 8 > (size_t)h || r.line_len > (size_t)h)
        abort();
    check_host(r.host);
    if (r.port < 1 || r.port > 65535 || (r.chunked && r.content_length >= 0))
        abort();
    for (size_t i = 0; i < (size_t)h && h <= 2048; i++) /* a shorter prefix is never a complete head */
        if (abx_egress_parse_http((const char *)d, i, &r) > 0)
            abort();
}

static void socks(const uint8_t *d, size_t n)
{
    bool noauth;
    int h = abx_egress_parse_socks_hello(d, n, &noauth);
    if (h > (int)n)
        abort();
    int cmd, port;
    char host[ABX_EGRESS_HOST_MAX];
    h = abx_egress_parse_socks_req(d, n, &cmd, host, &port);
    if (h > (int)n)
        abort();
    if (h > 0) {
        check_host(host);
        if (port < 1 || port > 65535)
            abort();
    }
}

static void sni(const uint8_t *d, size_t n)
{
    char out[ABX_EGRESS_HOST_MAX];
    if (abx_egress_parse_sni(d, n, out) == ABX_SNI_FOUND)
        check_host(out);
}

static void allow(const uint8_t *d, size_t n)
{
    char s[300];
    if (n >= sizeof s)
        return;
    memcpy(s, d, n);
    s[n] = '\0';
    char *host = strchr(s, '\n'); /* "entry\nhost" */
    if (host)
        *host++ = '\0';
    abx_egress_allow a = {0};
    char err[200], msg[200];
    abx_egress_lint(s, msg, sizeof msg);
    if (abx_egress_allow_add(&a, s, err, sizeof err) == 0 && host && abx_egress_host_norm(host)) {
        abx_ip ips[2];
        abx_ip_parse("127.0.0.1", &ips[0]);
        abx_ip_parse("93.184.216.34", &ips[1]);
        abx_egress_decision dd;
        abx_egress_check(&a, host, 443, ips, 2, true, &dd);
        if (dd.allow && dd.naddrs != 2)
            abort();
        abx_egress_check(&a, host, 80, ips + 1, 1, false, &dd);
    }
    abx_egress_allow_free(&a);
    abx_egress_resolver r = {0};
    abx_egress_resolve_add(&r, s, err, sizeof err);
    abx_egress_resolver_free(&r);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    if (size < 1 || size > ABX_EGRESS_HEAD_MAX + 64)
        return 0;
    switch (data[0] % 4) {
    case 0: http(data + 1, size - 1); break;
    case 1: socks(data + 1, size - 1); break;
    case 2: sni(data + 1, size - 1); break;
    default: allow(data + 1, size - 1); break;
    }
    return 0;
}
