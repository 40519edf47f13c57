/* text.c — UTF-8 text, in one place: the encoding check, abx's one notion of "text" (UTF-8
 * without NUL), the repair that turns any bytes into such text for a JSON result, and the
 * cut that never splits a character.
 *
 * NUL is not text. It is valid UTF-8 (U+0000), but every consumer of abx's text (agents'
 * JSON decoders, C clients, log lines, abx itself through json_string_value/strlen) may
 * end the string there, so a NUL shown to them hides what follows it. files.read already
 * refuses such a file as files.not_utf8 and a string argument with NUL is args.invalid;
 * the repair replaces NUL with U+FFFD the same way it replaces a byte that is not UTF-8,
 * so process output, file names and search lines all follow the one rule. */
#include "core/text.h"
#include "core/util.h"
#include <stdint.h>
#include <string.h>

bool abx_utf8_valid(const char *s, size_t n)
{
    if (n && !s)
        return false;
    const unsigned char *p = (const unsigned char *)s;
    size_t i = 0;
    while (i < n) {
        /* ASCII, eight bytes at a time: the common case of a JSON reply's text */
        while (n - i >= 8) {
            uint64_t w;
            memcpy(&w, p + i, 8);
            if (w & 0x8080808080808080ull)
                break;
            i += 8;
        }
        if (i >= n)
            break;
        unsigned char c = p[i];
        if (c < 0x80) {
            i++;
            continue;
        }
        size_t extra;
        /* Tight bounds on the second byte are what exclude overlongs (E0, F0),
         * surrogates (ED) and code points above U+10FFFF (F4). */
        unsigned char lo = 0x80, hi = 0xbf;
        if (c >= 0xc2 && c <= 0xdf) {
            extra = 1;
        } else if (c >= 0xe0 && c <= 0xef) {
            extra = 2;
            if (c == 0xe0)
                lo = 0xa0;
            else if (c == 0xed)
                hi = 0x9f;
        } else if (c >= 0xf0 && c <= 0xf4) {
            extra = 3;
            if (c == 0xf0)
                lo = 0x90;
            else if (c == 0xf4)
                hi = 0x8f;
        } else {
            return false; /* stray continuation, C0/C1 overlong lead, or F5..FF */
        }
        if (n - i - 1 < extra)
            return false;
        if (p[i + 1] < lo || p[i + 1] > hi)
            return false;
        for (size_t k = 2; k <= extra; k++)
            if ((p[i + k] & 0xc0) != 0x80)
                return false;
        i += extra + 1;
    }
    return true;
}

bool abx_text_valid(const char *s, size_t n)
{
    return abx_utf8_valid(s, n) && (n == 0 || !memchr(s, '\0', n));
}

/* The length of the UTF-8 character starting at p[0..n), or 0 when the bytes there are
 * not one valid character (a stray byte, an invalid or truncated sequence, or NUL). */
static size_t text_char_len(const unsigned char *p, size_t n)
{
    size_t k = p[0] < 0x80 ? 1 : p[0] >= 0xf0 ? 4 : p[0] >= 0xe0 ? 3 : p[0] >= 0xc0 ? 2 : 0;
    if (k == 0 || k > n || p[0] == 0)
        return 0;
    return abx_utf8_valid((const char *)p, k) ? k : 0;
}

json_t *abx_text_json(const char *p, size_t n)
{
    if (abx_text_valid(p, n)) /* checked just now: jansson need not check it again */
        return json_stringn_nocheck(n ? p : "", n);
    abx_buf b;
    abx_buf_init(&b, 0);
    for (size_t i = 0; i < n;) {
        size_t k = text_char_len((const unsigned char *)p + i, n - i);
        if (k) {
            abx_buf_append(&b, p + i, k);
            i += k;
        } else {
            abx_buf_append(&b, "\xef\xbf\xbd", 3); /* U+FFFD for each byte that is not text */
            i++;
        }
    }
    json_t *j = b.failed ? NULL : json_stringn(b.data ? b.data : "", b.len);
    abx_buf_release(&b);
    return j;
}

size_t abx_utf8_complete_prefix(const char *p, size_t n)
{
    size_t back = 0;
    while (back < 4 && back < n && ((unsigned char)p[n - 1 - back] & 0xC0) == 0x80)
        back++;
    if (back < n) {
        unsigned char lead = (unsigned char)p[n - 1 - back];
        size_t need = lead >= 0xF0 ? 4 : lead >= 0xE0 ? 3 : lead >= 0xC0 ? 2 : 1;
        if (need > back + 1)
            return n - back - 1;
    }
    return n;
}

bool abx_cookie_next(const char **p, const char **pair, size_t *len)
{
    const char *s = *p;
    for (;;) {
        while (*s == ' ' || *s == '\t' || *s == ';')
            s++;
        if (!*s) {
            *p = s;
            return false;
        }
        const char *end = strchr(s, ';');
        size_t n = end ? (size_t)(end - s) : strlen(s);
        size_t k = n;
        while (k && (s[k - 1] == ' ' || s[k - 1] == '\t'))
            k--;
        *pair = s;
        *len = k;
        *p = s + n;
        return true;
    }
}

const char *abx_cookie_get(const char *header, const char *name, size_t *len)
{
    size_t nl = strlen(name);
    const char *p = header ? header : "", *pair;
    size_t n;
    while (abx_cookie_next(&p, &pair, &n))
        if (n > nl && pair[nl] == '=' && memcmp(pair, name, nl) == 0) {
            *len = n - nl - 1;
            return pair + nl + 1;
        }
    return NULL;
}
