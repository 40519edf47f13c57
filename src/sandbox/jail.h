/* jail.h — every file a handler touches is opened here, beneath a root directory fd,
 * with openat2(RESOLVE_BENEATH | RESOLVE_NO_MAGICLINKS | RESOLVE_NO_SYMLINKS). Names are
 * canonical (symlink-free when the policy checked them): a symlink swapped in after the
 * check can lead neither outside the root nor to another name inside it — the kernel
 * refuses (ELOOP; EXDEV for escapes by "..").
 * Must never open anything by absolute path except the roots themselves. */
#ifndef ABX_SANDBOX_JAIL_H
#define ABX_SANDBOX_JAIL_H

#include <stdbool.h>
#include <sys/types.h>

/* Open a root directory (O_PATH|O_DIRECTORY|O_CLOEXEC). fd or -errno. */
int abx_jail_open_root(const char *root);
/* Open `rel` (relative, no leading '/'; "." = the root) beneath rootfd. O_CLOEXEC is
 * always added. Any symlink on the way is refused with -ELOOP, except a final one
 * opened with O_PATH | O_NOFOLLOW (that opens the link itself). Escapes by ".." are
 * -EXDEV. fd or -errno. */
int abx_jail_open(int rootfd, const char *rel, int flags, mode_t mode);
/* Open the parent directory of `rel` beneath rootfd (O_PATH|O_DIRECTORY) and point
 * *name at the last component (inside rel). For rel "." it fails with -EINVAL.
 * Used for mkdirat/unlinkat/renameat/linkat with AT_SYMLINK_NOFOLLOW. fd or -errno. */
int abx_jail_open_parent(int rootfd, const char *rel, const char **name);
/* Whether the running kernel has openat2 (Linux 5.6+). */
bool abx_jail_available(void);

#endif
