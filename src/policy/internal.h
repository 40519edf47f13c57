/* internal.h — what the files of src/policy share and nothing outside the folder sees:
 * the compile context, statement parsing (stmt.c, auth.c), the matching rules
 * (match.c), the layout and lint checks, and a snapshot's teardown (snapshot.c).
 * The "abx_pol_" prefix marks these as the folder's own, not the policy API. */
#ifndef ABX_POLICY_INTERNAL_H
#define ABX_POLICY_INTERNAL_H

#include "policy/policy.h"

/* One compile (or precheck): the snapshot being built and where diagnostics go. */
typedef struct cctx {
    abx_policy *p;
    const abx_policy_input *in;
    abx_diags *d;
    bool strict;
    bool in_preset;  /* abx's own presets: their deliberate choices are not lint errors */
} cctx;

/* snapshot.c */
void abx_pol_stmt_release(abx_stmt *s);
void abx_pol_policy_free(abx_policy *p);

/* stmt.c: reading the config's values into statements */
int abx_pol_line_of(cctx *c, const json_t *obj, const char *key);
/* net_inject.c: net.inject of an allow statement (net an object) into s->net_inject */
bool abx_pol_net_inject(cctx *c, abx_stmt *s, const json_t *net);
void abx_pol_net_inject_free(abx_stmt *s);
bool abx_pol_strlist(cctx *c, const json_t *parent, const char *key, char ***out, size_t *n);
void abx_pol_free_strlist(char **l, size_t n);
bool abx_pol_check_keys(cctx *c, const json_t *obj, const char *const *allowed, const char *what);
/* A pattern as written → canonical pattern (NULL with err on a bad glob). Caller frees. */
char *abx_pol_canon_glob(const char *workspace, const char *pat, char *err, size_t errlen);
bool abx_pol_add_patterns(cctx *c, abx_stmt *s, int k, const json_t *list, int line);
bool abx_pol_parse_paths(cctx *c, abx_stmt *s, const json_t *stmt);
/* Parse one statement into *s (always initialized, release it on failure too). */
/* net.c */
bool abx_pol_parse_net(cctx *c, abx_stmt *s, const json_t *stmt);
void abx_pol_net_release(abx_stmt *s);
bool abx_pol_parse_egress(cctx *c, const json_t *egress);
/* A ports scope entry ("8000", "3000-3999", "*"): port -1 asks whether the entry is
 * well formed; otherwise whether it holds port. */
bool abx_pol_port_in(const char *entry, long port);
bool abx_pol_parse_stmt(cctx *c, abx_stmt *s, const json_t *stmt, bool allow_side, const char *label);
/* Append *s to the array (moved in on success). */
bool abx_pol_add_stmt(abx_stmt **arr, size_t *n, abx_stmt *s);

/* auth.c: principals and tokens; *anon_ops is the anonymous mount list (borrowed) */
bool abx_pol_parse_auth(cctx *c, const json_t *auth, json_t **anon_ops);

/* compile.c */
void abx_pol_add_protected(abx_policy *p, const char *path, const char *what);
/* The path a deny pattern names literally (a mount can express it), or NULL. Caller frees. */
char *abx_pol_deny_target(const char *glob);

/* layout.c: config.state_writable */
void abx_pol_check_state_layout(cctx *c);

/* lint.c */
void abx_pol_lint_unmaskable_denies(const abx_policy *p, abx_diags *diags);
void abx_pol_lint_scope_required(const abx_policy *p, bool allow_lint_errors, abx_diags *diags);

/* match.c: the matching rules */
bool abx_pol_sel_match(const abx_sel *s, const abx_op *op, bool allow_side);
bool abx_pol_stmt_has_principal(const abx_policy *p, const abx_stmt *s, int slot);
bool abx_pol_stmt_has_op(const abx_stmt *s, const abx_op *op, bool allow_side);
/* A deny statement binds this op and principal (an empty list of either binds all). */
bool abx_pol_deny_applies(const abx_policy *p, const abx_stmt *s, const abx_op *op, int slot);
/* The scope kind an op needs that a statement lacks ("paths", "commands", ...), or NULL. */
const char *abx_pol_scope_missing(const abx_stmt *s, const abx_op *op);
bool abx_pol_intrinsic_admits(const abx_policy *p, const abx_param *pa, const char *canonical);
/* path is dir or below it; "/" holds every absolute path */
bool abx_pol_within(const char *dir, const char *path);
bool abx_pol_pattern_list_match(const abx_pattern *pats, size_t n, const char *path, const abx_pattern **hit);
bool abx_pol_protected_path(const abx_policy *p, const char *path, unsigned access);
/* identset.c: the (dev, ino) hash of idents and stop roots, built once per snapshot
 * after compile_idents; false on out of memory. */
bool abx_pol_build_identset(abx_policy *p);
void abx_pol_free_identset(abx_policy *p);
/* Whether an ident with identity st binds this call (subtree_only: only denied
 * folders); sets *stop (when not NULL) if st is a stop root. */
bool abx_pol_ident_lookup(const abx_policy *p, int slot, const abx_op *op, const abx_decision *d, const struct stat *st,
                          bool subtree_only, bool *stop);
/* Whether directory dirfd (borrowed) is, or lies below, a denied folder binding this call. */
bool abx_pol_under_denied_dir(const abx_policy *p, int slot, const abx_op *op, const abx_decision *d, int dirfd);
/* decide.c: abx_decide, with the names of path parameters taken as written when lexical
 * (lexical.c). */
void abx__decide(const abx_policy *p, int slot, const abx_op *op, size_t op_index, const json_t *args,
                 abx_decision *d, json_t *trace, bool lexical);

#endif
