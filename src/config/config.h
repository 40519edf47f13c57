/* config.h — the config file (YAML or JSON) → a validated config value. The top-level
 * keys are a table read by generic code; "auth" and "policy" are handed to the policy
 * compiler as they are. Every problem is reported with file:line; nothing falls back
 * to a default policy when the file is broken. */
#ifndef ABX_CONFIG_CONFIG_H
#define ABX_CONFIG_CONFIG_H

#include "config/secrets.h"
#include "core/diag.h"
#include "core/yaml.h"
#include <jansson.h>
#include <stdbool.h>
#include <stdint.h>

typedef struct abx_config {
    char *path;                 /* owned; NULL = embedded default */
    json_t *root;               /* owned; the parsed file ({} for the default) */
    abx_linemap *lines;         /* owned; NULL for the default */
    char *listen_host;          /* owned */
    int listen_port;
    char *terminal_host;        /* owned; NULL when off */
    int terminal_port;          /* -1 = off */
    bool e2b_on;                /* the e2b section is present: its listeners open */
    char *e2b_envd_host;        /* owned; NULL when off */
    int e2b_envd_port;          /* -1 = off */
    char *e2b_interp_host;      /* owned; NULL when off */
    int e2b_interp_port;        /* -1 = off */
    char *workspace;            /* owned, absolute (not yet canonical) */
    char **allowed_hosts;       /* owned */
    size_t n_allowed_hosts;
    char **allowed_origins;     /* owned */
    size_t n_allowed_origins;
    char *tls_cert, *tls_key;   /* owned file paths */
    bool allow_plaintext;
    bool allow_lint_errors;
    int64_t request_max_bytes;
    int64_t kernel_idle_ms;              /* an unused kernel is reaped after this long (30 min) */
    int64_t approval_ttl_ms;             /* a held call expires this long after it was requested (15 min) */
    int auth_failures;                   /* failed authentications per minute, all addresses together (100) */
    int64_t upload_max_bytes;
    int connections;
    int connections_per_address; /* unauthenticated connections one client address may hold */
    int workers;          /* threads for blocking calls (commands, waits, long polls) */
    int64_t header_bytes; /* request line + headers, bytes (431 past it) */
    int header_count;     /* headers per request (431 past it) */
    int64_t read_timeout_ms;
    int64_t tool_soft_timeout_ms, progress_interval_ms, tool_stream_duration_ms, shutdown_grace_ms, ticket_ttl_ms;
    int tool_stream_events;
    bool confine_set, confine_required;  /* unset: required where the kernel has Landlock */
    bool run_as_set;                     /* unset: auto (the workspace's owner) */
    unsigned run_uid, run_gid;
    char *ledger_path;                   /* owned; NULL = .abx/ledger.db beside the config (or in the cwd) */
    bool ledger_sync_full;
    int64_t ledger_max_size;             /* bytes; 0 = the live segment is never archived by size */
    int64_t ledger_retention_ms;         /* 0 = never archived by age */
    bool ledger_off;
    bool extends_default;                /* extends: default */
    int64_t homes_ttl_ms;                /* 0 = private HOMEs are kept until system.home.delete */
    int64_t dynamic_tool_ttl_ms;         /* limits.dynamic_tool_ttl: the longest a dynamic tool lives (1 h) */
    int64_t browser_idle_ms;             /* limits.browser_idle: an unused browser is closed (10 min) */
    int browsers;                        /* limits.browsers: open browsers per principal (4) */
    const json_t *auth;         /* borrowed from root */
    const json_t *policy;       /* borrowed from root */
    const json_t *egress;       /* borrowed from root: the egress proxy's settings */
    const json_t *tests;        /* borrowed from root: policy tests */
    const json_t *custom;       /* borrowed from root: declarative commands (src/ext/custom.c) */
    const json_t *load;         /* borrowed from root: plugins and Python op workers */
    char *plugin_dir;           /* owned, absolute-ish (joined to the config folder); NULL for the default */
    char *config_dir;           /* owned: the config file's folder; NULL for the default */
    char *python;               /* owned: interpreter of Python op workers */
    bool python_per_call;       /* python_isolation: per_call (a fresh confined process per call) */
    char **system_env;          /* owned: variables system.env.get may reveal */
    size_t n_system_env;
    abx_secrets secrets;        /* owned: values read at load, never stored or shown elsewhere */
    char *egress_upstream_ca;   /* owned: egress.upstream_ca */
    bool sandboxd_on;           /* the sandboxd section is present: its listeners open */
    char *sandboxd_rest_host;   /* owned; NULL when off */
    int sandboxd_rest_port;     /* -1 = off */
    char *sandboxd_grpc_host;   /* owned; NULL when off */
    int sandboxd_grpc_port;     /* -1 = off */
    char *sandboxd_token_file;  /* owned: sandboxd.token_file */
    char *sandboxd_principal;   /* owned: who that token authenticates */
    char *sandboxd_token;       /* owned: the token read at load (never logged) */
    bool sandboxd_allow_plaintext;
    int egress_proxy_port;      /* egress.proxy_port (3128) */
    char **install_allow;       /* owned: install.allow, the requirements ops may install */
    size_t n_install_allow;
    char *install_dir;          /* owned: install.dir (NULL: <abx home>/install) */
    char *install_registry;     /* owned: install.registry (NULL: https://registry.npmjs.org/) */
    const json_t *agents;       /* borrowed from root: agents.default, agents.<adapter>.base_url ... */
} abx_config;

/* Load and validate. path NULL = embedded default. Diagnostics go to diags (with lines).
 * Returns 0, or -1 when diags has errors (the config is then released). */
int abx_config_load(abx_config *cfg, const char *path, abx_diags *diags);
void abx_config_release(abx_config *cfg);
/* "host:port" → parts; [v6]:port accepted. false on error. */
bool abx_parse_listen(const char *s, char **host, int *port);
/* The sandboxd section's rules (config_sandboxd.c): a non-loopback listener wants TLS or
 * allow_plaintext (gRPC: allow_plaintext), token_file wants principal and is read now.
 * false with diags filled. */
bool abx_sandboxd_config_check(abx_config *c, abx_diags *d);
/* Wipe and free the token read from sandboxd.token_file. */
void abx_sandboxd_token_free(char *token);
bool abx_host_is_loopback(const char *host);
/* docs/reference/config.md, generated from the key table (caller frees). */
char *abx_config_docs_markdown(void);
/* One key of the table as the docs show it (the man page abx.yaml(5) and config.md are
 * both written from these): false past the last row. */
typedef struct abx_config_key {
    const char *path, *type, *doc;
    char def[64], allowed[96]; /* "" when none */
} abx_config_key;
bool abx_config_key_at(size_t i, abx_config_key *k);

#endif
