/* test_torture.c — allocation-failure torture (curl's idea): for each request of a
 * small script, count the allocations it makes, then repeat it with the n-th one
 * failing for every n. abx's own allocator, jansson's and SQLite's all count (see
 * src/core/fault.c). Each failing run must end in a clean answer — the request's own
 * success or error, or a 5xx — never a crash or a hang, and the server must answer
 * the next request normally. Leaks are LeakSanitizer's job: this program runs under
 * the ASan build, whose ABX_FAULT_INJECTION is on. In builds without injection the
 * test reports itself skipped.
 *
 * Requests go over real HTTP on loopback (so the transport, step 0, dispatch, the
 * handler, the ledger and the JSON rendering are all in the path), with a plain
 * socket client that allocates nothing through abx. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include <abx/abx.h>
#include "core/util.h"
#include <arpa/inet.h>
#include <errno.h>
#include <netinet/in.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/time.h>
#include <unistd.h>

#if defined(ABX_FAULT_INJECTION) && ABX_FAULT_INJECTION

#define TOKEN "torture-token-0123456789abcdef"

static char ws[128], cfg_path[256];
static abx_server *srv;
static int port;

/* One HTTP/1.1 request on a fresh connection; returns the status (0 when the
 * connection broke, which a failing allocation in the transport may cause). */
static int http(const char *method, const char *target, const char *body, char *resp, size_t resplen)
{
    int fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
    if (fd < 0)
        return -1;
    struct timeval tv = {.tv_sec = 20};
    setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof tv);
    struct sockaddr_in a = {.sin_family = AF_INET, .sin_port = htons((uint16_t)port)};
    a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    if (connect(fd, (struct sockaddr *)&a, sizeof a) != 0) {
        close(fd);
        return -1;
    }
    char req[4096];
    int n = snprintf(req, sizeof req,
                     "%s %s HTTP/1.1\r\nHost: 127.0.0.1:%d\r\nAuthorization: Bearer %s\r\nConnection: close\r\n",
                     method, target, port, TOKEN);
    if (body)
        n += snprintf(req + n, sizeof req - (size_t)n,
                      "Content-Type: application/json\r\nContent-Length: %zu\r\n\r\n%s", strlen(body), body);
    else
        n += snprintf(req + n, sizeof req - (size_t)n, "\r\n");
    if (write(fd, req, (size_t)n) != n) {
        close(fd);
        return 0;
    }
    size_t got = 0;
    ssize_t k;
    while (got < resplen - 1 && (k = read(fd, resp + got, resplen - 1 - got)) > 0)
        got += (size_t)k;
    resp[got] = '\0';
    close(fd);
    int status = 0;
    if (sscanf(resp, "HTTP/1.%*d %d", &status) != 1)
        return 0;
    return status;
}

static int setup(void **state)
{
    (void)state;
    snprintf(ws, sizeof ws, "/tmp/abx-torture-XXXXXX");
    assert_non_null(mkdtemp(ws));
    char hex[65];
    abx_sha256_hex(TOKEN, strlen(TOKEN), hex);
    snprintf(cfg_path, sizeof cfg_path, "%s/abx.yaml", ws);
    char wsdir[200];
    snprintf(wsdir, sizeof wsdir, "%s/ws", ws);
    assert_int_equal(mkdir(wsdir, 0700), 0);
    FILE *f = fopen(cfg_path, "w");
    assert_non_null(f);
    fprintf(f,
            "listen: 127.0.0.1:0\nworkspace: %s\nterminal_listen: \"off\"\nledger: {path: %s/ledger.db}\n"
            "auth:\n  tokens:\n    - {principal: agent, roles: [agent], token_sha256: \"%s\"}\n"
            "policy:\n  allow:\n"
            "    - {ops: [\"core.*\", \"ledger.*\"], principals: [agent]}\n"
            "    - {ops: [\"files.*\"], principals: [agent], paths: [\"%s/**\"]}\n",
            wsdir, ws, hex, wsdir);
    fclose(f);
    char err[512];
    abx_server_opts o = {.config_path = cfg_path, .quiet = true};
    srv = abx_server_new(&o, err, sizeof err);
    if (!srv)
        fprintf(stderr, "server: %s\n", err);
    assert_non_null(srv);
    if (abx_server_start(srv, err, sizeof err) != 0)
        fprintf(stderr, "start: %s\n", err);
    port = abx_server_port(srv);
    assert_true(port > 0);
    return 0;
}

static int teardown(void **state)
{
    (void)state;
    abx_fault_reset(0);
    abx_server_stop(srv);
    abx_server_free(srv);
    char cmd[300];
    snprintf(cmd, sizeof cmd, "rm -rf '%s'", ws);
    (void)!system(cmd); /* test-only cleanup of its own temp dir */
    return 0;
}

typedef struct step {
    const char *method, *target, *body;
    int ok_status; /* the status of the run without failures */
} step;

/* Is s a status a failing allocation may legitimately turn the answer into? */
static bool clean_status(int s, int ok_status)
{
    return s == ok_status || s == 0 || s == 500 || s == 503 || s == 400 || s == 413 || s == 404 || s == 403;
}

/* Copy t into out with each "{ws}" replaced by the test's directory. */
static void subst(const char *t, char *out, size_t outlen)
{
    size_t o = 0;
    while (*t && o + 1 < outlen) {
        if (strncmp(t, "{ws}", 4) == 0) {
            o += (size_t)snprintf(out + o, outlen - o, "%s", ws);
            t += 4;
        } else {
            out[o++] = *t++;
        }
    }
    out[o < outlen ? o : outlen - 1] = '\0';
}

static void torture(const step *st)
{
    static char resp[1 << 16];
    char target[512], body[1024];
    subst(st->target, target, sizeof target);
    if (st->body)
        subst(st->body, body, sizeof body);
    abx_fault_reset(0);
    long before = abx_fault_count();
    int s = http(st->method, target, st->body ? body : NULL, resp, sizeof resp);
    if (s != st->ok_status)
        fail_msg("%s %s without failures: status %d\n%.600s", st->method, target, s, strstr(resp, "\r\n\r\n") ? strstr(resp, "\r\n\r\n") : resp);
    usleep(250 * 1000); /* the ledger writer's group commit for this request */
    long count = abx_fault_count() - before;
    assert_true(count > 0);
    int failures = 0;
    for (long n = 1; n <= count + 8; n++) {
        abx_fault_reset(n);
        s = http(st->method, target, st->body ? body : NULL, resp, sizeof resp);
        abx_fault_reset(0);
        if (!clean_status(s, st->ok_status))
            fail_msg("%s %s with allocation %ld failing: status %d\n%.400s", st->method, target, n, s, resp);
        if (s != st->ok_status)
            failures++;
        /* the server is still whole: a plain health check answers */
        int h = 0;
        for (int tries = 0; tries < 50 && h != 200; tries++) {
            h = http("GET", "/health", NULL, resp, sizeof resp);
            if (h != 200)
                usleep(20 * 1000);
        }
        if (h != 200)
            fail_msg("after %s %s failing at %ld, /health answers %d", st->method, target, n, h);
    }
    fprintf(stderr, "torture %s %s: %ld allocations, %d runs answered with an error\n", st->method, st->target, count,
            failures);
}

static void test_torture_health(void **state)
{
    (void)state;
    torture(&(step){"GET", "/health", NULL, 200});
}

static void test_torture_files_write_and_read(void **state)
{
    (void)state;
    torture(&(step){"POST", "/files/write", "{\"path\": \"{ws}/ws/a.txt\", \"content\": \"hello\"}", 200});
    torture(&(step){"GET", "/files/read?path={ws}/ws/a.txt", NULL, 200});
    torture(&(step){"GET", "/files/list?path={ws}/ws", NULL, 200});
}

/* The directory walker (src/builtin/files/walk.c) under the read-only ops that drive
 * it, on a small tree made here (not through abx). The mutating walks (recursive copy,
 * delete) are left out: a tortured write can leave the ledger refusing mutating calls
 * for a while, which would fail the next step's run without failures. */
static void test_torture_files_walks(void **state)
{
    (void)state;
    char p[400];
    snprintf(p, sizeof p, "%s/ws/t", ws);
    assert_int_equal(mkdir(p, 0700), 0);
    snprintf(p, sizeof p, "%s/ws/t/u", ws);
    assert_int_equal(mkdir(p, 0700), 0);
    snprintf(p, sizeof p, "%s/ws/t/u/b.txt", ws);
    FILE *f = fopen(p, "w");
    assert_non_null(f);
    fputs("needle\n", f);
    fclose(f);
    torture(&(step){"GET", "/files/list?path={ws}/ws&recursive=true", NULL, 200});
    torture(&(step){"POST", "/files/find", "{\"path\": \"{ws}/ws\", \"pattern\": \"*.txt\"}", 200});
    torture(&(step){"POST", "/files/search", "{\"path\": \"{ws}/ws\", \"pattern\": \"needle\"}", 200});
    torture(&(step){"POST", "/files/archive", "{\"sources\": [\"{ws}/ws/t\"]}", 200});
}

static void test_torture_errors(void **state)
{
    (void)state;
    torture(&(step){"GET", "/files/read?path=/etc/passwd", NULL, 403});
    torture(&(step){"POST", "/files/write", "{\"path\": 5}", 400});
    torture(&(step){"GET", "/no/such/thing", NULL, 404});
}

static void test_torture_ledger_timeline(void **state)
{
    (void)state;
    torture(&(step){"GET", "/ledger/timeline?limit=5", NULL, 200});
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_torture_health),
        cmocka_unit_test(test_torture_files_write_and_read),
        cmocka_unit_test(test_torture_files_walks),
        cmocka_unit_test(test_torture_errors),
        cmocka_unit_test(test_torture_ledger_timeline),
    };
    return cmocka_run_group_tests(tests, setup, teardown);
}

#else

static void test_skipped(void **state)
{
    (void)state;
    skip(); /* needs a build with -DABX_FAULT_INJECTION=ON */
}

int main(void)
{
    const struct CMUnitTest tests[] = {cmocka_unit_test(test_skipped)};
    return cmocka_run_group_tests(tests, NULL, NULL);
}

#endif
