/* jsonout.h — fast compact JSON text of a jansson value (see jsonout.c). */
#ifndef ABX_CORE_JSONOUT_H
#define ABX_CORE_JSONOUT_H

#include <jansson.h>
#include <stdbool.h>
#include <stddef.h>

/* What json_dumps(v, JSON_COMPACT | JSON_ENCODE_ANY, plus JSON_SORT_KEYS when sort_keys)
 * returns, byte for byte; NULL where it would (invalid UTF-8 in a string, out of
 * memory, nesting past 2048). *len (may be NULL) gets the length. Free with free(). */
char *abx_json_compact(const json_t *v, bool sort_keys, size_t *len);

/* The same for an object without its top-level members named in skip (NULL-terminated;
 * NULL skips nothing): what json_dumps writes for a copy of v without them. */
char *abx_json_compact_except(const json_t *v, bool sort_keys, const char *const *skip, size_t *len);

#endif
