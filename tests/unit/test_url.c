/* test_url.c — unit tests of src/policy/url.c: the one canonical form of a URL (scheme
 * and host case, default ports, fragments), every refusal (odd schemes, userinfo, bad
 * ports, spaces, controls, backslashes, non-ASCII, dot segments plain and encoded,
 * IPv6 without its bracket, overlong hosts), and pattern matching (host wildcards,
 * ports, path globs, private and loopback hosts only when named literally). Pure: no
 * DNS, no files. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "policy/url.h"

static void canon_is(const char *url, const char *want)
{
    char err[200] = "";
    char *got = abx_url_canon(url, err, sizeof err);
    if (!got || strcmp(got, want) != 0)
        fail_msg("canon(%s): want %s, got %s (%s)", url, want, got ? got : "NULL", err);
    free(got);
}

static void refused(const char *url, const char *why)
{
    char err[200] = "";
    char *got = abx_url_canon(url, err, sizeof err);
    if (got || !strstr(err, why))
        fail_msg("canon(%s): want refusal '%s', got %s (%s)", url, why, got ? got : "NULL", err);
    free(got);
}

static void test_canonical_form(void **state)
{
    (void)state;
    canon_is("HTTPS://Example.COM/A?b=1#frag", "https://example.com/A?b=1");
    canon_is("http://example.com", "http://example.com/");
    canon_is("http://example.com:80/x", "http://example.com/x");
    canon_is("https://example.com:443", "https://example.com/");
    canon_is("https://example.com:80/", "https://example.com:80/");
    canon_is("http://example.com:8080/x", "http://example.com:8080/x");
    canon_is("http://example.com?q", "http://example.com/?q");
    canon_is("http://example.com/a?x=%2e%2e/..", "http://example.com/a?x=%2e%2e/.."); /* the query is data */
    canon_is("http://10.0.0.1/", "http://10.0.0.1/");
    canon_is("http://[::1]:8080/x", "http://[::1]:8080/x");
    canon_is("http://[2001:DB8::1]/", "http://[2001:db8::1]/");
    canon_is("http://example.com/...", "http://example.com/...");
    canon_is("http://example.com/@x", "http://example.com/@x"); /* an @ in the path is no userinfo */
}

static void test_refusals(void **state)
{
    (void)state;
    refused("", "scheme://host");
    refused("example.com", "scheme://host");
    refused("javascript:alert(1)", "scheme://host");
    refused("httpss://example.com/", "scheme://host");
    refused("ftp://example.com/", "scheme 'ftp' is not allowed");
    refused("file:///etc/passwd", "scheme 'file' is not allowed");
    refused("//example.com/", "scheme://host");
    refused("://example.com/", "scheme '' is not allowed");
    refused("http://user@example.com/", "userinfo");
    refused("http://user:pw@example.com/", "userinfo");
    refused("http://example.com@evil.com/", "userinfo");
    refused("http://example.com:0/", "invalid port");
    refused("http://example.com:65536/", "invalid port");
    refused("http://example.com:/", "invalid port");
    refused("http://example.com:8o/", "invalid port");
    refused("http://example.com:-1/", "invalid port");
    refused("http:///x", "no host");
    refused("http://", "no host");
    refused("http://exa mple.com/", "space, control, backslash or non-ASCII");
    refused("http://example.com/a b", "space");
    refused("http://example.com/\t", "space");
    refused("http://example.com\\@evil.com/", "backslash");
    refused("http://example.com/\x7f", "non-ASCII");
    refused("http://ex\xc3\xa4mple.com/", "non-ASCII");
    refused("http://exa_mple.com/", "not a plain DNS name");
    refused("http://.example.com/", "not a plain DNS name");
    refused("http://example..com/", "not a plain DNS name");
    refused("http://example.com./", "not a plain DNS name");
    refused("http://*.example.com/", "not a plain DNS name"); /* a wildcard is for patterns only */
    refused("http://[::1/", "not a plain DNS name");
    refused("http://::1/", "not a plain DNS name"); /* IPv6 only in brackets */
    refused("http://example.com/a/../b", "dot segments");
    refused("http://example.com/a/./b", "dot segments");
    refused("http://example.com/..", "dot segments");
    refused("http://example.com//etc", "empty or dot segments");
    refused("http://example.com/%2e%2E/x", "encoded dots or slashes");
    refused("http://example.com/a%2Fb", "encoded dots or slashes");
    refused("http://example.com/a%5cb", "encoded dots or slashes");
}

/* A host is at most 255 characters: longer ones are refused, never cut to fit. */
static void test_overlong(void **state)
{
    (void)state;
    char url[600], host[400];
    memset(host, 'a', 255);
    host[255] = '\0';
    snprintf(url, sizeof url, "http://%s/", host);
    canon_is(url, url);
    memset(host, 'a', 290);
    memcpy(host + 250, ".example.com", 12);
    host[290] = '\0';
    snprintf(url, sizeof url, "http://%s/", host);
    refused(url, "too long");
    memset(host, 'a', 320);
    host[320] = '\0';
    snprintf(url, sizeof url, "http://%s/", host);
    refused(url, "too long");
    /* a NUL ends the URL: what follows is never seen by the parser */
    canon_is("http://example.com/a\0@evil.com", "http://example.com/a");
}

static void matches(const char *pattern, const char *url, bool want)
{
    char err[200] = "";
    if (!abx_url_pattern_valid(pattern, err, sizeof err))
        fail_msg("pattern %s invalid: %s", pattern, err);
    char *cu = abx_url_canon(url, err, sizeof err);
    if (!cu)
        fail_msg("url %s: %s", url, err);
    if (abx_url_match(pattern, cu) != want)
        fail_msg("%s vs %s: want %s", pattern, cu, want ? "match" : "no match");
    free(cu);
}

static void test_host_patterns(void **state)
{
    (void)state;
    matches("https://*.example.com/**", "https://a.example.com/x", true);
    matches("https://*.example.com/**", "https://a.b.example.com/x/y", true);
    matches("https://*.example.com/**", "https://example.com/x", false);
    matches("https://*.example.com/**", "https://evilexample.com/x", false);
    matches("https://*.example.com/**", "https://a.example.com.evil.net/x", false);
    matches("https://*.example.com/**", "http://a.example.com/x", false);
    matches("https://*.example.com/**", "https://a.example.com:8443/x", false);
    matches("https://api.*.example.com/**", "https://api.eu.example.com/", true);
    matches("https://api.*.example.com/**", "https://api.eu.west.example.com/", false);
    matches("https://api.*.example.com/**", "https://api.example.com/", false);
    matches("https://example.com/**", "https://EXAMPLE.com/x", true);
    matches("https://example.com/**", "https://www.example.com/x", false);
}

static void test_ports_and_paths(void **state)
{
    (void)state;
    matches("https://example.com:8443/**", "https://example.com:8443/x", true);
    matches("https://example.com:8443/**", "https://example.com/x", false);
    matches("https://example.com:443/**", "https://example.com/x", true);
    matches("https://example.com/**", "https://example.com:443/x", true);
    matches("https://example.com/docs/*", "https://example.com/docs/a", true);
    matches("https://example.com/docs/*", "https://example.com/docs/a/b", false);
    matches("https://example.com/docs/**", "https://example.com/docs/a/b", true);
    matches("https://example.com/docs/**", "https://example.com/docsx", false);
    matches("https://example.com/docs/**", "https://example.com/other", false);
    matches("https://example.com/a", "https://example.com/a?q=1", true); /* the query is not matched */
}

static void test_private_hosts_only_literally(void **state)
{
    (void)state;
    /* label-wise wildcards ("*." leading a pattern is a suffix match instead) */
    matches("http://8.*.*.*/**", "http://8.8.8.8/", true);
    matches("http://172.*.*.*/**", "http://172.32.0.1/", true);
    matches("http://172.*.*.*/**", "http://172.15.0.1/", true);
    matches("http://10.*.*.*/**", "http://10.0.0.1/", false);
    matches("http://127.*.*.*/**", "http://127.0.0.1/", false);
    matches("http://172.*.*.*/**", "http://172.16.5.4/", false);
    matches("http://172.*.*.*/**", "http://172.31.255.255/", false);
    matches("http://192.*.*.*/**", "http://192.168.1.1/", false);
    matches("http://169.*.*.*/**", "http://169.254.169.254/", false); /* cloud metadata */
    matches("http://0.*.*.*/**", "http://0.0.0.0/", false);
    matches("http://*.*.*.*/**", "http://8.8.8.8/", false);
    matches("http://127.0.0.1/**", "http://127.0.0.1/x", true);
    matches("http://169.254.169.254/**", "http://169.254.169.254/latest", true);
    matches("http://*/**", "http://localhost/", false);
    matches("http://localhost/**", "http://localhost/", true);
    matches("http://*.localhost/**", "http://a.localhost/", false);
    matches("http://a.localhost/**", "http://a.localhost/", true);
    /* a private IPv6 literal would have to be named, and patterns cannot name one */
    matches("http://*/**", "http://[::1]/", false);
    matches("http://*/**", "http://[::ffff:127.0.0.1]/", false);
    matches("http://*/**", "http://[fe80::1]/", false);
    matches("http://*/**", "http://[fd00::1]/", false);
    matches("http://*/**", "http://[::]/", false);
    /* a lone * is one label, and a bracketed public IPv6 literal is one label */
    matches("http://*/**", "http://[2001:db8::1]/", true);
    matches("http://*.example.com/**", "http://[2001:db8::1]/", false);
}

static void test_patterns_refused(void **state)
{
    (void)state;
    static const char *const bad[] = {"ftp://example.com/**", "https://user@example.com/**", "https://[::1]/**",
                                      "https://example.com/a/../**", "https://example.com:99999/**",
                                      "https://exa mple.com/**", "example.com/**", ""};
    char err[200];
    for (size_t i = 0; i < sizeof bad / sizeof *bad; i++) {
        err[0] = '\0';
        if (abx_url_pattern_valid(bad[i], err, sizeof err) || !err[0])
            fail_msg("pattern '%s' was accepted", bad[i]);
        assert_false(abx_url_match(bad[i], "https://example.com/a"));
    }
    assert_true(abx_url_pattern_valid("https://*.example.com:8443/a/**", err, sizeof err));
    assert_false(abx_url_match("https://example.com/**", "not a url"));
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_canonical_form),  cmocka_unit_test(test_refusals),
        cmocka_unit_test(test_overlong),        cmocka_unit_test(test_host_patterns),
        cmocka_unit_test(test_ports_and_paths), cmocka_unit_test(test_private_hosts_only_literally),
        cmocka_unit_test(test_patterns_refused),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
