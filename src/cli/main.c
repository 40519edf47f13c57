/* main.c — the abx command line: serve, call, catalog, openapi, docs, check-config.
 * Thin: every command is a few calls into the library; nothing here decides policy. */
#include "config/config.h"
#include "core/core.h"
#include "discovery/discovery.h"
#include "pipeline/pipeline.h"
#include <errno.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

int abx_cli_call(int argc, char **argv); /* call.c */

static void usage(FILE *f)
{
    fprintf(f, "usage: abx <command> [options]\n\n"
               "commands:\n"
               "  serve [--config FILE] [--listen HOST:PORT] [--workspace DIR] [--explain-denials] [--log-level L]\n"
               "                       run the server (no --config: embedded default, preset workspace on .)\n"
               "  call OP [k=v ...] [--json '{...}'] [--url URL] [--token T]\n"
               "                       call an operation on a running server\n"
               "  check-config FILE    lint a config file; exit 1 on errors\n"
               "  catalog              print operations.json generated from the registry\n"
               "  openapi              print the OpenAPI 3.1 document of every operation\n"
               "  docs ops|errors      print the generated docs tables (Markdown)\n"
               "  version              print the version\n");
}

static int print_json(json_t *doc)
{
    if (!doc)
        return 1;
    char *s = json_dumps(doc, JSON_INDENT(2) | JSON_SORT_KEYS);
    json_decref(doc);
    if (!s)
        return 1;
    puts(s);
    free(s);
    return 0;
}

static int cmd_serve(int argc, char **argv)
{
    abx_server_opts o = {0};
    for (int i = 0; i < argc; i++) {
        const char *a = argv[i];
        if (strcmp(a, "--config") == 0 && i + 1 < argc)
            o.config_path = argv[++i];
        else if (strcmp(a, "--listen") == 0 && i + 1 < argc)
            o.listen = argv[++i];
        else if (strcmp(a, "--workspace") == 0 && i + 1 < argc)
            o.workspace = argv[++i];
        else if (strcmp(a, "--explain-denials") == 0)
            o.explain_denials = true;
        else if (strcmp(a, "--log-level") == 0 && i + 1 < argc)
            abx_log_set_level(argv[++i]);
        else if (strcmp(a, "--quiet") == 0)
            o.quiet = true;
        else {
            fprintf(stderr, "abx serve: unknown option '%s'\n", a);
            return 2;
        }
    }
    /* block the stop signals in every thread; the main thread waits for them */
    sigset_t set;
    sigemptyset(&set);
    sigaddset(&set, SIGINT);
    sigaddset(&set, SIGTERM);
    pthread_sigmask(SIG_BLOCK, &set, NULL);
    signal(SIGPIPE, SIG_IGN);
    char err[2048];
    abx_server *s = abx_server_new(&o, err, sizeof err);
    if (!s || abx_server_start(s, err, sizeof err) != 0) {
        fprintf(stderr, "abx serve: %s\n", err);
        abx_server_free(s);
        return 1;
    }
    int sig = 0;
    sigwait(&set, &sig);
    abx_log("info", NULL, "signal %d: stopping", sig);
    abx_server_free(s);
    return 0;
}

static int cmd_check_config(int argc, char **argv)
{
    if (argc < 1) {
        fprintf(stderr, "usage: abx check-config FILE\n");
        return 2;
    }
    const char *path = argv[0];
    abx_diags d = {0};
    abx_config cfg;
    int rc = 0;
    if (abx_config_load(&cfg, path, &d) == 0) {
        abx_registry *reg = abx_registry_new(abx_registry_default());
        abx_registry_freeze(reg);
        char cwd[4096];
        const char *ws = cfg.workspace ? cfg.workspace : getcwd(cwd, sizeof cwd);
        const char *prot[] = {path};
        abx_policy_input in = {.reg = reg, .auth = cfg.auth, .policy = cfg.policy, .lines = cfg.lines,
                               .config_path = path, .workspace = ws, .protected_files = prot, .n_protected = 1};
        abx_policy *p = abx_policy_compile(&in, &d);
        abx_policy_unref(p);
        abx_registry_free(reg);
        abx_config_release(&cfg);
    }
    for (size_t i = 0; i < d.n; i++)
        printf("%s:%d: %s: %s: %s\n", path, d.items[i].line, d.items[i].level, d.items[i].code, d.items[i].message);
    if (d.errors) {
        printf("%zu error(s)\n", d.errors);
        rc = 1;
    } else {
        printf("ok (%zu warning(s))\n", d.n);
    }
    abx_diags_release(&d);
    return rc;
}

int main(int argc, char **argv)
{
    if (argc < 2) {
        usage(stderr);
        return 2;
    }
    const char *cmd = argv[1];
    if (strcmp(cmd, "serve") == 0)
        return cmd_serve(argc - 2, argv + 2);
    if (strcmp(cmd, "call") == 0)
        return abx_cli_call(argc - 2, argv + 2);
    if (strcmp(cmd, "check-config") == 0)
        return cmd_check_config(argc - 2, argv + 2);
    if (strcmp(cmd, "catalog") == 0) {
        abx_registry *reg = abx_registry_default();
        abx_registry_freeze(reg);
        return print_json(abx_catalog(reg, NULL, 0));
    }
    if (strcmp(cmd, "openapi") == 0) {
        abx_registry *reg = abx_registry_default();
        abx_registry_freeze(reg);
        return print_json(abx_openapi(reg, NULL, 0, NULL));
    }
    if (strcmp(cmd, "docs") == 0 && argc >= 3) {
        abx_registry *reg = abx_registry_default();
        abx_registry_freeze(reg);
        char *md = strcmp(argv[2], "ops") == 0      ? abx_docs_ops_markdown(reg)
                   : strcmp(argv[2], "errors") == 0 ? abx_docs_errors_markdown()
                                                    : NULL;
        if (!md) {
            usage(stderr);
            return 2;
        }
        fputs(md, stdout);
        free(md);
        return 0;
    }
    if (strcmp(cmd, "version") == 0 || strcmp(cmd, "--version") == 0) {
        printf("abx %s (catalog %d, api %s)\n", ABX_VERSION, ABX_CATALOG_VERSION, ABX_API_FAMILY);
        return 0;
    }
    if (strcmp(cmd, "help") == 0 || strcmp(cmd, "--help") == 0 || strcmp(cmd, "-h") == 0) {
        usage(stdout);
        return 0;
    }
    fprintf(stderr, "abx: unknown command '%s'\n", cmd);
    usage(stderr);
    return 2;
}
