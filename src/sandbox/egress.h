/* egress.h — egress by name (issue 17, first step): the allowlist a statement's
 * `net: {allow: [...]}` compiles to, the static resolver table (`egress.resolve`), the
 * bounded parsers the proxy reads its clients with, and the proxy itself (HTTP forward
 * proxying, CONNECT with an SNI check, SOCKS5).
 *
 * Decisions are made on the name the client asked for and on every address it resolves
 * to: a name must match an entry, and each address must be public, or be named by an
 * entry literally (an IP or a CIDR of its own class), or come from the resolver table for
 * a name an entry names exactly (not by wildcard). So a wildcard never reaches loopback,
 * private, link-local or metadata addresses, and DNS rebinding to them is refused.
 *
 * Credential injection (`inject`: TLS interception) is egress_tls.h. Not here yet: the namespace the
 * proxy listens in, and the ledger wiring (the proxy reports each connection to a
 * callback; the caller records it). See docs/egress.md. */
#ifndef ABX_SANDBOX_EGRESS_H
#define ABX_SANDBOX_EGRESS_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#define ABX_EGRESS_HOST_MAX 256 /* a DNS name is at most 253; with room for the NUL */
#define ABX_EGRESS_ADDRS 8      /* addresses a name may resolve to that the proxy looks at */
#define ABX_EGRESS_HEAD_MAX 16384

/* ---- addresses (egress_match.c) ---- */
typedef struct abx_ip {
    int family; /* AF_INET or AF_INET6 */
    unsigned char a[16];
} abx_ip;

typedef enum abx_addr_class {
    ABX_ADDR_PUBLIC,
    ABX_ADDR_LOOPBACK,    /* 127/8, ::1 */
    ABX_ADDR_PRIVATE,     /* 10/8, 172.16/12, 192.168/16, 100.64/10, fc00::/7 */
    ABX_ADDR_LINKLOCAL,   /* 169.254/16, fe80::/10 */
    ABX_ADDR_METADATA,    /* 169.254.169.254, fd00:ec2::254 */
    ABX_ADDR_UNSPECIFIED, /* 0/8, ::, multicast, broadcast, reserved: never a destination */
} abx_addr_class;

/* Parse "1.2.3.4" or "::1" (no brackets). IPv4-mapped IPv6 becomes the IPv4 address, so
 * ::ffff:127.0.0.1 is loopback. true on success. */
bool abx_ip_parse(const char *s, abx_ip *out);
void abx_ip_format(const abx_ip *ip, char out[46]);
abx_addr_class abx_ip_class(const abx_ip *ip);
const char *abx_addr_class_name(abx_addr_class c);

/* ---- the allowlist ---- */
typedef enum { ABX_EG_HOST, ABX_EG_WILDCARD, ABX_EG_NET } abx_egress_kind;

typedef struct abx_egress_rule {
    char *text;       /* as written, for records and messages */
    abx_egress_kind kind;
    char *host;       /* lower case; for a wildcard the suffix after "*." ("" for "*") */
    abx_ip net;       /* ABX_EG_NET */
    int prefix;       /* ABX_EG_NET: bits */
    int port;         /* 0: 80 and 443 */
} abx_egress_rule;

typedef struct abx_egress_allow {
    abx_egress_rule *rules;
    size_t n;
} abx_egress_allow;

/* Add one entry: "pypi.org", "*.github.com", "api.github.com:443", "10.0.0.5",
 * "10.0.0.0/8", "[::1]:8080", "fd00::/8". 0, or -1 with a message in err. */
int abx_egress_allow_add(abx_egress_allow *a, const char *entry, char *err, size_t errlen);
void abx_egress_allow_free(abx_egress_allow *a);
/* check-config: true (with a message) when an entry is valid but too broad: "*",
 * a wildcard over one label ("*.com", "*.internal"), a CIDR shorter than /8 (v4) or /32 (v6). */
bool abx_egress_lint(const char *entry, char *msg, size_t msglen);

/* ---- the static resolver table, curl's --resolve: "host:port:addr[,addr...]" (port "*":
 * every port; a pin for the exact port wins) ---- */
typedef struct abx_egress_pin {
    char *host;
    int port;           /* 0: every port */
    abx_ip addrs[ABX_EGRESS_ADDRS];
    size_t n;
} abx_egress_pin;

typedef struct abx_egress_resolver {
    abx_egress_pin *pins;
    size_t n;
} abx_egress_resolver;

int abx_egress_resolve_add(abx_egress_resolver *r, const char *spec, char *err, size_t errlen);
void abx_egress_resolver_free(abx_egress_resolver *r);
/* The pinned addresses of host:port, or NULL. */
const abx_egress_pin *abx_egress_pinned(const abx_egress_resolver *r, const char *host, int port);

/* ---- decisions ---- */
typedef struct abx_egress_decision {
    bool allow;
    const char *rule;  /* the entry that matched the name (NULL when none) */
    char reason[128];  /* why, for records and messages */
    abx_ip addrs[ABX_EGRESS_ADDRS];
    size_t naddrs;
} abx_egress_decision;

/* Lower-case and check a host name or address literal (no brackets) in place: false when
 * it is not one (empty labels, odd bytes, too long). */
bool abx_egress_host_norm(char *host);
/* The pure part: the name against the rules, then each address (pinned: the addresses
 * came from the resolver table). Fills d. */
void abx_egress_check(const abx_egress_allow *a, const char *host, int port, const abx_ip *addrs, size_t naddrs,
                      bool pinned, abx_egress_decision *d);
/* The whole decision: a literal address, else the resolver table, else (system_dns)
 * getaddrinfo, then abx_egress_check. A name no entry matches is refused before any DNS. */
void abx_egress_decide(const abx_egress_allow *a, const abx_egress_resolver *r, bool system_dns, const char *host,
                       int port, abx_egress_decision *d);

/* ---- parsers (egress_parse.c): pure, bounded, no allocation ----
 * Each returns ABX_EG_MORE when the input is a valid prefix, ABX_EG_BAD when it cannot
 * become valid, or the number of bytes the message took. */
enum { ABX_EG_MORE = 0, ABX_EG_BAD = -1 };

typedef struct abx_http_req {
    char method[16];
    char host[ABX_EGRESS_HOST_MAX]; /* the target: absolute-form or CONNECT authority, else Host */
    int port;
    char hosthdr[ABX_EGRESS_HOST_MAX]; /* the Host header's name ("" when absent) */
    int hostport;                      /* its port (0 when absent) */
    bool connect, absolute;
    size_t path_off, path_len;         /* origin-form target within the buffer */
    size_t ver_off;                    /* "HTTP/1.x" within the buffer */
    size_t line_len;                   /* the request line with its CRLF */
    int64_t content_length;            /* -1 when absent */
    bool chunked;                      /* a Transfer-Encoding other than identity */
    bool upgrade;                      /* an Upgrade header (WebSocket, h2c): raw bytes may follow */
} abx_http_req;

/* An HTTP/1.x proxy request head (through the blank line, at most ABX_EGRESS_HEAD_MAX). */
int abx_egress_parse_http(const char *buf, size_t len, abx_http_req *r);
/* A SOCKS5 greeting; *noauth says whether "no authentication" is offered. */
int abx_egress_parse_socks_hello(const unsigned char *b, size_t len, bool *noauth);
/* A SOCKS5 request: *cmd (1 CONNECT), host (a domain lower-cased, or an address
 * formatted), *port. */
int abx_egress_parse_socks_req(const unsigned char *b, size_t len, int *cmd, char host[ABX_EGRESS_HOST_MAX],
                               int *port);
/* The server name of a TLS ClientHello at the start of a stream. */
typedef enum { ABX_SNI_MORE, ABX_SNI_FOUND, ABX_SNI_NONE, ABX_SNI_NOT_TLS, ABX_SNI_BAD } abx_sni_result;
abx_sni_result abx_egress_parse_sni(const unsigned char *b, size_t len, char out[ABX_EGRESS_HOST_MAX]);

/* ---- the proxy (egress.c) ---- */
typedef struct abx_egress_record {
    const char *proto;  /* "http", "connect", "socks5" */
    const char *host;
    int port;
    const char *addr;   /* the address connected to ("" when none) */
    bool allowed;
    const char *rule;   /* the entry that allowed it ("" when none) */
    const char *reason; /* why it was refused or ended early ("" when it ran) */
    const char *method; /* HTTP method ("" for tunnels) */
    const char *path;   /* HTTP path without its query ("" for tunnels) */
    uint64_t bytes_up, bytes_down;
    int64_t duration_ms;
} abx_egress_record;

typedef void (*abx_egress_record_fn)(const abx_egress_record *rec, void *ctx);

typedef struct abx_egress_config {
    const abx_egress_allow *allow;       /* borrowed: must outlive the proxy */
    const abx_egress_resolver *resolver; /* borrowed; may be NULL */
    bool system_dns;                     /* resolve names the table does not pin */
    int max_conns;                       /* 0: 64; connections over it are closed at once */
    int idle_ms;                         /* 0: 60 s without a byte either way ends a connection */
    int connect_ms;                      /* 0: 10 s to reach an upstream */
    abx_egress_record_fn record;         /* may be NULL; called from the proxy's threads */
    void *ctx;
    const struct abx_egress_tls *tls;    /* borrowed; may be NULL: inject hosts (egress_tls.h) */
} abx_egress_config;

typedef struct abx_egress abx_egress;

/* Serve on listen_fd (a listening stream socket; the proxy owns it from here). NULL with
 * errno on failure (the fd is closed then too). */
abx_egress *abx_egress_start(int listen_fd, const abx_egress_config *cfg);
/* Stop accepting, end every connection, wait for their threads, free. NULL is a no-op. */
void abx_egress_stop(abx_egress *e);

/* ---- transparent mode (issue 17): clients that ignore the proxy variables ----
 * Besides the proxy, a process's namespace holds a DNS resolver (UDP and TCP, port 53)
 * that answers names the allowlist admits with synthetic loopback addresses
 * (127.100.0.0/16, one per name, mapped back to it) and NXDOMAIN for the rest, and
 * transparent listeners (ports 80, 443 and those the allowlist names) that take the
 * destination name from the TLS SNI (peeked, not terminated unless inject applies) or the
 * HTTP Host header, else from the synthetic address, and go through the same decision,
 * record and injection path as the proxy (egress_transp.c, egress_dns.c). */
enum { ABX_EGL_PROXY, ABX_EGL_TRANSPARENT, ABX_EGL_DNS_UDP, ABX_EGL_DNS_TCP };
#define ABX_EGRESS_LISTEN_MAX 20 /* listening sockets of one proxy */
#define ABX_EGRESS_TPORTS 16     /* transparent ports: 80, 443 and those entries name */
#define ABX_EGRESS_SYNTH_NET 0x7f640000u /* 127.100.0.0/16 (host order) */
#define ABX_EGRESS_SYNTH_MAX 4096        /* names one process may have looked up */

typedef struct abx_egress_listeners {
    int fd[ABX_EGRESS_LISTEN_MAX];
    int kind[ABX_EGRESS_LISTEN_MAX]; /* ABX_EGL_* */
    size_t n;
} abx_egress_listeners;

/* Serve every socket of l (owned from here, all closed on failure). NULL with errno. */
abx_egress *abx_egress_start_multi(const abx_egress_listeners *l, const abx_egress_config *cfg);
/* The entry that admits host by name on some port, or NULL (what the resolver answers). */
const abx_egress_rule *abx_egress_name_listed(const abx_egress_allow *a, const char *host);
/* The ports transparent listeners take for a: 80, 443, then each port a name entry
 * names, without skip (the proxy's) and 53; at most cap. */
size_t abx_egress_transparent_ports(const abx_egress_allow *a, int skip, int *out, size_t cap);

/* ---- the DNS query parser and answers (egress_dns.c): pure, bounded, fuzzed ---- */
typedef struct abx_dns_query {
    uint16_t id, flags, qtype, qclass;
    char name[ABX_EGRESS_HOST_MAX]; /* lower case, without the trailing dot */
    size_t qend;                    /* where the question ends */
} abx_dns_query;
/* One question (QR 0, opcode 0, QDCOUNT 1, no compression): 0, or -1. */
int abx_dns_parse_query(const unsigned char *b, size_t len, abx_dns_query *q);
/* The answer to q (parsed from query) with rcode, and an A record for a4 when not NULL;
 * its length, or 0 when cap is too small. */
size_t abx_dns_answer(const unsigned char *query, const abx_dns_query *q, int rcode, const unsigned char *a4,
                      unsigned char *out, size_t cap);
/* A header-only answer (FORMERR etc.) to a query whose question could not be read; 0 when
 * the query is shorter than a header. */
size_t abx_dns_error(const unsigned char *query, size_t len, int rcode, unsigned char *out, size_t cap);

#endif
