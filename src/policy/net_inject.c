/* net_inject.c — a statement's `net: {inject: [{host, header, value}]}` (issue 17): each
 * value is a template ("Bearer ${secret:NAME}") expanded against the config's secrets
 * here, at compile time, into the proxy's rules (sandbox/egress_tls.h); the secret values
 * a rule carries are what the proxy redacts in responses. Messages name the rule and the
 * secret, never a value. The allowlist half of `net:` is parsed beside it (stmt.c). */
#include "policy/internal.h"

#include "config/secrets.h"
#include "core/util.h"
#include "sandbox/egress_tls.h"

#include <stdio.h>
#include <string.h>

static void note_secret(const char *value, void *ctx)
{
    abx_egress_inject_secret(ctx, value);
}

static bool one_rule(cctx *c, abx_stmt *s, const json_t *r, size_t i)
{
    static const char *const keys[] = {"host", "header", "value", NULL};
    char what[64], err[300];
    snprintf(what, sizeof what, "net.inject[%zu]", i);
    int line = abx_pol_line_of(c, r, NULL);
    if (!json_is_object(r)) {
        abx_diag_add(c->d, "error", "config.invalid", line, "%s must be {host, header, value}", what);
        return false;
    }
    if (!abx_pol_check_keys(c, r, keys, what))
        return false;
    const char *host = json_string_value(json_object_get(r, "host"));
    const char *header = json_string_value(json_object_get(r, "header"));
    const char *tpl = json_string_value(json_object_get(r, "value"));
    if (!host || !header || !tpl) {
        abx_diag_add(c->d, "error", "config.invalid", line, "%s needs host, header and value (strings)", what);
        return false;
    }
    if (!s->net_inject && !(s->net_inject = abx_calloc(1, sizeof *s->net_inject)))
        return false;
    char *value = abx_secret_expand(tpl, c->in->secrets, note_secret, s->net_inject, err, sizeof err);
    if (!value) {
        abx_diag_add(c->d, "error", "config.bad_value", abx_pol_line_of(c, r, "value"), "%s value: %s", what, err);
        return false;
    }
    int rc = abx_egress_inject_add(s->net_inject, host, header, value, err, sizeof err);
    explicit_bzero(value, strlen(value));
    abx_free(value);
    if (rc < 0) {
        abx_diag_add(c->d, "error", "config.bad_value", line, "%s: %s", what, err);
        return false;
    }
    return true;
}

bool abx_pol_net_inject(cctx *c, abx_stmt *s, const json_t *net)
{
    const json_t *list = json_object_get(net, "inject");
    if (!list)
        return true;
    if (!json_is_array(list)) {
        abx_diag_add(c->d, "error", "config.invalid", abx_pol_line_of(c, net, "inject"),
                     "'net.inject' must be a list of {host, header, value}");
        return false;
    }
    for (size_t i = 0; i < json_array_size(list); i++)
        if (!one_rule(c, s, json_array_get(list, i), i))
            return false;
    return true;
}

void abx_pol_net_inject_free(abx_stmt *s)
{
    if (s->net_inject) {
        abx_egress_injects_free(s->net_inject);
        abx_free(s->net_inject);
        s->net_inject = NULL;
    }
}
