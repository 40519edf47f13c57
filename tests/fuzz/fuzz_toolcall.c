/* fuzz_toolcall.c — libFuzzer target for the provider tool-call boundary of
 * src/pipeline/toolcall.c: abx_toolcalls_decode and abx_toolcalls_answer.
 *
 * The first input byte picks the format (openai, responses, anthropic, gemini); the rest
 * is JSON text, the model's output as a caller would post it. Invariants:
 *  - decode answers ok or args.invalid (always with a message) and leaves nothing behind
 *    on error;
 *  - ok means 1..ABX_TOOLCALLS_MAX calls, each with a non-empty NUL-free name, exactly one
 *    of arguments (an object) or an error text, and an id where the format has one;
 *  - the calls survive a round trip: written back in the same format's canonical shape
 *    and decoded again, they come out equal (names, ids, arguments, which calls failed);
 *  - the answer for them has one result per call, in order, echoing each id (and, for
 *    gemini, each name), and serializes.
 * Owns no state across inputs. */
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "doors/toolcall.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

#define MAX_INPUT 16384

static void fail(const char *what, const char *detail)
{
    fprintf(stderr, "fuzz_toolcall: %s\n  %s\n", what, detail ? detail : "");
    abort();
}

/* The calls in the format's canonical shape (the one the decoder documents). Calls whose
 * arguments failed are written with arguments the decoder must refuse the same way. */
static json_t *canonical(abx_tool_format f, const abx_toolcalls *c)
{
    json_t *list = json_array();
    for (size_t i = 0; i < c->n; i++) {
        const abx_toolcall *x = &c->v[i];
        json_t *args = x->args ? json_incref(x->args) : json_string("[not an object]");
        json_t *item = NULL;
        switch (f) {
        case ABX_TOOLS_OPENAI:
        case ABX_TOOLS_RESPONSES: {
            char *text = x->args ? json_dumps(x->args, JSON_COMPACT) : NULL;
            json_t *a = json_string(text ? text : "[1]");
            free(text);
            item = f == ABX_TOOLS_OPENAI
                       ? json_pack("{s:s, s:s, s:{s:s, s:o}}", "id", x->id, "type", "function", "function", "name",
                                   x->name, "arguments", a)
                       : json_pack("{s:s, s:s, s:s, s:o}", "type", "function_call", "call_id", x->id, "name", x->name,
                                   "arguments", a);
            break;
        }
        case ABX_TOOLS_ANTHROPIC:
            item = json_pack("{s:s, s:s, s:s, s:O}", "type", "tool_use", "id", x->id, "name", x->name, "input", args);
            break;
        case ABX_TOOLS_GEMINI:
            item = json_pack("{s:{s:s, s:O}}", "functionCall", "name", x->name, "args", args);
            if (item && x->id)
                json_object_set_new(json_object_get(item, "functionCall"), "id", json_string(x->id));
            break;
        default:
            break;
        }
        json_decref(args);
        if (!item)
            fail("cannot build the canonical payload", x->name);
        json_array_append_new(list, item);
    }
    static const char *const key[] = {"tool_calls", "output", "content", "parts"};
    return json_pack("{s:o}", key[f], list);
}

static bool same_text(const char *a, const char *b)
{
    return (!a && !b) || (a && b && strcmp(a, b) == 0);
}

static void check_calls(abx_tool_format f, const abx_toolcalls *c, const char *text)
{
    if (c->n == 0 || c->n > ABX_TOOLCALLS_MAX)
        fail("ok with a call count out of range", text);
    for (size_t i = 0; i < c->n; i++) {
        const abx_toolcall *x = &c->v[i];
        if (!x->name || !*x->name)
            fail("a call without a name", text);
        if ((x->args == NULL) == (x->error == NULL))
            fail("a call needs exactly one of arguments or an error", text);
        if (x->args && !json_is_object(x->args))
            fail("arguments that are not an object", text);
        if (x->error && !*x->error)
            fail("an empty error text", text);
        if (f != ABX_TOOLS_GEMINI && (!x->id || !*x->id))
            fail("a call without an id", text);
        if (x->id && !*x->id)
            fail("an empty id", text);
    }
}

static void check_answer(abx_tool_format f, const abx_toolcalls *c, const char *text)
{
    abx_toolresult *res = calloc(c->n, sizeof *res);
    json_t *okb = json_pack("{s:s}", "content", "x");
    json_t *errb = json_pack("{s:{s:s, s:s}}", "error", "code", "args.invalid", "message", "m");
    for (size_t i = 0; i < c->n; i++)
        res[i] = (abx_toolresult){i % 2 ? 400 : 200, i % 2 ? errb : okb};
    json_t *a = abx_toolcalls_answer(f, c, res);
    if (!a)
        fail("no answer", text);
    static const char *const list_key[] = {"messages", "input", "content", "parts"};
    const json_t *list = json_object_get(a, list_key[f]);
    if (json_array_size(list) != c->n)
        fail("the answer does not hold one result per call", text);
    for (size_t i = 0; i < c->n; i++) {
        const json_t *m = json_array_get(list, i);
        const char *id = NULL;
        switch (f) {
        case ABX_TOOLS_OPENAI: id = json_string_value(json_object_get(m, "tool_call_id")); break;
        case ABX_TOOLS_RESPONSES: id = json_string_value(json_object_get(m, "call_id")); break;
        case ABX_TOOLS_ANTHROPIC:
            id = json_string_value(json_object_get(m, "tool_use_id"));
            if (json_is_true(json_object_get(m, "is_error")) != (i % 2 == 1))
                fail("is_error does not follow the status", text);
            break;
        case ABX_TOOLS_GEMINI: {
            const json_t *fr = json_object_get(m, "functionResponse");
            id = json_string_value(json_object_get(fr, "id"));
            if (!same_text(json_string_value(json_object_get(fr, "name")), c->v[i].name))
                fail("a functionResponse does not echo the name", text);
            if (!json_object_get(json_object_get(fr, "response"), i % 2 ? "error" : "output"))
                fail("a functionResponse without output/error", text);
            break;
        }
        default: break;
        }
        if (!same_text(id, c->v[i].id))
            fail("a result does not echo its call id", text);
    }
    char *s = json_dumps(a, JSON_COMPACT);
    if (!s)
        fail("the answer does not serialize", text);
    free(s);
    json_decref(a);
    json_decref(okb);
    json_decref(errb);
    free(res);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    if (size < 1 || size > MAX_INPUT)
        return 0;
    abx_tool_format f = (abx_tool_format)(data[0] % ABX_TOOLS__COUNT);
    json_error_t je;
    json_t *doc = json_loadb((const char *)data + 1, size - 1, JSON_DECODE_ANY | JSON_ALLOW_NUL, &je);
    if (!doc)
        return 0;
    char *text = json_dumps(doc, JSON_COMPACT | JSON_ENCODE_ANY);
    abx_toolcalls c;
    char msg[300] = "";
    abx_err e = abx_toolcalls_decode(f, doc, &c, msg, sizeof msg);
    if (e != ABX_OK) {
        if (e != ABX_E_ARGS_INVALID)
            fail("unexpected error code", abx_err_code(e));
        if (!msg[0])
            fail("an error without a message", text);
        if (c.n || c.v)
            fail("calls left behind after an error", text);
    } else {
        check_calls(f, &c, text);
        check_answer(f, &c, text);
        json_t *again = canonical(f, &c);
        abx_toolcalls d;
        if (abx_toolcalls_decode(f, again, &d, msg, sizeof msg) != ABX_OK)
            fail("the canonical form of accepted calls is refused", msg);
        if (d.n != c.n)
            fail("the round trip changed the call count", text);
        for (size_t i = 0; i < c.n; i++) {
            if (!same_text(c.v[i].name, d.v[i].name) || !same_text(c.v[i].id, d.v[i].id))
                fail("the round trip changed a name or an id", text);
            if ((c.v[i].args == NULL) != (d.v[i].args == NULL))
                fail("the round trip changed which calls failed", text);
            if (c.v[i].args && !json_equal(c.v[i].args, d.v[i].args))
                fail("the round trip changed arguments", text);
        }
        abx_toolcalls_release(&d);
        json_decref(again);
        abx_toolcalls_release(&c);
    }
    free(text);
    json_decref(doc);
    return 0;
}
