/* procs_int.h — the process manager's value types, shared by procs.c (the manager:
 * its thread, spawning, reaping, the table) and proc.c (one process's API). Nothing
 * outside src/sandbox includes this. */
#ifndef ABX_SANDBOX_PROCS_INT_H
#define ABX_SANDBOX_PROCS_INT_H

#include "sandbox/procs.h"
#include <pthread.h>
#include <stdatomic.h>

/* A stream's bytes: the first head_cap bytes (commands.run's answer) and a ring of
 * the last ring_cap bytes (process.output, streams). Offsets are absolute. */
typedef struct stream_buf {
    char *head;
    size_t head_len, head_cap;
    char *ring;
    size_t ring_cap;
    uint64_t total;    /* bytes ever written */
    int fd;            /* read end, -1 once EOF */
} stream_buf;

struct abx_proc {
    atomic_int refs;
    abx_procs *mgr;           /* borrowed; outlives every proc it lists */
    abx_child child;
    int pid;
    char *owner, *tag;        /* owned */
    json_t *argv;             /* owned: what ran (argv[0] absolute) */
    int64_t started_wall, started_mono, ended_wall, ended_mono;
    int64_t kill_at_mono;     /* hard deadline; 0 none */
    bool running;
    bool timed_out, killed;
    int exit_code;            /* -1 when killed by a signal */
    int term_signal;
    int stdin_fd;             /* write end, -1 when closed */
    bool pty;
    int pty_master;           /* for pty processes: the master (also stream 0's fd) */
    stream_buf s[2];
    bool in_table;
    char *tmpdir;             /* owned; removed with the record */
    abx_egress_box *egress;   /* owned: its egress proxy, stopped when it is reaped */
};

typedef struct pending {
    const abx_proc_spec *spec;
    abx_proc *proc;
    int rc;
    char err[256];
    bool done;
    bool sink_taken;          /* the spec's egress sink went to a box */
    struct pending *next;
} pending;

struct abx_procs {
    abx_sandbox *sb;          /* owned; built by the manager thread */
    bool sb_ready;
    char runtime_dir[128];
    char homes_dir[256];
    int64_t homes_ttl_ms;
    _Atomic int64_t homes_swept; /* monotonic ms of the last TTL sweep */
    unsigned run_uid, run_gid;
    bool confine_set, confine_required;
    void (*log)(const char *level, const char *request_id, const char *fmt, ...);
    pthread_t thread;
    pthread_mutex_t mu;
    pthread_cond_t cond;      /* output arrived, a process exited, a spawn finished */
    int epfd, evfd;
    bool stop;
    size_t ring_cap;
    int64_t retention_ms;
    abx_proc **table;         /* every known process (one reference each) */
    size_t n, cap;
    pending *queue;
    abx_child *released;      /* children of reaped processes whose cgroups and namespace are
                                 yet to be released: after the waiters are woken */
    size_t n_released, cap_released;
    char *egress_ca_dir, *egress_upstream_ca; /* owned */
    int egress_port;                          /* egress.proxy_port */
    abx_egress_ca *egress_ca;                 /* made on first need, under ca_mu */
    pthread_mutex_t ca_mu;
};

#endif
