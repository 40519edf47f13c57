/* config.c — top-level config keys as a table, validated by generic code. Unknown
 * keys are errors; keys of features this build does not have are errors too (never
 * accepted and ignored: a silent no-op in a security config is a lie). */
#include "config/config.h"
#include "core/yaml.h"
#include "core/util.h"
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <pwd.h>
#include <unistd.h>

enum vkind { V_STRING, V_BOOL, V_STRLIST, V_MAP, V_LIMITS, V_TLS, V_LIST };

static const struct {
    const char *key;
    enum vkind kind;
    const char *doc;
} keys[] = {
    {"listen", V_STRING, "main listener host:port"},
    {"workspace", V_STRING, "default root for presets and relative paths"},
    {"allowed_hosts", V_STRLIST, "Host header values accepted besides loopback"},
    {"allowed_origins", V_STRLIST, "Origin header values accepted"},
    {"tls", V_TLS, "{cert, key} for a non-loopback listener"},
    {"allow_plaintext", V_BOOL, "allow a non-loopback listener without TLS"},
    {"allow_lint_errors", V_BOOL, "start despite lint errors"},
    {"limits", V_LIMITS, "listener limits"},
    {"auth", V_MAP, "principals and credentials"},
    {"policy", V_MAP, "allow and deny statements"},
    {"terminal_listen", V_STRING, "WebSocket terminal listener host:port (port 0 = any; \"off\" = none)"},
    {"confine", V_STRING, "kernel confinement mode: required | best_effort"},
    {"run_as", V_STRING, "uid:gid (or user name) of spawned processes; auto = the workspace's owner"},
    {"ledger", V_MAP, "the action ledger: {path, synchronous: normal|full, enabled, retention, max_size}"},
    {"system", V_MAP, "system.* settings: {env: [NAMES]}"},
    {"custom", V_LIST, "declarative commands, compiled to ops custom.<name> (docs/custom-ops.md)"},
    {"load", V_STRLIST, "plugins (\"name\" → <plugin_dir>/name.so) and Python op workers (\"python:pkg.module\")"},
    {"plugin_dir", V_STRING, "folder of the plugins named in load (default: plugins beside the config file)"},
    {"python", V_STRING, "interpreter of Python op workers (default /usr/bin/python3)"},
    {"python_isolation", V_STRING, "Python op workers: shared (one confined process per module) | per_call"},
    {"tests", V_LIST, "policy tests: [{principal, op, args, expect}]"},
};

bool abx_host_is_loopback(const char *host)
{
    return strcmp(host, "localhost") == 0 || strncmp(host, "127.", 4) == 0 || strcmp(host, "::1") == 0 ||
           strcmp(host, "[::1]") == 0;
}

bool abx_parse_listen(const char *s, char **host, int *port)
{
    const char *colon;
    char *h;
    if (s[0] == '[') {
        const char *rb = strchr(s, ']');
        if (!rb || rb[1] != ':')
            return false;
        h = abx_strndup(s + 1, (size_t)(rb - s - 1));
        colon = rb + 1;
    } else {
        colon = strrchr(s, ':');
        if (!colon || colon == s)
            return false;
        h = abx_strndup(s, (size_t)(colon - s));
    }
    char *end;
    errno = 0;
    long p = strtol(colon + 1, &end, 10);
    if (!h || errno || *end || colon[1] == '\0' || p < 0 || p > 65535) {
        abx_free(h);
        return false;
    }
    *host = h;
    *port = (int)p;
    return true;
}

static int line_of(const abx_config *c, const char *key)
{
    return c->lines ? abx_linemap_key_line(c->lines, c->root, key) : 0;
}

static bool get_strlist(abx_config *c, const char *key, char ***out, size_t *n, abx_diags *d)
{
    const json_t *v = json_object_get(c->root, key);
    *out = NULL;
    *n = 0;
    if (!v)
        return true;
    if (!json_is_array(v)) {
        abx_diag_add(d, "error", "config.invalid", line_of(c, key), "'%s' must be a list of strings", key);
        return false;
    }
    *out = abx_calloc(json_array_size(v) + 1, sizeof **out);
    size_t i;
    json_t *it;
    json_array_foreach(v, i, it)
    {
        if (!json_is_string(it)) {
            abx_diag_add(d, "error", "config.invalid", line_of(c, key), "'%s' must contain only strings", key);
            return false;
        }
        (*out)[(*n)++] = abx_strdup(json_string_value(it));
    }
    return true;
}

static bool load_limits(abx_config *c, abx_diags *d)
{
    const json_t *v = json_object_get(c->root, "limits");
    if (!v)
        return true;
    if (!json_is_object(v)) {
        abx_diag_add(d, "error", "config.invalid", line_of(c, "limits"), "'limits' must be a mapping");
        return false;
    }
    const char *k;
    json_t *val;
    json_object_foreach((json_t *)v, k, val)
    {
        int line = c->lines ? abx_linemap_key_line(c->lines, v, k) : 0;
        char num[32];
        const char *text = json_is_string(val) ? json_string_value(val) : NULL;
        if (!text && json_is_integer(val)) {
            snprintf(num, sizeof num, "%lld", (long long)json_integer_value(val));
            text = num;
        }
        int64_t x = -1;
        if (strcmp(k, "request_max_bytes") == 0 || strcmp(k, "upload_max_bytes") == 0) {
            x = text ? abx_parse_size(text) : -1;
            if (x <= 0) {
                abx_diag_add(d, "error", "config.bad_value", line, "'limits.%s' must be a size such as 16MiB", k);
                return false;
            }
            if (k[0] == 'r')
                c->request_max_bytes = x;
            else
                c->upload_max_bytes = x;
        } else if (strcmp(k, "header_bytes") == 0) {
            /* the ceiling stays under libmicrohttpd's per-connection memory (128 KiB), which
             * must also hold the read buffer: past it MHD would answer by itself */
            x = text ? abx_parse_size(text) : -1;
            if (x < 1024 || x > 64 * 1024) {
                abx_diag_add(d, "error", "config.bad_value", line, "'limits.header_bytes' must be a size 1KiB..64KiB");
                return false;
            }
            c->header_bytes = x;
        } else if (strcmp(k, "headers") == 0) {
            if (!json_is_integer(val) || json_integer_value(val) < 8 || json_integer_value(val) > 1000) {
                abx_diag_add(d, "error", "config.bad_value", line, "'limits.headers' must be 8..1000");
                return false;
            }
            c->header_count = (int)json_integer_value(val);
        } else if (strcmp(k, "connections") == 0) {
            if (!json_is_integer(val) || json_integer_value(val) < 1 || json_integer_value(val) > 100000) {
                abx_diag_add(d, "error", "config.bad_value", line, "'limits.connections' must be 1..100000");
                return false;
            }
            c->connections = (int)json_integer_value(val);
        } else if (strcmp(k, "connections_per_address") == 0 || strcmp(k, "workers") == 0) {
            bool per = k[0] == 'c';
            json_int_t hi = per ? 100000 : 1024;
            if (!json_is_integer(val) || json_integer_value(val) < 1 || json_integer_value(val) > hi) {
                abx_diag_add(d, "error", "config.bad_value", line, "'limits.%s' must be 1..%lld", k, (long long)hi);
                return false;
            }
            *(per ? &c->connections_per_address : &c->workers) = (int)json_integer_value(val);
        } else if (strcmp(k, "read_timeout") == 0) {
            x = text ? abx_parse_duration_ms(text) : -1;
            if (x < 100 || x > 600000) {
                abx_diag_add(d, "error", "config.bad_value", line, "'limits.read_timeout' must be 0.1s..10m");
                return false;
            }
            c->read_timeout_ms = x;
        } else if (strcmp(k, "approval_ttl") == 0) {
            x = text ? abx_parse_duration_ms(text) : -1;
            if (x < 1000 || x > 7LL * 24 * 3600 * 1000) {
                abx_diag_add(d, "error", "config.bad_value", line, "'limits.approval_ttl' must be 1s..7d");
                return false;
            }
            c->approval_ttl_ms = x;
        } else if (strcmp(k, "auth_failures") == 0) {
            if (!json_is_integer(val) || json_integer_value(val) < 10 || json_integer_value(val) > 1000000) {
                abx_diag_add(d, "error", "config.bad_value", line, "'limits.auth_failures' must be 10..1000000");
                return false;
            }
            c->auth_failures = (int)json_integer_value(val);
        } else {
            abx_diag_add(d, "error", "config.unknown_key", line,
                         "unknown key 'limits.%s' (request_max_bytes, upload_max_bytes, header_bytes, headers, "
                         "connections, connections_per_address, workers, read_timeout, approval_ttl, auth_failures)", k);
            return false;
        }
    }
    return true;
}

static void set_defaults(abx_config *c)
{
    c->listen_host = abx_strdup("127.0.0.1");
    c->listen_port = 8080;
    c->terminal_host = abx_strdup("127.0.0.1");
    c->terminal_port = 9001;
    c->request_max_bytes = 16 * 1024 * 1024;
    c->approval_ttl_ms = 15 * 60 * 1000;
    c->auth_failures = 100;
    c->upload_max_bytes = 4LL * 1024 * 1024 * 1024;
    c->connections = 4096;
    c->connections_per_address = 256;
    c->workers = 64;
    c->header_bytes = 16 * 1024;
    c->header_count = 100;
    c->read_timeout_ms = 3000;
}

static const char *const default_system_env[] = {"LANG", "TZ"};

static void default_env(abx_config *c)
{
    c->system_env = abx_calloc(ABX_ARRAY_LEN(default_system_env) + 1, sizeof *c->system_env);
    for (size_t i = 0; c->system_env && i < ABX_ARRAY_LEN(default_system_env); i++)
        c->system_env[c->n_system_env++] = abx_strdup(default_system_env[i]);
}

int abx_config_load(abx_config *c, const char *path, abx_diags *d)
{
    memset(c, 0, sizeof *c);
    set_defaults(c);
    size_t errors_before = d->errors;
    if (!path) {
        c->root = json_object();
        default_env(c);
        return 0;
    }
    c->path = abx_strdup(path);
    FILE *f = fopen(path, "re");
    if (!f) {
        abx_diag_add(d, "error", "config.unreadable", 0, "cannot open %s: %s", path, strerror(errno));
        goto fail;
    }
    abx_buf b;
    abx_buf_init(&b, 4 * 1024 * 1024);
    char chunk[8192];
    size_t got;
    while ((got = fread(chunk, 1, sizeof chunk, f)) > 0)
        if (!abx_buf_append(&b, chunk, got))
            break;
    bool too_big = b.failed;
    fclose(f);
    if (too_big) {
        abx_buf_release(&b);
        abx_diag_add(d, "error", "config.too_large", 0, "%s is larger than 4 MiB", path);
        goto fail;
    }
    char err[300];
    int eline = 0;
    c->root = abx_yaml_load(b.data ? b.data : "", b.len, &c->lines, err, sizeof err, &eline);
    abx_buf_release(&b);
    if (!c->root) {
        abx_diag_add(d, "error", "config.syntax", eline, "%s", err);
        goto fail;
    }
    if (!json_is_object(c->root)) {
        abx_diag_add(d, "error", "config.invalid", 1, "the config must be a mapping of keys");
        goto fail;
    }
    const char *k;
    json_t *v;
    json_object_foreach(c->root, k, v)
    {
        int line = line_of(c, k);
        size_t i;
        for (i = 0; i < ABX_ARRAY_LEN(keys); i++)
            if (strcmp(keys[i].key, k) == 0)
                break;
        if (i == ABX_ARRAY_LEN(keys)) {
            abx_diag_add(d, "error", "config.unknown_key", line, "unknown key '%s'", k);
            continue;
        }
        switch (keys[i].kind) {
        case V_STRING:
            if (!json_is_string(v))
                abx_diag_add(d, "error", "config.invalid", line, "'%s' must be a string", k);
            break;
        case V_BOOL:
            if (!json_is_boolean(v))
                abx_diag_add(d, "error", "config.invalid", line, "'%s' must be true or false", k);
            break;
        case V_MAP:
        case V_LIMITS:
        case V_TLS:
            if (!json_is_object(v))
                abx_diag_add(d, "error", "config.invalid", line, "'%s' must be a mapping", k);
            break;
        case V_STRLIST:
            break;
        case V_LIST:
            if (!json_is_array(v))
                abx_diag_add(d, "error", "config.invalid", line, "'%s' must be a list", k);
            break;
        }
    }
    if (d->errors > errors_before)
        goto fail;
    const json_t *listen = json_object_get(c->root, "listen");
    if (listen) {
        abx_free(c->listen_host);
        c->listen_host = NULL;
        if (!abx_parse_listen(json_string_value(listen), &c->listen_host, &c->listen_port)) {
            abx_diag_add(d, "error", "config.bad_value", line_of(c, "listen"), "'listen' must read HOST:PORT");
            goto fail;
        }
    }
    const json_t *tl = json_object_get(c->root, "terminal_listen");
    if (tl) {
        abx_free(c->terminal_host);
        c->terminal_host = NULL;
        if (strcmp(json_string_value(tl), "off") == 0)
            c->terminal_port = -1;
        else if (!abx_parse_listen(json_string_value(tl), &c->terminal_host, &c->terminal_port)) {
            abx_diag_add(d, "error", "config.bad_value", line_of(c, "terminal_listen"),
                         "'terminal_listen' must read HOST:PORT or off");
            goto fail;
        }
    }
    const json_t *ws = json_object_get(c->root, "workspace");
    if (ws) {
        const char *w = json_string_value(ws);
        if (w[0] != '/') {
            abx_diag_add(d, "error", "config.bad_value", line_of(c, "workspace"), "'workspace' must be absolute");
            goto fail;
        }
        c->workspace = abx_strdup(w);
    }
    if (!get_strlist(c, "allowed_hosts", &c->allowed_hosts, &c->n_allowed_hosts, d) ||
        !get_strlist(c, "allowed_origins", &c->allowed_origins, &c->n_allowed_origins, d) || !load_limits(c, d))
        goto fail;
    const json_t *tls = json_object_get(c->root, "tls");
    if (tls) {
        const json_t *cert = json_object_get(tls, "cert"), *key = json_object_get(tls, "key");
        if (!json_is_string(cert) || !json_is_string(key) || json_object_size(tls) != 2) {
            abx_diag_add(d, "error", "config.invalid", line_of(c, "tls"), "'tls' must be {cert: FILE, key: FILE}");
            goto fail;
        }
        c->tls_cert = abx_strdup(json_string_value(cert));
        c->tls_key = abx_strdup(json_string_value(key));
    }
    const json_t *confine = json_object_get(c->root, "confine");
    if (confine) {
        const char *cv = json_string_value(confine);
        if (strcmp(cv, "required") != 0 && strcmp(cv, "best_effort") != 0) {
            abx_diag_add(d, "error", "config.bad_value", line_of(c, "confine"), "'confine' must be required or best_effort");
            goto fail;
        }
        c->confine_set = true;
        c->confine_required = strcmp(cv, "required") == 0;
    }
    const json_t *run_as = json_object_get(c->root, "run_as");
    if (run_as && strcmp(json_string_value(run_as), "auto") != 0) {
        const char *rv = json_string_value(run_as);
        unsigned uid, gid;
        char extra;
        struct passwd *pw;
        if (sscanf(rv, "%u:%u%c", &uid, &gid, &extra) == 2) {
            c->run_uid = uid;
            c->run_gid = gid;
        } else if ((pw = getpwnam(rv)) != NULL) {
            c->run_uid = pw->pw_uid;
            c->run_gid = pw->pw_gid;
        } else {
            abx_diag_add(d, "error", "config.bad_value", line_of(c, "run_as"),
                         "'run_as' must be auto, UID:GID or an existing user name");
            goto fail;
        }
        c->run_as_set = true;
    }
    c->allow_plaintext = json_is_true(json_object_get(c->root, "allow_plaintext"));
    c->allow_lint_errors = json_is_true(json_object_get(c->root, "allow_lint_errors"));
    c->auth = json_object_get(c->root, "auth");
    c->policy = json_object_get(c->root, "policy");
    c->tests = json_object_get(c->root, "tests");
    c->custom = json_object_get(c->root, "custom");
    c->load = json_object_get(c->root, "load");
    {
        /* relative plugin_dir: beside the config file; default: <config folder>/plugins */
        const json_t *pd = json_object_get(c->root, "plugin_dir");
        const char *slash = strrchr(c->path, '/');
        char *dir = slash ? abx_strndup(c->path, (size_t)(slash - c->path)) : abx_strdup(".");
        if (dir && !*dir) {
            abx_free(dir);
            dir = abx_strdup("/");
        }
        char *real = dir ? realpath(dir, NULL) : NULL; /* absolute: workers chdir there */
        if (real) {
            abx_free(dir);
            dir = abx_strdup(real);
            free(real);
        }
        const char *pv = pd ? json_string_value(pd) : "plugins";
        c->plugin_dir = pv[0] == '/' ? abx_strdup(pv) : abx_asprintf("%s/%s", strcmp(dir, "/") ? dir : "", pv);
        c->config_dir = dir;
        const json_t *py = json_object_get(c->root, "python");
        c->python = abx_strdup(py ? json_string_value(py) : "/usr/bin/python3");
        const json_t *iso = json_object_get(c->root, "python_isolation");
        if (iso && strcmp(json_string_value(iso), "shared") != 0 && strcmp(json_string_value(iso), "per_call") != 0) {
            abx_diag_add(d, "error", "config.bad_value", line_of(c, "python_isolation"),
                         "'python_isolation' must be shared or per_call");
            goto fail;
        }
        c->python_per_call = iso && strcmp(json_string_value(iso), "per_call") == 0;
        if (py && json_string_value(py)[0] != '/') {
            abx_diag_add(d, "error", "config.bad_value", line_of(c, "python"), "'python' must be an absolute path");
            goto fail;
        }
    }
    const json_t *led = json_object_get(c->root, "ledger");
    if (led) {
        const char *lk;
        json_t *lv;
        json_object_foreach((json_t *)led, lk, lv)
        {
            int ll = c->lines ? abx_linemap_key_line(c->lines, led, lk) : 0;
            if (strcmp(lk, "path") == 0 && json_is_string(lv)) {
                abx_free(c->ledger_path);
                c->ledger_path = abx_strdup(json_string_value(lv));
            } else if (strcmp(lk, "synchronous") == 0 && json_is_string(lv) &&
                       (strcmp(json_string_value(lv), "normal") == 0 || strcmp(json_string_value(lv), "full") == 0)) {
                c->ledger_sync_full = strcmp(json_string_value(lv), "full") == 0;
            } else if (strcmp(lk, "enabled") == 0 && json_is_boolean(lv)) {
                c->ledger_off = !json_is_true(lv);
            } else if (strcmp(lk, "retention") == 0 || strcmp(lk, "max_size") == 0) {
                bool ret = strcmp(lk, "retention") == 0;
                int64_t n = json_is_string(lv) ? (ret ? abx_parse_duration_ms(json_string_value(lv))
                                                     : abx_parse_size(json_string_value(lv)))
                                               : json_is_integer(lv) && !ret ? json_integer_value(lv) : -1;
                int64_t min = ret ? 1000 : 64 * 1024; /* an empty segment is ~32 KiB */
                if (n < min) {
                    abx_diag_add(d, "error", "config.bad_value", ll,
                                 ret ? "ledger.retention must be a duration of at least 1s (\"30d\", \"12h\")"
                                     : "ledger.max_size must be a size of at least 64KiB (\"256MiB\")");
                    goto fail;
                }
                if (ret)
                    c->ledger_retention_ms = n;
                else
                    c->ledger_max_size = n;
            } else {
                abx_diag_add(d, "error", strcmp(lk, "path") && strcmp(lk, "synchronous") && strcmp(lk, "enabled")
                                             ? "config.unknown_key" : "config.bad_value",
                             ll, "ledger: '%s' is unknown or has a wrong value (path, synchronous: normal|full, "
                                 "enabled, retention, max_size)", lk);
                goto fail;
            }
        }
    }
    const json_t *sys = json_object_get(c->root, "system");
    if (!sys)
        default_env(c);
    if (sys) {
        const char *sk;
        json_t *sv;
        json_object_foreach((json_t *)sys, sk, sv)
        {
            if (strcmp(sk, "env") != 0) {
                abx_diag_add(d, "error", "config.unknown_key", c->lines ? abx_linemap_key_line(c->lines, sys, sk) : 0,
                             "unknown key 'system.%s' (env)", sk);
                goto fail;
            }
        }
        const json_t *env = json_object_get(sys, "env");
        size_t i;
        json_t *it;
        if (env && !json_is_array(env)) {
            abx_diag_add(d, "error", "config.invalid", line_of(c, "system"), "'system.env' must be a list of names");
            goto fail;
        }
        c->system_env = abx_calloc(json_array_size(env) + 1, sizeof *c->system_env);
        json_array_foreach(env, i, it)
        {
            if (!json_is_string(it)) {
                abx_diag_add(d, "error", "config.invalid", line_of(c, "system"), "'system.env' must be a list of names");
                goto fail;
            }
            c->system_env[c->n_system_env++] = abx_strdup(json_string_value(it));
        }
    }
    return 0;
fail:
    abx_config_release(c);
    return -1;
}

void abx_config_release(abx_config *c)
{
    abx_free(c->path);
    json_decref(c->root);
    abx_linemap_free(c->lines);
    abx_free(c->listen_host);
    abx_free(c->terminal_host);
    abx_free(c->workspace);
    for (size_t i = 0; i < c->n_allowed_hosts; i++)
        abx_free(c->allowed_hosts[i]);
    abx_free(c->allowed_hosts);
    for (size_t i = 0; i < c->n_allowed_origins; i++)
        abx_free(c->allowed_origins[i]);
    abx_free(c->allowed_origins);
    abx_free(c->tls_cert);
    abx_free(c->tls_key);
    abx_free(c->ledger_path);
    abx_free(c->plugin_dir);
    abx_free(c->config_dir);
    abx_free(c->python);
    for (size_t i = 0; i < c->n_system_env; i++)
        abx_free(c->system_env[i]);
    abx_free(c->system_env);
    memset(c, 0, sizeof *c);
}
