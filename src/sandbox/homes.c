/* homes.c — each principal's private HOME. Dotfiles, caches and histories that programs
 * keep in $HOME (.bash_history, .npm, pip's cache, .config) belong to the agent, not to
 * the user's repository: they land in <homes_dir>/<principal>, which lies in abx's own
 * state (never in a workspace), is made on first use with mode 0700 owned by the run
 * ids, kept across calls and granted read-write to that principal's processes only. */
#include "sandbox/procs_int.h"
#include "core/util.h"
#include <dirent.h>
#include <errno.h>
#include <stdatomic.h>
#include <fcntl.h>
#include <stdio.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

/* A plain name is used as is; anything else (slashes, dots first, odd bytes, too long)
 * becomes a hash, so no id can name a path outside homes_dir. */
static void home_name(const char *principal, char out[72])
{
    size_t n = strlen(principal);
    bool plain = n > 0 && n <= 64 && principal[0] != '.' && principal[0] != '-';
    for (size_t i = 0; plain && i < n; i++) {
        char c = principal[i];
        plain = (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') || c == '_' ||
                c == '-' || c == '.';
    }
    if (plain) {
        snprintf(out, 72, "%s", principal);
        return;
    }
    char hex[65];
    abx_sha256_hex(principal, n, hex);
    snprintf(out, 72, "h-%.32s", hex);
}

/* homes.ttl: at most one sweep a minute, by whichever call comes first */
static void sweep_maybe(abx_procs *m)
{
    if (m->homes_ttl_ms <= 0)
        return;
    int64_t now = abx_now_ms(), last = atomic_load(&m->homes_swept);
    if (now - last < 60000 || !atomic_compare_exchange_strong(&m->homes_swept, &last, now))
        return;
    abx_procs_homes_expire(m, m->homes_ttl_ms);
}

int abx_procs_home(abx_procs *m, const char *principal, char *dir, size_t dirlen, char *why, size_t whylen)
{
    sweep_maybe(m);
    char name[72];
    home_name(principal ? principal : "", name);
    dir[0] = '\0';
    if ((size_t)snprintf(dir, dirlen, "%s/%s", m->homes_dir, name) >= dirlen) {
        snprintf(why, whylen, "cannot make a private HOME: the homes folder's name is too long");
        dir[0] = '\0';
        return -1;
    }
    /* a HOME is a real directory owned by the run ids, never a link planted in its place;
     * made (with the homes folder) at its first use */
    struct stat st;
    bool made = false;
    if (lstat(dir, &st) != 0) {
        if (mkdir(m->homes_dir, 0711) != 0 && errno != EEXIST) {
            snprintf(why, whylen, "cannot create %s: %s", m->homes_dir, strerror(errno));
            dir[0] = '\0';
            return -1;
        }
        made = mkdir(dir, 0700) == 0;
        if (!made && errno != EEXIST) {
            snprintf(why, whylen, "cannot create the private HOME %s: %s", dir, strerror(errno));
            dir[0] = '\0';
            return -1;
        }
        if (lstat(dir, &st) != 0)
            st.st_mode = 0;
    }
    if (!S_ISDIR(st.st_mode)) {
        snprintf(why, whylen, "the private HOME %s is not a directory", dir);
        dir[0] = '\0';
        return -1;
    }
    if (made || st.st_uid != m->run_uid || st.st_gid != m->run_gid) {
        if (chown(dir, m->run_uid, m->run_gid) != 0 || chmod(dir, 0700) != 0) {
            snprintf(why, whylen, "cannot give the private HOME %s to the run user: %s", dir, strerror(errno));
            dir[0] = '\0';
            return -1;
        }
    }
    /* last use, for homes.ttl: its time is set again once it is half a ttl old (a minute
     * at most, and without a ttl), so a HOME in use never looks unused */
    struct timespec now;
    clock_gettime(CLOCK_REALTIME, &now);
    int64_t age_ms = ((int64_t)now.tv_sec - st.st_mtim.tv_sec) * 1000 + (now.tv_nsec - st.st_mtim.tv_nsec) / 1000000;
    int64_t every_ms = m->homes_ttl_ms > 0 && m->homes_ttl_ms / 2 < 60000 ? m->homes_ttl_ms / 2 : 60000;
    if (made || age_ms < 0 || age_ms >= every_ms)
        utimensat(AT_FDCWD, dir, NULL, AT_SYMLINK_NOFOLLOW);
    return 0;
}

int abx_procs_home_clean(abx_procs *m, const char *principal)
{
    char name[72], dir[512];
    home_name(principal ? principal : "", name);
    snprintf(dir, sizeof dir, "%s/%s", m->homes_dir, name);
    struct stat st;
    if (lstat(dir, &st) != 0)
        return errno == ENOENT ? 0 : -1;
    abx_rm_tree(dir);
    if (lstat(dir, &st) == 0) {
        errno = EBUSY;
        return -1;
    }
    return 1;
}

size_t abx_procs_homes_expire(abx_procs *m, int64_t ttl_ms)
{
    size_t gone = 0;
    if (ttl_ms <= 0)
        return 0;
    DIR *d = opendir(m->homes_dir);
    if (!d)
        return 0;
    time_t now = time(NULL);
    struct dirent *e;
    while ((e = readdir(d)) != NULL) {
        if (e->d_name[0] == '.')
            continue;
        char dir[512];
        struct stat st;
        snprintf(dir, sizeof dir, "%s/%s", m->homes_dir, e->d_name);
        if (lstat(dir, &st) != 0 || !S_ISDIR(st.st_mode))
            continue;
        if ((int64_t)(now - st.st_mtime) * 1000 < ttl_ms)
            continue;
        abx_rm_tree(dir);
        gone++;
    }
    closedir(d);
    return gone;
}
