/* util.c — the core module's leaf helpers: allocation wrappers, the capped buffer, arenas,
 * hex/base64, randomness and clocks (digests are hash.c's, config sizes and durations
 * units.c's). The allocators ask the injector in fault.c (fault.h).
 * It must never depend on another abx module, log, abort, or exit: every failure is
 * reported to the caller, because the caller alone knows whether it is fatal. Every
 * allocation made here goes through abx_malloc and friends so that the fault-injection
 * build can make any of them fail. */
#include "core/util.h"
#include <pthread.h>

#include <errno.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/random.h>
#include <time.h>

/* ---- allocation ------------------------------------------------------------------ */

/* The countdown and the jansson/SQLite hooks live in fault.c. */
#if defined(ABX_FAULT_INJECTION) && ABX_FAULT_INJECTION
#define FAULT_CHECK()                                                                   \
    do {                                                                                \
        if (abx__fault_fail_now())                                                      \
            return NULL;                                                                \
    } while (0)
#else
#define FAULT_CHECK() ((void)0)
#endif

/* Zero-size requests are bumped to one byte so that NULL always means failure
 * (malloc(0) may legitimately return NULL, and realloc(p, 0) would free p). */
void *abx_malloc(size_t n)
{
    FAULT_CHECK();
    return malloc(n ? n : 1);
}

void *abx_calloc(size_t n, size_t size)
{
    FAULT_CHECK();
    if (n == 0 || size == 0)
        n = size = 1;
    return calloc(n, size);
}

void *abx_realloc(void *p, size_t n)
{
    FAULT_CHECK();
    return realloc(p, n ? n : 1);
}

char *abx_strdup(const char *s)
{
    if (!s)
        return NULL;
    FAULT_CHECK();
    return strdup(s);
}

char *abx_strndup(const char *s, size_t n)
{
    if (!s)
        return NULL;
    FAULT_CHECK();
    return strndup(s, n);
}

char *abx_asprintf(const char *fmt, ...)
{
    if (!fmt)
        return NULL;
    FAULT_CHECK();
    va_list ap;
    va_start(ap, fmt);
    char *out;
    int r = vasprintf(&out, fmt, ap);
    va_end(ap);
    return r < 0 ? NULL : out;
}

void abx_free(void *p)
{
    free(p);
}

/* ---- buffer ---------------------------------------------------------------------- */

#define BUF_FIRST_CAP 64

static size_t buf_limit(const abx_buf *b)
{
    /* Capped at SIZE_MAX/2 even when the caller asks for more, so that len + n + 1
     * and the doubling below can never overflow. */
    if (b->max == 0 || b->max > SIZE_MAX / 2)
        return SIZE_MAX / 2;
    return b->max;
}

/* Room for n more bytes and the terminator. Failure is sticky: once one append has
 * been dropped, later ones must not succeed and hide the hole in the middle. */
static bool buf_reserve(abx_buf *b, size_t n)
{
    if (b->failed)
        return false;
    size_t lim = buf_limit(b);
    if (b->len > lim || n > lim - b->len) {
        b->failed = true;
        return false;
    }
    size_t need = b->len + n + 1;
    if (need <= b->cap)
        return true;
    size_t cap = b->cap ? b->cap : BUF_FIRST_CAP;
    while (cap < need)
        cap *= 2;
    if (cap > lim + 1)
        cap = lim + 1;
    char *p = abx_realloc(b->data, cap);
    if (!p) {
        b->failed = true;
        return false;
    }
    p[b->len] = '\0';
    b->data = p;
    b->cap = cap;
    return true;
}

void abx_buf_init(abx_buf *b, size_t max)
{
    b->data = NULL;
    b->len = 0;
    b->cap = 0;
    b->max = max;
    b->failed = false;
}

void abx_buf_release(abx_buf *b)
{
    if (!b)
        return;
    abx_free(b->data);
    b->data = NULL;
    b->len = 0;
    b->cap = 0;
    b->failed = false;
}

void abx_sse_take(abx_buf *b, bool (*fn)(void *ud, const char *ev, size_t len), void *ud)
{
    size_t off = 0;
    const char *end;
    while (off < b->len && (end = memmem(b->data + off, b->len - off, "\n\n", 2)) != NULL) {
        size_t evlen = (size_t)(end - (b->data + off));
        bool go = fn(ud, b->data + off, evlen);
        off += evlen + 2;
        if (!go)
            break;
    }
    if (off) { /* one move for all the events taken, not one per event */
        memmove(b->data, b->data + off, b->len - off);
        b->len -= off;
        b->data[b->len] = '\0';
    }
}

bool abx_buf_append(abx_buf *b, const void *p, size_t n)
{
    if (!b)
        return false;
    if (!p && n) {
        b->failed = true;
        return false;
    }
    /* Appending a slice of the buffer to itself must survive the realloc. */
    const char *src = p;
    bool inside = false;
    size_t off = 0;
    if (src && b->data) {
        uintptr_t s = (uintptr_t)src, d = (uintptr_t)b->data;
        if (s >= d && s < d + b->cap) {
            inside = true;
            off = s - d;
        }
    }
    if (!buf_reserve(b, n))
        return false;
    if (inside)
        src = b->data + off;
    if (n)
        memmove(b->data + b->len, src, n);
    b->len += n;
    b->data[b->len] = '\0';
    return true;
}

bool abx_buf_puts(abx_buf *b, const char *s)
{
    if (!s) {
        if (b)
            b->failed = true;
        return false;
    }
    return abx_buf_append(b, s, strlen(s));
}

bool abx_buf_putc(abx_buf *b, char c)
{
    return abx_buf_append(b, &c, 1);
}

/* Arguments must not point into b->data: the buffer may move before they are read. */
bool abx_buf_vprintf(abx_buf *b, const char *fmt, va_list ap)
{
    if (!b)
        return false;
    if (!fmt) {
        b->failed = true;
        return false;
    }
    if (b->failed)
        return false;
    va_list probe;
    va_copy(probe, ap);
    int n = vsnprintf(NULL, 0, fmt, probe);
    va_end(probe);
    if (n < 0) {
        b->failed = true;
        return false;
    }
    if (!buf_reserve(b, (size_t)n))
        return false;
    vsnprintf(b->data + b->len, (size_t)n + 1, fmt, ap);
    b->len += (size_t)n;
    return true;
}

bool abx_buf_printf(abx_buf *b, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    bool ok = abx_buf_vprintf(b, fmt, ap);
    va_end(ap);
    return ok;
}

/* Hands over whatever was appended even if b->failed is set (and clears it): checking
 * failed first is the caller's job, as only the caller knows if a prefix is useful. */
char *abx_buf_detach(abx_buf *b)
{
    if (!b)
        return NULL;
    char *d = b->data;
    if (!d) {
        d = abx_malloc(1);
        if (!d)
            return NULL;
        d[0] = '\0';
    }
    b->data = NULL;
    b->len = 0;
    b->cap = 0;
    b->failed = false;
    return d;
}

/* ---- arena ----------------------------------------------------------------------- */

#define ARENA_ALIGN 16u
#define ARENA_FIRST_CHUNK 16384u /* a request value and its usual strings fit in the first chunk */
#define ARENA_MAX_CHUNK (64u * 1024u)

struct arena_chunk {
    struct arena_chunk *next;
    unsigned char *base; /* first ARENA_ALIGN-aligned byte after this header */
    size_t size;
    size_t used;
};

struct arena_cleanup {
    struct arena_cleanup *next;
    void (*fn)(void *);
    void *arg;
};

struct abx_arena {
    struct arena_chunk *head;        /* the chunk being bumped; big chunks sit behind it */
    struct arena_cleanup *cleanups;  /* newest first */
    size_t next_size;
};

/* Each thread keeps one first-size chunk of its last arena: a request per call would
 * otherwise calloc and free a large block, and glibc consolidates its fast bins on
 * every large allocation (measured: ~8% of a files.stat request). The cached chunk is
 * zeroed up to what was used, so arena memory stays zeroed; it is freed when the
 * thread exits. */
static pthread_key_t chunk_key;
static pthread_once_t chunk_once = PTHREAD_ONCE_INIT;
static void chunk_key_free(void *c) { abx_free(c); }
static void chunk_key_init(void) { (void)pthread_key_create(&chunk_key, chunk_key_free); }

static void arena_chunk_release(struct arena_chunk *c)
{
    if (c->size == ARENA_FIRST_CHUNK) {
        pthread_once(&chunk_once, chunk_key_init);
        if (!pthread_getspecific(chunk_key)) {
            memset(c->base, 0, c->used);
            c->used = 0;
            c->next = NULL;
            if (pthread_setspecific(chunk_key, c) == 0)
                return;
        }
    }
    abx_free(c);
}

/* Chunks come from calloc and bytes are never handed out twice, so memory from the
 * arena is zeroed without a memset per allocation. */
static struct arena_chunk *arena_chunk_new(size_t size)
{
    if (size == ARENA_FIRST_CHUNK) {
        pthread_once(&chunk_once, chunk_key_init);
        struct arena_chunk *cached = pthread_getspecific(chunk_key);
        if (cached) {
            FAULT_CHECK(); /* counted like the calloc it replaces: failure points stay deterministic */
            (void)pthread_setspecific(chunk_key, NULL);
            return cached;
        }
    }
    size_t overhead = sizeof(struct arena_chunk) + ARENA_ALIGN - 1;
    if (size > SIZE_MAX - overhead)
        return NULL;
    struct arena_chunk *c = abx_calloc(1, overhead + size);
    if (!c)
        return NULL;
    uintptr_t start = (uintptr_t)(c + 1);
    start = (start + ARENA_ALIGN - 1) & ~(uintptr_t)(ARENA_ALIGN - 1);
    c->base = (unsigned char *)start;
    c->size = size;
    c->used = 0;
    c->next = NULL;
    return c;
}

abx_arena *abx_arena_new(void)
{
    abx_arena *a = abx_calloc(1, sizeof(*a));
    if (!a)
        return NULL;
    /* The first chunk is made on first use: many requests never allocate. */
    a->next_size = ARENA_FIRST_CHUNK;
    return a;
}

void abx_arena_free(abx_arena *a)
{
    if (!a)
        return;
    /* Pop before calling, so a hook that registers another hook (or allocates) while
     * the arena is being torn down still sees a consistent arena. */
    struct arena_cleanup *c;
    while ((c = a->cleanups) != NULL) {
        a->cleanups = c->next;
        c->fn(c->arg);
    }
    struct arena_chunk *k = a->head;
    while (k) {
        struct arena_chunk *next = k->next;
        arena_chunk_release(k);
        k = next;
    }
    abx_free(a);
}

void *abx_arena_alloc(abx_arena *a, size_t n)
{
    if (!a)
        return NULL;
    if (n == 0)
        n = 1; /* a distinct non-NULL pointer, so NULL keeps meaning failure */
    if (n > SIZE_MAX / 2)
        return NULL;
    size_t need = (n + ARENA_ALIGN - 1) & ~(size_t)(ARENA_ALIGN - 1);

    struct arena_chunk *c = a->head;
    if (c && c->size - c->used >= need) {
        void *p = c->base + c->used;
        c->used += need;
        return p;
    }
    /* A big request gets a chunk of its own, placed behind the current one so the
     * current chunk's free tail is not abandoned. */
    if (need > a->next_size / 4) {
        struct arena_chunk *big = arena_chunk_new(need);
        if (!big)
            return NULL;
        big->used = need;
        if (c) {
            big->next = c->next;
            c->next = big;
        } else {
            a->head = big;
        }
        return big->base;
    }
    c = arena_chunk_new(a->next_size);
    if (!c)
        return NULL;
    c->next = a->head;
    a->head = c;
    if (a->next_size < ARENA_MAX_CHUNK)
        a->next_size *= 2;
    c->used = need;
    return c->base;
}

static char *arena_copy(abx_arena *a, const char *s, size_t len)
{
    char *p = abx_arena_alloc(a, len + 1);
    if (!p)
        return NULL;
    memcpy(p, s, len); /* the terminator is already there: arena memory is zeroed */
    return p;
}

char *abx_arena_strndup(abx_arena *a, const char *s, size_t n)
{
    if (!s)
        return NULL;
    return arena_copy(a, s, strnlen(s, n));
}

char *abx_arena_strdup(abx_arena *a, const char *s)
{
    if (!s)
        return NULL;
    return arena_copy(a, s, strlen(s));
}

char *abx_arena_printf(abx_arena *a, const char *fmt, ...)
{
    if (!a || !fmt)
        return NULL;
    va_list ap, ap2;
    va_start(ap, fmt);
    va_copy(ap2, ap);
    int n = vsnprintf(NULL, 0, fmt, ap);
    va_end(ap);
    char *p = NULL;
    if (n >= 0) {
        p = abx_arena_alloc(a, (size_t)n + 1);
        if (p)
            vsnprintf(p, (size_t)n + 1, fmt, ap2);
    }
    va_end(ap2);
    return p;
}

bool abx_arena_cleanup(abx_arena *a, void (*fn)(void *), void *arg)
{
    if (!a || !fn)
        return false;
    struct arena_cleanup *c = abx_arena_alloc(a, sizeof(*c));
    if (!c)
        return false;
    c->fn = fn;
    c->arg = arg;
    c->next = a->cleanups;
    a->cleanups = c;
    return true;
}

/* ---- hex and base64 ------------------------------------------------------------- */

void abx_hex(const unsigned char *p, size_t n, char *out)
{
    static const char digits[] = "0123456789abcdef";
    for (size_t i = 0; i < n; i++) {
        out[2 * i] = digits[p[i] >> 4];
        out[2 * i + 1] = digits[p[i] & 0x0f];
    }
    out[2 * n] = '\0';
}

static int hex_value(char ch)
{
    if (ch >= '0' && ch <= '9')
        return ch - '0';
    if (ch >= 'a' && ch <= 'f')
        return ch - 'a' + 10;
    if (ch >= 'A' && ch <= 'F')
        return ch - 'A' + 10;
    return -1;
}

/* On error the contents of out are unspecified (a prefix may have been written). */
long abx_unhex(const char *s, size_t len, unsigned char *out, size_t outlen)
{
    if (len % 2 || len / 2 > outlen || len / 2 > (size_t)LONG_MAX || (len && (!s || !out)))
        return -1;
    for (size_t i = 0; i < len / 2; i++) {
        int hi = hex_value(s[2 * i]), lo = hex_value(s[2 * i + 1]);
        if (hi < 0 || lo < 0)
            return -1;
        out[i] = (unsigned char)(hi << 4 | lo);
    }
    return (long)(len / 2);
}

static const char b64_alphabet[] =
    "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";

char *abx_base64_encode(const void *p, size_t n, size_t *outlen)
{
    if (!p && n)
        return NULL;
    size_t groups = n / 3 + (n % 3 != 0);
    if (groups > (SIZE_MAX - 1) / 4)
        return NULL;
    size_t len = groups * 4;
    char *out = abx_malloc(len + 1);
    if (!out)
        return NULL;
    const unsigned char *in = p;
    size_t o = 0, i = 0;
    for (; i + 3 <= n; i += 3) {
        uint32_t v = (uint32_t)in[i] << 16 | (uint32_t)in[i + 1] << 8 | in[i + 2];
        out[o++] = b64_alphabet[v >> 18];
        out[o++] = b64_alphabet[(v >> 12) & 63];
        out[o++] = b64_alphabet[(v >> 6) & 63];
        out[o++] = b64_alphabet[v & 63];
    }
    if (n - i == 1) {
        uint32_t v = (uint32_t)in[i] << 16;
        out[o++] = b64_alphabet[v >> 18];
        out[o++] = b64_alphabet[(v >> 12) & 63];
        out[o++] = '=';
        out[o++] = '=';
    } else if (n - i == 2) {
        uint32_t v = (uint32_t)in[i] << 16 | (uint32_t)in[i + 1] << 8;
        out[o++] = b64_alphabet[v >> 18];
        out[o++] = b64_alphabet[(v >> 12) & 63];
        out[o++] = b64_alphabet[(v >> 6) & 63];
        out[o++] = '=';
    }
    out[o] = '\0';
    if (outlen)
        *outlen = o;
    return out;
}

static int b64_value(char ch)
{
    if (ch >= 'A' && ch <= 'Z')
        return ch - 'A';
    if (ch >= 'a' && ch <= 'z')
        return ch - 'a' + 26;
    if (ch >= '0' && ch <= '9')
        return ch - '0' + 52;
    if (ch == '+')
        return 62;
    if (ch == '/')
        return 63;
    return -1;
}

/* One strict pass shared by validation (out == NULL) and decoding. Non-zero bits
 * left over before the padding are refused so that every byte string has exactly
 * one accepted encoding. */
static bool b64_decode_into(const char *s, size_t n, unsigned char *out, size_t *outlen)
{
    if (n % 4 || (n && !s))
        return false;
    size_t o = 0;
    for (size_t i = 0; i < n; i += 4) {
        bool last = i + 4 == n;
        int v0 = b64_value(s[i]), v1 = b64_value(s[i + 1]);
        if (v0 < 0 || v1 < 0)
            return false;
        if (last && s[i + 2] == '=') {
            if (s[i + 3] != '=' || (v1 & 0x0f))
                return false;
            if (out)
                out[o] = (unsigned char)(v0 << 2 | v1 >> 4);
            o += 1;
            break;
        }
        int v2 = b64_value(s[i + 2]);
        if (v2 < 0)
            return false;
        if (last && s[i + 3] == '=') {
            if (v2 & 0x03)
                return false;
            if (out) {
                out[o] = (unsigned char)(v0 << 2 | v1 >> 4);
                out[o + 1] = (unsigned char)((v1 & 0x0f) << 4 | v2 >> 2);
            }
            o += 2;
            break;
        }
        int v3 = b64_value(s[i + 3]);
        if (v3 < 0)
            return false;
        if (out) {
            out[o] = (unsigned char)(v0 << 2 | v1 >> 4);
            out[o + 1] = (unsigned char)((v1 & 0x0f) << 4 | v2 >> 2);
            out[o + 2] = (unsigned char)((v2 & 0x03) << 6 | v3);
        }
        o += 3;
    }
    if (outlen)
        *outlen = o;
    return true;
}

unsigned char *abx_base64_decode(const char *s, size_t n, size_t *outlen)
{
    if (n % 4 || (n && !s))
        return NULL;
    /* One spare byte: the result is NUL-terminated for callers that decode text. */
    unsigned char *out = abx_malloc(n / 4 * 3 + 1);
    if (!out)
        return NULL;
    size_t len;
    if (!b64_decode_into(s, n, out, &len)) {
        abx_free(out);
        return NULL;
    }
    out[len] = '\0';
    if (outlen)
        *outlen = len;
    return out;
}

bool abx_base64_valid(const char *s, size_t n)
{
    return b64_decode_into(s, n, NULL, NULL);
}

/* Volatile reads keep the compiler from turning the loop into an early-exit memcmp. */
bool abx_ct_equal(const void *a, const void *b, size_t n)
{
    if (n && (!a || !b))
        return false;
    const volatile unsigned char *x = a, *y = b;
    unsigned char acc = 0;
    for (size_t i = 0; i < n; i++)
        acc |= (unsigned char)(x[i] ^ y[i]);
    return acc == 0;
}

/* ---- randomness and clocks ------------------------------------------------------ */

int abx_random(void *p, size_t n)
{
    if (n && !p)
        return -1;
    unsigned char *d = p;
    size_t off = 0;
    while (off < n) {
        ssize_t r = getrandom(d + off, n - off, 0);
        if (r < 0) {
            if (errno == EINTR)
                continue;
            return -1;
        }
        if (r == 0)
            return -1; /* cannot happen for n > 0; refuse to spin if it does */
        off += (size_t)r;
    }
    return 0;
}

static int64_t clock_us(clockid_t id)
{
    struct timespec ts;
    if (clock_gettime(id, &ts) != 0)
        return 0;
    return (int64_t)ts.tv_sec * 1000000 + ts.tv_nsec / 1000;
}

int64_t abx_now_ms(void)
{
    return clock_us(CLOCK_MONOTONIC) / 1000;
}

int64_t abx_now_us(void)
{
    return clock_us(CLOCK_MONOTONIC);
}

int64_t abx_wall_ms(void)
{
    return clock_us(CLOCK_REALTIME) / 1000;
}

/* 0000-01-01T00:00:00.000Z and 9999-12-31T23:59:59.999Z: outside them ISO 8601 needs
 * an expanded year, so the time is clamped and the output is always 24 characters. */
#define ISO_MIN_MS INT64_C(-62167219200000)
#define ISO_MAX_MS INT64_C(253402300799999)

void abx_iso8601(int64_t wall_ms, char out[32])
{
    if (wall_ms < ISO_MIN_MS)
        wall_ms = ISO_MIN_MS;
    if (wall_ms > ISO_MAX_MS)
        wall_ms = ISO_MAX_MS;
    /* Floor division, so that -1 ms is 23:59:59.999 of the previous day. */
    int64_t sec = wall_ms / 1000, ms = wall_ms % 1000;
    if (ms < 0) {
        ms += 1000;
        sec -= 1;
    }
    time_t t = (time_t)sec;
    struct tm tm;
    if (!gmtime_r(&t, &tm)) {
        memcpy(out, "1970-01-01T00:00:00.000Z", 25);
        return;
    }
    /* Written digit by digit: the clamp above bounds every field, which snprintf's
     * truncation warnings cannot know. */
    static const char tmpl[] = "0000-00-00T00:00:00.000Z";
    const struct {
        int value, pos, width;
    } fields[] = {
        {tm.tm_year + 1900, 0, 4}, {tm.tm_mon + 1, 5, 2}, {tm.tm_mday, 8, 2},
        {tm.tm_hour, 11, 2},       {tm.tm_min, 14, 2},    {tm.tm_sec, 17, 2},
        {(int)ms, 20, 3},
    };
    memcpy(out, tmpl, sizeof(tmpl));
    for (size_t f = 0; f < ABX_ARRAY_LEN(fields); f++) {
        int v = fields[f].value;
        for (int i = fields[f].width - 1; i >= 0; i--, v /= 10)
            out[fields[f].pos + i] = (char)('0' + v % 10);
    }
}
