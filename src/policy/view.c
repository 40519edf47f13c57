/* view.c — what handlers ask after the decision: whether an open file is a denied
 * identity (literal deny paths and protected files are bound by st_dev, st_ino at
 * compile time), whether a path is hidden or visible to listings, and the file-system
 * view (mounts, masks, pins) a confined process gets. The identity lookups and the
 * walk up from a file's folder live in identset.c. */
#include "policy/internal.h"
#include "core/util.h"
#include "policy/paths.h"
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

bool abx_policy_ident_denied(const abx_policy *p, int slot, const abx_op *op, const abx_decision *d,
                             const struct stat *st)
{
    return p->n_idents && abx_pol_ident_lookup(p, slot, op, d, st, false, NULL);
}

int abx_policy_fd_check_st(const abx_policy *p, int slot, const abx_op *op, const abx_decision *d, int fd, int dirfd,
                           struct stat *fst)
{
    if (!p->n_idents)
        return 0;
    struct stat st;
    bool have = false;
    if (fd >= 0 && fstat(fd, &st) == 0) {
        if (abx_pol_ident_lookup(p, slot, op, d, &st, false, NULL))
            return -ABX_EIDENT;
        if (S_ISDIR(st.st_mode))
            dirfd = fd;
        have = true;
    }
    if (p->has_subtree_idents && dirfd >= 0 && abx_pol_under_denied_dir(p, slot, op, d, dirfd))
        return -ABX_EIDENT;
    if (have && fst)
        *fst = st;
    return have;
}

int abx_policy_fd_check(const abx_policy *p, int slot, const abx_op *op, const abx_decision *d, int fd, int dirfd)
{
    int rc = abx_policy_fd_check_st(p, slot, op, d, fd, dirfd, NULL);
    return rc < 0 ? rc : 0;
}

bool abx_policy_path_visible(const abx_policy *p, int slot, const abx_op *op, const abx_decision *d,
                             const char *canonical)
{
    if (d->err || abx_policy_path_hidden(p, slot, op, canonical))
        return false;
    for (size_t i = 0; i < d->n_admitting; i++) {
        const abx_stmt *s = &p->allow[d->admitting[i]];
        if (abx_pol_pattern_list_match(s->paths[ABX_ACC_IDX_READ], s->n_paths[ABX_ACC_IDX_READ], canonical, NULL))
            return true;
    }
    return false;
}

static bool list_add(char ***arr, size_t *n, const char *s)
{
    for (size_t i = 0; i < *n; i++)
        if (strcmp((*arr)[i], s) == 0)
            return true;
    char **g = abx_realloc(*arr, (*n + 2) * sizeof *g);
    if (!g)
        return false;
    *arr = g;
    if (!(g[*n] = abx_strdup(s)))
        return false;
    (*n)++;
    g[*n] = NULL;
    return true;
}

/* The outermost of roots that holds path, or NULL. */
static const char *outer_root(char *const *roots, size_t n, const char *path)
{
    const char *best = NULL;
    for (size_t i = 0; i < n; i++)
        if (abx_pol_within(roots[i], path) && (!best || strlen(roots[i]) < strlen(best)))
            best = roots[i];
    return best;
}

/* Pin each folder between path and the outermost write root that holds it, and path
 * itself when self: in the child's mount namespace they are mount points, which no
 * rename or removal can touch (EBUSY), so a confined process cannot carry a denied file
 * away from its name, for itself or for a later process. Renames need write access to
 * both parents, so outside write roots there is nothing to pin. */
static bool add_pins(abx_fs_view *v, const char *path, bool self)
{
    const char *root = outer_root(v->rw, v->n_rw, path);
    char buf[PATH_MAX];
    size_t rl = root ? (strcmp(root, "/") == 0 ? 0 : strlen(root)) : 0;
    if (!root || strlen(path) <= rl + 1 || strlen(path) >= sizeof buf)
        return true;
    memcpy(buf, path, strlen(path) + 1);
    struct stat st;
    for (char *s = buf + rl + 1; (s = strchr(s, '/')) != NULL; *s++ = '/') {
        *s = '\0';
        if (lstat(buf, &st) == 0 && S_ISDIR(st.st_mode) && !list_add(&v->pins, &v->n_pins, buf))
            return false;
    }
    if (self && lstat(path, &st) == 0 && !S_ISLNK(st.st_mode) && !list_add(&v->pins, &v->n_pins, path))
        return false;
    return true;
}

/* A file to hide (mask) or only to keep in place (pin), when the call's roots hold it. */
static int view_place(abx_fs_view *v, const char *path, bool mask)
{
    if (!outer_root(v->rw, v->n_rw, path) && !outer_root(v->ro, v->n_ro, path))
        return 0;
    if (!add_pins(v, path, !mask) || (mask && !list_add(&v->masks, &v->n_masks, path)))
        return -1;
    return 0;
}

/* The name of a deny target no longer leads to the file recorded at compile time: the
 * host (outside abx's pins) moved, replaced or deleted it. Deleted (no link left):
 * nothing to follow. Otherwise the compile-time descriptor says where the file is now,
 * and the mask goes there too; a file that cannot be found again refuses the spawn. */
static int view_follow(abx_fs_view *v, const abx_mask_ident *m, bool mask)
{
    struct stat st, now;
    if (fstat(m->fd, &st) == 0 && st.st_nlink == 0)
        return 0;
    char link[64], where[PATH_MAX];
    snprintf(link, sizeof link, "/proc/self/fd/%d", m->fd);
    ssize_t n = readlink(link, where, sizeof where - 1);
    if (n > 0)
        where[n] = '\0';
    if (n <= 0 || where[0] != '/' || lstat(where, &now) != 0 || now.st_dev != m->dev || now.st_ino != m->ino) {
        v->moved = abx_strdup(m->path);
        return v->moved ? -2 : -1;
    }
    return view_place(v, where, mask);
}

/* Whether one of the deny statements naming m applies to this call. */
static bool mask_ident_applies(const abx_policy *p, int slot, const abx_op *op, const abx_mask_ident *m)
{
    for (size_t i = 0; i < m->n_stmts; i++) {
        const abx_stmt *ds = &p->deny[m->stmts[i]];
        if (abx_pol_deny_applies(p, ds, op, slot))
            return true;
    }
    return false;
}

/* Deny targets: masked when a statement naming them applies to the call, pinned in
 * place whatever principal or op they were written for (any process could otherwise
 * move a folder for another principal's later process). */
static int view_deny_targets(const abx_policy *p, int slot, const abx_op *op, abx_fs_view *v)
{
    for (size_t i = 0; i < p->n_mask_ident; i++) {
        const abx_mask_ident *m = &p->mask_ident[i];
        bool mask = mask_ident_applies(p, slot, op, m);
        struct stat st;
        bool exists = lstat(m->path, &st) == 0;
        if (m->known && !(exists && st.st_dev == m->dev && st.st_ino == m->ino)) {
            int rc = view_follow(v, m, mask);
            if (rc != 0)
                return rc;
        }
        if (exists && view_place(v, m->path, mask) != 0)
            return -1;
    }
    return 0;
}

/* .git at the top of each write root: pinned (a directory) or read-only (a gitfile),
 * its hooks and config read-only — code and settings the host runs later. A repository
 * without a hooks folder gets an empty one (owned like .git), which git ignores: else the
 * process could create it and plant a hook where no mount could be put. */
static bool view_git(abx_fs_view *v)
{
    struct stat st, hooks;
    char path[PATH_MAX];
    for (size_t i = 0; i < v->n_rw; i++) {
        const char *top = strcmp(v->rw[i], "/") == 0 ? "" : v->rw[i];
        snprintf(path, sizeof path, "%s/.git", top);
        bool found = lstat(path, &st) == 0, dir = found && S_ISDIR(st.st_mode);
        if ((dir || (found && S_ISREG(st.st_mode))) &&
            !list_add(dir ? &v->pins : &v->readonly, dir ? &v->n_pins : &v->n_readonly, path))
            return false;
        if (dir && strlen(path) + sizeof "/hooks" <= sizeof path) {
            memcpy(path + strlen(path), "/hooks", sizeof "/hooks"); /* fits: checked above */
            if (lstat(path, &hooks) != 0 && errno == ENOENT && mkdir(path, 0755) == 0 &&
                lchown(path, st.st_uid, st.st_gid) != 0)
                rmdir(path);
        }
        static const char *const ro_names[] = {".git/hooks", ".git/config"};
        for (size_t k = 0; k < ABX_ARRAY_LEN(ro_names); k++) {
            snprintf(path, sizeof path, "%s/%s", top, ro_names[k]);
            if (lstat(path, &st) == 0 && !S_ISLNK(st.st_mode) && !list_add(&v->readonly, &v->n_readonly, path))
                return false;
        }
    }
    return true;
}

int abx_policy_fs_view(const abx_policy *p, int slot, const abx_op *op, const abx_decision *d, abx_fs_view *v)
{
    memset(v, 0, sizeof *v);
    if (d->err || d->chosen < 0 || (size_t)d->chosen >= p->n_allow)
        return -1;
    const abx_stmt *s = &p->allow[d->chosen];
    for (int k = 0; k < ABX_ACC_IDX__N; k++)
        for (size_t i = 0; i < s->n_paths[k]; i++) {
            const char *root = p->roots[s->paths[k][i].root];
            if (k == ABX_ACC_IDX_READ ? !list_add(&v->ro, &v->n_ro, root) : !list_add(&v->rw, &v->n_rw, root))
                goto oom;
        }
    v->cwd_root = v->n_rw ? v->rw[0] : v->n_ro ? v->ro[0] : NULL;
    int rc = view_deny_targets(p, slot, op, v);
    if (rc == -2) {
        char *moved = v->moved;
        v->moved = NULL;
        abx_fs_view_release(v);
        v->moved = moved;
        return -2;
    }
    if (rc != 0)
        goto oom;
    struct stat st;
    for (size_t i = 0; i < p->n_protected; i++) { /* looked up only when the roots hold it */
        const char *f = p->protected_files[i];
        if ((outer_root(v->rw, v->n_rw, f) || outer_root(v->ro, v->n_ro, f)) && lstat(f, &st) == 0 &&
            view_place(v, f, true) != 0)
            goto oom;
    }
    if (!view_git(v))
        goto oom;
    return 0;
oom:
    abx_fs_view_release(v);
    return -1;
}

void abx_fs_view_release(abx_fs_view *v)
{
    char **lists[] = {v->ro, v->rw, v->masks, v->readonly, v->pins};
    size_t counts[] = {v->n_ro, v->n_rw, v->n_masks, v->n_readonly, v->n_pins};
    for (size_t l = 0; l < ABX_ARRAY_LEN(lists); l++) {
        for (size_t i = 0; i < counts[l]; i++)
            abx_free(lists[l][i]);
        abx_free(lists[l]);
    }
    abx_free(v->moved);
    memset(v, 0, sizeof *v);
}

bool abx_policy_move_pinned(const abx_policy *p, const char *path)
{
    struct stat st; /* a name with no file behind it carries nothing away */
    for (size_t i = 0; i < p->n_mask_ident; i++)
        if (abx_pol_within(path, p->mask_ident[i].path) && lstat(p->mask_ident[i].path, &st) == 0)
            return true;
    for (size_t i = 0; i < p->n_protected; i++)
        if (abx_pol_within(path, p->protected_files[i]) && lstat(p->protected_files[i], &st) == 0)
            return true;
    for (size_t i = 0; i < p->n_roots; i++) {
        const char *r = p->roots[i];
        size_t n = strlen(r);
        if (strncmp(path, r, n) == 0 && strcmp(path + (strcmp(r, "/") == 0 ? 0 : n), "/.git") == 0)
            return true;
    }
    return false;
}

bool abx_policy_path_hidden(const abx_policy *p, int slot, const abx_op *op, const char *canonical)
{
    for (size_t i = 0; i < p->n_deny; i++) {
        const abx_stmt *s = &p->deny[i];
        if (!s->has_paths || !abx_pol_deny_applies(p, s, op, slot))
            continue;
        for (int a = 0; a < ABX_ACC_IDX__N; a++)
            if (abx_pol_pattern_list_match(s->paths[a], s->n_paths[a], canonical, NULL))
                return true;
    }
    return abx_pol_protected_path(p, canonical, ABX_ACC_READ);
}
