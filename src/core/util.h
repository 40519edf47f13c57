/* util.h — small shared helpers of the core module: checked allocation, a capped
 * growable buffer, per-request arenas, hashing, encodings, clocks.
 * Nothing here knows HTTP, SQLite or YAML; nothing here keeps global mutable state
 * (the allocation-failure injector of the fault-injection build is fault.c's). */
#ifndef ABX_CORE_UTIL_H
#define ABX_CORE_UTIL_H

#include <stdarg.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "core/fault.h"
#include "core/text.h" /* UTF-8 text: abx_utf8_valid, abx_text_valid, abx_text_json */

#define ABX_ARRAY_LEN(a) (sizeof(a) / sizeof((a)[0]))

/* ---- allocation: every abx allocation goes through these (fault injection hook) ---- */
void *abx_malloc(size_t n);              /* NULL on failure */
void *abx_calloc(size_t n, size_t size); /* NULL on failure */
void *abx_realloc(void *p, size_t n);    /* NULL on failure, p untouched */
char *abx_strdup(const char *s);         /* NULL on failure or NULL s */
char *abx_strndup(const char *s, size_t n);
char *abx_asprintf(const char *fmt, ...) __attribute__((format(printf, 1, 2))); /* caller frees */
void abx_free(void *p);
/* Fault injection: abx_fault_reset and abx_fault_count, in core/fault.h. */

/* ---- strbuf: a growable, NUL-terminated byte buffer with a hard cap ---- */
typedef struct abx_buf {
    char *data;   /* owned; always NUL-terminated when len > 0 or after any append */
    size_t len;
    size_t cap;
    size_t max;   /* hard cap on len; 0 = SIZE_MAX/2 */
    bool failed;  /* an append failed (cap reached or out of memory); sticky */
} abx_buf;

void abx_buf_init(abx_buf *b, size_t max);
void abx_buf_release(abx_buf *b);           /* frees data, keeps the struct reusable */
bool abx_buf_append(abx_buf *b, const void *p, size_t n);
bool abx_buf_puts(abx_buf *b, const char *s);
bool abx_buf_putc(abx_buf *b, char c);
bool abx_buf_printf(abx_buf *b, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
bool abx_buf_vprintf(abx_buf *b, const char *fmt, va_list ap) __attribute__((format(printf, 2, 0)));
char *abx_buf_detach(abx_buf *b);           /* caller frees; buffer is emptied */
/* Server-sent events read back (the doors that relay a stream): hand each whole event
 * at the front of b — the text before a blank line, without it — to fn in order, then
 * drop what was handed; an incomplete rest stays for the next read. An event fn
 * answers false to is consumed and ends the loop. */
void abx_sse_take(abx_buf *b, bool (*fn)(void *ud, const char *ev, size_t len), void *ud);

/* ---- arena: per-request memory, freed at once; cleanup hooks run in reverse ---- */
typedef struct abx_arena abx_arena;
abx_arena *abx_arena_new(void);
void abx_arena_free(abx_arena *a);          /* runs cleanups, frees everything */
void *abx_arena_alloc(abx_arena *a, size_t n); /* zeroed, 16-byte aligned; NULL on failure */
char *abx_arena_strdup(abx_arena *a, const char *s);
char *abx_arena_strndup(abx_arena *a, const char *s, size_t n);
char *abx_arena_printf(abx_arena *a, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
bool abx_arena_cleanup(abx_arena *a, void (*fn)(void *), void *arg);

/* ---- hashing and encodings ---- */
typedef struct abx_sha256 {
    uint32_t h[8];
    uint64_t total;
    unsigned char block[64];
    size_t used;
} abx_sha256;
void abx_sha256_init(abx_sha256 *c);
void abx_sha256_update(abx_sha256 *c, const void *p, size_t n);
void abx_sha256_final(abx_sha256 *c, unsigned char out[32]);
void abx_sha256_hex(const void *p, size_t n, char out[65]);
/* test hook: SHA-NI and portable compression agree on block (false: no SHA-NI here) */
bool abx__sha256_ni_matches(const unsigned char block[64]);

/* SHA-1 only for the WebSocket handshake (RFC 6455 requires it); never for security. */
void abx_sha1(const void *p, size_t n, unsigned char out[20]);

void abx_hex(const unsigned char *p, size_t n, char *out); /* out holds 2n+1 */
/* hex text (case-insensitive) → bytes; returns bytes written or -1 */
long abx_unhex(const char *s, size_t len, unsigned char *out, size_t outlen);
/* standard base64 with padding; returns malloc'd NUL-terminated text (caller frees) */
char *abx_base64_encode(const void *p, size_t n, size_t *outlen);
/* strict decoder (standard alphabet, padding required, no whitespace); returns
 * malloc'd bytes (caller frees) or NULL on malformed input */
unsigned char *abx_base64_decode(const char *s, size_t n, size_t *outlen);
bool abx_base64_valid(const char *s, size_t n);

/* constant-time comparison of two equal-length byte strings */
bool abx_ct_equal(const void *a, const void *b, size_t n);

/* ---- randomness and clocks ---- */
int abx_random(void *p, size_t n);            /* getrandom; 0 or -1 */
int64_t abx_now_ms(void);                     /* CLOCK_MONOTONIC */
int64_t abx_now_us(void);
int64_t abx_wall_ms(void);                    /* CLOCK_REALTIME */
void abx_iso8601(int64_t wall_ms, char out[32]); /* 2026-12-02T11:13:50.123Z */

/* ---- sizes and durations as the config writes them ---- */
/* "10MiB", "4GiB", "512", "1.5KB" → bytes; -1 on error */
int64_t abx_parse_size(const char *s);
/* "90s", "5m", "1.5", "250ms", "2h", "30d" → milliseconds; -1 on error */
int64_t abx_parse_duration_ms(const char *s);

#endif
