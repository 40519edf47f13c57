/* jupyter.h — the client side of the Jupyter messaging protocol (v5.3) over ZeroMQ, as
 * kernels.* speaks it to the kernels abx starts.
 *
 * A message on the wire is a multipart ZeroMQ message:
 *   [routing ids...] "<IDS|MSG>" signature header parent_header metadata content [buffers...]
 * where signature is the lowercase hex HMAC-SHA256, under the connection's key, of the
 * four JSON parts in that order. The decoder below is the one place bytes from a kernel
 * become values: it bounds the number and size of parts, checks the signature in
 * constant time before it parses anything, and insists on the shapes abx reads.
 *
 * Transport: `ipc`. abx creates the kernel's listening Unix sockets itself (in the
 * kernel's private directory) and hands them to the kernel as inherited descriptors;
 * the kernel binds its ZeroMQ sockets on them (ZMQ_USE_FD) and never needs to create a
 * Unix socket, which its seccomp filter refuses without `net`. abx then connects. */
#ifndef ABX_BUILTIN_JUPYTER_H
#define ABX_BUILTIN_JUPYTER_H

#include <jansson.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#define ABX_JMSG_MAX_PARTS 64                 /* routing ids + delimiter + 5 + buffers */
#define ABX_JMSG_MAX_BYTES ((size_t)256 << 20) /* one message, all parts (a cell printing 100 MB) */

typedef struct abx_jpart {
    const void *data;
    size_t len;
} abx_jpart;

typedef struct abx_jmsg {
    json_t *header, *parent, *metadata, *content; /* owned */
    const char *msg_type;                         /* borrowed from header */
    const char *msg_id;                           /* borrowed from header */
    const char *parent_id;                        /* borrowed from parent, "" when it has none */
} abx_jmsg;

/* HMAC-SHA256 (RFC 2104) of the concatenated parts. */
void abx_hmac_sha256(const unsigned char *key, size_t keylen, const abx_jpart *parts, size_t n, unsigned char out[32]);

/* Decode one received multipart message. keylen 0: unsigned (the signature must be
 * empty). 0 with *m filled (release it), or -1 with why. */
int abx_jmsg_decode(const abx_jpart *parts, size_t n, const unsigned char *key, size_t keylen, abx_jmsg *m,
                    char *why, size_t whylen);
void abx_jmsg_release(abx_jmsg *m);

/* The channels: the five of the protocol, and abx's own `host` channel (a REQ socket in
 * the kernel, a REP socket in abx) that carries host.* calls as plain JSON frames. */
enum abx_jchan { ABX_J_SHELL, ABX_J_IOPUB, ABX_J_CONTROL, ABX_J_STDIN, ABX_J_HB, ABX_J_HOST, ABX_J_N };

typedef struct abx_jconn abx_jconn;

/* Make the listening sockets below dir (named <dir>/k<sep><n>: ipykernel and IRkernel
 * 1.3 both join an ipc ip and port with '-'), a fresh key, and the connection file
 * <dir>/kernel.json.
 * NULL with why. */
abx_jconn *abx_jconn_new(const char *dir, char sep, char *why, size_t whylen);
const char *abx_jconn_file(const abx_jconn *c);
/* The listening descriptors the kernel inherits, in channel order (ABX_J_N of them). */
const int *abx_jconn_listen_fds(const abx_jconn *c);
/* {"ipc://…": fd, …} for the launcher: which descriptor each endpoint binds on. Owned. */
json_t *abx_jconn_fd_map(const abx_jconn *c);
/* After the kernel started: connect abx's sockets and close the listening descriptors. */
int abx_jconn_connect(abx_jconn *c, char *why, size_t whylen);
/* Send a request on shell, control or stdin; content is stolen. msg_id receives the id. */
int abx_jconn_send(abx_jconn *c, enum abx_jchan ch, const char *msg_type, json_t *content, char msg_id[40]);
/* Wait up to timeout_ms for a message on one of the channels in mask (1 << ABX_J_*).
 * 1 with *ch and *m (release it); for the host channel 1 with *ch = ABX_J_HOST and *m
 * empty: the caller reads the request (abx_jconn_host_recv). 0 on timeout. A message
 * that fails to decode is dropped (counted) and the wait goes on. */
int abx_jconn_recv(abx_jconn *c, unsigned mask, int timeout_ms, enum abx_jchan *ch, abx_jmsg *m);
/* The host channel: the next request (up to timeout_ms), its JSON body owned in *req;
 * 1, 0 on timeout, -1 when the frame is not a JSON object (answer it anyway). */
int abx_jconn_host_recv(abx_jconn *c, int timeout_ms, json_t **req);
int abx_jconn_host_reply(abx_jconn *c, const json_t *reply);
uint64_t abx_jconn_dropped(const abx_jconn *c);
/* A descriptor abx_jconn_recv watches too (events: ZMQ_POLLIN / ZMQ_POLLPRI): when it is
 * ready the wait returns 1 with *ch = ABX_J_N and *m empty. fd -1: none. */
void abx_jconn_watch_fd(abx_jconn *c, int fd, short events);
void abx_jconn_free(abx_jconn *c);

#endif
