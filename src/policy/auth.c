/* auth.c — the `auth` block: principals, their roles and token sources (an env
 * variable, a file, a literal for tests), hashed at compile time, and the ops
 * anonymous callers may mount. */
#include "policy/internal.h"
#include "core/util.h"
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

static bool read_token_source(cctx *c, const json_t *t, int line, unsigned char sha[32], bool *has, char **keep)
{
    const json_t *hex = json_object_get(t, "token_sha256"), *env = json_object_get(t, "token_env"),
                 *file = json_object_get(t, "token_file"), *plain = json_object_get(t, "token");
    int n = !!hex + !!env + !!file + !!plain;
    *has = false;
    if (n != 1) {
        abx_diag_add(c->d, "error", "config.invalid", line,
                     "a token needs exactly one of token_sha256, token_env, token_file, token");
        return false;
    }
    if (hex) {
        const char *h = json_is_string(hex) ? json_string_value(hex) : "";
        if (strlen(h) != 64 || abx_unhex(h, 64, sha, 32) != 32) {
            abx_diag_add(c->d, "error", "config.bad_value", line, "token_sha256 must be 64 hex digits");
            return false;
        }
        *has = true;
        return true;
    }
    char *secret = NULL;
    if (env) {
        const char *v = json_is_string(env) ? getenv(json_string_value(env)) : NULL;
        if (!v || !*v) {
            abx_diag_add(c->d, "error", "config.token_unavailable", line, "environment variable '%s' is not set",
                         json_is_string(env) ? json_string_value(env) : "?");
            return false;
        }
        secret = abx_strdup(v);
    } else if (file) {
        const char *path = json_is_string(file) ? json_string_value(file) : "";
        FILE *f = fopen(path, "re");
        char buf[4096];
        size_t got = f ? fread(buf, 1, sizeof buf - 1, f) : 0;
        if (f)
            fclose(f);
        if (!f || got == 0) {
            abx_diag_add(c->d, "error", "config.token_unavailable", line, "cannot read token_file '%s'", path);
            return false;
        }
        abx_pol_add_protected(c->p, path, "a principal's token_file");
        buf[got] = '\0';
        while (got && (buf[got - 1] == '\n' || buf[got - 1] == '\r' || buf[got - 1] == ' '))
            buf[--got] = '\0';
        secret = abx_strdup(buf);
    } else {
        abx_diag_add(c->d, "warning", "config.plaintext_token", line,
                     "token in plain text; prefer token_sha256, token_env or token_file");
        secret = abx_strdup(json_is_string(plain) ? json_string_value(plain) : "");
    }
    if (!secret || strlen(secret) < 16) {
        abx_diag_add(c->d, "error", "config.weak_token", line, "a token must have at least 16 characters");
        abx_free(secret);
        return false;
    }
    abx_sha256 h;
    abx_sha256_init(&h);
    abx_sha256_update(&h, secret, strlen(secret));
    abx_sha256_final(&h, sha);
    if (c->in->keep_sign_secrets) {
        *keep = secret; /* the e2b door checks pre-signed URLs against it */
    } else {
        explicit_bzero(secret, strlen(secret));
        abx_free(secret);
    }
    *has = true;
    return true;
}

/* The embedded default's principal: `local`, role owner, the token in $ABX_HOME/token. */
static void add_local(cctx *c, size_t slots)
{
    abx_policy *p = c->p;
    p->principals = abx_calloc(slots, sizeof *p->principals);
    if (!p->principals)
        return;
    p->principals[0].id = abx_strdup("local");
    p->principals[0].roles = abx_calloc(1, sizeof(char *));
    if (p->principals[0].roles) {
        p->principals[0].roles[0] = abx_strdup("owner");
        p->principals[0].n_roles = 1;
    }
    abx_unhex(c->in->default_token_sha256_hex, 64, p->principals[0].token_sha256, 32);
    p->principals[0].has_token = true;
    if (c->in->keep_sign_secrets && c->in->default_token)
        p->principals[0].sign_secret = abx_strdup(c->in->default_token);
    p->n_principals = 1;
}

bool abx_pol_parse_auth(cctx *c, const json_t *auth, json_t **anon_ops)
{
    abx_policy *p = c->p;
    static const char *const keys[] = {"tokens", "anonymous", NULL};
    *anon_ops = NULL;
    if (!auth) {
        if (c->in->default_token_sha256_hex)
            add_local(c, 1);
        return true;
    }
    if (!json_is_object(auth)) {
        abx_diag_add(c->d, "error", "config.invalid", abx_pol_line_of(c, auth, NULL), "'auth' must be a mapping");
        return false;
    }
    if (!abx_pol_check_keys(c, auth, keys, "auth"))
        return false;
    const json_t *tokens = json_object_get(auth, "tokens");
    if (tokens && !json_is_array(tokens)) {
        abx_diag_add(c->d, "error", "config.invalid", abx_pol_line_of(c, auth, "tokens"),
                     "'auth.tokens' must be a list");
        return false;
    }
    size_t n = json_array_size(tokens);
    if (c->in->default_token_sha256_hex) /* extends: default — local first, then the file's */
        add_local(c, n + 2);
    else
        p->principals = abx_calloc(n + 1, sizeof *p->principals);
    static const char *const tkeys[] = {"principal", "roles", "token_sha256", "token_env", "token_file", "token",
                                        "expires_at", NULL};
    for (size_t i = 0; i < n; i++) {
        const json_t *t = json_array_get(tokens, i);
        int line = abx_pol_line_of(c, t, NULL);
        if (!json_is_object(t)) {
            abx_diag_add(c->d, "error", "config.invalid", line, "auth.tokens[%zu] must be a mapping", i);
            return false;
        }
        if (!abx_pol_check_keys(c, t, tkeys, "auth.tokens[]"))
            return false;
        const json_t *pid = json_object_get(t, "principal");
        if (!json_is_string(pid) || !*json_string_value(pid) || strncmp(json_string_value(pid), "role:", 5) == 0 ||
            strcmp(json_string_value(pid), "*") == 0 || strcmp(json_string_value(pid), "anonymous") == 0) {
            abx_diag_add(c->d, "error", "config.invalid", line, "auth.tokens[%zu] needs a plain 'principal' id", i);
            return false;
        }
        abx_principal *pr = NULL;
        for (size_t k = 0; k < p->n_principals; k++)
            if (strcmp(p->principals[k].id, json_string_value(pid)) == 0) {
                abx_diag_add(c->d, "error", "config.duplicate_principal", line,
                             "principal '%s' has more than one token entry", json_string_value(pid));
                return false;
            }
        pr = &p->principals[p->n_principals++];
        pr->id = abx_strdup(json_string_value(pid));
        if (!abx_pol_strlist(c, t, "roles", &pr->roles, &pr->n_roles))
            return false;
        if (!read_token_source(c, t, line, pr->token_sha256, &pr->has_token, &pr->sign_secret))
            return false;
        for (size_t k = 0; k + 1 < p->n_principals; k++)
            if (p->principals[k].has_token && abx_ct_equal(p->principals[k].token_sha256, pr->token_sha256, 32)) {
                abx_diag_add(c->d, "error", "config.duplicate_token", line,
                             "principals '%s' and '%s' have the same token", p->principals[k].id, pr->id);
                return false;
            }
        const json_t *exp = json_object_get(t, "expires_at");
        if (exp) {
            struct tm tm = {0};
            const char *s = json_is_string(exp) ? json_string_value(exp) : "";
            const char *end = strptime(s, "%Y-%m-%dT%H:%M:%S", &tm);
            if (!end || (*end && strcmp(end, "Z") != 0)) {
                abx_diag_add(c->d, "error", "config.bad_value", abx_pol_line_of(c, t, "expires_at"),
                             "expires_at must read YYYY-MM-DDTHH:MM:SSZ (UTC)");
                return false;
            }
            pr->expires_at_ms = (int64_t)timegm(&tm) * 1000;
        }
    }
    *anon_ops = json_object_get(auth, "anonymous");
    return true;
}
