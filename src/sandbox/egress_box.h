/* egress_box.h — one confined process's egress proxy (issue 17): owned copies of its
 * allowlist and the resolver table, the proxy serving the listening socket the child made
 * inside its own network namespace (abx_confine.egress_port), and the sink each connection
 * is reported to. Started by the process manager right after the spawn, stopped when the
 * process is reaped (every connection ends with it), so a reload of the policy or the end
 * of the call that started the process changes nothing for it. The proxy's upstream
 * connections are made in abx's own namespace. */
#ifndef ABX_SANDBOX_EGRESS_BOX_H
#define ABX_SANDBOX_EGRESS_BOX_H

#include "sandbox/egress.h"
#include "sandbox/egress_tls.h"

#define ABX_EGRESS_PORT 3128 /* where the proxy listens inside each process's namespace (egress.proxy_port) */

typedef struct abx_egress_box abx_egress_box;

typedef struct abx_egress_sink {
    abx_egress_record_fn fn; /* may be NULL */
    void *ctx;               /* owned by the box once abx_egress_box_start is called */
    void (*ctx_free)(void *ctx);
} abx_egress_sink;

/* Serve listen_fd (owned from here, closed on failure) for a process allowed `allow`
 * with the resolver table res (may be NULL); both are copied. NULL with err on failure
 * (the sink's ctx is freed then too). */
abx_egress_box *abx_egress_box_start(int listen_fd, const abx_egress_allow *allow, const abx_egress_resolver *res,
                                     abx_egress_sink sink, char *err, size_t errlen);
/* What a box needs to intercept the hosts of inject rules (copied; ca borrowed: it must
 * outlive the box, see abx_egress_box_drain). NULL inj or no rules: every host tunneled. */
typedef struct abx_egress_box_tls {
    const abx_egress_injects *inj;
    abx_egress_ca *ca;
    const char *upstream_ca; /* egress.upstream_ca, or NULL */
} abx_egress_box_tls;
abx_egress_box *abx_egress_box_start_tls(int listen_fd, const abx_egress_allow *allow, const abx_egress_resolver *res,
                                         const abx_egress_box_tls *tls, abx_egress_sink sink, char *err,
                                         size_t errlen);
/* The same serving every socket of l (the proxy's, the resolver's and the transparent
 * listeners the child made; all owned from here). */
abx_egress_box *abx_egress_box_start_multi(const abx_egress_listeners *l, const abx_egress_allow *allow,
                                           const abx_egress_resolver *res, const abx_egress_box_tls *tls,
                                           abx_egress_sink sink, char *err, size_t errlen);
/* End every connection, wait for them (their records are made), free. NULL is a no-op. */
void abx_egress_box_stop(abx_egress_box *b);
/* The same from a thread of its own, waiting for it at most ms: a connection inside a
 * system DNS lookup cannot be interrupted, and the caller (the process manager, holding
 * its lock) must not wait for the resolver. Usually done well within ms. */
void abx_egress_box_stop_within(abx_egress_box *b, int ms);
/* Wait for every stop still under way (at shutdown, before their sinks go away). */
void abx_egress_box_drain(void);
/* Connections allowed and denied since start, over every box (for /metrics). */
void abx_egress_counts(uint64_t *allowed, uint64_t *denied);

#endif
