/* doors.h — the front doors: the paths through which calls arrive over HTTP besides
 * an op's own binding (core/doors.def lists them), and the protocol doors behind them
 * (batch, the LLM providers' tool formats, MCP, the legacy command listing). Doors call
 * the pipeline (pipeline/pipeline.h); the pipeline never calls a door. The listener
 * (server/listener.c) hands every HTTP request to abx_doors_begin. */
#ifndef ABX_DOORS_DOORS_H
#define ABX_DOORS_DOORS_H

#include "pipeline/pipeline.h"
#include <stdio.h>

/* ---- the door table (doors.c) ---- */

/* Step 2, idempotent: match the door table's FIRST rows, then the ops' own bindings,
 * then the LAST rows; sets r->door, r->door_run and r->op_name. The listener calls it
 * early (the busy slot and the body rules depend on the op). */
void abx_doors_route(abx_request *r);
/* Steps 1–9 for a request from a listener: route, authenticate, then the door's handler
 * (or the op steps). The caller then feeds a streamed body and audits (abx_audit). */
void abx_doors_begin(abx_request *r);
/* Steps 1–10 for a request whose body is read: the reply is in r->reply. */
void abx_doors_dispatch(abx_request *r);

/* batch (batch.c): POST /batch */
void abx_batch_run(abx_request *r);
/* GET /commands (batch.c's sibling front door): the caller's mounted declarative commands */
void abx_commands_list(abx_request *r);

/* The arguments a tool door (MCP, /tools/call) passes for op: commands.run and
 * commands.sessions.exec without `timeout` get the door's soft timeout (limits:
 * tool_soft_timeout), so a long command answers status running before an agent's client
 * gives up. A new reference (args copied), or NULL: use args as they are. */
json_t *abx_door_tool_args(const abx_server *s, const char *op_id, const json_t *args);
/* E2B (e2b*.c, docs/e2b.md): everything arriving on the envd listener */
void abx_e2b_envd(abx_request *r);
/* End the server's polled watchers (CreateWatcher) before it stops. */
void abx_e2b_watchers_stop(const abx_server *s);
/* One multipart/form-data part after *pos (POST /files): 1 a part, 0 the end, -1 malformed. */
int abx_e2b_multipart_next(const char *body, size_t len, const char *boundary, size_t *pos, abx_arena *a,
                           const char **filename, const char **data, size_t *dlen);

/* sandboxd (sandboxd*.c, docs/fleet.md): the REST listener's requests; its step 2 (the
 * pod's token → principal, traceparent); its target rule (%2F is a separator) */
void abx_sandboxd_rest(abx_request *r);
void abx_sandboxd_auth(abx_request *r);
bool abx_sandboxd_target_ok(const char *raw, size_t n);

/* LLM provider tool formats (toolcall.c): GET /tools, POST /tools/call */
void abx_tools_run(abx_request *r);
/* MCP (mcp.c): the Model Context Protocol, Streamable HTTP at /mcp and stdio (abx mcp).
 * The core handles one parsed JSON-RPC message for a conversation (an HTTP session or
 * the stdio connection); both transports and the fuzz target share it. */
typedef struct abx_mcp abx_mcp;           /* per server: sessions, tools/list cache */
typedef struct abx_mcp_conv abx_mcp_conv; /* one conversation */
typedef struct abx_mcp_call abx_mcp_call; /* a tools/call whose messages stream */
abx_mcp *abx_mcp_new(void);
void abx_mcp_free(abx_mcp *m);
/* The overlay whose session-bound dynamic tools end with each conversation. */
void abx_mcp_set_overlay(abx_mcp *m, struct abx_overlay *ov);
/* The HTTP door (POST/DELETE /mcp; GET answers 405): fills r->reply. */
void abx_mcp_http(abx_request *r);
/* Serve one conversation over newline-delimited JSON-RPC on in_fd/out until end of
 * input; principal is trusted. Logs go to stderr only. 0, or -1 on a read error. */
int abx_mcp_stdio(abx_server *s, const char *principal, int in_fd, FILE *out);

typedef struct abx_mcp_in {
    abx_server *server;
    abx_mcp_conv *conv;         /* borrowed for the message */
    bool can_stream;            /* the transport can send notifications before the result */
    int conn_fd;                /* the client's socket (hang-up cancels), -1 none */
    const char *client;         /* for logs and the ledger, or NULL */
} abx_mcp_in;
typedef struct abx_mcp_out {
    json_t *reply;              /* owned: the answer, or NULL (notification, client response) */
    abx_mcp_call *call;         /* owned: a streaming tools/call (abx_mcp_call_next), or NULL */
    bool cancelled;             /* the call was cancelled: stdio sends no answer */
    json_t *note;               /* owned: notifications/tools/list_changed to send before it, or NULL */
} abx_mcp_out;
/* Parse one message. NULL with *error (owned) set to the JSON-RPC error to answer when
 * it is not JSON (-32700) or not a single object (-32600: batch arrays are refused). */
json_t *abx_mcp_parse(const char *data, size_t len, json_t **error);
/* Handle one parsed message (borrowed) for in->conv. */
void abx_mcp_handle(const abx_mcp_in *in, const json_t *msg, abx_mcp_out *out);
/* The next message of a streaming call: a progress notification, or the final answer
 * (*final true; then free the call). NULL and not final: nothing yet (keep alive). */
json_t *abx_mcp_call_next(abx_mcp_call *c, bool *final);
bool abx_mcp_call_cancelled(const abx_mcp_call *c);
void abx_mcp_call_free(abx_mcp_call *c);
/* A conversation outside the session table (stdio, fuzzing); principal is copied. */
abx_mcp_conv *abx_mcp_conv_new(abx_mcp *m, const char *principal);
void abx_mcp_conv_free(abx_mcp *m, abx_mcp_conv *c);
/* Cancel every call in flight in the conversation (stdio end of input). */
void abx_mcp_conv_cancel_all(abx_mcp *m, abx_mcp_conv *c);
/* A JSON-RPC error answer (owned); id borrowed (NULL → null). */
json_t *abx_mcp_error(const json_t *id, int code, const char *message, abx_err abx_code);

#endif
