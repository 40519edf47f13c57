/* url.c — url scopes: strict parse to one canonical form and pattern matching.
 * Anything ambiguous (userinfo, backslashes, spaces, dot segments, odd schemes) is
 * refused rather than interpreted: two parsers must never disagree about a URL. */
#include "policy/url.h"
#include "core/util.h"
#include "policy/paths.h"
#include <arpa/inet.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

typedef struct url_parts {
    char scheme[8];
    char host[256];
    int port;            /* 0 = default */
    char *path;          /* owned, starts with '/' */
    char *query;         /* owned or NULL */
} url_parts;

static void parts_release(url_parts *u)
{
    abx_free(u->path);
    abx_free(u->query);
}

static bool host_ok(const char *h, bool pattern)
{
    if (!*h)
        return false;
    if (h[0] == '[')
        return !pattern && h[strlen(h) - 1] == ']';
    for (const char *c = h; *c; c++)
        if (!((*c >= 'a' && *c <= 'z') || (*c >= '0' && *c <= '9') || *c == '-' || *c == '.' ||
              (pattern && *c == '*')))
            return false;
    return h[0] != '.' && h[strlen(h) - 1] != '.' && !strstr(h, "..");
}

static int parse(const char *url, url_parts *u, bool pattern, char *err, size_t errlen)
{
    memset(u, 0, sizeof *u);
    for (const unsigned char *c = (const unsigned char *)url; *c; c++)
        if (*c <= 0x20 || *c >= 0x7f || *c == '\\') {
            snprintf(err, errlen, "the URL has a space, control, backslash or non-ASCII character");
            return -1;
        }
    const char *sep = strstr(url, "://");
    if (!sep || sep - url > 5) {
        snprintf(err, errlen, "the URL needs scheme://host");
        return -1;
    }
    snprintf(u->scheme, sizeof u->scheme, "%.*s", (int)(sep - url), url);
    for (char *c = u->scheme; *c; c++)
        if (*c >= 'A' && *c <= 'Z')
            *c = (char)(*c - 'A' + 'a');
    if (strcmp(u->scheme, "http") != 0 && strcmp(u->scheme, "https") != 0) {
        snprintf(err, errlen, "scheme '%s' is not allowed (http, https)", u->scheme);
        return -1;
    }
    const char *auth = sep + 3;
    size_t alen = strcspn(auth, "/?#");
    if (memchr(auth, '@', alen)) {
        snprintf(err, errlen, "URLs with userinfo (user@host) are not allowed");
        return -1;
    }
    char hostport[300];
    if (alen == 0 || alen >= sizeof hostport) {
        snprintf(err, errlen, "the URL has no host or a too long one");
        return -1;
    }
    memcpy(hostport, auth, alen);
    hostport[alen] = '\0';
    char *colon = hostport[0] == '[' ? strstr(hostport, "]:") : strrchr(hostport, ':');
    if (colon && hostport[0] == '[')
        colon++;
    if (colon) {
        *colon = '\0';
        char *end;
        long port = strtol(colon + 1, &end, 10);
        if (*end || colon[1] == '\0' || port < 1 || port > 65535) {
            snprintf(err, errlen, "the URL has an invalid port");
            return -1;
        }
        bool dflt = (strcmp(u->scheme, "http") == 0 && port == 80) || (strcmp(u->scheme, "https") == 0 && port == 443);
        u->port = dflt ? 0 : (int)port;
    }
    if (strlen(hostport) >= sizeof u->host) { /* refused, never cut to fit: a cut host is another host */
        snprintf(err, errlen, "the URL has no host or a too long one");
        return -1;
    }
    snprintf(u->host, sizeof u->host, "%s", hostport);
    for (char *c = u->host; *c; c++)
        if (*c >= 'A' && *c <= 'Z')
            *c = (char)(*c - 'A' + 'a');
    if (!host_ok(u->host, pattern)) {
        snprintf(err, errlen, "the URL host '%s' is not a plain DNS name or IP literal", u->host);
        return -1;
    }
    const char *rest = auth + alen;
    size_t plen = strcspn(rest, "?#");
    u->path = plen ? abx_strndup(rest, plen) : abx_strdup("/");
    if (rest[plen] == '?') {
        size_t ql = strcspn(rest + plen + 1, "#");
        u->query = abx_strndup(rest + plen + 1, ql);
    }
    if (!u->path) {
        snprintf(err, errlen, "out of memory");
        return -1;
    }
    /* dot segments (also encoded) are refused: no two readings of one path */
    for (const char *s = u->path; *s; s++) {
        if (*s != '/')
            continue;
        const char *seg = s + 1;
        size_t sl = strcspn(seg, "/");
        if ((sl == 1 && seg[0] == '.') || (sl == 2 && seg[0] == '.' && seg[1] == '.') ||
            (!pattern && sl == 0 && seg[0] == '/')) {
            snprintf(err, errlen, "the URL path has empty or dot segments");
            parts_release(u);
            return -1;
        }
    }
    if (strcasestr(u->path, "%2e") || strcasestr(u->path, "%2f") || strcasestr(u->path, "%5c")) {
        snprintf(err, errlen, "the URL path has encoded dots or slashes");
        parts_release(u);
        return -1;
    }
    return 0;
}

char *abx_url_canon(const char *url, char *err, size_t errlen)
{
    url_parts u;
    if (parse(url, &u, false, err, errlen) != 0)
        return NULL;
    char *out = u.port ? abx_asprintf("%s://%s:%d%s%s%s", u.scheme, u.host, u.port, u.path, u.query ? "?" : "",
                                      u.query ? u.query : "")
                       : abx_asprintf("%s://%s%s%s%s", u.scheme, u.host, u.path, u.query ? "?" : "",
                                      u.query ? u.query : "");
    parts_release(&u);
    return out;
}

bool abx_url_pattern_valid(const char *pattern, char *err, size_t errlen)
{
    url_parts u;
    if (parse(pattern, &u, true, err, errlen) != 0)
        return false;
    char *g = abx_asprintf("%s", u.path);
    bool ok = g && abx_glob_valid(g, err, errlen);
    abx_free(g);
    parts_release(&u);
    return ok;
}

static bool private_host(const char *h)
{
    if (strcmp(h, "localhost") == 0 || (strlen(h) > 10 && strcmp(h + strlen(h) - 10, ".localhost") == 0))
        return true;
    struct in_addr a;
    if (inet_pton(AF_INET, h, &a) == 1) {
        uint32_t x = ntohl(a.s_addr);
        return (x >> 24) == 10 || (x >> 24) == 127 || (x >> 20) == (172u << 4 | 1) || (x >> 16) == (192u << 8 | 168) ||
               (x >> 16) == (169u << 8 | 254) || x == 0;
    }
    if (h[0] == '[') {
        char inner[64];
        snprintf(inner, sizeof inner, "%.*s", (int)strlen(h) - 2, h + 1);
        struct in6_addr b;
        if (inet_pton(AF_INET6, inner, &b) != 1)
            return true;
        return IN6_IS_ADDR_LOOPBACK(&b) || (b.s6_addr[0] & 0xfe) == 0xfc || IN6_IS_ADDR_LINKLOCAL(&b) ||
               IN6_IS_ADDR_UNSPECIFIED(&b) || IN6_IS_ADDR_V4MAPPED(&b);
    }
    return false;
}

static bool host_match(const char *pat, const char *host)
{
    if (strncmp(pat, "*.", 2) == 0) {
        size_t lp = strlen(pat + 1), lh = strlen(host); /* ".example.com" */
        return lh > lp && strcmp(host + lh - lp, pat + 1) == 0;
    }
    /* label-wise, '*' is one label */
    while (*pat && *host) {
        size_t lp = strcspn(pat, "."), lh = strcspn(host, ".");
        if (!(lp == 1 && pat[0] == '*') && (lp != lh || strncmp(pat, host, lp) != 0))
            return false;
        pat += lp;
        host += lh;
        if (*pat != *host)
            return false;
        if (*pat)
            pat++, host++;
    }
    return !*pat && !*host;
}

bool abx_url_match(const char *pattern, const char *canonical_url)
{
    url_parts p, u;
    char err[8];
    if (parse(pattern, &p, true, err, sizeof err) != 0)
        return false;
    if (parse(canonical_url, &u, false, err, sizeof err) != 0) {
        parts_release(&p);
        return false;
    }
    bool ok = strcmp(p.scheme, u.scheme) == 0 && p.port == u.port;
    if (ok && private_host(u.host))
        ok = strcmp(p.host, u.host) == 0; /* private and loopback hosts only when named literally */
    else if (ok)
        ok = host_match(p.host, u.host);
    ok = ok && abx_glob_match(p.path, u.path);
    parts_release(&p);
    parts_release(&u);
    return ok;
}
