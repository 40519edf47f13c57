/* egress_match.c — the egress allowlist: address classes, entries, the static resolver
 * table and the decision on a name and the addresses it resolves to (see egress.h). */
#include "sandbox/egress.h"

#include "core/util.h"

#include <arpa/inet.h>
#include <ctype.h>
#include <netdb.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>

/* ---- addresses ---- */

bool abx_ip_parse(const char *s, abx_ip *out)
{
    memset(out, 0, sizeof *out);
    if (inet_pton(AF_INET, s, out->a) == 1) {
        out->family = AF_INET;
        return true;
    }
    if (inet_pton(AF_INET6, s, out->a) != 1)
        return false;
    out->family = AF_INET6;
    static const unsigned char mapped[12] = {0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0xff, 0xff};
    if (memcmp(out->a, mapped, 12) == 0) { /* ::ffff:a.b.c.d is a.b.c.d */
        memmove(out->a, out->a + 12, 4);
        memset(out->a + 4, 0, 12);
        out->family = AF_INET;
    }
    return true;
}

void abx_ip_format(const abx_ip *ip, char out[46])
{
    if (!inet_ntop(ip->family, ip->a, out, 46))
        out[0] = '\0';
}

static abx_addr_class class4(const unsigned char *a)
{
    if (a[0] == 169 && a[1] == 254 && a[2] == 169 && a[3] == 254)
        return ABX_ADDR_METADATA;
    if (a[0] == 127)
        return ABX_ADDR_LOOPBACK;
    if (a[0] == 10 || (a[0] == 172 && (a[1] & 0xf0) == 16) || (a[0] == 192 && a[1] == 168) ||
        (a[0] == 100 && (a[1] & 0xc0) == 64))
        return ABX_ADDR_PRIVATE;
    if (a[0] == 169 && a[1] == 254)
        return ABX_ADDR_LINKLOCAL;
    if (a[0] == 0 || a[0] >= 224)
        return ABX_ADDR_UNSPECIFIED;
    return ABX_ADDR_PUBLIC;
}

static abx_addr_class class6(const unsigned char *a)
{
    static const unsigned char md[16] = {0xfd, 0, 0x0e, 0xc2, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0x02, 0x54};
    static const unsigned char zero[15] = {0};
    if (memcmp(a, md, 16) == 0)
        return ABX_ADDR_METADATA;
    if (memcmp(a, zero, 15) == 0)
        return a[15] == 1 ? ABX_ADDR_LOOPBACK : ABX_ADDR_UNSPECIFIED;
    if ((a[0] & 0xfe) == 0xfc)
        return ABX_ADDR_PRIVATE;
    if (a[0] == 0xfe && (a[1] & 0xc0) == 0x80)
        return ABX_ADDR_LINKLOCAL;
    if (a[0] == 0xff || memcmp(a, zero, 10) == 0) /* multicast; v4-compatible and other ::/80 oddities */
        return ABX_ADDR_UNSPECIFIED;
    return ABX_ADDR_PUBLIC;
}

abx_addr_class abx_ip_class(const abx_ip *ip)
{
    return ip->family == AF_INET ? class4(ip->a) : class6(ip->a);
}

const char *abx_addr_class_name(abx_addr_class c)
{
    static const char *const names[] = {"public", "loopback", "private", "link-local", "metadata", "unspecified"};
    return (unsigned)c < sizeof names / sizeof names[0] ? names[c] : "?";
}

static bool in_net(const abx_ip *net, int prefix, const abx_ip *ip)
{
    if (net->family != ip->family)
        return false;
    int full = prefix / 8, rest = prefix % 8;
    if (memcmp(net->a, ip->a, (size_t)full) != 0)
        return false;
    if (rest == 0)
        return true;
    unsigned char mask = (unsigned char)(0xff << (8 - rest));
    return (net->a[full] & mask) == (ip->a[full] & mask);
}

/* ---- names ---- */

bool abx_egress_host_norm(char *host)
{
    size_t n = strlen(host);
    if (n > 0 && host[n - 1] == '.')
        host[--n] = '\0'; /* "example.com." is example.com */
    if (n == 0 || n > 253)
        return false;
    abx_ip ip;
    if (strchr(host, ':'))
        return abx_ip_parse(host, &ip);
    size_t label = 0;
    for (size_t i = 0; i < n; i++) {
        unsigned char c = (unsigned char)host[i];
        if (c == '.') {
            if (label == 0)
                return false;
            label = 0;
            continue;
        }
        if (!(isalnum(c) || c == '-' || c == '_') || ++label > 63)
            return false;
        host[i] = (char)tolower(c);
    }
    return label > 0;
}

/* ---- entries ---- */

static int parse_port(const char *s, char *err, size_t errlen)
{
    char *end;
    long p = strtol(s, &end, 10);
    if (!*s || *end || p < 1 || p > 65535 || !isdigit((unsigned char)*s)) {
        snprintf(err, errlen, "bad port '%s'", s);
        return -1;
    }
    return (int)p;
}

/* entry without its port: an address, a CIDR or a name */
static int rule_target(abx_egress_rule *r, char *t, char *err, size_t errlen)
{
    char *slash = strchr(t, '/');
    if (slash || abx_ip_parse(t, &r->net)) {
        r->kind = ABX_EG_NET;
        if (slash)
            *slash = '\0';
        if (!abx_ip_parse(t, &r->net)) {
            snprintf(err, errlen, "bad address '%s'", t);
            return -1;
        }
        int max = r->net.family == AF_INET ? 32 : 128;
        r->prefix = max;
        if (slash) {
            char *end;
            long p = strtol(slash + 1, &end, 10);
            if (!isdigit((unsigned char)slash[1]) || *end || p < 0 || p > max) {
                snprintf(err, errlen, "bad prefix length '/%s'", slash + 1);
                return -1;
            }
            r->prefix = (int)p;
        }
        return 0;
    }
    if (strcmp(t, "*") == 0 || strncmp(t, "*.", 2) == 0) {
        r->kind = ABX_EG_WILDCARD;
        t += t[1] ? 2 : 1;
        if (t[-1] == '.' ? !abx_egress_host_norm(t) : *t != '\0') {
            snprintf(err, errlen, "bad wildcard suffix '%s'", t);
            return -1;
        }
    } else {
        r->kind = ABX_EG_HOST;
        if (!abx_egress_host_norm(t)) {
            snprintf(err, errlen, "bad host name '%s' (names, *.wildcards, addresses or CIDRs)", t);
            return -1;
        }
    }
    r->host = abx_strdup(t);
    if (!r->host) {
        snprintf(err, errlen, "out of memory");
        return -1;
    }
    return 0;
}

/* split "[v6]:port", "[v6/len]", "host:port", "v4/len:port" or a bare v6 (two colons or more) */
static int split_port(char *t, char **target, int *port, char *err, size_t errlen)
{
    *port = 0;
    char *colon = NULL;
    if (t[0] == '[') {
        char *close = strchr(t, ']');
        if (!close || (close[1] && close[1] != ':')) {
            snprintf(err, errlen, "bad bracketed address");
            return -1;
        }
        *close = '\0';
        *target = t + 1;
        colon = close[1] ? close + 1 : NULL;
    } else {
        *target = t;
        char *first = strchr(t, ':');
        if (first && !strchr(first + 1, ':'))
            colon = first;
    }
    if (colon) {
        *colon = '\0';
        if ((*port = parse_port(colon + 1, err, errlen)) < 0)
            return -1;
    }
    return 0;
}

int abx_egress_allow_add(abx_egress_allow *a, const char *entry, char *err, size_t errlen)
{
    char t[ABX_EGRESS_HOST_MAX + 16];
    if (!entry || !*entry || strlen(entry) >= sizeof t) {
        snprintf(err, errlen, "empty or overlong egress entry");
        return -1;
    }
    snprintf(t, sizeof t, "%s", entry);
    abx_egress_rule r = {0};
    char *target;
    if (split_port(t, &target, &r.port, err, errlen) < 0 || rule_target(&r, target, err, errlen) < 0)
        return -1;
    abx_egress_rule *grown = abx_realloc(a->rules, (a->n + 1) * sizeof *grown);
    r.text = abx_strdup(entry);
    if (!grown || !r.text) {
        if (grown)
            a->rules = grown;
        abx_free(r.host);
        abx_free(r.text);
        snprintf(err, errlen, "out of memory");
        return -1;
    }
    a->rules = grown;
    a->rules[a->n++] = r;
    return 0;
}

void abx_egress_allow_free(abx_egress_allow *a)
{
    for (size_t i = 0; i < a->n; i++) {
        abx_free(a->rules[i].text);
        abx_free(a->rules[i].host);
    }
    abx_free(a->rules);
    a->rules = NULL;
    a->n = 0;
}

bool abx_egress_lint(const char *entry, char *msg, size_t msglen)
{
    abx_egress_allow a = {0};
    char err[160];
    if (abx_egress_allow_add(&a, entry, err, sizeof err) < 0)
        return false; /* invalid is the parser's message, not the lint's */
    const abx_egress_rule *r = &a.rules[0];
    bool broad = false;
    if (r->kind == ABX_EG_WILDCARD && !strchr(r->host, '.')) {
        snprintf(msg, msglen, "egress entry '%s' is too broad: a wildcard over %s", entry,
                 *r->host ? "a one-label suffix" : "every name");
        broad = true;
    } else if (r->kind == ABX_EG_NET && r->prefix < (r->net.family == AF_INET ? 8 : 32)) {
        snprintf(msg, msglen, "egress entry '%s' is too broad: a /%d network", entry, r->prefix);
        broad = true;
    }
    abx_egress_allow_free(&a);
    return broad;
}

/* ---- the resolver table ---- */

static int pin_addrs(abx_egress_pin *p, char *list, char *err, size_t errlen)
{
    char *save = NULL;
    for (char *s = strtok_r(list, ",", &save); s; s = strtok_r(NULL, ",", &save)) {
        size_t n = strlen(s);
        if (s[0] == '[' && n > 2 && s[n - 1] == ']') {
            s[n - 1] = '\0';
            s++;
        }
        if (p->n == ABX_EGRESS_ADDRS || !abx_ip_parse(s, &p->addrs[p->n])) {
            snprintf(err, errlen, "bad or too many resolve addresses at '%s'", s);
            return -1;
        }
        p->n++;
    }
    if (p->n == 0) {
        snprintf(err, errlen, "a resolve entry needs an address");
        return -1;
    }
    return 0;
}

int abx_egress_resolve_add(abx_egress_resolver *r, const char *spec, char *err, size_t errlen)
{
    char t[512];
    if (!spec || strlen(spec) >= sizeof t) {
        snprintf(err, errlen, "empty or overlong resolve entry");
        return -1;
    }
    snprintf(t, sizeof t, "%s", spec);
    char *c1 = strchr(t, ':'), *c2 = c1 ? strchr(c1 + 1, ':') : NULL;
    if (!c2) {
        snprintf(err, errlen, "resolve entry '%s' is not host:port:address", spec);
        return -1;
    }
    *c1 = *c2 = '\0';
    abx_egress_pin p = {0};
    if (!abx_egress_host_norm(t)) {
        snprintf(err, errlen, "bad resolve host '%s'", t);
        return -1;
    }
    /* "*": every port (the config's `egress.resolve: {host: addr}`) */
    if ((p.port = strcmp(c1 + 1, "*") == 0 ? 0 : parse_port(c1 + 1, err, errlen)) < 0 ||
        pin_addrs(&p, c2 + 1, err, errlen) < 0)
        return -1;
    abx_egress_pin *grown = abx_realloc(r->pins, (r->n + 1) * sizeof *grown);
    if (grown)
        r->pins = grown;
    p.host = abx_strdup(t);
    if (!grown || !p.host) {
        abx_free(p.host);
        snprintf(err, errlen, "out of memory");
        return -1;
    }
    r->pins[r->n++] = p;
    return 0;
}

void abx_egress_resolver_free(abx_egress_resolver *r)
{
    for (size_t i = 0; i < r->n; i++)
        abx_free(r->pins[i].host);
    abx_free(r->pins);
    r->pins = NULL;
    r->n = 0;
}

const abx_egress_pin *abx_egress_pinned(const abx_egress_resolver *r, const char *host, int port)
{
    for (size_t i = 0; r && i < r->n; i++)
        if (r->pins[i].port == port && strcmp(r->pins[i].host, host) == 0)
            return &r->pins[i];
    for (size_t i = 0; r && i < r->n; i++) /* then a pin for every port */
        if (r->pins[i].port == 0 && strcmp(r->pins[i].host, host) == 0)
            return &r->pins[i];
    return NULL;
}

/* ---- decisions ---- */

static bool port_ok(const abx_egress_rule *r, int port)
{
    return r->port ? r->port == port : (port == 80 || port == 443);
}

static bool name_match(const abx_egress_rule *r, const char *host)
{
    if (r->kind == ABX_EG_HOST)
        return strcmp(r->host, host) == 0;
    if (r->kind != ABX_EG_WILDCARD)
        return false;
    size_t ls = strlen(r->host), lh = strlen(host);
    if (ls == 0)
        return true; /* "*" */
    return lh > ls + 1 && host[lh - ls - 1] == '.' && strcmp(host + lh - ls, r->host) == 0;
}

/* A CIDR reaches a non-public address only when its own network is of that class
 * (10.0.0.0/8 reaches 10.1.2.3; 0.0.0.0/0 does not), and metadata only by its address. */
static bool net_match(const abx_egress_rule *r, const abx_ip *ip, int port)
{
    if (r->kind != ABX_EG_NET || !port_ok(r, port) || !in_net(&r->net, r->prefix, ip))
        return false;
    abx_addr_class c = abx_ip_class(ip);
    if (c == ABX_ADDR_PUBLIC || r->prefix == (ip->family == AF_INET ? 32 : 128))
        return true;
    return c != ABX_ADDR_METADATA && abx_ip_class(&r->net) == c;
}

static const abx_egress_rule *net_rule(const abx_egress_allow *a, const abx_ip *ip, int port)
{
    for (size_t i = 0; i < a->n; i++)
        if (net_match(&a->rules[i], ip, port))
            return &a->rules[i];
    return NULL;
}

__attribute__((format(printf, 2, 3))) static void refuse(abx_egress_decision *d, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    d->allow = false;
    vsnprintf(d->reason, sizeof d->reason, fmt, ap);
    va_end(ap);
}

void abx_egress_check(const abx_egress_allow *a, const char *host, int port, const abx_ip *addrs, size_t naddrs,
                      bool pinned, abx_egress_decision *d)
{
    memset(d, 0, sizeof *d);
    abx_ip lit;
    const abx_egress_rule *named = NULL;
    if (abx_ip_parse(host, &lit)) {
        named = net_rule(a, &lit, port);
        if (!named) {
            refuse(d, "address %s is not in the allowlist", host);
            return;
        }
    } else {
        for (size_t i = 0; i < a->n && !named; i++)
            if (port_ok(&a->rules[i], port) && name_match(&a->rules[i], host))
                named = &a->rules[i];
        if (!named) {
            refuse(d, "%s is not in the allowlist", host);
            return;
        }
    }
    d->rule = named->text;
    if (naddrs == 0) {
        refuse(d, "%s resolves to no address", host);
        return;
    }
    for (size_t i = 0; i < naddrs && i < ABX_EGRESS_ADDRS; i++) {
        abx_addr_class c = abx_ip_class(&addrs[i]);
        bool ok = c == ABX_ADDR_PUBLIC || net_rule(a, &addrs[i], port) ||
                  (pinned && named->kind == ABX_EG_HOST && c != ABX_ADDR_UNSPECIFIED);
        if (!ok) {
            char f[46], why[80];
            abx_ip_format(&addrs[i], f);
            snprintf(why, sizeof why, "%s (%s)", f, abx_addr_class_name(c));
            refuse(d, "resolves to %s, which no entry names", why);
            return;
        }
        d->addrs[d->naddrs++] = addrs[i];
    }
    d->allow = true;
}

static size_t system_resolve(const char *host, int port, abx_ip *out)
{
    struct addrinfo hints = {.ai_socktype = SOCK_STREAM}, *res = NULL;
    char ps[8];
    snprintf(ps, sizeof ps, "%d", port);
    if (getaddrinfo(host, ps, &hints, &res) != 0)
        return 0;
    size_t n = 0;
    for (struct addrinfo *ai = res; ai && n < ABX_EGRESS_ADDRS; ai = ai->ai_next) {
        char f[46];
        const void *src = ai->ai_family == AF_INET ? (const void *)&((struct sockaddr_in *)ai->ai_addr)->sin_addr
                                                   : (const void *)&((struct sockaddr_in6 *)ai->ai_addr)->sin6_addr;
        if ((ai->ai_family == AF_INET || ai->ai_family == AF_INET6) && inet_ntop(ai->ai_family, src, f, sizeof f) &&
            abx_ip_parse(f, &out[n]))
            n++;
    }
    freeaddrinfo(res);
    return n;
}

void abx_egress_decide(const abx_egress_allow *a, const abx_egress_resolver *r, bool system_dns, const char *host,
                       int port, abx_egress_decision *d)
{
    abx_ip addrs[ABX_EGRESS_ADDRS];
    size_t n = 0;
    bool pinned = false;
    if (abx_ip_parse(host, &addrs[0])) {
        n = 1;
    } else {
        /* the name first: an unlisted name is refused before any lookup leaks it */
        abx_egress_check(a, host, port, NULL, 0, false, d);
        if (!d->rule)
            return;
        const abx_egress_pin *p = abx_egress_pinned(r, host, port);
        if (p) {
            memcpy(addrs, p->addrs, p->n * sizeof *addrs);
            n = p->n;
            pinned = true;
        } else if (system_dns) {
            n = system_resolve(host, port, addrs);
        }
    }
    abx_egress_check(a, host, port, addrs, n, pinned, d);
}

/* ---- transparent mode ---- */

const abx_egress_rule *abx_egress_name_listed(const abx_egress_allow *a, const char *host)
{
    abx_ip lit;
    if (abx_ip_parse(host, &lit))
        return NULL;
    for (size_t i = 0; i < a->n; i++)
        if (name_match(&a->rules[i], host))
            return &a->rules[i];
    return NULL;
}

static bool add_port(int *out, size_t *n, size_t cap, int port, int skip)
{
    if (port == skip || port == 53 || *n >= cap)
        return false;
    for (size_t i = 0; i < *n; i++)
        if (out[i] == port)
            return false;
    out[(*n)++] = port;
    return true;
}

size_t abx_egress_transparent_ports(const abx_egress_allow *a, int skip, int *out, size_t cap)
{
    size_t n = 0;
    add_port(out, &n, cap, 80, skip);
    add_port(out, &n, cap, 443, skip);
    for (size_t i = 0; a && i < a->n; i++)
        if (a->rules[i].kind != ABX_EG_NET && a->rules[i].port)
            add_port(out, &n, cap, a->rules[i].port, skip);
    return n;
}
