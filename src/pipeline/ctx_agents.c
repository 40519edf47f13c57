/* ctx_agents.c — what the agents namespace asks of its context: whether a requirement
 * is installed (install_step.c installs it), the config's agents: section, and step 7
 * for the adapter op a generic call chose (the two-level gate). */
#include "pipeline/pipeline.h"
#include "sandbox/install.h"

bool abx_ctx_installed(abx_ctx *ctx, const char *name, char *program, size_t plen, char *folder, size_t flen)
{
    const char *dir = ctx->req->server->install_dir;
    return dir && abx_install_program(dir, name, program, plen) && abx_install_folder(dir, name, folder, flen);
}

const json_t *abx_ctx_agents_config(abx_ctx *ctx) { return ctx->req->server->cfg.agents; }

void abx_ctx_decide_op(const abx_ctx *ctx, const char *op_id, const json_t *args, abx_decision *d)
{
    const abx_request *q = ctx->req;
    const abx_op *op = abx_registry_resolve(q->server->reg, op_id);
    if (!op) {
        memset(d, 0, sizeof *d);
        d->err = ABX_E_OP_NOT_ENABLED;
        snprintf(d->message, sizeof d->message, "%s", abx_err_meaning(ABX_E_OP_NOT_ENABLED));
        return;
    }
    abx_decide(q->policy, q->slot, op, abx_registry_index_of(q->server->reg, op), args, d, NULL);
}
