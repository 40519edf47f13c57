/* ossl_lazy.c — the OpenSSL table behind ossl_lazy.h, loaded on first use. */
#define ABX_OSSL_LAZY_IMPL 1
#include "sandbox/ossl_lazy.h"

#include "core/lazylib.h"

#include <stdio.h>
#include <stdlib.h>

void *abx_ossl_slot[ABX_OSSL_N];
int abx_ossl_ready;

#define ABX_OSSL_NAME(f) #f,
static const char *const ossl_names[ABX_OSSL_N] = {ABX_OSSL_FUNCS(ABX_OSSL_NAME)};
#undef ABX_OSSL_NAME

static abx_lazylib ossl_lib = {
    .soname = ABX_OSSL_SONAME,
    .names = ossl_names,
    .slots = abx_ossl_slot,
    .n = ABX_OSSL_N,
};

int abx_ossl_load(char *why, size_t whylen)
{
    if (abx_lazylib_load(&ossl_lib, why, whylen) != 0)
        return -1;
    __atomic_store_n(&abx_ossl_ready, 1, __ATOMIC_RELEASE);
    return 0;
}

void abx_ossl_need_slow(void)
{
    char why[200];
    if (abx_ossl_load(why, sizeof why) != 0) {
        fprintf(stderr, "abx: OpenSSL is needed here and %s\n", why);
        abort();
    }
}
