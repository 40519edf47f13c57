/* exec_egress.c — what a process whose statement has `net: {allow: [...]}` gets besides
 * its confinement: the proxy variables of its environment and the sink that records each
 * connection its egress proxy handles in the ledger group of the call that started it
 * (docs/egress.md). Header values and bodies are never recorded. */
#include "builtin/exec.h"
#include <stdio.h>

typedef struct egress_sink {
    abx_ledger *ledger; /* outlives every process: the manager stops their proxies first */
    uint64_t group;
} egress_sink;

static void record(const abx_egress_record *rec, void *ctx)
{
    egress_sink *s = ctx;
    char at[32];
    abx_iso8601(abx_wall_ms(), at);
    json_t *e = json_pack("{s:s, s:s, s:s, s:s, s:i, s:s, s:s, s:I, s:I, s:I}", "kind", "egress", "at", at, "proto",
                          rec->proto, "host", rec->host, "port", rec->port, "addr", rec->addr, "decision",
                          rec->allowed ? "allow" : "deny", "bytes_up", (json_int_t)rec->bytes_up, "bytes_down",
                          (json_int_t)rec->bytes_down, "duration_ms", (json_int_t)rec->duration_ms);
    if (!e)
        return;
    if (rec->rule && rec->rule[0])
        json_object_set_new(e, "rule", json_string(rec->rule));
    if (rec->reason && rec->reason[0])
        json_object_set_new(e, "reason", json_string(rec->reason));
    if (rec->method && rec->method[0])
        json_object_set_new(e, "method", json_string(rec->method));
    if (rec->path && rec->path[0])
        json_object_set_new(e, "path", json_string(rec->path));
    json_t *events = json_pack("[o]", e);
    if (events)
        abx_ledger_append(s->ledger, s->group, events, false);
    json_decref(events);
}

abx_egress_sink abx_exec_egress_sink(abx_ctx *ctx)
{
    abx_egress_sink sink = {0};
    abx_ledger *l = abx_ctx_ledger(ctx);
    uint64_t group = abx_ctx_ledger_group(ctx);
    egress_sink *s = l && group ? abx_calloc(1, sizeof *s) : NULL;
    if (s) {
        *s = (egress_sink){l, group};
        sink = (abx_egress_sink){.fn = record, .ctx = s, .ctx_free = abx_free};
    }
    return sink;
}

void abx_exec_egress_env(void (*set)(void *env, const char *k, const char *v), void *env, int port)
{
    char http[64], socks[64];
    snprintf(http, sizeof http, "http://127.0.0.1:%d", port);
    snprintf(socks, sizeof socks, "socks5h://127.0.0.1:%d", port);
    static const char *const http_keys[] = {"HTTP_PROXY", "HTTPS_PROXY", "http_proxy", "https_proxy"};
    for (size_t i = 0; i < sizeof http_keys / sizeof *http_keys; i++)
        set(env, http_keys[i], http);
    set(env, "ALL_PROXY", socks);
    set(env, "all_proxy", socks);
    set(env, "NODE_USE_ENV_PROXY", "1"); /* Node's own fetch/https honour the variables (Node >= 22.21, 24) */
    set(env, "NO_PROXY", "localhost,127.0.0.1,::1");
    set(env, "no_proxy", "localhost,127.0.0.1,::1");
}
