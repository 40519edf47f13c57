/* files.c — the files namespace. Every path a handler touches is the canonical admitted
 * value, opened through the jail beneath its root (abx_ctx_open); no handler opens a
 * raw argument. Non-regular files are never read (a FIFO must not hang a thread). */
#include "builtin/builtin.h"
#include "builtin/gitcfg.h"
#include <ctype.h>
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <fnmatch.h>
#include <limits.h>
#include <poll.h>
#include <regex.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/inotify.h>
#include <sys/stat.h>
#include <unistd.h>
#include <zlib.h>

static void gitcfg_warn_at(int pfd, const char *name, const char *canonical, abx_reply *r);

#define READ_DEFAULT_CAP (16LL * 1024 * 1024) /* files.read's own default max_bytes */
#define LIST_MAX_DEPTH 64

static abx_err errno_reply(abx_reply *r, int err, const char *param)
{
    abx_err e = abx_err_from_errno(err);
    if (err == ELOOP) /* the jail met a symlink the policy did not see: the tree changed */
        return abx_reply_error(r, e, NULL, "path '%s' changed after the policy check (a symlink appeared on it)",
                               param);
    if (err == ABX_EIDENT)
        return abx_reply_error(r, e, NULL, "path '%s' leads to a file a deny rule or protected area binds", param);
    if (e == ABX_E_POLICY_PATH_DENIED)
        return abx_reply_error(r, e, NULL, "path '%s' leads outside its allowed root", param);
    if (e == ABX_E_FILES_NOT_FOUND)
        return abx_reply_error(r, e, NULL, "path '%s' does not exist", param);
    return abx_reply_error(r, e, NULL, "path '%s': %s", param, strerror(err));
}

static const char *type_name(mode_t m)
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

static json_t *stat_json(const struct stat *st)
{
    char mode[8], ts[32];
    snprintf(mode, sizeof mode, "%04o", (unsigned)(st->st_mode & 07777));
    int64_t ms = (int64_t)st->st_mtim.tv_sec * 1000 + st->st_mtim.tv_nsec / 1000000;
    abx_iso8601(ms, ts);
    return json_pack("{s:s, s:I, s:s, s:s, s:I, s:i, s:i}", "type", type_name(st->st_mode), "size",
                     (json_int_t)st->st_size, "mode", mode, "mtime", ts, "mtime_ms", (json_int_t)ms, "uid",
                     (int)st->st_uid, "gid", (int)st->st_gid);
}

/* ---- files.stat ---- */

static abx_err files_stat(abx_ctx *ctx, const json_t *args, abx_reply *r)
{
    const char *canon = abx_ctx_path(ctx, "path");
    int fd = abx_ctx_open(ctx, "path", O_PATH, 0);
    if (fd == -ENOENT || fd == -ENOTDIR) {
        abx_reply_json(r, json_pack("{s:b, s:s}", "exists", 0, "path", canon));
        return ABX_OK;
    }
    if (fd < 0)
        return errno_reply(r, -fd, "path");
    struct stat st;
    int rc = fstat(fd, &st);
    int err = errno;
    close(fd);
    if (rc != 0)
        return errno_reply(r, err, "path");
    json_t *o = stat_json(&st);
    json_object_set_new(o, "exists", json_true());
    json_object_set_new(o, "path", json_string(canon));
    abx_reply_json(r, o);
    return ABX_OK;
}

/* ---- files.list ---- */

static abx_err admit_paths(abx_ctx *ctx, abx_reply *r, const json_t *args, const char *pa, const char *va,
                           const char *pb, const char *vb);
static char *join_path(const char *dir, const char *name);

typedef struct list_state {
    abx_ctx *ctx;
    const json_t *args;
    json_t *entries;
    int64_t max;
    bool truncated;
    bool hidden;
    bool recursive;
} list_state;

static int cmp_names(const void *a, const void *b) { return strcmp(*(char *const *)a, *(char *const *)b); }

static int dir_names(int dirfd, char ***out, size_t *count);
static void free_names(char **names, size_t n);

static int list_dir(int dirfd, const char *prefix, const char *abs, int depth, list_state *st)
{
    char **names;
    size_t n;
    int rc = dir_names(dirfd, &names, &n);
    if (rc < 0)
        return rc;
    for (size_t i = 0; i < n && rc == 0; i++) {
        if (!st->hidden && names[i][0] == '.')
            continue;
        if ((int64_t)json_array_size(st->entries) >= st->max) {
            st->truncated = true;
            break;
        }
        struct stat sb;
        if (fstatat(dirfd, names[i], &sb, AT_SYMLINK_NOFOLLOW) != 0)
            continue; /* vanished while listing */
        char *rel = prefix ? abx_asprintf("%s/%s", prefix, names[i]) : abx_strdup(names[i]);
        char *cabs = join_path(abs, names[i]);
        if (!rel || !cabs) {
            abx_free(rel);
            abx_free(cabs);
            rc = -ENOMEM;
            break;
        }
        /* an entry the policy would refuse on its own (a denied subtree, a protected
         * area) is not shown; a symlink is a name in this admitted directory and is
         * never followed */
        if (!S_ISLNK(sb.st_mode) && (admit_paths(st->ctx, NULL, st->args, "path", cabs, NULL, NULL) != ABX_OK ||
                                     builtin_ident_denied(st->ctx, &sb))) {
            abx_free(rel);
            abx_free(cabs);
            continue;
        }
        json_t *e = stat_json(&sb);
        json_object_set_new(e, "name", json_string(names[i]));
        json_object_set_new(e, "path", json_string(rel));
        if (!json_is_string(json_object_get(e, "name"))) /* non-UTF-8 names: show them escaped */
            json_object_set_new(e, "name", json_string("\xef\xbf\xbd"));
        json_array_append_new(st->entries, e);
        /* recursion never follows symlinks: the walk stays where the jail put it */
        if (st->recursive && S_ISDIR(sb.st_mode) && depth < LIST_MAX_DEPTH) {
            int sub = openat(dirfd, names[i], O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
            if (sub >= 0) {
                rc = list_dir(sub, rel, cabs, depth + 1, st);
                close(sub);
            }
        }
        abx_free(rel);
        abx_free(cabs);
    }
    for (size_t i = 0; i < n; i++)
        abx_free(names[i]);
    abx_free(names);
    return rc;
}

static abx_err files_list(abx_ctx *ctx, const json_t *args, abx_reply *r)
{
    int fd = abx_ctx_open(ctx, "path", O_RDONLY | O_DIRECTORY | O_NONBLOCK, 0);
    if (fd == -ENOTDIR)
        return abx_reply_error(r, ABX_E_FILES_NOT_A_DIRECTORY, NULL, "path '%s' is not a directory",
                               abx_ctx_path(ctx, "path"));
    if (fd < 0)
        return errno_reply(r, -fd, "path");
    list_state st = {.ctx = ctx,
                     .args = args,
                     .entries = json_array(),
                     .max = abx_ctx_limit(ctx, ABX_LIM_MAX_ENTRIES),
                     .hidden = json_is_true(json_object_get(args, "include_hidden")),
                     .recursive = json_is_true(json_object_get(args, "recursive"))};
    if (st.max < 0)
        st.max = 1000;
    int rc = list_dir(fd, NULL, abx_ctx_path(ctx, "path"), 0, &st);
    close(fd);
    if (rc < 0) {
        json_decref(st.entries);
        return errno_reply(r, -rc, "path");
    }
    abx_reply_json(r, json_pack("{s:s, s:o, s:b, s:i}", "path", abx_ctx_path(ctx, "path"), "entries", st.entries,
                                "truncated", st.truncated, "count", (int)json_array_size(st.entries)));
    return ABX_OK;
}

/* ---- files.read ---- */

static abx_err open_regular(abx_ctx *ctx, abx_reply *r, int *fdout, struct stat *st)
{
    /* O_NONBLOCK: opening a FIFO must not wait for a writer */
    int fd = abx_ctx_open(ctx, "path", O_RDONLY | O_NONBLOCK, 0);
    if (fd < 0)
        return errno_reply(r, -fd, "path");
    if (fstat(fd, st) != 0) {
        int e = errno;
        close(fd);
        return errno_reply(r, e, "path");
    }
    if (S_ISDIR(st->st_mode)) {
        close(fd);
        return abx_reply_error(r, ABX_E_FILES_IS_A_DIRECTORY, NULL, "path '%s' is a directory; use files.list",
                               abx_ctx_path(ctx, "path"));
    }
    if (!S_ISREG(st->st_mode)) {
        close(fd);
        return abx_reply_error(r, ABX_E_FILES_NOT_REGULAR, NULL, "path '%s' is a %s, not a regular file",
                               abx_ctx_path(ctx, "path"), type_name(st->st_mode));
    }
    int fl = fcntl(fd, F_GETFL);
    if (fl >= 0)
        fcntl(fd, F_SETFL, fl & ~O_NONBLOCK);
    *fdout = fd;
    return ABX_OK;
}

static abx_err encode_content(abx_reply *r, json_t *o, const char *buf, size_t n, bool b64)
{
    if (b64) {
        char *s = abx_base64_encode(buf, n, NULL);
        if (!s)
            return abx_reply_error(r, ABX_E_SERVER_UNAVAILABLE, NULL, "out of memory");
        json_object_set_new(o, "content", json_string(s));
        abx_free(s);
        return ABX_OK;
    }
    if (!abx_text_valid(buf, n))
        return abx_reply_error(r, ABX_E_FILES_NOT_UTF8, NULL,
                               "the file is not UTF-8 text; read it with encoding=base64");
    json_object_set_new(o, "content", json_stringn(buf, n));
    return ABX_OK;
}

static abx_err read_lines(abx_ctx *ctx, abx_reply *r, int fd, const json_t *args, int64_t cap, bool b64, json_t *o)
{
    int64_t start = json_integer_value(json_object_get(args, "start_line"));
    const json_t *ml = json_object_get(args, "max_lines");
    int64_t max_lines = ml ? json_integer_value(ml) : INT64_MAX;
    bool numbered = json_is_true(json_object_get(args, "numbered"));
    if (start < 1)
        start = 1;
    abx_buf out;
    abx_buf_init(&out, (size_t)cap + 64);
    char chunk[65536];
    int64_t line = 1, taken = 0;
    bool at_line_start = true, truncated = false, stop = false;
    ssize_t got;
    while (!stop && (got = read(fd, chunk, sizeof chunk)) > 0) {
        for (ssize_t i = 0; i < got; i++) {
            char c = chunk[i];
            if (line >= start) {
                if (taken >= max_lines) {
                    truncated = true;
                    stop = true;
                    break;
                }
                if (at_line_start && numbered) {
                    char num[24];
                    int k = snprintf(num, sizeof num, "%6lld\t", (long long)line);
                    abx_buf_append(&out, num, (size_t)k);
                }
                if ((int64_t)out.len >= cap) {
                    truncated = true;
                    stop = true;
                    break;
                }
                abx_buf_putc(&out, c);
                at_line_start = false;
            }
            if (c == '\n') {
                if (line >= start)
                    taken++;
                line++;
                at_line_start = true;
            }
        }
    }
    if (!at_line_start && line >= start)
        taken++; /* a last line without '\n' */
    if (got < 0 && !stop) {
        abx_buf_release(&out);
        return errno_reply(r, errno, "path");
    }
    size_t n = out.len;
    if (!b64 && truncated)
        n = abx_utf8_complete_prefix(out.data ? out.data : "", n);
    abx_err e = encode_content(r, o, out.data ? out.data : "", n, b64);
    abx_buf_release(&out);
    if (e)
        return e;
    json_object_set_new(o, "start_line", json_integer(start));
    json_object_set_new(o, "lines", json_integer(taken));
    json_object_set_new(o, "end_line", json_integer(taken ? start + taken - 1 : start - 1));
    json_object_set_new(o, "length", json_integer((json_int_t)n));
    json_object_set_new(o, "truncated", json_boolean(truncated));
    return ABX_OK;
}

static abx_err files_read(abx_ctx *ctx, const json_t *args, abx_reply *r)
{
    int fd = -1;
    struct stat st;
    abx_err e = open_regular(ctx, r, &fd, &st);
    if (e)
        return e;
    bool b64 = strcmp(json_string_value(json_object_get(args, "encoding")), "base64") == 0;
    int64_t cap = abx_ctx_limit(ctx, ABX_LIM_MAX_BYTES);
    if (cap < 0 || cap > READ_DEFAULT_CAP)
        cap = READ_DEFAULT_CAP;
    json_t *o = json_pack("{s:s, s:s, s:I}", "path", abx_ctx_path(ctx, "path"), "encoding", b64 ? "base64" : "utf8",
                          "size", (json_int_t)st.st_size);
    if (json_object_get(args, "start_line") || json_object_get(args, "max_lines")) {
        if (json_integer_value(json_object_get(args, "offset")) != 0 || json_object_get(args, "length")) {
            close(fd);
            json_decref(o);
            return abx_reply_error(r, ABX_E_ARGS_INVALID, NULL,
                                   "give a byte range (offset, length) or a line range (start_line, max_lines), not both");
        }
        e = read_lines(ctx, r, fd, args, cap, b64, o);
        close(fd);
        if (e) {
            json_decref(o);
            return e;
        }
        abx_reply_json(r, o);
        return ABX_OK;
    }
    int64_t off = json_integer_value(json_object_get(args, "offset"));
    const json_t *lj = json_object_get(args, "length");
    int64_t want = lj ? json_integer_value(lj) : st.st_size - off;
    if (want < 0)
        want = 0;
    bool truncated = false;
    if (want > cap) {
        want = cap;
        truncated = true;
    }
    char *buf = abx_malloc((size_t)want + 1);
    if (!buf) {
        close(fd);
        json_decref(o);
        return abx_reply_error(r, ABX_E_SERVER_UNAVAILABLE, NULL, "out of memory");
    }
    size_t have = 0;
    while ((int64_t)have < want) {
        ssize_t g = pread(fd, buf + have, (size_t)want - have, (off_t)(off + (int64_t)have));
        if (g < 0 && errno == EINTR)
            continue;
        if (g < 0) {
            int err = errno;
            abx_free(buf);
            close(fd);
            json_decref(o);
            return errno_reply(r, err, "path");
        }
        if (g == 0)
            break;
        have += (size_t)g;
    }
    close(fd);
    if (off + (int64_t)have < st.st_size)
        truncated = truncated || !lj || (int64_t)have < json_integer_value(lj);
    size_t n = have;
    if (!b64 && (truncated || lj))
        n = abx_utf8_complete_prefix(buf, have);
    e = encode_content(r, o, buf, n, b64);
    abx_free(buf);
    if (e) {
        json_decref(o);
        return e;
    }
    json_object_set_new(o, "offset", json_integer(off));
    json_object_set_new(o, "length", json_integer((json_int_t)n));
    json_object_set_new(o, "truncated", json_boolean(truncated || n < have));
    json_object_set_new(o, "eof", json_boolean(off + (int64_t)n >= st.st_size));
    abx_reply_json(r, o);
    return ABX_OK;
}

/* ==== shared by the ops that create, replace, rename and remove ====
 *
 * Everything below works on directory fds that came out of the jail: abx_ctx_open for
 * the admitted path itself, abx_jail_open_parent for the directory that holds it. A name
 * handed to an *at() call is always one component (never "." or ".."), and no call in
 * a walk follows a symlink: O_NOFOLLOW on every open, AT_SYMLINK_NOFOLLOW on every
 * stat, and unlinkat/renameat/mkdirat/symlinkat never follow the last component. */

#define EDIT_DEFAULT_CAP (64LL * 1024 * 1024) /* files.edit reads the whole file */
#define WALK_MAX_DEPTH 128
#define SEARCH_LINE_MAX 2000                   /* bytes of one line's text in a result */
#define SEARCH_OUTPUT_MAX (16LL * 1024 * 1024) /* text in one search answer */
#define BINARY_PROBE 8192                      /* a NUL in the first 8 KiB = binary */
#define COPY_CHUNK (256 * 1024)

/* The admitted value of a path parameter (index: the element of a list parameter). */
static const abx_path_value *path_value(abx_ctx *ctx, const char *param, size_t index)
{
    const abx_decision *d = &builtin_req(ctx)->decision;
    for (size_t i = 0; i < d->n_paths; i++)
        if (d->paths[i].index == index && strcmp(d->paths[i].param, param) == 0)
            return &d->paths[i];
    return NULL;
}

static abx_err no_value(abx_reply *r, const char *param)
{
    return abx_reply_error(r, ABX_E_SERVER_INTERNAL, NULL, "no admitted value for '%s'", param);
}

/* The jail root of an admitted value as text: its canonical path without "/rel". */
static char *pv_root(const abx_path_value *pv)
{
    if (strcmp(pv->rel, ".") == 0)
        return abx_strdup(pv->canonical);
    size_t n = strlen(pv->canonical) - strlen(pv->rel) - 1;
    return n == 0 ? abx_strdup("/") : abx_strndup(pv->canonical, n);
}

static char *join_path(const char *dir, const char *name)
{
    return strcmp(dir, "/") == 0 ? abx_asprintf("/%s", name) : abx_asprintf("%s/%s", dir, name);
}

static abx_err oom(abx_reply *r) { return abx_reply_error(r, ABX_E_SERVER_UNAVAILABLE, NULL, "out of memory"); }

/* Step 7 again for a path the call reaches below (or beside) an admitted one: the
 * entries of a recursive copy, move, delete or search, and the directory of a symlink
 * that delete/move act on. Deny statements, protected areas and scopes then hold for
 * every entry, not only for the top. The values are absolute; pb may be NULL. With r
 * NULL the refusal is silent (walks that skip what they may not see). */
static abx_err admit_paths(abx_ctx *ctx, abx_reply *r, const json_t *args, const char *pa, const char *va,
                           const char *pb, const char *vb)
{
    abx_request *rq = builtin_req(ctx);
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
        return r ? oom(r) : ABX_E_SERVER_UNAVAILABLE;
    }
    abx_decision d;
    abx_decide(rq->policy, rq->slot, rq->op, rq->op_index, a, &d, NULL);
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

/* Names in a directory (without "." and ".."), sorted. 0 or -errno; free with free_names. */
static int dir_names(int dirfd, char ***out, size_t *count)
{
    *out = NULL;
    *count = 0;
    /* a new open file description: a dup would share (and exhaust) the offset */
    int fd = openat(dirfd, ".", O_RDONLY | O_DIRECTORY | O_CLOEXEC);
    if (fd < 0)
        return -errno;
    DIR *d = fdopendir(fd);
    if (!d) {
        int e = errno;
        close(fd);
        return -e;
    }
    char **names = NULL;
    size_t n = 0, cap = 0;
    int rc = 0;
    struct dirent *de;
    while ((de = readdir(d)) != NULL) {
        if (strcmp(de->d_name, ".") == 0 || strcmp(de->d_name, "..") == 0)
            continue;
        if (n == cap) {
            cap = cap ? cap * 2 : 64;
            char **g = abx_realloc(names, cap * sizeof *g);
            if (!g) {
                rc = -ENOMEM;
                break;
            }
            names = g;
        }
        if (!(names[n] = abx_strdup(de->d_name))) {
            rc = -ENOMEM;
            break;
        }
        n++;
    }
    closedir(d);
    if (rc < 0) { /* callers only free what they got on success */
        free_names(names, n);
        names = NULL;
        n = 0;
    } else if (names) {
        qsort(names, n, sizeof *names, cmp_names);
    }
    *out = names;
    *count = n;
    return rc;
}

static void free_names(char **names, size_t n)
{
    for (size_t i = 0; i < n; i++)
        abx_free(names[i]);
    abx_free(names);
}

static void fsync_dir(int dirfd)
{
    int fd = openat(dirfd, ".", O_RDONLY | O_DIRECTORY | O_CLOEXEC);
    if (fd >= 0) {
        fsync(fd);
        close(fd);
    }
}

static void clear_nonblock(int fd)
{
    int fl = fcntl(fd, F_GETFL);
    if (fl >= 0)
        fcntl(fd, F_SETFL, fl & ~O_NONBLOCK);
}

/* Create every directory of rel beneath rootfd (the last component too when
 * include_last), each through the jail. 0 or -errno; *created_last when it made the last. */
static int make_dirs(int rootfd, const char *rel, bool include_last, bool *created_last)
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
            fsync_dir(pfd);
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
    if (!builtin_req(ctx)->policy->n_idents)
        return 0;
    if (fstatat(pfd, name, &st, AT_SYMLINK_NOFOLLOW) == 0 && builtin_ident_denied(ctx, &st))
        return -ABX_EIDENT;
    return builtin_fd_check(ctx, -1, pfd);
}

/* Open the directory that holds pv's last component (O_PATH). make_parents: create the
 * missing directories first; hint names the flag that does so in messages. */
static abx_err open_parent_of(abx_ctx *ctx, abx_reply *r, const abx_path_value *pv, bool make_parents, const char *hint, int *pfd,
                              const char **name)
{
    *pfd = -1;
    if (strcmp(pv->rel, ".") == 0)
        return abx_reply_error(r, ABX_E_ARGS_INVALID, NULL,
                               "'%s' is the root of its allowed scope (%s); it cannot be created, replaced, moved or "
                               "removed",
                               pv->param, pv->canonical);
    if (make_parents) {
        int rc = make_dirs(pv->rootfd, pv->rel, false, NULL);
        if (rc == -ENOTDIR || rc == -EEXIST)
            return abx_reply_error(r, ABX_E_FILES_NOT_A_DIRECTORY, NULL, "a parent of '%s' is not a directory",
                                   pv->param);
        if (rc < 0)
            return errno_reply(r, -rc, pv->param);
    }
    int fd = abx_jail_open_parent(pv->rootfd, pv->rel, name);
    if (fd == -ENOENT)
        return abx_reply_error(r, ABX_E_FILES_NOT_FOUND, NULL,
                               "the parent directory of '%s' does not exist%s%s%s", pv->param,
                               hint ? " (" : "", hint ? hint : "", hint ? "=true creates it)" : "");
    if (fd == -ENOTDIR)
        return abx_reply_error(r, ABX_E_FILES_NOT_A_DIRECTORY, NULL, "a parent of '%s' is not a directory",
                               pv->param);
    if (fd < 0)
        return errno_reply(r, -fd, pv->param);
    int rc = parent_ident_check(ctx, fd, *name);
    if (rc < 0) {
        close(fd);
        return errno_reply(r, -rc, pv->param);
    }
    *pfd = fd;
    return ABX_OK;
}

/* rename without replacing: renameat2(RENAME_NOREPLACE); where the filesystem lacks
 * it, link() (which fails atomically on an existing name) for files, and a check
 * before rename for directories. 0 or -1 with errno. */
static int rename_noreplace(int odir, const char *oname, int ndir, const char *nname, bool is_dir)
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

/* ---- staged files: temp file beside the target, fsync, rename into place ---- */

typedef struct staged {
    int dirfd;              /* borrowed: the directory of the target */
    const char *name;       /* borrowed: the target's name in dirfd */
    char tmp[NAME_MAX + 1]; /* temp name, "" once renamed or removed */
    int fd;                 /* the temp file, -1 once closed */
    bool existed;           /* the target existed (a regular file): its mode and owner are kept */
    struct stat old;
} staged;

static void stage_abort(staged *s)
{
    if (s->fd >= 0)
        close(s->fd);
    s->fd = -1;
    if (s->tmp[0])
        unlinkat(s->dirfd, s->tmp, 0);
    s->tmp[0] = '\0';
}

static abx_err stage_errno(abx_reply *r, int err, const char *label)
{
    if (err == ENOSPC || err == EDQUOT || err == EFBIG)
        return abx_reply_error(r, ABX_E_FILES_IO, NULL, "'%s': %s; the file was left unchanged", label,
                               strerror(err));
    return errno_reply(r, err, label);
}

/* Look at the target (a directory or a non-regular file is refused) and create the
 * temp file next to it. mode >= 0: the new file's mode; else the old file's mode, or
 * 0666 less the umask for a new file. */
static abx_err stage_open(staged *s, abx_reply *r, int dirfd, const char *name, const char *label, int mode)
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
                                   type_name(s->old.st_mode));
        s->existed = true;
    } else if (errno != ENOENT) {
        return errno_reply(r, errno, label);
    }
    for (int attempt = 0; attempt < 16 && s->fd < 0; attempt++) {
        unsigned char rnd[8];
        char hex[17];
        if (abx_random(rnd, sizeof rnd) != 0)
            return abx_reply_error(r, ABX_E_SERVER_UNAVAILABLE, NULL, "no randomness for a temporary name");
        abx_hex(rnd, sizeof rnd, hex);
        snprintf(s->tmp, sizeof s->tmp, ".%.200s.%s.abx-tmp", name, hex);
        s->fd = openat(dirfd, s->tmp, O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, 0666);
        if (s->fd < 0 && errno != EEXIST) {
            int e = errno;
            s->tmp[0] = '\0';
            return errno_reply(r, e, label);
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
            stage_abort(s);
            return errno_reply(r, e, label);
        }
    }
    return ABX_OK;
}

static abx_err stage_write(staged *s, abx_reply *r, const char *label, const void *data, size_t len)
{
    const char *p = data;
    while (len > 0) {
        ssize_t w = write(s->fd, p, len);
        if (w < 0 && errno == EINTR)
            continue;
        if (w <= 0) {
            int e = w < 0 ? errno : EIO;
            stage_abort(s);
            return stage_errno(r, e, label);
        }
        p += w;
        len -= (size_t)w;
    }
    return ABX_OK;
}

/* fsync, close and rename into place (noreplace: fail when the target exists), then
 * fsync the directory. On failure the temp file is gone and the target unchanged.
 * Without durable (the files of a tree copy) there is no fsync: each file still
 * appears whole or not at all, and the copy does not stall on one flush per file. */
static abx_err stage_commit_ex(staged *s, abx_reply *r, const char *label, bool noreplace, bool durable)
{
    int e = 0;
    if (durable && fsync(s->fd) != 0)
        e = errno;
    if (close(s->fd) != 0 && !e)
        e = errno;
    s->fd = -1;
    if (e) {
        stage_abort(s);
        return stage_errno(r, e, label);
    }
    int rc = noreplace ? rename_noreplace(s->dirfd, s->tmp, s->dirfd, s->name, false)
                       : renameat(s->dirfd, s->tmp, s->dirfd, s->name);
    if (rc != 0) {
        e = errno;
        stage_abort(s);
        if (e == EEXIST)
            return abx_reply_error(r, ABX_E_ARGS_INVALID, NULL, "'%s' already exists", label);
        if (e == EISDIR)
            return abx_reply_error(r, ABX_E_FILES_IS_A_DIRECTORY, NULL, "'%s' is a directory", label);
        return stage_errno(r, e, label);
    }
    s->tmp[0] = '\0';
    if (durable)
        fsync_dir(s->dirfd);
    return ABX_OK;
}

static abx_err stage_commit(staged *s, abx_reply *r, const char *label, bool noreplace)
{
    return stage_commit_ex(s, r, label, noreplace, true);
}

/* ---- files.write ---- */

static abx_err append_file(abx_reply *r, int pfd, const char *name, const char *data, size_t len, bool *created)
{
    *created = false;
    int fd = openat(pfd, name, O_WRONLY | O_APPEND | O_NOFOLLOW | O_NONBLOCK | O_NOCTTY | O_CLOEXEC);
    if (fd < 0 && errno == ENOENT) {
        fd = openat(pfd, name, O_WRONLY | O_APPEND | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, 0666);
        *created = fd >= 0;
    }
    if (fd < 0) {
        int e = errno;
        if (e == EISDIR)
            return abx_reply_error(r, ABX_E_FILES_IS_A_DIRECTORY, NULL, "'path' is a directory");
        if (e == ELOOP || e == ENXIO || e == ENODEV)
            return abx_reply_error(r, ABX_E_FILES_NOT_REGULAR, NULL, "'path' is not a regular file");
        return errno_reply(r, e, "path");
    }
    struct stat st;
    if (fstat(fd, &st) != 0 || !S_ISREG(st.st_mode)) {
        close(fd);
        return abx_reply_error(r, ABX_E_FILES_NOT_REGULAR, NULL, "'path' is not a regular file");
    }
    clear_nonblock(fd);
    const char *p = data;
    size_t left = len;
    int e = 0;
    while (left > 0) {
        ssize_t w = write(fd, p, left);
        if (w < 0 && errno == EINTR)
            continue;
        if (w <= 0) {
            e = w < 0 ? errno : EIO;
            break;
        }
        p += w;
        left -= (size_t)w;
    }
    if (!e && fsync(fd) != 0)
        e = errno;
    if (e) { /* all or nothing: cut the partial append off again */
        if (*created)
            unlinkat(pfd, name, 0);
        else if (ftruncate(fd, st.st_size) != 0)
            abx_log("warn", NULL, "files.write: could not undo a partial append: %s", strerror(errno));
    }
    close(fd);
    return e ? stage_errno(r, e, "path") : ABX_OK;
}

static abx_err files_write(abx_ctx *ctx, const json_t *args, abx_reply *r)
{
    const abx_path_value *pv = path_value(ctx, "path", 0);
    if (!pv)
        return no_value(r, "path");
    const json_t *cj = json_object_get(args, "content");
    const char *data = json_string_value(cj);
    size_t len = json_string_length(cj);
    bool b64 = strcmp(json_string_value(json_object_get(args, "encoding")), "base64") == 0;
    const char *mode = json_string_value(json_object_get(args, "mode"));
    bool make_parents = json_is_true(json_object_get(args, "make_parents"));
    unsigned char *decoded = NULL;
    if (b64 && len > 0) {
        decoded = abx_base64_decode(data, len, &len);
        if (!decoded)
            return abx_reply_error(r, ABX_E_ARGS_INVALID, NULL,
                                   "'content' is not valid base64 (standard alphabet, padded, no whitespace)");
        data = (const char *)decoded;
    }
    int64_t cap = abx_ctx_limit(ctx, ABX_LIM_MAX_BYTES);
    if (cap >= 0 && (int64_t)len > cap) {
        abx_free(decoded);
        return abx_reply_error(r, ABX_E_LIMIT_MAX_BYTES, NULL, "the content (%zu bytes) is larger than max_bytes (%lld)",
                               len, (long long)cap);
    }
    int pfd;
    const char *name;
    abx_err e = open_parent_of(ctx, r, pv, make_parents, "make_parents", &pfd, &name);
    bool created = false;
    if (!e && strcmp(mode, "append") == 0) {
        e = append_file(r, pfd, name, data, len, &created);
    } else if (!e) {
        bool create_new = strcmp(mode, "create_new") == 0;
        staged s;
        e = stage_open(&s, r, pfd, name, "path", -1);
        if (!e && create_new && s.existed) {
            stage_abort(&s);
            e = abx_reply_error(r, ABX_E_ARGS_INVALID, NULL, "'path' already exists (%s) and mode is create_new",
                                pv->canonical);
        }
        if (!e)
            e = stage_write(&s, r, "path", data, len);
        if (!e)
            e = stage_commit(&s, r, "path", create_new);
        created = !s.existed;
    }
    if (pfd >= 0)
        close(pfd);
    abx_free(decoded);
    if (e)
        return e;
    abx_reply_json(r, json_pack("{s:s, s:I, s:b, s:s}", "path", pv->canonical, "bytes_written", (json_int_t)len,
                                "created", created, "mode", mode));
    return ABX_OK;
}

/* ---- files.edit ---- */

static abx_err files_edit(abx_ctx *ctx, const json_t *args, abx_reply *r)
{
    const abx_path_value *pv = path_value(ctx, "path", 0);
    if (!pv)
        return no_value(r, "path");
    const json_t *oj = json_object_get(args, "old"), *nj = json_object_get(args, "new");
    const char *old = json_string_value(oj), *nw = json_string_value(nj);
    size_t olen = json_string_length(oj), nlen = json_string_length(nj);
    int64_t expected = json_integer_value(json_object_get(args, "count"));
    if (olen == 0)
        return abx_reply_error(r, ABX_E_ARGS_INVALID, NULL, "'old' must not be empty");
    int64_t cap = abx_ctx_limit(ctx, ABX_LIM_MAX_BYTES);
    if (cap < 0 || cap > EDIT_DEFAULT_CAP)
        cap = EDIT_DEFAULT_CAP;
    int fd = -1;
    struct stat st;
    abx_err e = open_regular(ctx, r, &fd, &st);
    if (e)
        return e;
    if (st.st_size > cap) {
        close(fd);
        return abx_reply_error(r, ABX_E_LIMIT_MAX_BYTES, NULL, "the file (%lld bytes) is larger than max_bytes (%lld)",
                               (long long)st.st_size, (long long)cap);
    }
    size_t size = (size_t)st.st_size, have = 0;
    char *buf = abx_malloc(size + 1);
    if (!buf) {
        close(fd);
        return oom(r);
    }
    while (have < size) {
        ssize_t g = read(fd, buf + have, size - have);
        if (g < 0 && errno == EINTR)
            continue;
        if (g < 0) {
            int err = errno;
            close(fd);
            abx_free(buf);
            return errno_reply(r, err, "path");
        }
        if (g == 0)
            break;
        have += (size_t)g;
    }
    close(fd);
    int64_t found = 0;
    for (const char *p = buf; (size_t)(p - buf) + olen <= have;) {
        const char *q = memmem(p, have - (size_t)(p - buf), old, olen);
        if (!q)
            break;
        found++;
        p = q + olen;
    }
    if (found == 0 || (expected != 0 && found != expected)) {
        abx_free(buf);
        json_t *det = json_pack("{s:I, s:I}", "found", (json_int_t)found, "expected", (json_int_t)expected);
        if (found == 0)
            return abx_reply_error(r, ABX_E_ARGS_INVALID, det, "'old' was not found in %s (0 occurrences)",
                                   pv->canonical);
        return abx_reply_error(r, ABX_E_ARGS_INVALID, det,
                               "'old' occurs %lld times in %s, expected %lld; nothing was changed (add context to "
                               "'old' to make it unique, or set count to %lld, or 0 for all)",
                               (long long)found, pv->canonical, (long long)expected, (long long)found);
    }
    int64_t out_len = (int64_t)have + found * ((int64_t)nlen - (int64_t)olen);
    if (out_len > cap) {
        abx_free(buf);
        return abx_reply_error(r, ABX_E_LIMIT_MAX_BYTES, NULL, "the result (%lld bytes) is larger than max_bytes (%lld)",
                               (long long)out_len, (long long)cap);
    }
    char *out = abx_malloc((size_t)out_len + 1);
    if (!out) {
        abx_free(buf);
        return oom(r);
    }
    size_t o = 0;
    const char *p = buf;
    for (int64_t i = 0; i < found; i++) {
        const char *q = memmem(p, have - (size_t)(p - buf), old, olen);
        memcpy(out + o, p, (size_t)(q - p));
        o += (size_t)(q - p);
        memcpy(out + o, nw, nlen);
        o += nlen;
        p = q + olen;
    }
    memcpy(out + o, p, have - (size_t)(p - buf));
    o += have - (size_t)(p - buf);
    abx_free(buf);
    int pfd;
    const char *name;
    e = open_parent_of(ctx, r, pv, false, NULL, &pfd, &name);
    staged s;
    if (!e)
        e = stage_open(&s, r, pfd, name, "path", -1);
    /* the file read must still be the file in place: an edit never clobbers a change
     * made meanwhile (or a file swapped in) */
    if (!e && (!s.existed || s.old.st_ino != st.st_ino || s.old.st_dev != st.st_dev || s.old.st_size != st.st_size ||
               s.old.st_mtim.tv_sec != st.st_mtim.tv_sec || s.old.st_mtim.tv_nsec != st.st_mtim.tv_nsec)) {
        stage_abort(&s);
        e = abx_reply_error(r, ABX_E_FILES_IO, NULL, "%s changed while it was being edited; nothing was written",
                            pv->canonical);
    }
    if (!e)
        e = stage_write(&s, r, "path", out, o);
    if (!e)
        e = stage_commit(&s, r, "path", false);
    abx_free(out);
    if (pfd >= 0)
        close(pfd);
    if (e)
        return e;
    abx_reply_json(r, json_pack("{s:s, s:I, s:I}", "path", pv->canonical, "replacements", (json_int_t)found, "size",
                                (json_int_t)o));
    return ABX_OK;
}

/* ---- files.mkdir ---- */

static abx_err files_mkdir(abx_ctx *ctx, const json_t *args, abx_reply *r)
{
    const abx_path_value *pv = path_value(ctx, "path", 0);
    if (!pv)
        return no_value(r, "path");
    bool parents = json_is_true(json_object_get(args, "parents"));
    if (strcmp(pv->rel, ".") == 0) { /* the root of the scope: it exists */
        abx_reply_json(r, json_pack("{s:s, s:b}", "path", pv->canonical, "created", 0));
        return ABX_OK;
    }
    int pfd;
    const char *name;
    abx_err e = open_parent_of(ctx, r, pv, parents, "parents", &pfd, &name);
    if (e)
        return e;
    bool created = false;
    if (mkdirat(pfd, name, 0777) == 0) {
        created = true;
        fsync_dir(pfd);
    } else {
        int err = errno;
        struct stat st;
        if (err == EEXIST && fstatat(pfd, name, &st, AT_SYMLINK_NOFOLLOW) == 0 && S_ISDIR(st.st_mode)) {
            created = false;
        } else if (err == EEXIST) {
            e = abx_reply_error(r, ABX_E_FILES_NOT_A_DIRECTORY, NULL, "'path' exists and is not a directory");
        } else {
            e = errno_reply(r, err, "path");
        }
    }
    close(pfd);
    if (e)
        return e;
    abx_reply_json(r, json_pack("{s:s, s:b}", "path", pv->canonical, "created", created));
    return ABX_OK;
}

/* ---- delete/move act on the entry itself ---- */

/* The admitted canonical value names the target of a symlink. delete and move act on
 * the entry the caller named instead: when the last component of the argument is a
 * symlink, the link itself. Then *dirfd and *name name the link (in the directory the
 * argument's parent resolves to) and *abs (owned) is its path; otherwise *dirfd = -1.
 * The link must lie beneath the same jail root, and its directory must be admitted
 * for the same access (deny statements, protected areas, scopes). */
static abx_err symlink_entry(abx_ctx *ctx, abx_reply *r, const json_t *args, const abx_path_value *pv, int *dirfd,
                             const char **name, char **abs)
{
    *dirfd = -1;
    *abs = NULL;
    const char *raw = json_string_value(json_object_get(args, pv->param));
    size_t n = raw ? strlen(raw) : 0;
    if (n == 0 || raw[n - 1] == '/') /* "link/" names what the link points at */
        return ABX_OK;
    const char *slash = strrchr(raw, '/');
    const char *last = slash ? slash + 1 : raw;
    if (strcmp(last, ".") == 0 || strcmp(last, "..") == 0)
        return ABX_OK;
    char *dir = slash ? (slash == raw ? abx_strdup("/") : abx_strndup(raw, (size_t)(slash - raw))) : abx_strdup(".");
    char *cdir = NULL, *link = NULL, *root = NULL;
    const char *lrel = NULL, *nm = NULL;
    abx_err e = ABX_OK;
    int fd = -1;
    struct stat st;
    /* the argument's directory, canonical, plus its last component as given; when that
     * differs from the admitted value, the last component was a symlink */
    bool candidate = dir && abx_path_canon(builtin_req(ctx)->policy->workspace, dir, &cdir) == 0 &&
                     (link = join_path(cdir, last)) != NULL && strcmp(link, pv->canonical) != 0;
    if (candidate && !(root = pv_root(pv)))
        e = oom(r);
    else if (candidate && (!abx_path_under(root, link, &lrel) || strcmp(lrel, ".") == 0))
        e = abx_reply_error(r, ABX_E_POLICY_PATH_NOT_ALLOWED, NULL,
                            "'%s' is a symlink outside the allowed paths of its target", pv->param);
    else if (candidate && (fd = abx_jail_open_parent(pv->rootfd, lrel, &nm)) >= 0 &&
             fstatat(fd, nm, &st, AT_SYMLINK_NOFOLLOW) == 0 && S_ISLNK(st.st_mode))
        e = admit_paths(ctx, r, args, pv->param, cdir, NULL, NULL);
    else if (fd >= 0) { /* not a symlink after all: the admitted value stands */
        close(fd);
        fd = -1;
    }
    if (!e && fd >= 0) {
        *dirfd = fd;
        *name = nm;
        *abs = link;
        link = NULL;
    } else if (fd >= 0) {
        close(fd);
    }
    abx_free(dir);
    abx_free(cdir);
    abx_free(link);
    abx_free(root);
    return e;
}

/* Check every entry below a directory (symlinks are never followed, so they need no
 * check of their own) before a recursive delete, copy or move touches any of them:
 * abs_a/abs_b are the entry's paths for parameters pa/pb (pb NULL for delete). */
typedef struct precheck {
    abx_ctx *ctx;
    abx_reply *r;
    const json_t *args;
    const char *pa, *pb;
    int64_t entries;
} precheck;

static abx_err precheck_tree(precheck *pc, int dirfd, const char *abs_a, const char *abs_b, int depth)
{
    if (depth >= WALK_MAX_DEPTH)
        return abx_reply_error(pc->r, ABX_E_FILES_IO, NULL, "the tree is deeper than %d levels", WALK_MAX_DEPTH);
    char **names;
    size_t n;
    int rc = dir_names(dirfd, &names, &n);
    if (rc < 0) {
        free_names(names, n);
        return errno_reply(pc->r, -rc, abs_a);
    }
    abx_err e = ABX_OK;
    for (size_t i = 0; i < n && !e; i++) {
        struct stat st;
        if (fstatat(dirfd, names[i], &st, AT_SYMLINK_NOFOLLOW) != 0 || S_ISLNK(st.st_mode))
            continue;
        pc->entries++;
        char *ca = join_path(abs_a, names[i]);
        char *cb = abs_b ? join_path(abs_b, names[i]) : NULL;
        if (!ca || (abs_b && !cb))
            e = oom(pc->r);
        if (!e)
            e = admit_paths(pc->ctx, pc->r, pc->args, pc->pa, ca, pc->pb, cb);
        if (!e && builtin_ident_denied(pc->ctx, &st)) /* a denied file under another name */
            e = errno_reply(pc->r, ABX_EIDENT, ca);
        if (!e && S_ISDIR(st.st_mode)) {
            int sub = openat(dirfd, names[i], O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
            if (sub >= 0) {
                e = precheck_tree(pc, sub, ca, cb, depth + 1);
                close(sub);
            }
        }
        abx_free(ca);
        abx_free(cb);
    }
    free_names(names, n);
    return e;
}

/* ---- files.delete ---- */

typedef struct rm_walk {
    abx_reply *r;
    int64_t removed;
} rm_walk;

static abx_err rm_tree(rm_walk *w, int parentfd, const char *name, const char *label, int depth)
{
    struct stat st;
    if (fstatat(parentfd, name, &st, AT_SYMLINK_NOFOLLOW) != 0)
        return errno == ENOENT ? ABX_OK : errno_reply(w->r, errno, label); /* gone meanwhile: fine */
    if (S_ISDIR(st.st_mode)) {
        if (depth >= WALK_MAX_DEPTH)
            return abx_reply_error(w->r, ABX_E_FILES_IO, NULL, "the tree is deeper than %d levels", WALK_MAX_DEPTH);
        int dfd = openat(parentfd, name, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
        if (dfd < 0)
            return errno_reply(w->r, errno, label);
        char **names;
        size_t n;
        int rc = dir_names(dfd, &names, &n);
        abx_err e = rc < 0 ? errno_reply(w->r, -rc, label) : ABX_OK;
        for (size_t i = 0; i < n && !e; i++) {
            char *sub = join_path(label, names[i]);
            e = sub ? rm_tree(w, dfd, names[i], sub, depth + 1) : oom(w->r);
            abx_free(sub);
        }
        free_names(names, n);
        close(dfd);
        if (e)
            return e;
        if (unlinkat(parentfd, name, AT_REMOVEDIR) != 0)
            return errno_reply(w->r, errno, label);
    } else if (unlinkat(parentfd, name, 0) != 0) {
        return errno == ENOENT ? ABX_OK : errno_reply(w->r, errno, label);
    }
    w->removed++;
    return ABX_OK;
}

static abx_err files_delete(abx_ctx *ctx, const json_t *args, abx_reply *r)
{
    const abx_path_value *pv = path_value(ctx, "path", 0);
    if (!pv)
        return no_value(r, "path");
    bool recursive = json_is_true(json_object_get(args, "recursive"));
    int pfd;
    const char *name;
    char *abs;
    abx_err e = symlink_entry(ctx, r, args, pv, &pfd, &name, &abs);
    if (e)
        return e;
    if (pfd >= 0) { /* a symlink: remove the link, never its target */
        int rc = unlinkat(pfd, name, 0);
        int err = errno;
        if (rc == 0)
            fsync_dir(pfd);
        close(pfd);
        if (rc != 0) {
            abx_free(abs);
            return errno_reply(r, err, "path");
        }
        abx_reply_json(r, json_pack("{s:s, s:s, s:I}", "path", abs, "type", "symlink", "deleted", (json_int_t)1));
        abx_free(abs);
        return ABX_OK;
    }
    e = open_parent_of(ctx, r, pv, false, NULL, &pfd, &name);
    if (e)
        return e;
    struct stat st;
    if (fstatat(pfd, name, &st, AT_SYMLINK_NOFOLLOW) != 0) {
        int err = errno;
        close(pfd);
        return errno_reply(r, err, "path");
    }
    rm_walk w = {.r = r};
    if (S_ISDIR(st.st_mode) && !recursive) {
        if (unlinkat(pfd, name, AT_REMOVEDIR) == 0) {
            w.removed = 1;
        } else if (errno == ENOTEMPTY || errno == EEXIST) {
            e = abx_reply_error(r, ABX_E_ARGS_INVALID, NULL,
                                "%s is a directory that is not empty; pass recursive=true to delete it with its contents",
                                pv->canonical);
        } else {
            e = errno_reply(r, errno, "path");
        }
    } else if (S_ISDIR(st.st_mode)) {
        /* every entry must be deletable under the policy before the first one goes */
        int dfd = openat(pfd, name, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
        if (dfd < 0) {
            e = errno_reply(r, errno, "path");
        } else {
            precheck pc = {.ctx = ctx, .r = r, .args = args, .pa = "path"};
            e = precheck_tree(&pc, dfd, pv->canonical, NULL, 0);
            close(dfd);
        }
        if (!e)
            e = rm_tree(&w, pfd, name, pv->canonical, 0);
    } else if (unlinkat(pfd, name, 0) == 0) {
        w.removed = 1;
    } else {
        e = errno_reply(r, errno, "path");
    }
    if (w.removed)
        fsync_dir(pfd);
    close(pfd);
    if (e)
        return e;
    abx_reply_json(r, json_pack("{s:s, s:s, s:I}", "path", pv->canonical, "type", type_name(st.st_mode), "deleted",
                                (json_int_t)w.removed));
    return ABX_OK;
}

/* ---- files.move ---- */

/* Processes cannot rename a deny target, a folder above one, abx's own files or the .git
 * at the top of a root (their mount namespaces pin them); neither does files.move, for
 * any principal: the file would leave the name a later process's mask is put on. */
static abx_err move_pinned(abx_ctx *ctx, abx_reply *r, const char *src, const char *dst)
{
    const abx_policy *p = builtin_req(ctx)->policy;
    const char *hit = abx_policy_move_pinned(p, src) ? src : abx_policy_move_pinned(p, dst) ? dst : NULL;
    if (!hit)
        return ABX_OK;
    return abx_reply_error(r, ABX_E_POLICY_PATH_DENIED, NULL,
                           "%s is a denied or protected path, a folder above one, or a root's .git; it cannot be "
                           "moved or replaced",
                           hit);
}

static abx_err files_move(abx_ctx *ctx, const json_t *args, abx_reply *r)
{
    const abx_path_value *sv = path_value(ctx, "src", 0), *dv = path_value(ctx, "dst", 0);
    if (!sv || !dv)
        return no_value(r, sv ? "dst" : "src");
    bool overwrite = json_is_true(json_object_get(args, "overwrite"));
    int sfd = -1, dfd = -1;
    const char *sname, *dname;
    char *sabs = NULL;
    abx_err e = symlink_entry(ctx, r, args, sv, &sfd, &sname, &sabs);
    if (!e && sfd < 0) {
        e = open_parent_of(ctx, r, sv, false, NULL, &sfd, &sname);
        if (!e && !(sabs = abx_strdup(sv->canonical)))
            e = oom(r);
    }
    struct stat st, dst_st;
    if (!e && fstatat(sfd, sname, &st, AT_SYMLINK_NOFOLLOW) != 0)
        e = errno_reply(r, errno, "src");
    if (!e && strcmp(sabs, dv->canonical) == 0)
        e = abx_reply_error(r, ABX_E_ARGS_INVALID, NULL, "src and dst are the same path (%s)", sabs);
    if (!e)
        e = move_pinned(ctx, r, sabs, dv->canonical);
    const char *below;
    if (!e && S_ISDIR(st.st_mode) && abx_path_under(sabs, dv->canonical, &below))
        e = abx_reply_error(r, ABX_E_ARGS_INVALID, NULL, "cannot move the directory %s into itself", sabs);
    if (!e)
        e = open_parent_of(ctx, r, dv, false, NULL, &dfd, &dname);
    bool replaced = !e && fstatat(dfd, dname, &dst_st, AT_SYMLINK_NOFOLLOW) == 0;
    if (!e && replaced && !overwrite)
        e = abx_reply_error(r, ABX_E_ARGS_INVALID, NULL, "dst %s already exists; pass overwrite=true to replace it",
                            dv->canonical);
    if (!e && S_ISDIR(st.st_mode)) { /* everything that moves leaves src and lands in dst */
        int tfd = openat(sfd, sname, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
        if (tfd < 0) {
            e = errno_reply(r, errno, "src");
        } else {
            precheck pc = {.ctx = ctx, .r = r, .args = args, .pa = "src", .pb = "dst"};
            e = precheck_tree(&pc, tfd, sabs, dv->canonical, 0);
            close(tfd);
        }
    }
    if (!e) {
        int rc = overwrite ? renameat(sfd, sname, dfd, dname)
                           : rename_noreplace(sfd, sname, dfd, dname, S_ISDIR(st.st_mode));
        int err = errno;
        if (rc == 0) {
            fsync_dir(dfd);
            fsync_dir(sfd);
        } else if (err == EXDEV) {
            e = abx_reply_error(r, ABX_E_FILES_IO, NULL,
                                "src and dst are on different filesystems; files.move only renames (use files.copy, "
                                "then files.delete)");
        } else if (err == EEXIST && !overwrite) {
            e = abx_reply_error(r, ABX_E_ARGS_INVALID, NULL, "dst %s already exists; pass overwrite=true to replace it",
                                dv->canonical);
        } else if (err == ENOTEMPTY || err == EEXIST) {
            e = abx_reply_error(r, ABX_E_ARGS_INVALID, NULL, "dst %s is a directory that is not empty", dv->canonical);
        } else if (err == EISDIR) {
            e = abx_reply_error(r, ABX_E_FILES_IS_A_DIRECTORY, NULL, "dst %s is a directory and src is not",
                                dv->canonical);
        } else if (err == ENOTDIR) {
            e = abx_reply_error(r, ABX_E_FILES_NOT_A_DIRECTORY, NULL, "src is a directory and dst %s is not",
                                dv->canonical);
        } else if (err == EINVAL) {
            e = abx_reply_error(r, ABX_E_ARGS_INVALID, NULL, "cannot move %s into itself", sabs);
        } else {
            e = errno_reply(r, err, "src");
        }
    }
    if (sfd >= 0)
        close(sfd);
    if (dfd >= 0)
        close(dfd);
    if (!e)
        abx_reply_json(r, json_pack("{s:s, s:s, s:s, s:b}", "src", sabs, "dst", dv->canonical, "type",
                                    type_name(st.st_mode), "replaced", replaced));
    abx_free(sabs);
    return e;
}

/* ---- files.copy ---- */

typedef struct cp_walk {
    abx_reply *r;
    bool overwrite;
    bool durable; /* fsync each file: for a single file, not for the files of a tree */
    char *buf; /* COPY_CHUNK bytes */
    int64_t files, dirs, links, skipped, bytes;
} cp_walk;

static abx_err cp_node(cp_walk *w, int sfd, const struct stat *sst, int ddir, const char *dname, const char *label,
                       int depth);

static abx_err cp_file(cp_walk *w, int sfd, const struct stat *sst, int ddir, const char *dname, const char *label)
{
    staged s;
    abx_err e = stage_open(&s, w->r, ddir, dname, label, (int)(sst->st_mode & 07777));
    if (e)
        return e;
    if (s.existed && !w->overwrite) {
        stage_abort(&s);
        return abx_reply_error(w->r, ABX_E_ARGS_INVALID, NULL, "'%s' already exists; pass overwrite=true", label);
    }
    for (;;) {
        ssize_t g = read(sfd, w->buf, COPY_CHUNK);
        if (g < 0 && errno == EINTR)
            continue;
        if (g < 0) {
            int err = errno;
            stage_abort(&s);
            return errno_reply(w->r, err, label);
        }
        if (g == 0)
            break;
        if ((e = stage_write(&s, w->r, label, w->buf, (size_t)g)) != ABX_OK)
            return e;
        w->bytes += g;
    }
    if ((e = stage_commit_ex(&s, w->r, label, !w->overwrite, w->durable)) != ABX_OK)
        return e;
    w->files++;
    return ABX_OK;
}

static abx_err cp_link(cp_walk *w, int sdir, const char *sname, int ddir, const char *dname, const char *label)
{
    char target[PATH_MAX];
    ssize_t n = readlinkat(sdir, sname, target, sizeof target - 1);
    if (n < 0)
        return errno_reply(w->r, errno, label);
    target[n] = '\0';
    if (symlinkat(target, ddir, dname) != 0) {
        struct stat st;
        if (errno != EEXIST || !w->overwrite)
            return errno == EEXIST
                       ? abx_reply_error(w->r, ABX_E_ARGS_INVALID, NULL, "'%s' already exists; pass overwrite=true", label)
                       : errno_reply(w->r, errno, label);
        if (fstatat(ddir, dname, &st, AT_SYMLINK_NOFOLLOW) == 0 && S_ISDIR(st.st_mode))
            return abx_reply_error(w->r, ABX_E_FILES_IS_A_DIRECTORY, NULL, "'%s' is a directory", label);
        if (unlinkat(ddir, dname, 0) != 0 || symlinkat(target, ddir, dname) != 0)
            return errno_reply(w->r, errno, label);
    }
    w->links++;
    return ABX_OK;
}

static abx_err cp_dir(cp_walk *w, int sfd, const struct stat *sst, int ddir, const char *dname, const char *label,
                      int depth)
{
    if (depth >= WALK_MAX_DEPTH)
        return abx_reply_error(w->r, ABX_E_FILES_IO, NULL, "the tree is deeper than %d levels", WALK_MAX_DEPTH);
    /* 0700 while it fills (a read-only source directory stays writable until the end) */
    if (mkdirat(ddir, dname, 0700) != 0) {
        struct stat st;
        if (errno != EEXIST)
            return errno_reply(w->r, errno, label);
        if (!w->overwrite)
            return abx_reply_error(w->r, ABX_E_ARGS_INVALID, NULL, "'%s' already exists; pass overwrite=true", label);
        if (fstatat(ddir, dname, &st, AT_SYMLINK_NOFOLLOW) != 0 || !S_ISDIR(st.st_mode))
            return abx_reply_error(w->r, ABX_E_FILES_NOT_A_DIRECTORY, NULL, "'%s' exists and is not a directory",
                                   label);
    }
    int dfd = openat(ddir, dname, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
    if (dfd < 0)
        return errno_reply(w->r, errno, label);
    char **names;
    size_t n;
    int rc = dir_names(sfd, &names, &n);
    abx_err e = rc < 0 ? errno_reply(w->r, -rc, label) : ABX_OK;
    for (size_t i = 0; i < n && !e; i++) {
        char *sub = join_path(label, names[i]);
        if (!sub) {
            e = oom(w->r);
            break;
        }
        struct stat cst;
        if (fstatat(sfd, names[i], &cst, AT_SYMLINK_NOFOLLOW) != 0) {
            abx_free(sub);
            continue; /* vanished meanwhile */
        }
        if (S_ISLNK(cst.st_mode)) {
            e = cp_link(w, sfd, names[i], dfd, names[i], sub);
        } else if (S_ISREG(cst.st_mode) || S_ISDIR(cst.st_mode)) {
            int cfd = openat(sfd, names[i],
                             O_RDONLY | O_NOFOLLOW | O_NONBLOCK | O_NOCTTY | O_CLOEXEC |
                                 (S_ISDIR(cst.st_mode) ? O_DIRECTORY : 0));
            struct stat now;
            if (cfd < 0) {
                e = errno_reply(w->r, errno, sub);
            } else if (fstat(cfd, &now) != 0 || (now.st_mode & S_IFMT) != (cst.st_mode & S_IFMT)) {
                w->skipped++; /* swapped for something else meanwhile */
            } else {
                clear_nonblock(cfd);
                e = cp_node(w, cfd, &now, dfd, names[i], sub, depth + 1);
            }
            if (cfd >= 0)
                close(cfd);
        } else {
            w->skipped++; /* FIFOs, sockets and devices are not copied */
        }
        abx_free(sub);
    }
    free_names(names, n);
    if (!e && fchmod(dfd, sst->st_mode & 07777) != 0)
        e = errno_reply(w->r, errno, label);
    close(dfd);
    if (!e)
        w->dirs++;
    return e;
}

static abx_err cp_node(cp_walk *w, int sfd, const struct stat *sst, int ddir, const char *dname, const char *label,
                       int depth)
{
    return S_ISDIR(sst->st_mode) ? cp_dir(w, sfd, sst, ddir, dname, label, depth)
                                 : cp_file(w, sfd, sst, ddir, dname, label);
}

static abx_err files_copy(abx_ctx *ctx, const json_t *args, abx_reply *r)
{
    const abx_path_value *sv = path_value(ctx, "src", 0), *dv = path_value(ctx, "dst", 0);
    if (!sv || !dv)
        return no_value(r, sv ? "dst" : "src");
    bool recursive = json_is_true(json_object_get(args, "recursive"));
    bool overwrite = json_is_true(json_object_get(args, "overwrite"));
    int sfd = abx_ctx_open(ctx, "src", O_RDONLY | O_NONBLOCK | O_NOCTTY, 0);
    if (sfd < 0)
        return errno_reply(r, -sfd, "src");
    struct stat st;
    abx_err e = ABX_OK;
    const char *below;
    if (fstat(sfd, &st) != 0)
        e = errno_reply(r, errno, "src");
    else if (S_ISDIR(st.st_mode) && !recursive)
        e = abx_reply_error(r, ABX_E_FILES_IS_A_DIRECTORY, NULL, "src %s is a directory; pass recursive=true",
                            sv->canonical);
    else if (!S_ISDIR(st.st_mode) && !S_ISREG(st.st_mode))
        e = abx_reply_error(r, ABX_E_FILES_NOT_REGULAR, NULL, "src %s is a %s; only files and directories are copied",
                            sv->canonical, type_name(st.st_mode));
    else if (strcmp(sv->canonical, dv->canonical) == 0)
        e = abx_reply_error(r, ABX_E_ARGS_INVALID, NULL, "src and dst are the same path (%s)", sv->canonical);
    else if (S_ISDIR(st.st_mode) && abx_path_under(sv->canonical, dv->canonical, &below))
        e = abx_reply_error(r, ABX_E_ARGS_INVALID, NULL, "cannot copy the directory %s into itself", sv->canonical);
    if (e) {
        close(sfd);
        return e;
    }
    clear_nonblock(sfd);
    int dfd;
    const char *dname;
    struct stat dst_st;
    e = open_parent_of(ctx, r, dv, false, NULL, &dfd, &dname);
    if (!e && !overwrite && fstatat(dfd, dname, &dst_st, AT_SYMLINK_NOFOLLOW) == 0)
        e = abx_reply_error(r, ABX_E_ARGS_INVALID, NULL, "dst %s already exists; pass overwrite=true", dv->canonical);
    if (!e && S_ISDIR(st.st_mode)) {
        precheck pc = {.ctx = ctx, .r = r, .args = args, .pa = "src", .pb = "dst"};
        e = precheck_tree(&pc, sfd, sv->canonical, dv->canonical, 0);
    }
    cp_walk w = {.r = r, .overwrite = overwrite, .durable = !S_ISDIR(st.st_mode)};
    if (!e && !(w.buf = abx_malloc(COPY_CHUNK)))
        e = oom(r);
    if (!e)
        e = cp_node(&w, sfd, &st, dfd, dname, dv->canonical, 0);
    if (!e)
        fsync_dir(dfd);
    abx_free(w.buf);
    close(sfd);
    if (dfd >= 0)
        close(dfd);
    if (e)
        return e;
    abx_reply_json(r, json_pack("{s:s, s:s, s:s, s:I, s:I, s:I, s:I, s:I}", "src", sv->canonical, "dst", dv->canonical,
                                "type", type_name(st.st_mode), "files", (json_int_t)w.files, "directories",
                                (json_int_t)w.dirs, "symlinks", (json_int_t)w.links, "skipped", (json_int_t)w.skipped,
                                "bytes", (json_int_t)w.bytes));
    return ABX_OK;
}

static bool glob_any(const json_t *list, const char *rel, const char *name)
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

/* ---- files.search ---- */

typedef struct search_st {
    abx_ctx *ctx;
    const json_t *args;
    bool use_re, icase, hidden;
    regex_t re;
    const char *pat;
    size_t plen;
    char *lpat;                 /* pattern folded to lower case (literal, case-insensitive) */
    const json_t *include, *exclude;
    int64_t before, after, max_results, max_file_size;
    json_t *results;
    bool truncated, stop;
    int64_t scanned, skipped, out_bytes, visited;
    char *buf, *lbuf;
    size_t cap;
} search_st;

static json_t *line_text(search_st *st, const char *p, size_t n)
{
    if (n > 0 && p[n - 1] == '\r')
        n--;
    if (n > SEARCH_LINE_MAX)
        n = abx_utf8_complete_prefix(p, SEARCH_LINE_MAX);
    st->out_bytes += (int64_t)n + 16;
    return abx_text_json(p, n);
}

static bool line_matches(search_st *st, size_t off, size_t len)
{
    if (st->use_re) {
        regmatch_t m[1] = {{.rm_so = 0, .rm_eo = (regoff_t)len}};
        return regexec(&st->re, st->buf + off, 1, m, REG_STARTEND) == 0;
    }
    const char *hay = st->icase ? st->lbuf + off : st->buf + off;
    return memmem(hay, len, st->icase ? st->lpat : st->pat, st->plen) != NULL;
}

static void search_file(search_st *st, int fd, const struct stat *sb, const char *rel)
{
    if (sb->st_size > st->max_file_size) {
        st->skipped++;
        return;
    }
    size_t want = (size_t)sb->st_size + 1; /* one more: notice a file that grew */
    if (want > st->cap) {
        char *g = abx_realloc(st->buf, want + 1);
        if (!g) {
            st->skipped++;
            return;
        }
        st->buf = g;
        st->cap = want;
    }
    size_t n = 0;
    while (n < want) {
        ssize_t g = read(fd, st->buf + n, want - n);
        if (g < 0 && errno == EINTR)
            continue;
        if (g <= 0)
            break;
        n += (size_t)g;
    }
    st->buf[n] = '\0'; /* a bound for anything that reads the text as a C string */
    if ((int64_t)n > st->max_file_size || memchr(st->buf, '\0', n < BINARY_PROBE ? n : BINARY_PROBE)) {
        st->skipped++; /* binary (or grew past max_file_size) */
        return;
    }
    st->scanned++;
    if (st->icase && !st->use_re) {
        char *g = abx_realloc(st->lbuf, st->cap + 1);
        if (!g) {
            st->skipped++;
            return;
        }
        st->lbuf = g;
        for (size_t i = 0; i < n; i++)
            st->lbuf[i] = (char)tolower((unsigned char)st->buf[i]);
    }
    /* before: ring of the last lines; after: results still waiting for lines */
    size_t ring_off[101], ring_len[101];
    int64_t ring_n = 0, ring_head = 0;
    json_t *pend[101];
    int64_t pend_left[101];
    int npend = 0;
    int64_t lineno = 0;
    json_t *jrel = abx_text_json(rel, strlen(rel));
    for (size_t p = 0; p < n;) {
        const char *nl = memchr(st->buf + p, '\n', n - p);
        size_t end = nl ? (size_t)(nl - st->buf) : n;
        size_t len = end - p;
        lineno++;
        for (int i = 0; i < npend;) {
            json_array_append_new(json_object_get(pend[i], "after"), line_text(st, st->buf + p, len));
            if (--pend_left[i] == 0) {
                pend[i] = pend[--npend];
                pend_left[i] = pend_left[npend];
            } else {
                i++;
            }
        }
        if (!st->stop && line_matches(st, p, len)) {
            if ((int64_t)json_array_size(st->results) >= st->max_results || st->out_bytes > SEARCH_OUTPUT_MAX) {
                st->truncated = true;
                st->stop = true;
            } else {
                json_t *before = json_array();
                for (int64_t k = 0; k < ring_n; k++) {
                    int64_t idx = (ring_head - ring_n + k + st->before + 1) % (st->before + 1);
                    json_array_append_new(before, line_text(st, st->buf + ring_off[idx], ring_len[idx]));
                }
                json_t *res = json_pack("{s:O, s:I, s:o, s:o, s:o}", "path", jrel, "line", (json_int_t)lineno, "text",
                                        line_text(st, st->buf + p, len), "before", before, "after", json_array());
                if (res) {
                    json_array_append_new(st->results, res);
                    if (st->after > 0) {
                        pend[npend] = res;
                        pend_left[npend++] = st->after;
                    }
                }
            }
        }
        if (st->stop && npend == 0)
            break;
        if (st->before > 0) {
            ring_off[ring_head] = p;
            ring_len[ring_head] = len;
            ring_head = (ring_head + 1) % (st->before + 1);
            if (ring_n < st->before)
                ring_n++;
        }
        p = end + 1;
    }
    json_decref(jrel);
}

static void search_dir(search_st *st, int dirfd, const char *prefix, const char *abs, int depth)
{
    char **names;
    size_t n;
    if (dir_names(dirfd, &names, &n) < 0) {
        free_names(names, n);
        return;
    }
    for (size_t i = 0; i < n && !st->stop; i++) {
        const char *nm = names[i];
        if (!st->hidden && nm[0] == '.')
            continue;
        if (++st->visited % 256 == 0 && abx_ctx_cancelled(st->ctx)) {
            st->stop = st->truncated = true;
            break;
        }
        struct stat sb;
        if (fstatat(dirfd, nm, &sb, AT_SYMLINK_NOFOLLOW) != 0 || S_ISLNK(sb.st_mode))
            continue; /* symlinks are never followed */
        char *rel = prefix ? abx_asprintf("%s/%s", prefix, nm) : abx_strdup(nm);
        char *cabs = join_path(abs, nm);
        if (!rel || !cabs) {
            abx_free(rel);
            abx_free(cabs);
            st->stop = st->truncated = true;
            break;
        }
        if (S_ISDIR(sb.st_mode)) {
            if (depth + 1 < WALK_MAX_DEPTH && !glob_any(st->exclude, rel, nm) &&
                admit_paths(st->ctx, NULL, st->args, "path", cabs, NULL, NULL) == ABX_OK &&
                !builtin_ident_denied(st->ctx, &sb)) {
                int sub = openat(dirfd, nm, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
                if (sub >= 0) {
                    search_dir(st, sub, rel, cabs, depth + 1);
                    close(sub);
                }
            }
        } else if (S_ISREG(sb.st_mode) && !glob_any(st->exclude, rel, nm) &&
                   (json_array_size(st->include) == 0 || glob_any(st->include, rel, nm))) {
            if (sb.st_size > st->max_file_size) {
                st->skipped++;
            } else if (admit_paths(st->ctx, NULL, st->args, "path", cabs, NULL, NULL) == ABX_OK &&
                       !builtin_ident_denied(st->ctx, &sb)) {
                int fd = openat(dirfd, nm, O_RDONLY | O_NOFOLLOW | O_NONBLOCK | O_NOCTTY | O_CLOEXEC);
                struct stat now;
                if (fd >= 0 && fstat(fd, &now) == 0 && S_ISREG(now.st_mode)) {
                    clear_nonblock(fd);
                    search_file(st, fd, &now, rel);
                }
                if (fd >= 0)
                    close(fd);
            }
        }
        abx_free(rel);
        abx_free(cabs);
    }
    free_names(names, n);
}

static abx_err files_search(abx_ctx *ctx, const json_t *args, abx_reply *r)
{
    const abx_path_value *pv = path_value(ctx, "path", 0);
    if (!pv)
        return no_value(r, "path");
    search_st st = {
        .ctx = ctx,
        .args = args,
        .use_re = json_is_true(json_object_get(args, "regex")),
        .icase = !json_is_true(json_object_get(args, "case_sensitive")),
        .hidden = json_is_true(json_object_get(args, "include_hidden")),
        .pat = json_string_value(json_object_get(args, "pattern")),
        .plen = json_string_length(json_object_get(args, "pattern")),
        .include = json_object_get(args, "include"),
        .exclude = json_object_get(args, "exclude"),
        .before = json_integer_value(json_object_get(args, "context_before")),
        .after = json_integer_value(json_object_get(args, "context_after")),
        .max_results = json_integer_value(json_object_get(args, "max_results")),
        .max_file_size = json_integer_value(json_object_get(args, "max_file_size")),
    };
    if (st.plen == 0)
        return abx_reply_error(r, ABX_E_ARGS_INVALID, NULL, "'pattern' must not be empty");
    if (st.before > 100 || st.after > 100 || st.before < 0 || st.after < 0)
        return abx_reply_error(r, ABX_E_ARGS_INVALID, NULL, "context_before and context_after are 0 to 100");
    int64_t lim = abx_ctx_limit(ctx, ABX_LIM_MAX_ENTRIES);
    if (lim > 0 && lim < st.max_results)
        st.max_results = lim;
    if (st.use_re) {
        if (memchr(st.pat, '\0', st.plen))
            return abx_reply_error(r, ABX_E_ARGS_INVALID, NULL, "'pattern' contains a NUL character");
        int rc = regcomp(&st.re, st.pat, REG_EXTENDED | (st.icase ? REG_ICASE : 0));
        if (rc != 0) {
            char why[200];
            regerror(rc, &st.re, why, sizeof why);
            return abx_reply_error(r, ABX_E_ARGS_INVALID, NULL, "'pattern' is not a POSIX extended regex: %s", why);
        }
    } else if (st.icase) {
        if (!(st.lpat = abx_malloc(st.plen + 1)))
            return oom(r);
        for (size_t i = 0; i < st.plen; i++)
            st.lpat[i] = (char)tolower((unsigned char)st.pat[i]);
    }
    abx_err e = ABX_OK;
    int fd = abx_ctx_open(ctx, "path", O_RDONLY | O_NONBLOCK | O_NOCTTY, 0);
    struct stat sb;
    if (fd < 0)
        e = errno_reply(r, -fd, "path");
    else if (fstat(fd, &sb) != 0)
        e = errno_reply(r, errno, "path");
    else if (!S_ISDIR(sb.st_mode) && !S_ISREG(sb.st_mode))
        e = abx_reply_error(r, ABX_E_FILES_NOT_REGULAR, NULL, "'path' is a %s", type_name(sb.st_mode));
    if (!e && !(st.results = json_array()))
        e = oom(r);
    if (!e && S_ISDIR(sb.st_mode)) {
        search_dir(&st, fd, NULL, pv->canonical, 0);
    } else if (!e) { /* one file, named explicitly: searched whatever include/exclude say */
        const char *slash = strrchr(pv->canonical, '/');
        clear_nonblock(fd);
        search_file(&st, fd, &sb, slash ? slash + 1 : pv->canonical);
    }
    if (fd >= 0)
        close(fd);
    if (st.use_re)
        regfree(&st.re);
    abx_free(st.lpat);
    abx_free(st.buf);
    abx_free(st.lbuf);
    if (e) {
        json_decref(st.results);
        return e;
    }
    abx_reply_json(r, json_pack("{s:s, s:o, s:I, s:b, s:I, s:I}", "path", pv->canonical, "results", st.results, "count",
                                (json_int_t)json_array_size(st.results), "truncated", st.truncated, "files_scanned",
                                (json_int_t)st.scanned, "files_skipped", (json_int_t)st.skipped));
    return ABX_OK;
}

/* ---- files.find ---- */

typedef struct find_st {
    abx_ctx *ctx;
    const json_t *args;
    const char *pattern;
    bool by_path;     /* the pattern has a '/': matched against the relative path */
    int want;         /* 0 any, 1 file, 2 directory */
    bool hidden;
    int64_t max;
    json_t *results;
    bool truncated, stop;
    int64_t visited;
} find_st;

static void find_dir(find_st *st, int dirfd, const char *prefix, const char *abs, int depth)
{
    char **names;
    size_t n;
    if (dir_names(dirfd, &names, &n) < 0) {
        free_names(names, n);
        return;
    }
    for (size_t i = 0; i < n && !st->stop; i++) {
        const char *nm = names[i];
        if (!st->hidden && nm[0] == '.')
            continue;
        if (++st->visited % 256 == 0 && abx_ctx_cancelled(st->ctx)) {
            st->stop = st->truncated = true;
            break;
        }
        struct stat sb;
        if (fstatat(dirfd, nm, &sb, AT_SYMLINK_NOFOLLOW) != 0)
            continue;
        char *rel = prefix ? abx_asprintf("%s/%s", prefix, nm) : abx_strdup(nm);
        char *cabs = join_path(abs, nm);
        if (!rel || !cabs) {
            abx_free(rel);
            abx_free(cabs);
            st->stop = st->truncated = true;
            break;
        }
        bool is_dir = S_ISDIR(sb.st_mode);
        bool type_ok = st->want == 0 || (st->want == 1 && S_ISREG(sb.st_mode)) || (st->want == 2 && is_dir);
        bool name_ok = fnmatch(st->pattern, st->by_path ? rel : nm, 0) == 0;
        /* symlinks are listed (as symlinks) but their own path is what the policy sees
         * through their directory: they are never followed */
        bool match = type_ok && name_ok, visible = false;
        if (match || is_dir)
            visible = S_ISLNK(sb.st_mode) || (admit_paths(st->ctx, NULL, st->args, "path", cabs, NULL, NULL) == ABX_OK &&
                                              !builtin_ident_denied(st->ctx, &sb));
        if (visible && match) {
            if ((int64_t)json_array_size(st->results) >= st->max) {
                st->truncated = st->stop = true;
            } else {
                json_t *o = json_pack("{s:o, s:s, s:I}", "path", abx_text_json(rel, strlen(rel)), "type",
                                      type_name(sb.st_mode), "size", (json_int_t)sb.st_size);
                if (o)
                    json_array_append_new(st->results, o);
            }
        }
        if (visible && is_dir && !st->stop && depth + 1 < WALK_MAX_DEPTH) {
            int sub = openat(dirfd, nm, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
            if (sub >= 0) {
                find_dir(st, sub, rel, cabs, depth + 1);
                close(sub);
            }
        }
        abx_free(rel);
        abx_free(cabs);
    }
    free_names(names, n);
}

static abx_err files_find(abx_ctx *ctx, const json_t *args, abx_reply *r)
{
    const abx_path_value *pv = path_value(ctx, "path", 0);
    if (!pv)
        return no_value(r, "path");
    const char *type = json_string_value(json_object_get(args, "type"));
    find_st st = {
        .ctx = ctx,
        .args = args,
        .pattern = json_string_value(json_object_get(args, "pattern")),
        .want = strcmp(type, "file") == 0 ? 1 : strcmp(type, "directory") == 0 ? 2 : 0,
        .hidden = json_is_true(json_object_get(args, "include_hidden")),
        .max = json_integer_value(json_object_get(args, "max_results")),
    };
    st.by_path = strchr(st.pattern, '/') != NULL;
    int64_t lim = abx_ctx_limit(ctx, ABX_LIM_MAX_ENTRIES);
    if (lim > 0 && lim < st.max)
        st.max = lim;
    int fd = abx_ctx_open(ctx, "path", O_RDONLY | O_DIRECTORY | O_NONBLOCK, 0);
    if (fd == -ENOTDIR)
        return abx_reply_error(r, ABX_E_FILES_NOT_A_DIRECTORY, NULL, "'path' (%s) is not a directory", pv->canonical);
    if (fd < 0)
        return errno_reply(r, -fd, "path");
    if (!(st.results = json_array())) {
        close(fd);
        return oom(r);
    }
    find_dir(&st, fd, NULL, pv->canonical, 0);
    close(fd);
    abx_reply_json(r, json_pack("{s:s, s:o, s:I, s:b}", "path", pv->canonical, "results", st.results, "count",
                                (json_int_t)json_array_size(st.results), "truncated", st.truncated));
    return ABX_OK;
}

/* ---- files.download ---- */

static const char *content_type_for(const char *path)
{
    static const struct {
        const char *ext, *type;
    } types[] = {
        {"txt", "text/plain; charset=utf-8"},  {"md", "text/markdown; charset=utf-8"},
        {"json", "application/json"},          {"html", "text/html; charset=utf-8"},
        {"htm", "text/html; charset=utf-8"},   {"css", "text/css; charset=utf-8"},
        {"js", "text/javascript; charset=utf-8"}, {"png", "image/png"},
        {"jpg", "image/jpeg"},                 {"jpeg", "image/jpeg"},
        {"gif", "image/gif"},                  {"svg", "image/svg+xml"},
        {"pdf", "application/pdf"},            {"zip", "application/zip"},
        {"gz", "application/gzip"},            {"tgz", "application/gzip"},
        {"tar", "application/x-tar"},
    };
    const char *slash = strrchr(path, '/');
    const char *base = slash ? slash + 1 : path;
    const char *dot = strrchr(base, '.');
    if (dot && dot != base)
        for (size_t i = 0; i < ABX_ARRAY_LEN(types); i++)
            if (strcasecmp(dot + 1, types[i].ext) == 0)
                return types[i].type;
    return "application/octet-stream";
}

static abx_err files_download(abx_ctx *ctx, const json_t *args, abx_reply *r)
{
    int fd = -1;
    struct stat st;
    abx_err e = open_regular(ctx, r, &fd, &st);
    if (e)
        return e;
    int64_t off = json_integer_value(json_object_get(args, "offset"));
    const json_t *lj = json_object_get(args, "length");
    if (off > st.st_size)
        off = st.st_size;
    int64_t len = st.st_size - off;
    if (lj && json_integer_value(lj) < len)
        len = json_integer_value(lj);
    /* HTTP Range (one bytes=START-END, START-, or -SUFFIX range) wins over offset/length */
    const char *range = abx_ctx_header(ctx, "Range");
    abx_reply_header(r, "Accept-Ranges", "bytes");
    if (range) {
        long long a = -1, b = -1;
        char extra;
        int n1 = sscanf(range, "bytes=%lld-%lld%c", &a, &b, &extra);
        bool ok = false;
        if (n1 == 2 && a >= 0 && b >= a && a < st.st_size) {
            ok = true;
        } else if (n1 == 1 && a >= 0 && a < st.st_size && range[strlen(range) - 1] == '-') {
            b = st.st_size - 1;
            ok = true;
        } else if (sscanf(range, "bytes=-%lld%c", &b, &extra) == 1 && b > 0) {
            a = st.st_size > b ? st.st_size - b : 0;
            b = st.st_size - 1;
            ok = st.st_size > 0;
        }
        if (!ok) {
            close(fd);
            char cr[48];
            snprintf(cr, sizeof cr, "bytes */%lld", (long long)st.st_size);
            abx_reply_header(r, "Content-Range", cr);
            return abx_reply_error(r, ABX_E_FILES_RANGE, NULL, "range '%.60s' is not satisfiable for %lld bytes",
                                   range, (long long)st.st_size);
        }
        if (b >= st.st_size)
            b = st.st_size - 1;
        off = a;
        len = b - a + 1;
        char cr[96];
        snprintf(cr, sizeof cr, "bytes %lld-%lld/%lld", a, b, (long long)st.st_size);
        abx_reply_header(r, "Content-Range", cr);
        abx_reply_status(r, 206);
    }
    int64_t cap = abx_ctx_limit(ctx, ABX_LIM_MAX_BYTES);
    if (cap >= 0 && len > cap) {
        close(fd);
        return abx_reply_error(r, ABX_E_LIMIT_MAX_BYTES, NULL,
                               "%lld bytes are more than max_bytes (%lld); download them in parts with offset and length",
                               (long long)len, (long long)cap);
    }
    abx_reply_fd(r, fd, (uint64_t)off, (uint64_t)len, content_type_for(abx_ctx_path(ctx, "path")));
    return ABX_OK;
}

/* ---- files.upload: the body streams into a temp file beside the target ---- */

typedef struct upload_st {
    staged s;
    int dirfd;
    char *path;   /* canonical, for the reply */
    char *name;   /* owned copy of the target's name (s.name points here) */
    int64_t cap;  /* max_bytes, -1 unlimited */
    int64_t written;
    char *buf;    /* owned: chunks gather here, so the disk sees large writes */
    size_t blen;
} upload_st;

#define UPLOAD_BUF (1024 * 1024)

static abx_err upload_flush(upload_st *u, abx_reply *r)
{
    if (!u->blen)
        return ABX_OK;
    abx_err e = stage_write(&u->s, r, "path", u->buf, u->blen);
    u->blen = 0;
    return e;
}

static abx_err upload_chunk(void *state, const void *data, size_t len, abx_reply *r)
{
    upload_st *u = state;
    if (u->cap >= 0 && u->written + (int64_t)len > u->cap) {
        stage_abort(&u->s);
        return abx_reply_error(r, ABX_E_LIMIT_MAX_BYTES, NULL, "the upload is larger than max_bytes (%lld)",
                               (long long)u->cap);
    }
    abx_err e = ABX_OK;
    if (!u->buf && !(u->buf = abx_malloc(UPLOAD_BUF))) {
        stage_abort(&u->s);
        return abx_reply_error(r, ABX_E_SERVER_UNAVAILABLE, NULL, "out of memory");
    }
    if (u->blen + len > UPLOAD_BUF)
        e = upload_flush(u, r);
    if (!e && len >= UPLOAD_BUF)
        e = stage_write(&u->s, r, "path", data, len);
    else if (!e) {
        memcpy(u->buf + u->blen, data, len);
        u->blen += len;
    }
    if (!e)
        u->written += (int64_t)len;
    return e;
}

static abx_err upload_end(void *state, abx_reply *r)
{
    upload_st *u = state;
    abx_err e = upload_flush(u, r);
    if (e)
        return e;
    e = stage_commit(&u->s, r, "path", false);
    if (e)
        return e;
    abx_reply_json(r, json_pack("{s:s, s:I, s:b}", "path", u->path, "bytes_written", (json_int_t)u->written, "created",
                                !u->s.existed));
    gitcfg_warn_at(u->dirfd, u->name, u->path, r);
    return ABX_OK;
}

static void upload_free(void *state)
{
    upload_st *u = state;
    stage_abort(&u->s); /* nothing left to do once committed */
    abx_free(u->buf);
    if (u->dirfd >= 0)
        close(u->dirfd);
    abx_free(u->path);
    abx_free(u->name);
    abx_free(u);
}

static abx_err files_upload(abx_ctx *ctx, const json_t *args, abx_reply *r)
{
    const abx_path_value *pv = path_value(ctx, "path", 0);
    if (!pv)
        return no_value(r, "path");
    bool make_parents = json_is_true(json_object_get(args, "make_parents"));
    upload_st *u = abx_calloc(1, sizeof *u);
    if (!u)
        return oom(r);
    u->s.fd = -1;
    u->cap = abx_ctx_limit(ctx, ABX_LIM_MAX_BYTES);
    const char *name;
    abx_err e = open_parent_of(ctx, r, pv, make_parents, "make_parents", &u->dirfd, &name);
    if (!e && (!(u->path = abx_strdup(pv->canonical)) || !(u->name = abx_strdup(name))))
        e = oom(r);
    if (!e)
        e = stage_open(&u->s, r, u->dirfd, u->name, "path", -1);
    if (e) {
        upload_free(u);
        return e;
    }
    abx_ctx_body_sink(ctx, upload_chunk, upload_end, upload_free, u);
    return ABX_OK;
}

static const abx_param stat_params[] = {
    {"path", ABX_T_STRING, .required = true, .kind = ABX_KIND_PATH, .access = ABX_ACC_READ,
     .doc = "Path to inspect (relative paths are taken from the workspace)"},
    {0},
};

static const abx_param list_params[] = {
    {"path", ABX_T_STRING, .dflt = "\".\"", .kind = ABX_KIND_PATH, .access = ABX_ACC_READ, .doc = "Directory to list"},
    {"recursive", ABX_T_BOOL, .dflt = "false", .doc = "Descend into subdirectories (symlinks are not followed)"},
    {"max_entries", ABX_T_INT, .dflt = "1000", ABX_RANGE(1, 100000), .doc = "Stop after this many entries"},
    {"include_hidden", ABX_T_BOOL, .dflt = "true", .doc = "Include names starting with '.'"},
    {0},
};

static const abx_param read_params[] = {
    {"path", ABX_T_STRING, .required = true, .kind = ABX_KIND_PATH, .access = ABX_ACC_READ, .doc = "File to read"},
    {"offset", ABX_T_INT, .dflt = "0", ABX_MIN(0), .doc = "First byte of a byte range"},
    {"length", ABX_T_INT, ABX_MIN(1), .doc = "Bytes to read (default: to the end, up to max_bytes)"},
    {"start_line", ABX_T_INT, ABX_MIN(1), .doc = "First line of a line range (lines count from 1)"},
    {"max_lines", ABX_T_INT, ABX_MIN(1), .doc = "Lines to read from start_line"},
    {"numbered", ABX_T_BOOL, .dflt = "false", .doc = "Prefix each line with its number (line ranges)"},
    {"encoding", ABX_T_ENUM, .dflt = "\"utf8\"", .choices = "utf8|base64",
     .doc = "utf8 (text; non-UTF-8 files are refused) or base64 (any bytes)"},
    {0},
};

static const abx_param write_params[] = {
    {"path", ABX_T_STRING, .required = true, .kind = ABX_KIND_PATH, .access = ABX_ACC_WRITE,
     .doc = "File to write (a symlink is written through to its target)"},
    {"content", ABX_T_STRING, .required = true, .doc = "The data: UTF-8 text, or base64 when encoding=base64"},
    {"encoding", ABX_T_ENUM, .dflt = "\"utf8\"", .choices = "utf8|base64",
     .doc = "utf8 (content is the text) or base64 (content is base64 of any bytes)"},
    {"mode", ABX_T_ENUM, .dflt = "\"overwrite\"", .choices = "overwrite|append|create_new",
     .doc = "overwrite: replace atomically (temp file + rename; the old file's permissions are kept); append: add "
            "to the end (created if missing); create_new: fail when the file exists"},
    {"make_parents", ABX_T_BOOL, .dflt = "false", .doc = "Create missing parent directories"},
    {0},
};

static const abx_param edit_params[] = {
    {"path", ABX_T_STRING, .required = true, .kind = ABX_KIND_PATH, .access = ABX_ACC_READ | ABX_ACC_WRITE,
     .doc = "File to edit"},
    {"old", ABX_T_STRING, .required = true, .doc = "Exact text to replace (not a pattern; must not be empty)"},
    {"new", ABX_T_STRING, .required = true, .doc = "Replacement text"},
    {"count", ABX_T_INT, .dflt = "1", ABX_MIN(0),
     .doc = "How many times 'old' must occur (the edit fails, changing nothing, when it occurs a different number "
            "of times); 0 replaces every occurrence"},
    {0},
};

static const abx_param mkdir_params[] = {
    {"path", ABX_T_STRING, .required = true, .kind = ABX_KIND_PATH, .access = ABX_ACC_WRITE,
     .doc = "Directory to create (an existing directory is not an error: created is false)"},
    {"parents", ABX_T_BOOL, .dflt = "false", .doc = "Create missing parent directories too"},
    {0},
};

static const abx_param move_params[] = {
    {"src", ABX_T_STRING, .required = true, .kind = ABX_KIND_PATH, .access = ABX_ACC_READ | ABX_ACC_DELETE,
     .doc = "Path to move; when its last component is a symlink, the link itself moves"},
    {"dst", ABX_T_STRING, .required = true, .kind = ABX_KIND_PATH, .access = ABX_ACC_WRITE,
     .doc = "New path (on the same filesystem: files.move renames, it does not copy)"},
    {"overwrite", ABX_T_BOOL, .dflt = "false", .doc = "Replace an existing dst (a directory only when it is empty)"},
    {0},
};

static const abx_param copy_params[] = {
    {"src", ABX_T_STRING, .required = true, .kind = ABX_KIND_PATH, .access = ABX_ACC_READ,
     .doc = "File or directory to copy"},
    {"dst", ABX_T_STRING, .required = true, .kind = ABX_KIND_PATH, .access = ABX_ACC_WRITE,
     .doc = "The copy's own path (not a directory to copy into)"},
    {"recursive", ABX_T_BOOL, .dflt = "false",
     .doc = "Copy a directory tree; symlinks inside it are copied as symlinks (never followed), FIFOs, sockets "
            "and devices are skipped; each file appears whole (temp + rename) but is not fsynced one by one"},
    {"overwrite", ABX_T_BOOL, .dflt = "false", .doc = "Replace existing files (merging into existing directories)"},
    {0},
};

static const abx_param delete_params[] = {
    {"path", ABX_T_STRING, .required = true, .kind = ABX_KIND_PATH, .access = ABX_ACC_DELETE,
     .doc = "Path to delete; when its last component is a symlink, the link is deleted, never its target"},
    {"recursive", ABX_T_BOOL, .dflt = "false",
     .doc = "Delete a non-empty directory with everything in it (symlinks inside are removed, not followed)"},
    {0},
};

static const abx_param search_params[] = {
    {"path", ABX_T_STRING, .dflt = "\".\"", .kind = ABX_KIND_PATH, .access = ABX_ACC_READ,
     .doc = "Directory to search (recursively; symlinks are not followed) or one file"},
    {"pattern", ABX_T_STRING, .required = true, .doc = "Text to find in each line (a regex when regex=true)"},
    {"regex", ABX_T_BOOL, .dflt = "false", .doc = "pattern is a POSIX extended regular expression"},
    {"case_sensitive", ABX_T_BOOL, .dflt = "true", .doc = "false: ignore case (ASCII letters for literal patterns)"},
    {"include", ABX_T_LIST, .item = ABX_T_STRING,
     .doc = "Only files whose relative path or name matches one of these globs (fnmatch, '*' crosses '/')"},
    {"exclude", ABX_T_LIST, .item = ABX_T_STRING,
     .doc = "Skip files and directories whose relative path or name matches one of these globs"},
    {"include_hidden", ABX_T_BOOL, .dflt = "false", .doc = "Also search names starting with '.' (.git, .env, ...)"},
    {"context_before", ABX_T_INT, .dflt = "0", ABX_RANGE(0, 100), .doc = "Lines of context before each match"},
    {"context_after", ABX_T_INT, .dflt = "0", ABX_RANGE(0, 100), .doc = "Lines of context after each match"},
    {"max_results", ABX_T_INT, .dflt = "1000", ABX_RANGE(1, 100000), .doc = "Stop after this many matching lines"},
    {"max_file_size", ABX_T_INT, .dflt = "10485760", ABX_MIN(1), .doc = "Skip files larger than this (bytes)"},
    {0},
};

static const abx_param find_params[] = {
    {"path", ABX_T_STRING, .dflt = "\".\"", .kind = ABX_KIND_PATH, .access = ABX_ACC_READ,
     .doc = "Directory to search (recursively; symlinks are not followed)"},
    {"pattern", ABX_T_STRING, .dflt = "\"*\"",
     .doc = "Glob (fnmatch) on entry names; with a '/', on the path relative to 'path'"},
    {"type", ABX_T_ENUM, .dflt = "\"any\"", .choices = "file|directory|any", .doc = "Kind of entries to report"},
    {"max_results", ABX_T_INT, .dflt = "1000", ABX_RANGE(1, 100000), .doc = "Stop after this many entries"},
    {"include_hidden", ABX_T_BOOL, .dflt = "false", .doc = "Also report and descend into names starting with '.'"},
    {0},
};

static const abx_param download_params[] = {
    {"path", ABX_T_STRING, .required = true, .kind = ABX_KIND_PATH, .access = ABX_ACC_READ, .doc = "File to download"},
    {"offset", ABX_T_INT, .dflt = "0", ABX_MIN(0), .doc = "First byte to send"},
    {"length", ABX_T_INT, ABX_MIN(1), .doc = "Bytes to send from offset (default: to the end)"},
    {0},
};

static const abx_param upload_params[] = {
    {"path", ABX_T_STRING, .required = true, .kind = ABX_KIND_PATH, .access = ABX_ACC_WRITE,
     .doc = "File to create or replace (atomically, once the whole body has arrived)"},
    {"make_parents", ABX_T_BOOL, .dflt = "false", .doc = "Create missing parent directories"},
    {0},
};

/* ---- files.archive: several sources as one tar.gz, streamed ---- */

/* The walk never follows symlinks (they are archived as links), never leaves a source
 * through its jail root, and skips what the call may not see. Memory is bounded: one
 * file's chunk and the deflate window at a time. */
typedef struct arch_item {
    char *rel;        /* name inside the archive */
    char *canonical;  /* for visibility checks */
} arch_item;

typedef struct arch_dir {
    int fd;
    DIR *d;
    char *rel;
    char *canonical;
} arch_dir;

typedef struct arch_state {
    abx_ctx *ctx;             /* borrowed: lives as long as the request */
    z_stream z;
    bool z_ok, finished, trailer;
    size_t src;               /* next source index */
    size_t n_src;
    arch_dir stack[64];
    int depth;
    int file_fd;              /* file being copied, -1 none */
    uint64_t file_left;
    size_t pad;               /* zero bytes owed after the file */
    abx_buf in;               /* tar bytes waiting for deflate */
    char out[65536];
    size_t out_len, out_pos;
    int64_t budget;           /* max_bytes of input, -1 unlimited */
    uint64_t total_in;
} arch_state;

static void tar_octal(char *dst, size_t width, uint64_t v)
{
    snprintf(dst, width, "%0*llo", (int)width - 1, (unsigned long long)v);
}

static void tar_header(abx_buf *b, const char *name, const struct stat *st, char type, const char *link)
{
    char h[512];
    size_t nl = strlen(name);
    if (nl > 99 || (link && strlen(link) > 99)) { /* PAX extended header for long names */
        abx_buf pax;
        abx_buf_init(&pax, 0);
        const char *keys[2] = {"path", "linkpath"};
        const char *vals[2] = {name, link};
        for (int k = 0; k < 2; k++) {
            if (!vals[k] || (k == 0 ? nl <= 99 : strlen(vals[k]) <= 99))
                continue;
            size_t body = strlen(keys[k]) + strlen(vals[k]) + 3, len = body;
            char lenbuf[24];
            while ((size_t)snprintf(lenbuf, sizeof lenbuf, "%zu", len) + body != len)
                len = body + strlen(lenbuf);
            abx_buf_printf(&pax, "%zu %s=%s\n", len, keys[k], vals[k]);
        }
        memset(h, 0, sizeof h);
        snprintf(h, 100, "PaxHeader");
        tar_octal(h + 100, 8, 0644);
        tar_octal(h + 108, 8, 0);
        tar_octal(h + 116, 8, 0);
        tar_octal(h + 124, 12, pax.len);
        tar_octal(h + 136, 12, (uint64_t)st->st_mtim.tv_sec);
        h[156] = 'x';
        memcpy(h + 257, "ustar", 6);
        memcpy(h + 263, "00", 2);
        memset(h + 148, ' ', 8);
        unsigned sum = 0;
        for (int i = 0; i < 512; i++)
            sum += (unsigned char)h[i];
        snprintf(h + 148, 8, "%06o", sum);
        abx_buf_append(b, h, 512);
        abx_buf_append(b, pax.data, pax.len);
        static const char zeros[512];
        if (pax.len % 512)
            abx_buf_append(b, zeros, 512 - pax.len % 512);
        abx_buf_release(&pax);
    }
    memset(h, 0, sizeof h);
    snprintf(h, 100, "%.99s", name);
    tar_octal(h + 100, 8, st->st_mode & 07777);
    tar_octal(h + 108, 8, st->st_uid);
    tar_octal(h + 116, 8, st->st_gid);
    tar_octal(h + 124, 12, type == '0' ? (uint64_t)st->st_size : 0);
    tar_octal(h + 136, 12, (uint64_t)(st->st_mtim.tv_sec > 0 ? st->st_mtim.tv_sec : 0));
    h[156] = type;
    if (link)
        snprintf(h + 157, 100, "%.99s", link);
    memcpy(h + 257, "ustar", 6);
    memcpy(h + 263, "00", 2);
    memset(h + 148, ' ', 8);
    unsigned sum = 0;
    for (int i = 0; i < 512; i++)
        sum += (unsigned char)h[i];
    snprintf(h + 148, 8, "%06o", sum);
    abx_buf_append(b, h, 512);
}

/* Add one entry (dirfd/name) to the tar stream; directories are pushed for the walk. */
static void arch_entry(arch_state *a, int dirfd, const char *name, const char *rel, const char *canonical)
{
    if (!abx_ctx_path_visible(a->ctx, canonical))
        return;
    struct stat st;
    if (fstatat(dirfd, name, &st, AT_SYMLINK_NOFOLLOW) != 0 || builtin_ident_denied(a->ctx, &st))
        return;
    if (S_ISREG(st.st_mode)) {
        int fd = openat(dirfd, name, O_RDONLY | O_NOFOLLOW | O_NONBLOCK | O_CLOEXEC);
        if (fd < 0)
            return;
        tar_header(&a->in, rel, &st, '0', NULL);
        a->file_fd = fd;
        a->file_left = (uint64_t)st.st_size;
        a->pad = st.st_size % 512 ? 512 - (size_t)(st.st_size % 512) : 0;
    } else if (S_ISDIR(st.st_mode)) {
        char *dn = abx_asprintf("%s/", rel);
        tar_header(&a->in, dn, &st, '5', NULL);
        abx_free(dn);
        if (a->depth < (int)ABX_ARRAY_LEN(a->stack)) {
            int fd = openat(dirfd, name, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
            DIR *d = fd >= 0 ? fdopendir(fd) : NULL;
            if (d) {
                a->stack[a->depth++] = (arch_dir){fd, d, abx_strdup(rel), abx_strdup(canonical)};
            } else if (fd >= 0) {
                close(fd);
            }
        }
    } else if (S_ISLNK(st.st_mode)) {
        char target[4096];
        ssize_t n = readlinkat(dirfd, name, target, sizeof target - 1);
        if (n >= 0) {
            target[n] = '\0';
            tar_header(&a->in, rel, &st, '2', target);
        }
    } /* FIFOs, sockets and devices are not archived */
}

/* Produce more tar bytes into a->in; false when the archive is complete. */
static bool arch_produce(arch_state *a)
{
    if (a->file_fd >= 0) {
        char buf[65536];
        size_t want = a->file_left < sizeof buf ? (size_t)a->file_left : sizeof buf;
        ssize_t n = want ? read(a->file_fd, buf, want) : 0;
        if (n <= 0) { /* the file shrank while archived: pad with zeros to its header size */
            memset(buf, 0, want);
            n = (ssize_t)want;
        }
        abx_buf_append(&a->in, buf, (size_t)n);
        a->file_left -= (uint64_t)n;
        a->total_in += (uint64_t)n;
        if (a->file_left == 0) {
            static const char zeros[512];
            abx_buf_append(&a->in, zeros, a->pad);
            close(a->file_fd);
            a->file_fd = -1;
        }
        return true;
    }
    if (a->depth > 0) {
        arch_dir *top = &a->stack[a->depth - 1];
        struct dirent *de;
        while ((de = readdir(top->d)) != NULL) {
            if (strcmp(de->d_name, ".") == 0 || strcmp(de->d_name, "..") == 0)
                continue;
            char *rel = abx_asprintf("%s/%s", top->rel, de->d_name);
            char *can = abx_asprintf("%s/%s", strcmp(top->canonical, "/") == 0 ? "" : top->canonical, de->d_name);
            arch_entry(a, dirfd(top->d), de->d_name, rel, can);
            abx_free(rel);
            abx_free(can);
            return true;
        }
        closedir(top->d);
        abx_free(top->rel);
        abx_free(top->canonical);
        a->depth--;
        return true;
    }
    abx_request *q = builtin_req(a->ctx);
    if (a->src < q->decision.n_paths) {
        abx_path_value *pv = &q->decision.paths[a->src++];
        const char *canon = pv->canonical;
        const char *base = strrchr(canon, '/');
        base = base && base[1] ? base + 1 : ".";
        const char *name = NULL;
        int pfd = strcmp(pv->rel, ".") == 0 ? -1 : abx_jail_open_parent(pv->rootfd, pv->rel, &name);
        if (pfd >= 0) {
            arch_entry(a, pfd, name, base, canon);
            close(pfd);
        } else if (strcmp(pv->rel, ".") == 0) { /* the root itself */
            arch_entry(a, pv->rootfd, ".", base, canon);
        }
        return true;
    }
    if (!a->trailer) {
        static const char zeros[1024];
        abx_buf_append(&a->in, zeros, sizeof zeros);
        a->trailer = true;
        return true;
    }
    return false;
}

static long arch_read(void *state, char *buf, size_t max)
{
    arch_state *a = state;
    while (a->out_pos == a->out_len) {
        if (a->finished)
            return 0;
        while (a->in.len < 65536 && !(a->budget >= 0 && (int64_t)a->total_in > a->budget))
            if (!arch_produce(a))
                break;
        bool more = a->in.len > 0 || a->file_fd >= 0 || a->depth > 0 || a->src < builtin_req(a->ctx)->decision.n_paths ||
                    !a->trailer;
        if (a->budget >= 0 && (int64_t)a->total_in > a->budget)
            more = false; /* max_bytes reached: the archive ends here (flagged in the log) */
        a->z.next_in = (Bytef *)(a->in.data ? a->in.data : "");
        a->z.avail_in = (uInt)a->in.len;
        a->z.next_out = (Bytef *)a->out;
        a->z.avail_out = sizeof a->out;
        int rc = deflate(&a->z, more ? Z_NO_FLUSH : Z_FINISH);
        if (rc == Z_STREAM_ERROR)
            return -1;
        size_t used = a->in.len - a->z.avail_in;
        memmove(a->in.data, a->in.data + used, a->in.len - used);
        a->in.len -= used;
        a->out_len = sizeof a->out - a->z.avail_out;
        a->out_pos = 0;
        if (rc == Z_STREAM_END)
            a->finished = true;
    }
    size_t n = a->out_len - a->out_pos < max ? a->out_len - a->out_pos : max;
    memcpy(buf, a->out + a->out_pos, n);
    a->out_pos += n;
    return (long)n;
}

static void arch_free(void *state)
{
    arch_state *a = state;
    if (a->file_fd >= 0)
        close(a->file_fd);
    while (a->depth > 0) {
        arch_dir *top = &a->stack[--a->depth];
        closedir(top->d);
        abx_free(top->rel);
        abx_free(top->canonical);
    }
    if (a->z_ok)
        deflateEnd(&a->z);
    abx_buf_release(&a->in);
    abx_free(a);
}

static abx_err files_archive(abx_ctx *ctx, const json_t *args, abx_reply *r)
{
    arch_state *a = abx_calloc(1, sizeof *a);
    if (!a)
        return abx_reply_error(r, ABX_E_SERVER_UNAVAILABLE, NULL, "out of memory");
    a->ctx = ctx;
    a->file_fd = -1;
    a->budget = abx_ctx_limit(ctx, ABX_LIM_MAX_BYTES);
    abx_buf_init(&a->in, 0);
    /* windowBits 15 + 16: a gzip wrapper */
    if (deflateInit2(&a->z, 6, Z_DEFLATED, 15 + 16, 8, Z_DEFAULT_STRATEGY) != Z_OK) {
        abx_free(a);
        return abx_reply_error(r, ABX_E_SERVER_UNAVAILABLE, NULL, "out of memory");
    }
    a->z_ok = true;
    /* a missing source is an error before any byte is sent */
    abx_request *q = builtin_req(ctx);
    for (size_t i = 0; i < q->decision.n_paths; i++) {
        struct stat st;
        abx_path_value *pv = &q->decision.paths[i];
        int fd = abx_jail_open(pv->rootfd, pv->rel, O_PATH | O_NOFOLLOW, 0);
        if (fd < 0 || fstat(fd, &st) != 0) {
            int e = fd < 0 ? -fd : errno;
            if (fd >= 0)
                close(fd);
            arch_free(a);
            return errno_reply(r, e, "sources");
        }
        close(fd);
    }
    abx_reply_stream(r, "application/gzip", arch_read, a, arch_free);
    return ABX_OK;
}

static const abx_param archive_params[] = {
    {"sources", ABX_T_LIST, .item = ABX_T_STRING, .required = true, ABX_RANGE(1, 1000), .kind = ABX_KIND_PATH,
     .access = ABX_ACC_READ, .doc = "Files and directories to archive (directories recursively; symlinks are stored "
                                    "as links, never followed)"},
    {"format", ABX_T_ENUM, .dflt = "\"tar.gz\"", .choices = "tar.gz", .doc = "Archive format"},
    {0},
};

/* ---- files.watch: inotify as server-sent events, recursive, resumable ---- */

/* A watch keeps its inotify descriptor and the last WATCH_RING events; when its client
 * goes away it lingers WATCH_LINGER_MS, so a client that reconnects with
 * Last-Event-ID "<watch>:<seq>" loses nothing still on the ring. */
#define WATCH_RING 4096
#define WATCH_LINGER_MS 30000
#define WATCH_MAX_DIRS 8192

typedef struct watch_ev {
    uint64_t seq;
    char kind[8];   /* create modify delete move */
    char *path;     /* relative to the watched root; owned */
    bool dir;
} watch_ev;

typedef struct watch {
    char id[17];
    char *owner;
    int ifd;                      /* inotify */
    int rootfd;                   /* O_PATH of the watched directory (jail-opened) */
    char *canonical;
    bool recursive;
    json_t *include, *exclude;    /* owned lists of globs */
    struct { int wd; char *rel; } *dirs;
    size_t n_dirs;
    watch_ev ring[WATCH_RING];
    uint64_t next_seq;
    int attached;                 /* clients streaming it */
    int64_t detached_at;
    uint32_t move_cookie;
    char *move_from;
    struct watch *next;
} watch;

static pthread_mutex_t watches_mu = PTHREAD_MUTEX_INITIALIZER;
static watch *watches;

static void watch_free(watch *w)
{
    for (size_t i = 0; i < WATCH_RING; i++)
        abx_free(w->ring[i].path);
    for (size_t i = 0; i < w->n_dirs; i++)
        abx_free(w->dirs[i].rel);
    abx_free(w->dirs);
    if (w->ifd >= 0)
        close(w->ifd);
    if (w->rootfd >= 0)
        close(w->rootfd);
    json_decref(w->include);
    json_decref(w->exclude);
    abx_free(w->move_from);
    abx_free(w->owner);
    abx_free(w->canonical);
    abx_free(w);
}

/* Drop watches whose clients left more than WATCH_LINGER_MS ago (under watches_mu). */
static void watches_gc(void)
{
    int64_t now = abx_now_ms();
    for (watch **pp = &watches; *pp;) {
        watch *w = *pp;
        if (w->attached == 0 && now - w->detached_at > WATCH_LINGER_MS) {
            *pp = w->next;
            watch_free(w);
        } else {
            pp = &w->next;
        }
    }
}

static bool glob_list_match(const json_t *list, const char *rel)
{
    size_t i;
    json_t *g;
    json_array_foreach(list, i, g)
    {
        const char *base = strrchr(rel, '/');
        if (fnmatch(json_string_value(g), rel, 0) == 0 || fnmatch(json_string_value(g), base ? base + 1 : rel, 0) == 0)
            return true;
    }
    return false;
}

static void watch_add_dir(watch *w, int dirfd_of_parent, const char *name, const char *rel, int depth)
{
    if (w->n_dirs >= WATCH_MAX_DIRS || depth > 64)
        return;
    int fd = name ? openat(dirfd_of_parent, name, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC)
                  : openat(dirfd_of_parent, ".", O_RDONLY | O_DIRECTORY | O_CLOEXEC);
    if (fd < 0)
        return;
    char proc[64];
    /* the directory we opened through the jail (O_NOFOLLOW below the root), named by its
     * fd: inotify follows this one magic link to exactly that directory */
    snprintf(proc, sizeof proc, "/proc/self/fd/%d", fd);
    int wd = inotify_add_watch(w->ifd, proc, IN_CREATE | IN_MODIFY | IN_CLOSE_WRITE | IN_DELETE | IN_MOVED_FROM |
                                                 IN_MOVED_TO | IN_DELETE_SELF | IN_ONLYDIR |
                                                 IN_EXCL_UNLINK);
    if (wd >= 0) {
        void *g = abx_realloc(w->dirs, (w->n_dirs + 1) * sizeof *w->dirs);
        if (g) {
            w->dirs = g;
            w->dirs[w->n_dirs].wd = wd;
            w->dirs[w->n_dirs].rel = abx_strdup(rel);
            w->n_dirs++;
        }
    }
    if (w->recursive) {
        DIR *d = fdopendir(fd);
        if (!d) {
            close(fd);
            return;
        }
        struct dirent *de;
        while ((de = readdir(d)) != NULL) {
            if (de->d_type != DT_DIR || strcmp(de->d_name, ".") == 0 || strcmp(de->d_name, "..") == 0)
                continue;
            char *sub = *rel ? abx_asprintf("%s/%s", rel, de->d_name) : abx_strdup(de->d_name);
            watch_add_dir(w, dirfd(d), de->d_name, sub, depth + 1);
            abx_free(sub);
        }
        closedir(d);
    } else {
        close(fd);
    }
}

static const char *dir_rel(const watch *w, int wd)
{
    for (size_t i = 0; i < w->n_dirs; i++)
        if (w->dirs[i].wd == wd)
            return w->dirs[i].rel;
    return NULL;
}

static void watch_push(watch *w, abx_ctx *ctx, const char *kind, const char *rel, bool dir)
{
    if (json_array_size(w->include) && !glob_list_match(w->include, rel))
        return;
    if (glob_list_match(w->exclude, rel))
        return;
    char *canon = abx_asprintf("%s/%s", strcmp(w->canonical, "/") == 0 ? "" : w->canonical, rel);
    bool visible = canon && abx_ctx_path_visible(ctx, canon);
    abx_free(canon);
    if (!visible)
        return;
    if (w->next_seq) { /* a write and its close, or several writes in a row, are one change */
        const watch_ev *last = &w->ring[(w->next_seq - 1) % WATCH_RING];
        if (strcmp(last->kind, kind) == 0 && last->path && strcmp(last->path, rel) == 0 && strcmp(kind, "modify") == 0)
            return;
    }
    watch_ev *e = &w->ring[w->next_seq % WATCH_RING];
    abx_free(e->path);
    e->seq = ++w->next_seq;
    snprintf(e->kind, sizeof e->kind, "%s", kind);
    e->path = abx_strdup(rel);
    e->dir = dir;
}

/* Read what inotify has; under watches_mu. */
static void watch_drain(watch *w, abx_ctx *ctx)
{
    char buf[16384] __attribute__((aligned(__alignof__(struct inotify_event))));
    ssize_t n;
    while ((n = read(w->ifd, buf, sizeof buf)) > 0) {
        for (char *p = buf; p < buf + n;) {
            struct inotify_event *ev = (struct inotify_event *)p;
            p += sizeof *ev + ev->len;
            const char *base = dir_rel(w, ev->wd);
            if (!base || !ev->len)
                continue;
            char *rel = *base ? abx_asprintf("%s/%s", base, ev->name) : abx_strdup(ev->name);
            bool dir = (ev->mask & IN_ISDIR) != 0;
            if (ev->mask & IN_CREATE) {
                watch_push(w, ctx, "create", rel, dir);
                if (dir && w->recursive) { /* watch the new directory too */
                    char *parent_rel = abx_strdup(base);
                    int pfd = *base ? openat(w->rootfd, base, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC)
                                    : openat(w->rootfd, ".", O_RDONLY | O_DIRECTORY | O_CLOEXEC);
                    if (pfd >= 0) {
                        watch_add_dir(w, pfd, ev->name, rel, 1);
                        close(pfd);
                    }
                    abx_free(parent_rel);
                }
            } else if (ev->mask & (IN_MODIFY | IN_CLOSE_WRITE)) {
                watch_push(w, ctx, "modify", rel, dir);
            } else if (ev->mask & IN_DELETE) {
                watch_push(w, ctx, "delete", rel, dir);
            } else if (ev->mask & IN_MOVED_FROM) {
                abx_free(w->move_from);
                w->move_from = abx_strdup(rel);
                w->move_cookie = ev->cookie;
                watch_push(w, ctx, "move", rel, dir);
            } else if (ev->mask & IN_MOVED_TO) {
                watch_push(w, ctx, w->move_from && w->move_cookie == ev->cookie ? "move" : "create", rel, dir);
            }
            abx_free(rel);
        }
    }
}

typedef struct watch_stream {
    abx_ctx *ctx;     /* borrowed for the request's life */
    watch *w;
    uint64_t sent;    /* last seq sent */
    abx_buf pending;
    int64_t debounce_ms;
} watch_stream;

static long watch_read(void *state, char *out, size_t max)
{
    watch_stream *s = state;
    for (;;) {
        if (s->pending.len) {
            size_t n = s->pending.len < max ? s->pending.len : max;
            memcpy(out, s->pending.data, n);
            memmove(s->pending.data, s->pending.data + n, s->pending.len - n);
            s->pending.len -= n;
            return (long)n;
        }
        struct pollfd pf = {.fd = s->w->ifd, .events = POLLIN};
        int pr = poll(&pf, 1, 2000);
        if (pr > 0 && s->debounce_ms > 0)
            usleep((useconds_t)(s->debounce_ms * 1000)); /* let a burst settle into one read */
        pthread_mutex_lock(&watches_mu);
        watch_drain(s->w, s->ctx);
        watch *w = s->w;
        uint64_t oldest = w->next_seq > WATCH_RING ? w->next_seq - WATCH_RING + 1 : 1;
        if (s->sent + 1 < oldest) {
            abx_buf_printf(&s->pending, "event: dropped\ndata: {\"from\": %llu, \"to\": %llu}\n\n",
                           (unsigned long long)(s->sent + 1), (unsigned long long)oldest);
            s->sent = oldest - 1;
        }
        for (uint64_t q = s->sent + 1; q <= w->next_seq; q++) {
            watch_ev *e = &w->ring[(q - 1) % WATCH_RING];
            json_t *d = json_pack("{s:s, s:s, s:b, s:I}", "type", e->kind, "path", e->path ? e->path : "", "dir",
                                  e->dir, "seq", (json_int_t)e->seq);
            char *js = json_dumps(d, JSON_COMPACT);
            json_decref(d);
            abx_buf_printf(&s->pending, "event: %s\nid: %s:%llu\ndata: %s\n\n", e->kind, w->id,
                           (unsigned long long)e->seq, js ? js : "{}");
            free(js);
            s->sent = q;
        }
        pthread_mutex_unlock(&watches_mu);
        if (!s->pending.len)
            abx_buf_puts(&s->pending, ": keepalive\n\n");
    }
}

static void watch_stream_free(void *state)
{
    watch_stream *s = state;
    pthread_mutex_lock(&watches_mu);
    s->w->attached--;
    s->w->detached_at = abx_now_ms();
    watches_gc();
    pthread_mutex_unlock(&watches_mu);
    abx_buf_release(&s->pending);
    abx_free(s);
}

static abx_err files_watch(abx_ctx *ctx, const json_t *args, abx_reply *r)
{
    const char *last = abx_ctx_last_event_id(ctx);
    const char *canon = abx_ctx_path(ctx, "path");
    watch *w = NULL;
    uint64_t resume = 0;
    bool reset = false;
    pthread_mutex_lock(&watches_mu);
    watches_gc();
    if (last) { /* "<watch>:<seq>": re-attach to a lingering watch of this caller */
        const char *colon = strchr(last, ':');
        for (watch *x = watches; colon && x; x = x->next)
            if ((size_t)(colon - last) == strlen(x->id) && strncmp(x->id, last, strlen(x->id)) == 0 &&
                strcmp(x->owner, abx_ctx_principal(ctx)) == 0 && strcmp(x->canonical, canon) == 0)
                w = x;
        if (w)
            resume = strtoull(colon + 1, NULL, 10);
        else
            reset = true;
    }
    if (w) {
        w->attached++;
        pthread_mutex_unlock(&watches_mu);
    } else {
        pthread_mutex_unlock(&watches_mu);
        int fd = abx_ctx_open(ctx, "path", O_RDONLY | O_DIRECTORY, 0);
        if (fd == -ENOTDIR)
            return abx_reply_error(r, ABX_E_FILES_NOT_A_DIRECTORY, NULL, "path '%s' is not a directory", canon);
        if (fd < 0)
            return errno_reply(r, -fd, "path");
        w = abx_calloc(1, sizeof *w);
        unsigned char rnd[8];
        if (!w || abx_random(rnd, sizeof rnd) != 0) {
            close(fd);
            abx_free(w);
            return abx_reply_error(r, ABX_E_SERVER_UNAVAILABLE, NULL, "out of memory");
        }
        abx_hex(rnd, sizeof rnd, w->id);
        w->rootfd = fd;
        w->owner = abx_strdup(abx_ctx_principal(ctx));
        w->canonical = abx_strdup(canon);
        w->recursive = json_is_true(json_object_get(args, "recursive"));
        json_t *inc = json_object_get(args, "include"), *exc = json_object_get(args, "exclude");
        w->include = inc ? json_deep_copy(inc) : json_array();
        w->exclude = exc ? json_deep_copy(exc) : json_array();
        w->ifd = inotify_init1(IN_NONBLOCK | IN_CLOEXEC);
        if (w->ifd < 0) {
            int e = errno;
            watch_free(w);
            return abx_reply_error(r, ABX_E_SERVER_UNAVAILABLE, NULL, "inotify: %s", strerror(e));
        }
        watch_add_dir(w, fd, NULL, "", 0);
        w->attached = 1;
        pthread_mutex_lock(&watches_mu);
        w->next = watches;
        watches = w;
        pthread_mutex_unlock(&watches_mu);
    }
    watch_stream *s = abx_calloc(1, sizeof *s);
    if (!s) {
        pthread_mutex_lock(&watches_mu);
        w->attached--;
        w->detached_at = abx_now_ms();
        pthread_mutex_unlock(&watches_mu);
        return abx_reply_error(r, ABX_E_SERVER_UNAVAILABLE, NULL, "out of memory");
    }
    s->ctx = ctx;
    s->w = w;
    s->sent = resume;
    s->debounce_ms = (int64_t)(json_number_value(json_object_get(args, "debounce")) * 1000);
    abx_buf_init(&s->pending, 4 << 20);
    abx_buf_printf(&s->pending, "event: %s\nid: %s:%llu\ndata: {\"watch\": \"%s\", \"path\": \"%s\", \"dirs\": %zu}\n\n",
                   reset ? "reset" : "ready", w->id, (unsigned long long)resume, w->id, "", w->n_dirs);
    abx_reply_stream(r, "text/event-stream", watch_read, s, watch_stream_free);
    return ABX_OK;
}

static const abx_param watch_params[] = {
    {"path", ABX_T_STRING, .dflt = "\".\"", .kind = ABX_KIND_PATH, .access = ABX_ACC_READ, .doc = "Directory to watch"},
    {"recursive", ABX_T_BOOL, .dflt = "false", .doc = "Watch subdirectories too (new ones as they appear)"},
    {"include", ABX_T_LIST, .item = ABX_T_STRING, .doc = "Only paths matching one of these globs"},
    {"exclude", ABX_T_LIST, .item = ABX_T_STRING, .doc = "Never paths matching one of these globs"},
    {"debounce", ABX_T_NUMBER, .dflt = "0", ABX_RANGE(0, 10), .doc = "Seconds to let a burst of changes settle"},
    {0},
};

/* ---- git config that runs code: a warning on the result ---- */

#define GITCFG_READ_MAX (1024 * 1024)

static bool has_git_dir_shape(int dirfd)
{
    struct stat st;
    return fstatat(dirfd, "HEAD", &st, AT_SYMLINK_NOFOLLOW) == 0 && S_ISREG(st.st_mode) &&
           fstatat(dirfd, "objects", &st, AT_SYMLINK_NOFOLLOW) == 0 && S_ISDIR(st.st_mode);
}

static const char *gitcfg_key_label(const char *key)
{
    if (strcmp(key, "core.hookspath") == 0)
        return "core.hooksPath";
    if (strcmp(key, "includeif.path") == 0)
        return "includeIf.<condition>.path";
    return key;
}

/* Read (at most GITCFG_READ_MAX bytes of) a regular file and add one warning per
 * code-running key it sets. fd is borrowed. */
static void gitcfg_scan(int fd, const char *shown, json_t *warnings)
{
    struct stat st;
    if (fstat(fd, &st) != 0 || !S_ISREG(st.st_mode))
        return;
    size_t cap = st.st_size < GITCFG_READ_MAX ? (size_t)st.st_size : GITCFG_READ_MAX, have = 0;
    char *buf = abx_malloc(cap + 1);
    if (!buf)
        return;
    while (have < cap) {
        ssize_t g = pread(fd, buf + have, cap - have, (off_t)have);
        if (g < 0 && errno == EINTR)
            continue;
        if (g <= 0)
            break;
        have += (size_t)g;
    }
    const char *keys[4];
    size_t n = abx_gitcfg_hook_keys(buf, have, keys, 4);
    abx_free(buf);
    for (size_t i = 0; i < n; i++) {
        char msg[600];
        snprintf(msg, sizeof msg,
                 "%s is a git config that sets %s: git runs the program it names (or reads the config it "
                 "includes) when anyone runs git in this tree",
                 shown, gitcfg_key_label(keys[i]));
        json_array_append_new(warnings, json_pack("{s:s, s:s}", "code", "files.git_config_hook", "message", msg));
    }
}

/* After a files.* op succeeded on param: if the file now at that path is a git config
 * (by name, or "config" in a directory shaped like a git dir), or a git dir moved or
 * copied into place, report the keys that make git run code. */
static void gitcfg_warn(abx_ctx *ctx, abx_reply *r, const char *param)
{
    const abx_path_value *pv = path_value(ctx, param, 0);
    if (!pv || !json_is_object(r->body) || pv->rootfd < 0)
        return;
    const char *base = strrchr(pv->canonical, '/');
    base = base ? base + 1 : pv->canonical;
    bool named = abx_gitcfg_name(pv->canonical);
    bool maybe = named || strcmp(base, "config") == 0 || strcmp(base, ".git") == 0;
    /* a move or copy may put a whole git dir in place under any name */
    bool tree = strcmp(param, "dst") == 0;
    int fd = maybe || tree ? abx_ctx_open(ctx, param, O_RDONLY | O_NONBLOCK | O_NOCTTY, 0) : -1;
    if (fd < 0)
        return;
    json_t *warnings = json_array();
    struct stat st;
    if (fstat(fd, &st) == 0 && S_ISDIR(st.st_mode)) {
        /* a whole git dir put in place: look at its config files */
        if (strcmp(base, ".git") == 0 || has_git_dir_shape(fd)) {
            static const char *const names[] = {"config", "config.worktree"};
            for (size_t i = 0; i < 2; i++) {
                int cfd = openat(fd, names[i], O_RDONLY | O_NOFOLLOW | O_NONBLOCK | O_NOCTTY | O_CLOEXEC);
                if (cfd < 0)
                    continue;
                char *shown = join_path(pv->canonical, names[i]);
                if (builtin_fd_check(ctx, cfd, fd) == 0)
                    gitcfg_scan(cfd, shown ? shown : names[i], warnings);
                abx_free(shown);
                close(cfd);
            }
        }
    } else if (!named && strcmp(base, "config") == 0) {
        const char *name;
        int pfd = strcmp(pv->rel, ".") == 0 ? -1 : abx_jail_open_parent(pv->rootfd, pv->rel, &name);
        if (pfd >= 0 && has_git_dir_shape(pfd))
            gitcfg_scan(fd, pv->canonical, warnings);
        if (pfd >= 0)
            close(pfd);
    } else if (named) {
        gitcfg_scan(fd, pv->canonical, warnings);
    }
    close(fd);
    if (json_array_size(warnings))
        json_object_set_new(r->body, "warnings", warnings);
    else
        json_decref(warnings);
}

/* The same for a file known by its directory and name (files.upload, whose result is
 * built after the streamed body, without the request's path values at hand). */
static void gitcfg_warn_at(int pfd, const char *name, const char *canonical, abx_reply *r)
{
    if (!json_is_object(r->body) || pfd < 0)
        return;
    bool named = abx_gitcfg_name(canonical);
    if (!named && !(strcmp(name, "config") == 0 && has_git_dir_shape(pfd)))
        return;
    int fd = openat(pfd, name, O_RDONLY | O_NOFOLLOW | O_NONBLOCK | O_NOCTTY | O_CLOEXEC);
    if (fd < 0)
        return;
    json_t *warnings = json_array();
    gitcfg_scan(fd, canonical, warnings);
    close(fd);
    if (json_array_size(warnings))
        json_object_set_new(r->body, "warnings", warnings);
    else
        json_decref(warnings);
}

#define GITCFG_WRAP(fn, param)                                                 \
    static abx_err fn##_w(abx_ctx *ctx, const json_t *args, abx_reply *r)     \
    {                                                                          \
        abx_err e = fn(ctx, args, r);                                          \
        if (e == ABX_OK)                                                       \
            gitcfg_warn(ctx, r, param);                                        \
        return e;                                                              \
    }
GITCFG_WRAP(files_read, "path")
GITCFG_WRAP(files_write, "path")
GITCFG_WRAP(files_edit, "path")
GITCFG_WRAP(files_move, "dst")
GITCFG_WRAP(files_copy, "dst")

static const abx_op_def files_ops[] = {
    {.id = "files.stat", .effects = ABX_EFF_READ,
     .summary = "Type, size, mode and times of a path; a missing path inside the scope is {\"exists\": false}.",
     .http = {"GET /files/stat"}, .params = stat_params, .limits = ABX_LIM_RATE | ABX_LIM_CONCURRENCY, .since = "0.1",
     .errors = "files.not_found files.access files.io", .handler = files_stat},
    {.id = "files.list", .effects = ABX_EFF_READ,
     .summary = "Entries of a directory (name, type, size, mode, mtime), optionally recursive.",
     .http = {"GET /files/list"}, .params = list_params,
     .limits = ABX_LIM_MAX_ENTRIES | ABX_LIM_RATE | ABX_LIM_CONCURRENCY, .since = "0.1",
     .errors = "files.not_found files.access files.io files.not_a_directory", .handler = files_list},
    {.id = "files.read", .effects = ABX_EFF_READ,
     .summary = "Read a file by byte range or line range, as UTF-8 text or base64. A result carries warnings (files.git_config_hook) when the file is a git config setting core.fsmonitor, core.hooksPath or an include path.", .http = {"GET /files/read"},
     .params = read_params, .limits = ABX_LIM_MAX_BYTES | ABX_LIM_RATE | ABX_LIM_CONCURRENCY, .since = "0.1",
     .errors = "files.not_found files.access files.io files.is_a_directory files.not_regular files.not_utf8",
     .handler = files_read_w},
    {.id = "files.write", .effects = ABX_EFF_WRITE,
     .summary = "Write a file: atomic overwrite (permissions kept), append, or create_new; UTF-8 or base64 content."
                " A result carries warnings (files.git_config_hook) when the file is a git config setting core.fsmonitor, core.hooksPath or an include path.",
     .http = {"POST /files/write"}, .params = write_params,
     .limits = ABX_LIM_MAX_BYTES | ABX_LIM_RATE | ABX_LIM_CONCURRENCY, .since = "0.1",
     .errors = "files.not_found files.access files.io "
               "files.is_a_directory files.not_a_directory files.not_regular limit.max_bytes",
     .handler = files_write_w},
    {.id = "files.upload", .effects = ABX_EFF_WRITE,
     .summary = "Upload a file: the request body (any bytes, streamed) replaces the file at path atomically."
                " A result carries warnings (files.git_config_hook) when the file is a git config setting core.fsmonitor, core.hooksPath or an include path.",
     .http = {"PUT /files/upload"}, .params = upload_params,
     .limits = ABX_LIM_MAX_BYTES | ABX_LIM_RATE | ABX_LIM_CONCURRENCY, .since = "0.1", .raw_body = true,
     .errors = "files.not_found files.access files.io files.is_a_directory files.not_a_directory files.not_regular",
     .handler = files_upload},
    {.id = "files.edit", .effects = ABX_EFF_READ | ABX_EFF_WRITE,
     .summary = "Replace exact text in a file (old -> new, expected count), atomically; fails without change when "
                "the count differs. A result carries warnings (files.git_config_hook) when the file is a git config setting core.fsmonitor, core.hooksPath or an include path.",
     .http = {"POST /files/edit"}, .params = edit_params,
     .limits = ABX_LIM_MAX_BYTES | ABX_LIM_RATE | ABX_LIM_CONCURRENCY, .since = "0.1",
     .errors = "files.not_found files.access files.io "
               "files.is_a_directory files.not_a_directory files.not_regular limit.max_bytes",
     .handler = files_edit_w},
    {.id = "files.mkdir", .effects = ABX_EFF_WRITE, .summary = "Create a directory (optionally with its parents).",
     .http = {"POST /files/mkdir"}, .params = mkdir_params, .limits = ABX_LIM_RATE | ABX_LIM_CONCURRENCY,
     .since = "0.1",
     .errors = "files.not_found files.access files.io files.not_a_directory", .handler = files_mkdir},
    {.id = "files.move", .effects = ABX_EFF_READ | ABX_EFF_WRITE | ABX_EFF_DELETE,
     .summary = "Rename a file or directory (no replacement unless overwrite); same filesystem only."
                " A result carries warnings (files.git_config_hook) when the file is a git config setting core.fsmonitor, core.hooksPath or an include path.",
     .http = {"POST /files/move"}, .params = move_params, .limits = ABX_LIM_RATE | ABX_LIM_CONCURRENCY,
     .since = "0.1",
     .errors = "files.not_found files.access files.io files.is_a_directory files.not_a_directory",
     .handler = files_move_w},
    {.id = "files.copy", .effects = ABX_EFF_READ | ABX_EFF_WRITE,
     .summary = "Copy a file, or a directory tree with recursive; modes kept, symlinks copied as symlinks."
                " A result carries warnings (files.git_config_hook) when the file is a git config setting core.fsmonitor, core.hooksPath or an include path.",
     .http = {"POST /files/copy"}, .params = copy_params, .limits = ABX_LIM_RATE | ABX_LIM_CONCURRENCY,
     .since = "0.1",
     .errors = "files.not_found files.access files.io files.is_a_directory files.not_a_directory files.not_regular",
     .handler = files_copy_w},
    {.id = "files.delete", .effects = ABX_EFF_DELETE,
     .summary = "Delete a file, symlink or empty directory; a non-empty directory only with recursive.",
     .http = {"DELETE /files"}, .params = delete_params, .limits = ABX_LIM_RATE | ABX_LIM_CONCURRENCY,
     .since = "0.1",
     .errors = "files.not_found files.access files.io files.not_a_directory", .handler = files_delete},
    {.id = "files.search", .effects = ABX_EFF_READ,
     .summary = "Search file contents for a literal or regex, with include/exclude globs, context lines and line "
                "numbers; binary files are skipped.",
     .http = {"POST /files/search"}, .params = search_params,
     .limits = ABX_LIM_MAX_ENTRIES | ABX_LIM_RATE | ABX_LIM_CONCURRENCY, .since = "0.1",
     .errors = "files.not_found files.access files.io files.not_regular", .handler = files_search},
    {.id = "files.find", .effects = ABX_EFF_READ, .summary = "Find files and directories whose names match a glob.",
     .http = {"POST /files/find"}, .params = find_params,
     .limits = ABX_LIM_MAX_ENTRIES | ABX_LIM_RATE | ABX_LIM_CONCURRENCY, .since = "0.1",
     .errors = "files.not_found files.access files.io files.not_a_directory", .handler = files_find},
    {.id = "files.download", .effects = ABX_EFF_READ,
     .summary = "The bytes of a file (or a range: offset, length) with a Content-Type from its extension.",
     .http = {"GET /files/download"}, .params = download_params,
     .limits = ABX_LIM_MAX_BYTES | ABX_LIM_RATE | ABX_LIM_CONCURRENCY, .stream = ABX_STREAM_BYTES,
     .result_content_type = "application/octet-stream", .since = "0.1",
     .errors = "files.not_found files.access files.io "
               "files.is_a_directory files.not_regular files.range_not_satisfiable limit.max_bytes",
     .handler = files_download},
    {.id = "files.archive", .effects = ABX_EFF_READ,
     .summary = "Several files and directories as one tar.gz, streamed (symlinks stored, never followed).",
     .http = {"POST /files/archive"}, .params = archive_params, .limits = ABX_LIM_MAX_BYTES | ABX_LIM_RATE,
     .stream = ABX_STREAM_BYTES, .result_content_type = "application/gzip", .since = "0.1",
     .errors = "files.not_found files.access files.io", .handler = files_archive},
    {.id = "files.watch", .effects = ABX_EFF_READ,
     .summary = "Changes below a directory (create, modify, delete, move) as server-sent events; resumable.",
     .http = {"GET /files/watch"}, .params = watch_params, .stream = ABX_STREAM_SSE, .since = "0.1",
     .errors = "files.not_found files.access files.io files.not_a_directory", .handler = files_watch},
    {0},
};

const abx_namespace abx_ns_files = {.name = "files", .ops = files_ops};
