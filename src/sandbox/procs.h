/* procs.h — the process manager: every process abx starts lives in its table.
 *
 * One manager thread spawns (so PDEATHSIG is tied to a thread that lives as long as
 * the server), reaps through pidfds (no zombies), drains stdout/stderr into bounded
 * per-stream buffers whether or not anyone listens, and enforces hard deadlines by
 * killing the whole process group and cgroup. Request threads start, wait, read,
 * write stdin and signal through the functions below.
 *
 * Process states: RUNNING → EXITED (exit code or signal; timed_out / killed flags say
 * why). abx_proc_start moves nothing → RUNNING; the manager moves RUNNING → EXITED
 * when the pidfd reports exit. Exited records are kept for `retention_ms`, then
 * dropped by the manager. */
#ifndef ABX_SANDBOX_PROCS_H
#define ABX_SANDBOX_PROCS_H

#include "sandbox/egress_box.h"
#include "sandbox/spawn.h"
#include <jansson.h>
#include <stdbool.h>
#include <stdint.h>

typedef struct abx_procs abx_procs;
typedef struct abx_proc abx_proc;

enum abx_stream_id { ABX_STDOUT = 0, ABX_STDERR = 1 };

/* What every process the manager starts shares, fixed for the manager's life: the
 * server decides it once (config, workspace owner) and handlers ask the manager. */
typedef struct abx_procs_opts {
    const char *runtime_dir;   /* private TMPDIRs live below it (copied) */
    const char *homes_dir;     /* principals' private HOMEs live below it (copied); NULL:
                                  <runtime_dir>/homes */
    int64_t homes_ttl_ms;      /* remove a HOME unused this long (0 = never) */
    unsigned run_uid, run_gid; /* the ids confined processes run as */
    bool confine_set;          /* the config chose the confinement mode: */
    bool confine_required;     /*   required, else best effort (unset: see abx_procs_confine_required) */
    size_t ring_bytes;         /* per-stream output ring; 0 = 1 MiB */
    int64_t retention_ms;      /* how long exited records stay; 0 = 10 minutes */
    const char *egress_ca_dir; /* where the egress CA is kept (copied); NULL: no inject rules can run */
    const char *egress_upstream_ca; /* egress.upstream_ca (copied), or NULL */
    int egress_proxy_port;     /* egress.proxy_port; 0: ABX_EGRESS_PORT */
    /* where the tier is logged once the sandbox is built (abx_log's shape); may be NULL */
    void (*log)(const char *level, const char *request_id, const char *fmt, ...);
} abx_procs_opts;

/* The manager thread probes the kernel and builds the sandbox (namespaces, cgroups) off
 * the start-up path: serving begins before that work is done. */
abx_procs *abx_procs_new(const abx_procs_opts *o, char *err, size_t errlen);
/* The sandbox, once the manager has built it (waits for that); NULL if it failed. */
abx_sandbox *abx_procs_sandbox(abx_procs *m);
/* The port of the egress proxy inside each process's namespace (egress.proxy_port). */
int abx_procs_egress_port(const abx_procs *m);
/* Whether confinement is required: the mode the config chose, else required. */
bool abx_procs_confine_required(abx_procs *m);
/* The ids confined processes run as. */
void abx_procs_run_ids(const abx_procs *m, uid_t *uid, gid_t *gid);
/* A fresh private TMPDIR for one process: a directory below the runtime dir (made if
 * missing), owned by the run ids. 0 with dir filled, or -1 with why. Hand it to the
 * process with abx_proc_set_tmpdir, or remove it with abx_rm_tree. */
int abx_procs_make_tmpdir(abx_procs *m, char *dir, size_t dirlen, char *why, size_t whylen);
/* A private TMPDIR with the process's confinement prepared (sandbox/slots.c) for c's
 * roots and home: dir filled, the slot to hand to abx_proc_start in spec.spawn.slot (it
 * takes it, started or not), or to abx_sandbox_slot_put. NULL: use abx_procs_make_tmpdir. */
abx_slot *abx_procs_slot_take(abx_procs *m, const abx_confine *c, const char *home, char *dir, size_t dirlen);
/* The environment that makes a process trust the egress CA, the CA made or loaded the
 * first time it is needed. The CA lives in abx's protected state, which a process cannot
 * read, so its certificate and the bundle (system store + abx CA; never the key) are
 * copied into dir (the process's private TMPDIR) and out points at bundle and cert, each
 * PATH_MAX long. 0, or -1 with why (fail closed: no process with inject rules without it). */
int abx_procs_egress_ca_env(abx_procs *m, const char *dir, char *bundle, char *cert,
                            abx_env_pair out[ABX_EGRESS_CA_ENV], char *why, size_t whylen);
/* The principal's private HOME (homes.c): <homes_dir>/<name>, made on first use with
 * mode 0700 and owned by the run ids, kept across calls. 0 with dir filled, or -1 with
 * why. The name is the principal's id when it is a plain name, else a hash of it. */
int abx_procs_home(abx_procs *m, const char *principal, char *dir, size_t dirlen, char *why, size_t whylen);
/* Remove the principal's HOME and everything in it (made again on next use). 1 removed,
 * 0 there was none, -1 with errno. */
int abx_procs_home_clean(abx_procs *m, const char *principal);
/* Remove every HOME not used (modified) for ttl_ms; how many went. */
size_t abx_procs_homes_expire(abx_procs *m, int64_t ttl_ms);
/* TERM every process group, wait up to grace_ms, KILL the rest, stop the thread. */
void abx_procs_free(abx_procs *m, int64_t grace_ms);
/* Signal every running process group (stop: TERM at once, KILL when the grace is over). */
void abx_procs_kill_all(abx_procs *m, int sig);

typedef struct abx_proc_spec {
    abx_spawn_req spawn;       /* fds are filled in by the manager */
    const char *owner;         /* principal id */
    const char *tag;           /* free text for listings, may be NULL */
    int64_t kill_after_ms;     /* hard cap on the process's life from start; 0 = none */
    size_t head_bytes;         /* keep the first N bytes of each stream (commands.run); 0 = none */
    bool keep_stdin;           /* keep a pipe to stdin open (process.write) */
    bool pty;                  /* run on a pseudo-terminal (stdout carries both streams) */
    unsigned short cols, rows; /* pty size */
    /* with spawn.confine->egress_port: the process's egress proxy decides on these
     * (copied) and reports to egress_sink, whose ctx abx_proc_start takes in every case */
    const abx_egress_allow *egress_allow;
    const abx_egress_resolver *egress_resolve;
    abx_egress_sink egress_sink;
    const abx_egress_injects *egress_inject; /* net.inject of the statement (copied); may be NULL */
} abx_proc_spec;

/* Start a process. Returns a reference (release with abx_proc_unref) or NULL with why. */
abx_proc *abx_proc_start(abx_procs *m, const abx_proc_spec *spec, char *err, size_t errlen);
abx_proc *abx_proc_find(abx_procs *m, int pid); /* a reference, or NULL */
void abx_proc_unref(abx_proc *p);
/* Every process (a reference each) visible to owner (NULL = all). Caller frees the array
 * and unrefs each. */
size_t abx_procs_list(abx_procs *m, const char *owner, abx_proc ***out);

int abx_proc_pid(const abx_proc *p);
const char *abx_proc_owner(const abx_proc *p);
bool abx_proc_running(abx_proc *p);

/* Wait until the process exits, the deadline (CLOCK_MONOTONIC ms; 0 = none) passes, or
 * cancelled(ud) returns true (polled every 100 ms). 1 exited, 0 deadline, -1 cancelled. */
int abx_proc_wait(abx_proc *p, int64_t deadline_ms, bool (*cancelled)(void *), void *ud);
/* Wait until stream output beyond the given offsets exists, the process exits, or the
 * deadline passes. Returns true when something new is there (or it exited). */
bool abx_proc_wait_output(abx_proc *p, uint64_t out_off, uint64_t err_off, int64_t deadline_ms);
/* Kill the process group and cgroup with sig; mark why (killed / timed out). */
void abx_proc_kill(abx_proc *p, int sig, bool timed_out);
int abx_proc_signal(abx_proc *p, int sig);

/* Write to stdin (blocking up to deadline); eof closes it. Bytes written, or -errno. */
long abx_proc_write_stdin(abx_proc *p, const void *data, size_t len, bool eof, int64_t deadline_ms);
/* Resize the terminal of a pty process. */
int abx_proc_resize(abx_proc *p, unsigned short cols, unsigned short rows);

/* Read from a stream's ring starting at byte offset `off` (absolute). Copies at most max
 * bytes into a new buffer (*data, caller frees), sets *start to the offset actually
 * used (> off when `off` fell off the ring: *dropped = true), returns the length.
 * *total is the stream's total so far. */
size_t abx_proc_read(abx_proc *p, enum abx_stream_id s, uint64_t off, size_t max, char **data, uint64_t *start,
                     bool *dropped, uint64_t *total);
/* The head buffer (first head_bytes) of a stream; *truncated when more was written. */
size_t abx_proc_head(abx_proc *p, enum abx_stream_id s, char **data, bool *truncated);

/* Remove a directory tree without following symlinks (private TMPDIRs). */
void abx_rm_tree(const char *dir);
/* The process's private TMPDIR, removed when its record is dropped (the proc copies it). */
void abx_proc_set_tmpdir(abx_proc *p, const char *dir);
/* Status: {pid, running, status, exit_code, signal, started_at, ended_at, duration_ms,
 * argv, tag, owner, stdout_bytes, stderr_bytes}. */
json_t *abx_proc_json(abx_proc *p);
/* "completed" | "running" | "timed_out" | "killed" */
const char *abx_proc_status(abx_proc *p);

#endif
