/* lazylib.h — a shared library that only some ops need, opened on first use instead of
 * at start (dlopen), so an idle server does not map it, relocate it and run its
 * constructors: libzmq (kernels) pulls in libstdc++, libsodium, libnorm, libpgm and the
 * Kerberos libraries, about 2.4 MiB of resident pages (bench/README.md, "idle RSS").
 *
 * A user lists the symbols it calls in an X-macro, keeps one pointer per symbol in a
 * table (abx_lazylib.slots) and calls abx_lazylib_load before its first call; every
 * later call is a plain indirect call. Loading is once per process and thread-safe; a
 * failure (library or symbol missing) is remembered, reported with the reason each
 * time, and the caller fails the op: nothing is called through a NULL pointer. */
#ifndef ABX_CORE_LAZYLIB_H
#define ABX_CORE_LAZYLIB_H

#include <stddef.h>

typedef struct abx_lazylib {
    const char *soname;        /* e.g. "libzmq.so.5", searched like a DT_NEEDED entry */
    const char *const *names;  /* the symbols, in the order of slots */
    void **slots;              /* filled on success, all of them */
    size_t n;
    int state;                 /* 0 not tried, 1 loaded, -1 failed (atomic) */
    char why[160];             /* the failure's reason, once state is -1 */
} abx_lazylib;

/* 0 when every symbol is resolved; -1 with the reason in why (also on later calls). */
int abx_lazylib_load(abx_lazylib *l, char *why, size_t whylen);

#endif
