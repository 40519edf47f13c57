/* test_mcp.c — the MCP core in process, with more ops than one page: tools/list pages of
 * 100 in registry order with opaque cursors covering every mounted op exactly once,
 * the cached list reused for the same snapshot and slot, a tools/call of an embedder's
 * op through the pipeline, and the stdio transport on a server that opens no socket
 * (what `abx mcp` runs). */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include "doors/doors.h"
#include "discovery/discovery.h"
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#define N_BULK 250

static char bulk_ids[N_BULK][32];
static abx_op_def bulk_ops[N_BULK + 1]; /* borrowed by the registry: lives for the process */

static abx_err op_bulk(abx_ctx *ctx, const json_t *args, abx_reply *r)
{
    abx_reply_json(r, json_pack("{s:s, s:s}", "op", abx_ctx_op_id(ctx), "principal", abx_ctx_principal(ctx)));
    return ABX_OK;
}

/* mounted, but its tool name (bulk__aaa…__get) is over ABX_TOOL_NAME_MAX: discovery does
 * not offer it, so MCP must neither list it nor call it */
#define LONG_ID "bulk.aaaaaaaaaaaaaaaaaaaa.bbbbbbbbbbbbbbbbbbbb.cccccccccccccccccccc.get"
static const abx_op_def long_ops[] = {
    {.id = LONG_ID, .effects = ABX_EFF_READ, .summary = "too long a tool name", .handler = op_bulk}, {0}};

static char cfg_path[256];
static char ws[128];

static int setup(void **state)
{
    for (int i = 0; i < N_BULK; i++) {
        snprintf(bulk_ids[i], sizeof bulk_ids[i], "bulk.op%03d.get", i);
        bulk_ops[i] = (abx_op_def){.id = bulk_ids[i], .effects = ABX_EFF_READ, .summary = "a bulk op",
                                   .handler = op_bulk};
    }
    snprintf(ws, sizeof ws, "/tmp/abx-test-mcp-XXXXXX");
    assert_non_null(mkdtemp(ws));
    snprintf(cfg_path, sizeof cfg_path, "%s/abx.yaml", ws);
    FILE *f = fopen(cfg_path, "w");
    assert_non_null(f);
    fprintf(f, "listen: 127.0.0.1:0\nworkspace: %s\nterminal_listen: \"off\"\nledger: {enabled: false}\n"
               "auth:\n  tokens:\n    - principal: agent\n      roles: [agent]\n"
               "      token_sha256: \"%064d\"\n"
               "policy:\n  strict: false\n  allow:\n"
               "    - ops: [\"bulk.*\", \"core.*\"]\n      principals: [agent]\n",
            ws, 0);
    fclose(f);
    return 0;
}

static abx_server *start(bool no_listen)
{
    char err[512];
    abx_server_opts o = {.config_path = cfg_path, .quiet = true};
    abx_server *s = abx_server_new(&o, err, sizeof err);
    assert_non_null(s);
    assert_int_equal(abx_registry_add(abx_server_registry(s), bulk_ops, err, sizeof err), 0);
    assert_int_equal(abx_registry_add(abx_server_registry(s), long_ops, err, sizeof err), 0);
    s->no_listen = no_listen;
    int rc = abx_server_start(s, err, sizeof err);
    if (rc != 0)
        fprintf(stderr, "start: %s\n", err);
    assert_int_equal(rc, 0);
    return s;
}

static json_t *handle(abx_server *s, abx_mcp_conv *c, const char *text)
{
    json_t *err = NULL, *msg = abx_mcp_parse(text, strlen(text), &err);
    if (!msg)
        return err;
    abx_mcp_in in = {.server = s, .conv = c, .can_stream = false, .conn_fd = -1, .client = "unit"};
    abx_mcp_out out;
    abx_mcp_handle(&in, msg, &out);
    json_decref(msg);
    json_decref(out.note);
    assert_null(out.call);
    return out.reply;
}

static void test_pages_cover_every_mounted_op_once(void **state)
{
    abx_server *s = start(false);
    abx_mcp_conv *c = abx_mcp_conv_new(s->mcp, "agent");
    json_decref(handle(s, c, "{\"jsonrpc\":\"2.0\",\"id\":1,\"method\":\"initialize\","
                             "\"params\":{\"protocolVersion\":\"2025-11-25\"}}"));
    /* what the caller may call as a tool, in registry order */
    abx_policy *p = abx_server_snapshot(s);
    int slot = abx_policy_principal_slot(p, "agent");
    json_t *want = json_array();
    bool long_mounted = false;
    for (size_t i = 0; i < abx_registry_count(s->reg); i++) {
        const abx_op *op = abx_registry_at(s->reg, i);
        if (abx_policy_mounted(p, slot, i) && abx_tool_offered(op))
            json_array_append_new(want, json_string(op->id));
        long_mounted = long_mounted || (abx_policy_mounted(p, slot, i) && !strcmp(op->id, LONG_ID));
    }
    abx_policy_unref(p);
    assert_true(long_mounted);
    assert_true(json_array_size(want) > 2 * 100);
    json_t *got = json_array();
    char *cursor = NULL;
    int pages = 0;
    do {
        char req[256];
        if (cursor)
            snprintf(req, sizeof req, "{\"jsonrpc\":\"2.0\",\"id\":2,\"method\":\"tools/list\","
                                      "\"params\":{\"cursor\":\"%s\"}}", cursor);
        else
            snprintf(req, sizeof req, "{\"jsonrpc\":\"2.0\",\"id\":2,\"method\":\"tools/list\"}");
        json_t *rep = handle(s, c, req);
        json_t *res = json_object_get(rep, "result");
        assert_non_null(res);
        json_t *tools = json_object_get(res, "tools");
        const char *next = json_string_value(json_object_get(res, "nextCursor"));
        /* full pages until the last */
        if (next)
            assert_int_equal(json_array_size(tools), 100);
        else
            assert_true(json_array_size(tools) >= 1 && json_array_size(tools) <= 100);
        size_t i;
        json_t *t;
        json_array_foreach(tools, i, t) json_array_append(got, json_object_get(t, "title"));
        free(cursor);
        cursor = next ? strdup(next) : NULL;
        pages++;
        json_decref(rep);
    } while (cursor);
    assert_int_equal(pages, (int)((json_array_size(want) + 99) / 100));
    assert_true(json_equal(want, got));
    for (size_t i = 0; i < json_array_size(got); i++) /* discovery rejects it, so MCP does not list it */
        assert_string_not_equal(json_string_value(json_array_get(got, i)), LONG_ID);
    /* ... nor call it, by either spelling */
    const char *long_names[] = {"bulk__aaaaaaaaaaaaaaaaaaaa__bbbbbbbbbbbbbbbbbbbb__cccccccccccccccccccc__get", LONG_ID};
    for (int k = 0; k < 2; k++) {
        char req[300];
        snprintf(req, sizeof req, "{\"jsonrpc\":\"2.0\",\"id\":5,\"method\":\"tools/call\",\"params\":{\"name\":\"%s\"}}",
                 long_names[k]);
        json_t *rep = handle(s, c, req);
        const char *m = json_string_value(json_object_get(json_object_get(rep, "error"), "message"));
        assert_non_null(m);
        assert_non_null(strstr(m, "Unknown tool"));
        assert_null(json_object_get(rep, "result"));
        json_decref(rep);
    }
    /* the second listing is the cached one: identical */
    json_t *a = handle(s, c, "{\"jsonrpc\":\"2.0\",\"id\":3,\"method\":\"tools/list\"}");
    json_t *b = handle(s, c, "{\"jsonrpc\":\"2.0\",\"id\":3,\"method\":\"tools/list\"}");
    assert_true(json_equal(a, b));
    assert_ptr_equal(json_array_get(json_object_get(json_object_get(a, "result"), "tools"), 0),
                     json_array_get(json_object_get(json_object_get(b, "result"), "tools"), 0));
    json_decref(a);
    json_decref(b);
    /* a call of an embedder's op through the pipeline, in both spellings */
    const char *calls[] = {"bulk__op249__get", "bulk.op249.get"};
    for (int k = 0; k < 2; k++) {
        char req[200];
        snprintf(req, sizeof req, "{\"jsonrpc\":\"2.0\",\"id\":4,\"method\":\"tools/call\",\"params\":{\"name\":\"%s\"}}",
                 calls[k]);
        json_t *rep = handle(s, c, req);
        json_t *res = json_object_get(rep, "result");
        assert_true(json_is_false(json_object_get(res, "isError")));
        const char *text = json_string_value(json_object_get(json_array_get(json_object_get(res, "content"), 0), "text"));
        assert_string_equal(text, "{\"op\":\"bulk.op249.get\",\"principal\":\"agent\"}");
        json_decref(rep);
    }
    json_decref(want);
    json_decref(got);
    abx_mcp_conv_free(s->mcp, c);
    abx_server_free(s);
}

static void test_stdio_without_a_socket(void **state)
{
    abx_server *s = start(true);
    assert_int_equal(abx_server_port(s), 0); /* nothing listens */
    int in[2];
    assert_int_equal(pipe(in), 0);
    const char script[] = "{\"jsonrpc\":\"2.0\",\"id\":1,\"method\":\"initialize\",\"params\":{\"protocolVersion\":\"2025-03-26\"}}\n"
                          "{\"jsonrpc\":\"2.0\",\"method\":\"notifications/initialized\"}\n"
                          "\n"
                          "{\"jsonrpc\":\"2.0\",\"id\":2,\"method\":\"tools/call\",\"params\":{\"name\":\"bulk__op007__get\"}}\r\n"
                          "[]\n";
    assert_int_equal(write(in[1], script, sizeof script - 1), (ssize_t)(sizeof script - 1));
    close(in[1]);
    FILE *out = tmpfile();
    assert_non_null(out);
    assert_int_equal(abx_mcp_stdio(s, "agent", in[0], out), 0);
    close(in[0]);
    rewind(out);
    char line[4096];
    int n = 0;
    bool saw_init = false, saw_call = false, saw_batch = false;
    while (fgets(line, sizeof line, out)) {
        json_t *m = json_loads(line, 0, NULL);
        assert_non_null(m); /* one JSON message per line, nothing else */
        json_int_t id = json_integer_value(json_object_get(m, "id"));
        if (id == 1)
            saw_init = !strcmp(json_string_value(json_object_get(json_object_get(m, "result"), "protocolVersion")),
                               "2025-03-26");
        if (id == 2)
            saw_call = strstr(line, "bulk.op007.get") != NULL;
        if (json_is_null(json_object_get(m, "id")))
            saw_batch = json_integer_value(json_object_get(json_object_get(m, "error"), "code")) == -32600;
        json_decref(m);
        n++;
    }
    fclose(out);
    assert_int_equal(n, 3); /* the notification and the empty line answer nothing */
    assert_true(saw_init && saw_call && saw_batch);
    abx_server_free(s);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_pages_cover_every_mounted_op_once),
        cmocka_unit_test(test_stdio_without_a_socket),
    };
    return cmocka_run_group_tests(tests, setup, NULL);
}
