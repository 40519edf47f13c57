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

void abx_log_request(const abx_request *r, int status, int64_t dur_us)
{
    if (1 < atomic_load_explicit(&min_level, memory_order_relaxed))
        return;
    char ts[32];
    abx_iso8601(abx_wall_ms(), ts);
    json_t *o = json_pack("{s:s, s:s, s:s, s:s, s:s, s:i, s:f}", "time", ts, "level", "info", "request_id", r->id,
                          "door", abx_door_name(r->door), "method", r->method ? r->method : "-", "status", status,
                          "duration_ms", (double)dur_us / 1000.0);
    if (!o)
        return;
    json_object_set_new(o, "principal",
                        r->policy && r->slot >= 0 ? json_string(abx_policy_principal_id(r->policy, r->slot))
                                                  : json_null());
    json_object_set_new(o, "op", r->op ? json_string(r->op->id) : json_null());
    if (r->reply.err)
        json_object_set_new(o, "error", json_string(abx_err_code(r->reply.err)));
    const char *client = abx_ctx_header(&r->ctx, "X-ABX-Client");
    if (client) /* "python/0.1.0 catalog=1": which client and catalog the caller was built against */
        json_object_set_new(o, "client", json_stringn(client, strnlen(client, 120))); /* invalid UTF-8: left out */
    emit(o);
    json_decref(o);
}
