/* log.c — structured logs: one JSON object per line on stderr (time, level, request
 * id, principal, op, status, duration). Never a token, never file content. Each line
 * is written with one write(2) so concurrent lines never interleave. */
#include "pipeline/pipeline.h"
#include <stdio.h>
#include <string.h>
#include <unistd.h>

static atomic_int min_level = 1; /* 0 debug, 1 info, 2 warn, 3 error, 4 off */

static int level_num(const char *l)
{
    if (strcmp(l, "debug") == 0)
        return 0;
    if (strcmp(l, "info") == 0)
        return 1;
    if (strcmp(l, "warn") == 0 || strcmp(l, "warning") == 0)
        return 2;
    if (strcmp(l, "error") == 0)
        return 3;
    return 4;
}

void abx_log_set_level(const char *level) { atomic_store(&min_level, level_num(level)); }

static void emit(json_t *o)
{
    char *s = json_dumps(o, JSON_COMPACT | JSON_REAL_PRECISION(6));
    if (!s)
        return;
    size_t n = strlen(s);
    s[n] = '\n'; /* overwrite the NUL; json_dumps allocates n+1 */
    ssize_t w = write(STDERR_FILENO, s, n + 1);
    (void)w;
    free(s);
}

void abx_log(const char *level, const char *request_id, const char *fmt, ...)
{
    if (level_num(level) < atomic_load_explicit(&min_level, memory_order_relaxed))
        return;
    char msg[2048], ts[32];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(msg, sizeof msg, fmt, ap);
    va_end(ap);
    abx_iso8601(abx_wall_ms(), ts);
    json_t *o = json_pack("{s:s, s:s, s:s}", "time", ts, "level", level, "msg", msg);
    if (!o)
        return;
    if (request_id)
        json_object_set_new(o, "request_id", json_string(request_id));
    emit(o);
    json_decref(o);
}

/* The request line: a fixed stack buffer (a line that would not fit is cut at a field
 * boundary, never split inside one), no JSON tree, one write(2). */
typedef struct line {
    char p[1024];
    size_t n;
} line;

static void put_raw(line *l, const char *s, size_t n)
{
    if (l->n + n < sizeof l->p - 2) { /* keep room for "}\n" */
        memcpy(l->p + l->n, s, n);
        l->n += n;
    }
}

/* ,"name":"value" (escaped) or ,"name":null; values that are not valid UTF-8 become null */
static void put_field(line *l, const char *name, const char *v, size_t max)
{
    char tmp[600];
    size_t n = v ? strnlen(v, max) : 0, k = 0;
    k += (size_t)snprintf(tmp, sizeof tmp, ",\"%s\":", name);
    if (!v || !abx_utf8_valid(v, n) || n > 256) {
        memcpy(tmp + k, "null", 4);
        put_raw(l, tmp, k + 4);
        return;
    }
    tmp[k++] = '"';
    for (size_t i = 0; i < n; i++) {
        unsigned char c = (unsigned char)v[i];
        if (c == '"' || c == '\\') {
            tmp[k++] = '\\';
            tmp[k++] = (char)c;
        } else if (c < 0x20) {
            k += (size_t)snprintf(tmp + k, sizeof tmp - k, "\\u%04x", c);
        } else {
            tmp[k++] = (char)c;
        }
    }
    tmp[k++] = '"';
    put_raw(l, tmp, k);
}

void abx_log_request(const abx_request *r, int status, int64_t dur_us)
{
    if (1 < atomic_load_explicit(&min_level, memory_order_relaxed))
        return;
    char ts[32], num[64];
    abx_iso8601(abx_wall_ms(), ts);
    line l = {.n = 0};
    int k = snprintf(l.p, sizeof l.p, "{\"time\":\"%s\",\"level\":\"info\"", ts);
    l.n = k > 0 ? (size_t)k : 0;
    put_field(&l, "request_id", r->id, 64);
    put_field(&l, "door", abx_door_name(r->door), 16);
    put_field(&l, "method", r->method ? r->method : "-", 16);
    k = snprintf(num, sizeof num, ",\"status\":%d,\"duration_ms\":%.6g", status, (double)dur_us / 1000.0);
    put_raw(&l, num, (size_t)k);
    put_field(&l, "principal", r->policy && r->slot >= 0 ? abx_policy_principal_id(r->policy, r->slot) : NULL, 128);
    put_field(&l, "op", r->op ? r->op->id : NULL, 128);
    if (r->reply.err)
        put_field(&l, "error", abx_err_code(r->reply.err), 64);
    const char *client = abx_ctx_header(&r->ctx, "X-ABX-Client");
    /* "python/0.1.0 catalog=1": which client and catalog the caller was built against;
     * invalid UTF-8 is left out */
    if (client && abx_utf8_valid(client, strnlen(client, 120)))
        put_field(&l, "client", client, 120);
    l.p[l.n++] = '}';
    l.p[l.n++] = '\n';
    ssize_t w = write(STDERR_FILENO, l.p, l.n);
    (void)w;
}
