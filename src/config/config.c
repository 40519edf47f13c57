/* config.c — the config file → abx_config. Every key is a row of one table (key path,
 * the field it sets, parser, default, bounds, doc) read by one loop, after the nginx
 * and redis patterns; the listener limits come from limits.def. Unknown keys are
 * errors; keys of features this build does not have are errors too (never accepted
 * and ignored: a silent no-op in a security config is a lie). */
#include "config/config.h"
#include "config/secrets.h"
#include "core/yaml.h"
#include "core/util.h"
#include <errno.h>
#include <inttypes.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <pwd.h>
#include <unistd.h>

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

/* ---- the rows ---- */

typedef struct cfg_row cfg_row;

/* Why a value was refused: the code and the rest of "'KEY' must ..." */
typedef struct cfg_fail {
    const char *code;
    char why[240];
} cfg_fail;

typedef bool cfg_parse(abx_config *c, const cfg_row *r, const json_t *v, cfg_fail *f);

/* The JSON shape a top-level key must have, checked for all keys before any value is
 * read (config.invalid); keys below a section are checked by their parser. */
enum cfg_shape { SH_ANY, SH_STRING, SH_BOOL, SH_MAP, SH_LIST };

enum {
    CFG_NEGATE = 1,    /* a bool stored as its opposite (ledger.enabled → ledger_off) */
    CFG_TEXT_ONLY = 2, /* a size or duration written as text only, not as a bare integer */
    CFG_FILE = 4,      /* the default applies with a config file only (the embedded default leaves it unset) */
};

struct cfg_row {
    const char *path;    /* "listen", "limits.headers", "ledger.retention" */
    enum cfg_shape shape;
    cfg_parse *parse;    /* NULL: a section, or a value the policy/ext compilers read from root */
    size_t off, width;   /* the field of abx_config it sets (width: sizeof the field) */
    size_t aux;          /* a second field: the port, the count of a list, the "was set" flag */
    const char *type;    /* for the docs */
    int64_t def, min, max; /* numbers; max 0 = no upper bound */
    const char *sdef;    /* a default written as text, parsed like a value */
    const char *choices; /* enums: "normal|full" (a bool field is set for the second) */
    unsigned flags;
    const char *doc;
};

#define FIELD(f) .off = offsetof(abx_config, f), .width = sizeof(((abx_config *)0)->f)
#define AUX(f) .aux = offsetof(abx_config, f)

static cfg_parse parse_int, parse_size, parse_duration, parse_bool, parse_string, parse_abspath, parse_enum,
    parse_listen, parse_tls, parse_run_as, parse_strlist, parse_json, parse_secrets;

#define PARSE_INT parse_int
#define PARSE_SIZE parse_size
#define PARSE_DURATION parse_duration
#define TYPE_INT "integer"
#define TYPE_SIZE "size"
#define TYPE_DURATION "duration"

static const cfg_row rows[] = {
    {"listen", SH_STRING, parse_listen, FIELD(listen_host), AUX(listen_port), .type = "host:port",
     .sdef = "127.0.0.1:8080", .doc = "main listener host:port"},
    {"workspace", SH_STRING, parse_abspath, FIELD(workspace), .type = "path",
     .doc = "default root for presets and relative paths (default: the current directory)"},
    {"allowed_hosts", SH_ANY, parse_strlist, FIELD(allowed_hosts), AUX(n_allowed_hosts), .type = "list",
     .doc = "Host header values accepted besides loopback"},
    {"allowed_origins", SH_ANY, parse_strlist, FIELD(allowed_origins), AUX(n_allowed_origins), .type = "list",
     .doc = "Origin header values accepted"},
    {"tls", SH_MAP, parse_tls, .type = "{cert, key}", .doc = "{cert, key} for a non-loopback listener"},
    {"allow_plaintext", SH_BOOL, parse_bool, FIELD(allow_plaintext), .type = "bool",
     .doc = "allow a non-loopback listener without TLS"},
    {"allow_lint_errors", SH_BOOL, parse_bool, FIELD(allow_lint_errors), .type = "bool",
     .doc = "start despite lint errors"},
    {"limits", SH_MAP, NULL, .type = "section", .doc = "listener limits"},
#define ABX_CFG_LIMIT(field, key, TYPE, dflt, lo, hi, meaning)                                                        \
    {"limits." key, SH_ANY, PARSE_##TYPE, FIELD(field), .type = TYPE_##TYPE, .def = (dflt), .min = (lo), .max = (hi), \
     .doc = meaning},
#include "config/limits.def"
#undef ABX_CFG_LIMIT
    {"auth", SH_MAP, parse_json, FIELD(auth), .type = "section", .doc = "principals and credentials"},
    {"policy", SH_MAP, parse_json, FIELD(policy), .type = "section", .doc = "allow and deny statements"},
    {"egress", SH_MAP, parse_json, FIELD(egress), .type = "section",
     .doc = "the egress proxy (docs/egress.md): resolve (a static host → address table, like curl's --resolve), upstream_ca, proxy_port"},
    {"terminal_listen", SH_STRING, parse_listen, FIELD(terminal_host), AUX(terminal_port), .type = "host:port",
     .sdef = "127.0.0.1:9001", .choices = "off",
     .doc = "WebSocket terminal listener host:port (port 0 = any; \"off\" = none)"},
    {"e2b", SH_MAP, NULL, .type = "section",
     .doc = "E2B's envd and code-interpreter protocols on listeners of their own (docs/e2b.md)"},
    {"e2b.envd_listen", SH_ANY, parse_listen, FIELD(e2b_envd_host), AUX(e2b_envd_port), .type = "host:port",
     .sdef = "127.0.0.1:49983", .choices = "off",
     .doc = "the envd listener (Connect-RPC filesystem/process, REST /files) when e2b is present; \"off\" = none"},
    {"e2b.interpreter_listen", SH_ANY, parse_listen, FIELD(e2b_interp_host), AUX(e2b_interp_port),
     .type = "host:port", .sdef = "127.0.0.1:49999", .choices = "off",
     .doc = "the code-interpreter listener when e2b is present; \"off\" = none"},
    {"confine", SH_STRING, parse_enum, FIELD(confine_required), AUX(confine_set), .type = "enum",
     .choices = "best_effort|required",
     .doc = "kernel confinement mode (default: required where the kernel has Landlock)"},
    {"run_as", SH_STRING, parse_run_as, .type = "user", .sdef = "auto",
     .doc = "uid:gid (or user name) of spawned processes; auto = the workspace's owner"},
    {"extends", SH_STRING, parse_enum, FIELD(extends_default), .type = "enum", .choices = "none|default",
     .sdef = "none", .doc = "default: grow the embedded default (principal local and its token, preset workspace)"},
    {"homes", SH_MAP, NULL, .type = "section", .doc = "principals' private HOME folders"},
    {"homes.ttl", SH_ANY, parse_duration, FIELD(homes_ttl_ms), .type = "duration", .min = 1000,
     .flags = CFG_TEXT_ONLY, .doc = "remove a principal's HOME unused this long, checked at start and as HOMEs are handed out (default: never)"},
    {"ledger", SH_MAP, NULL, .type = "section", .doc = "the action ledger"},
    {"ledger.path", SH_ANY, parse_string, FIELD(ledger_path), .type = "path",
     .doc = "the ledger file (default: .abx/ledger.db beside the config file)"},
    {"ledger.synchronous", SH_ANY, parse_enum, FIELD(ledger_sync_full), .type = "enum", .choices = "normal|full",
     .sdef = "normal", .doc = "full: every append reaches the disk before the call is answered"},
    {"ledger.enabled", SH_ANY, parse_bool, FIELD(ledger_off), .type = "bool", .flags = CFG_NEGATE,
     .sdef = "true", .doc = "false: no ledger"},
    {"ledger.retention", SH_ANY, parse_duration, FIELD(ledger_retention_ms), .type = "duration", .min = 1000,
     .flags = CFG_TEXT_ONLY, .doc = "archive the live segment at this age (default: never)"},
    {"ledger.max_size", SH_ANY, parse_size, FIELD(ledger_max_size), .type = "size", .min = 64 * 1024,
     .doc = "archive the live segment at this size (default: never; an empty segment is ~32 KiB)"},
    {"system", SH_MAP, NULL, .type = "section", .doc = "system.* settings"},
    {"system.env", SH_ANY, parse_strlist, FIELD(system_env), AUX(n_system_env), .type = "list",
     .doc = "variables system.env.get may reveal (default LANG, TZ when system is absent)"},
    {"custom", SH_LIST, parse_json, FIELD(custom), .type = "list",
     .doc = "declarative commands, compiled to ops custom.<name> (docs/custom-ops.md)"},
    {"load", SH_ANY, parse_json, FIELD(load), .type = "list",
     .doc = "plugins (\"name\" → <plugin_dir>/name.so) and Python op workers (\"python:pkg.module\")"},
    {"plugin_dir", SH_STRING, parse_string, FIELD(plugin_dir), .type = "path", .sdef = "plugins", .flags = CFG_FILE,
     .doc = "folder of the plugins named in load, relative to the config file's folder"},
    {"python", SH_STRING, parse_abspath, FIELD(python), .type = "path", .sdef = "/usr/bin/python3",
     .flags = CFG_FILE, .doc = "interpreter of Python op workers"},
    {"python_isolation", SH_STRING, parse_enum, FIELD(python_per_call), .type = "enum",
     .choices = "shared|per_call", .sdef = "shared",
     .doc = "Python op workers: shared (one confined process per module) or per_call (a fresh one per call)"},
    {"tests", SH_LIST, parse_json, FIELD(tests), .type = "list",
     .doc = "policy tests: [{principal, op, args, expect}]"},
    {"secrets", SH_MAP, parse_secrets, .type = "map",
     .doc = "NAME: {env: VARIABLE} | {file: PATH}, read at load; used as ${secret:NAME} in net.inject (docs/egress.md)"},
    {"egress.upstream_ca", SH_ANY, parse_string, FIELD(egress_upstream_ca), .type = "path",
     .doc = "a PEM file trusted for intercepted (inject) upstreams besides the system store"},
    {"egress.proxy_port", SH_ANY, parse_int, FIELD(egress_proxy_port), .type = TYPE_INT, .def = 3128, .min = 1,
     .max = 65535, .doc = "the port the egress proxy listens on inside each process's network namespace"},
    {"sandboxd", SH_MAP, NULL, .type = "section",
     .doc = "kubernetes-sigs/agent-sandbox's sandboxd runtime interface (KEP-539.2): REST files on rest_listen, gRPC ProcessService on grpc_listen (docs/fleet.md)"},
    {"sandboxd.rest_listen", SH_ANY, parse_listen, FIELD(sandboxd_rest_host), AUX(sandboxd_rest_port),
     .type = "host:port", .sdef = "127.0.0.1:8080", .choices = "off",
     .doc = "the REST listener (/v1/files, /v1/health, /v1/metadata) when sandboxd is present; \"off\" = none"},
    {"sandboxd.grpc_listen", SH_ANY, parse_listen, FIELD(sandboxd_grpc_host), AUX(sandboxd_grpc_port),
     .type = "host:port", .sdef = "127.0.0.1:9090", .choices = "off",
     .doc = "the gRPC listener (HTTP/2 cleartext: process.v1.ProcessService, abx.sandboxd.v1) when sandboxd is present; \"off\" = none"},
    {"sandboxd.token_file", SH_ANY, parse_string, FIELD(sandboxd_token_file), .type = "path",
     .doc = "a file (a mounted Secret) holding the pod's bearer token; callers presenting it act as sandboxd.principal (without it: abx's own tokens)"},
    {"sandboxd.principal", SH_ANY, parse_string, FIELD(sandboxd_principal), .type = "string",
     .doc = "the principal the token_file's token authenticates"},
    {"sandboxd.allow_plaintext", SH_ANY, parse_bool, FIELD(sandboxd_allow_plaintext), .type = "bool",
     .doc = "allow non-loopback sandboxd listeners without TLS (a pod network)"},
    {"install", SH_MAP, NULL, .type = "section", .doc = "lazy install of the programs ops need (docs/agents.md)"},
    {"install.allow", SH_ANY, parse_strlist, FIELD(install_allow), AUX(n_install_allow), .type = "list",
     .doc = "requirements calls may install on first use (codex-cli, claude-code); others are refused"},
    {"install.dir", SH_ANY, parse_abspath, FIELD(install_dir), .type = "path",
     .doc = "where requirements are installed (default: install/ in abx's home)"},
    {"install.registry", SH_ANY, parse_string, FIELD(install_registry), .type = "url",
     .doc = "the npm registry the installer may reach (default https://registry.npmjs.org/)"},
    {"agents", SH_MAP, parse_json, FIELD(agents), .type = "section",
     .doc = "coding agents (docs/agents.md): default, and per adapter (codex, claude_code) base_url, model"},
};

static void *field_of(abx_config *c, size_t off) { return (char *)c + off; }

static void store_num(abx_config *c, const cfg_row *r, int64_t x)
{
    if (r->width == sizeof(int64_t))
        *(int64_t *)field_of(c, r->off) = x;
    else
        *(int *)field_of(c, r->off) = (int)x;
}

static void store_str(abx_config *c, size_t off, char *s)
{
    char **slot = field_of(c, off);
    abx_free(*slot);
    *slot = s;
}

/* ---- numbers and their bounds, written the way a config writes them ---- */

static void fmt_size(char *out, size_t len, int64_t x)
{
    static const char *const units[] = {"GiB", "MiB", "KiB"};
    for (int i = 0; i < 3; i++) {
        int64_t u = INT64_C(1) << (30 - 10 * i);
        if (x >= u && x % u == 0) {
            snprintf(out, len, "%" PRId64 "%s", x / u, units[i]);
            return;
        }
    }
    snprintf(out, len, "%" PRId64, x);
}

static void fmt_duration(char *out, size_t len, int64_t ms)
{
    static const struct { int64_t ms; const char *unit; } units[] = {
        {24 * 3600 * 1000, "d"}, {3600 * 1000, "h"}, {60 * 1000, "m"}, {1000, "s"}};
    for (size_t i = 0; i < ABX_ARRAY_LEN(units); i++)
        if (ms >= units[i].ms && ms % units[i].ms == 0) {
            snprintf(out, len, "%" PRId64 "%s", ms / units[i].ms, units[i].unit);
            return;
        }
    snprintf(out, len, "%gs", (double)ms / 1000.0);
}

static void fmt_value(const cfg_row *r, char *out, size_t len, int64_t x)
{
    if (r->parse == parse_size)
        fmt_size(out, len, x);
    else if (r->parse == parse_duration)
        fmt_duration(out, len, x);
    else
        snprintf(out, len, "%" PRId64, x);
}

/* "8..1000", "1KiB..64KiB", "of at least 1s", "such as 16MiB" */
static void fmt_bounds(const cfg_row *r, char *out, size_t len)
{
    char lo[32], hi[32];
    fmt_value(r, lo, sizeof lo, r->min);
    fmt_value(r, hi, sizeof hi, r->max ? r->max : r->def);
    if (r->max)
        snprintf(out, len, "%s..%s", lo, hi);
    else if (r->min > 1 || !r->def)
        snprintf(out, len, "of at least %s", lo);
    else
        snprintf(out, len, "such as %s", hi);
}

static bool in_bounds(const cfg_row *r, int64_t x) { return x >= r->min && (!r->max || x <= r->max); }

static bool parse_int(abx_config *c, const cfg_row *r, const json_t *v, cfg_fail *f)
{
    if (!json_is_integer(v) || !in_bounds(r, json_integer_value(v))) {
        char b[80];
        fmt_bounds(r, b, sizeof b);
        snprintf(f->why, sizeof f->why, "must be %s", b);
        return false;
    }
    store_num(c, r, json_integer_value(v));
    return true;
}

/* A size or a duration: text with a unit, or (unless CFG_TEXT_ONLY) a bare integer. */
static bool parse_scaled_value(abx_config *c, const cfg_row *r, const json_t *v, cfg_fail *f, bool size)
{
    char num[32];
    const char *text = json_is_string(v) ? json_string_value(v) : NULL;
    if (!text && json_is_integer(v) && !(r->flags & CFG_TEXT_ONLY)) {
        snprintf(num, sizeof num, "%" PRId64, (int64_t)json_integer_value(v));
        text = num;
    }
    int64_t x = !text ? -1 : size ? abx_parse_size(text) : abx_parse_duration_ms(text);
    if (x < 0 || !in_bounds(r, x)) {
        char b[80];
        fmt_bounds(r, b, sizeof b);
        snprintf(f->why, sizeof f->why, "must be a %s %s", size ? "size" : "duration", b);
        return false;
    }
    store_num(c, r, x);
    return true;
}

static bool parse_size(abx_config *c, const cfg_row *r, const json_t *v, cfg_fail *f)
{
    return parse_scaled_value(c, r, v, f, true);
}

static bool parse_duration(abx_config *c, const cfg_row *r, const json_t *v, cfg_fail *f)
{
    return parse_scaled_value(c, r, v, f, false);
}

/* ---- the other parsers ---- */

static bool parse_bool(abx_config *c, const cfg_row *r, const json_t *v, cfg_fail *f)
{
    if (!json_is_boolean(v)) {
        snprintf(f->why, sizeof f->why, "must be true or false");
        return false;
    }
    *(bool *)field_of(c, r->off) = json_is_true(v) != !!(r->flags & CFG_NEGATE);
    return true;
}

static bool parse_string(abx_config *c, const cfg_row *r, const json_t *v, cfg_fail *f)
{
    if (!json_is_string(v)) {
        snprintf(f->why, sizeof f->why, "must be a string");
        return false;
    }
    store_str(c, r->off, abx_strdup(json_string_value(v)));
    return true;
}

static bool parse_abspath(abx_config *c, const cfg_row *r, const json_t *v, cfg_fail *f)
{
    if (!json_is_string(v) || json_string_value(v)[0] != '/') {
        snprintf(f->why, sizeof f->why, "must be an absolute path");
        return false;
    }
    return parse_string(c, r, v, f);
}

/* One of two words; the bool field says whether it is the second. */
static bool parse_enum(abx_config *c, const cfg_row *r, const json_t *v, cfg_fail *f)
{
    const char *bar = strchr(r->choices, '|');
    const char *s = json_is_string(v) ? json_string_value(v) : "";
    size_t first = (size_t)(bar - r->choices);
    bool is_first = strlen(s) == first && strncmp(s, r->choices, first) == 0;
    if (!is_first && strcmp(s, bar + 1) != 0) {
        snprintf(f->why, sizeof f->why, "must be %.*s or %s", (int)first, r->choices, bar + 1);
        return false;
    }
    *(bool *)field_of(c, r->off) = !is_first;
    if (r->aux)
        *(bool *)field_of(c, r->aux) = true;
    return true;
}

/* HOST:PORT into a host (char *) and a port (int); choices "off": port -1, no host. */
static bool parse_listen(abx_config *c, const cfg_row *r, const json_t *v, cfg_fail *f)
{
    const char *s = json_is_string(v) ? json_string_value(v) : "";
    int *port = field_of(c, r->aux);
    store_str(c, r->off, NULL);
    if (r->choices && strcmp(s, r->choices) == 0) {
        *port = -1;
        return true;
    }
    char *host = NULL;
    if (!abx_parse_listen(s, &host, port)) {
        snprintf(f->why, sizeof f->why, "must read HOST:PORT%s%s", r->choices ? " or " : "",
                 r->choices ? r->choices : "");
        return false;
    }
    store_str(c, r->off, host);
    return true;
}

static bool parse_tls(abx_config *c, const cfg_row *r, const json_t *v, cfg_fail *f)
{
    (void)r;
    const json_t *cert = json_object_get(v, "cert"), *key = json_object_get(v, "key");
    if (!json_is_string(cert) || !json_is_string(key) || json_object_size(v) != 2) {
        f->code = "config.invalid";
        snprintf(f->why, sizeof f->why, "must be {cert: FILE, key: FILE}");
        return false;
    }
    store_str(c, offsetof(abx_config, tls_cert), abx_strdup(json_string_value(cert)));
    store_str(c, offsetof(abx_config, tls_key), abx_strdup(json_string_value(key)));
    return true;
}

static bool parse_secrets(abx_config *c, const cfg_row *r, const json_t *v, cfg_fail *f)
{
    (void)r;
    abx_secrets_free(&c->secrets);
    return abx_secrets_load(v, &c->secrets, &f->code, f->why, sizeof f->why) == 0;
}

static bool parse_run_as(abx_config *c, const cfg_row *r, const json_t *v, cfg_fail *f)
{
    (void)r;
    const char *rv = json_string_value(v);
    unsigned uid, gid;
    char extra;
    struct passwd *pw;
    if (strcmp(rv, "auto") == 0)
        return true;
    if (sscanf(rv, "%u:%u%c", &uid, &gid, &extra) == 2) {
        c->run_uid = uid;
        c->run_gid = gid;
    } else if ((pw = getpwnam(rv)) != NULL) {
        c->run_uid = pw->pw_uid;
        c->run_gid = pw->pw_gid;
    } else {
        snprintf(f->why, sizeof f->why, "must be auto, UID:GID or an existing user name");
        return false;
    }
    c->run_as_set = true;
    return true;
}

/* A list of strings into a char ** (NULL-terminated) and its count. */
static bool parse_strlist(abx_config *c, const cfg_row *r, const json_t *v, cfg_fail *f)
{
    f->code = "config.invalid";
    if (!json_is_array(v)) {
        snprintf(f->why, sizeof f->why, "must be a list of strings");
        return false;
    }
    char ***out = field_of(c, r->off);
    size_t *n = field_of(c, r->aux);
    *out = abx_calloc(json_array_size(v) + 1, sizeof **out);
    size_t i;
    json_t *it;
    json_array_foreach(v, i, it)
    {
        if (!json_is_string(it)) {
            snprintf(f->why, sizeof f->why, "must contain only strings");
            return false;
        }
        if (*out)
            (*out)[(*n)++] = abx_strdup(json_string_value(it));
    }
    return true;
}

/* Kept as JSON (borrowed from root) for the compiler that reads it. */
static bool parse_json(abx_config *c, const cfg_row *r, const json_t *v, cfg_fail *f)
{
    (void)f;
    *(const json_t **)field_of(c, r->off) = v;
    return true;
}

/* ---- reading the table ---- */

static int key_line(const abx_config *c, const json_t *parent, const char *key)
{
    return c->lines ? abx_linemap_key_line(c->lines, parent, key) : 0;
}

/* The section part of a row's path ("limits" of "limits.headers"); its length, 0 for a top-level key. */
static size_t section_len(const cfg_row *r)
{
    const char *dot = strchr(r->path, '.');
    return dot ? (size_t)(dot - r->path) : 0;
}

static const cfg_row *find_row(const char *section, size_t slen, const char *key)
{
    for (size_t i = 0; i < ABX_ARRAY_LEN(rows); i++) {
        const cfg_row *r = &rows[i];
        if (section_len(r) == slen && strncmp(r->path, section ? section : "", slen) == 0 &&
            strcmp(r->path + (slen ? slen + 1 : 0), key) == 0)
            return r;
    }
    return NULL;
}

/* The value of a row in the file (NULL when absent), with the mapping that holds it. */
static const json_t *row_value(const abx_config *c, const cfg_row *r, const json_t **parent, const char **leaf)
{
    size_t slen = section_len(r);
    *parent = c->root;
    *leaf = r->path;
    if (slen) {
        char sec[32];
        snprintf(sec, sizeof sec, "%.*s", (int)slen, r->path);
        *parent = json_object_get(c->root, sec);
        *leaf = r->path + slen + 1;
    }
    return json_is_object(*parent) ? json_object_get(*parent, *leaf) : NULL;
}

static bool apply_default(abx_config *c, const cfg_row *r)
{
    if (r->parse == parse_int || r->parse == parse_size || r->parse == parse_duration) {
        store_num(c, r, r->def);
        return true;
    }
    if (!r->sdef)
        return true;
    json_t *v = json_string(r->sdef);
    cfg_fail f;
    bool ok = v && r->parse(c, r, v, &f);
    json_decref(v);
    return ok;
}

/* Every row's default; CFG_FILE rows only when a config file is read. */
static void set_defaults(abx_config *c, bool file)
{
    for (size_t i = 0; i < ABX_ARRAY_LEN(rows); i++)
        if (rows[i].parse && (file || !(rows[i].flags & CFG_FILE)))
            apply_default(c, &rows[i]);
}

static bool shape_ok(enum cfg_shape s, const json_t *v)
{
    switch (s) {
    case SH_STRING:
        return json_is_string(v);
    case SH_BOOL:
        return json_is_boolean(v);
    case SH_MAP:
        return json_is_object(v);
    case SH_LIST:
        return json_is_array(v);
    case SH_ANY:
        break;
    }
    return true;
}

/* Top-level keys: known, and of the right shape. Every problem is reported. */
static void check_top_keys(abx_config *c, abx_diags *d)
{
    static const char *const shape_text[] = {"", "a string", "true or false", "a mapping", "a list"};
    const char *k;
    json_t *v;
    json_object_foreach(c->root, k, v)
    {
        const cfg_row *r = find_row(NULL, 0, k);
        static const char *const policy_keys[] = {"presets", "allow", "deny", "strict"};
        bool of_policy = false;
        for (size_t i = 0; !r && i < ABX_ARRAY_LEN(policy_keys); i++)
            of_policy = of_policy || strcmp(k, policy_keys[i]) == 0;
        if (of_policy) /* a common slip: presets/allow/deny written at the top level */
            abx_diag_add(d, "error", "config.unknown_key", key_line(c, c->root, k),
                         "unknown key '%s': it belongs under 'policy:' (policy: {%s: ...}), or use "
                         "'extends: default' to grow the embedded default",
                         k, k);
        else if (!r)
            abx_diag_add(d, "error", "config.unknown_key", key_line(c, c->root, k), "unknown key '%s'", k);
        else if (!shape_ok(r->shape, v))
            abx_diag_add(d, "error", "config.invalid", key_line(c, c->root, k), "'%s' must be %s", k,
                         shape_text[r->shape]);
    }
}

/* The keys inside a section (limits, ledger, system) are its rows, named in the message. */
static bool check_section_keys(abx_config *c, const cfg_row *sec, abx_diags *d)
{
    size_t slen = strlen(sec->path);
    const json_t *obj = json_object_get(c->root, sec->path);
    const char *k;
    json_t *v;
    json_object_foreach((json_t *)obj, k, v)
    {
        if (find_row(sec->path, slen, k))
            continue;
        char known[400] = "";
        for (size_t i = 0; i < ABX_ARRAY_LEN(rows); i++)
            if (section_len(&rows[i]) == slen && strncmp(rows[i].path, sec->path, slen) == 0)
                snprintf(known + strlen(known), sizeof known - strlen(known), "%s%s", known[0] ? ", " : "",
                         rows[i].path + slen + 1);
        abx_diag_add(d, "error", "config.unknown_key", key_line(c, obj, k), "unknown key '%s.%s' (%s)", sec->path, k,
                     known);
        return false;
    }
    return true;
}

/* The one loop: every row present in the file, through its parser, in table order. */
static bool load_rows(abx_config *c, abx_diags *d)
{
    for (size_t i = 0; i < ABX_ARRAY_LEN(rows); i++) {
        const cfg_row *r = &rows[i];
        if (!r->parse && !check_section_keys(c, r, d))
            return false;
        const json_t *parent;
        const char *leaf;
        const json_t *v = r->parse ? row_value(c, r, &parent, &leaf) : NULL;
        if (!v)
            continue;
        cfg_fail f = {"config.bad_value", ""};
        if (!r->parse(c, r, v, &f)) {
            abx_diag_add(d, "error", f.code, key_line(c, parent, leaf), "'%s' %s", r->path, f.why);
            return false;
        }
    }
    return true;
}

/* plugin_dir is taken from the config file's folder (absolute: workers chdir there). */
static void resolve_dirs(abx_config *c)
{
    const char *slash = strrchr(c->path, '/');
    char *dir = slash ? abx_strndup(c->path, (size_t)(slash - c->path)) : abx_strdup(".");
    if (dir && !*dir) {
        abx_free(dir);
        dir = abx_strdup("/");
    }
    char *real = dir ? realpath(dir, NULL) : NULL;
    if (real) {
        abx_free(dir);
        dir = abx_strdup(real);
        free(real);
    }
    const char *pv = c->plugin_dir ? c->plugin_dir : "plugins";
    if (pv[0] != '/')
        store_str(c, offsetof(abx_config, plugin_dir), abx_asprintf("%s/%s", dir && strcmp(dir, "/") ? dir : "", pv));
    c->config_dir = dir;
}

static const char *const default_system_env[] = {"LANG", "TZ"};

static void default_env(abx_config *c)
{
    c->system_env = abx_calloc(ABX_ARRAY_LEN(default_system_env) + 1, sizeof *c->system_env);
    for (size_t i = 0; c->system_env && i < ABX_ARRAY_LEN(default_system_env); i++)
        c->system_env[c->n_system_env++] = abx_strdup(default_system_env[i]);
}

/* The file's text parsed into c->root (and its line map). */
static bool read_file(abx_config *c, const char *path, abx_diags *d)
{
    FILE *f = fopen(path, "re");
    if (!f) {
        abx_diag_add(d, "error", "config.unreadable", 0, "cannot open %s: %s", path, strerror(errno));
        return false;
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
        return false;
    }
    char err[300];
    int eline = 0;
    c->root = abx_yaml_load(b.data ? b.data : "", b.len, &c->lines, err, sizeof err, &eline);
    abx_buf_release(&b);
    if (!c->root) {
        abx_diag_add(d, "error", "config.syntax", eline, "%s", err);
        return false;
    }
    if (!json_is_object(c->root)) {
        abx_diag_add(d, "error", "config.invalid", 1, "the config must be a mapping of keys");
        return false;
    }
    return true;
}

int abx_config_load(abx_config *c, const char *path, abx_diags *d)
{
    memset(c, 0, sizeof *c);
    set_defaults(c, path != NULL);
    size_t errors_before = d->errors;
    if (!path) {
        c->root = json_object();
        default_env(c);
        return 0;
    }
    c->path = abx_strdup(path);
    if (!read_file(c, path, d))
        goto fail;
    check_top_keys(c, d);
    if (d->errors > errors_before || !load_rows(c, d))
        goto fail;
    resolve_dirs(c);
    c->e2b_on = json_object_get(c->root, "e2b") != NULL;
    c->sandboxd_on = json_object_get(c->root, "sandboxd") != NULL;
    if (c->sandboxd_on && !abx_sandboxd_config_check(c, d))
        goto fail;
    if (!json_object_get(c->root, "system"))
        default_env(c);
    return 0;
fail:
    abx_config_release(c);
    return -1;
}

static void md_cell(abx_buf *b, const char *s)
{
    for (; *s; s++)
        abx_buf_puts(b, *s == '|' ? "\\|" : (char[2]){*s, 0});
}

bool abx_config_key_at(size_t i, abx_config_key *k)
{
    if (i >= ABX_ARRAY_LEN(rows))
        return false;
    const cfg_row *r = &rows[i];
    bool num = r->parse == parse_int || r->parse == parse_size || r->parse == parse_duration;
    memset(k, 0, sizeof *k);
    k->path = r->path;
    k->type = r->type;
    k->doc = r->doc;
    if (num && r->def)
        fmt_value(r, k->def, sizeof k->def, r->def);
    else if (r->sdef)
        snprintf(k->def, sizeof k->def, "%s", r->sdef);
    else if (r->parse == parse_bool)
        snprintf(k->def, sizeof k->def, "%s", r->flags & CFG_NEGATE ? "true" : "false");
    if (num)
        fmt_bounds(r, k->allowed, sizeof k->allowed);
    else if (r->choices)
        snprintf(k->allowed, sizeof k->allowed, "%s", r->choices);
    return true;
}

/* docs/reference/config.md: the rows as a table. */
char *abx_config_docs_markdown(void)
{
    abx_buf b;
    abx_buf_init(&b, 0);
    abx_buf_puts(&b, "<!-- generated from src/config/config.c and limits.def; do not edit (test_config fails on "
                     "drift) -->\n# Config keys\n\nThe keys of the config file (YAML or JSON); `auth` and `policy` "
                     "are described in [policy.md](../policy.md). Unknown keys are errors.\n\n"
                     "| key | type | default | allowed | meaning |\n|---|---|---|---|---|\n");
    abx_config_key k;
    for (size_t i = 0; abx_config_key_at(i, &k); i++) {
        abx_buf_printf(&b, "| `%s` | %s | %s | ", k.path, k.type, k.def[0] ? k.def : "—");
        md_cell(&b, k.allowed);
        abx_buf_puts(&b, " | ");
        md_cell(&b, k.doc);
        abx_buf_puts(&b, " |\n");
    }
    return abx_buf_detach(&b);
}

void abx_config_release(abx_config *c)
{
    abx_free(c->path);
    json_decref(c->root);
    abx_linemap_free(c->lines);
    abx_free(c->listen_host);
    abx_free(c->terminal_host);
    abx_free(c->e2b_envd_host);
    abx_free(c->e2b_interp_host);
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
    abx_secrets_free(&c->secrets);
    abx_free(c->egress_upstream_ca);
    abx_free(c->sandboxd_rest_host);
    abx_free(c->sandboxd_grpc_host);
    abx_free(c->sandboxd_token_file);
    abx_free(c->sandboxd_principal);
    abx_sandboxd_token_free(c->sandboxd_token);
    for (size_t i = 0; i < c->n_install_allow; i++)
        abx_free(c->install_allow[i]);
    abx_free(c->install_allow);
    abx_free(c->install_dir);
    abx_free(c->install_registry);
    memset(c, 0, sizeof *c);
}
