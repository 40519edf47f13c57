/* mcp_dyn.c — notifications/tools/list_changed for dynamic tools (tools.define,
 * tools.delete, a promotion, an expiry). A conversation remembers what its principal saw
 * of the overlay (a digest of the visible tools' hashes); after a tools/call, when the
 * overlay changed and that digest differs, the answer carries the notification first
 * (Streamable HTTP: in an SSE answer when the client accepts one; stdio: the line
 * before). Other principals' sessions are not told about tools they cannot see. */
#include "doors/mcp_int.h"
#include <stdlib.h>
#include <string.h>

/* The digest of what the principal at slot sees ("" when nothing). */
static void sig_of(abx_server *s, const abx_policy *p, int slot, char out[65])
{
    out[0] = '\0';
    json_t *seen = abx__dyn_entries(s, p, slot, ABX_DOC_MCP_TOOLS, 0);
    if (!seen)
        return;
    char *text = json_dumps(seen, JSON_COMPACT);
    json_decref(seen);
    if (text)
        abx_sha256_hex(text, strlen(text), out);
    free(text);
}

void abx__mcp_dyn_seen(abx_server *s, abx_mcp_conv *c, const abx_policy *p, int slot)
{
    char sig[65];
    atomic_store(&c->dyn_gen, abx_overlay_gen(s->overlay));
    sig_of(s, p, slot, sig);
    pthread_mutex_lock(&s->mcp->mu);
    memcpy(c->dyn_sig, sig, sizeof sig);
    pthread_mutex_unlock(&s->mcp->mu);
}

json_t *abx__mcp_dyn_changed(abx_server *s, abx_mcp_conv *c)
{
    uint64_t gen = abx_overlay_gen(s->overlay);
    if (atomic_exchange(&c->dyn_gen, gen) == gen)
        return NULL;
    abx_policy *p = abx_server_snapshot(s);
    int slot = abx_policy_principal_slot(p, c->principal);
    char sig[65];
    sig_of(s, p, slot, sig);
    abx_policy_unref(p);
    pthread_mutex_lock(&s->mcp->mu);
    bool changed = strcmp(sig, c->dyn_sig) != 0;
    memcpy(c->dyn_sig, sig, sizeof sig);
    pthread_mutex_unlock(&s->mcp->mu);
    return changed ? json_pack("{s:s, s:s}", "jsonrpc", "2.0", "method", "notifications/tools/list_changed") : NULL;
}
