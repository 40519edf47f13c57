/* files.h — what the files namespace's op families share. Every path a handler touches
 * is the canonical admitted value, opened through the jail beneath its root
 * (abx_ctx_open, abx_jail_open_parent); no handler opens a raw argument. Non-regular
 * files are never read (a FIFO must not hang a thread).
 *
 * Everything here works on directory fds that came out of the jail: abx_ctx_open for the
 * admitted path itself, abx_jail_open_parent for the directory that holds it. A name
 * handed to an *at() call is always one component (never "." or ".."), and nothing
 * follows a symlink: O_NOFOLLOW on every open, AT_SYMLINK_NOFOLLOW on every stat, and
 * unlinkat/renameat/mkdirat/symlinkat never follow the last component. Walks below an
 * admitted directory go through walk.h, the one place their rules are written.
 *
 * The families (one file each, each ending with its parameter and op tables):
 * read.c (stat, list, read), write.c (write, edit, mkdir), tree.c (delete, move, copy),
 * search.c (search, find), transfer.c (download, upload), archive.c, watch.c; files.c
 * composes the namespace from their tables. */
#ifndef ABX_BUILTIN_FILES_FILES_H
#define ABX_BUILTIN_FILES_FILES_H

#include "builtin/builtin.h"
#include "policy/paths.h"
#include "sandbox/jail.h"
#include <limits.h>
#include <sys/stat.h>

/* ---- replies ---- */

/* An errno (or -ABX_EIDENT) from a jail open or an *at() call on parameter/label param. */
abx_err files_errno_reply(abx_reply *r, int err, const char *param);
/* The same for parameter param, naming its admitted value (inside the call's scope). */
abx_err files_path_errno(abx_ctx *ctx, abx_reply *r, int err, const char *param);
/* How messages name parameter param: its admitted value, else its name. */
const char *files_label(const abx_ctx *ctx, const char *param);
abx_err files_oom(abx_reply *r);
abx_err files_no_value(abx_reply *r, const char *param);
const char *files_type_name(mode_t m);
/* type, size, mode, mtime, mtime_ms, uid, gid of an lstat/fstat result */
json_t *files_stat_json(const struct stat *st);

/* ---- admitted path values ---- */

/* The admitted value of a path parameter (index: the element of a list parameter). */
const abx_path_value *files_path_value(abx_ctx *ctx, const char *param, size_t index);
/* The jail root of an admitted value as text: its canonical path without "/rel". */
char *files_pv_root(const abx_path_value *pv);
char *files_join_path(const char *dir, const char *name);
/* Step 7 again for a path the call reaches below (or beside) an admitted one; see common.c. */
abx_err files_admit_paths(abx_ctx *ctx, abx_reply *r, const json_t *args, const char *pa, const char *va,
                          const char *pb, const char *vb);

/* ---- directories ---- */

void files_fsync_dir(int dirfd);
void files_clear_nonblock(int fd);
int files_make_dirs(int rootfd, const char *rel, bool include_last, bool *created_last);
abx_err files_open_parent_of(abx_ctx *ctx, abx_reply *r, const abx_path_value *pv, bool make_parents,
                             const char *hint, int *pfd, const char **name);
int files_rename_noreplace(int odir, const char *oname, int ndir, const char *nname, bool is_dir);

/* Open the admitted "path" for reading: a regular file (directory, FIFO, device refused). */
abx_err files_open_regular(abx_ctx *ctx, abx_reply *r, int *fdout, struct stat *st);
/* The same, O_NONBLOCK left set: read it with files_pread only. */
abx_err files_open_regular_nb(abx_ctx *ctx, abx_reply *r, int *fdout, struct stat *st);
/* pread (read when off < 0) that retries EINTR, and EAGAIN once O_NONBLOCK is cleared. */
ssize_t files_pread(int fd, void *buf, size_t n, off_t off);

/* ---- text for results: names and lines need not be UTF-8 (core/text.h: abx_text_json,
 * abx_utf8_complete_prefix) ---- */

/* Whether a glob of list (fnmatch) matches rel or name. */
bool files_glob_any(const json_t *list, const char *rel, const char *name);

/* ---- staged files (stage.c): temp file beside the target, fsync, rename into place ---- */

/* Every temp name abx makes in a watched tree ends so (files.watch never shows them):
 * stage.c's ".NAME.HEX.abx-tmp", extract.c's ".abx-extract.HEX.abx-tmp". */
#define FILES_TMP_SUFFIX ".abx-tmp"

typedef struct files_staged {
    int dirfd;              /* borrowed: the directory of the target */
    const char *name;       /* borrowed: the target's name in dirfd */
    char tmp[NAME_MAX + 1]; /* temp name, "" once renamed or removed */
    int fd;                 /* the temp file, -1 once closed */
    bool existed;           /* the target existed (a regular file): its mode and owner are kept */
    struct stat old;
} files_staged;

void files_stage_abort(files_staged *s);
abx_err files_stage_errno(abx_reply *r, int err, const char *label);
abx_err files_stage_open(files_staged *s, abx_reply *r, int dirfd, const char *name, const char *label, int mode);
abx_err files_stage_write(files_staged *s, abx_reply *r, const char *label, const void *data, size_t len);
abx_err files_stage_commit_ex(files_staged *s, abx_reply *r, const char *label, bool noreplace, bool durable);
abx_err files_stage_commit(files_staged *s, abx_reply *r, const char *label, bool noreplace);

/* ---- git config that runs code (gitwarn.c): a warning on the result ---- */

void files_gitcfg_warn(abx_ctx *ctx, abx_reply *r, const char *param);
/* Whether files_gitcfg_warn might add a warning for param (true when unsure): a result
 * it cannot add to (JSON text) is only for a path where it never would. */
bool files_gitcfg_maybe(abx_ctx *ctx, const char *param);
void files_gitcfg_warn_at(int pfd, const char *name, const char *canonical, abx_reply *r);

/* fn_w: fn, then the git-config warning for param on success. */
#define FILES_GITCFG_WRAP(fn, param)                                           \
    static abx_err fn##_w(abx_ctx *ctx, const json_t *args, abx_reply *r)     \
    {                                                                          \
        abx_err e = fn(ctx, args, r);                                          \
        if (e == ABX_OK)                                                       \
            files_gitcfg_warn(ctx, r, param);                                  \
        return e;                                                              \
    }

/* ---- the families' op tables, composed in files.c ---- */

extern const abx_op_def files_read_ops[], files_write_ops[], files_tree_ops[], files_search_ops[],
    files_transfer_ops[], files_archive_ops[], files_extract_ops[], files_watch_ops[];

#endif
