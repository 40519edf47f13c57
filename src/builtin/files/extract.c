/* extract.c — files.extract: a tar, tar.gz or zip archive (read by unarc.c) unpacked
 * below an admitted directory, all or nothing.
 *
 * The rules, in the order they hold:
 *  1. Staging. Everything is written into a fresh temp directory inside dest
 *     (".abx-extract.<hex>.abx-tmp", which files.watch never shows); only when the whole
 *     archive is in does each of its top-level names move into dest (renameat2
 *     RENAME_NOREPLACE, after checking that none exists). On any failure the temp
 *     directory is removed, and dest too when this call created it: nothing half-written.
 *  2. Names. A member's name is split on '/'; empty and "." parts are dropped; a ".."
 *     part, an absolute name or more than FILES_WALK_MAX_DEPTH parts refuse the archive
 *     (files.unsafe_archive). Each member's final path is admitted by the policy as
 *     `dest` (deny statements, protected areas) before anything is written for it.
 *  3. Never through a link. Parent directories are created and opened one part at a time
 *     with O_NOFOLLOW below the temp directory's fd, so a symlink the archive made earlier
 *     can never be written through (files.unsafe_archive).
 *  4. Links. A symlink's target must be relative, with its ".." parts only in front and no
 *     more of them than the link's depth (so it resolves inside dest whatever the links it
 *     names resolve to); a hardlink must name a regular file this archive already made.
 *     Devices and FIFOs are refused.
 *  5. Limits. At most max_entries members and max_bytes bytes written (the lower of the
 *     argument and the policy's limit): limit.max_entries, limit.max_bytes.
 *  6. Modes: a file keeps its permission bits less setuid, setgid and sticky; directories
 *     are 0755. Owners and times are not restored. */
#include "builtin/files/unarc.h"
#include "builtin/files/walk.h"
#include "builtin/files/results.h"
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>
#include "core/util.h"

#define EXTRACT_CHUNK 65536

typedef struct ex {
    abx_ctx *ctx;
    abx_reply *r;
    const json_t *args;
    const char *dest;        /* dest's canonical path */
    int tfd;                 /* the temp directory */
    int64_t max_bytes, max_entries;
    int64_t bytes, entries, files, dirs, symlinks, hardlinks;
    char *buf;
    /* the directory the last member went into: members come grouped by directory, and a
     * directory made in the temp tree stays one (nothing replaces or renames it) */
    char *pdir;
    int pdir_fd;
} ex;

static abx_err unsafe(ex *x, const char *name, const char *why)
{
    return abx_reply_error(x->r, ABX_E_FILES_UNSAFE_ARCHIVE, json_pack("{s:s%}", "entry", name, strlen(name)),
                           "archive member '%s' %s; nothing was extracted", name, why);
}

/* name → "a/b/c" in out (empty for the archive's own "." or "./"); -1 when unsafe. */
static int norm_name(const char *in, char *out, size_t cap, int *parts)
{
    size_t o = 0;
    *parts = 0;
    if (in[0] == '/')
        return -1;
    for (const char *p = in; *p;) {
        const char *e = strchr(p, '/');
        size_t n = e ? (size_t)(e - p) : strlen(p);
        if (n == 2 && p[0] == '.' && p[1] == '.')
            return -1;
        if (n && !(n == 1 && p[0] == '.')) {
            if (o + n + 2 > cap || ++*parts > FILES_WALK_MAX_DEPTH)
                return -1;
            if (o)
                out[o++] = '/';
            memcpy(out + o, p, n);
            o += n;
        }
        p += n + (e ? 1 : 0);
    }
    out[o] = '\0';
    return 0;
}

/* The directory that holds rel's last part, below the temp directory (created when
 * make, never through a symlink): an fd, or -errno (-ELOOP, -ENOTDIR through a link or
 * a file). *last points at the last part. */
static int walk_parent(ex *x, char *rel, bool make, const char **last)
{
    int fd = dup(x->tfd);
    char *p = rel;
    for (char *s; fd >= 0 && (s = strchr(p, '/')); p = s + 1) {
        *s = '\0';
        if (make && mkdirat(fd, p, 0755) != 0 && errno != EEXIST) {
            *s = '/';
            int e = errno;
            close(fd);
            return -e;
        }
        int nfd = openat(fd, p, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
        int e = errno;
        *s = '/';
        close(fd);
        if (nfd < 0)
            return -(e == ENOTDIR ? ELOOP : e);
        fd = nfd;
    }
    *last = p;
    return fd < 0 ? -errno : fd;
}

static int open_parent(ex *x, char *rel, bool make, const char **last)
{
    const char *slash = strrchr(rel, '/');
    size_t plen = slash ? (size_t)(slash - rel) : 0;
    if (make && x->pdir && strlen(x->pdir) == plen && strncmp(x->pdir, rel, plen) == 0) {
        *last = slash ? slash + 1 : rel;
        int fd = dup(x->pdir_fd);
        return fd < 0 ? -errno : fd;
    }
    int fd = walk_parent(x, rel, make, last);
    if (fd >= 0 && make) {
        char *copy = abx_strndup(rel, plen);
        int cfd = copy ? dup(fd) : -1;
        if (cfd >= 0) {
            if (x->pdir_fd >= 0)
                close(x->pdir_fd);
            abx_free(x->pdir);
            x->pdir = copy;
            x->pdir_fd = cfd;
        } else {
            abx_free(copy);
        }
    }
    return fd;
}

/* Rule 4 for a symlink at rel (parts deep) pointing at target. */
static bool link_target_ok(const char *target, int parts)
{
    if (!target[0] || target[0] == '/')
        return false;
    int ups = 0;
    bool named = false;
    for (const char *p = target; *p;) {
        const char *e = strchr(p, '/');
        size_t n = e ? (size_t)(e - p) : strlen(p);
        if (n == 2 && p[0] == '.' && p[1] == '.') {
            if (named || ++ups > parts - 1)
                return false;
        } else if (n && !(n == 1 && p[0] == '.')) {
            named = true;
        }
        p += n + (e ? 1 : 0);
    }
    return true;
}

/* Make room for a new name: an earlier member of the same name (not a directory) goes. */
static int clear_name(int pfd, const char *name)
{
    struct stat st;
    if (fstatat(pfd, name, &st, AT_SYMLINK_NOFOLLOW) != 0)
        return errno == ENOENT ? 0 : -errno;
    if (S_ISDIR(st.st_mode))
        return -EISDIR;
    return unlinkat(pfd, name, 0) == 0 ? 0 : -errno;
}

static abx_err write_file(ex *x, unarc *a, const unarc_entry *e, int pfd, const char *last)
{
    int rc = clear_name(pfd, last);
    int fd = rc < 0 ? -1 : openat(pfd, last, O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, 0600);
    if (fd < 0)
        return rc == -EISDIR ? unsafe(x, e->name, "replaces a directory of the same name")
                             : files_errno_reply(x->r, rc < 0 ? -rc : errno, e->name);
    abx_err err = ABX_OK;
    for (;;) {
        ssize_t n = unarc_read(a, x->buf, EXTRACT_CHUNK);
        if (n < 0) {
            err = abx_reply_error(x->r, ABX_E_FILES_BAD_ARCHIVE, NULL, "%s; nothing was extracted", unarc_error(a));
            break;
        }
        if (n == 0)
            break;
        x->bytes += n;
        if (x->max_bytes >= 0 && x->bytes > x->max_bytes) {
            err = abx_reply_error(x->r, ABX_E_LIMIT_MAX_BYTES, NULL,
                                  "the archive unpacks to more than max_bytes (%lld); nothing was extracted",
                                  (long long)x->max_bytes);
            break;
        }
        for (ssize_t off = 0; off < n && !err;) {
            ssize_t w = write(fd, x->buf + off, (size_t)(n - off));
            if (w < 0 && errno == EINTR)
                continue;
            if (w <= 0)
                err = files_stage_errno(x->r, w < 0 ? errno : EIO, e->name);
            else
                off += w;
        }
        if (err)
            break;
    }
    if (!err && fchmod(fd, (e->mode ? e->mode : 0644) & 0777) != 0)
        err = files_errno_reply(x->r, errno, e->name);
    close(fd);
    x->files++;
    return err;
}

static abx_err make_link(ex *x, const unarc_entry *e, int pfd, const char *last, int parts)
{
    int rc = clear_name(pfd, last);
    if (rc == -EISDIR)
        return unsafe(x, e->name, "replaces a directory of the same name");
    if (e->type == UNARC_SYMLINK) {
        if (!link_target_ok(e->link, parts))
            return unsafe(x, e->name, "is a symlink leading outside dest (an absolute target or too many '..')");
        if (rc < 0 || symlinkat(e->link, pfd, last) != 0)
            return files_errno_reply(x->r, rc < 0 ? -rc : errno, e->name);
        x->symlinks++;
        return ABX_OK;
    }
    char *to = abx_malloc(UNARC_NAME_MAX);
    int tparts;
    if (!to)
        return files_oom(x->r);
    abx_err err = ABX_OK;
    const char *tlast;
    int lfd = norm_name(e->link, to, UNARC_NAME_MAX, &tparts) < 0 || !to[0] ? -EPERM : open_parent(x, to, false, &tlast);
    struct stat st;
    if (lfd < 0 || fstatat(lfd, tlast, &st, AT_SYMLINK_NOFOLLOW) != 0 || !S_ISREG(st.st_mode))
        err = unsafe(x, e->name, "is a hardlink to something other than a file this archive made");
    else if (rc < 0 || linkat(lfd, tlast, pfd, last, 0) != 0)
        err = files_errno_reply(x->r, rc < 0 ? -rc : errno, e->name);
    if (lfd >= 0)
        close(lfd);
    abx_free(to);
    if (!err)
        x->hardlinks++;
    return err;
}

/* One member: rules 2 to 5. */
static abx_err extract_entry(ex *x, unarc *a, const unarc_entry *e, char *rel)
{
    int parts;
    if (norm_name(e->name, rel, UNARC_NAME_MAX, &parts) < 0)
        return unsafe(x, e->name, "has an absolute name, a '..' part or too many parts");
    if (!rel[0]) {
        if (e->type == UNARC_DIR)
            return ABX_OK; /* "./" itself: dest */
        return unsafe(x, e->name, "has no name below dest");
    }
    if (e->type == UNARC_OTHER)
        return unsafe(x, e->name, "is a device, FIFO or other special file");
    if (++x->entries > x->max_entries)
        return abx_reply_error(x->r, ABX_E_LIMIT_MAX_ENTRIES, NULL,
                               "the archive has more than max_entries (%lld) members; nothing was extracted",
                               (long long)x->max_entries);
    char *abs = files_join_path(x->dest, rel);
    abx_err err = abs ? files_admit_paths(x->ctx, x->r, x->args, "dest", abs, NULL, NULL) : files_oom(x->r);
    abx_free(abs);
    if (err)
        return err;
    const char *last;
    int pfd = open_parent(x, rel, true, &last);
    if (pfd == -ELOOP)
        return unsafe(x, e->name, "goes through a symlink or a file");
    if (pfd < 0)
        return files_errno_reply(x->r, -pfd, e->name);
    if (e->type == UNARC_DIR) {
        if (mkdirat(pfd, last, 0755) != 0 && errno != EEXIST)
            err = files_errno_reply(x->r, errno, e->name);
        struct stat st;
        if (!err && (fstatat(pfd, last, &st, AT_SYMLINK_NOFOLLOW) != 0 || !S_ISDIR(st.st_mode)))
            err = unsafe(x, e->name, "is a directory where the archive already put a file or link");
        x->dirs += !err;
    } else if (e->type == UNARC_FILE) {
        err = write_file(x, a, e, pfd, last);
    } else {
        err = make_link(x, e, pfd, last, parts);
    }
    close(pfd);
    return err;
}

/* Remove name below at and everything in it (never following a link). */
static void remove_tree(int at, const char *name, int depth)
{
    if (unlinkat(at, name, 0) == 0 || (errno != EISDIR && errno != EPERM) || depth > FILES_WALK_MAX_DEPTH + 2)
        return;
    int fd = openat(at, name, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
    DIR *d = fd >= 0 ? fdopendir(fd) : NULL;
    if (!d) {
        if (fd >= 0)
            close(fd);
    } else {
        struct dirent *de;
        while ((de = readdir(d)))
            if (strcmp(de->d_name, ".") && strcmp(de->d_name, ".."))
                remove_tree(dirfd(d), de->d_name, depth + 1);
        closedir(d);
    }
    unlinkat(at, name, AT_REMOVEDIR);
}

/* The top-level names of the temp directory (sorted), NULL-terminated; NULL when out of memory. */
static char **top_names(int tfd, size_t *n)
{
    int fd = openat(tfd, ".", O_RDONLY | O_DIRECTORY | O_CLOEXEC);
    DIR *d = fd >= 0 ? fdopendir(fd) : NULL;
    char **v = NULL;
    size_t cap = 0;
    *n = 0;
    if (!d) {
        if (fd >= 0)
            close(fd);
        return abx_calloc(1, sizeof *v);
    }
    struct dirent *de;
    bool ok = true;
    while (ok && (de = readdir(d))) {
        if (!strcmp(de->d_name, ".") || !strcmp(de->d_name, ".."))
            continue;
        if (*n + 2 > cap) {
            char **nv = abx_realloc(v, (cap = cap * 2 + 8) * sizeof *v);
            ok = nv != NULL;
            v = nv ? nv : v;
        }
        if (ok && !(v[(*n)++] = abx_strdup(de->d_name)))
            ok = false;
    }
    closedir(d);
    if (v)
        v[*n] = NULL;
    if (!ok) {
        for (size_t i = 0; v && v[i]; i++)
            abx_free(v[i]);
        abx_free(v);
        return NULL;
    }
    return v ? v : abx_calloc(1, sizeof *v);
}

/* Rule 1's last step: every top-level name into dest, or none. */
static abx_err publish(ex *x, int destfd)
{
    size_t n;
    char **names = top_names(x->tfd, &n);
    if (!names)
        return files_oom(x->r);
    abx_err err = ABX_OK;
    struct stat st;
    for (size_t i = 0; i < n && !err; i++)
        if (fstatat(destfd, names[i], &st, AT_SYMLINK_NOFOLLOW) == 0 || errno != ENOENT)
            err = abx_reply_error(x->r, ABX_E_FILES_EXISTS, json_pack("{s:s}", "name", names[i]),
                                  "'%s' already exists in dest; nothing was extracted", names[i]);
    size_t moved = 0;
    for (; !err && moved < n; moved++) {
        bool dir = fstatat(x->tfd, names[moved], &st, AT_SYMLINK_NOFOLLOW) == 0 && S_ISDIR(st.st_mode);
        if (files_rename_noreplace(x->tfd, names[moved], destfd, names[moved], dir) != 0)
            err = errno == EEXIST ? abx_reply_error(x->r, ABX_E_FILES_EXISTS, NULL,
                                                     "'%s' appeared in dest meanwhile; nothing was extracted",
                                                     names[moved])
                                  : files_errno_reply(x->r, errno, x->dest);
        if (err)
            break;
    }
    while (err && moved > 0) { /* put back what had moved */
        moved--;
        bool dir = fstatat(destfd, names[moved], &st, AT_SYMLINK_NOFOLLOW) == 0 && S_ISDIR(st.st_mode);
        files_rename_noreplace(destfd, names[moved], x->tfd, names[moved], dir);
    }
    for (size_t i = 0; i < n; i++)
        abx_free(names[i]);
    abx_free(names);
    return err;
}

/* dest opened (created when missing: then *pfd holds its parent and *name its name,
 * so a failed call can remove it again): a directory fd or an error reply. */
static abx_err open_dest(abx_ctx *ctx, abx_reply *r, int *out, int *pfd, const char **name)
{
    *pfd = -1;
    int fd = abx_ctx_open(ctx, "dest", O_RDONLY | O_DIRECTORY, 0);
    if (fd == -ENOTDIR)
        return abx_reply_error(r, ABX_E_FILES_NOT_A_DIRECTORY, NULL, "dest '%s' is not a directory",
                               files_label(ctx, "dest"));
    if (fd == -ENOENT) {
        const abx_path_value *pv = files_path_value(ctx, "dest", 0);
        abx_err e = pv ? files_open_parent_of(ctx, r, pv, false, NULL, pfd, name) : files_no_value(r, "dest");
        if (e)
            return e;
        fd = mkdirat(*pfd, *name, 0755) != 0 ? -errno
                                              : openat(*pfd, *name, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
        if (fd == -1) {
            fd = -errno;
            unlinkat(*pfd, *name, AT_REMOVEDIR);
        }
        if (fd < 0) {
            close(*pfd);
            *pfd = -1;
        }
    }
    if (fd < 0)
        return files_path_errno(ctx, r, -fd, "dest");
    *out = fd;
    return ABX_OK;
}

static int make_temp_dir(int destfd, char *name, size_t cap)
{
    for (int attempt = 0; attempt < 16; attempt++) {
        unsigned char rnd[8];
        char hex[17];
        if (abx_random(rnd, sizeof rnd) != 0)
            return -EIO;
        abx_hex(rnd, sizeof rnd, hex);
        snprintf(name, cap, ".abx-extract.%s" FILES_TMP_SUFFIX, hex);
        if (mkdirat(destfd, name, 0700) == 0) {
            int fd = openat(destfd, name, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
            if (fd < 0)
                unlinkat(destfd, name, AT_REMOVEDIR);
            return fd < 0 ? -errno : fd;
        }
        if (errno != EEXIST)
            return -errno;
    }
    return -EEXIST;
}

static abx_err extract_all(ex *x, unarc *a)
{
    unarc_entry *e = abx_malloc(sizeof *e);
    char *rel = abx_malloc(UNARC_NAME_MAX);
    abx_err err = e && rel ? ABX_OK : files_oom(x->r);
    while (!err) {
        int rc = unarc_next(a, e);
        if (rc == 0)
            break;
        if (rc < 0)
            err = abx_reply_error(x->r, ABX_E_FILES_BAD_ARCHIVE, NULL, "%s; nothing was extracted", unarc_error(a));
        else
            err = extract_entry(x, a, e, rel);
        if (!err && abx_ctx_cancelled(x->ctx))
            err = abx_reply_error(x->r, ABX_E_SERVER_UNAVAILABLE, NULL, "cancelled; nothing was extracted");
    }
    abx_free(e);
    abx_free(rel);
    return err;
}

static int64_t lower_limit(int64_t arg, int64_t policy) { return policy >= 0 && policy < arg ? policy : arg; }

static abx_err files_extract(abx_ctx *ctx, const json_t *args, abx_reply *r)
{
    int afd;
    struct stat ast;
    abx_err err = files_open_regular(ctx, r, &afd, &ast);
    if (err)
        return err;
    const char *fmt = json_string_value(json_object_get(args, "format"));
    unarc_format want = !fmt || !strcmp(fmt, "auto") ? UNARC_AUTO
                        : !strcmp(fmt, "tar")         ? UNARC_TAR
                        : !strcmp(fmt, "zip")         ? UNARC_ZIP
                                                      : UNARC_TARGZ;
    char why[256];
    unarc *a = unarc_open(afd, want, why, sizeof why);
    if (!a) {
        close(afd);
        return abx_reply_error(r, ABX_E_FILES_BAD_ARCHIVE, NULL, "path '%s': %s", files_label(ctx, "path"), why);
    }
    ex x = {.ctx = ctx, .r = r, .args = args, .dest = abx_ctx_path(ctx, "dest"), .tfd = -1, .pdir_fd = -1,
            .max_bytes = lower_limit(json_integer_value(json_object_get(args, "max_bytes")),
                                     abx_ctx_limit(ctx, ABX_LIM_MAX_BYTES)),
            .max_entries = lower_limit(json_integer_value(json_object_get(args, "max_entries")),
                                       abx_ctx_limit(ctx, ABX_LIM_MAX_ENTRIES)),
            .buf = abx_malloc(EXTRACT_CHUNK)};
    int destfd = -1, parentfd = -1; /* parentfd: dest's parent when this call made dest */
    const char *dname = NULL;
    char tname[64] = "";
    err = !x.buf || !x.dest ? files_oom(r) : open_dest(ctx, r, &destfd, &parentfd, &dname);
    if (!err) {
        x.tfd = make_temp_dir(destfd, tname, sizeof tname);
        if (x.tfd < 0)
            err = files_path_errno(ctx, r, -x.tfd, "dest");
    }
    if (!err)
        err = extract_all(&x, a);
    if (!err)
        err = publish(&x, destfd);
    if (x.pdir_fd >= 0)
        close(x.pdir_fd);
    abx_free(x.pdir);
    if (x.tfd >= 0) {
        close(x.tfd);
        remove_tree(destfd, tname, 0);
    }
    if (err && parentfd >= 0) /* dest was ours: it goes too */
        unlinkat(parentfd, dname, AT_REMOVEDIR);
    if (parentfd >= 0)
        close(parentfd);
    if (!err)
        abx_reply_json(r, json_pack("{s:s, s:s, s:s, s:I, s:I, s:I, s:I, s:I, s:I}", "path", abx_ctx_path(ctx, "path"),
                                    "dest", x.dest, "format", unarc_format_name(unarc_get_format(a)), "entries",
                                    (json_int_t)x.entries, "files", (json_int_t)x.files, "directories",
                                    (json_int_t)x.dirs, "symlinks", (json_int_t)x.symlinks, "hardlinks",
                                    (json_int_t)x.hardlinks, "bytes", (json_int_t)x.bytes));
    if (destfd >= 0)
        close(destfd);
    unarc_close(a);
    close(afd);
    abx_free(x.buf);
    return err;
}

static const abx_param extract_params[] = {
    {"path", ABX_T_STRING, .required = true, .kind = ABX_KIND_PATH, .access = ABX_ACC_READ,
     .doc = "The archive: tar, tar.gz or zip (stored or deflate)"},
    {"dest", ABX_T_STRING, .required = true, .kind = ABX_KIND_PATH, .access = ABX_ACC_WRITE,
     .doc = "Directory to unpack into (created when missing; its parent must exist). The archive's top-level "
            "names must not exist in it yet"},
    {"format", ABX_T_ENUM, .dflt = "\"auto\"", .choices = "auto|tar|tar.gz|zip",
     .doc = "auto: by the file's first bytes"},
    {"max_bytes", ABX_T_INT, .dflt = "1073741824", ABX_MIN(1),
     .doc = "Most bytes to write in all (the policy's max_bytes limit when lower)"},
    {"max_entries", ABX_T_INT, .dflt = "10000", ABX_RANGE(1, 1000000),
     .doc = "Most members to unpack (the policy's max_entries limit when lower)"},
    {0},
};

/* the result */
static const abx_param extract_result[] = {
    {"path", ABX_T_STRING, .required = true, .doc = "The archive"},
    {"dest", ABX_T_STRING, .required = true, .doc = "Where it was extracted"},
    {"format", ABX_T_STRING, .required = true},
    {"entries", ABX_T_INT, .required = true},
    {"files", ABX_T_INT, .required = true},
    {"directories", ABX_T_INT, .required = true},
    {"symlinks", ABX_T_INT, .required = true},
    {"hardlinks", ABX_T_INT, .required = true},
    {"bytes", ABX_T_INT, .required = true},
    {0},
};

const abx_op_def files_extract_ops[] = {
    {.id = "files.extract", .result = extract_result, .effects = ABX_EFF_WRITE,
     .summary = "Unpack a tar, tar.gz or zip archive into a directory, all or nothing: no member may land outside "
                "it ('..', absolute names, links leading out, writing through a link), within max_bytes and "
                "max_entries.",
     .http = {"POST /files/extract"}, .params = extract_params,
     .limits = ABX_LIM_MAX_BYTES | ABX_LIM_MAX_ENTRIES | ABX_LIM_RATE | ABX_LIM_CONCURRENCY, .since = "0.1",
     .errors = "files.not_found files.access files.io files.no_space files.is_a_directory files.not_regular files.not_a_directory "
               "files.bad_archive files.unsafe_archive files.exists limit.max_bytes limit.max_entries",
     .handler = files_extract},
    {0},
};
