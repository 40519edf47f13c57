/* write.c — files.write, files.edit and files.mkdir: a file replaced atomically through
 * a staged temp file (or appended to), an exact-text edit, a directory. */
#include "builtin/files/files.h"
#include "builtin/files/results.h"
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>

#define EDIT_DEFAULT_CAP (64LL * 1024 * 1024) /* files.edit reads the whole file */

/* ---- files.write ---- */

static abx_err append_file(abx_reply *r, const char *label, int pfd, const char *name, const char *data, size_t len,
                           bool *created)
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
            return abx_reply_error(r, ABX_E_FILES_IS_A_DIRECTORY, NULL, "path '%s' is a directory", label);
        if (e == ELOOP || e == ENXIO || e == ENODEV)
            return abx_reply_error(r, ABX_E_FILES_NOT_REGULAR, NULL, "path '%s' is not a regular file", label);
        return files_errno_reply(r, e, label);
    }
    struct stat st;
    if (fstat(fd, &st) != 0 || !S_ISREG(st.st_mode)) {
        close(fd);
        return abx_reply_error(r, ABX_E_FILES_NOT_REGULAR, NULL, "path '%s' is not a regular file", label);
    }
    files_clear_nonblock(fd);
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
    return e ? files_stage_errno(r, e, label) : ABX_OK;
}

static abx_err files_write(abx_ctx *ctx, const json_t *args, abx_reply *r)
{
    const abx_path_value *pv = files_path_value(ctx, "path", 0);
    if (!pv)
        return files_no_value(r, "path");
    const json_t *cj = json_object_get(args, "content");
    const char *data = json_string_value(cj);
    size_t len = json_string_length(cj);
    bool b64 = strcmp(json_string_value(json_object_get(args, "encoding")), "base64") == 0;
    const char *mode = json_string_value(json_object_get(args, "mode"));
    bool make_parents = json_is_true(json_object_get(args, "make_parents"));
    /* permissions: "0644"-style octal, the nine permission bits only (no setuid, setgid,
     * sticky), set on the temp file before a byte is written */
    const char *perm = json_string_value(json_object_get(args, "permissions"));
    int perm_bits = -1;
    if (perm) {
        size_t pl = strlen(perm);
        if (!((pl == 3 || (pl == 4 && perm[0] == '0')) && strspn(perm, "01234567") == pl))
            return abx_reply_error(r, ABX_E_ARGS_INVALID, NULL, "permissions must be octal like \"0644\" (0000-0777)");
        if (strcmp(mode, "append") == 0)
            return abx_reply_error(r, ABX_E_ARGS_INVALID, NULL, "permissions apply to overwrite and create_new");
        perm_bits = (int)strtol(perm, NULL, 8);
    }
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
    abx_err e = files_open_parent_of(ctx, r, pv, make_parents, "make_parents", &pfd, &name);
    bool created = false;
    if (!e && strcmp(mode, "append") == 0) {
        e = append_file(r, files_label(ctx, "path"), pfd, name, data, len, &created);
    } else if (!e) {
        bool create_new = strcmp(mode, "create_new") == 0;
        files_staged s;
        e = files_stage_open(&s, r, pfd, name, files_label(ctx, "path"), perm_bits);
        if (!e && create_new && s.existed) {
            files_stage_abort(&s);
            e = abx_reply_error(r, ABX_E_ARGS_INVALID, NULL, "path '%s' already exists and mode is create_new",
                                pv->canonical);
        }
        if (!e)
            e = files_stage_write(&s, r, files_label(ctx, "path"), data, len);
        if (!e)
            e = files_stage_commit(&s, r, files_label(ctx, "path"), create_new);
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
    const abx_path_value *pv = files_path_value(ctx, "path", 0);
    if (!pv)
        return files_no_value(r, "path");
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
    abx_err e = files_open_regular(ctx, r, &fd, &st);
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
        return files_oom(r);
    }
    while (have < size) {
        ssize_t g = read(fd, buf + have, size - have);
        if (g < 0 && errno == EINTR)
            continue;
        if (g < 0) {
            int err = errno;
            close(fd);
            abx_free(buf);
            return files_path_errno(ctx, r, err, "path");
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
        return files_oom(r);
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
    e = files_open_parent_of(ctx, r, pv, false, NULL, &pfd, &name);
    files_staged s;
    if (!e)
        e = files_stage_open(&s, r, pfd, name, files_label(ctx, "path"), -1);
    /* the file read must still be the file in place: an edit never clobbers a change
     * made meanwhile (or a file swapped in) */
    if (!e && (!s.existed || s.old.st_ino != st.st_ino || s.old.st_dev != st.st_dev || s.old.st_size != st.st_size ||
               s.old.st_mtim.tv_sec != st.st_mtim.tv_sec || s.old.st_mtim.tv_nsec != st.st_mtim.tv_nsec)) {
        files_stage_abort(&s);
        e = abx_reply_error(r, ABX_E_FILES_IO, NULL, "%s changed while it was being edited; nothing was written",
                            pv->canonical);
    }
    if (!e)
        e = files_stage_write(&s, r, files_label(ctx, "path"), out, o);
    if (!e)
        e = files_stage_commit(&s, r, files_label(ctx, "path"), false);
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
    const abx_path_value *pv = files_path_value(ctx, "path", 0);
    if (!pv)
        return files_no_value(r, "path");
    bool parents = json_is_true(json_object_get(args, "parents"));
    if (strcmp(pv->rel, ".") == 0) { /* the root of the scope: it exists */
        abx_reply_json(r, json_pack("{s:s, s:b}", "path", pv->canonical, "created", 0));
        return ABX_OK;
    }
    int pfd;
    const char *name;
    abx_err e = files_open_parent_of(ctx, r, pv, parents, "parents", &pfd, &name);
    if (e)
        return e;
    bool created = false;
    if (mkdirat(pfd, name, 0777) == 0) {
        created = true;
        files_fsync_dir(pfd);
    } else {
        int err = errno;
        struct stat st;
        if (err == EEXIST && fstatat(pfd, name, &st, AT_SYMLINK_NOFOLLOW) == 0 && S_ISDIR(st.st_mode)) {
            created = false;
        } else if (err == EEXIST) {
            e = abx_reply_error(r, ABX_E_FILES_NOT_A_DIRECTORY, NULL, "path '%s' exists and is not a directory", files_label(ctx, "path"));
        } else {
            e = files_path_errno(ctx, r, err, "path");
        }
    }
    close(pfd);
    if (e)
        return e;
    abx_reply_json(r, json_pack("{s:s, s:b}", "path", pv->canonical, "created", created));
    return ABX_OK;
}

FILES_GITCFG_WRAP(files_write, "path")
FILES_GITCFG_WRAP(files_edit, "path")

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
    {"permissions", ABX_T_STRING,
     .doc = "The file's permission bits in octal, \"0644\" or \"644\" (no setuid, setgid or sticky bit); default: "
            "an existing file's own, else 0666 less the umask. overwrite and create_new only"},
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

/* results: what each op answers */
FILES_WARNING_ROWS;

static const abx_param write_result[] = {
    {"path", ABX_T_STRING, .required = true, .doc = "The canonical absolute path"},
    {"bytes_written", ABX_T_INT, .required = true},
    {"created", ABX_T_BOOL, .required = true, .doc = "The file did not exist before"},
    {"mode", ABX_T_STRING, .required = true, .doc = "The write mode used"},
    FILES_WARNINGS_FIELD,
    {0},
};

static const abx_param edit_result[] = {
    {"path", ABX_T_STRING, .required = true, .doc = "The canonical absolute path"},
    {"replacements", ABX_T_INT, .required = true, .doc = "Occurrences replaced"},
    {"size", ABX_T_INT, .required = true, .doc = "The file's new size in bytes"},
    FILES_WARNINGS_FIELD,
    {0},
};

static const abx_param mkdir_result[] = {
    {"path", ABX_T_STRING, .required = true, .doc = "The canonical absolute path"},
    {"created", ABX_T_BOOL, .required = true, .doc = "false: the directory was already there"},
    {0},
};

const abx_op_def files_write_ops[] = {
    {.id = "files.write", .result = write_result, .effects = ABX_EFF_WRITE,
     .summary = "Write a file: atomic overwrite (permissions kept), append, or create_new; UTF-8 or base64 content."
                " A result carries warnings (files.git_config_hook) when the file is a git config setting core.fsmonitor, core.hooksPath or an include path.",
     .http = {"POST /files/write"}, .params = write_params,
     .limits = ABX_LIM_MAX_BYTES | ABX_LIM_RATE | ABX_LIM_CONCURRENCY, .since = "0.1",
     .errors = "files.not_found files.access files.io files.no_space "
               "files.is_a_directory files.not_a_directory files.not_regular limit.max_bytes",
     .handler = files_write_w},
    {.id = "files.edit", .result = edit_result, .effects = ABX_EFF_READ | ABX_EFF_WRITE,
     .summary = "Replace exact text in a file (old -> new, expected count), atomically; fails without change when "
                "the count differs. A result carries warnings (files.git_config_hook) when the file is a git config setting core.fsmonitor, core.hooksPath or an include path.",
     .http = {"POST /files/edit"}, .params = edit_params,
     .limits = ABX_LIM_MAX_BYTES | ABX_LIM_RATE | ABX_LIM_CONCURRENCY, .since = "0.1",
     .errors = "files.not_found files.access files.io files.no_space "
               "files.is_a_directory files.not_a_directory files.not_regular limit.max_bytes",
     .handler = files_edit_w},
    {.id = "files.mkdir", .result = mkdir_result, .effects = ABX_EFF_WRITE, .summary = "Create a directory (optionally with its parents).",
     .http = {"POST /files/mkdir"}, .params = mkdir_params, .limits = ABX_LIM_RATE | ABX_LIM_CONCURRENCY,
     .since = "0.1",
     .errors = "files.not_found files.access files.io files.not_a_directory", .handler = files_mkdir},
    {0},
};
