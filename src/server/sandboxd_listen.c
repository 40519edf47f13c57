/* sandboxd_listen.c — the sandboxd door's listeners (docs/fleet.md): the REST API on a
 * side listener of libmicrohttpd whose requests are marked for door sandboxd, and the
 * gRPC server (sandboxd_grpc.c). The config load already refused a non-loopback listener
 * without TLS or allow_plaintext. */
#include "server/server.h"
#include <errno.h>
#include <microhttpd.h>
#include <stdio.h>
#include <string.h>

typedef struct conn_req_head {
    abx_request *r; /* listener.c's conn_req starts with its request */
} conn_req_head;

static void *on_uri_sandboxd(void *cls, const char *uri, struct MHD_Connection *c)
{
    conn_req_head *cr = abx_listener_on_uri(cls, uri, c);
    if (cr)
        cr->r->sandboxd_listener = true;
    return cr;
}

int abx_sandboxd_listen_start(abx_server *s, side_listen *sl, struct MHD_OptionItem *tls_opts, char *errbuf,
                              size_t errlen)
{
    const abx_config *c = &s->cfg;
    if (!c->sandboxd_on)
        return 0;
    if (c->sandboxd_rest_host && c->sandboxd_rest_port >= 0) {
        sl->tls_opts = tls_opts;
        s->mhd_sandboxd = abx_side_listener(s, c->sandboxd_rest_host, c->sandboxd_rest_port, sl, on_uri_sandboxd,
                                            &s->sandboxd_rest_port);
        sl->tls_opts = NULL;
        if (!s->mhd_sandboxd) {
            snprintf(errbuf, errlen, "cannot listen on sandboxd.rest_listen %s:%d: %s", c->sandboxd_rest_host,
                     c->sandboxd_rest_port, strerror(errno ? errno : EADDRINUSE));
            return -1;
        }
    }
    if (c->sandboxd_grpc_host && c->sandboxd_grpc_port >= 0 && abx_sbx_grpc_start(s, errbuf, errlen) != 0)
        return -1;
    return 0;
}
