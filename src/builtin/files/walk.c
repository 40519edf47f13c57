/* walk.c — the one jailed directory walker (rules in walk.h). An explicit stack of
 * directories, each with its sorted names, so a walk can be driven one entry at a time
 * (archive streams a tree as the client reads) or with a callback (files_walk_run). */
#include "builtin/files/walk.h"
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

typedef struct frame {
    int fd;             /* this directory; the start's is borrowed */
    char **names;       /* sorted, without "." and ".." */
    size_t n, i;
    char *rel, *abs, *abs_b; /* this directory's paths (rel "" at an empty prefix) */
    char *name;         /* its name in the parent frame (NULL for the start) */
    struct stat st;     /* its lstat, for the post delivery */
} frame;

struct files_walk {
    files_walk_opts o;
    frame *stack;
    int n;              /* frames in use; stack[0] is the start */
    /* the entry delivered last (owned strings) */
    char *rel, *abs, *abs_b, *name;
    struct stat st;
    int dirfd, depth;
    bool enter;         /* it is a directory to enter on the next call */
    bool stopped, truncated;
    abx_err err;
    int64_t visited, taken, bytes;
};

static int cmp_names(const void *a, const void *b) { return strcmp(*(char *const *)a, *(char *const *)b); }

static void free_names(char **names, size_t n)
{
    for (size_t i = 0; i < n; i++)
        abx_free(names[i]);
    abx_free(names);
}

/* Names in a directory (rule 8): 0 or -errno. */
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
    if (rc < 0) {
        free_names(names, n);
        return rc;
    }
    if (names)
        qsort(names, n, sizeof *names, cmp_names);
    *out = names;
    *count = n;
    return 0;
}

static void frame_release(frame *f, bool close_fd)
{
    if (close_fd && f->fd >= 0)
        close(f->fd);
    free_names(f->names, f->n);
    abx_free(f->rel);
    abx_free(f->abs);
    abx_free(f->abs_b);
    abx_free(f->name);
    memset(f, 0, sizeof *f);
    f->fd = -1;
}

static void cur_release(files_walk *w)
{
    abx_free(w->rel);
    abx_free(w->abs);
    abx_free(w->abs_b);
    abx_free(w->name);
    w->rel = w->abs = w->abs_b = w->name = NULL;
}

/* End the walk with an error: into opts.r when there is one. */
static int walk_fail_errno(files_walk *w, int err, const char *label)
{
    w->err = w->o.r ? files_errno_reply(w->o.r, err, label) : abx_err_from_errno(err);
    return -1;
}

static int walk_fail_oom(files_walk *w)
{
    if (!w->o.r && !w->o.strict) { /* a lenient walk without a reply ends where it is */
        w->stopped = w->truncated = true;
        return 0;
    }
    w->err = w->o.r ? files_oom(w->o.r) : ABX_E_SERVER_UNAVAILABLE;
    return -1;
}

files_walk *files_walk_begin(const files_walk_opts *o, int dirfd, const char *prefix, const char *abs, int *err)
{
    files_walk *w = abx_calloc(1, sizeof *w);
    int cap = (o->max_depth > 0 ? o->max_depth : FILES_WALK_MAX_DEPTH) + 1;
    *err = ENOMEM;
    if (!w || !(w->stack = abx_calloc((size_t)cap, sizeof *w->stack))) {
        abx_free(w);
        return NULL;
    }
    w->o = *o;
    if (w->o.max_depth <= 0)
        w->o.max_depth = FILES_WALK_MAX_DEPTH;
    frame *f = &w->stack[0];
    f->fd = dirfd;
    f->rel = abx_strdup(prefix ? prefix : "");
    f->abs = abx_strdup(abs);
    f->abs_b = o->abs_b ? abx_strdup(o->abs_b) : NULL;
    w->n = 1;
    int rc = f->rel && f->abs && (!o->abs_b || f->abs_b) ? dir_names(dirfd, &f->names, &f->n) : -ENOMEM;
    if (rc < 0) {
        *err = -rc;
        frame_release(f, false);
        abx_free(w->stack);
        abx_free(w);
        return NULL;
    }
    return w;
}

/* Rule 4: whether to deliver the entry just stat'ed (1), skip it (0), or fail (-1). */
static int entry_allowed(files_walk *w)
{
    abx_ctx *ctx = w->o.ctx;
    bool link = S_ISLNK(w->st.st_mode);
    switch (w->o.check) {
    case FILES_WALK_ADMIT:
        if (link) /* its canonical path is its target: only its own name is held */
            return !abx_ctx_path_hidden(ctx, w->abs);
        return files_admit_paths(ctx, NULL, w->o.args, w->o.param, w->abs, NULL, NULL) == ABX_OK &&
               !builtin_ident_denied(ctx, &w->st);
    case FILES_WALK_VISIBLE:
        return abx_ctx_path_visible(ctx, w->abs) && (link || !builtin_ident_denied(ctx, &w->st));
    case FILES_WALK_REQUIRE:
        if (link) /* never followed: the link itself goes with its directory */
            return 1;
        if ((w->err = files_admit_paths(ctx, w->o.r, w->o.args, w->o.param, w->abs, w->o.param_b, w->abs_b)))
            return -1;
        if (builtin_ident_denied(ctx, &w->st)) { /* a denied file under another name */
            walk_fail_errno(w, ABX_EIDENT, w->abs);
            return -1;
        }
        return 1;
    case FILES_WALK_NONE:
        break;
    }
    return 1;
}

/* Enter the directory delivered last (rules 1, 5, 9): push its frame. 0 or -1. */
static int descend(files_walk *w)
{
    if (w->depth + 1 >= w->o.max_depth) {
        if (!w->o.strict)
            return 0;
        w->err = abx_reply_error(w->o.r, ABX_E_FILES_IO, NULL, "the tree is deeper than %d levels", w->o.max_depth);
        return -1;
    }
    int fd = openat(w->dirfd, w->name, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
    frame *f = &w->stack[w->n];
    int rc = fd < 0 ? -errno : dir_names(fd, &f->names, &f->n);
    if (rc < 0) {
        if (fd >= 0)
            close(fd);
        return w->o.strict ? walk_fail_errno(w, -rc, w->abs) : 0;
    }
    f->fd = fd;
    f->rel = w->rel;
    f->abs = w->abs;
    f->abs_b = w->abs_b;
    f->name = w->name;
    f->st = w->st;
    w->rel = w->abs = w->abs_b = w->name = NULL; /* the frame owns them now */
    w->n++;
    return 0;
}

/* Leave the top directory; with opts.post deliver it again. 1 delivered, 0 not. */
static int ascend(files_walk *w, files_walk_entry *e)
{
    frame *f = &w->stack[--w->n];
    if (!w->o.post) {
        frame_release(f, true);
        return 0;
    }
    close(f->fd);
    f->fd = -1;
    w->rel = f->rel;
    w->abs = f->abs;
    w->abs_b = f->abs_b;
    w->name = f->name;
    w->st = f->st;
    f->rel = f->abs = f->abs_b = f->name = NULL;
    frame_release(f, false);
    *e = (files_walk_entry){.dirfd = w->stack[w->n - 1].fd, .name = w->name, .rel = w->rel, .abs = w->abs,
                            .abs_b = w->abs_b, .st = w->st, .depth = w->n - 1, .post = true};
    return 1;
}

/* Paths of the name in the top frame into w's current entry. 0 or -1 (out of memory). */
static int entry_paths(files_walk *w, const frame *top, const char *nm)
{
    w->rel = top->rel[0] ? abx_asprintf("%s/%s", top->rel, nm) : abx_strdup(nm);
    w->abs = files_join_path(top->abs, nm);
    w->abs_b = top->abs_b ? files_join_path(top->abs_b, nm) : NULL;
    w->name = abx_strdup(nm);
    return w->rel && w->abs && w->name && (!top->abs_b || w->abs_b) ? 0 : -1;
}

int files_walk_next(files_walk *w, files_walk_entry *e)
{
    if (w->enter) {
        w->enter = false;
        if (descend(w) < 0)
            return -1;
    }
    cur_release(w);
    while (!w->err && !w->stopped) {
        frame *top = &w->stack[w->n - 1];
        if (top->i == top->n) {
            if (w->n == 1)
                return 0;
            if (ascend(w, e))
                return 1;
            continue;
        }
        const char *nm = top->names[top->i++];
        if (!w->o.hidden && nm[0] == '.')
            continue;
        if (w->o.cancellable && ++w->visited % FILES_WALK_CANCEL_EVERY == 0 && abx_ctx_cancelled(w->o.ctx)) {
            w->stopped = w->truncated = true;
            break;
        }
        if (fstatat(top->fd, nm, &w->st, AT_SYMLINK_NOFOLLOW) != 0)
            continue; /* vanished meanwhile */
        if (entry_paths(w, top, nm) < 0) {
            cur_release(w);
            return walk_fail_oom(w);
        }
        *e = (files_walk_entry){.dirfd = top->fd, .name = w->name, .rel = w->rel, .abs = w->abs,
                                .abs_b = w->abs_b, .st = w->st, .depth = w->n - 1};
        int ok = w->o.filter && w->o.filter(e, w->o.filter_ud) ? 0 : entry_allowed(w);
        if (ok < 0)
            return -1;
        if (ok == 0) {
            cur_release(w);
            continue;
        }
        w->dirfd = top->fd;
        w->depth = w->n - 1;
        w->enter = S_ISDIR(w->st.st_mode); /* never a symlink: the stat did not follow it */
        return 1;
    }
    return w->err ? -1 : 0;
}

void files_walk_prune(files_walk *w) { w->enter = false; }

bool files_walk_take(files_walk *w)
{
    if (w->o.max_entries > 0 && w->taken >= w->o.max_entries) {
        files_walk_stop(w, true);
        return false;
    }
    w->taken++;
    return true;
}

bool files_walk_charge(files_walk *w, int64_t bytes)
{
    w->bytes += bytes;
    if (w->o.max_bytes > 0 && w->bytes > w->o.max_bytes) {
        files_walk_stop(w, true);
        return false;
    }
    return true;
}

void files_walk_stop(files_walk *w, bool truncated)
{
    w->stopped = true;
    w->enter = false;
    w->truncated = w->truncated || truncated;
}

void files_walk_fail(files_walk *w, abx_err e)
{
    w->err = e ? e : ABX_E_SERVER_INTERNAL;
    w->enter = false;
}

bool files_walk_truncated(const files_walk *w) { return w->truncated; }

abx_err files_walk_error(const files_walk *w) { return w->err; }

void files_walk_end(files_walk *w)
{
    if (!w)
        return;
    cur_release(w);
    while (w->n > 1)
        frame_release(&w->stack[--w->n], true);
    frame_release(&w->stack[0], false); /* the start's fd is the caller's */
    abx_free(w->stack);
    abx_free(w);
}

abx_err files_walk_run(const files_walk_opts *o, int dirfd, const char *prefix, const char *abs, const char *label,
                       files_walk_fn fn, void *ud, bool *truncated)
{
    int err;
    if (truncated)
        *truncated = false;
    files_walk *w = files_walk_begin(o, dirfd, prefix, abs, &err);
    if (!w)
        return o->r ? (err == ENOMEM ? files_oom(o->r) : files_errno_reply(o->r, err, abs ? abs : label))
                    : abx_err_from_errno(err);
    files_walk_entry e;
    int rc;
    while ((rc = files_walk_next(w, &e)) > 0) {
        files_walk_step s = fn(w, &e, ud);
        if (s == FILES_WALK_PRUNE)
            files_walk_prune(w);
        else if (s == FILES_WALK_STOP)
            files_walk_stop(w, false);
        else if (s == FILES_WALK_FAIL && !w->err)
            files_walk_fail(w, ABX_E_SERVER_INTERNAL);
    }
    abx_err e2 = w->err;
    if (truncated)
        *truncated = w->truncated;
    files_walk_end(w);
    return e2;
}
