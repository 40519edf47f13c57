/* checks.c — step 0's pure checks on what libmicrohttpd parsed (listener.c asks them):
 * the header section's size and count, the Host and Origin headers, a JSON body's
 * Content-Type. */
#include "server/checks.h"
#include <arpa/inet.h>
#include <netinet/in.h>
#include <stdio.h>
#include <string.h>
#include <strings.h>

/* The size of the header section as it came on the wire (request line, each header line,
 * the blank line), rebuilt from what libmicrohttpd parsed: it keeps the whole block in the
 * connection's memory pool, sized about twice limits.header_bytes (conn_pool_bytes). */
typedef struct hdr_size {
    size_t bytes;
    size_t count;
} hdr_size;

static enum MHD_Result count_header(void *cls, enum MHD_ValueKind kind, const char *key, size_t klen,
                                    const char *value, size_t vlen)
{
    (void)kind;
    (void)key;
    (void)value;
    hdr_size *hz = cls;
    hz->bytes += klen + 2 + vlen + 2; /* "Key: value\r\n" */
    hz->count++;
    return MHD_YES;
}

bool abx_headers_within_limits(struct MHD_Connection *c, const abx_config *cfg, const char *method,
                                  size_t target_len, const char *version)
{
    hdr_size hz = {strlen(method) + 1 + target_len + 1 + strlen(version) + 2 + 2, 0};
    MHD_get_connection_values_n(c, MHD_HEADER_KIND, count_header, &hz);
    return hz.bytes <= (size_t)cfg->header_bytes && hz.count <= (size_t)cfg->header_count;
}

int abx_port_host(const abx_server *s, const char *host)
{
    if (!host || (host[0] != 'p' && host[0] != 'P'))
        return 0;
    int port = 0;
    const char *p = host + 1;
    for (; *p >= '0' && *p <= '9' && port <= 65535; p++)
        port = port * 10 + (*p - '0');
    if (p == host + 1 || p - host > 6 || *p != '.' || port < 1 || port > 65535 || host[1] == '0')
        return 0;
    char name[256];
    snprintf(name, sizeof name, "%s", p + 1);
    char *colon = strrchr(name, ':'); /* the listener's port; names only, so no IPv6 brackets */
    if (colon)
        *colon = '\0';
    if (!name[0] || strchr(name, '[') || strchr(name, ']'))
        return 0;
    if (strcasecmp(name, "localhost") == 0)
        return port;
    for (size_t i = 0; i < s->cfg.n_allowed_hosts; i++)
        if (strcasecmp(s->cfg.allowed_hosts[i], name) == 0)
            return port;
    return 0;
}

bool abx_port_origin_take(const abx_server *s, abx_request *r, const abx_headers *h, const char *raw, size_t len)
{
    int port = abx_port_host(s, h->host);
    if (!port)
        return true;
    r->port_origin = port;
    r->cookie = h->cookie;
    r->origin_target = raw;
    r->origin_target_len = len;
    char *np = abx_arena_printf(r->arena, "/ports/%d%.*s", port, (int)r->path_len, r->path);
    if (!np)
        return false;
    r->path = np;
    r->path_len = strlen(np);
    return true;
}

/* "127.0.0.1" with or without a port of digits: what nearly every local client sends,
 * and what the general rule below allows (a loopback address); answered without
 * copying or parsing */
static bool loopback_literal(const char *h)
{
    if (strncmp(h, "127.0.0.1", 9) != 0)
        return false;
    const char *p = h + 9;
    if (*p == '\0')
        return true;
    if (*p++ != ':' || *p == '\0')
        return false;
    for (; *p; p++)
        if (*p < '0' || *p > '9')
            return false;
    return true;
}

bool abx_host_allowed(abx_server *s, const char *host)
{
    if (!host)
        return true; /* HTTP/1.0 without Host: no browser sends that, nothing to rebind */
    if (loopback_literal(host))
        return true;
    if (abx_port_host(s, host))
        return true;
    char h[256];
    snprintf(h, sizeof h, "%s", host);
    for (size_t i = 0; i < s->cfg.n_allowed_hosts; i++)
        if (strcasecmp(s->cfg.allowed_hosts[i], h) == 0)
            return true;
    /* strip the port */
    char *colon = h[0] == '[' ? strstr(h, "]:") : strrchr(h, ':');
    if (colon) {
        if (h[0] == '[')
            colon++;
        *colon = '\0';
    }
    if (strcasecmp(h, "localhost") == 0 || strcmp(h, "[::1]") == 0)
        return true;
    struct in_addr a;
    if (inet_pton(AF_INET, h, &a) == 1 && (ntohl(a.s_addr) >> 24) == 127)
        return true;
    for (size_t i = 0; i < s->cfg.n_allowed_hosts; i++)
        if (strcasecmp(s->cfg.allowed_hosts[i], h) == 0)
            return true;
    return false;
}

/* allowed_origins, or the request's own origin: a page served from the origin this
 * request names in Host (already checked against the allowed hosts, so a rebound name
 * never gets here) may call it, as browsers' same-origin rule intends; its WebSocket
 * authenticates with a ticket (terminal.ticket). */
bool abx_origin_allowed(abx_server *s, const char *origin, const char *host)
{
    const char *scheme = s->cfg.tls_cert ? "https://" : "http://";
    size_t sl = strlen(scheme);
    if (host && *host && strncasecmp(origin, scheme, sl) == 0 && strcasecmp(origin + sl, host) == 0)
        return true;
    for (size_t i = 0; i < s->cfg.n_allowed_origins; i++)
        if (strcmp(s->cfg.allowed_origins[i], origin) == 0)
            return true;
    return false;
}

bool abx_is_json_type(const char *ct)
{
    if (!ct)
        return false;
    size_t n = strlen("application/json");
    return strncasecmp(ct, "application/json", n) == 0 && (ct[n] == '\0' || ct[n] == ';' || ct[n] == ' ');
}


/* The request's header lookup (abx_ctx_header): the connection answers while it lives,
 * which is as long as the request does. */
const char *abx_connection_header(void *ud, const char *name)
{
    return MHD_lookup_connection_value(ud, MHD_HEADER_KIND, name);
}

typedef struct visit_ctx {
    int (*visit)(void *vud, const char *name, const char *value);
    void *vud;
    bool stop;
} visit_ctx;

static enum MHD_Result visit_header(void *cls, enum MHD_ValueKind kind, const char *key, size_t key_size,
                                    const char *value, size_t value_size)
{
    (void)kind;
    (void)key_size;
    (void)value_size;
    visit_ctx *v = cls;
    if (!v->stop && key && value && v->visit(v->vud, key, value))
        v->stop = true;
    return v->stop ? MHD_NO : MHD_YES;
}

/* Every request header (abx_ctx_headers_each). */
void abx_connection_headers(void *ud, int (*visit)(void *vud, const char *name, const char *value), void *vud)
{
    visit_ctx v = {visit, vud, false};
    MHD_get_connection_values_n(ud, MHD_HEADER_KIND, visit_header, &v);
}
