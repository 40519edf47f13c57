/* seccomp.h — the system-call filter every confined process runs under.
 *
 * Built from a table (seccomp.c) rather than written as hand-counted jumps: the
 * builder resolves labels, so adding a rule cannot silently shift another's target.
 * What it refuses, whatever the statement:
 *   keyctl, add_key, request_key          EPERM   (the kernel keyrings are not
 *                                                  namespaced: the host user's secrets)
 *   io_uring_setup / _enter / _register   ENOSYS  (io_uring opens sockets on its own,
 *                                                  past the socket() rule)
 *   socket(): families the statement does not grant   EAFNOSUPPORT
 *     without net: AF_INET, AF_INET6 (inside the empty network namespace) and
 *                  AF_NETLINK with NETLINK_ROUTE; AF_UNIX is refused with EACCES
 *     with net:    AF_UNIX, AF_INET, AF_INET6, AF_NETLINK with NETLINK_ROUTE
 *     other netlink protocols                         EPROTONOSUPPORT
 *     without net and without an empty network namespace (the unprivileged tier):
 *                  AF_INET, AF_INET6 and AF_UNIX refused with EACCES, netlink too
 *   with a guard (below): signals to abx and its watchdog           EPERM
 *   socketpair() of anything but AF_UNIX              EAFNOSUPPORT
 *   i386 socketcall (its arguments are in memory, a filter cannot read them)  ENOSYS
 *   any other ABI than the native one (and i386 on x86_64)                    ENOSYS
 * x32 system calls are matched by their x86_64 numbers. */
#ifndef ABX_SANDBOX_SECCOMP_H
#define ABX_SANDBOX_SECCOMP_H

#include <linux/filter.h>
#include <stdbool.h>
#include <stddef.h>

#define ABX_SECCOMP_MAX 128

typedef struct abx_seccomp_prog {
    struct sock_filter insn[ABX_SECCOMP_MAX];
    unsigned short len;
} abx_seccomp_prog;

enum abx_seccomp_net {
    ABX_SC_NONET_NS,     /* net: false inside the empty network namespace */
    ABX_SC_NET,          /* net: true */
    ABX_SC_NONET_STRICT, /* net: false with no network namespace: no internet sockets at all */
    ABX_SC_NONET_UNIX,   /* net: false inside the empty network namespace, with a view of only its
                            roots (view.c): Unix sockets too */
};

/* Build the filter for a statement with or without `net`. 0, or -1 when this
 * architecture has no filter (the caller treats seccomp as unavailable). */
int abx_seccomp_build(bool net, abx_seccomp_prog *out);
int abx_seccomp_build_mode(enum abx_seccomp_net mode, abx_seccomp_prog *out);

/* Where a process runs as abx's own uid and Landlock cannot scope signals (ABI < 6),
 * the kernel lets it signal abx and the watchdog. The guard refuses (EPERM) kill() of
 * either pid, of abx's process group and of -1 (every process of the uid); tgkill,
 * rt_sigqueueinfo, rt_tgsigqueueinfo and pidfd_open naming either; and tkill (a thread
 * id of abx cannot be told apart). */
typedef struct abx_seccomp_guard {
    int pids[2];   /* abx, the watchdog (repeat abx's when there is none) */
    int pgid;      /* abx's process group */
} abx_seccomp_guard;
int abx_seccomp_build_guarded(enum abx_seccomp_net mode, const abx_seccomp_guard *guard, abx_seccomp_prog *out);
/* The kernel accepts filters that return errno values. */
bool abx_seccomp_available(void);

#endif
