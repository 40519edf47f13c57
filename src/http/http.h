/* http.h — the HTTP front door's pure parts: the step-0 request-target check, query
 * string decoding and the trie router. No sockets here; server.c owns those. */
#ifndef ABX_HTTP_HTTP_H
#define ABX_HTTP_HTTP_H

#include "core/core.h"
#include <stdbool.h>
#include <stddef.h>

/* Step 0b on the raw request target (path and query as sent). The path part refuses
 * `//`, `/./`, `/../` (and a trailing `/.` or `/..`), `%2f`, `%2e`, `%5c` (any case),
 * backslash, NUL, control characters, bytes >= 0x80 unencoded, and anything not
 * starting with '/'. The query part refuses raw NUL, control characters, spaces and
 * malformed percent escapes (encoded values are typed and checked at step 6). */
bool abx_target_ok(const char *raw, size_t n);

/* Percent-decode in place-ish: decodes src[0..n) into dst (capacity >= n+1), '+' → ' '
 * when plus_space. Returns decoded length or -1 for a malformed escape. */
long abx_pct_decode(const char *src, size_t n, char *dst, bool plus_space);

typedef int (*abx_query_cb)(void *ud, const char *name, size_t nlen, const char *val, size_t vlen);
/* Walk name=value pairs of a raw query string, decoded. The callback returns 0 to go
 * on, non-zero to stop (that value is returned). -1 on a malformed escape. */
int abx_query_each(const char *q, size_t n, abx_query_cb cb, void *ud);

/* ---- request headers (step 0: what libmicrohttpd lets through) ----
 * Fed one header at a time (name and value as the transport delivers them, values
 * NUL-terminated at vlen), then checked once for framing ambiguity. Values point into
 * the transport's storage and live as long as the request. */
typedef struct abx_headers {
    int n_cl, n_te, n_host, n_auth;
    const char *host, *origin, *cl, *te, *content_type, *bearer, *x_token, *idem_key, *ws_key, *last_event_id;
    const char *cookie;     /* Cookie (a port origin's session); the last one when repeated */
    bool auth_bad_scheme;   /* Authorization present but not "Bearer <token>" */
    bool ws_upgrade;        /* Upgrade: websocket */
    int prefer_wait;        /* Prefer: wait=N, clamped to 0..300 */
    char why[120];          /* why a header or the set was refused */
} abx_headers;

/* One header: false when it must be refused (a name outside the RFC 9110 token set —
 * e.g. a space before the colon — or a control character in the value). */
bool abx_headers_add(abx_headers *h, const char *name, size_t nlen, const char *value, size_t vlen);
/* After the last header: refuses duplicate or conflicting Content-Length /
 * Transfer-Encoding / Host / Authorization, a Transfer-Encoding other than chunked and a
 * Content-Length that is not 1–18 digits. Returns true and *clen (-1 when absent). */
bool abx_headers_check(abx_headers *h, int64_t *clen);

/* ---- trie router on method + path (literal segments beat variables) ---- */
typedef struct abx_router abx_router;

#define ABX_ROUTE_MAX_VARS 8
typedef struct abx_route_match {
    const abx_op *op;
    size_t op_index;
    size_t n_vars;
    struct { char name[40]; const char *val; size_t len; } vars[ABX_ROUTE_MAX_VARS]; /* val points into the path */
    /* when the path exists but not for this method: ops bound there (for 405 Allow) */
    size_t n_others;
    struct { const char *method; size_t op_index; } others[8];
} abx_route_match;

enum abx_route_result { ABX_ROUTE_NONE, ABX_ROUTE_FOUND, ABX_ROUTE_WRONG_METHOD };

abx_router *abx_router_build(const abx_registry *reg); /* reg frozen; NULL on OOM */
void abx_router_free(abx_router *r);
enum abx_route_result abx_router_match(const abx_router *r, const char *method, const char *path, size_t plen,
                                       abx_route_match *m);

#endif
