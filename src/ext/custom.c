/* custom.c — declarative commands (`custom:` in the config) compiled to ops
 * custom.<mangled name>. The program is fixed by the config (resolved to an absolute
 * path at load), so the caller chooses only parameter values: each `{param}` of the
 * argv template is substituted inside its own argv element (never a shell string);
 * path parameters are canonicalized and admitted by the policy first (intrinsic jail
 * ∩ the statement's path scope) and the canonical value is what gets substituted.
 * The process is started by exec.c like every other (confined, limits, ledger). */
#include "ext/ext.h"
#include "builtin/exec.h"
#include "core/yaml.h"
#include "policy/paths.h"
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

/* Names the built-in routes under /commands/ take: a command named so could never be
 * reached by POST /commands/{name}. */
static const char *const route_names[] = {"run", "stream", "sessions"};

#define CUSTOM_LIMITS                                                                                                 \
    (ABX_LIM_TIMEOUT | ABX_LIM_MAX_OUTPUT_BYTES | ABX_LIM_RATE | ABX_LIM_CONCURRENCY | ABX_LIM_MEMORY |              \
     ABX_LIM_PIDS | ABX_LIM_CPU)

/* What a custom op's handler needs (udata; lives in the ext arena). */
typedef struct custom_cmd {
    char **argv;                 /* the template; argv[0] is the resolved absolute program */
    size_t argc;
    int64_t timeout_ms;          /* hard timeout, 0 = none (statements may still cap it) */
    const abx_param *result;     /* result: the fields stdout's JSON object has; NULL = commands.run's */
} custom_cmd;

/* ---- the handler ---- */

/* Append src[0..n) to a growing element; false when it would exceed the cap. */
static bool put(abx_buf *b, const char *s, size_t n) { return abx_buf_append(b, s, n); }

static bool value_text(abx_ctx *ctx, const abx_param *pa, const json_t *v, abx_buf *b)
{
    if (pa->kind == ABX_KIND_PATH) {
        const char *canon = abx_ctx_path(ctx, pa->name);
        return !canon || abx_buf_puts(b, canon); /* absent optional path: nothing */
    }
    if (json_is_string(v))
        return put(b, json_string_value(v), json_string_length(v));
    if (json_is_integer(v))
        return abx_buf_printf(b, "%lld", (long long)json_integer_value(v));
    if (json_is_real(v))
        return abx_buf_printf(b, "%.17g", json_real_value(v));
    if (json_is_boolean(v))
        return abx_buf_puts(b, json_is_true(v) ? "true" : "false");
    return true; /* absent optional parameter: nothing */
}

/* The argv a custom op runs for these arguments (in the request's arena): the handler
 * runs it, and an approval binds the files it names before it is held. Returns ABX_OK,
 * or an error with why. */
static abx_err expand(abx_ctx *ctx, const custom_cmd *c, const json_t *args, char ***out, char *why, size_t whylen)
{
    char **argv = abx_arena_alloc(abx_ctx_arena(ctx), (c->argc + 1) * sizeof *argv);
    if (!argv) {
        snprintf(why, whylen, "out of memory");
        return ABX_E_SERVER_UNAVAILABLE;
    }
    size_t n = 0;
    argv[n++] = c->argv[0];
    for (size_t i = 1; i < c->argc; i++) {
        const char *t = c->argv[i];
        abx_buf b;
        abx_buf_init(&b, 64 * 1024);
        bool ok = true, only_absent = false;
        for (const char *s = t; *s && ok;) {
            if ((s[0] == '{' && s[1] == '{') || (s[0] == '}' && s[1] == '}')) {
                ok = put(&b, s, 1);
                s += 2;
            } else if (s[0] == '{') {
                const char *e = strchr(s, '}');
                char name[64];
                snprintf(name, sizeof name, "%.*s", (int)(e - s - 1), s + 1);
                const abx_param *pa = abx_op_param(abx_ctx_op(ctx), name);
                const json_t *v = json_object_get(args, name);
                ok = value_text(ctx, pa, v, &b);
                only_absent = !v && s == t && e[1] == '\0';
                s = e + 1;
            } else {
                size_t k = strcspn(s, "{}");
                if (k == 0) { /* a lone '}' (the loader refuses it; kept literal for safety) */
                    k = 1;
                }
                ok = put(&b, s, k);
                s += k;
            }
        }
        if (!ok || b.failed) {
            abx_buf_release(&b);
            snprintf(why, whylen, "argument %zu of the command is longer than 64 KiB", i);
            return ABX_E_ARGS_INVALID;
        }
        if (only_absent) { /* "{opt}" alone and not given: the element is left out */
            abx_buf_release(&b);
            continue;
        }
        argv[n++] = abx_arena_strndup(abx_ctx_arena(ctx), b.data ? b.data : "", b.len);
        abx_buf_release(&b);
        if (!argv[n - 1]) {
            snprintf(why, whylen, "out of memory");
            return ABX_E_SERVER_UNAVAILABLE;
        }
    }
    argv[n] = NULL;
    *out = argv;
    return ABX_OK;
}

static abx_err custom_run(abx_ctx *ctx, const json_t *args, abx_reply *r)
{
    const custom_cmd *c = abx_ctx_udata(ctx);
    char **argv = NULL;
    char why[200];
    abx_err e = expand(ctx, c, args, &argv, why, sizeof why);
    if (e != ABX_OK)
        return abx_reply_error(r, e, NULL, "%s", why);
    abx_exec_opts o = {.argv = argv, .hard_timeout_ms = c->timeout_ms, .tag = abx_ctx_op_id(ctx)};
    e = abx_exec_run(ctx, args, &o, 0, r);
    return e == ABX_OK && c->result ? abx__custom_result(c->result, r) : e;
}

/* The approval binder's question (abx_namespace.bind_argv): the argv a declarative
 * command would run for these arguments, in the request's arena; NULL for any other op
 * (approvals bind the files it names). */
static char **custom_bind_argv(abx_ctx *ctx, const json_t *args)
{
    if (abx_ctx_op(ctx)->def->handler != custom_run)
        return NULL;
    char **argv = NULL;
    char why[200];
    return expand(ctx, abx_ctx_udata(ctx), args, &argv, why, sizeof why) == ABX_OK ? argv : NULL;
}

/* The custom.* ops come from the config (registered at load), so the descriptor has no
 * table of its own: it is there for the binder. The server starts it after the built-ins. */
const abx_namespace abx_ext_ns_custom = {.name = "custom", .bind_argv = custom_bind_argv};

/* ---- loading ---- */

typedef struct loader {
    abx_ext *e;
    const abx_config *cfg;
    const char *workspace;
    abx_diags *d;
} loader;

static int line_of(const loader *L, const json_t *node)
{
    return L->cfg->lines ? abx_linemap_line(L->cfg->lines, node) : 0;
}

static int key_line(const loader *L, const json_t *obj, const char *key)
{
    int l = L->cfg->lines ? abx_linemap_key_line(L->cfg->lines, obj, key) : 0;
    return l ? l : line_of(L, obj);
}

/* The program: absolute as written, or found in the fixed search path spawned
 * processes get. Must be an executable regular file now. Arena copy, or NULL. */
static char *resolve_program(abx_arena *a, const char *prog, char *why, size_t whylen)
{
    struct stat st;
    if (strchr(prog, '/')) {
        if (prog[0] != '/') {
            snprintf(why, whylen, "program '%s' must be absolute or a bare name found in /usr/local/bin:/usr/bin:/bin",
                     prog);
            return NULL;
        }
        if (stat(prog, &st) != 0 || !S_ISREG(st.st_mode) || access(prog, X_OK) != 0) {
            snprintf(why, whylen, "program '%s' is not an executable file", prog);
            return NULL;
        }
        return abx_arena_strdup(a, prog);
    }
    static const char *const dirs[] = {"/usr/local/bin", "/usr/bin", "/bin"};
    for (size_t i = 0; i < ABX_ARRAY_LEN(dirs); i++) {
        char path[4096];
        snprintf(path, sizeof path, "%s/%s", dirs[i], prog);
        if (stat(path, &st) == 0 && S_ISREG(st.st_mode) && access(path, X_OK) == 0)
            return abx_arena_strdup(a, path);
    }
    snprintf(why, whylen, "program '%s' is not found in /usr/local/bin:/usr/bin:/bin", prog);
    return NULL;
}

static abx_type type_by_name(const char *t)
{
    static const struct { const char *name; abx_type type; } types[] = {
        {"string", ABX_T_STRING}, {"str", ABX_T_STRING},   {"int", ABX_T_INT},      {"integer", ABX_T_INT},
        {"number", ABX_T_NUMBER}, {"float", ABX_T_NUMBER}, {"bool", ABX_T_BOOL},    {"boolean", ABX_T_BOOL},
    };
    for (size_t i = 0; i < ABX_ARRAY_LEN(types); i++)
        if (strcmp(types[i].name, t) == 0)
            return types[i].type;
    return ABX_T_NONE;
}

/* params: {name: TYPE} or {name: {type: TYPE, default: V, doc: TEXT}} → {0}-terminated array */
static abx_param *load_params(loader *L, const json_t *entry, const char *key, size_t *n_out)
{
    const json_t *ps = json_object_get(entry, key); /* params:, or the same shape for result: */
    size_t n = ps ? json_object_size(ps) : 0;
    abx_param *out = abx_arena_alloc(L->e->arena, (n + 1) * sizeof *out);
    *n_out = 0;
    if (!out)
        return NULL;
    if (ps && !json_is_object(ps)) {
        abx_diag_add(L->d, "error", "config.invalid", key_line(L, entry, "params"),
                     "custom: 'params' must be a mapping of name: type (string, int, number, bool)");
        return NULL;
    }
    const char *k;
    json_t *v;
    json_object_foreach((json_t *)ps, k, v)
    {
        int line = key_line(L, ps, k);
        abx_param *p = &out[(*n_out)++];
        p->name = abx_arena_strdup(L->e->arena, k);
        for (const char *c = k; *c; c++)
            if (!((*c >= 'a' && *c <= 'z') || (*c >= '0' && *c <= '9') || *c == '_')) {
                abx_diag_add(L->d, "error", "config.invalid", line, "custom: parameter name '%s' must be [a-z0-9_]", k);
                return NULL;
            }
        const json_t *type = json_is_object(v) ? json_object_get(v, "type") : v;
        p->type = json_is_string(type) ? type_by_name(json_string_value(type)) : ABX_T_NONE;
        if (p->type == ABX_T_NONE) {
            abx_diag_add(L->d, "error", "config.invalid", line,
                         "custom: parameter '%s' needs a type: string, int, number or bool", k);
            return NULL;
        }
        p->required = true;
        if (json_is_object(v)) {
            const char *ok;
            json_t *ov;
            json_object_foreach(v, ok, ov)
            {
                if (strcmp(ok, "type") == 0)
                    continue;
                if (strcmp(ok, "doc") == 0 && json_is_string(ov)) {
                    p->doc = abx_arena_strdup(L->e->arena, json_string_value(ov));
                } else if (strcmp(ok, "default") == 0 && !json_is_null(ov)) {
                    char *text = json_dumps(ov, JSON_ENCODE_ANY | JSON_COMPACT);
                    p->dflt = text ? abx_arena_strdup(L->e->arena, text) : NULL;
                    free(text);
                    p->required = false;
                } else if (strcmp(ok, "required") == 0 && json_is_boolean(ov)) {
                    p->required = json_is_true(ov);
                } else {
                    abx_diag_add(L->d, "error", "config.unknown_key", key_line(L, v, ok),
                                 "custom: parameter '%s': unknown or malformed key '%s' (type, default, doc, required)",
                                 k, ok);
                    return NULL;
                }
            }
        }
    }
    return out;
}

/* paths: {param: [patterns]} | {param: {roots: [patterns], access: read|write|read+write}} | [param, ...] */
static bool load_paths(loader *L, const json_t *entry, abx_param *params, size_t n)
{
    const json_t *ps = json_object_get(entry, "paths");
    if (!ps)
        return true;
    int line = key_line(L, entry, "paths");
    if (!json_is_object(ps) && !json_is_array(ps)) {
        abx_diag_add(L->d, "error", "config.invalid", line,
                     "custom: 'paths' must be {param: [patterns]} or a list of parameter names");
        return false;
    }
    size_t count = json_is_object(ps) ? json_object_size(ps) : json_array_size(ps);
    void *iter = json_is_object(ps) ? json_object_iter((json_t *)ps) : NULL;
    for (size_t i = 0; i < count; i++) {
        const char *name;
        const json_t *spec = NULL;
        if (iter) {
            name = json_object_iter_key(iter);
            spec = json_object_iter_value(iter);
            iter = json_object_iter_next((json_t *)ps, iter);
        } else {
            name = json_string_value(json_array_get(ps, i));
        }
        if (!name) {
            abx_diag_add(L->d, "error", "config.invalid", line, "custom: 'paths' must name parameters");
            return false;
        }
        abx_param *p = NULL;
        for (size_t k = 0; k < n; k++)
            if (strcmp(params[k].name, name) == 0)
                p = &params[k];
        if (!p || p->type != ABX_T_STRING) {
            abx_diag_add(L->d, "error", "config.invalid", line,
                         "custom: paths names '%s', which is not a declared string parameter", name);
            return false;
        }
        p->kind = ABX_KIND_PATH;
        p->access = ABX_ACC_READ;
        const json_t *roots = spec;
        if (json_is_object(spec)) {
            roots = json_object_get(spec, "roots");
            const char *acc = json_string_value(json_object_get(spec, "access"));
            if (acc) {
                p->access = 0;
                char tmp[64];
                snprintf(tmp, sizeof tmp, "%s", acc);
                for (char *save = NULL, *t = strtok_r(tmp, "+", &save); t; t = strtok_r(NULL, "+", &save))
                    p->access |= strcmp(t, "read") == 0 ? ABX_ACC_READ : strcmp(t, "write") == 0 ? ABX_ACC_WRITE : 0;
                if (!p->access || strspn(acc, "readwit+") != strlen(acc)) {
                    abx_diag_add(L->d, "error", "config.bad_value", line,
                                 "custom: access of '%s' must be read, write or read+write", name);
                    return false;
                }
            }
        }
        if (roots && !json_is_null(roots)) {
            json_t *list = json_is_string(roots) ? json_pack("[O]", roots) : json_incref((json_t *)roots);
            if (!json_is_array(list) || json_array_size(list) == 0) {
                abx_diag_add(L->d, "error", "config.invalid", line,
                             "custom: the intrinsic jail of '%s' must be a non-empty list of path patterns", name);
                json_decref(list);
                return false;
            }
            abx_buf b;
            abx_buf_init(&b, 4000);
            size_t k;
            json_t *pat;
            json_array_foreach(list, k, pat)
            {
                const char *g = json_string_value(pat);
                char err[160];
                char *joined = g && g[0] != '/' ? abx_asprintf("%s/%s", L->workspace, g) : NULL;
                if (!g || strchr(g, '|') || !abx_glob_valid(joined ? joined : g, err, sizeof err)) {
                    abx_diag_add(L->d, "error", "config.bad_glob", line, "custom: path pattern '%s' of '%s': %s",
                                 g ? g : "(not a string)", name, g && strchr(g, '|') ? "'|' is not allowed" : err);
                    abx_free(joined);
                    abx_buf_release(&b);
                    json_decref(list);
                    return false;
                }
                abx_free(joined);
                abx_buf_printf(&b, "%s%s", k ? "|" : "", g);
            }
            json_decref(list);
            if (b.failed) {
                abx_diag_add(L->d, "error", "config.invalid", line, "custom: the patterns of '%s' are too long", name);
                abx_buf_release(&b);
                return false;
            }
            p->roots = abx_arena_strdup(L->e->arena, b.data);
            abx_buf_release(&b);
        }
    }
    return true;
}

/* Every {name} of the template names a parameter; braces are balanced ({{ and }} are literal). */
static bool check_template(loader *L, const char *t, const abx_param *params, size_t n, int line)
{
    for (const char *s = t; *s;) {
        if ((s[0] == '{' && s[1] == '{') || (s[0] == '}' && s[1] == '}')) {
            s += 2;
            continue;
        }
        if (s[0] == '}') {
            abx_diag_add(L->d, "error", "config.invalid", line, "custom: argv element '%s' has an unmatched '}'", t);
            return false;
        }
        if (s[0] != '{') {
            s++;
            continue;
        }
        const char *e = strchr(s, '}');
        if (!e) {
            abx_diag_add(L->d, "error", "config.invalid", line, "custom: argv element '%s' has an unclosed '{'", t);
            return false;
        }
        bool known = false;
        for (size_t k = 0; k < n; k++)
            known = known || (strlen(params[k].name) == (size_t)(e - s - 1) &&
                              strncmp(params[k].name, s + 1, (size_t)(e - s - 1)) == 0);
        if (!known) {
            abx_diag_add(L->d, "error", "config.invalid", line,
                         "custom: placeholder '%.*s' in argv names no declared parameter", (int)(e - s + 1), s);
            return false;
        }
        s = e + 1;
    }
    return true;
}

/* The entry's keys are known and its name is usable: not a built-in route, not declared
 * before, with a letter or digit to make an op id from (written to tail). */
static const char *load_name(loader *L, const json_t *entry, size_t index, char tail[ABX_ID_MAX])
{
    static const char *const keys[] = {"name", "summary", "argv", "params", "paths", "effects", "timeout", "result"};
    const char *k;
    json_t *v;
    json_object_foreach((json_t *)entry, k, v)
    {
        bool known = false;
        for (size_t i = 0; i < ABX_ARRAY_LEN(keys); i++)
            known = known || strcmp(keys[i], k) == 0;
        if (!known) {
            abx_diag_add(L->d, "error", "config.unknown_key", key_line(L, entry, k),
                         "custom[%zu]: unknown key '%s' (name, summary, argv, params, paths, effects, timeout, result)", index,
                         k);
            return NULL;
        }
    }
    const char *name = json_string_value(json_object_get(entry, "name"));
    if (!name || !*name || strchr(name, '/') || strlen(name) >= ABX_ID_MAX) {
        abx_diag_add(L->d, "error", "config.invalid", line_of(L, entry),
                     "custom[%zu] needs a name (a non-empty string without '/', under %d bytes)", index, ABX_ID_MAX);
        return NULL;
    }
    for (size_t i = 0; i < ABX_ARRAY_LEN(route_names); i++)
        if (strcmp(name, route_names[i]) == 0) {
            abx_diag_add(L->d, "error", abx_err_code(ABX_E_CONFIG_NAME_CONFLICT), key_line(L, entry, "name"),
                         "custom command '%s' collides with the built-in route /commands/%s; choose another name",
                         name, name);
            return NULL;
        }
    if (abx_ext_command_find(L->e, name)) {
        abx_diag_add(L->d, "error", "config.invalid", key_line(L, entry, "name"),
                     "custom command '%s' is declared twice", name);
        return NULL;
    }
    if (!abx_id_mangle(name, tail, ABX_ID_MAX - 8)) {
        abx_diag_add(L->d, "error", "config.invalid", key_line(L, entry, "name"),
                     "custom command name '%s' has no letter or digit to make an op id from", name);
        return NULL;
    }
    return name;
}

/* The op id: custom.<tail>, with _2, _3, ... for collisions in declaration order. */
static void pick_id(loader *L, const char *tail, char id[ABX_ID_MAX])
{
    snprintf(id, ABX_ID_MAX, "custom.%s", tail);
    for (int suffix = 2;; suffix++) {
        bool taken = false;
        for (size_t i = 0; i < L->e->n_commands && !taken; i++)
            taken = strcmp(L->e->commands[i].id, id) == 0;
        if (!taken)
            return;
        snprintf(id, ABX_ID_MAX, "custom.%s_%d", tail, suffix);
    }
}

/* argv: a fixed program resolved now, then templates over the declared parameters. */
static bool load_argv(loader *L, const json_t *entry, const char *name, custom_cmd *c, const abx_param *params,
                      size_t n_params)
{
    abx_arena *a = L->e->arena;
    const json_t *argv = json_object_get(entry, "argv");
    c->argc = json_array_size(argv);
    c->argv = abx_arena_alloc(a, (c->argc + 1) * sizeof *c->argv);
    int aline = key_line(L, entry, "argv");
    for (size_t i = 0; c->argv && i < c->argc; i++) {
        const char *t = json_string_value(json_array_get(argv, i));
        if (!t) {
            abx_diag_add(L->d, "error", "config.invalid", aline, "custom '%s': argv[%zu] must be a string", name, i);
            return false;
        }
        if (i == 0) {
            char why[300];
            if (strpbrk(t, "{}")) {
                abx_diag_add(L->d, "error", "config.invalid", aline,
                             "custom '%s': the program (argv[0]) is fixed; it cannot be a placeholder", name);
                return false;
            }
            c->argv[0] = resolve_program(a, t, why, sizeof why);
            if (!c->argv[0]) {
                abx_diag_add(L->d, "error", "config.bad_value", aline, "custom '%s': %s", name, why);
                return false;
            }
            continue;
        }
        if (!check_template(L, t, params, n_params, aline))
            return false;
        c->argv[i] = abx_arena_strdup(a, t);
    }
    return true;
}

/* effects (a name or a list of names) and timeout (seconds). */
static bool load_effects_timeout(loader *L, const json_t *entry, const char *name, unsigned *effects,
                                 custom_cmd *c)
{
    *effects = 0;
    const json_t *eff = json_object_get(entry, "effects");
    if (eff) {
        json_t *list = json_is_string(eff) ? json_pack("[O]", eff) : json_incref((json_t *)eff);
        size_t i;
        json_t *it;
        bool bad = !json_is_array(list) || json_array_size(list) == 0;
        json_array_foreach(bad ? NULL : list, i, it)
        {
            unsigned bit = json_is_string(it) ? abx_effect_parse(json_string_value(it)) : 0;
            bad = bad || !bit;
            *effects |= bit;
        }
        json_decref(list);
        if (bad) {
            abx_diag_add(L->d, "error", "config.bad_value", key_line(L, entry, "effects"),
                         "custom '%s': effects must be a list of read, write, delete, exec, net, admin", name);
            return false;
        }
    }
    const json_t *to = json_object_get(entry, "timeout");
    if (to) {
        if (!json_is_number(to) || json_number_value(to) <= 0 || json_number_value(to) > 86400) {
            abx_diag_add(L->d, "error", "config.bad_value", key_line(L, entry, "timeout"),
                         "custom '%s': timeout must be a number of seconds (0 < t <= 86400)", name);
            return false;
        }
        c->timeout_ms = (int64_t)(json_number_value(to) * 1000);
    }
    return true;
}

static int load_one(loader *L, const json_t *entry, size_t index, abx_registry *reg)
{
    abx_arena *a = L->e->arena;
    int line = line_of(L, entry);
    if (!json_is_object(entry)) {
        abx_diag_add(L->d, "error", "config.invalid", line, "custom[%zu] must be a mapping", index);
        return -1;
    }
    char tail[ABX_ID_MAX], id[ABX_ID_MAX];
    const char *name = load_name(L, entry, index, tail);
    if (!name)
        return -1;
    pick_id(L, tail, id);
    const json_t *argv = json_object_get(entry, "argv");
    if (!json_is_array(argv) || json_array_size(argv) == 0) {
        abx_diag_add(L->d, "error", "config.invalid", line, "custom '%s': 'argv' must be a non-empty list of strings",
                     name);
        return -1;
    }
    size_t n_params;
    abx_param *params = load_params(L, entry, "params", &n_params);
    if (!params || !load_paths(L, entry, params, n_params))
        return -1;
    size_t n_result = 0;
    abx_param *result = json_object_get(entry, "result") ? load_params(L, entry, "result", &n_result) : NULL;
    if (json_object_get(entry, "result") && !result)
        return -1;
    custom_cmd *c = abx_arena_alloc(a, sizeof *c);
    unsigned effects;
    if (!c || !load_argv(L, entry, name, c, params, n_params) || !load_effects_timeout(L, entry, name, &effects, c))
        return -1;
    const char *summary = json_string_value(json_object_get(entry, "summary"));
    /* a table of one op and its terminator, so a registration error names this entry */
    abx_op_def *def = abx_arena_alloc(a, 2 * sizeof *def);
    if (!c->argv || !def) {
        abx_diag_add(L->d, "error", "config.internal", line, "out of memory");
        return -1;
    }
    def->id = abx_arena_strdup(a, id);
    def->effects = effects;
    def->summary = summary ? abx_arena_strdup(a, summary)
                           : abx_arena_printf(a, "Declarative command '%s' (%s)", name, c->argv[0]);
    def->params = n_params ? params : NULL;
    c->result = n_result ? result : NULL;
    def->result = c->result ? c->result : abx__custom_run_result;
    def->limits = CUSTOM_LIMITS;
    def->since = ABX_VERSION;
    def->aliases[0] = abx_arena_strdup(a, name);
    def->handler = custom_run;
    def->udata = c;
    char err[300];
    if (abx_registry_add(reg, def, err, sizeof err) != 0) {
        abx_diag_add(L->d, "error", "config.invalid", line, "custom '%s': %s", name, err);
        return -1;
    }
    L->e->commands[L->e->n_commands++] = (abx_ext_command){def->aliases[0], def->id, line};
    abx__ext_origin(L->e, def->id, line);
    return 0;
}

int abx__ext_custom_load(abx_ext *e, abx_registry *reg, const abx_config *cfg, const char *workspace, abx_diags *d)
{
    const json_t *list = cfg->custom;
    if (!list)
        return 0;
    loader L = {e, cfg, workspace, d};
    e->commands = abx_arena_alloc(e->arena, (json_array_size(list) + 1) * sizeof *e->commands);
    if (!e->commands)
        return -1;
    int rc = 0;
    size_t i;
    json_t *entry;
    json_array_foreach(list, i, entry)
    {
        if (load_one(&L, entry, i, reg) != 0)
            rc = -1;
    }
    return rc;
}

const char *abx_ext_command_at(void *ud, size_t i, const char **name)
{
    const abx_ext *e = ud;
    if (!e || i >= e->n_commands)
        return NULL;
    *name = e->commands[i].name;
    return e->commands[i].id;
}

const abx_ext_command *abx_ext_command_find(const abx_ext *e, const char *name)
{
    for (size_t i = 0; e && i < e->n_commands; i++)
        if (strcmp(e->commands[i].name, name) == 0)
            return &e->commands[i];
    return NULL;
}
