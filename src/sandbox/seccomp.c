/* seccomp.c — the confined processes' system-call filter (see seccomp.h for the list).
 *
 * A tiny assembler: instructions name their jump targets by label, and the labels are
 * resolved when the program is complete (classic BPF jumps only forward, by at most
 * 255 instructions; the builder checks both). The rules are tables: a system call
 * number and where it goes. */
#include "sandbox/seccomp.h"
#include <errno.h>
#include <linux/audit.h>
#include <linux/netlink.h>
#include <linux/seccomp.h>
#include <stdint.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/socket.h>
#include <sys/syscall.h>
#include <unistd.h>

#if defined(__x86_64__)
#define SC_ARCH AUDIT_ARCH_X86_64
#define SC_X32_BIT 0x40000000u
#elif defined(__aarch64__)
#define SC_ARCH AUDIT_ARCH_AARCH64
#endif

enum label { L_NEXT, L_ALLOW, L_EPERM, L_ENOSYS, L_EACCES, L_EAFNO, L_EPROTO, L_NATIVE, L_I386, L_SOCKET,
             L_SOCKETPAIR, L_NETLINK, L_KILL, L_PID0, L_COUNT };

typedef struct bld {
    abx_seccomp_prog *p;
    const abx_seccomp_guard *guard;      /* NULL: no signal guard */
    int at[L_COUNT];                     /* where each label was placed; -1 until then */
    unsigned char jt[ABX_SECCOMP_MAX];   /* target labels of each instruction's jumps */
    unsigned char jf[ABX_SECCOMP_MAX];
    bool overflow;
} bld;

static void emit(bld *b, uint16_t code, uint32_t k, int jt, int jf)
{
    if (b->p->len >= ABX_SECCOMP_MAX) {
        b->overflow = true;
        return;
    }
    unsigned short i = b->p->len++;
    b->p->insn[i] = (struct sock_filter){.code = code, .k = k};
    b->jt[i] = (unsigned char)jt;
    b->jf[i] = (unsigned char)jf;
}

static void place(bld *b, int label) { b->at[label] = b->p->len; }
static void ld(bld *b, uint32_t off) { emit(b, BPF_LD | BPF_W | BPF_ABS, off, L_NEXT, L_NEXT); }
static void jeq(bld *b, uint32_t k, int jt, int jf) { emit(b, BPF_JMP | BPF_JEQ | BPF_K, k, jt, jf); }
static void jmp(bld *b, int label) { emit(b, BPF_JMP | BPF_JA, 0, label, L_NEXT); }
static void ret(bld *b, uint32_t v) { emit(b, BPF_RET | BPF_K, v, L_NEXT, L_NEXT); }

/* Offsets from labels; -1 when a label is missing or out of reach. */
static int resolve(bld *b)
{
    for (unsigned short i = 0; i < b->p->len; i++) {
        struct sock_filter *f = &b->p->insn[i];
        int t[2] = {b->jt[i], b->jf[i]};
        long off[2] = {0, 0};
        for (int k = 0; k < 2; k++) {
            if (t[k] == L_NEXT)
                continue;
            if (b->at[t[k]] < 0 || b->at[t[k]] <= i)
                return -1; /* never placed, or backwards */
            off[k] = b->at[t[k]] - (i + 1);
        }
        if (BPF_CLASS(f->code) == BPF_JMP && BPF_OP(f->code) == BPF_JA) {
            f->k = (uint32_t)off[0];
            continue;
        }
        if (off[0] > 255 || off[1] > 255)
            return -1;
        f->jt = (unsigned char)off[0];
        f->jf = (unsigned char)off[1];
    }
    return 0;
}

typedef struct rule {
    uint32_t nr;
    int to;
} rule;

#ifdef SC_ARCH
static const rule native_rules[] = {
    {__NR_socket, L_SOCKET},          {__NR_socketpair, L_SOCKETPAIR},   {__NR_keyctl, L_EPERM},
    {__NR_add_key, L_EPERM},          {__NR_request_key, L_EPERM},       {__NR_io_uring_setup, L_ENOSYS},
    {__NR_io_uring_enter, L_ENOSYS},  {__NR_io_uring_register, L_ENOSYS},
};
#endif

#if defined(__x86_64__)
/* i386 numbers (arch/x86/entry/syscalls/syscall_32.tbl); sys/syscall.h has only x86_64's */
static const rule i386_rules[] = {
    {359, L_SOCKET}, {360, L_SOCKETPAIR}, {102, L_ENOSYS} /* socketcall */, {288, L_EPERM} /* keyctl */,
    {286, L_EPERM} /* add_key */, {287, L_EPERM} /* request_key */, {425, L_ENOSYS}, {426, L_ENOSYS},
    {427, L_ENOSYS} /* io_uring */,
};
#endif

#ifdef SC_ARCH
/* The signal guard: calls that name a process by pid in their first argument */
static const rule native_guard[] = {
    {__NR_kill, L_KILL}, {__NR_tgkill, L_PID0}, {__NR_rt_sigqueueinfo, L_PID0}, {__NR_rt_tgsigqueueinfo, L_PID0},
    {__NR_pidfd_open, L_PID0}, {__NR_tkill, L_EPERM},
};
#endif
#if defined(__x86_64__)
static const rule i386_guard[] = {
    {37, L_KILL}, {270, L_PID0}, {178, L_PID0}, {335, L_PID0}, {434, L_PID0}, {238, L_EPERM} /* tkill */,
};
#endif

static void rules(bld *b, const rule *r, size_t n, const rule *g, size_t gn)
{
    ld(b, offsetof(struct seccomp_data, nr));
#if defined(__x86_64__)
    if (r == native_rules) /* x32 calls carry the x86_64 numbers with one more bit */
        emit(b, BPF_ALU | BPF_AND | BPF_K, ~SC_X32_BIT, L_NEXT, L_NEXT);
#endif
    for (size_t i = 0; i < n; i++)
        jeq(b, r[i].nr, r[i].to, L_NEXT);
    for (size_t i = 0; b->guard && i < gn; i++)
        jeq(b, g[i].nr, g[i].to, L_NEXT);
    jmp(b, L_ALLOW);
}

/* kill(pid): abx, its watchdog, abx's process group and every process (-1) are refused;
 * the others name abx or the watchdog as a thread group or pidfd target. The kernel
 * reads an int: the low word of the argument. */
static void guard_rules(bld *b)
{
    if (!b->guard)
        return;
    const abx_seccomp_guard *g = b->guard;
    place(b, L_KILL);
    ld(b, offsetof(struct seccomp_data, args[0]));
    jeq(b, (uint32_t)-1, L_EPERM, L_NEXT);
    jeq(b, (uint32_t)-g->pgid, L_EPERM, L_NEXT);
    place(b, L_PID0);
    ld(b, offsetof(struct seccomp_data, args[0]));
    jeq(b, (uint32_t)g->pids[0], L_EPERM, L_NEXT);
    jeq(b, (uint32_t)g->pids[1], L_EPERM, L_ALLOW);
}

/* socket(domain, type, protocol): the low word of each argument is the int the kernel
 * reads (little-endian: the low word comes first). */
static void socket_rules(bld *b, enum abx_seccomp_net mode)
{
    bool net = mode == ABX_SC_NET;
    /* without an empty network namespace to hold them, internet sockets are refused
     * here (and netlink, which would describe the host's interfaces) */
    bool strict = mode == ABX_SC_NONET_STRICT;
    place(b, L_SOCKET);
    ld(b, offsetof(struct seccomp_data, args[0]));
    jeq(b, AF_INET, strict ? L_EACCES : L_ALLOW, L_NEXT);
    jeq(b, AF_INET6, strict ? L_EACCES : L_ALLOW, L_NEXT);
    jeq(b, AF_NETLINK, strict ? L_EAFNO : L_NETLINK, L_NEXT);
    jeq(b, AF_UNIX, net || mode == ABX_SC_NONET_UNIX ? L_ALLOW : L_EACCES, L_EAFNO);
    place(b, L_NETLINK);
    ld(b, offsetof(struct seccomp_data, args[2]));
    jeq(b, NETLINK_ROUTE, L_ALLOW, L_EPROTO);
    place(b, L_SOCKETPAIR);
    ld(b, offsetof(struct seccomp_data, args[0]));
    jeq(b, AF_UNIX, L_ALLOW, L_EAFNO);
}

int abx_seccomp_build(bool net, abx_seccomp_prog *out)
{
    return abx_seccomp_build_mode(net ? ABX_SC_NET : ABX_SC_NONET_NS, out);
}

int abx_seccomp_build_mode(enum abx_seccomp_net mode, abx_seccomp_prog *out)
{
    return abx_seccomp_build_guarded(mode, NULL, out);
}

int abx_seccomp_build_guarded(enum abx_seccomp_net mode, const abx_seccomp_guard *guard, abx_seccomp_prog *out)
{
#ifndef SC_ARCH
    (void)mode;
    (void)guard;
    memset(out, 0, sizeof *out);
    return -1;
#else
    bld b = {.p = out, .guard = guard};
    memset(out, 0, sizeof *out);
    for (int i = 0; i < L_COUNT; i++)
        b.at[i] = -1;
    ld(&b, offsetof(struct seccomp_data, arch));
#if defined(__x86_64__)
    jeq(&b, SC_ARCH, L_NATIVE, L_NEXT);
    jeq(&b, AUDIT_ARCH_I386, L_I386, L_ENOSYS);
#else
    jeq(&b, SC_ARCH, L_NATIVE, L_ENOSYS);
#endif
    place(&b, L_NATIVE);
    rules(&b, native_rules, sizeof native_rules / sizeof native_rules[0], native_guard,
          sizeof native_guard / sizeof native_guard[0]);
#if defined(__x86_64__)
    place(&b, L_I386);
    rules(&b, i386_rules, sizeof i386_rules / sizeof i386_rules[0], i386_guard,
          sizeof i386_guard / sizeof i386_guard[0]);
#endif
    socket_rules(&b, mode);
    guard_rules(&b);
    static const struct {
        int label;
        uint32_t action;
    } outcomes[] = {
        {L_ALLOW, SECCOMP_RET_ALLOW},
        {L_EPERM, SECCOMP_RET_ERRNO | (EPERM & SECCOMP_RET_DATA)},
        {L_ENOSYS, SECCOMP_RET_ERRNO | (ENOSYS & SECCOMP_RET_DATA)},
        {L_EACCES, SECCOMP_RET_ERRNO | (EACCES & SECCOMP_RET_DATA)},
        {L_EAFNO, SECCOMP_RET_ERRNO | (EAFNOSUPPORT & SECCOMP_RET_DATA)},
        {L_EPROTO, SECCOMP_RET_ERRNO | (EPROTONOSUPPORT & SECCOMP_RET_DATA)},
    };
    for (size_t i = 0; i < sizeof outcomes / sizeof outcomes[0]; i++) {
        place(&b, outcomes[i].label);
        ret(&b, outcomes[i].action);
    }
    if (b.overflow || resolve(&b) != 0) {
        memset(out, 0, sizeof *out);
        return -1;
    }
    return 0;
#endif
}

bool abx_seccomp_available(void)
{
#ifndef SC_ARCH
    return false;
#else
    if (prctl(PR_GET_SECCOMP, 0, 0, 0, 0) < 0)
        return false; /* the kernel has no seccomp at all */
    uint32_t action = SECCOMP_RET_ERRNO;
    return syscall(SYS_seccomp, SECCOMP_GET_ACTION_AVAIL, 0, &action) == 0;
#endif
}
