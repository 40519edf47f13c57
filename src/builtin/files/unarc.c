/* unarc.c — the archive reader of files.extract (see unarc.h): tar and tar.gz as one
 * sequential stream of 512-byte blocks, zip through its central directory. */
#include "builtin/files/unarc.h"
#include "core/util.h"
#include <errno.h>
#include <stdarg.h>
#include <stdio.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>
#include <zlib.h>

#define IN_BUF 65536
#define PAX_MAX (64 * 1024) /* a pax header's records; more is refused */

struct unarc {
    int fd;
    unarc_format fmt;
    char err[256];
    bool failed;
    uint64_t file_size;
    uint64_t pos;            /* next byte of fd to read (tar, tar.gz) */
    unsigned char in[IN_BUF];
    size_t in_len, in_off;   /* raw bytes read and not yet consumed */
    z_stream z;
    bool z_on, z_eof;
    /* the current entry's data */
    uint64_t left;           /* data bytes not yet handed out */
    uint64_t pad;            /* tar: zero bytes after the data */
    /* zip */
    uint64_t cd_pos, cd_end;
    uint32_t n_total, n_seen;
    int method;              /* 0 stored, 8 deflate */
    uint64_t data_pos, comp_left;
    uint32_t crc_want, crc;
};

static int fail(unarc *a, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
static int fail(unarc *a, const char *fmt, ...)
{
    if (!a->failed) {
        va_list ap;
        va_start(ap, fmt);
        vsnprintf(a->err, sizeof a->err, fmt, ap);
        va_end(ap);
        a->failed = true;
    }
    return -1;
}

const char *unarc_error(const unarc *a) { return a->err[0] ? a->err : "malformed archive"; }
unarc_format unarc_get_format(const unarc *a) { return a->fmt; }

const char *unarc_format_name(unarc_format f)
{
    return f == UNARC_TAR ? "tar" : f == UNARC_TARGZ ? "tar.gz" : f == UNARC_ZIP ? "zip" : "auto";
}

static ssize_t pread_full(int fd, void *buf, size_t n, uint64_t off)
{
    size_t got = 0;
    while (got < n) {
        ssize_t k = pread(fd, (char *)buf + got, n - got, (off_t)(off + got));
        if (k < 0 && errno == EINTR)
            continue;
        if (k < 0)
            return -1;
        if (k == 0)
            break;
        got += (size_t)k;
    }
    return (ssize_t)got;
}

static bool tar_checksum_ok(const unsigned char *h)
{
    unsigned long want = 0;
    int i = 148, digits = 0;
    while (i < 156 && h[i] == ' ')
        i++;
    for (; i < 156 && h[i] >= '0' && h[i] <= '7'; i++, digits++)
        want = want * 8 + (unsigned long)(h[i] - '0');
    if (!digits)
        return false;
    unsigned long u = 0;
    long s = 0;
    for (int k = 0; k < 512; k++) {
        unsigned char c = (k >= 148 && k < 156) ? ' ' : h[k];
        u += c;
        s += (signed char)c;
    }
    return want == u || (long)want == s;
}

unarc_format unarc_sniff(int fd)
{
    unsigned char h[512];
    ssize_t n = pread_full(fd, h, sizeof h, 0);
    if (n >= 2 && h[0] == 0x1f && h[1] == 0x8b)
        return UNARC_TARGZ;
    if (n >= 4 && h[0] == 'P' && h[1] == 'K' && ((h[2] == 3 && h[3] == 4) || (h[2] == 5 && h[3] == 6)))
        return UNARC_ZIP;
    if (n == 512 && tar_checksum_ok(h))
        return UNARC_TAR;
    bool zero = n == 512;
    for (ssize_t i = 0; i < n && zero; i++)
        zero = h[i] == 0;
    return zero ? UNARC_TAR : UNARC_AUTO; /* an empty tar: its end blocks only */
}

/* ---- the tar stream: raw bytes of fd, or inflated ---- */

static int raw_fill(unarc *a)
{
    if (a->in_off < a->in_len)
        return 1;
    ssize_t k = pread_full(a->fd, a->in, sizeof a->in, a->pos);
    if (k < 0)
        return fail(a, "cannot read the archive: %s", strerror(errno));
    a->pos += (uint64_t)k;
    a->in_len = (size_t)k;
    a->in_off = 0;
    return k > 0;
}

/* Up to n bytes of the tar stream into buf: how many (short only at its end), or -1. */
static ssize_t stream_read(unarc *a, unsigned char *buf, size_t n)
{
    size_t got = 0;
    while (got < n) {
        if (a->fmt == UNARC_TAR) {
            int f = raw_fill(a);
            if (f <= 0)
                return f < 0 ? -1 : (ssize_t)got;
            size_t k = a->in_len - a->in_off < n - got ? a->in_len - a->in_off : n - got;
            memcpy(buf + got, a->in + a->in_off, k);
            a->in_off += k;
            got += k;
            continue;
        }
        if (a->z_eof)
            return (ssize_t)got;
        if (a->z.avail_in == 0) {
            int f = raw_fill(a);
            if (f < 0)
                return -1;
            if (f == 0)
                return fail(a, "the gzip stream ends early");
            a->z.next_in = a->in + a->in_off;
            a->z.avail_in = (uInt)(a->in_len - a->in_off);
            a->in_off = a->in_len;
        }
        a->z.next_out = buf + got;
        a->z.avail_out = (uInt)(n - got);
        int rc = inflate(&a->z, Z_NO_FLUSH);
        got = n - a->z.avail_out;
        if (rc == Z_STREAM_END) { /* another gzip member may follow */
            if (a->z.avail_in == 0 && raw_fill(a) == 0)
                a->z_eof = true;
            else if (inflateReset(&a->z) != Z_OK)
                return fail(a, "cannot restart the gzip stream");
        } else if (rc != Z_OK && rc != Z_BUF_ERROR) {
            return fail(a, "the gzip stream is corrupt (%s)", a->z.msg ? a->z.msg : "inflate error");
        }
    }
    return (ssize_t)got;
}

static int stream_skip(unarc *a, uint64_t n)
{
    unsigned char tmp[4096];
    while (n) {
        size_t k = n < sizeof tmp ? (size_t)n : sizeof tmp;
        ssize_t g = stream_read(a, tmp, k);
        if (g < 0)
            return -1;
        if ((size_t)g < k)
            return fail(a, "the archive ends inside a member's data");
        n -= k;
    }
    return 0;
}

/* An octal field, or GNU base-256 (high bit of the first byte). false when malformed. */
static bool tar_number(const unsigned char *f, size_t w, uint64_t *out)
{
    uint64_t v = 0;
    if (f[0] & 0x80) {
        if (f[0] != 0x80)
            return false; /* negative or beyond 64 bits */
        for (size_t i = 1; i < w; i++) {
            if (v >> 56)
                return false;
            v = v << 8 | f[i];
        }
        *out = v;
        return true;
    }
    size_t i = 0;
    while (i < w && (f[i] == ' ' || f[i] == '\0'))
        i++;
    for (; i < w && f[i] >= '0' && f[i] <= '7'; i++) {
        if (v >> 60)
            return false;
        v = v * 8 + (uint64_t)(f[i] - '0');
    }
    for (; i < w; i++)
        if (f[i] != ' ' && f[i] != '\0')
            return false;
    *out = v;
    return true;
}

/* A string field of at most w bytes (NUL-terminated or full). */
static void tar_string(char *dst, const unsigned char *f, size_t w)
{
    size_t n = strnlen((const char *)f, w);
    memcpy(dst, f, n);
    dst[n] = '\0';
}

/* Read a member's data (a pax header, a GNU long name) into buf as text, NUL-free. */
static int read_text(unarc *a, uint64_t size, char *buf, size_t cap, const char *what)
{
    if (size >= cap)
        return fail(a, "%s of %llu bytes is too long", what, (unsigned long long)size);
    ssize_t g = stream_read(a, (unsigned char *)buf, (size_t)size);
    if (g < 0)
        return -1;
    if ((uint64_t)g < size)
        return fail(a, "the archive ends inside %s", what);
    buf[size] = '\0';
    if (stream_skip(a, (512 - size % 512) % 512) < 0)
        return -1;
    return 0;
}

/* pax records "LEN key=value\n": path, linkpath, size override the header's. */
static int pax_parse(unarc *a, char *p, size_t n, char *path, char *link, uint64_t *size, bool *has_size)
{
    size_t off = 0;
    while (off < n) {
        char *rec = p + off, *sp = memchr(rec, ' ', n - off);
        unsigned long long len = 0;
        for (char *c = rec; sp && c < sp; c++) {
            if (*c < '0' || *c > '9' || len > PAX_MAX)
                return fail(a, "a pax record has a bad length");
            len = len * 10 + (unsigned long long)(*c - '0');
        }
        if (!sp || len < 5 || len > n - off || rec[len - 1] != '\n')
            return fail(a, "a pax record has a bad length");
        char *key = sp + 1, *eq = memchr(key, '=', (size_t)(rec + len - 1 - key));
        if (!eq)
            return fail(a, "a pax record has no '='");
        size_t klen = (size_t)(eq - key), vlen = (size_t)(rec + len - 1 - (eq + 1));
        const char *v = eq + 1;
        if (memchr(v, '\0', vlen))
            return fail(a, "a pax value holds a NUL byte");
        if ((klen == 4 && memcmp(key, "path", 4) == 0) || (klen == 8 && memcmp(key, "linkpath", 8) == 0)) {
            if (vlen >= UNARC_NAME_MAX)
                return fail(a, "a pax path is too long");
            char *dst = klen == 4 ? path : link;
            memcpy(dst, v, vlen);
            dst[vlen] = '\0';
        } else if (klen == 4 && memcmp(key, "size", 4) == 0) {
            uint64_t s = 0;
            if (!vlen || vlen > 19)
                return fail(a, "a pax size is malformed");
            for (size_t i = 0; i < vlen; i++) {
                if (v[i] < '0' || v[i] > '9')
                    return fail(a, "a pax size is malformed");
                s = s * 10 + (uint64_t)(v[i] - '0');
            }
            *size = s;
            *has_size = true;
        }
        off += (size_t)len;
    }
    return 0;
}

typedef struct tar_over {
    char path[UNARC_NAME_MAX], link[UNARC_NAME_MAX];
    uint64_t size;
    bool has_size;
} tar_over;

/* The header block h as entry e, with what pax and GNU headers before it said. */
static int tar_entry(unarc *a, const unsigned char *h, const tar_over *o, unarc_entry *e)
{
    uint64_t size = 0, mode = 0;
    if (!tar_number(h + 124, 12, &size) || !tar_number(h + 100, 8, &mode))
        return fail(a, "a tar header has a malformed size or mode");
    if (o->has_size)
        size = o->size;
    if (o->path[0]) {
        snprintf(e->name, sizeof e->name, "%s", o->path);
    } else {
        char name[101], prefix[156];
        tar_string(name, h, 100);
        tar_string(prefix, h + 345, 155);
        if (memcmp(h + 257, "ustar", 5) == 0 && prefix[0])
            snprintf(e->name, sizeof e->name, "%s/%s", prefix, name);
        else
            snprintf(e->name, sizeof e->name, "%s", name);
    }
    if (o->link[0])
        snprintf(e->link, sizeof e->link, "%s", o->link);
    else
        tar_string(e->link, h + 157, 100);
    char t = (char)h[156];
    e->type = t == '0' || t == '\0' || t == '7' ? UNARC_FILE
              : t == '5'                        ? UNARC_DIR
              : t == '2'                        ? UNARC_SYMLINK
              : t == '1'                        ? UNARC_HARDLINK
                                                : UNARC_OTHER;
    if (e->type != UNARC_SYMLINK && e->type != UNARC_HARDLINK)
        e->link[0] = '\0';
    e->mode = (unsigned)(mode & 07777);
    size_t nl = strlen(e->name);
    if (e->type == UNARC_DIR)
        while (nl > 1 && e->name[nl - 1] == '/')
            e->name[--nl] = '\0';
    if (!nl)
        return fail(a, "a tar member has an empty name");
    /* a file's data is handed out; anything else's is skipped */
    e->size = e->type == UNARC_FILE ? size : 0;
    a->left = size;
    a->pad = (512 - size % 512) % 512;
    if (e->type != UNARC_FILE && stream_skip(a, size + a->pad) < 0)
        return -1;
    if (e->type != UNARC_FILE)
        a->left = a->pad = 0;
    return 1;
}

static int tar_next(unarc *a, unarc_entry *e)
{
    if (stream_skip(a, a->left + a->pad) < 0)
        return -1;
    a->left = a->pad = 0;
    tar_over *o = abx_calloc(1, sizeof *o);
    char *pax = NULL;
    int rc = -1;
    if (!o)
        return fail(a, "out of memory");
    for (;;) {
        unsigned char h[512];
        ssize_t g = stream_read(a, h, sizeof h);
        if (g < 0)
            break;
        if (g == 0) { /* no end-of-archive blocks: accepted at a header boundary */
            rc = 0;
            break;
        }
        if (g < 512) {
            fail(a, "the archive ends inside a tar header");
            break;
        }
        bool zero = true;
        for (int i = 0; i < 512 && zero; i++)
            zero = h[i] == 0;
        if (zero) {
            rc = 0;
            break;
        }
        uint64_t size;
        if (!tar_checksum_ok(h) || !tar_number(h + 124, 12, &size)) {
            fail(a, "a tar header is corrupt (bad checksum or size)");
            break;
        }
        char t = (char)h[156];
        if (t == 'x' || t == 'g') {
            if (!pax && !(pax = abx_malloc(PAX_MAX + 1))) {
                fail(a, "out of memory");
                break;
            }
            if (read_text(a, size, pax, PAX_MAX + 1, "a pax header") < 0)
                break;
            if (t == 'x' && pax_parse(a, pax, (size_t)size, o->path, o->link, &o->size, &o->has_size) < 0)
                break;
            continue;
        }
        if (t == 'L' || t == 'K') {
            if (read_text(a, size, t == 'L' ? o->path : o->link, UNARC_NAME_MAX, "a GNU long name") < 0)
                break;
            continue;
        }
        rc = tar_entry(a, h, o, e);
        break;
    }
    abx_free(pax);
    abx_free(o);
    return rc;
}

static ssize_t tar_read(unarc *a, void *buf, size_t n)
{
    if (!a->left)
        return 0;
    size_t k = a->left < n ? (size_t)a->left : n;
    ssize_t g = stream_read(a, buf, k);
    if (g < 0)
        return -1;
    if ((size_t)g < k)
        return fail(a, "the archive ends inside a member's data");
    a->left -= k;
    return g;
}

/* ---- zip ---- */

static uint32_t le16(const unsigned char *p) { return (uint32_t)p[0] | (uint32_t)p[1] << 8; }
static uint32_t le32(const unsigned char *p) { return le16(p) | le16(p + 2) << 16; }

static int zip_open(unarc *a)
{
    size_t tail = a->file_size < 65557 ? (size_t)a->file_size : 65557;
    if (tail < 22)
        return fail(a, "too short for a zip archive");
    unsigned char *t = abx_malloc(tail);
    if (!t)
        return fail(a, "out of memory");
    uint64_t base = a->file_size - tail;
    if (pread_full(a->fd, t, tail, base) != (ssize_t)tail) {
        abx_free(t);
        return fail(a, "cannot read the archive");
    }
    ssize_t at = -1;
    for (ssize_t i = (ssize_t)tail - 22; i >= 0; i--)
        if (memcmp(t + i, "PK\5\6", 4) == 0 && (size_t)i + 22 + le16(t + i + 20) == tail) {
            at = i;
            break;
        }
    int rc = 0;
    if (at < 0) {
        rc = fail(a, "no zip end-of-central-directory record");
    } else {
        const unsigned char *e = t + at;
        uint32_t n = le16(e + 10), size = le32(e + 12), off = le32(e + 16);
        if (le16(e + 4) || le16(e + 6) || le16(e + 8) != n)
            rc = fail(a, "multi-volume zip archives are not supported");
        else if (n == 0xffff || size == 0xffffffffu || off == 0xffffffffu)
            rc = fail(a, "ZIP64 archives are not supported");
        else if ((uint64_t)off + size > base + (uint64_t)at)
            rc = fail(a, "the zip central directory lies outside the file");
        a->n_total = n;
        a->cd_pos = off;
        a->cd_end = (uint64_t)off + size;
    }
    abx_free(t);
    return rc;
}

/* The entry's kind from the central header's attributes (unix hosts keep st_mode). */
static void zip_kind(const unsigned char *c, unarc_entry *e)
{
    unsigned mode = (c[5] == 3) ? le32(c + 38) >> 16 : 0;
    size_t nl = strlen(e->name);
    e->mode = mode & 07777;
    if (nl && e->name[nl - 1] == '/') {
        e->type = UNARC_DIR;
        while (nl > 1 && e->name[nl - 1] == '/')
            e->name[--nl] = '\0';
    } else if (S_ISLNK(mode)) {
        e->type = UNARC_SYMLINK;
    } else if (S_ISDIR(mode)) {
        e->type = UNARC_DIR;
    } else if (!(mode & S_IFMT) || S_ISREG(mode)) { /* permission bits alone: a file */
        e->type = UNARC_FILE;
    } else {
        e->type = UNARC_OTHER;
    }
}

static ssize_t zip_read(unarc *a, void *buf, size_t n);

static int zip_next(unarc *a, unarc_entry *e)
{
    if (a->n_seen >= a->n_total)
        return 0;
    unsigned char c[46], l[30];
    if (a->cd_pos + 46 > a->cd_end || pread_full(a->fd, c, 46, a->cd_pos) != 46 || memcmp(c, "PK\1\2", 4) != 0)
        return fail(a, "a zip central directory entry is corrupt");
    uint32_t flags = le16(c + 8), method = le16(c + 10), nlen = le16(c + 28);
    uint64_t comp = le32(c + 20), size = le32(c + 24), off = le32(c + 42);
    uint64_t next = a->cd_pos + 46 + nlen + le16(c + 30) + le16(c + 32);
    if (next > a->cd_end || nlen == 0 || nlen >= UNARC_NAME_MAX)
        return fail(a, "a zip central directory entry is corrupt");
    if (pread_full(a->fd, e->name, nlen, a->cd_pos + 46) != (ssize_t)nlen)
        return fail(a, "cannot read the archive");
    e->name[nlen] = '\0';
    if (strlen(e->name) != nlen)
        return fail(a, "a zip member's name holds a NUL byte");
    a->cd_pos = next;
    a->n_seen++;
    if (flags & 1)
        return fail(a, "'%s' is encrypted; encrypted zip members are not supported", e->name);
    if (method != 0 && method != 8)
        return fail(a, "'%s' uses compression method %u; only stored and deflate are supported", e->name, method);
    if (method == 0 && comp != size)
        return fail(a, "'%s' is stored with differing sizes", e->name);
    if (off + 30 > a->file_size || pread_full(a->fd, l, 30, off) != 30 || memcmp(l, "PK\3\4", 4) != 0)
        return fail(a, "'%s' has no valid local header", e->name);
    a->data_pos = off + 30 + le16(l + 26) + le16(l + 28);
    if (a->data_pos > a->file_size || comp > a->file_size - a->data_pos)
        return fail(a, "'%s' has data beyond the end of the file", e->name);
    zip_kind(c, e);
    e->link[0] = '\0';
    e->size = e->type == UNARC_FILE ? size : 0;
    a->method = (int)method;
    a->comp_left = comp;
    a->left = size;
    a->crc_want = le32(c + 16);
    a->crc = (uint32_t)crc32(0, Z_NULL, 0);
    a->in_len = a->in_off = 0;
    if (a->z_on)
        inflateEnd(&a->z);
    a->z_on = false;
    if (method == 8) {
        memset(&a->z, 0, sizeof a->z);
        if (inflateInit2(&a->z, -15) != Z_OK)
            return fail(a, "out of memory");
        a->z_on = true;
    }
    if (e->type == UNARC_SYMLINK) { /* the target is the data */
        if (size >= UNARC_NAME_MAX)
            return fail(a, "'%s' has a link target that is too long", e->name);
        size_t got = 0;
        ssize_t g;
        while ((g = zip_read(a, e->link + got, UNARC_NAME_MAX - 1 - got)) > 0)
            got += (size_t)g;
        if (g < 0)
            return -1;
        e->link[got] = '\0';
        if (strlen(e->link) != got)
            return fail(a, "'%s' has a link target holding a NUL byte", e->name);
    }
    if (e->type != UNARC_FILE)
        a->left = 0;
    return 1;
}

static ssize_t zip_check_end(unarc *a)
{
    if (a->crc != a->crc_want)
        return fail(a, "a zip member's CRC-32 does not match its data");
    return 0;
}

static ssize_t zip_read(unarc *a, void *buf, size_t n)
{
    if (!a->left)
        return 0;
    if (n > a->left)
        n = (size_t)a->left;
    ssize_t got;
    if (a->method == 0) {
        got = pread_full(a->fd, buf, n, a->data_pos);
        if (got != (ssize_t)n)
            return fail(a, "the archive ends inside a member's data");
        a->data_pos += n;
    } else {
        a->z.next_out = buf;
        a->z.avail_out = (uInt)n;
        while (a->z.avail_out) {
            if (!a->z.avail_in) {
                size_t k = a->comp_left < IN_BUF ? (size_t)a->comp_left : IN_BUF;
                if (k && pread_full(a->fd, a->in, k, a->data_pos) != (ssize_t)k)
                    return fail(a, "cannot read the archive");
                a->data_pos += k;
                a->comp_left -= k;
                a->z.next_in = a->in;
                a->z.avail_in = (uInt)k;
            }
            int rc = inflate(&a->z, Z_NO_FLUSH);
            if (rc == Z_STREAM_END && a->z.avail_out)
                return fail(a, "a zip member inflates to fewer bytes than it declares");
            if (rc == Z_BUF_ERROR && !a->comp_left && !a->z.avail_in)
                return fail(a, "a zip member's compressed data ends early");
            if (rc != Z_OK && rc != Z_STREAM_END && rc != Z_BUF_ERROR)
                return fail(a, "a zip member's data is corrupt");
        }
        got = (ssize_t)n;
    }
    a->crc = (uint32_t)crc32(a->crc, buf, (uInt)got);
    a->left -= (uint64_t)got;
    if (!a->left && zip_check_end(a) < 0)
        return -1;
    return got;
}

/* ---- the interface ---- */

unarc *unarc_open(int fd, unarc_format f, char *why, size_t whylen)
{
    struct stat st;
    if (fstat(fd, &st) != 0) {
        snprintf(why, whylen, "cannot read the archive: %s", strerror(errno));
        return NULL;
    }
    unarc_format sniffed = unarc_sniff(fd);
    if (f == UNARC_AUTO)
        f = sniffed;
    if (f == UNARC_AUTO || (sniffed != f && !(f == UNARC_TAR && sniffed == UNARC_AUTO && st.st_size == 0))) {
        snprintf(why, whylen, f == UNARC_AUTO ? "not a tar, tar.gz or zip archive" : "not a %s archive",
                 unarc_format_name(f));
        return NULL;
    }
    unarc *a = abx_calloc(1, sizeof *a);
    if (!a) {
        snprintf(why, whylen, "out of memory");
        return NULL;
    }
    a->fd = fd;
    a->fmt = f;
    a->file_size = (uint64_t)st.st_size;
    int rc = 0;
    if (f == UNARC_TARGZ) {
        rc = inflateInit2(&a->z, 15 + 16) == Z_OK ? 0 : fail(a, "out of memory");
        a->z_on = rc == 0;
    } else if (f == UNARC_ZIP) {
        rc = zip_open(a);
    }
    if (rc < 0) {
        snprintf(why, whylen, "%s", unarc_error(a));
        unarc_close(a);
        return NULL;
    }
    return a;
}

int unarc_next(unarc *a, unarc_entry *e)
{
    if (a->failed)
        return -1;
    memset(e, 0, sizeof *e);
    return a->fmt == UNARC_ZIP ? zip_next(a, e) : tar_next(a, e);
}

ssize_t unarc_read(unarc *a, void *buf, size_t n)
{
    if (a->failed)
        return -1;
    return a->fmt == UNARC_ZIP ? zip_read(a, buf, n) : tar_read(a, buf, n);
}

void unarc_close(unarc *a)
{
    if (!a)
        return;
    if (a->z_on)
        inflateEnd(&a->z);
    abx_free(a);
}
