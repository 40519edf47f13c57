/* url.h — url scopes: a strict URL parser that yields one canonical form, and patterns
 * such as "https://" + "*.example.com/docs/" + "**". Private and loopback hosts are refused
 * unless a pattern names them literally. No DNS here: names are matched as written. */
#ifndef ABX_POLICY_URL_H
#define ABX_POLICY_URL_H

#include <stdbool.h>
#include <stddef.h>

/* Canonicalize: scheme http or https (lower-cased), no userinfo, host lower-cased
 * ASCII (letters, digits, '-', '.'; or an IPv4 literal; or [IPv6]), port 1–65535 kept
 * only when not the scheme default, path with dot segments refused and "" → "/",
 * query kept as sent, fragment dropped. Returns a malloc'd string or NULL with err. */
char *abx_url_canon(const char *url, char *err, size_t errlen);
/* Validate a pattern: scheme://hostglob[:port]/pathglob, where a host label may be '*'
 * (one label) and a leading "*." matches one or more labels; the path uses the path
 * glob rules (* within a segment, ** any depth). */
bool abx_url_pattern_valid(const char *pattern, char *err, size_t errlen);
/* Match a canonical URL against a valid pattern. Private and loopback hosts (10/8,
 * 172.16/12, 192.168/16, 127/8, 169.254/16, ::1, fc00::/7, localhost) match only a
 * pattern whose host is that literal. */
bool abx_url_match(const char *pattern, const char *canonical_url);

#endif
