/* transfer.c — files.download (a file's bytes with a Content-Type from its extension)
 * and files.upload (a streamed request body into a staged file). */
#include "builtin/files/files.h"
#include "builtin/files/results.h"
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <string.h>
#include <strings.h>
#include <unistd.h>


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
    abx_err e = files_open_regular(ctx, r, &fd, &st);
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
    files_staged s;
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
    abx_err e = files_stage_write(&u->s, r, u->path, u->buf, u->blen);
    u->blen = 0;
    return e;
}

static abx_err upload_chunk(void *state, const void *data, size_t len, abx_reply *r)
{
    upload_st *u = state;
    if (u->cap >= 0 && u->written + (int64_t)len > u->cap) {
        files_stage_abort(&u->s);
        return abx_reply_error(r, ABX_E_LIMIT_MAX_BYTES, NULL, "the upload is larger than max_bytes (%lld)",
                               (long long)u->cap);
    }
    abx_err e = ABX_OK;
    if (!u->buf && !(u->buf = abx_malloc(UPLOAD_BUF))) {
        files_stage_abort(&u->s);
        return abx_reply_error(r, ABX_E_SERVER_UNAVAILABLE, NULL, "out of memory");
    }
    if (u->blen + len > UPLOAD_BUF)
        e = upload_flush(u, r);
    if (!e && len >= UPLOAD_BUF)
        e = files_stage_write(&u->s, r, u->path, data, len);
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
    e = files_stage_commit(&u->s, r, u->path, false);
    if (e)
        return e;
    abx_reply_json(r, json_pack("{s:s, s:I, s:b}", "path", u->path, "bytes_written", (json_int_t)u->written, "created",
                                !u->s.existed));
    files_gitcfg_warn_at(u->dirfd, u->name, u->path, r);
    return ABX_OK;
}

static void upload_free(void *state)
{
    upload_st *u = state;
    files_stage_abort(&u->s); /* nothing left to do once committed */
    abx_free(u->buf);
    if (u->dirfd >= 0)
        close(u->dirfd);
    abx_free(u->path);
    abx_free(u->name);
    abx_free(u);
}

static abx_err files_upload(abx_ctx *ctx, const json_t *args, abx_reply *r)
{
    const abx_path_value *pv = files_path_value(ctx, "path", 0);
    if (!pv)
        return files_no_value(r, "path");
    bool make_parents = json_is_true(json_object_get(args, "make_parents"));
    upload_st *u = abx_calloc(1, sizeof *u);
    if (!u)
        return files_oom(r);
    u->s.fd = -1;
    u->cap = abx_ctx_limit(ctx, ABX_LIM_MAX_BYTES);
    const char *name;
    abx_err e = files_open_parent_of(ctx, r, pv, make_parents, "make_parents", &u->dirfd, &name);
    if (!e && (!(u->path = abx_strdup(pv->canonical)) || !(u->name = abx_strdup(name))))
        e = files_oom(r);
    if (!e)
        e = files_stage_open(&u->s, r, u->dirfd, u->name, files_label(ctx, "path"), -1);
    if (e) {
        upload_free(u);
        return e;
    }
    abx_ctx_body_sink(ctx, upload_chunk, upload_end, upload_free, u);
    return ABX_OK;
}

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

/* the upload's result */
FILES_WARNING_ROWS;

static const abx_param upload_result[] = {
    {"path", ABX_T_STRING, .required = true, .doc = "The canonical absolute path"},
    {"bytes_written", ABX_T_INT, .required = true},
    {"created", ABX_T_BOOL, .required = true, .doc = "The file did not exist before"},
    FILES_WARNINGS_FIELD,
    {0},
};

const abx_op_def files_transfer_ops[] = {
    {.id = "files.upload", .result = upload_result, .effects = ABX_EFF_WRITE,
     .summary = "Upload a file: the request body (any bytes, streamed) replaces the file at path atomically."
                " A result carries warnings (files.git_config_hook) when the file is a git config setting core.fsmonitor, core.hooksPath or an include path.",
     .http = {"PUT /files/upload"}, .params = upload_params,
     .limits = ABX_LIM_MAX_BYTES | ABX_LIM_RATE | ABX_LIM_CONCURRENCY, .since = "0.1", .raw_body = true,
     .errors = "files.not_found files.access files.io files.no_space files.is_a_directory files.not_a_directory "
               "files.not_regular",
     .handler = files_upload},
    {.id = "files.download", .effects = ABX_EFF_READ,
     .summary = "The bytes of a file (or a range: offset, length) with a Content-Type from its extension.",
     .http = {"GET /files/download"}, .params = download_params,
     .limits = ABX_LIM_MAX_BYTES | ABX_LIM_RATE | ABX_LIM_CONCURRENCY, .stream = ABX_STREAM_BYTES,
     .result_content_type = "application/octet-stream", .since = "0.1",
     .errors = "files.not_found files.access files.io "
               "files.is_a_directory files.not_regular files.range_not_satisfiable limit.max_bytes",
     .handler = files_download},
    {0},
};
