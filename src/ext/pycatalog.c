/* pycatalog.c — Python op workers, before the registry freezes: abx_ops.py written to
 * a private folder, the module imported once by a short-lived confined process that
 * prints its catalog, and the catalog turned into op declarations (same registry rules
 * as every op). The life of a worker is described in pyworker.c. */
#include "ext/pyworker.h"
#include "core/yaml.h"
#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include "abx_ops_py.h" /* generated: the bytes of python/abx_ops.py */

/* ---- the private folder with abx_ops.py ---- */

static int ensure_pydir(abx_ext *e, char *why, size_t whylen)
{
    if (e->pydir[0])
        return 0;
    snprintf(e->pydir, sizeof e->pydir, "/tmp/abx-py-XXXXXX");
    if (!mkdtemp(e->pydir) || chmod(e->pydir, 0755) != 0) {
        snprintf(why, whylen, "cannot create a folder for abx_ops.py: %s", strerror(errno));
        e->pydir[0] = '\0';
        return -1;
    }
    char path[128];
    snprintf(path, sizeof path, "%s/abx_ops.py", e->pydir);
    int fd = open(path, O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC | O_NOFOLLOW, 0644);
    size_t len = sizeof abx_ops_py - 1, off = 0;
    while (fd >= 0 && off < len) {
        ssize_t n = write(fd, abx_ops_py + off, len - off);
        if (n <= 0)
            break;
        off += (size_t)n;
    }
    if (fd >= 0)
        close(fd);
    if (fd < 0 || off != len) {
        snprintf(why, whylen, "cannot write %s: %s", path, strerror(errno));
        return -1;
    }
    return 0;
}

void abx__ext_pydir_remove(abx_ext *e)
{
    if (e->pydir[0])
        abx_rm_tree(e->pydir);
}

/* ---- discovery: import the module once and read its catalog ---- */

/* Run python on the module with stdin at EOF, confined: it prints {"catalog": [...]}
 * (or {"fatal": why}) and exits. Returns the parsed line (owned) or NULL with why. */
static json_t *discover(const char *python, const char *pydir, const char *module, const char *config_dir,
                        bool required, char *why, size_t whylen)
{
    char script[128];
    snprintf(script, sizeof script, "%s/abx_ops.py", pydir);
    char *argv[] = {(char *)python, "-B", "-I", script, (char *)module, (char *)config_dir, NULL};
    char home[96];
    snprintf(home, sizeof home, "HOME=%s", pydir);
    char *envp[] = {"PATH=/usr/local/bin:/usr/bin:/bin", "LANG=C.UTF-8", home, NULL};
    int out[2] = {-1, -1}, err[2] = {-1, -1};
    json_t *res = NULL;
    if (pipe2(out, O_CLOEXEC) != 0 || pipe2(err, O_CLOEXEC) != 0) {
        snprintf(why, whylen, "pipe: %s", strerror(errno));
        goto out;
    }
    /* confined like a worker, more narrowly: read-only abx_ops's and the config's
     * folders (and the system directories), no network, no write root */
    abx_sandbox *sb = abx_sandbox_new(pydir, required, why, whylen);
    if (!sb)
        goto out;
    const char *ro[] = {pydir, config_dir};
    abx_confine conf = {.read_roots = ro, .n_read = 2, .required = required};
    int cwd = open(config_dir, O_PATH | O_DIRECTORY | O_CLOEXEC);
    abx_spawn_req req = {.argv = argv, .envp = envp, .cwd_fd = cwd, .cwd_path = config_dir, .stdin_fd = -1,
                         .stdout_fd = out[1], .stderr_fd = err[1], .confine = &conf};
    abx_child child;
    int rc = cwd < 0 ? -1 : abx_spawn(sb, &req, &child, why, whylen);
    if (cwd >= 0)
        close(cwd);
    else
        snprintf(why, whylen, "cannot open %s: %s", config_dir, strerror(errno));
    close(out[1]);
    close(err[1]);
    out[1] = err[1] = -1;
    if (rc != 0) {
        char tmp[300];
        snprintf(tmp, sizeof tmp, "cannot run %s: %s", python, why);
        snprintf(why, whylen, "%s", tmp);
        abx_sandbox_free(sb);
        goto out;
    }
    pid_t pid = child.pid;
    abx_buf ob, eb;
    abx_buf_init(&ob, 4u << 20);
    abx_buf_init(&eb, 64 * 1024);
    int64_t deadline = abx_now_ms() + DISCOVER_TIMEOUT_MS;
    bool open_o = true, open_e = true, timed_out = false;
    while (open_o || open_e) {
        int64_t left = deadline - abx_now_ms();
        if (left <= 0) {
            timed_out = true;
            break;
        }
        struct pollfd pf[2] = {{open_o ? out[0] : -1, POLLIN, 0}, {open_e ? err[0] : -1, POLLIN, 0}};
        if (poll(pf, 2, (int)(left > 1000 ? 1000 : left)) < 0 && errno != EINTR)
            break;
        char chunk[8192];
        for (int i = 0; i < 2; i++) {
            if (!(pf[i].revents & (POLLIN | POLLHUP | POLLERR)))
                continue;
            ssize_t n = read(i ? err[0] : out[0], chunk, sizeof chunk);
            if (n <= 0) {
                if (i)
                    open_e = false;
                else
                    open_o = false;
            } else {
                abx_buf_append(i ? &eb : &ob, chunk, (size_t)n);
            }
        }
    }
    if (timed_out)
        abx_child_kill(&child, SIGKILL);
    int st = 0;
    while (waitpid(pid, &st, 0) < 0 && errno == EINTR) {
    }
    abx_child_cleanup(&child);
    abx_sandbox_free(sb);
    /* the catalog is the first line */
    const char *text = ob.data ? ob.data : "";
    const char *nl = memchr(text, '\n', ob.len);
    json_error_t je;
    json_t *first = nl ? json_loadb(text, (size_t)(nl - text), 0, &je) : NULL;
    const char *fatal = json_string_value(json_object_get(first, "fatal"));
    if (timed_out) {
        snprintf(why, whylen, "importing %s took longer than %d s", module, DISCOVER_TIMEOUT_MS / 1000);
    } else if (fatal) {
        snprintf(why, whylen, "%s", fatal);
    } else if (!json_is_array(json_object_get(first, "catalog"))) {
        /* the last line of stderr says what went wrong (a traceback ends with it) */
        const char *e = eb.data ? eb.data : "";
        size_t n = eb.len;
        while (n && e[n - 1] == '\n')
            n--;
        const char *last = n ? (const char *)memrchr(e, '\n', n) : NULL;
        last = last ? last + 1 : e;
        snprintf(why, whylen, "%s did not report a catalog (exit status %d)%s%.*s", python,
                 WIFEXITED(st) ? WEXITSTATUS(st) : 128 + WTERMSIG(st), n ? ": " : "", (int)(e + n - last), last);
    } else {
        res = json_incref(first);
    }
    json_decref(first);
    abx_buf_release(&ob);
    abx_buf_release(&eb);
out:
    for (int i = 0; i < 2; i++) {
        if (out[i] >= 0)
            close(out[i]);
        if (err[i] >= 0)
            close(err[i]);
    }
    return res;
}

/* ---- catalog → declarations ---- */

static abx_type type_named(const char *t)
{
    static const struct { const char *n; abx_type t; } m[] = {
        {"string", ABX_T_STRING}, {"int", ABX_T_INT},   {"number", ABX_T_NUMBER}, {"bool", ABX_T_BOOL},
        {"bytes", ABX_T_BYTES},   {"list", ABX_T_LIST}, {"map", ABX_T_MAP},       {"enum", ABX_T_ENUM},
        {"object", ABX_T_OBJECT},
    };
    for (size_t i = 0; t && i < ABX_ARRAY_LEN(m); i++)
        if (strcmp(m[i].n, t) == 0)
            return m[i].t;
    return ABX_T_NONE;
}

static abx_param *params_of(abx_arena *a, const json_t *list, char *why, size_t whylen);

static bool param_of(abx_arena *a, const json_t *j, abx_param *p, char *why, size_t whylen)
{
    const char *name = json_string_value(json_object_get(j, "name"));
    p->name = name ? abx_arena_strdup(a, name) : NULL;
    p->type = type_named(json_string_value(json_object_get(j, "type")));
    p->item = type_named(json_string_value(json_object_get(j, "item")));
    p->required = json_is_true(json_object_get(j, "required"));
    p->nullable = json_is_true(json_object_get(j, "nullable"));
    if (!name || p->type == ABX_T_NONE) {
        snprintf(why, whylen, "parameter '%s' has no name or an unknown type", name ? name : "?");
        return false;
    }
    const json_t *dflt = json_object_get(j, "default");
    if (dflt) {
        char *t = json_dumps(dflt, JSON_ENCODE_ANY | JSON_COMPACT);
        p->dflt = t ? abx_arena_strdup(a, t) : NULL;
        free(t);
    }
    const char *choices = json_string_value(json_object_get(j, "choices"));
    p->choices = choices ? abx_arena_strdup(a, choices) : NULL;
    const json_t *fields = json_object_get(j, "fields");
    if (fields && !(p->fields = params_of(a, fields, why, whylen)))
        return false;
    const char *kind = json_string_value(json_object_get(j, "kind"));
    if (kind) {
        p->kind = strcmp(kind, "path") == 0 ? ABX_KIND_PATH
                  : strcmp(kind, "command") == 0 ? ABX_KIND_COMMAND
                  : strcmp(kind, "url") == 0 ? ABX_KIND_URL
                                             : ABX_KIND_PLAIN;
        const char *acc = json_string_value(json_object_get(j, "access"));
        p->access = ABX_ACC_READ | (acc && strstr(acc, "write") ? ABX_ACC_WRITE : 0);
    }
    const json_t *roots = json_object_get(j, "roots");
    if (json_is_array(roots) && json_array_size(roots)) {
        abx_buf b;
        abx_buf_init(&b, 4000);
        size_t i;
        json_t *r;
        json_array_foreach(roots, i, r)
        {
            const char *g = json_string_value(r);
            if (!g || strchr(g, '|')) {
                abx_buf_release(&b);
                snprintf(why, whylen, "parameter '%s': path roots must be patterns without '|'", name);
                return false;
            }
            abx_buf_printf(&b, "%s%s", i ? "|" : "", g);
        }
        p->roots = b.failed ? NULL : abx_arena_strdup(a, b.data);
        abx_buf_release(&b);
    }
    return true;
}

static abx_param *params_of(abx_arena *a, const json_t *list, char *why, size_t whylen)
{
    size_t n = json_array_size(list);
    abx_param *out = abx_arena_alloc(a, (n + 1) * sizeof *out);
    for (size_t i = 0; out && i < n; i++)
        if (!param_of(a, json_array_get(list, i), &out[i], why, whylen))
            return NULL;
    return out;
}

static abx_op_def *def_of(abx_arena *a, const json_t *j, abx_pyworker *w, char *why, size_t whylen)
{
    abx_op_def *d = abx_arena_alloc(a, 2 * sizeof *d);
    const char *id = json_string_value(json_object_get(j, "id"));
    if (!d || !id) {
        snprintf(why, whylen, "an op has no id");
        return NULL;
    }
    d->id = abx_arena_strdup(a, id);
    size_t i;
    json_t *v;
    json_array_foreach(json_object_get(j, "effects"), i, v)
    {
        unsigned bit = abx_effect_parse(json_string_value(v) ? json_string_value(v) : "");
        if (!bit) {
            snprintf(why, whylen, "op '%s': unknown effect", id);
            return NULL;
        }
        d->effects |= bit;
    }
    const char *summary = json_string_value(json_object_get(j, "summary"));
    d->summary = summary && *summary ? abx_arena_strdup(a, summary) : abx_arena_printf(a, "Python op %s", id);
    const json_t *http = json_object_get(j, "http");
    if (json_array_size(http) > ABX_MAX_BINDINGS) {
        snprintf(why, whylen, "op '%s': at most %d http bindings", id, ABX_MAX_BINDINGS);
        return NULL;
    }
    json_array_foreach(http, i, v)
    {
        d->http[i] = abx_arena_strdup(a, json_string_value(v) ? json_string_value(v) : "");
    }
    const json_t *params = json_object_get(j, "params");
    if (json_array_size(params) && !(d->params = params_of(a, params, why, whylen))) {
        char tmp[300];
        snprintf(tmp, sizeof tmp, "op '%s': %s", id, why);
        snprintf(why, whylen, "%s", tmp);
        return NULL;
    }
    const json_t *result = json_object_get(j, "result"); /* from a TypedDict/dataclass return annotation */
    if (json_array_size(result) && !(d->result = params_of(a, result, why, whylen))) {
        char tmp[300];
        snprintf(tmp, sizeof tmp, "op '%s': result: %s", id, why);
        snprintf(why, whylen, "%s", tmp);
        return NULL;
    }
    json_array_foreach(json_object_get(j, "limits"), i, v)
    {
        for (int b = 0; b < ABX_LIM__COUNT; b++)
            if (json_string_value(v) && strcmp(abx_limit_name((enum abx_limit)(1u << b)), json_string_value(v)) == 0)
                d->limits |= 1u << b;
    }
    const char *stream = json_string_value(json_object_get(j, "stream"));
    if (stream && strcmp(stream, "none") != 0) {
        snprintf(why, whylen, "op '%s': stream='%s' is not supported for Python ops (results are JSON)", id, stream);
        return NULL;
    }
    const char *group = json_string_value(json_object_get(j, "group"));
    d->group = group ? abx_arena_strdup(a, group) : NULL;
    const char *since = json_string_value(json_object_get(j, "since"));
    d->since = since ? abx_arena_strdup(a, since) : ABX_VERSION;
    const char *dep = json_string_value(json_object_get(j, "deprecated"));
    d->deprecated = dep ? abx_arena_strdup(a, dep) : NULL;
    const json_t *aliases = json_object_get(j, "aliases"), *install = json_object_get(j, "install");
    if (json_array_size(aliases) > ABX_MAX_ALIASES || json_array_size(install) > ABX_MAX_INSTALL) {
        snprintf(why, whylen, "op '%s': at most %d aliases and %d install requirements", id, ABX_MAX_ALIASES,
                 ABX_MAX_INSTALL);
        return NULL;
    }
    json_array_foreach(aliases, i, v)
    {
        d->aliases[i] = abx_arena_strdup(a, json_string_value(v) ? json_string_value(v) : "");
    }
    json_array_foreach(install, i, v)
    {
        d->install[i] = abx_arena_strdup(a, json_string_value(v) ? json_string_value(v) : "");
    }
    d->requires_approval = json_is_true(json_object_get(j, "requires_approval"));
    d->handler = abx__py_call;
    d->udata = w;
    return d;
}

int abx__ext_python_load(abx_ext *e, abx_registry *reg, const abx_config *cfg, const char *module, int line,
                         abx_diags *d)
{
    const char *code = "config.python";
    if (!*module || strspn(module, "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789_.") !=
                        strlen(module) || module[0] == '.' || strstr(module, "..")) {
        abx_diag_add(d, "error", code, line, "'python:%s' must name a module (dotted names of letters, digits, _)",
                     module);
        return -1;
    }
    char why[600];
    if (access(cfg->python, X_OK) != 0) {
        abx_diag_add(d, "error", code, line, "the Python interpreter %s cannot be run: %s (set 'python')",
                     cfg->python, strerror(errno));
        return -1;
    }
    if (ensure_pydir(e, why, sizeof why) != 0) {
        abx_diag_add(d, "error", code, line, "%s", why);
        return -1;
    }
    json_t *cat = discover(cfg->python, e->pydir, module, cfg->config_dir, cfg->confine_set && cfg->confine_required,
                           why, sizeof why);
    if (!cat) {
        abx_diag_add(d, "error", code, line, "python:%s: %s", module, why);
        return -1;
    }
    abx_pyworker *w = abx_calloc(1, sizeof *w);
    abx_pyworker **grown = w ? abx_realloc(e->workers, (e->n_workers + 1) * sizeof *grown) : NULL;
    const json_t *ops = json_object_get(cat, "catalog");
    if (!grown) {
        abx_free(w);
        json_decref(cat);
        return -1;
    }
    e->workers = grown;
    e->workers[e->n_workers++] = w;
    w->module = abx_strdup(module);
    w->ext = e;
    w->python = abx_strdup(cfg->python);
    w->config_dir = abx_strdup(cfg->config_dir);
    w->op_ids = abx_calloc(json_array_size(ops) + 1, sizeof *w->op_ids);
    w->per_call = cfg->python_per_call;
    pthread_mutex_init(&w->mu, NULL);
    pthread_mutex_init(&w->roots_mu, NULL);
    abx_buf_init(&w->ch.line, LINE_MAX_BYTES);
    int rc = 0;
    if (json_array_size(ops) == 0) {
        abx_diag_add(d, "warning", code, line, "python:%s declares no operations (@op)", module);
    }
    size_t i;
    json_t *o;
    json_array_foreach(ops, i, o)
    {
        abx_op_def *def = def_of(e->arena, o, w, why, sizeof why);
        char err[300];
        if (!def) {
            abx_diag_add(d, "error", code, line, "python:%s: %s", module, why);
            rc = -1;
            continue;
        }
        if (abx_registry_add(reg, def, err, sizeof err) != 0) {
            abx_diag_add(d, "error", code, line, "python:%s: %s", module, err);
            rc = -1;
            continue;
        }
        w->op_ids[w->n_ops++] = (char *)def->id;
        abx__ext_origin(e, def->id, line);
    }
    json_decref(cat);
    return rc;
}
