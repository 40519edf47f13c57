/* test_errors.c — unit tests of src/core/errors.c: the lookups over the one error table
 * and abx_error_json, the one error envelope. The envelope's bytes are what every door
 * sends, so they are checked exactly (compact, in key order), not just parsed. */
#include <stdarg.h>
#include <stddef.h>
#include <setjmp.h>
#include <stdint.h>
#include <cmocka.h>

#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "core/core.h"

static void assert_dumps(json_t *doc, const char *want)
{
    assert_non_null(doc);
    char *s = json_dumps(doc, JSON_COMPACT);
    assert_non_null(s);
    assert_string_equal(s, want);
    free(s);
    json_decref(doc);
}

static void test_envelope_with_message(void **state)
{
    (void)state;
    assert_dumps(abx_error_json(ABX_E_FILES_NOT_FOUND, "no such file: a.txt", NULL),
                 "{\"error\":{\"code\":\"files.not_found\",\"message\":\"no such file: a.txt\"}}");
    /* an empty message stays empty (the in-process call's convention) */
    assert_dumps(abx_error_json(ABX_E_ARGS_INVALID, "", NULL), "{\"error\":{\"code\":\"args.invalid\",\"message\":\"\"}}");
}

static void test_envelope_default_message_is_the_meaning(void **state)
{
    (void)state;
    json_t *doc = abx_error_json(ABX_E_POLICY_DENIED, NULL, NULL);
    assert_non_null(doc);
    json_t *e = json_object_get(doc, "error");
    assert_string_equal(json_string_value(json_object_get(e, "code")), "policy.denied");
    assert_string_equal(json_string_value(json_object_get(e, "message")), abx_err_meaning(ABX_E_POLICY_DENIED));
    assert_true(strlen(abx_err_meaning(ABX_E_POLICY_DENIED)) > 0);
    assert_int_equal(json_object_size(e), 2);
    json_decref(doc);
}

static void test_envelope_details_by_reference(void **state)
{
    (void)state;
    json_t *details = json_pack("{s:s}", "path", "x");
    assert_dumps(abx_error_json(ABX_E_POLICY_PATH_DENIED, "m", details),
                 "{\"error\":{\"code\":\"policy.path_denied\",\"message\":\"m\",\"details\":{\"path\":\"x\"}}}");
    assert_int_equal(details->refcount, 1); /* borrowed: the envelope took and released its own reference */
    json_decref(details);
}

/* an out-of-range code is never invented: it reads as server.internal */
static void test_envelope_unknown_code(void **state)
{
    (void)state;
    assert_dumps(abx_error_json((abx_err)ABX_E__COUNT, "x", NULL),
                 "{\"error\":{\"code\":\"server.internal\",\"message\":\"x\"}}");
}

/* the fallback body for when even the envelope cannot be built is the same shape */
static void test_oom_body_is_an_envelope(void **state)
{
    (void)state;
    json_t *doc = json_loads(ABX_ERROR_JSON_OOM, 0, NULL);
    assert_dumps(abx_error_json(ABX_E_SERVER_UNAVAILABLE, "out of memory", NULL), ABX_ERROR_JSON_OOM);
    assert_non_null(doc);
    json_decref(doc);
}

static void test_code_round_trip(void **state)
{
    (void)state;
    for (int e = 1; e < ABX_E__COUNT; e++)
        assert_int_equal(abx_err_by_code(abx_err_code((abx_err)e)), e);
    assert_int_equal(abx_err_by_code("no.such_code"), -1);
}

/* a full disk is its own code with 507 Insufficient Storage (envd's answer, which the
 * E2B SDK turns into NotEnoughSpaceError) */
static void test_full_disk_is_507(void **state)
{
    (void)state;
    assert_int_equal(abx_err_from_errno(ENOSPC), ABX_E_FILES_NO_SPACE);
    assert_int_equal(abx_err_from_errno(EDQUOT), ABX_E_FILES_NO_SPACE);
    assert_int_equal(abx_err_status(ABX_E_FILES_NO_SPACE), 507);
    assert_string_equal(abx_err_code(ABX_E_FILES_NO_SPACE), "files.no_space");
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_envelope_with_message),
        cmocka_unit_test(test_envelope_default_message_is_the_meaning),
        cmocka_unit_test(test_envelope_details_by_reference),
        cmocka_unit_test(test_envelope_unknown_code),
        cmocka_unit_test(test_oom_body_is_an_envelope),
        cmocka_unit_test(test_code_round_trip),
        cmocka_unit_test(test_full_disk_is_507),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
