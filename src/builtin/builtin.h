/* builtin.h — the built-in namespaces' op tables and what their handlers share.
 * Handlers see abx_ctx and their validated arguments, and ask everything else of the
 * context (pipeline/ctx.h): they never see the request or the server. */
#ifndef ABX_BUILTIN_BUILTIN_H
#define ABX_BUILTIN_BUILTIN_H

#include "pipeline/ctx.h"
#include <sys/stat.h>

/* Each namespace's descriptor, defined next to its op table and handlers. */
extern const abx_namespace abx_ns_core, abx_ns_files, abx_ns_system, abx_ns_commands, abx_ns_process,
    abx_ns_terminal, abx_ns_ledger, abx_ns_approvals, abx_ns_kernels, abx_ns_runs, abx_ns_devtools, abx_ns_ports,
    abx_ns_browser, abx_ns_agents, abx_ns_tools;
/* The built-in namespaces in registration order, NULL-terminated (builtin.c): the
 * default registry holds their ops, and every server starts their states. */
extern const abx_namespace *const abx_builtin_namespaces[];

/* The bound every streaming op takes for the tool doors (MCP tools/call, /tools/call,
 * /batch): they answer with what the stream gave by then. An HTTP stream runs until its
 * client leaves and ignores them. */
#define ABX_TOOL_STREAM_PARAMS                                                                                        \
    {"duration", ABX_T_NUMBER, ABX_RANGE(0, 600),                                                                     \
     .doc = "Tool doors (MCP, /tools/call, /batch): answer with the events collected after this many seconds "       \
            "(default: the server's limits.tool_stream_duration, 10 s); plain HTTP streams ignore it"},              \
        {"max_events", ABX_T_INT, ABX_RANGE(1, 100000),                                                               \
         .doc = "Tool doors: answer once this many events came (default: limits.tool_stream_events, 1000)"}

int abx_landlock_abi(void); /* 0 when Landlock is unavailable */

/* Identity checks (policy.h) for what a handler meets beyond abx_ctx_open: a file
 * found while walking, or a directory it works in. */
static inline bool builtin_ident_denied(abx_ctx *ctx, const struct stat *st) { return abx_ctx_ident_denied(ctx, st); }
static inline int builtin_fd_check(abx_ctx *ctx, int fd, int dirfd) { return abx_ctx_fd_check(ctx, fd, dirfd); }

#endif
