/* fuzz_policy_model.c — differential fuzzing of the policy decision (abx_decide)
 * against the reference model of tests/common/policy_model.h, the one the unit test's
 * property test uses. The fuzzer picks the policy: each input byte after the first
 * chooses one statement of the model's pool (duplicates and any order allowed; the
 * first byte's low bits say how many of the bytes count, 1–16). The policy is compiled
 * by the real module and every request of the universe (principal × op × path) is
 * decided; any disagreement with the model — code, tightest max_bytes or the set of
 * determining statements — aborts with the policy text. */
#include <stdint.h>

#include "../common/policy_model.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

static pm_world world;
static bool ready;

static void cleanup(void) { pm_world_release(&world); }

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    if (size < 2)
        return 0;
    if (!ready) {
        if (pm_world_init(&world) != 0)
            abort();
        atexit(cleanup);
        ready = true;
    }
    size_t n = 1 + (data[0] & 15);
    if (n > size - 1)
        n = size - 1;
    size_t stmts[16];
    for (size_t i = 0; i < n; i++)
        stmts[i] = data[1 + i] % POOL_N;
    const char *text = policy_text(stmts, n);
    char why[2048];
    abx_policy *p = pm_compile(&world, text, why, sizeof why);
    if (!p) { /* every pool statement is valid, alone or together */
        fprintf(stderr, "the policy did not compile:%s\n%s\n", why, text);
        abort();
    }
    for (int slot = 0; slot < 4; slot++)
        for (int op = 0; op < 4; op++)
            for (int path = u_has_path[op] ? 0 : -1; path < (u_has_path[op] ? 4 : 0); path++) {
                outcome want = model(stmts, n, slot, op, path), got = pm_actual(&world, p, slot, op, path);
                if (!pm_agrees(&got, &want)) {
                    fprintf(stderr, "slot %d, %s %s: got %s max_bytes=%lld labels=%s; model %s (or %s) "
                                    "max_bytes=%lld labels=%s\npolicy: %s\n",
                            slot, u_ops[op], path >= 0 ? u_paths[path] : "", abx_err_code(got.err),
                            (long long)got.max_bytes, got.labels, abx_err_code(want.err), abx_err_code(want.alt),
                            (long long)want.max_bytes, want.labels, text);
                    abort();
                }
            }
    abx_policy_unref(p);
    return 0;
}
