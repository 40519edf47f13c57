/* pyworker.h — what the two halves of Python op workers share (src/ext only):
 * pycatalog.c loads a module's catalog into op declarations before the registry
 * freezes; pyworker.c runs the serving process and the calls. */
#ifndef ABX_EXT_PYWORKER_H
#define ABX_EXT_PYWORKER_H

#include "ext/ext.h"
#include "pipeline/ctx.h"
#include "sandbox/egress.h"
#include <pthread.h>

#define DISCOVER_TIMEOUT_MS 20000
#define CALL_DEFAULT_TIMEOUT_MS (10 * 60 * 1000)
#define LINE_MAX_BYTES (8u << 20)
#define CRASH_WINDOW_MS 30000
#define CRASH_BURST 3

/* One running worker process and what has been read of it. */
typedef struct chan {
    abx_proc *proc;              /* one reference; NULL = stopped */
    uint64_t out_off, err_off;   /* stdout/stderr consumed */
    abx_buf line;                /* a partial stdout line */
} chan;

struct abx_pyworker {
    char *module;                /* owned: "pkg.mod" */
    abx_ext *ext;                /* borrowed: owns the op declarations */
    char *python;                /* owned */
    char *config_dir;            /* owned */
    char **op_ids;               /* owned (arena strings, owned array) */
    size_t n_ops;
    pthread_mutex_t mu;          /* one call at a time; guards everything below */
    bool per_call;               /* python_isolation: per_call — a fresh process per call */
    abx_procs *procs;            /* borrowed, set by abx_ext_workers_start */
    chan ch;                     /* the long-lived process (shared mode) */
    _Atomic uint64_t next_id;    /* call ids (per-call processes do not take mu) */
    pthread_mutex_t roots_mu;    /* guards the roots below (a reload sets them while a call may run) */
    char **ro, **rw;             /* owned: the union of the mounting statements' roots */
    size_t n_ro, n_rw;
    bool net;
    abx_egress_allow *allow;     /* owned: without net, the union of the mounting statements'
                                    allowlists (net: {allow}), else NULL */
    const abx_egress_resolver *resolve; /* borrowed from the policy with allow (copied at spawn) */
    unsigned roots_gen;          /* bumped when the roots change; the process runs with ch_gen's */
    unsigned ch_gen;             /* (ch_gen guarded by mu) */
    int64_t crashes[CRASH_BURST];/* times of the latest crashes (ring) */
    size_t n_crashes;
    int64_t backoff_ms, backoff_until_ms;
};

/* The handler of every Python op (pyworker.c): one call through the op's worker. */
abx_err abx__py_call(abx_ctx *ctx, const json_t *args, abx_reply *r);

#endif
