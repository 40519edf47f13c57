/* ids.c — the op id grammar (v2.1), the prefix rule, reserved namespaces, verbs,
 * legacy-name mangling and edit distance for did-you-mean. Pure string functions. */
#include "core/core.h"
#include "core/util.h"
#include <stdio.h>
#include <string.h>

bool abx_id_valid(const char *id, char *err, size_t errlen)
{
    if (!id || !*id) {
        snprintf(err, errlen, "op id is empty");
        return false;
    }
    size_t len = strlen(id);
    if (len >= ABX_ID_MAX) {
        snprintf(err, errlen, "op id '%.40s...' is longer than %d characters", id, ABX_ID_MAX - 1);
        return false;
    }
    int segments = 0;
    const char *p = id;
    for (;;) {
        if (!(*p >= 'a' && *p <= 'z')) {
            snprintf(err, errlen, "op id '%s': each segment must start with a lower-case letter (at offset %zu)", id,
                     (size_t)(p - id));
            return false;
        }
        p++;
        while ((*p >= 'a' && *p <= 'z') || (*p >= '0' && *p <= '9') || *p == '_')
            p++;
        segments++;
        if (*p == '\0')
            break;
        if (*p != '.') {
            snprintf(err, errlen, "op id '%s': character '%c' at offset %zu is not in [a-z0-9_.]", id,
                     (*p >= 0x20 && *p < 0x7f) ? *p : '?', (size_t)(p - id));
            return false;
        }
        p++;
    }
    if (segments < 2 || segments > 5) {
        snprintf(err, errlen, "op id '%s' has %d segment%s; 2 to 5 are allowed", id, segments, segments == 1 ? "" : "s");
        return false;
    }
    return true;
}

bool abx_id_is_prefix(const char *a, const char *b)
{
    size_t la = strlen(a);
    return strncmp(a, b, la) == 0 && b[la] == '.';
}

static const char *const reserved[] = {"core", "files", "commands", "process", "terminal", "system", "devtools",
                                       "browser", "agents", "ext", "ledger", "approvals", "kernels", "runs",
                                       "tools", "ports", "dyn"};

bool abx_id_reserved_ns(const char *id)
{
    const char *dot = strchr(id, '.');
    size_t n = dot ? (size_t)(dot - id) : strlen(id);
    for (size_t i = 0; i < ABX_ARRAY_LEN(reserved); i++)
        if (strlen(reserved[i]) == n && strncmp(reserved[i], id, n) == 0)
            return true;
    return false;
}

static const char *const verbs[] = {"list", "get", "create", "update", "delete", "run", "start", "stop", "stream",
                                    "read", "write", "download", "upload", "stat", "move", "search", "watch",
                                    "signal", "check", "describe", "install", "health", "capabilities", "edit",
                                    "mkdir", "copy", "find", "archive", "extract", "exec", "close", "output", "resize",
                                    "connect", "info", "reload", "explain", "timeline", "decide", "execute",
                                    "send", "cancel", "verify", "grade", "metrics", "env", "interrupt", "restart",
                                    "finalize", "wait", "ticket", "proxy",
                                    /* browser.* */
                                    "navigate", "back", "snapshot", "content", "screenshot", "evaluate", "click",
                                    "type", "press", "scroll", "tabs",
                                    "define", "call", "promote", /* tools.* */
                                    "send_event"}; /* agents.*.sessions.send_event (the seed's name) */

bool abx_id_known_verb(const char *id)
{
    const char *last = strrchr(id, '.');
    last = last ? last + 1 : id;
    for (size_t i = 0; i < ABX_ARRAY_LEN(verbs); i++)
        if (strcmp(verbs[i], last) == 0)
            return true;
    return false;
}

bool abx_id_mangle(const char *name, char *out, size_t outlen)
{
    size_t o = 0;
    bool pending_us = false;
    if (outlen < 4)
        return false;
    for (const unsigned char *p = (const unsigned char *)name; *p; p++) {
        unsigned char c = *p;
        if (c >= 'A' && c <= 'Z')
            c = (unsigned char)(c - 'A' + 'a');
        bool ok = (c >= 'a' && c <= 'z') || (c >= '0' && c <= '9');
        if (!ok) { /* '_' and every other character become one separator */
            pending_us = o > 0;
            continue;
        }
        if (o == 0 && c >= '0' && c <= '9') {
            out[o++] = 'c';
            out[o++] = '_';
        }
        if (pending_us) {
            if (o + 1 >= outlen)
                return false;
            out[o++] = '_';
            pending_us = false;
        }
        if (o + 1 >= outlen)
            return false;
        out[o++] = (char)c;
    }
    out[o] = '\0';
    return o > 0;
}

int abx_edit_distance(const char *a, const char *b, int max)
{
    /* optimal string alignment: insert, delete, substitute, and swap of neighbours
     * ("lsit" → "list" is one edit) */
    size_t la = strlen(a), lb = strlen(b);
    if (la > 128 || lb > 128)
        return max + 1;
    if ((int)(la > lb ? la - lb : lb - la) > max)
        return max + 1;
    /* three rows (i-2, i-1, i) are all the recurrence reads: 1.5 KiB on the stack, not
     * a 65 KiB thread-local matrix that glibc clears in every new thread */
    int rows[3][129];
    int *r2 = rows[0], *r1 = rows[1], *r0 = rows[2];
    for (size_t j = 0; j <= lb; j++)
        r1[j] = (int)j;
    for (size_t i = 1; i <= la; i++) {
        int best = r0[0] = (int)i;
        for (size_t j = 1; j <= lb; j++) {
            int cost = a[i - 1] == b[j - 1] ? 0 : 1;
            int v = r1[j - 1] + cost;
            if (r1[j] + 1 < v)
                v = r1[j] + 1;
            if (r0[j - 1] + 1 < v)
                v = r0[j - 1] + 1;
            if (i > 1 && j > 1 && a[i - 1] == b[j - 2] && a[i - 2] == b[j - 1] && r2[j - 2] + 1 < v)
                v = r2[j - 2] + 1;
            r0[j] = v;
            if (v < best)
                best = v;
        }
        if (best > max + 1) /* rows never decrease below their minimum by more than the swap */
            return max + 1;
        int *t = r2;
        r2 = r1;
        r1 = r0;
        r0 = t;
    }
    return r1[lb] > max ? max + 1 : r1[lb]; /* the last row computed */
}

bool abx_id_tool_name(const char *id, char *out, size_t outlen)
{
    size_t o = 0;
    for (const char *p = id; *p; p++) {
        size_t need = *p == '.' ? 2 : 1;
        if (o + need >= outlen)
            return false;
        if (*p == '.') {
            out[o++] = '_';
            out[o++] = '_';
        } else {
            out[o++] = *p;
        }
    }
    if (outlen == 0)
        return false;
    out[o] = '\0';
    return true;
}

void abx_request_id_format(char out[ABX_REQUEST_ID_MAX], const char prefix[8], unsigned long n)
{
    memcpy(out, prefix, 8);
    out[8] = '-';
    char digits[2 * sizeof n];
    size_t k = 0;
    do {
        digits[k++] = "0123456789abcdef"[n & 15];
        n >>= 4;
    } while (n);
    size_t at = 9;
    for (size_t pad = k; pad < 8; pad++)
        out[at++] = '0';
    while (k)
        out[at++] = digits[--k];
    out[at] = '\0';
}
