/* checks.h — step 0's checks of the HTTP listener (checks.c). */
#ifndef ABX_SERVER_CHECKS_H
#define ABX_SERVER_CHECKS_H

#include "server/server.h"
#include <microhttpd.h>

/* The request line and headers within limits.header_bytes and limits.headers. */
bool abx_headers_within_limits(struct MHD_Connection *c, const abx_config *cfg, const char *method,
                               size_t target_len, const char *version);
/* Host is loopback or in allowed_hosts (no Host: allowed), or a port's own origin. */
bool abx_host_allowed(abx_server *s, const char *host);
/* A port's own origin: Host p<port>.<name>[:listener port], where name is localhost or a
 * name in allowed_hosts (docs/ports.md): that port (1..65535), else 0. */
int abx_port_host(const abx_server *s, const char *host);
/* On a port's own origin every path is that port's: r's path goes under /ports/<port>/
 * (only ports.proxy answers there) and the browser's target and Cookie are kept for
 * step 3 (pipeline/port_origin.c). False only when out of memory. */
bool abx_port_origin_take(const abx_server *s, abx_request *r, const abx_headers *h, const char *raw, size_t len);
/* Origin is in allowed_origins. */
bool abx_origin_allowed(abx_server *s, const char *origin, const char *host);
/* Content-Type application/json (with parameters). */
bool abx_is_json_type(const char *ct);
/* The request's headers for the pipeline: one by name (ud is the connection), and all
 * of them in order, visit returning non-zero to stop. */
const char *abx_connection_header(void *ud, const char *name);
void abx_connection_headers(void *ud, int (*visit)(void *vud, const char *name, const char *value), void *vud);

#endif
