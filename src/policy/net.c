/* net.c — a statement's `net` (false, true, or {allow: [...]}: the egress allowlist of
 * docs/egress.md) and the config's `egress` section (the static resolver table). */
#include "policy/internal.h"
#include "core/util.h"
#include <stdio.h>
#include <string.h>

static bool parse_allowlist(cctx *c, abx_stmt *s, const json_t *stmt, const json_t *net)
{
    static const char *const keys[] = {"allow", "inject", NULL};
    if (!abx_pol_check_keys(c, net, keys, "net"))
        return false;
    const json_t *list = json_object_get(net, "allow");
    int line = abx_pol_line_of(c, stmt, "net");
    if (!json_is_array(list)) {
        abx_diag_add(c->d, "error", "config.bad_value", line, "%s: 'net' needs 'allow': a list of hosts", s->label);
        return false;
    }
    s->net_allow = abx_calloc(1, sizeof *s->net_allow);
    if (!s->net_allow) {
        abx_diag_add(c->d, "error", "config.internal", line, "out of memory");
        return false;
    }
    size_t i;
    const json_t *e;
    json_array_foreach(list, i, e)
    {
        char err[200], msg[200];
        if (!json_is_string(e)) {
            abx_diag_add(c->d, "error", "config.bad_value", line, "%s: net.allow entries are strings", s->label);
            return false;
        }
        const char *t = json_string_value(e);
        if (abx_egress_allow_add(s->net_allow, t, err, sizeof err) != 0) {
            abx_diag_add(c->d, "error", "config.bad_value", line, "%s: net.allow '%s': %s", s->label, t, err);
            return false;
        }
        if (abx_egress_lint(t, msg, sizeof msg))
            abx_diag_add(c->d, "warning", "config.broad_egress", line, "%s: net.allow '%s': %s", s->label, t, msg);
    }
    return abx_pol_net_inject(c, s, net); /* net.inject: net_inject.c */
}

bool abx_pol_parse_net(cctx *c, abx_stmt *s, const json_t *stmt)
{
    const json_t *net = json_object_get(stmt, "net");
    s->has_net = net != NULL;
    s->net = json_is_true(net);
    if (!net || json_is_boolean(net))
        return true;
    if (json_is_object(net))
        return parse_allowlist(c, s, stmt, net);
    abx_diag_add(c->d, "error", "config.bad_value", abx_pol_line_of(c, stmt, "net"),
                 "'net' must be a boolean or {allow: [hosts]}");
    return false;
}

void abx_pol_net_release(abx_stmt *s)
{
    if (!s->net_allow)
        return;
    abx_egress_allow_free(s->net_allow);
    abx_free(s->net_allow);
    s->net_allow = NULL;
}

/* egress: {resolve: {"host[:port]": "addr[,addr]" | [addr, ...]}} */
static bool add_pin(cctx *c, int line, const char *key, const json_t *v)
{
    char addrs[400] = "", spec[700], err[200];
    if (json_is_string(v)) {
        snprintf(addrs, sizeof addrs, "%s", json_string_value(v));
    } else if (json_is_array(v) && json_array_size(v) > 0) {
        size_t i;
        const json_t *a;
        json_array_foreach(v, i, a)
        {
            if (!json_is_string(a))
                break;
            size_t n = strlen(addrs);
            snprintf(addrs + n, sizeof addrs - n, "%s%s", n ? "," : "", json_string_value(a));
        }
    }
    if (!addrs[0]) {
        abx_diag_add(c->d, "error", "config.bad_value", line, "egress.resolve '%s': an address or a list of them", key);
        return false;
    }
    const char *colon = strrchr(key, ':');
    bool has_port = colon && !strchr(key, ']') && strchr(key, ':') == colon; /* host:port, not an IPv6 literal */
    snprintf(spec, sizeof spec, has_port ? "%s:%s" : "%s:*:%s", key, addrs);
    if (abx_egress_resolve_add(&c->p->egress_resolve, spec, err, sizeof err) != 0) {
        abx_diag_add(c->d, "error", "config.bad_value", line, "egress.resolve '%s': %s", key, err);
        return false;
    }
    return true;
}

bool abx_pol_parse_egress(cctx *c, const json_t *egress)
{
    static const char *const keys[] = {"resolve", "upstream_ca", "proxy_port", NULL}; /* config rows (config.c) */
    if (!egress)
        return true;
    if (!json_is_object(egress)) {
        abx_diag_add(c->d, "error", "config.invalid", abx_pol_line_of(c, egress, NULL), "'egress' must be a mapping");
        return false;
    }
    if (!abx_pol_check_keys(c, egress, keys, "egress"))
        return false;
    const json_t *res = json_object_get(egress, "resolve");
    if (!res)
        return true;
    int line = abx_pol_line_of(c, egress, "resolve");
    if (!json_is_object(res)) {
        abx_diag_add(c->d, "error", "config.bad_value", line, "egress.resolve must map host names to addresses");
        return false;
    }
    const char *k;
    const json_t *v;
    json_object_foreach((json_t *)res, k, v) if (!add_pin(c, line, k, v)) return false;
    return true;
}
