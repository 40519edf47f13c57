/* doors.c — the door table: which front door a request from a listener came through,
 * read from core/doors.def (one row per path), and the one way in for them: route,
 * authenticate (pipeline steps 1 and 3), then the door's handler, which calls back into
 * the pipeline for each call it carries. A new door is a row in doors.def and a
 * door_<handler> here; the listener, the OpenAPI document and the ledger's door names
 * all read the same rows. */
#include "doors/doors.h"
#include "http/http.h"
#include <string.h>

/* The pipeline's op steps (4 to 9) on the op the route names. */
static void door_op(abx_request *r) { abx_pipeline_op(r); }
/* The protocol doors: each runs the calls it carries through the pipeline again,
 * in-process, as the authenticated principal (their own ledger group links them). */
static void door_batch(abx_request *r) { abx_batch_run(r); }
static void door_tools(abx_request *r) { abx_tools_run(r); }
static void door_mcp(abx_request *r) { abx_mcp_http(r); }
static void door_commands_list(abx_request *r) { abx_commands_list(r); }

enum route_methods { ONLY, ANY };
enum route_match { EXACT, SEGMENT };
enum route_order { FIRST, LAST };

typedef struct door_route {
    abx_door door;
    const char *method;
    enum route_methods methods;
    const char *path;
    size_t path_len;
    enum route_match match;
    enum route_order order;
    void (*run)(abx_request *r);
} door_route;

static const door_route routes[] = {
#define ABX_DOOR_ROUTE(id, method, methods, path, match, order, handler, summary)                                  \
    {ABX_DOOR_##id, method, methods, path, sizeof path - 1, match, order, door_##handler},
#include "core/doors.def"
#undef ABX_DOOR_ROUTE
};

static bool route_matches(const door_route *d, const abx_request *r)
{
    if (d->methods == ONLY && strcmp(d->method, r->method) != 0)
        return false;
    if (r->path_len < d->path_len || memcmp(r->path, d->path, d->path_len) != 0)
        return false;
    if (d->match == EXACT)
        return r->path_len == d->path_len;
    size_t rest = r->path_len - d->path_len; /* SEGMENT: one more non-empty segment */
    return rest > 0 && !memchr(r->path + d->path_len, '/', rest);
}

static const door_route *find(const abx_request *r, enum route_order order)
{
    for (size_t i = 0; i < ABX_ARRAY_LEN(routes); i++)
        if (routes[i].order == order && route_matches(&routes[i], r))
            return &routes[i];
    return NULL;
}

static void take(abx_request *r, const door_route *d)
{
    r->door = d->door;
    r->door_run = d->run;
    if (d->match != SEGMENT)
        return;
    /* the op id or command name, percent-decoded; a bad escape names nothing (404) */
    size_t n = r->path_len - d->path_len;
    char *name = abx_arena_alloc(r->arena, n + 1);
    r->op_name = name && abx_pct_decode(r->path + d->path_len, n, name, false) >= 0 ? name : "";
}

void abx_doors_route(abx_request *r)
{
    if (r->routed)
        return;
    r->routed = true;
    if (r->e2b_listener) { /* the envd listener: one door, its own routes (e2b.c) */
        r->door = ABX_DOOR_E2B;
        r->door_run = abx_e2b_envd;
        return;
    }
    if (r->sandboxd_listener) { /* sandboxd's REST listener: one door (sandboxd_rest.c) */
        r->door = ABX_DOOR_SANDBOXD;
        r->door_run = abx_sandboxd_rest;
        abx_sandboxd_auth(r);
        return;
    }
    if (r->door != ABX_DOOR_HTTP)
        return;
    const door_route *d = find(r, FIRST);
    if (!d) {
        abx_route_op(r);
        if (r->route == ABX_ROUTE_NONE)
            d = find(r, LAST);
    }
    if (d)
        take(r, d);
}

void abx_doors_begin(abx_request *r)
{
    abx_doors_route(r);
    if (abx_pipeline_front(r) != ABX_STEP_NEXT)
        return;
    if (r->door_run)
        r->door_run(r);
    else
        abx_pipeline_op(r); /* an op's own HTTP binding */
}

void abx_doors_dispatch(abx_request *r)
{
    abx_doors_begin(r);
    if (abx_body_wanted(r)) /* the body was read whole: no stream feeds a sink */
        abx_body_end(r);
    abx_audit(r); /* step 10: always */
}

json_t *abx_door_tool_args(const abx_server *s, const char *op_id, const json_t *args)
{
    if (!op_id || (strcmp(op_id, "commands.run") != 0 && strcmp(op_id, "commands.sessions.exec") != 0))
        return NULL;
    const json_t *t = json_is_object(args) ? json_object_get(args, "timeout") : NULL;
    if (t && !json_is_null(t))
        return NULL; /* the caller's own soft timeout (0 = none) wins */
    json_t *a = json_is_object(args) ? json_deep_copy(args) : json_object();
    if (a)
        json_object_set_new(a, "timeout", json_real((double)s->cfg.tool_soft_timeout_ms / 1000.0));
    return a;
}
