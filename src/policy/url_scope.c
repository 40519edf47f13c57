/* url_scope.c — the url patterns a call's admitting statement carries, for a handler that
 * checks URLs met after admission (every request a browser makes, browser_guard.c). */
#include "policy/internal.h"

const char *const *abx_policy_url_scope(const abx_policy *p, const abx_decision *d, size_t *n)
{
    *n = 0;
    if (d->err || d->chosen < 0 || (size_t)d->chosen >= p->n_allow || !p->allow[d->chosen].has_urls)
        return NULL;
    *n = p->allow[d->chosen].n_urls;
    return (const char *const *)p->allow[d->chosen].urls;
}
