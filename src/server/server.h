/* server.h — the composition root's own parts, shared by the files of src/server:
 * server.c (the server value's life: new, compile, reload, start, stop, free),
 * state.c (what abx keeps for itself: home, token, ledger path, the state list the
 * layout rule reads) and listener.c (the HTTP front door on libmicrohttpd).
 * Nothing below src/server includes this. */
#ifndef ABX_SERVER_SERVER_H
#define ABX_SERVER_SERVER_H

#include "pipeline/pipeline.h"

/* ---- state.c ---- */

/* The embedded default's token: read from $ABX_HOME/token (0600, this user) or made and
 * stored there. *created tells whether it is new (printed once). */
int abx_server_token(abx_server *s, char *err, size_t errlen, bool *created, char token_out[65]);
/* Where the ledger lives when ledger.path is not set; mkdirs creates the folder. */
char *abx_server_ledger_path(bool mcp, const abx_config *cfg, bool mkdirs);
/* The folder of the egress CA (credential injection): the ledger's folder. Caller frees. */
char *abx_server_egress_ca_dir(const abx_config *cfg);

/* Everything abx keeps for itself, with what it is: the layout rule (no statement may
 * write where any of it lies) and the protected areas (masked from processes, refused
 * to abx's own file ops) are both built from this one list. */
typedef struct abx_state_list {
    const char **path;
    const char **what;
    char **owned;
    size_t n, n_owned, cap;
    bool failed; /* out of memory: the list is incomplete, and the caller must refuse */
} abx_state_list;

void abx_state_list_build(abx_server *s, const abx_config *cfg, abx_state_list *l);
void abx_state_list_release(abx_state_list *l);
/* An error diagnostic when the list could not be built whole (checked by both users). */
bool abx_state_list_complete(const abx_state_list *l, abx_diags *d);
/* The layout rule on the config as loaded, before plugins and Python modules run code. */
void abx_server_state_precheck(abx_server *s, abx_diags *d);
/* Tell `abx call` where this server listens: $ABX_HOME/url, replaced whole. */
void abx_server_write_url(const abx_server *s);

/* ---- listener.c ---- */

/* Opens the main listener (and the terminal listener when configured); fills s->port.
 * *tls tells whether the main listener speaks TLS. -1 with errbuf on failure. */
int abx_listener_start(abx_server *s, bool *tls, char *errbuf, size_t errlen);
/* Closes both listeners; requests in flight finish first. */
void abx_listener_stop(abx_server *s);
/* A listener beside the main one (terminal, E2B envd, sandboxd REST): the same handlers,
 * its own URI callback (which marks its requests). NULL when it cannot open (errno). */
struct MHD_Daemon;
struct MHD_Connection;
struct MHD_OptionItem;
typedef struct side_listen {
    unsigned flags;      /* the main listener's, without TLS and IPv6 */
    unsigned timeout_s;
    struct MHD_OptionItem *tls_opts; /* NULL: plaintext */
} side_listen;
struct MHD_Daemon *abx_side_listener(abx_server *s, const char *host, int port, const side_listen *sl,
                                     void *(*uri_cb)(void *, const char *, struct MHD_Connection *), int *bound);
/* The main listener's URI callback: a new request (its transport state), for side
 * listeners to mark. */
void *abx_listener_on_uri(void *cls, const char *uri, struct MHD_Connection *c);

/* ---- sandboxd_listen.c, sandboxd_grpc.c: the sandboxd door's listeners ---- */
/* REST (a side listener, door sandboxd) and gRPC when the config has a sandboxd section. */
int abx_sandboxd_listen_start(abx_server *s, side_listen *sl, struct MHD_OptionItem *tls_opts, char *errbuf,
                              size_t errlen);
/* The gRPC listener (HTTP/2 cleartext over nghttp2): start / stop (calls in flight end). */
int abx_sbx_grpc_start(abx_server *s, char *errbuf, size_t errlen);
void abx_sbx_grpc_stop(abx_server *s);

/* state.c: install.dir, else install/ in abx's home (owned). */
char *abx_install_dir_of(const abx_config *cfg);

#endif
