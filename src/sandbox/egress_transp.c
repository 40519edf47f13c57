/* egress_transp.c — transparent mode (egress.h): the resolver inside a process's
 * namespace and the listeners that catch connections made without the proxy.
 *
 * The resolver answers a name the allowlist admits (on any port) with a synthetic
 * loopback address of its own (127.100.0.0/16, kept for the proxy's life), a name it
 * does not admit with NXDOMAIN (recorded once per name as a denied `dns` connection),
 * and other record types of admitted names with no data. It decides on names only: the
 * connection is decided again, name and addresses, when it is made.
 *
 * A transparent connection is named by the TLS server name the client sends (peeked:
 * the ClientHello stays in the socket, so interception can still terminate it), or the
 * HTTP Host header, or else the name the synthetic address it reached was handed out
 * for; a server name or Host header that disagrees with that name is refused. */
#include "sandbox/egress_int.h"
#include "sandbox/egress_tls.h"
#include "core/util.h"
#include <arpa/inet.h>
#include <errno.h>
#include <netinet/in.h>
#include <poll.h>
#include <stdio.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#define DNS_MAX 1232 /* UDP answers stay within the EDNS-safe size */
#define SILENT_MS 500 /* a client that sends nothing first (ssh, smtp) */

/* ---- names handed out ---- */

/* the synthetic address (host order) of name, handed out now if new; 0 when full */
static uint32_t synth_addr(abx_egress *e, const char *name)
{
    uint32_t a = 0;
    pthread_mutex_lock(&e->mu);
    for (size_t i = 0; i < e->nsynth && !a; i++)
        if (strcmp(e->synth[i], name) == 0)
            a = ABX_EGRESS_SYNTH_NET + (uint32_t)i + 1;
    if (!a && e->nsynth < ABX_EGRESS_SYNTH_MAX) {
        if (!e->synth)
            e->synth = abx_calloc(ABX_EGRESS_SYNTH_MAX, sizeof *e->synth);
        if (e->synth && (e->synth[e->nsynth] = abx_strdup(name)))
            a = ABX_EGRESS_SYNTH_NET + (uint32_t)++e->nsynth;
    }
    pthread_mutex_unlock(&e->mu);
    return a;
}

/* the name a synthetic address was handed out for, into out ("" when none) */
static void synth_name(abx_egress *e, uint32_t addr, char out[ABX_EGRESS_HOST_MAX])
{
    out[0] = '\0';
    pthread_mutex_lock(&e->mu);
    if (addr > ABX_EGRESS_SYNTH_NET && addr - ABX_EGRESS_SYNTH_NET <= e->nsynth)
        snprintf(out, ABX_EGRESS_HOST_MAX, "%s", e->synth[addr - ABX_EGRESS_SYNTH_NET - 1]);
    pthread_mutex_unlock(&e->mu);
}

/* true the first time name is refused (so it is recorded once) */
static bool first_denial(abx_egress *e, const char *name)
{
    bool first = true;
    pthread_mutex_lock(&e->mu);
    for (size_t i = 0; i < e->ndenied && first; i++)
        first = strcmp(e->denied[i], name) != 0;
    if (first && e->ndenied < 256) {
        if (!e->denied)
            e->denied = abx_calloc(256, sizeof *e->denied);
        if (e->denied && (e->denied[e->ndenied] = abx_strdup(name)))
            e->ndenied++;
    }
    pthread_mutex_unlock(&e->mu);
    return first;
}

void abx__egress_names_free(abx_egress *e)
{
    for (size_t i = 0; i < e->nsynth; i++)
        abx_free(e->synth[i]);
    for (size_t i = 0; i < e->ndenied; i++)
        abx_free(e->denied[i]);
    abx_free(e->synth);
    abx_free(e->denied);
}

/* ---- the resolver ---- */

static size_t dns_respond(abx_egress *e, const unsigned char *q, size_t n, unsigned char *out, size_t cap)
{
    abx_dns_query dq;
    if (abx_dns_parse_query(q, n, &dq) != 0)
        return abx_dns_error(q, n, 1 /* FORMERR */, out, cap);
    if (dq.qclass != 1)
        return abx_dns_answer(q, &dq, 4 /* NOTIMP */, NULL, out, cap);
    if (!abx_egress_name_listed(e->cfg.allow, dq.name)) {
        if (first_denial(e, dq.name) && e->cfg.record) {
            abx_egress_record r = {"dns", dq.name, 53, "", false, "", "not in the allowlist", "", "", 0, 0, 0};
            e->cfg.record(&r, e->cfg.ctx);
        }
        return abx_dns_answer(q, &dq, 3 /* NXDOMAIN */, NULL, out, cap);
    }
    if (dq.qtype != 1 && dq.qtype != 255)
        return abx_dns_answer(q, &dq, 0, NULL, out, cap); /* AAAA and the rest: no data */
    uint32_t a = synth_addr(e, dq.name);
    if (!a)
        return abx_dns_answer(q, &dq, 2 /* SERVFAIL */, NULL, out, cap);
    unsigned char a4[4] = {(unsigned char)(a >> 24), (unsigned char)(a >> 16), (unsigned char)(a >> 8),
                           (unsigned char)a};
    return abx_dns_answer(q, &dq, 0, a4, out, cap);
}

void abx__egress_dns_udp(abx_egress *e, int fd)
{
    unsigned char q[DNS_MAX], out[DNS_MAX];
    struct sockaddr_storage from;
    socklen_t fl = sizeof from;
    ssize_t n = recvfrom(fd, q, sizeof q, MSG_DONTWAIT, (struct sockaddr *)&from, &fl);
    if (n <= 0)
        return;
    size_t m = dns_respond(e, q, (size_t)n, out, sizeof out);
    if (m)
        sendto(fd, out, m, MSG_DONTWAIT | MSG_NOSIGNAL, (struct sockaddr *)&from, fl);
}

/* DNS over TCP: length-prefixed queries until the client is done */
void abx__egress_serve_dns_tcp(conn *c)
{
    unsigned char out[DNS_MAX + 2];
    for (;;) {
        while (c->len < 2 || c->len < 2 + (size_t)(c->buf[0] << 8 | c->buf[1]))
            if (fill(c) <= 0)
                return;
        size_t n = (size_t)(c->buf[0] << 8 | c->buf[1]);
        size_t m = dns_respond(c->e, c->buf + 2, n, out + 2, sizeof out - 2);
        if (!m)
            return;
        out[0] = (unsigned char)(m >> 8);
        out[1] = (unsigned char)m;
        if (!send_all(c->cfd, out, m + 2))
            return;
        memmove(c->buf, c->buf + 2 + n, c->len - 2 - n);
        c->len -= 2 + n;
    }
}

/* ---- transparent connections ---- */

typedef enum { FIRST_TLS, FIRST_HTTP, FIRST_OTHER, FIRST_NONE, FIRST_GONE } first_kind;

/* Peek at the client's first bytes (left in the socket) until they tell what they are:
 * a ClientHello (sni filled, or "" without one), an HTTP head (r), other bytes, or none
 * within SILENT_MS when silent is true (a protocol where the server speaks first). */
static first_kind peek_first(conn *c, bool silent, char sni[ABX_EGRESS_HOST_MAX], abx_http_req *r, bool *bad)
{
    int64_t t0 = abx_now_ms();
    *bad = false;
    for (;;) {
        ssize_t n = recv(c->cfd, c->buf, BUF_CAP, MSG_PEEK | MSG_DONTWAIT);
        if (n == 0 || (n < 0 && errno != EAGAIN && errno != EINTR))
            return FIRST_GONE;
        if (n > 0) {
            c->len = (size_t)n;
            abx_sni_result s = abx_egress_parse_sni(c->buf, c->len, sni);
            if (s == ABX_SNI_FOUND || s == ABX_SNI_NONE || s == ABX_SNI_BAD) {
                if (s != ABX_SNI_FOUND)
                    sni[0] = '\0';
                *bad = s == ABX_SNI_BAD;
                return FIRST_TLS;
            }
            if (s == ABX_SNI_NOT_TLS) {
                int h = abx_egress_parse_http((const char *)c->buf, c->len, r);
                if (h > 0)
                    return FIRST_HTTP;
                if (h == ABX_EG_BAD)
                    return FIRST_OTHER;
            }
            if (c->len == BUF_CAP)
                return FIRST_OTHER;
        }
        int64_t waited = abx_now_ms() - t0;
        if (n < 0 && silent && waited >= SILENT_MS)
            return FIRST_NONE;
        if (waited >= c->e->cfg.idle_ms)
            return FIRST_GONE;
        /* part of a message: poll would say "readable" at once, so wait a little */
        int r2 = n > 0 ? wait_fd(c, c->e->stopfd, POLLIN, 10) : wait_fd(c, c->cfd, POLLIN, silent ? 50 : 1000);
        if (r2 < 0 || (n > 0 && r2 != 0))
            return FIRST_GONE;
    }
}

/* take the peeked bytes out of the socket (they stay in buf) */
static bool take_peeked(conn *c)
{
    size_t got = 0;
    while (got < c->len) {
        ssize_t n = recv(c->cfd, c->buf + got, c->len - got, MSG_WAITALL);
        if (n < 0 && errno == EINTR)
            continue;
        if (n <= 0)
            return false;
        got += (size_t)n;
    }
    return true;
}

/* decide on c->host:c->port, connect, and tunnel (or intercept, for TLS) */
static void transparent_tunnel(conn *c, bool tls)
{
    abx_egress_decision d;
    if (!decide(c, &d) || !dial(c, &d))
        return;
    if (tls && abx_egress_tls_wants(c->e->cfg.tls, c->host)) {
        c->len = 0; /* the ClientHello is still in the socket, for the TLS terminator */
        intercepted(c, true);
        return;
    }
    if (!take_peeked(c))
        return;
    if (forward_raw(c))
        relay(c, false);
    emit(c, true, NULL);
}

void abx__egress_serve_transparent(conn *c)
{
    struct sockaddr_storage ss;
    socklen_t sl = sizeof ss;
    if (getsockname(c->cfd, (struct sockaddr *)&ss, &sl) != 0 || ss.ss_family != AF_INET)
        return;
    const struct sockaddr_in *sin = (const struct sockaddr_in *)&ss;
    int port = ntohs(sin->sin_port);
    char mapped[ABX_EGRESS_HOST_MAX], sni[ABX_EGRESS_HOST_MAX];
    synth_name(c->e, ntohl(sin->sin_addr.s_addr), mapped);
    abx_http_req r;
    bool bad;
    first_kind k = peek_first(c, mapped[0] != '\0', sni, &r, &bad);
    if (k == FIRST_GONE)
        return;
    const char *named = k == FIRST_TLS ? sni : k == FIRST_HTTP ? r.host : "";
    begin(c, "transparent", named[0] ? named : mapped[0] ? mapped : "?", port);
    const char *why = bad                                          ? "malformed TLS ClientHello"
                      : named[0] && mapped[0] && strcmp(named, mapped) != 0 ? "the name sent differs from the name looked up"
                      : !named[0] && !mapped[0]                    ? "no server name and no looked-up name"
                                                                   : NULL;
    if (why) {
        emit(c, false, why);
        if (k == FIRST_HTTP)
            http_deny(c, c->host);
        return;
    }
    if (k != FIRST_HTTP) {
        transparent_tunnel(c, k == FIRST_TLS);
        return;
    }
    if (!take_peeked(c))
        return;
    r.port = port; /* where the client connected, whatever its Host header says */
    serve_http(c, &r);
}
