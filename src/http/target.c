/* target.c — step 0b: the raw request target is checked before anything decodes it,
 * and query strings are decoded here. Pure byte functions (fuzzed). */
#include "http/http.h"
#include <stdlib.h>
#include <string.h>

static int hexval(unsigned char c)
{
    if (c >= '0' && c <= '9')
        return c - '0';
    if (c >= 'a' && c <= 'f')
        return c - 'a' + 10;
    if (c >= 'A' && c <= 'F')
        return c - 'A' + 10;
    return -1;
}

bool abx_target_ok(const char *raw, size_t n)
{
    if (n == 0 || raw[0] != '/')
        return false;
    size_t qpos = n;
    for (size_t i = 0; i < n; i++)
        if (raw[i] == '?') {
            qpos = i;
            break;
        }
    /* path part */
    for (size_t i = 0; i < qpos; i++) {
        unsigned char c = (unsigned char)raw[i];
        if (c < 0x20 || c == 0x7f || c >= 0x80 || c == '\\' || c == '#' || c == ' ')
            return false;
        if (c == '%') {
            if (i + 2 >= qpos) /* two hex digits must follow inside the path */
                return false;
            int h = hexval((unsigned char)raw[i + 1]), l = hexval((unsigned char)raw[i + 2]);
            if (h < 0 || l < 0)
                return false;
            int v = h * 16 + l;
            if (v == '/' || v == '.' || v == '\\' || v < 0x20 || v == 0x7f || v == '%')
                return false;
            i += 2;
            continue;
        }
        if (c == '/') {
            /* segment starting here: refuse empty, "." and ".." segments */
            size_t j = i + 1;
            if (j < qpos && raw[j] == '/')
                return false;
            if (j < qpos && raw[j] == '.') {
                if (j + 1 == qpos || raw[j + 1] == '/')
                    return false;
                if (raw[j + 1] == '.' && (j + 2 == qpos || raw[j + 2] == '/'))
                    return false;
            }
        }
    }
    /* query part */
    for (size_t i = qpos + 1; i < n; i++) {
        unsigned char c = (unsigned char)raw[i];
        if (c < 0x21 || c == 0x7f || c == '#')
            return false;
        if (c == '%') {
            if (i + 2 >= n)
                return false;
            if (hexval((unsigned char)raw[i + 1]) < 0 || hexval((unsigned char)raw[i + 2]) < 0)
                return false;
            i += 2;
        }
    }
    return true;
}

long abx_pct_decode(const char *src, size_t n, char *dst, bool plus_space)
{
    size_t o = 0;
    for (size_t i = 0; i < n; i++) {
        char c = src[i];
        if (c == '%') {
            if (i + 2 >= n)
                return -1;
            int h = hexval((unsigned char)src[i + 1]), l = hexval((unsigned char)src[i + 2]);
            if (h < 0 || l < 0)
                return -1;
            dst[o++] = (char)(h * 16 + l);
            i += 2;
        } else if (c == '+' && plus_space) {
            dst[o++] = ' ';
        } else {
            dst[o++] = c;
        }
    }
    dst[o] = '\0';
    return (long)o;
}

int abx_query_each(const char *q, size_t n, abx_query_cb cb, void *ud)
{
    char stackbuf[1024];
    size_t i = 0;
    while (i < n) {
        size_t start = i;
        while (i < n && q[i] != '&')
            i++;
        size_t len = i - start;
        i++; /* skip '&' */
        if (len == 0)
            continue;
        const char *pair = q + start;
        const char *eq = memchr(pair, '=', len);
        size_t nl = eq ? (size_t)(eq - pair) : len;
        size_t vl = eq ? len - nl - 1 : 0;
        char *buf = len + 2 <= sizeof stackbuf ? stackbuf : NULL;
        char *heap = NULL;
        if (!buf) {
            heap = malloc(len + 2);
            if (!heap)
                return -1;
            buf = heap;
        }
        long dn = abx_pct_decode(pair, nl, buf, true);
        long dv = dn < 0 ? -1 : abx_pct_decode(eq ? eq + 1 : "", vl, buf + dn + 1, true);
        int rc = 0;
        if (dn < 0 || dv < 0)
            rc = -1;
        else
            rc = cb(ud, buf, (size_t)dn, buf + dn + 1, (size_t)dv);
        free(heap);
        if (rc)
            return rc;
    }
    return 0;
}
