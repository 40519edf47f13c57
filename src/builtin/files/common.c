/* common.c — what the files op families share: error replies, stat as JSON, the
 * admitted path values, the directories an op creates or works in, and text for results. */
#include "builtin/files/files.h"
#include <errno.h>
#include <fcntl.h>
#include <fnmatch.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>

/* label is quoted as the path: a parameter name, or a value the call may see. */
static abx_err errno_reply(abx_reply *r, int err, const char *label, const char *param)
{
    abx_err e = abx_err_from_errno(err);
    json_t *det = param ? json_pack("{s:s, s:s%}", "param", param, "path", label, strlen(label)) : NULL;
    if (err == ELOOP) /* the jail met a symlink the policy did not see: the tree changed */
        return abx_reply_error(r, e, det, "path '%s' changed after the policy check (a symlink appeared on it)",
                               label);
    if (err == ABX_EIDENT)
        return abx_reply_error(r, e, det, "path '%s' leads to a file a deny rule or protected area binds", label);
    if (e == ABX_E_POLICY_PATH_DENIED)
        return abx_reply_error(r, e, det, "path '%s' leads outside its allowed root", label);
    if (e == ABX_E_FILES_NOT_FOUND)
        return abx_reply_error(r, e, det, "path '%s' does not exist", label);
    return abx_reply_error(r, e, det, "path '%s': %s", label, strerror(err));
}

abx_err files_errno_reply(abx_reply *r, int err, const char *param) { return errno_reply(r, err, param, NULL); }

/* The value is the admitted one: the policy has already refused (403, whether or not it
 * exists) every path outside the call's scope, so naming it reveals nothing new. */
const char *files_label(const abx_ctx *ctx, const char *param)
{
    const char *v = abx_ctx_path(ctx, param);
    return v ? v : param;
}

abx_err files_path_errno(abx_ctx *ctx, abx_reply *r, int err, const char *param)
{
    const char *v = abx_ctx_path(ctx, param);
    return v ? errno_reply(r, err, v, param) : errno_reply(r, err, param, NULL);
}

const char *files_type_name(mode_t m)
{
    if (S_ISREG(m))
        return "file";
    if (S_ISDIR(m))
        return "directory";
    if (S_ISLNK(m))
        return "symlink";
    if (S_ISFIFO(m))
        return "fifo";
    if (S_ISSOCK(m))
        return "socket";
    if (S_ISCHR(m))
        return "char_device";
    if (S_ISBLK(m))
        return "block_device";
    return "other";
}

json_t *files_stat_json(const struct stat *st)
{
    char mode[8], ts[32];
    snprintf(mode, sizeof mode, "%04o", (unsigned)(st->st_mode & 07777));
    int64_t ms = (int64_t)st->st_mtim.tv_sec * 1000 + st->st_mtim.tv_nsec / 1000000;
    abx_iso8601(ms, ts);
    return json_pack("{s:s, s:I, s:s, s:s, s:I, s:i, s:i}", "type", files_type_name(st->st_mode), "size",
                     (json_int_t)st->st_size, "mode", mode, "mtime", ts, "mtime_ms", (json_int_t)ms, "uid",
                     (int)st->st_uid, "gid", (int)st->st_gid);
}

/* The admitted value of a path parameter (index: the element of a list parameter). */
const abx_path_value *files_path_value(abx_ctx *ctx, const char *param, size_t index)
{
    const abx_decision *d = abx_ctx_decision(ctx);
    for (size_t i = 0; i < d->n_paths; i++)
        if (d->paths[i].index == index && strcmp(d->paths[i].param, param) == 0)
            return &d->paths[i];
    return NULL;
}

abx_err files_no_value(abx_reply *r, const char *param)
{
    return abx_reply_error(r, ABX_E_SERVER_INTERNAL, NULL, "no admitted value for '%s'", param);
}

/* The jail root of an admitted value as text: its canonical path without "/rel". */
char *files_pv_root(const abx_path_value *pv)
{
    if (strcmp(pv->rel, ".") == 0)
        return abx_strdup(pv->canonical);
    size_t n = strlen(pv->canonical) - strlen(pv->rel) - 1;
    return n == 0 ? abx_strdup("/") : abx_strndup(pv->canonical, n);
}

char *files_join_path(const char *dir, const char *name)
{
    return strcmp(dir, "/") == 0 ? abx_asprintf("/%s", name) : abx_asprintf("%s/%s", dir, name);
}

abx_err files_oom(abx_reply *r) { return abx_reply_error(r, ABX_E_SERVER_UNAVAILABLE, NULL, "out of memory"); }

/* Step 7 again for a path the call reaches below (or beside) an admitted one: the
 * entries of a recursive copy, move, delete or search, and the directory of a symlink
 * that delete/move act on. Deny statements, protected areas and scopes then hold for
 * every entry, not only for the top. The values are absolute; pb may be NULL. With r
 * NULL the refusal is silent (walks that skip what they may not see). */
abx_err files_admit_paths(abx_ctx *ctx, abx_reply *r, const json_t *args, const char *pa, const char *va,
                           const char *pb, const char *vb)
{
    json_t *a = json_copy((json_t *)args);
    /* nocheck: entry names need not be UTF-8; the policy reads them as C strings */
    json_t *sa = a ? json_string_nocheck(va) : NULL;
    json_t *sb = a && pb ? json_string_nocheck(vb) : NULL;
    bool ok = a && sa && json_object_set_new(a, pa, sa) == 0;
    sa = NULL;
    if (ok && pb)
        ok = sb && json_object_set_new(a, pb, sb) == 0;
    else
        json_decref(sb);
    if (!ok) {
        json_decref(a);
        return r ? files_oom(r) : ABX_E_SERVER_UNAVAILABLE;
    }
    abx_decision d;
    abx_ctx_decide(ctx, a, &d);
    json_decref(a);
    abx_err e = d.err;
    if (e && r && pb)
        abx_reply_error(r, e, json_pack("{s:s%, s:s%}", pa, va, strlen(va), pb, vb, strlen(vb)), "entry %s -> %s: %s",
                        va, vb, d.message);
    else if (e && r)
        abx_reply_error(r, e, json_pack("{s:s%}", pa, va, strlen(va)), "entry %s: %s", va, d.message);
    abx_decision_release(&d);
    return e;
}


void files_fsync_dir(int dirfd)
{
    int fd = openat(dirfd, ".", O_RDONLY | O_DIRECTORY | O_CLOEXEC);
    if (fd >= 0) {
        fsync(fd);
        close(fd);
    }
}

void files_clear_nonblock(int fd)
{
    int fl = fcntl(fd, F_GETFL);
    if (fl >= 0)
        fcntl(fd, F_SETFL, fl & ~O_NONBLOCK);
}

/* Create every directory of rel beneath rootfd (the last component too when
 * include_last), each through the jail. 0 or -errno; *created_last when it made the last. */
int files_make_dirs(int rootfd, const char *rel, bool include_last, bool *created_last)
{
    char buf[PATH_MAX];
    size_t n = strlen(rel);
    if (n >= sizeof buf)
        return -ENAMETOOLONG;
    memcpy(buf, rel, n + 1);
    for (size_t i = 1; i <= n; i++) {
        if (i < n && buf[i] != '/')
            continue;
        if (i == n && !include_last)
            break;
        char save = buf[i];
        buf[i] = '\0';
        const char *name;
        int pfd = abx_jail_open_parent(rootfd, buf, &name);
        int rc = pfd < 0 ? pfd : mkdirat(pfd, name, 0777) == 0 ? 0 : -errno;
        if (rc == 0)
            files_fsync_dir(pfd);
        if (pfd >= 0)
            close(pfd);
        buf[i] = save;
        if (rc == 0 && i == n && created_last)
            *created_last = true;
        if (rc < 0 && rc != -EEXIST)
            return rc;
    }
    return 0;
}

/* The directory an op creates, replaces, moves or removes in must not lie in a denied
 * directory identity, and an existing entry at the name must not be a denied file
 * (a hard link to it, or the file renamed there). 0 or -ABX_EIDENT. */
static int parent_ident_check(abx_ctx *ctx, int pfd, const char *name)
{
    struct stat st;
    if (!abx_ctx_has_idents(ctx))
        return 0;
    if (fstatat(pfd, name, &st, AT_SYMLINK_NOFOLLOW) == 0 && builtin_ident_denied(ctx, &st))
        return -ABX_EIDENT;
    return builtin_fd_check(ctx, -1, pfd);
}

/* Open the directory that holds pv's last component (O_PATH). make_parents: create the
 * missing directories first; hint names the flag that does so in messages. */
abx_err files_open_parent_of(abx_ctx *ctx, abx_reply *r, const abx_path_value *pv, bool make_parents, const char *hint, int *pfd,
                              const char **name)
{
    *pfd = -1;
    if (strcmp(pv->rel, ".") == 0)
        return abx_reply_error(r, ABX_E_ARGS_INVALID, NULL,
                               "'%s' is the root of its allowed scope (%s); it cannot be created, replaced, moved or "
                               "removed",
                               pv->param, pv->canonical);
    if (make_parents) {
        int rc = files_make_dirs(pv->rootfd, pv->rel, false, NULL);
        if (rc == -ENOTDIR || rc == -EEXIST)
            return abx_reply_error(r, ABX_E_FILES_NOT_A_DIRECTORY, NULL, "a parent of '%s' is not a directory",
                                   pv->canonical);
        if (rc < 0)
            return files_errno_reply(r, -rc, pv->canonical);
    }
    int fd = abx_jail_open_parent(pv->rootfd, pv->rel, name);
    if (fd == -ENOENT)
        return abx_reply_error(r, ABX_E_FILES_NOT_FOUND, NULL,
                               "the parent directory of '%s' does not exist%s%s%s", pv->canonical,
                               hint ? " (" : "", hint ? hint : "", hint ? "=true creates it)" : "");
    if (fd == -ENOTDIR)
        return abx_reply_error(r, ABX_E_FILES_NOT_A_DIRECTORY, NULL, "a parent of '%s' is not a directory",
                               pv->canonical);
    if (fd < 0)
        return files_errno_reply(r, -fd, pv->canonical);
    int rc = parent_ident_check(ctx, fd, *name);
    if (rc < 0) {
        close(fd);
        return files_errno_reply(r, -rc, pv->canonical);
    }
    *pfd = fd;
    return ABX_OK;
}

/* rename without replacing: renameat2(RENAME_NOREPLACE); where the filesystem lacks
 * it, link() (which fails atomically on an existing name) for files, and a check
 * before rename for directories. 0 or -1 with errno. */
int files_rename_noreplace(int odir, const char *oname, int ndir, const char *nname, bool is_dir)
{
    if (renameat2(odir, oname, ndir, nname, RENAME_NOREPLACE) == 0)
        return 0;
    if (errno != EINVAL && errno != ENOSYS && errno != EOPNOTSUPP)
        return -1;
    if (!is_dir) {
        if (linkat(odir, oname, ndir, nname, 0) != 0)
            return -1;
        unlinkat(odir, oname, 0);
        return 0;
    }
    struct stat st;
    if (fstatat(ndir, nname, &st, AT_SYMLINK_NOFOLLOW) == 0) {
        errno = EEXIST;
        return -1;
    }
    return renameat(odir, oname, ndir, nname);
}

/* ---- reading ---- */

/* Open the admitted "path" for reading: a regular file; a directory or anything else is
 * refused. O_NONBLOCK: opening a FIFO must not wait for a writer. keep_nonblock leaves
 * it set, for a caller that reads through files_pread: it has no effect on a regular
 * file (open(2)), and a read that answers EAGAIN anyway (a FUSE file system may) clears
 * it there and is retried. Otherwise reads block as usual. */
static abx_err open_regular(abx_ctx *ctx, abx_reply *r, int *fdout, struct stat *st, bool keep_nonblock)
{
    int fd = abx_ctx_open_stat(ctx, "path", O_RDONLY | O_NONBLOCK, 0, st);
    if (fd < 0)
        return files_path_errno(ctx, r, -fd, "path");
    if (S_ISDIR(st->st_mode)) {
        close(fd);
        return abx_reply_error(r, ABX_E_FILES_IS_A_DIRECTORY, NULL, "path '%s' is a directory; use files.list",
                               abx_ctx_path(ctx, "path"));
    }
    if (!S_ISREG(st->st_mode)) {
        close(fd);
        return abx_reply_error(r, ABX_E_FILES_NOT_REGULAR, NULL, "path '%s' is a %s, not a regular file",
                               abx_ctx_path(ctx, "path"), files_type_name(st->st_mode));
    }
    int fl = keep_nonblock ? 0 : fcntl(fd, F_GETFL);
    if (fl > 0)
        fcntl(fd, F_SETFL, fl & ~O_NONBLOCK);
    *fdout = fd;
    return ABX_OK;
}

abx_err files_open_regular(abx_ctx *ctx, abx_reply *r, int *fdout, struct stat *st)
{
    return open_regular(ctx, r, fdout, st, false);
}

abx_err files_open_regular_nb(abx_ctx *ctx, abx_reply *r, int *fdout, struct stat *st)
{
    return open_regular(ctx, r, fdout, st, true);
}

ssize_t files_pread(int fd, void *buf, size_t n, off_t off)
{
    for (;;) {
        ssize_t g = off < 0 ? read(fd, buf, n) : pread(fd, buf, n, off);
        if (g >= 0)
            return g;
        if (errno == EINTR)
            continue;
        if (errno != EAGAIN && errno != EWOULDBLOCK)
            return -1;
        int fl = fcntl(fd, F_GETFL); /* errno stays EAGAIN when the flag was clear already */
        if (fl < 0 || !(fl & O_NONBLOCK) || fcntl(fd, F_SETFL, fl & ~O_NONBLOCK) != 0)
            return -1;
    }
}

/* ---- text for results: names and lines need not be UTF-8 ---- */

bool files_glob_any(const json_t *list, const char *rel, const char *name)
{
    size_t i;
    const json_t *g;
    json_array_foreach(list, i, g)
    {
        const char *pat = json_string_value(g);
        if (pat && (fnmatch(pat, rel, 0) == 0 || fnmatch(pat, name, 0) == 0))
            return true;
    }
    return false;
}
