/* discovery.h — documents generated from the registry: the operations.json catalog
 * (spec section 7.1), OpenAPI 3.1, and the docs tables. Filtered views take a policy
 * snapshot and a principal slot so a caller never sees an op it cannot call. */
#ifndef ABX_DISCOVERY_DISCOVERY_H
#define ABX_DISCOVERY_DISCOVERY_H

#include "core/core.h"
#include "policy/policy.h"

/* One catalog entry in the section 7.1 shape (owned). */
json_t *abx_catalog_entry(const abx_op *op);
/* {"catalog_version", "sdk_version", "ops": [...]}; policy NULL = every op (owned). */
json_t *abx_catalog(const abx_registry *reg, const abx_policy *policy, int slot);
/* OpenAPI 3.1 document; server_url may be NULL (owned). */
json_t *abx_openapi(const abx_registry *reg, const abx_policy *policy, int slot, const char *server_url);
/* {"/ops/<id>": {post}} for one op outside the registry (a dynamic tool), its error
 * responses inline (owned). */
json_t *abx_openapi_rpc_path(const abx_op *op);
/* The documents served again and again, cached per snapshot (see cache.c). MCP_TOOLS is
 * MCP's tools/list array (abx_mcp_tools). */
typedef enum abx_doc { ABX_DOC_CATALOG, ABX_DOC_OPENAPI, ABX_DOC_MCP_TOOLS, ABX_DOC__COUNT } abx_doc;
/* Compact JSON text of the catalog, or of the OpenAPI document without "servers", for
 * slot's view of snapshot p; built on the first call, then served from the cache.
 * Borrowed: valid while the caller holds a reference on p. NULL on OOM. */
const char *abx_discovery_text(abx_doc kind, const abx_registry *reg, abx_policy *p, int slot, size_t *len);
/* The same document as a JSON value, built once per view and shared: a new reference the
 * caller must not modify. NULL on OOM. */
json_t *abx_discovery_json(abx_doc kind, const abx_registry *reg, abx_policy *p, int slot);
/* `abx gen-client`: a typed client module for lang "python", "ts" or "openapi", generated
 * from the whole registry offline. Caller frees; NULL with err filled on an unknown lang. */
char *abx_gen_client(const abx_registry *reg, const char *lang, char *err, size_t errlen);
/* Markdown: the operations table and the error-code table (caller frees). */
char *abx_docs_ops_markdown(const abx_registry *reg);
char *abx_docs_errors_markdown(void);

/* ---- LLM provider tool formats (tools.c) ---- */
typedef enum abx_tool_format {
    ABX_TOOLS_OPENAI,    /* Chat Completions: {"type": "function", "function": {...}} */
    ABX_TOOLS_RESPONSES, /* Responses: {"type": "function", "name", ...} */
    ABX_TOOLS_ANTHROPIC, /* Messages: {"name", "description", "input_schema"} */
    ABX_TOOLS_GEMINI,    /* generateContent: a Tool with functionDeclarations */
    ABX_TOOLS__COUNT
} abx_tool_format;
#define ABX_TOOL_FORMATS "openai, responses, anthropic, gemini"
#define ABX_TOOL_NAME_MAX 64 /* every provider's limit on a function name */
/* "openai" → ABX_TOOLS_OPENAI ...; false for anything else. */
bool abx_tool_format_parse(const char *name, size_t len, abx_tool_format *out);
const char *abx_tool_format_name(abx_tool_format f);
/* Whether an op is offered as a tool: not a WebSocket session, not a raw-body upload,
 * and its tool name (abx_id_tool_name) within ABX_TOOL_NAME_MAX characters. */
bool abx_tool_offered(const abx_op *op);
/* An argument schema (abx_op_args_schema) in the provider's subset (owned). *native is
 * false when the subset cannot express it and the portable JSON Schema came back
 * instead (declared strict: false for openai/responses, parametersJsonSchema for gemini). */
json_t *abx_tool_schema(const json_t *schema, abx_tool_format f, bool *native);
/* One op as the provider declares a tool (gemini: a FunctionDeclaration); NULL when the
 * op is not offered (owned). */
json_t *abx_tool_declaration(const abx_op *op, abx_tool_format f);
/* {"tools": [...]} of every offered op mounted for slot (policy NULL: every op an ordinary
 * principal could be granted, i.e. no explicit-only admin op), in the
 * provider's shape (gemini: one Tool holding all functionDeclarations) (owned). */
json_t *abx_tools(const abx_registry *reg, const abx_policy *policy, int slot, abx_tool_format f);
/* MCP: one op as a tools/list entry {name, title, description, inputSchema, annotations,
 * _meta}; NULL when the op is not offered (owned). */
json_t *abx_mcp_tool_entry(const abx_op *op);
/* MCP: the tools/list array of every offered op mounted for slot (policy NULL = every op),
 * in registry order (owned). Served through the cache as ABX_DOC_MCP_TOOLS. */
json_t *abx_mcp_tools(const abx_registry *reg, const abx_policy *policy, int slot);

#endif
