/* tickets.c — short-lived, single-use WebSocket tickets (terminal.ticket). A browser's
 * WebSocket API cannot send Authorization, so a page that holds a token asks for a
 * ticket and puts it in the upgrade's query (?ticket=...). A ticket is 32 random bytes
 * (hex), kept here only as its SHA-256, bound to the principal and one terminal, valid
 * for one upgrade within its lifetime; step 3 redeems it (dispatch.c) and the ledger
 * records only its digest.
 *
 * The same table holds port-origin sessions (port_origin.c): a ports.ticket redeemed on
 * a port's own origin becomes a session (a cookie) for that port, used many times until
 * it expires. A session never redeems as a ticket nor a ticket as a session, and
 * sessions take at most SESSIONS_MAX slots so they cannot crowd tickets out. */
#include "pipeline/pipeline.h"
#include <string.h>

#define TICKETS_MAX 1024
#define SESSIONS_MAX 256

typedef struct ticket {
    char hash[65];              /* SHA-256 hex of the ticket; "" = free slot */
    char *principal;            /* owned */
    int target;                 /* the terminal it opens */
    int64_t expires_ms;         /* CLOCK_MONOTONIC */
    bool session;               /* many uses until it expires (port-origin cookie) */
} ticket;

struct abx_tickets {
    pthread_mutex_t mu;
    ticket v[TICKETS_MAX];
};

abx_tickets *abx_tickets_new(void)
{
    abx_tickets *t = abx_calloc(1, sizeof *t);
    if (t)
        pthread_mutex_init(&t->mu, NULL);
    return t;
}

static void clear(ticket *x)
{
    abx_free(x->principal);
    memset(x, 0, sizeof *x);
}

void abx_tickets_free(abx_tickets *t)
{
    if (!t)
        return;
    for (size_t i = 0; i < TICKETS_MAX; i++)
        clear(&t->v[i]);
    pthread_mutex_destroy(&t->mu);
    abx_free(t);
}

static int issue(abx_tickets *t, const char *principal, int target, int64_t ttl_ms, bool session, char out[65])
{
    unsigned char rnd[32];
    if (!t || !principal || abx_random(rnd, sizeof rnd) != 0)
        return -1;
    abx_hex(rnd, sizeof rnd, out);
    int64_t now = abx_now_ms();
    pthread_mutex_lock(&t->mu);
    ticket *slot = NULL;
    size_t sessions = 0;
    for (size_t i = 0; i < TICKETS_MAX; i++) {
        ticket *x = &t->v[i];
        if (x->hash[0] && x->expires_ms <= now)
            clear(x);
        sessions += x->hash[0] && x->session;
        if (!x->hash[0] && !slot)
            slot = x;
    }
    int rc = -1;
    if (slot && !(session && sessions >= SESSIONS_MAX) && (slot->principal = abx_strdup(principal)) != NULL) {
        abx_sha256_hex(out, 64, slot->hash);
        slot->target = target;
        slot->expires_ms = now + ttl_ms;
        slot->session = session;
        rc = 0;
    }
    pthread_mutex_unlock(&t->mu);
    if (rc != 0)
        memset(out, 0, 65);
    return rc;
}

int abx_tickets_issue(abx_tickets *t, const char *principal, int target, int64_t ttl_ms, char out[65])
{
    return issue(t, principal, target, ttl_ms, false, out);
}

int abx_tickets_session(abx_tickets *t, const char *principal, int target, int64_t ttl_ms, char out[65])
{
    return issue(t, principal, target, ttl_ms, true, out);
}

char *abx_tickets_session_check(abx_tickets *t, const char *tk, size_t len, int target)
{
    if (!t || len != 64)
        return NULL;
    char h[65];
    abx_sha256_hex(tk, len, h);
    int64_t now = abx_now_ms();
    char *principal = NULL;
    pthread_mutex_lock(&t->mu);
    for (size_t i = 0; i < TICKETS_MAX; i++) {
        ticket *x = &t->v[i];
        if (x->hash[0] && x->session && abx_ct_equal(x->hash, h, 64)) {
            if (x->expires_ms > now && x->target == target)
                principal = abx_strdup(x->principal);
            else if (x->expires_ms <= now)
                clear(x);
            break;
        }
    }
    pthread_mutex_unlock(&t->mu);
    return principal;
}

char *abx_tickets_redeem(abx_tickets *t, const char *tk, size_t len, int *target)
{
    if (!t || len != 64)
        return NULL;
    char h[65];
    abx_sha256_hex(tk, len, h);
    int64_t now = abx_now_ms();
    char *principal = NULL;
    pthread_mutex_lock(&t->mu);
    for (size_t i = 0; i < TICKETS_MAX; i++) {
        ticket *x = &t->v[i];
        if (x->hash[0] && !x->session && abx_ct_equal(x->hash, h, 64)) {
            if (x->expires_ms > now) {
                principal = x->principal; /* single use: the slot is emptied either way */
                x->principal = NULL;
                *target = x->target;
            }
            clear(x);
            break;
        }
    }
    pthread_mutex_unlock(&t->mu);
    return principal;
}
