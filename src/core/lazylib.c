/* lazylib.c — open a shared library on first use (lazylib.h). */
#include "core/lazylib.h"

#include <dlfcn.h>
#include <pthread.h>
#include <stdio.h>

static pthread_mutex_t lazylib_mu = PTHREAD_MUTEX_INITIALIZER;

static int lazylib_open(abx_lazylib *l)
{
    /* RTLD_NOW: every symbol of the library is bound here, not at a first call that
     * could happen anywhere; RTLD_LOCAL: its symbols do not join the global scope */
    void *h = dlopen(l->soname, RTLD_NOW | RTLD_LOCAL);
    if (!h) {
        const char *e = dlerror();
        snprintf(l->why, sizeof l->why, "cannot load %s: %s", l->soname, e ? e : "unknown error");
        return -1;
    }
    for (size_t i = 0; i < l->n; i++) {
        void *p = dlsym(h, l->names[i]);
        if (!p) {
            snprintf(l->why, sizeof l->why, "%s has no symbol %s", l->soname, l->names[i]);
            for (size_t j = 0; j < i; j++)
                l->slots[j] = NULL;
            dlclose(h);
            return -1;
        }
        l->slots[i] = p;
    }
    return 0; /* the handle stays open for the life of the process */
}

int abx_lazylib_load(abx_lazylib *l, char *why, size_t whylen)
{
    int s = __atomic_load_n(&l->state, __ATOMIC_ACQUIRE);
    if (s == 0) {
        pthread_mutex_lock(&lazylib_mu);
        s = __atomic_load_n(&l->state, __ATOMIC_RELAXED);
        if (s == 0) {
            s = lazylib_open(l) == 0 ? 1 : -1;
            __atomic_store_n(&l->state, s, __ATOMIC_RELEASE);
        }
        pthread_mutex_unlock(&lazylib_mu);
    }
    if (s == 1)
        return 0;
    if (why && whylen)
        snprintf(why, whylen, "%s", l->why);
    return -1;
}
