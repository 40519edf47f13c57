/* jsonout.c — compact JSON text of a jansson value, byte for byte what
 * json_dumps(v, JSON_COMPACT | JSON_ENCODE_ANY [| JSON_SORT_KEYS]) writes, at a fraction
 * of its cost: jansson emits every character through a callback into a growing
 * buffer (~80 instructions a byte), which made the reply and the ledger row the two
 * largest costs of a 1 KiB files.read. Here runs of plain characters are copied whole.
 *
 * Output rules (jansson 2.14's dump.c): no spaces; strings escape '"', '\\', \b \f \n
 * \r \t and other bytes below 0x20 as \u00XX (upper-case hex), everything else (UTF-8,
 * '/', DEL) as is; a string that is not valid UTF-8 fails the whole dump (NULL), as
 * jansson's does; integers in decimal; reals as jansson's jsonp_dtostr writes them (its
 * %.17g and exponent clean-up: put_real); object members in insertion order, or
 * sorted bytewise by key (shorter first on a common prefix) with sort_keys.
 * tests/unit/test_jsonout.c compares the two on edge cases and random trees. */
#include "core/jsonout.h"
#include "core/text.h"
#include <math.h>
#if defined(__SSE2__)
#include <emmintrin.h>
#endif
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define JSONOUT_MAX_DEPTH 2048

typedef abx_jw obuf;

static bool grow(obuf *b, size_t more)
{
    if (b->oom)
        return false;
    if (b->n + more + 1 <= b->cap)
        return true;
    size_t cap = b->cap ? b->cap : 2048; /* a reply or a ledger row in one allocation */
    while (cap < b->n + more + 1)
        cap *= 2;
    char *q = realloc(b->p, cap);
    if (!q) {
        b->oom = true;
        return false;
    }
    b->p = q;
    b->cap = cap;
    return true;
}

static void put(obuf *b, const char *s, size_t n)
{
    if (grow(b, n)) {
        memcpy(b->p + b->n, s, n);
        b->n += n;
    }
}

static void putc1(obuf *b, char c)
{
    if (grow(b, 1))
        b->p[b->n++] = c;
}

static bool put_string(obuf *b, const char *s, size_t n)
{
    static const char hex[] = "0123456789ABCDEF";
    bool high = false;
    putc1(b, '"');
    size_t i = 0;
    while (i < n) {
        size_t run = i;
#if defined(__SSE2__)
        /* sixteen bytes at a time while none is a control character, '"' or '\\' */
        {
            const __m128i quote = _mm_set1_epi8('"'), bslash = _mm_set1_epi8('\\'),
                          below = _mm_set1_epi8(0x1f);
            int hi = 0;
            while (run + 16 <= n) {
                __m128i w = _mm_loadu_si128((const __m128i *)(const void *)(s + run));
                /* w <= 0x1f (unsigned): max(w, 0x1f) == 0x1f */
                __m128i ctl = _mm_cmpeq_epi8(_mm_max_epu8(w, below), below);
                __m128i hit = _mm_or_si128(ctl, _mm_or_si128(_mm_cmpeq_epi8(w, quote), _mm_cmpeq_epi8(w, bslash)));
                int m = _mm_movemask_epi8(hit);
                if (m) {
                    unsigned k = (unsigned)__builtin_ctz((unsigned)m);
                    hi |= _mm_movemask_epi8(w) & (int)((1u << k) - 1u);
                    run += k;
                    break;
                }
                hi |= _mm_movemask_epi8(w);
                run += 16;
            }
            high |= hi != 0;
        }
#endif
        /* eight bytes at a time while none is a control character, '"' or '\\' */
        uint64_t seen = 0;
        while (run + 8 <= n) {
            uint64_t w, q, e;
            memcpy(&w, s + run, 8);
            q = w ^ 0x2222222222222222ull;
            e = w ^ 0x5c5c5c5c5c5c5c5cull;
            if (((w - 0x2020202020202020ull) & ~w) & 0x8080808080808080ull ||
                ((q - 0x0101010101010101ull) & ~q) & 0x8080808080808080ull ||
                ((e - 0x0101010101010101ull) & ~e) & 0x8080808080808080ull)
                break; /* one of them is here (or a false alarm): bytewise below */
            seen |= w;
            run += 8;
        }
        high |= (seen & 0x8080808080808080ull) != 0;
        while (run < n) {
            unsigned char c = (unsigned char)s[run];
            if (c < 0x20 || c == '"' || c == '\\')
                break;
            high |= c >= 0x80;
            run++;
        }
        put(b, s + i, run - i);
        if (run == n)
            break;
        unsigned char c = (unsigned char)s[run];
        char esc[6] = {'\\', 0, 0, 0, 0, 0};
        size_t en = 2;
        switch (c) {
        case '"': esc[1] = '"'; break;
        case '\\': esc[1] = '\\'; break;
        case '\b': esc[1] = 'b'; break;
        case '\f': esc[1] = 'f'; break;
        case '\n': esc[1] = 'n'; break;
        case '\r': esc[1] = 'r'; break;
        case '\t': esc[1] = 't'; break;
        default:
            memcpy(esc + 1, "u00", 3);
            esc[4] = hex[c >> 4];
            esc[5] = hex[c & 15];
            en = 6;
        }
        put(b, esc, en);
        i = run + 1;
    }
    putc1(b, '"');
    return !high || abx_utf8_valid(s, n);
}

static void put_int(obuf *b, json_int_t v)
{
    char tmp[24];
    size_t k = sizeof tmp;
    uint64_t u = v < 0 ? (uint64_t)0 - (uint64_t)v : (uint64_t)v;
    do {
        tmp[--k] = (char)('0' + u % 10);
        u /= 10;
    } while (u);
    if (v < 0)
        tmp[--k] = '-';
    put(b, tmp + k, sizeof tmp - k);
}

typedef struct keyref {
    const char *key;
    size_t len;
    json_t *val;
} keyref;

static int cmp_keys(const void *a, const void *b)
{
    const keyref *x = a, *y = b;
    size_t m = x->len < y->len ? x->len : y->len;
    int r = memcmp(x->key, y->key, m);
    if (r)
        return r;
    return x->len < y->len ? -1 : x->len > y->len;
}

static bool dump(obuf *b, const json_t *v, bool sort, int depth);

static bool skipped(const char *const *skip, const char *key)
{
    for (; skip && *skip; skip++)
        if (strcmp(*skip, key) == 0)
            return true;
    return false;
}

/* skip: NULL, or top-level member names left out (NULL-terminated) */
static bool dump_object(obuf *b, const json_t *v, bool sort, int depth, const char *const *skip)
{
    size_t n = json_object_size(v);
    putc1(b, '{');
    keyref small[16], *keys = NULL;
    if (sort && n > 1) {
        keys = n <= 16 ? small : malloc(n * sizeof *keys);
        if (!keys)
            return false;
        size_t k = 0;
        for (void *it = json_object_iter((json_t *)v); it && k < n; it = json_object_iter_next((json_t *)v, it))
            if (!skipped(skip, json_object_iter_key(it)))
                keys[k++] = (keyref){json_object_iter_key(it), json_object_iter_key_len(it), json_object_iter_value(it)};
        n = k;
        qsort(keys, n, sizeof *keys, cmp_keys);
    }
    bool ok = true;
    if (keys) {
        for (size_t i = 0; i < n && ok; i++) {
            if (i)
                putc1(b, ',');
            ok = put_string(b, keys[i].key, keys[i].len);
            putc1(b, ':');
            ok = ok && dump(b, keys[i].val, sort, depth + 1);
        }
        if (keys != small)
            free(keys);
    } else {
        bool first = true;
        for (void *it = json_object_iter((json_t *)v); it && ok; it = json_object_iter_next((json_t *)v, it)) {
            if (skipped(skip, json_object_iter_key(it)))
                continue;
            if (!first)
                putc1(b, ',');
            first = false;
            ok = put_string(b, json_object_iter_key(it), json_object_iter_key_len(it));
            putc1(b, ':');
            ok = ok && dump(b, json_object_iter_value(it), sort, depth + 1);
        }
    }
    putc1(b, '}');
    return ok;
}

/* The 17 significant digits of |d| for 1e-4 <= |d| < 1e15, rounded to nearest, as
 * "%.17g" prints them (fixed notation in that range): d = m * 2^e exactly, and
 * m * 10^k fits 128 bits there. Returns the length written to s, or -1 when d is outside
 * the range or falls exactly halfway between two 17-digit values (snprintf decides
 * those). A duration in every ledger event costs a third of snprintf's time this way. */
static int g17_fast(double d, char *s)
{
    double a = d < 0 ? -d : d;
    if (!(a >= 1e-4 && a < 1e15))
        return -1;
    uint64_t bits;
    memcpy(&bits, &a, sizeof bits); /* a normal double: (2^52 + fraction) * 2^(exp - 1075) */
    int be = (int)(bits >> 52) & 0x7ff;
    uint64_t m = (bits & ((1ull << 52) - 1)) | (1ull << 52);
    int shift = 1075 - be; /* a = m / 2^shift; shift in [3, 66] here */
    int e2 = be - 1023;    /* 2^e2 <= a < 2^(e2 + 1) */
    int x = e2 * 30103 / 100000 - (e2 < 0); /* 10^x <= a, give or take one (corrected below) */
    static const uint64_t p10[] = {1ull, 10ull, 100ull, 1000ull, 10000ull, 100000ull, 1000000ull, 10000000ull,
                                   100000000ull, 1000000000ull, 10000000000ull, 100000000000ull,
                                   1000000000000ull, 10000000000000ull, 100000000000000ull,
                                   1000000000000000ull, 10000000000000000ull, 100000000000000000ull,
                                   1000000000000000000ull, 10000000000000000000ull};
    unsigned __int128 q = 0;
    for (int tries = 0; tries < 3; tries++) {
        int k = 16 - x; /* digits wanted: a * 10^k in [10^16, 10^17) */
        if (k < 0 || k > 22)
            return -1;
        unsigned __int128 n = (unsigned __int128)m * (k > 19 ? p10[19] : p10[k]);
        if (k > 19)
            n *= p10[k - 19];
        q = n >> shift;
        unsigned __int128 r = n - (q << shift), half = (unsigned __int128)1 << (shift - 1);
        if (r == half)
            return -1;
        if (r > half)
            q++;
        if (q < p10[16]) {
            x--;
        } else if (q >= p10[17]) {
            if (q == p10[17] && r > half) { /* rounded up to the next power of ten */
                q = p10[16];
                x++;
                break;
            }
            x++;
        } else {
            break;
        }
        if (tries == 2)
            return -1;
    }
    if (x < -4 || x >= 15)
        return -1;
    char dig[17];
    uint64_t v = (uint64_t)q;
    for (int i = 16; i >= 0; i--, v /= 10)
        dig[i] = (char)('0' + v % 10);
    int nd = 17;
    while (nd > 1 && dig[nd - 1] == '0')
        nd--; /* %g drops trailing zeros */
    int o = 0;
    if (d < 0)
        s[o++] = '-';
    if (x >= 0) {
        for (int i = 0; i <= x; i++)
            s[o++] = dig[i];
        if (nd > x + 1) {
            s[o++] = '.';
            for (int i = x + 1; i < nd; i++)
                s[o++] = dig[i];
        }
    } else {
        s[o++] = '0';
        s[o++] = '.';
        for (int i = 0; i < -x - 1; i++)
            s[o++] = '0';
        for (int i = 0; i < nd; i++)
            s[o++] = dig[i];
    }
    s[o] = '\0';
    return o;
}

/* jansson's jsonp_dtostr at its default precision: "%.17g", the decimal point made '.',
 * ".0" added when neither '.' nor 'e' is there, the exponent without '+' and leading zeros */
static bool put_real(obuf *b, double d)
{
    if (!isfinite(d))
        return false; /* json_real holds none */
    char s[64];
    int n = g17_fast(d, s);
    if (n < 0)
        n = snprintf(s, sizeof s, "%.17g", d);
    if (n < 0 || (size_t)n >= sizeof s - 3)
        return false;
    for (char *c = s; *c; c++)
        if (*c == ',')
            *c = '.';
    if (!strchr(s, '.') && !strchr(s, 'e')) {
        memcpy(s + n, ".0", 3);
        n += 2;
    }
    char *e = strchr(s, 'e');
    if (e) {
        char *start = e + 1, *end = e + 2;
        if (*start == '-')
            start++;
        while (*end == '0')
            end++;
        if (end != start) {
            memmove(start, end, (size_t)(s + n - end) + 1);
            n -= (int)(end - start);
        }
    }
    put(b, s, (size_t)n);
    return true;
}

static bool dump_real(obuf *b, const json_t *v) { return put_real(b, json_real_value(v)); }

static bool dump(obuf *b, const json_t *v, bool sort, int depth)
{
    if (!v || depth > JSONOUT_MAX_DEPTH)
        return false;
    switch (json_typeof(v)) {
    case JSON_NULL: put(b, "null", 4); return true;
    case JSON_TRUE: put(b, "true", 4); return true;
    case JSON_FALSE: put(b, "false", 5); return true;
    case JSON_INTEGER: put_int(b, json_integer_value(v)); return true;
    case JSON_REAL: return dump_real(b, v);
    case JSON_STRING: return put_string(b, json_string_value(v), json_string_length(v));
    case JSON_ARRAY: {
        putc1(b, '[');
        for (size_t i = 0; i < json_array_size(v); i++) {
            if (i)
                putc1(b, ',');
            if (!dump(b, json_array_get(v, i), sort, depth + 1))
                return false;
        }
        putc1(b, ']');
        return true;
    }
    case JSON_OBJECT: return dump_object(b, v, sort, depth, NULL);
    }
    return false;
}

char *abx_json_compact_except(const json_t *v, bool sort_keys, const char *const *skip, size_t *len)
{
    obuf b = {0};
    bool ok = json_is_object(v) && skip ? dump_object(&b, v, sort_keys, 0, skip) : dump(&b, v, sort_keys, 0);
    if (!ok || !grow(&b, 0)) {
        free(b.p);
        return NULL;
    }
    b.p[b.n] = '\0';
    if (len)
        *len = b.n;
    return b.p;
}

char *abx_json_compact(const json_t *v, bool sort_keys, size_t *len)
{
    return abx_json_compact_except(v, sort_keys, NULL, len);
}

/* ---- the writer of abx_jw ---- */

void abx__jw_raw_grow(abx_jw *w, const char *s, size_t n) { put(w, s, n); }

bool abx_jw_str(abx_jw *w, const char *s, size_t n) { return put_string(w, s, n); }

void abx_jw_int(abx_jw *w, long long v) { put_int(w, (json_int_t)v); }

bool abx_jw_real(abx_jw *w, double v) { return put_real(w, v); }

bool abx_jw_value(abx_jw *w, const json_t *v, bool sort_keys) { return dump(w, v, sort_keys, 0); }

char *abx_jw_finish(abx_jw *w, size_t *len)
{
    if (!grow(w, 0)) {
        free(w->p);
        w->p = NULL;
        return NULL;
    }
    w->p[w->n] = '\0';
    if (len)
        *len = w->n;
    char *out = w->p;
    w->p = NULL;
    w->n = w->cap = 0;
    return out;
}
