/* kernels.h — what kernels.c (lifecycle) and kernel_exec.c (cells, host calls) share. */
#ifndef ABX_BUILTIN_KERNELS_H
#define ABX_BUILTIN_KERNELS_H

#include "builtin/builtin.h"
#include "builtin/jupyter.h"

typedef struct kernel {
    char id[20];                 /* "k-" + 12 hex digits */
    char language[8];
    char credential[37];         /* the host channel's kernel-scoped secret */
    char *owner;                 /* the creating principal: host calls run as it */
    json_t *args;                /* {cwd, env} of kernels.create: a restart reuses them */
    char *cwd;                   /* the canonical cwd admitted at creation, or NULL */
    char run[20];                /* the run it belongs to (kernels.create run:), "" none */
    abx_proc *proc;              /* one reference; NULL while stopped */
    abx_jconn *conn;
    pthread_mutex_t mu;          /* guards the FIFO and last_used */
    pthread_cond_t cv;
    uint64_t next_ticket, serving;
    int64_t last_used;
    int exec_count;
    int refs;                    /* under the namespace state's mu */
    int mem_fd, mem_ver;         /* kernel_mem.c: the watch (eventfd v1, memory.events v2), -1 none */
    uint64_t mem_high;           /* v2: memory.events' high count last seen */
    int64_t mem_limit, mem_threshold;
    char mem_dir[256];
    struct kernel *next;
} kernel;

typedef struct kstate {
    pthread_mutex_t mu;
    kernel *list;
} kstate;

extern const abx_namespace abx_ns_kernels, abx_ns_runs;

/* runs.c: does principal owner have run id; complete it once (by: "submit_output" or
 * "finalize"): ABX_OK, or run.not_found / run.completed with msg. */
bool abx_run_exists(abx_host *s, const char *id, const char *owner);
abx_err abx_run_complete(abx_host *s, const char *id, const char *owner, const json_t *output, const char *by,
                         char *msg, size_t msglen);

kernel *abx_kernel_find(abx_ctx *ctx, const json_t *args, abx_reply *r, bool unlink);
void abx_kernel_unref(kstate *st, kernel *k);
json_t *abx_kernel_json(kernel *k);
/* FIFO: wait for the kernel's turn (or 409 kernel.busy when !wait and it is taken). */
abx_err abx_kernel_acquire(kernel *k, bool wait, abx_reply *r);
void abx_kernel_release(kernel *k);
abx_err abx_kernels_execute(abx_ctx *ctx, const json_t *args, abx_reply *r);
abx_err abx_kernels_stream(abx_ctx *ctx, const json_t *args, abx_reply *r);
/* kernel_env.c: a cell's env: checked (names, reserved prefixes, sizes), set in the
 * kernel before the cell (silently; on failure restored and the error on r) and the old
 * values put back after it. The kernel's turn is held by the caller. */
abx_err abx_kenv_check(const json_t *env, abx_reply *r);
abx_err abx_kenv_apply(kernel *k, const json_t *env, abx_reply *r);
void abx_kenv_restore(kernel *k);

/* kernel_mem.c: watch the kernel's memory cgroup (pid) near its limit (bytes, 0 none);
 * 1 watching, 0 nothing to watch, -1 the cgroup refused. */
int abx_kmem_arm(kernel *k, pid_t pid, int64_t limit);
void abx_kmem_disarm(kernel *k);
short abx_kmem_events(const kernel *k);
void abx_kmem_reset(kernel *k);
/* After the watch fired: true when the cell is over the threshold now. */
bool abx_kmem_fired(kernel *k);
json_t *abx_kmem_json(const kernel *k);

#endif
