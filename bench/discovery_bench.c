/* discovery_bench.c — an abx server embedded through the public API (include/abx/abx.h)
 * with N extra operations, for bench/discovery.sh to time GET /openapi.json and GET /ops.
 *
 * usage: discovery_bench CONFIG N_OPS
 *
 * Registers N_OPS ops "bench.gG.opK" (10 a namespace) with three parameters each (a
 * string with a doc, an integer with bounds, an enum) and a declared error code, the way
 * an embedder adds its own ops; starts the server from CONFIG (which names the listen
 * address); prints "ready PORT OPS" on stdout once it listens, where OPS is how many ops
 * GET /ops lists for principal "check" (whose view is its own, so the principals the
 * script times start with a cold cache); then serves until SIGTERM or SIGINT and stops.
 * The server's request log (JSON lines with duration_ms) goes to stderr. Exit status 0,
 * 1 on a setup error, 2 on usage. */
#include <abx/abx.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static abx_err bench_handler(abx_ctx *ctx, const json_t *args, abx_reply *r)
{
    abx_reply_json(r, json_pack("{s:s}", "op", abx_ctx_op_id(ctx)));
    return ABX_OK;
}

static const abx_param bench_params[] = {
    {"name", ABX_T_STRING, .required = true, .doc = "What to look up"},
    {"limit", ABX_T_INT, .dflt = "10", ABX_RANGE(1, 1000), .doc = "How many entries at most"},
    {"order", ABX_T_ENUM, .choices = "asc|desc", .dflt = "\"asc\"", .doc = "Sort order"},
    {0},
};

int main(int argc, char **argv)
{
    if (argc != 3 || atoi(argv[2]) < 1 || atoi(argv[2]) > 5000) {
        fprintf(stderr, "usage: discovery_bench CONFIG N_OPS (1..5000)\n");
        return 2;
    }
    int n = atoi(argv[2]);
    /* ids and summaries live as long as the registry: allocated once, never freed */
    abx_op_def *defs = calloc((size_t)n + 1, sizeof *defs);
    char (*ids)[48] = calloc((size_t)n, sizeof *ids);
    char (*summaries)[80] = calloc((size_t)n, sizeof *summaries);
    if (!defs || !ids || !summaries)
        return 1;
    for (int i = 0; i < n; i++) {
        snprintf(ids[i], sizeof ids[i], "bench.g%d.op%d", i / 10, i % 10);
        snprintf(summaries[i], sizeof summaries[i], "Benchmark operation %d: look a name up in group %d.", i,
                 i / 10);
        defs[i] = (abx_op_def){.id = ids[i], .effects = ABX_EFF_READ, .summary = summaries[i],
                               .params = bench_params, .since = "0.1", .errors = "files.not_found",
                               .handler = bench_handler};
    }
    sigset_t set;
    sigemptyset(&set);
    sigaddset(&set, SIGTERM);
    sigaddset(&set, SIGINT);
    pthread_sigmask(SIG_BLOCK, &set, NULL); /* every server thread inherits the mask */
    signal(SIGPIPE, SIG_IGN);
    char err[2048];
    abx_server *s = abx_server_new(&(abx_server_opts){.config_path = argv[1], .quiet = true}, err, sizeof err);
    if (!s) {
        fprintf(stderr, "discovery_bench: %s\n", err);
        return 1;
    }
    if (abx_registry_add(abx_server_registry(s), defs, err, sizeof err) != 0 ||
        abx_server_start(s, err, sizeof err) != 0) {
        fprintf(stderr, "discovery_bench: %s\n", err);
        abx_server_free(s);
        return 1;
    }
    json_t *body = NULL;
    int status = abx_server_call(s, "core.ops.list", "check", NULL, &body);
    size_t listed = json_array_size(json_object_get(body, "ops"));
    json_decref(body);
    if (status != 200) {
        fprintf(stderr, "discovery_bench: core.ops.list for principal check answered %d\n", status);
        abx_server_stop(s);
        abx_server_free(s);
        return 1;
    }
    printf("ready %d %zu\n", abx_server_port(s), listed);
    fflush(stdout);
    int sig = 0;
    sigwait(&set, &sig);
    abx_server_stop(s);
    abx_server_free(s);
    free(defs);
    free(ids);
    free(summaries);
    return 0;
}
