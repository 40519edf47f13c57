/* gitwarn.c — git config that runs code: after a files.* op put a git config (or a
 * whole git dir) in place, or read one, its result carries a warning per key that makes
 * git run a program (builtin/gitcfg.c knows the keys). */
#include "builtin/files/files.h"
#include "builtin/gitcfg.h"
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>

#define GITCFG_READ_MAX (1024 * 1024)

static bool has_git_dir_shape(int dirfd)
{
    struct stat st;
    return fstatat(dirfd, "HEAD", &st, AT_SYMLINK_NOFOLLOW) == 0 && S_ISREG(st.st_mode) &&
           fstatat(dirfd, "objects", &st, AT_SYMLINK_NOFOLLOW) == 0 && S_ISDIR(st.st_mode);
}

static const char *gitcfg_key_label(const char *key)
{
    if (strcmp(key, "core.hookspath") == 0)
        return "core.hooksPath";
    if (strcmp(key, "includeif.path") == 0)
        return "includeIf.<condition>.path";
    return key;
}

/* Read (at most GITCFG_READ_MAX bytes of) a regular file and add one warning per
 * code-running key it sets. fd is borrowed. */
static void gitcfg_scan(int fd, const char *shown, json_t *warnings)
{
    struct stat st;
    if (fstat(fd, &st) != 0 || !S_ISREG(st.st_mode))
        return;
    size_t cap = st.st_size < GITCFG_READ_MAX ? (size_t)st.st_size : GITCFG_READ_MAX, have = 0;
    char *buf = abx_malloc(cap + 1);
    if (!buf)
        return;
    while (have < cap) {
        ssize_t g = pread(fd, buf + have, cap - have, (off_t)have);
        if (g < 0 && errno == EINTR)
            continue;
        if (g <= 0)
            break;
        have += (size_t)g;
    }
    const char *keys[4];
    size_t n = abx_gitcfg_hook_keys(buf, have, keys, 4);
    abx_free(buf);
    for (size_t i = 0; i < n; i++) {
        char msg[600];
        snprintf(msg, sizeof msg,
                 "%s is a git config that sets %s: git runs the program it names (or reads the config it "
                 "includes) when anyone runs git in this tree",
                 shown, gitcfg_key_label(keys[i]));
        json_array_append_new(warnings, json_pack("{s:s, s:s}", "code", "files.git_config_hook", "message", msg));
    }
}

/* By name alone: whether files_gitcfg_warn may have something to say about param (a
 * git config's name, "config", ".git", or a move's or copy's destination). */
static bool gitcfg_candidate(const char *canonical, const char *param)
{
    const char *base = strrchr(canonical, '/');
    base = base ? base + 1 : canonical;
    /* a move or copy may put a whole git dir in place under any name */
    return abx_gitcfg_name(canonical) || strcmp(base, "config") == 0 || strcmp(base, ".git") == 0 ||
           strcmp(param, "dst") == 0;
}

bool files_gitcfg_maybe(abx_ctx *ctx, const char *param)
{
    const abx_path_value *pv = files_path_value(ctx, param, 0);
    return !pv || gitcfg_candidate(pv->canonical, param);
}

/* After a files.* op succeeded on param: if the file now at that path is a git config
 * (by name, or "config" in a directory shaped like a git dir), or a git dir moved or
 * copied into place, report the keys that make git run code. */
void files_gitcfg_warn(abx_ctx *ctx, abx_reply *r, const char *param)
{
    const abx_path_value *pv = files_path_value(ctx, param, 0);
    if (!pv || !json_is_object(abx_reply_body(r)) || pv->rootfd < 0)
        return;
    const char *base = strrchr(pv->canonical, '/');
    base = base ? base + 1 : pv->canonical;
    bool named = abx_gitcfg_name(pv->canonical);
    int fd = gitcfg_candidate(pv->canonical, param) ? abx_ctx_open(ctx, param, O_RDONLY | O_NONBLOCK | O_NOCTTY, 0)
                                                    : -1;
    if (fd < 0)
        return;
    json_t *warnings = json_array();
    struct stat st;
    if (fstat(fd, &st) == 0 && S_ISDIR(st.st_mode)) {
        /* a whole git dir put in place: look at its config files */
        if (strcmp(base, ".git") == 0 || has_git_dir_shape(fd)) {
            static const char *const names[] = {"config", "config.worktree"};
            for (size_t i = 0; i < 2; i++) {
                int cfd = openat(fd, names[i], O_RDONLY | O_NOFOLLOW | O_NONBLOCK | O_NOCTTY | O_CLOEXEC);
                if (cfd < 0)
                    continue;
                char *shown = files_join_path(pv->canonical, names[i]);
                if (builtin_fd_check(ctx, cfd, fd) == 0)
                    gitcfg_scan(cfd, shown ? shown : names[i], warnings);
                abx_free(shown);
                close(cfd);
            }
        }
    } else if (!named && strcmp(base, "config") == 0) {
        const char *name;
        int pfd = strcmp(pv->rel, ".") == 0 ? -1 : abx_jail_open_parent(pv->rootfd, pv->rel, &name);
        if (pfd >= 0 && has_git_dir_shape(pfd))
            gitcfg_scan(fd, pv->canonical, warnings);
        if (pfd >= 0)
            close(pfd);
    } else if (named) {
        gitcfg_scan(fd, pv->canonical, warnings);
    }
    close(fd);
    if (json_array_size(warnings))
        json_object_set_new(abx_reply_body(r), "warnings", warnings);
    else
        json_decref(warnings);
}

/* The same for a file known by its directory and name (files.upload, whose result is
 * built after the streamed body, without the request's path values at hand). */
void files_gitcfg_warn_at(int pfd, const char *name, const char *canonical, abx_reply *r)
{
    if (!json_is_object(abx_reply_body(r)) || pfd < 0)
        return;
    bool named = abx_gitcfg_name(canonical);
    if (!named && !(strcmp(name, "config") == 0 && has_git_dir_shape(pfd)))
        return;
    int fd = openat(pfd, name, O_RDONLY | O_NOFOLLOW | O_NONBLOCK | O_NOCTTY | O_CLOEXEC);
    if (fd < 0)
        return;
    json_t *warnings = json_array();
    gitcfg_scan(fd, canonical, warnings);
    close(fd);
    if (json_array_size(warnings))
        json_object_set_new(abx_reply_body(r), "warnings", warnings);
    else
        json_decref(warnings);
}
