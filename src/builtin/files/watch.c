/* watch.c — files.watch: inotify as server-sent events, recursive (the directories
 * come from the walker, walk.h), resumable through Last-Event-ID. */
#include "builtin/files/walk.h"
#include "builtin/files/results.h"
#include <errno.h>
#include <fcntl.h>
#include <fnmatch.h>
#include <poll.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/inotify.h>
#include <unistd.h>

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
    char *from;     /* move: where it was; owned, else NULL */
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
    uint32_t move_cookie;         /* the IN_MOVED_FROM waiting for its IN_MOVED_TO */
    char *move_from;
    bool move_dir;
    struct watch *next;
} watch;

static pthread_mutex_t watches_mu = PTHREAD_MUTEX_INITIALIZER;
static watch *watches;

static void watch_free(watch *w)
{
    for (size_t i = 0; i < WATCH_RING; i++) {
        abx_free(w->ring[i].path);
        abx_free(w->ring[i].from);
    }
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

/* Put an inotify watch on the directory fd (opened through the jail, never through a
 * symlink) and remember it as rel. */
static void watch_one(watch *w, int fd, const char *rel)
{
    char proc[64];
    /* the directory named by its fd: inotify follows this one magic link to exactly it */
    snprintf(proc, sizeof proc, "/proc/self/fd/%d", fd);
    int wd = inotify_add_watch(w->ifd, proc, IN_CREATE | IN_MODIFY | IN_CLOSE_WRITE | IN_DELETE | IN_MOVED_FROM |
                                                 IN_MOVED_TO | IN_DELETE_SELF | IN_ONLYDIR | IN_EXCL_UNLINK);
    if (wd < 0)
        return;
    void *g = abx_realloc(w->dirs, (w->n_dirs + 1) * sizeof *w->dirs);
    char *copy = abx_strdup(rel);
    if (!g || !copy) {
        if (g)
            w->dirs = g;
        abx_free(copy);
        inotify_rm_watch(w->ifd, wd);
        return;
    }
    w->dirs = g;
    w->dirs[w->n_dirs].wd = wd;
    w->dirs[w->n_dirs].rel = copy;
    w->n_dirs++;
}

/* Each directory the walker delivers (walk.h, FILES_WALK_VISIBLE: a masked subtree is
 * not watched), up to WATCH_MAX_DIRS. */
static files_walk_step watch_entry(files_walk *walk, const files_walk_entry *e, void *ud)
{
    watch *w = ud;
    (void)walk;
    if (!S_ISDIR(e->st.st_mode))
        return FILES_WALK_NEXT;
    if (w->n_dirs >= WATCH_MAX_DIRS)
        return FILES_WALK_STOP;
    int fd = openat(e->dirfd, e->name, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
    if (fd < 0)
        return FILES_WALK_PRUNE;
    watch_one(w, fd, e->rel);
    close(fd);
    return FILES_WALK_NEXT;
}

/* Watch the directory fd (canonical path canonical) as rel, and with recursive every
 * directory below it. */
static void watch_tree(watch *w, abx_ctx *ctx, int fd, const char *rel, const char *canonical)
{
    if (w->n_dirs >= WATCH_MAX_DIRS)
        return;
    watch_one(w, fd, rel);
    if (!w->recursive)
        return;
    files_walk_opts o = {.ctx = ctx, .check = FILES_WALK_VISIBLE, .hidden = true};
    (void)files_walk_run(&o, fd, rel, canonical, rel, watch_entry, w, NULL); /* unreadable: the top alone */
}

static const char *dir_rel(const watch *w, int wd)
{
    for (size_t i = 0; i < w->n_dirs; i++)
        if (w->dirs[i].wd == wd)
            return w->dirs[i].rel;
    return NULL;
}

/* Whether rel is, or lies inside, a temp name abx makes while it writes (files.h,
 * FILES_TMP_SUFFIX): a staged file before its rename, extract's staging directory. */
static bool abx_temp_path(const char *rel)
{
    size_t sl = strlen(FILES_TMP_SUFFIX);
    for (const char *p = rel; *p;) {
        const char *e = strchr(p, '/');
        size_t n = e ? (size_t)(e - p) : strlen(p);
        if (n > sl && memcmp(p + n - sl, FILES_TMP_SUFFIX, sl) == 0)
            return true;
        p += n + (e ? 1 : 0);
    }
    return false;
}

/* Whether the caller may see rel (below the watched root) at all. */
static bool rel_visible(const watch *w, abx_ctx *ctx, const char *rel)
{
    char *canon = abx_asprintf("%s/%s", strcmp(w->canonical, "/") == 0 ? "" : w->canonical, rel);
    bool visible = canon && abx_ctx_path_visible(ctx, canon);
    abx_free(canon);
    return visible;
}

/* Whether the directory rel (below the watched root) is denied by identity: a denied
 * folder the host renamed, or one below it (policy.h, the fd check abx_ctx_open makes). */
static bool dir_denied(const watch *w, abx_ctx *ctx, const char *rel)
{
    int fd = abx_jail_open(w->rootfd, rel, O_RDONLY | O_DIRECTORY, 0);
    if (fd < 0)
        return false; /* gone (or not a directory): nothing of it to show or watch */
    bool denied = builtin_fd_check(ctx, fd, -1) != 0;
    close(fd);
    return denied;
}

static void watch_push(watch *w, abx_ctx *ctx, const char *kind, const char *rel, const char *from, bool dir)
{
    if (abx_temp_path(rel))
        return;
    if (json_array_size(w->include) && !glob_list_match(w->include, rel))
        return;
    if (glob_list_match(w->exclude, rel))
        return;
    if (!rel_visible(w, ctx, rel))
        return;
    if (dir && strcmp(kind, "delete") != 0 && dir_denied(w, ctx, rel))
        return;
    if (w->next_seq) { /* a write and its close, or several writes in a row, are one change */
        const watch_ev *last = &w->ring[(w->next_seq - 1) % WATCH_RING];
        if (strcmp(last->kind, kind) == 0 && last->path && strcmp(last->path, rel) == 0 && strcmp(kind, "modify") == 0)
            return;
    }
    watch_ev *e = &w->ring[w->next_seq % WATCH_RING];
    abx_free(e->path);
    abx_free(e->from);
    e->seq = ++w->next_seq;
    snprintf(e->kind, sizeof e->kind, "%s", kind);
    e->path = abx_strdup(rel);
    e->from = from ? abx_strdup(from) : NULL;
    e->dir = dir;
}

/* A directory created below a recursive watch: opened through the jail beneath the
 * watched directory (no symlink on the way), held to the walker's rules, and watched
 * with what is already in it. */
static void watch_new_dir(watch *w, abx_ctx *ctx, const char *rel)
{
    char *canon = files_join_path(w->canonical, rel);
    if (!canon || !abx_ctx_path_visible(ctx, canon)) {
        abx_free(canon);
        return;
    }
    int fd = abx_jail_open(w->rootfd, rel, O_RDONLY | O_DIRECTORY, 0);
    if (fd >= 0 && builtin_fd_check(ctx, fd, -1) == 0) /* not a denied folder under a new name */
        watch_tree(w, ctx, fd, rel, canon);
    if (fd >= 0)
        close(fd);
    abx_free(canon);
}

/* A watched directory moved from one name below the root to another: its rel, and
 * every rel below it, follow. */
static void watch_rename_dirs(watch *w, const char *from, const char *to)
{
    size_t fl = strlen(from);
    for (size_t i = 0; i < w->n_dirs; i++) {
        const char *r = w->dirs[i].rel;
        if (strncmp(r, from, fl) != 0 || (r[fl] && r[fl] != '/'))
            continue;
        char *n = abx_asprintf("%s%s", to, r + fl);
        if (n) {
            abx_free(w->dirs[i].rel);
            w->dirs[i].rel = n;
        }
    }
}

/* A rename's first half whose second never came: it left the watched tree. */
static void watch_flush_move(watch *w, abx_ctx *ctx)
{
    if (!w->move_from)
        return;
    watch_push(w, ctx, "delete", w->move_from, NULL, w->move_dir);
    abx_free(w->move_from);
    w->move_from = NULL;
}

/* IN_MOVED_TO: with its IN_MOVED_FROM, one "move" {path: to, from}; out of abx's own
 * temp name (an atomic write, extract's publish), the change it stands for; from
 * outside the tree, a "create". */
static void watch_moved_to(watch *w, abx_ctx *ctx, const struct inotify_event *ev, const char *rel, bool dir)
{
    bool paired = w->move_from && w->move_cookie == ev->cookie;
    bool from_temp = paired && abx_temp_path(w->move_from);
    /* out of a name the caller may not see (a deny statement, a protected area): as if
     * from outside the tree, so the hidden name is never shown */
    bool from_hidden = paired && !from_temp && !rel_visible(w, ctx, w->move_from);
    if (from_hidden) {
        if (dir && w->recursive) /* what was watched below it follows; new_dir adds the rest */
            watch_rename_dirs(w, w->move_from, rel);
        paired = false;
        abx_free(w->move_from);
        w->move_from = NULL;
    }
    if (paired && !from_temp)
        watch_push(w, ctx, "move", rel, w->move_from, dir);
    else
        watch_push(w, ctx, from_temp && !dir ? "modify" : "create", rel, NULL, dir);
    if (dir && w->recursive) {
        if (paired && !from_temp)
            watch_rename_dirs(w, w->move_from, rel);
        else if (!abx_temp_path(rel)) /* its contents were never watched */
            watch_new_dir(w, ctx, rel);
    }
    if (paired) {
        abx_free(w->move_from);
        w->move_from = NULL;
    }
}

/* Read what inotify has; under watches_mu. A rename's two halves are queued together,
 * so a first half still waiting once the queue is empty left the tree. */
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
            if (!rel)
                continue;
            if (w->move_from && !((ev->mask & IN_MOVED_TO) && ev->cookie == w->move_cookie))
                watch_flush_move(w, ctx);
            if (ev->mask & IN_CREATE) {
                watch_push(w, ctx, "create", rel, NULL, dir);
                if (dir && w->recursive && !abx_temp_path(rel)) /* watch the new directory too */
                    watch_new_dir(w, ctx, rel);
            } else if (ev->mask & (IN_MODIFY | IN_CLOSE_WRITE)) {
                watch_push(w, ctx, "modify", rel, NULL, dir);
            } else if (ev->mask & IN_DELETE) {
                watch_push(w, ctx, "delete", rel, NULL, dir);
            } else if (ev->mask & IN_MOVED_FROM) {
                w->move_from = rel;
                w->move_cookie = ev->cookie;
                w->move_dir = dir;
                rel = NULL;
            } else if (ev->mask & IN_MOVED_TO) {
                watch_moved_to(w, ctx, ev, rel, dir);
            }
            abx_free(rel);
        }
    }
    watch_flush_move(w, ctx);
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
            if (d && e->from)
                json_object_set_new(d, "from", json_string(e->from));
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
            return files_path_errno(ctx, r, -fd, "path");
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
        watch_tree(w, ctx, fd, "", canon);
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
    ABX_TOOL_STREAM_PARAMS,
    {0},
};

/* the stream's events: ready/reset first, then one per change, dropped after an overflow */
static const abx_param watch_start_fields[] = {
    {"watch", ABX_T_STRING, .required = true, .doc = "The watch's id (Last-Event-ID resumes it)"},
    {"path", ABX_T_STRING, .required = true},
    {"dirs", ABX_T_INT, .required = true, .doc = "Directories watched"},
    {0},
};

static const abx_param watch_change_fields[] = {
    {"type", ABX_T_ENUM, .required = true, .choices = "create|modify|delete|move"},
    {"path", ABX_T_STRING, .required = true, .doc = "Relative to the watched directory"},
    {"dir", ABX_T_BOOL, .required = true},
    {"seq", ABX_T_INT, .required = true},
    {"from", ABX_T_STRING, .doc = "move: the old path"},
    {0},
};

static const abx_param watch_dropped_fields[] = {
    {"from", ABX_T_INT, .required = true},
    {"to", ABX_T_INT, .required = true},
    {0},
};

static const abx_param watch_events[] = {
    {"ready", ABX_T_OBJECT, .fields = watch_start_fields, .doc = "The watch is set up"},
    {"reset", ABX_T_OBJECT, .fields = watch_start_fields, .doc = "Resumed past what is kept: read again"},
    {"create", ABX_T_OBJECT, .fields = watch_change_fields},
    {"modify", ABX_T_OBJECT, .fields = watch_change_fields},
    {"delete", ABX_T_OBJECT, .fields = watch_change_fields},
    {"move", ABX_T_OBJECT, .fields = watch_change_fields},
    {"dropped", ABX_T_OBJECT, .fields = watch_dropped_fields, .doc = "Events from..to were lost"},
    {0},
};

const abx_op_def files_watch_ops[] = {
    {.id = "files.watch", .events = watch_events, .effects = ABX_EFF_READ,
     .summary = "Changes below a directory (create, modify, delete, move) as server-sent events; resumable. A "
                "rename inside the tree is one move event {path, from}; abx's own temp files are never shown.",
     .http = {"GET /files/watch"}, .params = watch_params, .stream = ABX_STREAM_SSE, .since = "0.1",
     .errors = "files.not_found files.access files.io files.not_a_directory", .handler = files_watch},
    {0},
};
