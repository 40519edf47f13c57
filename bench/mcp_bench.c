/* mcp_bench.c — what MCP's initialize and tools/list cost abx with many operations:
 * an embedded server (the public API in include/abx/abx.h) gets N extra operations
 * (default 200, three typed parameters each, so their schemas are realistic), mounted
 * with the core ops for one principal, and starts on a loopback port.
 *
 * usage: mcp_bench DIR [N_OPS] [ITERATIONS]
 *
 * DIR is an existing empty directory (config and workspace; the caller removes it).
 * (a) server side, in process: the MCP core (abx_mcp_handle) plus the JSON encoding the
 *     transport does, without HTTP — initialize; the first tools/list (builds the cached
 *     list for this snapshot and principal); then every page of a full listing, and the
 *     whole listing, from the cache.
 * (b) over HTTP, one keep-alive loopback connection: POST /mcp initialize and tools/list
 *     (each page), from request sent to reply read.
 * Output: a human table on stdout, then machine-readable lines
 * "result<TAB>name<TAB>count<TAB>p50_us<TAB>p99_us<TAB>mean_us" and
 * "tools<TAB>n_tools<TAB>n_pages<TAB>page1_bytes". Exit status 0, or 1 when the server
 * does not start or an answer is not the expected one. */
#include <arpa/inet.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

#include "pipeline/pipeline.h"

#define MAX_OPS 5000

static char ids[MAX_OPS][40];
static abx_op_def ops[MAX_OPS + 1]; /* borrowed by the registry: lives for the process */
static const abx_param params[] = {
    {"query", ABX_T_STRING, .required = true, .doc = "Something to look for"},
    {"limit", ABX_T_INT, .dflt = "10", ABX_RANGE(1, 1000), .doc = "How many"},
    {"mode", ABX_T_ENUM, .choices = "fast|slow|careful", .dflt = "\"fast\"", .doc = "How"},
    {0},
};

static abx_err op_ok(abx_ctx *ctx, const json_t *args, abx_reply *r)
{
    abx_reply_json(r, json_object());
    return ABX_OK;
}

static double now_us(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return ts.tv_sec * 1e6 + ts.tv_nsec / 1e3;
}

static int cmp_d(const void *a, const void *b)
{
    double x = *(const double *)a, y = *(const double *)b;
    return x < y ? -1 : x > y;
}

static void report(const char *name, double *v, int n)
{
    qsort(v, (size_t)n, sizeof *v, cmp_d);
    double sum = 0;
    for (int i = 0; i < n; i++)
        sum += v[i];
    double p50 = v[n / 2], p99 = v[(int)((n - 1) * 0.99)];
    printf("%-34s %8d %10.1f %10.1f %10.1f\n", name, n, p50, p99, sum / n);
    fprintf(stderr, "result\t%s\t%d\t%.1f\t%.1f\t%.1f\n", name, n, p50, p99, sum / n);
}

static void fail(const char *what, const char *detail)
{
    fprintf(stderr, "mcp_bench: %s%s%s\n", what, detail ? ": " : "", detail ? detail : "");
    exit(1);
}

/* One message through the core and into bytes, as a transport would send it. */
static char *core(abx_server *s, abx_mcp_conv *c, const char *text, size_t *len)
{
    json_t *err = NULL, *msg = abx_mcp_parse(text, strlen(text), &err);
    if (!msg)
        fail("parse", text);
    abx_mcp_in in = {.server = s, .conv = c, .conn_fd = -1, .client = "bench"};
    abx_mcp_out out;
    abx_mcp_handle(&in, msg, &out);
    json_decref(msg);
    char *bytes = out.reply ? json_dumps(out.reply, JSON_COMPACT) : NULL;
    if (!bytes || !json_object_get(out.reply, "result"))
        fail("no result for", text);
    json_decref(out.reply);
    *len = strlen(bytes);
    return bytes;
}

/* The cursor of a tools/list answer ("" on the last page); out holds 128 bytes. */
static void next_cursor(const char *answer, char *out)
{
    json_t *j = json_loads(answer, 0, NULL);
    const char *c = json_string_value(json_object_get(json_object_get(j, "result"), "nextCursor"));
    snprintf(out, 128, "%s", c ? c : "");
    json_decref(j);
}

static void list_request(char *buf, size_t n, const char *cursor)
{
    if (*cursor)
        snprintf(buf, n, "{\"jsonrpc\":\"2.0\",\"id\":2,\"method\":\"tools/list\",\"params\":{\"cursor\":\"%s\"}}", cursor);
    else
        snprintf(buf, n, "{\"jsonrpc\":\"2.0\",\"id\":2,\"method\":\"tools/list\"}");
}

/* ---- a minimal keep-alive HTTP/1.1 client ---- */

static char rbuf[4 << 20];

/* POST /mcp; returns the body (in rbuf) and copies Mcp-Session-Id when asked. */
static char *http_post(int fd, int port, const char *sid, const char *body, char *sid_out)
{
    char req[1024];
    int n = snprintf(req, sizeof req,
                     "POST /mcp HTTP/1.1\r\nHost: 127.0.0.1:%d\r\nAuthorization: Bearer bench-token-0123456789abcdef\r\n"
                     "Content-Type: application/json\r\nAccept: application/json, text/event-stream\r\n%s%s%s"
                     "Content-Length: %zu\r\n\r\n%s",
                     port, sid ? "Mcp-Session-Id: " : "", sid ? sid : "", sid ? "\r\n" : "", strlen(body), body);
    if (write(fd, req, (size_t)n) != n)
        fail("write", NULL);
    size_t got = 0;
    char *end = NULL;
    while (!(end = got ? memmem(rbuf, got, "\r\n\r\n", 4) : NULL)) {
        ssize_t k = read(fd, rbuf + got, sizeof rbuf - 1 - got);
        if (k <= 0)
            fail("read", NULL);
        got += (size_t)k;
    }
    rbuf[got] = '\0';
    if (strncmp(rbuf, "HTTP/1.1 200", 12) != 0)
        fail("status", rbuf);
    char *cl = strcasestr(rbuf, "\r\nContent-Length:");
    if (!cl || cl > end)
        fail("no Content-Length", rbuf);
    size_t len = strtoul(cl + 17, NULL, 10), head = (size_t)(end + 4 - rbuf);
    if (sid_out) {
        char *h = strcasestr(rbuf, "\r\nMcp-Session-Id: ");
        if (!h || h > end)
            fail("no Mcp-Session-Id", rbuf);
        snprintf(sid_out, 33, "%.32s", h + 18);
    }
    while (got < head + len) {
        ssize_t k = read(fd, rbuf + got, sizeof rbuf - 1 - got);
        if (k <= 0)
            fail("read body", NULL);
        got += (size_t)k;
    }
    rbuf[head + len] = '\0';
    return rbuf + head;
}

int main(int argc, char **argv)
{
    if (argc < 2) {
        fprintf(stderr, "usage: mcp_bench DIR [N_OPS] [ITERATIONS]\n");
        return 2;
    }
    const char *dir = argv[1];
    int n_ops = argc > 2 ? atoi(argv[2]) : 200, iters = argc > 3 ? atoi(argv[3]) : 2000;
    if (n_ops < 1 || n_ops > MAX_OPS || iters < 10)
        fail("N_OPS must be 1..5000 and ITERATIONS at least 10", NULL);
    abx_log_set_level("warn");
    for (int i = 0; i < n_ops; i++) {
        snprintf(ids[i], sizeof ids[i], "bench.op%04d.get", i);
        ops[i] = (abx_op_def){.id = ids[i], .effects = ABX_EFF_READ, .summary = "A benchmark operation",
                              .params = params, .handler = op_ok};
    }
    char cfg[512], sha[65];
    abx_sha256_hex("bench-token-0123456789abcdef", 28, sha);
    snprintf(cfg, sizeof cfg, "%s/abx.yaml", dir);
    FILE *f = fopen(cfg, "w");
    if (!f)
        fail("cannot write", cfg);
    fprintf(f, "listen: 127.0.0.1:0\nworkspace: %s\nterminal_listen: \"off\"\nledger: {enabled: false}\n"
               "auth:\n  tokens:\n    - principal: bench\n      roles: [agent]\n      token_sha256: \"%s\"\n"
               "policy:\n  strict: false\n  allow:\n    - ops: [\"bench.*\", \"core.*\"]\n      principals: [bench]\n",
            dir, sha);
    fclose(f);
    char err[1024];
    abx_server_opts o = {.config_path = cfg, .quiet = true};
    abx_server *s = abx_server_new(&o, err, sizeof err);
    if (!s || abx_registry_add(abx_server_registry(s), ops, err, sizeof err) != 0 ||
        abx_server_start(s, err, sizeof err) != 0)
        fail("server", err);
    double *v = malloc(sizeof *v * (size_t)iters);
    printf("%-34s %8s %10s %10s %10s\n", "case", "count", "p50 µs", "p99 µs", "mean µs");

    /* (a) the core in process */
    const char init[] = "{\"jsonrpc\":\"2.0\",\"id\":1,\"method\":\"initialize\",\"params\":{\"protocolVersion\":"
                        "\"2025-11-25\",\"capabilities\":{},\"clientInfo\":{\"name\":\"bench\",\"version\":\"1\"}}}";
    abx_mcp_conv *c = abx_mcp_conv_new(s->mcp, "bench");
    size_t len;
    for (int i = 0; i < iters; i++) {
        double t0 = now_us();
        free(core(s, c, init, &len));
        v[i] = now_us() - t0;
    }
    report("core initialize", v, iters);
    char req[256], cursor[128] = "";
    list_request(req, sizeof req, cursor);
    double t0 = now_us();
    char *first = core(s, c, req, &len);
    double cold = now_us() - t0;
    size_t page1 = len;
    int n_tools = 0, n_pages = 0;
    for (;;) { /* count the whole listing once */
        json_t *j = json_loads(first, 0, NULL);
        n_tools += (int)json_array_size(json_object_get(json_object_get(j, "result"), "tools"));
        json_decref(j);
        n_pages++;
        next_cursor(first, cursor);
        free(first);
        if (!*cursor)
            break;
        list_request(req, sizeof req, cursor);
        first = core(s, c, req, &len);
    }
    printf("%-34s %8d %10.1f\n", "core tools/list page 1, cold", 1, cold);
    fprintf(stderr, "result\tcore tools/list page 1 cold\t1\t%.1f\t%.1f\t%.1f\n", cold, cold, cold);
    if (n_tools != n_ops + 6) /* the bench ops and core.* without the explicit-only core.explain */
        fprintf(stderr, "mcp_bench: note: %d tools listed for %d ops\n", n_tools, n_ops);
    for (int page = 0; page < n_pages && page < 3; page++) {
        cursor[0] = '\0';
        for (int k = 0; k < page; k++) { /* the cursor of this page (opaque: ask for it) */
            list_request(req, sizeof req, cursor);
            char *x = core(s, c, req, &len);
            next_cursor(x, cursor);
            free(x);
        }
        list_request(req, sizeof req, cursor);
        for (int i = 0; i < iters; i++) {
            double t1 = now_us();
            free(core(s, c, req, &len));
            v[i] = now_us() - t1;
        }
        char name[64];
        snprintf(name, sizeof name, "core tools/list page %d (cached)", page + 1);
        report(name, v, iters);
    }
    char (*reqs)[256] = calloc((size_t)n_pages, sizeof *reqs); /* every page's request, cursors known */
    cursor[0] = '\0';
    for (int p = 0; p < n_pages; p++) {
        list_request(reqs[p], sizeof reqs[p], cursor);
        char *x = core(s, c, reqs[p], &len);
        next_cursor(x, cursor);
        free(x);
    }
    for (int i = 0; i < iters; i++) {
        double t1 = now_us();
        for (int p = 0; p < n_pages; p++)
            free(core(s, c, reqs[p], &len));
        v[i] = now_us() - t1;
    }
    free(reqs);
    char name[64];
    snprintf(name, sizeof name, "core tools/list all %d tools", n_tools);
    report(name, v, iters);
    abx_mcp_conv_free(s->mcp, c);

    /* (b) over HTTP on one keep-alive connection */
    int fd = socket(AF_INET, SOCK_STREAM, 0), one = 1;
    struct sockaddr_in a = {.sin_family = AF_INET, .sin_port = htons((uint16_t)abx_server_port(s))};
    inet_pton(AF_INET, "127.0.0.1", &a.sin_addr);
    setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
    if (connect(fd, (struct sockaddr *)&a, sizeof a) != 0)
        fail("connect", NULL);
    char sid[33];
    int http_iters = iters / 4 > 100 ? iters / 4 : 100; /* sessions are bounded (256): old ones are evicted */
    for (int i = 0; i < http_iters; i++) {
        double t1 = now_us();
        http_post(fd, abx_server_port(s), NULL, init, sid);
        v[i] = now_us() - t1;
    }
    report("HTTP initialize", v, http_iters);
    for (int page = 0; page < n_pages && page < 3; page++) {
        cursor[0] = '\0';
        for (int k = 0; k < page; k++) {
            list_request(req, sizeof req, cursor);
            next_cursor(http_post(fd, abx_server_port(s), sid, req, NULL), cursor);
        }
        list_request(req, sizeof req, cursor);
        for (int i = 0; i < iters; i++) {
            double t1 = now_us();
            char *body = http_post(fd, abx_server_port(s), sid, req, NULL);
            v[i] = now_us() - t1;
            if (!strstr(body, "\"tools\":["))
                fail("not a tools/list answer", body);
        }
        snprintf(name, sizeof name, "HTTP tools/list page %d", page + 1);
        report(name, v, iters);
    }
    close(fd);
    fprintf(stderr, "tools\t%d\t%d\t%zu\n", n_tools, n_pages, page1);
    printf("%d tools in %d pages; page 1 is %zu bytes\n", n_tools, n_pages, page1);
    free(v);
    abx_server_free(s);
    return 0;
}
