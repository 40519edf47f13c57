/* sandbox_int.h — the sandbox value's layout, shared by the two files of src/sandbox
 * that see it: sandbox.c (probing, the cgroup parents, the /etc grants, its life) and
 * spawn.c (one confined process). Nothing outside src/sandbox includes this. */
#ifndef ABX_SANDBOX_SANDBOX_INT_H
#define ABX_SANDBOX_SANDBOX_INT_H

#include "sandbox/spawn.h"
#include "sandbox/seccomp.h"
#include "sandbox/tiers.h"
#include "sandbox/watchdog.h"
#include <pthread.h>
#include <stdatomic.h>

/* Under AddressSanitizer a helper child's frames poison the shadow of the stack abx maps
 * for it; that shadow must be cleared before the memory goes back, or a later mapping of
 * the same addresses (libmicrohttpd's pools) reads as a stack overflow. */
#if defined(__SANITIZE_ADDRESS__)
#define ABX_ASAN 1
#elif defined(__has_feature)
#if __has_feature(address_sanitizer)
#define ABX_ASAN 1
#endif
#endif
#ifdef ABX_ASAN
#include <sanitizer/asan_interface.h>
#define abx__unpoison(p, n) __asan_unpoison_memory_region((p), (n))
#else
#define abx__unpoison(p, n) ((void)(p), (void)(n))
#endif

#define ABX_NETPOOL_MAX 8  /* namespaces kept ready at most (more come back: closed) */
#define ABX_NETPOOL_FILL 2 /* made ahead while idle */

/* A Landlock grant every process gets, opened once (O_PATH: the file it names cannot
 * change type, so whether it is a directory is known once too). */
typedef struct abx_fixed_rule {
    int fd;
    bool dir;
    bool rw;                    /* read and write (devices), else read and execute */
} abx_fixed_rule;

/* slots.c: a process's confinement (Landlock ruleset, view) prepared once for a key and
 * used by one process at a time (see there). */
typedef struct abx_slot_id {
    char *path;                 /* owned */
    dev_t dev;
    ino_t ino;
    bool absent;                /* there was nothing at path */
} abx_slot_id;
/* spare.c: a slot's next process, confined ahead for the settings of the call that used
 * the slot last (its recipe), waiting for its program (see there). */
typedef struct abx_spare abx_spare;
typedef struct abx_spare_recipe {
    int64_t pids_max, memory_max, cpu_milli; /* its cgroup's limits */
    long nproc;                              /* RLIMIT_NPROC, 0 none */
    uid_t uid;
    gid_t gid;
    bool use_caps, set_ids;
    const abx_seccomp_prog *filter;          /* one of the sandbox's (never a guarded copy) */
} abx_spare_recipe;
struct abx_slot {
    abx_sandbox *sb;            /* borrowed: its sandbox outlives it */
    char *key;                  /* owned: every path it was built from */
    char dir[128];              /* abx's, kept across uses: each process's TMPDIR is made in it,
                                   and it is emptied between them */
    dev_t dir_dev;
    ino_t dir_ino;
    uid_t uid;                  /* the run ids the TMPDIRs are made for */
    gid_t gid;
    char next_tmp[160];         /* the next process's TMPDIR, made in dir when the slot came
                                   back (a name no process had), or "" */
    int ruleset;                /* Landlock ruleset with its grants and dir */
    int mntns;                  /* the view's mount namespace */
    abx_slot_id *id;            /* what each path was when it was built */
    size_t n_id;
    abx_spare_recipe recipe;    /* the settings of its last process (has_recipe), for a spare */
    bool has_recipe;
    abx_spare *spare;           /* its next process (spare.c), made when the last one's tree was
                                   gone; or NULL */
    void *spare_stack;          /* the stack each of its spares runs on, made with the first */
    abx_slot *next;
};

struct abx_sandbox {
    abx_sandbox_caps caps;
    bool required;
    int netns_fd;               /* an empty network namespace, -1 if none */
    pthread_mutex_t np_mu;      /* netpool.c: namespaces made ahead, loopback up, unused */
    int np_fd[ABX_NETPOOL_MAX];
    size_t np_n;
    bool np_reuse;              /*   a tree's namespace may come back (cgroups and Landlock >= 6) */
    int np_check[ABX_NETPOOL_MAX]; /*   given back, waiting for the checker thread (np_mu) */
    size_t np_nc;
    pthread_cond_t np_cv;       /*   the checker's wake-up */
    pthread_t np_thread;
    bool np_thread_on, np_stop;
    atomic_ulong np_made, np_reused;
    pthread_mutex_t sl_mu;      /* slots.c: prepared confinements not in use */
    abx_slot *slots;
    size_t n_slots;
    bool sl_on;
    atomic_ulong sl_made, sl_reused;
    atomic_ulong sp_made, sp_used;    /* spare.c: processes made ahead, and taken by a call */
    pthread_mutex_t cl_mu;      /* spare.c: the cloner, a thread under the spares' filter and */
    pthread_cond_t cl_cv;       /*   bounding set, from which they are cloned with both */
    pthread_t cl_thread;
    int cl_state;               /*   0 not started, 1 serving, -1 could not set itself up */
    bool cl_stop, cl_done, cl_joinable;
    abx_spare *cl_req;          /*   the spare to clone, then its pid or -errno in cl_rc */
    long cl_rc;
    char cg_parent[ABX_CG_SLOTS][ABX_CG_PATH]; /* [0] pids (or the v2 dir), [1] memory (v1), [2] cpu (v1) */
    int cap_last;
    char *runtime_dir;          /* owned */
    char mask_file[160];        /* an empty file with mode 000: bound over masked files */
    char tag[64];               /* <pid>-s<start>-<random>: names the live abx that owns a cgroup,
                                   and never meets a dead process's leftovers */
    abx_fixed_rule *fixed;      /* what every process is granted: the system directories and the
                                   /etc entries (secrets left out) read-only, a few devices */
    size_t n_fixed;
    atomic_ulong seq;
    abx_seccomp_prog filter[4];  /* by enum abx_seccomp_net */
    bool view;                   /* <runtime_dir>/view exists: processes can get a view (view.c) */
    abx_tiers tiers;             /* the layers as probed, refined by what was set up */
    abx_watchdog wd;
    int cg_errno;                /* why the cgroup parent could not be made */
    char missing[256];
};

/* Write text to a control file (cgroup knobs); false unless all of it was written. */
bool abx__sandbox_write_file(const char *path, const char *text);

/* view.c: a process's own file-system view (only its roots), entered by its child */
typedef struct abx_view_op {
    int kind;
    char *src, *dst; /* owned */
} abx_view_op;
typedef struct abx_view {
    char stage[200]; /* <runtime_dir>/view: where the tmpfs root is built */
    abx_view_op *ops;
    size_t n, cap;
} abx_view;
/* Plan the view of req's process: 0, or -1 (none: its cwd lies outside its roots, or
 * no memory). */
int abx__view_plan(const abx_sandbox *sb, const abx_spawn_req *req, abx_view *v);
void abx__view_free(abx_view *v);
/* req's working directory lies in its roots, TMPDIR or HOME (or it has none): a view can
 * hold it */
bool abx__view_covers(const abx_spawn_req *req);
/* child side, system calls only: build it and pivot_root into it; 0, or -1 */
int abx__view_enter(const abx_view *v);

/* netpool.c: network namespaces made before the processes that use them, each used by
 * one process tree at a time (see there). */
void abx__netpool_init(abx_sandbox *sb);
void abx__netpool_free(abx_sandbox *sb);
/* A namespace for one process tree (loopback up), or -1 when none is ready. */
int abx__netpool_take(abx_sandbox *sb);
/* Back from a tree: kept for a later one when tree_gone (its pids cgroup was emptied
 * and removed) and it holds no socket, else closed. */
void abx__netpool_give(abx_sandbox *sb, int fd, bool tree_gone);
/* Fewer than ABX_NETPOOL_FILL ready; make them (the process manager, while idle). */
bool abx__netpool_wants(abx_sandbox *sb);
void abx__netpool_fill(abx_sandbox *sb);
/* Run fn(arg) in a child sharing abx's memory and descriptors (abx's thread waits until
 * it exits; it may only make system calls); 0 when it exited with 0. */
int abx__run_helper(int (*fn)(void *), void *arg);
/* lo up in the caller's network namespace: system calls only */
int abx__loopback_up(void);

/* spawn.c: a process's cgroups under abx's (out->cgroup) and their cgroup.procs opened
 * for it to join; 0, or -1 with err */
int abx__make_cgroups(abx_sandbox *sb, const abx_confine *c, abx_child *out, int procs_fd[3], char *err,
                      size_t errlen);

/* spare.c. Make one for a slot's view and ruleset (the slot keeps both open while it
 * lives), with a namespace of the pool, running on the slot's stack: NULL when it cannot
 * be (no stack, none ready, no cgroup, this architecture). */
abx_spare *abx__spare_make(abx_sandbox *sb, int mntns, int ruleset, const abx_spare_recipe *r, void *stack);
/* A slot's spare stack (NULL: none could be mapped), and its release once no spare of
 * the slot is left (after abx__spare_discard). */
void *abx__spare_stack(void);
void abx__spare_stack_free(void *stack);
/* It was made for recipe r. */
bool abx__spare_fits(const abx_spare *s, const abx_spare_recipe *r);
/* Hand req's program to it (stdin/out/err, cwd, argv, envp; devnull for a missing stream)
 * and wait for its execve: 0 with out filled (pid, pidfd, cgroups, namespace); -1 when it
 * failed or had died, after which it is gone (discarded) and the caller spawns as usual.
 * Either way s is consumed. */
int abx__spare_use(abx_spare *s, const abx_spawn_req *req, int devnull, abx_child *out);
/* Kill and reap it, remove its cgroup; NULL is fine. */
void abx__spare_discard(abx_spare *s);
/* The cloner (spare.c): set up for the sandbox, and stopped once no spare is left
 * (after abx__slots_free). */
void abx__cloner_init(abx_sandbox *sb);
void abx__cloner_free(abx_sandbox *sb);

void abx__slots_init(abx_sandbox *sb);
void abx__slots_free(abx_sandbox *sb);
/* A slot for c and home, ready (checked, or new), owned by the caller; NULL when slots
 * are off here or it cannot be built. */
abx_slot *abx__slot_take(abx_sandbox *sb, const abx_confine *c, const char *home, uid_t uid, gid_t gid);
/* Back from its process: kept when tree_gone and its TMPDIR could be emptied, else
 * destroyed. */
void abx__slot_put(abx_slot *s, bool tree_gone);
/* A TMPDIR in the slot's folder for its run ids (mode 0700, a new name); 0, or -1. */
int abx__slot_tmpdir(const abx_slot *s, char *dir, size_t len);

/* spawn.c: the Landlock ruleset of req's process (an fd), or -1 with why */
int abx__build_ruleset(const abx_sandbox *sb, const abx_spawn_req *req, char *err, size_t errlen);
/* child side, system calls only: a private mount namespace with c's pins, read-only
 * paths and masks; 0, -1 (no namespace) or -2 (a mount failed) */
int abx__mounts_private(const abx_confine *c, const char *mask_file);

/* egress_ns.c: the proxy's sockets inside a process's namespace */
#define ABX_EGRESS_NS_MAX 3 /* nameservers of resolv.conf made addresses of lo */
size_t abx__egress_ns_nameservers(uint32_t out[ABX_EGRESS_NS_MAX]);
/* child side, system calls only: make them and send them over sock in one message */
int abx__egress_ns_setup(int sock, const abx_confine *c, const uint32_t *ns, size_t nns);
/* parent side: receive them with their kinds; 0, or -1 (none kept) */
int abx__egress_ns_receive(int sock, const abx_confine *c, abx_egress_listeners *out);

#endif
