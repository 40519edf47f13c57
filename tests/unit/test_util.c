/* test_util.c — unit tests for src/core/util.c: every helper, its edge cases and its
 * refusals. Random inputs come from a fixed-seed generator so a failure reproduces. */
#include <stdarg.h>
#include <stddef.h>
#include <setjmp.h>
#include <stdint.h>
#include <cmocka.h>

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/random.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>

#include "core/util.h"

/* Impossible-size requests must come back as NULL rather than abort the sanitizer
 * build: that refusal is what the tests check. */
const char *__asan_default_options(void);
const char *__asan_default_options(void)
{
    return "allocator_may_return_null=1";
}

static uint64_t rng_state = 0x9e3779b97f4a7c15u;

static uint64_t rng_next(void)
{
    /* xorshift64*: plenty for test inputs, and reproducible. */
    rng_state ^= rng_state >> 12;
    rng_state ^= rng_state << 25;
    rng_state ^= rng_state >> 27;
    return rng_state * 0x2545f4914f6cdd1du;
}

static void rng_fill(unsigned char *p, size_t n)
{
    for (size_t i = 0; i < n; i++)
        p[i] = (unsigned char)(rng_next() >> 56);
}

/* An opaque size, so the compiler cannot see (and warn about) deliberate huge requests. */
static volatile size_t huge_size = SIZE_MAX;
static volatile size_t opaque_100 = 100;

/* ---- allocation ------------------------------------------------------------------ */

static void test_malloc_calloc(void **state)
{
    (void)state;
    unsigned char *p = abx_malloc(0);
    assert_non_null(p); /* zero-size still yields a pointer: NULL only means failure */
    abx_free(p);

    p = abx_malloc(100);
    assert_non_null(p);
    memset(p, 0xa5, 100);
    assert_int_equal(p[99], 0xa5);
    abx_free(p);

    unsigned char *z = abx_calloc(64, 8);
    assert_non_null(z);
    for (size_t i = 0; i < 512; i++)
        assert_int_equal(z[i], 0);
    abx_free(z);

    void *e = abx_calloc(0, 8);
    assert_non_null(e);
    abx_free(e);
    e = abx_calloc(8, 0);
    assert_non_null(e);
    abx_free(e);

    assert_null(abx_malloc(huge_size));
    assert_null(abx_calloc(huge_size / 2, 4)); /* n * size overflows */
    abx_free(NULL);
}

static void test_realloc_keeps_block(void **state)
{
    (void)state;
    char *p = abx_realloc(NULL, 4);
    assert_non_null(p);
    memcpy(p, "abc", 4);
    p = abx_realloc(p, 100000);
    assert_non_null(p);
    assert_string_equal(p, "abc");

    /* A failed realloc leaves the block alone. */
    assert_null(abx_realloc(p, huge_size));
    assert_string_equal(p, "abc");

    /* Size 0 must not free the block behind the caller's back. */
    char *q = abx_realloc(p, 0);
    assert_non_null(q);
    abx_free(q);
}

static void test_strdup_strndup(void **state)
{
    (void)state;
    assert_null(abx_strdup(NULL));
    assert_null(abx_strndup(NULL, 5));

    char *s = abx_strdup("hello");
    assert_non_null(s);
    assert_string_equal(s, "hello");
    abx_free(s);

    s = abx_strdup("");
    assert_non_null(s);
    assert_string_equal(s, "");
    abx_free(s);

    s = abx_strndup("hello", 3);
    assert_string_equal(s, "hel");
    abx_free(s);

    s = abx_strndup("hi", opaque_100); /* bound beyond the string: stops at the NUL */
    assert_string_equal(s, "hi");
    abx_free(s);

    /* Not NUL-terminated: must not read past n. */
    char raw[3] = {'x', 'y', 'z'};
    s = abx_strndup(raw, sizeof(raw));
    assert_string_equal(s, "xyz");
    abx_free(s);

    s = abx_strndup("abc", 0);
    assert_string_equal(s, "");
    abx_free(s);
}

static void test_asprintf(void **state)
{
    (void)state;
    char *s = abx_asprintf("%s-%d-%05.1f", "x", 42, 3.14159);
    assert_non_null(s);
    assert_string_equal(s, "x-42-003.1");
    abx_free(s);

    s = abx_asprintf("%s", "");
    assert_string_equal(s, "");
    abx_free(s);

    s = abx_asprintf("%*s|", 10000, "r");
    assert_non_null(s);
    assert_int_equal(strlen(s), 10001);
    assert_int_equal(s[9999], 'r');
    assert_int_equal(s[0], ' ');
    abx_free(s);
}

/* ---- buffer ---------------------------------------------------------------------- */

static void test_buf_basic(void **state)
{
    (void)state;
    abx_buf b;
    abx_buf_init(&b, 0);
    assert_null(b.data);
    assert_int_equal(b.len, 0);
    assert_false(b.failed);

    assert_true(abx_buf_puts(&b, "hello"));
    assert_true(abx_buf_putc(&b, ','));
    assert_true(abx_buf_append(&b, " world!!", 6));
    assert_true(abx_buf_printf(&b, " %d+%s", 7, "x"));
    assert_string_equal(b.data, "hello, world 7+x");
    assert_int_equal(b.len, strlen("hello, world 7+x"));
    assert_true(b.cap > b.len);
    assert_false(b.failed);

    /* Embedded NUL bytes are data like any other. */
    assert_true(abx_buf_putc(&b, '\0'));
    assert_int_equal(b.len, 17);
    assert_int_equal(b.data[16], '\0');
    assert_int_equal(b.data[17], '\0');

    abx_buf_release(&b);
    assert_null(b.data);
    assert_int_equal(b.len, 0);
    assert_int_equal(b.cap, 0);

    /* Reusable after release. */
    assert_true(abx_buf_puts(&b, "again"));
    assert_string_equal(b.data, "again");
    abx_buf_release(&b);
    abx_buf_release(&b); /* twice is harmless */
    assert_null(b.data);
}

typedef struct sse_seen {
    char ev[8][32];
    size_t n, stop_after;
} sse_seen;

static bool sse_collect(void *ud, const char *ev, size_t len)
{
    sse_seen *s = ud;
    assert_true(len < sizeof s->ev[0]);
    memcpy(s->ev[s->n], ev, len);
    s->ev[s->n][len] = '\0';
    return ++s->n != s->stop_after;
}

/* abx_sse_take: whole events in order, split reads joined, the rest kept, an early stop
 * consuming the event it stopped on */
static void test_sse_take(void **state)
{
    (void)state;
    abx_buf b;
    abx_buf_init(&b, 0);
    sse_seen s = {.stop_after = 0};
    assert_true(abx_buf_puts(&b, "data: a\n\n: keepalive\n\nevent: x\nda"));
    abx_sse_take(&b, sse_collect, &s);
    assert_int_equal(s.n, 2);
    assert_string_equal(s.ev[0], "data: a");
    assert_string_equal(s.ev[1], ": keepalive");
    assert_int_equal(b.len, strlen("event: x\nda"));
    assert_string_equal(b.data, "event: x\nda"); /* still NUL-terminated */
    assert_true(abx_buf_puts(&b, "ta: b\n"));
    abx_sse_take(&b, sse_collect, &s); /* no blank line yet: nothing */
    assert_int_equal(s.n, 2);
    assert_true(abx_buf_puts(&b, "\n\n\ndata: c\n\ndata: d\n\n"));
    s.stop_after = 4;
    abx_sse_take(&b, sse_collect, &s);
    assert_int_equal(s.n, 4);
    assert_string_equal(s.ev[2], "event: x\ndata: b");
    assert_string_equal(s.ev[3], ""); /* "\n\n\n\n": an empty event after it */
    assert_string_equal(b.data, "data: c\n\ndata: d\n\n"); /* stopped: the rest stays */
    s.stop_after = 0;
    abx_sse_take(&b, sse_collect, &s);
    assert_int_equal(s.n, 6);
    assert_string_equal(s.ev[4], "data: c");
    assert_string_equal(s.ev[5], "data: d");
    assert_int_equal(b.len, 0);
    abx_buf_release(&b);
}

static void test_buf_empty_append_terminates(void **state)
{
    (void)state;
    abx_buf b;
    abx_buf_init(&b, 0);
    assert_true(abx_buf_append(&b, "", 0));
    assert_non_null(b.data);
    assert_int_equal(b.len, 0);
    assert_string_equal(b.data, "");
    abx_buf_release(&b);

    abx_buf_init(&b, 0);
    assert_true(abx_buf_puts(&b, ""));
    assert_string_equal(b.data, "");
    assert_true(abx_buf_printf(&b, "%s", ""));
    assert_string_equal(b.data, "");
    abx_buf_release(&b);

    /* A zeroed struct works without init (max 0 = the default cap). */
    abx_buf z = {0};
    assert_true(abx_buf_puts(&z, "zero"));
    assert_string_equal(z.data, "zero");
    abx_buf_release(&z);
}

static void test_buf_growth(void **state)
{
    (void)state;
    abx_buf b;
    abx_buf_init(&b, 0);
    size_t reallocs = 0, last_cap = 0;
    for (size_t i = 0; i < 100000; i++) {
        assert_true(abx_buf_putc(&b, (char)('a' + i % 26)));
        if (b.cap != last_cap) {
            /* Doubling: each new capacity at least twice the previous one. */
            if (last_cap)
                assert_true(b.cap >= 2 * last_cap);
            last_cap = b.cap;
            reallocs++;
        }
    }
    assert_int_equal(b.len, 100000);
    assert_int_equal(strlen(b.data), 100000);
    assert_true(reallocs < 20);
    for (size_t i = 0; i < 100000; i++)
        if (b.data[i] != (char)('a' + i % 26))
            fail_msg("byte %zu wrong", i);
    abx_buf_release(&b);

    /* One big append. */
    abx_buf_init(&b, 0);
    char *big = malloc(1 << 20);
    assert_non_null(big);
    memset(big, 'q', 1 << 20);
    assert_true(abx_buf_append(&b, big, 1 << 20));
    assert_int_equal(b.len, 1 << 20);
    assert_int_equal(b.data[1 << 20], '\0');
    assert_memory_equal(b.data, big, 1 << 20);
    free(big);
    abx_buf_release(&b);
}

static void test_buf_cap(void **state)
{
    (void)state;
    abx_buf b;
    abx_buf_init(&b, 10);
    assert_true(abx_buf_puts(&b, "0123456789")); /* exactly max is fine */
    assert_int_equal(b.len, 10);
    assert_true(b.cap <= 11);                      /* never allocates past max + 1 */
    assert_false(b.failed);

    assert_false(abx_buf_putc(&b, 'x'));
    assert_true(b.failed);
    assert_int_equal(b.len, 10);
    assert_string_equal(b.data, "0123456789");

    /* Sticky: nothing is appended after a dropped append, not even an empty one. */
    abx_buf_release(&b);
    abx_buf_init(&b, 10);
    assert_true(abx_buf_puts(&b, "abc"));
    assert_false(abx_buf_puts(&b, "defghijklmnop"));
    assert_true(b.failed);
    assert_string_equal(b.data, "abc");
    assert_int_equal(b.len, 3);
    assert_false(abx_buf_puts(&b, "d"));
    assert_false(abx_buf_append(&b, "", 0));
    assert_false(abx_buf_printf(&b, "%d", 1));
    assert_string_equal(b.data, "abc");
    assert_int_equal(b.len, 3);
    abx_buf_release(&b);
    assert_false(b.failed); /* release makes the buffer usable again */
    assert_int_equal(b.max, 10);

    /* printf that would overflow the cap leaves data and terminator untouched. */
    abx_buf_init(&b, 8);
    assert_true(abx_buf_puts(&b, "12345"));
    assert_false(abx_buf_printf(&b, "%s", "6789"));
    assert_true(b.failed);
    assert_int_equal(b.len, 5);
    assert_string_equal(b.data, "12345");
    abx_buf_release(&b);

    /* An append too large on an empty capped buffer. */
    abx_buf_init(&b, 4);
    assert_false(abx_buf_append(&b, "hello", 5));
    assert_true(b.failed);
    assert_int_equal(b.len, 0);
    abx_buf_release(&b);

    /* A length whose +1 would overflow is refused, not wrapped. */
    abx_buf_init(&b, 0);
    assert_false(abx_buf_append(&b, "x", huge_size));
    assert_true(b.failed);
    assert_int_equal(b.len, 0);
    abx_buf_release(&b);
}

static void test_buf_invalid_args(void **state)
{
    (void)state;
    abx_buf b;
    abx_buf_init(&b, 0);
    assert_false(abx_buf_append(&b, NULL, 3));
    assert_true(b.failed);
    abx_buf_release(&b);

    abx_buf_init(&b, 0);
    assert_false(abx_buf_puts(&b, NULL));
    assert_true(b.failed);
    abx_buf_release(&b);

    /* NULL with length 0 is an empty append, not an error. */
    abx_buf_init(&b, 0);
    assert_true(abx_buf_append(&b, NULL, 0));
    assert_false(b.failed);
    assert_string_equal(b.data, "");
    abx_buf_release(&b);

    assert_false(abx_buf_append(NULL, "x", 1));
    assert_false(abx_buf_putc(NULL, 'x'));
    assert_null(abx_buf_detach(NULL));
}

static void test_buf_self_append(void **state)
{
    (void)state;
    abx_buf b;
    abx_buf_init(&b, 0);
    assert_true(abx_buf_puts(&b, "ab"));
    /* Each round appends the whole buffer to itself, forcing reallocs along the way. */
    for (int i = 0; i < 12; i++)
        assert_true(abx_buf_append(&b, b.data, b.len));
    assert_int_equal(b.len, 2u << 12);
    for (size_t i = 0; i < b.len; i++)
        if (b.data[i] != (i % 2 ? 'b' : 'a'))
            fail_msg("byte %zu wrong", i);
    assert_int_equal(b.data[b.len], '\0');

    /* A slice from the middle. */
    size_t before = b.len;
    assert_true(abx_buf_append(&b, b.data + 1, 3));
    assert_int_equal(b.len, before + 3);
    assert_memory_equal(b.data + before, "bab", 3);
    abx_buf_release(&b);
}

static bool vprintf_through(abx_buf *b, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
static bool vprintf_through(abx_buf *b, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    bool ok = abx_buf_vprintf(b, fmt, ap);
    va_end(ap);
    return ok;
}

static void test_buf_vprintf(void **state)
{
    (void)state;
    abx_buf b;
    abx_buf_init(&b, 0);
    assert_true(vprintf_through(&b, "[%s:%u]", "k", 9u));
    assert_true(vprintf_through(&b, "%0300d", 5));
    assert_int_equal(b.len, 5 + 300);
    assert_memory_equal(b.data, "[k:9]000", 8);
    assert_int_equal(b.data[b.len - 1], '5');
    assert_int_equal(b.data[b.len], '\0');
    abx_buf_release(&b);
}

static void test_buf_detach(void **state)
{
    (void)state;
    abx_buf b;
    abx_buf_init(&b, 100);
    char *empty = abx_buf_detach(&b);
    assert_non_null(empty);
    assert_string_equal(empty, "");
    abx_free(empty);

    assert_true(abx_buf_puts(&b, "payload"));
    char *d = abx_buf_detach(&b);
    assert_string_equal(d, "payload");
    assert_null(b.data);
    assert_int_equal(b.len, 0);
    assert_int_equal(b.cap, 0);
    assert_false(b.failed);
    assert_int_equal(b.max, 100);
    /* The buffer does not share memory with what it handed out. */
    assert_true(abx_buf_puts(&b, "next"));
    assert_string_equal(d, "payload");
    assert_string_equal(b.data, "next");
    abx_free(d);
    abx_buf_release(&b);
}

/* ---- arena ----------------------------------------------------------------------- */

static void test_arena_alloc(void **state)
{
    (void)state;
    abx_arena *a = abx_arena_new();
    assert_non_null(a);
    unsigned char *prev = NULL;
    for (size_t n = 0; n < 200; n++) {
        unsigned char *p = abx_arena_alloc(a, n);
        assert_non_null(p);
        assert_int_equal((uintptr_t)p % 16, 0);
        for (size_t i = 0; i < n; i++)
            assert_int_equal(p[i], 0);
        memset(p, 0xee, n); /* dirtying must not leak into later allocations */
        assert_true(p != prev);
        prev = p;
    }
    /* Two zero-size allocations are still distinct pointers. */
    void *z1 = abx_arena_alloc(a, 0), *z2 = abx_arena_alloc(a, 0);
    assert_non_null(z1);
    assert_non_null(z2);
    assert_ptr_not_equal(z1, z2);
    abx_arena_free(a);
    abx_arena_free(NULL); /* harmless */
    assert_null(abx_arena_alloc(NULL, 8));
}

static void test_arena_no_overlap(void **state)
{
    (void)state;
    enum { N = 5000 };
    abx_arena *a = abx_arena_new();
    assert_non_null(a);
    static unsigned char *ptrs[N];
    static size_t sizes[N];
    for (size_t i = 0; i < N; i++) {
        /* Mostly small, now and then big enough to get a chunk of its own. */
        size_t n = rng_next() % 17 == 0 ? 2000 + rng_next() % 200000 : rng_next() % 600;
        ptrs[i] = abx_arena_alloc(a, n);
        sizes[i] = n;
        assert_non_null(ptrs[i]);
        assert_int_equal((uintptr_t)ptrs[i] % 16, 0);
        for (size_t k = 0; k < n; k++)
            if (ptrs[i][k])
                fail_msg("allocation %zu not zeroed at %zu", i, k);
        memset(ptrs[i], (int)(i & 0xff), n);
    }
    for (size_t i = 0; i < N; i++)
        for (size_t k = 0; k < sizes[i]; k++)
            if (ptrs[i][k] != (unsigned char)(i & 0xff))
                fail_msg("allocation %zu overwritten at %zu", i, k);
    abx_arena_free(a);
}

static void test_arena_big_and_huge(void **state)
{
    (void)state;
    abx_arena *a = abx_arena_new();
    assert_non_null(a);
    char *small1 = abx_arena_alloc(a, 10);
    assert_non_null(small1);
    memcpy(small1, "small-one", 10);
    unsigned char *big = abx_arena_alloc(a, 3 << 20);
    assert_non_null(big);
    assert_int_equal((uintptr_t)big % 16, 0);
    assert_int_equal(big[0], 0);
    assert_int_equal(big[(3 << 20) - 1], 0);
    memset(big, 1, 3 << 20);
    /* The bump chunk is still in use after a big allocation. */
    char *small2 = abx_arena_alloc(a, 10);
    assert_non_null(small2);
    assert_true(small2 > small1 && small2 < small1 + 4096);
    assert_string_equal(small1, "small-one");

    assert_null(abx_arena_alloc(a, huge_size));
    assert_null(abx_arena_alloc(a, huge_size / 2 + 1));
    assert_non_null(abx_arena_alloc(a, 32)); /* still usable after a refusal */
    abx_arena_free(a);
}

static void test_arena_strings(void **state)
{
    (void)state;
    abx_arena *a = abx_arena_new();
    assert_non_null(a);
    assert_null(abx_arena_strdup(a, NULL));
    assert_null(abx_arena_strndup(a, NULL, 3));
    assert_null(abx_arena_strdup(NULL, "x"));

    char *s = abx_arena_strdup(a, "arena");
    assert_string_equal(s, "arena");
    assert_int_equal((uintptr_t)s % 16, 0);
    assert_string_equal(abx_arena_strdup(a, ""), "");
    assert_string_equal(abx_arena_strndup(a, "truncate", 5), "trunc");
    assert_string_equal(abx_arena_strndup(a, "ab", 10), "ab");
    char raw[4] = {'r', 'a', 'w', '!'};
    assert_string_equal(abx_arena_strndup(a, raw, 3), "raw");

    assert_string_equal(abx_arena_printf(a, "%s=%d", "k", -3), "k=-3");
    assert_string_equal(abx_arena_printf(a, "%s", ""), "");
    char *longs = abx_arena_printf(a, "%*d", 9000, 1);
    assert_non_null(longs);
    assert_int_equal(strlen(longs), 9000);
    assert_int_equal(longs[8999], '1');
    assert_null(abx_arena_printf(NULL, "x"));
    assert_string_equal(s, "arena"); /* earlier strings survive later chunks */
    abx_arena_free(a);
}

struct order_log {
    int seen[16];
    int n;
};

static struct order_log order;

static void record_hook(void *arg)
{
    order.seen[order.n++] = (int)(intptr_t)arg;
}

static abx_arena *late_arena;

/* Registers another hook while the arena is being freed; it must still run. */
static void chaining_hook(void *arg)
{
    record_hook(arg);
    assert_true(abx_arena_cleanup(late_arena, record_hook, (void *)(intptr_t)99));
    assert_non_null(abx_arena_alloc(late_arena, 64));
}

static void test_arena_cleanup_order(void **state)
{
    (void)state;
    memset(&order, 0, sizeof(order));
    abx_arena *a = abx_arena_new();
    assert_non_null(a);
    for (int i = 0; i < 5; i++)
        assert_true(abx_arena_cleanup(a, record_hook, (void *)(intptr_t)i));
    assert_int_equal(order.n, 0); /* nothing runs before the arena is freed */
    abx_arena_free(a);
    assert_int_equal(order.n, 5);
    for (int i = 0; i < 5; i++)
        assert_int_equal(order.seen[i], 4 - i);

    memset(&order, 0, sizeof(order));
    late_arena = abx_arena_new();
    assert_non_null(late_arena);
    assert_true(abx_arena_cleanup(late_arena, record_hook, (void *)(intptr_t)1));
    assert_true(abx_arena_cleanup(late_arena, chaining_hook, (void *)(intptr_t)2));
    abx_arena_free(late_arena);
    assert_int_equal(order.n, 3);
    assert_int_equal(order.seen[0], 2);
    assert_int_equal(order.seen[1], 99);
    assert_int_equal(order.seen[2], 1);

    assert_false(abx_arena_cleanup(NULL, record_hook, NULL));
    a = abx_arena_new();
    assert_false(abx_arena_cleanup(a, NULL, NULL));
    abx_arena_free(a);
}

static void free_hook(void *p)
{
    abx_free(p);
}

static void test_arena_cleanup_frees(void **state)
{
    (void)state;
    /* The typical use: tie a heap object's life to the arena. Under ASan a missed
     * hook shows up as a leak. */
    abx_arena *a = abx_arena_new();
    assert_non_null(a);
    char *heap = abx_strdup("owned by the arena");
    assert_non_null(heap);
    assert_true(abx_arena_cleanup(a, free_hook, heap));
    abx_arena_free(a);
}

/* ---- SHA-256 --------------------------------------------------------------------- */

static void sha_hex_of(const void *p, size_t n, char out[65])
{
    abx_sha256 c;
    unsigned char d[32];
    abx_sha256_init(&c);
    abx_sha256_update(&c, p, n);
    abx_sha256_final(&c, d);
    abx_hex(d, 32, out);
}

static void test_sha256_vectors(void **state)
{
    (void)state;
    char hex[65];
    sha_hex_of("", 0, hex);
    assert_string_equal(hex, "e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855");
    sha_hex_of("abc", 3, hex);
    assert_string_equal(hex, "ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad");
    const char *m448 = "abcdbcdecdefdefgefghfghighijhijkijkljklmklmnlmnomnopnopq";
    sha_hex_of(m448, strlen(m448), hex);
    assert_string_equal(hex, "248d6a61d20638b8e5c026930c3e6039a33ce45964ff2167f6ecedd419db06c1");
    const char *m896 = "abcdefghbcdefghicdefghijdefghijkefghijklfghijklmghijklmnhijklmno"
                       "ijklmnopjklmnopqklmnopqrlmnopqrsmnopqrstnopqrstu";
    sha_hex_of(m896, strlen(m896), hex);
    assert_string_equal(hex, "cf5b16a778af8380036ce59e7b0492370b249b11e8f07a51afac45037afee9d1");

    abx_sha256_hex("abc", 3, hex);
    assert_string_equal(hex, "ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad");
    assert_int_equal(strlen(hex), 64);
    abx_sha256_hex(NULL, 0, hex);
    assert_string_equal(hex, "e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855");
}

/* The SHA-NI compression (used when the CPU has it) equals the portable one, block by
 * block, on random data; the vectors above already ran through whichever is in use. */
static void test_sha256_ni_matches_portable(void **state)
{
    (void)state;
    unsigned char block[64];
    unsigned seed = 7;
    for (int i = 0; i < 500; i++) {
        for (size_t k = 0; k < sizeof block; k++) {
            seed = seed * 1103515245u + 12345u;
            block[k] = (unsigned char)(seed >> 16);
        }
        if (!abx__sha256_ni_matches(block)) {
            skip(); /* no SHA-NI on this CPU: only the portable code runs */
            return;
        }
    }
}

static void test_sha256_million_a(void **state)
{
    (void)state;
    static char a[1000000];
    memset(a, 'a', sizeof(a));
    abx_sha256 c;
    unsigned char d[32];
    char hex[65];
    abx_sha256_init(&c);
    /* Uneven chunks: 1, 2, 3, ... 127 bytes, then again, crossing block edges in
     * every possible way. */
    size_t off = 0, step = 1;
    while (off < sizeof(a)) {
        size_t n = step < sizeof(a) - off ? step : sizeof(a) - off;
        abx_sha256_update(&c, a + off, n);
        off += n;
        step = step % 127 + 1;
    }
    abx_sha256_final(&c, d);
    abx_hex(d, 32, hex);
    assert_string_equal(hex, "cdc76e5c9914fb9281a1c7e284d73e67f1809a48a497200e046d39ccc7112cd0");

    abx_sha256_hex(a, sizeof(a), hex); /* and in one go */
    assert_string_equal(hex, "cdc76e5c9914fb9281a1c7e284d73e67f1809a48a497200e046d39ccc7112cd0");
}

static void test_sha256_padding_edges(void **state)
{
    (void)state;
    /* Lengths around the 55/56/64-byte padding boundaries, checked against sha256sum. */
    static const struct {
        size_t n;
        const char *hex;
    } v[] = {
        {55, "9f4390f8d30c2dd92ec9f095b65e2b9ae9b0a925a5258e241c9f1e910f734318"},
        {56, "b35439a4ac6f0948b6d6f9e3c6af0f5f590ce20f1bde7090ef7970686ec6738a"},
        {57, "f13b2d724659eb3bf47f2dd6af1accc87b81f09f59f2b75e5c0bed6589dfe8c6"},
        {63, "7d3e74a05d7db15bce4ad9ec0658ea98e3f06eeecf16b4c6fff2da457ddc2f34"},
        {64, "ffe054fe7ae0cb6dc65c3af9b61d5209f439851db43d0ba5997337df154668eb"},
        {65, "635361c48bb9eab14198e76ea8ab7f1a41685d6ad62aa9146d301d4f17eb0ae0"},
        {119, "31eba51c313a5c08226adf18d4a359cfdfd8d2e816b13f4af952f7ea6584dcfb"},
        {120, "2f3d335432c70b580af0e8e1b3674a7c020d683aa5f73aaaedfdc55af904c21c"},
    };
    char a[128], hex[65];
    memset(a, 'a', sizeof(a));
    for (size_t i = 0; i < ABX_ARRAY_LEN(v); i++) {
        abx_sha256_hex(a, v[i].n, hex);
        assert_string_equal(hex, v[i].hex);
    }
}

static void test_sha256_split_invariance(void **state)
{
    (void)state;
    unsigned char msg[200];
    rng_fill(msg, sizeof(msg));
    for (size_t n = 0; n <= sizeof(msg); n += 7) {
        char whole[65];
        abx_sha256_hex(msg, n, whole);
        for (size_t cut = 0; cut <= n; cut++) {
            abx_sha256 c;
            unsigned char d[32];
            char hex[65];
            abx_sha256_init(&c);
            abx_sha256_update(&c, msg, cut);
            abx_sha256_update(&c, NULL, 0); /* empty updates change nothing */
            abx_sha256_update(&c, msg + cut, n - cut);
            abx_sha256_final(&c, d);
            abx_hex(d, 32, hex);
            assert_string_equal(hex, whole);
        }
    }
    /* A single changed bit changes the digest. */
    char h1[65], h2[65];
    abx_sha256_hex(msg, 100, h1);
    msg[50] ^= 1;
    abx_sha256_hex(msg, 100, h2);
    assert_string_not_equal(h1, h2);
}

/* ---- hex ------------------------------------------------------------------------- */

static void test_hex(void **state)
{
    (void)state;
    const unsigned char in[] = {0x00, 0x01, 0x7f, 0x80, 0xab, 0xff};
    char out[13];
    abx_hex(in, sizeof(in), out);
    assert_string_equal(out, "00017f80abff");
    char empty[1] = {'x'};
    abx_hex(in, 0, empty);
    assert_string_equal(empty, "");

    unsigned char back[8];
    assert_int_equal(abx_unhex("00017F80ABff", 12, back, sizeof(back)), 6);
    assert_memory_equal(back, in, 6);
    assert_int_equal(abx_unhex("", 0, back, sizeof(back)), 0);
    assert_int_equal(abx_unhex("abcdzz", 4, back, sizeof(back)), 2); /* only len is read */
    assert_memory_equal(back, "\xab\xcd", 2);

    assert_int_equal(abx_unhex("abc", 3, back, sizeof(back)), -1);   /* odd */
    assert_int_equal(abx_unhex("0g", 2, back, sizeof(back)), -1);    /* not hex */
    assert_int_equal(abx_unhex("g0", 2, back, sizeof(back)), -1);
    assert_int_equal(abx_unhex(" 0", 2, back, sizeof(back)), -1);
    assert_int_equal(abx_unhex("0x", 2, back, sizeof(back)), -1);
    assert_int_equal(abx_unhex("00\0""0", 4, back, sizeof(back)), -1); /* NUL inside */
    assert_int_equal(abx_unhex("000000", 6, back, 2), -1);            /* does not fit */
    assert_int_equal(abx_unhex("0000", 4, back, 2), 2);                /* exactly fits */

    for (size_t n = 0; n <= 64; n++) {
        unsigned char raw[64], dec[64];
        char txt[129];
        rng_fill(raw, n);
        abx_hex(raw, n, txt);
        assert_int_equal(strlen(txt), 2 * n);
        assert_int_equal(abx_unhex(txt, 2 * n, dec, sizeof(dec)), (long)n);
        assert_memory_equal(dec, raw, n);
    }
}

/* ---- base64 ---------------------------------------------------------------------- */

static void test_base64_rfc4648(void **state)
{
    (void)state;
    static const char *const v[][2] = {
        {"", ""},         {"f", "Zg=="},         {"fo", "Zm8="},        {"foo", "Zm9v"},
        {"foob", "Zm9vYg=="}, {"fooba", "Zm9vYmE="}, {"foobar", "Zm9vYmFy"},
    };
    for (size_t i = 0; i < ABX_ARRAY_LEN(v); i++) {
        size_t n = 12345;
        char *enc = abx_base64_encode(v[i][0], strlen(v[i][0]), &n);
        assert_non_null(enc);
        assert_string_equal(enc, v[i][1]);
        assert_int_equal(n, strlen(v[i][1]));
        abx_free(enc);

        unsigned char *dec = abx_base64_decode(v[i][1], strlen(v[i][1]), &n);
        assert_non_null(dec);
        assert_int_equal(n, strlen(v[i][0]));
        assert_memory_equal(dec, v[i][0], n);
        assert_int_equal(dec[n], '\0');
        abx_free(dec);
        assert_true(abx_base64_valid(v[i][1], strlen(v[i][1])));
    }
    /* All 64 symbols and both non-letter ones. */
    const unsigned char hi[] = {0xfb, 0xff, 0xbf};
    char *enc = abx_base64_encode(hi, 3, NULL);
    assert_string_equal(enc, "+/+/");
    abx_free(enc);
    enc = abx_base64_encode(NULL, 0, NULL);
    assert_string_equal(enc, "");
    abx_free(enc);
    assert_null(abx_base64_encode(NULL, 3, NULL));
}

static void test_base64_roundtrip(void **state)
{
    (void)state;
    for (size_t n = 0; n <= 64; n++) {
        for (int round = 0; round < 8; round++) {
            unsigned char raw[64];
            rng_fill(raw, n);
            size_t elen = 0, dlen = 99;
            char *enc = abx_base64_encode(raw, n, &elen);
            assert_non_null(enc);
            assert_int_equal(elen, (n + 2) / 3 * 4);
            assert_int_equal(strlen(enc), elen);
            assert_true(abx_base64_valid(enc, elen));
            unsigned char *dec = abx_base64_decode(enc, elen, &dlen);
            assert_non_null(dec);
            assert_int_equal(dlen, n);
            assert_memory_equal(dec, raw, n);
            abx_free(dec);
            abx_free(enc);
        }
    }
}

static void expect_b64_rejected(const char *s, size_t n)
{
    size_t len = 77;
    unsigned char *d = abx_base64_decode(s, n, &len);
    if (d) {
        abx_free(d);
        fail_msg("decoded malformed base64 \"%.*s\"", (int)n, s);
    }
    assert_false(abx_base64_valid(s, n));
    assert_int_equal(len, 77); /* outlen untouched on failure */
}

static void test_base64_rejects(void **state)
{
    (void)state;
    static const char *const bad[] = {
        "Z", "Zg", "Zg=", "Zm9vY", "Zm9vYg=",       /* length not a multiple of 4 */
        "Zg==Zg==", "Zm8=Zm9v", "Zg=A", "Z=g=",     /* padding not only at the end */
        "Z===", "====", "A===", "=Zm9",             /* too much padding */
        "Zh==", "Zm9=", "Zg+=", "AB==", "AAB=",     /* non-zero trailing bits */
        " Zm9v", "Zm9v ", "Zm 9", "Zm9v\n", "Zm9\tv", "Zm9v\r\n",  /* whitespace */
        "Zm9-", "Zm9_", "Zm9*", "Zm9.", "Zm9\x80", "Zm9\xff",    /* outside the alphabet */
    };
    for (size_t i = 0; i < ABX_ARRAY_LEN(bad); i++)
        expect_b64_rejected(bad[i], strlen(bad[i]));
    expect_b64_rejected("Zm\0v", 4); /* NUL inside */
    expect_b64_rejected(NULL, 4);

    /* The length given is what counts: a valid prefix decodes, the rest is not read. */
    size_t n = 0;
    unsigned char *d = abx_base64_decode("Zm9vYmFy!!!!", 8, &n);
    assert_non_null(d);
    assert_int_equal(n, 6);
    assert_memory_equal(d, "foobar", 6);
    abx_free(d);

    d = abx_base64_decode("", 0, &n);
    assert_non_null(d); /* empty input is valid, not an error */
    assert_int_equal(n, 0);
    abx_free(d);
    assert_true(abx_base64_valid("", 0));
}

static void test_base64_canonical(void **state)
{
    (void)state;
    /* Every final quad "XY==" and "XYZ=": accepted exactly when the unused bits are
     * zero, and an accepted one re-encodes to itself (one encoding per byte string). */
    static const char alpha[] = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";
    size_t accepted2 = 0, accepted1 = 0;
    for (int x = 0; x < 64; x++) {
        for (int y = 0; y < 64; y++) {
            char q[5] = {alpha[x], alpha[y], '=', '=', 0};
            size_t n = 0;
            unsigned char *d = abx_base64_decode(q, 4, &n);
            assert_int_equal(d != NULL, (y & 15) == 0);
            if (d) {
                accepted1++;
                char *e = abx_base64_encode(d, n, NULL);
                assert_string_equal(e, q);
                abx_free(e);
                abx_free(d);
            }
            for (int z = 0; z < 64; z++) {
                char r[5] = {alpha[x], alpha[y], alpha[z], '=', 0};
                bool ok = abx_base64_valid(r, 4);
                assert_int_equal(ok, (z & 3) == 0);
                accepted2 += ok;
            }
        }
    }
    assert_int_equal(accepted1, 64 * 4);
    assert_int_equal(accepted2, 64 * 64 * 16);
}

/* ---- constant-time compare ------------------------------------------------------- */

static void test_ct_equal(void **state)
{
    (void)state;
    unsigned char a[64], b[64];
    rng_fill(a, sizeof(a));
    memcpy(b, a, sizeof(b));
    assert_true(abx_ct_equal(a, b, sizeof(a)));
    assert_true(abx_ct_equal(a, a, sizeof(a)));
    assert_true(abx_ct_equal(a, b, 0));
    assert_true(abx_ct_equal(NULL, NULL, 0));
    /* Any single flipped bit at any position is noticed. */
    for (size_t i = 0; i < sizeof(a); i++) {
        for (int bit = 0; bit < 8; bit++) {
            b[i] ^= (unsigned char)(1u << bit);
            assert_false(abx_ct_equal(a, b, sizeof(a)));
            b[i] ^= (unsigned char)(1u << bit);
        }
    }
    /* Only the first n bytes count. */
    b[63] ^= 0xff;
    assert_true(abx_ct_equal(a, b, 63));
    assert_false(abx_ct_equal(a, b, 64));
    assert_false(abx_ct_equal("token-a", "token-b", 7));
    assert_true(abx_ct_equal("token-a", "token-b", 6));
}

/* ---- UTF-8 ----------------------------------------------------------------------- */

static void test_utf8_examples(void **state)
{
    (void)state;
    static const char *const good[] = {
        "", "plain ascii", "\xc3\xa9",      /* é */
        "\xe2\x82\xac",                      /* € */
        "\xf0\x9f\x98\x80",                  /* 😀 */
        "\xc2\x80", "\xdf\xbf",              /* 2-byte range ends */
        "\xe0\xa0\x80", "\xef\xbf\xbf",      /* 3-byte range ends, U+FFFF */
        "\xed\x9f\xbf", "\xee\x80\x80",      /* around the surrogates */
        "\xf0\x90\x80\x80", "\xf4\x8f\xbf\xbf", /* U+10000, U+10FFFF */
        "a\xc3\xa9z\xe2\x82\xac\xf0\x9f\x98\x80!",
    };
    for (size_t i = 0; i < ABX_ARRAY_LEN(good); i++)
        assert_true(abx_utf8_valid(good[i], strlen(good[i])));
    assert_true(abx_utf8_valid("a\0b", 3)); /* NUL is valid UTF-8; callers check it */
    assert_true(abx_utf8_valid(NULL, 0));

    static const char *const bad[] = {
        "\xc0\xae", "\xc1\xbf", "\xc0\x80",          /* overlong 2-byte */
        "\xe0\x80\xaf", "\xe0\x9f\xbf",              /* overlong 3-byte */
        "\xf0\x80\x80\xaf", "\xf0\x8f\xbf\xbf",      /* overlong 4-byte */
        "\xed\xa0\x80", "\xed\xbf\xbf", "\xed\xb0\x80", /* surrogates */
        "\xf4\x90\x80\x80", "\xf5\x80\x80\x80", "\xf7\xbf\xbf\xbf", /* > U+10FFFF */
        "\xf8\x88\x80\x80\x80", "\xfc\x84\x80\x80\x80\x80", "\xfe", "\xff",
        "\x80", "\xbf", "a\x80", "\xc3\xa9\xa9",      /* stray continuation */
        "\xc3", "\xe2\x82", "\xf0\x9f\x98", "a\xf0",  /* truncated */
        "\xc3\x28", "\xe2\x28\xa1", "\xe2\x82\x28", "\xf0\x9f\x28\x80", "\xf0\x9f\x98\x28",
        "\xc3\xc3\xa9",
    };
    for (size_t i = 0; i < ABX_ARRAY_LEN(bad); i++)
        if (abx_utf8_valid(bad[i], strlen(bad[i])))
            fail_msg("accepted invalid UTF-8 #%zu", i);

    /* The length bounds the check: a sequence cut by n is truncated. */
    assert_false(abx_utf8_valid("\xf0\x9f\x98\x80", 3));
    assert_true(abx_utf8_valid("ab\xf0\x9f\x98\x80", 2));
}

/* An independent reference: decode the scalar value arithmetically and check it. */
static bool utf8_reference(const unsigned char *p, size_t n)
{
    size_t i = 0;
    while (i < n) {
        unsigned c = p[i];
        size_t len;
        uint32_t cp;
        if (c < 0x80) {
            i++;
            continue;
        } else if ((c & 0xe0) == 0xc0) {
            len = 2;
            cp = c & 0x1f;
        } else if ((c & 0xf0) == 0xe0) {
            len = 3;
            cp = c & 0x0f;
        } else if ((c & 0xf8) == 0xf0) {
            len = 4;
            cp = c & 0x07;
        } else {
            return false;
        }
        if (n - i < len)
            return false;
        for (size_t k = 1; k < len; k++) {
            if ((p[i + k] & 0xc0) != 0x80)
                return false;
            cp = cp << 6 | (p[i + k] & 0x3f);
        }
        static const uint32_t min_for_len[5] = {0, 0, 0x80, 0x800, 0x10000};
        if (cp < min_for_len[len] || cp > 0x10ffff || (cp >= 0xd800 && cp <= 0xdfff))
            return false;
        i += len;
    }
    return true;
}

static void test_utf8_exhaustive(void **state)
{
    (void)state;
    unsigned char s[4];
    for (unsigned a = 0; a < 256; a++) {
        s[0] = (unsigned char)a;
        assert_int_equal(abx_utf8_valid((char *)s, 1), utf8_reference(s, 1));
        for (unsigned b = 0; b < 256; b++) {
            s[1] = (unsigned char)b;
            assert_int_equal(abx_utf8_valid((char *)s, 2), utf8_reference(s, 2));
            if (a < 0xc0)
                continue; /* 3-byte strings with an ASCII/continuation lead add nothing */
            for (unsigned c = 0; c < 256; c++) {
                s[2] = (unsigned char)c;
                if (abx_utf8_valid((char *)s, 3) != utf8_reference(s, 3))
                    fail_msg("mismatch on %02x %02x %02x", a, b, c);
            }
        }
    }
    /* 4-byte leads with every second byte and a spread of third/fourth bytes. */
    static const unsigned char tails[] = {0x00, 0x41, 0x7f, 0x80, 0x9f, 0xa0, 0xbf, 0xc0, 0xff};
    for (unsigned a = 0xf0; a < 0x100; a++)
        for (unsigned b = 0; b < 256; b++)
            for (size_t c = 0; c < sizeof(tails); c++)
                for (size_t d = 0; d < sizeof(tails); d++) {
                    s[0] = (unsigned char)a;
                    s[1] = (unsigned char)b;
                    s[2] = tails[c];
                    s[3] = tails[d];
                    if (abx_utf8_valid((char *)s, 4) != utf8_reference(s, 4))
                        fail_msg("mismatch on %02x %02x %02x %02x", a, b, s[2], s[3]);
                }
}

/* ---- randomness and clocks ------------------------------------------------------- */

static void test_random(void **state)
{
    (void)state;
    assert_int_equal(abx_random(NULL, 0), 0);
    unsigned char a[32] = {0}, b[32] = {0};
    assert_int_equal(abx_random(a, sizeof(a)), 0);
    assert_int_equal(abx_random(b, sizeof(b)), 0);
    assert_memory_not_equal(a, b, sizeof(a));

    /* Every byte value turns up in 64 KiB (a missing one has odds of about 2^-360). */
    enum { N = 64 * 1024 };
    unsigned char *buf = calloc(1, N);
    assert_non_null(buf);
    assert_int_equal(abx_random(buf, N), 0);
    size_t hist[256] = {0};
    for (size_t i = 0; i < N; i++)
        hist[buf[i]]++;
    for (int v = 0; v < 256; v++)
        assert_true(hist[v] > 0);
    free(buf);
}

/* getrandom is interposed here (the executable's definition wins over libc's), so
 * the short reads and EINTR that abx_random must survive can be produced on demand. */
enum { GR_PASS, GR_CHOPPY, GR_BROKEN };
static int gr_mode = GR_PASS;
static int gr_calls;

ssize_t getrandom(void *buf, size_t len, unsigned int flags)
{
    gr_calls++;
    if (gr_mode == GR_BROKEN) {
        errno = ENOSYS;
        return -1;
    }
    if (gr_mode == GR_CHOPPY) {
        if (gr_calls % 3 == 1) {
            errno = EINTR;
            return -1;
        }
        if (len > 7)
            len = 7;
    }
    return syscall(SYS_getrandom, buf, len, flags);
}

static void test_random_short_reads(void **state)
{
    (void)state;
    unsigned char buf[100];
    memset(buf, 0, sizeof(buf));
    gr_mode = GR_CHOPPY;
    gr_calls = 0;
    int r = abx_random(buf, sizeof(buf));
    gr_mode = GR_PASS;
    assert_int_equal(r, 0);
    /* 100 bytes at 7 a time is 15 reads, plus an EINTR before every two of them. */
    assert_int_equal(gr_calls, 15 + 8);
    size_t zero = 0;
    for (size_t i = 0; i < sizeof(buf); i++)
        zero += buf[i] == 0;
    assert_true(zero < 10); /* the tail was filled too, not just the first read */
    assert_true(buf[99] != 0 || buf[98] != 0 || buf[97] != 0);

    gr_mode = GR_BROKEN;
    gr_calls = 0;
    r = abx_random(buf, sizeof(buf));
    gr_mode = GR_PASS;
    assert_int_equal(r, -1);
    assert_int_equal(gr_calls, 1); /* a real error is not retried */
}

static void test_random_large(void **state)
{
    (void)state;
    /* getrandom returns at most 32 MiB - 1 per call, so this needs the retry loop. */
    size_t n = 40u << 20;
    unsigned char *buf = calloc(1, n);
    assert_non_null(buf);
    assert_int_equal(abx_random(buf, n), 0);
    size_t zero = 0;
    for (size_t i = n - 4096; i < n; i++)
        zero += buf[i] == 0;
    assert_true(zero < 100); /* about 16 expected; an unfilled tail would give 4096 */
    free(buf);
}

static void test_clocks(void **state)
{
    (void)state;
    int64_t m1 = abx_now_ms();
    int64_t u = abx_now_us();
    int64_t m2 = abx_now_ms();
    assert_true(m1 > 0);
    assert_true(m1 <= m2);
    assert_true(u / 1000 >= m1 && u / 1000 <= m2);

    int64_t prev = abx_now_us();
    for (int i = 0; i < 1000; i++) {
        int64_t now = abx_now_us();
        assert_true(now >= prev); /* monotonic */
        prev = now;
    }

    struct timespec ts = {0, 20 * 1000 * 1000};
    int64_t before = abx_now_ms();
    nanosleep(&ts, NULL);
    int64_t slept = abx_now_ms() - before;
    assert_in_range(slept, 19, 5000);

    int64_t wall = abx_wall_ms();
    int64_t sys = (int64_t)time(NULL) * 1000;
    assert_true(wall > INT64_C(1577836800000)); /* after 2020-01-01 */
    assert_in_range(wall - sys + 2000, 0, 4000);
}

static void test_iso8601(void **state)
{
    (void)state;
    static const struct {
        int64_t ms;
        const char *want;
    } v[] = {
        {0, "1970-01-01T00:00:00.000Z"},
        {1, "1970-01-01T00:00:00.001Z"},
        {-1, "1969-12-31T23:59:59.999Z"},
        {-1000, "1969-12-31T23:59:59.000Z"},
        {-1001, "1969-12-31T23:59:58.999Z"},
        {INT64_C(1796210030123), "2026-12-02T11:13:50.123Z"},
        {INT64_C(951782400000), "2000-02-29T00:00:00.000Z"},
        {INT64_C(4107542399999), "2100-02-28T23:59:59.999Z"},
        {INT64_C(253402300799999), "9999-12-31T23:59:59.999Z"},
        {INT64_C(-62167219200000), "0000-01-01T00:00:00.000Z"},
        /* outside four-digit years: clamped, never a malformed string */
        {INT64_C(253402300800000), "9999-12-31T23:59:59.999Z"},
        {INT64_MAX, "9999-12-31T23:59:59.999Z"},
        {INT64_MIN, "0000-01-01T00:00:00.000Z"},
    };
    for (size_t i = 0; i < ABX_ARRAY_LEN(v); i++) {
        char out[32];
        memset(out, 'X', sizeof(out));
        abx_iso8601(v[i].ms, out);
        assert_string_equal(out, v[i].want);
        assert_int_equal(strlen(out), 24);
    }

    /* Now, round-tripped through the C library. */
    int64_t now = abx_wall_ms();
    char out[32];
    abx_iso8601(now, out);
    struct tm tm = {0};
    char *rest = strptime(out, "%Y-%m-%dT%H:%M:%S", &tm);
    assert_non_null(rest);
    assert_int_equal((int64_t)timegm(&tm), now / 1000);
    int ms = atoi(rest + 1);
    assert_int_equal(rest[0], '.');
    assert_int_equal(ms, now % 1000);
    assert_string_equal(rest + 4, "Z");
}

/* ---- sizes and durations --------------------------------------------------------- */

static void test_parse_size(void **state)
{
    (void)state;
    static const struct {
        const char *s;
        int64_t want;
    } ok[] = {
        {"0", 0},
        {"512", 512},
        {"007", 7},
        {"512B", 512},
        {"1KB", 1000},
        {"1MB", 1000000},
        {"2GB", 2000000000},
        {"3TB", INT64_C(3000000000000)},
        {"1KiB", 1024},
        {"10MiB", 10 * 1048576},
        {"4GiB", INT64_C(4) << 30},
        {"2TiB", INT64_C(2) << 40},
        {"1.5KB", 1500},
        {"1.5KiB", 1536},
        {"0.5MiB", 524288},
        {"10 MiB", 10 * 1048576},
        {"1 B", 1},
        {"0.5", 0},       /* fractional bytes are truncated */
        {"0.9B", 0},
        {"1.1KiB", 1126}, /* 1126.4 */
        {"0.0009765625KiB", 1},
        {"0.0009765624KiB", 0},
        {"1.000KB", 1000},
        {"9223372036854775807", INT64_MAX},
        {"9223372036854775807B", INT64_MAX},
        {"9223372036854775.807KB", INT64_MAX},
        {"8388607TiB", INT64_MAX - (INT64_C(1) << 40) + 1},
        {"8388607.99999999999999999999TiB", INT64_MAX}, /* floor of just under 2^63 */
    };
    for (size_t i = 0; i < ABX_ARRAY_LEN(ok); i++)
        if (abx_parse_size(ok[i].s) != ok[i].want)
            fail_msg("abx_parse_size(\"%s\") = %lld, want %lld", ok[i].s,
                     (long long)abx_parse_size(ok[i].s), (long long)ok[i].want);

    static const char *const bad[] = {
        "", " ", "-1", "-0", "+1", "1.", ".5", "1..5", "1.5.5", "1 ", "1  KB", " 1", "1 \t",
        "1kb", "1kib", "1Kib", "1KIB", "1K", "1k", "1KBs", "1 KB ", "1e3", "0x10", "1,5",
        "1\tKB", "KB", "B", "1b", "1iB", "1PB", "1PiB", "1_000",
        "9223372036854775808", "9223372036854775808B", "99999999999999999999",
        "8388608TiB", "9223372036854776KB", "9223372036854775.808KB",
        "18446744073709551616", "1\nKB",
    };
    for (size_t i = 0; i < ABX_ARRAY_LEN(bad); i++)
        if (abx_parse_size(bad[i]) != -1)
            fail_msg("abx_parse_size(\"%s\") accepted", bad[i]);
    assert_int_equal(abx_parse_size(NULL), -1);
}

static void test_parse_size_long_fraction(void **state)
{
    (void)state;
    /* Exact arithmetic: 1.999…9 KiB is just under 2 KiB, however many 9s follow. */
    char s[400] = "1.";
    memset(s + 2, '9', 300);
    strcpy(s + 302, "KiB");
    assert_int_equal(abx_parse_size(s), 2047);
    char z[200] = "5.";
    memset(z + 2, '0', 150);
    strcpy(z + 152, "1TiB");
    assert_int_equal(abx_parse_size(z), INT64_C(5) << 40);
}

static void test_parse_duration(void **state)
{
    (void)state;
    static const struct {
        const char *s;
        int64_t want;
    } ok[] = {
        {"0", 0},
        {"1", 1000},
        {"1.5", 1500},
        {"0.001", 1},
        {"0.0005", 0},
        {"90s", 90000},
        {"5m", 300000},
        {"1.5m", 90000},
        {"250ms", 250},
        {"0.5ms", 0},
        {"2h", 7200000},
        {"0.25h", 900000},
        {"30d", INT64_C(2592000000)},
        {"1 s", 1000},
        {"0s", 0},
        {"0.1s", 100},
        {"9223372036854775807ms", INT64_MAX},
        {"9223372036854775.807", INT64_MAX},
        {"106751991167d", INT64_C(106751991167) * 86400000},
    };
    for (size_t i = 0; i < ABX_ARRAY_LEN(ok); i++)
        if (abx_parse_duration_ms(ok[i].s) != ok[i].want)
            fail_msg("abx_parse_duration_ms(\"%s\") = %lld, want %lld", ok[i].s,
                     (long long)abx_parse_duration_ms(ok[i].s), (long long)ok[i].want);

    static const char *const bad[] = {
        "", " ", "-1", "-1s", "+1s", "s", "ms", "1x", "1S", "1M", "1H", "1D", "1MS", "1 ",
        "1.s", ".5s", "1..5", "1sec", "1min", "1msx", " 1s", "1e3", "1s ", "1  s", "1w",
        "1y", "1us", "1:30", "1h30m", "0x10", "1,5s",
        "9223372036854775808ms", "9223372036854775807", "106751991168d", "2562047788015216h",
        "99999999999999999999999",
    };
    for (size_t i = 0; i < ABX_ARRAY_LEN(bad); i++)
        if (abx_parse_duration_ms(bad[i]) != -1)
            fail_msg("abx_parse_duration_ms(\"%s\") accepted", bad[i]);
    assert_int_equal(abx_parse_duration_ms(NULL), -1);
}

static void test_fault_hooks_are_callable(void **state)
{
    (void)state;
    /* In any build, disabling injection leaves allocation working. */
    abx_fault_reset(0);
    void *p = abx_malloc(16);
    assert_non_null(p);
    abx_free(p);
    assert_true(abx_fault_count() >= 0);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_malloc_calloc),
        cmocka_unit_test(test_realloc_keeps_block),
        cmocka_unit_test(test_strdup_strndup),
        cmocka_unit_test(test_asprintf),
        cmocka_unit_test(test_buf_basic),
        cmocka_unit_test(test_buf_empty_append_terminates),
        cmocka_unit_test(test_buf_growth),
        cmocka_unit_test(test_buf_cap),
        cmocka_unit_test(test_buf_invalid_args),
        cmocka_unit_test(test_buf_self_append),
        cmocka_unit_test(test_buf_vprintf),
        cmocka_unit_test(test_buf_detach),
        cmocka_unit_test(test_arena_alloc),
        cmocka_unit_test(test_arena_no_overlap),
        cmocka_unit_test(test_arena_big_and_huge),
        cmocka_unit_test(test_arena_strings),
        cmocka_unit_test(test_arena_cleanup_order),
        cmocka_unit_test(test_arena_cleanup_frees),
        cmocka_unit_test(test_sha256_vectors),
        cmocka_unit_test(test_sha256_million_a),
        cmocka_unit_test(test_sha256_padding_edges),
        cmocka_unit_test(test_sha256_split_invariance),
        cmocka_unit_test(test_hex),
        cmocka_unit_test(test_base64_rfc4648),
        cmocka_unit_test(test_base64_roundtrip),
        cmocka_unit_test(test_base64_rejects),
        cmocka_unit_test(test_base64_canonical),
        cmocka_unit_test(test_ct_equal),
        cmocka_unit_test(test_utf8_examples),
        cmocka_unit_test(test_utf8_exhaustive),
        cmocka_unit_test(test_random),
        cmocka_unit_test(test_random_short_reads),
        cmocka_unit_test(test_random_large),
        cmocka_unit_test(test_clocks),
        cmocka_unit_test(test_iso8601),
        cmocka_unit_test(test_parse_size),
        cmocka_unit_test(test_parse_size_long_fraction),
        cmocka_unit_test(test_parse_duration),
        cmocka_unit_test(test_fault_hooks_are_callable),
        cmocka_unit_test(test_sha256_ni_matches_portable),
        cmocka_unit_test(test_sse_take),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
