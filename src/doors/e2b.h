/* e2b.h — the E2B door's inside (e2b*.c): envd's protocols (third_party/e2b-envd) as
 * alternate bindings of abx's own ops. Every envd call becomes one or more in-process
 * calls through the pipeline as the caller's principal, under door e2b (docs/e2b.md). */
#ifndef ABX_DOORS_E2B_H
#define ABX_DOORS_E2B_H

#include "doors/doors.h"
#include <protobuf-c/protobuf-c.h>

/* ---- protobuf messages <-> the proto3 JSON mapping (e2b_pbjson.c), by descriptor ---- */
/* The JSON form of a message (lowerCamelCase names, 64-bit integers as strings, bytes as
 * base64, enums by name, Timestamp as RFC 3339); defaults are left out. Owned. */
json_t *abx_e2b_pb_to_json(const ProtobufCMessage *m);
/* A message from its JSON form (either spelling of a field name; unknown names are
 * ignored); NULL with err filled when a value has the wrong type. Free with
 * protobuf_c_message_free_unpacked(m, NULL). */
ProtobufCMessage *abx_e2b_pb_from_json(const ProtobufCMessageDescriptor *d, const json_t *j, char *err, size_t errlen);

/* ---- one Connect call (e2b.c) ---- */
typedef struct e2b_call {
    abx_request *r;             /* the outer request (its reply is the answer); NULL in a stream */
    abx_server *server;
    const char *principal;      /* the authenticated caller */
    bool proto;                 /* binary protobuf encoding, else JSON */
    bool stream;                /* a server stream (application/connect+...) */
} e2b_call;

/* One in-process call as the caller through the whole pipeline (door e2b); args stolen.
 * Returns the HTTP status; *body (owned) is the result or abx's error envelope. */
int abx_e2b_op(e2b_call *c, const char *op, json_t *args, json_t **body);
/* The Connect error for an abx error envelope / status (code names as Connect's). */
const char *abx_e2b_connect_code(int status);
/* Fail the call with an abx error: the Connect error document follows (e2b.c renders it). */
void abx_e2b_fail(e2b_call *c, int status, const json_t *body);
void abx_e2b_fail_msg(e2b_call *c, abx_err e, const char *msg);
/* Answer a unary call / a stream (state owns what the reader needs). */
void abx_e2b_unary(e2b_call *c, const ProtobufCMessageDescriptor *out, json_t *resp);
/* A Connect envelope: flags, then the message in the call's encoding (resp stolen). */
char *abx_e2b_frame(const e2b_call *c, const ProtobufCMessageDescriptor *out, json_t *msg, uint8_t flags,
                    size_t *len);

/* The envd entry info of an abx path (files.stat), JSON form; NULL when the call failed
 * (then *status and *body say why). */
json_t *abx_e2b_entry(e2b_call *c, const char *path, int *status, json_t **body);
json_t *abx_e2b_entry_of(const char *path, const json_t *st);

/* ---- the services ---- */
typedef void (*e2b_method_fn)(e2b_call *c, const json_t *req);
typedef struct e2b_method {
    const char *path;           /* "/filesystem.Filesystem/Stat" */
    const ProtobufCMessageDescriptor *in, *out;
    bool server_stream;
    e2b_method_fn run;           /* a client stream's gets NULL: it reads the envelopes itself */
    bool client_stream;
} e2b_method;
/* A message in the call's encoding → its JSON form; NULL with the call failed. */
json_t *abx_e2b_decode(e2b_call *c, const ProtobufCMessageDescriptor *d, const char *data, size_t len);
/* The next Connect envelope of data from *at: 1 + its flags, 0 at the end, -1 malformed
 * (or compressed). *msg and *mlen point into data. */
long abx_e2b_envelope(const char *data, size_t len, size_t *at, const char **msg, size_t *mlen);
extern const e2b_method abx_e2b_fs_methods[];   /* e2b_fs.c, ends with a NULL path */
extern const e2b_method abx_e2b_proc_methods[]; /* e2b_proc.c */
/* WatchDir (e2b_watch.c): files.watch's events as envd's stream */
void abx_e2b_watch_dir(e2b_call *c, const json_t *req);
/* CreateWatcher (which 0), GetWatcherEvents (1), RemoveWatcher (2) */
void abx_e2b_watcher_call(e2b_call *c, const json_t *req, int which);
/* The code interpreter (e2b_interp.c): /execute, /contexts; false: not its route */
bool abx_e2b_interp(e2b_call *c);
/* REST: /health, /envs, GET/POST /files (e2b_rest.c); false: not a REST route */
bool abx_e2b_rest(e2b_call *c);
/* The principal a pre-signed /files URL names (its signature checked), or NULL with *why. */
const char *abx_e2b_signed_principal(e2b_call *c, const char **why);

#endif
