/* util.c — the core module's leaf helpers: allocation wrappers, the capped buffer, arenas,
 * SHA-256, hex/base64, randomness, clocks, and parsing of config
 * sizes and durations. The allocators ask the injector in fault.c (fault.h).
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

/* ---- SHA-256 (FIPS 180-4) -------------------------------------------------------- */
/* c->total counts bytes, not bits; the bit length is formed only in the padding. */

static const uint32_t sha256_k[64] = {
    0x428a2f98, 0x71374491, 0xb5c0fbcf, 0xe9b5dba5, 0x3956c25b, 0x59f111f1, 0x923f82a4, 0xab1c5ed5,
    0xd807aa98, 0x12835b01, 0x243185be, 0x550c7dc3, 0x72be5d74, 0x80deb1fe, 0x9bdc06a7, 0xc19bf174,
    0xe49b69c1, 0xefbe4786, 0x0fc19dc6, 0x240ca1cc, 0x2de92c6f, 0x4a7484aa, 0x5cb0a9dc, 0x76f988da,
    0x983e5152, 0xa831c66d, 0xb00327c8, 0xbf597fc7, 0xc6e00bf3, 0xd5a79147, 0x06ca6351, 0x14292967,
    0x27b70a85, 0x2e1b2138, 0x4d2c6dfc, 0x53380d13, 0x650a7354, 0x766a0abb, 0x81c2c92e, 0x92722c85,
    0xa2bfe8a1, 0xa81a664b, 0xc24b8b70, 0xc76c51a3, 0xd192e819, 0xd6990624, 0xf40e3585, 0x106aa070,
    0x19a4c116, 0x1e376c08, 0x2748774c, 0x34b0bcb5, 0x391c0cb3, 0x4ed8aa4a, 0x5b9cca4f, 0x682e6ff3,
    0x748f82ee, 0x78a5636f, 0x84c87814, 0x8cc70208, 0x90befffa, 0xa4506ceb, 0xbef9a3f7, 0xc67178f2,
};

static uint32_t rotr32(uint32_t x, unsigned n)
{
    return (x >> n) | (x << (32 - n));
}

static void sha256_block(uint32_t h[8], const unsigned char *p)
{
    uint32_t w[64];
    for (int t = 0; t < 16; t++)
        w[t] = (uint32_t)p[4 * t] << 24 | (uint32_t)p[4 * t + 1] << 16 |
               (uint32_t)p[4 * t + 2] << 8 | (uint32_t)p[4 * t + 3];
    for (int t = 16; t < 64; t++) {
        uint32_t s0 = rotr32(w[t - 15], 7) ^ rotr32(w[t - 15], 18) ^ (w[t - 15] >> 3);
        uint32_t s1 = rotr32(w[t - 2], 17) ^ rotr32(w[t - 2], 19) ^ (w[t - 2] >> 10);
        w[t] = w[t - 16] + s0 + w[t - 7] + s1;
    }
    uint32_t a = h[0], b = h[1], c = h[2], d = h[3], e = h[4], f = h[5], g = h[6], hh = h[7];
    for (int t = 0; t < 64; t++) {
        uint32_t S1 = rotr32(e, 6) ^ rotr32(e, 11) ^ rotr32(e, 25);
        uint32_t ch = (e & f) ^ (~e & g);
        uint32_t t1 = hh + S1 + ch + sha256_k[t] + w[t];
        uint32_t S0 = rotr32(a, 2) ^ rotr32(a, 13) ^ rotr32(a, 22);
        uint32_t maj = (a & b) ^ (a & c) ^ (b & c);
        uint32_t t2 = S0 + maj;
        hh = g;
        g = f;
        f = e;
        e = d + t1;
        d = c;
        c = b;
        b = a;
        a = t1 + t2;
    }
    h[0] += a;
    h[1] += b;
    h[2] += c;
    h[3] += d;
    h[4] += e;
    h[5] += f;
    h[6] += g;
    h[7] += hh;
}

void abx_sha256_init(abx_sha256 *c)
{
    static const uint32_t iv[8] = {
        0x6a09e667, 0xbb67ae85, 0x3c6ef372, 0xa54ff53a,
        0x510e527f, 0x9b05688c, 0x1f83d9ab, 0x5be0cd19,
    };
    memcpy(c->h, iv, sizeof(iv));
    c->total = 0;
    c->used = 0;
    memset(c->block, 0, sizeof(c->block));
}

void abx_sha256_update(abx_sha256 *c, const void *p, size_t n)
{
    if (n == 0)
        return; /* p may be NULL then, and memcpy must not see it */
    const unsigned char *in = p;
    c->total += n;
    if (c->used) {
        size_t take = sizeof(c->block) - c->used;
        if (take > n)
            take = n;
        memcpy(c->block + c->used, in, take);
        c->used += take;
        in += take;
        n -= take;
        if (c->used < sizeof(c->block))
            return;
        sha256_block(c->h, c->block);
        c->used = 0;
    }
    while (n >= 64) {
        sha256_block(c->h, in);
        in += 64;
        n -= 64;
    }
    if (n) {
        memcpy(c->block, in, n);
        c->used = n;
    }
}

void abx_sha256_final(abx_sha256 *c, unsigned char out[32])
{
    uint64_t bits = c->total * 8;
    c->block[c->used++] = 0x80;
    if (c->used > 56) {
        memset(c->block + c->used, 0, 64 - c->used);
        sha256_block(c->h, c->block);
        c->used = 0;
    }
    memset(c->block + c->used, 0, 56 - c->used);
    for (int i = 0; i < 8; i++)
        c->block[56 + i] = (unsigned char)(bits >> (56 - 8 * i));
    sha256_block(c->h, c->block);
    for (int i = 0; i < 8; i++) {
        out[4 * i] = (unsigned char)(c->h[i] >> 24);
        out[4 * i + 1] = (unsigned char)(c->h[i] >> 16);
        out[4 * i + 2] = (unsigned char)(c->h[i] >> 8);
        out[4 * i + 3] = (unsigned char)c->h[i];
    }
    /* The state may have hashed a secret (tokens are hashed before comparison). */
    memset(c, 0, sizeof(*c));
}

void abx_sha256_hex(const void *p, size_t n, char out[65])
{
    abx_sha256 c;
    unsigned char d[32];
    abx_sha256_init(&c);
    abx_sha256_update(&c, p, n);
    abx_sha256_final(&c, d);
    abx_hex(d, sizeof(d), out);
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

/* ---- sizes and durations -------------------------------------------------------- */

struct unit {
    const char *name;
    uint64_t mult;
};

/* Reads "<digits>[.<digits>]" from the front of *sp. The integer part is bounded by
 * INT64_MAX here; the scaled result is checked again later. */
static bool parse_decimal(const char **sp, uint64_t *ip, const char **frac, size_t *fraclen)
{
    const char *s = *sp;
    if (*s < '0' || *s > '9')
        return false;
    uint64_t v = 0;
    for (; *s >= '0' && *s <= '9'; s++) {
        unsigned d = (unsigned)(*s - '0');
        if (v > ((uint64_t)INT64_MAX - d) / 10)
            return false;
        v = v * 10 + d;
    }
    *frac = s;
    *fraclen = 0;
    if (*s == '.') {
        s++;
        if (*s < '0' || *s > '9')
            return false;
        *frac = s;
        while (*s >= '0' && *s <= '9')
            s++;
        *fraclen = (size_t)(s - *frac);
    }
    *ip = v;
    *sp = s;
    return true;
}

/* ip.frac × mult, truncated toward zero, exactly: the fractional digits are
 * multiplied by mult from the last digit up, and what carries past the decimal
 * point is floor(frac × mult). The carry stays below mult, so nothing overflows
 * however many digits there are. */
static int64_t scale_decimal(uint64_t ip, const char *frac, size_t fraclen, uint64_t mult)
{
    uint64_t carry = 0;
    for (size_t i = fraclen; i-- > 0;)
        carry = ((uint64_t)(frac[i] - '0') * mult + carry) / 10;
    if (ip > ((uint64_t)INT64_MAX - carry) / mult)
        return -1;
    return (int64_t)(ip * mult + carry);
}

/* "<number>[ ]<unit>" with a unit from the table, or a bare number scaled by
 * bare_mult. A space must be followed by a unit. */
static int64_t parse_scaled(const char *s, const struct unit *units, size_t nunits,
                            uint64_t bare_mult)
{
    if (!s)
        return -1;
    uint64_t ip;
    const char *frac;
    size_t fraclen;
    if (!parse_decimal(&s, &ip, &frac, &fraclen))
        return -1;
    if (*s == '\0')
        return scale_decimal(ip, frac, fraclen, bare_mult);
    if (*s == ' ')
        s++;
    for (size_t i = 0; i < nunits; i++)
        if (strcmp(s, units[i].name) == 0)
            return scale_decimal(ip, frac, fraclen, units[i].mult);
    return -1;
}

int64_t abx_parse_size(const char *s)
{
    static const struct unit units[] = {
        {"B", 1},
        {"KB", UINT64_C(1000)},
        {"MB", UINT64_C(1000000)},
        {"GB", UINT64_C(1000000000)},
        {"TB", UINT64_C(1000000000000)},
        {"KiB", UINT64_C(1) << 10},
        {"MiB", UINT64_C(1) << 20},
        {"GiB", UINT64_C(1) << 30},
        {"TiB", UINT64_C(1) << 40},
    };
    return parse_scaled(s, units, ABX_ARRAY_LEN(units), 1);
}

int64_t abx_parse_duration_ms(const char *s)
{
    static const struct unit units[] = {
        {"ms", 1},
        {"s", 1000},
        {"m", 60 * 1000},
        {"h", 60 * 60 * 1000},
        {"d", 24 * 60 * 60 * 1000},
    };
    return parse_scaled(s, units, ABX_ARRAY_LEN(units), 1000);
}

/* ---- SHA-1 (FIPS 180-4), for the WebSocket accept key only ---- */

static uint32_t rol32(uint32_t x, int n) { return (x << n) | (x >> (32 - n)); }

static void sha1_block(uint32_t h[5], const unsigned char *b)
{
    uint32_t w[80];
    for (int i = 0; i < 16; i++)
        w[i] = (uint32_t)b[4 * i] << 24 | (uint32_t)b[4 * i + 1] << 16 | (uint32_t)b[4 * i + 2] << 8 | b[4 * i + 3];
    for (int i = 16; i < 80; i++)
        w[i] = rol32(w[i - 3] ^ w[i - 8] ^ w[i - 14] ^ w[i - 16], 1);
    uint32_t a = h[0], bb = h[1], c = h[2], d = h[3], e = h[4];
    for (int i = 0; i < 80; i++) {
        uint32_t f, k;
        if (i < 20) {
            f = (bb & c) | (~bb & d);
            k = 0x5A827999;
        } else if (i < 40) {
            f = bb ^ c ^ d;
            k = 0x6ED9EBA1;
        } else if (i < 60) {
            f = (bb & c) | (bb & d) | (c & d);
            k = 0x8F1BBCDC;
        } else {
            f = bb ^ c ^ d;
            k = 0xCA62C1D6;
        }
        uint32_t t = rol32(a, 5) + f + e + k + w[i];
        e = d;
        d = c;
        c = rol32(bb, 30);
        bb = a;
        a = t;
    }
    h[0] += a;
    h[1] += bb;
    h[2] += c;
    h[3] += d;
    h[4] += e;
}

void abx_sha1(const void *p, size_t n, unsigned char out[20])
{
    uint32_t h[5] = {0x67452301, 0xEFCDAB89, 0x98BADCFE, 0x10325476, 0xC3D2E1F0};
    const unsigned char *d = p;
    size_t i = 0;
    for (; i + 64 <= n; i += 64)
        sha1_block(h, d + i);
    unsigned char last[128] = {0};
    size_t rem = n - i;
    memcpy(last, d + i, rem);
    last[rem] = 0x80;
    size_t total = rem + 1 + 8 <= 64 ? 64 : 128;
    uint64_t bits = (uint64_t)n * 8;
    for (int k = 0; k < 8; k++)
        last[total - 1 - k] = (unsigned char)(bits >> (8 * k));
    sha1_block(h, last);
    if (total == 128)
        sha1_block(h, last + 64);
    for (int k = 0; k < 5; k++) {
        out[4 * k] = (unsigned char)(h[k] >> 24);
        out[4 * k + 1] = (unsigned char)(h[k] >> 16);
        out[4 * k + 2] = (unsigned char)(h[k] >> 8);
        out[4 * k + 3] = (unsigned char)h[k];
    }
}
