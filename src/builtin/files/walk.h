/* walk.h — the one directory walker of the files namespace. Every op that goes below a
 * directory (list, search, find, the checks and work of a recursive delete, move and
 * copy, archive, watch) walks through here, so the rules a reviewer must read are these:
 *
 *  1. Opens. A walk starts at a directory fd the op opened through the jail (abx_ctx_open
 *     or abx_jail_open*), never at a path. Each directory below is opened relative to its
 *     parent's fd with openat(O_DIRECTORY | O_NOFOLLOW), and read through a fresh open
 *     file description.
 *  2. Symlinks are never followed. Each entry is lstat'ed (fstatat AT_SYMLINK_NOFOLLOW)
 *     and a symlink is delivered as a symlink and never entered, so a link can neither
 *     lead out of the jail nor form a loop; what the op does with the link (show it,
 *     skip it, copy or archive it as a link, remove it) is the op's rule, never its target.
 *  3. Hidden names (a leading '.') are skipped unless the walk asks for them.
 *  4. Policy. Unless the walk says otherwise (and after the op's own filter, which can
 *     only drop entries), an entry the call could not name on its own
 *     is neither delivered nor entered (check, below): a denied or protected path, one
 *     outside the call's scopes or roots, a denied identity under another name. With
 *     FILES_WALK_REQUIRE such an entry fails the whole walk before the op changes anything.
 *  5. Depth. Directories are entered down to max_depth (FILES_WALK_MAX_DEPTH) levels;
 *     a deeper one is delivered but not entered, or fails a strict walk.
 *  6. Limits. files_walk_take counts what the op returns against max_entries and
 *     files_walk_charge the bytes against max_bytes; past either the walk stops and is
 *     truncated.
 *  7. Cancellation. A cancellable walk asks abx_ctx_cancelled every 256 names (a gone
 *     client, a deadline); a cancelled walk stops, truncated.
 *  8. Order. Names are sorted bytewise, so a walk of an unchanged tree is the same
 *     every time. An entry that vanishes between readdir and lstat is skipped.
 *  9. Strict walks (mutating ops) see everything or fail: a directory that cannot be
 *     opened or read, or one too deep, fails the walk instead of being skipped.
 */
#ifndef ABX_BUILTIN_FILES_WALK_H
#define ABX_BUILTIN_FILES_WALK_H

#include "builtin/files/files.h"

#define FILES_WALK_MAX_DEPTH 128 /* levels of directories below the start */
#define FILES_WALK_CANCEL_EVERY 256

typedef enum files_walk_check {
    /* skip an entry unless the call could name it as its own `param`: the policy decides
     * again with the entry's path (deny statements, protected areas, scopes, roots) and
     * the identity check holds; a symlink, whose canonical path is its target, is only
     * held against deny statements and protected areas by its own name */
    FILES_WALK_ADMIT,
    /* skip an entry (a symlink too) that abx_ctx_path_visible refuses or whose identity
     * is denied: for walks below a list parameter (archive's sources, watch) */
    FILES_WALK_VISIBLE,
    /* fail on the first entry (not a symlink) the call could not name as `param`, and
     * as `param_b` mirrored below abs_b: before a recursive delete, move or copy */
    FILES_WALK_REQUIRE,
    /* no check: only for a tree a FILES_WALK_REQUIRE walk has just checked */
    FILES_WALK_NONE,
} files_walk_check;

typedef struct files_walk_entry files_walk_entry;
/* An op's own filter, asked before the policy: true drops the entry unseen (a directory
 * with everything below it). Dropping reveals nothing, and spares a policy decision for
 * each entry the op would not return anyway (find's non-matching names, search's
 * excluded files). */
typedef bool (*files_walk_filter)(const files_walk_entry *e, void *ud);

typedef struct files_walk_opts {
    abx_ctx *ctx;
    abx_reply *r;          /* a failing walk's error goes here (strict or REQUIRE) */
    const json_t *args;    /* ADMIT, REQUIRE: the call's arguments */
    const char *param;     /* ADMIT, REQUIRE: the path parameter an entry stands in for */
    const char *param_b;   /* REQUIRE: a second one (move/copy dst), or NULL */
    const char *abs_b;     /* REQUIRE: param_b's value for the start directory */
    files_walk_check check;
    bool hidden;           /* deliver names starting with '.' */
    bool post;             /* deliver each entered directory again after its entries */
    bool cancellable;      /* rule 7 */
    bool strict;           /* rule 9 */
    int max_depth;         /* 0: FILES_WALK_MAX_DEPTH */
    int64_t max_entries;   /* files_walk_take; <= 0: no limit */
    int64_t max_bytes;     /* files_walk_charge; <= 0: no limit */
    files_walk_filter filter; /* NULL: none */
    void *filter_ud;
} files_walk_opts;

/* One entry; its strings and dirfd are valid until the next files_walk_next. */
struct files_walk_entry {
    int dirfd;             /* the directory that holds it (the walk's fd: do not close) */
    const char *name;      /* its name in dirfd (one component) */
    const char *rel;       /* its path from the start ("a/b"), below the start's prefix */
    const char *abs;       /* its canonical path */
    const char *abs_b;     /* REQUIRE with param_b: its mirror below abs_b; else NULL */
    struct stat st;        /* lstat: a symlink is a symlink */
    int depth;             /* 0: in the start directory */
    bool post;             /* a directory delivered again after its entries (opts.post) */
};

typedef struct files_walk files_walk;

/* Start a walk of the directory dirfd (borrowed, opened through the jail), whose canonical
 * path is abs; entries' rel begin with prefix/ (prefix NULL or "": none). NULL when out
 * of memory or the start cannot be read (then the reason is in *err, an errno). */
files_walk *files_walk_begin(const files_walk_opts *o, int dirfd, const char *prefix, const char *abs, int *err);
/* The next entry: 1 with *e set, 0 at the end (or stopped), -1 failed (the error is in
 * opts.r; files_walk_error says which). */
int files_walk_next(files_walk *w, files_walk_entry *e);
/* Do not enter the directory just delivered. */
void files_walk_prune(files_walk *w);
/* Count one result against max_entries; false (the walk stopped, truncated) when the
 * limit is already reached and this one must not be returned. */
bool files_walk_take(files_walk *w);
/* Count bytes against max_bytes; false (stopped, truncated) once past it. */
bool files_walk_charge(files_walk *w, int64_t bytes);
/* Stop the walk (an op's own limit); truncated: there was more. */
void files_walk_stop(files_walk *w, bool truncated);
/* Fail the walk with an error the op has put in opts.r. */
void files_walk_fail(files_walk *w, abx_err e);
bool files_walk_truncated(const files_walk *w);
abx_err files_walk_error(const files_walk *w);
void files_walk_end(files_walk *w);

/* The walk as callbacks: fn sees each entry and returns one of these. */
typedef enum files_walk_step {
    FILES_WALK_NEXT,  /* go on (entering a directory) */
    FILES_WALK_PRUNE, /* go on, without entering this directory */
    FILES_WALK_STOP,  /* end the walk here, successfully */
    FILES_WALK_FAIL,  /* end it with the error the callback put in opts.r */
} files_walk_step;
typedef files_walk_step (*files_walk_fn)(files_walk *w, const files_walk_entry *e, void *ud);

/* Walk dirfd with fn. ABX_OK or the error (already in opts.r when opts.r is set);
 * *truncated (may be NULL) says whether the walk stopped early with more to see.
 * A start that cannot be read fails with files_errno_reply(opts.r, errno, label). */
abx_err files_walk_run(const files_walk_opts *o, int dirfd, const char *prefix, const char *abs, const char *label,
                       files_walk_fn fn, void *ud, bool *truncated);

#endif
