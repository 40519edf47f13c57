/* install.c — the manifests shipped with abx and the lazy installer (install.h).
 *
 * Layout of a requirement under the install folder:
 *   <dir>/<name>/package.tgz          the tarball npm fetched, checked against the manifest
 *   <dir>/<name>/node_modules/...     what `npm install package.tgz` made of it
 *   <dir>/<name>/abx-install.json     written last: the install is complete
 * An install is made in <dir>/.<name>.staging and renamed into place once verified, so a
 * half-made install is never found. */
#include "sandbox/install.h"
#include "core/core.h"
#include "core/util.h"
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <openssl/evp.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>
#include "sandbox/ossl_lazy.h" /* last: OpenSSL, opened on first use */

/* Versions and integrity from `npm view <package> version dist.integrity` (2026-12-03). */
static const abx_install_manifest manifests[] = {
    {"codex-cli", "@openai/codex", "0.171.0",
     "sha512-1IOFzL2Xg86tLdw6kDo3GoKbkQENgQi7TI6rlEvN132R7ngSw7SNOIQoTcnKzSZZ8kf9N9GynCweSoaFbqk2Eg==",
     "node_modules/@openai/codex/bin/codex.js"},
    {"claude-code", "@anthropic-ai/claude-code", "2.1.332",
     "sha512-tvSh6bLvEbd97APD31AnojOrRC3AmcRj5R8sF8QIQitu3x2ucOb1kKmTkGDw41kjva+CGJfpkt+wYouk6yv56Q==",
     "node_modules/@anthropic-ai/claude-code/bin/claude.exe"},
};

#define MARKER "abx-install.json"
#define TARBALL "package.tgz"
#define INSTALL_TIMEOUT_MS (15 * 60 * 1000)

const abx_install_manifest *abx_install_manifest_find(const char *name)
{
    for (size_t i = 0; i < ABX_ARRAY_LEN(manifests); i++)
        if (strcmp(manifests[i].name, name) == 0)
            return &manifests[i];
    return NULL;
}

size_t abx_install_manifest_count(void) { return ABX_ARRAY_LEN(manifests); }
const abx_install_manifest *abx_install_manifest_at(size_t i)
{
    return i < ABX_ARRAY_LEN(manifests) ? &manifests[i] : NULL;
}

typedef struct slot {
    char name[64];
    bool running;
    uint64_t generation; /* bumped when an install ends */
    int result;
    char why[512];
} slot;

struct abx_installer {
    abx_procs *procs;
    char *dir;
    char *registry;
    char host[300];       /* the registry's host[:port], the installer's one allowed destination */
    pthread_mutex_t mu;
    pthread_cond_t cv;
    slot slots[8];
};

static bool registry_host(const char *url, char *out, size_t outlen)
{
    const char *p = strstr(url, "://");
    if (!p)
        return false;
    p += 3;
    size_t n = strcspn(p, "/?#");
    if (n == 0 || n >= outlen || memchr(p, '@', n))
        return false;
    memcpy(out, p, n);
    out[n] = '\0';
    return true;
}

abx_installer *abx_installer_new(abx_procs *procs, const char *dir, const char *registry, char *why, size_t whylen)
{
    abx_installer *in = abx_calloc(1, sizeof *in);
    if (!in) {
        snprintf(why, whylen, "out of memory");
        return NULL;
    }
    in->procs = procs;
    in->dir = abx_strdup(dir);
    in->registry = abx_strdup(registry ? registry : "https://registry.npmjs.org/");
    if (!registry_host(in->registry, in->host, sizeof in->host)) {
        snprintf(why, whylen, "install.registry '%s' is not an http(s) URL", in->registry);
        abx_installer_free(in);
        return NULL;
    }
    pthread_mutex_init(&in->mu, NULL);
    pthread_cond_init(&in->cv, NULL);
    return in;
}

void abx_installer_free(abx_installer *in)
{
    if (!in)
        return;
    if (in->procs) { /* initialised */
        pthread_mutex_destroy(&in->mu);
        pthread_cond_destroy(&in->cv);
    }
    abx_free(in->dir);
    abx_free(in->registry);
    abx_free(in);
}

bool abx_install_folder(const char *dir, const char *name, char *out, size_t outlen)
{
    int n = snprintf(out, outlen, "%s/%s", dir, name);
    return n > 0 && (size_t)n < outlen;
}

bool abx_install_file_integrity(const char *path, char *out, size_t outlen)
{
    if (abx_ossl_load(NULL, 0) != 0) /* the digest is OpenSSL's: no library, no check */
        return false;
    int fd = open(path, O_RDONLY | O_CLOEXEC);
    if (fd < 0)
        return false;
    EVP_MD_CTX *md = EVP_MD_CTX_new();
    bool ok = md && EVP_DigestInit_ex(md, EVP_sha512(), NULL) == 1;
    char buf[65536];
    ssize_t n;
    while (ok && (n = read(fd, buf, sizeof buf)) != 0) {
        if (n < 0) {
            if (errno == EINTR)
                continue;
            ok = false;
            break;
        }
        ok = EVP_DigestUpdate(md, buf, (size_t)n) == 1;
    }
    close(fd);
    unsigned char dg[64];
    unsigned int dl = 0;
    ok = ok && EVP_DigestFinal_ex(md, dg, &dl) == 1 && dl == 64;
    EVP_MD_CTX_free(md);
    if (!ok)
        return false;
    char *b = abx_base64_encode(dg, dl, NULL);
    if (!b)
        return false;
    int w = snprintf(out, outlen, "sha512-%s", b);
    abx_free(b);
    return w > 0 && (size_t)w < outlen;
}

/* Installed and complete: the marker is there and the tarball hashes to the manifest. */
static bool verified(const char *dir, const abx_install_manifest *m, char *why, size_t whylen)
{
    char f[PATH_MAX], got[128];
    snprintf(f, sizeof f, "%s/%s/%s", dir, m->name, MARKER);
    if (access(f, R_OK) != 0) {
        snprintf(why, whylen, "not installed");
        return false;
    }
    snprintf(f, sizeof f, "%s/%s/%s", dir, m->name, TARBALL);
    if (!abx_install_file_integrity(f, got, sizeof got)) {
        snprintf(why, whylen, "%s cannot be read", f);
        return false;
    }
    if (strcmp(got, m->integrity) != 0) {
        snprintf(why, whylen, "the tarball's hash %s is not the manifest's %s", got, m->integrity);
        return false;
    }
    snprintf(f, sizeof f, "%s/%s/%s", dir, m->name, m->bin);
    if (access(f, X_OK) != 0 && access(f, R_OK) != 0) {
        snprintf(why, whylen, "the program %s is missing", f);
        return false;
    }
    return true;
}

bool abx_install_program(const char *dir, const char *name, char *out, size_t outlen)
{
    const abx_install_manifest *m = abx_install_manifest_find(name);
    char marker[PATH_MAX];
    if (!m || !dir)
        return false;
    snprintf(marker, sizeof marker, "%s/%s/%s", dir, name, MARKER);
    int n = snprintf(out, outlen, "%s/%s/%s", dir, name, m->bin);
    return n > 0 && (size_t)n < outlen && access(marker, R_OK) == 0 && access(out, R_OK) == 0;
}

json_t *abx_install_check(const char *dir, bool *all_ok)
{
    json_t *out = json_array();
    *all_ok = true;
    for (size_t i = 0; i < ABX_ARRAY_LEN(manifests); i++) {
        const abx_install_manifest *m = &manifests[i];
        char why[600], marker[PATH_MAX], prog[PATH_MAX];
        snprintf(marker, sizeof marker, "%s/%s/%s", dir, m->name, MARKER);
        snprintf(prog, sizeof prog, "%s/%s/%s", dir, m->name, m->bin);
        bool installed = access(marker, R_OK) == 0;
        bool ok = installed && verified(dir, m, why, sizeof why);
        json_t *e = json_pack("{s:s, s:s, s:s, s:s, s:b, s:b, s:s}", "name", m->name, "package", m->package,
                              "version", m->version, "integrity", m->integrity, "installed", installed, "verified",
                              ok, "program", prog);
        if (installed && !ok) {
            json_object_set_new(e, "error", json_string(why));
            *all_ok = false;
        }
        json_array_append_new(out, e);
    }
    return out;
}

/* ---- running npm, confined ---- */

typedef struct runenv {
    char *v[24];
    size_t n;
} runenv;

static void renv(runenv *e, const char *k, const char *val)
{
    if (e->n + 1 < ABX_ARRAY_LEN(e->v))
        e->v[e->n++] = abx_asprintf("%s=%s", k, val);
    e->v[e->n] = NULL;
}

static void renv_free(runenv *e)
{
    for (size_t i = 0; i < e->n; i++)
        abx_free(e->v[i]);
}

/* The last line-ish part of the installer's stderr (its message), or its stdout. */
static void tail_message(abx_proc *p, char *why, size_t whylen, const char *what)
{
    char *data = NULL;
    bool trunc;
    size_t n = abx_proc_head(p, ABX_STDERR, &data, &trunc);
    if (n == 0) {
        abx_free(data);
        n = abx_proc_head(p, ABX_STDOUT, &data, &trunc);
    }
    const char *s = data ? data : "";
    while (n > 0 && (s[n - 1] == '\n' || s[n - 1] == ' '))
        n--;
    size_t keep = n > 400 ? 400 : n;
    snprintf(why, whylen, "%s: %.*s", what, (int)keep, s + n - keep);
    abx_free(data);
}

/* Run npm with args in the staging folder; 0 or -1 with why. */
static int run_npm(abx_installer *in, const char *staging, const abx_egress_resolver *res, char *const *argv,
                   const char *what, char *why, size_t whylen)
{
    char tmpdir[128], home[PATH_MAX], cache[PATH_MAX];
    if (abx_procs_make_tmpdir(in->procs, tmpdir, sizeof tmpdir, why, whylen) != 0)
        return -1;
    snprintf(home, sizeof home, "%s/.home", staging);
    snprintf(cache, sizeof cache, "%s/.home/.npm", staging);
    runenv env = {0};
    renv(&env, "PATH", "/usr/local/bin:/usr/bin:/bin");
    renv(&env, "LANG", "C.UTF-8");
    renv(&env, "HOME", home);
    renv(&env, "TMPDIR", tmpdir);
    renv(&env, "npm_config_cache", cache);
    renv(&env, "npm_config_registry", in->registry);
    renv(&env, "npm_config_update_notifier", "false");
    renv(&env, "npm_config_fund", "false");
    renv(&env, "npm_config_audit", "false");
    renv(&env, "npm_config_fetch_retries", "0");
    /* the system's CA store, not only npm's bundled list (a site's TLS-inspecting gateway) */
    renv(&env, "npm_config_cafile", "/etc/ssl/certs/ca-certificates.crt");
    renv(&env, "NODE_EXTRA_CA_CERTS", "/etc/ssl/certs/ca-certificates.crt");
    static const char *const proxy[] = {"HTTP_PROXY", "HTTPS_PROXY", "http_proxy", "https_proxy",
                                        "npm_config_proxy", "npm_config_https_proxy"};
    for (size_t i = 0; i < ABX_ARRAY_LEN(proxy); i++)
        renv(&env, proxy[i], "http://127.0.0.1:3128");
    renv(&env, "NO_PROXY", "");
    renv(&env, "no_proxy", "");
    abx_egress_allow allow = {0};
    char err[200];
    int rc = -1;
    abx_proc *p = NULL;
    if (abx_egress_allow_add(&allow, in->host, err, sizeof err) != 0) {
        snprintf(why, whylen, "the registry host %s: %s", in->host, err);
        goto out;
    }
    const char *rw[] = {staging};
    abx_confine conf = {.write_roots = rw, .n_write = 1, .egress_port = ABX_EGRESS_PORT, .set_ids = true,
                        .required = abx_procs_confine_required(in->procs)};
    abx_procs_run_ids(in->procs, &conf.uid, &conf.gid);
    int cwd = open(staging, O_PATH | O_DIRECTORY | O_CLOEXEC);
    abx_proc_spec spec = {
        .spawn = {.argv = argv, .envp = env.v, .cwd_fd = cwd, .cwd_path = staging, .confine = &conf,
                  .tmpdir = tmpdir, .home = home},
        .owner = "abx:install",
        .tag = what,
        .kill_after_ms = INSTALL_TIMEOUT_MS,
        .head_bytes = 64 * 1024,
        .egress_allow = &allow,
        .egress_resolve = res,
    };
    p = abx_proc_start(in->procs, &spec, why, whylen);
    if (cwd >= 0)
        close(cwd);
    if (!p)
        goto out;
    abx_proc_set_tmpdir(p, tmpdir);
    tmpdir[0] = '\0';
    abx_proc_wait(p, 0, NULL, NULL);
    json_t *st = abx_proc_json(p);
    long code = (long)json_integer_value(json_object_get(st, "exit_code"));
    bool done = strcmp(abx_proc_status(p), "completed") == 0 && json_is_integer(json_object_get(st, "exit_code"));
    json_decref(st);
    if (done && code == 0)
        rc = 0;
    else
        tail_message(p, why, whylen, what);
out:
    if (p)
        abx_proc_unref(p);
    if (tmpdir[0])
        abx_rm_tree(tmpdir);
    abx_egress_allow_free(&allow);
    renv_free(&env);
    return rc;
}

/* The one tarball npm pack left in the staging folder, renamed to package.tgz. */
static int take_tarball(const char *staging, char *why, size_t whylen)
{
    DIR *d = opendir(staging);
    if (!d) {
        snprintf(why, whylen, "%s: %s", staging, strerror(errno));
        return -1;
    }
    struct dirent *e;
    int rc = -1;
    while ((e = readdir(d))) {
        size_t l = strlen(e->d_name);
        if (l > 4 && strcmp(e->d_name + l - 4, ".tgz") == 0 && strcmp(e->d_name, TARBALL) != 0) {
            char from[PATH_MAX], to[PATH_MAX];
            snprintf(from, sizeof from, "%s/%s", staging, e->d_name);
            snprintf(to, sizeof to, "%s/%s", staging, TARBALL);
            rc = rename(from, to);
            break;
        }
    }
    closedir(d);
    if (rc != 0)
        snprintf(why, whylen, "npm pack left no tarball");
    return rc;
}

/* The lock npm wrote names the manifest's integrity for the package. */
static bool lock_pins(const char *staging, const abx_install_manifest *m, char *why, size_t whylen)
{
    char f[PATH_MAX], key[300];
    snprintf(f, sizeof f, "%s/package-lock.json", staging);
    snprintf(key, sizeof key, "node_modules/%s", m->package);
    json_t *lock = json_load_file(f, 0, NULL);
    const char *got = json_string_value(json_object_get(json_object_get(json_object_get(lock, "packages"), key),
                                                        "integrity"));
    bool ok = got && strcmp(got, m->integrity) == 0;
    if (!ok)
        snprintf(why, whylen, "npm installed %s with integrity %s, not the pinned %s", m->package, got ? got : "(none)",
                 m->integrity);
    json_decref(lock);
    return ok;
}

static int mkdir_owned(abx_installer *in, const char *path)
{
    if (mkdir(path, 0755) != 0 && errno != EEXIST)
        return -1;
    uid_t u;
    gid_t g;
    abx_procs_run_ids(in->procs, &u, &g);
    if (chown(path, u, g) != 0 && geteuid() == 0)
        return -1;
    return 0;
}

static int install_now(abx_installer *in, const abx_install_manifest *m, const abx_egress_resolver *res, char *why,
                       size_t whylen)
{
    char staging[PATH_MAX], final[PATH_MAX], home[PATH_MAX], spec[200], tgz[PATH_MAX], got[128];
    snprintf(staging, sizeof staging, "%s/.%s.staging", in->dir, m->name);
    snprintf(final, sizeof final, "%s/%s", in->dir, m->name);
    snprintf(home, sizeof home, "%s/.home", staging);
    snprintf(spec, sizeof spec, "%s@%s", m->package, m->version);
    snprintf(tgz, sizeof tgz, "%s/%s", staging, TARBALL);
    abx_rm_tree(staging);
    if (mkdir_owned(in, in->dir) != 0 || mkdir_owned(in, staging) != 0 || mkdir_owned(in, home) != 0) {
        snprintf(why, whylen, "cannot make %s: %s", staging, strerror(errno));
        return -1;
    }
    char *pack[] = {"/usr/bin/npm", "pack", spec, "--silent", NULL};
    if (run_npm(in, staging, res, pack, "npm pack", why, whylen) != 0 || take_tarball(staging, why, whylen) != 0)
        goto fail;
    if (!abx_install_file_integrity(tgz, got, sizeof got) || strcmp(got, m->integrity) != 0) {
        snprintf(why, whylen, "%s: the tarball's integrity %s is not the pinned %s", spec, got, m->integrity);
        goto fail;
    }
    /* by its registry spec (installing the tarball file skips its platform's optional
     * dependencies, where codex and Claude Code keep their binaries); npm checks what it
     * downloads against the registry's integrity, which the lock then records: it must be
     * the manifest's */
    char *inst[] = {"/usr/bin/npm", "install", "--prefix", staging, spec, NULL};
    if (run_npm(in, staging, res, inst, "npm install", why, whylen) != 0 || !lock_pins(staging, m, why, whylen))
        goto fail;
    char f[PATH_MAX];
    snprintf(f, sizeof f, "%s/%s", staging, m->bin);
    if (access(f, R_OK) != 0) {
        snprintf(why, whylen, "%s installed no %s", spec, m->bin);
        goto fail;
    }
    abx_rm_tree(home);
    char at[32];
    abx_iso8601(abx_wall_ms(), at);
    json_t *mk = json_pack("{s:s, s:s, s:s, s:s, s:s}", "name", m->name, "package", m->package, "version", m->version,
                           "integrity", m->integrity, "installed_at", at);
    snprintf(f, sizeof f, "%s/%s", staging, MARKER);
    int wr = json_dump_file(mk, f, JSON_COMPACT);
    json_decref(mk);
    abx_rm_tree(final);
    if (wr != 0 || rename(staging, final) != 0) {
        snprintf(why, whylen, "cannot put %s in place: %s", final, strerror(errno));
        goto fail;
    }
    return 0;
fail:
    abx_rm_tree(staging);
    return -1;
}

static slot *slot_of(abx_installer *in, const char *name)
{
    for (size_t i = 0; i < ABX_ARRAY_LEN(in->slots); i++)
        if (strcmp(in->slots[i].name, name) == 0)
            return &in->slots[i];
    for (size_t i = 0; i < ABX_ARRAY_LEN(in->slots); i++)
        if (!in->slots[i].name[0]) {
            snprintf(in->slots[i].name, sizeof in->slots[i].name, "%s", name);
            return &in->slots[i];
        }
    return NULL;
}

int abx_install_ensure(abx_installer *in, const char *name, const abx_egress_resolver *res, char *why,
                       size_t whylen)
{
    const abx_install_manifest *m = abx_install_manifest_find(name);
    if (!m) {
        snprintf(why, whylen, "no manifest for '%s'", name);
        return -1;
    }
    char prog[PATH_MAX];
    if (abx_install_program(in->dir, name, prog, sizeof prog))
        return 0;
    pthread_mutex_lock(&in->mu);
    slot *s = slot_of(in, name);
    if (!s) {
        pthread_mutex_unlock(&in->mu);
        snprintf(why, whylen, "too many requirements");
        return -1;
    }
    if (s->running) { /* another call is installing it: wait for that install's end */
        uint64_t gen = s->generation;
        while (s->generation == gen)
            pthread_cond_wait(&in->cv, &in->mu);
        int rc = s->result;
        snprintf(why, whylen, "%s", s->why);
        pthread_mutex_unlock(&in->mu);
        return rc < 0 ? -2 : 0; /* the install is the other call's (its ledger event) */
    }
    if (abx_install_program(in->dir, name, prog, sizeof prog)) { /* it ended while we came */
        pthread_mutex_unlock(&in->mu);
        return 0;
    }
    s->running = true;
    pthread_mutex_unlock(&in->mu);
    char msg[512] = "";
    int rc = install_now(in, m, res, msg, sizeof msg);
    pthread_mutex_lock(&in->mu);
    s->running = false;
    s->result = rc;
    snprintf(s->why, sizeof s->why, "%s", msg);
    s->generation++;
    pthread_cond_broadcast(&in->cv);
    pthread_mutex_unlock(&in->mu);
    snprintf(why, whylen, "%s", msg);
    return rc < 0 ? -1 : 1;
}
