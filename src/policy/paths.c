/* paths.c — path patterns (validation, matching, jail roots), canonicalization of the
 * paths a request names, and the "is this path below that root" test.
 *
 * It owns the policy's view of a path: the string the allow/deny rules are matched
 * against and from which handlers derive the root-relative name they hand to the jail.
 * It must never open a file (only lstat/readlink on the existing prefix), never recurse
 * on symlink targets (a hostile tree must not exhaust the stack), and never let a glob
 * take exponential time on a hostile pattern/path pair. */
#include "policy/paths.h"

#include <errno.h>
#include <fcntl.h>
#include <linux/openat2.h>
#include <limits.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <unistd.h>

/* The kernel's PATH_MAX counts the terminating NUL, so 4095 bytes of text. */
#define CANON_MAX 4095
/* Same bound the kernel uses for nested symlinks in one lookup (MAXSYMLINKS). */
#define CANON_MAX_LINKS 40

/* ---------------------------------------------------------------- globs ---- */

/* Length in bytes of the character that starts at s (n > 0 bytes available).
 * A strict UTF-8 sequence (no overlongs, no surrogates, <= U+10FFFF) is one
 * character; any other byte is a character on its own. `?` and `*` count in these
 * units, so "?" matches "é" and a `*` never splits a multi-byte character. */
static size_t glob_char_len(const unsigned char *s, size_t n)
{
    unsigned c = s[0];
    size_t need;
    unsigned lo = 0x80, hi = 0xBF;

    if (c < 0x80)
        return 1;
    if (c >= 0xC2 && c <= 0xDF) {
        need = 1;
    } else if (c == 0xE0) {
        need = 2;
        lo = 0xA0;
    } else if ((c >= 0xE1 && c <= 0xEC) || c == 0xEE || c == 0xEF) {
        need = 2;
    } else if (c == 0xED) {
        need = 2;
        hi = 0x9F;
    } else if (c == 0xF0) {
        need = 3;
        lo = 0x90;
    } else if (c >= 0xF1 && c <= 0xF3) {
        need = 3;
    } else if (c == 0xF4) {
        need = 3;
        hi = 0x8F;
    } else {
        return 1;
    }
    if (n < need + 1 || s[1] < lo || s[1] > hi)
        return 1;
    for (size_t i = 2; i <= need; i++)
        if (s[i] < 0x80 || s[i] > 0xBF)
            return 1;
    return need + 1;
}

static void glob_err(char *err, size_t errlen, const char *msg, size_t off)
{
    if (err && errlen > 0)
        snprintf(err, errlen, "%s (at byte %zu)", msg, off);
}

bool abx_glob_valid(const char *pattern, char *err, size_t errlen)
{
    if (err && errlen > 0)
        err[0] = '\0';
    if (!pattern) {
        glob_err(err, errlen, "pattern is missing", 0);
        return false;
    }
    if (pattern[0] != '/') {
        glob_err(err, errlen, "pattern must be an absolute path", 0);
        return false;
    }
    if (pattern[1] == '\0')
        return true; /* "/": the root itself */

    const char *seg = pattern + 1;
    for (;;) {
        const char *end = strchr(seg, '/');
        size_t len = end ? (size_t)(end - seg) : strlen(seg);
        size_t off = (size_t)(seg - pattern);

        if (len == 0) {
            glob_err(err, errlen, "empty path segment (\"//\" or a trailing '/')", off);
            return false;
        }
        if ((len == 1 && seg[0] == '.') || (len == 2 && seg[0] == '.' && seg[1] == '.')) {
            glob_err(err, errlen, "\".\" and \"..\" segments are not allowed", off);
            return false;
        }
        bool is_globstar = len == 2 && seg[0] == '*' && seg[1] == '*';
        for (size_t i = 0; i < len; i++) {
            unsigned char c = (unsigned char)seg[i];
            if (c < 0x20 || c == 0x7f) {
                glob_err(err, errlen, "control character in pattern", off + i);
                return false;
            }
            if (c == '[' || c == ']') {
                glob_err(err, errlen, "character classes ('[', ']') are not supported", off + i);
                return false;
            }
            if (c == '\\') {
                glob_err(err, errlen, "backslash escapes are not supported", off + i);
                return false;
            }
            /* "**" is special only as a whole segment; "a**" or "***" would be
             * read by nobody the same way, so refuse it instead of guessing. */
            if (!is_globstar && c == '*' && i + 1 < len && seg[i + 1] == '*') {
                glob_err(err, errlen, "\"**\" must be a whole path segment", off + i);
                return false;
            }
        }
        if (!end)
            return true;
        seg = end + 1;
    }
}

/* One segment against one segment pattern, `*` and `?` only. Two-pointer matching
 * with a single backtrack point: O(plen * tlen) worst case, never exponential. */
static bool glob_seg_match(const char *p, size_t plen, const char *t, size_t tlen)
{
    /* A segment without `*` or `?` (most segments of most patterns: all but the last
     * of a "/home/u/ws/" pattern followed by a globstar) matches exactly the same bytes:
     * both sides split into the same characters. */
    if (!memchr(p, '*', plen) && !memchr(p, '?', plen))
        return plen == tlen && memcmp(p, t, plen) == 0;
    const unsigned char *up = (const unsigned char *)p, *ut = (const unsigned char *)t;
    size_t pi = 0, ti = 0;
    size_t star_p = SIZE_MAX, star_t = 0;

    while (ti < tlen) {
        if (pi < plen && up[pi] == '*') {
            star_p = ++pi;
            star_t = ti;
            continue;
        }
        if (pi < plen) {
            size_t tl = glob_char_len(ut + ti, tlen - ti);
            if (up[pi] == '?') {
                pi++;
                ti += tl;
                continue;
            }
            size_t pl = glob_char_len(up + pi, plen - pi);
            if (pl == tl && memcmp(up + pi, ut + ti, pl) == 0) {
                pi += pl;
                ti += tl;
                continue;
            }
        }
        if (star_p == SIZE_MAX)
            return false;
        /* Let the last `*` swallow one more character and retry from there. */
        star_t += glob_char_len(ut + star_t, tlen - star_t);
        ti = star_t;
        pi = star_p;
    }
    while (pi < plen && up[pi] == '*')
        pi++;
    return pi == plen;
}

/* Start of the segment after the one starting at s, or NULL at the end. */
static const char *seg_next(const char *s)
{
    const char *slash = strchr(s, '/');
    return slash ? slash + 1 : NULL;
}

static size_t seg_len(const char *s)
{
    const char *slash = strchr(s, '/');
    return slash ? (size_t)(slash - s) : strlen(s);
}

bool abx_glob_match(const char *pattern, const char *path)
{
    if (!pattern || !path || pattern[0] != '/' || path[0] != '/')
        return false;

    /* Segments are walked as pointers to their first byte; NULL means "no more".
     * "/" has no segments at all. */
    const char *pp = pattern[1] ? pattern + 1 : NULL;
    const char *tp = path[1] ? path + 1 : NULL;
    /* The same two-pointer scheme as within a segment, one level up: `**` is the
     * star, every other segment pattern matches exactly one path segment. */
    const char *star_pp = NULL, *star_tp = NULL;
    bool have_star = false;

    while (tp) {
        if (pp) {
            size_t pl = seg_len(pp);
            if (pl == 2 && pp[0] == '*' && pp[1] == '*') {
                have_star = true;
                star_pp = seg_next(pp);
                star_tp = tp;
                pp = star_pp;
                continue;
            }
            if (glob_seg_match(pp, pl, tp, seg_len(tp))) {
                pp = seg_next(pp);
                tp = seg_next(tp);
                continue;
            }
        }
        if (!have_star)
            return false;
        star_tp = seg_next(star_tp);
        tp = star_tp;
        pp = star_pp;
        if (!tp)
            break; /* the `**` took every remaining segment */
    }
    while (pp && seg_len(pp) == 2 && pp[0] == '*' && pp[1] == '*')
        pp = seg_next(pp);
    return pp == NULL;
}

char *abx_glob_root(const char *pattern)
{
    if (!abx_glob_valid(pattern, NULL, 0))
        return NULL;

    size_t root_len = 0; /* bytes of pattern forming the root; 0 means "/" */
    bool found_glob = false;
    const char *seg = pattern[1] ? pattern + 1 : NULL;
    while (seg) {
        size_t len = seg_len(seg);
        if (memchr(seg, '*', len) || memchr(seg, '?', len)) {
            found_glob = true;
            break;
        }
        seg = seg_next(seg);
    }
    if (found_glob) {
        root_len = (size_t)(seg - pattern) - 1; /* drop the '/' before the glob segment */
    } else {
        /* A literal pattern names one file; its jail is the directory holding it. */
        const char *last = strrchr(pattern, '/');
        root_len = (size_t)(last - pattern);
    }
    if (root_len == 0)
        return strdup("/");
    return strndup(pattern, root_len);
}

/* ------------------------------------------------------- canonicalization ---- */

bool abx_glob_prefix_match(const char *pattern, const char *path)
{
    if (!pattern || !path || pattern[0] != '/' || path[0] != '/')
        return false;
    const char *pp = pattern[1] ? pattern + 1 : NULL;
    const char *tp = path[1] ? path + 1 : NULL;
    /* Walk both a segment at a time: a `**` can absorb whatever follows, running out
     * of path means the rest of the pattern is still ahead, running out of pattern
     * first means the path is already below anything it matches. */
    while (tp) {
        if (!pp)
            return false;
        size_t pl = seg_len(pp);
        if (pl == 2 && pp[0] == '*' && pp[1] == '*')
            return true;
        if (!glob_seg_match(pp, pl, tp, seg_len(tp)))
            return false;
        pp = seg_next(pp);
        tp = seg_next(tp);
    }
    return true;
}

int abx_path_canon(const char *anchor, const char *input, char **out)
{
    return abx_path_canon_gated(anchor, input, NULL, NULL, out);
}

/* One canonicalization in progress. rem: what is still to be walked; res: the
 * resolved prefix, stored as "/a/b" (empty string = "/"); lnk: readlink's scratch. */
typedef struct canon_walk {
    char *rem, *res, *lnk;
    size_t remlen, rlen, pos;
    int links;
    /* How many trailing components of res are known not to exist. While > 0 there
     * is nothing on disk to ask, so names are appended as written. A ".." that
     * climbs back into the existing prefix brings lookups back: otherwise
     * "missing/../link/x" would be checked as ".../link/x" while the kernel (and
     * the jail) would follow "link". */
    size_t missing;
    abx_canon_gate gate;
    void *arg;
} canon_walk;

/* rem = input, or anchor + "/" + input for a relative input. */
static int walk_start(canon_walk *w, const char *anchor, const char *input, size_t inlen)
{
    if (input[0] == '/') {
        memcpy(w->rem, input, inlen + 1);
        w->remlen = inlen;
    } else {
        if (!anchor || anchor[0] != '/')
            return -EINVAL;
        size_t alen = strlen(anchor);
        if (alen + 1 + inlen > CANON_MAX)
            return -ENAMETOOLONG;
        memcpy(w->rem, anchor, alen);
        w->rem[alen] = '/';
        memcpy(w->rem + alen + 1, input, inlen + 1);
        w->remlen = alen + 1 + inlen;
    }
    w->res[0] = '\0';
    return 0;
}

/* "..": res holds no symlinks, so its textual parent is the real parent. */
static void walk_dotdot(canon_walk *w)
{
    while (w->rlen > 0 && w->res[w->rlen - 1] != '/')
        w->rlen--;
    if (w->rlen > 0)
        w->rlen--;
    w->res[w->rlen] = '\0';
    if (w->missing > 0)
        w->missing--;
}

/* res names a symlink: splice its target in front of the unwalked rest (which starts
 * at a '/' or is empty). Walking continues from the link's directory, or from "/" for
 * an absolute target, so ".." in a target is relative to where the link is. */
static int walk_symlink(canon_walk *w, size_t rlen_before)
{
    if (++w->links > CANON_MAX_LINKS)
        return -ELOOP;
    ssize_t n = readlink(w->res, w->lnk, CANON_MAX + 1);
    if (n < 0)
        return -errno;
    if (n == 0)
        return -ENOENT; /* Linux refuses to create these; treat like the kernel */
    if ((size_t)n > CANON_MAX)
        return -ENAMETOOLONG;
    size_t restlen = w->remlen - w->pos;
    if ((size_t)n + restlen > CANON_MAX)
        return -ENAMETOOLONG;
    memmove(w->rem + n, w->rem + w->pos, restlen);
    memcpy(w->rem, w->lnk, (size_t)n);
    w->remlen = (size_t)n + restlen;
    w->rem[w->remlen] = '\0';
    w->pos = 0;
    w->rlen = w->lnk[0] == '/' ? 0 : rlen_before;
    w->res[w->rlen] = '\0';
    return 0;
}

/* Append one name (not "." or "..") to res and look it up when it may be looked up. */
static int walk_name(canon_walk *w, size_t start, size_t clen)
{
    if (w->rlen + 1 + clen > CANON_MAX)
        return -ENAMETOOLONG;
    size_t newlen = w->rlen + 1 + clen;
    w->res[w->rlen] = '/';
    memcpy(w->res + w->rlen + 1, w->rem + start, clen);
    w->res[newlen] = '\0';
    if (w->missing > 0) {
        w->missing++;
        w->rlen = newlen;
        return 0;
    }
    /* A name the caller may not reach is not asked about: its answer (exists,
     * loops, unsearchable, a /proc entry) would leak through the decision. It is
     * kept as written, and so is everything below it. */
    if (w->gate && !w->gate(w->res, w->arg)) {
        w->rlen = newlen;
        return 0;
    }
    struct stat st;
    if (lstat(w->res, &st) != 0) {
        int e = errno;
        if (e != ENOENT && e != ENOTDIR)
            return -e;
        w->missing = 1;
        w->rlen = newlen;
        return 0;
    }
    if (!S_ISLNK(st.st_mode)) {
        w->rlen = newlen;
        return 0;
    }
    return walk_symlink(w, w->rlen);
}

/* The common case in one lookup instead of one lstat per name (each of which walks the
 * path from "/" again). It applies to a path with no "." or ".." component whose every
 * prefix the gate lets us look at: one openat2 with RESOLVE_NO_SYMLINKS. When that open
 * succeeds every name exists and none is a symlink, so the walk would keep each name as
 * written and its result is the path with repeated and trailing slashes folded, which
 * is what res holds. Anything else (a symlink, a missing name, a gated prefix, an error,
 * no openat2) returns 1 and the caller walks name by name: the results are the walk's,
 * and no name the gate refuses is looked up. */
static int canon_fast(canon_walk *w, bool verify)
{
    size_t o = 0, i = 0;
    const char *s = w->rem;
    while (i < w->remlen) {
        while (i < w->remlen && s[i] == '/')
            i++;
        if (i == w->remlen)
            break;
        size_t st = i;
        while (i < w->remlen && s[i] != '/')
            i++;
        size_t clen = i - st;
        if (clen > NAME_MAX || (s[st] == '.' && (clen == 1 || (clen == 2 && s[st + 1] == '.'))))
            return 1;
        w->res[o++] = '/';
        memcpy(w->res + o, s + st, clen);
        o += clen;
        w->res[o] = '\0';
        if (w->gate && !w->gate(w->res, w->arg))
            return 1;
    }
    if (o == 0 || (verify && !abx_path_symlink_free(w->res)))
        return 1;
    w->rlen = o;
    return 0;
}

bool abx_path_symlink_free(const char *path)
{
    struct open_how how;
    memset(&how, 0, sizeof how);
    how.flags = O_PATH | O_CLOEXEC;
    how.resolve = RESOLVE_NO_SYMLINKS;
    long fd = syscall(SYS_openat2, AT_FDCWD, path, &how, sizeof how);
    if (fd < 0)
        return false;
    close((int)fd);
    return true;
}

int abx_path_canon_lexical(const char *anchor, const char *input, abx_canon_gate gate, void *arg, char **out)
{
    *out = NULL;
    size_t inlen = input ? strlen(input) : 0;
    if (inlen == 0 || inlen > CANON_MAX)
        return 1;
    char mem[2 * (CANON_MAX + 1)];
    canon_walk w = {.rem = mem, .res = mem + CANON_MAX + 1, .gate = gate, .arg = arg};
    if (walk_start(&w, anchor, input, inlen) != 0 || canon_fast(&w, false) != 0)
        return 1;
    *out = strndup(w.res, w.rlen);
    return *out ? 0 : -ENOMEM;
}

int abx_path_canon_gated(const char *anchor, const char *input, abx_canon_gate gate, void *arg, char **out)
{
    if (out)
        *out = NULL;
    if (!input || !out || input[0] == '\0')
        return -EINVAL;

    size_t inlen = strlen(input);
    if (inlen > CANON_MAX)
        return -ENAMETOOLONG;

    /* On the stack (12 KiB): a heap block this size per call made glibc consolidate
     * its fast bins on every policy check (7% of a files.stat request in a profile). */
    char mem[3 * (CANON_MAX + 1)];
    canon_walk w = {.rem = mem, .res = mem + CANON_MAX + 1, .lnk = mem + 2 * (CANON_MAX + 1), .gate = gate,
                    .arg = arg};
    int rc = walk_start(&w, anchor, input, inlen);
    if (rc == 0 && canon_fast(&w, true) == 0)
        w.pos = w.remlen; /* done in one lookup: res holds the result */
    else if (rc == 0)
        w.res[0] = '\0'; /* canon_fast may have written a prefix: start over */
    while (rc == 0 && w.pos < w.remlen) {
        while (w.pos < w.remlen && w.rem[w.pos] == '/')
            w.pos++;
        if (w.pos == w.remlen)
            break;
        size_t start = w.pos;
        while (w.pos < w.remlen && w.rem[w.pos] != '/')
            w.pos++;
        size_t clen = w.pos - start;
        if (clen > NAME_MAX)
            rc = -ENAMETOOLONG;
        else if (clen == 2 && w.rem[start] == '.' && w.rem[start + 1] == '.')
            walk_dotdot(&w);
        else if (!(clen == 1 && w.rem[start] == '.'))
            rc = walk_name(&w, start, clen);
    }
    if (rc != 0)
        return rc;
    *out = w.rlen == 0 ? strdup("/") : strndup(w.res, w.rlen);
    return *out ? 0 : -ENOMEM;
}

bool abx_path_under(const char *root, const char *path, const char **rel)
{
    if (!root || !path || root[0] != '/' || path[0] != '/')
        return false;

    size_t rl = strlen(root);
    /* Tolerate a trailing slash on the root ("/" itself is the common case). */
    while (rl > 1 && root[rl - 1] == '/')
        rl--;
    const char *rest;
    if (rl == 1) {
        rest = path + 1;
    } else {
        if (strncmp(root, path, rl) != 0)
            return false;
        if (path[rl] == '\0')
            rest = path + rl;
        else if (path[rl] == '/')
            rest = path + rl + 1;
        else
            return false; /* "/ab" is not below "/a" */
    }
    if (rel)
        *rel = rest[0] ? rest : ".";
    return true;
}
