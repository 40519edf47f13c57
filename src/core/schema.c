/* schema.c — parameter schemas: validating JSON arguments against an op's declared
 * parameters (step 6), typing query-string values, and the JSON Schema (2020-12)
 * every generated document uses. Pure functions over jansson values. */
#include "core/core.h"
#include "core/util.h"
#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define LIST_MAX_ITEMS 10000

const abx_param *abx_op_param(const abx_op *op, const char *name)
{
    if (!op->def->params)
        return NULL;
    for (const abx_param *p = op->def->params; p->name; p++)
        if (strcmp(p->name, name) == 0)
            return p;
    return NULL;
}

const char *abx_type_name(abx_type t)
{
    static const char *const n[] = {
#define ABX_TYPE(id, name, doc) [ABX_T_##id] = name,
#include "abx/vocab.def"
#undef ABX_TYPE
    };
    return (unsigned)t < ABX_ARRAY_LEN(n) && n[t] ? n[t] : "none";
}

static const char *const effect_names[] = {
#define ABX_EFFECT(id, name, doc) [ABX_EFF__##id] = name,
#include "abx/vocab.def"
#undef ABX_EFFECT
};

const char *abx_effect_name(unsigned index) { return index < ABX_EFF__COUNT ? effect_names[index] : NULL; }

const char *abx_effects_text(unsigned effects, char *buf, size_t len)
{
    size_t o = 0;
    buf[0] = '\0';
    for (size_t i = 0; i < ABX_ARRAY_LEN(effect_names); i++)
        if (effects & (1u << i))
            o += (size_t)snprintf(buf + o, o < len ? len - o : 0, "%s%s", o ? "," : "", effect_names[i]);
    return buf;
}

unsigned abx_effect_parse(const char *name)
{
    for (size_t i = 0; i < ABX_ARRAY_LEN(effect_names); i++)
        if (strcmp(effect_names[i], name) == 0)
            return 1u << i;
    return 0;
}

const char *abx_stream_name(abx_stream s)
{
    static const char *const n[] = {
#define ABX_STREAM(id, name, doc) [ABX_STREAM_##id] = name,
#include "abx/vocab.def"
#undef ABX_STREAM
    };
    return (unsigned)s < ABX_ARRAY_LEN(n) ? n[s] : "none";
}

const char *abx_limit_name(enum abx_limit l)
{
    static const char *const n[] = {
#define ABX_LIMIT(id, name, doc) [ABX_LIM__##id] = name,
#include "abx/vocab.def"
#undef ABX_LIMIT
    };
    for (size_t i = 0; i < ABX_ARRAY_LEN(n); i++)
        if ((unsigned)l == 1u << i)
            return n[i];
    return "?";
}

const char *abx_kind_name(abx_kind k)
{
    static const char *const n[] = {
#define ABX_KIND(id, name, doc) [ABX_KIND_##id] = name,
#include "abx/vocab.def"
#undef ABX_KIND
    };
    return (unsigned)k < ABX_ARRAY_LEN(n) ? n[k] : "plain";
}

static bool choice_ok(const char *choices, const char *s)
{
    size_t n = strlen(s);
    for (const char *c = choices; *c;) {
        size_t l = strcspn(c, "|");
        if (l == n && strncmp(c, s, n) == 0)
            return true;
        c += l;
        if (*c == '|')
            c++;
    }
    return false;
}

typedef struct vstate {
    char *msg;
    size_t msglen;
} vstate;

static abx_err fail(vstate *st, abx_err e, const char *fmt, ...) __attribute__((format(printf, 3, 4)));
static abx_err fail(vstate *st, abx_err e, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(st->msg, st->msglen, fmt, ap);
    va_end(ap);
    return e;
}

static abx_err check_fields(const abx_param *fields, json_t *obj, const char *prefix, vstate *st, const char *one_of);

static abx_err check_scalar(const abx_param *p, abx_type t, json_t *v, const char *name, vstate *st)
{
    switch (t) {
    case ABX_T_STRING:
    case ABX_T_BYTES:
    case ABX_T_ENUM: {
        if (!json_is_string(v))
            return fail(st, ABX_E_ARGS_INVALID, "argument '%s' must be a string", name);
        const char *s = json_string_value(v);
        size_t n = json_string_length(v);
        if (strlen(s) != n)
            return fail(st, ABX_E_ARGS_INVALID, "argument '%s' contains a NUL character", name);
        if (t == ABX_T_BYTES && !abx_base64_valid(s, n))
            return fail(st, ABX_E_ARGS_INVALID, "argument '%s' must be base64 (standard alphabet, padded)", name);
        if (t == ABX_T_ENUM && !choice_ok(p->choices, s))
            return fail(st, ABX_E_ARGS_INVALID, "argument '%s' must be one of %s", name, p->choices);
        return ABX_OK;
    }
    case ABX_T_INT: {
        if (!json_is_integer(v))
            return fail(st, ABX_E_ARGS_INVALID, "argument '%s' must be an integer", name);
        json_int_t x = json_integer_value(v);
        if ((p->bounds & ABX_HAS_MIN) && x < p->min)
            return fail(st, ABX_E_ARGS_INVALID, "argument '%s' must be >= %lld", name, (long long)p->min);
        if ((p->bounds & ABX_HAS_MAX) && x > p->max)
            return fail(st, ABX_E_ARGS_INVALID, "argument '%s' must be <= %lld", name, (long long)p->max);
        return ABX_OK;
    }
    case ABX_T_NUMBER: {
        if (!json_is_number(v))
            return fail(st, ABX_E_ARGS_INVALID, "argument '%s' must be a number", name);
        double x = json_number_value(v);
        if ((p->bounds & ABX_HAS_MIN) && x < (double)p->min)
            return fail(st, ABX_E_ARGS_INVALID, "argument '%s' must be >= %lld", name, (long long)p->min);
        if ((p->bounds & ABX_HAS_MAX) && x > (double)p->max)
            return fail(st, ABX_E_ARGS_INVALID, "argument '%s' must be <= %lld", name, (long long)p->max);
        return ABX_OK;
    }
    case ABX_T_BOOL:
        if (!json_is_boolean(v))
            return fail(st, ABX_E_ARGS_INVALID, "argument '%s' must be a boolean", name);
        return ABX_OK;
    case ABX_T_ANY:
        return ABX_OK;
    case ABX_T_OBJECT:
        if (!json_is_object(v))
            return fail(st, ABX_E_ARGS_INVALID, "argument '%s' must be an object", name);
        return check_fields(p->fields, v, name, st, NULL);
    default:
        return fail(st, ABX_E_ARGS_INVALID, "argument '%s' has an unsupported type", name);
    }
}

static abx_err check_value(const abx_param *p, json_t *v, const char *name, vstate *st)
{
    char sub[160];
    if (p->type == ABX_T_LIST) {
        if (!json_is_array(v))
            return fail(st, ABX_E_ARGS_INVALID, "argument '%s' must be a list of %s", name, abx_type_name(p->item));
        if (json_array_size(v) > LIST_MAX_ITEMS)
            return fail(st, ABX_E_ARGS_INVALID, "argument '%s' has more than %d items", name, LIST_MAX_ITEMS);
        if (p->item != ABX_T_INT && p->item != ABX_T_NUMBER) { /* bounds on the length */
            size_t n = json_array_size(v);
            if ((p->bounds & ABX_HAS_MIN) && (int64_t)n < p->min)
                return fail(st, ABX_E_ARGS_INVALID, "argument '%s' needs at least %lld items", name, (long long)p->min);
            if ((p->bounds & ABX_HAS_MAX) && (int64_t)n > p->max)
                return fail(st, ABX_E_ARGS_INVALID, "argument '%s' takes at most %lld items", name, (long long)p->max);
        }
        size_t i;
        json_t *it;
        json_array_foreach(v, i, it)
        {
            snprintf(sub, sizeof sub, "%s[%zu]", name, i);
            abx_err e = check_scalar(p, p->item, it, sub, st);
            if (e)
                return e;
        }
        return ABX_OK;
    }
    if (p->type == ABX_T_MAP) {
        if (!json_is_object(v))
            return fail(st, ABX_E_ARGS_INVALID, "argument '%s' must be a map of string to %s", name,
                        abx_type_name(p->item));
        const char *k;
        json_t *it;
        json_object_foreach(v, k, it)
        {
            if (strlen(k) == 0 || !abx_utf8_valid(k, strlen(k)))
                return fail(st, ABX_E_ARGS_INVALID, "argument '%s' has an empty or invalid key", name);
            snprintf(sub, sizeof sub, "%s.%s", name, k);
            abx_err e = check_scalar(p, p->item, it, sub, st);
            if (e)
                return e;
        }
        return ABX_OK;
    }
    return check_scalar(p, p->type, v, name, st);
}

/* An unknown argument: the message names the closest known one (an edit or two away)
 * and lists the valid names, so a model fixes the call in one turn. */
static abx_err unknown_field(const abx_param *fields, const char *prefix, const char *k, vstate *st)
{
    char valid[400] = "";
    size_t off = 0;
    const char *best = NULL;
    int bestd = 3;
    for (const abx_param *p = fields; p && p->name; p++) {
        int d = abx_edit_distance(k, p->name, 2);
        if (d < bestd) {
            bestd = d;
            best = p->name;
        }
        if (off < sizeof valid)
            off += (size_t)snprintf(valid + off, sizeof valid - off, "%s%s", off ? ", " : "", p->name);
    }
    char hint[160] = "";
    if (best)
        snprintf(hint, sizeof hint, " (did you mean '%s'?)", best);
    return fail(st, ABX_E_ARGS_UNKNOWN, "unknown argument '%s%s%.100s'%s; valid: %s", prefix ? prefix : "",
                prefix ? "." : "", k, hint, valid[0] ? valid : "none");
}


/* An argument's default as a JSON value: what json_loads(dflt, JSON_DECODE_ANY) gives,
 * without running the parser on every call for the usual literals (true, false, null,
 * a plain integer, a string without escapes); anything else goes to json_loads. */
static json_t *default_value(const char *d)
{
    size_t n = strlen(d);
    if (strcmp(d, "true") == 0)
        return json_true();
    if (strcmp(d, "false") == 0)
        return json_false();
    if (strcmp(d, "null") == 0)
        return json_null();
    if (n >= 2 && d[0] == '"' && d[n - 1] == '"' && !memchr(d + 1, '"', n - 2) && !memchr(d + 1, '\\', n - 2)) {
        bool plain = true;
        for (size_t i = 1; i + 1 < n; i++)
            plain = plain && (unsigned char)d[i] >= 0x20;
        if (plain)
            return json_stringn(d + 1, n - 2);
    }
    const char *q = d + (d[0] == '-');
    size_t digits = strspn(q, "0123456789");
    if (digits && digits <= 18 && q[digits] == '\0' && (q[0] != '0' || digits == 1))
        return json_integer((json_int_t)strtoll(d, NULL, 10));
    return json_loads(d, JSON_DECODE_ANY, NULL);
}

static abx_err check_fields(const abx_param *fields, json_t *obj, const char *prefix, vstate *st, const char *one_of)
{
    char full[160];
    const char *k;
    json_t *v;
    json_object_foreach(obj, k, v)
    {
        bool known = false;
        for (const abx_param *p = fields; p && p->name; p++)
            if (strcmp(p->name, k) == 0)
                known = true;
        if (!known)
            return unknown_field(fields, prefix, k, st);
    }
    for (const abx_param *p = fields; p && p->name; p++) {
        if (prefix) /* a top-level argument is named by itself: no formatting per field */
            snprintf(full, sizeof full, "%s.%s", prefix, p->name);
        else if (strlen(p->name) < sizeof full)
            memcpy(full, p->name, strlen(p->name) + 1);
        else
            snprintf(full, sizeof full, "%s", p->name);
        json_t *val = json_object_get(obj, p->name);
        if (val && json_is_null(val)) {
            /* null means "not given" for every optional argument, on every door: models
             * and SDKs send it for what they omit (strict tool schemas make every
             * property required and nullable) */
            if (p->required && !p->nullable)
                return fail(st, ABX_E_ARGS_INVALID, "argument '%s' is required and must be %s, not null", full,
                            abx_type_name(p->type));
            json_object_del(obj, p->name);
            val = NULL;
        }
        if (!val) {
            if (p->required)
                return fail(st, ABX_E_ARGS_MISSING, "missing required argument '%s'", full);
            if (p->dflt) {
                json_t *d = default_value(p->dflt);
                if (!d || json_object_set_new(obj, p->name, d) != 0)
                    return fail(st, ABX_E_SERVER_UNAVAILABLE, "out of memory");
            }
            continue;
        }
        abx_err e = check_value(p, val, full, st);
        if (e)
            return e;
    }
    if (one_of) {
        int present = 0;
        char names[128];
        snprintf(names, sizeof names, "%s", one_of);
        for (char *save = NULL, *t = strtok_r(names, "|", &save); t; t = strtok_r(NULL, "|", &save))
            if (json_object_get(obj, t))
                present++;
        if (present != 1) {
            char shown[128];
            snprintf(shown, sizeof shown, "%s", one_of);
            for (char *c = shown; *c; c++)
                if (*c == '|')
                    *c = '/';
            return fail(st, ABX_E_ARGS_INVALID, "exactly one of %s is required (%d given)", shown, present);
        }
    }
    return ABX_OK;
}

abx_err abx_args_validate(const abx_op *op, json_t *args, char *msg, size_t msglen)
{
    vstate st = {msg, msglen};
    if (!json_is_object(args))
        return fail(&st, ABX_E_ARGS_INVALID, "arguments must be a JSON object");
    return check_fields(op->def->params, args, NULL, &st, op->def->one_of);
}

static bool parse_int(const char *s, size_t n, json_int_t *out)
{
    if (n == 0 || n > 20)
        return false;
    char tmp[24];
    memcpy(tmp, s, n);
    tmp[n] = '\0';
    size_t i = tmp[0] == '-' ? 1 : 0;
    if (tmp[i] == '\0')
        return false;
    for (size_t j = i; j < n; j++)
        if (tmp[j] < '0' || tmp[j] > '9')
            return false;
    errno = 0;
    char *end;
    long long v = strtoll(tmp, &end, 10);
    if (errno || *end)
        return false;
    *out = v;
    return true;
}

static json_t *text_value(const abx_param *p, abx_type t, const char *s, size_t n, const char *name, vstate *st,
                          abx_err *err)
{
    *err = ABX_OK;
    switch (t) {
    case ABX_T_STRING:
    case ABX_T_BYTES:
    case ABX_T_ENUM:
        if (!abx_text_valid(s, n)) {
            *err = fail(st, ABX_E_ARGS_INVALID, "argument '%s' must be UTF-8 text without NUL", name);
            return NULL;
        }
        return json_stringn(s, n);
    case ABX_T_INT: {
        json_int_t v;
        if (!parse_int(s, n, &v)) {
            *err = fail(st, ABX_E_ARGS_INVALID, "argument '%s' must be an integer", name);
            return NULL;
        }
        return json_integer(v);
    }
    case ABX_T_NUMBER: {
        char tmp[64];
        if (n == 0 || n >= sizeof tmp) {
            *err = fail(st, ABX_E_ARGS_INVALID, "argument '%s' must be a number", name);
            return NULL;
        }
        memcpy(tmp, s, n);
        tmp[n] = '\0';
        /* JSON's number grammar, nothing else: no blanks, '+', hex, inf or nan */
        size_t i = tmp[0] == '-' ? 1 : 0;
        bool ok = tmp[i] >= '0' && tmp[i] <= '9';
        while (tmp[i] >= '0' && tmp[i] <= '9')
            i++;
        if (tmp[i] == '.') {
            i++;
            ok = ok && tmp[i] >= '0' && tmp[i] <= '9';
            while (tmp[i] >= '0' && tmp[i] <= '9')
                i++;
        }
        if (tmp[i] == 'e' || tmp[i] == 'E') {
            i++;
            if (tmp[i] == '+' || tmp[i] == '-')
                i++;
            ok = ok && tmp[i] >= '0' && tmp[i] <= '9';
            while (tmp[i] >= '0' && tmp[i] <= '9')
                i++;
        }
        ok = ok && tmp[i] == '\0';
        char *end;
        errno = 0;
        double d = ok ? strtod(tmp, &end) : 0;
        if (!ok || errno || *end || !isfinite(d)) {
            *err = fail(st, ABX_E_ARGS_INVALID, "argument '%s' must be a number", name);
            return NULL;
        }
        return json_real(d);
    }
    case ABX_T_BOOL:
        if ((n == 4 && memcmp(s, "true", 4) == 0) || (n == 1 && s[0] == '1'))
            return json_true();
        if ((n == 5 && memcmp(s, "false", 5) == 0) || (n == 1 && s[0] == '0'))
            return json_false();
        *err = fail(st, ABX_E_ARGS_INVALID, "argument '%s' must be true or false", name);
        return NULL;
    default:
        (void)p;
        *err = fail(st, ABX_E_ARGS_INVALID,
                    "argument '%s' cannot be given in the query string; send a JSON body to POST /ops/ID", name);
        return NULL;
    }
}

abx_err abx_args_add_text(const abx_op *op, json_t *args, const char *name, const char *value, size_t vlen,
                          char *msg, size_t msglen)
{
    vstate st = {msg, msglen};
    const abx_param *p = abx_op_param(op, name);
    if (!p)
        return unknown_field(op->def->params, NULL, name, &st);
    abx_err e;
    if (p->type == ABX_T_LIST) {
        json_t *arr = json_object_get(args, name);
        if (!arr) {
            arr = json_array();
            if (!arr || json_object_set_new(args, name, arr) != 0)
                return fail(&st, ABX_E_SERVER_UNAVAILABLE, "out of memory");
        }
        if (json_array_size(arr) >= LIST_MAX_ITEMS)
            return fail(&st, ABX_E_ARGS_INVALID, "argument '%s' has more than %d items", name, LIST_MAX_ITEMS);
        json_t *v = text_value(p, p->item, value, vlen, name, &st, &e);
        if (!v)
            return e ? e : fail(&st, ABX_E_SERVER_UNAVAILABLE, "out of memory");
        if (json_array_append_new(arr, v) != 0)
            return fail(&st, ABX_E_SERVER_UNAVAILABLE, "out of memory");
        return ABX_OK;
    }
    if (json_object_get(args, name))
        return fail(&st, ABX_E_ARGS_INVALID, "argument '%s' is given more than once", name);
    json_t *v = text_value(p, p->type, value, vlen, name, &st, &e);
    if (!v)
        return e ? e : fail(&st, ABX_E_SERVER_UNAVAILABLE, "out of memory");
    if (json_object_set_new(args, name, v) != 0)
        return fail(&st, ABX_E_SERVER_UNAVAILABLE, "out of memory");
    return ABX_OK;
}

/* ---- JSON Schema ---- */

static json_t *type_schema(const abx_param *p, abx_type t)
{
    json_t *s = json_object();
    switch (t) {
    case ABX_T_STRING:
        json_object_set_new(s, "type", json_string("string"));
        break;
    case ABX_T_BYTES:
        json_object_set_new(s, "type", json_string("string"));
        json_object_set_new(s, "contentEncoding", json_string("base64"));
        break;
    case ABX_T_ENUM: {
        json_object_set_new(s, "type", json_string("string"));
        json_t *e = json_array();
        for (const char *c = p->choices; *c;) {
            size_t l = strcspn(c, "|");
            json_array_append_new(e, json_stringn(c, l));
            c += l;
            if (*c == '|')
                c++;
        }
        json_object_set_new(s, "enum", e);
        break;
    }
    case ABX_T_INT:
    case ABX_T_NUMBER:
        json_object_set_new(s, "type", json_string(t == ABX_T_INT ? "integer" : "number"));
        if (p->bounds & ABX_HAS_MIN)
            json_object_set_new(s, "minimum", json_integer(p->min));
        if (p->bounds & ABX_HAS_MAX)
            json_object_set_new(s, "maximum", json_integer(p->max));
        break;
    case ABX_T_BOOL:
        json_object_set_new(s, "type", json_string("boolean"));
        break;
    case ABX_T_OBJECT: {
        json_t *props = json_object(), *req = json_array();
        for (const abx_param *f = p->fields; f && f->name; f++) {
            json_object_set_new(props, f->name, abx_param_schema(f));
            if (f->required)
                json_array_append_new(req, json_string(f->name));
        }
        json_object_set_new(s, "type", json_string("object"));
        json_object_set_new(s, "properties", props);
        if (json_array_size(req))
            json_object_set_new(s, "required", req);
        else
            json_decref(req);
        json_object_set_new(s, "additionalProperties", json_false());
        break;
    }
    case ABX_T_MAP: /* a list of maps (results): objects with any keys */
        json_object_set_new(s, "type", json_string("object"));
        break;
    default:
        break;
    }
    return s;
}

json_t *abx_param_schema(const abx_param *p)
{
    json_t *s;
    if (p->type == ABX_T_LIST) {
        s = json_object();
        json_object_set_new(s, "type", json_string("array"));
        json_object_set_new(s, "items", type_schema(p, p->item));
    } else if (p->type == ABX_T_MAP) {
        s = json_object();
        json_object_set_new(s, "type", json_string("object"));
        json_object_set_new(s, "additionalProperties", type_schema(p, p->item));
    } else {
        s = type_schema(p, p->type);
    }
    if (p->nullable) {
        json_t *t = json_object_get(s, "type");
        if (json_is_string(t)) {
            json_t *both = json_pack("[s,s]", json_string_value(t), "null");
            json_object_set_new(s, "type", both);
        }
    }
    if (p->doc)
        json_object_set_new(s, "description", json_string(p->doc));
    if (p->dflt) {
        json_t *d = json_loads(p->dflt, JSON_DECODE_ANY, NULL);
        if (d)
            json_object_set_new(s, "default", d);
    }
    if (p->kind != ABX_KIND_PLAIN)
        json_object_set_new(s, "x-abx-kind", json_string(abx_kind_name(p->kind)));
    return s;
}

json_t *abx_op_args_schema(const abx_op *op)
{
    json_t *s = json_object(), *props = json_object(), *req = json_array();
    json_object_set_new(s, "type", json_string("object"));
    for (const abx_param *p = op->def->params; p && p->name; p++) {
        json_object_set_new(props, p->name, abx_param_schema(p));
        if (p->required)
            json_array_append_new(req, json_string(p->name));
    }
    json_object_set_new(s, "properties", props);
    if (json_array_size(req))
        json_object_set_new(s, "required", req);
    else
        json_decref(req);
    json_object_set_new(s, "additionalProperties", json_false());
    return s;
}
