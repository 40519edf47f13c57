/* test_server.c — the embedding API and the in-process pipeline: custom ops through
 * abx_server_call, copy-on-write registries for two servers in one process,
 * RegistryFrozen after start, and a handler's unexpected failure answered 500
 * server.internal without leaking its message. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include "pipeline/pipeline.h"
#include "server/conns.h"
#include <netinet/in.h>
#include <sys/socket.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

static abx_err op_echo(abx_ctx *ctx, const json_t *args, abx_reply *r)
{
    abx_reply_json(r, json_pack("{s:O, s:s}", "who", json_object_get(args, "who"), "principal",
                                abx_ctx_principal(ctx)));
    return ABX_OK;
}

static abx_err op_boom(abx_ctx *ctx, const json_t *args, abx_reply *r)
{
    return abx_reply_error(r, ABX_E_SERVER_INTERNAL, NULL, "secret internal detail /etc/shadow");
}

static abx_err op_other(abx_ctx *ctx, const json_t *args, abx_reply *r)
{
    abx_reply_json(r, json_pack("{s:b}", "other", 1));
    return ABX_OK;
}

static const abx_param echo_params[] = {{"who", ABX_T_STRING, .required = true, .doc = "name"}, {0}};
static const abx_op_def ops_a[] = {
    {.id = "grader.echo.run", .effects = ABX_EFF_READ, .summary = "echo", .params = echo_params, .handler = op_echo},
    {.id = "grader.boom.run", .effects = ABX_EFF_READ, .summary = "fails", .handler = op_boom},
    {0},
};
static const abx_op_def ops_b[] = {
    {.id = "other.thing.run", .effects = ABX_EFF_READ, .summary = "other", .handler = op_other},
    {0},
};

static char cfg_path[256];
static char ws[128];

static int setup(void **state)
{
    snprintf(ws, sizeof ws, "/tmp/abx-test-server-XXXXXX");
    assert_non_null(mkdtemp(ws));
    snprintf(cfg_path, sizeof cfg_path, "%s/abx.yaml", ws);
    FILE *f = fopen(cfg_path, "w");
    assert_non_null(f);
    /* several servers share this file: their ledgers are off (two servers may not share one) */
    fprintf(f, "listen: 127.0.0.1:0\nworkspace: %s\nterminal_listen: \"off\"\nledger: {enabled: false}\n"
               "auth:\n  tokens:\n    - principal: agent\n      roles: [agent]\n"
               "      token_sha256: \"%064d\"\n"
               "policy:\n  strict: false\n  allow:\n"
               "    - ops: [\"grader.*\", \"other.*\", \"core.*\"]\n      principals: [agent]\n",
            ws, 0);
    fclose(f);
    return 0;
}

static abx_server *start(const abx_op_def *ops)
{
    char err[512];
    abx_server_opts o = {.config_path = cfg_path, .quiet = true};
    abx_server *s = abx_server_new(&o, err, sizeof err);
    assert_non_null(s);
    assert_int_equal(abx_registry_add(abx_server_registry(s), ops, err, sizeof err), 0);
    int rc = abx_server_start(s, err, sizeof err);
    if (rc != 0)
        fprintf(stderr, "start: %s\n", err);
    assert_int_equal(rc, 0);
    assert_true(abx_server_port(s) > 0);
    return s;
}

static void test_call_custom_op(void **state)
{
    abx_server *s = start(ops_a);
    json_t *args = json_pack("{s:s}", "who", "ada"), *body = NULL;
    int status = abx_server_call(s, "grader.echo.run", "agent", args, &body);
    assert_int_equal(status, 200);
    assert_string_equal(json_string_value(json_object_get(body, "who")), "ada");
    assert_string_equal(json_string_value(json_object_get(body, "principal")), "agent");
    json_decref(body);
    /* the same pipeline: argument validation applies in-process too */
    json_t *bad = json_pack("{s:i}", "who", 3);
    status = abx_server_call(s, "grader.echo.run", "agent", bad, &body);
    assert_int_equal(status, 400);
    assert_string_equal(json_string_value(json_object_get(json_object_get(body, "error"), "code")), "args.invalid");
    json_decref(body);
    json_decref(bad);
    /* anonymous caller: not mounted → the one 404 */
    status = abx_server_call(s, "grader.echo.run", NULL, args, &body);
    assert_int_equal(status, 404);
    json_decref(body);
    json_decref(args);
    abx_server_free(s);
}

static void test_internal_error_not_leaked(void **state)
{
    abx_server *s = start(ops_a);
    json_t *body = NULL;
    int status = abx_server_call(s, "grader.boom.run", "agent", NULL, &body);
    assert_int_equal(status, 500);
    json_t *e = json_object_get(body, "error");
    assert_string_equal(json_string_value(json_object_get(e, "code")), "server.internal");
    assert_null(strstr(json_string_value(json_object_get(e, "message")), "shadow"));
    json_decref(body);
    abx_server_free(s);
}

static void test_two_servers_do_not_share_ops(void **state)
{
    abx_server *a = start(ops_a), *b = start(ops_b);
    json_t *body = NULL, *args = json_pack("{s:s}", "who", "x");
    assert_int_equal(abx_server_call(a, "grader.echo.run", "agent", args, &body), 200);
    json_decref(body);
    assert_int_equal(abx_server_call(b, "grader.echo.run", "agent", args, &body), 404);
    json_decref(body);
    assert_int_equal(abx_server_call(b, "other.thing.run", "agent", NULL, &body), 200);
    json_decref(body);
    assert_int_equal(abx_server_call(a, "other.thing.run", "agent", NULL, &body), 404);
    json_decref(body);
    /* both see the built-ins */
    assert_int_equal(abx_server_call(a, "core.health", "agent", NULL, &body), 200);
    json_decref(body);
    json_decref(args);
    abx_server_free(a);
    abx_server_free(b);
}

static void test_registry_frozen_after_start(void **state)
{
    abx_server *s = start(ops_a);
    char err[256] = "";
    assert_int_not_equal(abx_registry_add(abx_server_registry(s), ops_b, err, sizeof err), 0);
    assert_non_null(strstr(err, "RegistryFrozen"));
    /* the parent (default) registry is frozen as well: nothing registers into a running server */
    assert_true(abx_registry_frozen(abx_registry_default()));
    abx_server_free(s);
}

static void test_reserved_namespace_refused(void **state)
{
    static const abx_op_def bad[] = {{.id = "files.mine", .effects = ABX_EFF_READ, .handler = op_other}, {0}};
    char err[256] = "";
    abx_server_opts o = {.config_path = cfg_path, .quiet = true};
    abx_server *s = abx_server_new(&o, err, sizeof err);
    assert_non_null(s);
    assert_int_not_equal(abx_registry_add(abx_server_registry(s), bad, err, sizeof err), 0);
    assert_non_null(strstr(err, "files.mine"));
    abx_server_free(s);
}

static abx_err op_limits(abx_ctx *ctx, const json_t *args, abx_reply *r)
{
    abx_reply_json(r, json_pack("{s:I}", "max_bytes", (json_int_t)abx_ctx_limit(ctx, ABX_LIM_MAX_BYTES)));
    return ABX_OK;
}

/* vetoes calls naming "mallory"; narrows max_bytes to 42 for everything else */
static abx_err hook(void *udata, const char *principal, const char *op_id, const json_t *args,
                    int64_t limits[ABX_LIM__COUNT], char *why, size_t whylen)
{
    int *calls = udata;
    (*calls)++;
    const char *who = json_string_value(json_object_get(args, "who"));
    if (who && strcmp(who, "mallory") == 0) {
        snprintf(why, whylen, "no calls about mallory");
        return ABX_E_POLICY_DENIED;
    }
    limits[__builtin_ctz(ABX_LIM_MAX_BYTES)] = 42;
    return ABX_OK;
}

static void test_policy_hooks_veto_and_narrow(void **state)
{
    static const abx_op_def more[] = {
        {.id = "grader.limits.get", .effects = ABX_EFF_READ, .summary = "limits", .limits = ABX_LIM_MAX_BYTES,
         .handler = op_limits},
        {0},
    };
    char err[512];
    int calls = 0;
    abx_server_opts o = {.config_path = cfg_path, .quiet = true};
    abx_server *s = abx_server_new(&o, err, sizeof err);
    assert_non_null(s);
    assert_int_equal(abx_registry_add(abx_server_registry(s), ops_a, err, sizeof err), 0);
    assert_int_equal(abx_registry_add(abx_server_registry(s), more, err, sizeof err), 0);
    assert_int_equal(abx_server_add_hook(s, hook, &calls, err, sizeof err), 0);
    assert_int_equal(abx_server_start(s, err, sizeof err), 0);
    assert_int_not_equal(abx_server_add_hook(s, hook, &calls, err, sizeof err), 0); /* after start: refused */
    json_t *body = NULL, *args = json_pack("{s:s}", "who", "mallory");
    assert_int_equal(abx_server_call(s, "grader.echo.run", "agent", args, &body), 403);
    assert_string_equal(json_string_value(json_object_get(json_object_get(body, "error"), "code")), "policy.denied");
    json_decref(body);
    json_decref(args);
    args = json_pack("{s:s}", "who", "ada");
    assert_int_equal(abx_server_call(s, "grader.echo.run", "agent", args, &body), 200);
    json_decref(body);
    json_decref(args);
    assert_int_equal(abx_server_call(s, "grader.limits.get", "agent", NULL, &body), 200);
    assert_int_equal(json_integer_value(json_object_get(body, "max_bytes")), 42); /* narrowed */
    json_decref(body);
    /* a call the statements refuse never reaches the hook: hooks cannot widen */
    int before = calls;
    assert_int_equal(abx_server_call(s, "grader.echo.run", NULL, NULL, &body), 404);
    json_decref(body);
    assert_int_equal(calls, before);
    abx_server_free(s);
}

/* Declarative commands and their aliases through the in-process front door. */
static void test_declarative_command_in_process(void **state)
{
    char path[300], err[1024];
    snprintf(path, sizeof path, "%s/custom.yaml", ws);
    FILE *f = fopen(path, "w");
    assert_non_null(f);
    fprintf(f, "listen: 127.0.0.1:0\nworkspace: %s\nterminal_listen: \"off\"\nledger: {enabled: false}\n"
               "auth:\n  tokens:\n    - principal: agent\n      token_sha256: \"%064d\"\n"
               "custom:\n  - name: Hello-World.v2\n    argv: [echo, hello, \"{who}\"]\n    params: {who: string}\n"
               "    effects: [exec]\n"
               "policy:\n  allow:\n    - ops: [\"custom.*\"]\n      principals: [agent]\n",
            ws, 0);
    fclose(f);
    abx_server_opts o = {.config_path = path, .quiet = true};
    abx_server *s = abx_server_new(&o, err, sizeof err);
    if (!s)
        fprintf(stderr, "new: %s\n", err);
    assert_non_null(s);
    assert_int_equal(abx_server_start(s, err, sizeof err), 0);
    json_t *args = json_pack("{s:s}", "who", "in process"), *body = NULL;
    /* by id and by the original name (an alias) */
    static const char *const names[] = {"custom.hello_world_v2", "Hello-World.v2"};
    for (size_t i = 0; i < 2; i++) {
        assert_int_equal(abx_server_call(s, names[i], "agent", args, &body), 200);
        assert_string_equal(json_string_value(json_object_get(body, "stdout")), "hello in process\n");
        json_decref(body);
    }
    assert_int_equal(abx_server_call(s, "custom.hello_world_v2", "agent", NULL, &body), 400); /* who missing */
    json_decref(body);
    json_decref(args);
    abx_server_free(s);
}

/* The per-address cap holds when two I/O threads admit connections from one address at
 * once: admit said yes to all three here, the third one to start is shut down. */
static void test_conns_cap_is_firm_when_admits_race(void **state)
{
    (void)state;
    abx_conns *t = abx_conns_new(2, 60000);
    assert_non_null(t);
    struct sockaddr_in a = {.sin_family = AF_INET, .sin_addr.s_addr = htonl(0x7f000001)};
    int sp[3][2];
    abx_conn *c[3];
    for (int i = 0; i < 3; i++) {
        assert_true(abx_conns_admit(t, (struct sockaddr *)&a) || i == 2);
        assert_int_equal(socketpair(AF_UNIX, SOCK_STREAM, 0, sp[i]), 0);
    }
    for (int i = 0; i < 3; i++) {
        c[i] = abx_conns_open(t, (struct sockaddr *)&a, sp[i][0]);
        assert_non_null(c[i]);
    }
    abx_conns_stats st;
    abx_conns_stats_get(t, &st);
    assert_int_equal(st.unauthenticated, 2);
    assert_int_equal(st.refused_address, 1);
    char ch;
    assert_int_equal(recv(sp[2][1], &ch, 1, MSG_DONTWAIT), 0); /* the third: shut down */
    assert_int_equal(recv(sp[0][1], &ch, 1, MSG_DONTWAIT), -1); /* the first two: open */
    assert_int_equal(recv(sp[1][1], &ch, 1, MSG_DONTWAIT), -1);
    assert_false(abx_conns_admit(t, (struct sockaddr *)&a));
    abx_conns_close(t, c[2]); /* the refused one never counted: closing it frees nothing */
    assert_false(abx_conns_admit(t, (struct sockaddr *)&a));
    abx_conns_close(t, c[0]);
    assert_true(abx_conns_admit(t, (struct sockaddr *)&a));
    abx_conns_close(t, c[1]);
    for (int i = 0; i < 3; i++) {
        close(sp[i][0]);
        close(sp[i][1]);
    }
    abx_conns_free(t);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_call_custom_op),
        cmocka_unit_test(test_internal_error_not_leaked),
        cmocka_unit_test(test_two_servers_do_not_share_ops),
        cmocka_unit_test(test_reserved_namespace_refused),
        cmocka_unit_test(test_policy_hooks_veto_and_narrow),
        cmocka_unit_test(test_registry_frozen_after_start),
        cmocka_unit_test(test_declarative_command_in_process),
        cmocka_unit_test(test_conns_cap_is_firm_when_admits_race),
    };
    return cmocka_run_group_tests(tests, setup, NULL);
}
