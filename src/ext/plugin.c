/* plugin.c — `load: ["name"]`: a shared object <plugin_dir>/name.so that declares ops
 * through the public C API. Only names the config lists are loaded, never anything
 * merely present in the folder. The file and its folder must not be world-writable
 * and must belong to root or to the user abx runs as; the file is opened once
 * (O_NOFOLLOW), checked on that descriptor and loaded through it, so what was checked
 * is what runs. A plugin exports:
 *   int abx_plugin_register(abx_registry *reg, char *err, size_t errlen);   (required)
 *   const char *const abx_plugin_requires[];   (optional, NULL-terminated:
 *       "program:NAME" — an executable in /usr/local/bin:/usr/bin:/bin,
 *       "file:/ABS/PATH" — a file that must exist,
 *       "abx:VERSION" — the lowest abx version the plugin works with) */
#include "ext/ext.h"
#include "core/yaml.h"
#include <dlfcn.h>
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

typedef int (*register_fn)(abx_registry *reg, char *err, size_t errlen);

static bool owner_ok(const struct stat *st) { return st->st_uid == 0 || st->st_uid == geteuid(); }

/* "0.1.2" ≤ ABX_VERSION, compared number by number */
static bool version_ok(const char *want)
{
    const char *have = ABX_VERSION;
    while (*want || *have) {
        char *e1, *e2;
        long a = strtol(want, &e1, 10), b = strtol(have, &e2, 10);
        if (e1 == want)
            return false; /* malformed: refuse */
        if (a != b)
            return a < b;
        want = *e1 == '.' ? e1 + 1 : e1;
        have = *e2 == '.' ? e2 + 1 : e2;
        if (!*want)
            return true;
    }
    return true;
}

/* The first unmet requirement, described in why; true when all are met. */
static bool requirements_met(const char *const *req, char *why, size_t whylen)
{
    for (size_t i = 0; req && req[i] && i < 64; i++) {
        const char *r = req[i];
        struct stat st;
        if (strncmp(r, "program:", 8) == 0) {
            static const char *const dirs[] = {"/usr/local/bin", "/usr/bin", "/bin"};
            bool found = false;
            for (size_t k = 0; k < ABX_ARRAY_LEN(dirs) && !found; k++) {
                char path[4096];
                snprintf(path, sizeof path, "%s/%s", dirs[k], r + 8);
                found = !strchr(r + 8, '/') && stat(path, &st) == 0 && S_ISREG(st.st_mode) && access(path, X_OK) == 0;
            }
            if (!found) {
                snprintf(why, whylen, "it needs the program '%s' (not found in /usr/local/bin:/usr/bin:/bin); install it",
                         r + 8);
                return false;
            }
        } else if (strncmp(r, "file:", 5) == 0) {
            if (r[5] != '/' || stat(r + 5, &st) != 0) {
                snprintf(why, whylen, "it needs the file '%s', which does not exist", r + 5);
                return false;
            }
        } else if (strncmp(r, "abx:", 4) == 0) {
            if (!version_ok(r + 4)) {
                snprintf(why, whylen, "it needs abx %s or later (this is %s)", r + 4, ABX_VERSION);
                return false;
            }
        } else {
            snprintf(why, whylen, "it declares the requirement '%s', which abx does not understand "
                                  "(program:NAME, file:/PATH, abx:VERSION)", r);
            return false;
        }
    }
    return true;
}

int abx__ext_plugin_load(abx_ext *e, abx_registry *reg, const abx_config *cfg, const char *name, int line,
                         abx_diags *d)
{
    const char *code = "config.plugin";
    for (const char *c = name; *c; c++)
        if (!((*c >= 'a' && *c <= 'z') || (*c >= 'A' && *c <= 'Z') || (*c >= '0' && *c <= '9') || *c == '_' ||
              *c == '-')) {
            abx_diag_add(d, "error", code, line, "plugin name '%s' may hold only letters, digits, '_' and '-'", name);
            return -1;
        }
    struct stat st;
    if (stat(cfg->plugin_dir, &st) != 0 || !S_ISDIR(st.st_mode)) {
        abx_diag_add(d, "error", code, line, "plugin folder %s: %s", cfg->plugin_dir,
                     errno ? strerror(errno) : "not a directory");
        return -1;
    }
    if ((st.st_mode & S_IWOTH) || !owner_ok(&st)) {
        abx_diag_add(d, "error", code, line,
                     "plugin folder %s is %s; it must belong to root or to the user abx runs as and not be "
                     "world-writable", cfg->plugin_dir, (st.st_mode & S_IWOTH) ? "world-writable" : "owned by another user");
        return -1;
    }
    char *path = abx_asprintf("%s/%s.so", cfg->plugin_dir, name);
    int fd = path ? open(path, O_RDONLY | O_CLOEXEC | O_NOFOLLOW) : -1;
    if (fd < 0) {
        abx_diag_add(d, "error", code, line, "plugin '%s': cannot open %s: %s", name, path ? path : "?",
                     errno == ELOOP ? "it is a symbolic link" : strerror(errno));
        abx_free(path);
        return -1;
    }
    if (fstat(fd, &st) != 0 || !S_ISREG(st.st_mode) || (st.st_mode & S_IWOTH) || !owner_ok(&st)) {
        abx_diag_add(d, "error", code, line,
                     "plugin '%s': %s must be a regular file that belongs to root or to the user abx runs as and is "
                     "not world-writable", name, path);
        close(fd);
        abx_free(path);
        return -1;
    }
    char via[64];
    snprintf(via, sizeof via, "/proc/self/fd/%d", fd);
    void *h = dlopen(via, RTLD_NOW | RTLD_LOCAL);
    close(fd);
    if (!h) {
        const char *why = dlerror();
        abx_diag_add(d, "error", code, line, "plugin '%s': cannot load %s: %s", name, path, why ? why : "?");
        abx_free(path);
        return -1;
    }
    void **grown = abx_realloc(e->handles, (e->n_handles + 1) * sizeof *grown);
    if (!grown) {
        dlclose(h);
        abx_free(path);
        return -1;
    }
    e->handles = grown;
    e->handles[e->n_handles++] = h;
    const char *const *req = (const char *const *)dlsym(h, "abx_plugin_requires");
    char why[300];
    if (!requirements_met(req, why, sizeof why)) {
        abx_diag_add(d, "error", "config.plugin_requirement", line, "plugin '%s' cannot be used: %s", name, why);
        abx_free(path);
        return -1;
    }
    register_fn fn;
    *(void **)&fn = dlsym(h, "abx_plugin_register");
    if (!fn) {
        abx_diag_add(d, "error", code, line, "plugin '%s': %s exports no abx_plugin_register function", name, path);
        abx_free(path);
        return -1;
    }
    abx_free(path);
    size_t before = reg->n_own;
    char err[300] = "";
    if (fn(reg, err, sizeof err) != 0) {
        abx_diag_add(d, "error", code, line, "plugin '%s' failed to register its operations: %s", name,
                     err[0] ? err : "(no message)");
        return -1;
    }
    for (size_t i = before; i < reg->n_own; i++)
        abx__ext_origin(e, reg->own[i]->id, line);
    return 0;
}
