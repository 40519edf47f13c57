/* test_seccomp.c — the filter builder of src/sandbox/seccomp.c, run through a small
 * classic-BPF interpreter (the subset the builder emits) instead of the kernel: every
 * rule of seccomp.h is checked for both statements (with and without net), on each ABI
 * this architecture knows, plus the shape rules the kernel would enforce (forward jumps
 * inside the program, a return at the end). */
#include <stdarg.h>
#include <stddef.h>
#include <setjmp.h>
#include <stdint.h>
#include <cmocka.h>

#include <errno.h>
#include <linux/audit.h>
#include <linux/netlink.h>
#include <linux/seccomp.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/syscall.h>

#include "sandbox/seccomp.h"

#define ERR(e) (SECCOMP_RET_ERRNO | (uint32_t)(e))
#define ALLOW SECCOMP_RET_ALLOW

/* Run prog on one system call; fails the test on anything the builder should never
 * emit (an unknown opcode, a jump out of the program, falling off its end). */
static uint32_t run(const abx_seccomp_prog *p, uint32_t arch, uint32_t nr, uint64_t a0, uint64_t a2)
{
    struct seccomp_data d;
    memset(&d, 0, sizeof d);
    d.arch = arch;
    d.nr = (int)nr;
    d.args[0] = a0;
    d.args[2] = a2;
    uint32_t acc = 0;
    for (unsigned pc = 0; pc < p->len; pc++) {
        const struct sock_filter *f = &p->insn[pc];
        switch (f->code) {
        case BPF_LD | BPF_W | BPF_ABS:
            assert_true(f->k + 4 <= sizeof d && f->k % 4 == 0);
            memcpy(&acc, (const char *)&d + f->k, 4);
            break;
        case BPF_ALU | BPF_AND | BPF_K: acc &= f->k; break;
        case BPF_JMP | BPF_JA: pc += f->k; break;
        case BPF_JMP | BPF_JEQ | BPF_K: pc += acc == f->k ? f->jt : f->jf; break;
        case BPF_RET | BPF_K: return f->k;
        default: fail_msg("unexpected opcode %#x at %u", f->code, pc);
        }
        assert_true(pc + 1 <= p->len);
    }
    fail_msg("fell off the end of the program");
    return 0;
}

#if defined(__x86_64__)
#define NATIVE AUDIT_ARCH_X86_64
#elif defined(__aarch64__)
#define NATIVE AUDIT_ARCH_AARCH64
#endif

#ifdef NATIVE
static void build(bool net, abx_seccomp_prog *p)
{
    assert_int_equal(abx_seccomp_build(net, p), 0);
    assert_true(p->len > 0 && p->len <= ABX_SECCOMP_MAX);
    assert_int_equal(BPF_CLASS(p->insn[p->len - 1].code), BPF_RET);
}

static void check_abi(const abx_seccomp_prog *p, bool net, uint32_t arch, uint32_t nr_socket, uint32_t nr_pair,
                      const uint32_t *keys, const uint32_t *uring)
{
    for (int i = 0; i < 3; i++) {
        assert_int_equal(run(p, arch, keys[i], 0, 0), ERR(EPERM));
        assert_int_equal(run(p, arch, uring[i], 0, 0), ERR(ENOSYS));
    }
    assert_int_equal(run(p, arch, nr_socket, AF_INET, 0), ALLOW);
    assert_int_equal(run(p, arch, nr_socket, AF_INET6, 0), ALLOW);
    assert_int_equal(run(p, arch, nr_socket, AF_UNIX, 0), net ? ALLOW : ERR(EACCES));
    assert_int_equal(run(p, arch, nr_socket, AF_NETLINK, NETLINK_ROUTE), ALLOW);
    assert_int_equal(run(p, arch, nr_socket, AF_NETLINK, NETLINK_AUDIT), ERR(EPROTONOSUPPORT));
    static const int refused[] = {AF_VSOCK, AF_PACKET, AF_ALG, AF_BLUETOOTH, AF_KEY, AF_XDP, AF_TIPC, AF_CAN,
                                  AF_RDS, AF_QIPCRTR, 0, 255};
    for (size_t i = 0; i < sizeof refused / sizeof refused[0]; i++)
        assert_int_equal(run(p, arch, nr_socket, (uint64_t)refused[i], 0), ERR(EAFNOSUPPORT));
    /* the high word of a 64-bit argument is not the family the kernel reads, but a
     * family hidden above it must not pass as AF_INET either */
    assert_int_equal(run(p, arch, nr_socket, ((uint64_t)1 << 32) | AF_VSOCK, 0), ERR(EAFNOSUPPORT));
    assert_int_equal(run(p, arch, nr_pair, AF_UNIX, 0), ALLOW);
    assert_int_equal(run(p, arch, nr_pair, AF_INET, 0), ERR(EAFNOSUPPORT));
    assert_int_equal(run(p, arch, nr_pair, AF_VSOCK, 0), ERR(EAFNOSUPPORT));
}

static void test_rules(bool net)
{
    abx_seccomp_prog p;
    build(net, &p);
    const uint32_t keys[] = {__NR_keyctl, __NR_add_key, __NR_request_key};
    const uint32_t uring[] = {__NR_io_uring_setup, __NR_io_uring_enter, __NR_io_uring_register};
    check_abi(&p, net, NATIVE, __NR_socket, __NR_socketpair, keys, uring);
    /* ordinary calls pass */
    assert_int_equal(run(&p, NATIVE, __NR_read, 0, 0), ALLOW);
    assert_int_equal(run(&p, NATIVE, __NR_openat, 0, 0), ALLOW);
    assert_int_equal(run(&p, NATIVE, __NR_connect, 0, 0), ALLOW);
#if defined(__x86_64__)
    const uint32_t x32 = 0x40000000u;
    const uint32_t xkeys[] = {keys[0] | x32, keys[1] | x32, keys[2] | x32};
    const uint32_t xuring[] = {uring[0] | x32, uring[1] | x32, uring[2] | x32};
    check_abi(&p, net, NATIVE, __NR_socket | x32, __NR_socketpair | x32, xkeys, xuring);
    const uint32_t ikeys[] = {288, 286, 287}, iuring[] = {425, 426, 427};
    check_abi(&p, net, AUDIT_ARCH_I386, 359, 360, ikeys, iuring);
    assert_int_equal(run(&p, AUDIT_ARCH_I386, 102, 1, 0), ERR(ENOSYS)); /* socketcall */
    assert_int_equal(run(&p, AUDIT_ARCH_I386, 3, 0, 0), ALLOW);         /* read */
#endif
    /* an ABI the filter does not know gets nothing */
    assert_int_equal(run(&p, AUDIT_ARCH_ARM, __NR_read, 0, 0), ERR(ENOSYS));
}

static void test_without_net(void **state)
{
    (void)state;
    test_rules(false);
}

static void test_with_net(void **state)
{
    (void)state;
    test_rules(true);
}

/* net: false where no empty network namespace exists (the unprivileged tier): the filter
 * alone keeps the process off the network, so internet, netlink and Unix sockets are
 * refused while socketpair and the rest still pass */
static void test_strict_without_netns(void **state)
{
    (void)state;
    abx_seccomp_prog p;
    assert_int_equal(abx_seccomp_build_mode(ABX_SC_NONET_STRICT, &p), 0);
    assert_int_equal(run(&p, NATIVE, __NR_socket, AF_INET, 0), ERR(EACCES));
    assert_int_equal(run(&p, NATIVE, __NR_socket, AF_INET6, 0), ERR(EACCES));
    assert_int_equal(run(&p, NATIVE, __NR_socket, AF_UNIX, 0), ERR(EACCES));
    assert_int_equal(run(&p, NATIVE, __NR_socket, AF_NETLINK, NETLINK_ROUTE), ERR(EAFNOSUPPORT));
    assert_int_equal(run(&p, NATIVE, __NR_socket, AF_PACKET, 0), ERR(EAFNOSUPPORT));
    assert_int_equal(run(&p, NATIVE, __NR_socketpair, AF_UNIX, 0), ALLOW);
    assert_int_equal(run(&p, NATIVE, __NR_keyctl, 0, 0), ERR(EPERM));
    assert_int_equal(run(&p, NATIVE, __NR_read, 0, 0), ALLOW);
#if defined(__x86_64__)
    assert_int_equal(run(&p, AUDIT_ARCH_I386, 359, AF_INET, 0), ERR(EACCES));
    assert_int_equal(run(&p, NATIVE, __NR_socket | 0x40000000u, AF_INET6, 0), ERR(EACCES));
#endif
}

/* the signal guard (a process with abx's uid and no Landlock scoping) */
static void test_signal_guard(void **state)
{
    (void)state;
    abx_seccomp_guard g = {.pids = {4242, 4343}, .pgid = 4200};
    abx_seccomp_prog p, plain;
    assert_int_equal(abx_seccomp_build_guarded(ABX_SC_NONET_STRICT, &g, &p), 0);
    assert_true(p.len <= ABX_SECCOMP_MAX);
    assert_int_equal(run(&p, NATIVE, __NR_kill, 4242, 0), ERR(EPERM));
    assert_int_equal(run(&p, NATIVE, __NR_kill, 4343, 0), ERR(EPERM));
    assert_int_equal(run(&p, NATIVE, __NR_kill, (uint32_t)-4200, 0), ERR(EPERM));
    assert_int_equal(run(&p, NATIVE, __NR_kill, (uint32_t)-1, 0), ERR(EPERM));
    assert_int_equal(run(&p, NATIVE, __NR_kill, 4244, 0), ALLOW);
    assert_int_equal(run(&p, NATIVE, __NR_kill, 0, 0), ALLOW);
    assert_int_equal(run(&p, NATIVE, __NR_tgkill, 4242, 0), ERR(EPERM));
    assert_int_equal(run(&p, NATIVE, __NR_tgkill, 5000, 0), ALLOW);
    assert_int_equal(run(&p, NATIVE, __NR_pidfd_open, 4343, 0), ERR(EPERM));
    assert_int_equal(run(&p, NATIVE, __NR_rt_sigqueueinfo, 4242, 0), ERR(EPERM));
    assert_int_equal(run(&p, NATIVE, __NR_tkill, 5000, 0), ERR(EPERM));
    /* the rest of the filter is unchanged */
    assert_int_equal(run(&p, NATIVE, __NR_socket, AF_INET, 0), ERR(EACCES));
    assert_int_equal(run(&p, NATIVE, __NR_read, 0, 0), ALLOW);
#if defined(__x86_64__)
    assert_int_equal(run(&p, AUDIT_ARCH_I386, 37, 4242, 0), ERR(EPERM));       /* kill */
    assert_int_equal(run(&p, AUDIT_ARCH_I386, 270, 4343, 0), ERR(EPERM));      /* tgkill */
    assert_int_equal(run(&p, AUDIT_ARCH_I386, 37, 4244, 0), ALLOW);
    assert_int_equal(run(&p, NATIVE, __NR_kill | 0x40000000u, 4242, 0), ERR(EPERM)); /* x32 */
#endif
    /* without a guard, signals are the kernel's (and Landlock's) business */
    assert_int_equal(abx_seccomp_build_mode(ABX_SC_NONET_STRICT, &plain), 0);
    assert_int_equal(run(&plain, NATIVE, __NR_kill, 4242, 0), ALLOW);
    assert_true(plain.len < p.len);
}
#endif

int main(void)
{
#ifdef NATIVE
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_without_net),
        cmocka_unit_test(test_with_net),
        cmocka_unit_test(test_strict_without_netns),
        cmocka_unit_test(test_signal_guard),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
#else
    return 0;
#endif
}
