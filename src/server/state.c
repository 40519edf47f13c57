/* state.c — what abx keeps for itself: its home folder ($ABX_HOME), the embedded
 * default's token, where the ledger lives by default, the url file `abx call` reads,
 * and the one list of all of it that the state-layout rule and the protected areas
 * are built from (docs/security.md, "abx's own state"). */
#include "server/server.h"
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

char *abx_home_dir(void)
{
    const char *h = getenv("ABX_HOME");
    if (h && *h)
        return abx_strdup(h);
    const char *home = getenv("HOME");
    return abx_asprintf("%s/.abx", home && *home ? home : "/root");
}

int abx_server_token(abx_server *s, char *err, size_t errlen, bool *created, char token_out[65])
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


/* Where the ledger lives when ledger.path is not set: .abx/ledger.db beside the config
 * file; without a config, ledger.db in abx's home beside the token (the workspace is
 * the agent's: abx's own audit trail does not belong in it). abx mcp (no listener)
 * keeps a chain of its own by default, so it can run beside an abx serve on the same
 * config (one writer per ledger file). mkdirs: create the folder. */
char *abx_server_ledger_path(bool mcp, const abx_config *cfg, bool mkdirs)
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

/* Where the egress CA lives (sandbox/egress_tls.h: egress-ca.key, egress-ca.pem and the
 * bundle): the ledger's folder (.abx beside the config; ABX_HOME for the embedded
 * default), a protected area. */
char *abx_server_egress_ca_dir(const abx_config *cfg)
{
    char *ledger = abx_server_ledger_path(false, cfg, false);
    char *slash = ledger ? strrchr(ledger, '/') : NULL;
    if (!slash) {
        abx_free(ledger);
        return abx_strdup(".");
    }
    *slash = '\0';
    if (!*ledger) {
        abx_free(ledger);
        return abx_strdup("/");
    }
    return ledger;
}

char *abx_ledger_default_path(const abx_config *cfg, bool mcp) { return abx_server_ledger_path(mcp, cfg, false); }

static void state_add(abx_state_list *l, const char *path, const char *what)
{
    if (!path)
        return;
    if (l->n == l->cap) {
        size_t cap = l->cap ? 2 * l->cap : 32;
        const char **p = abx_realloc(l->path, cap * sizeof *p);
        if (p)
            l->path = p;
        const char **w = p ? abx_realloc(l->what, cap * sizeof *w) : NULL;
        if (w)
            l->what = w;
        char **o = w ? abx_realloc(l->owned, cap * sizeof *o) : NULL;
        if (!o) {
            l->failed = true;
            return;
        }
        l->owned = o;
        l->cap = cap;
    }
    l->path[l->n] = path;
    l->what[l->n++] = what;
}

/* path: allocated for the list (NULL = out of memory, which fails the list) */
static void state_add_owned(abx_state_list *l, char *path, const char *what)
{
    size_t before = l->n;
    if (path)
        state_add(l, path, what);
    if (l->n == before) {
        abx_free(path);
        l->failed = true;
        return;
    }
    l->owned[l->n_owned++] = path; /* n_owned <= n <= cap */
}

/* Each `secrets:` entry read from a file: the agent must neither read nor replace it. */
static void state_add_secret_files(abx_state_list *l, const abx_config *cfg)
{
    const char *name;
    json_t *v;
    json_object_foreach(json_object_get(cfg->root, "secrets"), name, v)
    {
        const char *file = json_string_value(json_object_get(v, "file"));
        if (file)
            state_add(l, file, "a secret's file");
    }
}

void abx_state_list_build(abx_server *s, const abx_config *cfg, abx_state_list *l)
{
    memset(l, 0, sizeof *l);
    state_add(l, cfg->path, "the config file");
    state_add_owned(l, abx_home_dir(), "abx's home (ABX_HOME)");
    state_add(l, s->token_path, "the token file");
    if (!cfg->ledger_off) {
        static const char *const suffix[] = {"", "-wal", "-shm", "-journal", ".archive", ".lock"};
        char *ledger = s->ledger_path ? abx_strdup(s->ledger_path) : abx_server_ledger_path(s->no_listen, cfg, false);
        for (size_t i = 0; ledger && i < ABX_ARRAY_LEN(suffix); i++)
            state_add_owned(l, abx_asprintf("%s%s", ledger, suffix[i]), "the ledger");
        l->failed |= !ledger;
        abx_free(ledger);
    }
    char *cadir = abx_server_egress_ca_dir(cfg);
    state_add_owned(l, cadir ? abx_asprintf("%s/egress-ca.key", cadir) : NULL, "the egress CA key");
    abx_free(cadir);
    state_add(l, cfg->tls_cert, "the TLS certificate");
    state_add(l, cfg->tls_key, "the TLS key");
    state_add(l, cfg->sandboxd_token_file, "sandboxd's token_file");
    state_add(l, cfg->egress_upstream_ca, "egress.upstream_ca");
    state_add(l, cfg->install_dir, "the install folder (install.dir)");
    state_add_secret_files(l, cfg);
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

void abx_state_list_release(abx_state_list *l)
{
    for (size_t i = 0; i < l->n_owned; i++)
        abx_free(l->owned[i]);
    abx_free(l->owned);
    abx_free(l->path);
    abx_free(l->what);
    memset(l, 0, sizeof *l);
}

bool abx_state_list_complete(const abx_state_list *l, abx_diags *d)
{
    if (!l->failed)
        return true;
    abx_diag_add(d, "error", "config.invalid", 0, "out of memory while listing abx's own state");
    return false;
}

void abx_server_state_precheck(abx_server *s, abx_diags *d)
{
    abx_state_list st;
    abx_state_list_build(s, &s->cfg, &st);
    abx_policy_input in = {.reg = s->reg, .policy = s->cfg.policy, .lines = s->cfg.lines,
                           .extends_default = s->cfg.path && s->cfg.extends_default,
                           .config_path = s->cfg.path, .workspace = s->workspace, .runtime_dir = "/tmp/abx-0-0",
                           .protected_files = st.path, .protected_what = st.what, .n_protected = st.n};
    if (abx_state_list_complete(&st, d))
        abx_policy_state_precheck(&in, d);
    abx_state_list_release(&st);
}

void abx_server_write_url(const abx_server *s)
{
    if (!s->token_path)
        return;
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

/* Where lazily installed requirements live: install.dir, else install/ in abx's home. */
char *abx_install_dir_of(const abx_config *cfg)
{
    if (cfg->install_dir)
        return abx_strdup(cfg->install_dir);
    char *home = abx_home_dir();
    char *dir = home ? abx_asprintf("%s/install", home) : NULL;
    abx_free(home);
    return dir;
}
