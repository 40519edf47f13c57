/* exec.h — shared by the namespaces that start processes (exec.c). */
#ifndef ABX_BUILTIN_EXEC_H
#define ABX_BUILTIN_EXEC_H

#include "builtin/builtin.h"

typedef struct abx_exec_opts {
    size_t head_bytes;          /* keep the first N bytes per stream (commands.run) */
    bool keep_stdin;
    int64_t hard_timeout_ms;    /* the call's own hard cap; the statement's timeout caps it */
    const char *tag;
    const char *cwd;            /* a canonical directory already admitted (sessions), or NULL */
    const json_t *base_env;     /* session environment, or NULL */
    bool pty;
    unsigned short cols, rows;
    const char *tmpdir;         /* a private TMPDIR made already (a kernel's: it holds its
                                   sockets and connection file), or NULL: one is made */
    const int *keep_fds;        /* descriptors the process inherits (a kernel's sockets) */
    size_t n_keep_fds;
    bool persistent;            /* a kernel: the statement's timeout bounds each call, not
                                   the process's life */
    char *const *argv;          /* the argv to run instead of the policy's (declarative commands,
                                   whose program is fixed by the config), or NULL */
    const char *extra_ro;       /* one more folder granted read-only (an installed program), or NULL */
} abx_exec_opts;

/* Start the admitted command confined; NULL with the reply's error set. */
abx_proc *abx_exec_start(abx_ctx *ctx, const json_t *args, const abx_exec_opts *o, abx_reply *r);
/* What a handler returns when abx_exec_start gave NULL: the error it set on the reply
 * (a refused spawn, a cwd that cannot be opened, missing confinement), so the answer
 * keeps its code and message. */
abx_err abx_exec_start_failed(const abx_reply *r);
/* SSE reply of a process's output from the given offsets; takes the reference. */
/* Run to completion (or soft_ms, 0 = none; or the hard timeout; or cancellation) and
 * answer {status, pid, exit_code, signal, running, stdout, stderr, truncated..., argv}
 * (commands.run's result). args may carry stdin. */
abx_err abx_exec_run(abx_ctx *ctx, const json_t *args, const abx_exec_opts *o, int64_t soft_ms, abx_reply *r);
void abx_exec_reply_sse(abx_reply *r, abx_proc *p, uint64_t out_off, uint64_t err_off, bool kill_on_close,
                        bool base64);
/* exec_egress.c: a process with an egress allowlist gets the proxy variables (set(env,
 * k, v) for each) and a sink recording its connections in the call's ledger group. */
void abx_exec_egress_env(void (*set)(void *env, const char *k, const char *v), void *env, int port);
abx_egress_sink abx_exec_egress_sink(abx_ctx *ctx);
int abx_signal_by_name(const char *name);
bool abx_parse_event_id(const char *id, uint64_t *o, uint64_t *e);

#endif
