/* mcp.c — `abx mcp`: the server's MCP over stdio, for MCP clients that start their
 * tools as subprocesses. The same config, policy and ledger as `abx serve`, in process:
 * no socket is opened and every tools/call enters the one pipeline. Standard output
 * carries only protocol messages; logs go to standard error. */
#include "cli/cli.h"
#include "doors/doors.h"
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

static const char mcp_usage[] =
    "usage: abx mcp [--config FILE] [--workspace DIR] [--principal NAME] [--log-level L]\n"
    "  serve MCP over stdin/stdout as one principal: --principal NAME, else the one\n"
    "  ABX_TOKEN authenticates, else (no --config) the embedded default's principal 'local'\n";

/* SIGHUP reloads the policy, as for `abx serve`; the stop signals keep their default. */
static void *reload_thread(void *arg)
{
    abx_server *s = arg;
    sigset_t set;
    sigemptyset(&set);
    sigaddset(&set, SIGHUP);
    int sig;
    while (sigwait(&set, &sig) == 0) {
        abx_diags d = {0};
        int rc = abx_server_reload(s, &d);
        for (size_t i = 0; i < d.n; i++)
            abx_log(d.items[i].level, NULL, "reload: %d: %s: %s", d.items[i].line, d.items[i].code,
                    d.items[i].message);
        abx_log(rc == 0 ? "info" : "error", NULL,
                rc == 0 ? "SIGHUP: policy reloaded" : "SIGHUP: reload refused; the old policy stays in force");
        abx_diags_release(&d);
    }
    return NULL;
}

/* The principal this process serves; NULL with a message on stderr. */
static const char *pick_principal(abx_server *s, const char *asked, char *out, size_t outlen)
{
    abx_policy *p = abx_server_snapshot(s);
    const char *tok = getenv("ABX_TOKEN");
    int slot = -1;
    const char *how = "";
    if (asked) {
        slot = abx_policy_principal_slot(p, asked);
        how = "--principal names no configured principal";
    } else if (tok && *tok) {
        slot = abx_policy_auth(p, tok, strlen(tok), abx_wall_ms());
        how = "ABX_TOKEN is unknown or expired";
    } else if (!s->cfg.path || s->cfg.extends_default) {
        slot = abx_policy_principal_slot(p, "local");
        how = "the embedded default has no principal 'local'";
    } else {
        how = "name the principal: --principal NAME, or its token in ABX_TOKEN";
    }
    bool ok = slot >= 0 && slot < (int)p->n_principals;
    if (ok)
        snprintf(out, outlen, "%s", abx_policy_principal_id(p, slot));
    else
        fprintf(stderr, "abx mcp: %s\n", how);
    abx_policy_unref(p);
    return ok ? out : NULL;
}

int abx_cli_mcp(int argc, char **argv)
{
    abx_server_opts o = {.quiet = true};
    const char *asked = NULL;
    /* an MCP client shows the server's stderr to its user: warnings and errors only,
     * unless --log-level asks for more */
    abx_log_set_level("warn");
    for (int i = 0; i < argc; i++) {
        const char *a = argv[i];
        if (strcmp(a, "--config") == 0 && i + 1 < argc)
            o.config_path = argv[++i];
        else if (strcmp(a, "--workspace") == 0 && i + 1 < argc)
            o.workspace = argv[++i];
        else if (strcmp(a, "--principal") == 0 && i + 1 < argc)
            asked = argv[++i];
        else if (strcmp(a, "--log-level") == 0 && i + 1 < argc)
            abx_log_set_level(argv[++i]);
        else if (strcmp(a, "--explain-denials") == 0)
            o.explain_denials = true;
        else if (strcmp(a, "--help") == 0 || strcmp(a, "-h") == 0) {
            fputs(mcp_usage, stdout);
            return 0;
        } else {
            fprintf(stderr, "abx mcp: unknown option '%s'\n%s", a, mcp_usage);
            return 2;
        }
    }
    sigset_t set;
    sigemptyset(&set);
    sigaddset(&set, SIGHUP);
    pthread_sigmask(SIG_BLOCK, &set, NULL);
    signal(SIGPIPE, SIG_IGN); /* a client that closed stdout: writes fail, reading ends */
    char err[2048];
    abx_server *s = abx_server_new(&o, err, sizeof err);
    if (s)
        s->no_listen = true;
    if (!s || abx_server_start(s, err, sizeof err) != 0) {
        fprintf(stderr, "abx mcp: %s\n", err);
        abx_server_free(s);
        return 1;
    }
    char principal[256];
    if (!pick_principal(s, asked, principal, sizeof principal)) {
        abx_server_free(s);
        return 2;
    }
    pthread_t t;
    bool reloader = pthread_create(&t, NULL, reload_thread, s) == 0;
    abx_log("info", NULL, "abx mcp: serving principal '%s' over stdio (workspace %s)", principal, s->workspace);
    int rc = abx_mcp_stdio(s, principal, STDIN_FILENO, stdout);
    if (reloader) { /* sigwait is a cancellation point: no reload can start on a freed server */
        pthread_cancel(t);
        pthread_join(t, NULL);
    }
    abx_server_free(s);
    return rc == 0 ? 0 : 1;
}
