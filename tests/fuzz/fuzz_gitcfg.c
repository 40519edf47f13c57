/* fuzz_gitcfg.c — the git-config reader of files.* warnings (builtin/gitcfg.c): its
 * input is whatever an agent wrote into the workspace. Invariants: it never reads past
 * len (ASan), returns at most max keys, each one of the four known names, no name
 * twice; and the answer does not depend on bytes after the input (the same text with
 * junk appended in the buffer but not in len gives the same keys). */
#include "builtin/gitcfg.h"
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

static const char *const known[] = {"core.fsmonitor", "core.hookspath", "include.path", "includeif.path"};

static void check(const char **keys, size_t n, size_t max)
{
    if (n > max)
        abort();
    for (size_t i = 0; i < n; i++) {
        int hit = 0;
        for (size_t k = 0; k < 4; k++)
            hit |= keys[i] && strcmp(keys[i], known[k]) == 0;
        if (!hit)
            abort();
        for (size_t j = 0; j < i; j++)
            if (strcmp(keys[i], keys[j]) == 0)
                abort();
    }
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    if (size > 1 << 16)
        return 0;
    char *exact = malloc(size ? size : 1); /* exactly size bytes: no terminator to lean on */
    memcpy(exact, data, size);
    const char *a[8], *b[8];
    size_t na = abx_gitcfg_hook_keys(exact, size, a, 8);
    check(a, na, 8);
    char *padded = malloc(size + 32);
    memcpy(padded, data, size);
    memcpy(padded + size, "\n[core]\nfsmonitor = x\n\0\0\0\0\0\0\0\0\0", 32);
    size_t nb = abx_gitcfg_hook_keys(padded, size, b, 8);
    if (nb != na)
        abort();
    for (size_t i = 0; i < na; i++)
        if (strcmp(a[i], b[i]) != 0)
            abort();
    size_t n1 = abx_gitcfg_hook_keys(exact, size, a, 1);
    check(a, n1, 1);
    char *path = malloc(size + 1);
    memcpy(path, data, size);
    path[size] = '\0';
    (void)abx_gitcfg_name(path);
    free(path);
    free(padded);
    free(exact);
    return 0;
}
