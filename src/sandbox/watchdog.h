/* watchdog.h — the second line behind abx's own process manager: a small process,
 * forked when the sandbox is built, that kills a call's processes when abx dies (even
 * by SIGKILL) and at the call's deadline when abx cannot (wedged, or gone).
 *
 * abx reports each spawned process over a socketpair: a pidfd of its first process
 * (SCM_RIGHTS), the cgroups it was put in, its deadline. The watchdog holds a pidfd of
 * abx and poll()s it with the socket; when abx's pidfd becomes readable or the socket
 * ends, it kills every registered process group and cgroup, empties and removes abx's
 * cgroup parents, and exits. It keeps only CAP_KILL, is not dumpable, ignores the
 * terminal's and a supervisor's polite signals (INT, TERM, HUP, QUIT), and confined
 * processes cannot signal it for the reasons they cannot signal abx (Landlock signal
 * scoping, or another uid under run_as).
 *
 * What it reaches: with cgroups, every process a call started, setsid or not (cgroup
 * membership). Without cgroups, the process group of a call whose first process is
 * still alive; a process that left the group with setsid() is out of its reach (and of
 * abx's) — the cgroup layer is what makes "nothing outlives its call" complete. */
#ifndef ABX_SANDBOX_WATCHDOG_H
#define ABX_SANDBOX_WATCHDOG_H

#include <stdbool.h>
#include <stdint.h>
#include <sys/types.h>

#define ABX_CG_SLOTS 3
#define ABX_CG_PATH 256

typedef struct abx_watchdog {
    pid_t pid;      /* -1 when not running */
    int sock;       /* abx's end */
} abx_watchdog;

/* Fork the watchdog. parents: the cgroup directories whose p* children hold the calls'
 * processes ("" for unused slots); the watchdog empties and removes them when abx dies.
 * 0, or -1 with errno. */
int abx_watchdog_start(abx_watchdog *wd, const char (*parents)[ABX_CG_PATH]);
/* Register a spawned process: pidfd (the watchdog gets its own copy), the cgroup
 * directories it was put in ("" when none), deadline (CLOCK_MONOTONIC ms; 0 none).
 * While abx reports calls the watchdog reads them every 50 ms, not each as it comes;
 * when the socket is full this waits up to 250 ms for room. 0, or -1 (the watchdog is
 * gone or not keeping up). */
int abx_watchdog_watch(abx_watchdog *wd, int pidfd, pid_t pid, const char (*cgroups)[ABX_CG_PATH],
                       int64_t deadline_ms);
/* When the watchdog has died (killed by hand, by the OOM killer), reap it and say so:
 * the caller starts another. A live one is left alone, even one not keeping up. */
bool abx_watchdog_reap_if_dead(abx_watchdog *wd);
/* Close abx's end and wait for the watchdog to finish its sweep. */
void abx_watchdog_stop(abx_watchdog *wd);

/* Kill every member of a cgroup (cgroup.kill on v2, else SIGKILL over cgroup.procs until
 * it is empty) and, with remove, rmdir it. Async-signal-safe: no allocation, no stdio.
 * 0 when the group is empty (and removed), -1 when members survived the attempts. */
int abx_cgroup_kill(const char *dir, bool remove);
/* The same for each child directory of parent (by getdents), then parent itself. */
void abx_cgroup_kill_tree(const char *parent);

#endif
