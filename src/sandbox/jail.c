/* jail.c — the only place a handler's file is opened: openat2() beneath a root dirfd
 * with RESOLVE_BENEATH | RESOLVE_NO_MAGICLINKS | RESOLVE_NO_SYMLINKS, O_CLOEXEC always.
 *
 * It owns the guarantee that whatever happens to the tree between the policy check
 * and the open (a file or directory swapped for a symlink, a ".." planted in a link
 * target, a /proc magic link), the kernel opens exactly the name the policy admitted,
 * inside the root, or refuses it. The names handed here are canonical: the policy
 * already resolved every symlink, so a symlink met during the open was put there after
 * the check. Following it — even to a place inside the root — would open something the
 * policy never saw (a denied file, a protected area), so it is refused (-ELOOP). Only a
 * final symlink opened with O_PATH | O_NOFOLLOW (the link itself) is returned.
 * It must never open anything by an absolute path other than a root, never fall back
 * to plain open()/openat() when openat2 is missing (that would silently drop the
 * guarantee), and never leak a descriptor across exec. */
#include "sandbox/jail.h"

#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <linux/openat2.h>
#include <stdint.h>
#include <string.h>
#include <sys/syscall.h>
#include <unistd.h>

#define JAIL_RESOLVE (RESOLVE_BENEATH | RESOLVE_NO_MAGICLINKS | RESOLVE_NO_SYMLINKS)
/* openat2 may answer EAGAIN when a concurrent rename makes it unable to prove that a
 * ".." stayed inside; the answer is "try again", but a hostile renamer must not be
 * able to keep us spinning, so the retries are bounded. */
#define JAIL_RETRIES 16

static int jail_openat2(int dirfd, const char *rel, uint64_t flags, uint64_t mode)
{
    struct open_how how;
    memset(&how, 0, sizeof how);
    how.flags = flags | O_CLOEXEC;
    /* The kernel rejects a non-zero mode unless a file may be created. */
    if ((flags & O_CREAT) || (flags & O_TMPFILE) == O_TMPFILE)
        how.mode = mode & 07777;
    how.resolve = JAIL_RESOLVE;

    for (int attempt = 0;; attempt++) {
        long fd = syscall(SYS_openat2, dirfd, rel, &how, sizeof how);
        if (fd >= 0)
            return (int)fd;
        int e = errno;
        /* EINTR is passed up: a signal meant to cut a blocking open (a FIFO
         * without O_NONBLOCK) must not be swallowed here. */
        if (e == EAGAIN && attempt < JAIL_RETRIES)
            continue;
        return -e;
    }
}

/* Refuse what openat2 would treat differently from "a name below the root". */
static int jail_check_rel(const char *rel)
{
    if (!rel || rel[0] == '\0')
        return -EINVAL;
    if (rel[0] == '/')
        return -EXDEV; /* an absolute name is an escape by definition */
    if (strlen(rel) >= PATH_MAX)
        return -ENAMETOOLONG;
    return 0;
}

int abx_jail_open_root(const char *root)
{
    /* Roots come from configuration and are always absolute; a relative one would
     * quietly depend on the server's cwd. */
    if (!root || root[0] != '/')
        return -EINVAL;
    int fd = open(root, O_PATH | O_DIRECTORY | O_CLOEXEC);
    return fd >= 0 ? fd : -errno;
}

int abx_jail_open(int rootfd, const char *rel, int flags, mode_t mode)
{
    int rc = jail_check_rel(rel);
    if (rc < 0)
        return rc;
    if (rootfd < 0)
        return -EBADF;
    /* The cast keeps the int's bit pattern; openat2 refuses unknown upper bits. */
    return jail_openat2(rootfd, rel, (uint64_t)(unsigned int)flags, mode);
}

int abx_jail_open_parent(int rootfd, const char *rel, const char **name)
{
    if (name)
        *name = NULL;
    int rc = jail_check_rel(rel);
    if (rc < 0)
        return rc;
    if (rootfd < 0 || !name)
        return rootfd < 0 ? -EBADF : -EINVAL;

    const char *slash = strrchr(rel, '/');
    const char *last = slash ? slash + 1 : rel;
    size_t last_len = strlen(last);
    /* The name goes to mkdirat/unlinkat/renameat as is: it has to be one real
     * entry. "." and ".." (and "" from a trailing slash) name the directory itself
     * or its parent, never something that can be created or removed. */
    if (last_len == 0 || (last_len == 1 && last[0] == '.') ||
        (last_len == 2 && last[0] == '.' && last[1] == '.'))
        return -EINVAL;
    if (last_len > NAME_MAX)
        return -ENAMETOOLONG;

    char parent[PATH_MAX];
    if (!slash) {
        parent[0] = '.';
        parent[1] = '\0';
    } else {
        size_t plen = (size_t)(slash - rel);
        /* "a//b" leaves "a/" as the parent, which resolves the same as "a". */
        memcpy(parent, rel, plen);
        parent[plen] = '\0';
    }
    int fd = jail_openat2(rootfd, parent, O_PATH | O_DIRECTORY, 0);
    if (fd < 0)
        return fd;
    *name = last;
    return fd;
}

bool abx_jail_available(void)
{
    /* A size below the first open_how version is refused with EINVAL before the
     * kernel looks at anything else, so this probe opens nothing. A kernel without
     * the syscall (or a seccomp filter denying it) answers differently. */
    long r = syscall(SYS_openat2, AT_FDCWD, ".", NULL, (size_t)0);
    if (r >= 0) {
        close((int)r); /* cannot happen; never keep a stray descriptor */
        return true;
    }
    return errno == EINVAL;
}
