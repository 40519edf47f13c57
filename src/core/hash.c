/* hash.c — the digests abx computes itself: SHA-256 (FIPS 180-4) for the ledger chain,
 * token fingerprints, content hashes and approvals' file binding, and SHA-1 for the
 * WebSocket accept key only. No allocation, no state outside the caller's context. */
#include "core/util.h"
#include <stdint.h>
#include <stdio.h>
#include <string.h>

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

static void sha256_block_c(uint32_t h[8], const unsigned char *p)
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

#if defined(__x86_64__) && defined(__GNUC__)
#include <cpuid.h>
#include <immintrin.h>

/* The same compression with the x86 SHA extensions (SHA-NI: Intel since Ice Lake and
 * Goldmont, AMD since Zen), about eight times faster: the ledger hashes every event,
 * files.read hashes every file it returns. The state lives as ABEF / CDGH pairs, four
 * rounds per step; msg1/msg2 extend the message schedule four words at a time.
 * test_util compares it with sha256_block_c on random inputs of every length. */
__attribute__((target("sha,sse4.1,ssse3"))) static void sha256_block_ni(uint32_t h[8], const unsigned char *p)
{
    const __m128i bswap = _mm_set_epi64x(0x0c0d0e0f08090a0bLL, 0x0405060700010203LL);
    __m128i tmp = _mm_shuffle_epi32(_mm_loadu_si128((const __m128i *)&h[0]), 0xB1); /* CDAB */
    __m128i st1 = _mm_shuffle_epi32(_mm_loadu_si128((const __m128i *)&h[4]), 0x1B); /* EFGH */
    __m128i st0 = _mm_alignr_epi8(tmp, st1, 8);                                      /* ABEF */
    st1 = _mm_blend_epi16(st1, tmp, 0xF0);                                           /* CDGH */
    const __m128i save0 = st0, save1 = st1;
    __m128i w[4];
    for (int g = 0; g < 16; g++) {
        __m128i cur;
        if (g < 4) {
            cur = _mm_shuffle_epi8(_mm_loadu_si128((const __m128i *)(p + 16 * g)), bswap);
        } else {
            __m128i x = _mm_sha256msg1_epu32(w[g & 3], w[(g + 1) & 3]); /* w[g-4], w[g-3] */
            x = _mm_add_epi32(x, _mm_alignr_epi8(w[(g + 3) & 3], w[(g + 2) & 3], 4)); /* w[t-7..t-4] */
            cur = _mm_sha256msg2_epu32(x, w[(g + 3) & 3]);
        }
        w[g & 3] = cur;
        __m128i m = _mm_add_epi32(cur, _mm_loadu_si128((const __m128i *)&sha256_k[4 * g]));
        st1 = _mm_sha256rnds2_epu32(st1, st0, m);
        st0 = _mm_sha256rnds2_epu32(st0, st1, _mm_shuffle_epi32(m, 0x0E));
    }
    st0 = _mm_add_epi32(st0, save0);
    st1 = _mm_add_epi32(st1, save1);
    tmp = _mm_shuffle_epi32(st0, 0x1B);    /* FEBA */
    st1 = _mm_shuffle_epi32(st1, 0xB1);    /* DCHG */
    st0 = _mm_blend_epi16(tmp, st1, 0xF0); /* DCBA */
    st1 = _mm_alignr_epi8(st1, tmp, 8);    /* HGFE */
    _mm_storeu_si128((__m128i *)&h[0], st0);
    _mm_storeu_si128((__m128i *)&h[4], st1);
}

static bool cpu_has_sha_ni(void)
{
    unsigned a, b, c, d;
    if (!__get_cpuid(1, &a, &b, &c, &d) || !(c & (1u << 19)) || !(c & (1u << 9)))
        return false; /* SSE4.1, SSSE3 */
    if (!__get_cpuid_count(7, 0, &a, &b, &c, &d))
        return false;
    return (b & (1u << 29)) != 0; /* SHA */
}

static void sha256_block_probe(uint32_t h[8], const unsigned char *p);
static void (*_Atomic sha256_block_fn)(uint32_t h[8], const unsigned char *p) = sha256_block_probe;

static void sha256_block_probe(uint32_t h[8], const unsigned char *p)
{
    sha256_block_fn = cpu_has_sha_ni() ? sha256_block_ni : sha256_block_c;
    sha256_block_fn(h, p);
}

static void sha256_block(uint32_t h[8], const unsigned char *p) { sha256_block_fn(h, p); }

/* For test_util: the portable and the SHA-NI compression, side by side (false when the
 * CPU lacks SHA-NI: nothing to compare). */
bool abx__sha256_ni_matches(const unsigned char block[64])
{
    if (!cpu_has_sha_ni())
        return false;
    uint32_t a[8] = {0x6a09e667, 0xbb67ae85, 0x3c6ef372, 0xa54ff53a, 0x510e527f, 0x9b05688c, 0x1f83d9ab, 0x5be0cd19};
    uint32_t b[8];
    memcpy(b, a, sizeof a);
    for (int i = 0; i < 3; i++) { /* three chained blocks: the state round-trips too */
        sha256_block_c(a, block);
        sha256_block_ni(b, block);
    }
    return memcmp(a, b, sizeof a) == 0;
}
#else
static void sha256_block(uint32_t h[8], const unsigned char *p) { sha256_block_c(h, p); }
bool abx__sha256_ni_matches(const unsigned char block[64])
{
    (void)block;
    return false;
}
#endif

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
