/* files.c — the files namespace. Every path a handler touches is the canonical admitted
 * value, opened through the jail beneath its root (abx_ctx_open); no handler opens a
 * raw argument. Non-regular files are never read (a FIFO must not hang a thread). */
#include "builtin/builtin.h"
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#define READ_DEFAULT_CAP (16LL * 1024 * 1024) /* files.read's own default max_bytes */
#define LIST_MAX_DEPTH 64

abx_err abx_errno_to_err(int err)
{
    switch (err) {
    case ENOENT:
    case ENOTDIR:
        return ABX_E_FILES_NOT_FOUND;
    case EXDEV:
    case ELOOP:
        return ABX_E_POLICY_PATH_DENIED;
    case EACCES:
    case EPERM:
        return ABX_E_FILES_ACCESS;
    case ENAMETOOLONG:
        return ABX_E_ARGS_INVALID;
    case EMFILE:
    case ENFILE:
    case ENOMEM:
        return ABX_E_SERVER_UNAVAILABLE;
    default:
        return ABX_E_FILES_IO;
    }
}

static abx_err errno_reply(abx_reply *r, int err, const char *param)
{
    abx_err e = abx_errno_to_err(err);
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

typedef struct list_state {
    json_t *entries;
    int64_t max;
    bool truncated;
    bool hidden;
    bool recursive;
} list_state;

static int cmp_names(const void *a, const void *b) { return strcmp(*(char *const *)a, *(char *const *)b); }

static int list_dir(int dirfd, const char *prefix, int depth, list_state *st)
{
    int dup = fcntl(dirfd, F_DUPFD_CLOEXEC, 0);
    if (dup < 0)
        return -errno;
    DIR *d = fdopendir(dup);
    if (!d) {
        int e = errno;
        close(dup);
        return -e;
    }
    char **names = NULL;
    size_t n = 0, cap = 0;
    struct dirent *de;
    int rc = 0;
    while ((de = readdir(d)) != NULL) {
        if (strcmp(de->d_name, ".") == 0 || strcmp(de->d_name, "..") == 0)
            continue;
        if (!st->hidden && de->d_name[0] == '.')
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
    if (names)
        qsort(names, n, sizeof *names, cmp_names);
    for (size_t i = 0; i < n && rc == 0; i++) {
        if ((int64_t)json_array_size(st->entries) >= st->max) {
            st->truncated = true;
            break;
        }
        struct stat sb;
        if (fstatat(dirfd, names[i], &sb, AT_SYMLINK_NOFOLLOW) != 0)
            continue; /* vanished while listing */
        char *rel = prefix ? abx_asprintf("%s/%s", prefix, names[i]) : abx_strdup(names[i]);
        if (!rel) {
            rc = -ENOMEM;
            break;
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
                rc = list_dir(sub, rel, depth + 1, st);
                close(sub);
            }
        }
        abx_free(rel);
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
    list_state st = {.entries = json_array(),
                     .max = abx_ctx_limit(ctx, ABX_LIM_MAX_ENTRIES),
                     .hidden = json_is_true(json_object_get(args, "include_hidden")),
                     .recursive = json_is_true(json_object_get(args, "recursive"))};
    if (st.max < 0)
        st.max = 1000;
    int rc = list_dir(fd, NULL, 0, &st);
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

/* Length of the longest prefix of p[0..n) that does not end inside a UTF-8 sequence. */
static size_t utf8_complete_prefix(const char *p, size_t n)
{
    size_t back = 0;
    while (back < 4 && back < n && ((unsigned char)p[n - 1 - back] & 0xC0) == 0x80)
        back++;
    if (back < n) {
        unsigned char lead = (unsigned char)p[n - 1 - back];
        size_t need = lead >= 0xF0 ? 4 : lead >= 0xE0 ? 3 : lead >= 0xC0 ? 2 : 1;
        if (need > back + 1)
            return n - back - 1;
    }
    return n;
}

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
    if (memchr(buf, '\0', n) || !abx_utf8_valid(buf, n))
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
        n = utf8_complete_prefix(out.data ? out.data : "", n);
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
        n = utf8_complete_prefix(buf, have);
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

const abx_op_def abx_builtin_files[] = {
    {.id = "files.stat", .effects = ABX_EFF_READ,
     .summary = "Type, size, mode and times of a path; a missing path inside the scope is {\"exists\": false}.",
     .http = {"GET /files/stat"}, .params = stat_params, .limits = ABX_LIM_RATE | ABX_LIM_CONCURRENCY, .since = "0.1",
     .handler = files_stat},
    {.id = "files.list", .effects = ABX_EFF_READ,
     .summary = "Entries of a directory (name, type, size, mode, mtime), optionally recursive.",
     .http = {"GET /files/list"}, .params = list_params,
     .limits = ABX_LIM_MAX_ENTRIES | ABX_LIM_RATE | ABX_LIM_CONCURRENCY, .since = "0.1", .handler = files_list},
    {.id = "files.read", .effects = ABX_EFF_READ,
     .summary = "Read a file by byte range or line range, as UTF-8 text or base64.", .http = {"GET /files/read"},
     .params = read_params, .limits = ABX_LIM_MAX_BYTES | ABX_LIM_RATE | ABX_LIM_CONCURRENCY, .since = "0.1",
     .handler = files_read},
    {0},
};
