/* checks.h — step 0's checks of the HTTP listener (checks.c). */
#ifndef ABX_SERVER_CHECKS_H
#define ABX_SERVER_CHECKS_H

#include "server/server.h"
#include <microhttpd.h>

/* The request line and headers within limits.header_bytes and limits.headers. */
bool abx_headers_within_limits(struct MHD_Connection *c, const abx_config *cfg, const char *method,
                               size_t target_len, const char *version);
/* Host is loopback or in allowed_hosts (no Host: allowed). */
bool abx_host_allowed(abx_server *s, const char *host);
/* Origin is in allowed_origins. */
bool abx_origin_allowed(abx_server *s, const char *origin, const char *host);
/* Content-Type application/json (with parameters). */
bool abx_is_json_type(const char *ct);
/* The request's headers for the pipeline: one by name (ud is the connection), and all
 * of them in order, visit returning non-zero to stop. */
const char *abx_connection_header(void *ud, const char *name);
void abx_connection_headers(void *ud, int (*visit)(void *vud, const char *name, const char *value), void *vud);

#endif
