/* paths.h — path patterns (globs), canonicalization and the jail root of a pattern.
 * Pure string/fs-metadata logic used by the policy engine before any file is opened.
 * It never opens a file for reading or writing; it only lstat()s and readlink()s the
 * existing prefix of a path to resolve symlinks. */
#ifndef ABX_POLICY_PATHS_H
#define ABX_POLICY_PATHS_H

#include <stdbool.h>
#include <stddef.h>

/* Patterns are absolute paths whose segments may contain `*` (any run of characters
 * except '/', within one segment), `?` (one character except '/'), and the whole-
 * segment `**` (zero or more segments). No glob character means that exact path.
 * The pattern  /a/ **  (written without the space) matches "/a" itself and
 * everything below it. Character classes are not
 * supported (an error). Returns false with a message for an invalid pattern:
 * not absolute, empty segment ("//"), "." or ".." segments, "**" mixed with other
 * characters in a segment, '[' or ']' or '\\', NUL or control characters. */
bool abx_glob_valid(const char *pattern, char *err, size_t errlen);
/* Match a canonical absolute path (no trailing slash except "/") against a valid pattern. */
bool abx_glob_match(const char *pattern, const char *path);
/* The jail root of a pattern: the longest leading run of literal segments that is
 * followed by a glob segment; for a pattern without glob characters, the pattern's
 * parent directory ("/" for "/x"). Caller frees. Examples (spaces added to keep this
 * a comment): "/w/ **" → "/w", "/w/ *.c" → "/w", "/etc/passwd" → "/etc", "/ **" → "/". */
char *abx_glob_root(const char *pattern);

/* Canonicalize `input` as the policy sees it:
 *  - relative input is joined to `anchor` (an absolute directory);
 *  - "." and "" segments dropped, ".." folded (never above "/");
 *  - symlinks resolved on the existing prefix (lstat/readlink, at most 40 links);
 *    once a component does not exist (ENOENT/ENOTDIR) the rest is kept literally
 *    (after folding);
 *  - the result is absolute, has no trailing slash (except "/") and no "//".
 * Returns 0 and *out (caller frees), or a negative errno: -EINVAL (empty input, NUL),
 * -ENAMETOOLONG (result or any intermediate over 4095 bytes), -ELOOP (too many links). */
int abx_path_canon(const char *anchor, const char *input, char **out);

/* Same, but a prefix is looked up (lstat/readlink) only when gate(prefix, arg) says
 * so; otherwise it and every component under it are kept as written ("." and ".."
 * still folded). The gate must be monotone: false for a prefix means false for all
 * its extensions. NULL gate = abx_path_canon. */
typedef bool (*abx_canon_gate)(const char *prefix, void *arg);
int abx_path_canon_gated(const char *anchor, const char *input, abx_canon_gate gate, void *arg, char **out);
/* The name as abx_path_canon_gated would give it if no name on the way were a symlink
 * and every name existed — with no lookup at all: repeated and trailing slashes folded,
 * relative input anchored. 0 and *out (malloc'd); 1 when the input needs the full walk
 * ("." or ".." names, a prefix the gate refuses, "/", too long); -ENOMEM. The caller
 * must confirm the result before trusting it: a lookup with RESOLVE_NO_SYMLINKS
 * (abx_path_symlink_free, or the jail's own open) that succeeds. */
int abx_path_canon_lexical(const char *anchor, const char *input, abx_canon_gate gate, void *arg, char **out);
/* Every name of path exists and none is a symlink (one openat2, RESOLVE_NO_SYMLINKS). */
bool abx_path_symlink_free(const char *path);

/* Whether `path` (canonical, absolute) or some path below it could match `pattern`:
 * the test for "may a lookup of this prefix lead into the pattern's scope". */
bool abx_glob_prefix_match(const char *pattern, const char *path);

/* If `path` equals `root` or lies below it, set *rel to the part below it ("." for
 * the root itself) and return true. Both are canonical. *rel points into path. */
bool abx_path_under(const char *root, const char *path, const char **rel);

#endif
