/* test_browser.c — the CDP message parser and framer (cdp.c: what the browser sends is
 * untrusted), and the screening hooks on browser.* results through the in-process
 * pipeline: a hook may rewrite an untrusted result or withhold it (with Chromium
 * installed; skipped otherwise). */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include "builtin/cdp.h"
#include "pipeline/pipeline.h"
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

static void parse_ok(const char *text, int64_t id, const char *method)
{
    abx_cdp_msg m;
    assert_int_equal(abx_cdp_parse(text, strlen(text), &m), 0);
    assert_int_equal(m.id, id);
    if (method)
        assert_string_equal(m.method, method);
    else
        assert_null(m.method);
    abx_cdp_msg_release(&m);
}

static void parse_bad(const char *text)
{
    abx_cdp_msg m;
    assert_int_equal(abx_cdp_parse(text, strlen(text), &m), -1);
    assert_null(m.root);
}

static void test_parse(void **state)
{
    (void)state;
    parse_ok("{\"id\":7,\"result\":{}}", 7, NULL);
    parse_ok("{\"id\":8,\"error\":{\"code\":-32601,\"message\":\"x\"},\"sessionId\":\"S\"}", 8, NULL);
    parse_ok("{\"method\":\"Fetch.requestPaused\",\"params\":{\"requestId\":\"r\"},\"sessionId\":\"S\"}", -1,
             "Fetch.requestPaused");
    parse_ok("{\"method\":\"Target.targetCrashed\"}", -1, "Target.targetCrashed");
    parse_bad("[1]");
    parse_bad("{\"id\":0,\"result\":{}}");                     /* ids start at 1 */
    parse_bad("{\"id\":\"1\",\"result\":{}}");
    parse_bad("{\"id\":1}");                                    /* neither result nor error */
    parse_bad("{\"id\":1,\"result\":{},\"error\":{}}");         /* both */
    parse_bad("{\"id\":1,\"result\":[]}");
    parse_bad("{\"method\":\"\"}");
    parse_bad("{\"method\":\"A.b\",\"params\":[]}");
    parse_bad("{\"method\":\"A.b\",\"sessionId\":5}");
    parse_bad("{\"method\":\"A.b\",\"method\":\"C.d\"}");      /* duplicate keys: two readings */
    parse_bad("{\"id\":1,\"result\":{}");
}

static void test_framer(void **state)
{
    (void)state;
    abx_cdp_framer f = {0};
    const char *frame;
    size_t len;
    assert_int_equal(abx_cdp_framer_feed(&f, "{\"a\":1}\0{\"b\"", 12), 0);
    assert_int_equal(abx_cdp_framer_next(&f, &frame, &len), 1);
    assert_int_equal(len, 7);
    assert_memory_equal(frame, "{\"a\":1}", 7);
    assert_int_equal(abx_cdp_framer_next(&f, &frame, &len), 0);
    assert_int_equal(abx_cdp_framer_feed(&f, ":2}\0", 4), 0);
    assert_int_equal(abx_cdp_framer_next(&f, &frame, &len), 1);
    assert_memory_equal(frame, "{\"b\":2}", 7);
    assert_int_equal(abx_cdp_framer_next(&f, &frame, &len), 0);
    /* a frame that never ends is refused once it passes the bound */
    size_t big = ABX_CDP_FRAME_MAX / 4;
    char *junk = malloc(big);
    assert_non_null(junk);
    memset(junk, 'x', big);
    int rc = 0;
    for (int i = 0; i < 5 && rc == 0; i++) {
        rc = abx_cdp_framer_feed(&f, junk, big);
        if (rc == 0)
            rc = abx_cdp_framer_next(&f, &frame, &len) < 0 ? -1 : 0;
    }
    assert_int_equal(rc, -1);
    free(junk);
    abx_cdp_framer_release(&f);
}

/* ---- screening hooks ---- */

static int screened;

static abx_err screen(void *udata, const char *principal, const char *op_id, json_t *result, char *why, size_t whylen)
{
    (void)udata;
    screened++;
    assert_string_equal(principal, "agent");
    assert_true(json_is_true(json_object_get(result, "untrusted")));
    if (strcmp(op_id, "browser.content") == 0) {
        snprintf(why, whylen, "the page said something the hook refuses");
        return ABX_E_POLICY_DENIED;
    }
    json_object_set_new(result, "snapshot", json_string("[screened]"));
    return ABX_OK;
}

static void test_screening_hooks(void **state)
{
    (void)state;
    if (access("/usr/lib/chromium/chromium", X_OK) != 0)
        skip();
    char ws[64] = "/tmp/abx-test-browser-XXXXXX", cfg[128], err[1024];
    assert_non_null(mkdtemp(ws));
    snprintf(cfg, sizeof cfg, "%s/abx.yaml", ws); /* the workspace is a folder below: the config is not in it */
    FILE *f = fopen(cfg, "w");
    assert_non_null(f);
    fprintf(f, "listen: 127.0.0.1:0\nworkspace: %s/w\nterminal_listen: \"off\"\nledger: {enabled: false}\n"
               "auth:\n  tokens:\n    - principal: agent\n      token_sha256: \"%064d\"\n"
               "policy:\n  allow:\n    - ops: [\"browser.*\"]\n      principals: [agent]\n"
               "      paths: [\"%s/w/**\"]\n      net: true\n      urls: [\"http://127.0.0.1:9/**\"]\n",
            ws, 0, ws);
    fclose(f);
    strcat(ws, "/w"); /* the statement's root and the workspace */
    assert_int_equal(mkdir(ws, 0755), 0);
    abx_server_opts o = {.config_path = cfg, .quiet = true};
    abx_server *s = abx_server_new(&o, err, sizeof err);
    if (!s)
        fprintf(stderr, "new: %s\n", err);
    assert_non_null(s);
    assert_int_equal(abx_server_add_screen(s, screen, NULL, err, sizeof err), 0);
    assert_int_equal(abx_server_start(s, err, sizeof err), 0);
    assert_int_not_equal(abx_server_add_screen(s, screen, NULL, err, sizeof err), 0); /* after start */
    json_t *body = NULL;
    json_t *args = json_object();
    assert_int_equal(abx_server_call(s, "browser.create", "agent", args, &body), 200);
    json_decref(args);
    args = json_pack("{s:O}", "id", json_object_get(body, "id"));
    json_decref(body);
    assert_int_equal(abx_server_call(s, "browser.snapshot", "agent", args, &body), 200);
    assert_string_equal(json_string_value(json_object_get(body, "snapshot")), "[screened]");
    json_decref(body);
    assert_int_equal(abx_server_call(s, "browser.content", "agent", args, &body), 403);
    assert_string_equal(json_string_value(json_object_get(json_object_get(body, "error"), "code")), "policy.denied");
    json_decref(body);
    assert_int_equal(screened, 2);
    assert_int_equal(abx_server_call(s, "browser.close", "agent", args, &body), 200);
    json_decref(body);
    json_decref(args);
    abx_server_free(s);
    char rm[128];
    ws[strlen(ws) - 2] = '\0';
    snprintf(rm, sizeof rm, "rm -rf %s", ws);
    assert_int_equal(system(rm), 0);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_parse),
        cmocka_unit_test(test_framer),
        cmocka_unit_test(test_screening_hooks),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
