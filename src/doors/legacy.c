/* legacy.c — GET /commands, the legacy command registry's listing: a front door like
 * POST /batch (authenticated once, no op of its own, audited in step 10) that lists the
 * declarative commands mounted for the caller by their original names. Calls go
 * through POST /commands/{name}, which the pipeline's step 4 resolves by that name to
 * the op custom.<mangled> (abx_command_op_id, pipeline/namespace.c, asking the registry
 * the server installed from ext) and runs through the whole pipeline. */
#include "doors/doors.h"
#include <string.h>

void abx_commands_list(abx_request *r)
{
    if (r->slot == (int)r->policy->n_principals) {
        abx_fail(r, ABX_E_AUTH_REQUIRED, "credentials are required: Authorization: Bearer <token>");
        return;
    }
    abx_server *s = r->server;
    const abx_registry *reg = s->reg;
    json_t *list = json_array();
    const char *id, *name;
    for (size_t i = 0; s->commands.fn && list && (id = s->commands.fn(s->commands.ud, i, &name)); i++) {
        const abx_op *op = abx_registry_get(reg, id);
        if (!op || !abx_policy_mounted(r->policy, r->slot, abx_registry_index_of(reg, op)))
            continue;
        json_array_append_new(list, json_pack("{s:s, s:s, s:s?, s:o}", "name", name, "op", op->id,
                                              "summary", op->def->summary, "params", abx_op_args_schema(op)));
    }
    if (!list) {
        abx_fail(r, ABX_E_SERVER_UNAVAILABLE, "out of memory");
        return;
    }
    abx_reply_json(&r->reply, json_pack("{s:o}", "commands", list));
}
