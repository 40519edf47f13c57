/* decide.c — one call's decision against a snapshot (pipeline step 7).
 * The algebra (POLICY.md): default deny; a matching deny wins; protected areas are
 * denied unless an unsafe statement names them; otherwise at least one mounting
 * statement must admit the call with all its scopes; limits are the tightest over
 * admitting statements; the process runs under one admitting statement's confinement
 * (take_stmt). Decisions never depend on statement order or duplication.
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
    size_t o = strlen(buf), n = strlen(label);
    if (o + n + 2 >= len)
        return;
    if (o)
        buf[o++] = ',';
    memcpy(buf + o, label, n + 1);
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
                          abx_decision *d, bool lexical)
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
            if (lexical && !(pa->access & ABX_ACC_DELETE) &&
                abx_path_canon_lexical(p->workspace, in, scope_may_look, (void *)cs, &pv->canonical) == 0) {
                pv->lexical = true;
                continue;
            }
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
    if (!d->err)
        json_object_set_new(trace, "net", d->net         ? json_string("host")
                                          : d->net_allow ? json_pack("{s:s}", "allowlist", d->net_stmt)
                                                         : json_string("none"));
    if (d->argv.n) {
        json_t *a = json_array();
        for (size_t i = 0; i < d->argv.n; i++)
            json_array_append_new(a, json_string(d->argv.v[i]));
        json_object_set_new(trace, "argv", a);
    }
}

/* ---- the decision, step by step ----
 * abx_decide runs the steps below in order; each returns false when it has decided
 * (d->err and d->message set), and the trace is finished once at the end. */

/* One decision in the making: the call, the caller's scope and its command input. */
typedef struct decide_run {
    const abx_policy *p;
    int slot;
    const abx_op *op;
    const json_t *args;
    abx_decision *d;
    json_t *trace;         /* or NULL (the explain door asks for one) */
    bool lexical;          /* paths as written, confirmed later (abx_decide_lexical) */
    call_scope cs;         /* the statements that mount the op for the principal */
    cmd_input ci;
    bool has_cmd;
} decide_run;

/* Why no mounting statement admitted the call: the most specific reason found. */
typedef struct refusal {
    abx_err code;
    char msg[300];
} refusal;

static void decide_begin(decide_run *r, const abx_policy *p, int slot, const abx_op *op, const json_t *args,
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
    *r = (decide_run){.p = p, .slot = slot, .op = op, .args = args, .d = d, .trace = trace};
    command_input(op, args, &r->ci);
    r->has_cmd = r->ci.command || r->ci.argv;
}

/* Mounted? The mounting statements become the caller's scope for this call. */
static bool step_mounted(decide_run *r, size_t op_index)
{
    const abx_policy *p = r->p;
    if (!abx_policy_mounted(p, r->slot, op_index)) {
        set_err(r->d, ABX_E_OP_NOT_ENABLED, "not mounted");
        return false;
    }
    size_t base = (size_t)r->slot * p->n_ops + op_index;
    r->cs = (call_scope){p, &p->mount_stmts[p->mount_off[base]], p->mount_cnt[base]};
    for (size_t m = 0; r->trace && m < r->cs.n_mounting; m++)
        json_array_append_new(json_object_get(r->trace, "mounting"),
                              json_string(p->allow[r->cs.mounting[m]].label));
    return true;
}

static bool step_paths(decide_run *r) { return collect_paths(r->p, &r->cs, r->op, r->args, r->d, r->lexical); }

/* 0. a path outside every pattern of the caller's scope gets one answer, before any
 * deny or protected-area verdict: those would tell a name outside apart */
static bool step_in_scope(decide_run *r)
{
    abx_decision *d = r->d;
    for (size_t k = 0; k < d->n_paths && scope_has_paths(&r->cs); k++) {
        if (scope_admits(&r->cs, d->paths[k].canonical))
            continue;
        static const char *const kinds[] = {"paths.read", "paths.write", "paths.delete"};
        unsigned need = acc_bits_to_idx_mask(param_of(r->op, d->paths[k].param)->access);
        int a = need & 1u ? 0 : need & 2u ? 1 : 2;
        set_err(d, ABX_E_POLICY_PATH_NOT_ALLOWED,
                "path '%s' is outside the allowed paths: %s of no statement mounting '%s' covers it (%s: add a "
                "pattern to %s)",
                d->paths[k].param, kinds[a], r->op->id, r->p->allow[r->cs.mounting[0]].label, kinds[a]);
        return false;
    }
    return true;
}

/* An op's own jail (abx_param.roots) binds whatever the statements grant. */
static bool step_intrinsic(decide_run *r)
{
    abx_decision *d = r->d;
    for (size_t k = 0; k < d->n_paths; k++) {
        const abx_param *pa = abx_op_param(r->op, d->paths[k].param);
        if (abx_pol_intrinsic_admits(r->p, pa, d->paths[k].canonical))
            continue;
        set_err(d, ABX_E_POLICY_PATH_NOT_ALLOWED, "path '%s' is outside the operation's own jail (%s)",
                d->paths[k].param, pa->roots);
        snprintf(d->determining, sizeof d->determining, "op:%s", r->op->id);
        return false;
    }
    return true;
}

/* What one deny statement says of this call: ABX_OK (no hit), policy.denied, or
 * policy.path_denied with the parameter it hit in *what. */
static abx_err deny_hit(const decide_run *r, const abx_stmt *s, const char **what)
{
    const abx_decision *d = r->d;
    if (!abx_pol_deny_applies(r->p, s, r->op, r->slot))
        return ABX_OK;
    if (!s->has_paths && !s->has_commands && !s->has_urls)
        return ABX_E_POLICY_DENIED;
    for (size_t k = 0; s->has_paths && k < d->n_paths; k++)
        for (int a = 0; a < ABX_ACC_IDX__N; a++)
            if (abx_pol_pattern_list_match(s->paths[a], s->n_paths[a], d->paths[k].canonical, NULL)) {
                *what = d->paths[k].param;
                return ABX_E_POLICY_PATH_DENIED;
            }
    abx_err hit = ABX_OK;
    abx_argv av;
    char why[200];
    if (s->has_commands && r->has_cmd && build_argv(NULL, &r->ci, &av, why, sizeof why) == 0) {
        for (size_t k = 0; k < s->n_cmds && !hit; k++)
            if (abx_cmd_pattern_match(&s->cmds[k], (const char *const *)av.v, av.n))
                hit = ABX_E_POLICY_DENIED;
        abx_argv_release(&av);
    }
    return hit;
}

/* 1. deny statements: ops, principals, canonical paths, argv. Every statement is
 * looked at, so the outcome does not depend on their order: a path hit is the more
 * specific code, and all hits are determining. */
static bool step_deny(decide_run *r)
{
    abx_decision *d = r->d;
    abx_err code = ABX_OK;
    const char *param = NULL;
    for (size_t i = 0; i < r->p->n_deny; i++) {
        const abx_stmt *s = &r->p->deny[i];
        const char *what = NULL;
        abx_err hit = deny_hit(r, s, &what);
        if (!hit)
            continue;
        append_label(d->determining, sizeof d->determining, s->label);
        if (r->trace)
            json_array_append_new(json_object_get(r->trace, "deny_hits"), json_string(s->label));
        if (hit == ABX_E_POLICY_PATH_DENIED &&
            (code != ABX_E_POLICY_PATH_DENIED || (param && strcmp(what, param) < 0)))
            param = what;
        if (code != ABX_E_POLICY_PATH_DENIED)
            code = hit;
    }
    if (code == ABX_E_POLICY_PATH_DENIED)
        set_err(d, code, "path '%s' is denied by %s (its paths match: remove or narrow it)", param,
                d->determining);
    else if (code)
        set_err(d, code, "denied by %s (deny statements win over allow: remove or narrow it)", d->determining);
    return code == ABX_OK;
}

/* An unsafe mounting statement whose scope names the path waives its protection. */
static bool protection_waived(const decide_run *r, const char *canonical)
{
    for (size_t m = 0; m < r->cs.n_mounting; m++) {
        const abx_stmt *s = &r->p->allow[r->cs.mounting[m]];
        for (int a = 0; s->unsafe && a < ABX_ACC_IDX__N; a++)
            if (abx_pol_pattern_list_match(s->paths[a], s->n_paths[a], canonical, NULL))
                return true;
    }
    return false;
}

/* 2. protected areas, unless an unsafe mounting statement's scope names the path */
static bool step_protected(decide_run *r)
{
    abx_decision *d = r->d;
    for (size_t k = 0; k < d->n_paths; k++) {
        const abx_param *pa = param_of(r->op, d->paths[k].param);
        if (!abx_pol_protected_path(r->p, d->paths[k].canonical, pa->access) ||
            protection_waived(r, d->paths[k].canonical))
            continue;
        set_err(d, ABX_E_POLICY_PATH_DENIED,
                "path '%s' lies in a protected area (abx's own state): only an unsafe: true statement whose "
                "paths name it waives that",
                d->paths[k].param);
        snprintf(d->determining, sizeof d->determining, "protected");
        return false;
    }
    return true;
}

/* Every path value within the statement's patterns, for each access kind it needs. */
static bool paths_admitted(const decide_run *r, const abx_stmt *s, json_t *st, refusal *why)
{
    static const char *const kinds[] = {"paths.read", "paths.write", "paths.delete"};
    const abx_decision *d = r->d;
    for (size_t k = 0; k < d->n_paths; k++) {
        unsigned need = acc_bits_to_idx_mask(param_of(r->op, d->paths[k].param)->access);
        for (int a = 0; a < ABX_ACC_IDX__N; a++) {
            if (!(need & (1u << a)))
                continue;
            bool hit = abx_pol_pattern_list_match(s->paths[a], s->n_paths[a], d->paths[k].canonical, NULL);
            trace_check(st, kinds[a], d->paths[k].canonical, hit, NULL);
            if (!hit) {
                why->code = ABX_E_POLICY_PATH_NOT_ALLOWED;
                snprintf(why->msg, sizeof why->msg, "path '%s' is outside the allowed paths: %s of %s does not cover it",
                         d->paths[k].param, kinds[a], s->label);
                return false;
            }
        }
    }
    return true;
}

/* Every variable the call sets is on the statement's env allowlist. */
static bool env_admitted(const abx_stmt *s, const json_t *env, char *why, size_t whylen)
{
    const char *k;
    json_t *v;
    json_object_foreach((json_t *)env, k, v)
    {
        if (!name_in(s->env_allow, s->n_env, k)) {
            snprintf(why, whylen, "environment variable '%.100s' is not in the env allowlist of %s: add it to commands.env",
                     k, s->label);
            return false;
        }
    }
    return true;
}

/* The command (split or sh -c, program resolved) matches a pattern of the statement,
 * and its env is allowed; *av holds the argv the statement would run. */
static bool command_admitted(const decide_run *r, const abx_stmt *s, json_t *st, abx_argv *av, refusal *why)
{
    const cmd_input *ci = &r->ci;
    if (!r->has_cmd && !ci->env)
        return true;
    char msg[300] = "";
    bool ok = !r->has_cmd || build_argv(s, ci, av, msg, sizeof msg) == 0;
    if (!ok && strncmp(msg, "shell syntax", 12) == 0) /* what would change it */
        snprintf(msg + strlen(msg), sizeof msg - strlen(msg), " (%s: set commands.shell: true, or pass argv)",
                 s->label);
    else if (!ok)
        snprintf(msg + strlen(msg), sizeof msg - strlen(msg), " (%s: commands.path)", s->label);
    if (ok && r->has_cmd && !s->cmd_unrestricted) {
        ok = false;
        for (size_t k = 0; k < s->n_cmds && !ok; k++)
            ok = abx_cmd_pattern_match(&s->cmds[k], (const char *const *)av->v, av->n);
        if (!ok)
            snprintf(msg, sizeof msg, "the command matches no pattern of %s: add '%.100s' to commands.allow", s->label,
                     av->v[0]);
    }
    if (ok && ci->env && !s->cmd_unrestricted)
        ok = env_admitted(s, ci->env, msg, sizeof msg);
    trace_check(st, r->has_cmd ? "commands" : "commands.env", av->n ? av->v[0] : (ci->command ? ci->command : ""),
                ok, ok ? NULL : msg);
    if (!ok) {
        if (why->code != ABX_E_POLICY_PATH_NOT_ALLOWED) {
            why->code = ABX_E_POLICY_COMMAND_NOT_ALLOWED;
            snprintf(why->msg, sizeof why->msg, "%s", msg);
        }
        abx_argv_release(av);
    }
    return ok;
}

/* One url parameter: canonical, and matching one of the statement's url patterns. */
static bool url_admitted(const abx_stmt *s, json_t *st, const abx_param *pa, const char *value, refusal *why)
{
    char err[200];
    char *cu = abx_url_canon(value, err, sizeof err);
    bool ok = false;
    for (size_t k = 0; cu && k < s->n_urls && !ok; k++)
        ok = abx_url_match(s->urls[k], cu);
    trace_check(st, "urls", cu ? cu : value, ok, cu ? NULL : err);
    abx_free(cu);
    if (!ok) {
        why->code = ABX_E_POLICY_URL_NOT_ALLOWED;
        snprintf(why->msg, sizeof why->msg, "url '%s' is outside the allowed urls: add a pattern for it to urls of %s",
                 pa->name, s->label);
    }
    return ok;
}

/* url, language and agent values against the statement's lists. */
static bool values_admitted(const decide_run *r, const abx_stmt *s, json_t *st, refusal *why)
{
    for (size_t i = 0; i < r->op->n_params; i++) {
        const abx_param *pa = &r->op->def->params[i];
        const json_t *v = json_object_get(r->args, pa->name);
        if (pa->kind == ABX_KIND_PORT && json_is_integer(v)) {
            bool ok = false;
            for (size_t k = 0; k < s->n_ports && !ok; k++)
                ok = abx_pol_port_in(s->ports[k], (long)json_integer_value(v));
            char num[24];
            snprintf(num, sizeof num, "%lld", (long long)json_integer_value(v));
            trace_check(st, "ports", num, ok, NULL);
            if (!ok) {
                why->code = ABX_E_POLICY_PORT_NOT_ALLOWED;
                snprintf(why->msg, sizeof why->msg, "port %s is outside %s's ports scope", num, s->label);
                return false;
            }
            continue;
        }
        if (!json_is_string(v))
            continue;
        const char *value = json_string_value(v);
        if (pa->kind == ABX_KIND_URL && !url_admitted(s, st, pa, value, why))
            return false;
        if (pa->kind != ABX_KIND_LANGUAGE && pa->kind != ABX_KIND_AGENT)
            continue;
        bool lang = pa->kind == ABX_KIND_LANGUAGE;
        bool ok = lang ? name_in(s->languages, s->n_languages, value) : name_in(s->agents, s->n_agents, value);
        trace_check(st, lang ? "languages" : "agents", value, ok, NULL);
        if (!ok) {
            why->code = ABX_E_POLICY_LANGUAGE_NOT_ALLOWED;
            snprintf(why->msg, sizeof why->msg, "%s '%.60s' is not allowed: add it to %s of %s",
                     lang ? "language" : "agent", value, lang ? "languages" : "agents", s->label);
            return false;
        }
    }
    return true;
}

/* Does one mounting statement admit the call with all its scopes? */
static bool stmt_admits(const decide_run *r, const abx_stmt *s, json_t *st, abx_argv *av, refusal *why)
{
    const char *missing = abx_pol_scope_missing(s, r->op);
    if (missing) {
        trace_check(st, missing, NULL, false, "scope required");
        if (why->code == ABX_E_POLICY_SCOPE_REQUIRED)
            snprintf(why->msg, sizeof why->msg, "%s mounts '%s' but carries no '%s' scope: add a '%s' key to it",
                     s->label, r->op->id, missing, missing);
        return false;
    }
    return paths_admitted(r, s, st, why) && command_admitted(r, s, st, av, why) && values_admitted(r, s, st, why);
}

/* An admitting statement: every one determining, approval if any asks, tightest limits.
 * The process runs under one statement's confinement, whole (its argv, roots and
 * network): the first admitting statement that grants the network when any does, else
 * the first admitting one (an allowlist, net: {allow}, grants the network too: its
 * process gets out through the egress proxy to those hosts). So adding a statement never takes the network away from a
 * call it admits, and `curl URL` has the network exactly when `curl URL | cat` does
 * under a {shell: true, net: true} statement (issue 25). */
static void take_stmt(decide_run *r, uint16_t idx, json_t *st, abx_argv *av, bool *net_any)
{
    abx_decision *d = r->d;
    const abx_stmt *s = &r->p->allow[idx];
    bool net = s->has_net && (s->net || s->net_allow);
    if (st)
        json_object_set_new(st, "admits", json_true());
    if (d->chosen < 0 || (net && !*net_any)) {
        if (d->chosen >= 0)
            abx_argv_release(&d->argv);
        d->chosen = idx;
        d->argv = *av;
        *net_any = net;
    } else {
        abx_argv_release(av);
    }
    if (!d->admitting)
        d->admitting = abx_calloc(r->cs.n_mounting, sizeof *d->admitting);
    if (d->admitting)
        d->admitting[d->n_admitting++] = idx;
    append_label(d->determining, sizeof d->determining, s->label);
    if (s->approval)
        d->approval = true;
    for (int i = 0; i < ABX_LIM__COUNT; i++)
        if (s->limits[i] >= 0 && (d->limits[i] < 0 || s->limits[i] < d->limits[i]))
            d->limits[i] = s->limits[i];
}

/* 3. allow: admitted by at least one mounting statement with all its scopes; the
 * reason for a refusal is the most specific one found */
static bool step_allow(decide_run *r)
{
    refusal why = {ABX_E_POLICY_SCOPE_REQUIRED, ""};
    bool net_any = false;
    for (size_t m = 0; m < r->cs.n_mounting; m++) {
        const abx_stmt *s = &r->p->allow[r->cs.mounting[m]];
        json_t *st = trace_stmt(r->trace, s);
        abx_argv av = {0};
        if (stmt_admits(r, s, st, &av, &why))
            take_stmt(r, r->cs.mounting[m], st, &av, &net_any);
        else
            abx_argv_release(&av);
    }
    if (r->d->chosen < 0) {
        set_err(r->d, why.code, "%s", why.msg[0] ? why.msg : "no statement admits the call");
        return false;
    }
    /* the chosen statement's network, whole: the host network, its allowlist, or none */
    const abx_stmt *c = &r->p->allow[r->d->chosen];
    r->d->net = c->has_net && c->net;
    if (!r->d->net && c->net_allow) {
        r->d->net_allow = c->net_allow;
        r->d->net_stmt = c->label;
        r->d->net_inject = c->net_inject;
        r->d->net_resolve = &r->p->egress_resolve;
    }
    return true;
}

/* 4. jail roots: for each path, the root of a matching pattern of the first admitting
 * statement (for the access kinds the parameter needs) */
static bool step_roots(decide_run *r)
{
    abx_decision *d = r->d;
    const abx_stmt *s = &r->p->allow[d->chosen];
    for (size_t k = 0; k < d->n_paths; k++) {
        abx_path_value *pv = &d->paths[k];
        unsigned need = acc_bits_to_idx_mask(param_of(r->op, pv->param)->access);
        const abx_pattern *hit = NULL;
        for (int a = 0; a < ABX_ACC_IDX__N && !hit; a++)
            if (need & (1u << a))
                abx_pol_pattern_list_match(s->paths[a], s->n_paths[a], pv->canonical, &hit);
        if (!hit) {
            set_err(d, ABX_E_SERVER_INTERNAL, "no jail root for '%s'", pv->param);
            return false;
        }
        const char *root = r->p->roots[hit->root];
        if (!abx_path_under(root, pv->canonical, &pv->rel)) {
            set_err(d, ABX_E_SERVER_INTERNAL, "path '%s' is not under its jail root", pv->param);
            return false;
        }
        pv->root = root;
        pv->rootfd = r->p->rootfds[hit->root];
        if (pv->rootfd < 0) { /* the root did not exist at compile time: try now, never an error here */
            int fd = abx_jail_open_root(root);
            if (fd >= 0) {
                pv->rootfd = fd;
                pv->own_fd = true;
            }
        }
    }
    return true;
}

void abx__decide(const abx_policy *p, int slot, const abx_op *op, size_t op_index, const json_t *args,
                 abx_decision *d, json_t *trace, bool lexical)
{
    decide_run r;
    decide_begin(&r, p, slot, op, args, d, trace);
    r.lexical = lexical;
    if (step_mounted(&r, op_index) && step_paths(&r) && step_in_scope(&r) && step_intrinsic(&r) && step_deny(&r) &&
        step_protected(&r) && step_allow(&r) && step_roots(&r))
        d->err = ABX_OK;
    finish_trace(trace, d);
}

void abx_decide(const abx_policy *p, int slot, const abx_op *op, size_t op_index, const json_t *args,
                abx_decision *d, json_t *trace)
{
    abx__decide(p, slot, op, op_index, args, d, trace, false);
}
