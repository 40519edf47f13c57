/* main.c — the abx command line: serve, mcp, call, catalog, openapi, tools, gen-client, docs,
 * check-config.
 * Thin: every command is a few calls into the library; nothing here decides policy. */
#include "policy/enforce.h"
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

int abx_cli_call(int argc, char **argv); /* call.c */
int abx_cli_mcp(int argc, char **argv);  /* mcp.c */

static void usage(FILE *f)
{
    fprintf(f, "usage: abx <command> [options]\n\n"
               "commands:\n"
               "  serve [--config FILE] [--listen HOST:PORT] [--workspace DIR] [--explain-denials] [--log-level L]\n"
               "                       run the server (no --config: embedded default, preset workspace on .)\n"
               "  mcp [--config FILE] [--workspace DIR] [--principal NAME] [--log-level L]\n"
               "                       serve MCP over stdin/stdout (same config and policy as serve)\n"
               "  call OP [k=v ...] [--args '{...}'] [--json] [--raw] [--url URL] [--token T]\n"
               "                       call an operation on a running server (--json: compact JSON\n"
               "                       output, SSE events as JSON lines as they arrive)\n"
               "  check-config FILE    lint a config file (and run its policy tests); exit 1 on errors\n"
               "  explain [--config FILE] --op OP [--arg k=v ...] [--principal ID] [--json]\n"
               "                       the decision trace of a call, without running it\n"
               "  ledger tail|show GROUP|verify [--anchor H:N]|anchor|export [--path F | --config F]\n"
               "                       read and check the action ledger\n"
               "  catalog              print operations.json generated from the registry\n"
               "  openapi              print the OpenAPI 3.1 document of every operation\n"
               "  gen-client --lang python|ts|openapi [--out FILE]\n"
               "                       write a typed client module from the registry (no server needed)\n"
               "  tools --format openai|responses|anthropic|gemini [--config FILE] [--principal ID]\n"
               "                       print the LLM provider's tool declarations (with --principal: only\n"
               "                       what that principal may call under the config's policy)\n"
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
    abx_server_free(s);
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
    if (!config)
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

static int cmd_explain(int argc, char **argv)
{
    const char *config = NULL, *op = NULL, *principal = NULL;
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
            fprintf(stderr, "usage: abx explain [--config FILE] --op OP [--arg k=v ...] [--principal ID] [--json]\n");
            goto out;
        }
    }
    if (!op) {
        fprintf(stderr, "usage: abx explain [--config FILE] --op OP [--arg k=v ...] [--principal ID] [--json]\n");
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
    json_t *trace = abx_explain(p, abx_server_registry(s), principal ? principal : (config ? NULL : "local"), op, typed);
    json_decref(typed);
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

static int ledger_sub(const char *sub, const char *path, const char *head, const char *anchor, int64_t group, int n,
                      bool i_know);

/* abx ledger tail|show|verify|anchor|export|reset [--path FILE | --config FILE] ... */
static int cmd_ledger(int argc, char **argv)
{
    if (argc < 1) {
        fprintf(stderr, "usage: abx ledger tail|show GROUP|verify [--anchor H:N]|anchor|export|reset --i-know [--path FILE | --config FILE]\n");
        return 2;
    }
    const char *sub = argv[0], *path = NULL, *config = NULL, *anchor = NULL;
    int64_t group = 0;
    int n = 20;
    bool i_know = false;
    for (int i = 1; i < argc; i++) {
        if (strcmp(argv[i], "--path") == 0 && i + 1 < argc)
            path = argv[++i];
        else if (strcmp(argv[i], "--config") == 0 && i + 1 < argc)
            config = argv[++i];
        else if (strcmp(argv[i], "--anchor") == 0 && i + 1 < argc)
            anchor = argv[++i];
        else if (strcmp(argv[i], "-n") == 0 && i + 1 < argc)
            n = atoi(argv[++i]);
        else if (strcmp(argv[i], "--i-know") == 0 && strcmp(sub, "reset") == 0)
            i_know = true;
        else if (strcmp(sub, "show") == 0 && argv[i][0] != '-')
            group = atoll(argv[i]);
        else {
            fprintf(stderr, "abx ledger: unexpected argument '%s'\n", argv[i]);
            return 2;
        }
    }
    char buf[4096];
    if (!path) { /* the server's default: ledger.path, .abx/ledger.db beside the config, or in abx's home */
        abx_diags d = {0};
        abx_config cfg;
        if (abx_config_load(&cfg, config, &d) != 0) {
            fprintf(stderr, "abx ledger: cannot load %s\n", config ? config : "the embedded default");
            abx_diags_release(&d);
            return 2;
        }
        char *p = abx_ledger_default_path(&cfg, false);
        snprintf(buf, sizeof buf, "%s", p ? p : "");
        abx_free(p);
        abx_config_release(&cfg);
        abx_diags_release(&d);
        path = buf;
    }
    char *home = abx_home_dir();
    char *head = home ? abx_ledger_head_path(home, path, false) : NULL;
    abx_free(home);
    int rc = ledger_sub(sub, path, head, anchor, group, n, i_know);
    abx_free(head);
    return rc;
}

/* abx ledger reset --i-know: the ledger (and its archive) is moved aside, never deleted,
 * and a new chain starts whose first event records the reset: who, when, the old head
 * and where the old files went. Refused while a server holds the ledger. */
static int ledger_reset(const char *path, const char *head)
{
    char *lock = abx_asprintf("%s.lock", path);
    int lfd = lock ? open(lock, O_RDWR | O_CREAT | O_CLOEXEC, 0600) : -1;
    abx_free(lock);
    if (lfd < 0 || flock(lfd, LOCK_EX | LOCK_NB) != 0) {
        fprintf(stderr, "abx ledger reset: the ledger %s is in use by a running server; stop it first\n", path);
        if (lfd >= 0)
            close(lfd);
        return 1;
    }
    uint64_t hc = 0;
    char hh[65] = "", anchor[160] = "", stamp[32];
    bool had_head = head && abx_ledger_head_read(head, &hc, hh) == 0;
    if (access(path, F_OK) == 0 && abx_ledger_anchor(path, anchor, sizeof anchor) != 0)
        anchor[0] = '\0';
    abx_iso8601(abx_wall_ms(), stamp);
    for (char *c = stamp; *c; c++)
        if (*c == ':' || *c == '.')
            *c = '-';
    char *moved = abx_asprintf("%s.reset-%s", path, stamp);
    static const char *const suffix[] = {"", "-wal", "-shm", ".archive"};
    bool any = false;
    for (size_t i = 0; moved && i < ABX_ARRAY_LEN(suffix); i++) {
        char *from = abx_asprintf("%s%s", path, suffix[i]), *to = abx_asprintf("%s%s", moved, suffix[i]);
        if (from && to && access(from, F_OK) == 0) {
            if (rename(from, to) != 0) {
                fprintf(stderr, "abx ledger reset: cannot move %s to %s: %s\n", from, to, strerror(errno));
                abx_free(from);
                abx_free(to);
                abx_free(moved);
                close(lfd);
                return 1;
            }
            any = true;
        }
        abx_free(from);
        abx_free(to);
    }
    if (head)
        unlink(head);
    close(lfd);
    char err[1024] = "";
    abx_ledger_opts lo = {.path = path, .sync_full = true, .head_path = head};
    abx_ledger *l = abx_ledger_open(&lo, err, sizeof err);
    if (!l) {
        fprintf(stderr, "abx ledger reset: %s\n", err);
        abx_free(moved);
        return 1;
    }
    char at[32], rid[33], who[64];
    abx_iso8601(abx_wall_ms(), at);
    unsigned char rnd[16] = {0};
    if (abx_random(rnd, sizeof rnd) != 0)
        memset(rnd, 0x5a, sizeof rnd);
    abx_hex(rnd, sizeof rnd, rid);
    snprintf(who, sizeof who, "operator:uid=%d", (int)getuid());
    json_t *events = json_pack("[{s:s, s:s, s:s, s:s, s:s, s:s, s:s}, {s:s, s:s, s:s?, s:s?, s:o, s:s?}]", "kind",
                               "received", "at", at, "request_id", rid, "principal", who, "op", "ledger.reset", "door",
                               "cli", "client", "local", "kind", "reset", "at", at, "previous_anchor",
                               anchor[0] ? anchor : NULL, "moved_to", any ? moved : NULL, "previous_head",
                               had_head ? json_pack("{s:I, s:s}", "count", (json_int_t)hc, "hash", hh) : json_null(),
                               "reason", "abx ledger reset --i-know");
    abx_ledger_call call = {.request_id = rid, .principal = who, .op = "ledger.reset", .door = "cli",
                            .client = "local", .events = events, .durable = true};
    uint64_t g = events ? abx_ledger_record(l, &call) : 0;
    json_decref(events);
    abx_ledger_close(l);
    if (!g) {
        fprintf(stderr, "abx ledger reset: the reset could not be recorded\n");
        abx_free(moved);
        return 1;
    }
    printf("a new chain starts in %s; its first event records the reset", path);
    if (any)
        printf(" (the old ledger is in %s)", moved);
    printf("\n");
    abx_free(moved);
    return 0;
}

static int ledger_sub(const char *sub, const char *path, const char *head, const char *anchor, int64_t group, int n,
                      bool i_know)
{
    char err[512] = "";
    if (strcmp(sub, "verify") == 0) {
        uint64_t events = 0;
        int rc = abx_ledger_verify(path, anchor, err, sizeof err, &events);
        uint64_t hc;
        char hh[65];
        if (rc == 0 && head && abx_ledger_head_read(head, &hc, hh) == 0 &&
            abx_ledger_head_check(path, hc, hh, err, sizeof err) != 0)
            rc = 1; /* intact inside, but not the ledger abx wrote */
        if (rc == 0)
            printf("ok: %llu events, chain intact%s\n", (unsigned long long)events, anchor ? ", anchor matches" : "");
        else
            printf("TAMPERED or damaged: %s\n", err);
        return rc;
    }
    if (strcmp(sub, "anchor") == 0) {
        char a[128];
        if (abx_ledger_anchor(path, a, sizeof a) != 0) {
            fprintf(stderr, "abx ledger: cannot read %s\n", path);
            return 1;
        }
        puts(a);
        return 0;
    }
    if (strcmp(sub, "reset") == 0) {
        if (!i_know) {
            fprintf(stderr, "abx ledger reset starts a new chain: the ledger is moved aside and abx stops checking "
                            "that it continues. Pass --i-know to do it.\n");
            return 2;
        }
        return ledger_reset(path, head);
    }
    if (strcmp(sub, "export") == 0)
        return abx_ledger_export(path, stdout, err, sizeof err) == 0 ? 0 : (fprintf(stderr, "%s\n", err), 1);
    if (strcmp(sub, "tail") == 0 || strcmp(sub, "show") == 0) {
        if (strcmp(sub, "show") == 0 && group <= 0) {
            fprintf(stderr, "usage: abx ledger show GROUP\n");
            return 2;
        }
        return abx_ledger_print(path, group, n, stdout, err, sizeof err) == 0 ? 0 : (fprintf(stderr, "%s\n", err), 1);
    }
    fprintf(stderr, "abx ledger: unknown subcommand '%s'\n", sub);
    return 2;
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
    if (strcmp(cmd, "gen-client") == 0)
        return cmd_gen_client(argc - 2, argv + 2);
    if (strcmp(cmd, "mcp") == 0)
        return abx_cli_mcp(argc - 2, argv + 2);
    if (strcmp(cmd, "check-config") == 0)
        return cmd_check_config(argc - 2, argv + 2);
    if (strcmp(cmd, "explain") == 0)
        return cmd_explain(argc - 2, argv + 2);
    if (strcmp(cmd, "ledger") == 0)
        return cmd_ledger(argc - 2, argv + 2);
    if (strcmp(cmd, "tools") == 0)
        return cmd_tools(argc - 2, argv + 2);
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
