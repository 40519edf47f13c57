/* fuzz_mcp.c — libFuzzer target for the MCP core (src/doors/mcp.c): the input is one
 * JSON-RPC message as it would arrive on a line of stdio or in a POST /mcp body, parsed
 * (abx_mcp_parse) and handled (abx_mcp_handle) for a conversation of a started in-process
 * server (no socket, no ledger) whose policy mounts a few fuzz ops: one that echoes its
 * typed arguments, one whose SSE stream is the caller's text cut in caller-sized chunks
 * (so the stream parser sees any bytes), one with a bytes result, one that fails.
 * Invariants: a message that does not parse answers -32700/-32600 with a null id; a
 * parsed one answers nothing exactly when it is a notification or a response, otherwise
 * one JSON-RPC answer: "jsonrpc": "2.0", the request's id when it is a string or an
 * integer (else null), exactly one of result and error, an error code from the JSON-RPC
 * set with an abx code in data, a tools/call result with a non-empty content array and
 * a boolean isError; nothing streams (the transport said it cannot), and every answer
 * serializes. Owns the server for the life of the process. */
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "doors/doors.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

#define MAX_INPUT 8192

static abx_err op_echo(abx_ctx *ctx, const json_t *args, abx_reply *r)
{
    abx_reply_json(r, json_deep_copy(args));
    return ABX_OK;
}

typedef struct chunks {
    char *text;   /* owned */
    size_t len, off, step;
} chunks;

static long chunks_read(void *state, char *buf, size_t max)
{
    chunks *c = state;
    size_t n = c->len - c->off < c->step ? c->len - c->off : c->step;
    if (n > max)
        n = max;
    memcpy(buf, c->text + c->off, n);
    c->off += n;
    return (long)n;
}

static void chunks_free(void *state)
{
    chunks *c = state;
    free(c->text);
    free(c);
}

static abx_err op_sse(abx_ctx *ctx, const json_t *args, abx_reply *r)
{
    chunks *c = calloc(1, sizeof *c);
    const json_t *t = json_object_get(args, "text");
    if (!c || !(c->text = malloc(json_string_length(t) + 1))) {
        free(c);
        return abx_reply_error(r, ABX_E_SERVER_UNAVAILABLE, NULL, "out of memory");
    }
    c->len = json_string_length(t);
    memcpy(c->text, json_string_value(t), c->len);
    c->step = (size_t)json_integer_value(json_object_get(args, "chunk"));
    bool sse = strcmp(abx_ctx_op_id(ctx), "fz.sse.get") == 0;
    abx_reply_stream(r, sse ? "text/event-stream" : "application/x-ndjson", chunks_read, c, chunks_free);
    return ABX_OK;
}

static abx_err op_bytes(abx_ctx *ctx, const json_t *args, abx_reply *r)
{
    const json_t *t = json_object_get(args, "text");
    abx_reply_bytes(r, json_string_value(t), json_string_length(t), json_string_value(json_object_get(args, "ct")));
    return ABX_OK;
}

static abx_err op_fail(abx_ctx *ctx, const json_t *args, abx_reply *r)
{
    return abx_reply_error(r, ABX_E_FILES_NOT_FOUND, json_pack("{s:O}", "args", args), "no such thing");
}

static const abx_param echo_params[] = {
    {"s", ABX_T_STRING},
    {"n", ABX_T_INT, ABX_RANGE(-100, 100)},
    {"l", ABX_T_LIST, .item = ABX_T_STRING},
    {"e", ABX_T_ENUM, .choices = "a|b"},
    {0},
};
static const abx_param sse_params[] = {
    {"text", ABX_T_STRING, .required = true},
    {"chunk", ABX_T_INT, .dflt = "7", ABX_RANGE(1, 64)},
    {0},
};
static const abx_param bytes_params[] = {
    {"text", ABX_T_STRING, .required = true},
    {"ct", ABX_T_ENUM, .choices = "text/plain|application/octet-stream", .dflt = "\"text/plain\""},
    {0},
};

static const abx_op_def ops[] = {
    {.id = "fz.echo.get", .effects = ABX_EFF_READ, .summary = "echo", .params = echo_params, .handler = op_echo},
    {.id = "fz.sse.get", .effects = ABX_EFF_READ, .summary = "sse", .params = sse_params, .stream = ABX_STREAM_SSE,
     .handler = op_sse},
    {.id = "fz.lines.get", .effects = ABX_EFF_READ, .summary = "ndjson", .params = sse_params,
     .stream = ABX_STREAM_NDJSON, .handler = op_sse},
    {.id = "fz.bytes.get", .effects = ABX_EFF_READ, .summary = "bytes", .params = bytes_params,
     .stream = ABX_STREAM_BYTES, .handler = op_bytes},
    {.id = "fz.fail.get", .effects = ABX_EFF_WRITE, .summary = "fails", .handler = op_fail},
    {0},
};

static abx_server *srv;          /* lives for the process */
static abx_mcp_conv *conv;       /* owned by srv's MCP state for the process */

static void die(const char *what, const char *detail)
{
    fprintf(stderr, "fuzz_mcp: %s\n  %s\n", what, detail ? detail : "");
    abort();
}

static void init(void)
{
    if (srv)
        return;
    abx_log_set_level("off");
    char dir[] = "/tmp/abx-fuzz-mcp-XXXXXX", path[128], err[1024];
    if (!mkdtemp(dir))
        die("mkdtemp", NULL);
    snprintf(path, sizeof path, "%s/abx.yaml", dir);
    FILE *f = fopen(path, "w");
    if (!f)
        die("config", path);
    fprintf(f, "workspace: %s\nterminal_listen: \"off\"\nledger: {enabled: false}\n"
               "auth:\n  tokens:\n    - principal: fz\n      roles: [agent]\n      token_sha256: \"%064d\"\n"
               "policy:\n  strict: false\n  allow:\n    - ops: [\"fz.*\", \"core.health\", \"core.ops.list\"]\n"
               "      principals: [fz]\n",
            dir, 0);
    fclose(f);
    abx_server_opts o = {.config_path = path, .quiet = true};
    srv = abx_server_new(&o, err, sizeof err);
    if (!srv || abx_registry_add(abx_server_registry(srv), ops, err, sizeof err) != 0)
        die("server", err);
    srv->no_listen = true;
    if (abx_server_start(srv, err, sizeof err) != 0)
        die("start", err);
    conv = abx_mcp_conv_new(srv->mcp, "fz");
    if (!conv)
        die("conversation", NULL);
}

static void check_answer(const json_t *msg, const json_t *reply, const char *text)
{
    char *dumped = json_dumps(reply, JSON_COMPACT);
    if (!dumped)
        die("the answer does not serialize", text);
    const char *jv = json_string_value(json_object_get(reply, "jsonrpc"));
    if (!jv || strcmp(jv, "2.0") != 0)
        die("answer without jsonrpc 2.0", dumped);
    const json_t *result = json_object_get(reply, "result"), *error = json_object_get(reply, "error");
    if (!result == !error)
        die("an answer has exactly one of result and error", dumped);
    const json_t *id = msg ? json_object_get(msg, "id") : NULL, *rid = json_object_get(reply, "id");
    bool id_ok = json_is_string(id) || json_is_integer(id);
    if (!rid || (id_ok && !json_equal((json_t *)id, (json_t *)rid)) || (!id_ok && !json_is_null(rid)))
        die("the answer's id is not the request's (or null when that is no valid id)", dumped);
    if (error) {
        json_int_t c = json_integer_value(json_object_get(error, "code"));
        if (c != -32700 && c != -32600 && c != -32601 && c != -32602 && c != -32603)
            die("an error code outside the JSON-RPC set", dumped);
        if (!json_string_value(json_object_get(error, "message")) ||
            abx_err_by_code(json_string_value(json_object_get(json_object_get(error, "data"), "code"))) < 0)
            die("an error without a message or an abx code", dumped);
    }
    const char *method = json_string_value(json_object_get(msg, "method"));
    if (result && method && strcmp(method, "tools/call") == 0) {
        const json_t *content = json_object_get(result, "content");
        if (!json_is_array(content) || json_array_size(content) == 0 || !json_is_boolean(json_object_get(result, "isError")))
            die("a tool result without content or isError", dumped);
    }
    free(dumped);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    if (size > MAX_INPUT)
        return 0;
    init();
    json_t *err = NULL;
    json_t *msg = abx_mcp_parse((const char *)data, size, &err);
    if (!msg) {
        if (!err)
            die("a refused message without an answer", NULL);
        json_int_t c = json_integer_value(json_object_get(json_object_get(err, "error"), "code"));
        if ((c != -32700 && c != -32600) || !json_is_null(json_object_get(err, "id")))
            die("a refused message answers -32700/-32600 with a null id", NULL);
        check_answer(NULL, err, "(unparsed)");
        json_decref(err);
        return 0;
    }
    if (err)
        die("both a message and an error", NULL);
    char *text = json_dumps(msg, JSON_COMPACT | JSON_ENCODE_ANY);
    abx_mcp_in in = {.server = srv, .conv = conv, .can_stream = false, .conn_fd = -1, .client = "fuzz"};
    abx_mcp_out out;
    abx_mcp_handle(&in, msg, &out);
    json_decref(out.note);
    if (out.call)
        die("a call streams although the transport cannot", text);
    const json_t *id = json_object_get(msg, "id");
    bool notification = json_is_string(json_object_get(msg, "method")) && !id &&
                        json_is_string(json_object_get(msg, "jsonrpc")) &&
                        !strcmp(json_string_value(json_object_get(msg, "jsonrpc")), "2.0");
    bool response = !json_object_get(msg, "method") && id &&
                    (json_object_get(msg, "result") || json_object_get(msg, "error")) &&
                    json_is_string(json_object_get(msg, "jsonrpc")) &&
                    !strcmp(json_string_value(json_object_get(msg, "jsonrpc")), "2.0");
    if (!out.reply != (notification || response))
        die(out.reply ? "a notification or response was answered" : "a request was not answered", text);
    if (out.reply)
        check_answer(msg, out.reply, text);
    json_decref(out.reply);
    json_decref(msg);
    free(text);
    return 0;
}
