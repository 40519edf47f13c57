/* fault.c — allocation-failure injection: the one countdown (the only global mutable
 * state of core) that abx_malloc and friends ask, and the same countdown for the
 * allocators abx does not own: jansson's (json_set_alloc_funcs) and SQLite's
 * (SQLITE_CONFIG_MALLOC). With ABX_FAULT_INJECTION they all count against it
 * (ABX_FAIL_ALLOC_AT=n or abx_fault_reset(n)), so a torture test that walks n over a
 * request reaches failures inside JSON building and ledger writes too. The hooks are
 * installed here on first use, so this file calls nothing in util.c (util.c calls
 * it). Compiled to no-ops otherwise; never part of a release build. */
#include "core/fault.h"

#if defined(ABX_FAULT_INJECTION) && ABX_FAULT_INJECTION

#include <errno.h>
#include <jansson.h>
#include <sqlite3.h>
#include <stdlib.h>
#include <string.h>

static void install_hooks(void);

/* The countdown lives in two words updated separately; a reset that races with
 * allocations on other threads may count a concurrent call on either side of it.
 * Tests reset from one thread, so that is good enough. */
static long fault_at;    /* the failing call number, 0 = disabled */
static long fault_seen;  /* calls since the last reset */
static int fault_state;  /* 0 = environment not read yet, 1 = being read, 2 = ready */

static long fault_parse_env(void)
{
    const char *v = getenv("ABX_FAIL_ALLOC_AT");
    if (!v || !*v)
        return 0;
    char *end;
    errno = 0;
    long n = strtol(v, &end, 10);
    if (errno || *end || n < 0)
        return 0;
    return n;
}

/* The environment is read on first use rather than in a constructor so that an
 * allocation made by another constructor still sees it. */
static void fault_init(void)
{
    if (__atomic_load_n(&fault_state, __ATOMIC_ACQUIRE) == 2)
        return;
    int expected = 0;
    if (__atomic_compare_exchange_n(&fault_state, &expected, 1, false, __ATOMIC_ACQ_REL,
                                    __ATOMIC_ACQUIRE)) {
        __atomic_store_n(&fault_at, fault_parse_env(), __ATOMIC_RELAXED);
        __atomic_store_n(&fault_seen, 0, __ATOMIC_RELAXED);
        __atomic_store_n(&fault_state, 2, __ATOMIC_RELEASE);
        install_hooks(); /* jansson and SQLite count against the same countdown */
        return;
    }
    while (__atomic_load_n(&fault_state, __ATOMIC_ACQUIRE) != 2)
        ;
}

bool abx__fault_fail_now(void)
{
    fault_init();
    long seen = __atomic_add_fetch(&fault_seen, 1, __ATOMIC_RELAXED);
    long at = __atomic_load_n(&fault_at, __ATOMIC_RELAXED);
    return at > 0 && seen == at;
}

void abx_fault_reset(long n)
{
    fault_init(); /* so a later first allocation cannot overwrite n with the environment */
    __atomic_store_n(&fault_seen, 0, __ATOMIC_RELAXED);
    __atomic_store_n(&fault_at, n > 0 ? n : 0, __ATOMIC_RELEASE);
}

long abx_fault_count(void)
{
    fault_init();
    return __atomic_load_n(&fault_seen, __ATOMIC_RELAXED);
}

static void *json_alloc(size_t n)
{
    return abx__fault_fail_now() ? NULL : malloc(n ? n : 1);
}

/* SQLite needs the size of an allocation back: keep it in a 16-byte header. */
#define HDR 16

static void *sq_malloc(int n)
{
    if (n < 0 || abx__fault_fail_now())
        return NULL;
    unsigned char *p = malloc((size_t)n + HDR);
    if (!p)
        return NULL;
    memcpy(p, &(size_t){(size_t)n}, sizeof(size_t));
    return p + HDR;
}

static void sq_free(void *p)
{
    if (p)
        free((unsigned char *)p - HDR);
}

static int sq_size(void *p)
{
    size_t n = 0;
    if (p)
        memcpy(&n, (unsigned char *)p - HDR, sizeof n);
    return (int)n;
}

static void *sq_realloc(void *p, int n)
{
    if (!p)
        return sq_malloc(n);
    if (n < 0 || abx__fault_fail_now())
        return NULL;
    unsigned char *q = realloc((unsigned char *)p - HDR, (size_t)n + HDR);
    if (!q)
        return NULL;
    memcpy(q, &(size_t){(size_t)n}, sizeof(size_t));
    return q + HDR;
}

static int sq_roundup(int n) { return (n + 7) & ~7; }
static int sq_init(void *u) { (void)u; return SQLITE_OK; }
static void sq_shutdown(void *u) { (void)u; }

static void install_hooks(void)
{
    json_set_alloc_funcs(json_alloc, free);
    static const sqlite3_mem_methods m = {sq_malloc, sq_free, sq_realloc, sq_size, sq_roundup, sq_init, sq_shutdown,
                                          NULL};
    /* only before SQLite initializes; later it keeps its own allocator (SQLITE_MISUSE) */
    (void)sqlite3_config(SQLITE_CONFIG_MALLOC, &m);
}

#else

void abx_fault_reset(long n)
{
    (void)n;
}

long abx_fault_count(void)
{
    return 0;
}

#endif
