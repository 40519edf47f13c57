/* pipeline.h — the request value every front door builds, the reply it gets back,
 * the server value, and dispatch(): steps 1–10 of the spec in one function.
 * Front doors (HTTP REST/RPC, in-process calls, batch, MCP) fill an
 * abx_request and call abx_dispatch; nothing reaches a handler any other way. */
#ifndef ABX_PIPELINE_PIPELINE_H
#define ABX_PIPELINE_PIPELINE_H

#include "pipeline/ctx.h"
#include "config/config.h"
#include "core/core.h"
#include "core/util.h"
#include "http/http.h"
#include "http/websocket.h"
#include "policy/policy.h"
#include "policy/paths.h"
#include "sandbox/jail.h"
#include "sandbox/procs.h"
#include "ledger/ledger.h"
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>

/* Who a call came through (core/doors.def: the ledger and the logs name it). */
typedef enum abx_door {
#define ABX_DOOR(id, name, summary) ABX_DOOR_##id,
#include "core/doors.def"
#undef ABX_DOOR
    ABX_DOOR__COUNT
} abx_door;

/* A step's result: go on to the next step, the request is answered (done), it is held
 * for an approver (held), or it failed (the reply holds the error). Every exit is
 * audited by step 10 (abx_audit), which the door or the in-process caller runs. */
typedef enum abx_step { ABX_STEP_NEXT, ABX_STEP_DONE, ABX_STEP_HELD, ABX_STEP_FAIL } abx_step;
typedef struct abx_ext abx_ext; /* ext/ext.h: the server owns it; the pipeline only holds it */
typedef struct abx_approval abx_approval;
typedef struct abx_approvals abx_approvals;
const char *abx_door_name(abx_door d);

struct abx_reply {
    int status;                /* 0 = from the error, else 200 */
    abx_err err;
    char *message;             /* owned; error message */
    json_t *details;           /* owned */
    json_t *body;              /* owned; JSON result */
    abx_stream_read_fn stream_read; /* streamed result; stream_state owned (stream_free) */
    void *stream_state;
    void (*stream_free)(void *);
    const abx_ws_ops *ws_ops;  /* WebSocket result: the transport upgrades and runs it */
    void *ws_state;            /* owned through ws_ops->free_fn */
    char *raw;                 /* bytes result from memory: owned */
    size_t raw_len;
    int fd;                    /* bytes result: owned fd, -1 none */
    uint64_t offset, length;
    const char *content_type;  /* static or borrowed for the request */
    char allow[64];            /* Allow header for 405 */
    json_t *headers;           /* owned: extra response headers {name: value} */
    int retry_after;           /* seconds, for 429 */
    bool protocol_body;        /* body is the door's own protocol document (MCP's JSON-RPC), rendered
                                  as is even with err set; a NULL body then means no body at all */
};

/* Free what a reply holds and make it an empty one (status 0, no fd). */
void abx_reply_reset(abx_reply *rep);

/* The handler's context (pipeline/ctx.h): opaque outside the pipeline. */
struct abx_ctx {
    struct abx_request *req;
};

typedef struct abx_metrics abx_metrics;

/* The front door's connection figures for /metrics, filled by the listener. */
typedef struct abx_conn_metrics {
    int open;                              /* connections open now */
    int unauthenticated;                   /* of those, not yet authenticated */
    int workers_busy;                      /* blocking calls running or queued on the worker pool */
    int streams;                           /* streamed replies being pumped */
    unsigned long long opened, closed;     /* since start */
    unsigned long long refused_address;    /* refused at accept: limits.connections_per_address */
    unsigned long long refused_busy;       /* answered 503 request.busy (connections or workers full) */
    unsigned long long closed_slow;        /* closed: request line and headers not in within read_timeout */
    unsigned long long closed_timeout;     /* closed by the read timeout in a request (slow body) */
    unsigned long long aborted;            /* the client went away before its reply was sent */
} abx_conn_metrics;
typedef struct abx_auth_limiter abx_auth_limiter;

/* The legacy command registry (POST /commands/{name}, GET /commands): the i-th
 * declarative command's op id (custom.<mangled>) with its original name in *name, or
 * NULL past the last. ext answers it; the server installs it (s->commands). */
typedef const char *(*abx_command_at_fn)(void *ud, size_t i, const char **name);

struct abx_server {
    json_t *default_net;        /* owned: --net for the embedded default's preset, or NULL */
    abx_registry *reg;          /* owned child registry */
    abx_router *router;         /* owned, built at start */
    abx_config cfg;             /* owned */
    abx_server_opts opts;
    char *workspace;            /* owned, canonical */
    char *token_path;           /* owned; the embedded default's token file, or NULL */
    char token_sha256_hex[65];  /* embedded default token hash */
    char token_plain[65];       /* the embedded default token itself, kept only while the e2b
                                   door is configured (its pre-signed URLs hash it); else "" */
    pthread_mutex_t snap_mu;    /* guards load+ref of snap only */
    abx_policy *snap;           /* current policy snapshot (one reference held) */
    void *mhd;                  /* struct MHD_Daemon * */
    void *mhd_terminal;         /* the terminal listener (WebSocket ops only), or NULL */
    void *mhd_e2b;              /* the E2B envd listener (door e2b), or NULL */
    void *mhd_e2b_interp;       /* the E2B code-interpreter listener (door e2b), or NULL */
    int e2b_port;               /* 0 when off */
    void *mhd_sandboxd;         /* the sandboxd REST listener (door sandboxd), or NULL */
    void *sandboxd_grpc;        /* the sandboxd gRPC listener (server/sandboxd_grpc.c), or NULL */
    int sandboxd_rest_port, sandboxd_grpc_port; /* 0 when off */
    int port;
    int terminal_port;          /* 0 when the terminal listener is off */
    atomic_int conns;           /* open connections */
    /* the listener's (server/listener.c): connection accounting, the worker pool and the
     * stream pumps, and its counters; conn_metrics fills /metrics' connection figures */
    void *conn_table, *workers, *pumps;
    atomic_ullong refused_busy, closed_timeout, aborted;
    void (*conn_metrics)(abx_server *s, abx_conn_metrics *out);
    abx_metrics *metrics;       /* owned */
    abx_auth_limiter *limiter;  /* owned */
    abx_procs *procs;           /* owned: every process abx started, and the sandbox */
    abx_ledger *ledger;         /* owned; NULL when disabled */
    abx_ext *ext;               /* owned: custom:, plugins, Python workers (freed after the registry) */
    char *ledger_path;          /* owned */
    pthread_mutex_t flood_mu;   /* aggregation of unauthenticated/unmounted floods */
    struct { char key[80]; int64_t minute; uint64_t count; } flood[64];
    char runtime_dir[64];       /* private TMPDIRs live below it (the process manager makes them) */
    struct { const abx_namespace *ns; void *state; } ns[32]; /* each namespace's state (owned) */
    size_t n_ns;
    const abx_op_def *jail_checked[16]; /* namespaces' ops decided without path lookups */
    size_t n_jail_checked;
    struct {                    /* installed by the server with ext: the legacy command registry */
        abx_command_at_fn fn;   /* NULL: no declarative commands */
        void *ud;
    } commands;
    struct {                    /* installed by the server at start: re-read the config (abx_ctx_reload) */
        int (*fn)(void *ud, abx_diags *diags);
        void *ud;
    } reload;
    abx_approvals *approvals;   /* owned: held calls */
    struct { abx_policy_hook fn; void *udata; } hooks[16]; /* C policy hooks (veto or narrow) */
    int n_hooks;
    struct { abx_screen_hook fn; void *udata; } screens[8]; /* C screening hooks (untrusted results) */
    int n_screens;
    struct abx_idem *idem;      /* owned: Idempotency-Key results */
    struct abx_mcp *mcp;        /* owned: MCP sessions and the tools/list cache */
    struct abx_tickets *tickets; /* owned: single-use WebSocket tickets (tickets.c) */
    bool no_listen;             /* in-process only (abx mcp over stdio): start opens no socket */
    int64_t started_ms;
    bool started;
    char version_header[96];    /* "abx/0.1.0 catalog=1" */
    char keepalive_header[32];  /* "timeout=N": the listener's idle timeout, set when it starts */
    struct abx_installer *installer; /* owned: lazy install (install_step.c), made at start */
    char *install_dir;          /* owned: where requirements are installed */
    struct abx_overlay *overlay; /* owned: dynamic tools (core/dyndef.h), consulted after the registry */
};

/* A transport's request-header lookup: the value of header name, or NULL. The listener
 * installs one on the requests it builds; the pipeline never names the transport. */
typedef const char *(*abx_header_fn)(void *ud, const char *name);
/* A transport's walk over every request header (abx_ctx_headers_each). */
typedef void (*abx_headers_each_fn)(void *ud, int (*visit)(void *vud, const char *name, const char *value),
                                    void *vud);

typedef struct abx_request {
    abx_server *server;         /* borrowed */
    abx_arena *arena;           /* owned; freed with the request */
    char id[40];
    abx_door door;
    int64_t start_us;
    /* transport input (borrowed from the transport or the arena) */
    const char *method;
    const char *path;           /* path part of the target, validated by step 0 */
    size_t path_len;
    const char *query;          /* raw query (after '?'), or NULL */
    size_t query_len;
    abx_buf body;               /* request body, capped */
    bool has_body;
    const char *content_type;
    const char *bearer;         /* Authorization: Bearer value */
    const char *x_token;        /* X-Access-Token value */
    bool auth_bad_scheme;       /* Authorization present but not Bearer */
    const char *client;         /* client address for rate limits and logs */
    const char *session;        /* the door's session (abx_ctx_session), or NULL */
    int conn_fd;                /* the client's socket (HTTP), -1 otherwise: cancellation checks */
    atomic_bool *cancel;        /* borrowed, or NULL: set by the door to cancel the call (MCP) */
    const char *last_event_id;  /* Last-Event-ID header (resumable streams) */
    abx_header_fn header_fn;    /* the transport's header lookup (abx_ctx_header); NULL: no headers */
    void *header_ud;            /* its argument (the HTTP listener's connection), borrowed */
    abx_headers_each_fn headers_each; /* the walk over all headers (same argument); NULL: none */
    const char *ws_key;         /* Sec-WebSocket-Key, when the request asks for an upgrade */
    bool ws_upgrade;            /* Upgrade: websocket and Connection: upgrade */
    bool terminal_listener;     /* arrived on the terminal listener */
    int ticket_target;          /* authenticated by a WebSocket ticket: the terminal it opens; -1 not */
    bool e2b_listener;          /* arrived on the E2B envd listener (door e2b) */
    int port_origin;            /* arrived on a port's own origin (Host p<port>.<name>): that
                                   port, its path rewritten under /ports/<port>/; else 0 */
    const char *cookie;         /* Cookie header, on a port origin (its session) */
    const char *origin_target;  /* on a port origin: the path and query as the browser sent them */
    size_t origin_target_len;
    bool sandboxd_listener;     /* arrived on the sandboxd REST listener (door sandboxd) */
    const char *traceparent;    /* W3C trace context a door received (sandboxd), in the ledger */
    uint64_t group_id;          /* ledger group, once recorded durably (mutating calls) */
    abx_approval *approved;     /* the approval this run executes (door approval), borrowed */
    int prefer_wait;            /* Prefer: wait=N seconds (held calls) */
    const char *idem_key;       /* Idempotency-Key header */
    bool idem_owner;            /* this request owns the key's pending entry */
    uint64_t batch_group;       /* the batch this call belongs to, 0 none */
    bool lexical;               /* step 7 decided its paths as written (abx_decide_lexical) */
    bool recanon;               /* ... and a lookup of one failed: decide again, run again */
    struct {
        abx_body_chunk_fn chunk;
        abx_body_end_fn end;
        void (*free_fn)(void *);
        void *state;            /* owned through free_fn */
        uint64_t received;
    } sink;
    bool trusted_principal;     /* in-process: principal given by id, no token */
    const char *principal_name; /* in-process principal id (NULL = anonymous) */
    const char *op_name;        /* RPC/in-process: the op id or alias asked for; legacy: the command name */
    const json_t *args_in;      /* in-process: the arguments (borrowed) */
    /* state */
    abx_policy *policy;         /* one reference, taken at step 1 */
    int slot;                   /* principal slot, -1 before step 3 */
    bool routed;                /* the door table ran (doors/doors.c: abx_doors_route) */
    void (*door_run)(struct abx_request *r); /* set by the door table: the front door's handler; NULL: op steps */
    enum abx_route_result route;
    abx_route_match match;
    const abx_op *op;
    size_t op_index;
    json_t *args;               /* owned, validated */
    abx_decision decision;
    abx_ctx ctx;
    abx_reply reply;
} abx_request;

/* Create a request (arena, id, start time; request.c). NULL on OOM. */
abx_request *abx_request_new(abx_server *s, abx_door door);
void abx_request_free(abx_request *r);
/* Step 2 for an op's own HTTP binding (r->route, r->match): the trie router. */
void abx_route_op(abx_request *r);
/* Steps 1 (the policy snapshot) and 3 (credentials → principal). */
abx_step abx_pipeline_front(abx_request *r);
/* Steps 4 (resolve) to 9 (run) on r->op_name, or on r->match for the HTTP door. */
abx_step abx_pipeline_op(abx_request *r);
/* In-process calls (trusted principal): steps 1–10; the reply is in r->reply. The
 * front doors (HTTP) enter through doors/doors.h instead, which runs the same steps. */
void abx_dispatch(abx_request *r);
/* Steps 1–9 without the audit (in-process). For streamed bodies the transport then
 * feeds the sink (abx_body_feed), finishes it (abx_body_end) and audits. */
void abx_dispatch_begin(abx_request *r);
/* Step 8's ledger part (audit.c): the admitted event (durable for mutating calls, before
 * the handler runs); ledger.unavailable when it cannot be written. */
abx_err abx_audit_admission(abx_request *r);
bool abx_body_wanted(const abx_request *r);
abx_err abx_body_feed(abx_request *r, const void *data, size_t len);
void abx_body_end(abx_request *r);

/* Error reply helper used by the transport's step-0 rejections too. */
void abx_fail(abx_request *r, abx_err e, const char *fmt, ...) __attribute__((format(printf, 3, 4)));
/* Render the reply's JSON body (error envelope or result); caller frees. */
char *abx_reply_render(const abx_reply *rep, size_t *len);
int abx_reply_http_status(const abx_reply *rep);
/* Step 10: log line and metrics for a finished request. */
void abx_audit(abx_request *r);

/* explain (explain.c): steps 3–8 without running; trace JSON (owned) / text (caller frees) */
json_t *abx_explain(const abx_policy *p, const abx_registry *reg, const char *principal, const char *op_name,
                    const json_t *args);
char *abx_explain_text(const json_t *trace);

/* abx_server_new that hands config diagnostics to diags (check-config, explain). */
abx_server *abx__server_new(const abx_server_opts *opts, abx_diags *diags, char *errbuf, size_t errlen);
/* abx's home: $ABX_HOME, else ~/.abx (token, default ledger, ledger heads). Owned. */
char *abx_home_dir(void);
/* install_step.c: step 8's lazy install. The server's installer for dir (0 or -1); the
 * allow check before anything runs; the install. */
int abx_install_setup(abx_server *s, const char *dir, char *errbuf, size_t errlen);
abx_step abx_install_gate(abx_request *r);
abx_step abx_install_ensure_step(abx_request *r);
/* The ledger file a server on cfg uses (ledger.path, else .abx/ledger.db beside the
 * config, else ledger.db in abx's home; ledger-mcp.db for abx mcp). Owned. */
char *abx_ledger_default_path(const abx_config *cfg, bool mcp);

/* Compile the server's config into a policy snapshot (also runs the config's policy
 * tests); diags receive everything. NULL on errors. (server.c) */
abx_policy *abx_server_compile(abx_server *s, const abx_config *cfg, abx_diags *diags);
/* Re-read the config file and swap the snapshot atomically; on failure the old policy
 * stays and diags say why. 0 or -1. */
int abx_server_reload(abx_server *s, abx_diags *diags);

/* An internal call through the whole pipeline (in-process, batch, approved held calls; call.c):
 * the principal is trusted (already authenticated). Returns the HTTP status; *body owned. */
int abx_call_internal(abx_server *s, abx_door door, const char *principal, const char *op, const json_t *args,
                      uint64_t batch_group, abx_approval *approved, json_t **body);
/* The same for a door's outer client: its address and W3C traceparent recorded in the
 * call's ledger group (both copied; NULL none). */
int abx_call_internal_traced(abx_server *s, abx_door door, const char *principal, const char *op, const json_t *args,
                             const char *client, const char *traceparent, json_t **body);

/* An internal call whose reply the caller consumes itself (a door that relays streams):
 * steps 1–10 have run when it returns; the caller reads r->reply and frees the request
 * with abx_request_free. NULL when the server is not started or out of memory. */
typedef struct abx_call_in {
    abx_door door;
    const char *principal;      /* trusted (already authenticated) */
    const char *op;             /* id or alias */
    const json_t *args;         /* borrowed */
    atomic_bool *cancel;        /* borrowed, outlives the request; NULL none */
    int conn_fd;                /* the outer client's socket while the handler runs, -1 none */
    const char *client;         /* the outer client's address (copied), or NULL */
    const char *traceparent;    /* W3C trace context to record in the ledger (copied), or NULL */
    const char *session;        /* the door's session (an MCP conversation's tag; copied), or NULL */
} abx_call_in;
abx_request *abx_call_begin(abx_server *s, const abx_call_in *in);

/* What an approval binds besides its arguments (approval_bind.c): the content of the
 * regular files the call names, hashed when it is held and checked before it runs. */
typedef struct abx_bound_file {
    char *anchor;            /* directory a relative name was resolved against */
    char *name;              /* as the arguments spell it */
    char *canonical;         /* what it resolved to when held: shown to the approver */
    char *root;              /* the root it is read beneath (through the jail) */
    char sha256[65];
} abx_bound_file;
typedef struct abx_bound_files {
    abx_bound_file *v;
    size_t n;
    char **resolved;         /* how the cwd, each path parameter and argv word resolved when held */
    size_t n_resolved;
} abx_bound_files;
/* Hash every named file of an admitted call (step 8, before holding). ABX_OK, or an
 * error with msg (a file too large, too many files): nothing may be held then. */
abx_err abx_bind_files(abx_request *r, abx_bound_files *out, char *msg, size_t msglen);
/* Before the approved run (`now`: its request, decided at step 7): ABX_OK, or
 * ABX_E_APPROVAL_STALE with msg naming what changed. */
abx_err abx_bind_check(const abx_bound_files *b, abx_request *now, char *msg, size_t msglen);
json_t *abx_bound_files_json(const abx_bound_files *b);
void abx_bound_files_release(abx_bound_files *b);

/* approvals (approvals.c) */
bool abx_approval_matches(const abx_approval *x, const char *principal, const char *op, const json_t *args);
/* The approved run's step 8, after abx_approval_matches: do the files the call names
 * still hold what the approver saw? ABX_OK, or ABX_E_APPROVAL_STALE with msg (recorded
 * in the held call's ledger group). */
abx_err abx_approval_check_files(abx_approval *x, abx_request *now, char *msg, size_t msglen);
abx_approvals *abx_approvals_new(void);
void abx_approvals_free(abx_approvals *a);
/* Step 8 for a call that needs approval: hold it (202 or, with Prefer: wait, its result). */
abx_err abx_approval_hold(abx_request *r);
json_t *abx_approvals_list(abx_server *s, const char *principal, bool approver);
/* approvals.get / approvals.decide: fill the reply. */
abx_err abx_approval_get(abx_server *s, const char *id, const char *principal, bool approver, abx_reply *r);
abx_err abx_approval_decide(abx_server *s, const char *id, const char *approver, bool approve, const char *reason,
                            abx_reply *r);

/* idempotency (idempotency.c) */
struct abx_idem *abx_idem_new(void);
void abx_idem_free(struct abx_idem *i);
/* Step 8: a repeated key answers the first result; true when the reply is filled. */
bool abx_idem_begin(abx_request *r);
/* Step 10: remember the result of the key's first call. */
void abx_idem_end(abx_request *r);

/* single-use WebSocket tickets (tickets.c): issue → out (64 hex, NUL) bound to principal
 * and target, valid ttl_ms; redeem → the principal (malloc'd) and *target, once, or NULL
 * (unknown, used or expired). */
typedef struct abx_tickets abx_tickets;
abx_tickets *abx_tickets_new(void);
void abx_tickets_free(abx_tickets *t);
int abx_tickets_issue(abx_tickets *t, const char *principal, int target, int64_t ttl_ms, char out[65]);
char *abx_tickets_redeem(abx_tickets *t, const char *ticket, size_t len, int *target);
/* Step 3 on a port's own origin (port_origin.c): a ticket in the query (a 303 with the
 * session cookie) or the session cookie; DONE, NEXT or FAIL. */
abx_step abx_port_origin_auth(abx_request *r, int64_t now);
/* A session (many uses until ttl_ms) for target: a port origin's cookie (port_origin.c). */
int abx_tickets_session(abx_tickets *t, const char *principal, int target, int64_t ttl_ms, char out[65]);
/* The principal (owned) of a live session for exactly this target, or NULL. */
char *abx_tickets_session_check(abx_tickets *t, const char *session, size_t len, int target);

/* multi-call front doors (lanes.c): at most this many calls in one request */
#define ABX_FRONT_MAX_CALLS 100
typedef struct abx_lane_call {
    const char *op;           /* borrowed: op id or alias as asked */
    const json_t *args;       /* borrowed: the call's arguments, NULL = {} */
    int status;               /* out: HTTP status of the call */
    json_t *body;             /* out: result or error body; the caller owns it */
    int64_t start_us, end_us; /* out: when the call ran */
} abx_lane_call;
/* Run calls as front's principal, each through the whole pipeline under door, with its
 * own ledger group linked to front->group_id: each run of consecutive read-only
 * path-naming calls is a lane that runs in parallel, every other call a sequential
 * barrier; results in calls[i], in request order. */
void abx_lanes_run(abx_request *front, abx_door door, abx_lane_call *calls, size_t n);
/* The front door's own ledger group (front->group_id; stays 0 without a ledger): a
 * durable "received" event with the label as op, the call count and extra's members
 * (extra owned, may be NULL). */
void abx_front_door_record(abx_request *r, const char *label, size_t n_calls, json_t *extra);

/* namespace states (namespace.c): made for each namespace of the NULL-terminated list,
 * in order, once per server. 0, or -1 with err (then none is kept). */
int abx_ns_start(abx_server *s, const abx_namespace *const *list, char *err, size_t errlen);
void abx_ns_stop(abx_server *s);
/* ns's state on this server, or NULL (no state, or the server did not start it) */
void *abx_ns_state(abx_server *s, const abx_namespace *ns);
/* The started namespace whose name is op_id's first segment ("commands" for
 * "commands.sessions.exec"), or NULL. */
const abx_namespace *abx_ns_of(abx_server *s, const char *op_id);
/* def is one a started namespace lists in jail_checked (a pointer into its own tables:
 * no op registered from elsewhere under the same id is) */
bool abx_ns_jail_checked(const abx_server *s, const abx_op_def *def);

/* legacy commands (legacy.c): the op id of the declarative command called name (its
 * original name from the config), or NULL */
const char *abx_command_op_id(abx_server *s, const char *name);

/* snapshot capture (one reference; release with abx_policy_unref) */
abx_policy *abx_server_snapshot(abx_server *s);

/* metrics (metrics.c) */
abx_metrics *abx_metrics_new(size_t n_ops);
void abx_metrics_free(abx_metrics *m);
void abx_metrics_observe(abx_metrics *m, size_t op_index, bool has_op, int status, abx_err err, int64_t dur_us);
char *abx_metrics_render(abx_metrics *m, const abx_registry *reg, const abx_conn_metrics *cm, size_t *len);

/* auth failure limiter (auth.c) */
/* global_max: failures per minute from all addresses before unknown addresses wait */
abx_auth_limiter *abx_auth_limiter_new(int global_max);
void abx_auth_limiter_free(abx_auth_limiter *l);
/* Seconds to wait when this credential fingerprint or client is over the limit, else 0. */
int abx_auth_limited(abx_auth_limiter *l, const char *fingerprint, const char *client, int64_t now_ms);
void abx_auth_failed(abx_auth_limiter *l, const char *fingerprint, const char *client, int64_t now_ms);
/* A token was accepted from client: it keeps its own budget when failures flood in globally. */
void abx_auth_succeeded(abx_auth_limiter *l, const char *client, int64_t now_ms);

/* structured logs (log.c) */
void abx_log_request(const abx_request *r, int status, int64_t dur_us);
void abx_log_set_level(const char *level); /* "debug" | "info" | "warn" | "error" | "off" */

/* tests only: the ledger's hot events, direct and through jansson (audit.c) */
size_t abx__audit_hot_texts(const abx_request *r, int status, int64_t dur_us, char *direct[2], char *tree[2]);

/* ---- dynamic tools (dyn_overlay.c): the overlay consulted after the registry ---- */
/* Step 4: asked names the caller's dyn.<name> (tools.call mounted): r->op is its op. */
bool abx__dyn_resolve(abx_request *r, const char *asked);
/* The caller's visible dynamic tools as kind's entries (ABX_DOC_CATALOG, ABX_DOC_MCP_TOOLS,
 * else f's declarations); owned, NULL when none. */
json_t *abx__dyn_entries(abx_server *s, const abx_policy *p, int slot, int kind, abx_tool_format f);
/* A catalog or OpenAPI text with the caller's dyn.* ops (the arena's copy, or text itself). */
const char *abx__dyn_document(abx_request *q, abx_doc kind, const char *text, size_t *len);
/* Step 8, before a hold: a dyn.<name> call becomes tools.call {hash, args}, so that the
 * approval is bound to the content hash, not to a name a redefinition moves. */
void abx__dyn_bind_hash(abx_request *r);
/* dyn.<name> when the principal at slot may call it (tools.call mounted, visible), or NULL. */
const abx_op *abx__dyn_visible_op(abx_server *s, const abx_policy *p, int slot, const char *id);
/* A tool name dyn__<name> → the principal's dyn op, or NULL. */
const abx_op *abx__dyn_tool_op(abx_server *s, const char *principal, const char *tool);

#endif
