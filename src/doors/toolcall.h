/* toolcall.h — the provider-neutral form of an LLM's tool calls, and the two pure
 * functions that cross the provider boundary: decode the model's output (OpenAI
 * tool_calls, Responses function_call items, Anthropic tool_use blocks, Gemini
 * functionCall parts) into (call id, tool name, arguments), and encode the calls'
 * outcomes as the provider's result message(s). Nothing beyond this header sees a
 * provider shape; neither function touches a server, so both can be fuzzed alone. */
#ifndef ABX_DOORS_TOOLCALL_H
#define ABX_DOORS_TOOLCALL_H

#include "discovery/discovery.h"
#include <abx/abx.h>
#include <stddef.h>

typedef struct abx_toolcall {
    char *id;     /* owned: the provider's call id; NULL where it has none (gemini) */
    char *name;   /* owned: the tool name as the model wrote it (never empty) */
    json_t *args; /* owned: the arguments object; NULL when they could not be read */
    char *error;  /* owned: why the arguments could not be read (args NULL), else NULL */
} abx_toolcall;

typedef struct abx_toolcalls {
    abx_toolcall *v; /* owned, n entries in the order the model wrote them */
    size_t n;
} abx_toolcalls;

/* Decode the provider's output (doc, borrowed) into 1..ABX_TOOLCALLS_MAX calls. A
 * payload of the wrong shape, without calls or with too many is args.invalid with msg;
 * arguments that cannot be read (a bad JSON string, not an object) only mark that call.
 * On error out is left empty. */
#define ABX_TOOLCALLS_MAX 100
abx_err abx_toolcalls_decode(abx_tool_format f, const json_t *doc, abx_toolcalls *out, char *msg, size_t msglen);
void abx_toolcalls_release(abx_toolcalls *c);

/* One call's outcome: the HTTP status of its run and its body (the op's result, or
 * {"error": {"code", "message"}}), borrowed. */
typedef struct abx_toolresult {
    int status;
    const json_t *body;
} abx_toolresult;

/* The provider's result message(s) for calls with results[i] (owned):
 * openai {"messages": [{"role": "tool", ...}]}, responses {"input": [function_call_output]},
 * anthropic {"role": "user", "content": [tool_result]}, gemini {"role": "user", "parts":
 * [{"functionResponse": ...}]}. NULL on out of memory. */
json_t *abx_toolcalls_answer(abx_tool_format f, const abx_toolcalls *calls, const abx_toolresult *results);

#endif
