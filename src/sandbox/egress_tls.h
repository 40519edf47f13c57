/* egress_tls.h — credential injection for the egress proxy (issue 17): the `inject` rules
 * a statement's `net: {inject: [...]}` compiles to, the per-server CA abx generates at
 * first start (egress_ca.c), and the interception of connections to hosts with inject
 * rules (egress_tls.c): TLS terminated with a leaf certificate the CA signs for the host,
 * the upstream verified against the system store (or a configured CA), each HTTP/1.1
 * request given the header, and every secret value an upstream echoes redacted in what
 * the process reads. Hosts without inject rules never come here (tunneled untouched).
 *
 * The proxy (egress.c) holds one abx_egress_tls (abx_egress_config.tls) and hands it a
 * connection once the upstream is dialled (abx_egress_intercept). OpenSSL writes with
 * write(2): the process must ignore SIGPIPE (abx does, src/cli/main.c). */
#ifndef ABX_SANDBOX_EGRESS_TLS_H
#define ABX_SANDBOX_EGRESS_TLS_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

/* ---- inject rules (egress_inject.c) ---- */
typedef struct abx_egress_inject {
    char *host;   /* lower case, exact */
    char *header; /* a token: Authorization, X-Api-Key */
    char *value;  /* the value with secrets already substituted: never logged */
} abx_egress_inject;

typedef struct abx_egress_injects {
    abx_egress_inject *v;
    size_t n;
    char **secrets; /* the secret values the rules carry: redacted in responses */
    size_t nsecrets;
} abx_egress_injects;

/* Add a rule (value already expanded); each secret value it carries is added with
 * abx_egress_inject_secret. 0, or -1 with a message (which never quotes the value). */
int abx_egress_inject_add(abx_egress_injects *l, const char *host, const char *header, const char *value, char *err,
                          size_t errlen);
int abx_egress_inject_secret(abx_egress_injects *l, const char *secret);
void abx_egress_injects_free(abx_egress_injects *l);
/* A deep copy (to is overwritten; free it with abx_egress_injects_free even on -1). */
int abx_egress_injects_copy(abx_egress_injects *to, const abx_egress_injects *from);
bool abx_egress_injects_host(const abx_egress_injects *l, const char *host);

/* ---- the CA (egress_ca.c) ---- */
typedef struct abx_egress_ca abx_egress_ca;

/* Load dir/egress-ca.key (mode 0600) and dir/egress-ca.pem, or make them the first time;
 * (re)write dir/egress-ca-bundle.pem: the system CA store followed by the abx CA. NULL
 * with a message on failure. */
abx_egress_ca *abx_egress_ca_open(const char *dir, char *err, size_t errlen);
void abx_egress_ca_free(abx_egress_ca *ca);
const char *abx_egress_ca_cert_path(const abx_egress_ca *ca);   /* the abx CA alone */
const char *abx_egress_ca_bundle_path(const abx_egress_ca *ca); /* system store + abx CA */

/* The environment a process behind the proxy gets so it trusts the abx CA:
 * SSL_CERT_FILE, REQUESTS_CA_BUNDLE, CURL_CA_BUNDLE, GIT_SSL_CAINFO (the bundle) and
 * NODE_EXTRA_CA_CERTS (the abx CA alone: Node adds it to its own store). The values
 * point into ca. Returns the number of pairs (ABX_EGRESS_CA_ENV). */
#define ABX_EGRESS_CA_ENV 5
typedef struct abx_env_pair {
    const char *name, *value;
} abx_env_pair;
size_t abx_egress_ca_env(const abx_egress_ca *ca, abx_env_pair out[ABX_EGRESS_CA_ENV]);

/* ---- interception (egress_tls.c) ---- */
typedef struct abx_egress_tls abx_egress_tls;

/* ca and inj are borrowed (must outlive it). upstream_ca: a PEM file trusted for
 * upstreams besides the system store (egress.upstream_ca; tests), or NULL. */
abx_egress_tls *abx_egress_tls_new(abx_egress_ca *ca, const abx_egress_injects *inj, const char *upstream_ca,
                                   char *err, size_t errlen);
void abx_egress_tls_free(abx_egress_tls *t);
bool abx_egress_tls_wants(const abx_egress_tls *t, const char *host);

typedef struct abx_egress_session {
    int cfd, ufd, stopfd, idle_ms;
    const char *host;
    int port;
    bool tls;                 /* a CONNECT: answer 200 (or 502) and terminate TLS */
    bool transparent;         /* with tls: no CONNECT to answer, the ClientHello is still
                                 unread in cfd (peeked); an upstream failure just closes */
    const unsigned char *pre; /* client bytes already read (plain HTTP: the first head) */
    size_t prelen;
    /* out */
    uint64_t up, down;
    char method[16], path[256];
    const char *reason;       /* NULL when it ran to the end */
    bool refused;             /* a policy refusal (the record says deny) */
} abx_egress_session;

void abx_egress_intercept(const abx_egress_tls *t, abx_egress_session *s);

/* ---- pure parsers (egress_tls.c), fuzzed ---- */
typedef struct abx_http_resp {
    int status;
    int64_t content_length; /* -1 when absent */
    bool chunked, close;
    size_t head_len;
} abx_http_resp;
/* An HTTP/1.x response head: ABX_EG_MORE (0), ABX_EG_BAD (-1) or its length. */
int abx_egress_parse_resp(const char *buf, size_t len, abx_http_resp *r);

/* A chunked body, fed in pieces: each call consumes *used bytes of in and says whether
 * in[*doff, *doff + *dlen) is payload. */
typedef struct abx_chunked {
    int state;
    uint64_t left;
    size_t linelen;
} abx_chunked;
enum { ABX_CH_MORE, ABX_CH_DONE, ABX_CH_BAD };
int abx_egress_chunk_step(abx_chunked *c, const unsigned char *in, size_t len, size_t *used, size_t *doff,
                          size_t *dlen);

#endif
