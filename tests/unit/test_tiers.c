/* test_tiers.c — src/sandbox/tiers.c: the tier follows from the layers (synthetic states,
 * so every tier is reached whatever this machine has), the report says why a layer is
 * missing, and a real probe is consistent. */
#include <stdarg.h>
#include <stddef.h>
#include <setjmp.h>
#include <stdint.h>
#include <cmocka.h>

#include <string.h>

#include "sandbox/tiers.h"

static void all_active(abx_tiers *t)
{
    memset(t, 0, sizeof *t);
    for (int i = 0; i < ABX_L__N; i++)
        abx_tiers_set(t, (enum abx_layer_id)i, ABX_LAYER_ACTIVE, NULL);
}

static void test_pick(void **state)
{
    (void)state;
    abx_tiers t;
    all_active(&t);
    abx_tiers_pick(&t);
    assert_int_equal(t.tier, ABX_TIER_FULL);
    assert_int_equal(t.layer[ABX_L_RLIMIT].state, ABX_LAYER_NOT_NEEDED); /* cgroups hold pids */

    /* a non-root container: no namespaces, no cgroup — Landlock and seccomp remain */
    abx_tiers_set(&t, ABX_L_MNTNS, ABX_LAYER_UNAVAILABLE, "unshare(CLONE_NEWNS): %s", "Operation not permitted");
    abx_tiers_set(&t, ABX_L_CGROUP, ABX_LAYER_UNAVAILABLE, "not delegated");
    abx_tiers_pick(&t);
    assert_int_equal(t.tier, ABX_TIER_UNPRIVILEGED);
    assert_int_equal(t.layer[ABX_L_RLIMIT].state, ABX_LAYER_ACTIVE); /* stands in for the cgroup */

    /* one missing layer among namespaces/cgroup is enough to leave full */
    all_active(&t);
    abx_tiers_set(&t, ABX_L_NETNS, ABX_LAYER_UNAVAILABLE, "EPERM");
    abx_tiers_pick(&t);
    assert_int_equal(t.tier, ABX_TIER_UNPRIVILEGED);

    /* gVisor: no Landlock */
    abx_tiers_set(&t, ABX_L_LANDLOCK_FS, ABX_LAYER_UNAVAILABLE, "ENOSYS");
    abx_tiers_pick(&t);
    assert_int_equal(t.tier, ABX_TIER_MINIMAL);

    abx_tiers_set(&t, ABX_L_SECCOMP, ABX_LAYER_UNAVAILABLE, "none");
    abx_tiers_pick(&t);
    assert_int_equal(t.tier, ABX_TIER_NONE);
    assert_string_equal(abx_tier_name(t.tier), "none");
}

static void test_report(void **state)
{
    (void)state;
    abx_tiers t;
    all_active(&t);
    abx_tiers_set(&t, ABX_L_MNTNS, ABX_LAYER_UNAVAILABLE, "making / private: %s", "Invalid argument");
    abx_tiers_set(&t, ABX_L_CAPS, ABX_LAYER_NOT_NEEDED, "holds none");
    abx_tiers_pick(&t);
    char line[512];
    abx_tiers_line(&t, line, sizeof line);
    assert_non_null(strstr(line, "confinement tier unprivileged"));
    assert_non_null(strstr(line, "mount namespace (making / private: Invalid argument)"));
    assert_null(strstr(line, "capabilities")); /* not needed is not missing */
    json_t *j = abx_tiers_json(&t);
    assert_string_equal(json_string_value(json_object_get(j, "tier")), "unprivileged");
    json_t *layers = json_object_get(j, "layers");
    assert_int_equal(json_object_size(layers), ABX_L__N);
    json_t *m = json_object_get(layers, "mount namespace");
    assert_string_equal(json_string_value(json_object_get(m, "state")), "unavailable");
    assert_string_equal(json_string_value(json_object_get(m, "reason")), "making / private: Invalid argument");
    assert_null(json_object_get(json_object_get(layers, "landlock"), "reason"));
    assert_string_equal(json_string_value(json_object_get(json_object_get(layers, "capabilities"), "state")),
                        "not_needed");
    json_decref(j);
}

/* the real probe: every layer that is not active says why, and the tier agrees */
static void test_probe_consistent(void **state)
{
    (void)state;
    abx_tiers t;
    abx_tiers_probe(&t, true);
    for (int i = 0; i < ABX_L__N; i++)
        if (t.layer[i].state != ABX_LAYER_ACTIVE)
            assert_true(t.layer[i].reason[0] != '\0');
    assert_int_equal(t.landlock_abi > 0, abx_tiers_active(&t, ABX_L_LANDLOCK_FS));
    assert_int_equal(t.landlock_abi >= 4, abx_tiers_active(&t, ABX_L_LANDLOCK_NET));
    assert_int_equal(t.landlock_abi >= 6, abx_tiers_active(&t, ABX_L_LANDLOCK_SCOPE));
    enum abx_tier before = t.tier;
    abx_tiers_pick(&t);
    assert_int_equal(t.tier, before);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_pick),
        cmocka_unit_test(test_report),
        cmocka_unit_test(test_probe_consistent),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
