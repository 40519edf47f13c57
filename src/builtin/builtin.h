/* builtin.h — the built-in namespaces' op tables and what their handlers share.
 * Handlers see abx_ctx and their validated arguments; the few core ops that describe
 * the server itself read the request value through builtin_req(). */
#ifndef ABX_BUILTIN_BUILTIN_H
#define ABX_BUILTIN_BUILTIN_H

#include "pipeline/pipeline.h"

extern const abx_op_def abx_builtin_core[];
extern const abx_op_def abx_builtin_files[];
extern const abx_op_def abx_builtin_system[];
extern const abx_op_def abx_builtin_commands[];
extern const abx_op_def abx_builtin_process[];
extern const abx_op_def abx_builtin_terminal[];
extern const abx_op_def abx_builtin_ledger[];
extern const abx_op_def abx_builtin_approvals[];

int abx_landlock_abi(void); /* 0 when Landlock is unavailable */

static inline abx_request *builtin_req(abx_ctx *ctx) { return ctx->req; }

/* Identity checks (policy.h) for what a handler meets beyond abx_ctx_open: a file
 * found while walking, or a directory it works in. */
static inline bool builtin_ident_denied(abx_ctx *ctx, const struct stat *st)
{
    abx_request *r = ctx->req;
    return r->policy->n_idents && abx_policy_ident_denied(r->policy, r->slot, r->op, &r->decision, st);
}

static inline int builtin_fd_check(abx_ctx *ctx, int fd, int dirfd)
{
    abx_request *r = ctx->req;
    return abx_policy_fd_check(r->policy, r->slot, r->op, &r->decision, fd, dirfd);
}

#endif
