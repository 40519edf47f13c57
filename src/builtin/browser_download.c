/* browser_download.c — downloads land in the workspace through the jail. Chromium saves a
 * download under a GUID in the browser's private TMPDIR (allowAndName: it never picks a
 * path), whose request passed the url scope like any other. When it is complete, the next
 * call that has a writable root copies it into <root>/downloads/<name> (opened beneath the
 * root with openat2: no symlink, no escape; the name reduced to one safe component, never
 * replacing a file), records it in the ledger and reports it in its result. */
#include "builtin/browser.h"
#include "sandbox/jail.h"
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <stdio.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

int abx_browser_downloads_start(browser *b, char *err, size_t errlen)
{
    char dir[200];
    snprintf(dir, sizeof dir, "%s/downloads", b->tmpdir);
    return abx_cdp_call(b->cdp, NULL, "Browser.setDownloadBehavior",
                        json_pack("{s:s, s:s, s:b}", "behavior", "allowAndName", "downloadPath", dir, "eventsEnabled", 1),
                        abx_now_ms() + 10000, NULL, err, errlen);
}

/* Browser.downloadWillBegin / downloadProgress, on the reader thread. */
void abx_browser_on_download(browser *b, const char *method, json_t *params)
{
    const char *guid = json_string_value(json_object_get(params, "guid"));
    if (!guid || strspn(guid, "0123456789abcdefABCDEF-") != strlen(guid) || strlen(guid) > 64)
        return;
    pthread_mutex_lock(&b->mu);
    if (!b->downloads)
        b->downloads = json_object();
    json_t *d = json_object_get(b->downloads, guid);
    if (strcmp(method, "Browser.downloadWillBegin") == 0 && !d && json_object_size(b->downloads) < 100)
        json_object_set_new(b->downloads, guid,
                            json_pack("{s:O?, s:O?, s:b}", "name", json_object_get(params, "suggestedFilename"), "url",
                                      json_object_get(params, "url"), "done", 0));
    else if (d && strcmp(method, "Browser.downloadProgress") == 0) {
        const char *state = json_string_value(json_object_get(params, "state"));
        if (state && strcmp(state, "completed") == 0)
            json_object_set_new(d, "done", json_true());
        else if (state && strcmp(state, "canceled") == 0)
            json_object_del(b->downloads, guid);
    }
    pthread_mutex_unlock(&b->mu);
}

/* One path component: letters, digits, '.', '-', '_', ' ' kept, the rest '_'; no leading
 * dot; "download" when nothing is left. */
static void safe_name(const char *in, char *out, size_t len)
{
    size_t o = 0;
    for (const char *c = in ? in : ""; *c && o + 1 < len; c++) {
        char ch = *c;
        bool ok = (ch >= 'a' && ch <= 'z') || (ch >= 'A' && ch <= 'Z') || (ch >= '0' && ch <= '9') || ch == '.' ||
                  ch == '-' || ch == '_' || ch == ' ';
        if (o == 0 && ch == '.')
            continue;
        out[o++] = ok ? ch : '_';
    }
    out[o] = '\0';
    if (!o)
        snprintf(out, len, "download");
}

static int copy_fd(int from, int to, int64_t *bytes)
{
    char buf[65536];
    for (;;) {
        ssize_t n = read(from, buf, sizeof buf);
        if (n < 0 && errno == EINTR)
            continue;
        if (n <= 0)
            return (int)n;
        for (ssize_t off = 0; off < n;) {
            ssize_t w = write(to, buf + off, (size_t)(n - off));
            if (w < 0 && errno == EINTR)
                continue;
            if (w <= 0)
                return -1;
            off += w;
        }
        *bytes += n;
    }
}

/* Copy one finished download beneath root; its relative path into rel. 0 or -errno. */
static int land(abx_ctx *ctx, browser *b, const char *root, const char *guid, const char *name, char *rel,
                size_t rellen, int64_t *bytes)
{
    char src[300], base[120];
    snprintf(src, sizeof src, "%s/downloads/%s", b->tmpdir, guid);
    int in = open(src, O_RDONLY | O_CLOEXEC | O_NOFOLLOW);
    if (in < 0)
        return -errno;
    int rootfd = abx_jail_open_root(root);
    if (rootfd < 0) {
        close(in);
        return rootfd;
    }
    const char *leaf;
    int parent = abx_jail_open_parent(rootfd, "downloads/x", &leaf);
    if (parent == -ENOENT) {
        mkdirat(rootfd, "downloads", 0755); /* beneath the root fd, not followed if a link */
        parent = abx_jail_open_parent(rootfd, "downloads/x", &leaf);
    }
    int out = -1, rc = parent < 0 ? parent : -EEXIST;
    safe_name(name, base, sizeof base);
    for (int k = 0; parent >= 0 && k < 100 && rc == -EEXIST; k++) {
        if (k)
            snprintf(rel, rellen, "downloads/%d-%s", k, base);
        else
            snprintf(rel, rellen, "downloads/%s", base);
        char canon[PATH_MAX];
        snprintf(canon, sizeof canon, "%s/%s", root, rel);
        if (abx_ctx_path_hidden(ctx, canon)) {
            rc = -EACCES;
            break;
        }
        out = abx_jail_open(rootfd, rel, O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW, 0644);
        rc = out < 0 ? out : 0;
    }
    if (out >= 0) {
        if (copy_fd(in, out, bytes) != 0)
            rc = -EIO;
        close(out);
        if (rc == 0)
            unlink(src);
    }
    if (parent >= 0)
        close(parent);
    close(rootfd);
    close(in);
    return rc;
}

void abx_browser_deliver(abx_ctx *ctx, browser *b, json_t *out)
{
    pthread_mutex_lock(&b->mu);
    json_t *ready = json_object();
    const char *guid;
    json_t *d;
    void *tmp;
    json_object_foreach_safe(b->downloads, tmp, guid, d) if (json_is_true(json_object_get(d, "done")))
    {
        json_object_set(ready, guid, d);
        json_object_del(b->downloads, guid);
    }
    pthread_mutex_unlock(&b->mu);
    if (!json_object_size(ready)) {
        json_decref(ready);
        return;
    }
    abx_fs_view v;
    bool view = abx_ctx_fs_view(ctx, &v) == 0;
    json_t *landed = json_array(), *events = json_array();
    json_object_foreach(ready, guid, d)
    {
        char rel[200] = "";
        int64_t bytes = 0;
        int rc = view && v.n_rw ? land(ctx, b, v.rw[0], guid, json_string_value(json_object_get(d, "name")), rel,
                                       sizeof rel, &bytes)
                                : -EACCES;
        json_t *e = json_pack("{s:O?, s:O?}", "name", json_object_get(d, "name"), "url", json_object_get(d, "url"));
        if (rc == 0) {
            char *path = abx_asprintf("%s/%s", v.rw[0], rel);
            json_object_set_new(e, "path", json_string(path ? path : rel));
            abx_free(path);
            json_object_set_new(e, "bytes", json_integer(bytes));
        } else {
            json_object_set_new(e, "error", json_string(strerror(-rc)));
        }
        json_array_append(landed, e);
        json_t *ev = json_deep_copy(e);
        json_object_set_new(ev, "kind", json_string("browser.download"));
        json_object_set_new(ev, "browser", json_string(b->id));
        json_array_append_new(events, ev);
        json_decref(e);
    }
    if (view)
        abx_fs_view_release(&v);
    uint64_t g = abx_ctx_ledger_group(ctx);
    pthread_mutex_lock(&b->mu);
    g = g ? g : b->group;
    pthread_mutex_unlock(&b->mu);
    if (abx_ctx_ledger(ctx) && g)
        abx_ledger_append(abx_ctx_ledger(ctx), g, events, true);
    json_decref(events);
    if (out)
        json_object_set_new(out, "downloads", landed);
    else
        json_decref(landed);
    json_decref(ready);
}
