/* gitcfg.c — see gitcfg.h. Only enough of git-config's grammar to find a key: values
 * are never interpreted, so a quoted or escaped value cannot hide a key, and a line the
 * parser does not understand is skipped (git would refuse the whole file). */
#include "builtin/gitcfg.h"

#include <ctype.h>
#include <string.h>
#include <strings.h>

static bool is_key_char(int c) { return isalnum(c) || c == '-'; }

/* One logical line: what follows a header or a whole key line. sect is the lowercase
 * section name ("core", "include", "includeif"), or "" outside a known one. */
static const char *line_key(const char *sect, const char *p, const char *end)
{
    while (p < end && (*p == ' ' || *p == '\t'))
        p++;
    const char *k = p;
    while (p < end && is_key_char((unsigned char)*p))
        p++;
    size_t kl = (size_t)(p - k);
    while (p < end && (*p == ' ' || *p == '\t'))
        p++;
    if (kl == 0 || (p < end && *p != '=' && *p != '#' && *p != ';' && *p != '\r'))
        return NULL;
    if (strcmp(sect, "core") == 0 && kl == 9 && strncasecmp(k, "fsmonitor", 9) == 0)
        return "core.fsmonitor";
    if (strcmp(sect, "core") == 0 && kl == 9 && strncasecmp(k, "hookspath", 9) == 0)
        return "core.hookspath";
    if (strcmp(sect, "include") == 0 && kl == 4 && strncasecmp(k, "path", 4) == 0)
        return "include.path";
    if (strcmp(sect, "includeif") == 0 && kl == 4 && strncasecmp(k, "path", 4) == 0)
        return "includeif.path";
    return NULL;
}

/* Parse "[name]", "[name "sub"]" or the old "[name.sub]"; sets sect (lowercase, ""
 * when too long) and returns the position after ']', or NULL when malformed. */
static const char *header(const char *p, const char *end, char *sect, size_t cap)
{
    p++; /* '[' */
    while (p < end && (*p == ' ' || *p == '\t'))
        p++;
    size_t n = 0;
    while (p < end && (isalnum((unsigned char)*p) || *p == '-')) {
        if (n + 1 < cap)
            sect[n++] = (char)tolower((unsigned char)*p);
        p++;
    }
    sect[n] = '\0';
    bool quoted = false;
    while (p < end && (*p != ']' || quoted)) {
        if (*p == '\\' && quoted && p + 1 < end)
            p++;
        else if (*p == '"')
            quoted = !quoted;
        p++;
    }
    return p < end ? p + 1 : NULL;
}

/* Whether the line [p, le) ends with a backslash (before an optional CR). */
static bool continued(const char *p, const char *le)
{
    if (le > p && le[-1] == '\r')
        le--;
    return le > p && le[-1] == '\\';
}

static void add_key(const char *key, const char **keys, size_t max, size_t *n)
{
    for (size_t i = 0; i < *n; i++)
        if (strcmp(keys[i], key) == 0)
            return;
    if (*n < max)
        keys[(*n)++] = key;
}

size_t abx_gitcfg_hook_keys(const char *text, size_t len, const char **keys, size_t max)
{
    const char *p = text, *end = text + len;
    char sect[32] = "";
    size_t n = 0;
    while (p < end) {
        const char *eol = memchr(p, '\n', (size_t)(end - p));
        const char *le = eol ? eol : end;
        const char *q = p;
        while (q < le && (*q == ' ' || *q == '\t'))
            q++;
        if (q < le && *q == '[') {
            q = header(q, le, sect, sizeof sect);
            if (!q) {
                sect[0] = '\0';
                q = le;
            }
        }
        const char *key = q < le && *q != '#' && *q != ';' ? line_key(sect, q, le) : NULL;
        if (key)
            add_key(key, keys, max, &n);
        /* a value continued with a trailing backslash goes on to the next line: skip it */
        while (eol && continued(p, le)) {
            p = eol + 1;
            eol = memchr(p, '\n', (size_t)(end - p));
            le = eol ? eol : end;
        }
        p = eol ? eol + 1 : end;
    }
    return n;
}

bool abx_gitcfg_name(const char *canonical)
{
    const char *base = strrchr(canonical, '/');
    base = base ? base + 1 : canonical;
    if (strcmp(base, ".gitconfig") == 0)
        return true;
    if (strcmp(base, "config") != 0 && strcmp(base, "config.worktree") != 0)
        return false;
    return strstr(canonical, "/.git/") != NULL;
}
