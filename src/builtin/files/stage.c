/* stage.c — staged files: a temp file beside the target, fsync, rename into place, so
 * a reader sees the old file or the new one, never half of either. */
#include "builtin/files/files.h"
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>

void files_stage_abort(files_staged *s)
{
    if (s->fd >= 0)
        close(s->fd);
    s->fd = -1;
    if (s->tmp[0])
        unlinkat(s->dirfd, s->tmp, 0);
    s->tmp[0] = '\0';
}

abx_err files_stage_errno(abx_reply *r, int err, const char *label)
{
    if (err == ENOSPC || err == EDQUOT) /* 507, as envd and WebDAV answer a full disk */
        return abx_reply_error(r, ABX_E_FILES_NO_SPACE, NULL, "'%s': %s; the file was left unchanged", label,
                               strerror(err));
    if (err == EFBIG)
        return abx_reply_error(r, ABX_E_FILES_IO, NULL, "'%s': %s; the file was left unchanged", label,
                               strerror(err));
    return files_errno_reply(r, err, label);
}

/* Look at the target (a directory or a non-regular file is refused) and create the
 * temp file next to it. mode >= 0: the new file's mode; else the old file's mode, or
 * 0666 less the umask for a new file. */
abx_err files_stage_open(files_staged *s, abx_reply *r, int dirfd, const char *name, const char *label, int mode)
{
    memset(s, 0, sizeof *s);
    s->fd = -1;
    s->dirfd = dirfd;
    s->name = name;
    if (fstatat(dirfd, name, &s->old, AT_SYMLINK_NOFOLLOW) == 0) {
        if (S_ISDIR(s->old.st_mode))
            return abx_reply_error(r, ABX_E_FILES_IS_A_DIRECTORY, NULL, "'%s' is a directory", label);
        if (!S_ISREG(s->old.st_mode))
            return abx_reply_error(r, ABX_E_FILES_NOT_REGULAR, NULL, "'%s' is a %s, not a regular file", label,
                                   files_type_name(s->old.st_mode));
        s->existed = true;
    } else if (errno != ENOENT) {
        return files_errno_reply(r, errno, label);
    }
    for (int attempt = 0; attempt < 16 && s->fd < 0; attempt++) {
        unsigned char rnd[8];
        char hex[17];
        if (abx_random(rnd, sizeof rnd) != 0)
            return abx_reply_error(r, ABX_E_SERVER_UNAVAILABLE, NULL, "no randomness for a temporary name");
        abx_hex(rnd, sizeof rnd, hex);
        snprintf(s->tmp, sizeof s->tmp, ".%.200s.%s" FILES_TMP_SUFFIX, name, hex);
        s->fd = openat(dirfd, s->tmp, O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, 0666);
        if (s->fd < 0 && errno != EEXIST) {
            int e = errno;
            s->tmp[0] = '\0';
            return files_errno_reply(r, e, label);
        }
    }
    if (s->fd < 0) {
        s->tmp[0] = '\0';
        return abx_reply_error(r, ABX_E_FILES_IO, NULL, "'%s': could not create a temporary file", label);
    }
    /* the mode is set before any byte is written: no window with looser permissions */
    if (s->existed && (s->old.st_uid != geteuid() || s->old.st_gid != getegid()))
        (void)!fchown(s->fd, s->old.st_uid, s->old.st_gid); /* only root can; otherwise the writer owns it */
    if (mode >= 0 || s->existed) {
        mode_t m = mode >= 0 ? (mode_t)mode : s->old.st_mode & 07777;
        if (fchmod(s->fd, m) != 0) {
            int e = errno;
            files_stage_abort(s);
            return files_errno_reply(r, e, label);
        }
    }
    return ABX_OK;
}

abx_err files_stage_write(files_staged *s, abx_reply *r, const char *label, const void *data, size_t len)
{
    const char *p = data;
    while (len > 0) {
        ssize_t w = write(s->fd, p, len);
        if (w < 0 && errno == EINTR)
            continue;
        if (w <= 0) {
            int e = w < 0 ? errno : EIO;
            files_stage_abort(s);
            return files_stage_errno(r, e, label);
        }
        p += w;
        len -= (size_t)w;
    }
    return ABX_OK;
}

/* fsync, close and rename (a new file: link) into place (noreplace: fail when the target exists), then
 * fsync the directory. On failure the temp file is gone and the target unchanged.
 * Without durable (the files of a tree copy) there is no fsync: each file still
 * appears whole or not at all, and the copy does not stall on one flush per file. */
abx_err files_stage_commit_ex(files_staged *s, abx_reply *r, const char *label, bool noreplace, bool durable)
{
    int e = 0;
    if (durable && fsync(s->fd) != 0)
        e = errno;
    if (close(s->fd) != 0 && !e)
        e = errno;
    s->fd = -1;
    if (e) {
        files_stage_abort(s);
        return files_stage_errno(r, e, label);
    }
    /* a new file is linked into place (then its temp name goes): atomic like the rename,
     * and a watcher sees it created rather than renamed over */
    int rc = -1;
    if (!s->existed && linkat(s->dirfd, s->tmp, s->dirfd, s->name, 0) == 0) {
        unlinkat(s->dirfd, s->tmp, 0);
        rc = 0;
    } else if (!s->existed && errno == EEXIST && noreplace) {
        rc = -1; /* errno: EEXIST */
    } else {
        rc = noreplace ? files_rename_noreplace(s->dirfd, s->tmp, s->dirfd, s->name, false)
                       : renameat(s->dirfd, s->tmp, s->dirfd, s->name);
    }
    if (rc != 0) {
        e = errno;
        files_stage_abort(s);
        if (e == EEXIST)
            return abx_reply_error(r, ABX_E_ARGS_INVALID, NULL, "'%s' already exists", label);
        if (e == EISDIR)
            return abx_reply_error(r, ABX_E_FILES_IS_A_DIRECTORY, NULL, "'%s' is a directory", label);
        return files_stage_errno(r, e, label);
    }
    s->tmp[0] = '\0';
    if (durable)
        files_fsync_dir(s->dirfd);
    return ABX_OK;
}

abx_err files_stage_commit(files_staged *s, abx_reply *r, const char *label, bool noreplace)
{
    return files_stage_commit_ex(s, r, label, noreplace, true);
}
