/* builtin.c — the one place the built-in namespaces are composed into the default
 * registry, in a fixed order, and the home of that process-wide registry (core makes
 * registries but knows no namespace). Each namespace's table lives next to its handlers. */
#include "builtin/builtin.h"
#include <stdio.h>
#include <stdlib.h>

static abx_registry default_registry = {.process_wide = true, .mu = PTHREAD_MUTEX_INITIALIZER};
static pthread_once_t default_once = PTHREAD_ONCE_INIT;

static int builtin_register(abx_registry *reg, char *err, size_t errlen)
{
    const abx_op_def *tables[] = {abx_builtin_core, abx_builtin_files, abx_builtin_system, abx_builtin_commands,
                                  abx_builtin_process, abx_builtin_terminal, abx_builtin_ledger,
                                  abx_builtin_approvals};
    for (size_t i = 0; i < sizeof tables / sizeof tables[0]; i++)
        if (abx__registry_add(reg, tables[i], true, err, errlen) != 0)
            return -1;
    return 0;
}

static void default_init(void)
{
    char err[256];
    if (builtin_register(&default_registry, err, sizeof err) != 0) {
        /* A broken built-in table is a programming error caught by every test. */
        fprintf(stderr, "abx: built-in registration failed: %s\n", err);
        abort();
    }
}

abx_registry *abx_registry_default(void)
{
    pthread_once(&default_once, default_init);
    return &default_registry;
}
