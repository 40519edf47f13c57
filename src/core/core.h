/* core.h — the core module's internal view: op ids (grammar, prefix rule, aliases,
 * mangling), the registry and its frozen index, parameter schemas and argument
 * validation, and the errno map. Knows nothing of HTTP, SQLite or YAML. */
#ifndef ABX_CORE_CORE_H
#define ABX_CORE_CORE_H

#include <abx/abx.h>
#include <pthread.h>
#include <stdbool.h>
#include <stddef.h>

/* ---- ids ---- */
#define ABX_ID_MAX 128
/* Grammar (v2.1): 2–5 segments of [a-z][a-z0-9_]*. Returns true, or false with why. */
bool abx_id_valid(const char *id, char *err, size_t errlen);
/* Segment-wise prefix: "system.env" is a prefix of "system.env.get". */
bool abx_id_is_prefix(const char *a, const char *b);
bool abx_id_reserved_ns(const char *id);     /* first segment is SDK-reserved */
bool abx_id_known_verb(const char *id);      /* last segment is a conventional verb */
/* Legacy command names → id tail (v2.1 IF-05): lower-case, [^a-z0-9_] → '_', runs
 * collapsed, leading/trailing '_' trimmed, a leading digit prefixed "c_". Writes into
 * out; returns false if nothing is left. */
bool abx_id_mangle(const char *name, char *out, size_t outlen);
/* Tool name for MCP and the LLM providers: each '.' → "__" ("files.list" →
 * "files__list"; valid in MCP, OpenAI, Anthropic and Gemini). False if out is short. */
bool abx_id_tool_name(const char *id, char *out, size_t outlen);
/* Edit distance (for did-you-mean), capped at max+1. */
int abx_edit_distance(const char *a, const char *b, int max);
/* A request id: the 8-character boot prefix, '-', and n in lowercase hex of at least 8
 * digits (what snprintf's "%s-%08lx" writes, without parsing a format per request). */
#define ABX_REQUEST_ID_MAX (9 + 2 * sizeof(unsigned long) + 1)
void abx_request_id_format(char out[ABX_REQUEST_ID_MAX], const char prefix[8], unsigned long n);

/* ---- ops as the registry holds them ---- */
typedef struct abx_binding {
    char method[8];          /* GET POST PUT PATCH DELETE HEAD OPTIONS */
    char *path;              /* "/files/read", "/process/{pid}"; owned */
} abx_binding;

typedef struct abx_op {
    const abx_op_def *def;   /* borrowed: the static table outlives the registry */
    const char *id;          /* = def->id */
    unsigned effects;        /* resolved: undeclared → ABX_EFF_ADMIN */
    bool effects_declared;
    bool explicit_only;      /* admin among effects: mounted only by exact id/alias */
    abx_binding bindings[ABX_MAX_BINDINGS];
    size_t n_bindings;
    size_t n_params;
    unsigned path_params;    /* bitmask over def->params of ABX_KIND_PATH params */
    unsigned scoped_kinds;   /* bitmask of 1u << abx_kind declared by params */
} abx_op;

typedef struct abx_lint {
    char code[40];           /* "core.effects_undeclared", "core.unknown_verb", "core.path_like_param" */
    char id[ABX_ID_MAX];
    char message[300];
} abx_lint;

struct abx_registry {
    abx_registry *parent;    /* borrowed; the child reads through it until frozen */
    abx_op **own;            /* owned ops added to this registry */
    size_t n_own, cap_own;
    abx_lint *lints;         /* owned */
    size_t n_lints, cap_lints;
    bool frozen;
    bool process_wide;       /* a static registry (the default): abx_registry_free leaves it */
    pthread_mutex_t mu;
    /* Frozen index (built by freeze, immutable afterwards): every visible op sorted by id. */
    abx_op **all;            /* owned array of borrowed pointers */
    size_t n_all;
    struct abx_alias { const char *name; abx_op *op; } *aliases; /* sorted by name */
    size_t n_aliases;
};

/* Add ops; reserved namespaces allowed only when builtin is true. */
int abx__registry_add(abx_registry *reg, const abx_op_def *ops, bool builtin, char *err, size_t errlen);
/* Frozen lookups (the registry must be frozen). */
const abx_op *abx_registry_get(const abx_registry *reg, const char *id);
const abx_op *abx_registry_resolve(const abx_registry *reg, const char *name); /* id or alias */
size_t abx_registry_count(const abx_registry *reg);
/* A tool name ("files__list") or a dotted id/alias → the op, or NULL. */
const abx_op *abx_registry_resolve_tool(const abx_registry *reg, const char *name);
/* Position of op in the frozen index (per-registry arrays such as metrics use it). */
size_t abx_registry_index_of(const abx_registry *reg, const abx_op *op);
const abx_op *abx_registry_at(const abx_registry *reg, size_t i);
/* Lints collected at registration into this registry (walk ->parent for the chain). */
size_t abx_registry_lints(const abx_registry *reg, const abx_lint **out);

/* ---- parameters and arguments ---- */
const abx_param *abx_op_param(const abx_op *op, const char *name);
const char *abx_type_name(abx_type t);
const char *abx_effects_text(unsigned effects, char *buf, size_t len); /* "read,write" */
unsigned abx_effect_parse(const char *name); /* 0 when unknown */
const char *abx_effect_name(unsigned index); /* the name of effect bit 1 << index, NULL past the last */
const char *abx_stream_name(abx_stream s);
const char *abx_limit_name(enum abx_limit l);
const char *abx_kind_name(abx_kind k);

/* Validate args (a JSON object, modified in place: defaults filled in, nulls of
 * optional params removed) against the op's schema. On error returns the code and
 * writes a message naming the parameter. */
abx_err abx_args_validate(const abx_op *op, json_t *args, char *msg, size_t msglen);
/* Add one query-string (or path-variable) value to args, typed by the schema:
 * integers, numbers, booleans (true/false/1/0), enums, strings; lists from repeated
 * keys. Unknown names → args.unknown; values that do not parse → args.invalid. */
abx_err abx_args_add_text(const abx_op *op, json_t *args, const char *name, const char *value, size_t vlen,
                          char *msg, size_t msglen);
/* JSON Schema (2020-12) of one parameter / of the op's whole argument object (owned). */
json_t *abx_param_schema(const abx_param *p);
json_t *abx_op_args_schema(const abx_op *op);
/* resultschema.c: JSON Schema of the op's declared JSON result (an object) or NULL when
 * it declares none; of its SSE events ({name: schema of the data}) or NULL; a value made
 * from a schema, for documentation examples (owned). */
json_t *abx_op_result_schema(const abx_op *op);
json_t *abx_op_events_schema(const abx_op *op);
json_t *abx_fields_schema(const abx_param *fields);
json_t *abx_schema_example(const json_t *schema);

/* ---- errors (errors.c) ---- */
/* The errno the policy's identity check (abx_policy_fd_check) answers for a denied
 * identity; abx_err_from_errno maps it to policy.path_denied. Expands to an <errno.h> name. */
#define ABX_EIDENT EKEYREJECTED
/* errno from a jailed open/stat (or a process's working directory) → the error table:
 * missing → files.not_found, an escape or a denied identity → policy.path_denied,
 * permission → files.access, out of descriptors or memory → server.unavailable,
 * anything else → files.io. */
abx_err abx_err_from_errno(int err);
/* The one error envelope every door answers: {"error": {"code", "message"[, "details"]}}.
 * message NULL → the table's meaning; details (optional, borrowed) are added by reference.
 * New reference; NULL when out of memory, and then ABX_ERROR_JSON_OOM is the body to send. */
json_t *abx_error_json(abx_err e, const char *message, const json_t *details);
#define ABX_ERROR_JSON_OOM "{\"error\":{\"code\":\"server.unavailable\",\"message\":\"out of memory\"}}"

#endif
