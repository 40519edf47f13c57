/* archive.c — files.archive: several sources as one tar.gz, streamed as the client
 * reads. Each source directory is walked one entry at a time (walk.h). */
#include "builtin/files/walk.h"
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>
#include <zlib.h>

/* The walk (walk.h, FILES_WALK_VISIBLE) never follows symlinks (they are archived as
 * links), never leaves a source through its jail root, and skips what the call may not
 * see. Memory is bounded: one file's chunk and the deflate window at a time. */
typedef struct arch_state {
    abx_ctx *ctx;             /* borrowed: lives as long as the request */
    z_stream z;
    bool z_ok, finished, trailer;
    size_t src;               /* next source index */
    size_t n_src;
    files_walk *walk;         /* the source directory being walked, or NULL */
    int walk_fd;              /* its fd (owned), -1 none */
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

/* Add one entry to the tar stream: a file's header (its bytes follow as it streams), a
 * directory's, or a symlink stored as a link; FIFOs, sockets and devices are not archived. */
static void arch_add(arch_state *a, int dirfd, const char *name, const char *rel, const struct stat *st)
{
    if (S_ISREG(st->st_mode)) {
        int fd = openat(dirfd, name, O_RDONLY | O_NOFOLLOW | O_NONBLOCK | O_CLOEXEC);
        if (fd < 0)
            return;
        tar_header(&a->in, rel, st, '0', NULL);
        a->file_fd = fd;
        a->file_left = (uint64_t)st->st_size;
        a->pad = st->st_size % 512 ? 512 - (size_t)(st->st_size % 512) : 0;
    } else if (S_ISDIR(st->st_mode)) {
        char *dn = abx_asprintf("%s/", rel);
        if (dn) /* out of memory: the directory's own header is left out */
            tar_header(&a->in, dn, st, '5', NULL);
        abx_free(dn);
    } else if (S_ISLNK(st->st_mode)) {
        char target[4096];
        ssize_t n = readlinkat(dirfd, name, target, sizeof target - 1);
        if (n >= 0) {
            target[n] = '\0';
            tar_header(&a->in, rel, st, '2', target);
        }
    }
}

/* A source the call named (dirfd/name): held to the same rules the walker holds its
 * entries to (visible, identity), added, and when a directory, walked. */
static void arch_source(arch_state *a, int dirfd, const char *name, const char *rel, const char *canonical)
{
    if (!abx_ctx_path_visible(a->ctx, canonical))
        return;
    struct stat st;
    if (fstatat(dirfd, name, &st, AT_SYMLINK_NOFOLLOW) != 0 || builtin_ident_denied(a->ctx, &st))
        return;
    arch_add(a, dirfd, name, rel, &st);
    if (!S_ISDIR(st.st_mode))
        return;
    int fd = openat(dirfd, name, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC), err;
    files_walk_opts o = {.ctx = a->ctx, .check = FILES_WALK_VISIBLE, .hidden = true};
    if (fd >= 0 && (a->walk = files_walk_begin(&o, fd, rel, canonical, &err)) != NULL)
        a->walk_fd = fd;
    else if (fd >= 0)
        close(fd);
}

static void arch_walk_end(arch_state *a)
{
    files_walk_end(a->walk);
    a->walk = NULL;
    if (a->walk_fd >= 0)
        close(a->walk_fd);
    a->walk_fd = -1;
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
    if (a->walk) {
        files_walk_entry e;
        if (files_walk_next(a->walk, &e) > 0)
            arch_add(a, e.dirfd, e.name, e.rel, &e.st);
        else
            arch_walk_end(a);
        return true;
    }
    const abx_decision *d = abx_ctx_decision(a->ctx);
    if (a->src < d->n_paths) {
        const abx_path_value *pv = &d->paths[a->src++];
        const char *canon = pv->canonical;
        const char *base = strrchr(canon, '/');
        base = base && base[1] ? base + 1 : ".";
        const char *name = NULL;
        int pfd = strcmp(pv->rel, ".") == 0 ? -1 : abx_jail_open_parent(pv->rootfd, pv->rel, &name);
        if (pfd >= 0) {
            arch_source(a, pfd, name, base, canon);
            close(pfd);
        } else if (strcmp(pv->rel, ".") == 0) { /* the root itself */
            arch_source(a, pv->rootfd, ".", base, canon);
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
        bool more = a->in.len > 0 || a->file_fd >= 0 || a->walk || a->src < abx_ctx_decision(a->ctx)->n_paths ||
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
        if (a->in.data) /* none after a failed allocation: nothing to move */
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
    arch_walk_end(a);
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
    a->walk_fd = -1;
    a->budget = abx_ctx_limit(ctx, ABX_LIM_MAX_BYTES);
    abx_buf_init(&a->in, 0);
    /* windowBits 15 + 16: a gzip wrapper */
    if (deflateInit2(&a->z, 6, Z_DEFLATED, 15 + 16, 8, Z_DEFAULT_STRATEGY) != Z_OK) {
        abx_free(a);
        return abx_reply_error(r, ABX_E_SERVER_UNAVAILABLE, NULL, "out of memory");
    }
    a->z_ok = true;
    /* a missing source is an error before any byte is sent */
    const abx_decision *d = abx_ctx_decision(ctx);
    for (size_t i = 0; i < d->n_paths; i++) {
        struct stat st;
        const abx_path_value *pv = &d->paths[i];
        int fd = abx_jail_open(pv->rootfd, pv->rel, O_PATH | O_NOFOLLOW, 0);
        if (fd < 0 || fstat(fd, &st) != 0) {
            int e = fd < 0 ? -fd : errno;
            if (fd >= 0)
                close(fd);
            arch_free(a);
            return files_errno_reply(r, e, pv->canonical);
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

const abx_op_def files_archive_ops[] = {
    {.id = "files.archive", .effects = ABX_EFF_READ,
     .summary = "Several files and directories as one tar.gz, streamed (symlinks stored, never followed).",
     .http = {"POST /files/archive"}, .params = archive_params, .limits = ABX_LIM_MAX_BYTES | ABX_LIM_RATE,
     .stream = ABX_STREAM_BYTES, .result_content_type = "application/gzip", .since = "0.1",
     .errors = "files.not_found files.access files.io", .handler = files_archive},
    {0},
};
