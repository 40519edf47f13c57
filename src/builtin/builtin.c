/* builtin.c — the one place the built-in namespaces are composed into the default
 * registry, in a fixed order. Each namespace's table lives next to its handlers. */
#include "builtin/builtin.h"

int abx__builtin_register(abx_registry *reg, char *err, size_t errlen);

int abx__builtin_register(abx_registry *reg, char *err, size_t errlen)
{
    const abx_op_def *tables[] = {abx_builtin_core, abx_builtin_files, abx_builtin_system, abx_builtin_commands,
                                  abx_builtin_process, abx_builtin_terminal, abx_builtin_ledger,
                                  abx_builtin_approvals};
    for (size_t i = 0; i < sizeof tables / sizeof tables[0]; i++)
        if (abx__registry_add(reg, tables[i], true, err, errlen) != 0)
            return -1;
    return 0;
}
