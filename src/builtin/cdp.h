/* cdp.h — a Chrome DevTools Protocol client over --remote-debugging-pipe: JSON messages
 * separated by NUL bytes, written to the browser's fd 3 and read from its fd 4 (never a
 * debugging port). Requests carry ids; answers find their caller (a waiting thread, or a
 * continuation run on the reader thread); events go to one callback with their flattened
 * session id. Everything read is the browser's and so untrusted: a frame is bounded, must
 * be one JSON object of the expected shape, and anything else ends the connection. */
#ifndef ABX_BUILTIN_CDP_H
#define ABX_BUILTIN_CDP_H

#include <jansson.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#define ABX_CDP_FRAME_MAX (64u << 20) /* a full-page screenshot is the largest answer */

/* ---- the parser (pure: the fuzzer drives it) ---- */
typedef struct abx_cdp_msg {
    json_t *root;        /* owned: the whole object */
    int64_t id;          /* an answer's id, or -1 for an event */
    const char *method;  /* an event's method (borrowed from root), NULL for an answer */
    const char *session; /* the flattened sessionId, or NULL (the browser's own) */
    json_t *body;        /* borrowed: an answer's result or an event's params (an object), or NULL */
    json_t *error;       /* borrowed: an answer's error object, or NULL */
} abx_cdp_msg;

/* One frame (without its NUL) → a message; 0, or -1 when it is not a well-formed CDP
 * message (not an object, an id that is not a positive integer, an event without a
 * string method, an answer without exactly one of result and error, fields of the wrong type). */
int abx_cdp_parse(const char *frame, size_t len, abx_cdp_msg *out);
void abx_cdp_msg_release(abx_cdp_msg *m);

/* A NUL-framed byte stream: feed what was read, take whole frames. */
typedef struct abx_cdp_framer {
    char *buf;
    size_t len, cap, scanned;
} abx_cdp_framer;
/* Append bytes; -1 when a frame would exceed ABX_CDP_FRAME_MAX (the stream is broken). */
int abx_cdp_framer_feed(abx_cdp_framer *f, const char *data, size_t n);
/* The next whole frame (*frame points into the framer until the next call), 1; 0 none yet. */
int abx_cdp_framer_next(abx_cdp_framer *f, const char **frame, size_t *len);
void abx_cdp_framer_release(abx_cdp_framer *f);

/* ---- the connection ---- */
typedef struct abx_cdp abx_cdp;
/* An event (params borrowed, may be NULL), on the reader thread. */
typedef void (*abx_cdp_event_fn)(void *ud, const char *method, const char *session, json_t *params);
/* A continuation: the answer to an abx_cdp_send (result or error borrowed), on the reader
 * thread; result and error both NULL when the connection ended first. */
typedef void (*abx_cdp_reply_fn)(void *ud, void *arg, const char *session, json_t *result, json_t *error);

/* Start the reader thread on rfd (the browser's fd 4) and write to wfd (its fd 3); both
 * owned. NULL when out of memory or the thread cannot start (the fds are closed). */
abx_cdp *abx_cdp_new(int rfd, int wfd, abx_cdp_event_fn on_event, void *ud);
/* Send and wait for the answer until deadline (abx_now_ms clock). 0 with *result (owned, may
 * be NULL when not wanted), or -1 with err (the browser's error message, a timeout, the
 * connection gone). params is stolen. */
int abx_cdp_call(abx_cdp *c, const char *session, const char *method, json_t *params, int64_t deadline,
                 json_t **result, char *err, size_t errlen);
/* Send without waiting; fn (may be NULL) runs with the answer. params is stolen. 0 or -1. */
int abx_cdp_send(abx_cdp *c, const char *session, const char *method, json_t *params, abx_cdp_reply_fn fn,
                 void *arg);
/* Has the reader seen the stream end (the browser exited or broke the protocol)? */
bool abx_cdp_closed(abx_cdp *c);
/* Close the pipe, end the reader and free. Pending callers get "connection closed". */
void abx_cdp_free(abx_cdp *c);

#endif
