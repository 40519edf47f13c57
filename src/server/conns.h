/* conns.h — the listener's view of its connections: how many each client address holds
 * before it has authenticated (the per-address cap, checked at accept), and a deadline
 * for the request line and headers (libmicrohttpd's timeout is one of inactivity, so a
 * client sending one byte a second would hold its slot for ever). A sweeper thread shuts
 * down connections past their deadline; libmicrohttpd then closes them as it would any
 * connection whose peer went away. Counters feed /metrics. */
#ifndef ABX_SERVER_CONNS_H
#define ABX_SERVER_CONNS_H

#include <stdatomic.h>
#include <stdbool.h>
#include <stdint.h>
#include <netinet/in.h>
#include <sys/socket.h>

typedef struct abx_conns abx_conns;
typedef struct abx_conn abx_conn;

/* per_address: unauthenticated connections one address may hold (0: no cap);
 * header_ms: time from the start of a request (connection open or previous reply) to
 * its complete header section. NULL when out of memory or threads. */
abx_conns *abx_conns_new(int per_address, int64_t header_ms);
void abx_conns_free(abx_conns *t); /* stops the sweeper; every connection must be closed */

/* At accept: false when the address already holds its cap of unauthenticated
 * connections (the connection is refused and counted). */
bool abx_conns_admit(abx_conns *t, const struct sockaddr *a);
/* A connection started / closed (libmicrohttpd's notify callback). One that finds its
 * address at the cap (another I/O thread admitted one at the same time) is shut down. */
abx_conn *abx_conns_open(abx_conns *t, const struct sockaddr *a, int fd);
/* The connection's peer address as text, made once when it opened ("-" when unknown);
 * for a connection the table does not track (c NULL), address a written into buf. */
const char *abx_conn_client(const abx_conn *c, const struct sockaddr *a, char buf[INET6_ADDRSTRLEN]);
void abx_conns_close(abx_conns *t, abx_conn *c);
/* Its header section is complete (the deadline stops) / its reply is done (it waits for
 * the next request: the deadline starts again). */
void abx_conns_request_begun(abx_conns *t, abx_conn *c);
void abx_conns_request_ended(abx_conns *t, abx_conn *c);
/* A request on it authenticated: it no longer counts against its address. */
void abx_conns_authenticated(abx_conns *t, abx_conn *c);
/* Handed to a WebSocket session: no deadline applies any more. */
void abx_conns_upgraded(abx_conns *t, abx_conn *c);

typedef struct abx_conns_stats {
    unsigned long long refused_address; /* refused at accept: the per-address cap */
    unsigned long long closed_slow;     /* shut down: headers not complete within the deadline */
    unsigned long long opened, closed;  /* connections seen */
    int unauthenticated;                /* open now, not yet authenticated */
} abx_conns_stats;
void abx_conns_stats_get(abx_conns *t, abx_conns_stats *out);

/* The whole connection layer of a server: the open-file limit raised to fit
 * limits.connections plus spare_fds (up to the hard limit), the table above, the worker
 * pool and the stream pumps (http/offload.h) in s->conn_table, s->workers, s->pumps, and
 * s->conn_metrics for /metrics. -1 with errbuf when out of memory or threads. */
typedef struct abx_server abx_server;
int abx_conn_layer_start(abx_server *s, int spare_fds, char *errbuf, size_t errlen);
/* After the daemons stopped: frees what abx_conn_layer_start made (also after a failure). */
void abx_conn_layer_free(abx_server *s);

#endif
