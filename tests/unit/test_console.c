/* test_console.c — unit tests of src/server/console.c: what /ui answers from a table of
 * files (the one the build embeds, or none when the console was not built): the 404 with
 * its hint, index.html at /ui/, the 308 from /ui, ETag revalidation (304), 405 for other
 * methods, exact names only (no path walking), and the strict headers. */
#include <stdarg.h>
#include <stddef.h>
#include <setjmp.h>
#include <stdint.h>
#include <cmocka.h>

#include <string.h>

#include "server/console.h"

static const unsigned char INDEX[] = "<!doctype html>";
static const unsigned char APP[] = "console.log(1)";
static const abx_console_asset TAB[] = {
    {"index.html", "\"aaaa\"", INDEX, sizeof INDEX - 1},
    {"app.js", "\"bbbb\"", APP, sizeof APP - 1},
};

static void ask(const abx_console_asset *tab, size_t n, const char *method, const char *path, const char *inm,
                abx_console_answer *a)
{
    abx_console_answer_for(tab, n, method, path, strlen(path), inm, a);
}

static void test_not_built_says_how(void **state)
{
    (void)state;
    abx_console_answer a;
    ask(NULL, 0, "GET", "/ui/", NULL, &a);
    assert_int_equal(a.status, 404);
    assert_non_null(strstr((const char *)a.body, "npm ci && npm run build"));
    assert_non_null(strstr((const char *)a.body, "docs/console.md"));
    assert_int_equal(a.len, strlen((const char *)a.body));
    ask(NULL, 0, "GET", "/ui/app.js", NULL, &a);
    assert_int_equal(a.status, 404);
}

static void test_index_and_files(void **state)
{
    (void)state;
    abx_console_answer a;
    ask(TAB, 2, "GET", "/ui/", NULL, &a);
    assert_int_equal(a.status, 200);
    assert_string_equal(a.content_type, "text/html; charset=utf-8");
    assert_string_equal(a.etag, "\"aaaa\"");
    assert_memory_equal(a.body, INDEX, a.len);
    ask(TAB, 2, "HEAD", "/ui/app.js", NULL, &a);
    assert_int_equal(a.status, 200);
    assert_string_equal(a.content_type, "text/javascript; charset=utf-8");
    ask(TAB, 2, "GET", "/ui", NULL, &a);
    assert_int_equal(a.status, 308);
    assert_string_equal(a.location, "/ui/");
}

static void test_etag_revalidation(void **state)
{
    (void)state;
    abx_console_answer a;
    ask(TAB, 2, "GET", "/ui/app.js", "\"bbbb\"", &a);
    assert_int_equal(a.status, 304);
    ask(TAB, 2, "GET", "/ui/app.js", "\"zzzz\", W/\"bbbb\"", &a);
    assert_int_equal(a.status, 304);
    ask(TAB, 2, "GET", "/ui/app.js", "*", &a);
    assert_int_equal(a.status, 304);
    ask(TAB, 2, "GET", "/ui/app.js", "\"bbbb-old\"", &a);
    assert_int_equal(a.status, 200);
    ask(TAB, 2, "GET", "/ui/app.js", "\"aaaa\"", &a);
    assert_int_equal(a.status, 200);
}

static void test_refusals(void **state)
{
    (void)state;
    abx_console_answer a;
    ask(TAB, 2, "POST", "/ui/", NULL, &a);
    assert_int_equal(a.status, 405);
    ask(NULL, 0, "DELETE", "/ui/", NULL, &a);
    assert_int_equal(a.status, 405);
    const char *missing[] = {"/ui/../ui/app.js", "/ui/./app.js", "/ui//app.js", "/ui/app.js/", "/ui/APP.JS",
                             "/ui/app.j", "/ui/app.jsx", "/ui/index.html%00"};
    for (size_t i = 0; i < sizeof missing / sizeof missing[0]; i++) {
        ask(TAB, 2, "GET", missing[i], NULL, &a);
        assert_int_equal(a.status, 404);
        assert_string_equal(a.content_type, "text/plain; charset=utf-8");
    }
}

static void test_paths(void **state)
{
    (void)state;
    assert_true(abx_console_path("/ui", 3));
    assert_true(abx_console_path("/ui/", 4));
    assert_true(abx_console_path("/ui/app.js", 10));
    assert_false(abx_console_path("/uix", 4));
    assert_false(abx_console_path("/u", 2));
    assert_false(abx_console_path("/ops", 4));
    assert_false(abx_console_path("/ui/x", 2)); /* only the given length counts */
}

static void test_headers(void **state)
{
    (void)state;
    bool csp = false, nosniff = false;
    for (size_t i = 0; abx_console_headers[i]; i += 2) {
        if (strcmp(abx_console_headers[i], "Content-Security-Policy") == 0) {
            const char *v = abx_console_headers[i + 1];
            csp = strstr(v, "default-src 'self'") && strstr(v, "script-src 'self';") &&
                  strstr(v, "frame-ancestors 'none'") && !strstr(v, "unsafe-eval");
        }
        if (strcmp(abx_console_headers[i], "X-Content-Type-Options") == 0)
            nosniff = strcmp(abx_console_headers[i + 1], "nosniff") == 0;
    }
    assert_true(csp);
    assert_true(nosniff);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_not_built_says_how), cmocka_unit_test(test_index_and_files),
        cmocka_unit_test(test_etag_revalidation),  cmocka_unit_test(test_refusals),
        cmocka_unit_test(test_paths),              cmocka_unit_test(test_headers),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
