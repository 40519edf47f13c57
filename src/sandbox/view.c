/* view.c — a process's own file-system view (issue 25): a tmpfs root holding only the
 * system directories, /etc, /proc, a few devices, and the process's roots (read and
 * write roots, its TMPDIR and HOME), each bound at its own path, then pivot_root into it.
 * Landlock cannot govern connect() on a pathname Unix socket (up to ABI 7), so this view
 * is what keeps a process from the host's sockets (a container runtime's, the system
 * bus, abx's own): a path outside its roots does not exist for it. With the view in
 * place seccomp lets it make Unix sockets (its own dev server in its workspace); without
 * (no mount namespace, or a step failed) they stay refused. Abstract sockets are per
 * network namespace, and Landlock (ABI >= 6) scopes them besides.
 *
 * The parent plans (paths, allocation); the child, sharing abx's memory, only runs the
 * plan's system calls (abx__view_enter). */
#include "sandbox/sandbox_int.h"
#include "core/util.h"
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mount.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <unistd.h>

enum { V_MKDIR, V_MKFILE, V_SYMLINK, V_BIND };

static bool add(abx_view *v, int kind, const char *src, const char *path)
{
    if (v->n == v->cap) {
        size_t cap = v->cap ? v->cap * 2 : 64;
        abx_view_op *g = abx_realloc(v->ops, cap * sizeof *g);
        if (!g)
            return false;
        v->ops = g;
        v->cap = cap;
    }
    char *dst = abx_asprintf("%s%s", v->stage, path);
    char *s = src ? abx_strdup(src) : NULL;
    if (!dst || (src && !s)) {
        abx_free(dst);
        abx_free(s);
        return false;
    }
    v->ops[v->n++] = (abx_view_op){kind, s, dst};
    return true;
}

/* the directories above path (not path itself), top down */
static bool add_parents(abx_view *v, const char *path)
{
    char buf[PATH_MAX];
    snprintf(buf, sizeof buf, "%s", path);
    for (char *p = strchr(buf + 1, '/'); p; p = strchr(p + 1, '/')) {
        *p = '\0';
        bool ok = add(v, V_MKDIR, NULL, buf);
        *p = '/';
        if (!ok)
            return false;
    }
    return true;
}

/* path as it is on the host: a symbolic link copied, a directory or file bound */
static bool add_path(abx_view *v, const char *path)
{
    struct stat st;
    if (lstat(path, &st) != 0)
        return errno == ENOENT; /* a system directory this machine lacks */
    if (!add_parents(v, path))
        return false;
    if (S_ISLNK(st.st_mode)) {
        char target[PATH_MAX];
        ssize_t n = readlink(path, target, sizeof target - 1);
        if (n <= 0)
            return false;
        target[n] = '\0';
        return add(v, V_SYMLINK, target, path);
    }
    return add(v, S_ISDIR(st.st_mode) ? V_MKDIR : V_MKFILE, NULL, path) && add(v, V_BIND, path, path);
}

static bool under(const char *path, const char *root)
{
    size_t n = strlen(root);
    return strncmp(path, root, n) == 0 && (path[n] == '\0' || path[n] == '/' || (n == 1 && root[0] == '/'));
}

static int by_length(const void *a, const void *b)
{
    size_t x = strlen(*(char *const *)a), y = strlen(*(char *const *)b);
    return x < y ? -1 : x > y;
}

bool abx__view_covers(const abx_spawn_req *req)
{
    const abx_confine *c = req->confine;
    if (!req->cwd_path || req->cwd_fd < 0)
        return true;
    for (size_t i = 0; i < c->n_read; i++)
        if (under(req->cwd_path, c->read_roots[i]))
            return true;
    for (size_t i = 0; i < c->n_write; i++)
        if (under(req->cwd_path, c->write_roots[i]))
            return true;
    return (req->tmpdir && under(req->cwd_path, req->tmpdir)) || (req->home && under(req->cwd_path, req->home));
}

void abx__view_free(abx_view *v)
{
    for (size_t i = 0; i < v->n; i++) {
        abx_free(v->ops[i].src);
        abx_free(v->ops[i].dst);
    }
    abx_free(v->ops);
    memset(v, 0, sizeof *v);
}

int abx__view_plan(const abx_sandbox *sb, const abx_spawn_req *req, abx_view *v)
{
    const abx_confine *c = req->confine;
    memset(v, 0, sizeof *v);
    snprintf(v->stage, sizeof v->stage, "%s/view", sb->runtime_dir);
    static const char *const sys[] = {"/usr", "/lib", "/lib32", "/lib64", "/libx32", "/bin", "/sbin", "/etc",
                                      "/proc"};
    static const char *const dev[] = {"/dev/null", "/dev/zero", "/dev/urandom", "/dev/random", "/dev/tty",
                                      "/dev/full"};
    static const char *const links[][2] = {{"/proc/self/fd", "/dev/fd"}, {"/proc/self/fd/0", "/dev/stdin"},
                                           {"/proc/self/fd/1", "/dev/stdout"}, {"/proc/self/fd/2", "/dev/stderr"}};
    const char *roots[512];
    size_t n = 0;
    for (size_t i = 0; i < c->n_read && n < 500; i++)
        roots[n++] = c->read_roots[i];
    for (size_t i = 0; i < c->n_write && n < 500; i++)
        roots[n++] = c->write_roots[i];
    if (req->tmpdir)
        roots[n++] = req->tmpdir;
    if (req->home)
        roots[n++] = req->home;
    if (!abx__view_covers(req) || c->n_read + c->n_write >= 500)
        return -1; /* a working directory outside the view: no view (Unix sockets stay refused) */
    qsort(roots, n, sizeof *roots, by_length); /* a root before the roots inside it */
    bool ok = add(v, V_MKDIR, NULL, "/tmp") && add(v, V_MKDIR, NULL, "/dev");
    for (size_t i = 0; ok && i < ABX_ARRAY_LEN(sys); i++)
        ok = add_path(v, sys[i]);
    for (size_t i = 0; ok && i < ABX_ARRAY_LEN(dev); i++)
        ok = add_path(v, dev[i]);
    for (size_t i = 0; ok && i < ABX_ARRAY_LEN(links); i++)
        ok = add(v, V_SYMLINK, links[i][0], links[i][1]);
    if (ok && req->ctty)
        ok = add_path(v, "/dev/pts");
    for (size_t i = 0; ok && i < n; i++)
        ok = add_path(v, roots[i]);
    if (!ok)
        abx__view_free(v);
    return ok ? 0 : -1;
}

/* ---- the child ---- */

int abx__view_enter(const abx_view *v)
{
    if (mount("abx-view", v->stage, "tmpfs", MS_NOSUID | MS_NODEV, "mode=0755,size=1m") != 0)
        return -1;
    for (size_t i = 0; i < v->n; i++) {
        const abx_view_op *o = &v->ops[i];
        int rc = 0;
        if (o->kind == V_MKDIR) {
            rc = mkdir(o->dst, 0755) == 0 || errno == EEXIST ? 0 : -1;
        } else if (o->kind == V_MKFILE) {
            int fd = open(o->dst, O_WRONLY | O_CREAT | O_CLOEXEC | O_NOFOLLOW, 0644);
            rc = fd >= 0 ? close(fd) : -1;
        } else if (o->kind == V_SYMLINK) {
            rc = symlink(o->src, o->dst) == 0 || errno == EEXIST ? 0 : -1;
        } else {
            rc = mount(o->src, o->dst, NULL, MS_BIND | MS_REC, NULL);
        }
        if (rc != 0)
            return -1;
    }
    /* the tmpfs becomes / (the old root stacked on it, then detached): nothing of the
     * host outside the bound paths is left to name */
    if (chdir(v->stage) != 0 || syscall(SYS_pivot_root, ".", ".") != 0 || umount2(".", MNT_DETACH) != 0 ||
        chdir("/") != 0)
        return -1;
    return 0;
}
