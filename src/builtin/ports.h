/* ports.h — what ports.c (finding the caller's listeners) hands ports_proxy.c (relaying
 * HTTP to one of them). */
#ifndef ABX_BUILTIN_PORTS_H
#define ABX_BUILTIN_PORTS_H

#include "builtin/builtin.h"

typedef struct listener {
    int port;
    int family;           /* AF_INET or AF_INET6 */
    unsigned char addr[16];
    int pid;              /* the process holding it */
    int root;             /* the process the caller started (its session) */
    unsigned long inode;  /* the socket */
} listener;

/* The server's answer head, as abx_ports_parse_head reads it (ports_proxy.c). */
typedef struct ports_head {
    int status;
    long long length;   /* Content-Length, or -1 */
    bool chunked;
    char ctype[200];
} ports_head;

bool abx_ports_parse_head(const char *data, size_t len, ports_head *h,
                          void (*add)(void *ud, const char *name, const char *value), void *ud);

/* Relay the request (method, headers, body, path rest and raw query) to the listener and
 * its answer back into r: small bodies whole, large or unsized ones streamed. */
abx_err abx_ports_relay(abx_ctx *ctx, const listener *l, int port, const char *rest, abx_reply *r);

#endif
