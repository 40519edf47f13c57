/* jsonout.h — fast compact JSON text of a jansson value (see jsonout.c). */
#ifndef ABX_CORE_JSONOUT_H
#define ABX_CORE_JSONOUT_H

#include <jansson.h>
#include <stdbool.h>
#include <stddef.h>
#include <string.h>

/* What json_dumps(v, JSON_COMPACT | JSON_ENCODE_ANY, plus JSON_SORT_KEYS when sort_keys)
 * returns, byte for byte; NULL where it would (invalid UTF-8 in a string, out of
 * memory, nesting past 2048). *len (may be NULL) gets the length. Free with free(). */
char *abx_json_compact(const json_t *v, bool sort_keys, size_t *len);

/* The same for an object without its top-level members named in skip (NULL-terminated;
 * NULL skips nothing): what json_dumps writes for a copy of v without them. */
char *abx_json_compact_except(const json_t *v, bool sort_keys, const char *const *skip, size_t *len);

/* A writer for callers that know their object's shape (the ledger's hot events):
 * members written in the order given, with the same string and number rules as above,
 * so what it builds is what abx_json_compact would write for the same tree. Zero-init;
 * abx_jw_finish returns the NUL-terminated text (free()) or NULL after out of memory. */
typedef struct abx_jw {
    char *p;
    size_t n, cap;
    bool oom;
} abx_jw;
void abx__jw_raw_grow(abx_jw *w, const char *s, size_t n);
/* Text as it is (the caller's JSON syntax); the common case, room in the buffer, inline:
 * the ledger's hot events are written a few bytes at a time */
static inline void abx_jw_raw(abx_jw *w, const char *s, size_t n)
{
    if (!w->oom && w->n + n + 1 <= w->cap) {
        memcpy(w->p + w->n, s, n);
        w->n += n;
    } else {
        abx__jw_raw_grow(w, s, n);
    }
}
bool abx_jw_str(abx_jw *w, const char *s, size_t n); /* false: not valid UTF-8 */
void abx_jw_int(abx_jw *w, long long v);
bool abx_jw_real(abx_jw *w, double v); /* false: not finite */
bool abx_jw_value(abx_jw *w, const json_t *v, bool sort_keys); /* false as abx_json_compact's NULL */
char *abx_jw_finish(abx_jw *w, size_t *len);

#endif
