/* fault.h — the allocation-failure injector (fault.c). A leaf: it uses no other abx
 * file; util.c's allocators ask it, and it hooks jansson's and SQLite's allocators
 * itself on first use. */
#ifndef ABX_CORE_FAULT_H
#define ABX_CORE_FAULT_H

#include <stdbool.h>

/* Fault injection. In a build with ABX_FAULT_INJECTION=1 the n-th allocation call
 * (any of the six allocators of util.h, counted across threads) after abx_fault_reset(n)
 * fails, once; n <= 0 disables. ABX_FAIL_ALLOC_AT=n in the environment sets the
 * first countdown. In other builds both exist but do nothing; the count is always 0. */
void abx_fault_reset(long n);
long abx_fault_count(void);              /* allocation calls seen since the last reset */

/* Count one allocation call; true when it is the one to fail. Only the
 * fault-injection build defines it (util.c calls it there alone). */
bool abx__fault_fail_now(void);

#endif
