/* lexical.c — step 7 without a lookup for the names of a read's paths (policy.h,
 * abx_decide_lexical): the call is decided on its names as written, and the first lookup
 * that refuses symlinks (the jail's open) confirms them or has the call decided again on
 * the full walk (pipeline/dispatch.c). docs/security.md, "One lookup per read". */
#include "policy/internal.h"

/* A lexical decision stands until the first lookup confirms its names if it admitted
 * the call with nothing step 8 takes or holds for it (approval, rate or concurrency
 * tokens). A refusal is never given on a name as written: symlinks may lead elsewhere. */
static bool lexical_may_stand(const abx_policy *p, const abx_decision *d)
{
    if (d->err || d->approval)
        return false;
    for (size_t i = 0; i < d->n_admitting; i++)
        if (p->allow[d->admitting[i]].limits[__builtin_ctz(ABX_LIM_RATE)] > 0 ||
            p->allow[d->admitting[i]].limits[__builtin_ctz(ABX_LIM_CONCURRENCY)] > 0)
            return false;
    return true;
}

bool abx_decide_lexical(const abx_policy *p, int slot, const abx_op *op, size_t op_index, const json_t *args,
                        abx_decision *d)
{
    abx__decide(p, slot, op, op_index, args, d, NULL, true);
    bool lexical = false;
    for (size_t i = 0; i < d->n_paths; i++)
        lexical |= d->paths[i].lexical;
    if (!lexical || lexical_may_stand(p, d))
        return lexical;
    abx_decision_release(d);
    abx__decide(p, slot, op, op_index, args, d, NULL, false);
    return false;
}
