/* test_secrets.c — the config's secrets (src/config/secrets.c: env and file sources, their
 * errors, which never quote a value), the ${secret:NAME} templates, and a statement's
 * net.inject compiled into the proxy's rules (src/policy/net_inject.c). */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "config/secrets.h"
#include "core/util.h"
#include "policy/internal.h"
#include "sandbox/egress_tls.h"

static json_t *js(const char *text)
{
    json_error_t e;
    json_t *j = json_loads(text, 0, &e);
    if (!j)
        fail_msg("json: %s", e.text);
    return j;
}

static void test_load(void **state)
{
    (void)state;
    char path[] = "/tmp/abx-secret-XXXXXX", err[300], spec[400];
    int fd = mkstemp(path);
    assert_true(write(fd, "from-file-value\n", 16) == 16);
    close(fd);
    setenv("ABX_TEST_SECRET", "from-env-value", 1);
    snprintf(spec, sizeof spec, "{\"A\": {\"env\": \"ABX_TEST_SECRET\"}, \"B\": {\"file\": \"%s\"}}", path);
    json_t *j = js(spec);
    abx_secrets s;
    const char *code = NULL;
    assert_int_equal(abx_secrets_load(j, &s, &code, err, sizeof err), 0);
    assert_string_equal(abx_secret_value(&s, "A"), "from-env-value");
    assert_string_equal(abx_secret_value(&s, "B"), "from-file-value"); /* the newline dropped */
    assert_null(abx_secret_value(&s, "C"));
    abx_secrets_free(&s);
    json_decref(j);
    unlink(path);
    /* errors: clear, with their code, never a value */
    struct { const char *spec, *code, *msg; } bad[] = {
        {"{\"A\": {\"env\": \"ABX_TEST_UNSET_VAR\"}}", "config.secret_unavailable", "ABX_TEST_UNSET_VAR is not set"},
        {"{\"A\": {\"file\": \"/nonexistent/abx\"}}", "config.secret_unavailable", "cannot read /nonexistent/abx"},
        {"{\"A\": {\"env\": \"X\", \"file\": \"/y\"}}", "config.invalid", "{env: VARIABLE} or {file: PATH}"},
        {"{\"A\": \"literal-value\"}", "config.invalid", "{env: VARIABLE} or {file: PATH}"},
        {"{\"bad name\": {\"env\": \"X\"}}", "config.invalid", "must be letters"},
        {"[1]", "config.invalid", "must be a map"},
    };
    for (size_t i = 0; i < ABX_ARRAY_LEN(bad); i++) {
        j = js(bad[i].spec);
        assert_int_equal(abx_secrets_load(j, &s, &code, err, sizeof err), -1);
        assert_string_equal(code, bad[i].code);
        assert_non_null(strstr(err, bad[i].msg));
        assert_null(strstr(err, "literal-value"));
        json_decref(j);
    }
}

static void test_templates(void **state)
{
    (void)state;
    abx_secret v[] = {{"GH", "tok123"}, {"K.2", "k2"}};
    abx_secrets s = {v, 2};
    char err[200];
    char *out = abx_secret_expand("Bearer ${secret:GH} $$5 ${secret:K.2}", &s, NULL, NULL, err, sizeof err);
    assert_string_equal(out, "Bearer tok123 $5 k2");
    abx_free(out);
    out = abx_secret_expand("", &s, NULL, NULL, err, sizeof err);
    assert_string_equal(out, "");
    abx_free(out);
    assert_null(abx_secret_expand("${secret:NOPE}", &s, NULL, NULL, err, sizeof err));
    assert_non_null(strstr(err, "unknown secret 'NOPE'"));
    const char *bad[] = {"${secret:GH", "${env:GH}", "$x", "${secret:}", "${secret:a b}", "tail $"};
    for (size_t i = 0; i < ABX_ARRAY_LEN(bad); i++) {
        assert_null(abx_secret_expand(bad[i], &s, NULL, NULL, err, sizeof err));
        assert_non_null(strstr(err, "malformed secret reference"));
    }
}

static void test_net_inject(void **state)
{
    (void)state;
    abx_secret v[] = {{"GH", "tok123"}};
    abx_secrets s = {v, 1};
    abx_policy_input in = {.secrets = &s};
    abx_diags d = {0};
    cctx c = {.in = &in, .d = &d};
    abx_stmt st;
    memset(&st, 0, sizeof st);
    json_t *net = js("{\"allow\": [\"api.github.com\"], \"inject\": [{\"host\": \"api.github.com\", "
                     "\"header\": \"Authorization\", \"value\": \"Bearer ${secret:GH}\"}]}");
    assert_true(abx_pol_net_inject(&c, &st, net));
    assert_non_null(st.net_inject);
    assert_int_equal(st.net_inject->n, 1);
    assert_string_equal(st.net_inject->v[0].value, "Bearer tok123");
    assert_int_equal(st.net_inject->nsecrets, 1);
    assert_string_equal(st.net_inject->secrets[0], "tok123");
    abx_pol_net_inject_free(&st);
    json_decref(net);
    const char *bad[] = {
        "{\"inject\": {}}",
        "{\"inject\": [{\"host\": \"a.test\", \"header\": \"X\"}]}",
        "{\"inject\": [{\"host\": \"a.test\", \"header\": \"X\", \"value\": \"${secret:NOPE}\"}]}",
        "{\"inject\": [{\"host\": \"*.a.test\", \"header\": \"X\", \"value\": \"${secret:GH}\"}]}",
        "{\"inject\": [{\"host\": \"a.test\", \"header\": \"Host\", \"value\": \"${secret:GH}\"}]}",
        "{\"inject\": [{\"host\": \"a.test\", \"header\": \"X\", \"value\": \"v\", \"extra\": 1}]}",
    };
    for (size_t i = 0; i < ABX_ARRAY_LEN(bad); i++) {
        net = js(bad[i]);
        size_t before = d.errors;
        memset(&st, 0, sizeof st);
        assert_false(abx_pol_net_inject(&c, &st, net));
        assert_true(d.errors > before);
        abx_pol_net_inject_free(&st);
        json_decref(net);
    }
    for (size_t i = 0; i < d.n; i++)
        assert_null(strstr(d.items[i].message, "tok123"));
    assert_non_null(strstr(d.items[2].message, "unknown secret 'NOPE'"));
    abx_diags_release(&d);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_load),
        cmocka_unit_test(test_templates),
        cmocka_unit_test(test_net_inject),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
