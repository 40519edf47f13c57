/* dyndef.h — session-authored dynamic tools (issue 23): the definition parser and the
 * per-principal overlay that discovery and dispatch consult after the frozen registry.
 *
 * A definition ({name, description, parameters, code, language, effects?, paths?, net?,
 * tests?}) is checked here and reduced to its canonical text (sorted keys, compact JSON,
 * parameters normalised); its hash is the SHA-256 of that text. Nothing here runs code.
 *
 * The overlay holds the defined tools of every principal. An entry is visible to its
 * author, and after a promotion to the principals and roles it names. `dyn.<name>`
 * resolves to the newest live entry of that name visible to the caller; an entry stays
 * callable by hash until it expires or is deleted. Entries are never freed before the
 * overlay (a call may hold one): a deleted or expired entry is only marked. */
#ifndef ABX_CORE_DYNDEF_H
#define ABX_CORE_DYNDEF_H

#include "core/core.h"
#include "core/util.h"
#include <jansson.h>
#include <pthread.h>
#include <stdatomic.h>

#define ABX_DYN_NAME_MAX 58      /* "dyn__" + name fits the providers' 64 characters */
#define ABX_DYN_PARAMS_MAX 32
#define ABX_DYN_CODE_MAX (64 * 1024)
#define ABX_DYN_TESTS_MAX 16
#define ABX_DYN_PATHS_MAX 16
#define ABX_DYN_PER_AUTHOR 256   /* live tools one principal may hold */
#define ABX_DYN_AUDIENCE_MAX 32  /* principals and roles one tool may be promoted to */

typedef struct abx_dyndef {
    abx_arena *arena;            /* owned: everything below */
    const char *name;            /* "csv_sum" */
    const char *id;              /* "dyn.csv_sum" */
    const char *description;
    const char *code;
    abx_param *params;           /* {0}-terminated */
    size_t n_params;
    unsigned effects;            /* ABX_EFF_*; default exec */
    const char **read, **write;  /* the definition's own path roots (absolute, normalised) */
    size_t n_read, n_write;
    bool net;
    json_t *tests;               /* owned: [{args, expect}] */
    char *canonical;             /* arena: the canonical definition text */
    char hash[65];               /* SHA-256 of canonical, hex */
} abx_dyndef;

/* Parse and check a definition (borrowed JSON). 0 and *out (free with abx_dyndef_free),
 * or -1 and a message naming the field. */
int abx_dyndef_parse(const json_t *def, abx_dyndef **out, char *err, size_t errlen);
void abx_dyndef_free(abx_dyndef *d);
/* Is name a portable tool name ([a-z][a-z0-9_]*, no "__", no trailing '_', ≤ 58)? */
bool abx_dyn_name_ok(const char *name);

/* ---- the overlay ---- */

typedef struct abx_dyn_entry {
    abx_dyndef *def;             /* owned */
    char *author;                /* owned */
    abx_op_def opdef;            /* the synthetic op dyn.<name> (handler set by the tools namespace) */
    abx_op op;
    json_t *tests;               /* owned: the test results at definition */
    int64_t created_ms, expires_ms; /* wall clock */
    char *to[ABX_DYN_AUDIENCE_MAX]; /* owned: principals and "role:x" it is promoted to; only appended */
    _Atomic size_t n_to;         /* published after its slot is written: readers need no lock */
    bool deleted;
    char session[40];            /* the session it lives as long as ("" none) */
    struct abx_dyn_entry *next;
} abx_dyn_entry;

typedef struct abx_overlay abx_overlay;

abx_overlay *abx_overlay_new(void);
void abx_overlay_free(abx_overlay *ov);
/* The caller of a lookup: a principal and its roles. */
typedef struct abx_dyn_who {
    const char *principal;
    char *const *roles;
    size_t n_roles;
} abx_dyn_who;
/* Make an entry for def by author (takes def), its op handled by handler. NULL with a
 * reason when the author holds too many live tools. */
abx_dyn_entry *abx_overlay_add(abx_overlay *ov, abx_dyndef *def, const char *author, int64_t ttl_ms, json_t *tests,
                               abx_handler handler, char *err, size_t errlen);
/* The live entry with this hash visible to who, or NULL. */
abx_dyn_entry *abx_overlay_by_hash(abx_overlay *ov, const char *hash, const abx_dyn_who *who);
/* The live entry the name ("csv_sum") or id ("dyn.csv_sum") resolves to for who. */
abx_dyn_entry *abx_overlay_by_name(abx_overlay *ov, const char *name, const abx_dyn_who *who);
/* Each live entry visible to who, one per name (the newest; the caller's own first). */
void abx_overlay_each(abx_overlay *ov, const abx_dyn_who *who, void (*fn)(void *ud, abx_dyn_entry *e), void *ud);
/* Every live entry with this hash visible to who (tools.list: all versions). */
void abx_overlay_each_version(abx_overlay *ov, const abx_dyn_who *who, void (*fn)(void *ud, abx_dyn_entry *e),
                              void *ud);
/* A session ended: every entry bound to it (abx_overlay_bind_session) expires. */
void abx_overlay_end_session(abx_overlay *ov, const char *session);
void abx_overlay_bind_session(abx_overlay *ov, abx_dyn_entry *e, const char *session);
/* Mark deleted (author only): 0, or -1 when not the author's live entry. */
int abx_overlay_delete(abx_overlay *ov, const char *hash, const char *author);
/* Add principals/roles to an entry's audience. 0, -1 (gone) or -2 (more than
 * ABX_DYN_AUDIENCE_MAX in all). */
int abx_overlay_promote(abx_overlay *ov, const char *hash, const json_t *to);
/* Changes so far (defines, deletions, promotions, expiries seen): MCP's list_changed. */
uint64_t abx_overlay_gen(abx_overlay *ov);
/* Is there at least one live entry (a cheap test for the hot paths)? */
bool abx_overlay_any(abx_overlay *ov);
/* A memo of text derived from the overlay for key (a principal's view of it): a copy in
 * arena a when it was put at generation gen = the current one and no entry expired since,
 * else NULL. put stores one (a few keys are kept; the oldest is replaced). Discovery
 * keeps a principal's serialized entries here, so /ops does not rebuild them per call. */
const char *abx_overlay_memo_get(abx_overlay *ov, const char *key, abx_arena *a, size_t *len);
void abx_overlay_memo_put(abx_overlay *ov, const char *key, const char *text, size_t len, uint64_t gen);

#endif
