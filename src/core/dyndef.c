/* dyndef.c — the definition of a dynamic tool: checked, normalised, hashed (dyndef.h).
 * A definition is refused, naming the field, when it is anything but the closed form:
 * unknown keys anywhere, a name a provider would refuse, a parameter type outside the
 * registry's scalar types and lists of them, code that is not Python or too large. */
#include "core/dyndef.h"
#include <stdarg.h>
#include <stdio.h>
#include <string.h>

static int fail(char *err, size_t errlen, const char *fmt, ...) __attribute__((format(printf, 3, 4)));
static int fail(char *err, size_t errlen, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(err, errlen, fmt, ap);
    va_end(ap);
    return -1;
}

static bool ident_ok(const char *s, size_t max)
{
    size_t n = strlen(s);
    if (n == 0 || n > max || s[0] < 'a' || s[0] > 'z' || s[n - 1] == '_')
        return false;
    for (size_t i = 0; i < n; i++) {
        char c = s[i];
        if (!((c >= 'a' && c <= 'z') || (c >= '0' && c <= '9') || c == '_'))
            return false;
        if (c == '_' && s[i + 1] == '_')
            return false;
    }
    return true;
}

bool abx_dyn_name_ok(const char *name) { return name && ident_ok(name, ABX_DYN_NAME_MAX); }

/* Only these keys in obj (NULL-terminated list); else the first unknown one. */
static const char *unknown_key(const json_t *obj, const char *const *keys)
{
    const char *k;
    json_t *v;
    json_object_foreach((json_t *)obj, k, v) {
        bool ok = false;
        for (size_t i = 0; keys[i] && !ok; i++)
            ok = strcmp(keys[i], k) == 0;
        if (!ok)
            return k;
    }
    return NULL;
}

static abx_type scalar_type(const char *t)
{
    if (!t)
        return ABX_T_NONE;
    if (!strcmp(t, "string"))
        return ABX_T_STRING;
    if (!strcmp(t, "integer"))
        return ABX_T_INT;
    if (!strcmp(t, "number"))
        return ABX_T_NUMBER;
    if (!strcmp(t, "boolean"))
        return ABX_T_BOOL;
    return ABX_T_NONE;
}

static bool value_of_type(const json_t *v, abx_type t)
{
    switch (t) {
    case ABX_T_STRING: return json_is_string(v);
    case ABX_T_INT: return json_is_integer(v);
    case ABX_T_NUMBER: return json_is_number(v);
    case ABX_T_BOOL: return json_is_boolean(v);
    default: return false;
    }
}

/* One property: fills p and its normalised schema (*norm, owned). */
static int parse_prop(abx_dyndef *d, const char *name, const json_t *s, bool required, abx_param *p, json_t **norm,
                      char *err, size_t errlen)
{
    static const char *const keys[] = {"type", "description", "enum", "items", "default", NULL};
    if (!ident_ok(name, 40))
        return fail(err, errlen, "parameters.properties: '%.60s' is not a parameter name ([a-z][a-z0-9_]*, at most 40)",
                    name);
    if (!json_is_object(s))
        return fail(err, errlen, "parameters.properties.%s must be a schema object", name);
    const char *bad = unknown_key(s, keys);
    if (bad)
        return fail(err, errlen, "parameters.properties.%s: unknown key '%.60s' (allowed: type description enum items "
                    "default)", name, bad);
    const char *t = json_string_value(json_object_get(s, "type"));
    const json_t *desc = json_object_get(s, "description"), *en = json_object_get(s, "enum"),
                 *items = json_object_get(s, "items"), *dflt = json_object_get(s, "default");
    if (desc && (!json_is_string(desc) || json_string_length(desc) > 1024))
        return fail(err, errlen, "parameters.properties.%s.description must be text (at most 1024 bytes)", name);
    *p = (abx_param){.name = abx_arena_strdup(d->arena, name), .required = required,
                     .doc = desc ? abx_arena_strdup(d->arena, json_string_value(desc)) : NULL};
    json_t *n = json_pack("{s:s?}", "type", t);
    if (desc)
        json_object_set(n, "description", (json_t *)desc);
    *norm = n;
    abx_type st = scalar_type(t);
    if (t && !strcmp(t, "array")) {
        const char *it = json_string_value(json_object_get(items, "type"));
        if (!json_is_object(items) || json_object_size(items) != 1 || scalar_type(it) == ABX_T_NONE)
            return fail(err, errlen, "parameters.properties.%s.items must be {\"type\": string|integer|number|boolean}",
                        name);
        p->type = ABX_T_LIST;
        p->item = scalar_type(it);
        json_object_set_new(n, "items", json_pack("{s:s}", "type", it));
        if (en)
            return fail(err, errlen, "parameters.properties.%s: enum is for strings", name);
    } else if (st != ABX_T_NONE) {
        p->type = st;
        if (items)
            return fail(err, errlen, "parameters.properties.%s: items is for arrays", name);
    } else {
        return fail(err, errlen, "parameters.properties.%s.type must be string, integer, number, boolean or array",
                    name);
    }
    if (en) {
        if (st != ABX_T_STRING || !json_is_array(en) || !json_array_size(en) || json_array_size(en) > 64)
            return fail(err, errlen, "parameters.properties.%s.enum must be 1 to 64 strings", name);
        abx_buf b;
        abx_buf_init(&b, 4096);
        size_t i;
        json_t *v;
        json_array_foreach(en, i, v) {
            const char *sv = json_string_value(v);
            if (!sv || !*sv || strchr(sv, '|') || json_string_length(v) != strlen(sv) || strlen(sv) > 64) {
                abx_buf_release(&b);
                return fail(err, errlen, "parameters.properties.%s.enum[%zu] must be text without '|' (1-64 bytes)",
                            name, i);
            }
            abx_buf_printf(&b, "%s%s", i ? "|" : "", sv);
        }
        p->type = ABX_T_ENUM;
        p->choices = b.failed ? NULL : abx_arena_strndup(d->arena, b.data, b.len);
        abx_buf_release(&b);
        if (!p->choices)
            return fail(err, errlen, "parameters.properties.%s.enum is too long", name);
        json_object_set(n, "enum", (json_t *)en);
    }
    if (dflt) {
        bool ok = p->type == ABX_T_LIST ? json_is_array(dflt) : value_of_type(dflt, st);
        for (size_t i = 0; ok && p->type == ABX_T_LIST && i < json_array_size(dflt); i++)
            ok = value_of_type(json_array_get(dflt, i), p->item);
        if (!ok)
            return fail(err, errlen, "parameters.properties.%s.default is not a %s", name, t);
        if (required)
            return fail(err, errlen, "parameters.properties.%s is required and has a default", name);
        char *txt = json_dumps(dflt, JSON_COMPACT | JSON_ENCODE_ANY);
        p->dflt = txt ? abx_arena_strdup(d->arena, txt) : NULL;
        free(txt);
        if (!p->dflt)
            return fail(err, errlen, "out of memory");
        json_object_set(n, "default", (json_t *)dflt);
    }
    return 0;
}

static int parse_params(abx_dyndef *d, const json_t *s, json_t **norm, char *err, size_t errlen)
{
    static const char *const keys[] = {"type", "properties", "required", "additionalProperties", NULL};
    if (!json_is_object(s))
        return fail(err, errlen, "parameters must be a JSON Schema object {type: object, properties, required}");
    const char *bad = unknown_key(s, keys);
    if (bad)
        return fail(err, errlen, "parameters: unknown key '%.60s' (allowed: type properties required "
                    "additionalProperties)", bad);
    const char *t = json_string_value(json_object_get(s, "type"));
    const json_t *props = json_object_get(s, "properties"), *req = json_object_get(s, "required"),
                 *ap = json_object_get(s, "additionalProperties");
    if (!t || strcmp(t, "object"))
        return fail(err, errlen, "parameters.type must be \"object\"");
    if (ap && !json_is_false(ap))
        return fail(err, errlen, "parameters.additionalProperties must be false: the schema is closed");
    if (props && !json_is_object(props))
        return fail(err, errlen, "parameters.properties must be an object");
    if (req && !json_is_array(req))
        return fail(err, errlen, "parameters.required must be a list of property names");
    size_t np = json_object_size(props);
    if (np > ABX_DYN_PARAMS_MAX)
        return fail(err, errlen, "parameters: at most %d properties", ABX_DYN_PARAMS_MAX);
    size_t i;
    json_t *v;
    json_array_foreach(req, i, v) {
        if (!json_is_string(v) || !json_object_get(props, json_string_value(v)))
            return fail(err, errlen, "parameters.required[%zu] names no property", i);
        for (size_t j = 0; j < i; j++)
            if (json_equal(v, json_array_get(req, j)))
                return fail(err, errlen, "parameters.required[%zu] is listed twice", i);
    }
    d->params = abx_arena_alloc(d->arena, (np + 1) * sizeof *d->params);
    json_t *nprops = json_object(), *nreq = json_array();
    *norm = json_pack("{s:s, s:o, s:o, s:b}", "type", "object", "properties", nprops, "required", nreq,
                      "additionalProperties", 0);
    if (!d->params || !*norm)
        return fail(err, errlen, "out of memory");
    /* declaration order is the object's; sort by name so the canonical form does not depend on it */
    const char **names = abx_arena_alloc(d->arena, (np + 1) * sizeof *names);
    const char *k;
    size_t n = 0;
    json_object_foreach((json_t *)props, k, v) names[n++] = k;
    for (size_t a = 1; a < n; a++)
        for (size_t b = a; b > 0 && strcmp(names[b - 1], names[b]) > 0; b--) {
            const char *x = names[b];
            names[b] = names[b - 1];
            names[b - 1] = x;
        }
    for (size_t a = 0; a < n; a++) {
        bool required = false;
        json_array_foreach(req, i, v) required = required || !strcmp(json_string_value(v), names[a]);
        json_t *pn = NULL;
        int rc = parse_prop(d, names[a], json_object_get(props, names[a]), required, &d->params[a], &pn, err, errlen);
        if (pn)
            json_object_set_new(nprops, names[a], pn);
        if (rc)
            return -1;
        if (required)
            json_array_append_new(nreq, json_string(names[a]));
    }
    d->n_params = n;
    return 0;
}

/* An absolute path without ".", "..", "//" or a trailing '/' (the root alone is refused). */
static bool abs_path_ok(const char *p)
{
    size_t n = strlen(p);
    if (n < 2 || n > 1024 || p[0] != '/' || p[n - 1] == '/' || strstr(p, "//"))
        return false;
    for (const char *s = p; *s; s++)
        if (s[0] == '/' && s[1] == '.' && (s[2] == '/' || s[2] == '\0' || (s[2] == '.' && (s[3] == '/' || !s[3]))))
            return false;
    return true;
}

static int parse_paths(abx_dyndef *d, const json_t *s, json_t **norm, char *err, size_t errlen)
{
    static const char *const keys[] = {"read", "write", NULL};
    *norm = json_object();
    if (!s)
        return 0;
    const char *bad = json_is_object(s) ? unknown_key(s, keys) : "(not an object)";
    if (bad)
        return fail(err, errlen, "paths must be {read: [...], write: [...]} (unknown: '%.60s')", bad);
    for (int w = 0; w < 2; w++) {
        const json_t *l = json_object_get(s, w ? "write" : "read");
        if (!l)
            continue;
        if (!json_is_array(l) || json_array_size(l) > ABX_DYN_PATHS_MAX)
            return fail(err, errlen, "paths.%s must be a list of at most %d absolute paths", w ? "write" : "read",
                        ABX_DYN_PATHS_MAX);
        const char **out = abx_arena_alloc(d->arena, (json_array_size(l) + 1) * sizeof *out);
        json_t *nl = json_array();
        json_object_set_new(*norm, w ? "write" : "read", nl);
        size_t i;
        json_t *v;
        json_array_foreach(l, i, v) {
            const char *p = json_string_value(v);
            if (!p || json_string_length(v) != strlen(p) || !abs_path_ok(p))
                return fail(err, errlen, "paths.%s[%zu] must be an absolute, normalised path (not /)",
                            w ? "write" : "read", i);
            out[i] = abx_arena_strdup(d->arena, p);
            json_array_append(nl, v);
        }
        if (w) {
            d->write = out;
            d->n_write = i;
        } else {
            d->read = out;
            d->n_read = i;
        }
    }
    return 0;
}

static int parse_effects(abx_dyndef *d, const json_t *s, json_t **norm, char *err, size_t errlen)
{
    d->effects = ABX_EFF_EXEC;
    if (s) {
        if (!json_is_array(s) || !json_array_size(s))
            return fail(err, errlen, "effects must be a non-empty list of effect names");
        d->effects = 0;
        size_t i;
        json_t *v;
        json_array_foreach(s, i, v) {
            unsigned e = json_is_string(v) ? abx_effect_parse(json_string_value(v)) : 0;
            if (!e || e == ABX_EFF_ADMIN)
                return fail(err, errlen, "effects[%zu] must be read, write, delete, exec or net", i);
            d->effects |= e;
        }
    }
    *norm = json_array();
    for (unsigned bit = 1; bit < ABX_EFF_ADMIN; bit <<= 1)
        if (d->effects & bit) {
            char one[16];
            json_array_append_new(*norm, json_string(abx_effects_text(bit, one, sizeof one)));
        }
    return 0;
}

static int parse_tests(abx_dyndef *d, const json_t *s, char *err, size_t errlen)
{
    static const char *const keys[] = {"args", "expect", NULL};
    d->tests = json_array();
    if (!s)
        return 0;
    if (!json_is_array(s) || json_array_size(s) > ABX_DYN_TESTS_MAX)
        return fail(err, errlen, "tests must be a list of at most %d {args, expect}", ABX_DYN_TESTS_MAX);
    size_t i;
    json_t *v;
    json_array_foreach(s, i, v) {
        const char *bad = json_is_object(v) ? unknown_key(v, keys) : "(not an object)";
        if (bad || !json_is_object(json_object_get(v, "args")) || !json_object_get(v, "expect"))
            return fail(err, errlen, "tests[%zu] must be {args: {...}, expect: value}", i);
        json_array_append_new(d->tests, json_pack("{s:O, s:O}", "args", json_object_get(v, "args"), "expect",
                                                  json_object_get(v, "expect")));
    }
    return 0;
}

static int parse_all(abx_dyndef *d, const json_t *def, json_t *canon, char *err, size_t errlen)
{
    static const char *const keys[] = {"name", "description", "parameters", "code", "language", "effects",
                                       "paths", "net", "tests", "ttl", NULL};
    if (!json_is_object(def))
        return fail(err, errlen, "the definition must be a JSON object");
    const char *bad = unknown_key(def, keys);
    if (bad)
        return fail(err, errlen, "unknown field '%.60s' in the definition", bad);
    const json_t *name = json_object_get(def, "name"), *desc = json_object_get(def, "description"),
                 *code = json_object_get(def, "code"), *lang = json_object_get(def, "language"),
                 *net = json_object_get(def, "net");
    if (!json_is_string(name) || json_string_length(name) != strlen(json_string_value(name)) ||
        !abx_dyn_name_ok(json_string_value(name)))
        return fail(err, errlen, "name must match [a-z][a-z0-9_]* without '__' or a trailing '_', at most %d "
                    "characters (portable across the providers' tool formats as dyn__<name>)", ABX_DYN_NAME_MAX);
    if (!json_is_string(desc) || !json_string_length(desc) || json_string_length(desc) > 2048)
        return fail(err, errlen, "description must be text of 1 to 2048 bytes");
    if (!json_is_string(code) || !json_string_length(code) || json_string_length(code) > ABX_DYN_CODE_MAX ||
        json_string_length(code) != strlen(json_string_value(code)))
        return fail(err, errlen, "code must be text of 1 to %d bytes without NUL", ABX_DYN_CODE_MAX);
    if (!json_is_string(lang) || strcmp(json_string_value(lang), "python"))
        return fail(err, errlen, "language must be \"python\"");
    if (net && !json_is_boolean(net))
        return fail(err, errlen, "net must be true or false");
    d->name = abx_arena_strdup(d->arena, json_string_value(name));
    d->id = abx_arena_printf(d->arena, "dyn.%s", d->name);
    d->description = abx_arena_strdup(d->arena, json_string_value(desc));
    d->code = abx_arena_strdup(d->arena, json_string_value(code));
    d->net = json_is_true(net);
    json_t *np = NULL, *ne = NULL, *npa = NULL;
    int rc = parse_params(d, json_object_get(def, "parameters"), &np, err, errlen);
    if (np)
        json_object_set_new(canon, "parameters", np);
    if (rc)
        return -1;
    rc = parse_effects(d, json_object_get(def, "effects"), &ne, err, errlen);
    if (ne)
        json_object_set_new(canon, "effects", ne);
    if (rc)
        return -1;
    rc = parse_paths(d, json_object_get(def, "paths"), &npa, err, errlen);
    if (npa)
        json_object_set_new(canon, "paths", npa);
    if (rc || parse_tests(d, json_object_get(def, "tests"), err, errlen))
        return -1;
    if (d->net && !(d->effects & ABX_EFF_NET))
        return fail(err, errlen, "net: true needs the effect net");
    if (d->n_write && !(d->effects & ABX_EFF_WRITE))
        return fail(err, errlen, "paths.write needs the effect write");
    json_object_set(canon, "name", (json_t *)name);
    json_object_set(canon, "description", (json_t *)desc);
    json_object_set(canon, "code", (json_t *)code);
    json_object_set(canon, "language", (json_t *)lang);
    json_object_set_new(canon, "net", json_boolean(d->net));
    json_object_set(canon, "tests", d->tests);
    return 0;
}

int abx_dyndef_parse(const json_t *def, abx_dyndef **out, char *err, size_t errlen)
{
    *out = NULL;
    abx_dyndef *d = abx_calloc(1, sizeof *d);
    json_t *canon = json_object();
    if (!d || !canon || !(d->arena = abx_arena_new())) {
        abx_free(d);
        json_decref(canon);
        return fail(err, errlen, "out of memory");
    }
    if (parse_all(d, def, canon, err, errlen) != 0) {
        json_decref(canon);
        abx_dyndef_free(d);
        return -1;
    }
    char *text = json_dumps(canon, JSON_COMPACT | JSON_SORT_KEYS);
    json_decref(canon);
    d->canonical = text ? abx_arena_strdup(d->arena, text) : NULL;
    free(text);
    if (!d->canonical) {
        abx_dyndef_free(d);
        return fail(err, errlen, "out of memory");
    }
    abx_sha256_hex(d->canonical, strlen(d->canonical), d->hash);
    *out = d;
    return 0;
}

void abx_dyndef_free(abx_dyndef *d)
{
    if (!d)
        return;
    json_decref(d->tests);
    abx_arena_free(d->arena);
    abx_free(d);
}
