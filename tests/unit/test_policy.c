/* test_policy.c — unit tests of src/policy/ (compile.c, decide.c, snapshot.c): policies compiled from JSON text over
 * a frozen child of the default registry, with a fresh mkdtemp workspace.
 *
 * Covers op and principal selectors (mount table), compile diagnostics (scope_required,
 * unknown selectors with did-you-mean, strict: false, unsafe scopes), every decision
 * outcome (deny by op, deny by path, path not allowed, protected areas and the unsafe
 * waiver), tightest limits and the determining statements, token authentication, and a
 * differential property test: ~200 random small policies drawn from a fixed pool of
 * statements (random order, duplicates) are decided against a tiny reference model
 * written here, and against shuffled/duplicated copies of themselves (the
 * order-and-duplication independence that docs/configuration.md promises).
 *
 * The tests own only the temporary directory they make. */
#include <stdarg.h>
#include <stddef.h>
#include <setjmp.h>
#include <stdint.h>
#include <cmocka.h>

#include <errno.h>
#include <ftw.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "core/util.h"
#include "policy/policy.h"
#include "../common/policy_model.h"

#define LIM_TIMEOUT __builtin_ctz(ABX_LIM_TIMEOUT)
#define LIM_MAX_ENTRIES __builtin_ctz(ABX_LIM_MAX_ENTRIES)

static pm_world W;
static abx_registry *reg;
static const char *ws;        /* canonical workspace (W.ws) */
static const char *auth_text; /* three principals with token_sha256 (W.auth_text) */

static int group_setup(void **state)
{
    (void)state;
    if (pm_world_init(&W) != 0)
        return -1;
    reg = W.reg;
    ws = W.ws;
    auth_text = W.auth_text;
    return 0;
}

static int group_teardown(void **state)
{
    (void)state;
    pm_world_release(&W);
    return 0;
}

/* ---- helpers ----------------------------------------------------------------------------- */

static json_t *parse(const char *text)
{
    json_error_t je;
    json_t *v = json_loads(text, 0, &je);
    if (!v)
        fail_msg("bad JSON in test: %s\n%s", je.text, text);
    return v;
}

static abx_policy *compile_full(const char *auth, const char *policy, bool lint_ok, abx_diags *d)
{
    json_t *a = auth ? parse(auth) : NULL, *p = policy ? parse(policy) : NULL;
    abx_policy_input in = {.reg = reg, .auth = a, .policy = p, .workspace = ws, .allow_lint_errors = lint_ok};
    abx_policy *pol = abx_policy_compile(&in, d);
    json_decref(a);
    json_decref(p);
    return pol;
}

static abx_policy *compile_ok(const char *policy)
{
    abx_diags d = {0};
    abx_policy *p = compile_full(auth_text, policy, false, &d);
    if (!p) {
        char all[2048] = "";
        for (size_t i = 0; i < d.n; i++)
            snprintf(all + strlen(all), sizeof all - strlen(all), "\n  %s %s: %s", d.items[i].level,
                     d.items[i].code, d.items[i].message);
        abx_diags_release(&d);
        fail_msg("policy did not compile:%s\n%s", all, policy);
    }
    assert_int_equal(d.errors, 0);
    abx_diags_release(&d);
    return p;
}

/* The diagnostic with this code, or NULL. */
static const abx_diag *find_diag(const abx_diags *d, const char *code)
{
    for (size_t i = 0; i < d->n; i++)
        if (strcmp(d->items[i].code, code) == 0)
            return &d->items[i];
    return NULL;
}

static size_t op_index(const char *id)
{
    const abx_op *op = abx_registry_get(reg, id);
    if (!op)
        fail_msg("no op %s", id);
    return abx_registry_index_of(reg, op);
}

static bool mounted(const abx_policy *p, int slot, const char *id) { return abx_policy_mounted(p, slot, op_index(id)); }

/* Decide op for slot with args given as JSON text (NULL = {}); returns the code and
 * leaves the decision in *d (caller releases). */
static abx_err decide(const abx_policy *p, int slot, const char *id, const char *args_text, abx_decision *d)
{
    const abx_op *op = abx_registry_get(reg, id);
    json_t *args = args_text ? parse(args_text) : json_object();
    char msg[300];
    abx_err e = abx_args_validate(op, args, msg, sizeof msg);
    if (e != ABX_OK)
        fail_msg("test args for %s do not validate: %s", id, msg);
    abx_decide(p, slot, op, op_index(id), args, d, NULL);
    json_decref(args);
    return d->err;
}

static void expect_decision(const abx_policy *p, int slot, const char *id, const char *args, abx_err want)
{
    abx_decision d;
    abx_err got = decide(p, slot, id, args, &d);
    char why[300];
    snprintf(why, sizeof why, "%s", d.message);
    abx_decision_release(&d);
    if (got != want)
        fail_msg("%s %s as slot %d: %s (%s), want %s", id, args ? args : "{}", slot, abx_err_code(got), why,
                 abx_err_code(want));
}

/* ---- mounting: op selectors ----------------------------------------------------------------- */

static void test_mount_exact(void **state)
{
    (void)state;
    abx_policy *p = compile_ok("{\"allow\": [{\"ops\": [\"files.read\"], \"principals\": [\"alice\"], "
                               "\"paths\": [\"**\"]}]}");
    assert_true(mounted(p, ALICE, "files.read"));
    assert_false(mounted(p, ALICE, "files.stat"));
    assert_false(mounted(p, ALICE, "core.health"));
    assert_false(mounted(p, BOB, "files.read"));
    assert_false(mounted(p, ANON, "files.read"));
    /* the implicit anonymous statement mounts core.health for anonymous only */
    assert_true(mounted(p, ANON, "core.health"));
    assert_false(mounted(p, ANON, "core.capabilities"));
    abx_policy_unref(p);
}

static void test_mount_namespace(void **state)
{
    (void)state;
    abx_policy *p = compile_ok("{\"allow\": [{\"ops\": [\"files.*\"], \"principals\": [\"bob\"], "
                               "\"paths\": [\"**\"]}]}");
    assert_true(mounted(p, BOB, "files.read"));
    assert_true(mounted(p, BOB, "files.stat"));
    assert_true(mounted(p, BOB, "files.list"));
    assert_false(mounted(p, BOB, "core.health"));
    assert_false(mounted(p, ALICE, "files.read"));
    abx_policy_unref(p);
    p = compile_ok("{\"allow\": [{\"ops\": [\"core.*\"], \"principals\": [\"bob\"]}]}");
    assert_true(mounted(p, BOB, "core.health"));
    assert_true(mounted(p, BOB, "core.ops.list"));   /* every depth below the namespace */
    assert_false(mounted(p, BOB, "core.explain"));   /* explicit-only: exact id only */
    assert_false(mounted(p, BOB, "files.read"));
    abx_policy_unref(p);
}

static void test_mount_all_and_explicit_only(void **state)
{
    (void)state;
    abx_policy *p = compile_ok("{\"allow\": [{\"ops\": [\"*\"], \"principals\": [\"alice\"], \"paths\": [\"**\"], "
                               OTHER_SCOPES "}]}");
    size_t n = abx_registry_count(reg), seen = 0;
    for (size_t i = 0; i < n; i++) {
        const abx_op *op = abx_registry_at(reg, i);
        bool m = abx_policy_mounted(p, ALICE, i);
        /* agent ops (an agent parameter) are mounted only by name, like explicit-only ones */
        bool by_name = op->explicit_only || (op->scoped_kinds & (1u << ABX_KIND_AGENT));
        if (m == by_name)
            fail_msg("'*' mounted=%d for %s (explicit_only=%d)", m, op->id, op->explicit_only);
        seen += m;
    }
    assert_true(seen >= 4);
    assert_false(mounted(p, ALICE, "custom.admin.run"));
    assert_false(mounted(p, BOB, "core.health"));
    abx_policy_unref(p);
    /* the exact id mounts an explicit-only op */
    p = compile_ok("{\"allow\": [{\"ops\": [\"custom.admin.run\"], \"principals\": [\"alice\"]}]}");
    assert_true(mounted(p, ALICE, "custom.admin.run"));
    expect_decision(p, ALICE, "custom.admin.run", NULL, ABX_OK);
    abx_policy_unref(p);
}

static void test_mount_effect(void **state)
{
    (void)state;
    abx_policy *p = compile_ok("{\"allow\": [{\"ops\": [\"effect:read\"], \"principals\": [\"alice\"], "
                               "\"paths\": [\"**\"], " OTHER_SCOPES "}]}");
    assert_true(mounted(p, ALICE, "files.read"));
    assert_true(mounted(p, ALICE, "core.health"));
    assert_false(mounted(p, ALICE, "custom.admin.run"));
    for (size_t i = 0; i < abx_registry_count(reg); i++) {
        const abx_op *op = abx_registry_at(reg, i);
        bool want = !op->explicit_only && (op->effects & ~(unsigned)ABX_EFF_READ) == 0;
        if (abx_policy_mounted(p, ALICE, i) != want)
            fail_msg("effect:read mounted=%d for %s", !want, op->id);
    }
    abx_policy_unref(p);
    /* admin in the set still does not mount explicit-only ops on the allow side */
    p = compile_ok("{\"allow\": [{\"ops\": [\"effect:read,admin\"], \"principals\": [\"alice\"], "
                   "\"paths\": [\"**\"], " OTHER_SCOPES "}]}");
    assert_false(mounted(p, ALICE, "custom.admin.run"));
    abx_policy_unref(p);
}

/* ---- mounting: principal selectors ---------------------------------------------------------- */

static void test_principals(void **state)
{
    (void)state;
    static const struct {
        const char *sel;
        bool want[4]; /* alice bob carol anonymous */
    } cases[] = {
        {"alice", {true, false, false, false}},
        {"role:dev", {true, false, true, false}},
        {"role:ops", {false, true, true, false}},
        {"role:nobody", {false, false, false, false}},
        {"*", {true, true, true, false}},
        {"anonymous", {false, false, false, true}},
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        char pol[256];
        snprintf(pol, sizeof pol, "{\"allow\": [{\"ops\": [\"core.capabilities\"], \"principals\": [\"%s\"]}]}",
                 cases[i].sel);
        abx_policy *p = compile_ok(pol);
        for (int s = 0; s < 4; s++)
            if (mounted(p, s, "core.capabilities") != cases[i].want[s])
                fail_msg("principals [%s]: slot %d mounted=%d", cases[i].sel, s, !cases[i].want[s]);
        abx_policy_unref(p);
    }
    abx_policy *p = compile_ok("{}");
    assert_int_equal(abx_policy_principal_slot(p, "alice"), ALICE);
    assert_int_equal(abx_policy_principal_slot(p, "carol"), CAROL);
    assert_int_equal(abx_policy_principal_slot(p, NULL), ANON);
    assert_int_equal(abx_policy_principal_slot(p, "mallory"), -1);
    assert_string_equal(abx_policy_principal_id(p, BOB), "bob");
    assert_string_equal(abx_policy_principal_id(p, ANON), "anonymous");
    /* out-of-range slots are never mounted */
    assert_false(abx_policy_mounted(p, -1, op_index("core.health")));
    assert_false(abx_policy_mounted(p, ANON + 1, op_index("core.health")));
    abx_policy_unref(p);
}

/* ---- compile diagnostics ------------------------------------------------------------------------ */

static void test_scope_required(void **state)
{
    (void)state;
    abx_diags d = {0};
    abx_policy *p = compile_full(auth_text, "{\"allow\": [{\"ops\": [\"files.*\"], \"principals\": [\"alice\"]}]}",
                                 false, &d);
    assert_null(p);
    const abx_diag *x = find_diag(&d, "config.scope_required");
    assert_non_null(x);
    assert_string_equal(x->level, "error");
    assert_non_null(strstr(x->message, "files."));
    assert_non_null(strstr(x->message, "paths"));
    abx_diags_release(&d);
    /* "*" mounts files.* too */
    p = compile_full(auth_text, "{\"allow\": [{\"ops\": [\"*\"], \"principals\": [\"alice\"]}]}", false, &d);
    assert_null(p);
    assert_non_null(find_diag(&d, "config.scope_required"));
    abx_diags_release(&d);
    /* ops without path parameters need no paths */
    p = compile_full(auth_text, "{\"allow\": [{\"ops\": [\"core.*\"], \"principals\": [\"alice\"]}]}", false, &d);
    assert_non_null(p);
    assert_null(find_diag(&d, "config.scope_required"));
    abx_policy_unref(p);
    abx_diags_release(&d);
}

static void test_unknown_selector(void **state)
{
    (void)state;
    abx_diags d = {0};
    abx_policy *p = compile_full(
        auth_text, "{\"allow\": [{\"ops\": [\"files.lsit\"], \"principals\": [\"alice\"], \"paths\": [\"**\"]}]}",
        false, &d);
    assert_null(p);
    const abx_diag *x = find_diag(&d, "config.unknown_selector");
    assert_non_null(x);
    assert_string_equal(x->level, "error");
    assert_non_null(strstr(x->message, "files.lsit"));
    assert_non_null(strstr(x->message, "did you mean 'files.list'"));
    abx_diags_release(&d);

    /* strict: false turns it into a warning; the statement then mounts nothing */
    p = compile_full(auth_text,
                     "{\"strict\": false, \"allow\": [{\"ops\": [\"files.lsit\"], \"principals\": [\"alice\"], "
                     "\"paths\": [\"**\"]}]}",
                     false, &d);
    assert_non_null(p);
    x = find_diag(&d, "config.unknown_selector");
    assert_non_null(x);
    assert_string_equal(x->level, "warning");
    assert_int_equal(d.errors, 0);
    assert_false(mounted(p, ALICE, "files.list"));
    abx_policy_unref(p);
    abx_diags_release(&d);

    /* far from every id: no suggestion */
    p = compile_full(auth_text, "{\"allow\": [{\"ops\": [\"zzzzzz.qqqqq\"], \"principals\": [\"alice\"]}]}", false,
                     &d);
    assert_null(p);
    x = find_diag(&d, "config.unknown_selector");
    assert_non_null(x);
    assert_null(strstr(x->message, "did you mean"));
    abx_diags_release(&d);

    /* an unknown effect and a namespace with no ops */
    p = compile_full(auth_text, "{\"allow\": [{\"ops\": [\"effect:fly\"], \"principals\": [\"alice\"]}]}", false, &d);
    assert_null(p);
    assert_non_null(find_diag(&d, "config.unknown_selector"));
    abx_diags_release(&d);
    p = compile_full(auth_text, "{\"allow\": [{\"ops\": [\"nothing.*\"], \"principals\": [\"alice\"]}]}", false, &d);
    assert_null(p);
    assert_non_null(find_diag(&d, "config.unknown_selector"));
    abx_diags_release(&d);
}

/* ---- decisions ------------------------------------------------------------------------------------ */

#define FILES_FOR_ALICE "{\"ops\": [\"files.*\"], \"principals\": [\"alice\"], \"paths\": [\"**\"]}"

static void test_deny_by_ops(void **state)
{
    (void)state;
    abx_policy *p = compile_ok("{\"allow\": [" FILES_FOR_ALICE "], \"deny\": [{\"ops\": [\"files.read\"]}]}");
    abx_decision d;
    assert_int_equal(decide(p, ALICE, "files.read", "{\"path\": \"a/x.txt\"}", &d), ABX_E_POLICY_DENIED);
    assert_string_equal(d.determining, "deny[0]");
    abx_decision_release(&d);
    expect_decision(p, ALICE, "files.stat", "{\"path\": \"a/x.txt\"}", ABX_OK);
    /* not mounted beats denied: a deny never reveals an op the caller cannot see */
    expect_decision(p, BOB, "files.read", "{\"path\": \"a/x.txt\"}", ABX_E_OP_NOT_ENABLED);
    abx_policy_unref(p);
    /* a deny limited to other principals does not apply */
    p = compile_ok("{\"allow\": [" FILES_FOR_ALICE "], \"deny\": [{\"ops\": [\"files.read\"], \"principals\": "
                   "[\"role:ops\"]}]}");
    expect_decision(p, ALICE, "files.read", "{\"path\": \"a/x.txt\"}", ABX_OK);
    abx_policy_unref(p);
    /* deny-side effect selectors match ops having any of the effects */
    p = compile_ok("{\"allow\": [" FILES_FOR_ALICE "], \"deny\": [{\"ops\": [\"effect:read,write\"]}]}");
    expect_decision(p, ALICE, "files.list", NULL, ABX_E_POLICY_DENIED);
    abx_policy_unref(p);
}

static void test_deny_by_paths(void **state)
{
    (void)state;
    abx_policy *p = compile_ok("{\"allow\": [" FILES_FOR_ALICE "], \"deny\": [{\"paths\": [\"a/**\"]}]}");
    abx_decision d;
    assert_int_equal(decide(p, ALICE, "files.read", "{\"path\": \"a/x.txt\"}", &d), ABX_E_POLICY_PATH_DENIED);
    assert_string_equal(d.determining, "deny[0]");
    abx_decision_release(&d);
    /* canonicalization first: a detour through .. still lands in a/ */
    expect_decision(p, ALICE, "files.read", "{\"path\": \"b/../a/x.txt\"}", ABX_E_POLICY_PATH_DENIED);
    expect_decision(p, ALICE, "files.read", "{\"path\": \"./a\"}", ABX_E_POLICY_PATH_DENIED); /* a/ ** matches a */
    expect_decision(p, ALICE, "files.read", "{\"path\": \"b/y.txt\"}", ABX_OK);
    expect_decision(p, ALICE, "files.stat", "{\"path\": \"a/x.txt\"}", ABX_E_POLICY_PATH_DENIED);
    abx_policy_unref(p);
}

static void test_path_not_allowed(void **state)
{
    (void)state;
    abx_policy *p = compile_ok("{\"allow\": [{\"ops\": [\"files.read\"], \"principals\": [\"alice\"], "
                               "\"paths\": [\"a/**\"]}]}");
    expect_decision(p, ALICE, "files.read", "{\"path\": \"a/x.txt\"}", ABX_OK);
    expect_decision(p, ALICE, "files.read", "{\"path\": \"b/y.txt\"}", ABX_E_POLICY_PATH_NOT_ALLOWED);
    expect_decision(p, ALICE, "files.read", "{\"path\": \"a/../b/y.txt\"}", ABX_E_POLICY_PATH_NOT_ALLOWED);
    expect_decision(p, ALICE, "files.read", "{\"path\": \"../outside\"}", ABX_E_POLICY_PATH_NOT_ALLOWED);
    expect_decision(p, ALICE, "files.read", "{\"path\": \"/etc/hostname\"}", ABX_E_POLICY_PATH_NOT_ALLOWED);
    abx_decision d;
    assert_int_equal(decide(p, ALICE, "files.read", "{\"path\": \"b/y.txt\"}", &d), ABX_E_POLICY_PATH_NOT_ALLOWED);
    assert_non_null(strstr(d.message, "path"));
    abx_decision_release(&d);
    abx_policy_unref(p);
    /* per access kind: write-only scope does not admit a read */
    p = compile_ok("{\"allow\": [{\"ops\": [\"files.read\"], \"principals\": [\"alice\"], "
                   "\"paths\": {\"write\": [\"**\"]}}]}");
    expect_decision(p, ALICE, "files.read", "{\"path\": \"a/x.txt\"}", ABX_E_POLICY_PATH_NOT_ALLOWED);
    abx_policy_unref(p);
}

static void test_admitted_paths_and_jail(void **state)
{
    (void)state;
    abx_policy *p = compile_ok("{\"allow\": [{\"ops\": [\"files.read\"], \"principals\": [\"alice\"], "
                               "\"paths\": [\"a/**\"]}]}");
    abx_decision d;
    assert_int_equal(decide(p, ALICE, "files.read", "{\"path\": \"a/./x.txt\"}", &d), ABX_OK);
    assert_int_equal(d.n_paths, 1);
    assert_string_equal(d.paths[0].param, "path");
    char want[PATH_MAX + 16];
    snprintf(want, sizeof want, "%s/a/x.txt", ws);
    assert_string_equal(d.paths[0].canonical, want);
    assert_string_equal(d.paths[0].rel, "x.txt"); /* relative to the jail root <ws>/a */
    assert_true(d.paths[0].rootfd >= 0);
    abx_decision_release(&d);
    assert_null(d.paths);
    abx_policy_unref(p);
}

static void test_protected_areas(void **state)
{
    (void)state;
    abx_policy *p = compile_ok("{\"allow\": [{\"ops\": [\"files.read\"], \"principals\": [\"alice\"], "
                               "\"paths\": [\"/**\"]}]}");
    abx_decision d;
    assert_int_equal(decide(p, ALICE, "files.read", "{\"path\": \"/proc/self/status\"}", &d),
                     ABX_E_POLICY_PATH_DENIED);
    assert_string_equal(d.determining, "protected");
    abx_decision_release(&d);
    expect_decision(p, ALICE, "files.read", "{\"path\": \"/sys/kernel\"}", ABX_E_POLICY_PATH_DENIED);
    expect_decision(p, ALICE, "files.read", "{\"path\": \"/dev/sda\"}", ABX_E_POLICY_PATH_DENIED);
    expect_decision(p, ALICE, "files.read", "{\"path\": \"/dev/null\"}", ABX_OK);
    expect_decision(p, ALICE, "files.read", "{\"path\": \"a/x.txt\"}", ABX_OK);
    abx_policy_unref(p);
}

static void test_unsafe_waiver(void **state)
{
    (void)state;
    static const char *const unsafe_proc =
        "{\"allow\": [{\"ops\": [\"files.read\"], \"principals\": [\"alice\"], \"paths\": [\"/proc/**\"], "
        "\"unsafe\": true}]}";
    /* an unsafe statement is itself a lint error unless the config accepts lint errors */
    abx_diags d = {0};
    abx_policy *p = compile_full(auth_text, unsafe_proc, false, &d);
    assert_null(p);
    assert_non_null(find_diag(&d, "config.unsafe_scope"));
    abx_diags_release(&d);

    p = compile_full(auth_text, unsafe_proc, true, &d);
    assert_non_null(p);
    assert_string_equal(find_diag(&d, "config.unsafe_scope")->level, "warning");
    abx_diags_release(&d);
    expect_decision(p, ALICE, "files.read", "{\"path\": \"/proc/self/status\"}", ABX_OK);
    /* outside the scope: the answer of every path outside, not the protected area's */
    expect_decision(p, ALICE, "files.read", "{\"path\": \"/sys/kernel\"}", ABX_E_POLICY_PATH_NOT_ALLOWED);
    abx_policy_unref(p);

    /* the waiver needs an unsafe statement whose scope NAMES the path: an unsafe
     * statement over the workspace does not lift protection granted by a safe "/" scope */
    p = compile_full(auth_text,
                     "{\"allow\": [{\"ops\": [\"files.read\"], \"principals\": [\"alice\"], \"paths\": [\"/**\"]},"
                     " {\"ops\": [\"files.read\"], \"principals\": [\"alice\"], \"paths\": [\"**\"], "
                     "\"unsafe\": true}]}",
                     true, &d);
    assert_non_null(p);
    abx_diags_release(&d);
    expect_decision(p, ALICE, "files.read", "{\"path\": \"/proc/self/status\"}", ABX_E_POLICY_PATH_DENIED);
    abx_policy_unref(p);

    /* a deny still wins over the waiver */
    p = compile_full(auth_text,
                     "{\"allow\": [{\"ops\": [\"files.read\"], \"principals\": [\"alice\"], \"paths\": [\"/proc/**\"], "
                     "\"unsafe\": true}], \"deny\": [{\"paths\": [\"/proc/**\"]}]}",
                     true, &d);
    assert_non_null(p);
    abx_diags_release(&d);
    expect_decision(p, ALICE, "files.read", "{\"path\": \"/proc/self/status\"}", ABX_E_POLICY_PATH_DENIED);
    abx_decision dd;
    decide(p, ALICE, "files.read", "{\"path\": \"/proc/self/status\"}", &dd);
    assert_string_equal(dd.determining, "deny[0]");
    abx_decision_release(&dd);
    abx_policy_unref(p);
}

/* Is label one of the comma-separated labels in list? */
static bool has_label(const char *list, const char *label)
{
    size_t n = strlen(label);
    for (const char *s = list; *s;) {
        size_t l = strcspn(s, ",");
        if (l == n && strncmp(s, label, n) == 0)
            return true;
        s += l;
        if (*s == ',')
            s++;
    }
    return false;
}

static void test_tightest_limits_and_determining(void **state)
{
    (void)state;
    abx_policy *p = compile_ok(
        "{\"allow\": ["
        "{\"id\": \"wide\", \"ops\": [\"files.*\"], \"principals\": [\"alice\"], \"paths\": [\"**\"],"
        " \"limits\": {\"max_bytes\": \"1MiB\", \"timeout\": \"30s\"}},"
        "{\"id\": \"narrow\", \"ops\": [\"files.read\"], \"principals\": [\"role:dev\"], \"paths\": [\"a/**\"],"
        " \"limits\": {\"max_bytes\": \"2KiB\", \"max_entries\": 10}},"
        "{\"id\": \"elsewhere\", \"ops\": [\"files.read\"], \"principals\": [\"alice\"], \"paths\": [\"b/**\"],"
        " \"limits\": {\"max_bytes\": 1, \"timeout\": \"1s\"}}]}");
    abx_decision d;
    assert_int_equal(decide(p, ALICE, "files.read", "{\"path\": \"a/x.txt\"}", &d), ABX_OK);
    assert_int_equal(d.limits[LIM_MAX_BYTES], 2048);
    assert_int_equal(d.limits[LIM_TIMEOUT], 30000);
    assert_int_equal(d.limits[LIM_MAX_ENTRIES], 10);
    assert_int_equal(d.limits[__builtin_ctz(ABX_LIM_RATE)], -1);
    /* both admitting statements determine the decision; the mounting-but-refusing one does not */
    assert_true(has_label(d.determining, "wide"));
    assert_true(has_label(d.determining, "narrow"));
    assert_false(has_label(d.determining, "elsewhere"));
    assert_int_equal(d.n_admitting, 2);
    abx_decision_release(&d);
    /* b/ is admitted by wide and elsewhere: elsewhere's tighter values win there */
    assert_int_equal(decide(p, ALICE, "files.read", "{\"path\": \"b/y.txt\"}", &d), ABX_OK);
    assert_int_equal(d.limits[LIM_MAX_BYTES], 1);
    assert_int_equal(d.limits[LIM_TIMEOUT], 1000);
    assert_int_equal(d.limits[LIM_MAX_ENTRIES], -1);
    assert_true(has_label(d.determining, "wide"));
    assert_true(has_label(d.determining, "elsewhere"));
    assert_false(has_label(d.determining, "narrow"));
    abx_decision_release(&d);
    abx_policy_unref(p);
}

static void test_trace(void **state)
{
    (void)state;
    abx_policy *p = compile_ok("{\"allow\": [" FILES_FOR_ALICE "], \"deny\": [{\"paths\": [\"a/**\"]}]}");
    const abx_op *op = abx_registry_get(reg, "files.read");
    json_t *args = parse("{\"path\": \"a/x.txt\"}"), *trace = json_object();
    abx_decision d;
    abx_decide(p, ALICE, op, op_index("files.read"), args, &d, trace);
    assert_int_equal(d.err, ABX_E_POLICY_PATH_DENIED);
    assert_string_equal(json_string_value(json_object_get(trace, "decision")), "deny");
    assert_string_equal(json_string_value(json_object_get(trace, "code")), "policy.path_denied");
    assert_int_equal(json_array_size(json_object_get(trace, "deny_hits")), 1);
    abx_decision_release(&d);
    json_decref(trace);
    json_decref(args);
    abx_policy_unref(p);
}

/* ---- deny order (a concrete case of the property below) ---------------------------------------- */

/* When a plain deny (no scopes) and a path-scoped deny both match, the outcome must
 * not depend on which comes first in the file (it did once: the first decided). */
#define DENY_ORDER_FMT                                                                                                \
    "{\"allow\": [{\"ops\": [\"files.*\"], \"principals\": [\"bob\"], \"paths\": [\"**\"]}],"                      \
    " \"deny\": [%s, %s]}"
static void test_deny_order_independent(void **state)
{
    (void)state;
    static const char *const plain = "{\"ops\": [\"files.stat\"], \"principals\": [\"bob\"]}";
    static const char *const by_path = "{\"paths\": [\"b/z.bin\"]}";
    char text[512];
    snprintf(text, sizeof text, DENY_ORDER_FMT, plain, by_path);
    abx_policy *p1 = compile_ok(text);
    snprintf(text, sizeof text, DENY_ORDER_FMT, by_path, plain);
    abx_policy *p2 = compile_ok(text);
    abx_decision d1, d2;
    abx_err e1 = decide(p1, BOB, "files.stat", "{\"path\": \"b/z.bin\"}", &d1);
    abx_err e2 = decide(p2, BOB, "files.stat", "{\"path\": \"b/z.bin\"}", &d2);
    abx_decision_release(&d1);
    abx_decision_release(&d2);
    abx_policy_unref(p1);
    abx_policy_unref(p2);
    assert_true(e1 == ABX_E_POLICY_DENIED || e1 == ABX_E_POLICY_PATH_DENIED);
    if (e1 != e2)
        fail_msg("same statements, other order: %s vs %s", abx_err_code(e1), abx_err_code(e2));
}

/* Regression test, fixed since (src/policy/decide.c abx_decide, snapshot.c abx_admit): only the first ABX_MAX_ADMITTING (32)
 * admitting statements are recorded in d->admitting, and abx_admit applies rate and
 * concurrency limits only to those; a rate-limited statement placed after 32 others that
 * also admit the call is silently not enforced. Moving it first enforces it. */
static void test_rate_limit_order_independent(void **state)
{
    (void)state;
    static const char *const plain = "{\"ops\": [\"files.read\"], \"principals\": [\"alice\"], \"paths\": [\"**\"]}";
    static const char *const limited = "{\"ops\": [\"files.read\"], \"principals\": [\"alice\"], "
                                       "\"paths\": [\"**\"], \"limits\": {\"rate\": \"1/min\"}}";
    abx_err second[2];
    for (int order = 0; order < 2; order++) {
        static char text[16384];
        strcpy(text, "{\"allow\": [");
        if (order == 0) {
            strcat(text, limited);
            strcat(text, ",");
        }
        for (int i = 0; i < 33; i++) {
            strcat(text, plain);
            strcat(text, i < 32 ? "," : "");
        }
        if (order == 1) {
            strcat(text, ",");
            strcat(text, limited);
        }
        strcat(text, "]}");
        abx_policy *p = compile_ok(text);
        int64_t now = abx_now_us();
        int retry = 0;
        for (int call = 0; call < 2; call++) {
            abx_decision d;
            assert_int_equal(decide(p, ALICE, "files.read", "{\"path\": \"a/x.txt\"}", &d), ABX_OK);
            abx_err e = abx_admit(p, ALICE, &d, now, &retry);
            if (call == 1)
                second[order] = e;
            else
                assert_int_equal(e, ABX_OK);
            abx_release(p, &d);
            abx_decision_release(&d);
        }
        abx_policy_unref(p);
    }
    assert_int_equal(second[0], ABX_E_LIMIT_RATE); /* rate-limited statement first: enforced */
    if (second[1] != ABX_E_LIMIT_RATE)
        fail_msg("rate limit of the 34th admitting statement not enforced: second call gave %s",
                 abx_err_code(second[1]));
}

/* ---- token authentication ------------------------------------------------------------------------ */

static void test_token_auth(void **state)
{
    (void)state;
    abx_policy *p = compile_ok("{}");
    int64_t now = abx_wall_ms();
    for (int i = 0; i < 3; i++)
        assert_int_equal(abx_policy_auth(p, tokens[i], strlen(tokens[i]), now), i);
    assert_int_equal(abx_policy_auth(p, "wrong-token-wrong-token", 23, now), -1);
    assert_int_equal(abx_policy_auth(p, tokens[0], strlen(tokens[0]) - 1, now), -1); /* a prefix */
    assert_int_equal(abx_policy_auth(p, "", 0, now), -1);
    abx_policy_unref(p);

    /* expiry */
    char hex[2][65], auth[1024];
    abx_sha256_hex(tokens[0], strlen(tokens[0]), hex[0]);
    abx_sha256_hex(tokens[1], strlen(tokens[1]), hex[1]);
    snprintf(auth, sizeof auth,
             "{\"tokens\": [{\"principal\": \"old\", \"token_sha256\": \"%s\", \"expires_at\": \"2000-01-01T00:00:00Z\"},"
             " {\"principal\": \"new\", \"token_sha256\": \"%s\", \"expires_at\": \"2999-01-01T00:00:00Z\"}]}",
             hex[0], hex[1]);
    abx_diags d = {0};
    p = compile_full(auth, "{}", false, &d);
    assert_non_null(p);
    abx_diags_release(&d);
    assert_int_equal(abx_policy_auth(p, tokens[0], strlen(tokens[0]), now), -1);
    assert_int_equal(abx_policy_auth(p, tokens[1], strlen(tokens[1]), now), 1);
    /* the same token before its expiry time works: expiry is the cause */
    assert_int_equal(abx_policy_auth(p, tokens[0], strlen(tokens[0]), 946684799000LL), 0);
    assert_int_equal(abx_policy_auth(p, tokens[0], strlen(tokens[0]), 946684800000LL), -1); /* at expiry */
    abx_policy_unref(p);
}

static void test_auth_config_errors(void **state)
{
    (void)state;
    static const struct {
        const char *auth;
        const char *code;
    } cases[] = {
        {"{\"tokens\": [{\"principal\": \"x\", \"token_sha256\": \"abc\"}]}", "config.bad_value"},
        {"{\"tokens\": [{\"principal\": \"x\", \"token\": \"short\"}]}", "config.weak_token"},
        {"{\"tokens\": [{\"principal\": \"x\"}]}", "config.invalid"},
        {"{\"tokens\": [{\"principal\": \"role:x\", \"token\": \"0123456789abcdef\"}]}", "config.invalid"},
        {"{\"tokens\": [{\"principal\": \"x\", \"token\": \"0123456789abcdef\"},"
         " {\"principal\": \"x\", \"token\": \"fedcba9876543210\"}]}",
         "config.duplicate_principal"},
        {"{\"tokens\": [{\"principal\": \"x\", \"token\": \"0123456789abcdef\"},"
         " {\"principal\": \"y\", \"token\": \"0123456789abcdef\"}]}",
         "config.duplicate_token"},
        {"{\"tokens\": [{\"principal\": \"x\", \"token\": \"0123456789abcdef\", \"expires_at\": \"tomorrow\"}]}",
         "config.bad_value"},
        {"{\"tokens\": [], \"bogus\": 1}", "config.unknown_key"},
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        abx_diags d = {0};
        abx_policy *p = compile_full(cases[i].auth, "{}", false, &d);
        if (p)
            fail_msg("auth %s should not compile", cases[i].auth);
        if (!find_diag(&d, cases[i].code))
            fail_msg("auth %s: no %s diagnostic (first: %s)", cases[i].auth, cases[i].code,
                     d.n ? d.items[0].code : "none");
        abx_diags_release(&d);
    }
}

/* ---- differential property test against a reference model ------------------------------------ */

static outcome actual(const abx_policy *p, int slot, int op, int path) { return pm_actual(&W, p, slot, op, path); }

static uint64_t prop_rng = 0x6a09e667f3bcc908u;

static unsigned prop_below(unsigned n)
{
    prop_rng ^= prop_rng >> 12;
    prop_rng ^= prop_rng << 25;
    prop_rng ^= prop_rng >> 27;
    return (unsigned)(((prop_rng * 0x2545f4914f6cdd1du) >> 33) % n);
}

static void shuffle(size_t *v, size_t n)
{
    for (size_t i = n; i > 1; i--) {
        size_t j = prop_below((unsigned)i);
        size_t t = v[i - 1];
        v[i - 1] = v[j];
        v[j] = t;
    }
}

#define N_POLICIES 200

typedef struct report {
    size_t checked, bad;
    char first[4096];
    size_t seen[ABX_E__COUNT]; /* outcome codes met, to show the pool exercises every rule */
} report;

static void note(report *r, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
static void note(report *r, const char *fmt, ...)
{
    if (r->bad++)
        return;
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(r->first, sizeof r->first, fmt, ap);
    va_end(ap);
}

static void describe(char *buf, size_t len, const outcome *o)
{
    snprintf(buf, len, "%s max_bytes=%lld labels=%s", abx_err_code(o->err), (long long)o->max_bytes, o->labels);
}

/* Each request of the universe: (slot, op, path) with path -1 for ops without one. */
static void for_each_request(void (*fn)(void *ud, int slot, int op, int path), void *ud)
{
    for (int s = 0; s < 4; s++)
        for (int o = 0; o < 4; o++)
            for (int pth = u_has_path[o] ? 0 : -1; pth < (u_has_path[o] ? 4 : 0); pth++)
                fn(ud, s, o, pth);
}

typedef struct model_ctx {
    report *r;
    const abx_policy *p;
    const size_t *stmts;
    size_t n;
    const char *text;
} model_ctx;

static void check_model(void *ud, int slot, int op, int path)
{
    model_ctx *c = ud;
    outcome want = model(c->stmts, c->n, slot, op, path), got = actual(c->p, slot, op, path);
    c->r->checked++;
    c->r->seen[got.err]++;
    bool ok = pm_agrees(&got, &want);
    if (!ok) {
        char g[400], w[400];
        describe(g, sizeof g, &got);
        describe(w, sizeof w, &want);
        note(c->r, "slot %d, %s %s: got %s, model %s%s%s\npolicy: %s", slot, u_ops[op], path >= 0 ? u_paths[path] : "",
             g, w, want.alt != want.err ? " or " : "", want.alt != want.err ? abx_err_code(want.alt) : "", c->text);
    }
}

static void test_property_against_model(void **state)
{
    (void)state;
    report r = {0};
    prop_rng = 0x6a09e667f3bcc908u;
    for (int iter = 0; iter < N_POLICIES; iter++) {
        size_t stmts[12], n = 1 + prop_below(8);
        for (size_t i = 0; i < n; i++)
            stmts[i] = prop_below(POOL_N);
        const char *text = policy_text(stmts, n);
        abx_policy *p = compile_ok(text);
        model_ctx c = {&r, p, stmts, n, text};
        for_each_request(check_model, &c);
        abx_policy_unref(p);
    }
    assert_true(r.checked > N_POLICIES * 30);
    static const abx_err codes[] = {ABX_OK, ABX_E_OP_NOT_ENABLED, ABX_E_POLICY_DENIED, ABX_E_POLICY_PATH_DENIED,
                                    ABX_E_POLICY_PATH_NOT_ALLOWED};
    for (size_t i = 0; i < sizeof codes / sizeof codes[0]; i++)
        if (r.seen[codes[i]] < 20)
            fail_msg("the random policies decided %s only %zu times", abx_err_code(codes[i]), r.seen[codes[i]]);
    if (r.bad) {
        fprintf(stderr, "first disagreement:\n%s\n", r.first);
        fail_msg("%zu of %zu decisions disagree with the reference model", r.bad, r.checked);
    }
}

typedef struct order_ctx {
    report *r;
    const abx_policy *p1, *p2;
    const char *t1, *t2;
} order_ctx;

static void check_order(void *ud, int slot, int op, int path)
{
    order_ctx *c = ud;
    outcome a = actual(c->p1, slot, op, path), b = actual(c->p2, slot, op, path);
    c->r->checked++;
    if (a.err != b.err || a.max_bytes != b.max_bytes || strcmp(a.labels, b.labels) != 0) {
        char ga[400], gb[400];
        describe(ga, sizeof ga, &a);
        describe(gb, sizeof gb, &b);
        note(c->r, "slot %d, %s %s: %s vs %s\npolicy 1: %s\npolicy 2: %s", slot, u_ops[op],
             path >= 0 ? u_paths[path] : "", ga, gb, c->t1, c->t2);
    }
}

/* Decisions never depend on statement order or duplication: the same statements,
 * shuffled and with some duplicated, decide every request the same way. */
static void test_property_order_and_duplication(void **state)
{
    (void)state;
    report r = {0};
    prop_rng = 0xbb67ae8584caa73bu;
    static char t1[16384];
    for (int iter = 0; iter < N_POLICIES; iter++) {
        size_t a[12], b[24], n = 1 + prop_below(8), nb = 0;
        for (size_t i = 0; i < n; i++)
            a[i] = prop_below(POOL_N);
        for (size_t i = 0; i < n; i++) {
            b[nb++] = a[i];
            if (prop_below(3) == 0)
                b[nb++] = a[i];
        }
        shuffle(b, nb);
        snprintf(t1, sizeof t1, "%s", policy_text(a, n));
        abx_policy *p1 = compile_ok(t1);
        const char *t2 = policy_text(b, nb);
        abx_policy *p2 = compile_ok(t2);
        order_ctx c = {&r, p1, p2, t1, t2};
        for_each_request(check_order, &c);
        abx_policy_unref(p1);
        abx_policy_unref(p2);
    }
    assert_true(r.checked > N_POLICIES * 30);
    if (r.bad) {
        fprintf(stderr, "first difference:\n%s\n", r.first);
        fail_msg("regression: %zu of %zu decisions change with statement order/duplication", r.bad, r.checked);
    }
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_mount_exact),
        cmocka_unit_test(test_mount_namespace),
        cmocka_unit_test(test_mount_all_and_explicit_only),
        cmocka_unit_test(test_mount_effect),
        cmocka_unit_test(test_principals),
        cmocka_unit_test(test_scope_required),
        cmocka_unit_test(test_unknown_selector),
        cmocka_unit_test(test_deny_by_ops),
        cmocka_unit_test(test_deny_by_paths),
        cmocka_unit_test(test_path_not_allowed),
        cmocka_unit_test(test_admitted_paths_and_jail),
        cmocka_unit_test(test_protected_areas),
        cmocka_unit_test(test_unsafe_waiver),
        cmocka_unit_test(test_tightest_limits_and_determining),
        cmocka_unit_test(test_trace),
        cmocka_unit_test(test_deny_order_independent),
        cmocka_unit_test(test_rate_limit_order_independent),
        cmocka_unit_test(test_token_auth),
        cmocka_unit_test(test_auth_config_errors),
        cmocka_unit_test(test_property_against_model),
        cmocka_unit_test(test_property_order_and_duplication),
    };
    return cmocka_run_group_tests(tests, group_setup, group_teardown);
}
