/* server.c — the server value and its HTTP front door (libmicrohttpd, a thread per
 * connection, so handlers and streams may block). Owns step 0 (raw target, header
 * sanity, Host/Origin, busy slot, read timeout) and the transport half of step 1
 * (size cap from Content-Length before reading, Content-Type), then hands a request
 * value to abx_dispatch and renders the reply. Never decides policy itself. */
#include "pipeline/pipeline.h"
#include "builtin/builtin.h"
#include "ext/ext.h"
#include "core/yaml.h"
#include <arpa/inet.h>
#include <errno.h>
#include <fcntl.h>
#include <microhttpd.h>
#include <netinet/in.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/stat.h>
#include <unistd.h>

#define HEALTH_RESERVE 16 /* connections kept beyond the limit so core.health still answers */

/* per-request transport state: created by the URI log callback (it sees the raw
 * target first), freed by the completion callback */
typedef struct conn_req {
    abx_request *r;
    char *raw;          /* raw request target; owned by the request arena */
    size_t raw_len;
    bool started;
    bool responded;
    bool bytes_body;    /* route is a bytes-stream op: body goes to the handler raw */
    bool streaming;     /* the pipeline ran at the first call; the body feeds the sink */
    bool failed;        /* an error is decided mid-body: answer it at the final call */
    uint64_t discarded; /* body bytes dropped after the error (cut past a grace) */
    int64_t max_body;
} conn_req;

/* ---- embedded default: token file ---- */

char *abx_home_dir(void)
{
    const char *h = getenv("ABX_HOME");
    if (h && *h)
        return abx_strdup(h);
    const char *home = getenv("HOME");
    return abx_asprintf("%s/.abx", home && *home ? home : "/root");
}

static int ensure_default_token(abx_server *s, char *err, size_t errlen, bool *created, char token_out[65])
{
    char *home = abx_home_dir();
    if (!home)
        return -1;
    mkdir(home, 0700);
    s->token_path = abx_asprintf("%s/token", home);
    abx_free(home);
    *created = false;
    int fd = open(s->token_path, O_RDONLY | O_CLOEXEC | O_NOFOLLOW);
    if (fd >= 0) {
        struct stat st;
        char buf[129] = {0};
        ssize_t n = (fstat(fd, &st) == 0 && (st.st_mode & 077) == 0 && st.st_uid == geteuid())
                        ? read(fd, buf, sizeof buf - 1)
                        : -1;
        close(fd);
        while (n > 0 && (buf[n - 1] == '\n' || buf[n - 1] == ' '))
            buf[--n] = '\0';
        if (n == 64) {
            memcpy(token_out, buf, 65);
            abx_sha256_hex(buf, 64, s->token_sha256_hex);
            return 0;
        }
        if (n < 0) {
            snprintf(err, errlen, "%s must be owned by this user with mode 0600", s->token_path);
            return -1;
        }
    }
    unsigned char rnd[32];
    if (abx_random(rnd, sizeof rnd) != 0) {
        snprintf(err, errlen, "no randomness for the token");
        return -1;
    }
    abx_hex(rnd, sizeof rnd, token_out);
    char *tmp = abx_asprintf("%s.tmp.%d", s->token_path, (int)getpid());
    fd = tmp ? open(tmp, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC | O_NOFOLLOW, 0600) : -1;
    bool ok = fd >= 0 && write(fd, token_out, 64) == 64 && write(fd, "\n", 1) == 1 && fsync(fd) == 0;
    if (fd >= 0)
        close(fd);
    ok = ok && rename(tmp, s->token_path) == 0;
    if (!ok) {
        snprintf(err, errlen, "cannot write %s: %s", s->token_path, strerror(errno));
        if (tmp)
            unlink(tmp);
        abx_free(tmp);
        return -1;
    }
    abx_free(tmp);
    abx_sha256_hex(token_out, 64, s->token_sha256_hex);
    *created = true;
    return 0;
}

/* ---- server lifecycle ---- */

static void state_precheck(abx_server *s, abx_diags *d);

abx_server *abx__server_new(const abx_server_opts *opts, abx_diags *diags, char *errbuf, size_t errlen);

abx_server *abx_server_new(const abx_server_opts *opts, char *errbuf, size_t errlen)
{
    return abx__server_new(opts, NULL, errbuf, errlen);
}

/* diags (may be NULL) receives the config diagnostics as they are (check-config). */
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
    char cwd[4096];
    const char *ws = o.workspace ? o.workspace : s->cfg.workspace;
    if (!ws)
        ws = getcwd(cwd, sizeof cwd);
    if (!ws || abx_path_canon("/", ws, &s->workspace) != 0) {
        snprintf(errbuf, errlen, "cannot resolve the workspace");
        abx_server_free(s);
        return NULL;
    }
    snprintf(s->version_header, sizeof s->version_header, "abx/%s catalog=%d", ABX_VERSION, ABX_CATALOG_VERSION);
    /* ops from the config (custom:, load:) join the child registry before it freezes */
    abx_diags ed = {0};
    abx_diags *dd = diags ? diags : &ed;
    size_t before = dd->errors;
    state_precheck(s, dd); /* before plugins and Python modules run any code */
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

int abx_server_port(const abx_server *s) { return s->port; }

static enum MHD_Result on_request(void *cls, struct MHD_Connection *c, const char *url, const char *method,
                                  const char *version, const char *upload, size_t *upload_size, void **con_cls);
static void *on_uri(void *cls, const char *uri, struct MHD_Connection *c);
static void *on_uri_terminal(void *cls, const char *uri, struct MHD_Connection *c);

/* The request's header lookup (abx_ctx_header): the connection answers while it lives,
 * which is as long as the request does. */
static const char *connection_header(void *ud, const char *name)
{
    return MHD_lookup_connection_value(ud, MHD_HEADER_KIND, name);
}
static void on_completed(void *cls, struct MHD_Connection *c, void **con_cls, enum MHD_RequestTerminationCode t);
static void on_connection(void *cls, struct MHD_Connection *c, void **socket_context,
                          enum MHD_ConnectionNotificationCode code);

static void mhd_log(void *cls, const char *fmt, va_list ap) __attribute__((format(printf, 2, 0)));
static void mhd_log(void *cls, const char *fmt, va_list ap)
{
    char msg[512];
    vsnprintf(msg, sizeof msg, fmt, ap);
    size_t n = strlen(msg);
    while (n && (msg[n - 1] == '\n'))
        msg[--n] = '\0';
    abx_log("debug", NULL, "microhttpd: %s", msg);
}

static char *read_file_text(const char *path)
{
    FILE *f = fopen(path, "re");
    if (!f)
        return NULL;
    abx_buf b;
    abx_buf_init(&b, 1 << 20);
    char chunk[4096];
    size_t n;
    while ((n = fread(chunk, 1, sizeof chunk, f)) > 0)
        abx_buf_append(&b, chunk, n);
    fclose(f);
    if (b.failed) {
        abx_buf_release(&b);
        return NULL;
    }
    return abx_buf_detach(&b);
}

/* Policy tests in the config: each {principal, op, args, expect} must decide as expected. */
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

/* Where the ledger lives when ledger.path is not set: .abx/ledger.db beside the config
 * file; without a config, ledger.db in abx's home beside the token (the workspace is
 * the agent's: abx's own audit trail does not belong in it). abx mcp (no listener)
 * keeps a chain of its own by default, so it can run beside an abx serve on the same
 * config (one writer per ledger file). mkdirs: create the folder. */
static char *ledger_path_of(bool mcp, const abx_config *cfg, bool mkdirs)
{
    const char *ledger_name = mcp ? "ledger-mcp.db" : "ledger.db";
    if (cfg->ledger_path)
        return abx_strdup(cfg->ledger_path);
    char *dir;
    if (!cfg->path) {
        dir = abx_home_dir();
    } else {
        char *cd = abx_strdup(cfg->path);
        char *slash = cd ? strrchr(cd, '/') : NULL;
        const char *base = slash ? (*slash = '\0', cd) : ".";
        if (slash && !*cd)
            base = "/";
        dir = abx_asprintf("%s/.abx", base);
        abx_free(cd);
    }
    if (dir && mkdirs)
        mkdir(dir, 0700);
    char *path = dir ? abx_asprintf("%s/%s", dir, ledger_name) : NULL;
    abx_free(dir);
    return path;
}

/* Everything abx keeps for itself, with what it is: the layout rule (no statement may
 * write where any of it lies) and the protected areas (masked from processes, refused
 * to abx's own file ops) are both built from this one list. */
typedef struct state_list {
    const char *path[32];
    const char *what[32];
    char *owned[32];
    size_t n, n_owned;
} state_list;

char *abx_ledger_default_path(const abx_config *cfg, bool mcp) { return ledger_path_of(mcp, cfg, false); }

static void state_add(state_list *l, const char *path, const char *what)
{
    if (path && l->n < ABX_ARRAY_LEN(l->path)) {
        l->path[l->n] = path;
        l->what[l->n++] = what;
    }
}

static void state_add_owned(state_list *l, char *path, const char *what)
{
    if (!path || l->n_owned >= ABX_ARRAY_LEN(l->owned) || l->n >= ABX_ARRAY_LEN(l->path)) {
        abx_free(path);
        return;
    }
    l->owned[l->n_owned++] = path;
    state_add(l, path, what);
}

static void state_list_build(abx_server *s, const abx_config *cfg, state_list *l)
{
    memset(l, 0, sizeof *l);
    state_add(l, cfg->path, "the config file");
    state_add_owned(l, abx_home_dir(), "abx's home (ABX_HOME)");
    state_add(l, s->token_path, "the token file");
    if (!cfg->ledger_off) {
        static const char *const suffix[] = {"", "-wal", "-shm", "-journal", ".archive", ".lock"};
        char *ledger = s->ledger_path ? abx_strdup(s->ledger_path) : ledger_path_of(s->no_listen, cfg, false);
        for (size_t i = 0; ledger && i < ABX_ARRAY_LEN(suffix); i++)
            state_add_owned(l, abx_asprintf("%s%s", ledger, suffix[i]), "the ledger");
        abx_free(ledger);
    }
    state_add(l, cfg->tls_cert, "the TLS certificate");
    state_add(l, cfg->tls_key, "the TLS key");
    size_t i;
    json_t *it;
    bool plugins = false;
    json_array_foreach(cfg->load, i, it)
    {
        const char *name = json_string_value(it);
        if (!name || strncmp(name, "python:", 7) != 0) {
            plugins = true;
            continue;
        }
        /* Python imports the top-level package from the config folder */
        char top[128];
        snprintf(top, sizeof top, "%.*s", (int)strcspn(name + 7, "."), name + 7);
        if (cfg->config_dir && *top) {
            state_add_owned(l, abx_asprintf("%s/%s", cfg->config_dir, top), "a Python op module");
            state_add_owned(l, abx_asprintf("%s/%s.py", cfg->config_dir, top), "a Python op module");
        }
    }
    if (plugins)
        state_add(l, cfg->plugin_dir, "the plugin folder");
}

static void state_list_release(state_list *l)
{
    for (size_t i = 0; i < l->n_owned; i++)
        abx_free(l->owned[i]);
}

static void state_precheck(abx_server *s, abx_diags *d)
{
    state_list st;
    state_list_build(s, &s->cfg, &st);
    abx_policy_input in = {.reg = s->reg, .policy = s->cfg.policy, .lines = s->cfg.lines,
                           .config_path = s->cfg.path, .workspace = s->workspace, .runtime_dir = "/tmp/abx-0-0",
                           .protected_files = st.path, .protected_what = st.what, .n_protected = st.n};
    abx_policy_state_precheck(&in, d);
    state_list_release(&st);
}

abx_policy *abx_server_compile(abx_server *s, const abx_config *cfg, abx_diags *diags)
{
    state_list st;
    state_list_build(s, cfg, &st);
    abx_policy_input in = {
        .reg = s->reg,
        .auth = cfg->auth,
        .policy = cfg->policy,
        .lines = cfg->lines,
        .config_path = cfg->path,
        .workspace = s->workspace,
        .default_token_sha256_hex = cfg->path ? NULL : s->token_sha256_hex,
        .runtime_dir = s->runtime_dir[0] ? s->runtime_dir : "/tmp/abx-0-0",
        .protected_files = st.path,
        .protected_what = st.what,
        .n_protected = st.n,
        .allow_lint_errors = cfg->allow_lint_errors,
    };
    for (const abx_registry *rg = s->reg; rg; rg = rg->parent) {
        const abx_lint *lints;
        size_t nl = abx_registry_lints(rg, &lints);
        for (size_t i = 0; i < nl; i++)
            abx_diag_add(diags, "warning", lints[i].code, abx_ext_line_of(s->ext, lints[i].id), "%s",
                         lints[i].message); /* the line of the config entry that declared the op */
    }
    abx_policy *p = abx_policy_compile(&in, diags);
    state_list_release(&st);
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
        if (abx_ext_workers_start(s, p, werr, sizeof werr) != 0)
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

int abx_server_start(abx_server *s, char *errbuf, size_t errlen)
{
    if (s->started) {
        snprintf(errbuf, errlen, "the server is already started");
        return -1;
    }
    abx_registry_freeze(s->reg);
    s->router = abx_router_build(s->reg);
    s->metrics = abx_metrics_new(abx_registry_count(s->reg));
    s->limiter = abx_auth_limiter_new(s->cfg.auth_failures);
    if (!s->router || !s->metrics || !s->limiter) {
        snprintf(errbuf, errlen, "out of memory");
        return -1;
    }
    char token[65] = "";
    bool created = false;
    static atomic_int servers; /* one runtime dir per server, even with several in one process */
    snprintf(s->runtime_dir, sizeof s->runtime_dir, "/tmp/abx-%d-%d", (int)getpid(), atomic_fetch_add(&servers, 1));
    abx_rm_tree(s->runtime_dir); /* left by an earlier process with the same pid, if any */
    /* what every process shares, decided once: the process manager owns it */
    abx_procs_opts po = {.runtime_dir = s->runtime_dir, .confine_set = s->cfg.confine_set,
                         .confine_required = s->cfg.confine_required, .ring_bytes = 1024 * 1024,
                         .retention_ms = 10 * 60 * 1000};
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
    s->procs = abx_procs_new(&po, errbuf, errlen);
    s->reload.fn = reload_installed;
    s->reload.ud = s;
    s->approvals = abx_approvals_new();
    s->idem = abx_idem_new();
    if (!s->procs || !s->approvals || !s->idem) {
        snprintf(errbuf, errlen, "out of memory");
        return -1;
    }
    if (start_namespaces(s, errbuf, errlen) != 0)
        return -1;
    if (!s->cfg.ledger_off) {
        s->ledger_path = ledger_path_of(s->no_listen, &s->cfg, true);
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
        if (!s->ledger)
            return -1;
    }
    if (!s->cfg.path && ensure_default_token(s, errbuf, errlen, &created, token) != 0)
        return -1;
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
        abx_diags_release(&d);
        return -1;
    }
    abx_diags_release(&d);
    /* Python op workers: confined to the roots of the statements that mount their ops */
    if (abx_ext_workers_start(s, s->snap, errbuf, errlen) != 0)
        return -1;
    s->mcp = abx_mcp_new();
    if (!s->mcp) {
        snprintf(errbuf, errlen, "out of memory");
        return -1;
    }
    if (s->no_listen) { /* in-process only: every call arrives through abx_call_begin/internal */
        s->started = true;
        s->started_ms = abx_now_ms();
        return 0;
    }
    if (!abx_host_is_loopback(s->cfg.listen_host) && !s->cfg.tls_cert && !s->cfg.allow_plaintext) {
        snprintf(errbuf, errlen, "listen address %s is not loopback: configure tls: {cert, key} or allow_plaintext: true",
                 s->cfg.listen_host);
        return -1;
    }
    struct sockaddr_storage ss = {0};
    socklen_t sl;
    struct sockaddr_in *v4 = (struct sockaddr_in *)&ss;
    struct sockaddr_in6 *v6 = (struct sockaddr_in6 *)&ss;
    const char *h = strcmp(s->cfg.listen_host, "localhost") == 0 ? "127.0.0.1" : s->cfg.listen_host;
    unsigned flags = MHD_USE_THREAD_PER_CONNECTION | MHD_USE_INTERNAL_POLLING_THREAD | MHD_USE_ERROR_LOG |
                     MHD_ALLOW_UPGRADE;
    if (inet_pton(AF_INET, h, &v4->sin_addr) == 1) {
        v4->sin_family = AF_INET;
        v4->sin_port = htons((uint16_t)s->cfg.listen_port);
        sl = sizeof *v4;
    } else if (inet_pton(AF_INET6, h, &v6->sin6_addr) == 1) {
        v6->sin6_family = AF_INET6;
        v6->sin6_port = htons((uint16_t)s->cfg.listen_port);
        sl = sizeof *v6;
        flags |= MHD_USE_IPv6;
    } else {
        snprintf(errbuf, errlen, "listen host '%s' must be an IP address or localhost", s->cfg.listen_host);
        return -1;
    }
    (void)sl;
    char *cert = NULL, *key = NULL;
    if (s->cfg.tls_cert) {
        cert = read_file_text(s->cfg.tls_cert);
        key = read_file_text(s->cfg.tls_key);
        if (!cert || !key) {
            snprintf(errbuf, errlen, "cannot read tls cert/key");
            abx_free(cert);
            abx_free(key);
            return -1;
        }
        flags |= MHD_USE_TLS;
    }
    unsigned timeout_s = (unsigned)((s->cfg.read_timeout_ms + 999) / 1000);
    struct MHD_OptionItem tls_opts[] = {
        {cert ? MHD_OPTION_HTTPS_MEM_CERT : MHD_OPTION_END, 0, cert},
        {key ? MHD_OPTION_HTTPS_MEM_KEY : MHD_OPTION_END, 0, key},
        {MHD_OPTION_END, 0, NULL},
    };
    struct MHD_Daemon *d0 = MHD_start_daemon(
        flags, 0, NULL, NULL, on_request, s, MHD_OPTION_SOCK_ADDR, (struct sockaddr *)&ss,
        MHD_OPTION_CONNECTION_LIMIT, (unsigned)(s->cfg.connections + HEALTH_RESERVE), MHD_OPTION_CONNECTION_TIMEOUT,
        timeout_s, /* headers and one read of a body: larger reads stream uploads faster */
        MHD_OPTION_CONNECTION_MEMORY_LIMIT, (size_t)(128 * 1024), MHD_OPTION_URI_LOG_CALLBACK, on_uri, s, MHD_OPTION_NOTIFY_COMPLETED, on_completed, s,
        MHD_OPTION_NOTIFY_CONNECTION, on_connection, s, MHD_OPTION_THREAD_STACK_SIZE, (size_t)(512 * 1024),
        MHD_OPTION_EXTERNAL_LOGGER, mhd_log, s, MHD_OPTION_LISTENING_ADDRESS_REUSE, (unsigned)1,
        MHD_OPTION_ARRAY, tls_opts, MHD_OPTION_END);
    abx_free(cert);
    abx_free(key);
    if (!d0) {
        snprintf(errbuf, errlen, "cannot listen on %s:%d: %s", s->cfg.listen_host, s->cfg.listen_port,
                 strerror(errno ? errno : EADDRINUSE));
        return -1;
    }
    s->mhd = d0;
    const union MHD_DaemonInfo *info = MHD_get_daemon_info(d0, MHD_DAEMON_INFO_BIND_PORT);
    s->port = info ? info->port : s->cfg.listen_port;
    /* the terminal listener: same pipeline, WebSocket ops only, plaintext loopback; a busy
     * port is reported, not fatal (terminals stay reachable on the main listener) */
    if (s->cfg.terminal_port >= 0 && s->cfg.terminal_host) {
        struct sockaddr_storage ts = {0};
        struct sockaddr_in *t4 = (struct sockaddr_in *)&ts;
        struct sockaddr_in6 *t6 = (struct sockaddr_in6 *)&ts;
        const char *th = strcmp(s->cfg.terminal_host, "localhost") == 0 ? "127.0.0.1" : s->cfg.terminal_host;
        unsigned tflags = flags & ~(unsigned)(MHD_USE_IPv6 | MHD_USE_TLS);
        bool addr_ok = true;
        if (inet_pton(AF_INET, th, &t4->sin_addr) == 1) {
            t4->sin_family = AF_INET;
            t4->sin_port = htons((uint16_t)s->cfg.terminal_port);
        } else if (inet_pton(AF_INET6, th, &t6->sin6_addr) == 1) {
            t6->sin6_family = AF_INET6;
            t6->sin6_port = htons((uint16_t)s->cfg.terminal_port);
            tflags |= MHD_USE_IPv6;
        } else {
            addr_ok = false;
        }
        bool loop = abx_host_is_loopback(s->cfg.terminal_host);
        struct MHD_Daemon *d1 =
            !addr_ok || !loop ? NULL
                              : MHD_start_daemon(tflags, 0, NULL, NULL, on_request, s, MHD_OPTION_SOCK_ADDR,
                                                 (struct sockaddr *)&ts, MHD_OPTION_CONNECTION_LIMIT,
                                                 (unsigned)(s->cfg.connections + HEALTH_RESERVE),
                                                 MHD_OPTION_CONNECTION_TIMEOUT, timeout_s, MHD_OPTION_URI_LOG_CALLBACK,
                                                 on_uri_terminal, s, MHD_OPTION_NOTIFY_COMPLETED, on_completed, s,
                                                 MHD_OPTION_NOTIFY_CONNECTION, on_connection, s,
                                                 MHD_OPTION_THREAD_STACK_SIZE, (size_t)(512 * 1024),
                                                 MHD_OPTION_EXTERNAL_LOGGER, mhd_log, s, MHD_OPTION_END);
        if (d1) {
            s->mhd_terminal = d1;
            const union MHD_DaemonInfo *ti = MHD_get_daemon_info(d1, MHD_DAEMON_INFO_BIND_PORT);
            s->terminal_port = ti ? ti->port : s->cfg.terminal_port;
        } else {
            abx_log("warn", NULL,
                    "terminal listener %s:%d not started (%s); terminals stay reachable on the main listener",
                    s->cfg.terminal_host, s->cfg.terminal_port,
                    !loop ? "it must be a loopback address" : strerror(errno ? errno : EADDRINUSE));
        }
    }
    s->started = true;
    s->started_ms = abx_now_ms();
    if (!s->opts.quiet) {
        printf("abx %s serving %s on http%s://%s:%d (workspace %s)\n", ABX_VERSION,
               s->cfg.path ? s->cfg.path : "the embedded default (preset workspace)", cert ? "s" : "",
               strchr(s->cfg.listen_host, ':') ? "[::1]" : s->cfg.listen_host, s->port, s->workspace);
        if (created)
            printf("token for principal 'local' (shown once, stored 0600 in %s):\n  %s\n", s->token_path, token);
        else if (s->token_path)
            printf("token for principal 'local': stored in %s\n", s->token_path);
        fflush(stdout);
    }
    if (s->token_path) { /* tell `abx call` where this server listens */
        char *url_path = abx_asprintf("%.*s/url", (int)(strrchr(s->token_path, '/') - s->token_path), s->token_path);
        char *tmp = url_path ? abx_asprintf("%s.tmp.%d", url_path, (int)getpid()) : NULL;
        FILE *f = tmp ? fopen(tmp, "we") : NULL;
        if (f) { /* replaced whole (rename): a client never reads a half-written file */
            fprintf(f, "http://%s:%d\n", strchr(s->cfg.listen_host, ':') ? "[::1]" : s->cfg.listen_host, s->port);
            if (fclose(f) != 0 || rename(tmp, url_path) != 0)
                unlink(tmp);
        }
        abx_free(tmp);
        abx_free(url_path);
    }
    explicit_bzero(token, sizeof token);
    return 0;
}

void abx_server_stop(abx_server *s)
{
    if (s && s->mhd_terminal) {
        MHD_stop_daemon(s->mhd_terminal);
        s->mhd_terminal = NULL;
    }
    if (s && s->mhd) {
        MHD_stop_daemon(s->mhd);
        s->mhd = NULL;
    }
    if (s && s->approvals) { /* approved calls still running finish first (they may start processes) */
        abx_approvals_free(s->approvals);
        s->approvals = NULL;
    }
    if (s && s->ext) /* Python op workers: their records (and private TMPDIRs) go with the manager */
        abx_ext_workers_stop(s->ext);
    if (s && s->procs) { /* every process group abx started ends: TERM, then KILL */
        abx_procs_free(s->procs, 2000);
        s->procs = NULL;
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
    abx_ledger_close(s->ledger); /* after the listeners: every call in flight has been recorded */
    abx_free(s->ledger_path);
    pthread_mutex_destroy(&s->flood_mu);
    if (s->runtime_dir[0])
        rmdir(s->runtime_dir);
    abx_config_release(&s->cfg);
    abx_registry_free(s->reg);
    abx_ext_free(s->ext); /* after the registry: it borrows the declarations and plugin code */
    abx_free(s->workspace);
    abx_free(s->token_path);
    pthread_mutex_destroy(&s->snap_mu);
    abx_free(s);
}

/* ---- the HTTP front door ---- */

static void *on_uri_terminal(void *cls, const char *uri, struct MHD_Connection *c);

static void *on_uri(void *cls, const char *uri, struct MHD_Connection *c)
{
    abx_server *s = cls;
    abx_request *r = abx_request_new(s, ABX_DOOR_HTTP);
    if (!r)
        return NULL;
    conn_req *cr = abx_arena_alloc(r->arena, sizeof *cr);
    if (!cr) {
        abx_request_free(r);
        return NULL;
    }
    cr->r = r;
    cr->raw_len = strlen(uri);
    cr->raw = abx_arena_strndup(r->arena, uri, cr->raw_len);
    const union MHD_ConnectionInfo *ci = MHD_get_connection_info(c, MHD_CONNECTION_INFO_CLIENT_ADDRESS);
    char addr[64] = "-";
    if (ci && ci->client_addr) {
        if (ci->client_addr->sa_family == AF_INET)
            inet_ntop(AF_INET, &((const struct sockaddr_in *)ci->client_addr)->sin_addr, addr, sizeof addr);
        else if (ci->client_addr->sa_family == AF_INET6)
            inet_ntop(AF_INET6, &((const struct sockaddr_in6 *)ci->client_addr)->sin6_addr, addr, sizeof addr);
    }
    r->client = abx_arena_strdup(r->arena, addr);
    const union MHD_ConnectionInfo *fdi = MHD_get_connection_info(c, MHD_CONNECTION_INFO_CONNECTION_FD);
    r->conn_fd = fdi ? fdi->connect_fd : -1;
    r->header_fn = connection_header;
    r->header_ud = c;
    return cr;
}

static void *on_uri_terminal(void *cls, const char *uri, struct MHD_Connection *c)
{
    conn_req *cr = on_uri(cls, uri, c);
    if (cr)
        cr->r->terminal_listener = true;
    return cr;
}

static void on_completed(void *cls, struct MHD_Connection *c, void **con_cls, enum MHD_RequestTerminationCode t)
{
    conn_req *cr = *con_cls;
    if (cr)
        abx_request_free(cr->r);
    *con_cls = NULL;
}

static void on_connection(void *cls, struct MHD_Connection *c, void **socket_context,
                          enum MHD_ConnectionNotificationCode code)
{
    abx_server *s = cls;
    if (code == MHD_CONNECTION_NOTIFY_STARTED)
        atomic_fetch_add(&s->conns, 1);
    else
        atomic_fetch_sub(&s->conns, 1);
}

static void add_common_headers(abx_server *s, abx_request *r, struct MHD_Response *resp)
{
    const char *hk;
    json_t *hv;
    json_object_foreach(r->reply.headers, hk, hv) MHD_add_response_header(resp, hk, json_string_value(hv));
    MHD_add_response_header(resp, "X-ABX-Server", s->version_header);
    MHD_add_response_header(resp, "X-Request-Id", r->id);
    MHD_add_response_header(resp, "Cache-Control", "no-store");
    MHD_add_response_header(resp, "X-Content-Type-Options", "nosniff");
}

/* WebSocket replies: after the 101, the session runs on its own thread. */
typedef struct ws_ctx {
    const abx_ws_ops *ops;
    void *state;
    struct MHD_UpgradeResponseHandle *urh;
    int sock;
    char *extra;
    size_t extra_len;
} ws_ctx;

static void *ws_thread(void *arg)
{
    ws_ctx *w = arg;
    abx_ws_run(w->sock, w->extra, w->extra_len, w->ops, w->state);
    w->ops->free_fn(w->state);
    MHD_upgrade_action(w->urh, MHD_UPGRADE_ACTION_CLOSE);
    free(w->extra);
    free(w);
    return NULL;
}

static void on_upgrade(void *cls, struct MHD_Connection *c, void *con_cls, const char *extra_in, size_t extra_in_size,
                       MHD_socket sock, struct MHD_UpgradeResponseHandle *urh)
{
    ws_ctx *w = cls;
    w->urh = urh;
    w->sock = sock;
    if (extra_in_size) {
        w->extra = malloc(extra_in_size);
        if (w->extra) {
            memcpy(w->extra, extra_in, extra_in_size);
            w->extra_len = extra_in_size;
        }
    }
    pthread_t t;
    pthread_attr_t at;
    pthread_attr_init(&at);
    pthread_attr_setdetachstate(&at, PTHREAD_CREATE_DETACHED);
    pthread_attr_setstacksize(&at, 256 * 1024);
    if (pthread_create(&t, &at, ws_thread, w) != 0) {
        w->ops->free_fn(w->state);
        MHD_upgrade_action(urh, MHD_UPGRADE_ACTION_CLOSE);
        free(w->extra);
        free(w);
    }
    pthread_attr_destroy(&at);
}

/* Streamed replies: MHD pulls from the handler's reader on this connection's thread. */
typedef struct stream_ctx {
    abx_stream_read_fn read;
    void *state;
    void (*free_fn)(void *);
} stream_ctx;

static ssize_t stream_reader(void *cls, uint64_t pos, char *buf, size_t max)
{
    stream_ctx *sc = cls;
    long n = sc->read(sc->state, buf, max);
    if (n > 0)
        return (ssize_t)n;
    return n == 0 ? MHD_CONTENT_READER_END_OF_STREAM : MHD_CONTENT_READER_END_WITH_ERROR;
}

static void stream_done(void *cls)
{
    stream_ctx *sc = cls;
    if (sc->free_fn)
        sc->free_fn(sc->state); /* also when the client went away: the handler cancels */
    free(sc);
}

static enum MHD_Result send_reply(struct MHD_Connection *c, conn_req *cr)
{
    abx_request *r = cr->r;
    abx_server *s = r->server;
    struct MHD_Response *resp;
    int status = abx_reply_http_status(&r->reply);
    cr->responded = true;
    if (!r->reply.err && r->reply.ws_ops) {
        char accept[32];
        ws_ctx *w = calloc(1, sizeof *w);
        if (!w || !abx_ws_accept_key(r->ws_key, accept)) {
            free(w);
            return MHD_NO;
        }
        w->ops = r->reply.ws_ops;
        w->state = r->reply.ws_state;
        resp = MHD_create_response_for_upgrade(on_upgrade, w);
        if (!resp) {
            free(w);
            return MHD_NO;
        }
        r->reply.ws_ops = NULL; /* the session owns the state now */
        r->reply.ws_state = NULL;
        MHD_add_response_header(resp, MHD_HTTP_HEADER_UPGRADE, "websocket");
        MHD_add_response_header(resp, "Sec-WebSocket-Accept", accept);
        add_common_headers(s, r, resp);
        enum MHD_Result rc = MHD_queue_response(c, MHD_HTTP_SWITCHING_PROTOCOLS, resp);
        MHD_destroy_response(resp);
        return rc;
    }
    if (!r->reply.err && r->reply.stream_read) {
        stream_ctx *sc = malloc(sizeof *sc);
        resp = sc ? MHD_create_response_from_callback(MHD_SIZE_UNKNOWN, 16 * 1024, stream_reader, sc, stream_done)
                  : NULL;
        if (resp) {
            sc->read = r->reply.stream_read;
            sc->state = r->reply.stream_state;
            sc->free_fn = r->reply.stream_free;
            r->reply.stream_read = NULL; /* the response owns the stream now */
            r->reply.stream_state = NULL;
            r->reply.stream_free = NULL;
            MHD_add_response_header(resp, "Content-Type", r->reply.content_type ? r->reply.content_type
                                                                                 : "text/event-stream");
            MHD_add_response_header(resp, "X-Accel-Buffering", "no");
            /* a stream outlives the read timeout; keepalives flow at least every 2 s */
            MHD_set_connection_option(c, MHD_CONNECTION_OPTION_TIMEOUT, (unsigned)60);
        } else {
            free(sc);
        }
    } else if (!r->reply.err && r->reply.raw) {
        resp = MHD_create_response_from_buffer(r->reply.raw_len, r->reply.raw, MHD_RESPMEM_MUST_COPY);
        if (resp)
            MHD_add_response_header(resp, "Content-Type",
                                    r->reply.content_type ? r->reply.content_type : "application/octet-stream");
    } else if (!r->reply.err && r->reply.fd >= 0) {
        resp = MHD_create_response_from_fd_at_offset64(r->reply.length, r->reply.fd, r->reply.offset);
        if (resp) {
            r->reply.fd = -1; /* MHD owns and closes it */
            MHD_add_response_header(resp, "Content-Type",
                                    r->reply.content_type ? r->reply.content_type : "application/octet-stream");
        }
    } else {
        size_t len;
        char *body = abx_reply_render(&r->reply, &len);
        resp = body ? MHD_create_response_from_buffer(len, body, MHD_RESPMEM_MUST_FREE) : NULL;
        if (!resp)
            free(body);
        else if (len) /* a protocol reply may have no body at all (MCP: 202, 204) */
            MHD_add_response_header(resp, "Content-Type", "application/json");
    }
    if (!resp)
        return MHD_NO;
    add_common_headers(s, r, resp);
    if (r->reply.allow[0])
        MHD_add_response_header(resp, "Allow", r->reply.allow);
    if (r->reply.retry_after > 0) {
        char ra[16];
        snprintf(ra, sizeof ra, "%d", r->reply.retry_after);
        MHD_add_response_header(resp, "Retry-After", ra);
    }
    if (r->reply.err && status >= 400 && !cr->started)
        MHD_add_response_header(resp, MHD_HTTP_HEADER_CONNECTION, "close");
    enum MHD_Result rc = MHD_queue_response(c, (unsigned)status, resp);
    MHD_destroy_response(resp);
    return rc;
}

/* A transport-level rejection (steps 0 and 1): audited like any call, then answered. */
static enum MHD_Result reject(struct MHD_Connection *c, conn_req *cr, abx_err e, const char *msg)
{
    abx_request *r = cr->r;
    abx_fail(r, e, "%s", msg);
    abx_dispatch(r); /* with an error set, dispatch only audits */
    return send_reply(c, cr);
}

typedef struct hdr_scan {
    abx_headers h;
    bool bad;
} hdr_scan;

static enum MHD_Result scan_header(void *cls, enum MHD_ValueKind kind, const char *key, size_t klen,
                                   const char *value, size_t vlen)
{
    hdr_scan *hs = cls;
    if (!abx_headers_add(&hs->h, key, klen, value, vlen)) {
        hs->bad = true;
        return MHD_NO;
    }
    return MHD_YES;
}

/* The size of the header section as it came on the wire (request line, each header line,
 * the blank line), rebuilt from what libmicrohttpd parsed: it keeps the whole block in the
 * connection's memory pool, whose 128 KiB bound is far above the 16 KiB we promise. */
typedef struct hdr_size {
    size_t bytes;
    size_t count;
} hdr_size;

static enum MHD_Result count_header(void *cls, enum MHD_ValueKind kind, const char *key, size_t klen,
                                    const char *value, size_t vlen)
{
    (void)kind;
    (void)key;
    (void)value;
    hdr_size *hz = cls;
    hz->bytes += klen + 2 + vlen + 2; /* "Key: value\r\n" */
    hz->count++;
    return MHD_YES;
}

static bool headers_within_limits(struct MHD_Connection *c, const abx_config *cfg, const char *method,
                                  size_t target_len, const char *version)
{
    hdr_size hz = {strlen(method) + 1 + target_len + 1 + strlen(version) + 2 + 2, 0};
    MHD_get_connection_values_n(c, MHD_HEADER_KIND, count_header, &hz);
    return hz.bytes <= (size_t)cfg->header_bytes && hz.count <= (size_t)cfg->header_count;
}

static bool host_allowed(abx_server *s, const char *host)
{
    if (!host)
        return true; /* HTTP/1.0 without Host: no browser sends that, nothing to rebind */
    char h[256];
    snprintf(h, sizeof h, "%s", host);
    for (size_t i = 0; i < s->cfg.n_allowed_hosts; i++)
        if (strcasecmp(s->cfg.allowed_hosts[i], h) == 0)
            return true;
    /* strip the port */
    char *colon = h[0] == '[' ? strstr(h, "]:") : strrchr(h, ':');
    if (colon) {
        if (h[0] == '[')
            colon++;
        *colon = '\0';
    }
    if (strcasecmp(h, "localhost") == 0 || strcmp(h, "[::1]") == 0)
        return true;
    struct in_addr a;
    if (inet_pton(AF_INET, h, &a) == 1 && (ntohl(a.s_addr) >> 24) == 127)
        return true;
    for (size_t i = 0; i < s->cfg.n_allowed_hosts; i++)
        if (strcasecmp(s->cfg.allowed_hosts[i], h) == 0)
            return true;
    return false;
}

static bool origin_allowed(abx_server *s, const char *origin)
{
    for (size_t i = 0; i < s->cfg.n_allowed_origins; i++)
        if (strcmp(s->cfg.allowed_origins[i], origin) == 0)
            return true;
    return false;
}

static bool is_json_type(const char *ct)
{
    if (!ct)
        return false;
    size_t n = strlen("application/json");
    return strncasecmp(ct, "application/json", n) == 0 && (ct[n] == '\0' || ct[n] == ';' || ct[n] == ' ');
}

/* First call for a request: step 0 and the transport half of step 1. */
static enum MHD_Result first_call(struct MHD_Connection *c, conn_req *cr, const char *method,
                                  const char *version)
{
    abx_request *r = cr->r;
    abx_server *s = r->server;
    r->method = abx_arena_strdup(r->arena, method);
    /* step 0a: bounded headers, before anything reads them (and before authentication) */
    if (!headers_within_limits(c, &s->cfg, method, cr->raw_len, version))
        return reject(c, cr, ABX_E_REQUEST_HEADERS_TOO_LARGE,
                      "the request line and headers exceed limits.header_bytes or limits.headers");
    /* step 0b: the raw target */
    if (!abx_target_ok(cr->raw, cr->raw_len))
        return reject(c, cr, ABX_E_REQUEST_BAD_TARGET, "the request target is malformed");
    const char *q = memchr(cr->raw, '?', cr->raw_len);
    r->path = cr->raw;
    r->path_len = q ? (size_t)(q - cr->raw) : cr->raw_len;
    if (q) {
        r->query = q + 1;
        r->query_len = cr->raw_len - r->path_len - 1;
    }
    /* header sanity: the desync cases libmicrohttpd lets through */
    hdr_scan hs = {0};
    MHD_get_connection_values_n(c, MHD_HEADER_KIND, scan_header, &hs);
    int64_t clen = -1;
    if (hs.bad || !abx_headers_check(&hs.h, &clen))
        return reject(c, cr, ABX_E_REQUEST_BAD_HEADER, hs.h.why);
    abx_headers *h = &hs.h;
    r->content_type = h->content_type;
    r->bearer = h->bearer;
    r->auth_bad_scheme = h->auth_bad_scheme;
    r->x_token = h->x_token;
    r->idem_key = h->idem_key;
    r->prefer_wait = h->prefer_wait;
    r->ws_key = h->ws_key;
    r->ws_upgrade = h->ws_upgrade;
    r->last_event_id = h->last_event_id;
    /* step 0c: Host and Origin */
    if (!host_allowed(s, h->host))
        return reject(c, cr, ABX_E_REQUEST_HOST_DENIED, "the Host header is not allowed");
    if (h->origin && !origin_allowed(s, h->origin))
        return reject(c, cr, ABX_E_REQUEST_ORIGIN_DENIED, "the Origin header is not allowed");
    /* step 2 early (pure trie walk): the busy slot and the body rules depend on the op */
    abx_route(r);
    const abx_op *op = r->route == ABX_ROUTE_FOUND ? r->match.op : NULL;
    bool health = op && strcmp(op->id, "core.health") == 0;
    /* the terminal listener serves WebSocket ops only; anything else is the one 404 */
    if (r->terminal_listener && (!op || op->def->stream != ABX_STREAM_WS)) {
        r->route = ABX_ROUTE_NONE;
        r->door = ABX_DOOR_HTTP;
        r->op_name = NULL;
        r->commands_list = false;
        memset(&r->match, 0, sizeof r->match);
        op = NULL;
    }
    /* step 0a: bounded connections, with a reserved slot for health */
    if (atomic_load(&s->conns) > s->cfg.connections && !health)
        return reject(c, cr, ABX_E_REQUEST_BUSY, "too many connections; try again");
    cr->bytes_body = op && op->def->raw_body && r->door == ABX_DOOR_HTTP;
    cr->max_body = cr->bytes_body ? s->cfg.upload_max_bytes : s->cfg.request_max_bytes;
    /* step 1: size cap before reading; JSON bodies must say so */
    bool has_body = clen > 0 || h->te != NULL;
    if (clen > cr->max_body) {
        char msg[120];
        snprintf(msg, sizeof msg, "the body (%lld bytes) is larger than the limit of %lld bytes", (long long)clen,
                 (long long)cr->max_body);
        return reject(c, cr, ABX_E_LIMIT_REQUEST_TOO_LARGE, msg);
    }
    if (has_body && !cr->bytes_body && !is_json_type(r->content_type))
        return reject(c, cr, ABX_E_REQUEST_BAD_CONTENT_TYPE, "send the body as Content-Type: application/json");
    r->has_body = has_body;
    abx_buf_init(&r->body, (size_t)cr->max_body);
    if (cr->bytes_body && has_body) {
        /* streamed body: run the pipeline now (arguments come from the query); the
         * handler registers a sink and the body flows to it chunk by chunk */
        abx_dispatch_begin(r);
        cr->streaming = true;
        if (!abx_body_wanted(r)) { /* refused (or done) before any byte was read */
            abx_body_end(r);
            abx_audit(r);
            return send_reply(c, cr);
        }
    }
    return MHD_YES;
}

static enum MHD_Result on_request(void *cls, struct MHD_Connection *c, const char *url, const char *method,
                                  const char *version, const char *upload, size_t *upload_size, void **con_cls)
{
    conn_req *cr = *con_cls;
    if (!cr)
        return MHD_NO; /* out of memory in the URI callback: drop the connection */
    if (cr->responded) {
        *upload_size = 0; /* a rejection was queued; discard what follows */
        return MHD_YES;
    }
    /* libmicrohttpd cannot queue a reply while it hands us body data: after an error
     * decided mid-body, the rest is dropped and the reply goes out at the final call.
     * Past a grace of 1 MiB (or the cap) the connection is cut instead. */
    if (cr->failed) {
        cr->discarded += *upload_size;
        *upload_size = 0;
        uint64_t grace = cr->max_body > (1 << 20) ? (uint64_t)cr->max_body : (1u << 20);
        if (upload && cr->discarded > grace)
            return MHD_NO;
        if (upload)
            return MHD_YES;
        if (cr->streaming)
            abx_body_end(cr->r);
        abx_audit(cr->r);
        return send_reply(c, cr);
    }
    if (!cr->started) {
        enum MHD_Result rc = first_call(c, cr, method, version);
        cr->started = true;
        return rc;
    }
    if (*upload_size && cr->streaming) {
        size_t n = *upload_size;
        *upload_size = 0;
        if ((int64_t)(cr->r->sink.received + n) > cr->max_body) {
            char msg[96];
            snprintf(msg, sizeof msg, "the body is larger than the limit of %lld bytes", (long long)cr->max_body);
            abx_fail(cr->r, ABX_E_LIMIT_REQUEST_TOO_LARGE, "%s", msg);
        } else {
            abx_body_feed(cr->r, upload, n);
        }
        if (cr->r->reply.err) /* answered at the final call; the rest of the body is dropped */
            cr->failed = true;
        return MHD_YES;
    }
    if (*upload_size) {
        size_t n = *upload_size;
        if (!abx_buf_append(&cr->r->body, upload, n)) {
            *upload_size = 0;
            char msg[96];
            snprintf(msg, sizeof msg, "the body is larger than the limit of %lld bytes", (long long)cr->max_body);
            abx_fail(cr->r, cr->r->body.len + n > (size_t)cr->max_body ? ABX_E_LIMIT_REQUEST_TOO_LARGE
                                                                        : ABX_E_SERVER_UNAVAILABLE,
                     "%s", msg);
            cr->failed = true;
            abx_buf_release(&cr->r->body);
            return MHD_YES;
        }
        *upload_size = 0;
        return MHD_YES;
    }
    if (cr->streaming) {
        abx_body_end(cr->r);
        abx_audit(cr->r);
        return send_reply(c, cr);
    }
    abx_dispatch(cr->r);
    return send_reply(c, cr);
}
