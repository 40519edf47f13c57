/* builtin.h — the built-in namespaces' op tables and what their handlers share.
 * Handlers see abx_ctx and their validated arguments; the few core ops that describe
 * the server itself read the request value through builtin_req(). */
#ifndef ABX_BUILTIN_BUILTIN_H
#define ABX_BUILTIN_BUILTIN_H

#include "pipeline/pipeline.h"

/* Each namespace's descriptor, defined next to its op table and handlers. */
extern const abx_namespace abx_ns_core, abx_ns_files, abx_ns_system, abx_ns_commands, abx_ns_process,
    abx_ns_terminal, abx_ns_ledger, abx_ns_approvals, abx_ns_kernels, abx_ns_runs, abx_ns_devtools;
/* The built-in namespaces in registration order, NULL-terminated (builtin.c): the
 * default registry holds their ops, and every server starts their states. */
extern const abx_namespace *const abx_builtin_namespaces[];

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
