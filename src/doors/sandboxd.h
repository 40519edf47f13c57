/* sandboxd.h — the sandboxd door's inside (sandboxd*.c): kubernetes-sigs/agent-sandbox's
 * runtime interface (KEP-539.2, third_party/agent-sandbox) as alternate bindings of abx's
 * own ops. REST (filesystem/v1/filesystem.yaml) arrives on the sandboxd REST listener as
 * HTTP requests; gRPC (process/v1/process.proto and abx's own abx/sandboxd/v1) arrives on
 * the gRPC listener (server/sandboxd_grpc.c), which hands each call's request message to
 * a method here. Every method is one or more in-process calls through the pipeline as the
 * caller's principal, door sandboxd, with the router's traceparent in each ledger group. */
#ifndef ABX_DOORS_SANDBOXD_H
#define ABX_DOORS_SANDBOXD_H

#include "doors/doors.h"
#include <stdatomic.h>

/* gRPC status codes (grpc/doc/statuscodes.md) */
enum {
    SBX_OK = 0, SBX_CANCELLED = 1, SBX_UNKNOWN = 2, SBX_INVALID_ARGUMENT = 3, SBX_DEADLINE_EXCEEDED = 4,
    SBX_NOT_FOUND = 5, SBX_ALREADY_EXISTS = 6, SBX_PERMISSION_DENIED = 7, SBX_RESOURCE_EXHAUSTED = 8,
    SBX_FAILED_PRECONDITION = 9, SBX_ABORTED = 10, SBX_OUT_OF_RANGE = 11, SBX_UNIMPLEMENTED = 12,
    SBX_INTERNAL = 13, SBX_UNAVAILABLE = 14, SBX_DATA_LOSS = 15, SBX_UNAUTHENTICATED = 16,
};

/* One caller of the door: who, from where, under which trace. */
typedef struct sbx_caller {
    abx_server *server;
    const char *principal;      /* authenticated */
    const char *client;         /* address, or NULL */
    const char *traceparent;    /* W3C trace context from the router, or NULL */
} sbx_caller;

/* One in-process call (args stolen); the HTTP status, *body owned (result or abx's error). */
int abx_sbx_op(const sbx_caller *c, const char *op, json_t *args, json_t **body);
/* The abx error of a failed call's body (its code), else by status. */
abx_err abx_sbx_err_of(int status, const json_t *body, const char **msg);
/* gRPC status code / its canonical name ("PERMISSION_DENIED") for an abx error. */
int abx_sbx_grpc_code(abx_err e);
const char *abx_sbx_grpc_name(int code);
/* The principal a bearer credential (the Authorization value, "Bearer ...") names: the
 * token_file's principal when that is configured, else abx's own tokens. Owned, or NULL
 * (unknown or missing; *wait > 0: too many failures from client, retry in *wait s). */
char *abx_sbx_authenticate(abx_server *s, const char *authorization, const char *client, int *wait);
/* A traceparent value worth recording (version-traceid-parentid-flags, 55 chars). */
bool abx_sbx_traceparent_ok(const char *v);

/* ---- gRPC methods (sandboxd_proc.c, sandboxd_ctx.c) ---- */
/* What the transport gives a method: a way to send response messages and end the call. */
typedef struct sbx_sink {
    void *ud;
    /* one response message (its protobuf bytes); false when the call is gone */
    bool (*emit)(void *ud, const uint8_t *msg, size_t len);
    atomic_bool *cancelled;     /* the client went away (or the server stops) */
} sbx_sink;
/* A method's outcome: status and message for grpc-status / grpc-message. */
typedef struct sbx_status {
    int code;
    char message[256];
} sbx_status;
typedef void (*sbx_method_fn)(const sbx_caller *c, const uint8_t *req, size_t len, const sbx_sink *out,
                              sbx_status *st);
typedef struct sbx_method {
    const char *path;           /* "/process.v1.ProcessService/Start" */
    const void *in;             /* the request's ProtobufCMessageDescriptor */
    sbx_method_fn run;
} sbx_method;
/* Whether a request message decodes as the method's (the fuzz target's entry). */
bool abx_sbx_method_decodes(const sbx_method *m, const uint8_t *msg, size_t len);
/* grpc-message's percent-encoding (bytes outside 0x20..0x7e, and '%') into out. */
void abx_sbx_grpc_message_encode(const char *msg, char *out, size_t outlen);
/* The method for a :path, or NULL (UNIMPLEMENTED). */
const sbx_method *abx_sbx_method(const char *path, size_t len);
extern const sbx_method abx_sbx_proc_methods[]; /* sandboxd_proc.c, ends with a NULL path */
extern const sbx_method abx_sbx_ctx_methods[];  /* sandboxd_ctx.c */
/* Fail st with an abx error (status, body) from a failed op. */
void abx_sbx_fail(sbx_status *st, int status, const json_t *body);
void abx_sbx_fail_msg(sbx_status *st, int code, const char *msg);

#endif
