/* text.h — UTF-8 text, one definition for all of abx (see text.c for the NUL rule).
 * "Text" is strict UTF-8 (no overlongs, no surrogates, nothing above U+10FFFF, no
 * truncated sequence) that contains no NUL byte. */
#ifndef ABX_CORE_TEXT_H
#define ABX_CORE_TEXT_H

#include <jansson.h>
#include <stdbool.h>
#include <stddef.h>

/* Strict UTF-8. NUL is valid UTF-8 (U+0000) and passes; text needs abx_text_valid. */
bool abx_utf8_valid(const char *s, size_t n);

/* Text: strict UTF-8 and no NUL. What abx accepts as text and shows as text. */
bool abx_text_valid(const char *s, size_t n);

/* Any bytes as a JSON string of text: the bytes themselves when they are text, else each
 * byte that is not part of a valid character (and each NUL) becomes U+FFFD. New
 * reference; NULL when out of memory. */
json_t *abx_text_json(const char *p, size_t n);

/* The length of the longest prefix of p[0..n) that does not end inside a UTF-8
 * sequence: where to cut text that is too long without splitting a character. */
size_t abx_utf8_complete_prefix(const char *p, size_t n);

/* The cookies of a Cookie header value ("a=1; b=2"), one per call: *pair and *len the next
 * non-empty "name=value" (spaces and ';' around it skipped; it never holds ';'), *p
 * moved past it; false at the end. */
bool abx_cookie_next(const char **p, const char **pair, size_t *len);
/* The value of cookie name (the first one so named), or NULL; *len its length. */
const char *abx_cookie_get(const char *header, const char *name, size_t *len);

#endif
