/* read.c — files.stat, files.list and files.read: what a path is, what a directory
 * holds (through the walker), and a file's bytes or lines. */
#include "builtin/files/walk.h"
#include "builtin/files/results.h"
#include "core/jsonout.h"
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>

#define READ_DEFAULT_CAP (16LL * 1024 * 1024) /* files.read's own default max_bytes */

/* ---- files.stat ---- */


static abx_err files_stat(abx_ctx *ctx, const json_t *args, abx_reply *r)
{
    int fd = abx_ctx_open(ctx, "path", O_PATH, 0); /* first: it confirms the name (ctx.c) */
    const char *canon = abx_ctx_path(ctx, "path");
    if (fd == -ENOENT || fd == -ENOTDIR) {
        abx_reply_json(r, json_pack("{s:b, s:s}", "exists", 0, "path", canon));
        return ABX_OK;
    }
    if (fd < 0)
        return files_path_errno(ctx, r, -fd, "path");
    struct stat st;
    int rc = fstat(fd, &st);
    int err = errno;
    close(fd);
    if (rc != 0)
        return files_path_errno(ctx, r, err, "path");
    json_t *o = files_stat_json(&st);
    json_object_set_new(o, "exists", json_true());
    json_object_set_new(o, "path", json_string(canon));
    abx_reply_json(r, o);
    return ABX_OK;
}

/* ---- files.list ---- */

/* ---- files.list ---- */

typedef struct list_state {
    json_t *entries;
} list_state;

/* Each entry the walker delivers (it has already held hidden names, the policy, symlinks
 * and depth to walk.h's rules) is one result, counted against max_entries. */
static files_walk_step list_entry(files_walk *w, const files_walk_entry *e, void *ud)
{
    list_state *st = ud;
    if (!files_walk_take(w))
        return FILES_WALK_STOP;
    json_t *o = files_stat_json(&e->st);
    json_object_set_new(o, "name", json_string(e->name));
    json_object_set_new(o, "path", json_string(e->rel));
    if (!json_is_string(json_object_get(o, "name"))) /* non-UTF-8 names: show them escaped */
        json_object_set_new(o, "name", json_string("\xef\xbf\xbd"));
    json_array_append_new(st->entries, o);
    return FILES_WALK_NEXT; /* the walk's max_depth bounds how far it enters */
}

static abx_err files_list(abx_ctx *ctx, const json_t *args, abx_reply *r)
{
    int fd = abx_ctx_open(ctx, "path", O_RDONLY | O_DIRECTORY | O_NONBLOCK, 0);
    if (fd == -ENOTDIR)
        return abx_reply_error(r, ABX_E_FILES_NOT_A_DIRECTORY, NULL, "path '%s' is not a directory",
                               abx_ctx_path(ctx, "path"));
    if (fd < 0)
        return files_path_errno(ctx, r, -fd, "path");
    list_state st = {.entries = json_array()};
    int64_t max = abx_ctx_limit(ctx, ABX_LIM_MAX_ENTRIES);
    const json_t *dj = json_object_get(args, "depth");
    int depth = json_is_integer(dj) ? (int)json_integer_value(dj)
                : json_is_true(json_object_get(args, "recursive")) ? FILES_WALK_MAX_DEPTH
                                                                    : 1;
    files_walk_opts o = {.ctx = ctx, .r = r, .args = args, .param = "path", .check = FILES_WALK_ADMIT,
                         .hidden = json_is_true(json_object_get(args, "include_hidden")), .cancellable = true,
                         .max_depth = depth, .max_entries = max < 0 ? 1000 : max};
    bool truncated = false;
    abx_err e = st.entries ? files_walk_run(&o, fd, NULL, abx_ctx_path(ctx, "path"), "path", list_entry, &st, &truncated)
                           : files_oom(r);
    close(fd);
    if (e) {
        json_decref(st.entries);
        return e;
    }
    abx_reply_json(r, json_pack("{s:s, s:o, s:b, s:i}", "path", abx_ctx_path(ctx, "path"), "entries", st.entries,
                                "truncated", truncated, "count", (int)json_array_size(st.entries)));
    return ABX_OK;
}

/* ---- files.read ---- */

/* Content read with encoding=utf8 that is not UTF-8 text (abx_text_valid said no). */
static abx_err not_utf8(abx_reply *r)
{
    return abx_reply_error(r, ABX_E_FILES_NOT_UTF8, NULL, "the file is not UTF-8 text; read it with encoding=base64");
}

/* o's "content": base64, or the text as it is (the caller checked it with abx_text_valid) */
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
    /* checked already: jansson need not check the UTF-8 a second time */
    json_object_set_new(o, "content", json_stringn_nocheck(buf, n));
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
    while (!stop && (got = files_pread(fd, chunk, sizeof chunk, -1)) > 0) {
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
        return files_path_errno(ctx, r, errno, "path");
    }
    size_t n = out.len;
    if (!b64 && truncated)
        n = abx_utf8_complete_prefix(out.data ? out.data : "", n);
    if (!b64 && !abx_text_valid(out.data ? out.data : "", n)) {
        abx_buf_release(&out);
        return not_utf8(r);
    }
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

#define JW_LIT(w, lit) abx_jw_raw((w), lit, sizeof lit - 1)

/* A byte range's result as JSON text, members in the order the tree below is built in,
 * so the text is what rendering that tree writes (test_files_read_text.py). false when
 * it cannot be written that way (out of memory, a name that is not UTF-8): the caller
 * builds the tree. */
static bool read_reply_text(abx_reply *r, const char *path, bool b64, int64_t size, const char *buf, size_t n,
                            int64_t off, bool truncated, bool eof)
{
    abx_jw w = {0};
    JW_LIT(&w, "{\"path\":");
    bool ok = path && abx_jw_str(&w, path, strlen(path));
    if (b64)
        JW_LIT(&w, ",\"encoding\":\"base64\",\"size\":");
    else
        JW_LIT(&w, ",\"encoding\":\"utf8\",\"size\":");
    abx_jw_int(&w, size);
    JW_LIT(&w, ",\"content\":");
    if (b64) {
        char *s = abx_base64_encode(buf, n, NULL);
        ok = ok && s && abx_jw_str(&w, s, strlen(s));
        abx_free(s);
    } else {
        ok = ok && abx_jw_str(&w, buf, n);
    }
    JW_LIT(&w, ",\"offset\":");
    abx_jw_int(&w, off);
    JW_LIT(&w, ",\"length\":");
    abx_jw_int(&w, (long long)n);
    if (truncated)
        JW_LIT(&w, ",\"truncated\":true");
    else
        JW_LIT(&w, ",\"truncated\":false");
    if (eof)
        JW_LIT(&w, ",\"eof\":true}");
    else
        JW_LIT(&w, ",\"eof\":false}");
    size_t len = 0;
    char *text = abx_jw_finish(&w, &len);
    if (!ok || !text) {
        free(text);
        return false;
    }
    abx_reply_json_text(r, text, len);
    return true;
}

static abx_err files_read(abx_ctx *ctx, const json_t *args, abx_reply *r)
{
    int fd = -1;
    struct stat st;
    abx_err e = files_open_regular_nb(ctx, r, &fd, &st);
    if (e)
        return e;
    bool b64 = strcmp(json_string_value(json_object_get(args, "encoding")), "base64") == 0;
    int64_t cap = abx_ctx_limit(ctx, ABX_LIM_MAX_BYTES);
    if (cap < 0 || cap > READ_DEFAULT_CAP)
        cap = READ_DEFAULT_CAP;
    if (json_object_get(args, "start_line") || json_object_get(args, "max_lines")) {
        if (json_integer_value(json_object_get(args, "offset")) != 0 || json_object_get(args, "length")) {
            close(fd);
            return abx_reply_error(r, ABX_E_ARGS_INVALID, NULL,
                                   "give a byte range (offset, length) or a line range (start_line, max_lines), not both");
        }
        json_t *o = json_pack("{s:s, s:s, s:I}", "path", abx_ctx_path(ctx, "path"), "encoding",
                              b64 ? "base64" : "utf8", "size", (json_int_t)st.st_size);
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
        return abx_reply_error(r, ABX_E_SERVER_UNAVAILABLE, NULL, "out of memory");
    }
    size_t have = 0;
    while ((int64_t)have < want) {
        ssize_t g = files_pread(fd, buf + have, (size_t)want - have, (off_t)(off + (int64_t)have));
        if (g < 0) {
            int err = errno;
            abx_free(buf);
            close(fd);
            return files_path_errno(ctx, r, err, "path");
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
    if (!b64 && !abx_text_valid(buf, n)) {
        abx_free(buf);
        return not_utf8(r);
    }
    truncated = truncated || n < have;
    bool eof = off + (int64_t)n >= st.st_size;
    /* the common case, a read from the network answered as it is: its text at once,
     * without a tree (unless a git config's warning may have to be added to it) */
    if (abx_ctx_reply_text_ok(ctx) && !files_gitcfg_maybe(ctx, "path") &&
        read_reply_text(r, abx_ctx_path(ctx, "path"), b64, (int64_t)st.st_size, buf, n, off, truncated, eof)) {
        abx_free(buf);
        return ABX_OK;
    }
    json_t *o = json_pack("{s:s, s:s, s:I}", "path", abx_ctx_path(ctx, "path"), "encoding", b64 ? "base64" : "utf8",
                          "size", (json_int_t)st.st_size);
    e = encode_content(r, o, buf, n, b64);
    abx_free(buf);
    if (e) {
        json_decref(o);
        return e;
    }
    json_object_set_new(o, "offset", json_integer(off));
    json_object_set_new(o, "length", json_integer((json_int_t)n));
    json_object_set_new(o, "truncated", json_boolean(truncated));
    json_object_set_new(o, "eof", json_boolean(eof));
    abx_reply_json(r, o);
    return ABX_OK;
}

FILES_GITCFG_WRAP(files_read, "path")

static const abx_param stat_params[] = {
    {"path", ABX_T_STRING, .required = true, .kind = ABX_KIND_PATH, .access = ABX_ACC_READ,
     .doc = "Path to inspect (relative paths are taken from the workspace)"},
    {0},
};

static const abx_param list_params[] = {
    {"path", ABX_T_STRING, .dflt = "\".\"", .kind = ABX_KIND_PATH, .access = ABX_ACC_READ, .doc = "Directory to list"},
    {"recursive", ABX_T_BOOL, .dflt = "false", .doc = "Descend into subdirectories (symlinks are not followed)"},
    {"depth", ABX_T_INT, ABX_RANGE(1, FILES_WALK_MAX_DEPTH),
     .doc = "Levels to show: 1 is the directory's own entries, 2 adds theirs, and so on (default 1, or every "
            "level up to 128 with recursive=true)"},
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

/* results: what each op answers (the catalog, OpenAPI, MCP and the clients type it) */
FILES_WARNING_ROWS;

static const abx_param stat_result[] = {
    {"exists", ABX_T_BOOL, .required = true, .doc = "false: nothing is at the path (the other fields are absent)"},
    {"path", ABX_T_STRING, .required = true, .doc = "The canonical absolute path"},
    FILES_STAT_FIELDS(false),
    {0},
};

static const abx_param list_entry_fields[] = {
    {"name", ABX_T_STRING, .required = true, .doc = "The entry's name"},
    {"path", ABX_T_STRING, .required = true, .doc = "Its path relative to the listed directory"},
    FILES_STAT_FIELDS(true),
    {0},
};

static const abx_param list_result[] = {
    {"path", ABX_T_STRING, .required = true, .doc = "The listed directory (canonical)"},
    {"entries", ABX_T_LIST, ABX_T_OBJECT, .required = true, .fields = list_entry_fields},
    {"truncated", ABX_T_BOOL, .required = true, .doc = "max_entries stopped the listing"},
    {"count", ABX_T_INT, .required = true, .doc = "Entries returned"},
    {0},
};

static const abx_param read_result[] = {
    {"path", ABX_T_STRING, .required = true, .doc = "The canonical absolute path"},
    {"encoding", ABX_T_ENUM, .required = true, .choices = "utf8|base64"},
    {"size", ABX_T_INT, .required = true, .doc = "The file's size in bytes"},
    {"content", ABX_T_STRING, .required = true, .dflt = "\"hello\\n\"", .doc = "The text (utf8) or base64 bytes"},
    {"length", ABX_T_INT, .required = true, .doc = "Bytes of the file in content"},
    {"truncated", ABX_T_BOOL, .required = true, .doc = "More was asked for than max_bytes allows"},
    {"offset", ABX_T_INT, .doc = "Byte range: the first byte"},
    {"eof", ABX_T_BOOL, .doc = "Byte range: content reaches the end of the file"},
    {"start_line", ABX_T_INT, .doc = "Line range: the first line"},
    {"lines", ABX_T_INT, .doc = "Line range: lines in content"},
    {"end_line", ABX_T_INT, .doc = "Line range: the last line in content"},
    FILES_WARNINGS_FIELD,
    {0},
};

const abx_op_def files_read_ops[] = {
    {.id = "files.stat", .result = stat_result, .effects = ABX_EFF_READ,
     .summary = "Type, size, mode and times of a path; a missing path inside the scope is {\"exists\": false}.",
     .http = {"GET /files/stat"}, .params = stat_params, .limits = ABX_LIM_RATE | ABX_LIM_CONCURRENCY, .since = "0.1",
     .errors = "files.not_found files.access files.io", .handler = files_stat},
    {.id = "files.list", .result = list_result, .effects = ABX_EFF_READ,
     .summary = "Entries of a directory (name, type, size, mode, mtime), down to depth levels (recursive: all).",
     .http = {"GET /files/list"}, .params = list_params,
     .limits = ABX_LIM_MAX_ENTRIES | ABX_LIM_RATE | ABX_LIM_CONCURRENCY, .since = "0.1",
     .errors = "files.not_found files.access files.io files.not_a_directory", .handler = files_list},
    {.id = "files.read", .result = read_result, .effects = ABX_EFF_READ,
     .summary = "Read a file by byte range or line range, as UTF-8 text or base64. A result carries warnings (files.git_config_hook) when the file is a git config setting core.fsmonitor, core.hooksPath or an include path.", .http = {"GET /files/read"},
     .params = read_params, .limits = ABX_LIM_MAX_BYTES | ABX_LIM_RATE | ABX_LIM_CONCURRENCY, .since = "0.1",
     .errors = "files.not_found files.access files.io files.is_a_directory files.not_regular files.not_utf8",
     .handler = files_read_w},
    {0},
};
