/* test_gitcfg.c — the git-config reader behind files.git_config_hook: which keys count,
 * and which look-alikes (other sections, values, comments, continuations) do not. */
#include <stdarg.h>
#include <stddef.h>
#include <setjmp.h>
#include <stdint.h>
#include <cmocka.h>

#include <string.h>

#include "builtin/gitcfg.h"

static size_t keys_of(const char *text, const char **keys)
{
    return abx_gitcfg_hook_keys(text, strlen(text), keys, 4);
}

static void expect_one(const char *text, const char *key)
{
    const char *keys[4];
    size_t n = keys_of(text, keys);
    if (n != 1 || strcmp(keys[0], key) != 0)
        fail_msg("%s: want %s, got %zu keys (%s)", text, key, n, n ? keys[0] : "-");
}

static void expect_none(const char *text)
{
    const char *keys[4];
    size_t n = keys_of(text, keys);
    if (n)
        fail_msg("%s: want none, got %s", text, keys[0]);
}

static void test_keys_found(void **state)
{
    (void)state;
    expect_one("[core]\n\tfsmonitor = /tmp/x.sh\n", "core.fsmonitor");
    expect_one("[Core]\nFSMonitor=x", "core.fsmonitor");
    expect_one("[core]\n  hooksPath = .hooks ; planted\n", "core.hookspath");
    expect_one("[core] hookspath = x\n", "core.hookspath");        /* a key after the header */
    expect_one("[core]\r\n\tfsmonitor\r\n", "core.fsmonitor");      /* a bare key is true */
    expect_one("[include]\n\tpath = ../x.inc\n", "include.path");
    expect_one("[includeIf \"gitdir:/a/]b\"]\n\tpath = x\n", "includeif.path");
    expect_one("[user]\n\tname = a\n[core]\n\tbare = false\n\tfsmonitor = y\n", "core.fsmonitor");
    const char *keys[4];
    assert_int_equal(keys_of("[core]\nfsmonitor=a\nhookspath=b\nfsmonitor=c\n[include]\npath=d\n", keys), 3);
}

static void test_lookalikes_ignored(void **state)
{
    (void)state;
    expect_none("");
    expect_none("[alias]\n\tfsmonitor = x\n");
    expect_none("[user]\n\tname = core.fsmonitor\n");
    expect_none("# [core] fsmonitor = x\n; [include] path = y\n");
    expect_none("[core]\n\t# fsmonitor = x\n\tbare = false\n");
    expect_none("[core]\n\tfsmonitorx = 1\n\tpathx = 2\n");
    expect_none("[core]\n\teditor = vi \\\n fsmonitor = x\n");           /* a continued value */
    expect_none("[coreutils]\nfsmonitor = y\n");
}

static void test_names(void **state)
{
    (void)state;
    assert_true(abx_gitcfg_name("/w/.gitconfig"));
    assert_true(abx_gitcfg_name("/w/.git/config"));
    assert_true(abx_gitcfg_name("/w/.git/config.worktree"));
    assert_true(abx_gitcfg_name("/w/.git/modules/sub/config"));
    assert_false(abx_gitcfg_name("/w/config"));
    assert_false(abx_gitcfg_name("/w/.git/configx"));
    assert_false(abx_gitcfg_name("/w/notes/config.worktree"));
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_keys_found),
        cmocka_unit_test(test_lookalikes_ignored),
        cmocka_unit_test(test_names),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
