/* identset.c — the denied identities of a snapshot as a hash of (st_dev, st_ino), and
 * the walk that asks whether an open file lies below a denied directory.
 *
 * Built once per snapshot (compile time): every ident (literal deny paths, protected
 * files and folders) and every "stop root" goes into one open-addressing table, so a
 * lookup costs one hash and a probe or two whatever the number of deny rules.
 *
 * A stop root is a policy root whose ancestors the walk need not visit: no other root
 * holds it (so no agent, through abx or a confined process, can rename a folder above
 * it: renames need write access to both parents, and outside write roots abx grants
 * none), and no denied folder was above it when the snapshot was compiled. The walk up
 * from an open file's folder stops there, instead of at the file system's root: for a
 * file in the workspace that is one fstat. A host that moves a whole workspace into a
 * denied folder while abx serves is seen at the next reload (as every other host-side
 * change of the policy's roots). Roots nested in other roots, and roots that did not
 * exist at compile time, never stop the walk: it goes on to "/" as before. */
#include "policy/internal.h"
#include "core/util.h"
#include <fcntl.h>
#include <stdint.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

static size_t id_hash(dev_t dev, ino_t ino)
{
    uint64_t h = ((uint64_t)ino * 0x9E3779B97F4A7C15ull) ^ ((uint64_t)dev * 0xC2B2AE3D27D4EB4Full);
    return (size_t)(h ^ (h >> 29));
}

static void tab_put(abx_policy *p, dev_t dev, ino_t ino, uint32_t v)
{
    size_t h = id_hash(dev, ino) & p->ident_tab_mask;
    while (p->ident_tab[h])
        h = (h + 1) & p->ident_tab_mask;
    p->ident_tab[h] = v;
}

/* Whether a denied folder (any ident with subtree, whatever it applies to) is fd's
 * directory or one of its ancestors: such a root must not stop the walk. */
static bool ancestors_denied(const abx_policy *p, int fd)
{
    struct stat st, up;
    if (fstat(fd, &st) != 0)
        return true;
    int cur = -1;
    bool hit = false;
    for (int depth = 0; depth < 2048 && !hit; depth++) {
        for (size_t i = 0; i < p->n_idents && !hit; i++)
            hit = p->idents[i].subtree && p->idents[i].dev == st.st_dev && p->idents[i].ino == st.st_ino;
        int next = openat(cur >= 0 ? cur : fd, "..", O_PATH | O_DIRECTORY | O_CLOEXEC);
        if (cur >= 0)
            close(cur);
        cur = next;
        if (cur < 0 || fstat(cur, &up) != 0) {
            hit = true; /* unknown: do not stop there */
            break;
        }
        if (up.st_dev == st.st_dev && up.st_ino == st.st_ino)
            break;
        st = up;
    }
    if (cur >= 0)
        close(cur);
    return hit;
}

static bool root_can_stop(const abx_policy *p, size_t r)
{
    if (p->rootfds[r] < 0)
        return false;
    for (size_t j = 0; j < p->n_roots; j++)
        if (j != r && strcmp(p->roots[j], p->roots[r]) != 0 && abx_pol_within(p->roots[j], p->roots[r]))
            return false;
    return !ancestors_denied(p, p->rootfds[r]);
}

bool abx_pol_build_identset(abx_policy *p)
{
    if (!p->n_idents)
        return true;
    size_t want = 2 * (p->n_idents + p->n_roots) + 1, size = 8;
    while (size < want)
        size <<= 1;
    p->ident_tab = abx_calloc(size, sizeof *p->ident_tab);
    p->root_dev = abx_calloc(p->n_roots + 1, sizeof *p->root_dev);
    p->root_ino = abx_calloc(p->n_roots + 1, sizeof *p->root_ino);
    p->root_stop = abx_calloc(p->n_roots + 1, sizeof *p->root_stop);
    p->root_known = abx_calloc(p->n_roots + 1, sizeof *p->root_known);
    if (!p->ident_tab || !p->root_dev || !p->root_ino || !p->root_stop || !p->root_known)
        return false;
    p->ident_tab_mask = size - 1;
    for (size_t i = 0; i < p->n_idents; i++)
        tab_put(p, p->idents[i].dev, p->idents[i].ino, (uint32_t)(i + 1));
    struct stat st;
    for (size_t r = 0; r < p->n_roots; r++) {
        if (p->rootfds[r] < 0 || fstat(p->rootfds[r], &st) != 0)
            continue;
        /* an fd's identity never changes: the walk takes it from here, not from fstat */
        p->root_dev[r] = st.st_dev;
        p->root_ino[r] = st.st_ino;
        p->root_known[r] = true;
        if (!root_can_stop(p, r))
            continue;
        p->root_stop[r] = true;
        tab_put(p, st.st_dev, st.st_ino, (uint32_t)(p->n_idents + 1 + r));
    }
    return true;
}

void abx_pol_free_identset(abx_policy *p)
{
    abx_free(p->ident_tab);
    abx_free(p->root_dev);
    abx_free(p->root_ino);
    abx_free(p->root_stop);
    abx_free(p->root_known);
    p->ident_tab = NULL;
    p->ident_tab_mask = 0;
}

/* Whether identity i binds this call: its deny statement applies to the op and the
 * principal; a protected area binds unless an unsafe statement admitted the call
 * (the waiver of protected areas by name, see abx_decide). */
static bool ident_applies(const abx_policy *p, int slot, const abx_op *op, const abx_decision *d, const abx_ident *id)
{
    if (id->stmt >= 0)
        return abx_pol_deny_applies(p, &p->deny[id->stmt], op, slot);
    for (size_t i = 0; i < d->n_admitting; i++)
        if (p->allow[d->admitting[i]].unsafe)
            return false;
    return true;
}

bool abx_pol_ident_lookup(const abx_policy *p, int slot, const abx_op *op, const abx_decision *d, const struct stat *st,
                          bool subtree_only, bool *stop)
{
    if (!p->ident_tab)
        return false;
    for (size_t h = id_hash(st->st_dev, st->st_ino) & p->ident_tab_mask;; h = (h + 1) & p->ident_tab_mask) {
        uint32_t v = p->ident_tab[h];
        if (!v)
            return false;
        if (v <= p->n_idents) {
            const abx_ident *id = &p->idents[v - 1];
            if (id->dev == st->st_dev && id->ino == st->st_ino && (!subtree_only || id->subtree) &&
                ident_applies(p, slot, op, d, id))
                return true;
        } else {
            size_t r = v - 1 - p->n_idents;
            if (stop && p->root_dev[r] == st->st_dev && p->root_ino[r] == st->st_ino)
                *stop = true;
        }
    }
}

#define WALK_REBASE 64 /* levels named as "../../…" from one base before a new base is opened */

/* Walk up from directory dirfd (borrowed) comparing every directory with the denied
 * directory identities, until a stop root or the file system's root. ".." of a
 * directory is its current parent, whatever names lead there. Each level is one
 * fstatat of "../../…" relative to dirfd (no descriptor, no allocation); every
 * WALK_REBASE levels the current ancestor is opened as the new base. */
bool abx_pol_under_denied_dir(const abx_policy *p, int slot, const abx_op *op, const abx_decision *d, int dirfd)
{
    struct stat st, up;
    size_t r = 0;
    while (r < p->n_roots && p->rootfds[r] != dirfd)
        r++;
    if (r < p->n_roots && p->root_known && p->root_known[r]) { /* a root's fd: its identity is known */
        memset(&st, 0, sizeof st); /* the walk reads only st_dev and st_ino */
        st.st_dev = p->root_dev[r];
        st.st_ino = p->root_ino[r];
    } else if (fstat(dirfd, &st) != 0) {
        return false;
    }
    char rel[3 * WALK_REBASE + 1];
    int base = dirfd, owned = -1;
    size_t k = 0;
    bool hit = false;
    for (int depth = 0; depth < 2048; depth++) {
        bool stop = false;
        if ((hit = abx_pol_ident_lookup(p, slot, op, d, &st, true, &stop)) || stop)
            break;
        if (k == WALK_REBASE) {
            rel[3 * k - 1] = '\0';
            int nb = openat(base, rel, O_PATH | O_DIRECTORY | O_CLOEXEC);
            if (owned >= 0)
                close(owned);
            owned = base = nb;
            k = 0;
            if (nb < 0)
                break;
        }
        memcpy(rel + 3 * k, "../", 3);
        k++;
        rel[3 * k - 1] = '\0';
        int rc = fstatat(base, rel, &up, 0);
        rel[3 * k - 1] = '/';
        if (rc != 0 || (up.st_dev == st.st_dev && up.st_ino == st.st_ino))
            break; /* the root is its own parent */
        st = up;
    }
    if (owned >= 0)
        close(owned);
    return hit;
}
