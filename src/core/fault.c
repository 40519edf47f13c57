/* fault.c — allocation-failure injection for the allocators abx does not own: jansson's
 * (json_set_alloc_funcs) and SQLite's (SQLITE_CONFIG_MALLOC). With ABX_FAULT_INJECTION
 * they count against the same countdown as abx_malloc (ABX_FAIL_ALLOC_AT=n or
 * abx_fault_reset(n)), so a torture test that walks n over a request reaches failures
 * inside JSON building and ledger writes too. Compiled to nothing otherwise; never
 * part of a release build. */
#include "core/util.h"

#if defined(ABX_FAULT_INJECTION) && ABX_FAULT_INJECTION

#include <jansson.h>
#include <sqlite3.h>
#include <stdlib.h>
#include <string.h>

bool abx__fault_fail_now(void);
void abx__fault_install_hooks(void);

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

void abx__fault_install_hooks(void)
{
    json_set_alloc_funcs(json_alloc, free);
    static const sqlite3_mem_methods m = {sq_malloc, sq_free, sq_realloc, sq_size, sq_roundup, sq_init, sq_shutdown,
                                          NULL};
    /* only before SQLite initializes; later it keeps its own allocator (SQLITE_MISUSE) */
    (void)sqlite3_config(SQLITE_CONFIG_MALLOC, &m);
}

#else

void abx__fault_install_hooks(void);
void abx__fault_install_hooks(void) {}

#endif
