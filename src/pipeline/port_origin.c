/* port_origin.c — step 3 on a port's own origin (docs/ports.md). A browser cannot send
 * Authorization, and a server the agent started must not share an origin with abx's
 * console and API (its scripts could then read their storage and call abx as the user).
 * So each port gets an origin of its own, Host p<port>.<name> (the listener rewrote the
 * path under /ports/<port>/, where only ports.proxy answers), and a browser signs in
 * there with a ticket from ports.ticket:
 *
 *   GET http://p8000.localhost:8080/some/page?abx_ticket=T
 *     → the ticket is redeemed (single use, limits.ticket_ttl, this port only)
 *     → 303 to /some/page (the ticket taken out of the query), Set-Cookie abx_port=S
 *       (HttpOnly, SameSite=Lax, host-only, Secure over TLS), S a session for this port
 *   later requests (pages, fetches, WebSocket upgrades) carry the cookie → the principal
 *
 * The session is that principal's for that port only; every request still goes through
 * steps 4–10 (ports.proxy mounted, the port in the statement's ports scope, the ledger).
 * The relay drops the abx_port cookie before the server sees the request. */
#include "pipeline/pipeline.h"
#include <stdio.h>
#include <string.h>

#define PORT_SESSION_MS (12LL * 3600 * 1000) /* a working day; abx keeps sessions in memory only */

typedef struct qticket {
    char value[80];
    size_t len;
    bool found;
} qticket;

static int find_qticket(void *ud, const char *name, size_t nlen, const char *val, size_t vlen)
{
    qticket *q = ud;
    if (nlen == 10 && memcmp(name, "abx_ticket", 10) == 0) {
        q->len = vlen < sizeof q->value ? vlen : sizeof q->value - 1;
        memcpy(q->value, val, q->len);
        q->value[q->len] = '\0';
        q->found = true;
        return 1;
    }
    return 0;
}

/* The browser's target without the abx_ticket parameter: where the 303 sends it. */
static char *target_without_ticket(abx_request *r)
{
    const char *t = r->origin_target;
    size_t n = r->origin_target_len;
    const char *q = memchr(t, '?', n);
    size_t pl = q ? (size_t)(q - t) : n;
    abx_buf b;
    abx_buf_init(&b, 0);
    abx_buf_append(&b, t, pl);
    bool first = true;
    for (const char *p = q ? q + 1 : NULL, *end = t + n; p && p < end;) {
        const char *amp = memchr(p, '&', (size_t)(end - p));
        size_t pn = amp ? (size_t)(amp - p) : (size_t)(end - p);
        if (pn && !(pn >= 10 && memcmp(p, "abx_ticket", 10) == 0 && (pn == 10 || p[10] == '='))) {
            abx_buf_putc(&b, first ? '?' : '&');
            abx_buf_append(&b, p, pn);
            first = false;
        }
        p = amp ? amp + 1 : end;
    }
    abx_buf_putc(&b, '\0');
    char *out = b.failed ? NULL : abx_arena_strndup(r->arena, b.data, b.len - 1);
    abx_buf_release(&b);
    return out;
}

static abx_step fail_auth(abx_request *r, const char *fp, int64_t now, const char *msg)
{
    abx_auth_failed(r->server->limiter, fp, r->client, now);
    abx_fail(r, ABX_E_AUTH_INVALID_TOKEN, "%s", msg);
    return ABX_STEP_FAIL;
}

/* A ticket in the query: redeemed for a session cookie and a 303 to the same page. */
static abx_step sign_in(abx_request *r, const qticket *q, int64_t now)
{
    char fp[65];
    abx_sha256_hex(q->value, q->len, fp);
    fp[16] = '\0';
    int target = 0;
    char *principal = abx_tickets_redeem(r->server->tickets, q->value, q->len, &target);
    if (principal && abx_policy_principal_expired(r->policy, abx_policy_principal_slot(r->policy, principal),
                                                  abx_wall_ms()))
        target = 0; /* the token it was made with has expired */
    if (!principal || target != -r->port_origin) {
        abx_free(principal);
        return fail_auth(r, fp, now, "the ticket is unknown, already used, expired or for another port");
    }
    char session[65];
    int rc = abx_tickets_session(r->server->tickets, principal, -r->port_origin, PORT_SESSION_MS, session);
    abx_free(principal);
    char *loc = rc == 0 ? target_without_ticket(r) : NULL;
    if (!loc) {
        abx_fail(r, ABX_E_LIMIT_CONCURRENCY, "too many port sessions open; retry later");
        return ABX_STEP_FAIL;
    }
    char cookie[200];
    snprintf(cookie, sizeof cookie, "%s=%s; Path=/; Max-Age=%lld; HttpOnly; SameSite=Lax%s", ABX_PORT_COOKIE,
             session, PORT_SESSION_MS / 1000, r->server->cfg.tls_cert ? "; Secure" : "");
    explicit_bzero(session, sizeof session);
    r->reply.status = 303;
    r->reply.protocol_body = true;
    abx_reply_header(&r->reply, "Location", loc);
    abx_reply_header(&r->reply, "Set-Cookie", cookie);
    explicit_bzero(cookie, sizeof cookie);
    abx_auth_succeeded(r->server->limiter, r->client, now);
    return ABX_STEP_DONE;
}

abx_step abx_port_origin_auth(abx_request *r, int64_t now)
{
    qticket q = {.len = 0};
    if (r->query)
        abx_query_each(r->query, r->query_len, find_qticket, &q);
    if (q.found)
        return sign_in(r, &q, now);
    size_t len = 0;
    const char *s = r->cookie ? abx_cookie_get(r->cookie, ABX_PORT_COOKIE, &len) : NULL;
    if (!s) {
        abx_fail(r, ABX_E_AUTH_REQUIRED,
                 "open port %d through a ports.ticket URL (?abx_ticket=...), or send Authorization: Bearer",
                 r->port_origin);
        return ABX_STEP_FAIL;
    }
    char fp[65];
    abx_sha256_hex(s, len, fp);
    fp[16] = '\0';
    int wait = abx_auth_limited(r->server->limiter, fp, r->client, now);
    if (wait > 0) {
        r->reply.retry_after = wait;
        abx_fail(r, ABX_E_AUTH_RATE_LIMITED, "too many failed attempts; retry in %d s", wait);
        return ABX_STEP_FAIL;
    }
    char *principal = abx_tickets_session_check(r->server->tickets, s, len, -r->port_origin);
    r->slot = principal ? abx_policy_principal_slot(r->policy, principal) : -1;
    abx_free(principal);
    if (abx_policy_principal_expired(r->policy, r->slot, abx_wall_ms()))
        r->slot = -1; /* the session stands for the token: it ends when the token does */
    if (r->slot < 0)
        return fail_auth(r, fp, now, "the port session is unknown or expired; open a new ports.ticket URL");
    abx_auth_succeeded(r->server->limiter, r->client, now);
    return ABX_STEP_NEXT;
}
