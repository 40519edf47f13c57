/* test_config.c — unit tests of src/config/config.c: the key table and its one loop.
 * Defaults come from the rows (limits.def for the listener limits); every value is
 * parsed by its row's parser and refused with the key, the bounds and the line; keys
 * inside a section are its rows; docs/reference/config.md is what the rows generate.
 * Writes its config files to a mkdtemp folder and removes them. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "config/config.h"

static char dir[] = "/tmp/abx-test-config-XXXXXX";
static char file[256];

static int setup(void **state)
{
    (void)state;
    if (!mkdtemp(dir))
        return -1;
    snprintf(file, sizeof file, "%s/abx.yaml", dir);
    return 0;
}

static int teardown(void **state)
{
    (void)state;
    unlink(file);
    return rmdir(dir);
}

/* Load text as a config file; returns abx_config_load's result. */
static int load(const char *text, abx_config *c, abx_diags *d)
{
    FILE *f = fopen(file, "w");
    assert_non_null(f);
    fputs(text, f);
    fclose(f);
    memset(d, 0, sizeof *d);
    return abx_config_load(c, file, d);
}

/* text must be refused with one error: code, line and a message containing want. */
static void refused(const char *text, const char *code, int line, const char *want)
{
    abx_config c;
    abx_diags d;
    int rc = load(text, &c, &d);
    if (rc == 0 || d.n != 1 || strcmp(d.items[0].code, code) != 0 || d.items[0].line != line ||
        !strstr(d.items[0].message, want))
        fail_msg("config:\n%s\nexpected %s line %d '%s', got rc %d: %s line %d '%s'", text, code, line, want, rc,
                 d.n ? d.items[0].code : "-", d.n ? d.items[0].line : 0, d.n ? d.items[0].message : "-");
    abx_diags_release(&d);
}

static void test_embedded_defaults(void **state)
{
    (void)state;
    abx_config c;
    abx_diags d = {0};
    assert_int_equal(abx_config_load(&c, NULL, &d), 0);
    assert_string_equal(c.listen_host, "127.0.0.1");
    assert_int_equal(c.listen_port, 8080);
    assert_string_equal(c.terminal_host, "127.0.0.1");
    assert_int_equal(c.terminal_port, 9001);
    assert_int_equal(c.request_max_bytes, 16 << 20);
    assert_int_equal(c.upload_max_bytes, 4LL << 30);
    assert_int_equal(c.header_bytes, 16 << 10);
    assert_int_equal(c.header_count, 100);
    assert_int_equal(c.connections, 4096);
    assert_int_equal(c.connections_per_address, 256);
    assert_int_equal(c.workers, 64);
    assert_int_equal(c.read_timeout_ms, 3000);
    assert_int_equal(c.approval_ttl_ms, 15 * 60 * 1000);
    assert_int_equal(c.auth_failures, 100);
    /* file-only defaults stay unset without a file */
    assert_null(c.python);
    assert_null(c.plugin_dir);
    assert_false(c.confine_set);
    assert_false(c.ledger_off);
    assert_int_equal(c.n_system_env, 2);
    assert_string_equal(c.system_env[0], "LANG");
    abx_config_release(&c);
}

static void test_values_set_their_fields(void **state)
{
    (void)state;
    abx_config c;
    abx_diags d;
    int rc = load("listen: \"[::1]:9\"\nterminal_listen: \"off\"\nworkspace: /w\nconfine: required\n"
                  "run_as: \"12:34\"\nallowed_hosts: [a, b]\nallow_plaintext: true\n"
                  "limits:\n  header_bytes: 32KiB\n  headers: 50\n  read_timeout: 500ms\n  approval_ttl: 2h\n"
                  "  request_max_bytes: 1024\n  connections: 1\n"
                  "ledger:\n  enabled: false\n  synchronous: full\n  retention: 30d\n  max_size: 256MiB\n"
                  "system: {}\npython_isolation: per_call\nplugin_dir: p\n",
                  &c, &d);
    assert_int_equal(rc, 0);
    assert_int_equal(d.n, 0);
    assert_string_equal(c.listen_host, "::1");
    assert_int_equal(c.listen_port, 9);
    assert_null(c.terminal_host);
    assert_int_equal(c.terminal_port, -1);
    assert_string_equal(c.workspace, "/w");
    assert_true(c.confine_set && c.confine_required);
    assert_true(c.run_as_set);
    assert_int_equal(c.run_uid, 12);
    assert_int_equal(c.run_gid, 34);
    assert_int_equal(c.n_allowed_hosts, 2);
    assert_string_equal(c.allowed_hosts[1], "b");
    assert_true(c.allow_plaintext);
    assert_false(c.allow_lint_errors);
    assert_int_equal(c.header_bytes, 32 * 1024);
    assert_int_equal(c.header_count, 50);
    assert_int_equal(c.read_timeout_ms, 500);
    assert_int_equal(c.approval_ttl_ms, 2 * 3600 * 1000);
    assert_int_equal(c.request_max_bytes, 1024);
    assert_int_equal(c.connections, 1);
    assert_true(c.ledger_off);
    assert_true(c.ledger_sync_full);
    assert_int_equal(c.ledger_retention_ms, 30LL * 24 * 3600 * 1000);
    assert_int_equal(c.ledger_max_size, 256 << 20);
    assert_int_equal(c.n_system_env, 0); /* system present without env: nothing revealed */
    assert_true(c.python_per_call);
    assert_string_equal(c.python, "/usr/bin/python3");
    char want[300];
    char *real = realpath(dir, NULL);
    snprintf(want, sizeof want, "%s/p", real);
    free(real);
    assert_string_equal(c.plugin_dir, want);
    abx_config_release(&c);
    abx_diags_release(&d);
}

static void test_bounds_are_named(void **state)
{
    (void)state;
    refused("limits:\n  header_bytes: 512\n", "config.bad_value", 2,
            "'limits.header_bytes' must be a size 1KiB..64KiB");
    refused("limits:\n  header_bytes: 65KiB\n", "config.bad_value", 2, "1KiB..64KiB");
    refused("limits:\n  headers: 7\n", "config.bad_value", 2, "'limits.headers' must be 8..1000");
    refused("limits:\n  headers: 1001\n", "config.bad_value", 2, "8..1000");
    refused("limits:\n  headers: \"50\"\n", "config.bad_value", 2, "'limits.headers' must be 8..1000");
    refused("limits:\n  connections: 0\n", "config.bad_value", 2, "1..100000");
    refused("limits:\n  auth_failures: 9\n", "config.bad_value", 2, "10..1000000");
    refused("limits:\n  read_timeout: 11m\n", "config.bad_value", 2,
            "'limits.read_timeout' must be a duration 0.1s..10m");
    refused("limits:\n  read_timeout: 99ms\n", "config.bad_value", 2, "0.1s..10m");
    refused("limits:\n  approval_ttl: 8d\n", "config.bad_value", 2, "1s..7d");
    refused("limits:\n  request_max_bytes: 0\n", "config.bad_value", 2, "must be a size such as 16MiB");
    refused("limits:\n  upload_max_bytes: lots\n", "config.bad_value", 2, "must be a size such as 4GiB");
    refused("ledger:\n  retention: 5\n", "config.bad_value", 2, "'ledger.retention' must be a duration of at least 1s");
    refused("ledger:\n  max_size: 1KiB\n", "config.bad_value", 2, "'ledger.max_size' must be a size of at least 64KiB");
}

static void test_other_values_refused(void **state)
{
    (void)state;
    refused("listen: nowhere\n", "config.bad_value", 1, "'listen' must read HOST:PORT");
    refused("terminal_listen: x\n", "config.bad_value", 1, "'terminal_listen' must read HOST:PORT or off");
    refused("workspace: rel\n", "config.bad_value", 1, "'workspace' must be an absolute path");
    refused("confine: maybe\n", "config.bad_value", 1, "'confine' must be best_effort or required");
    refused("python_isolation: x\n", "config.bad_value", 1, "'python_isolation' must be shared or per_call");
    refused("python: python3\n", "config.bad_value", 1, "'python' must be an absolute path");
    refused("run_as: no-such-user-xyz\n", "config.bad_value", 1, "must be auto, UID:GID or an existing user name");
    refused("tls: {cert: a}\n", "config.invalid", 1, "'tls' must be {cert: FILE, key: FILE}");
    refused("allowed_hosts: x\n", "config.invalid", 1, "'allowed_hosts' must be a list of strings");
    refused("allowed_origins: [1]\n", "config.invalid", 1, "'allowed_origins' must contain only strings");
    refused("system:\n  env: [1]\n", "config.invalid", 2, "'system.env' must contain only strings");
    refused("ledger:\n  synchronous: sometimes\n", "config.bad_value", 2,
            "'ledger.synchronous' must be normal or full");
    refused("ledger:\n  enabled: 1\n", "config.bad_value", 2, "'ledger.enabled' must be true or false");
    refused("ledger:\n  path: [x]\n", "config.bad_value", 2, "'ledger.path' must be a string");
}

static void test_unknown_keys(void **state)
{
    (void)state;
    refused("colour: red\n", "config.unknown_key", 1, "unknown key 'colour'");
    refused("limits:\n  headers: 10\n  bytes: 1\n", "config.unknown_key", 3,
            "unknown key 'limits.bytes' (request_max_bytes, upload_max_bytes, header_bytes, headers, connections, "
            "connections_per_address, workers, "
            "read_timeout, approval_ttl, kernel_idle, auth_failures, tool_soft_timeout, progress_interval, "
            "tool_stream_duration, tool_stream_events, ticket_ttl, shutdown_grace, dynamic_tool_ttl, browser_idle, browsers)");
    refused("ledger:\n  rotate: 1d\n", "config.unknown_key", 2,
            "unknown key 'ledger.rotate' (path, synchronous, enabled, retention, max_size)");
    refused("system:\n  envs: []\n", "config.unknown_key", 2, "unknown key 'system.envs' (env)");
    /* shapes of top-level keys: every one is reported, before any value is read */
    abx_config c;
    abx_diags d;
    assert_int_equal(load("listen: 1\nallow_plaintext: yes please\nlimits: []\ncustom: {}\n", &c, &d), -1);
    assert_int_equal(d.errors, 4);
    assert_string_equal(d.items[0].message, "'listen' must be a string");
    assert_string_equal(d.items[1].message, "'allow_plaintext' must be true or false");
    assert_string_equal(d.items[2].message, "'limits' must be a mapping");
    assert_string_equal(d.items[3].message, "'custom' must be a list");
    abx_diags_release(&d);
}

/* docs/reference/config.md is generated from the rows; ABX_UPDATE_DOCS=1 rewrites it. */
static void test_docs_do_not_drift(void **state)
{
    (void)state;
    const char *src = getenv("ABX_SOURCE_DIR");
    if (!src)
        skip();
    char path[512];
    snprintf(path, sizeof path, "%s/docs/reference/config.md", src);
    char *md = abx_config_docs_markdown();
    assert_non_null(md);
    assert_non_null(strstr(md, "| `limits.header_bytes` | size | 16KiB | 1KiB..64KiB |"));
    if (getenv("ABX_UPDATE_DOCS")) {
        FILE *f = fopen(path, "w");
        assert_non_null(f);
        fputs(md, f);
        fclose(f);
    }
    FILE *f = fopen(path, "r");
    char *have = calloc(1, 1 << 16);
    size_t n = f ? fread(have, 1, (1 << 16) - 1, f) : 0;
    if (f)
        fclose(f);
    if (n != strlen(md) || memcmp(have, md, n) != 0)
        fail_msg("DRIFT: %s differs from the config rows (run: ABX_UPDATE_DOCS=1 ABX_SOURCE_DIR=. build/test_config)",
                 path);
    free(have);
    free(md);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_embedded_defaults),   cmocka_unit_test(test_values_set_their_fields),
        cmocka_unit_test(test_bounds_are_named),    cmocka_unit_test(test_other_values_refused),
        cmocka_unit_test(test_unknown_keys),        cmocka_unit_test(test_docs_do_not_drift),
    };
    return cmocka_run_group_tests(tests, setup, teardown);
}
