/* gitcfg.h — recognizing a git config file that makes the operator's git run code.
 * core.fsmonitor and core.hooksPath name programs git runs on `git status` / commits,
 * and include.path / includeIf.*.path pull in another config that may set them. A
 * files.* op that writes, moves, copies into place or reads such a file says so in its
 * result (warnings: files.git_config_hook): the file is the agent's to write, but the
 * code it names runs later as whoever types git in that tree. */
#ifndef ABX_BUILTIN_GITCFG_H
#define ABX_BUILTIN_GITCFG_H

#include <stdbool.h>
#include <stddef.h>

/* Keys that run code, in the order found, as "core.fsmonitor", "core.hookspath",
 * "include.path" or "includeif.path"; at most max (distinct). Returns the count.
 * Parses git-config syntax: [section] and [section "sub"] headers (names are
 * case-insensitive, a key may follow the header on its line), key = value lines, a
 * bare key (boolean true), # and ; comments, backslash line continuations. */
size_t abx_gitcfg_hook_keys(const char *text, size_t len, const char **keys, size_t max);

/* Whether a canonical path names a git config by its name alone: ".gitconfig", or
 * "config" / "config.worktree" in a directory called ".git" or below one. (A "config"
 * in a bare repository is recognized by the caller, who can look for HEAD and objects/.) */
bool abx_gitcfg_name(const char *canonical);

#endif
