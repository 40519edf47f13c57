/* decide.c — one call's decision against a snapshot (pipeline step 7).
 * The algebra (POLICY.md): default deny; a matching deny wins; protected areas are
 * denied unless an unsafe statement names them; otherwise at least one mounting
 * statement must admit the call with all its scopes; limits are the tightest over
 * admitting statements. Decisions never depend on statement order or duplication.
 * Nothing outside the caller's scope is looked up while deciding (no existence
 * oracle). Must never touch file contents or spawn anything. */
#include "policy/internal.h"
#include "core/util.h"
#include "policy/paths.h"
#include "policy/url.h"
#include "sandbox/jail.h"
#include <errno.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static void set_err(abx_decision *d, abx_err e, const char *fmt, ...) __attribute__((format(printf, 3, 4)));
static void set_err(abx_decision *d, abx_err e, const char *fmt, ...)
{
    d->err = e;
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(d->message, sizeof d->message, fmt, ap);
    va_end(ap);
}

static void append_label(char *buf, size_t len, const char *label)
{
    size_t o = strlen(buf);
    if (o + strlen(label) + 2 >= len)
        return;
    snprintf(buf + o, len - o, "%s%s", o ? "," : "", label);
}

/* The caller's path scope for one call: every pattern (any access kind) of the
 * statements that mount the op for the principal. Lookups while canonicalizing and
 * the first verdict on a path are taken against it, so that nothing outside it is
 * ever asked of the file system. */
typedef struct call_scope {
    const abx_policy *p;
    const uint16_t *mounting;
    size_t n_mounting;
} call_scope;

static bool scope_has_paths(const call_scope *cs)
{
    for (size_t m = 0; m < cs->n_mounting; m++)
        if (cs->p->allow[cs->mounting[m]].has_paths)
            return true;
    return false;
}

/* The canonicalizer's gate: a prefix is looked up only when it, or a path below it,
 * could match a pattern of the scope. */
static bool scope_may_look(const char *prefix, void *arg)
{
    const call_scope *cs = arg;
    for (size_t m = 0; m < cs->n_mounting; m++) {
        const abx_stmt *s = &cs->p->allow[cs->mounting[m]];
        for (int a = 0; a < ABX_ACC_IDX__N; a++)
            for (size_t i = 0; i < s->n_paths[a]; i++)
                if (abx_glob_prefix_match(s->paths[a][i].glob, prefix))
                    return true;
    }
    return false;
}

static bool scope_admits(const call_scope *cs, const char *canonical)
{
    for (size_t m = 0; m < cs->n_mounting; m++) {
        const abx_stmt *s = &cs->p->allow[cs->mounting[m]];
        for (int a = 0; a < ABX_ACC_IDX__N; a++)
            if (abx_pol_pattern_list_match(s->paths[a], s->n_paths[a], canonical, NULL))
                return true;
    }
    return false;
}

/* A gate that refuses every lookup: the path folded as written. */
static bool scope_never(const char *prefix, void *arg)
{
    (void)prefix;
    (void)arg;
    return false;
}

static int canon_scoped(const char *anchor, const char *input, const call_scope *cs, char **out)
{
    return abx_path_canon_gated(anchor, input, scope_may_look, (void *)cs, out);
}

/* Canonicalize the parent of `input` and append its last component unresolved. */
static int canon_keep_last(const char *anchor, const char *input, const call_scope *cs, char **out)
{
    size_t n = strlen(input);
    while (n > 1 && input[n - 1] == '/')
        n--;
    const char *slash = memrchr(input, '/', n);
    const char *base = slash ? slash + 1 : input;
    size_t bl = (size_t)(input + n - base);
    if (bl == 0 || (bl == 1 && base[0] == '.') || (bl == 2 && base[0] == '.' && base[1] == '.') || bl > 255)
        return canon_scoped(anchor, input, cs, out);
    char *dir = slash ? abx_strndup(input, (size_t)(slash - input) ? (size_t)(slash - input) : 1) : abx_strdup(".");
    char *cdir = NULL;
    int rc = dir ? canon_scoped(anchor, dir, cs, &cdir) : -ENOMEM;
    abx_free(dir);
    if (rc != 0)
        return rc;
    *out = abx_asprintf("%s/%.*s", strcmp(cdir, "/") == 0 ? "" : cdir, (int)bl, base);
    abx_free(cdir);
    if (!*out)
        return -ENOMEM;
    if (strlen(*out) > 4095) {
        abx_free(*out);
        *out = NULL;
        return -ENAMETOOLONG;
    }
    return 0;
}

/* A path that could not be canonicalized. Outside the scope (judged on the path as
 * written, folded without any lookup) every failure is the one answer a path outside
 * the scope gets, whatever the lookup met: a loop, EACCES, a vanished /proc entry. */
static void path_error(const abx_policy *p, const call_scope *cs, const abx_param *pa, const char *input, int rc,
                       abx_decision *d)
{
    char *lex = NULL;
    bool outside = scope_has_paths(cs) && abx_path_canon_gated(p->workspace, input, scope_never, NULL, &lex) == 0 &&
                   !scope_admits(cs, lex);
    abx_free(lex);
    if (outside)
        set_err(d, ABX_E_POLICY_PATH_NOT_ALLOWED, "path '%s' is outside the allowed paths", pa->name);
    else if (rc == -ELOOP)
        set_err(d, ABX_E_POLICY_PATH_DENIED, "path '%s': too many levels of symbolic links", pa->name);
    else
        set_err(d, ABX_E_ARGS_INVALID, "argument '%s' is not a usable path (%s)", pa->name, strerror(-rc));
}

static bool collect_paths(const abx_policy *p, const call_scope *cs, const abx_op *op, const json_t *args,
                          abx_decision *d)
{
    size_t count = 0;
    for (size_t i = 0; i < op->n_params; i++) {
        if (!(op->path_params & (1u << i)))
            continue;
        const json_t *v = json_object_get(args, op->def->params[i].name);
        count += json_is_array(v) ? json_array_size(v) : (v ? 1 : 0);
    }
    d->paths = abx_calloc(count + 1, sizeof *d->paths);
    if (!d->paths) {
        set_err(d, ABX_E_SERVER_UNAVAILABLE, "out of memory");
        return false;
    }
    for (size_t i = 0; i < op->n_params; i++) {
        if (!(op->path_params & (1u << i)))
            continue;
        const abx_param *pa = &op->def->params[i];
        const json_t *v = json_object_get(args, pa->name);
        size_t n = json_is_array(v) ? json_array_size(v) : (v ? 1 : 0);
        for (size_t k = 0; k < n; k++) {
            const json_t *s = json_is_array(v) ? json_array_get(v, k) : v;
            abx_path_value *pv = &d->paths[d->n_paths++];
            pv->param = pa->name;
            pv->index = k;
            pv->rootfd = -1;
            /* a parameter that deletes (or moves away) acts on the name itself: a symlink
             * is the link, not its target, so only the parent is resolved */
            const char *in = json_string_value(s);
            int rc = (pa->access & ABX_ACC_DELETE) ? canon_keep_last(p->workspace, in, cs, &pv->canonical)
                                                   : canon_scoped(p->workspace, in, cs, &pv->canonical);
            if (rc != 0) {
                path_error(p, cs, pa, in, rc, d);
                return false;
            }
        }
    }
    return true;
}

static const abx_param *param_of(const abx_op *op, const char *name) { return abx_op_param(op, name); }

static unsigned acc_bits_to_idx_mask(unsigned access)
{
    return access & (ABX_ACC_READ | ABX_ACC_WRITE | ABX_ACC_DELETE);
}

/* The values of an op's command parameter: a `command` string (kind command, string)
 * or an `argv` list (kind command, list of strings). */
typedef struct cmd_input {
    const char *command;   /* borrowed, or NULL */
    const json_t *argv;    /* borrowed array, or NULL */
    const json_t *env;     /* borrowed object, or NULL */
} cmd_input;

static void command_input(const abx_op *op, const json_t *args, cmd_input *ci)
{
    memset(ci, 0, sizeof *ci);
    for (size_t i = 0; i < op->n_params; i++) {
        const abx_param *pa = &op->def->params[i];
        const json_t *v = json_object_get(args, pa->name);
        if (pa->kind == ABX_KIND_COMMAND && json_is_string(v))
            ci->command = json_string_value(v);
        else if (pa->kind == ABX_KIND_COMMAND && json_is_array(v))
            ci->argv = v;
    }
    ci->env = json_object_get(args, "env");
    if (!json_is_object(ci->env))
        ci->env = NULL;
}

/* Build the argv a statement would run: split (or sh -c with shell: true), program
 * resolved through the statement's search path. Returns 0 or -1 with why. */
static int build_argv(const abx_stmt *s, const cmd_input *ci, abx_argv *out, char *why, size_t whylen)
{
    memset(out, 0, sizeof *out);
    if (ci->command) {
        if (s && s->cmd_shell) {
            abx_argv_push(out, "/bin/sh", 7);
            abx_argv_push(out, "-c", 2);
            abx_argv_push(out, ci->command, strlen(ci->command));
        } else if (abx_shell_split(ci->command, out, why, whylen) != 0) {
            return -1;
        }
    } else if (ci->argv) {
        size_t i;
        json_t *it;
        json_array_foreach(ci->argv, i, it)
        {
            if (!abx_argv_push(out, json_string_value(it), json_string_length(it))) {
                snprintf(why, whylen, "argv is too long");
                abx_argv_release(out);
                return -1;
            }
        }
        if (out->n == 0) {
            snprintf(why, whylen, "argv is empty");
            return -1;
        }
    } else {
        return -1;
    }
    char *prog = abx_resolve_program(out->v[0], s ? s->cmd_path : NULL);
    if (!prog) {
        snprintf(why, whylen, "program '%s' is not an executable on the scope's search path", out->v[0]);
        abx_argv_release(out);
        return -1;
    }
    abx_free(out->v[0]);
    out->v[0] = prog;
    return 0;
}

static bool name_in(char *const *list, size_t n, const char *name)
{
    for (size_t i = 0; i < n; i++)
        if (strcmp(list[i], name) == 0)
            return true;
    return false;
}

static json_t *trace_stmt(json_t *trace, const abx_stmt *s)
{
    if (!trace)
        return NULL;
    json_t *st = json_pack("{s:s, s:i, s:[]}", "statement", s->label, "line", s->line, "checks");
    json_array_append_new(json_object_get(trace, "statements"), st);
    return st;
}

static void trace_check(json_t *st, const char *scope, const char *what, bool ok, const char *why)
{
    if (!st)
        return;
    json_t *c = json_pack("{s:s, s:s, s:s}", "scope", scope, "value", what ? what : "", "verdict",
                          ok ? "admits" : "refuses");
    if (why)
        json_object_set_new(c, "why", json_string(why));
    json_array_append_new(json_object_get(st, "checks"), c);
}

static void finish_trace(json_t *trace, const abx_decision *d)
{
    if (!trace)
        return;
    const char *decision = d->err == ABX_E_OP_NOT_ENABLED ? "not_mounted"
                           : d->err                     ? "deny"
                           : d->approval                ? "approval"
                                                        : "allow";
    json_object_set_new(trace, "decision", json_string(decision));
    json_object_set_new(trace, "code", d->err ? json_string(abx_err_code(d->err)) : json_null());
    if (d->err)
        json_object_set_new(trace, "message", json_string(d->message));
    json_object_set_new(trace, "determining", json_string(d->determining));
    json_t *lim = json_object();
    for (int i = 0; i < ABX_LIM__COUNT; i++)
        if (d->limits[i] >= 0)
            json_object_set_new(lim, abx_limit_name((enum abx_limit)(1u << i)), json_integer(d->limits[i]));
    json_object_set_new(trace, "limits", lim);
    json_t *paths = json_array();
    for (size_t i = 0; i < d->n_paths; i++)
        json_array_append_new(paths, json_pack("{s:s, s:s}", "param", d->paths[i].param, "canonical",
                                               d->paths[i].canonical ? d->paths[i].canonical : ""));
    json_object_set_new(trace, "paths", paths);
    if (d->argv.n) {
        json_t *a = json_array();
        for (size_t i = 0; i < d->argv.n; i++)
            json_array_append_new(a, json_string(d->argv.v[i]));
        json_object_set_new(trace, "argv", a);
    }
}

void abx_decide(const abx_policy *p, int slot, const abx_op *op, size_t op_index, const json_t *args,
                abx_decision *d, json_t *trace)
{
    memset(d, 0, sizeof *d);
    d->chosen = -1;
    for (int i = 0; i < ABX_LIM__COUNT; i++)
        d->limits[i] = -1;
    if (trace) {
        json_object_set_new(trace, "op", json_string(op->id));
        json_object_set_new(trace, "principal", json_string(abx_policy_principal_id(p, slot)));
        json_object_set_new(trace, "mounting", json_array());
        json_object_set_new(trace, "deny_hits", json_array());
        json_object_set_new(trace, "statements", json_array());
    }
    if (!abx_policy_mounted(p, slot, op_index)) {
        set_err(d, ABX_E_OP_NOT_ENABLED, "not mounted");
        finish_trace(trace, d);
        return;
    }
    size_t base = (size_t)slot * p->n_ops + op_index;
    const uint16_t *mounting = &p->mount_stmts[p->mount_off[base]];
    size_t n_mounting = p->mount_cnt[base];
    for (size_t m = 0; trace && m < n_mounting; m++)
        json_array_append_new(json_object_get(trace, "mounting"), json_string(p->allow[mounting[m]].label));
    call_scope cs = {p, mounting, n_mounting};
    if (!collect_paths(p, &cs, op, args, d)) {
        finish_trace(trace, d);
        return;
    }
    /* 0. a path outside every pattern of the caller's scope gets one answer, before any
     * deny or protected-area verdict: those would tell a name outside apart */
    for (size_t k = 0; k < d->n_paths && scope_has_paths(&cs); k++) {
        if (scope_admits(&cs, d->paths[k].canonical))
            continue;
        set_err(d, ABX_E_POLICY_PATH_NOT_ALLOWED, "path '%s' is outside the allowed paths", d->paths[k].param);
        finish_trace(trace, d);
        return;
    }
    for (size_t k = 0; k < d->n_paths; k++) {
        const abx_param *pa = abx_op_param(op, d->paths[k].param);
        if (!abx_pol_intrinsic_admits(p, pa, d->paths[k].canonical)) {
            set_err(d, ABX_E_POLICY_PATH_NOT_ALLOWED, "path '%s' is outside the operation's own jail (%s)",
                    d->paths[k].param, pa->roots);
            snprintf(d->determining, sizeof d->determining, "op:%s", op->id);
            finish_trace(trace, d);
            return;
        }
    }
    cmd_input ci;
    command_input(op, args, &ci);
    bool has_cmd = ci.command || ci.argv;
    /* 1. deny statements: ops, principals, canonical paths, argv. Every statement is
     * looked at, so the outcome does not depend on their order: a path hit is the more
     * specific code, and all hits are determining. */
    abx_err deny_code = ABX_OK;
    const char *deny_param = NULL;
    for (size_t i = 0; i < p->n_deny; i++) {
        const abx_stmt *s = &p->deny[i];
        if (s->n_ops && !abx_pol_stmt_has_op(s, op, false))
            continue;
        if (s->n_principals && !abx_pol_stmt_has_principal(p, s, slot))
            continue;
        abx_err hit = ABX_OK;
        const char *what = NULL;
        if (!s->has_paths && !s->has_commands && !s->has_urls)
            hit = ABX_E_POLICY_DENIED;
        for (size_t k = 0; !hit && s->has_paths && k < d->n_paths; k++)
            for (int a = 0; !hit && a < ABX_ACC_IDX__N; a++)
                if (abx_pol_pattern_list_match(s->paths[a], s->n_paths[a], d->paths[k].canonical, NULL)) {
                    hit = ABX_E_POLICY_PATH_DENIED;
                    what = d->paths[k].param;
                }
        if (!hit && s->has_commands && has_cmd) {
            abx_argv av;
            char why[200];
            if (build_argv(NULL, &ci, &av, why, sizeof why) == 0) {
                for (size_t k = 0; k < s->n_cmds && !hit; k++)
                    if (abx_cmd_pattern_match(&s->cmds[k], (const char *const *)av.v, av.n))
                        hit = ABX_E_POLICY_DENIED;
                abx_argv_release(&av);
            }
        }
        if (!hit)
            continue;
        append_label(d->determining, sizeof d->determining, s->label);
        if (trace)
            json_array_append_new(json_object_get(trace, "deny_hits"), json_string(s->label));
        if (hit == ABX_E_POLICY_PATH_DENIED && (deny_code != ABX_E_POLICY_PATH_DENIED ||
                                                (deny_param && strcmp(what, deny_param) < 0)))
            deny_param = what;
        if (deny_code != ABX_E_POLICY_PATH_DENIED)
            deny_code = hit;
    }
    if (deny_code) {
        if (deny_code == ABX_E_POLICY_PATH_DENIED)
            set_err(d, deny_code, "path '%s' is denied by %s", deny_param, d->determining);
        else
            set_err(d, deny_code, "denied by %s", d->determining);
        finish_trace(trace, d);
        return;
    }
    /* 2. protected areas, unless an unsafe mounting statement's scope names the path */
    for (size_t k = 0; k < d->n_paths; k++) {
        const abx_param *pa = param_of(op, d->paths[k].param);
        if (!abx_pol_protected_path(p, d->paths[k].canonical, pa->access))
            continue;
        bool waived = false;
        for (size_t m = 0; m < n_mounting && !waived; m++) {
            const abx_stmt *s = &p->allow[mounting[m]];
            if (s->unsafe)
                for (int a = 0; a < ABX_ACC_IDX__N && !waived; a++)
                    waived = abx_pol_pattern_list_match(s->paths[a], s->n_paths[a], d->paths[k].canonical, NULL);
        }
        if (!waived) {
            set_err(d, ABX_E_POLICY_PATH_DENIED, "path '%s' lies in a protected area", d->paths[k].param);
            snprintf(d->determining, sizeof d->determining, "protected");
            finish_trace(trace, d);
            return;
        }
    }
    /* 3. allow: admitted by at least one mounting statement with all its scopes; the
     * reason for a refusal is the most specific one found */
    abx_err reason = ABX_E_POLICY_SCOPE_REQUIRED;
    char reason_msg[300] = "";
    int chosen = -1;
    bool net_all = true;
    for (size_t m = 0; m < n_mounting; m++) {
        const abx_stmt *s = &p->allow[mounting[m]];
        json_t *st = trace_stmt(trace, s);
        const char *missing = abx_pol_scope_missing(s, op);
        if (missing) {
            trace_check(st, missing, NULL, false, "scope required");
            if (reason == ABX_E_POLICY_SCOPE_REQUIRED)
                snprintf(reason_msg, sizeof reason_msg, "%s mounts '%s' but carries no '%s' scope", s->label, op->id,
                         missing);
            continue;
        }
        bool ok = true;
        for (size_t k = 0; ok && k < d->n_paths; k++) {
            unsigned need = acc_bits_to_idx_mask(param_of(op, d->paths[k].param)->access);
            for (int a = 0; ok && a < ABX_ACC_IDX__N; a++) {
                if (!(need & (1u << a)))
                    continue;
                bool hit = abx_pol_pattern_list_match(s->paths[a], s->n_paths[a], d->paths[k].canonical, NULL);
                static const char *const kinds[] = {"paths.read", "paths.write", "paths.delete"};
                trace_check(st, kinds[a], d->paths[k].canonical, hit, NULL);
                if (!hit) {
                    ok = false;
                    reason = ABX_E_POLICY_PATH_NOT_ALLOWED;
                    snprintf(reason_msg, sizeof reason_msg, "path '%s' is outside the allowed paths",
                             d->paths[k].param);
                }
            }
        }
        abx_argv av = {0};
        if (ok && (has_cmd || ci.env)) {
            char why[300] = "";
            bool cok = !has_cmd || build_argv(s, &ci, &av, why, sizeof why) == 0;
            if (cok && has_cmd && !s->cmd_unrestricted) {
                cok = false;
                for (size_t k = 0; k < s->n_cmds && !cok; k++)
                    cok = abx_cmd_pattern_match(&s->cmds[k], (const char *const *)av.v, av.n);
                if (!cok)
                    snprintf(why, sizeof why, "the command matches no pattern of %s", s->label);
            }
            const char *kk;
            json_t *vv;
            if (cok && ci.env && !s->cmd_unrestricted)
                json_object_foreach((json_t *)ci.env, kk, vv)
                {
                    if (!name_in(s->env_allow, s->n_env, kk)) {
                        cok = false;
                        snprintf(why, sizeof why, "environment variable '%.100s' is not in the env allowlist of %s",
                                 kk, s->label);
                        break;
                    }
                }
            trace_check(st, has_cmd ? "commands" : "commands.env", av.n ? av.v[0] : (ci.command ? ci.command : ""),
                        cok, cok ? NULL : why);
            if (!cok) {
                ok = false;
                if (reason != ABX_E_POLICY_PATH_NOT_ALLOWED) {
                    reason = ABX_E_POLICY_COMMAND_NOT_ALLOWED;
                    snprintf(reason_msg, sizeof reason_msg, "%s", why);
                }
                abx_argv_release(&av);
            }
        }
        for (size_t i = 0; ok && i < op->n_params; i++) {
            const abx_param *pa = &op->def->params[i];
            const json_t *v = json_object_get(args, pa->name);
            if (!json_is_string(v))
                continue;
            if (pa->kind == ABX_KIND_URL) {
                char err[200];
                char *cu = abx_url_canon(json_string_value(v), err, sizeof err);
                bool uok = false;
                for (size_t k = 0; cu && k < s->n_urls && !uok; k++)
                    uok = abx_url_match(s->urls[k], cu);
                trace_check(st, "urls", cu ? cu : json_string_value(v), uok, cu ? NULL : err);
                abx_free(cu);
                if (!uok) {
                    ok = false;
                    reason = ABX_E_POLICY_URL_NOT_ALLOWED;
                    snprintf(reason_msg, sizeof reason_msg, "url '%s' is outside the allowed urls", pa->name);
                }
            } else if (pa->kind == ABX_KIND_LANGUAGE || pa->kind == ABX_KIND_AGENT) {
                bool lang = pa->kind == ABX_KIND_LANGUAGE;
                bool lok = lang ? name_in(s->languages, s->n_languages, json_string_value(v))
                                : name_in(s->agents, s->n_agents, json_string_value(v));
                trace_check(st, lang ? "languages" : "agents", json_string_value(v), lok, NULL);
                if (!lok) {
                    ok = false;
                    reason = ABX_E_POLICY_LANGUAGE_NOT_ALLOWED;
                    snprintf(reason_msg, sizeof reason_msg, "%s '%s' is not allowed", lang ? "language" : "agent",
                             json_string_value(v));
                }
            }
        }
        if (!ok) {
            abx_argv_release(&av);
            continue;
        }
        if (st)
            json_object_set_new(st, "admits", json_true());
        if (chosen < 0) {
            chosen = mounting[m];
            d->chosen = chosen;
            d->argv = av;
        } else {
            abx_argv_release(&av);
        }
        if (!d->admitting)
            d->admitting = abx_calloc(n_mounting, sizeof *d->admitting);
        if (d->admitting)
            d->admitting[d->n_admitting++] = mounting[m];
        append_label(d->determining, sizeof d->determining, s->label);
        if (s->approval)
            d->approval = true;
        if (!s->has_net || !s->net)
            net_all = false;
        for (int i = 0; i < ABX_LIM__COUNT; i++)
            if (s->limits[i] >= 0 && (d->limits[i] < 0 || s->limits[i] < d->limits[i]))
                d->limits[i] = s->limits[i];
    }
    if (chosen < 0) {
        set_err(d, reason, "%s", reason_msg[0] ? reason_msg : "no statement admits the call");
        finish_trace(trace, d);
        return;
    }
    d->net = net_all;
    /* jail roots: for each path, the root of a matching pattern of the first admitting
     * statement (for the access kinds the parameter needs) */
    for (size_t k = 0; k < d->n_paths; k++) {
        abx_path_value *pv = &d->paths[k];
        unsigned need = acc_bits_to_idx_mask(param_of(op, pv->param)->access);
        const abx_pattern *hit = NULL;
        const abx_stmt *s = &p->allow[chosen];
        for (int a = 0; a < ABX_ACC_IDX__N && !hit; a++)
            if (need & (1u << a))
                abx_pol_pattern_list_match(s->paths[a], s->n_paths[a], pv->canonical, &hit);
        if (!hit) {
            set_err(d, ABX_E_SERVER_INTERNAL, "no jail root for '%s'", pv->param);
            finish_trace(trace, d);
            return;
        }
        const char *root = p->roots[hit->root];
        if (!abx_path_under(root, pv->canonical, &pv->rel)) {
            set_err(d, ABX_E_SERVER_INTERNAL, "path '%s' is not under its jail root", pv->param);
            finish_trace(trace, d);
            return;
        }
        pv->root = root;
        pv->rootfd = p->rootfds[hit->root];
        if (pv->rootfd < 0) { /* the root did not exist at compile time: try now, never an error here */
            int fd = abx_jail_open_root(root);
            if (fd >= 0) {
                pv->rootfd = fd;
                pv->own_fd = true;
            }
        }
    }
    d->err = ABX_OK;
    finish_trace(trace, d);
}
