/* vg_openat2.c — for bench/profile.sh only, never linked into abx: valgrind 3.19
 * answers ENOSYS to openat2(2), which abx's jail uses for every file open (and never
 * falls back from, by design). Preloaded into abx under callgrind, this turns
 * syscall(SYS_openat2, …) into openat(2) with the same flags, so the user-space
 * instructions of a files.read can be counted. The kernel's checks (RESOLVE_BENEATH
 * and the others) are skipped: a profile, not a server. */
#define _GNU_SOURCE
#include <dlfcn.h>
#include <fcntl.h>
#include <linux/openat2.h>
#include <stdarg.h>
#include <sys/syscall.h>

long syscall(long n, ...)
{
    va_list ap;
    va_start(ap, n);
    long a[6];
    for (int i = 0; i < 6; i++)
        a[i] = va_arg(ap, long);
    va_end(ap);
    if (n == SYS_openat2) {
        const struct open_how *h = (const struct open_how *)a[2];
        return openat((int)a[0], (const char *)a[1], (int)h->flags, (mode_t)h->mode);
    }
    static long (*real)(long, ...);
    if (!real)
        real = (long (*)(long, ...))dlsym(RTLD_NEXT, "syscall");
    return real(n, a[0], a[1], a[2], a[3], a[4], a[5]);
}
