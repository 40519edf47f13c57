/* builtin.c — the one place the built-in namespaces are composed: their descriptors in a
 * fixed order, the default registry filled from them, and the home of that process-wide
 * registry (core makes registries but knows no namespace). Each namespace's descriptor
 * and table live next to its handlers; the server starts their states from the list. */
#include "builtin/builtin.h"
#include <stdio.h>
#include <stdlib.h>

static abx_registry default_registry = {.process_wide = true, .mu = PTHREAD_MUTEX_INITIALIZER};
static pthread_once_t default_once = PTHREAD_ONCE_INIT;

const abx_namespace *const abx_builtin_namespaces[] = {
    &abx_ns_core, &abx_ns_files, &abx_ns_system, &abx_ns_commands, &abx_ns_process, &abx_ns_terminal,
    &abx_ns_ledger, &abx_ns_approvals, &abx_ns_kernels, &abx_ns_runs, &abx_ns_devtools, &abx_ns_ports, &abx_ns_browser,
    &abx_ns_agents, &abx_ns_tools, NULL,
};

static int builtin_register(abx_registry *reg, char *err, size_t errlen)
{
    for (const abx_namespace *const *ns = abx_builtin_namespaces; *ns; ns++) {
        if ((*ns)->ops && abx__registry_add(reg, (*ns)->ops, true, err, errlen) != 0)
            return -1;
        for (const abx_op_def *const *t = (*ns)->op_tables; t && *t; t++)
            if (abx__registry_add(reg, *t, true, err, errlen) != 0)
                return -1;
    }
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
