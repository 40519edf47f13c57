/* tree.c — files.delete, files.move and files.copy: the ops that act on a whole entry,
 * a directory with everything below it. Before a recursive one changes anything, a
 * strict walk (walk.h, FILES_WALK_REQUIRE) checks that the call could name every entry
 * on its own; delete and copy then walk the tree again to do the work. */
#include "builtin/files/walk.h"
#include "builtin/files/results.h"
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>

#define COPY_CHUNK (256 * 1024)

/* ---- delete/move act on the entry itself ---- */

/* The workspace relative arguments are read against (canonical, the server's). */
static const char *workspace_of(const abx_ctx *ctx)
{
    abx_server_facts f;
    abx_ctx_server_facts(ctx, &f);
    return f.workspace;
}

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
    bool candidate = dir && abx_path_canon(workspace_of(ctx), dir, &cdir) == 0 &&
                     (link = files_join_path(cdir, last)) != NULL && strcmp(link, pv->canonical) != 0;
    if (candidate && !(root = files_pv_root(pv)))
        e = files_oom(r);
    else if (candidate && (!abx_path_under(root, link, &lrel) || strcmp(lrel, ".") == 0))
        e = abx_reply_error(r, ABX_E_POLICY_PATH_NOT_ALLOWED, NULL,
                            "'%s' is a symlink outside the allowed paths of its target", pv->param);
    else if (candidate && (fd = abx_jail_open_parent(pv->rootfd, lrel, &nm)) >= 0 &&
             fstatat(fd, nm, &st, AT_SYMLINK_NOFOLLOW) == 0 && S_ISLNK(st.st_mode))
        e = files_admit_paths(ctx, r, args, pv->param, cdir, NULL, NULL);
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

/* ---- the check before a recursive delete, move or copy ---- */

static files_walk_step precheck_entry(files_walk *w, const files_walk_entry *e, void *ud)
{
    (void)w;
    (void)e;
    (void)ud;
    return FILES_WALK_NEXT; /* the walker's REQUIRE check is the whole work */
}

/* Every entry below dirfd must be one the call could name as pa (abs_a being the
 * directory's value) and, when pb is set, as pb mirrored below abs_b; symlinks are
 * never followed, so they need no check of their own. The first that is not fails. */
static abx_err precheck_tree(abx_ctx *ctx, abx_reply *r, const json_t *args, int dirfd, const char *pa,
                             const char *abs_a, const char *pb, const char *abs_b)
{
    files_walk_opts o = {.ctx = ctx, .r = r, .args = args, .param = pa, .param_b = pb, .abs_b = abs_b,
                         .check = FILES_WALK_REQUIRE, .hidden = true, .strict = true};
    return files_walk_run(&o, dirfd, NULL, abs_a, abs_a, precheck_entry, NULL, NULL);
}

/* ---- files.delete ---- */

typedef struct rm_walk {
    abx_reply *r;
    int64_t removed;
} rm_walk;

/* Files and links go as they come; a directory when the walk comes back up (opts.post). */
static files_walk_step rm_entry(files_walk *walk, const files_walk_entry *e, void *ud)
{
    rm_walk *w = ud;
    if (S_ISDIR(e->st.st_mode) && !e->post)
        return FILES_WALK_NEXT;
    if (unlinkat(e->dirfd, e->name, e->post ? AT_REMOVEDIR : 0) != 0) {
        if (errno == ENOENT && !e->post)
            return FILES_WALK_NEXT; /* gone meanwhile: fine */
        files_walk_fail(walk, files_errno_reply(w->r, errno, e->abs));
        return FILES_WALK_FAIL;
    }
    w->removed++;
    return FILES_WALK_NEXT;
}

/* Remove everything below the directory dirfd (canonical abs), deepest first. */
static abx_err rm_children(rm_walk *w, int dirfd, const char *abs)
{
    files_walk_opts o = {.r = w->r, .check = FILES_WALK_NONE, .hidden = true, .post = true, .strict = true};
    return files_walk_run(&o, dirfd, NULL, abs, abs, rm_entry, w, NULL);
}

static abx_err files_delete(abx_ctx *ctx, const json_t *args, abx_reply *r)
{
    const abx_path_value *pv = files_path_value(ctx, "path", 0);
    if (!pv)
        return files_no_value(r, "path");
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
            files_fsync_dir(pfd);
        close(pfd);
        if (rc != 0) {
            abx_free(abs);
            return files_path_errno(ctx, r, err, "path");
        }
        abx_reply_json(r, json_pack("{s:s, s:s, s:I}", "path", abs, "type", "symlink", "deleted", (json_int_t)1));
        abx_free(abs);
        return ABX_OK;
    }
    e = files_open_parent_of(ctx, r, pv, false, NULL, &pfd, &name);
    if (e)
        return e;
    struct stat st;
    if (fstatat(pfd, name, &st, AT_SYMLINK_NOFOLLOW) != 0) {
        int err = errno;
        close(pfd);
        return files_path_errno(ctx, r, err, "path");
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
            e = files_path_errno(ctx, r, errno, "path");
        }
    } else if (S_ISDIR(st.st_mode)) {
        /* every entry must be deletable under the policy before the first one goes */
        int dfd = openat(pfd, name, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
        if (dfd < 0) {
            e = files_path_errno(ctx, r, errno, "path");
        } else {
            e = precheck_tree(ctx, r, args, dfd, "path", pv->canonical, NULL, NULL);
            if (!e)
                e = rm_children(&w, dfd, pv->canonical);
            close(dfd);
            if (!e && unlinkat(pfd, name, AT_REMOVEDIR) != 0)
                e = files_errno_reply(r, errno, pv->canonical);
            else if (!e)
                w.removed++;
        }
    } else if (unlinkat(pfd, name, 0) == 0) {
        w.removed = 1;
    } else {
        e = files_path_errno(ctx, r, errno, "path");
    }
    if (w.removed)
        files_fsync_dir(pfd);
    close(pfd);
    if (e)
        return e;
    abx_reply_json(r, json_pack("{s:s, s:s, s:I}", "path", pv->canonical, "type", files_type_name(st.st_mode), "deleted",
                                (json_int_t)w.removed));
    return ABX_OK;
}

/* ---- files.move ---- */

/* Processes cannot rename a deny target, a folder above one, abx's own files or the .git
 * at the top of a root (their mount namespaces pin them); neither does files.move, for
 * any principal: the file would leave the name a later process's mask is put on. */
static abx_err move_pinned(abx_ctx *ctx, abx_reply *r, const char *src, const char *dst)
{
    const char *hit = abx_ctx_move_pinned(ctx, src) ? src : abx_ctx_move_pinned(ctx, dst) ? dst : NULL;
    if (!hit)
        return ABX_OK;
    return abx_reply_error(r, ABX_E_POLICY_PATH_DENIED, NULL,
                           "%s is a denied or protected path, a folder above one, or a root's .git; it cannot be "
                           "moved or replaced",
                           hit);
}

static abx_err files_move(abx_ctx *ctx, const json_t *args, abx_reply *r)
{
    const abx_path_value *sv = files_path_value(ctx, "src", 0), *dv = files_path_value(ctx, "dst", 0);
    if (!sv || !dv)
        return files_no_value(r, sv ? "dst" : "src");
    bool overwrite = json_is_true(json_object_get(args, "overwrite"));
    int sfd = -1, dfd = -1;
    const char *sname, *dname;
    char *sabs = NULL;
    abx_err e = symlink_entry(ctx, r, args, sv, &sfd, &sname, &sabs);
    if (!e && sfd < 0) {
        e = files_open_parent_of(ctx, r, sv, false, NULL, &sfd, &sname);
        if (!e && !(sabs = abx_strdup(sv->canonical)))
            e = files_oom(r);
    }
    struct stat st, dst_st;
    if (!e && fstatat(sfd, sname, &st, AT_SYMLINK_NOFOLLOW) != 0)
        e = files_path_errno(ctx, r, errno, "src");
    if (!e && strcmp(sabs, dv->canonical) == 0)
        e = abx_reply_error(r, ABX_E_ARGS_INVALID, NULL, "src and dst are the same path (%s)", sabs);
    if (!e)
        e = move_pinned(ctx, r, sabs, dv->canonical);
    const char *below;
    if (!e && S_ISDIR(st.st_mode) && abx_path_under(sabs, dv->canonical, &below))
        e = abx_reply_error(r, ABX_E_ARGS_INVALID, NULL, "cannot move the directory %s into itself", sabs);
    if (!e)
        e = files_open_parent_of(ctx, r, dv, false, NULL, &dfd, &dname);
    bool replaced = !e && fstatat(dfd, dname, &dst_st, AT_SYMLINK_NOFOLLOW) == 0;
    if (!e && replaced && !overwrite)
        e = abx_reply_error(r, ABX_E_ARGS_INVALID, NULL, "dst %s already exists; pass overwrite=true to replace it",
                            dv->canonical);
    if (!e && S_ISDIR(st.st_mode)) { /* everything that moves leaves src and lands in dst */
        int tfd = openat(sfd, sname, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
        if (tfd < 0) {
            e = files_path_errno(ctx, r, errno, "src");
        } else {
            e = precheck_tree(ctx, r, args, tfd, "src", sabs, "dst", dv->canonical);
            close(tfd);
        }
    }
    if (!e) {
        int rc = overwrite ? renameat(sfd, sname, dfd, dname)
                           : files_rename_noreplace(sfd, sname, dfd, dname, S_ISDIR(st.st_mode));
        int err = errno;
        if (rc == 0) {
            files_fsync_dir(dfd);
            files_fsync_dir(sfd);
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
            e = files_path_errno(ctx, r, err, "src");
        }
    }
    if (sfd >= 0)
        close(sfd);
    if (dfd >= 0)
        close(dfd);
    if (!e)
        abx_reply_json(r, json_pack("{s:s, s:s, s:s, s:b}", "src", sabs, "dst", dv->canonical, "type",
                                    files_type_name(st.st_mode), "replaced", replaced));
    abx_free(sabs);
    return e;
}

/* ---- files.copy ---- */

typedef struct cp_walk {
    abx_reply *r;
    bool overwrite;
    bool durable; /* fsync each file: for a single file, not for the files of a tree */
    char *buf; /* COPY_CHUNK bytes */
    int dfds[FILES_WALK_MAX_DEPTH + 1]; /* the destination directory at each depth of the walk */
    int64_t files, dirs, links, skipped, bytes;
} cp_walk;

static abx_err cp_file(cp_walk *w, int sfd, const struct stat *sst, int ddir, const char *dname, const char *label)
{
    files_staged s;
    abx_err e = files_stage_open(&s, w->r, ddir, dname, label, (int)(sst->st_mode & 07777));
    if (e)
        return e;
    if (s.existed && !w->overwrite) {
        files_stage_abort(&s);
        return abx_reply_error(w->r, ABX_E_ARGS_INVALID, NULL, "'%s' already exists; pass overwrite=true", label);
    }
    for (;;) {
        ssize_t g = read(sfd, w->buf, COPY_CHUNK);
        if (g < 0 && errno == EINTR)
            continue;
        if (g < 0) {
            int err = errno;
            files_stage_abort(&s);
            return files_errno_reply(w->r, err, label);
        }
        if (g == 0)
            break;
        if ((e = files_stage_write(&s, w->r, label, w->buf, (size_t)g)) != ABX_OK)
            return e;
        w->bytes += g;
    }
    if ((e = files_stage_commit_ex(&s, w->r, label, !w->overwrite, w->durable)) != ABX_OK)
        return e;
    w->files++;
    return ABX_OK;
}

static abx_err cp_link(cp_walk *w, int sdir, const char *sname, int ddir, const char *dname, const char *label)
{
    char target[PATH_MAX];
    ssize_t n = readlinkat(sdir, sname, target, sizeof target - 1);
    if (n < 0)
        return files_errno_reply(w->r, errno, label);
    target[n] = '\0';
    if (symlinkat(target, ddir, dname) != 0) {
        struct stat st;
        if (errno != EEXIST || !w->overwrite)
            return errno == EEXIST
                       ? abx_reply_error(w->r, ABX_E_ARGS_INVALID, NULL, "'%s' already exists; pass overwrite=true", label)
                       : files_errno_reply(w->r, errno, label);
        if (fstatat(ddir, dname, &st, AT_SYMLINK_NOFOLLOW) == 0 && S_ISDIR(st.st_mode))
            return abx_reply_error(w->r, ABX_E_FILES_IS_A_DIRECTORY, NULL, "'%s' is a directory", label);
        if (unlinkat(ddir, dname, 0) != 0 || symlinkat(target, ddir, dname) != 0)
            return files_errno_reply(w->r, errno, label);
    }
    w->links++;
    return ABX_OK;
}

/* Make the destination directory (0700 while it fills: a read-only source directory
 * stays writable until the end) and open it. */
static abx_err cp_mkdir(cp_walk *w, int ddir, const char *dname, const char *label, int *out)
{
    if (mkdirat(ddir, dname, 0700) != 0) {
        struct stat st;
        if (errno != EEXIST)
            return files_errno_reply(w->r, errno, label);
        if (!w->overwrite)
            return abx_reply_error(w->r, ABX_E_ARGS_INVALID, NULL, "'%s' already exists; pass overwrite=true", label);
        if (fstatat(ddir, dname, &st, AT_SYMLINK_NOFOLLOW) != 0 || !S_ISDIR(st.st_mode))
            return abx_reply_error(w->r, ABX_E_FILES_NOT_A_DIRECTORY, NULL, "'%s' exists and is not a directory",
                                   label);
    }
    *out = openat(ddir, dname, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
    return *out < 0 ? files_errno_reply(w->r, errno, label) : ABX_OK;
}

/* A regular file found by the walk: opened without following, and copied only when it
 * is still the regular file the walk saw. */
static abx_err cp_walked_file(cp_walk *w, const files_walk_entry *e, int ddir)
{
    int cfd = openat(e->dirfd, e->name, O_RDONLY | O_NOFOLLOW | O_NONBLOCK | O_NOCTTY | O_CLOEXEC);
    if (cfd < 0)
        return files_errno_reply(w->r, errno, e->abs_b);
    struct stat now;
    abx_err err = ABX_OK;
    if (fstat(cfd, &now) != 0 || !S_ISREG(now.st_mode)) {
        w->skipped++; /* swapped for something else meanwhile */
    } else {
        files_clear_nonblock(cfd);
        err = cp_file(w, cfd, &now, ddir, e->name, e->abs_b);
    }
    close(cfd);
    return err;
}

/* Each entry below the source (e->abs_b is its destination): directories are made on
 * the way down and get their mode on the way up (opts.post), symlinks are copied as
 * links, FIFOs, sockets and devices are skipped. */
static files_walk_step cp_entry(files_walk *walk, const files_walk_entry *e, void *ud)
{
    cp_walk *w = ud;
    int ddir = w->dfds[e->depth];
    abx_err err = ABX_OK;
    if (e->post) {
        int fd = w->dfds[e->depth + 1];
        w->dfds[e->depth + 1] = -1;
        if (fchmod(fd, e->st.st_mode & 07777) != 0)
            err = files_errno_reply(w->r, errno, e->abs_b);
        close(fd);
        if (!err)
            w->dirs++;
    } else if (S_ISLNK(e->st.st_mode)) {
        err = cp_link(w, e->dirfd, e->name, ddir, e->name, e->abs_b);
    } else if (S_ISDIR(e->st.st_mode)) {
        err = cp_mkdir(w, ddir, e->name, e->abs_b, &w->dfds[e->depth + 1]);
    } else if (S_ISREG(e->st.st_mode)) {
        err = cp_walked_file(w, e, ddir);
    } else {
        w->skipped++;
    }
    if (err) {
        files_walk_fail(walk, err);
        return FILES_WALK_FAIL;
    }
    return FILES_WALK_NEXT;
}

/* The tree at sfd (canonical src) as dname in ddir (canonical dst): a strict walk that
 * sees every entry, hidden ones too; the policy check was precheck_tree's. */
static abx_err cp_tree(abx_ctx *ctx, cp_walk *w, int sfd, const struct stat *sst, int ddir, const char *dname,
                       const char *src, const char *dst)
{
    for (size_t i = 0; i < ABX_ARRAY_LEN(w->dfds); i++)
        w->dfds[i] = -1;
    abx_err e = cp_mkdir(w, ddir, dname, dst, &w->dfds[0]);
    files_walk_opts o = {.ctx = ctx, .r = w->r, .abs_b = dst, .check = FILES_WALK_NONE, .hidden = true,
                         .post = true, .strict = true};
    if (!e)
        e = files_walk_run(&o, sfd, NULL, src, dst, cp_entry, w, NULL);
    if (!e && fchmod(w->dfds[0], sst->st_mode & 07777) != 0)
        e = files_errno_reply(w->r, errno, dst);
    if (!e)
        w->dirs++;
    for (size_t i = 0; i < ABX_ARRAY_LEN(w->dfds); i++)
        if (w->dfds[i] >= 0)
            close(w->dfds[i]);
    return e;
}

static abx_err files_copy(abx_ctx *ctx, const json_t *args, abx_reply *r)
{
    const abx_path_value *sv = files_path_value(ctx, "src", 0), *dv = files_path_value(ctx, "dst", 0);
    if (!sv || !dv)
        return files_no_value(r, sv ? "dst" : "src");
    bool recursive = json_is_true(json_object_get(args, "recursive"));
    bool overwrite = json_is_true(json_object_get(args, "overwrite"));
    int sfd = abx_ctx_open(ctx, "src", O_RDONLY | O_NONBLOCK | O_NOCTTY, 0);
    if (sfd < 0)
        return files_path_errno(ctx, r, -sfd, "src");
    struct stat st;
    abx_err e = ABX_OK;
    const char *below;
    if (fstat(sfd, &st) != 0)
        e = files_path_errno(ctx, r, errno, "src");
    else if (S_ISDIR(st.st_mode) && !recursive)
        e = abx_reply_error(r, ABX_E_FILES_IS_A_DIRECTORY, NULL, "src %s is a directory; pass recursive=true",
                            sv->canonical);
    else if (!S_ISDIR(st.st_mode) && !S_ISREG(st.st_mode))
        e = abx_reply_error(r, ABX_E_FILES_NOT_REGULAR, NULL, "src %s is a %s; only files and directories are copied",
                            sv->canonical, files_type_name(st.st_mode));
    else if (strcmp(sv->canonical, dv->canonical) == 0)
        e = abx_reply_error(r, ABX_E_ARGS_INVALID, NULL, "src and dst are the same path (%s)", sv->canonical);
    else if (S_ISDIR(st.st_mode) && abx_path_under(sv->canonical, dv->canonical, &below))
        e = abx_reply_error(r, ABX_E_ARGS_INVALID, NULL, "cannot copy the directory %s into itself", sv->canonical);
    if (e) {
        close(sfd);
        return e;
    }
    files_clear_nonblock(sfd);
    int dfd;
    const char *dname;
    struct stat dst_st;
    e = files_open_parent_of(ctx, r, dv, false, NULL, &dfd, &dname);
    if (!e && !overwrite && fstatat(dfd, dname, &dst_st, AT_SYMLINK_NOFOLLOW) == 0)
        e = abx_reply_error(r, ABX_E_ARGS_INVALID, NULL, "dst %s already exists; pass overwrite=true", dv->canonical);
    if (!e && S_ISDIR(st.st_mode)) {
        e = precheck_tree(ctx, r, args, sfd, "src", sv->canonical, "dst", dv->canonical);
    }
    cp_walk w = {.r = r, .overwrite = overwrite, .durable = !S_ISDIR(st.st_mode)};
    if (!e && !(w.buf = abx_malloc(COPY_CHUNK)))
        e = files_oom(r);
    if (!e && S_ISDIR(st.st_mode))
        e = cp_tree(ctx, &w, sfd, &st, dfd, dname, sv->canonical, dv->canonical);
    else if (!e)
        e = cp_file(&w, sfd, &st, dfd, dname, dv->canonical);
    if (!e)
        files_fsync_dir(dfd);
    abx_free(w.buf);
    close(sfd);
    if (dfd >= 0)
        close(dfd);
    if (e)
        return e;
    abx_reply_json(r, json_pack("{s:s, s:s, s:s, s:I, s:I, s:I, s:I, s:I}", "src", sv->canonical, "dst", dv->canonical,
                                "type", files_type_name(st.st_mode), "files", (json_int_t)w.files, "directories",
                                (json_int_t)w.dirs, "symlinks", (json_int_t)w.links, "skipped", (json_int_t)w.skipped,
                                "bytes", (json_int_t)w.bytes));
    return ABX_OK;
}


FILES_GITCFG_WRAP(files_move, "dst")
FILES_GITCFG_WRAP(files_copy, "dst")

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

/* results: what each op answers */
FILES_WARNING_ROWS;

static const abx_param move_result[] = {
    {"src", ABX_T_STRING, .required = true},
    {"dst", ABX_T_STRING, .required = true},
    {"type", ABX_T_ENUM, .required = true, .choices = FILES_TYPE_CHOICES},
    {"replaced", ABX_T_BOOL, .required = true, .doc = "Something at dst was replaced"},
    FILES_WARNINGS_FIELD,
    {0},
};

static const abx_param copy_result[] = {
    {"src", ABX_T_STRING, .required = true},
    {"dst", ABX_T_STRING, .required = true},
    {"type", ABX_T_ENUM, .required = true, .choices = FILES_TYPE_CHOICES},
    {"files", ABX_T_INT, .required = true},
    {"directories", ABX_T_INT, .required = true},
    {"symlinks", ABX_T_INT, .required = true},
    {"skipped", ABX_T_INT, .required = true},
    {"bytes", ABX_T_INT, .required = true},
    FILES_WARNINGS_FIELD,
    {0},
};

static const abx_param delete_result[] = {
    {"path", ABX_T_STRING, .required = true},
    {"type", ABX_T_ENUM, .required = true, .choices = FILES_TYPE_CHOICES},
    {"deleted", ABX_T_INT, .required = true, .doc = "Entries removed"},
    {0},
};

const abx_op_def files_tree_ops[] = {
    {.id = "files.move", .result = move_result, .effects = ABX_EFF_READ | ABX_EFF_WRITE | ABX_EFF_DELETE,
     .summary = "Rename a file or directory (no replacement unless overwrite); same filesystem only."
                " A result carries warnings (files.git_config_hook) when the file is a git config setting core.fsmonitor, core.hooksPath or an include path.",
     .http = {"POST /files/move"}, .params = move_params, .limits = ABX_LIM_RATE | ABX_LIM_CONCURRENCY,
     .since = "0.1",
     .errors = "files.not_found files.access files.io files.is_a_directory files.not_a_directory",
     .handler = files_move_w},
    {.id = "files.copy", .result = copy_result, .effects = ABX_EFF_READ | ABX_EFF_WRITE,
     .summary = "Copy a file, or a directory tree with recursive; modes kept, symlinks copied as symlinks."
                " A result carries warnings (files.git_config_hook) when the file is a git config setting core.fsmonitor, core.hooksPath or an include path.",
     .http = {"POST /files/copy"}, .params = copy_params, .limits = ABX_LIM_RATE | ABX_LIM_CONCURRENCY,
     .since = "0.1",
     .errors = "files.not_found files.access files.io files.no_space files.is_a_directory files.not_a_directory "
               "files.not_regular",
     .handler = files_copy_w},
    {.id = "files.delete", .result = delete_result, .effects = ABX_EFF_DELETE,
     .summary = "Delete a file, symlink or empty directory; a non-empty directory only with recursive.",
     .http = {"DELETE /files"}, .params = delete_params, .limits = ABX_LIM_RATE | ABX_LIM_CONCURRENCY,
     .since = "0.1",
     .errors = "files.not_found files.access files.io files.not_a_directory", .handler = files_delete},
    {0},
};
