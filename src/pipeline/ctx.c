/* ctx.c — the accessors of ctx.h: what a handler may ask of its context. Each reads
 * the request or its server here, inside the pipeline, so handlers never see either. */
#include "pipeline/pipeline.h"
#include <errno.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

static abx_request *req_of(const abx_ctx *ctx) { return ctx->req; }
static abx_server *server_of(const abx_ctx *ctx) { return ctx->req->server; }

abx_arena *abx_ctx_arena(abx_ctx *ctx) { return req_of(ctx)->arena; }
const abx_op *abx_ctx_op(const abx_ctx *ctx) { return req_of(ctx)->op; }
static void ctx_confirm_all(abx_request *r);

/* The whole decision goes to handlers that read its paths as text: confirmed first. */
const abx_decision *abx_ctx_decision(const abx_ctx *ctx)
{
    ctx_confirm_all(req_of(ctx));
    return &req_of(ctx)->decision;
}

int abx_ctx_fs_view(const abx_ctx *ctx, abx_fs_view *v)
{
    ctx_confirm_all(req_of(ctx));
    const abx_request *q = req_of(ctx);
    return abx_policy_fs_view(q->policy, q->slot, q->op, &q->decision, v);
}

bool abx_ctx_ident_denied(abx_ctx *ctx, const struct stat *st)
{
    abx_request *r = req_of(ctx);
    return r->policy->n_idents && abx_policy_ident_denied(r->policy, r->slot, r->op, &r->decision, st);
}

int abx_ctx_fd_check(abx_ctx *ctx, int fd, int dirfd)
{
    abx_request *r = req_of(ctx);
    return abx_policy_fd_check(r->policy, r->slot, r->op, &r->decision, fd, dirfd);
}

bool abx_ctx_has_idents(const abx_ctx *ctx) { return req_of(ctx)->policy->n_idents != 0; }

bool abx_ctx_path_hidden(const abx_ctx *ctx, const char *canonical)
{
    const abx_request *q = req_of(ctx);
    return abx_policy_path_hidden(q->policy, q->slot, q->op, canonical);
}

bool abx_ctx_move_pinned(const abx_ctx *ctx, const char *canonical)
{
    return abx_policy_move_pinned(req_of(ctx)->policy, canonical);
}

const char *const *abx_ctx_url_scope(const abx_ctx *ctx, size_t *n)
{
    const abx_request *q = req_of(ctx);
    return abx_policy_url_scope(q->policy, &q->decision, n);
}

abx_err abx_ctx_screen(abx_ctx *ctx, json_t *result, char *why, size_t whylen)
{
    abx_request *q = req_of(ctx);
    for (int h = 0; h < q->server->n_screens; h++) {
        abx_err e = q->server->screens[h].fn(q->server->screens[h].udata, abx_policy_principal_id(q->policy, q->slot),
                                             q->op->id, result, why, whylen);
        if (e != ABX_OK)
            return e > 0 && e < ABX_E__COUNT ? e : ABX_E_POLICY_DENIED;
    }
    return ABX_OK;
}

void abx_ctx_decide(const abx_ctx *ctx, const json_t *args, abx_decision *d)
{
    const abx_request *q = req_of(ctx);
    abx_decide(q->policy, q->slot, q->op, q->op_index, args, d, NULL);
}

bool abx_ctx_has_role(const abx_ctx *ctx, const char *role)
{
    const abx_request *q = req_of(ctx);
    if (q->slot < 0 || q->slot >= (int)q->policy->n_principals)
        return false; /* anonymous holds no role */
    const abx_principal *pr = &q->policy->principals[q->slot];
    for (size_t i = 0; i < pr->n_roles; i++)
        if (strcmp(pr->roles[i], role) == 0)
            return true;
    return false;
}

bool abx_ctx_ws_requested(const abx_ctx *ctx) { return req_of(ctx)->ws_upgrade && req_of(ctx)->ws_key; }
int abx_ctx_ticket_issue(abx_ctx *ctx, int target, char out[65], int64_t *ttl_ms)
{
    *ttl_ms = server_of(ctx)->cfg.ticket_ttl_ms;
    return abx_tickets_issue(server_of(ctx)->tickets, abx_ctx_principal(ctx), target, *ttl_ms, out);
}
int abx_ctx_ticket_target(const abx_ctx *ctx) { return req_of(ctx)->ticket_target; }
abx_err abx_reply_err(const abx_reply *r) { return r->err; }
json_t *abx_reply_body(abx_reply *r) { return r->body; }

bool abx_ctx_reply_text_ok(const abx_ctx *ctx)
{
    const abx_request *r = req_of(ctx);
    return (r->door == ABX_DOOR_HTTP || r->door == ABX_DOOR_RPC) && !r->trusted_principal && !r->approved &&
           !r->idem_key && !r->batch_group && !r->e2b_listener && !r->sandboxd_listener && !r->terminal_listener &&
           r->header_fn;
}

void abx_reply_json_text(abx_reply *r, char *text, size_t len)
{
    json_decref(r->body);
    r->body = NULL;
    abx_free(r->raw);
    r->raw = text;
    r->raw_len = len;
    r->content_type = "application/json";
}

abx_procs *abx_ctx_procs(abx_ctx *ctx) { return server_of(ctx)->procs; }
abx_ledger *abx_ctx_ledger(abx_ctx *ctx) { return server_of(ctx)->ledger; }
uint64_t abx_ctx_ledger_group(const abx_ctx *ctx) { return req_of(ctx)->group_id; }

void abx_ctx_server_facts(const abx_ctx *ctx, abx_server_facts *out)
{
    abx_server *s = server_of(ctx);
    *out = (abx_server_facts){
        .workspace = s->workspace,
        .started_ms = s->started_ms,
        .listen_host = s->cfg.listen_host,
        .port = s->port,
        .terminal_port = s->terminal_port,
        .tls = s->cfg.tls_cert != NULL,
        .request_max_bytes = s->cfg.request_max_bytes,
        .upload_max_bytes = s->cfg.upload_max_bytes,
        .kernel_idle_ms = s->cfg.kernel_idle_ms,
        .connections = s->cfg.connections,
        .open_connections = atomic_load(&s->conns),
        .system_env = s->cfg.system_env,
        .n_system_env = s->cfg.n_system_env,
        .dynamic_tool_ttl_ms = s->cfg.dynamic_tool_ttl_ms,
        .browser_idle_ms = s->cfg.browser_idle_ms,
        .browsers = s->cfg.browsers,
    };
}

const char *abx_ctx_document(abx_ctx *ctx, abx_doc kind, size_t *len)
{
    abx_request *q = req_of(ctx);
    const char *text = abx_discovery_text(kind, q->server->reg, q->policy, q->slot, len);
    return abx__dyn_document(q, kind, text, len);
}

const abx_op *abx_ctx_visible_op(const abx_ctx *ctx, const char *id)
{
    const abx_request *q = req_of(ctx);
    const abx_op *op = abx_registry_resolve(q->server->reg, id);
    if (!op)
        return abx__dyn_visible_op(q->server, q->policy, q->slot, id); /* the overlay, after the registry */
    if (!abx_policy_mounted(q->policy, q->slot, abx_registry_index_of(q->server->reg, op)))
        return NULL;
    return op;
}

json_t *abx_ctx_visible_namespaces(const abx_ctx *ctx)
{
    const abx_request *q = req_of(ctx);
    const abx_registry *reg = q->server->reg;
    json_t *ns = json_array();
    char last[ABX_ID_MAX] = "";
    for (size_t i = 0; i < abx_registry_count(reg); i++) {
        if (!abx_policy_mounted(q->policy, q->slot, i))
            continue;
        const char *id = abx_registry_at(reg, i)->id;
        size_t n = strcspn(id, ".");
        if (strlen(last) == n && strncmp(last, id, n) == 0)
            continue;
        snprintf(last, sizeof last, "%.*s", (int)n, id);
        json_array_append_new(ns, json_string(last));
    }
    return ns;
}

char *abx_ctx_metrics_text(abx_ctx *ctx, size_t *len)
{
    abx_server *s = server_of(ctx);
    abx_conn_metrics cm = {.open = atomic_load(&s->conns)};
    if (s->conn_metrics)
        s->conn_metrics(s, &cm);
    return abx_metrics_render(s->metrics, s->reg, &cm, len);
}

json_t *abx_ctx_explain(const abx_ctx *ctx, const char *principal, const char *op, const json_t *args)
{
    const abx_request *q = req_of(ctx);
    if (!principal)
        principal = abx_policy_principal_id(q->policy, q->slot);
    json_t *t = abx_explain(q->policy, q->server->reg, principal, op, args);
    json_t *conf = json_object_get(t, "confinement");
    if (conf)
        json_object_set_new(conf, "tier", json_string(abx_sandbox_tier_name(
                                              q->server->procs ? abx_procs_sandbox(q->server->procs) : NULL)));
    return t;
}

json_t *abx_ctx_approvals_list(abx_ctx *ctx, bool approver)
{
    return abx_approvals_list(server_of(ctx), abx_ctx_principal(ctx), approver);
}

abx_approvals_watch *abx_ctx_approvals_watch(abx_ctx *ctx) { return (abx_approvals_watch *)server_of(ctx); }

json_t *abx_approvals_watch_list(abx_approvals_watch *w, const char *principal, bool approver)
{
    return abx_approvals_list((abx_server *)w, principal, approver);
}

abx_err abx_ctx_approval_get(abx_ctx *ctx, const char *id, bool approver, abx_reply *r)
{
    return abx_approval_get(server_of(ctx), id, abx_ctx_principal(ctx), approver, r);
}

abx_err abx_ctx_approval_decide(abx_ctx *ctx, const char *id, bool approve, const char *reason, abx_reply *r)
{
    return abx_approval_decide(server_of(ctx), id, abx_ctx_principal(ctx), approve, reason, r);
}

abx_host *abx_ctx_host(abx_ctx *ctx) { return (abx_host *)ctx->req->server; }

int abx_host_call_kernel(abx_host *h, const char *principal, const char *op, const json_t *args, uint64_t group,
                         json_t **body)
{
    return abx_call_internal((abx_server *)h, ABX_DOOR_KERNEL, principal, op, args, group, NULL, body);
}

void *abx_host_ns_state(abx_host *h, const abx_namespace *ns) { return abx_ns_state((abx_server *)h, ns); }

/* ---- the admitted paths, and opening them through the jail ---- */

/* A name step 7 decided as written (abx_decide_lexical) is confirmed by the first
 * lookup that refuses symlinks: the jail's open, or here before the name is handed out
 * as text. When it cannot be confirmed the call is decided again and run again
 * (dispatch.c), and whatever this run answers is dropped. */
static void ctx_confirm(abx_request *r, abx_path_value *pv)
{
    if (!pv->lexical)
        return;
    if (abx_path_symlink_free(pv->canonical))
        pv->lexical = false;
    else
        r->recanon = true;
}

static void ctx_confirm_all(abx_request *r)
{
    for (size_t i = 0; r->lexical && i < r->decision.n_paths; i++)
        ctx_confirm(r, &r->decision.paths[i]);
}

static abx_path_value *ctx_pv(const abx_ctx *ctx, const char *param)
{
    for (size_t i = 0; i < ctx->req->decision.n_paths; i++)
        if (strcmp(ctx->req->decision.paths[i].param, param) == 0)
            return &ctx->req->decision.paths[i];
    return NULL;
}

const char *abx_ctx_path(const abx_ctx *ctx, const char *param)
{
    abx_path_value *pv = ctx_pv(ctx, param);
    if (pv)
        ctx_confirm(ctx->req, pv);
    return pv ? pv->canonical : NULL;
}

const char *abx_ctx_path_at(const abx_ctx *ctx, const char *param, size_t index)
{
    for (size_t i = 0; i < ctx->req->decision.n_paths; i++)
        if (strcmp(ctx->req->decision.paths[i].param, param) == 0 && ctx->req->decision.paths[i].index == index) {
            ctx_confirm(ctx->req, &ctx->req->decision.paths[i]);
            return ctx->req->decision.paths[i].canonical;
        }
    return NULL;
}

char *const *abx_ctx_argv(const abx_ctx *ctx, size_t *n)
{
    const abx_argv *a = &ctx->req->decision.argv;
    if (n)
        *n = a->n;
    return a->n ? a->v : NULL;
}

int abx_ctx_open_stat(abx_ctx *ctx, const char *param, int flags, unsigned mode, struct stat *st)
{
    abx_path_value *pv = ctx_pv(ctx, param);
    if (!pv)
        return -EINVAL;
    if (pv->rootfd < 0) { /* a root that appeared after the policy was compiled */
        ctx_confirm(ctx->req, pv); /* opened by its name: confirm all of it */
        if (ctx->req->recanon)
            return -ELOOP;
        int fd = pv->root ? abx_jail_open_root(pv->root) : -ENOENT;
        if (fd < 0)
            return -ENOENT;
        pv->rootfd = fd;
        pv->own_fd = true;
    }
    int fd = abx_jail_open(pv->rootfd, pv->rel, flags, (mode_t)mode);
    if (pv->lexical) {
        /* the jail's open refuses every symlink below the root: success confirms the
         * name; any failure (a symlink, a missing name) is judged on the full walk */
        if (fd >= 0)
            pv->lexical = false;
        else
            ctx->req->recanon = true;
    }
    if (fd < 0)
        return fd;
    if (!ctx->req->policy->n_idents) {
        if (st && fstat(fd, st) != 0) {
            int e = errno;
            close(fd);
            return -e;
        }
        return fd;
    }
    /* the name was admitted; the file it now leads to must not be one a deny rule or
     * protected area binds (renamed there, or a hard link to it) */
    int dirfd = -1;
    bool own_dir = false; /* a name right in the root: its folder is the root, borrowed */
    if (ctx->req->policy->has_subtree_idents && strcmp(pv->rel, ".") != 0) {
        const char *name;
        own_dir = strchr(pv->rel, '/') != NULL;
        dirfd = own_dir ? abx_jail_open_parent(pv->rootfd, pv->rel, &name) : pv->rootfd;
        if (dirfd < 0) {
            close(fd);
            return dirfd;
        }
    }
    int rc = abx_policy_fd_check_st(ctx->req->policy, ctx->req->slot, ctx->req->op, &ctx->req->decision, fd, dirfd,
                                    st);
    if (own_dir)
        close(dirfd);
    if (rc == 0 && st && fstat(fd, st) != 0) /* the check did not need it */
        rc = -errno;
    if (rc < 0) {
        close(fd);
        return rc;
    }
    return fd;
}

int abx_ctx_open(abx_ctx *ctx, const char *param, int flags, unsigned mode)
{
    return abx_ctx_open_stat(ctx, param, flags, mode, NULL);
}
