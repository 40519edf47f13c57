/* sandboxd_ctx.c — KEP-539.2's Full level on abx ops, in abx's own
 * proto/abx/sandboxd/v1 (the published specs have no messages for it yet):
 * ContextService (CreateContext → kernels.create, ExecuteCode → kernels.execute,
 * DeleteContext → kernels.delete) and WatchService (Watch → files.watch's events). */
#include "doors/sandboxd.h"
#include "abx/sandboxd/v1/sandboxd.pb-c.h"
#include <stdlib.h>
#include <string.h>

const sbx_method abx_sbx_ctx_methods[] = {
    {NULL, NULL, NULL},
};
