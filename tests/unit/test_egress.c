/* test_egress.c — unit tests of src/sandbox/egress_match.c and egress_parse.c: address
 * classes, allowlist entries and their refusals, matching (wildcards never reach
 * loopback, private, link-local or metadata addresses; the resolver table does for names
 * entered exactly; rebinding is refused), the lint, and the parsers' answers on whole,
 * partial and malformed input. Pure: no sockets, no DNS. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>

#include "sandbox/egress.h"

static abx_addr_class cls(const char *s)
{
    abx_ip ip;
    if (!abx_ip_parse(s, &ip))
        fail_msg("parse %s", s);
    return abx_ip_class(&ip);
}

static void test_classes(void **state)
{
    (void)state;
    assert_int_equal(cls("8.8.8.8"), ABX_ADDR_PUBLIC);
    assert_int_equal(cls("127.0.0.1"), ABX_ADDR_LOOPBACK);
    assert_int_equal(cls("127.9.9.9"), ABX_ADDR_LOOPBACK);
    assert_int_equal(cls("10.1.2.3"), ABX_ADDR_PRIVATE);
    assert_int_equal(cls("172.16.0.1"), ABX_ADDR_PRIVATE);
    assert_int_equal(cls("172.31.255.255"), ABX_ADDR_PRIVATE);
    assert_int_equal(cls("172.32.0.1"), ABX_ADDR_PUBLIC);
    assert_int_equal(cls("192.168.1.1"), ABX_ADDR_PRIVATE);
    assert_int_equal(cls("100.64.0.1"), ABX_ADDR_PRIVATE);
    assert_int_equal(cls("169.254.1.1"), ABX_ADDR_LINKLOCAL);
    assert_int_equal(cls("169.254.169.254"), ABX_ADDR_METADATA);
    assert_int_equal(cls("0.0.0.0"), ABX_ADDR_UNSPECIFIED);
    assert_int_equal(cls("224.0.0.1"), ABX_ADDR_UNSPECIFIED);
    assert_int_equal(cls("::1"), ABX_ADDR_LOOPBACK);
    assert_int_equal(cls("::"), ABX_ADDR_UNSPECIFIED);
    assert_int_equal(cls("fd00:ec2::254"), ABX_ADDR_METADATA);
    assert_int_equal(cls("fd12::1"), ABX_ADDR_PRIVATE);
    assert_int_equal(cls("fe80::1"), ABX_ADDR_LINKLOCAL);
    assert_int_equal(cls("2001:db8::1"), ABX_ADDR_PUBLIC);
    assert_int_equal(cls("::ffff:127.0.0.1"), ABX_ADDR_LOOPBACK); /* mapped is the v4 address */
    assert_int_equal(cls("::ffff:169.254.169.254"), ABX_ADDR_METADATA);
    abx_ip ip;
    assert_false(abx_ip_parse("1.2.3", &ip));
    assert_false(abx_ip_parse("example.com", &ip));
}

static void entry_refused(const char *e, const char *why)
{
    abx_egress_allow a = {0};
    char err[200] = "";
    if (abx_egress_allow_add(&a, e, err, sizeof err) == 0 || !strstr(err, why))
        fail_msg("entry %s: want refusal '%s', got '%s'", e, why, err);
    abx_egress_allow_free(&a);
}

static void test_entries(void **state)
{
    (void)state;
    abx_egress_allow a = {0};
    char err[200];
    const char *ok[] = {"pypi.org", "*.github.com", "api.github.com:443", "10.0.0.5", "10.0.0.0/8",
                        "[::1]:8080", "fd00::/8", "[2001:db8::/32]:443", "Example.COM.", "*"};
    for (size_t i = 0; i < sizeof ok / sizeof ok[0]; i++)
        if (abx_egress_allow_add(&a, ok[i], err, sizeof err) != 0)
            fail_msg("entry %s: %s", ok[i], err);
    assert_int_equal(a.n, 10);
    assert_int_equal(a.rules[1].kind, ABX_EG_WILDCARD);
    assert_string_equal(a.rules[1].host, "github.com");
    assert_int_equal(a.rules[2].port, 443);
    assert_int_equal(a.rules[4].prefix, 8);
    assert_int_equal(a.rules[5].port, 8080);
    assert_int_equal(a.rules[7].prefix, 32);
    assert_string_equal(a.rules[8].host, "example.com");
    abx_egress_allow_free(&a);
    entry_refused("", "empty");
    entry_refused("a..b", "bad host");
    entry_refused("exa mple.com", "bad host");
    entry_refused("host:0", "bad port");
    entry_refused("host:99999", "bad port");
    entry_refused("host:x", "bad port");
    entry_refused("10.0.0.0/33", "bad prefix");
    entry_refused("10.0.0.0/", "bad prefix");
    entry_refused("10.0.0/8", "bad address");
    entry_refused("*.", "bad wildcard");
    entry_refused("[::1", "bracketed");
    entry_refused("[::1]x", "bracketed");
}

static abx_egress_allow allow_of(const char *const *entries)
{
    abx_egress_allow a = {0};
    char err[200];
    for (; *entries; entries++)
        if (abx_egress_allow_add(&a, *entries, err, sizeof err) != 0)
            fail_msg("entry %s: %s", *entries, err);
    return a;
}

static bool allowed(const abx_egress_allow *a, const char *host, int port, const char *addr, bool pinned)
{
    abx_ip ip;
    if (addr && !abx_ip_parse(addr, &ip))
        fail_msg("addr %s", addr);
    abx_egress_decision d;
    abx_egress_check(a, host, port, addr ? &ip : NULL, addr ? 1 : 0, pinned, &d);
    return d.allow;
}

static void test_matching(void **state)
{
    (void)state;
    const char *entries[] = {"pypi.org", "*.github.com", "api.example.com:8443", "10.0.0.0/8", "203.0.113.7",
                             "pinned.test", "*", NULL};
    abx_egress_allow a = allow_of(entries);
    assert_true(allowed(&a, "pypi.org", 443, "151.101.0.223", false));
    assert_true(allowed(&a, "pypi.org", 80, "151.101.0.223", false));
    assert_false(allowed(&a, "pypi.org", 8080, "151.101.0.223", false)); /* default ports only */
    assert_true(allowed(&a, "raw.github.com", 443, "140.82.112.3", false));
    assert_true(allowed(&a, "a.b.github.com", 443, "140.82.112.3", false)); /* one or more labels */
    assert_true(allowed(&a, "api.example.com", 8443, "93.184.216.34", false));
    /* a wildcard never reaches a non-public address, pinned or not: rebinding */
    assert_false(allowed(&a, "evil.github.com", 443, "127.0.0.1", false));
    assert_false(allowed(&a, "evil.github.com", 443, "127.0.0.1", true));
    assert_false(allowed(&a, "evil.github.com", 443, "169.254.169.254", true));
    assert_false(allowed(&a, "anything.test", 443, "192.168.0.1", false)); /* "*" neither */
    assert_false(allowed(&a, "pypi.org", 443, "127.0.0.1", false));        /* DNS rebinding of a listed name */
    assert_false(allowed(&a, "pypi.org", 443, "fd00:ec2::254", false));
    /* a name entered exactly reaches what the resolver table pins it to */
    assert_true(allowed(&a, "pinned.test", 443, "127.0.0.1", true));
    assert_false(allowed(&a, "pinned.test", 443, "0.0.0.0", true));
    /* addresses named literally, and CIDRs of their own class */
    assert_true(allowed(&a, "10.1.2.3", 443, "10.1.2.3", false));
    assert_true(allowed(&a, "pypi.org", 443, "10.9.9.9", false)); /* a listed name on a listed network */
    assert_true(allowed(&a, "203.0.113.7", 80, "203.0.113.7", false));
    assert_false(allowed(&a, "203.0.113.8", 80, "203.0.113.8", false));
    assert_false(allowed(&a, "127.0.0.1", 80, "127.0.0.1", false));
    abx_egress_decision d;
    abx_egress_check(&a, "nothing.invalid", 443, NULL, 0, false, &d);
    assert_false(d.allow); /* "*" matches the name, but it has no address */
    assert_string_equal(d.rule, "*");
    abx_egress_allow_free(&a);

    const char *narrow[] = {"pypi.org", "0.0.0.0/0", "[::1]:8080", "169.254.0.0/16", "192.168.0.0/16", NULL};
    a = allow_of(narrow);
    abx_egress_check(&a, "evil.test", 443, NULL, 0, false, &d);
    assert_false(d.allow);
    assert_non_null(strstr(d.reason, "evil.test is not in the allowlist"));
    assert_null(d.rule);
    assert_true(allowed(&a, "8.8.8.8", 443, "8.8.8.8", false)); /* /0 reaches public addresses */
    assert_false(allowed(&a, "10.0.0.1", 443, "10.0.0.1", false)); /* but not private ones */
    assert_true(allowed(&a, "::1", 8080, "::1", false));
    assert_true(allowed(&a, "169.254.1.1", 80, "169.254.1.1", false));
    assert_false(allowed(&a, "169.254.169.254", 80, "169.254.169.254", false)); /* metadata: only by itself */
    assert_true(allowed(&a, "192.168.4.4", 443, "192.168.4.4", false));
    abx_egress_check(&a, "pypi.org", 443, NULL, 0, false, &d);
    assert_false(d.allow);
    assert_string_equal(d.rule, "pypi.org");
    assert_non_null(strstr(d.reason, "no address"));
    abx_egress_allow_free(&a);
}

static void test_every_address(void **state)
{
    (void)state;
    const char *entries[] = {"pypi.org", NULL};
    abx_egress_allow a = allow_of(entries);
    abx_ip ips[2];
    abx_ip_parse("151.101.0.223", &ips[0]);
    abx_ip_parse("10.0.0.1", &ips[1]);
    abx_egress_decision d;
    abx_egress_check(&a, "pypi.org", 443, ips, 1, false, &d);
    assert_true(d.allow);
    abx_egress_check(&a, "pypi.org", 443, ips, 2, false, &d); /* one bad address spoils the name */
    assert_false(d.allow);
    assert_non_null(strstr(d.reason, "10.0.0.1 (private)"));
    abx_egress_allow_free(&a);
}

static void test_resolver_and_decide(void **state)
{
    (void)state;
    abx_egress_resolver r = {0};
    char err[200];
    assert_int_equal(abx_egress_resolve_add(&r, "pinned.test:8080:127.0.0.1,[::1]", err, sizeof err), 0);
    assert_int_equal(abx_egress_resolve_add(&r, "evil.wild.test:8080:127.0.0.1", err, sizeof err), 0);
    assert_int_equal(abx_egress_resolve_add(&r, "nope", err, sizeof err), -1);
    assert_non_null(strstr(err, "host:port:address"));
    assert_int_equal(abx_egress_resolve_add(&r, "a.test:0:1.2.3.4", err, sizeof err), -1);
    assert_int_equal(abx_egress_resolve_add(&r, "a.test:80:not-an-ip", err, sizeof err), -1);
    assert_int_equal(abx_egress_resolve_add(&r, "a..test:80:1.2.3.4", err, sizeof err), -1);
    assert_int_equal(abx_egress_resolve_add(&r, "a.test:80:", err, sizeof err), -1);
    const abx_egress_pin *p = abx_egress_pinned(&r, "pinned.test", 8080);
    assert_non_null(p);
    assert_int_equal(p->n, 2);
    assert_null(abx_egress_pinned(&r, "pinned.test", 80));
    /* "*": every port, after an exact pin */
    assert_int_equal(abx_egress_resolve_add(&r, "any.test:*:10.0.0.7", err, sizeof err), 0);
    assert_int_equal(abx_egress_resolve_add(&r, "any.test:81:10.0.0.8", err, sizeof err), 0);
    assert_non_null(p = abx_egress_pinned(&r, "any.test", 4242));
    assert_int_equal(p->addrs[0].a[3], 7);
    assert_non_null(p = abx_egress_pinned(&r, "any.test", 81));
    assert_int_equal(p->addrs[0].a[3], 8);
    p = abx_egress_pinned(&r, "pinned.test", 8080);
    const char *entries[] = {"pinned.test:8080", "*.wild.test:8080", NULL};
    abx_egress_allow a = allow_of(entries);
    abx_egress_decision d;
    abx_egress_decide(&a, &r, false, "pinned.test", 8080, &d);
    assert_true(d.allow);
    assert_int_equal(d.naddrs, 2);
    abx_egress_decide(&a, &r, false, "evil.wild.test", 8080, &d);
    assert_false(d.allow);
    assert_non_null(strstr(d.reason, "127.0.0.1 (loopback)"));
    abx_egress_decide(&a, &r, false, "other.wild.test", 8080, &d); /* no table entry, no DNS */
    assert_false(d.allow);
    abx_egress_decide(&a, &r, false, "unlisted.test", 8080, &d);
    assert_false(d.allow);
    assert_null(d.rule);
    abx_egress_allow_free(&a);
    abx_egress_resolver_free(&r);
}

static void test_lint(void **state)
{
    (void)state;
    char msg[200];
    assert_true(abx_egress_lint("*", msg, sizeof msg));
    assert_non_null(strstr(msg, "every name"));
    assert_true(abx_egress_lint("*.com", msg, sizeof msg));
    assert_non_null(strstr(msg, "one-label"));
    assert_true(abx_egress_lint("*.internal:8080", msg, sizeof msg));
    assert_true(abx_egress_lint("0.0.0.0/0", msg, sizeof msg));
    assert_true(abx_egress_lint("::/0", msg, sizeof msg));
    assert_false(abx_egress_lint("*.github.com", msg, sizeof msg));
    assert_false(abx_egress_lint("pypi.org", msg, sizeof msg));
    assert_false(abx_egress_lint("10.0.0.0/8", msg, sizeof msg));
    assert_false(abx_egress_lint("bad..name", msg, sizeof msg));
}

static void test_host_norm(void **state)
{
    (void)state;
    char h[300];
    snprintf(h, sizeof h, "WWW.Example.Com.");
    assert_true(abx_egress_host_norm(h));
    assert_string_equal(h, "www.example.com");
    const char *bad[] = {"", ".", "a..b", ".a", "a b", "a/b", "a@b", "::g"};
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        snprintf(h, sizeof h, "%s", bad[i]);
        if (abx_egress_host_norm(h))
            fail_msg("host %s accepted", bad[i]);
    }
    memset(h, 'a', 70);
    h[70] = '\0';
    assert_false(abx_egress_host_norm(h)); /* a label over 63 */
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_classes),      cmocka_unit_test(test_entries),
        cmocka_unit_test(test_matching),     cmocka_unit_test(test_every_address),
        cmocka_unit_test(test_resolver_and_decide), cmocka_unit_test(test_lint),
        cmocka_unit_test(test_host_norm),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
