/* egress_int.h — the egress proxy's internals shared by egress.c (the proxy and its
 * threads) and egress_transp.c (transparent listeners and the resolver). */
#ifndef ABX_SANDBOX_EGRESS_INT_H
#define ABX_SANDBOX_EGRESS_INT_H

#include "sandbox/egress.h"
#include <pthread.h>
#include <sys/types.h>

#define BUF_CAP (ABX_EGRESS_HEAD_MAX + 2048 + 8) /* a head, or a whole first TLS record */
#define RELAY_CAP 16384
#define PUMP_MAX (256 * 1024) /* per splice; also each pipe's size */

struct abx_egress {
    abx_egress_listeners l;
    int stopfd;
    abx_egress_config cfg;
    pthread_t acceptor;
    pthread_mutex_t mu;
    pthread_cond_t cv;
    int active;
    struct conn **slots;
    /* the resolver's names (under mu): synth[i] has 127.100.0.0 + i + 1 */
    char **synth;
    size_t nsynth;
    char **denied; /* names refused once already (one record each) */
    size_t ndenied;
};

typedef struct conn {
    abx_egress *e;
    int slot, cfd, ufd, kind;
    unsigned char buf[BUF_CAP]; /* client bytes not yet handled */
    size_t len;
    unsigned char relay[RELAY_CAP];
    /* the session being recorded */
    const char *proto;
    char host[ABX_EGRESS_HOST_MAX], addr[46], rule[300], method[16], path[256];
    int port;
    uint64_t up, down;
    int64_t t0;
    /* plain HTTP scanning */
    int64_t body_left;
    bool opaque;
    char denied_host[ABX_EGRESS_HOST_MAX]; /* a later request refused: answer 403 at the end */
} conn;

/* egress.c */
int wait_fd(conn *c, int fd, short ev, int ms);
ssize_t fill(conn *c);
bool send_all(int fd, const void *p, size_t n);
void emit(conn *c, bool allowed, const char *reason);
void begin(conn *c, const char *proto, const char *host, int port);
void http_error(conn *c, int code, const char *status, const char *body);
void http_deny(conn *c, const char *host);
bool decide(conn *c, abx_egress_decision *d);
bool dial(conn *c, const abx_egress_decision *d);
bool forward_raw(conn *c);
void relay(conn *c, bool scan);
bool intercepted(conn *c, bool tls);
void serve_http(conn *c, const abx_http_req *r);

/* egress_transp.c */
void abx__egress_serve_transparent(conn *c);
void abx__egress_serve_dns_tcp(conn *c);
void abx__egress_dns_udp(abx_egress *e, int fd);
void abx__egress_names_free(abx_egress *e);

#endif
