/* explain.c — the decision trace of steps 3–8 for a (principal, op, args) triple,
 * without running anything (step 9). Used by `abx explain`, POST /explain, the
 * config's policy tests and check-config. The trace is produced by the same
 * abx_decide() the pipeline uses, so explain can never disagree with a real call. */
#include "pipeline/pipeline.h"
#include <string.h>

static json_t *str_list(char *const *v, size_t n)
{
    json_t *a = json_array();
    for (size_t i = 0; i < n; i++)
        json_array_append_new(a, json_string(v[i]));
    return a;
}

/* What a process the call starts gets: the statement whose confinement applies
 * (decide.c take_stmt), its roots, the masks, the network and the limits (the tier is
 * added by the caller that knows the sandbox). Only for ops that start processes. */
static void add_confinement(json_t *trace, const abx_policy *p, int slot, const abx_op *op, const abx_decision *d)
{
    if (d->err || d->chosen < 0 || !(op->effects & ABX_EFF_EXEC))
        return;
    abx_fs_view v;
    json_t *c = json_object();
    json_object_set_new(c, "statement", json_string(p->allow[d->chosen].label));
    json_object_set_new(c, "net", json_boolean(d->net));
    if (abx_policy_fs_view(p, slot, op, d, &v) == 0) {
        json_object_set_new(c, "read_roots", str_list(v.ro, v.n_ro));
        json_object_set_new(c, "write_roots", str_list(v.rw, v.n_rw));
        json_object_set_new(c, "masks", str_list(v.masks, v.n_masks));
        json_object_set_new(c, "readonly", str_list(v.readonly, v.n_readonly));
        abx_fs_view_release(&v);
    }
    json_t *lim = json_object_get(trace, "limits");
    json_object_set(c, "limits", lim ? lim : json_object());
    json_object_set_new(trace, "confinement", c);
}

json_t *abx_explain(const abx_policy *p, const abx_registry *reg, const char *principal, const char *op_name,
                    const json_t *args)
{
    json_t *trace = json_object();
    int slot = principal && strcmp(principal, "anonymous") != 0 ? abx_policy_principal_slot(p, principal)
                                                                : (int)p->n_principals;
    if (slot < 0) {
        json_object_set_new(trace, "decision", json_string("unknown_principal"));
        json_object_set_new(trace, "message", json_sprintf("no principal '%s' in the config", principal));
        return trace;
    }
    const abx_op *op = op_name ? abx_registry_resolve(reg, op_name) : NULL;
    if (!op) {
        json_object_set_new(trace, "principal", json_string(abx_policy_principal_id(p, slot)));
        json_object_set_new(trace, "op", json_string(op_name ? op_name : ""));
        json_object_set_new(trace, "decision", json_string("not_mounted"));
        json_object_set_new(trace, "code", json_string("op.not_enabled"));
        json_object_set_new(trace, "message", json_string("no such operation"));
        return trace;
    }
    size_t idx = abx_registry_index_of(reg, op);
    json_t *a = args ? json_deep_copy(args) : json_object();
    char msg[300];
    abx_err e = abx_policy_mounted(p, slot, idx) ? abx_args_validate(op, a, msg, sizeof msg) : ABX_OK;
    json_object_set_new(trace, "args", a);
    if (e) {
        json_object_set_new(trace, "op", json_string(op->id));
        json_object_set_new(trace, "principal", json_string(abx_policy_principal_id(p, slot)));
        json_object_set_new(trace, "decision", json_string("invalid"));
        json_object_set_new(trace, "code", json_string(abx_err_code(e)));
        json_object_set_new(trace, "message", json_string(msg));
        return trace;
    }
    abx_decision d;
    abx_decide(p, slot, op, idx, a, &d, trace);
    add_confinement(trace, p, slot, op, &d);
    if (d.err == ABX_OK && (d.approval || op->def->requires_approval))
        json_object_set_new(trace, "decision", json_string("approval"));
    abx_decision_release(&d);
    return trace;
}

/* Print a trace for people (abx explain, failed policy tests). Caller frees. */
char *abx_explain_text(const json_t *t)
{
    abx_buf b;
    abx_buf_init(&b, 0);
    abx_buf_printf(&b, "op %s, principal %s\n", json_string_value(json_object_get(t, "op")) ?: "?",
                   json_string_value(json_object_get(t, "principal")) ?: "?");
    const json_t *m = json_object_get(t, "mounting");
    if (m) {
        abx_buf_puts(&b, "  mounted by:");
        size_t i;
        json_t *v;
        json_array_foreach(m, i, v) abx_buf_printf(&b, " %s", json_string_value(v));
        abx_buf_puts(&b, json_array_size(m) ? "\n" : " (none)\n");
    }
    const json_t *dh = json_object_get(t, "deny_hits");
    size_t i;
    json_t *v;
    json_array_foreach(dh, i, v) abx_buf_printf(&b, "  deny hit: %s\n", json_string_value(v));
    json_array_foreach(json_object_get(t, "paths"), i, v)
        abx_buf_printf(&b, "  path %s = %s\n", json_string_value(json_object_get(v, "param")),
                       json_string_value(json_object_get(v, "canonical")));
    json_array_foreach(json_object_get(t, "statements"), i, v)
    {
        abx_buf_printf(&b, "  %s (line %lld): %s\n", json_string_value(json_object_get(v, "statement")),
                       (long long)json_integer_value(json_object_get(v, "line")),
                       json_is_true(json_object_get(v, "admits")) ? "admits" : "does not admit");
        size_t k;
        json_t *c;
        json_array_foreach(json_object_get(v, "checks"), k, c)
        {
            const char *why = json_string_value(json_object_get(c, "why"));
            abx_buf_printf(&b, "    %s %s: %s%s%s\n", json_string_value(json_object_get(c, "scope")),
                           json_string_value(json_object_get(c, "value")),
                           json_string_value(json_object_get(c, "verdict")), why ? " — " : "", why ? why : "");
        }
    }
    const json_t *lim = json_object_get(t, "limits");
    const char *k;
    json_object_foreach((json_t *)lim, k, v) abx_buf_printf(&b, "  limit %s = %lld\n", k,
                                                             (long long)json_integer_value(v));
    const json_t *conf = json_object_get(t, "confinement");
    if (conf) {
        abx_buf_printf(&b, "  confinement (%s): network %s, tier %s\n",
                       json_string_value(json_object_get(conf, "statement")) ?: "?",
                       json_is_true(json_object_get(conf, "net")) ? "on" : "off",
                       json_string_value(json_object_get(conf, "tier")) ?: "?");
        static const char *const lists[] = {"read_roots", "write_roots", "masks", "readonly"};
        for (size_t l = 0; l < sizeof lists / sizeof *lists; l++)
            json_array_foreach(json_object_get(conf, lists[l]), i, v)
                abx_buf_printf(&b, "    %s %s\n", lists[l], json_string_value(v));
    }
    const char *code = json_string_value(json_object_get(t, "code"));
    const char *message = json_string_value(json_object_get(t, "message"));
    abx_buf_printf(&b, "decision: %s%s%s%s%s\n", json_string_value(json_object_get(t, "decision")) ?: "?",
                   code ? " (" : "", code ? code : "", code ? ")" : "", "");
    if (message && code)
        abx_buf_printf(&b, "  %s\n", message);
    const char *det = json_string_value(json_object_get(t, "determining"));
    if (det && *det)
        abx_buf_printf(&b, "determining: %s\n", det);
    const json_t *net = json_object_get(t, "net");
    if (json_is_string(net))
        abx_buf_printf(&b, "net: %s\n", json_string_value(net));
    else if (net)
        abx_buf_printf(&b, "net: allowlist of %s\n", json_string_value(json_object_get(net, "allowlist")) ?: "?");
    const json_t *nh = json_object_get(t, "net_host");
    if (nh) {
        const char *rule = json_string_value(json_object_get(nh, "rule"));
        const char *reason = json_string_value(json_object_get(nh, "reason"));
        abx_buf_printf(&b, "net host %s:%lld: %s%s%s%s%s\n", json_string_value(json_object_get(nh, "host")) ?: "?",
                       (long long)json_integer_value(json_object_get(nh, "port")),
                       json_string_value(json_object_get(nh, "decision")) ?: "?", rule ? " by " : "", rule ? rule : "",
                       reason && *reason ? " — " : "", reason && *reason ? reason : "");
    }
    return abx_buf_detach(&b);
}
