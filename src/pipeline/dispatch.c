/* dispatch.c — the one path from a request value to a handler: steps 1–10 of the
 * spec, in order, in abx_dispatch(). Every front door enters here. Each step returns
 * OK or an abx_error; the single exit audits and leaves the reply for the door to
 * render. Handler failures never skip the audit. */
#include "pipeline/pipeline.h"
#include "core/jsonout.h"
#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>

static void vset_error(abx_reply *rep, abx_err e, json_t *details, const char *fmt, va_list ap)
    __attribute__((format(printf, 4, 0)));
static void vset_error(abx_reply *rep, abx_err e, json_t *details, const char *fmt, va_list ap)
{
    rep->err = e;
    rep->status = abx_err_status(e);
    abx_free(rep->message);
    char msg[512];
    vsnprintf(msg, sizeof msg, fmt, ap);
    rep->message = abx_strdup(msg);
    json_decref(rep->details);
    rep->details = details;
    json_decref(rep->body);
    rep->body = NULL;
    abx_free(rep->raw);
    rep->raw = NULL;
    if (rep->stream_free && rep->stream_state)
        rep->stream_free(rep->stream_state);
    rep->stream_state = NULL;
    rep->stream_read = NULL;
    if (rep->ws_ops && rep->ws_state)
        rep->ws_ops->free_fn(rep->ws_state);
    rep->ws_ops = NULL;
    rep->ws_state = NULL;
    if (rep->fd >= 0) {
        close(rep->fd);
        rep->fd = -1;
    }
}

void abx_fail(abx_request *r, abx_err e, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    vset_error(&r->reply, e, NULL, fmt, ap);
    va_end(ap);
}

/* ---- public reply and ctx API (include/abx/abx.h) ---- */

void abx_reply_json(abx_reply *r, json_t *body)
{
    json_decref(r->body);
    r->body = body;
}

void abx_reply_status(abx_reply *r, int http_status) { r->status = http_status; }

abx_err abx_reply_error(abx_reply *r, abx_err code, json_t *details, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    vset_error(r, code, details, fmt, ap);
    va_end(ap);
    return code;
}

void abx_reply_stream(abx_reply *r, const char *content_type, abx_stream_read_fn read_fn, void *state,
                      void (*free_fn)(void *state))
{
    if (r->stream_free && r->stream_state)
        r->stream_free(r->stream_state);
    r->stream_read = read_fn;
    r->stream_state = state;
    r->stream_free = free_fn;
    r->content_type = content_type;
}

void abx_reply_header_add(abx_reply *r, const char *name, const char *value)
{
    if (!r->headers)
        r->headers = json_object();
    json_t *old = r->headers ? json_object_get(r->headers, name) : NULL;
    if (!old) {
        abx_reply_header(r, name, value);
        return;
    }
    if (!json_is_array(old)) {
        json_t *arr = json_array();
        json_array_append(arr, old);
        json_object_set_new(r->headers, name, arr);
        old = arr;
    }
    json_array_append_new(old, json_string(value));
}

const char *abx_ctx_last_event_id(const abx_ctx *ctx) { return ctx->req->last_event_id; }

void abx_reply_header(abx_reply *r, const char *name, const char *value)
{
    if (!r->headers)
        r->headers = json_object();
    if (r->headers)
        json_object_set_new(r->headers, name, json_string(value));
}

void abx_reply_websocket(abx_reply *r, const abx_ws_ops *ops, void *state)
{
    if (r->ws_ops && r->ws_state)
        r->ws_ops->free_fn(r->ws_state);
    r->ws_ops = ops;
    r->ws_state = state;
}

bool abx_ctx_cancelled(abx_ctx *ctx)
{
    if (ctx->req->cancel && atomic_load(ctx->req->cancel))
        return true;
    int fd = ctx->req->conn_fd;
    if (fd < 0)
        return false;
    struct pollfd pf = {.fd = fd, .events = POLLRDHUP};
    return poll(&pf, 1, 0) > 0 && (pf.revents & (POLLRDHUP | POLLHUP | POLLERR));
}

void abx_reply_bytes(abx_reply *r, const void *data, size_t len, const char *content_type)
{
    abx_free(r->raw);
    r->raw = abx_malloc(len ? len : 1);
    if (r->raw) {
        memcpy(r->raw, data, len);
        r->raw_len = len;
    } else {
        abx_reply_error(r, ABX_E_SERVER_UNAVAILABLE, NULL, "out of memory");
    }
    r->content_type = content_type;
}

void abx_reply_fd(abx_reply *r, int fd, uint64_t offset, uint64_t length, const char *content_type)
{
    if (r->fd >= 0)
        close(r->fd);
    r->fd = fd;
    r->offset = offset;
    r->length = length;
    r->content_type = content_type;
}

const char *abx_ctx_request_id(const abx_ctx *ctx) { return ctx->req->id; }
const char *abx_ctx_principal(const abx_ctx *ctx) { return abx_policy_principal_id(ctx->req->policy, ctx->req->slot); }
const char *abx_ctx_op_id(const abx_ctx *ctx) { return ctx->req->op->id; }
void *abx_ctx_udata(const abx_ctx *ctx) { return ctx->req->op->def->udata; }

bool abx_ctx_path_visible(abx_ctx *ctx, const char *canonical)
{
    abx_request *r = ctx->req;
    return abx_policy_path_visible(r->policy, r->slot, r->op, &r->decision, canonical);
}

int64_t abx_ctx_limit(const abx_ctx *ctx, enum abx_limit which)
{
    for (int i = 0; i < ABX_LIM__COUNT; i++)
        if ((unsigned)which == 1u << i)
            return ctx->req->decision.limits[i];
    return -1;
}

int64_t abx_ctx_deadline_ms(const abx_ctx *ctx)
{
    int64_t t = abx_ctx_limit(ctx, ABX_LIM_TIMEOUT);
    return t > 0 ? ctx->req->start_us / 1000 + t : 0;
}

void abx_ctx_log(abx_ctx *ctx, const char *level, const char *fmt, ...)
{
    char msg[1024];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(msg, sizeof msg, fmt, ap);
    va_end(ap);
    abx_log(level, ctx->req->id, "%s: %s", ctx->req->op ? ctx->req->op->id : "-", msg);
}

/* ---- steps ---- */

abx_policy *abx_server_snapshot(abx_server *s)
{
    pthread_mutex_lock(&s->snap_mu);
    abx_policy *p = s->snap;
    abx_policy_ref(p);
    pthread_mutex_unlock(&s->snap_mu);
    return p;
}

/* Step 1: capture the snapshot; a JSON body must say so and must be an object. */
static void step1_parse(abx_request *r)
{
    if (!r->policy)
        r->policy = abx_server_snapshot(r->server);
}

/* Step 2 for an op's own HTTP binding: the trie router. The front doors' paths are
 * matched above the pipeline (doors/doors.c), which calls this when none of them did. */
void abx_route_op(abx_request *r)
{
    r->route = abx_router_match(r->server->router, r->method, r->path, r->path_len, &r->match);
}

/* A WebSocket ticket in the query (?ticket=...): only a terminal.connect upgrade without
 * other credentials redeems one. */
typedef struct ticket_q {
    char value[80];
    size_t len;
} ticket_q;

static int find_ticket(void *ud, const char *name, size_t nlen, const char *val, size_t vlen)
{
    ticket_q *q = ud;
    if (nlen == 6 && memcmp(name, "ticket", 6) == 0) {
        q->len = vlen < sizeof q->value ? vlen : sizeof q->value - 1;
        memcpy(q->value, val, q->len);
        q->value[q->len] = '\0';
        return 1;
    }
    return 0;
}

static bool ticket_wanted(const abx_request *r)
{
    return r->ws_upgrade && r->query && r->route == ABX_ROUTE_FOUND && r->match.op &&
           strcmp(r->match.op->id, "terminal.connect") == 0;
}

static abx_step redeem_ticket(abx_request *r, int64_t now)
{
    ticket_q q = {.len = 0};
    if (abx_query_each(r->query, r->query_len, find_ticket, &q) != 1) {
        r->slot = (int)r->policy->n_principals; /* no ticket: anonymous, as without one */
        return ABX_STEP_NEXT;
    }
    char fp[65];
    abx_sha256_hex(q.value, q.len, fp);
    fp[16] = '\0';
    int wait = abx_auth_limited(r->server->limiter, fp, r->client, now);
    if (wait > 0) {
        r->reply.retry_after = wait;
        abx_fail(r, ABX_E_AUTH_RATE_LIMITED, "too many failed attempts; retry in %d s", wait);
        return ABX_STEP_FAIL;
    }
    int target = -1;
    char *principal = abx_tickets_redeem(r->server->tickets, q.value, q.len, &target);
    /* a terminal's ticket only: a port's (target -port, ports.ticket) signs a browser in on
     * that port's own origin and nowhere else (port_origin.c) */
    r->slot = principal && target >= 0 ? abx_policy_principal_slot(r->policy, principal) : -1;
    if (abx_policy_principal_expired(r->policy, r->slot, abx_wall_ms()))
        r->slot = -1; /* the token it was made with has expired */
    abx_free(principal);
    if (r->slot < 0) {
        abx_auth_failed(r->server->limiter, fp, r->client, now);
        abx_fail(r, ABX_E_AUTH_INVALID_TOKEN, "the ticket is unknown, already used or expired");
        return ABX_STEP_FAIL;
    }
    r->ticket_target = target;
    abx_auth_succeeded(r->server->limiter, r->client, now);
    return ABX_STEP_NEXT;
}

/* Step 3: credentials → principal. Bearer wins; X-Access-Token is the legacy alias. */
static abx_step step3_authenticate(abx_request *r)
{
    abx_policy *p = r->policy;
    if (r->trusted_principal) { /* in-process, batch and approved calls: already authenticated */
        r->slot = abx_policy_principal_slot(p, r->principal_name);
        if (r->slot < 0) {
            abx_fail(r, ABX_E_AUTH_INVALID_TOKEN, "unknown principal");
            return ABX_STEP_FAIL;
        }
        /* a kernel acts for its creator while the creator's token holds: code still running
         * when it expires (a loop, a thread) makes no more host.* calls */
        if (r->door == ABX_DOOR_KERNEL && abx_policy_principal_expired(p, r->slot, abx_wall_ms())) {
            abx_fail(r, ABX_E_AUTH_INVALID_TOKEN, "the token of the kernel's creator has expired: its host.* calls "
                                                  "end with it");
            return ABX_STEP_FAIL;
        }
        return ABX_STEP_NEXT;
    }
    const char *tok = r->bearer ? r->bearer : r->x_token;
    if (r->bearer && r->x_token && strcmp(r->bearer, r->x_token) != 0) {
        abx_fail(r, ABX_E_AUTH_CONFLICTING_CREDENTIALS, "Authorization and X-Access-Token carry different tokens");
        return ABX_STEP_FAIL;
    }
    int64_t now = abx_now_ms();
    if (!tok && ticket_wanted(r))
        return redeem_ticket(r, now);
    if (!tok && r->port_origin) /* a browser on a port's own origin: ticket, then cookie */
        return abx_port_origin_auth(r, now);
    if (!tok) {
        r->slot = (int)p->n_principals; /* anonymous: may still be mounted (core.health) */
        if (r->auth_bad_scheme) {
            abx_fail(r, ABX_E_AUTH_REQUIRED, "use Authorization: Bearer <token>");
            return ABX_STEP_FAIL;
        }
        return ABX_STEP_NEXT;
    }
    char fp[65];
    abx_sha256_hex(tok, strlen(tok), fp);
    fp[16] = '\0'; /* a fingerprint, never the token */
    int wait = abx_auth_limited(r->server->limiter, fp, r->client, now);
    if (wait > 0) {
        r->reply.retry_after = wait;
        abx_fail(r, ABX_E_AUTH_RATE_LIMITED, "too many failed attempts; retry in %d s", wait);
        return ABX_STEP_FAIL;
    }
    r->slot = abx_policy_auth(p, tok, strlen(tok), abx_wall_ms());
    if (r->slot < 0) {
        abx_auth_failed(r->server->limiter, fp, r->client, now);
        abx_fail(r, ABX_E_AUTH_INVALID_TOKEN, "the token is unknown or expired");
        return ABX_STEP_FAIL;
    }
    abx_auth_succeeded(r->server->limiter, r->client, now);
    return ABX_STEP_NEXT;
}

static bool is_anonymous(const abx_request *r) { return r->slot == (int)r->policy->n_principals; }

/* The one 404 body: identical bytes for unknown and unmounted ops. */
static abx_step not_enabled(abx_request *r, const char *asked)
{
    if (r->server->opts.explain_denials && asked && *asked) {
        /* development only: suggestions among ops mounted for this caller */
        const abx_registry *reg = r->server->reg;
        const char *best = NULL;
        int bestd = 3;
        for (size_t i = 0; i < abx_registry_count(reg); i++) {
            const abx_op *op = abx_registry_at(reg, i);
            if (!abx_policy_mounted(r->policy, r->slot, i))
                continue;
            int d = abx_edit_distance(asked, op->id, 2);
            if (d < bestd) {
                bestd = d;
                best = op->id;
            }
        }
        if (best) {
            abx_fail(r, ABX_E_OP_NOT_ENABLED, "No such operation is enabled for this caller (did you mean '%s'?)",
                     best);
            return ABX_STEP_FAIL;
        }
    }
    abx_fail(r, ABX_E_OP_NOT_ENABLED, "No such operation is enabled for this caller");
    return ABX_STEP_FAIL;
}

/* Step 4 (resolve) and 5 (mounted?). 401 for anonymous callers comes first. */
static abx_step step4_5_resolve_mounted(abx_request *r)
{
    const abx_registry *reg = r->server->reg;
    const char *asked = NULL;
    if (r->door == ABX_DOOR_HTTP) {
        if (r->route == ABX_ROUTE_FOUND) {
            r->op = r->match.op;
            r->op_index = r->match.op_index;
        } else if (r->route == ABX_ROUTE_WRONG_METHOD) {
            /* 405 only where an op mounted for this caller owns the path */
            char allow[64] = "";
            for (size_t i = 0; i < r->match.n_others; i++)
                if (abx_policy_mounted(r->policy, r->slot, r->match.others[i].op_index)) {
                    size_t o = strlen(allow);
                    snprintf(allow + o, sizeof allow - o, "%s%s", o ? ", " : "", r->match.others[i].method);
                }
            if (allow[0]) {
                snprintf(r->reply.allow, sizeof r->reply.allow, "%s", allow);
                abx_fail(r, ABX_E_REQUEST_METHOD_NOT_ALLOWED, "method %s is not allowed here; allowed: %s", r->method,
                         allow);
                return ABX_STEP_FAIL;
            }
        }
    } else if (r->door == ABX_DOOR_COMMANDS) {
        /* by original name, and only declarative commands: never a way around the REST routes */
        asked = r->op_name;
        const char *id = asked ? abx_command_op_id(r->server, asked) : NULL;
        r->op = id ? abx_registry_get(reg, id) : NULL;
        if (r->op)
            r->op_index = abx_registry_index_of(reg, r->op);
    } else {
        asked = r->op_name;
        r->op = asked ? abx_registry_resolve(reg, asked) : NULL;
        if (r->op)
            r->op_index = abx_registry_index_of(reg, r->op);
        else
            abx__dyn_resolve(r, asked); /* the overlay, after the frozen registry */
    }
    bool mounted = r->op && abx_policy_mounted(r->policy, r->slot, r->op_index);
    if (!mounted && is_anonymous(r) && !r->trusted_principal) {
        /* unauthenticated callers learn nothing about routes: 401 before any 404/405 */
        abx_fail(r, ABX_E_AUTH_REQUIRED, "credentials are required: Authorization: Bearer <token>");
        return ABX_STEP_FAIL;
    }
    if (!mounted) {
        if (!asked && r->door == ABX_DOOR_HTTP && r->path_len > 1) {
            /* suggestions for REST paths: compare the path as an id ("/files/lsit" → files.lsit) */
            char *guess = abx_arena_strndup(r->arena, r->path + 1, r->path_len - 1);
            for (char *c = guess; c && *c; c++)
                if (*c == '/')
                    *c = '.';
            asked = guess;
        }
        r->op = NULL;
        return not_enabled(r, asked);
    }
    return ABX_STEP_NEXT;
}

typedef struct qctx {
    abx_request *r;
    abx_err err;
    char msg[300];
} qctx;

static int add_query_arg(void *ud, const char *name, size_t nlen, const char *val, size_t vlen)
{
    qctx *q = ud;
    if (memchr(name, '\0', nlen) || nlen == 0) {
        q->err = ABX_E_ARGS_INVALID;
        snprintf(q->msg, sizeof q->msg, "query parameter names must be non-empty text");
        return 1;
    }
    q->err = abx_args_add_text(q->r->op, q->r->args, name, val, vlen, q->msg, sizeof q->msg);
    return q->err ? 1 : 0;
}

/* Step 6: place arguments mechanically (path variables, then query for GET/DELETE or
 * the JSON body for POST/PUT/PATCH) and validate them against the schema. */
static abx_step step6_args(abx_request *r)
{
    char msg[300] = "";
    abx_err e = ABX_OK;
    const abx_op *op = r->op;
    if (r->trusted_principal) { /* in-process, batch, approved and MCP calls: arguments as given */
        r->args = r->args_in ? json_deep_copy(r->args_in) : json_object();
    } else if (r->has_body && r->body.len > 0 &&
               !((op->def->raw_body || op->def->raw_query) && r->door == ABX_DOOR_HTTP)) {
        json_error_t je;
        r->args = json_loadb(r->body.data, r->body.len, JSON_REJECT_DUPLICATES, &je);
        if (!r->args || !json_is_object(r->args)) {
            abx_fail(r, ABX_E_REQUEST_BAD_JSON, "the body is not a JSON object: %s",
                     r->args ? "not an object" : je.text);
            return ABX_STEP_FAIL;
        }
    } else {
        r->args = json_object();
    }
    if (!r->args) {
        abx_fail(r, ABX_E_SERVER_UNAVAILABLE, "out of memory");
        return ABX_STEP_FAIL;
    }
    if (r->door == ABX_DOOR_HTTP) {
        for (size_t i = 0; i < r->match.n_vars && !e; i++) {
            size_t n = r->match.vars[i].len;
            char *v = abx_arena_alloc(r->arena, n + 1);
            long dn = v ? abx_pct_decode(r->match.vars[i].val, n, v, false) : -1;
            if (dn < 0) {
                e = ABX_E_ARGS_INVALID;
                snprintf(msg, sizeof msg, "path variable '%s' is malformed", r->match.vars[i].name);
                break;
            }
            json_object_del(r->args, r->match.vars[i].name); /* the path wins over the body */
            e = abx_args_add_text(op, r->args, r->match.vars[i].name, v, (size_t)dn, msg, sizeof msg);
        }
        bool query_args = strcmp(r->method, "GET") == 0 || strcmp(r->method, "DELETE") == 0 ||
                          op->def->raw_body;
        if (!e && r->query && r->query_len && !op->def->raw_query) {
            if (!query_args) {
                e = ABX_E_ARGS_INVALID;
                snprintf(msg, sizeof msg, "arguments of %s requests go in the JSON body, not the query string",
                         r->method);
            } else {
                qctx q = {r, ABX_OK, ""};
                int rc = abx_query_each(r->query, r->query_len, add_query_arg, &q);
                if (rc == -1) {
                    e = ABX_E_ARGS_INVALID;
                    snprintf(msg, sizeof msg, "the query string has a malformed escape");
                } else if (rc) {
                    e = q.err;
                    snprintf(msg, sizeof msg, "%s", q.msg);
                }
            }
        }
    } else if ((r->door == ABX_DOOR_RPC || r->door == ABX_DOOR_COMMANDS) && r->query && r->query_len &&
               !r->trusted_principal) {
        e = ABX_E_ARGS_INVALID;
        snprintf(msg, sizeof msg, "POST /ops/{id} takes its arguments in the JSON body");
    }
    if (!e)
        e = abx_args_validate(op, r->args, msg, sizeof msg);
    if (e) {
        abx_fail(r, e, "%s", msg);
        return ABX_STEP_FAIL;
    }
    return ABX_STEP_NEXT;
}

/* Step 7: deny rules, protected areas, allow statements with scopes, limits. */
static abx_step step7_policy(abx_request *r)
{
    /* a read whose handler opens its paths through the jail: its names are decided as
     * written and the jail's open confirms them (abx_decide_lexical; ctx.c). Not with
     * policy hooks: a call decided twice would ask them twice. */
    if (!r->recanon && r->op->effects == ABX_EFF_READ && !r->server->opts.explain_denials &&
        !r->server->n_hooks && abx_ns_jail_checked(r->server, r->op->def))
        r->lexical = abx_decide_lexical(r->policy, r->slot, r->op, r->op_index, r->args, &r->decision);
    else
        abx_decide(r->policy, r->slot, r->op, r->op_index, r->args, &r->decision, NULL);
    if (r->decision.err) {
        json_t *details = NULL;
        if (r->server->opts.explain_denials && r->decision.err != ABX_E_OP_NOT_ENABLED) {
            /* development only: the decision again, with its trace (core.explain's) */
            abx_decision again;
            json_t *trace = json_object();
            abx_decide(r->policy, r->slot, r->op, r->op_index, r->args, &again, trace);
            abx_decision_release(&again);
            details = json_pack("{s:o}", "trace", trace);
        }
        abx_reply_error(&r->reply, r->decision.err, details, "%s", r->decision.message);
        return ABX_STEP_FAIL;
    }
    /* hooks may veto or narrow an admitted call, never widen it */
    for (int h = 0; h < r->server->n_hooks; h++) {
        int64_t lim[ABX_LIM__COUNT];
        memcpy(lim, r->decision.limits, sizeof lim);
        char why[300] = "";
        abx_err e = r->server->hooks[h].fn(r->server->hooks[h].udata, abx_policy_principal_id(r->policy, r->slot),
                                            r->op->id, r->args, lim, why, sizeof why);
        if (e != ABX_OK) {
            if (e < 0 || e >= ABX_E__COUNT)
                e = ABX_E_POLICY_DENIED;
            snprintf(r->decision.determining, sizeof r->decision.determining, "hook[%d]", h);
            abx_fail(r, e, "%s", why[0] ? why : "refused by a policy hook");
            return ABX_STEP_FAIL;
        }
        for (int i = 0; i < ABX_LIM__COUNT; i++)
            if (lim[i] >= 0 && (r->decision.limits[i] < 0 || lim[i] < r->decision.limits[i]))
                r->decision.limits[i] = lim[i];
    }
    return ABX_STEP_NEXT;
}


/* Step 8: admission. Approval first (a held call takes no rate or concurrency
 * tokens), then rate and concurrency; the request's own limit-style arguments narrow
 * the effective limits (never widen); the deadline follows from the timeout. */
static abx_step step8_admit(abx_request *r)
{
    if (r->op->def->install[0] && abx_install_gate(r) != ABX_STEP_NEXT)
        return ABX_STEP_FAIL;
    if (r->decision.approval || r->op->def->requires_approval) {
        if (r->approved) {
            /* the approved run: only the exact held call, only once (the runner's state) */
            if (!abx_approval_matches(r->approved, abx_policy_principal_id(r->policy, r->slot), r->op->id, r->args)) {
                abx_fail(r, ABX_E_APPROVAL_DECIDED, "the approval does not cover this call");
                return ABX_STEP_FAIL;
            }
            /* ... and only if the files it names still hold what the approver saw */
            char why[512];
            abx_err se = abx_approval_check_files(r->approved, r, why, sizeof why);
            if (se != ABX_OK) {
                abx_fail(r, se, "%s", why);
                return ABX_STEP_FAIL;
            }
        } else if (!r->policy->has_approver) {
            abx_fail(r, ABX_E_APPROVAL_NO_APPROVER, "this call needs approval and no approver is configured");
            return ABX_STEP_FAIL;
        } else {
            abx__dyn_bind_hash(r);  /* a dyn.<name> call is held as tools.call {hash, args} */
            abx_approval_hold(r);   /* 202 pending, or the result after Prefer: wait */
            return ABX_STEP_HELD;   /* held: nothing more runs in this request */
        }
    }
    if (abx_idem_begin(r))
        return ABX_STEP_DONE; /* answered with the first call's recorded result */
    int retry = 0;
    abx_err e = abx_admit(r->policy, r->slot, &r->decision, abx_now_us(), &retry);
    if (e) {
        r->reply.retry_after = retry;
        abx_fail(r, e, "%s", r->decision.message);
        return ABX_STEP_FAIL;
    }
    if ((e = abx_audit_admission(r)) != ABX_OK)
        return ABX_STEP_FAIL;
    if (r->op->def->install[0] && abx_install_ensure_step(r) != ABX_STEP_NEXT)
        return ABX_STEP_FAIL;
    for (int i = 0; i < ABX_LIM__COUNT; i++) {
        unsigned bit = 1u << i;
        /* only size/count limits come from arguments; an op's timeout arguments have
         * their own meaning (soft detach, hard kill) and are capped by the op itself */
        if (!(r->op->def->limits & bit) || bit == ABX_LIM_TIMEOUT)
            continue;
        const json_t *v = json_object_get(r->args, abx_limit_name((enum abx_limit)bit));
        if (json_is_integer(v) && json_integer_value(v) > 0) {
            int64_t x = json_integer_value(v);
            if (r->decision.limits[i] < 0 || x < r->decision.limits[i])
                r->decision.limits[i] = x;
        }
    }
    return ABX_STEP_NEXT;
}

/* Step 9: the handler, with canonical admitted values in ctx. */
static abx_step step9_run(abx_request *r)
{
    abx_err e = r->op->def->handler(&r->ctx, r->args, &r->reply);
    if (e == ABX_OK && r->reply.err == ABX_OK)
        return ABX_STEP_NEXT;
    if (e == ABX_OK)
        e = r->reply.err;
    if (e <= ABX_OK || e >= ABX_E__COUNT) {
        abx_log("error", r->id, "handler %s returned an invalid code %d", r->op->id, (int)e);
        e = ABX_E_SERVER_INTERNAL;
    }
    if (e == ABX_E_SERVER_INTERNAL) {
        /* never leak the internal message: log it with the request id */
        abx_log("error", r->id, "handler %s failed: %s", r->op->id, r->reply.message ? r->reply.message : "");
        abx_fail(r, ABX_E_SERVER_INTERNAL, "internal error (request %s)", r->id);
    } else if (r->reply.err != e) {
        abx_fail(r, e, "%s", abx_err_meaning(e));
    }
    return ABX_STEP_FAIL;
}

abx_step abx_pipeline_front(abx_request *r)
{
    if (r->reply.err != ABX_OK)
        return ABX_STEP_FAIL;
    step1_parse(r);
    return step3_authenticate(r);
}

abx_step abx_pipeline_op(abx_request *r)
{
    abx_step st = step4_5_resolve_mounted(r);
    if (st == ABX_STEP_NEXT)
        st = step6_args(r);
    for (bool run = st == ABX_STEP_NEXT; run;) {
        st = step7_policy(r);
        if (st == ABX_STEP_NEXT)
            st = step8_admit(r);
        if (st == ABX_STEP_NEXT)
            st = step9_run(r);
        run = r->lexical && r->recanon;
        if (!run)
            break;
        /* A name decided as written did not survive its symlink-refusing lookup (a
         * symlink, a missing name): the read ran on nothing it may answer with. Drop
         * its answer, decide on the full walk of every name (step7_policy does, once
         * recanon is set), and run it once more — a read has no effect to undo, and a
         * lexical decision took no token (abx_decide_lexical). */
        r->lexical = false;
        abx_release(r->policy, &r->decision);
        abx_decision_release(&r->decision);
        abx_reply_reset(&r->reply);
    }
    return st == ABX_STEP_NEXT ? ABX_STEP_DONE : st;
}

/* In-process calls (trusted principal, any door but a front door's own path): steps 1
 * to 9. The front doors enter through doors/doors.c, which calls the same steps. */
void abx_dispatch_begin(abx_request *r)
{
    if (abx_pipeline_front(r) == ABX_STEP_NEXT)
        abx_pipeline_op(r);
}

void abx_dispatch(abx_request *r)
{
    abx_dispatch_begin(r);
    if (abx_body_wanted(r)) /* no transport body here (in-process): end the sink at once */
        abx_body_end(r);
    abx_audit(r); /* step 10: always */
}

void abx_ctx_body_sink(abx_ctx *ctx, abx_body_chunk_fn chunk, abx_body_end_fn end, void (*free_fn)(void *state),
                       void *state)
{
    abx_request *r = ctx->req;
    r->sink.chunk = chunk;
    r->sink.end = end;
    r->sink.free_fn = free_fn;
    r->sink.state = state;
}

bool abx_body_wanted(const abx_request *r) { return r->reply.err == ABX_OK && r->sink.end != NULL; }

abx_err abx_body_feed(abx_request *r, const void *data, size_t len)
{
    if (!abx_body_wanted(r))
        return r->reply.err;
    r->sink.received += len;
    abx_err e = r->sink.chunk ? r->sink.chunk(r->sink.state, data, len, &r->reply) : ABX_OK;
    if (e != ABX_OK && r->reply.err == ABX_OK)
        abx_fail(r, e, "%s", abx_err_meaning(e));
    return e;
}

void abx_body_end(abx_request *r)
{
    if (abx_body_wanted(r)) {
        abx_err e = r->sink.end(r->sink.state, &r->reply);
        if (e != ABX_OK && r->reply.err == ABX_OK)
            abx_fail(r, e, "%s", abx_err_meaning(e));
    }
    if (r->sink.free_fn && r->sink.state)
        r->sink.free_fn(r->sink.state);
    r->sink.end = NULL;
    r->sink.state = NULL;
    r->sink.free_fn = NULL;
}

/* ---- rendering ---- */

int abx_reply_http_status(const abx_reply *rep)
{
    if (rep->err)
        return abx_err_status(rep->err);
    return rep->status ? rep->status : 200;
}

char *abx_reply_render(const abx_reply *rep, size_t *len)
{
    json_t *doc;
    if (rep->protocol_body && !rep->body) {
        *len = 0;
        return strdup("");
    }
    if (rep->protocol_body) {
        doc = json_incref(rep->body);
    } else if (rep->err) {
        doc = abx_error_json(rep->err, rep->message, rep->details);
    } else {
        doc = rep->body ? json_incref(rep->body) : json_object();
    }
    size_t n = 0; /* json_dumps(doc, JSON_COMPACT | JSON_ENCODE_ANY), without its per-byte callback */
    char *s = doc ? abx_json_compact(doc, false, &n) : NULL;
    json_decref(doc);
    if (!s) {
        s = strdup(ABX_ERROR_JSON_OOM);
        n = s ? strlen(s) : 0;
    }
    *len = n;
    return s;
}
