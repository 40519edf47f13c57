/* ctx.h — a handler's whole view of abx. A handler (src/builtin, src/ext) includes this
 * and nothing else of the pipeline: the public abx/abx.h (its arguments, its admitted
 * paths and argv, opening through the jail, replies, cancellation) plus the services
 * below, each asked of its abx_ctx. abx_ctx is opaque here: the request and the server
 * stay in the pipeline (pipeline.h), so a handler cannot reach another request, the
 * listener or the server's fields even if it wanted. A server-wide operation a
 * handler needs (approvals, reload) is one narrow accessor named for what it does.
 * The accessors live in pipeline/ctx.c. */
#ifndef ABX_PIPELINE_CTX_H
#define ABX_PIPELINE_CTX_H

#include "abx/abx.h"
#include "core/core.h"
#include "core/diag.h"
#include "core/dyndef.h"
#include "core/util.h"
#include "discovery/discovery.h"
#include "http/websocket.h"
#include "ledger/ledger.h"
#include "policy/policy.h"
#include "sandbox/procs.h"
#include <sys/stat.h>

/* A namespace: its ops and the life of its per-server state (namespace.c). The server
 * drives the list it is given (state_new at start, state_free when it is freed); a
 * handler reaches its state through its own descriptor (abx_ctx_ns_state). */
typedef struct abx_namespace {
    const char *name;                /* the ops' id prefix: "commands" */
    const abx_op_def *ops;           /* terminated by a zeroed entry */
    const abx_op_def *const *op_tables; /* and/or several such tables (one per op family), NULL-terminated */
    void *(*state_new)(void);        /* NULL: no state; returns NULL when out of memory */
    void (*state_free)(void *state);
    /* What a held call of one of its ops will run, where the decision does not say it
     * (approval_bind.c hashes the files it names); NULL: nothing to add. */
    char *(*bind_cwd)(abx_ctx *ctx, const json_t *args);   /* the start directory, malloc'd, or NULL */
    char **(*bind_argv)(abx_ctx *ctx, const json_t *args); /* the argv, in the request's arena, or NULL */
    /* Ids of its read-only ops whose handlers reach their path parameters only through
     * abx_ctx_open / abx_ctx_open_stat and have no effect before the first such open
     * fails: step 7 decides their paths as written, with no lookup, and the jail's
     * symlink-refusing open confirms the names (docs/security.md, "One lookup per
     * read"). NULL-terminated; NULL: none. */
    const char *const *jail_checked;
} abx_namespace;

/* ---- the call ---- */

/* The request's arena: allocations that live exactly as long as the call. */
abx_arena *abx_ctx_arena(abx_ctx *ctx);
/* The op being run (its definition, parameters, udata). */
const abx_op *abx_ctx_op(const abx_ctx *ctx);
/* What step 7 admitted: canonical paths, argv, limits, network. */
const abx_decision *abx_ctx_decision(const abx_ctx *ctx);
/* The filesystem view a process started for this call gets (the admitting statement's
 * roots and deny masks): abx_policy_fs_view's 0, -1 (out of memory) or -2 (a denied
 * file moved where its mask cannot follow; v->moved names it). */
int abx_ctx_fs_view(const abx_ctx *ctx, abx_fs_view *v);
/* Identity checks (policy.h) for what a handler meets beyond abx_ctx_open: is a file
 * found while walking denied by identity, and may fd (in dirfd) be used (0, or -errno)? */
bool abx_ctx_ident_denied(abx_ctx *ctx, const struct stat *st);
/* abx_ctx_open, and the opened file's fstat in *st (taken once: the identity check's). */
int abx_ctx_open_stat(abx_ctx *ctx, const char *param, int flags, unsigned mode, struct stat *st);
int abx_ctx_fd_check(abx_ctx *ctx, int fd, int dirfd);
/* Does the policy know any identity rule (else the checks above are no-ops)? */
bool abx_ctx_has_idents(const abx_ctx *ctx);
/* Is this canonical path hidden from the caller (a denied or masked name)? */
bool abx_ctx_path_hidden(const abx_ctx *ctx, const char *canonical);
/* Is it pinned (a denied or protected path, a folder above one, a root's .git) so that
 * it may not be moved? */
bool abx_ctx_move_pinned(const abx_ctx *ctx, const char *canonical);
/* Step 7 again for this op with other arguments (an entry found while walking); the
 * caller releases d (abx_decision_release). */
void abx_ctx_decide(const abx_ctx *ctx, const json_t *args, abx_decision *d);
/* Does the caller's principal hold this role? */
bool abx_ctx_has_role(const abx_ctx *ctx, const char *role);
/* The request asks for a WebSocket upgrade (Upgrade: websocket with a key): a ws op
 * answers with abx_reply_websocket only then. */
bool abx_ctx_ws_requested(const abx_ctx *ctx);
/* A single-use ticket for one WebSocket upgrade to terminal target by the caller within
 * limits.ticket_ttl (out: 64 hex + NUL; *ttl_ms its lifetime); 0, or -1 when the table is full. */
int abx_ctx_ticket_issue(abx_ctx *ctx, int target, char out[65], int64_t *ttl_ms);
/* A port's own origin (docs/ports.md): its tickets have target -port, and the session
 * they open is this cookie, which the relay never passes on to the server. */
#define ABX_PORT_COOKIE "abx_port"
/* The terminal the request's ticket opens, or -1 when it authenticated otherwise. */
int abx_ctx_ticket_target(const abx_ctx *ctx);
/* A WebSocket result (ws ops): the handler hands over state; the transport answers
 * 101, then runs abx_ws_run on its own thread. */
void abx_reply_websocket(abx_reply *r, const abx_ws_ops *ops, void *state);
/* What the handler returned in the reply: the error it set (ABX_OK when none). */
abx_err abx_reply_err(const abx_reply *r);
/* The JSON result the reply holds so far (borrowed: a handler may add members), or NULL. */
json_t *abx_reply_body(abx_reply *r);
/* Whether the handler may answer its JSON result as text it wrote itself
 * (abx_reply_json_text) instead of a tree: only for a call from the network on an op's
 * own HTTP binding or POST /ops/{id}, whose result goes out as it is. Every other
 * caller (MCP, the tool formats, batches, approvals, idempotent replays, E2B, sandboxd,
 * kernels, the in-process API) reads the result as a tree and gets one. */
bool abx_ctx_reply_text_ok(const abx_ctx *ctx);
/* The JSON result as compact text (the reply takes text, from malloc): byte for byte
 * what the tree would be rendered as, sent with Content-Type application/json. */
void abx_reply_json_text(abx_reply *r, char *text, size_t len);

/* ---- services ---- */

/* The process manager: every process abx started, and the sandbox. */
abx_procs *abx_ctx_procs(abx_ctx *ctx);
/* The action ledger, or NULL when the config disables it; the call's own ledger group
 * (0 until it is recorded durably: mutating calls), for events the handler adds to it. */
abx_ledger *abx_ctx_ledger(abx_ctx *ctx);
uint64_t abx_ctx_ledger_group(const abx_ctx *ctx);
/* ns's per-server state (its descriptor's state_new), or NULL. */
void *abx_ctx_ns_state(abx_ctx *ctx, const abx_namespace *ns);

/* Facts about the server a handler may describe (borrowed, valid during the call). */
typedef struct abx_server_facts {
    const char *workspace;        /* canonical */
    int64_t started_ms;           /* wall clock of the start */
    const char *listen_host;      /* as configured */
    int port;                     /* the listener's port (0: in-process only) */
    int terminal_port;            /* 0 when the terminal listener is off */
    bool tls;                     /* the listener speaks https */
    int64_t request_max_bytes, upload_max_bytes;
    int64_t kernel_idle_ms;       /* limits.kernel_idle */
    int connections;              /* the connection limit */
    int open_connections;         /* now */
    char *const *system_env;      /* variables system.env.get may reveal */
    size_t n_system_env;
    int64_t dynamic_tool_ttl_ms;  /* limits.dynamic_tool_ttl */
    int64_t browser_idle_ms;      /* limits.browser_idle */
    int browsers;                 /* limits.browsers (per principal) */
} abx_server_facts;
void abx_ctx_server_facts(const abx_ctx *ctx, abx_server_facts *out);

/* ---- documents (discovery), cut to the caller's view ---- */

/* The caller's catalog or OpenAPI text (without "servers"); borrowed for the call. NULL on OOM. */
const char *abx_ctx_document(abx_ctx *ctx, abx_doc kind, size_t *len);
/* The op id or alias resolves to, when it is mounted for the caller; else NULL. */
const abx_op *abx_ctx_visible_op(const abx_ctx *ctx, const char *id);
/* The namespaces the caller has an op mounted in, in registry order (owned array). */
json_t *abx_ctx_visible_namespaces(const abx_ctx *ctx);
/* The Prometheus text of the server's metrics; caller frees with abx_free. NULL on OOM. */
char *abx_ctx_metrics_text(abx_ctx *ctx, size_t *len);
/* explain's trace of op with args for principal (NULL: the caller), under the policy in
 * force for this call (owned). */
json_t *abx_ctx_explain(const abx_ctx *ctx, const char *principal, const char *op, const json_t *args);

/* ---- server-wide operations a namespace exists to offer ---- */

/* approvals.*: the held calls the caller may see (approver: all), one of them, or a
 * decision by the caller. get and decide fill the reply. */
json_t *abx_ctx_approvals_list(abx_ctx *ctx, bool approver);
abx_err abx_ctx_approval_get(abx_ctx *ctx, const char *id, bool approver, abx_reply *r);
abx_err abx_ctx_approval_decide(abx_ctx *ctx, const char *id, bool approve, const char *reason, abx_reply *r);
/* approvals.stream: a handle on the held calls that a stream's reader may ask after the
 * handler returned (the server outlives every stream: its listener waits for them). */
typedef struct abx_approvals_watch abx_approvals_watch;
abx_approvals_watch *abx_ctx_approvals_watch(abx_ctx *ctx);
json_t *abx_approvals_watch_list(abx_approvals_watch *w, const char *principal, bool approver);
/* system.policy.reload: re-read the config through the reload the server installed at
 * start. 0 or -1 (diags say why). */
int abx_ctx_reload(abx_ctx *ctx, abx_diags *diags);

/* ---- calls a handler makes later, on its caller's behalf (kernels' host.* calls) ----
 * A host is the server seen from a handler that outlives its request: it can run a call
 * through the whole pipeline as a principal, in process (door `kernel`), and find a
 * namespace's state. Valid while the server lives; the pointer is opaque. */
typedef struct abx_host abx_host;
abx_host *abx_ctx_host(abx_ctx *ctx);
/* op with args (borrowed, may be NULL) as principal through door "kernel", its ledger
 * group linked to group (0: none). The HTTP status; *body (owned) the result or the
 * error envelope. */
int abx_host_call_kernel(abx_host *h, const char *principal, const char *op, const json_t *args, uint64_t group,
                         json_t **body);
void *abx_host_ns_state(abx_host *h, const abx_namespace *ns);

/* ---- untrusted results and url scopes (browser.*) ---- */

/* The url patterns of the statement that admitted the call (borrowed for the call; *n 0
 * when it has none). */
const char *const *abx_ctx_url_scope(const abx_ctx *ctx, size_t *n);
/* Pass an untrusted result through the server's screening hooks (abx_server_add_screen),
 * in order: ABX_OK, or the first hook's refusal with why. */
abx_err abx_ctx_screen(abx_ctx *ctx, json_t *result, char *why, size_t whylen);
/* ---- dynamic tools (tools.*, issue 23) ---- */

/* The server's overlay of dynamic tools. */
abx_overlay *abx_ctx_overlay(abx_ctx *ctx);
/* The caller as the overlay sees it: principal and roles (borrowed for the call). */
void abx_ctx_dyn_who(const abx_ctx *ctx, abx_dyn_who *who);
/* The session the call came in (an MCP conversation), or NULL: a tool defined without a
 * ttl lives as long as it. */
const char *abx_ctx_session(const abx_ctx *ctx);

/* A structured log line (log.c) with a request id (abx_ctx_request_id) or NULL. */
void abx_log(const char *level, const char *request_id, const char *fmt, ...) __attribute__((format(printf, 3, 4)));

/* ---- lazy install and the agents section (install_step.c) ---- */
/* Whether the requirement is installed: its program and its folder (to grant it read). */
bool abx_ctx_installed(abx_ctx *ctx, const char *name, char *program, size_t plen, char *folder, size_t flen);
/* Step 8's install for a requirement a handler found it needs (a generic op whose
 * adapter it chose): ABX_OK, or install.not_allowed / install.failed set on the reply. */
abx_err abx_ctx_require(abx_ctx *ctx, const char *name);
/* The config's agents: section (borrowed for the call), or NULL. */
const json_t *abx_ctx_agents_config(abx_ctx *ctx);
/* Step 7 for another op (the adapter op a generic agents call chose) with args. */
void abx_ctx_decide_op(const abx_ctx *ctx, const char *op_id, const json_t *args, abx_decision *d);

#endif
