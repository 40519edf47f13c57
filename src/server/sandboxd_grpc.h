/* sandboxd_grpc.h — the gRPC listener's connection (sandboxd_grpc.c), shared with its
 * fuzz target (tests/fuzz/fuzz_sandboxd.c), which feeds a connection bytes without a
 * socket: framing, HPACK, the gRPC length prefix and the request message's protobuf. */
#ifndef ABX_SERVER_SANDBOXD_GRPC_H
#define ABX_SERVER_SANDBOXD_GRPC_H

#include "pipeline/pipeline.h"
#include <pthread.h>
#include <stdatomic.h>

typedef struct sbx_gconn sbx_gconn;
typedef struct sbx_gstream sbx_gstream;

struct sbx_gstream {
    sbx_gconn *conn;
    int32_t id;
    char path[256];
    size_t path_len;
    char *authz, *traceparent;   /* owned: the metadata */
    bool grpc_ct, too_large, dispatched;
    abx_buf in;                  /* the request DATA */
    /* under conn->mu: the response */
    abx_buf out;
    size_t out_sent;
    bool done, dirty, deferred, closed, worker;
    int code;
    char msg[256];
    bool responded;              /* the connection thread's: headers submitted */
    atomic_bool cancelled;
    sbx_gstream *next;
};

struct sbx_gconn {
    abx_server *s;
    void *srv;                   /* the listener; NULL when fuzzing (methods are not run) */
    int fd;                      /* -1 when fuzzing */
    void *tls;                   /* SSL * when the listener speaks TLS (top-level tls), else NULL */
    int wake[2];
    struct nghttp2_session *h2;
    pthread_mutex_t mu;
    sbx_gstream *streams;
    int refs;
    char client[64];
};

sbx_gconn *abx_sbx_gconn_new(abx_server *s, void *srv, int fd);
bool abx_sbx_gconn_input(sbx_gconn *c, const uint8_t *data, size_t len);
void abx_sbx_gconn_close(sbx_gconn *c);
void abx_sbx_gconn_wake(sbx_gconn *c);
void abx_sbx_gstream_finish(sbx_gstream *g, int code, const char *msg);

#endif
