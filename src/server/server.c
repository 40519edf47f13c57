/* server.c — the composition root: the server value's life (new, compile, reload,
 * start, stop, free). It composes what the layers below provide — the registry, the
 * namespaces (builtin, ext), the process manager, the ledger, the policy snapshot, the
 * doors — and never serves a request itself: listener.c does (src/server/server.h). */
#include "server/server.h"
#include "sandbox/tiers.h"
#include "sandbox/install.h"
#include "builtin/builtin.h"
#include "doors/doors.h"
#include "ext/ext.h"
#include "core/yaml.h"
#include <errno.h>
#include <pthread.h>
#include <signal.h>
#include <stdint.h>
#include <stdio.h>
#include <time.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

/* ---- server lifecycle ---- */

abx_server *abx__server_new(const abx_server_opts *opts, abx_diags *diags, char *errbuf, size_t errlen);

abx_server *abx_server_new(const abx_server_opts *opts, char *errbuf, size_t errlen)
{
    return abx__server_new(opts, NULL, errbuf, errlen);
}

/* diags (may be NULL) receives the config diagnostics as they are (check-config). */
/* abx serve --net grows the embedded default's preset: "on" (the host network), "off",
 * or "allow:HOST,..." (egress by name, docs/egress.md). A config says `net:` in its own
 * statements instead. */
static int parse_net(abx_server *s, const abx_server_opts *o, char *errbuf, size_t errlen)
{
    if (o->config_path && !s->cfg.extends_default) {
        snprintf(errbuf, errlen, "--net grows the embedded default; with a --config that does not say "
                                 "`extends: default`, give a statement `net:`");
        return -1;
    }
    if (strcmp(o->net, "on") == 0 || strcmp(o->net, "off") == 0) {
        s->default_net = json_boolean(strcmp(o->net, "on") == 0);
        return 0;
    }
    if (strncmp(o->net, "allow:", 6) == 0 && o->net[6]) {
        json_t *hosts = json_array();
        const char *p = o->net + 6;
        while (*p) {
            size_t n = strcspn(p, ",");
            if (n)
                json_array_append_new(hosts, json_stringn(p, n));
            p += n + (p[n] == ',');
        }
        s->default_net = json_pack("{s:o}", "allow", hosts);
        return 0;
    }
    snprintf(errbuf, errlen, "--net must read on, off or allow:HOST,... (got '%s')", o->net);
    return -1;
}

abx_server *abx__server_new(const abx_server_opts *opts, abx_diags *diags, char *errbuf, size_t errlen)
{
    abx_server_opts o = opts ? *opts : (abx_server_opts){0};
    abx_server *s = abx_calloc(1, sizeof *s);
    if (!s) {
        snprintf(errbuf, errlen, "out of memory");
        return NULL;
    }
    pthread_mutex_init(&s->snap_mu, NULL);
    pthread_mutex_init(&s->flood_mu, NULL);
    s->opts = o;
    s->reg = abx_registry_new(o.registry ? o.registry : abx_registry_default());
    abx_diags d = {0};
    if (!s->reg || abx_config_load(&s->cfg, o.config_path, diags ? diags : &d) != 0) {
        size_t off = (size_t)snprintf(errbuf, errlen, "config errors:");
        for (size_t i = 0; i < d.n && off < errlen; i++)
            if (strcmp(d.items[i].level, "error") == 0)
                off += (size_t)snprintf(errbuf + off, errlen - off, "\n  %s:%d: %s: %s",
                                        o.config_path ? o.config_path : "-", d.items[i].line, d.items[i].code,
                                        d.items[i].message);
        abx_diags_release(&d);
        abx_registry_free(s->reg);
        abx_free(s);
        return NULL;
    }
    abx_diags_release(&d);
    if (o.listen) {
        abx_free(s->cfg.listen_host);
        s->cfg.listen_host = NULL;
        if (!abx_parse_listen(o.listen, &s->cfg.listen_host, &s->cfg.listen_port)) {
            snprintf(errbuf, errlen, "--listen must read HOST:PORT");
            abx_server_free(s);
            return NULL;
        }
    }
    if (o.net && parse_net(s, &o, errbuf, errlen) != 0) {
        abx_server_free(s);
        return NULL;
    }
    char cwd[4096];
    const char *ws = o.workspace ? o.workspace : s->cfg.workspace;
    const char *here = getcwd(cwd, sizeof cwd); /* a relative --workspace is below it */
    if (!ws)
        ws = here;
    if (!ws || (ws[0] != '/' && !here) || abx_path_canon(here ? here : "/", ws, &s->workspace) != 0) {
        snprintf(errbuf, errlen, "cannot resolve the workspace");
        abx_server_free(s);
        return NULL;
    }
    snprintf(s->version_header, sizeof s->version_header, "abx/%s catalog=%d", ABX_VERSION, ABX_CATALOG_VERSION);
    snprintf(s->keepalive_header, sizeof s->keepalive_header, "timeout=1"); /* the listener's, once it starts */
    /* ops from the config (custom:, load:) join the child registry before it freezes */
    abx_diags ed = {0};
    abx_diags *dd = diags ? diags : &ed;
    size_t before = dd->errors;
    abx_server_state_precheck(s, dd); /* before plugins and Python modules run any code */
    s->ext = dd->errors > before ? NULL : abx_ext_load(s->reg, &s->cfg, s->workspace, dd);
    s->commands.fn = abx_ext_command_at; /* POST /commands/{name} resolves through ext */
    s->commands.ud = s->ext;
    if (!s->ext || dd->errors > before) {
        size_t off = (size_t)snprintf(errbuf, errlen, "config errors:");
        for (size_t i = 0; i < dd->n && off < errlen; i++)
            if (strcmp(dd->items[i].level, "error") == 0)
                off += (size_t)snprintf(errbuf + off, errlen - off, "\n  %s:%d: %s: %s",
                                        o.config_path ? o.config_path : "-", dd->items[i].line, dd->items[i].code,
                                        dd->items[i].message);
        if (!s->ext && dd->errors == before)
            snprintf(errbuf, errlen, "out of memory");
        abx_diags_release(&ed);
        abx_server_free(s);
        return NULL;
    }
    abx_diags_release(&ed);
    return s;
}

abx_registry *abx_server_registry(abx_server *s) { return s->reg; }

int abx_server_add_hook(abx_server *s, abx_policy_hook hook, void *udata, char *errbuf, size_t errlen)
{
    if (s->started) {
        snprintf(errbuf, errlen, "add policy hooks before starting the server");
        return -1;
    }
    if (!hook || s->n_hooks >= (int)ABX_ARRAY_LEN(s->hooks)) {
        snprintf(errbuf, errlen, "at most %d policy hooks", (int)ABX_ARRAY_LEN(s->hooks));
        return -1;
    }
    s->hooks[s->n_hooks].fn = hook;
    s->hooks[s->n_hooks].udata = udata;
    s->n_hooks++;
    return 0;
}

int abx_server_add_screen(abx_server *s, abx_screen_hook hook, void *udata, char *errbuf, size_t errlen)
{
    if (s->started || !hook || s->n_screens >= (int)ABX_ARRAY_LEN(s->screens)) {
        snprintf(errbuf, errlen, "at most %d screening hooks, added before the server starts",
                 (int)ABX_ARRAY_LEN(s->screens));
        return -1;
    }
    s->screens[s->n_screens].fn = hook;
    s->screens[s->n_screens].udata = udata;
    s->n_screens++;
    return 0;
}

int abx_server_port(const abx_server *s) { return s->port; }

static void run_policy_tests(const abx_policy *p, const abx_registry *reg, const abx_config *cfg, abx_diags *d)
{
    size_t i;
    json_t *t;
    json_array_foreach((json_t *)cfg->tests, i, t)
    {
        int line = cfg->lines ? abx_linemap_line(cfg->lines, t) : 0;
        static const char *const keys[] = {"principal", "op", "args", "expect", "name"};
        const char *k;
        json_t *v;
        bool bad = !json_is_object(t);
        json_object_foreach(bad ? NULL : t, k, v)
        {
            bool known = false;
            for (size_t j = 0; j < sizeof keys / sizeof keys[0]; j++)
                known = known || strcmp(keys[j], k) == 0;
            bad = bad || !known;
        }
        const json_t *op = json_object_get(t, "op"), *expect = json_object_get(t, "expect"),
                     *pr = json_object_get(t, "principal"), *args = json_object_get(t, "args");
        const char *ex = json_string_value(expect);
        if (bad || !json_is_string(op) || !ex || (pr && !json_is_string(pr)) || (args && !json_is_object(args)) ||
            (strcmp(ex, "allow") && strcmp(ex, "deny") && strcmp(ex, "approval") && strcmp(ex, "not_mounted"))) {
            abx_diag_add(d, "error", "config.bad_test", line,
                         "tests[%zu] must be {principal, op, args, expect: allow|deny|approval|not_mounted}", i);
            continue;
        }
        json_t *trace = abx_explain(p, reg, json_string_value(pr), json_string_value(op), args);
        const char *got = json_string_value(json_object_get(trace, "decision"));
        if (!got || strcmp(got, ex) != 0) {
            char *text = abx_explain_text(trace);
            abx_diag_add(d, "error", "config.test_failed", line, "tests[%zu]: expected %s, got %s\n%s", i, ex,
                         got ? got : "?", text ? text : "");
            abx_free(text);
        }
        json_decref(trace);
    }
}
abx_policy *abx_server_compile(abx_server *s, const abx_config *cfg, abx_diags *diags)
{
    abx_state_list st;
    abx_state_list_build(s, cfg, &st);
    abx_policy_input in = {
        .reg = s->reg,
        .auth = cfg->auth,
        .policy = cfg->policy,
        .egress = cfg->egress,
        .lines = cfg->lines,
        .config_path = cfg->path,
        .workspace = s->workspace,
        .default_token_sha256_hex = cfg->path && !cfg->extends_default ? NULL : s->token_sha256_hex,
        .runtime_dir = s->runtime_dir[0] ? s->runtime_dir : "/tmp/abx-0-0",
        .protected_files = st.path,
        .protected_what = st.what,
        .n_protected = st.n,
        .allow_lint_errors = cfg->allow_lint_errors,
        .secrets = &cfg->secrets,
        .default_net = cfg->path && !cfg->extends_default ? NULL : s->default_net,
        .extends_default = cfg->path && cfg->extends_default,
        .keep_sign_secrets = cfg->e2b_on,
        .default_token = s->token_plain[0] ? s->token_plain : NULL,
    };
    for (const abx_registry *rg = s->reg; rg; rg = rg->parent) {
        const abx_lint *lints;
        size_t nl = abx_registry_lints(rg, &lints);
        for (size_t i = 0; i < nl; i++)
            abx_diag_add(diags, "warning", lints[i].code, abx_ext_line_of(s->ext, lints[i].id), "%s",
                         lints[i].message); /* the line of the config entry that declared the op */
    }
    abx_policy *p = abx_state_list_complete(&st, diags) ? abx_policy_compile(&in, diags) : NULL;
    abx_state_list_release(&st);
    if (p && cfg->tests) {
        size_t before = diags->errors;
        run_policy_tests(p, s->reg, cfg, diags);
        if (diags->errors > before) {
            abx_policy_unref(p);
            p = NULL;
        }
    }
    return p;
}

int abx_server_reload(abx_server *s, abx_diags *diags)
{
    if (!s->cfg.path) {
        abx_diag_add(diags, "error", "config.reload_failed", 0, "the embedded default has no file to reload");
        return -1;
    }
    abx_config fresh;
    if (abx_config_load(&fresh, s->cfg.path, diags) != 0)
        return -1;
    if (s->opts.listen) { /* the command line's --listen overrides the file, then and now */
        abx_free(fresh.listen_host);
        fresh.listen_host = NULL;
        if (!abx_parse_listen(s->opts.listen, &fresh.listen_host, &fresh.listen_port))
            fresh.listen_host = abx_strdup(s->cfg.listen_host);
    }
    abx_ext_reload_check(s->ext, &fresh, diags);
    abx_policy *p = abx_server_compile(s, &fresh, diags);
    if (p) {
        if (strcmp(fresh.listen_host, s->cfg.listen_host) != 0 || fresh.listen_port != s->cfg.listen_port ||
            fresh.connections != s->cfg.connections || fresh.request_max_bytes != s->cfg.request_max_bytes ||
            fresh.n_allowed_hosts != s->cfg.n_allowed_hosts || fresh.n_allowed_origins != s->cfg.n_allowed_origins ||
            (fresh.tls_cert == NULL) != (s->cfg.tls_cert == NULL))
            abx_diag_add(diags, "warning", "config.restart_required", 0,
                         "listener settings changed; they take effect at the next start (auth and policy are live)");
        pthread_mutex_lock(&s->snap_mu);
        abx_policy *old = s->snap;
        s->snap = p;
        pthread_mutex_unlock(&s->snap_mu);
        abx_policy_unref(old); /* requests holding it keep it alive until they finish */
        /* the statements mounting a worker's ops may grant other roots now: restart it */
        char werr[600];
        if (abx_ext_workers_start(s->ext, s->procs, s->reg, p, werr, sizeof werr) != 0)
            abx_diag_add(diags, "warning", "config.worker_restart", 0, "%s (the next call retries)", werr);
    }
    abx_config_release(&fresh);
    return p ? 0 : -1;
}

/* The pipeline's way back to the config file (system.reload, abx_ctx_reload). */
static int reload_installed(void *ud, abx_diags *diags) { return abx_server_reload(ud, diags); }

/* The built-in namespaces, then ext's (declarative commands): the server composes the
 * list, so the pipeline names neither. */
static int start_namespaces(abx_server *s, char *errbuf, size_t errlen)
{
    const abx_namespace *list[ABX_ARRAY_LEN(s->ns) + 2];
    size_t n = 0;
    for (const abx_namespace *const *ns = abx_builtin_namespaces; *ns && n < ABX_ARRAY_LEN(s->ns); ns++)
        list[n++] = *ns;
    list[n++] = &abx_ext_ns_custom;
    list[n] = NULL;
    return abx_ns_start(s, list, errbuf, errlen);
}

/* Start, step 1: the frozen registry's router, metrics and the auth limiter. */
static int start_tables(abx_server *s, char *errbuf, size_t errlen)
{
    abx_registry_freeze(s->reg);
    s->router = abx_router_build(s->reg);
    s->metrics = abx_metrics_new(abx_registry_count(s->reg));
    s->limiter = abx_auth_limiter_new(s->cfg.auth_failures);
    if (!s->router || !s->metrics || !s->limiter) {
        snprintf(errbuf, errlen, "out of memory");
        return -1;
    }
    return 0;
}

/* Principals' private HOMEs: $ABX_HOME/homes, kept across restarts. When the processes
 * run as another user who cannot pass through abx's home (mode 0700), they live in the
 * runtime folder instead (kept across calls, not restarts). NULL: the runtime folder. */
static char *private_homes_dir(unsigned run_uid)
{
    char *home = abx_home_dir();
    struct stat st;
    if (!home || (mkdir(home, 0700) != 0 && errno != EEXIST)) {
        abx_free(home);
        return NULL;
    }
    if (run_uid != geteuid() && (stat(home, &st) != 0 || !(st.st_mode & S_IXOTH))) {
        abx_free(home);
        return NULL;
    }
    char *dir = abx_asprintf("%s/homes", home);
    abx_free(home);
    return dir;
}

/* Start, step 2: the process manager (what every process shares, decided once), held
 * calls, idempotency keys and the namespaces' states. */
static int start_services(abx_server *s, char *errbuf, size_t errlen)
{
    static atomic_int servers; /* one runtime dir per server, even with several in one process */
    /* made fresh and ours (mkdtemp): a name another user (or an earlier abx with the same
     * pid, killed) left in /tmp is never reused, so nothing of someone else's can sit
     * above the processes' private TMPDIRs */
    snprintf(s->runtime_dir, sizeof s->runtime_dir, "/tmp/abx-%d-%d-XXXXXX", (int)getpid(),
             atomic_fetch_add(&servers, 1));
    if (!mkdtemp(s->runtime_dir) || chmod(s->runtime_dir, 0711) != 0) {
        snprintf(errbuf, errlen, "cannot create the runtime dir in /tmp: %s", strerror(errno));
        s->runtime_dir[0] = '\0';
        return -1;
    }
    abx_procs_opts po = {.runtime_dir = s->runtime_dir, .confine_set = s->cfg.confine_set,
                         .confine_required = s->cfg.confine_required, .ring_bytes = 1024 * 1024,
                         .retention_ms = 10 * 60 * 1000, .log = abx_log};
    if (s->cfg.run_as_set) {
        po.run_uid = s->cfg.run_uid;
        po.run_gid = s->cfg.run_gid;
    } else {
        struct stat wst;
        if (stat(s->workspace, &wst) == 0) {
            po.run_uid = wst.st_uid;
            po.run_gid = wst.st_gid;
        }
    }
    if (abx_run_as_check(s->cfg.run_as_set, &po.run_uid, &po.run_gid, errbuf, errlen) != 0)
        return -1;
    char *cadir = abx_server_egress_ca_dir(&s->cfg); /* made there the first time inject rules need it */
    po.egress_ca_dir = cadir;
    po.egress_upstream_ca = s->cfg.egress_upstream_ca;
    po.egress_proxy_port = s->cfg.egress_proxy_port;
    char *homes = private_homes_dir(po.run_uid);
    po.homes_dir = homes;
    po.homes_ttl_ms = s->cfg.homes_ttl_ms;
    s->procs = abx_procs_new(&po, errbuf, errlen);
    abx_free(homes);
    abx_free(cadir);
    s->reload.fn = reload_installed;
    s->reload.ud = s;
    s->approvals = abx_approvals_new();
    s->idem = abx_idem_new();
    if (!s->procs || !s->approvals || !s->idem) {
        snprintf(errbuf, errlen, "out of memory");
        return -1;
    }
    char *idir = abx_install_dir_of(&s->cfg);
    int irc = abx_install_setup(s, idir ? idir : "/nonexistent", errbuf, errlen);
    abx_free(idir);
    if (irc != 0)
        return -1;
    return start_namespaces(s, errbuf, errlen);
}

/* Start, step 3: the ledger and its chain head in abx's home. */
static int start_ledger(abx_server *s, char *errbuf, size_t errlen)
{
    if (s->cfg.ledger_off)
        return 0;
    s->ledger_path = abx_server_ledger_path(s->no_listen, &s->cfg, true);
    char *home = abx_home_dir();
    if (home)
        mkdir(home, 0700);
    char *head = home && s->ledger_path ? abx_ledger_head_path(home, s->ledger_path, true) : NULL;
    abx_free(home);
    abx_ledger_opts lo = {.path = s->ledger_path, .sync_full = s->cfg.ledger_sync_full,
                          .max_size = s->cfg.ledger_max_size, .retention_ms = s->cfg.ledger_retention_ms,
                          .head_path = head};
    s->ledger = head ? abx_ledger_open(&lo, errbuf, errlen) : NULL;
    if (!head)
        snprintf(errbuf, errlen, "out of memory");
    abx_free(head);
    return s->ledger ? 0 : -1;
}

/* Start, step 4: the first policy snapshot; its diagnostics go to the log. */
static int start_policy(abx_server *s, char *errbuf, size_t errlen)
{
    abx_diags d = {0};
    s->snap = abx_server_compile(s, &s->cfg, &d);
    for (size_t i = 0; i < d.n; i++)
        abx_log(d.items[i].level, NULL, "%s:%d: %s: %s", s->cfg.path ? s->cfg.path : "(default)", d.items[i].line,
                d.items[i].code, d.items[i].message);
    if (!s->snap) {
        size_t off = (size_t)snprintf(errbuf, errlen, "policy errors:");
        for (size_t i = 0; i < d.n && off < errlen; i++)
            if (strcmp(d.items[i].level, "error") == 0)
                off += (size_t)snprintf(errbuf + off, errlen - off, "\n  %s:%d: %s: %s",
                                        s->cfg.path ? s->cfg.path : "-", d.items[i].line, d.items[i].code,
                                        d.items[i].message);
    }
    abx_diags_release(&d);
    return s->snap ? 0 : -1;
}

static void print_banner(const abx_server *s, bool tls, bool created, const char *token)
{
    if (s->opts.quiet)
        return;
    printf("abx %s serving %s on http%s://%s:%d (workspace %s)\n", ABX_VERSION,
           s->cfg.path ? s->cfg.path : "the embedded default (preset workspace)", tls ? "s" : "",
           strchr(s->cfg.listen_host, ':') ? "[::1]" : s->cfg.listen_host, s->port, s->workspace);
    if (created)
        printf("token for principal 'local' (shown once, stored 0600 in %s):\n  %s\n", s->token_path, token);
    else if (s->token_path)
        printf("token for principal 'local': stored in %s\n", s->token_path);
    fflush(stdout);
}

int abx_server_start(abx_server *s, char *errbuf, size_t errlen)
{
    if (s->started) {
        snprintf(errbuf, errlen, "the server is already started");
        return -1;
    }
    char token[65] = "";
    bool created = false, tls = false;
    if (start_tables(s, errbuf, errlen) != 0 || start_services(s, errbuf, errlen) != 0 ||
        start_ledger(s, errbuf, errlen) != 0)
        return -1;
    if ((!s->cfg.path || s->cfg.extends_default) && abx_server_token(s, errbuf, errlen, &created, token) != 0)
        return -1;
    if (s->cfg.e2b_on && token[0]) /* E2B's pre-signed URLs are checked against the token itself */
        memcpy(s->token_plain, token, sizeof s->token_plain);
    if (start_policy(s, errbuf, errlen) != 0)
        return -1;
    /* Python op workers: confined to the roots of the statements that mount their ops */
    if (abx_ext_workers_start(s->ext, s->procs, s->reg, s->snap, errbuf, errlen) != 0)
        return -1;
    s->mcp = abx_mcp_new();
    s->overlay = abx_overlay_new();
    if (s->mcp)
        abx_mcp_set_overlay(s->mcp, s->overlay);
    s->tickets = abx_tickets_new();
    if (!s->mcp) {
        snprintf(errbuf, errlen, "out of memory");
        return -1;
    }
    /* no_listen: in-process only, every call arrives through abx_call_begin/internal */
    if (!s->no_listen && abx_listener_start(s, &tls, errbuf, errlen) != 0) {
        explicit_bzero(token, sizeof token);
        return -1;
    }
    s->started = true;
    s->started_ms = abx_now_ms();
    if (!s->no_listen) {
        print_banner(s, tls, created, token);
        abx_server_write_url(s);
    }
    explicit_bzero(token, sizeof token);
    return 0;
}

/* The bound on stopping (limits.shutdown_grace): a thread that, when the grace is over
 * and abx is still stopping (a connection thread stuck on a client that left, a stream
 * that does not end), kills every process group abx started and exits the process. */
static pthread_mutex_t grace_mu = PTHREAD_MUTEX_INITIALIZER;
static abx_procs *grace_procs; /* under grace_mu: NULL once the server freed its processes */

static void *grace_main(void *arg)
{
    int64_t ms = (int64_t)(intptr_t)arg;
    struct timespec ts = {.tv_sec = ms / 1000, .tv_nsec = (long)(ms % 1000) * 1000000};
    while (nanosleep(&ts, &ts) != 0 && errno == EINTR)
        ;
    pthread_mutex_lock(&grace_mu); /* kept: the process ends here */
    abx_log("error", NULL, "stopping took longer than limits.shutdown_grace (%lld ms): killing what is left",
            (long long)ms);
    abx_procs_kill_all(grace_procs, SIGKILL);
    _exit(0);
    return NULL;
}

void abx_server_shutdown(abx_server *s)
{
    if (!s)
        return;
    pthread_mutex_lock(&grace_mu);
    grace_procs = s->procs;
    pthread_mutex_unlock(&grace_mu);
    pthread_t t;
    pthread_attr_t at;
    pthread_attr_init(&at);
    pthread_attr_setdetachstate(&at, PTHREAD_CREATE_DETACHED);
    if (pthread_create(&t, &at, grace_main, (void *)(intptr_t)s->cfg.shutdown_grace_ms) != 0)
        abx_log("warn", NULL, "cannot start the shutdown grace timer; stopping without a bound");
    pthread_attr_destroy(&at);
    /* confined processes end first: their streams and long polls then end on their own */
    abx_procs_kill_all(s->procs, SIGTERM);
    abx_server_free(s);
}

void abx_server_stop(abx_server *s)
{
    if (s)
        abx_listener_stop(s);
    if (s && s->approvals) { /* approved calls still running finish first (they may start processes) */
        abx_approvals_free(s->approvals);
        s->approvals = NULL;
    }
    if (s && s->ext) /* Python op workers: their records (and private TMPDIRs) go with the manager */
        abx_ext_workers_stop(s->ext);
    if (s && s->procs) { /* every process group abx started ends: TERM, then KILL */
        pthread_mutex_lock(&grace_mu);
        if (grace_procs == s->procs)
            grace_procs = NULL;
        pthread_mutex_unlock(&grace_mu);
        abx_procs_free(s->procs, 2000);
        s->procs = NULL;
    }
    if (s) {
        abx_installer_free(s->installer);
        s->installer = NULL;
        abx_free(s->install_dir);
        s->install_dir = NULL;
    }
}

void abx_server_free(abx_server *s)
{
    if (!s)
        return;
    abx_server_stop(s);
    abx_policy_unref(s->snap);
    abx_router_free(s->router);
    abx_metrics_free(s->metrics);
    abx_auth_limiter_free(s->limiter);
    abx_ns_stop(s); /* the namespaces' states (command sessions) */
    abx_idem_free(s->idem);
    abx_mcp_free(s->mcp);
    abx_overlay_free(s->overlay);
    abx_tickets_free(s->tickets);
    abx_ledger_close(s->ledger); /* after the listeners: every call in flight has been recorded */
    abx_free(s->ledger_path);
    pthread_mutex_destroy(&s->flood_mu);
    if (s->runtime_dir[0]) {
        char *homes = abx_asprintf("%s/homes", s->runtime_dir); /* private HOMEs without abx's home */
        abx_rm_tree(homes);
        abx_free(homes);
        rmdir(s->runtime_dir);
    }
    json_decref(s->default_net);
    abx_config_release(&s->cfg);
    abx_registry_free(s->reg);
    abx_ext_free(s->ext); /* after the registry: it borrows the declarations and plugin code */
    abx_free(s->workspace);
    abx_free(s->token_path);
    explicit_bzero(s->token_plain, sizeof s->token_plain);
    pthread_mutex_destroy(&s->snap_mu);
    abx_free(s);
}

