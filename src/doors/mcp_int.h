/* mcp_int.h — what the MCP core (mcp.c: sessions, tools/list, tools/call, one message)
 * shares with its two transports, mcp_http.c (Streamable HTTP at /mcp) and mcp_stdio.c
 * (abx mcp). src/doors only. */
#ifndef ABX_DOORS_MCP_INT_H
#define ABX_DOORS_MCP_INT_H

#include "doors/doors.h"
#include <stdatomic.h>

#define MCP_SESSIONS_MAX 256
#define MCP_PAGE 100                  /* tools per tools/list page */
#define MCP_RESULT_MAX (1u << 20)     /* bytes of a result kept for the model */
#define MCP_STDIO_CALLS_MAX 32        /* tools/call running at once on stdio */

/* JSON-RPC error codes */
#define RPC_PARSE_ERROR (-32700)
#define RPC_INVALID_REQUEST (-32600)
#define RPC_METHOD_NOT_FOUND (-32601)
#define RPC_INVALID_PARAMS (-32602)
#define RPC_INTERNAL (-32603)
#define RPC_SERVER_ERROR (-32000)     /* transport-level refusals (session, version, method) */

typedef struct inflight {
    json_t *id;                 /* owned: the request's JSON-RPC id */
    atomic_bool cancel;
    struct inflight *next;
} inflight;

struct abx_mcp_conv {
    char id[33];                /* Mcp-Session-Id (hex of 16 random bytes); "" when unlisted */
    char *principal;            /* owned */
    char version[16];           /* negotiated revision */
    int64_t used_ms;
    int refs;                   /* under abx_mcp.mu: the table's while listed, plus users' */
    inflight *calls;            /* under abx_mcp.mu */
    char tag[24];               /* "mcp-N": the session dynamic tools defined in it live as long as */
    struct abx_overlay *overlay; /* borrowed: ended with the conversation (abx_overlay_end_session) */
    _Atomic uint64_t dyn_gen;   /* the overlay's generation when its dynamic tools were last compared */
    char dyn_sig[65];           /* what its principal saw of them then (mcp_dyn.c); under abx_mcp.mu */
};

struct abx_mcp {
    pthread_mutex_t mu;         /* the session table, every conversation's refs and calls */
    abx_mcp_conv *sessions[MCP_SESSIONS_MAX]; /* one reference each */
    size_t n_sessions;
    struct abx_overlay *overlay; /* borrowed: the server's dynamic tools (abx_mcp_set_overlay) */
    uint64_t convs;              /* conversations made (tags) */
};

struct abx_mcp_call {
    abx_mcp *m;
    abx_mcp_conv *conv;         /* borrowed: the transport holds a reference */
    inflight *fl;               /* registered in conv->calls until the call is freed */
    abx_request *inner;         /* owned: the pipeline's request, its reply holds the stream */
    json_t *id;                 /* owned */
    json_t *token;              /* owned progress token, or NULL */
    abx_stream framing;         /* SSE, NDJSON, or anything else as bytes */
    int conn_fd;                /* the client's socket to watch for a hang-up, -1 none */
    abx_buf line;               /* a partial line of the stream */
    char event[64];             /* SSE: the current event's name */
    abx_buf data;               /* SSE: the current event's data */
    bool has_data;
    json_t *events;             /* owned: parsed events kept for the result */
    abx_buf bytes;              /* bytes streams: what is kept for the result */
    size_t kept;
    bool truncated, done, cancelled, failed;
    json_t *queue;              /* owned: progress notifications not handed out yet */
    int progress;
    abx_server *server;
    const abx_op *op;
    char *name;                 /* owned: the tool's name as asked (for "unknown tool") */
    json_t *args;               /* owned: the arguments passed to the pipeline */
    char *client;               /* owned copy for the worker, or NULL */
    int64_t deadline_ms;        /* a stream answers what it collected by then (0 = none) */
    size_t max_events, n_events;
    const char *ended_by;       /* "duration", "max_events"; NULL = the stream's end */
    /* a plain call on a worker thread (a progress token on a streaming transport) */
    bool threaded, worker_done, joined;
    pthread_t worker;
    pthread_mutex_t wmu;
    pthread_cond_t wcv;
    int worker_fd;
    int64_t interval_ms, started_ms, next_progress_ms;
};

/* Whether the negotiated revision has outputSchema and structuredContent (2025-06-18 on). */
bool abx__mcp_structured(const abx_mcp_conv *c);
void abx__mcp_conv_unref(abx_mcp *m, abx_mcp_conv *c);
void abx__mcp_session_end(abx_mcp *m, abx_mcp_conv *c);
abx_mcp_conv *abx__mcp_session_find(abx_mcp *m, const char *id, const char *principal);
bool abx__mcp_session_insert(abx_mcp *m, abx_mcp_conv *c);
bool abx__mcp_version_supported(const char *v);
json_t *abx__mcp_result(const json_t *id, json_t *result);
inflight *abx__mcp_inflight_add(abx_mcp *m, abx_mcp_conv *c, const json_t *id);
void abx__mcp_inflight_remove(abx_mcp *m, abx_mcp_conv *c, inflight *f);
int abx__mcp_utf8_prefix(const char *s, size_t max);
void abx__mcp_tools_call(const abx_mcp_in *in, const json_t *id, const json_t *params, abx_mcp_out *out);

/* mcp_dyn.c: list_changed for the dynamic tools a conversation's principal sees. */
void abx__mcp_dyn_seen(abx_server *s, abx_mcp_conv *c, const abx_policy *p, int slot);
json_t *abx__mcp_dyn_changed(abx_server *s, abx_mcp_conv *c);

#endif
