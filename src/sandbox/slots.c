/* slots.c — a process's confinement prepared once and used by one process at a time.
 *
 * What a process of a statement gets depends on its roots (read, write), its masks and
 * read-only and pinned paths, its principal's HOME and its private TMPDIR: the Landlock
 * ruleset (one rule per grant, ~150 of them with /etc) and the view (a mount namespace of
 * only those paths, ~30 mounts and a pivot_root, torn down again when the process exits).
 * Building both for every process cost a third of a confined `commands.run` (bench/
 * README.md). A slot holds them, built for one key (everything above but the TMPDIR) with
 * a TMPDIR of its own — a directory the slot keeps — and serves the processes of that key
 * one after the other:
 *
 * - taken by one process at a time (never two at once);
 * - before each use every path it was built from is looked up again and must still be
 *   the very file (device and inode) it was built with: a root, a mask or a HOME moved
 *   or replaced since (the rename attacks of the trust boundary) makes a new slot, never
 *   a stale grant; so does a changed key (a policy reload, a new deny target);
 * - back only when its process tree is gone (the pids cgroup emptied and removed), its
 *   TMPDIR emptied (not followed into links) and given back its owner and mode; anything
 *   else, and the slot is destroyed (the namespace closed, the directory removed).
 *
 * Slots are used only where the view is (a network namespace, a mount namespace, Landlock
 * ABI >= 6, cgroups, abx with the capabilities to build them); elsewhere a process gets
 * a new TMPDIR and its confinement is built for it alone. */
#include "sandbox/sandbox_int.h"
#include "core/util.h"
#include "sandbox/procs.h"
#include <limits.h>
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#define SLOTS_MAX 16 /* kept at most; a key past it gets a confinement of its own per process */

/* key: every path the ruleset and the view are built from, each with its length */
static char *make_key(const abx_confine *c, const char *home)
{
    abx_buf b;
    abx_buf_init(&b, 1u << 20);
    const char *const *lists[] = {c->read_roots, c->write_roots, c->masks, c->readonly, c->pins};
    size_t ns[] = {c->n_read, c->n_write, c->n_masks, c->n_readonly, c->n_pins};
    for (size_t l = 0; l < ABX_ARRAY_LEN(lists); l++) {
        abx_buf_printf(&b, "%zu[", ns[l]);
        for (size_t i = 0; i < ns[l]; i++)
            abx_buf_printf(&b, "%zu:%s;", strlen(lists[l][i]), lists[l][i]);
        abx_buf_append(&b, "]", 1);
    }
    abx_buf_printf(&b, "h%zu:%s;n%d", strlen(home), home, c->net ? 1 : 0);
    if (b.failed) {
        abx_buf_release(&b);
        return NULL;
    }
    return abx_buf_detach(&b);
}

/* What path is now: its device and inode, or absent (a grant or mask over nothing, which
 * the rules and the view skip: it must still be absent when the slot is used, or a file
 * made there since would be neither granted nor masked as a new confinement would). */
static bool add_id(abx_slot *s, const char *path)
{
    struct stat st;
    bool absent = stat(path, &st) != 0;
    if (absent && errno != ENOENT && errno != ENOTDIR)
        return false;
    if (s->n_id % 16 == 0) {
        abx_slot_id *g = abx_realloc(s->id, (s->n_id + 16) * sizeof *g);
        if (!g)
            return false;
        s->id = g;
    }
    char *p = abx_strdup(path);
    if (!p)
        return false;
    s->id[s->n_id++] = absent ? (abx_slot_id){.path = p, .absent = true}
                              : (abx_slot_id){.path = p, .dev = st.st_dev, .ino = st.st_ino};
    return true;
}

/* every path is still the file it was when the slot was built */
static bool still_same(const abx_slot *s)
{
    for (size_t i = 0; i < s->n_id; i++) {
        struct stat st;
        const abx_slot_id *id = &s->id[i];
        if (stat(id->path, &st) != 0 ? !id->absent || (errno != ENOENT && errno != ENOTDIR)
                                     : id->absent || st.st_dev != id->dev || st.st_ino != id->ino)
            return false;
    }
    struct stat st;
    return lstat(s->dir, &st) == 0 && S_ISDIR(st.st_mode) && st.st_dev == s->dir_dev && st.st_ino == s->dir_ino;
}

static void destroy(abx_slot *s)
{
    abx__spare_discard(s->spare); /* before what it was made from */
    abx__spare_stack_free(s->spare_stack);
    if (s->ruleset >= 0)
        close(s->ruleset);
    if (s->mntns >= 0)
        close(s->mntns);
    if (s->dir[0])
        abx_rm_tree(s->dir);
    for (size_t i = 0; i < s->n_id; i++)
        abx_free(s->id[i].path);
    abx_free(s->id);
    abx_free(s->key);
    abx_free(s);
}

typedef struct view_helper {
    const abx_confine *c;
    const char *mask_file;
    const abx_view *view;
    int fd;
} view_helper;

/* a child sharing abx's memory and descriptors builds the view in a mount namespace of
 * its own and opens it (system calls only) */
static int view_main(void *arg)
{
    view_helper *h = arg;
    if (abx__mounts_private(h->c, h->mask_file) != 0 || abx__view_enter(h->view) != 0)
        return 1;
    h->fd = open("/proc/self/ns/mnt", O_RDONLY | O_CLOEXEC);
    return h->fd >= 0 ? 0 : 1;
}

static int build_view(abx_sandbox *sb, const abx_confine *c, const abx_view *v)
{
    view_helper h = {.c = c, .mask_file = sb->mask_file, .view = v, .fd = -1};
    if (abx__run_helper(view_main, &h) != 0 && h.fd >= 0) {
        close(h.fd);
        h.fd = -1;
    }
    return h.fd;
}

static abx_slot *build(abx_sandbox *sb, const abx_confine *c, const char *home, uid_t uid, gid_t gid, char *key)
{
    abx_slot *s = abx_calloc(1, sizeof *s);
    if (!s) {
        abx_free(key);
        return NULL;
    }
    s->sb = sb;
    s->key = key;
    s->ruleset = s->mntns = -1;
    s->uid = uid;
    s->gid = gid;
    struct stat st;
    if ((size_t)snprintf(s->dir, sizeof s->dir, "%s/slot-XXXXXX", sb->runtime_dir) >= sizeof s->dir ||
        !mkdtemp(s->dir)) {
        s->dir[0] = '\0';
        goto fail;
    }
    if (chmod(s->dir, 0711) != 0 || lstat(s->dir, &st) != 0) /* abx's; each process's TMPDIR inside */
        goto fail;
    s->dir_dev = st.st_dev;
    s->dir_ino = st.st_ino;
    bool ok = true;
    const char *const *lists[] = {c->read_roots, c->write_roots, c->masks, c->readonly, c->pins};
    size_t ns[] = {c->n_read, c->n_write, c->n_masks, c->n_readonly, c->n_pins};
    for (size_t l = 0; ok && l < ABX_ARRAY_LEN(lists); l++)
        for (size_t i = 0; ok && i < ns[l]; i++)
            ok = add_id(s, lists[l][i]);
    if (!ok || !add_id(s, home))
        goto fail;
    /* what the spawn would build for one process, with the slot's directory as TMPDIR */
    abx_spawn_req req = {.confine = c, .tmpdir = s->dir, .home = home, .cwd_fd = -1};
    char err[256];
    abx_view v;
    if ((s->ruleset = abx__build_ruleset(sb, &req, err, sizeof err)) < 0 || abx__view_plan(sb, &req, &v) != 0)
        goto fail;
    s->mntns = build_view(sb, c, &v);
    abx__view_free(&v);
    if (s->mntns < 0)
        goto fail;
    return s;
fail:
    destroy(s);
    return NULL;
}

abx_slot *abx__slot_take(abx_sandbox *sb, const abx_confine *c, const char *home, uid_t uid, gid_t gid)
{
    if (!sb->sl_on || c->egress_port > 0 || !home)
        return NULL;
    char *key = make_key(c, home);
    if (!key)
        return NULL;
    abx_slot *stale = NULL, *found = NULL;
    pthread_mutex_lock(&sb->sl_mu);
    for (abx_slot **pp = &sb->slots; *pp;) {
        abx_slot *s = *pp;
        if (s->uid == uid && s->gid == gid && strcmp(s->key, key) == 0) {
            *pp = s->next; /* out of the list while it is checked: no one else takes it */
            sb->n_slots--;
            found = s;
            break;
        }
        pp = &s->next;
    }
    pthread_mutex_unlock(&sb->sl_mu);
    if (found && !still_same(found)) {
        stale = found;
        found = NULL;
    }
    if (stale)
        destroy(stale);
    if (found) {
        abx_free(key);
        atomic_fetch_add(&sb->sl_reused, 1);
        return found;
    }
    abx_slot *s = build(sb, c, home, uid, gid, key);
    if (s)
        atomic_fetch_add(&sb->sl_made, 1);
    return s;
}

/* Remove what is in dir without following links; 0 when it is empty after. */
static int empty_dir(const char *dir)
{
    DIR *d = opendir(dir);
    if (!d)
        return -1;
    struct dirent *de;
    char path[PATH_MAX];
    while ((de = readdir(d)) != NULL) {
        if (strcmp(de->d_name, ".") == 0 || strcmp(de->d_name, "..") == 0)
            continue;
        if ((size_t)snprintf(path, sizeof path, "%s/%s", dir, de->d_name) >= sizeof path)
            continue;
        /* a file; else an empty directory (the last TMPDIR, most often), in one call; else
         * a tree (or something unlink refused) */
        if (unlinkat(dirfd(d), de->d_name, 0) != 0 && unlinkat(dirfd(d), de->d_name, AT_REMOVEDIR) != 0)
            abx_rm_tree(path);
    }
    closedir(d);
    d = opendir(dir);
    if (!d)
        return -1;
    int n = 0;
    while ((de = readdir(d)) != NULL)
        n += strcmp(de->d_name, ".") != 0 && strcmp(de->d_name, "..") != 0;
    closedir(d);
    return n ? -1 : 0;
}

int abx__slot_tmpdir(const abx_slot *s, char *dir, size_t len)
{
    /* mkdtemp's template: a name no earlier process had, mode 0700 */
    if ((size_t)snprintf(dir, len, "%s/tmp-XXXXXX", s->dir) >= len || !mkdtemp(dir))
        return -1;
    if (chown(dir, s->uid, s->gid) != 0) {
        rmdir(dir); /* empty: made just above */
        return -1;
    }
    return 0;
}

void abx__slot_put(abx_slot *s, bool tree_gone)
{
    if (!s)
        return;
    abx_sandbox *sb = s->sb;
    struct stat st;
    bool keep = tree_gone && empty_dir(s->dir) == 0 && lstat(s->dir, &st) == 0 && st.st_uid == geteuid() &&
                (st.st_mode & 07777) == 0711; /* its paths are checked when it is taken next */
    /* the next process's TMPDIR now, off its call's path; else made when it is taken */
    if (!keep || abx__slot_tmpdir(s, s->next_tmp, sizeof s->next_tmp) != 0)
        s->next_tmp[0] = '\0';
    if (keep) {
        pthread_mutex_lock(&sb->sl_mu);
        if (sb->n_slots < SLOTS_MAX) {
            s->next = sb->slots;
            sb->slots = s;
            sb->n_slots++;
            s = NULL;
        }
        pthread_mutex_unlock(&sb->sl_mu);
    }
    if (s)
        destroy(s);
}

void abx__slots_init(abx_sandbox *sb)
{
    pthread_mutex_init(&sb->sl_mu, NULL);
    /* the view and what proves a tree gone, and abx able to build them */
    sb->sl_on = sb->np_reuse && sb->caps.root && sb->caps.mntns && sb->caps.netns && sb->view;
}

void abx__slots_free(abx_sandbox *sb)
{
    while (sb->slots) {
        abx_slot *s = sb->slots;
        sb->slots = s->next;
        destroy(s);
    }
    sb->n_slots = 0;
    pthread_mutex_destroy(&sb->sl_mu);
}
