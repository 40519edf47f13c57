/* fuzz_args.c — libFuzzer target for src/core/schema.c argument checking.
 *
 * First input byte picks the mode, the rest is the payload:
 *  - even: the payload is JSON text (NUL allowed inside strings), validated against a
 *    fixed op declaring every parameter type (bounds, defaults, nullables, enum, bytes,
 *    list, map, nested object, list of objects, one_of). Invariants: only the three
 *    args.* codes (or ok) come back, always with a message; ok means the object holds
 *    only declared names, no null values, every default filled in, and a second
 *    validation is ok and changes nothing.
 *  - odd: the payload is a query string "name=value&name=value..." (values may hold any
 *    byte, NUL included) fed through abx_args_add_text to an op without one_of or
 *    required params. Invariants: only ok / args.unknown / args.invalid; an accepted
 *    value is stored with the declared JSON type (lists grow by one); afterwards
 *    abx_args_validate must give exactly the verdict predicted here from the few
 *    constraints query typing leaves to validation (enum choices, base64, int bounds).
 * Owns no state across inputs except the frozen registry built on first use. */
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/core.h"
#include "core/util.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

#define MAX_INPUT 4096

static abx_err ok_handler(abx_ctx *ctx, const json_t *args, abx_reply *reply)
{
    (void)ctx;
    (void)args;
    (void)reply;
    return ABX_OK;
}

static const abx_param item_fields[] = {
    {.name = "k", .type = ABX_T_STRING, .required = true},
    {.name = "v", .type = ABX_T_INT, .dflt = "0", ABX_RANGE(-5, 5)},
    {0},
};

static const abx_param obj_fields[] = {
    {.name = "depth", .type = ABX_T_INT, .required = true, ABX_RANGE(1, 5)},
    {.name = "label", .type = ABX_T_STRING, .nullable = true},
    {.name = "level", .type = ABX_T_INT, .dflt = "1"},
    {.name = "inner", .type = ABX_T_OBJECT, .fields = item_fields},
    {0},
};

static const abx_param all_params[] = {
    {.name = "name", .type = ABX_T_STRING, .required = true},
    {.name = "count", .type = ABX_T_INT, .dflt = "3", ABX_RANGE(0, 10)},
    {.name = "ratio", .type = ABX_T_NUMBER, ABX_RANGE(0, 1)},
    {.name = "flag", .type = ABX_T_BOOL, .dflt = "false"},
    {.name = "blob", .type = ABX_T_BYTES, .nullable = true},
    {.name = "nums", .type = ABX_T_LIST, .item = ABX_T_INT},
    {.name = "env", .type = ABX_T_MAP, .item = ABX_T_STRING},
    {.name = "modes", .type = ABX_T_MAP, .item = ABX_T_ENUM, .choices = "r|w"},
    {.name = "mode", .type = ABX_T_ENUM, .choices = "fast|slow", .dflt = "\"fast\""},
    {.name = "opts", .type = ABX_T_OBJECT, .fields = obj_fields, .nullable = true},
    {.name = "items", .type = ABX_T_LIST, .item = ABX_T_OBJECT, .fields = item_fields},
    {.name = "note", .type = ABX_T_STRING, .nullable = true, .dflt = "\"n\""},
    {.name = "command", .type = ABX_T_STRING},
    {.name = "argv", .type = ABX_T_LIST, .item = ABX_T_STRING},
    {0},
};

/* for query strings: nothing required, no one_of, and none inside "o" either (a required
 * field of a nested object is reported as args.missing, which is right, but would break the
 * "no required params" invariant below) */
static const abx_param opt_fields[] = {
    {.name = "k", .type = ABX_T_STRING},
    {.name = "v", .type = ABX_T_INT, .dflt = "0", ABX_RANGE(-5, 5)},
    {0},
};

static const abx_param text_params[] = {
    {.name = "s", .type = ABX_T_STRING},
    {.name = "i", .type = ABX_T_INT},
    {.name = "n", .type = ABX_T_NUMBER},
    {.name = "b", .type = ABX_T_BOOL},
    {.name = "ls", .type = ABX_T_LIST, .item = ABX_T_STRING},
    {.name = "li", .type = ABX_T_LIST, .item = ABX_T_INT},
    {.name = "lb", .type = ABX_T_LIST, .item = ABX_T_BOOL},
    {.name = "e", .type = ABX_T_ENUM, .choices = "a|bb"},
    {.name = "by", .type = ABX_T_BYTES},
    {.name = "ib", .type = ABX_T_INT, ABX_RANGE(0, 9)},
    {.name = "m", .type = ABX_T_MAP, .item = ABX_T_STRING},
    {.name = "o", .type = ABX_T_OBJECT, .fields = opt_fields},
    {0},
};

static const abx_op_def ops[] = {
    {.id = "fz.all.run", .effects = ABX_EFF_EXEC, .params = all_params, .one_of = "command|argv",
     .handler = ok_handler},
    {.id = "fz.text.get", .effects = ABX_EFF_READ, .params = text_params, .handler = ok_handler},
    {0},
};

static abx_registry *reg; /* lives for the process (kept reachable for LeakSanitizer) */
static const abx_op *op_all, *op_text;

static void fail(const char *what, const char *detail)
{
    fprintf(stderr, "fuzz_args: %s\n  %s\n", what, detail ? detail : "");
    abort();
}

static void init(void)
{
    if (op_all)
        return;
    char err[256];
    reg = abx_registry_new(NULL);
    if (!reg || abx_registry_add(reg, ops, err, sizeof err) != 0)
        fail("registry setup failed", err);
    abx_registry_freeze(reg);
    op_all = abx_registry_get(reg, "fz.all.run");
    op_text = abx_registry_get(reg, "fz.text.get");
}

static bool declared(const abx_param *params, const char *name)
{
    for (const abx_param *p = params; p->name; p++)
        if (strcmp(p->name, name) == 0)
            return true;
    return false;
}

/* After ok: only declared names, no nulls, defaults present (recursively for objects). */
static void check_clean(const abx_param *params, json_t *obj, const char *text)
{
    const char *k;
    json_t *v;
    json_object_foreach(obj, k, v)
    {
        if (!declared(params, k))
            fail("ok with an undeclared name", text);
        if (json_is_null(v))
            fail("ok with a null left in", text);
    }
    for (const abx_param *p = params; p->name; p++) {
        json_t *v2 = json_object_get(obj, p->name);
        if (p->dflt && !v2)
            fail("ok without a default filled in", p->name);
        if (p->required && !v2)
            fail("ok without a required argument", p->name);
        if (v2 && p->type == ABX_T_OBJECT)
            check_clean(p->fields, v2, text);
        if (v2 && p->type == ABX_T_LIST && p->item == ABX_T_OBJECT) {
            size_t i;
            json_t *it;
            json_array_foreach(v2, i, it) check_clean(p->fields, it, text);
        }
    }
}

static void json_mode(const uint8_t *data, size_t size)
{
    json_error_t je;
    json_t *args = json_loadb((const char *)data, size, JSON_DECODE_ANY | JSON_ALLOW_NUL, &je);
    if (!args)
        return;
    char *text = json_dumps(args, JSON_ENCODE_ANY | JSON_COMPACT);
    char msg[300];
    msg[0] = '\0';
    abx_err e = abx_args_validate(op_all, args, msg, sizeof msg);
    if (e != ABX_OK && e != ABX_E_ARGS_UNKNOWN && e != ABX_E_ARGS_MISSING && e != ABX_E_ARGS_INVALID)
        fail("unexpected error code", abx_err_code(e));
    if (e != ABX_OK && msg[0] == '\0')
        fail("error without a message", text);
    if (e != ABX_OK && !json_is_object(args) && e != ABX_E_ARGS_INVALID)
        fail("a non-object must be args.invalid", text);
    if (e == ABX_OK) {
        if (!json_is_object(args))
            fail("ok for a non-object", text);
        check_clean(all_params, args, text);
        json_t *copy = json_deep_copy(args);
        if (abx_args_validate(op_all, args, msg, sizeof msg) != ABX_OK)
            fail("second validation refuses", text);
        if (!json_equal(copy, args))
            fail("second validation changed the arguments", text);
        json_decref(copy);
    }
    /* the same value against the query-string op: must not crash, same code family */
    json_t *again = json_loadb((const char *)data, size, JSON_DECODE_ANY | JSON_ALLOW_NUL, &je);
    if (again) {
        e = abx_args_validate(op_text, again, msg, sizeof msg);
        if (e == ABX_E_ARGS_MISSING)
            fail("missing reported for an op without required params", text);
        json_decref(again);
    }
    free(text);
    json_decref(args);
}

static abx_type type_of(const char *name, abx_type *item)
{
    for (const abx_param *p = text_params; p->name; p++)
        if (strcmp(p->name, name) == 0) {
            *item = p->item;
            return p->type;
        }
    return ABX_T_NONE;
}

static bool json_has_type(const json_t *v, abx_type t)
{
    switch (t) {
    case ABX_T_STRING:
    case ABX_T_ENUM:
    case ABX_T_BYTES:
        return json_is_string(v);
    case ABX_T_INT:
        return json_is_integer(v);
    case ABX_T_NUMBER:
        return json_is_real(v);
    case ABX_T_BOOL:
        return json_is_boolean(v);
    default:
        return false;
    }
}

static void text_mode(const uint8_t *data, size_t size)
{
    json_t *args = json_object();
    char msg[300];
    bool predict_invalid = false;
    char name[64];
    size_t i = 0;
    while (i < size) {
        size_t start = i;
        while (i < size && data[i] != '&')
            i++;
        const char *pair = (const char *)data + start;
        size_t len = i - start;
        i++;
        const char *eq = memchr(pair, '=', len);
        size_t nl = eq ? (size_t)(eq - pair) : len;
        const char *val = eq ? eq + 1 : "";
        size_t vl = eq ? len - nl - 1 : 0;
        if (nl >= sizeof name || memchr(pair, '\0', nl))
            continue; /* names are C strings (dispatch refuses NUL in names) */
        memcpy(name, pair, nl);
        name[nl] = '\0';
        abx_type item = ABX_T_NONE, t = type_of(name, &item);
        json_t *before = json_object_get(args, name);
        size_t before_n = json_is_array(before) ? json_array_size(before) : 0;
        bool had = before != NULL;
        msg[0] = '\0';
        abx_err e = abx_args_add_text(op_text, args, name, val, vl, msg, sizeof msg);
        if (e != ABX_OK && e != ABX_E_ARGS_UNKNOWN && e != ABX_E_ARGS_INVALID)
            fail("unexpected add_text code", abx_err_code(e));
        if (e != ABX_OK && msg[0] == '\0')
            fail("add_text error without a message", name);
        if ((e == ABX_E_ARGS_UNKNOWN) != (t == ABX_T_NONE))
            fail("args.unknown disagrees with the declaration", name);
        if (t != ABX_T_LIST && had && e == ABX_OK)
            fail("a second value for a scalar was accepted", name);
        if (e != ABX_OK)
            continue;
        json_t *v = json_object_get(args, name);
        if (t == ABX_T_LIST) {
            if (!json_is_array(v) || json_array_size(v) != before_n + 1)
                fail("a list did not grow by one", name);
            v = json_array_get(v, before_n);
            t = item;
        }
        if (!json_has_type(v, t))
            fail("stored value has the wrong JSON type", name);
        if (t == ABX_T_STRING || t == ABX_T_ENUM || t == ABX_T_BYTES) {
            if (json_string_length(v) != vl || memcmp(json_string_value(v), val, vl) != 0)
                fail("string value changed on the way in", name);
            if (memchr(val, '\0', vl) || !abx_utf8_valid(val, vl))
                fail("a NUL or invalid UTF-8 string was accepted", name);
        }
        /* constraints left to validation */
        if (strcmp(name, "e") == 0)
            predict_invalid |= !((vl == 1 && val[0] == 'a') || (vl == 2 && memcmp(val, "bb", 2) == 0));
        if (strcmp(name, "by") == 0)
            predict_invalid |= !abx_base64_valid(val, vl);
        if (strcmp(name, "ib") == 0)
            predict_invalid |= json_integer_value(v) < 0 || json_integer_value(v) > 9;
    }
    char *text = json_dumps(args, JSON_COMPACT);
    abx_err e = abx_args_validate(op_text, args, msg, sizeof msg);
    if (predict_invalid ? e != ABX_E_ARGS_INVALID : e != ABX_OK) {
        char detail[700];
        snprintf(detail, sizeof detail, "validate gave %s (%s) for %s", abx_err_code(e), msg, text ? text : "?");
        fail(predict_invalid ? "validation accepted a value it must refuse" : "validation refused typed values",
             detail);
    }
    free(text);
    json_decref(args);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    if (size < 1 || size > MAX_INPUT)
        return 0;
    init();
    if (data[0] % 2 == 0)
        json_mode(data + 1, size - 1);
    else
        text_mode(data + 1, size - 1);
    return 0;
}
