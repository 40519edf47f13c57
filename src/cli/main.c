/* main.c — the abx command line: one table of subcommands (after git's commands[]), from
 * which `abx help` prints the usage, so a command and its help cannot drift apart.
 * Thin: every command is a few calls into the library; nothing here decides policy. */
#include "cli/cli.h"
#include "policy/enforce.h"
#include "sandbox/tiers.h"
#include "config/config.h"
#include "core/core.h"
#include "discovery/discovery.h"
#include "pipeline/pipeline.h"
#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <sys/file.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

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
        else if (strcmp(a, "--net") == 0 && i + 1 < argc)
            o.net = argv[++i];
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
    sigaddset(&set, SIGHUP);
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
    while (sigwait(&set, &sig) == 0 && sig == SIGHUP) {
        /* reload: compile completely, then swap; a broken file keeps the old policy */
        abx_diags d = {0};
        int rc = abx_server_reload(s, &d);
        for (size_t i = 0; i < d.n; i++)
            abx_log(d.items[i].level, NULL, "reload: %s:%d: %s: %s", o.config_path ? o.config_path : "-",
                    d.items[i].line, d.items[i].code, d.items[i].message);
        abx_log(rc == 0 ? "info" : "error", NULL, rc == 0 ? "SIGHUP: policy reloaded"
                                                          : "SIGHUP: reload refused; the old policy stays in force");
        abx_diags_release(&d);
    }
    abx_log("info", NULL, "signal %d: stopping", sig);
    abx_server_shutdown(s); /* bounded by limits.shutdown_grace */
    return 0;
}

/* A server value that is compiled but never listens: check-config and explain. */
static abx_server *offline_server(const char *config, abx_diags *d, abx_policy **policy)
{
    char err[2048];
    abx_server_opts o = {.config_path = config, .quiet = true};
    size_t before = d->errors;
    abx_server *s = abx__server_new(&o, d, err, sizeof err);
    if (!s) {
        if (d->errors == before) /* not a config diagnostic: say what failed */
            abx_diag_add(d, "error", "config.invalid", 0, "%s", err);
        return NULL;
    }
    abx_registry_freeze(abx_server_registry(s));
    if (!config || s->cfg.extends_default)
        snprintf(s->token_sha256_hex, sizeof s->token_sha256_hex, "%064d", 0);
    *policy = abx_server_compile(s, &s->cfg, d);
    return s;
}

static int cmd_check_config(int argc, char **argv)
{
    if (argc < 1) {
        fprintf(stderr, "usage: abx check-config FILE\n");
        return 2;
    }
    const char *path = argv[0];
    abx_diags d = {0};
    abx_policy *p = NULL;
    abx_server *s = offline_server(path, &d, &p);
    abx_policy_check_enforceable(p, s ? &s->cfg : NULL, &d); /* statements this machine cannot confine */
    for (size_t i = 0; i < d.n; i++)
        printf("%s:%d: %s: %s: %s\n", path, d.items[i].line, d.items[i].level, d.items[i].code, d.items[i].message);
    int rc = d.errors ? 1 : 0;
    if (d.errors)
        printf("%zu error(s)\n", d.errors);
    else
        printf("ok (%zu warning(s))\n", d.n);
    abx_diags_release(&d);
    abx_policy_unref(p);
    abx_server_free(s);
    return rc;
}

/* --net-host HOST[:PORT]: the network decision for that host as the process's egress
 * proxy would make it (port 443 when not given) */
static void explain_net_host(const abx_policy *p, json_t *trace, const char *spec)
{
    char host[ABX_EGRESS_HOST_MAX];
    int port = 443;
    snprintf(host, sizeof host, "%s", spec);
    char *colon = strrchr(host, ':');
    if (colon && !strchr(host, ']') && strchr(host, ':') == colon) {
        *colon = '\0';
        port = atoi(colon + 1);
    }
    json_t *nh = json_pack("{s:s, s:i}", "host", host, "port", port);
    const json_t *net = json_object_get(trace, "net");
    if (!net) {
        json_object_set_new(nh, "decision", json_string("deny"));
        json_object_set_new(nh, "reason", json_string("the call is not admitted"));
    } else if (json_is_string(net)) {
        bool on = strcmp(json_string_value(net), "host") == 0;
        json_object_set_new(nh, "decision", json_string(on ? "allow" : "deny"));
        json_object_set_new(nh, "reason", json_string(on ? "net: true" : "no network (net: false)"));
    } else {
        const char *label = json_string_value(json_object_get(net, "allowlist"));
        const abx_stmt *s = NULL;
        for (size_t i = 0; label && i < p->n_allow && !s; i++)
            if (strcmp(p->allow[i].label, label) == 0)
                s = &p->allow[i];
        abx_egress_decision d;
        if (!s || !s->net_allow || !abx_egress_host_norm(host)) {
            json_object_set_new(nh, "decision", json_string("deny"));
            json_object_set_new(nh, "reason", json_string("not a host name"));
        } else {
            abx_egress_decide(s->net_allow, &p->egress_resolve, true, host, port, &d);
            json_object_set_new(nh, "decision", json_string(d.allow ? "allow" : "deny"));
            if (d.rule)
                json_object_set_new(nh, "rule", json_string(d.rule));
            json_object_set_new(nh, "reason", json_string(d.reason));
            json_t *addrs = json_array();
            for (size_t i = 0; i < d.naddrs; i++) {
                char a[46];
                abx_ip_format(&d.addrs[i], a);
                json_array_append_new(addrs, json_string(a));
            }
            json_object_set_new(nh, "addrs", addrs);
        }
    }
    json_object_set_new(trace, "net_host", nh);
}

static int cmd_explain(int argc, char **argv)
{
    const char *config = NULL, *op = NULL, *principal = NULL, *net_host = NULL;
    bool as_json = false;
    json_t *args = json_object();
    int rc = 2;
    for (int i = 0; i < argc; i++) {
        if (strcmp(argv[i], "--config") == 0 && i + 1 < argc)
            config = argv[++i];
        else if (strcmp(argv[i], "--op") == 0 && i + 1 < argc)
            op = argv[++i];
        else if (strcmp(argv[i], "--principal") == 0 && i + 1 < argc)
            principal = argv[++i];
        else if (strcmp(argv[i], "--json") == 0)
            as_json = true;
        else if (strcmp(argv[i], "--net-host") == 0 && i + 1 < argc)
            net_host = argv[++i];
        else if (strcmp(argv[i], "--arg") == 0 && i + 1 < argc) {
            const char *kv = argv[++i], *eq = strchr(kv, '=');
            if (!eq) {
                fprintf(stderr, "abx explain: --arg takes k=v\n");
                goto out;
            }
            char *k = strndup(kv, (size_t)(eq - kv));
            json_t *v = json_loads(eq + 1, JSON_DECODE_ANY, NULL);
            json_object_set_new(args, k, v && !json_is_string(v) ? v : json_string(eq + 1));
            if (v && json_is_string(v))
                json_decref(v);
            free(k);
        } else {
            fprintf(stderr, "usage: abx explain [--config FILE] --op OP [--arg k=v ...] [--principal ID] [--net-host HOST[:PORT]] [--json]\n");
            goto out;
        }
    }
    if (!op) {
        fprintf(stderr, "usage: abx explain [--config FILE] --op OP [--arg k=v ...] [--principal ID] [--net-host HOST[:PORT]] [--json]\n");
        goto out;
    }
    abx_diags d = {0};
    abx_policy *p = NULL;
    abx_server *s = offline_server(config, &d, &p);
    if (!p) {
        for (size_t i = 0; i < d.n; i++)
            fprintf(stderr, "%s:%d: %s: %s: %s\n", config ? config : "-", d.items[i].line, d.items[i].level,
                    d.items[i].code, d.items[i].message);
        abx_diags_release(&d);
        abx_server_free(s);
        rc = 1;
        goto out;
    }
    abx_diags_release(&d);
    /* typed like abx call: by the op's schema where the op is known */
    const abx_op *o = abx_registry_resolve(abx_server_registry(s), op);
    json_t *typed = json_object();
    const char *k;
    json_t *v;
    json_object_foreach(args, k, v)
    {
        char msg[200];
        const abx_param *pa = o ? abx_op_param(o, k) : NULL;
        if (pa && json_is_string(v) && pa->type != ABX_T_STRING && pa->type != ABX_T_MAP && pa->type != ABX_T_ANY &&
            abx_args_add_text(o, typed, k, json_string_value(v), strlen(json_string_value(v)), msg, sizeof msg) == 0)
            continue;
        json_object_set(typed, k, v);
    }
    json_t *trace = abx_explain(p, abx_server_registry(s), principal ? principal : (config && !s->cfg.extends_default ? NULL : "local"), op, typed);
    json_decref(typed);
    if (net_host)
        explain_net_host(p, trace, net_host);
    json_t *conf = json_object_get(trace, "confinement");
    if (conf) { /* the tier this machine would give it (probed, as check-config does) */
        abx_tiers t;
        abx_tiers_probe(&t, true);
        abx_tiers_pick(&t);
        json_object_set_new(conf, "tier", json_string(abx_tier_name(t.tier)));
    }
    if (as_json) {
        char *j = json_dumps(trace, JSON_INDENT(2));
        puts(j ? j : "{}");
        free(j);
    } else {
        char *t = abx_explain_text(trace);
        fputs(t ? t : "", stdout);
        free(t);
    }
    const char *dec = json_string_value(json_object_get(trace, "decision"));
    rc = dec && (strcmp(dec, "allow") == 0 || strcmp(dec, "approval") == 0) ? 0 : 1;
    json_decref(trace);
    abx_policy_unref(p);
    abx_server_free(s);
out:
    json_decref(args);
    return rc;
}

/* abx tools --format F [--config FILE] [--principal ID]: the declarations GET /tools
 * serves, offline. Without --principal every offered op of the registry (the config's
 * custom ops included when --config is given). */
static int cmd_tools(int argc, char **argv)
{
    static const char use[] = "usage: abx tools --format openai|responses|anthropic|gemini [--config FILE] "
                              "[--principal ID]\n";
    const char *config = NULL, *principal = NULL, *format = NULL;
    for (int i = 0; i < argc; i++) {
        if (strcmp(argv[i], "--config") == 0 && i + 1 < argc)
            config = argv[++i];
        else if (strcmp(argv[i], "--principal") == 0 && i + 1 < argc)
            principal = argv[++i];
        else if (strcmp(argv[i], "--format") == 0 && i + 1 < argc)
            format = argv[++i];
        else {
            fputs(use, stderr);
            return 2;
        }
    }
    abx_tool_format f;
    if (!format || !abx_tool_format_parse(format, strlen(format), &f)) {
        fprintf(stderr, "abx tools: --format must be one of %s\n", ABX_TOOL_FORMATS);
        fputs(use, stderr);
        return 2;
    }
    json_t *doc;
    if (!config && !principal) {
        abx_registry *reg = abx_registry_default();
        abx_registry_freeze(reg);
        doc = abx_tools(reg, NULL, 0, f);
    } else {
        abx_diags d = {0};
        abx_policy *p = NULL;
        abx_server *s = offline_server(config, &d, &p);
        if (!p) {
            for (size_t i = 0; i < d.n; i++)
                fprintf(stderr, "%s:%d: %s: %s: %s\n", config ? config : "-", d.items[i].line, d.items[i].level,
                        d.items[i].code, d.items[i].message);
            abx_diags_release(&d);
            abx_server_free(s);
            return 1;
        }
        abx_diags_release(&d);
        int slot = principal ? abx_policy_principal_slot(p, principal) : 0;
        if (slot < 0) {
            fprintf(stderr, "abx tools: no principal '%s' in %s\n", principal, config ? config : "the embedded default");
            abx_policy_unref(p);
            abx_server_free(s);
            return 1;
        }
        doc = abx_tools(abx_server_registry(s), principal ? p : NULL, slot, f);
        abx_policy_unref(p);
        abx_server_free(s);
    }
    char *text = doc ? json_dumps(doc, JSON_INDENT(2)) : NULL; /* key order as served: it orders the model's output */
    json_decref(doc);
    if (!text)
        return 1;
    puts(text);
    free(text);
    return 0;
}

/* Write text to path atomically: a temporary file beside it, fsync, rename. */
static int write_atomic(const char *path, const char *text, char *err, size_t errlen)
{
    char *tmp = abx_asprintf("%s.tmp.%d", path, (int)getpid());
    int fd = tmp ? open(tmp, O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC | O_NOFOLLOW, 0644) : -1;
    if (fd < 0) {
        snprintf(err, errlen, "cannot create %s: %s", tmp ? tmp : path, strerror(errno));
        abx_free(tmp);
        return -1;
    }
    size_t len = strlen(text), off = 0;
    while (off < len) {
        ssize_t n = write(fd, text + off, len - off);
        if (n < 0 && errno == EINTR)
            continue;
        if (n <= 0)
            break;
        off += (size_t)n;
    }
    bool ok = off == len && fsync(fd) == 0;
    int saved = errno;
    ok = close(fd) == 0 && ok;
    if (ok && rename(tmp, path) != 0) {
        saved = errno;
        ok = false;
    }
    if (!ok) {
        snprintf(err, errlen, "cannot write %s: %s", path, strerror(saved));
        unlink(tmp);
    }
    abx_free(tmp);
    return ok ? 0 : -1;
}

static int cmd_gen_client(int argc, char **argv)
{
    const char *lang = NULL, *out = NULL;
    for (int i = 0; i < argc; i++) {
        if (strcmp(argv[i], "--lang") == 0 && i + 1 < argc)
            lang = argv[++i];
        else if (strcmp(argv[i], "--out") == 0 && i + 1 < argc)
            out = argv[++i];
        else {
            fprintf(stderr, "abx gen-client: unexpected argument '%s'\n"
                            "usage: abx gen-client --lang python|ts|openapi [--out FILE]\n",
                    argv[i]);
            return 2;
        }
    }
    if (!lang) {
        fprintf(stderr, "usage: abx gen-client --lang python|ts|openapi [--out FILE]\n");
        return 2;
    }
    abx_registry *reg = abx_registry_default();
    abx_registry_freeze(reg);
    char err[512];
    char *text = abx_gen_client(reg, lang, err, sizeof err);
    if (!text) {
        fprintf(stderr, "abx gen-client: %s\n", err);
        return 2;
    }
    int rc = 0;
    if (out) {
        if (write_atomic(out, text, err, sizeof err) != 0) {
            fprintf(stderr, "abx gen-client: %s\n", err);
            rc = 1;
        }
    } else if (fputs(text, stdout) == EOF || fflush(stdout) != 0) {
        rc = 1;
    }
    abx_free(text);
    return rc;
}

static int cmd_catalog(int argc, char **argv)
{
    (void)argc, (void)argv;
    abx_registry *reg = abx_registry_default();
    abx_registry_freeze(reg);
    return print_json(abx_catalog(reg, NULL, 0));
}

static int cmd_openapi(int argc, char **argv)
{
    (void)argc, (void)argv;
    abx_registry *reg = abx_registry_default();
    abx_registry_freeze(reg);
    return print_json(abx_openapi(reg, NULL, 0, NULL));
}

static int cmd_docs(int argc, char **argv)
{
    abx_registry *reg = abx_registry_default();
    abx_registry_freeze(reg);
    char *md = argc < 1                         ? NULL
               : strcmp(argv[0], "ops") == 0    ? abx_docs_ops_markdown(reg)
               : strcmp(argv[0], "errors") == 0 ? abx_docs_errors_markdown()
                                                : NULL;
    if (!md) {
        fprintf(stderr, "usage: abx docs ops|errors\n");
        return 2;
    }
    fputs(md, stdout);
    free(md);
    return 0;
}

static int cmd_version(int argc, char **argv)
{
    (void)argc, (void)argv;
    printf("abx %s (catalog %d, api %s)\n", ABX_VERSION, ABX_CATALOG_VERSION, ABX_API_FAMILY);
    return 0;
}

static int cmd_help(int argc, char **argv);

/* One row per subcommand: what `main` dispatches on and what `abx help` prints. A row
 * without help is an alias (--help, --version) or a build tool (manpage, completion):
 * dispatched, not listed. The row type is in cli.h: the man page is written from it. */
typedef abx_cli_command cli_command;

static const cli_command commands[] = {
    {"serve", cmd_serve, "[--config FILE] [--listen HOST:PORT] [--workspace DIR] [--net on|off|allow:HOST,...] [--explain-denials] [--log-level L]",
     "run the server (no --config: embedded default, preset workspace on .)"},
    {"mcp", abx_cli_mcp, "[--config FILE] [--workspace DIR] [--principal NAME] [--log-level L]",
     "serve MCP over stdin/stdout (same config and policy as serve)"},
    {"call", abx_cli_call, "OP [k=v ...] [--args '{...}'] [--json] [--raw] [--url URL] [--token T] | OP --help",
     "call an operation on a running server (--json: compact JSON, SSE events as JSON lines as they arrive)"},
    {"check-config", cmd_check_config, "FILE", "lint a config file (and run its policy tests); exit 1 on errors"},
    {"explain", cmd_explain, "[--config FILE] --op OP [--arg k=v ...] [--principal ID] [--net-host HOST[:PORT]] [--json]",
     "the decision trace of a call, without running it"},
    {"ledger", abx_cli_ledger,
     "tail|show GROUP|verify [--anchor H:N]|anchor|export|reset --i-know [--path F | --config F]",
     "read and check the action ledger (reset: move it aside and start a new chain)"},
    {"ops", abx_cli_ops, "[OP|NAMESPACE ...] [--json]",
     "list operations with their parameters (name, type, required, default, description)"},
    {"catalog", cmd_catalog, "", "print operations.json generated from the registry"},
    {"openapi", cmd_openapi, "", "print the OpenAPI 3.1 document of every operation"},
    {"gen-client", cmd_gen_client, "--lang python|ts|openapi [--out FILE]",
     "write a typed client module from the registry (no server needed)"},
    {"tools", cmd_tools, "--format openai|responses|anthropic|gemini [--config FILE] [--principal ID]",
     "print the LLM provider's tool declarations (--principal: only what it may call under the policy)"},
    {"docs", cmd_docs, "ops|errors", "print the generated docs tables (Markdown)"},
    {"install", abx_cli_install, "--check [--config FILE] [--dir DIR] [--json]",
     "list the installable requirements (install.allow) and verify the installed ones' hashes"},
    {"version", cmd_version, "", "print the version"},
    {"help", cmd_help, "", "print this list"},
    {"--version", cmd_version, NULL, NULL},
    {"--help", cmd_help, NULL, NULL},
    {"-h", cmd_help, NULL, NULL},
    {"manpage", abx_cli_manpage, NULL, NULL},       /* the build writes abx.1 and abx.yaml.5 with it */
    {"completion", abx_cli_completion, NULL, NULL}, /* and the bash completion */
};

const abx_cli_command *abx_cli_commands(size_t *n)
{
    *n = ABX_ARRAY_LEN(commands);
    return commands;
}

/* The usage, generated from the table: "  name args" and its help beside it when the two
 * fit in the first column, else on the next line, indented to that column. */
static void usage(FILE *f)
{
    enum { COL = 23 };
    fprintf(f, "usage: abx <command> [options]\n\ncommands:\n");
    for (size_t i = 0; i < ABX_ARRAY_LEN(commands); i++) {
        const cli_command *c = &commands[i];
        if (!c->help)
            continue;
        int w = fprintf(f, "  %s%s%s", c->name, c->args[0] ? " " : "", c->args);
        if (w > COL - 2)
            fprintf(f, "\n%*s%s\n", COL, "", c->help);
        else
            fprintf(f, "%*s%s\n", COL - w, "", c->help);
    }
}

static int cmd_help(int argc, char **argv)
{
    (void)argc, (void)argv;
    usage(stdout);
    return 0;
}

int main(int argc, char **argv)
{
    if (argc < 2) {
        usage(stderr);
        return 2;
    }
    for (size_t i = 0; i < ABX_ARRAY_LEN(commands); i++)
        if (strcmp(argv[1], commands[i].name) == 0)
            return commands[i].run(argc - 2, argv + 2);
    fprintf(stderr, "abx: unknown command '%s' (abx help lists the commands)\n\n", argv[1]);
    usage(stderr);
    return 2;
}
