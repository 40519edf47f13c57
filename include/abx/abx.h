/* abx.h — the public C API of abx: declare operations, embed a server, call it.
 *
 * An operation is declared once, as a static abx_op_def next to its handler; the
 * built-in namespaces use exactly this declaration. The registry reads the tables,
 * freezes when a server starts, and everything else (routes, catalog, OpenAPI, MCP,
 * clients, docs) is generated from it.
 *
 * Ownership rules, used throughout:
 *   - "borrowed": valid for the duration of the call (or of the request for ctx).
 *   - "owned": the receiver must release it (json_decref for json_t, free() for memory).
 * JSON values are jansson's json_t. */
#ifndef ABX_ABX_H
#define ABX_ABX_H

#include <jansson.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

#define ABX_VERSION "0.1.0"
#define ABX_CATALOG_VERSION 1
#define ABX_API_FAMILY "agent-sandbox/2"

/* ---- error codes: one table, src/core/errors.def ---------------------------- */
typedef enum abx_err {
    ABX_OK = 0,
#define ABX_ERR(name, code, status, meaning) ABX_E_##name,
#include "errors.def"
#undef ABX_ERR
    ABX_E__COUNT
} abx_err;

const char *abx_err_code(abx_err e);    /* "files.not_found"; borrowed, static */
int abx_err_status(abx_err e);          /* HTTP status */
const char *abx_err_meaning(abx_err e); /* one-line meaning; static */
int abx_err_by_code(const char *code);  /* -1 when unknown */

/* ---- the declaration ---------------------------------------------------------- */
/* effects, types, kinds and streams: one table, vocab.def */
enum abx_effect_index {
#define ABX_EFFECT(id, name, doc) ABX_EFF__##id,
#include "vocab.def"
#undef ABX_EFFECT
    ABX_EFF__COUNT
};
enum abx_effect {
#define ABX_EFFECT(id, name, doc) ABX_EFF_##id = 1u << ABX_EFF__##id,
#include "vocab.def"
#undef ABX_EFFECT
};

typedef enum abx_type {
    ABX_T_NONE = 0,
#define ABX_TYPE(id, name, doc) ABX_T_##id,
#include "vocab.def"
#undef ABX_TYPE
    ABX_T__COUNT
} abx_type;

typedef enum abx_kind {
#define ABX_KIND(id, name, doc) ABX_KIND_##id,
#include "vocab.def"
#undef ABX_KIND
    ABX_KIND__COUNT
} abx_kind;

/* access kinds of a path parameter */
enum abx_access { ABX_ACC_READ = 1u << 0, ABX_ACC_WRITE = 1u << 1, ABX_ACC_DELETE = 1u << 2 };

/* bounds flags for abx_param.bounds */
enum { ABX_HAS_MIN = 1u << 0, ABX_HAS_MAX = 1u << 1 };

typedef struct abx_param {
    const char *name;
    abx_type type;
    abx_type item;                   /* element type for LIST and MAP */
    bool required;
    bool nullable;                   /* "optional T": null is accepted and means absent */
    const char *dflt;                /* default as JSON text ("0", "\"utf8\"", "true") */
    const char *doc;
    abx_kind kind;
    unsigned access;                 /* for ABX_KIND_PATH: ABX_ACC_* */
    const char *choices;             /* for ENUM: "utf8|base64" */
    int64_t min, max;                /* with .bounds: INT/NUMBER values (each item of a LIST of them);
                                        for a LIST of anything else, its length */
    unsigned bounds;
    const struct abx_param *fields;  /* for OBJECT (and LIST/MAP of OBJECT): {0}-terminated */
    const char *roots;               /* intrinsic jail of a path parameter: patterns joined by | */
} abx_param;

#define ABX_MIN(v) .min = (v), .bounds = ABX_HAS_MIN
#define ABX_RANGE(lo, hi) .min = (lo), .max = (hi), .bounds = ABX_HAS_MIN | ABX_HAS_MAX

/* limits an op honours (documented in the catalog, applied at admission) */
enum abx_limit_index {
#define ABX_LIMIT(id, name, doc) ABX_LIM__##id,
#include "vocab.def"
#undef ABX_LIMIT
    ABX_LIM__COUNT
};
enum abx_limit {
#define ABX_LIMIT(id, name, doc) ABX_LIM_##id = 1u << ABX_LIM__##id,
#include "vocab.def"
#undef ABX_LIMIT
};

typedef enum abx_stream {
#define ABX_STREAM(id, name, doc) ABX_STREAM_##id,
#include "vocab.def"
#undef ABX_STREAM
    ABX_STREAM__COUNT
} abx_stream;

typedef struct abx_ctx abx_ctx;
typedef struct abx_reply abx_reply;

/* A handler reads its validated arguments (borrowed) and fills the reply.
 * It returns ABX_OK or an error from the table (with abx_reply_error for a message). */
typedef abx_err (*abx_handler)(abx_ctx *ctx, const json_t *args, abx_reply *reply);

#define ABX_MAX_BINDINGS 8
#define ABX_MAX_ALIASES 4
#define ABX_MAX_INSTALL 4

typedef struct abx_op_def {
    const char *id;                          /* 2–5 dotted segments of [a-z][a-z0-9_]* */
    unsigned effects;                        /* ABX_EFF_*; 0 = undeclared → admin (lint warning) */
    const char *summary;
    const char *http[ABX_MAX_BINDINGS];      /* "GET /files/read"; the RPC binding always exists */
    const abx_param *params;                 /* {0}-terminated; NULL = none */
    const char *one_of;                      /* "command|argv": exactly one of these must be given */
    unsigned limits;                         /* ABX_LIM_* honoured */
    const char *group;
    const char *install[ABX_MAX_INSTALL];
    abx_stream stream;
    const char *result_content_type;         /* for bytes results */
    const char *since;
    const char *aliases[ABX_MAX_ALIASES];
    const char *deprecated;
    const char *errors;                      /* codes the handler itself may answer, space-separated
                                                ("files.not_found files.io"); the pipeline's own codes
                                                follow from the declaration. OpenAPI lists both. */
    bool requires_approval;
    bool raw_body;                           /* the request body is the op's data (uploads): streamed to
                                                a sink (abx_ctx_body_sink), other params from the query */
    bool raw_query;                          /* the query string and the body are the op's data
                                                (ports.proxy: abx_ctx_raw_query, abx_ctx_raw_body), not
                                                arguments, the body of any type up to
                                                limits.request_max_bytes; HTTP bindings only */
    abx_handler handler;
    void *udata;                             /* borrowed; handed to the handler via abx_ctx_udata */
    bool untrusted_result;                   /* the result carries outside content (a web page's words):
                                                marked "untrusted": true and passed to the screening hooks;
                                                the tool formats say so */
    const abx_param *result;                 /* the JSON result object's fields ({0}-terminated; .required:
                                                always present, .nullable: may be null); NULL = undeclared.
                                                Becomes the catalog's, OpenAPI's and MCP's result schema. */
    const abx_param *events;                 /* SSE ops: one entry per event name, ABX_T_OBJECT with the
                                                fields of its data (ABX_T_ANY: any JSON) */
} abx_op_def;

/* ---- handler context (borrowed for the request) --------------------------------- */
const char *abx_ctx_request_id(const abx_ctx *ctx);
const char *abx_ctx_principal(const abx_ctx *ctx);
const char *abx_ctx_op_id(const abx_ctx *ctx);
void *abx_ctx_udata(const abx_ctx *ctx);
/* Canonical admitted value of a path parameter (absolute, symlinks resolved), or NULL.
 * For a list-of-paths parameter this is element 0; abx_ctx_path_at gives element i. */
const char *abx_ctx_path(const abx_ctx *ctx, const char *param);
const char *abx_ctx_path_at(const abx_ctx *ctx, const char *param, size_t index);
/* The canonical admitted argv of a command parameter (program resolved by the command
 * scope; NULL-terminated, borrowed for the request), or NULL when the op has none.
 * *n (may be NULL) receives its length. Run this, never the raw argument. */
char *const *abx_ctx_argv(const abx_ctx *ctx, size_t *n);
/* Open a canonical admitted path through the jail (openat2 RESOLVE_BENEATH from the
 * root's dirfd). flags as for open(2). Returns an fd (caller closes) or -errno. */
int abx_ctx_open(abx_ctx *ctx, const char *param, int flags, unsigned mode);
/* Whether the call may show a canonical path it came across while walking a directory
 * (list, search, find): not denied, not in a protected area, and readable under a
 * statement that admitted the call. Walks must skip what this refuses. */
bool abx_ctx_path_visible(abx_ctx *ctx, const char *canonical);
/* Effective limit (min of op default, statements and request), or -1 when unlimited. */
int64_t abx_ctx_limit(const abx_ctx *ctx, enum abx_limit which);
/* Absolute deadline in CLOCK_MONOTONIC milliseconds, or 0 for none. */
int64_t abx_ctx_deadline_ms(const abx_ctx *ctx);
/* Structured log line tagged with the request id, principal and op. */
void abx_ctx_log(abx_ctx *ctx, const char *level, const char *fmt, ...) __attribute__((format(printf, 3, 4)));

/* ---- replies ----------------------------------------------------------------------- */
/* Set the JSON result (steals the reference). Status defaults to 200. */
void abx_reply_json(abx_reply *r, json_t *body);
void abx_reply_status(abx_reply *r, int http_status);
/* Error with a message (printf-style) and optional details (steals the reference).
 * Returns the code so a handler can `return abx_reply_error(...)`. */
abx_err abx_reply_error(abx_reply *r, abx_err code, json_t *details, const char *fmt, ...)
    __attribute__((format(printf, 4, 5)));
/* Bytes result copied from memory (e.g. text/plain), with its content type. */
void abx_reply_bytes(abx_reply *r, const void *data, size_t len, const char *content_type);
/* Bytes result from an open fd (the reply takes ownership), from offset for length bytes. */
void abx_reply_fd(abx_reply *r, int fd, uint64_t offset, uint64_t length, const char *content_type);

/* Streamed result (SSE, NDJSON, bytes of unknown length). read() blocks until it can
 * return bytes (> 0), 0 at the end, -1 on error; it should return at least every ~2 s
 * (an SSE comment keeps the connection alive). free_fn runs when the stream ends or the
 * client goes away (cancel what is still running there). The reply owns state. */
typedef long (*abx_stream_read_fn)(void *state, char *buf, size_t max);
void abx_reply_stream(abx_reply *r, const char *content_type, abx_stream_read_fn read_fn, void *state,
                      void (*free_fn)(void *state));
/* Streamed request bodies (stream=bytes ops with a body, e.g. uploads): the handler
 * runs before the body is read and registers a sink; the transport then hands it the
 * body in chunks as they arrive (bounded memory), calls end() once to complete the
 * reply, and free_fn() always. A chunk() error answers at once and stops reading. */
typedef abx_err (*abx_body_chunk_fn)(void *state, const void *data, size_t len, abx_reply *r);
typedef abx_err (*abx_body_end_fn)(void *state, abx_reply *r);
void abx_ctx_body_sink(abx_ctx *ctx, abx_body_chunk_fn chunk, abx_body_end_fn end, void (*free_fn)(void *state),
                       void *state);

/* A request header (HTTP front door), or NULL (also for in-process calls). */
const char *abx_ctx_header(const abx_ctx *ctx, const char *name);
/* The request's raw query string (after '?', not decoded) for raw_query ops, or NULL. */
const char *abx_ctx_raw_query(const abx_ctx *ctx, size_t *len);
/* The request's raw body for raw_query ops on HTTP (any content type, bounded by
 * limits.request_max_bytes), or NULL when it has none. */
const void *abx_ctx_raw_body(const abx_ctx *ctx, size_t *len);
/* The request's HTTP method ("GET", "POST"...), or NULL off HTTP (RPC, in-process). */
const char *abx_ctx_method(const abx_ctx *ctx);
/* Every request header in order (HTTP front door; none for in-process calls): visit
 * returns non-zero to stop. */
typedef int (*abx_header_visit_fn)(void *ud, const char *name, const char *value);
void abx_ctx_headers_each(const abx_ctx *ctx, abx_header_visit_fn visit, void *ud);
/* Add a response header (Content-Range, Content-Disposition...). Values are copied. */
void abx_reply_header(abx_reply *r, const char *name, const char *value);
/* The same, kept beside an earlier value of that header (Set-Cookie given twice). */
void abx_reply_header_add(abx_reply *r, const char *name, const char *value);

/* The Last-Event-ID header of a resumed stream, or NULL. */
const char *abx_ctx_last_event_id(const abx_ctx *ctx);
/* True when the caller has gone away (HTTP client disconnected). Long handlers poll it. */
bool abx_ctx_cancelled(abx_ctx *ctx);

/* ---- registry ------------------------------------------------------------------------ */
typedef struct abx_registry abx_registry;

/* The process-wide registry holding the built-ins (borrowed; lives for the process). */
abx_registry *abx_registry_default(void);
abx_registry *abx_registry_new(abx_registry *parent); /* copy-on-write child; caller frees */
void abx_registry_free(abx_registry *reg);
/* Register a {0}-terminated table of ops (borrowed: must outlive the registry).
 * Returns 0, or -1 with a message naming the offending id in errbuf. After freeze
 * it fails with "RegistryFrozen: ...". */
int abx_registry_add(abx_registry *reg, const abx_op_def *ops, char *errbuf, size_t errlen);
void abx_registry_freeze(abx_registry *reg);
bool abx_registry_frozen(const abx_registry *reg);

/* ---- plugins ------------------------------------------------------------------------------- */
/* A plugin is a shared object named in the config (load: ["name"] → <plugin_dir>/name.so).
 * It exports the registration function below under this exact name, and may export a
 * NULL-terminated list of install requirements checked before it registers:
 *   const char *const abx_plugin_requires[] = {"program:ruff", "file:/etc/x.conf", "abx:0.1", NULL};
 * Its op tables must be static (they are borrowed for the life of the server). */
typedef int (*abx_plugin_register_fn)(abx_registry *reg, char *errbuf, size_t errlen);
int abx_plugin_register(abx_registry *reg, char *errbuf, size_t errlen);

/* ---- server ---------------------------------------------------------------------------- */
typedef struct abx_server abx_server;

typedef struct abx_server_opts {
    const char *config_path;  /* NULL = embedded default (preset workspace on .workspace) */
    const char *listen;       /* "127.0.0.1:8080"; overrides the config; port 0 = any */
    const char *workspace;    /* default: the current directory */
    bool explain_denials;     /* add did-you-mean suggestions to 404s (development) */
    bool quiet;               /* no banner on stdout */
    abx_registry *registry;   /* parent registry (default: abx_registry_default()) */
    const char *net;          /* embedded default only: the preset's network, "on", "off" or
                                 "allow:HOST,..." (abx serve --net); NULL = off */
} abx_server_opts;

/* Create a server: a child registry of opts->registry, config loaded and linted.
 * Returns NULL with a message in errbuf. Ops can be added with abx_server_registry(). */
abx_server *abx_server_new(const abx_server_opts *opts, char *errbuf, size_t errlen);
abx_registry *abx_server_registry(abx_server *s);
/* Freeze the registry, compile the policy, open the listener(s). 0 or -1 (errbuf). */
int abx_server_start(abx_server *s, char *errbuf, size_t errlen);
int abx_server_port(const abx_server *s); /* the bound port after start */
/* A policy hook (step 7, after the statements admitted a call): return ABX_OK to let it
 * through — lowering entries of limits[] (indexed by bit position of enum abx_limit,
 * -1 = unlimited) narrows the call, abx keeps the smaller value — or an error code from
 * the table to veto it, with `why` as the message. A hook never widens: it only sees
 * calls the statements admitted. Add hooks before abx_server_start; at most 16. */
typedef abx_err (*abx_policy_hook)(void *udata, const char *principal, const char *op_id, const json_t *args,
                                   int64_t limits[ABX_LIM__COUNT], char *why, size_t whylen);
int abx_server_add_hook(abx_server *s, abx_policy_hook hook, void *udata, char *errbuf, size_t errlen);
/* A screening hook: sees the JSON result of an op declaring untrusted_result (a page's
 * content, snapshot, evaluation) before it is answered. It may change the result in place
 * (redact, annotate) and returns ABX_OK, or an error code from the table (with why) to
 * withhold it. Add before abx_server_start; at most 8. */
typedef abx_err (*abx_screen_hook)(void *udata, const char *principal, const char *op_id, json_t *result, char *why,
                                   size_t whylen);
int abx_server_add_screen(abx_server *s, abx_screen_hook hook, void *udata, char *errbuf, size_t errlen);
void abx_server_stop(abx_server *s);
/* Stop on a signal and free: confined processes are sent TERM at once, and past the
 * config's limits.shutdown_grace (10 s) whatever is left is killed and the process exits
 * (_exit), whatever connection is still open. */
void abx_server_shutdown(abx_server *s);
void abx_server_free(abx_server *s);
/* Run an op in-process through the same pipeline (steps 4–10). principal NULL =
 * anonymous. args is borrowed. Returns the HTTP status; *body (owned) is the reply. */
int abx_server_call(abx_server *s, const char *op_id, const char *principal, const json_t *args, json_t **body);

#ifdef __cplusplus
}
#endif
#endif
