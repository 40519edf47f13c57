/* sandbox_int.h — the sandbox value's layout, shared by the two files of src/sandbox
 * that see it: sandbox.c (probing, the cgroup parents, the /etc grants, its life) and
 * spawn.c (one confined process). Nothing outside src/sandbox includes this. */
#ifndef ABX_SANDBOX_SANDBOX_INT_H
#define ABX_SANDBOX_SANDBOX_INT_H

#include "sandbox/spawn.h"
#include "sandbox/seccomp.h"
#include "sandbox/tiers.h"
#include "sandbox/watchdog.h"
#include <stdatomic.h>

struct abx_sandbox {
    abx_sandbox_caps caps;
    bool required;
    int netns_fd;               /* an empty network namespace, -1 if none */
    char cg_parent[ABX_CG_SLOTS][ABX_CG_PATH]; /* [0] pids (or the v2 dir), [1] memory (v1), [2] cpu (v1) */
    int cap_last;
    char *runtime_dir;          /* owned */
    char mask_file[160];        /* an empty file with mode 000: bound over masked files */
    char tag[64];               /* <pid>-s<start>-<random>: names the live abx that owns a cgroup,
                                   and never meets a dead process's leftovers */
    int *etc_fds;               /* O_PATH fds of /etc entries granted read-only (secrets left out) */
    size_t n_etc;
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
/* child side, system calls only: build it and pivot_root into it; 0, or -1 */
int abx__view_enter(const abx_view *v);

/* egress_ns.c: the proxy's sockets inside a process's namespace */
#define ABX_EGRESS_NS_MAX 3 /* nameservers of resolv.conf made addresses of lo */
size_t abx__egress_ns_nameservers(uint32_t out[ABX_EGRESS_NS_MAX]);
/* child side, system calls only: make them and send them over sock in one message */
int abx__egress_ns_setup(int sock, const abx_confine *c, const uint32_t *ns, size_t nns);
/* parent side: receive them with their kinds; 0, or -1 (none kept) */
int abx__egress_ns_receive(int sock, const abx_confine *c, abx_egress_listeners *out);

#endif
