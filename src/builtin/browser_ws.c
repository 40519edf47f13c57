/* browser_ws.c — WebSockets under the url scope. Chromium 156 shows a WebSocket handshake
 * to neither the Fetch domain nor Network.setBlockedURLs (both measured; docs/browser.md),
 * so the gate is the browser's proxy configuration, which lives in the browser process
 * where no page reaches: every ws:/wss: connection goes to a SOCKS proxy on the discard
 * port (nothing answers: a network error in the page) except the scheme://host:port pairs
 * put on --proxy-bypass-list, which connect the way the browser's other traffic does (the
 * statement's net: direct, or under an allowlist through the egress box's transparent
 * ports, the allowlist holding). A pair is listed only for a urls pattern that admits
 * every path of one literal host and port: ws: is matched as http:, wss: as https:.
 * Patterns with a narrower path or a host wildcard list nothing (fail closed). Network.webSocketCreated names the full URL; one the scope or the pairs refuse
 * is recorded as blocked. */
#include "builtin/browser.h"
#include <stdio.h>
#include <string.h>

/* "ws://host:port" of a pattern admitting all its host's paths, or false. */
static bool pattern_pair(const char *pat, char *out, size_t cap)
{
    const char *ws;
    size_t skip;
    if (strncmp(pat, "http://", 7) == 0)
        ws = "ws", skip = 7;
    else if (strncmp(pat, "https://", 8) == 0)
        ws = "wss", skip = 8;
    else
        return false;
    const char *hp = pat + skip, *slash = strchr(hp, '/');
    if (!slash || strcmp(slash, "/**") != 0 || slash == hp || (size_t)(slash - hp) > 270)
        return false;
    char host[280];
    snprintf(host, sizeof host, "%.*s", (int)(slash - hp), hp);
    char *colon = host[0] == '[' ? strstr(host, "]:") : strrchr(host, ':');
    int port = strcmp(ws, "ws") == 0 ? 80 : 443;
    if (colon) {
        if (host[0] == '[')
            colon++;
        char *end;
        long p = strtol(colon + 1, &end, 10);
        if (*end || p < 1 || p > 65535)
            return false;
        port = (int)p;
        *colon = '\0';
    }
    if (!host[0] || strchr(host, '*')) /* one literal host: a wildcard's reading may differ */
        return false;
    for (const char *c = host; *c; c++)
        if (!((*c >= 'a' && *c <= 'z') || (*c >= '0' && *c <= '9') || strchr(".-*[]:", *c)))
            return false;
    return snprintf(out, cap, "%s://%s:%d", ws, host, port) < (int)cap;
}

char *abx_browser_ws_pairs(char *const *urls, size_t n)
{
    size_t cap = 1, len = 0;
    for (size_t i = 0; i < n; i++)
        cap += strlen(urls[i]) + 16;
    char *out = abx_calloc(1, cap);
    if (!out)
        return NULL;
    for (size_t i = 0; i < n; i++) {
        char pair[300];
        if (pattern_pair(urls[i], pair, sizeof pair) && len + strlen(pair) + 2 <= cap)
            len += (size_t)snprintf(out + len, cap - len, ";%s", pair);
    }
    return out;
}

/* Is ";pair" one of list's entries (list as abx_browser_ws_pairs makes it)? */
static bool listed(const char *list, const char *pair)
{
    size_t n = strlen(pair);
    for (const char *p = list ? strchr(list, ';') : NULL; p; p = strchr(p + 1, ';'))
        if (strncmp(p + 1, pair, n) == 0 && (p[1 + n] == ';' || p[1 + n] == '\0'))
            return true;
    return false;
}

bool abx_browser_ws_covered(browser *b)
{
    pthread_mutex_lock(&b->mu);
    char *now = abx_browser_ws_pairs(b->urls, b->n_urls);
    bool ok = now != NULL;
    for (const char *p = b->ws_pairs ? strchr(b->ws_pairs, ';') : NULL; ok && p; p = strchr(p + 1, ';')) {
        char pair[300];
        snprintf(pair, sizeof pair, "%.*s", (int)strcspn(p + 1, ";"), p + 1);
        ok = listed(now, pair);
    }
    pthread_mutex_unlock(&b->mu);
    abx_free(now);
    return ok;
}

bool abx_browser_ws_admitted(browser *b, const char *url)
{
    bool tls = url && strncmp(url, "wss://", 6) == 0;
    if (!url || (!tls && strncmp(url, "ws://", 5) != 0))
        return false;
    char *as_http = abx_asprintf("%s%s", tls ? "https://" : "http://", url + (tls ? 6 : 5));
    bool ok = as_http && abx_browser_url_admitted(b, as_http);
    abx_free(as_http);
    if (!ok)
        return false;
    /* and the network admits it: its host:port is a pair the browser was started with */
    const char *hp = url + (tls ? 6 : 5);
    size_t hl = strcspn(hp, "/?#");
    char host[280], pair[300];
    snprintf(host, sizeof host, "%.*s", (int)(hl < 270 ? hl : 270), hp);
    bool has_port = host[0] == '[' ? strstr(host, "]:") != NULL : strchr(host, ':') != NULL;
    if (has_port)
        snprintf(pair, sizeof pair, "%s://%s", tls ? "wss" : "ws", host);
    else
        snprintf(pair, sizeof pair, "%s://%s:%d", tls ? "wss" : "ws", host, tls ? 443 : 80);
    for (char *c = pair; *c; c++)
        if (*c >= 'A' && *c <= 'Z')
            *c = (char)(*c - 'A' + 'a');
    pthread_mutex_lock(&b->mu);
    ok = listed(b->ws_pairs, pair);
    pthread_mutex_unlock(&b->mu);
    return ok;
}
