/* policy.h — principals, allow/deny statements, scopes and limits compiled into one
 * immutable snapshot; the decisions of pipeline steps 3 (who), 5 (mounted?) and
 * 7 (admitted? with which canonical values and limits). Knows no sockets and no
 * handler internals; it never opens a file for content (only lstat/readlink while
 * canonicalizing, stat of deny paths at compile time, and O_PATH directory fds of jail
 * roots and of the ".." chain above a handler's file when checking identities). */
#ifndef ABX_POLICY_POLICY_H
#define ABX_POLICY_POLICY_H

#include "core/core.h"
#include "core/diag.h"
#include "core/yaml.h"
#include "policy/command.h"
#include "sandbox/egress.h"
#include <jansson.h>
#include <errno.h>
#include <stdatomic.h>
#include <sys/stat.h>
#include <sys/types.h>


typedef struct abx_principal {
    char *id;                 /* owned */
    char **roles;             /* owned */
    size_t n_roles;
    unsigned char token_sha256[32];
    bool has_token;
    int64_t expires_at_ms;    /* wall clock; 0 = never */
    char *sign_secret;        /* owned: the plaintext token, kept only when the input asks
                                 (E2B's pre-signed URLs hash it); wiped when freed; NULL none */
} abx_principal;

enum abx_sel_kind { ABX_SEL_EXACT, ABX_SEL_NS, ABX_SEL_ALL, ABX_SEL_GROUP, ABX_SEL_EFFECT };

typedef struct abx_sel {
    enum abx_sel_kind kind;
    char *text;               /* owned: id, namespace (without ".*"), group name */
    unsigned effects;         /* for ABX_SEL_EFFECT */
} abx_sel;

typedef struct abx_pattern {
    char *glob;               /* owned, canonical absolute pattern */
    size_t root;              /* index into abx_policy.roots */
} abx_pattern;

enum { ABX_ACC_IDX_READ, ABX_ACC_IDX_WRITE, ABX_ACC_IDX_DELETE, ABX_ACC_IDX__N };

typedef struct abx_stmt {
    char label[64];           /* "allow[3]", "deny[0]", "preset:workspace[0]" or the statement's id */
    int line;                 /* in the config file; 0 for presets */
    abx_sel *ops;
    size_t n_ops;
    char **principals;        /* "ID", "role:R", "*", "anonymous" */
    size_t n_principals;
    bool has_paths;
    abx_pattern *paths[ABX_ACC_IDX__N];
    size_t n_paths[ABX_ACC_IDX__N];
    int64_t limits[ABX_LIM__COUNT]; /* -1 = not set; timeout in ms, rate in calls per minute, cpu in millicores */
    bool approval;
    bool unsafe;
    int64_t rate_count, rate_window_ms; /* the rate as written: a burst of count, refilled over window */
    /* command scope */
    bool has_commands;
    bool cmd_unrestricted;    /* commands: {unrestricted: true, unsafe: true} */
    bool cmd_shell;           /* shell syntax allowed: argv becomes [/bin/sh, -c, command] */
    abx_cmd_pattern *cmds;
    size_t n_cmds;
    char *cmd_path;           /* search path for program names */
    char **env_allow;         /* variable names a call may set */
    size_t n_env;
    bool has_net;
    bool net;                 /* false (default): the process gets an empty network namespace */
    abx_egress_allow *net_allow; /* owned: net: {allow: [...]} (net is false then), else NULL */
    struct abx_egress_injects *net_inject; /* owned; NULL: none (net.inject, net_inject.c) */
    /* url, language and agent scopes */
    bool has_urls;
    char **urls;
    size_t n_urls;
    bool has_languages;
    char **languages;
    size_t n_languages;
    bool has_agents;
    char **agents;
    size_t n_agents;
    bool has_ports;           /* ports: ["8000", "3000-3999", "*"] (ports.*) */
    char **ports;
    size_t n_ports;
} abx_stmt;

/* Data derived from one snapshot by another module (the discovery documents), built
 * on first use and freed with the snapshot: free_fn releases the whole value. */
typedef struct abx_policy_derived {
    void (*free_fn)(struct abx_policy_derived *d);
} abx_policy_derived;

/* A file a deny rule or protected area names, by identity: resolved when the policy
 * is compiled, so that a rename or a hard link does not take the file out of the rule.
 * Only names that existed at compile time have one; a name created later is denied by
 * name alone (and gets an identity at the next reload). */
typedef struct abx_ident {
    dev_t dev;
    ino_t ino;
    bool subtree;             /* a directory whose whole content is denied (X/ ** or a protected dir) */
    int stmt;                 /* index into deny[], or -1 for a protected area */
} abx_ident;

/* abx_policy_fd_check answers ABX_EIDENT (core/core.h) for a denied identity. */
/* A deny target a mount can express for processes: a deny pattern without wildcards, or
 * X of "X/ **" (no space; the folder X, so files created in it later are hidden too), with the
 * identity its name had when the policy was compiled. A process spawn compares the two:
 * when something outside abx's pins moved the file, the mask follows it (found through
 * fd) or the spawn is refused (see abx_policy_fs_view). */
typedef struct abx_mask_ident {
    char *path;               /* owned, canonical */
    size_t *stmts;            /* owned: indexes of the deny statements that name it */
    size_t n_stmts;
    bool known;               /* it existed at compile time: dev, ino and fd are set */
    dev_t dev;
    ino_t ino;
    int fd;                   /* O_PATH descriptor of the file itself, -1 when not known */
} abx_mask_ident;

/* The compiled policy. Immutable once built; shared by requests through a refcount.
 * Owner: the server holds one reference in its current-snapshot pointer; each request
 * takes one at step 1 and drops it at the end. */
typedef struct abx_policy {
    atomic_int refs;
    abx_registry *reg;        /* borrowed: the server's frozen registry outlives snapshots */
    char *workspace;          /* canonical anchor for relative paths */
    abx_egress_resolver egress_resolve; /* the config's egress.resolve */
    abx_principal *principals;
    size_t n_principals;
    abx_stmt *allow, *deny;
    size_t n_allow, n_deny;
    char **roots;             /* jail roots (canonical directories) */
    int *rootfds;             /* O_PATH fds, -1 when the root did not exist at compile time */
    size_t n_roots;
    char **protected_files;   /* abx's own state: config, token, ledger, home, plugins... (canonical) */
    const char **protected_what; /* [n_protected] what each one is, for messages (static strings) */
    size_t n_protected;
    abx_ident *idents;        /* owned: identities of literal deny paths and protected files */
    size_t n_idents;
    bool has_subtree_idents;  /* some identity is a denied directory: opens walk up to check */
    /* owned: open-addressing hash of (dev, ino) over idents and stop roots (identset.c):
     * 0 empty, 1..n_idents an ident, n_idents+1.. a stop root (index into roots). */
    uint32_t *ident_tab;
    size_t ident_tab_mask;    /* table size - 1 (a power of two), 0 without a table */
    dev_t *root_dev;          /* [n_roots] identity of each root at compile time */
    ino_t *root_ino;
    bool *root_stop;          /* [n_roots] the ".." walk may stop at this root (identset.c) */
    bool *root_known;         /* [n_roots] root_dev/root_ino hold its identity (it had an fd) */
    abx_mask_ident *mask_ident; /* deny targets for process masks, one per distinct path */
    size_t n_mask_ident;
    /* mount table: for principal slot p (0..n_principals-1, n_principals = anonymous)
     * and op index o: the allow statements mounting o for p, as a run in mount_stmts. */
    uint32_t *mount_off, *mount_cnt;
    uint16_t *mount_stmts;
    size_t n_ops;
    bool has_approver;        /* some principal has role approver */
    /* admission state (mutable counters; the decision data above is immutable) */
    atomic_int *concurrency;  /* [n_allow] calls in flight per statement */
    _Atomic int64_t *rate_tat;/* [(n_principals+1) * n_allow] GCRA theoretical arrival, µs */
    /* owned: documents derived from this snapshot, set once (compare-and-swap from NULL) */
    _Atomic(abx_policy_derived *) derived;
} abx_policy;

/* Compile from the config's "auth" and "policy" values (borrowed; may be NULL).
 * lines may be NULL. Errors name file:line via the callback-free message buffer.
 * Returns NULL with err set. */
typedef struct abx_policy_input {
    abx_registry *reg;              /* frozen */
    const json_t *auth;             /* config "auth" or NULL (embedded default) */
    const json_t *policy;           /* config "policy" or NULL → preset workspace */
    const abx_linemap *lines;
    const char *config_path;        /* for messages and the protected list; may be NULL */
    const char *workspace;          /* absolute */
    const char *default_token_sha256_hex; /* embedded default: principal local */
    const json_t *egress;           /* config "egress" or NULL */
    const char *runtime_dir;        /* private TMPDIRs: no statement may write where it lies; NULL none */
    const char *const *protected_files;
    const char *const *protected_what; /* [n_protected] what each is ("the ledger"); may be NULL */
    size_t n_protected;
    bool allow_lint_errors;         /* unsafe scopes become warnings */
    const struct abx_secrets *secrets; /* config secrets: ${secret:NAME} in net.inject; may be NULL */
    const json_t *default_net;      /* embedded default: the preset statement's `net` (abx serve
                                       --net), or NULL */
    bool extends_default;           /* `extends: default`: the file grows the embedded default
                                       (principal local, preset workspace) */
    bool keep_sign_secrets;         /* keep plaintext tokens for abx_policy_signed (the e2b door) */
    const char *default_token;      /* the embedded default's plaintext token, for the above */
} abx_policy_input;

abx_policy *abx_policy_compile(const abx_policy_input *in, abx_diags *diags);
/* The state-layout rule alone (config.state_writable), read from the statements' path
 * scopes without resolving ops: run before plugins and Python modules are loaded. */
int abx_policy_state_precheck(const abx_policy_input *in, abx_diags *diags);
void abx_policy_ref(abx_policy *p);
void abx_policy_unref(abx_policy *p);

/* Step 3: principal slot for a presented token (constant-time over all tokens), or -1. */
int abx_policy_auth(const abx_policy *p, const char *token, size_t len, int64_t now_wall_ms);
/* The principal whose plaintext token T makes SHA-256(prefix || T || suffix) equal want
 * (E2B's pre-signed URL scheme), compared against every kept token without early exit;
 * -1 none, or the principal expired. Only principals whose token was read in plain text
 * (token_env, token_file, token, the embedded default) while keep_sign_secrets was set. */
int abx_policy_signed(const abx_policy *p, const char *prefix, size_t plen, const char *suffix, size_t slen,
                      const unsigned char want[32], int64_t now_wall_ms);
int abx_policy_principal_slot(const abx_policy *p, const char *id); /* -1 unknown; n_principals = anonymous */
/* Whether principal `slot`'s token has expired (expires_at): a session or ticket it
 * made stands for the token and ends with it. */
bool abx_policy_principal_expired(const abx_policy *p, int slot, int64_t now_wall_ms);
const char *abx_policy_principal_id(const abx_policy *p, int slot);

/* Step 5 */
bool abx_policy_mounted(const abx_policy *p, int slot, size_t op_index);

/* Step 7: the decision for one call. */
typedef struct abx_path_value {
    const char *param;        /* borrowed from the op declaration */
    size_t index;             /* element index for list parameters */
    char *canonical;          /* owned */
    int rootfd;               /* borrowed from the snapshot, or owned when own_fd; -1 until opened */
    const char *root;         /* the jail root (borrowed from the snapshot) */
    bool own_fd;
    bool lexical;             /* canonical is the name as written, not yet confirmed symlink-free
                                 (abx_decide_lexical): the first lookup confirms it or the call is
                                 decided again (pipeline/ctx.c) */
    const char *rel;          /* points into canonical */
} abx_path_value;

typedef struct abx_decision {
    abx_err err;                          /* ABX_OK = admitted */
    char message[300];
    bool approval;
    int64_t limits[ABX_LIM__COUNT];       /* effective, -1 = unlimited */
    char determining[256];                /* "allow[0],allow[2]" or "deny[1]" */
    abx_path_value *paths;                /* owned */
    size_t n_paths;
    abx_argv argv;                        /* canonical argv of a command op (program resolved); owned */
    bool net;                             /* the process may use the host network */
    const abx_egress_allow *net_allow;    /* borrowed from the snapshot: without net, the process
                                             gets out only through the egress proxy, to these */
    const abx_egress_resolver *net_resolve; /* borrowed: the config's egress.resolve */
    const char *net_stmt;                 /* borrowed: the label of the statement net_allow is from */
    const struct abx_egress_injects *net_inject; /* borrowed: that statement's net.inject, or NULL */
    int chosen;                           /* the admitting statement whose confinement the process gets (decide.c take_stmt) */
    uint16_t *admitting;                  /* owned: every allow statement that admitted the call */
    size_t n_admitting;
    size_t n_held;                        /* concurrency slots taken by abx_admit (released by abx_release) */
    uint16_t *held;                       /* owned, sized like admitting */
} abx_decision;

/* Step 7. trace (may be NULL) receives the explain trace: mounting statements, deny
 * hits, each statement's verdict with canonical values, limits, the decision. */
void abx_decide(const abx_policy *p, int slot, const abx_op *op, size_t op_index, const json_t *args,
                abx_decision *out, json_t *trace);
/* Step 7 without a lookup for the names of path parameters (except those that delete):
 * each is decided as written (abx_path_canon_lexical) and marked lexical. Returns true
 * when such a decision stands: it admitted the call with no approval and no rate or
 * concurrency limit. Its caller must then reach those paths only through a lookup that
 * refuses symlinks (the jail's open, abx_path_symlink_free) and decide again with
 * abx_decide when one fails. Anything else was decided again at once with abx_decide
 * (false). */
bool abx_decide_lexical(const abx_policy *p, int slot, const abx_op *op, size_t op_index, const json_t *args,
                        abx_decision *d);
/* Step 8: rate (GCRA per principal and statement) and concurrency (per statement).
 * Returns ABX_OK, or LIMIT_RATE with *retry_after_s, or LIMIT_CONCURRENCY. */
abx_err abx_admit(abx_policy *p, int slot, abx_decision *d, int64_t now_us, int *retry_after_s);
void abx_release(abx_policy *p, abx_decision *d);
void abx_decision_release(abx_decision *d);

/* Whether an admitted call may see a canonical path found while walking (see
 * abx_ctx_path_visible). */
bool abx_policy_path_visible(const abx_policy *p, int slot, const abx_op *op, const abx_decision *d,
                             const char *canonical);
/* Whether a deny statement that applies to this principal and op, or a protected
 * area, covers a canonical path (for any access): what nothing of the call may show. */
bool abx_policy_path_hidden(const abx_policy *p, int slot, const abx_op *op, const char *canonical);

/* Identity checks for abx's own file ops. ident_denied: whether a file (its stat)
 * is a denied identity for this call (equality only: walkers descending from an
 * admitted directory meet every denied directory on their way). fd_check: the full
 * check of a file a handler opened — its identity, and, when the policy has denied
 * directories, every directory above it (dirfd: the directory holding fd, or -1 when
 * fd is itself a directory); 0 or -ABX_EIDENT. */
bool abx_policy_ident_denied(const abx_policy *p, int slot, const abx_op *op, const abx_decision *d,
                             const struct stat *st);
int abx_policy_fd_check(const abx_policy *p, int slot, const abx_op *op, const abx_decision *d, int fd, int dirfd);
/* The same; *fst gets fd's fstat when the check took one (returns 1 then, 0 when it did
 * not need it, -ABX_EIDENT when denied), so a handler need not ask again. */
int abx_policy_fd_check_st(const abx_policy *p, int slot, const abx_op *op, const abx_decision *d, int fd, int dirfd,
                           struct stat *fst);

/* The filesystem a process started by an admitted call may see: read-only and
 * read-write roots (the chosen statement's pattern roots), paths to hide (the deny
 * targets of the statements that apply to the call, and abx's own files, inside those
 * roots), to keep read-only (.git/hooks and .git/config at the top of write roots) and
 * to pin (bind onto themselves, so the process can neither rename nor remove them:
 * every deny target of any statement inside a write root and each folder between it and
 * that root, and .git at the top of write roots). Strings owned by the view.
 * Returns 0; -1 out of memory; -2 when a deny target's file was moved by something
 * outside abx's pins and cannot be found again (v->moved names it): refuse the spawn. */
typedef struct abx_fs_view {
    char **ro, **rw, **masks, **readonly, **pins;
    size_t n_ro, n_rw, n_masks, n_readonly, n_pins;
    const char *cwd_root;                 /* borrowed (a member of rw or ro): default cwd */
    char *moved;                          /* owned: with -2, the deny path that moved */
} abx_fs_view;
int abx_policy_fs_view(const abx_policy *p, int slot, const abx_op *op, const abx_decision *d, abx_fs_view *v);
void abx_fs_view_release(abx_fs_view *v);
/* Whether files.move must refuse to move path (canonical), whoever asks: an existing
 * deny target of any statement or abx's own file, a folder above one, or .git at the
 * top of a root.
 * Moving them would carry the file away from the name a later process's mask uses. */
bool abx_policy_move_pinned(const abx_policy *p, const char *path);

/* The url patterns of the statement an admitted decision chose (borrowed from the
 * snapshot); NULL with *n 0 when it has none. */
const char *const *abx_policy_url_scope(const abx_policy *p, const abx_decision *d, size_t *n);

#endif
