/* dyn_overlay.c — where the pipeline and the doors consult the overlay of dynamic tools
 * (core/dyndef.h) after the frozen registry: step 4 resolves dyn.<name> for the caller,
 * discovery's documents gain the caller's dyn.* entries, the LLM formats and MCP offer
 * them as dyn__<name>. A dyn.* op is mounted exactly where tools.call is: the statement
 * that lets a caller call tools.call admits it (its scopes, limits and approvals), and
 * the overlay decides whether the caller may see the tool at all (author or promoted).
 * An overlay id never shadows a registered op: dyn is a reserved namespace. */
#include "pipeline/pipeline.h"
#include "discovery/discovery.h"
#include <stdio.h>
#include <string.h>

abx_overlay *abx_ctx_overlay(abx_ctx *ctx) { return ctx->req->server->overlay; }

/* The overlay's view of principal `slot` under policy p. */
static void who_of(const abx_policy *p, int slot, abx_dyn_who *who)
{
    *who = (abx_dyn_who){0};
    if (slot < 0 || slot >= (int)p->n_principals)
        return; /* anonymous: sees nothing */
    const abx_principal *pr = &p->principals[slot];
    *who = (abx_dyn_who){.principal = pr->id, .roles = pr->roles, .n_roles = pr->n_roles};
}

const char *abx_ctx_session(const abx_ctx *ctx) { return ctx->req->session; }

void abx_ctx_dyn_who(const abx_ctx *ctx, abx_dyn_who *who)
{
    who_of(ctx->req->policy, ctx->req->slot, who);
}

/* tools.call's index when it is mounted for slot, else -1. */
static long call_index(const abx_server *s, const abx_policy *p, int slot)
{
    const abx_op *op = abx_registry_get(s->reg, "tools.call");
    if (!op)
        return -1;
    size_t i = abx_registry_index_of(s->reg, op);
    return abx_policy_mounted(p, slot, i) ? (long)i : -1;
}

bool abx__dyn_resolve(abx_request *r, const char *asked)
{
    abx_server *s = r->server;
    if (!asked || strncmp(asked, "dyn.", 4) != 0 || !abx_overlay_any(s->overlay))
        return false;
    long ci = call_index(s, r->policy, r->slot);
    if (ci < 0)
        return false;
    abx_dyn_who who;
    who_of(r->policy, r->slot, &who);
    abx_dyn_entry *e = abx_overlay_by_name(s->overlay, asked, &who);
    if (!e)
        return false;
    r->op = &e->op;
    r->op_index = (size_t)ci;
    return true;
}

void abx__dyn_bind_hash(abx_request *r)
{
    if (!r->op || strncmp(r->op->id, "dyn.", 4) != 0 || abx_registry_get(r->server->reg, r->op->id))
        return;
    const abx_dyn_entry *e = r->op->def->udata;
    const abx_op *call = abx_registry_get(r->server->reg, "tools.call");
    json_t *args = call ? json_pack("{s:s, s:O}", "hash", e->def->hash, "args", r->args) : NULL;
    if (!args)
        return;
    json_decref(r->args);
    r->args = args;
    r->op = call;
    r->op_index = abx_registry_index_of(r->server->reg, call);
}

typedef struct collect {
    json_t *(*entry)(const abx_op *op, abx_tool_format f);
    abx_tool_format f;
    json_t *out;
} collect;

static void collect_one(void *ud, abx_dyn_entry *e)
{
    collect *c = ud;
    json_t *j = c->entry(&e->op, c->f);
    if (!j)
        return;
    json_t *meta = json_object_get(j, "_meta");
    if (meta) /* MCP: the stable path for clients that do not refresh their list */
        json_object_set_new(meta, "abx/hash", json_string(e->def->hash));
    json_array_append_new(c->out, j);
}

static json_t *catalog_entry(const abx_op *op, abx_tool_format f)
{
    (void)f;
    return abx_catalog_entry(op);
}

static json_t *openapi_entry(const abx_op *op, abx_tool_format f)
{
    (void)f;
    return abx_openapi_rpc_path(op);
}

static json_t *mcp_entry(const abx_op *op, abx_tool_format f)
{
    (void)f;
    return abx_mcp_tool_entry(op);
}

/* The caller's visible dynamic tools through entry (owned array), or NULL when none. */
json_t *abx__dyn_entries(abx_server *s, const abx_policy *p, int slot, int kind, abx_tool_format f)
{
    if (!abx_overlay_any(s->overlay) || call_index(s, p, slot) < 0)
        return NULL;
    abx_dyn_who who;
    who_of(p, slot, &who);
    collect c = {.entry = kind == ABX_DOC_CATALOG ? catalog_entry
                          : kind == ABX_DOC_OPENAPI ? openapi_entry
                          : kind == ABX_DOC_MCP_TOOLS ? mcp_entry
                                                      : abx_tool_declaration,
                 .f = f, .out = json_array()};
    abx_overlay_each(s->overlay, &who, collect_one, &c);
    if (!json_array_size(c.out)) {
        json_decref(c.out);
        return NULL;
    }
    return c.out;
}

/* The principal's entries of kind as JSON text (in the arena), serialized once per change
 * of the overlay (the memo); NULL when none. */
static const char *entries_text(abx_request *q, abx_doc kind, size_t *ml)
{
    abx_overlay *ov = q->server->overlay;
    char key[200];
    snprintf(key, sizeof key, "%d %p %.150s", (int)kind, (const void *)q->policy, q->policy->principals[q->slot].id);
    const char *more = abx_overlay_memo_get(ov, key, q->arena, ml);
    if (!more) {
        uint64_t gen = abx_overlay_gen(ov);
        json_t *add = abx__dyn_entries(q->server, q->policy, q->slot, kind, 0);
        if (kind == ABX_DOC_OPENAPI && add) { /* one object of path items */
            json_t *paths = json_object();
            size_t i;
            json_t *v;
            json_array_foreach(add, i, v) json_object_update(paths, v);
            json_decref(add);
            add = paths;
        }
        char *dumped = add ? json_dumps(add, JSON_COMPACT | JSON_SORT_KEYS) : NULL;
        json_decref(add);
        const char *t = dumped ? dumped : "[]";
        *ml = strlen(t);
        abx_overlay_memo_put(ov, key, t, *ml, gen);
        more = abx_arena_strdup(q->arena, t);
        free(dumped);
    }
    return more && *ml > 2 ? more : NULL;
}

/* The document text with the caller's dyn.* ops spliced in (a copy in the arena), or the
 * cached text itself when there are none. The cached text has sorted keys: the catalog's
 * "ops" ends at the last `],"sdk_version":`; OpenAPI's paths begin at
 * `"openapi":"3.1.0","paths":{`. */
const char *abx__dyn_document(abx_request *q, abx_doc kind, const char *text, size_t *len)
{
    if (!text || (kind != ABX_DOC_CATALOG && kind != ABX_DOC_OPENAPI) || !abx_overlay_any(q->server->overlay) ||
        q->slot < 0 || q->slot >= (int)q->policy->n_principals)
        return text;
    size_t ml = 0;
    const char *more = entries_text(q, kind, &ml);
    if (!more)
        return text;
    const char *at = NULL;
    bool first; /* insert before what is there (OpenAPI) or after it (catalog) */
    if (kind == ABX_DOC_CATALOG) {
        static const char mark[] = "],\"sdk_version\":";
        for (const char *p = text; (p = memmem(p, *len - (size_t)(p - text), mark, sizeof mark - 1)); p++)
            at = p;
        first = false;
    } else {
        static const char mark[] = "\"openapi\":\"3.1.0\",\"paths\":{";
        at = memmem(text, *len, mark, sizeof mark - 1);
        at = at ? at + sizeof mark - 1 : NULL;
        first = true;
    }
    char *out = at ? abx_arena_alloc(q->arena, *len + ml + 1) : NULL;
    if (!out)
        return text;
    size_t head = (size_t)(at - text), o = head;
    memcpy(out, text, head);
    if (!first && head > 0 && text[head - 1] != '[')
        out[o++] = ',';
    memcpy(out + o, more + 1, ml - 2); /* the entries without their brackets */
    o += ml - 2;
    if (first && text[head] != '}')
        out[o++] = ',';
    memcpy(out + o, at, *len - head);
    o += *len - head;
    out[o] = '\0';
    *len = o;
    return out;
}

const abx_op *abx__dyn_visible_op(abx_server *s, const abx_policy *p, int slot, const char *id)
{
    if (!id || strncmp(id, "dyn.", 4) != 0 || !abx_overlay_any(s->overlay) || call_index(s, p, slot) < 0)
        return NULL;
    abx_dyn_who who;
    who_of(p, slot, &who);
    abx_dyn_entry *e = abx_overlay_by_name(s->overlay, id, &who);
    return e ? &e->op : NULL;
}

/* A provider's or MCP's tool name dyn__<name> → the caller's dyn op, or NULL. */
const abx_op *abx__dyn_tool_op(abx_server *s, const char *principal, const char *tool)
{
    if (!principal || !tool || strncmp(tool, "dyn__", 5) != 0 || !abx_overlay_any(s->overlay))
        return NULL;
    abx_policy *p = abx_server_snapshot(s);
    int slot = abx_policy_principal_slot(p, principal);
    const abx_op *op = NULL;
    if (slot >= 0 && call_index(s, p, slot) >= 0) {
        abx_dyn_who who;
        who_of(p, slot, &who);
        abx_dyn_entry *e = abx_overlay_by_name(s->overlay, tool + 5, &who);
        op = e ? &e->op : NULL;
    }
    abx_policy_unref(p);
    return op;
}
