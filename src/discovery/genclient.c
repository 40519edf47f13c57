/* genclient.c — `abx gen-client`: typed client modules written from the registry offline
 * (no server). Python: a class per namespace whose methods take keyword-only parameters
 * typed from the schema and call the zero-step client (clients/python, package `abx`).
 * TypeScript: parameter interfaces and a fetch-based client class. Both read the same
 * catalog entries GET /ops serves, so names, types and docs are never typed twice.
 * Ops declare no result schema, so JSON results are typed as generic JSON objects. */
#include "discovery/genclient_int.h"
#include "core/util.h"
#include <string.h>

/* ---- shared helpers ---- */

/* "commands.sessions.create" → "CommandsSessionsCreate" (also splits on '_'). */
static void camel(abx_buf *b, const char *s, size_t n)
{
    bool up = true;
    for (size_t i = 0; i < n && s[i]; i++) {
        if (s[i] == '.' || s[i] == '_') {
            up = true;
            continue;
        }
        abx_buf_putc(b, up && s[i] >= 'a' && s[i] <= 'z' ? (char)(s[i] - 'a' + 'A') : s[i]);
        up = false;
    }
}

static const char *jstr(const json_t *o, const char *k) { return json_string_value(json_object_get(o, k)); }

/* A JSON string literal: valid Python and TypeScript source. */
static void lit(abx_buf *b, const char *s)
{
    json_t *j = json_string(s ? s : "");
    char *t = j ? json_dumps(j, JSON_ENCODE_ANY | JSON_COMPACT) : NULL;
    abx_buf_puts(b, t ? t : "\"\"");
    free(t);
    json_decref(j);
}

static bool is_raw(const json_t *e) { return jstr(e, "body") && strcmp(jstr(e, "body"), "raw") == 0; }
static bool is_ws(const json_t *e) { return strcmp(jstr(e, "stream"), "ws") == 0; }

/* Namespaces: every proper prefix of an op id, sorted and unique ("" is the root). */
static json_t *namespaces(const json_t *ops)
{
    json_t *set = json_object();
    json_object_set_new(set, "", json_true());
    size_t i;
    json_t *e;
    json_array_foreach(ops, i, e)
    {
        const char *id = jstr(e, "id");
        for (const char *d = strchr(id, '.'); d; d = strchr(d + 1, '.')) {
            char ns[ABX_ID_MAX];
            snprintf(ns, sizeof ns, "%.*s", (int)(d - id), id);
            json_object_set_new(set, ns, json_true());
        }
    }
    json_t *out = json_array();
    const char *k;
    json_t *v;
    json_object_foreach(set, k, v) json_array_append_new(out, json_string(k));
    json_decref(set);
    /* sort: jansson keeps insertion order; a simple insertion sort (few dozen names) */
    for (size_t a = 1; a < json_array_size(out); a++)
        for (size_t c = a; c > 0 && strcmp(json_string_value(json_array_get(out, c - 1)),
                                           json_string_value(json_array_get(out, c))) > 0;
             c--) {
            json_t *x = json_incref(json_array_get(out, c));
            json_array_set(out, c, json_array_get(out, c - 1));
            json_array_set_new(out, c - 1, x);
        }
    return out;
}

/* Whether id's parent namespace is ns (the op is a direct member of ns). */
static bool member_of(const char *id, const char *ns)
{
    size_t n = strlen(ns);
    const char *last = strrchr(id, '.');
    return last && (size_t)(last - id) == n && strncmp(id, ns, n) == 0;
}

/* ---- Python ---- */

static const char *const py_keywords[] = {
    "False", "None",  "True",  "and",    "as",   "assert", "async",  "await",    "break",  "class", "continue",
    "def",   "del",   "elif",  "else",   "except", "finally", "for",  "from",     "global", "if",    "import",
    "in",    "is",    "lambda", "nonlocal", "not", "or",     "pass",   "raise",    "return", "try",   "while",
    "with",  "yield", "self",  "body",
};

/* A parameter or method name that Python accepts: keywords (and the names the generated
 * methods use themselves) get a trailing underscore. */
static void py_name(abx_buf *b, const char *name)
{
    abx_buf_puts(b, name);
    for (size_t i = 0; i < ABX_ARRAY_LEN(py_keywords); i++)
        if (strcmp(name, py_keywords[i]) == 0) {
            abx_buf_putc(b, '_');
            return;
        }
}

static bool py_renamed(const char *name)
{
    for (size_t i = 0; i < ABX_ARRAY_LEN(py_keywords); i++)
        if (strcmp(name, py_keywords[i]) == 0)
            return true;
    return false;
}

/* Docstring text: backslashes and quotes escaped so it cannot end the literal. */
static void py_doc_text(abx_buf *b, const char *s)
{
    for (; s && *s; s++) {
        if (*s == '\\' || *s == '"')
            abx_buf_putc(b, '\\');
        abx_buf_putc(b, *s);
    }
}

static void py_scalar(abx_buf *b, const char *t, const json_t *p, const char *typed_dict)
{
    if (!t)
        abx_buf_puts(b, "Any");
    else if (strcmp(t, "string") == 0 || strcmp(t, "bytes") == 0)
        abx_buf_puts(b, "str");
    else if (strcmp(t, "integer") == 0)
        abx_buf_puts(b, "int");
    else if (strcmp(t, "number") == 0)
        abx_buf_puts(b, "float");
    else if (strcmp(t, "boolean") == 0)
        abx_buf_puts(b, "bool");
    else if (strcmp(t, "enum") == 0 && json_array_size(json_object_get(p, "choices"))) {
        abx_buf_puts(b, "Literal[");
        size_t i;
        json_t *c;
        json_array_foreach(json_object_get(p, "choices"), i, c)
        {
            if (i)
                abx_buf_puts(b, ", ");
            lit(b, json_string_value(c));
        }
        abx_buf_putc(b, ']');
    } else if (strcmp(t, "enum") == 0)
        abx_buf_puts(b, "str");
    else if (strcmp(t, "object") == 0 && typed_dict)
        abx_buf_puts(b, typed_dict);
    else if (strcmp(t, "object") == 0)
        abx_buf_puts(b, "Dict[str, Any]");
    else
        abx_buf_puts(b, "Any");
}

static void py_type(abx_buf *b, const json_t *p, const char *typed_dict)
{
    const char *t = jstr(p, "type");
    if (strcmp(t, "list") == 0) {
        abx_buf_puts(b, "List[");
        py_scalar(b, jstr(p, "items"), p, typed_dict);
        abx_buf_putc(b, ']');
    } else if (strcmp(t, "map") == 0) {
        abx_buf_puts(b, "Dict[str, ");
        py_scalar(b, jstr(p, "items"), p, typed_dict);
        abx_buf_putc(b, ']');
    } else {
        py_scalar(b, t, p, typed_dict);
    }
}

/* TypedDicts for object parameters that declare their fields (nested first). */
static void py_typed_dicts(abx_buf *b, const json_t *params, const char *prefix)
{
    size_t i;
    json_t *p;
    json_array_foreach(params, i, p)
    {
        const json_t *fields = json_object_get(p, "fields");
        if (!json_array_size(fields))
            continue;
        char *name = abx_asprintf("%s_%s", prefix, jstr(p, "name"));
        abx_buf cls;
        abx_buf_init(&cls, 0);
        camel(&cls, name, strlen(name));
        py_typed_dicts(b, fields, cls.data);
        abx_buf_printf(b, "\n\nclass %s(TypedDict, total=False):\n", cls.data);
        size_t k;
        json_t *f;
        json_array_foreach(fields, k, f)
        {
            abx_buf sub;
            abx_buf_init(&sub, 0);
            char *subname = abx_asprintf("%s_%s", cls.data, jstr(f, "name"));
            camel(&sub, subname, strlen(subname));
            abx_buf_printf(b, "    %s: ", jstr(f, "name"));
            py_type(b, f, json_array_size(json_object_get(f, "fields")) ? sub.data : NULL);
            abx_buf_putc(b, '\n');
            abx_free(subname);
            abx_buf_release(&sub);
        }
        abx_free(name);
        abx_buf_release(&cls);
    }
}

static void py_class_name(abx_buf *b, const char *ns)
{
    abx_buf_puts(b, "_");
    camel(b, ns, strlen(ns));
    abx_buf_puts(b, "Ops");
}

static void py_method(abx_buf *b, const json_t *e)
{
    const char *id = jstr(e, "id");
    const char *stream = jstr(e, "stream");
    const json_t *params = json_object_get(e, "params");
    abx_buf_puts(b, "\n    def ");
    py_name(b, strrchr(id, '.') + 1);
    /* one parameter a line when there are any: signatures stay readable */
    bool multi = json_array_size(params) > 0;
    const char *sep = multi ? ",\n        " : ", ";
    abx_buf_puts(b, multi ? "(\n        self" : "(self");
    if (is_raw(e))
        abx_buf_printf(b, "%sbody: bytes%s/", sep, sep);
    if (json_array_size(params))
        abx_buf_printf(b, "%s*", sep);
    /* required first, then optional (both keyword-only, so the order is free) */
    for (int pass = 0; pass < 2; pass++) {
        size_t i;
        json_t *p;
        json_array_foreach(params, i, p)
        {
            bool req = json_is_true(json_object_get(p, "required"));
            if (req != (pass == 0))
                continue;
            abx_buf_puts(b, sep);
            py_name(b, jstr(p, "name"));
            abx_buf_puts(b, ": ");
            abx_buf cls;
            abx_buf_init(&cls, 0);
            char *n = abx_asprintf("%s_%s", id, jstr(p, "name"));
            camel(&cls, n, strlen(n));
            abx_free(n);
            if (!req)
                abx_buf_puts(b, "Optional[");
            py_type(b, p, json_array_size(json_object_get(p, "fields")) ? cls.data : NULL);
            abx_buf_puts(b, req ? "" : "] = None");
            abx_buf_release(&cls);
        }
    }
    abx_buf_puts(b, multi ? ",\n    ) -> " : ") -> ");
    if (strcmp(stream, "none") != 0 || !abx__gen_result_name(b, e)) /* the declared result's TypedDict */
        abx_buf_puts(b, strcmp(stream, "sse") == 0     ? "\"_abx.EventStream\""
                        : strcmp(stream, "bytes") == 0 ? "bytes"
                                                       : "Result");
    abx_buf_puts(b, ":\n        \"\"\"");
    py_doc_text(b, jstr(e, "summary"));
    abx_buf_printf(b, "\n\n        Operation `%s`", id);
    if (json_array_size(json_object_get(e, "effects"))) {
        abx_buf_puts(b, "; effects: ");
        size_t i;
        json_t *x;
        json_array_foreach(json_object_get(e, "effects"), i, x) abx_buf_printf(b, "%s%s", i ? ", " : "",
                                                                                json_string_value(x));
    }
    abx_buf_puts(b, strcmp(stream, "sse") == 0     ? ". Returns the server-sent events as they arrive."
                    : strcmp(stream, "bytes") == 0 ? ". Returns the bytes."
                                                   : ".");
    if (json_is_true(json_object_get(e, "requires_approval")))
        abx_buf_puts(b, " Needs approval: the answer may be the held call (202).");
    if (is_raw(e))
        abx_buf_puts(b, "\n\n        body: the request body (the data)");
    size_t i;
    json_t *p;
    json_array_foreach(params, i, p)
    {
        if (i == 0)
            abx_buf_puts(b, is_raw(e) ? "\n" : "\n\n");
        abx_buf_printf(b, "        %s: ", jstr(p, "name"));
        py_doc_text(b, jstr(p, "doc") ? jstr(p, "doc") : "");
        json_t *d = json_object_get(p, "default");
        if (d) {
            char *t = json_dumps(d, JSON_ENCODE_ANY | JSON_COMPACT);
            abx_buf_puts(b, " (default: ");
            py_doc_text(b, t);
            abx_buf_putc(b, ')');
            free(t);
        }
        abx_buf_putc(b, '\n');
    }
    if (json_array_size(json_object_get(e, "one_of"))) {
        abx_buf_puts(b, "\n        Exactly one of:");
        json_t *x;
        size_t k;
        json_array_foreach(json_object_get(e, "one_of"), k, x) abx_buf_printf(b, " %s", json_string_value(x));
        abx_buf_puts(b, ".\n");
    }
    abx_buf_puts(b, json_array_size(params) || is_raw(e) ? "        \"\"\"\n" : "\"\"\"\n");
    abx_buf_puts(b, "        return self._c.call(");
    lit(b, id);
    if (is_raw(e))
        abx_buf_puts(b, ", body");
    json_array_foreach(params, i, p)
    {
        const char *n = jstr(p, "name");
        if (py_renamed(n)) {
            abx_buf_puts(b, ", **{");
            lit(b, n);
            abx_buf_puts(b, ": ");
            py_name(b, n);
            abx_buf_puts(b, "}");
        } else {
            abx_buf_printf(b, ", %s=%s", n, n);
        }
    }
    abx_buf_puts(b, ")\n");
}

static void py_namespace(abx_buf *b, const json_t *ops, const json_t *all_ns, const char *ns)
{
    abx_buf_puts(b, "\n\nclass ");
    if (*ns)
        py_class_name(b, ns);
    else
        abx_buf_puts(b, "Ops");
    abx_buf_puts(b, ":\n    \"\"\"");
    if (*ns)
        abx_buf_printf(b, "Operations in the `%s` namespace.\"\"\"\n\n    def __init__(self, client: _abx.Client) -> None:\n"
                          "        self._c = client\n",
                       ns);
    else
        abx_buf_puts(b, "Every operation of the registry this module was generated from, by namespace.\n\n"
                        "    Ops() talks to the local server with its token file, like abx.Client();\n"
                        "    Ops(url, token) to another; Ops(client=c) reuses a zero-step client.\n"
                        "    \"\"\"\n\n"
                        "    def __init__(self, url: Optional[str] = None, token: Optional[str] = None, *,\n"
                        "                 client: Optional[_abx.Client] = None) -> None:\n"
                        "        self._c = client if client is not None else _abx.Client(url, token)\n");
    /* child namespaces */
    size_t i;
    json_t *x;
    json_array_foreach(all_ns, i, x)
    {
        const char *child = json_string_value(x);
        const char *dot = strrchr(child, '.');
        bool direct = *child && (*ns ? (dot && (size_t)(dot - child) == strlen(ns) && strncmp(child, ns, strlen(ns)) == 0)
                                     : !dot);
        if (!direct)
            continue;
        abx_buf_puts(b, "        self.");
        py_name(b, dot ? dot + 1 : child);
        abx_buf_puts(b, " = ");
        py_class_name(b, child);
        abx_buf_puts(b, "(self._c)\n");
    }
    json_t *e;
    json_array_foreach(ops, i, e)
    {
        if (!member_of(jstr(e, "id"), ns))
            continue;
        if (is_ws(e)) {
            abx_buf_printf(b, "\n    # %s is a WebSocket op (", jstr(e, "id"));
            json_t *h = json_array_get(json_object_get(e, "http"), 0);
            abx_buf_printf(b, "%s %s", jstr(h, "method"), jstr(h, "path"));
            abx_buf_puts(b, " with Upgrade: websocket): not callable through this module.\n");
            continue;
        }
        py_method(b, e);
    }
}

static char *gen_python(const json_t *cat)
{
    const json_t *ops = json_object_get(cat, "ops");
    json_t *ns = namespaces(ops);
    abx_buf b;
    abx_buf_init(&b, 0);
    abx_buf_printf(&b,
                   "\"\"\"Typed abx client, generated by `abx gen-client --lang python` from the registry of\n"
                   "abx %s (catalog %d). Do not edit: regenerate it.\n\n"
                   "    import abx_client                  # this file, saved as abx_client.py\n"
                   "    ops = abx_client.Ops()             # the local server and its token file\n"
                   "    ops.files.read(path=\"README.md\")\n\n"
                   "Methods take keyword-only parameters typed from the operations' schemas and call the\n"
                   "zero-step client (package `abx`, clients/python; standard library only), which checks\n"
                   "the arguments against the server's schema before sending and raises\n"
                   "ContractMismatchError (E3111) when the server does not list an operation.\n"
                   "\"\"\"\n"
                   "from typing import Any, Dict, List, Literal, Optional, TypedDict  # noqa: F401\n\n"
                   "import abx as _abx\n\n"
                   "ABX_VERSION = \"%s\"\n"
                   "CATALOG_VERSION = %d\n\n"
                   "# A JSON result an operation does not declare: the object the server sends.\n"
                   "Result = Dict[str, Any]\n",
                   ABX_VERSION, ABX_CATALOG_VERSION, ABX_VERSION, ABX_CATALOG_VERSION);
    size_t i;
    json_t *e;
    json_array_foreach(ops, i, e) py_typed_dicts(&b, json_object_get(e, "params"), jstr(e, "id"));
    json_array_foreach(ops, i, e) abx__gen_py_result(&b, e); /* each declared result's TypedDict */
    /* deepest namespaces first, the root class last */
    for (size_t k = json_array_size(ns); k-- > 0;)
        py_namespace(&b, ops, ns, json_string_value(json_array_get(ns, k)));
    abx_buf_puts(&b, "\n\n__all__ = [\"Ops\", \"Result\", \"ABX_VERSION\", \"CATALOG_VERSION\"]\n");
    json_decref(ns);
    return b.failed ? (abx_buf_release(&b), NULL) : abx_buf_detach(&b);
}

/* ---- TypeScript ---- */

static void ts_comment_text(abx_buf *b, const char *s)
{
    for (; s && *s; s++) {
        if (s[0] == '*' && s[1] == '/') {
            abx_buf_puts(b, "*\\/");
            s++;
        } else {
            abx_buf_putc(b, *s);
        }
    }
}

static void ts_scalar(abx_buf *b, const char *t, const json_t *p, const char *iface)
{
    if (!t)
        abx_buf_puts(b, "unknown");
    else if (strcmp(t, "string") == 0 || strcmp(t, "bytes") == 0)
        abx_buf_puts(b, "string");
    else if (strcmp(t, "integer") == 0 || strcmp(t, "number") == 0)
        abx_buf_puts(b, "number");
    else if (strcmp(t, "boolean") == 0)
        abx_buf_puts(b, "boolean");
    else if (strcmp(t, "enum") == 0 && json_array_size(json_object_get(p, "choices"))) {
        size_t i;
        json_t *c;
        if (json_array_size(json_object_get(p, "choices")) > 1)
            abx_buf_putc(b, '(');
        json_array_foreach(json_object_get(p, "choices"), i, c)
        {
            if (i)
                abx_buf_puts(b, " | ");
            lit(b, json_string_value(c));
        }
        if (json_array_size(json_object_get(p, "choices")) > 1)
            abx_buf_putc(b, ')');
    } else if (strcmp(t, "enum") == 0)
        abx_buf_puts(b, "string");
    else if (strcmp(t, "object") == 0 && iface)
        abx_buf_puts(b, iface);
    else if (strcmp(t, "object") == 0)
        abx_buf_puts(b, "JsonObject");
    else
        abx_buf_puts(b, "unknown");
}

static void ts_type(abx_buf *b, const json_t *p, const char *iface)
{
    const char *t = jstr(p, "type");
    if (strcmp(t, "list") == 0) {
        abx_buf_puts(b, "Array<");
        ts_scalar(b, jstr(p, "items"), p, iface);
        abx_buf_putc(b, '>');
    } else if (strcmp(t, "map") == 0) {
        abx_buf_puts(b, "{ [key: string]: ");
        ts_scalar(b, jstr(p, "items"), p, iface);
        abx_buf_puts(b, " }");
    } else {
        ts_scalar(b, t, p, iface);
    }
    if (json_is_true(json_object_get(p, "nullable")))
        abx_buf_puts(b, " | null");
}

/* An interface named iface for params (object fields too, nested first). */
static void ts_interface(abx_buf *b, const json_t *params, const char *iface, const char *doc)
{
    size_t i;
    json_t *p;
    json_array_foreach(params, i, p)
    {
        if (!json_array_size(json_object_get(p, "fields")))
            continue;
        abx_buf sub;
        abx_buf_init(&sub, 0);
        char *n = abx_asprintf("%s_%s", iface, jstr(p, "name"));
        camel(&sub, n, strlen(n));
        ts_interface(b, json_object_get(p, "fields"), sub.data, NULL);
        abx_free(n);
        abx_buf_release(&sub);
    }
    if (doc) {
        abx_buf_puts(b, "\n/** ");
        ts_comment_text(b, doc);
        abx_buf_puts(b, " */");
    }
    abx_buf_printf(b, "\nexport interface %s {\n", iface);
    json_array_foreach(params, i, p)
    {
        abx_buf sub;
        abx_buf_init(&sub, 0);
        char *n = abx_asprintf("%s_%s", iface, jstr(p, "name"));
        camel(&sub, n, strlen(n));
        abx_free(n);
        if (jstr(p, "doc")) {
            abx_buf_puts(b, "  /** ");
            ts_comment_text(b, jstr(p, "doc"));
            json_t *d = json_object_get(p, "default");
            if (d) {
                char *t = json_dumps(d, JSON_ENCODE_ANY | JSON_COMPACT);
                abx_buf_puts(b, " (default: ");
                ts_comment_text(b, t);
                abx_buf_putc(b, ')');
                free(t);
            }
            abx_buf_puts(b, " */\n");
        }
        abx_buf_printf(b, "  %s%s: ", jstr(p, "name"), json_is_true(json_object_get(p, "required")) ? "" : "?");
        ts_type(b, p, json_array_size(json_object_get(p, "fields")) ? sub.data : NULL);
        abx_buf_puts(b, ";\n");
        abx_buf_release(&sub);
    }
    abx_buf_puts(b, "}\n");
}

static bool has_required(const json_t *e)
{
    size_t i;
    json_t *p;
    json_array_foreach(json_object_get(e, "params"), i, p) if (json_is_true(json_object_get(p, "required"))) return true;
    return false;
}

static void ts_namespace(abx_buf *b, const json_t *ops, const json_t *all_ns, const char *ns)
{
    abx_buf cls;
    abx_buf_init(&cls, 0);
    camel(&cls, ns, strlen(ns));
    abx_buf_printf(b, "\n/** Operations in the `%s` namespace. */\nexport class %sOps {\n", ns, cls.data);
    size_t i;
    json_t *x;
    json_array_foreach(all_ns, i, x)
    {
        const char *child = json_string_value(x);
        const char *dot = strrchr(child, '.');
        if (!dot || (size_t)(dot - child) != strlen(ns) || strncmp(child, ns, strlen(ns)) != 0)
            continue;
        abx_buf cc;
        abx_buf_init(&cc, 0);
        camel(&cc, child, strlen(child));
        abx_buf_printf(b, "  readonly %s: %sOps;\n", dot + 1, cc.data);
        abx_buf_release(&cc);
    }
    abx_buf_puts(b, "  constructor(private readonly c: AbxClient) {\n");
    json_array_foreach(all_ns, i, x)
    {
        const char *child = json_string_value(x);
        const char *dot = strrchr(child, '.');
        if (!dot || (size_t)(dot - child) != strlen(ns) || strncmp(child, ns, strlen(ns)) != 0)
            continue;
        abx_buf cc;
        abx_buf_init(&cc, 0);
        camel(&cc, child, strlen(child));
        abx_buf_printf(b, "    this.%s = new %sOps(c);\n", dot + 1, cc.data);
        abx_buf_release(&cc);
    }
    abx_buf_puts(b, "  }\n");
    json_t *e;
    json_array_foreach(ops, i, e)
    {
        const char *id = jstr(e, "id");
        if (!member_of(id, ns))
            continue;
        if (is_ws(e)) {
            abx_buf_printf(b, "  // %s is a WebSocket op: not callable through this module.\n", id);
            continue;
        }
        abx_buf iface;
        abx_buf_init(&iface, 0);
        camel(&iface, id, strlen(id));
        abx_buf_puts(&iface, "Params");
        const char *stream = jstr(e, "stream");
        abx_buf_puts(b, "  /** ");
        ts_comment_text(b, jstr(e, "summary"));
        abx_buf_printf(b, " (`%s`) */\n  %s(", id, strrchr(id, '.') + 1);
        if (is_raw(e))
            abx_buf_puts(b, "body: BodyInit, ");
        abx_buf ret; /* the declared result's interface, else by the stream */
        abx_buf_init(&ret, 0);
        if (strcmp(stream, "none") != 0 || !abx__gen_result_name(&ret, e))
            abx_buf_puts(&ret, strcmp(stream, "sse") == 0 ? "AsyncIterable<AbxEvent>" : strcmp(stream, "bytes") == 0 ? "Uint8Array" : "JsonObject");
        abx_buf_printf(b, "params: %s%s): Promise<%s> {\n", iface.data, has_required(e) ? "" : " = {}", ret.data);
        abx_buf_puts(b, "    return this.c.call(");
        lit(b, id);
        abx_buf_printf(b, ", params%s) as Promise<%s>;\n  }\n", is_raw(e) ? ", body" : "", ret.data);
        abx_buf_release(&ret);
        abx_buf_release(&iface);
    }
    abx_buf_puts(b, "}\n");
    abx_buf_release(&cls);
}

/* The runtime part of the TypeScript module: fetch, errors, SSE parsing, E3111. */
static const char ts_runtime[] =
    "\nexport type JsonObject = { [key: string]: unknown };\n"
    "\n/** One server-sent event: its name, its data (parsed JSON, or the text) and its id. */\n"
    "export interface AbxEvent {\n  event: string;\n  data: unknown;\n  id?: string;\n}\n"
    "\n/** An abx error: the code from the error table, the HTTP status, the message. */\n"
    "export class AbxError extends Error {\n"
    "  constructor(\n    readonly code: string,\n    message: string,\n    readonly status?: number,\n"
    "    readonly details?: unknown,\n    readonly requestId?: string,\n  ) {\n"
    "    super(`${code}: ${message}`);\n    this.name = \"AbxError\";\n  }\n}\n"
    "\n/** E3111: the server does not list this operation for the caller. Nothing was sent. */\n"
    "export class ContractMismatchError extends AbxError {\n"
    "  constructor(readonly op: string) {\n"
    "    super(\"E3111\", `the server does not list operation '${op}' for this caller`);\n"
    "    this.name = \"ContractMismatchError\";\n  }\n}\n"
    "\nexport interface AbxClientOptions {\n  /** default http://127.0.0.1:8080 */\n  url?: string;\n"
    "  token?: string;\n  fetch?: typeof fetch;\n}\n"
    "\ninterface Binding {\n  method: string;\n  path: string;\n}\n"
    "\n/** Calls operations over POST /ops/{id} (uploads over their own binding). */\n"
    "export class AbxClient {\n"
    "  readonly url: string;\n  readonly token?: string;\n"
    "  private readonly fetchFn: typeof fetch;\n"
    "  private listed?: Promise<Map<string, Binding[]>>;\n"
    "  constructor(opts: AbxClientOptions = {}) {\n"
    "    this.url = (opts.url ?? \"http://127.0.0.1:8080\").replace(/\\/+$/, \"\");\n"
    "    this.token = opts.token;\n"
    "    this.fetchFn = opts.fetch ?? fetch;\n  }\n"
    "\n  private headers(contentType?: string): Record<string, string> {\n"
    "    const h: Record<string, string> = { \"X-ABX-Client\": `ts/${ABX_VERSION} catalog=${CATALOG_VERSION}` };\n"
    "    if (this.token) h[\"Authorization\"] = `Bearer ${this.token}`;\n"
    "    if (contentType) h[\"Content-Type\"] = contentType;\n    return h;\n  }\n"
    "\n  /** The operations the server lists for this caller (GET /ops, fetched once). */\n"
    "  async operations(): Promise<Map<string, Binding[]>> {\n"
    "    if (!this.listed) {\n"
    "      this.listed = (async () => {\n"
    "        const res = await this.fetchFn(`${this.url}/ops`, { headers: this.headers() });\n"
    "        if (res.status >= 400) throw await AbxClient.error(res);\n"
    "        const cat = (await res.json()) as { ops: Array<{ id: string; http: Binding[] }> };\n"
    "        return new Map(cat.ops.map((e) => [e.id, e.http] as [string, Binding[]]));\n"
    "      })();\n"
    "      this.listed.catch(() => (this.listed = undefined));\n"
    "    }\n    return this.listed;\n  }\n"
    "\n  async call(op: string, params: object, body?: BodyInit): Promise<unknown> {\n"
    "    const ops = await this.operations();\n"
    "    const http = ops.get(op);\n"
    "    if (!http) throw new ContractMismatchError(op);\n"
    "    let res: Response;\n"
    "    if (body !== undefined) {\n"
    "      const b = http.find((x) => x.method === \"PUT\" || x.method === \"POST\");\n"
    "      if (!b) throw new ContractMismatchError(op);\n"
    "      const q = new URLSearchParams();\n"
    "      for (const [k, v] of Object.entries(params)) if (v !== undefined && v !== null) q.append(k, String(v));\n"
    "      const qs = q.toString();\n"
    "      res = await this.fetchFn(`${this.url}${b.path}${qs ? \"?\" + qs : \"\"}`, {\n"
    "        method: b.method,\n        headers: this.headers(\"application/octet-stream\"),\n        body,\n      });\n"
    "    } else {\n"
    "      res = await this.fetchFn(`${this.url}/ops/${op}`, {\n"
    "        method: \"POST\",\n        headers: this.headers(\"application/json\"),\n"
    "        body: JSON.stringify(params),\n      });\n    }\n"
    "    if (res.status >= 400) throw await AbxClient.error(res);\n"
    "    const ct = (res.headers.get(\"Content-Type\") ?? \"\").split(\";\")[0].trim();\n"
    "    if (ct === \"application/json\") return res.json();\n"
    "    if (ct === \"text/event-stream\") return AbxClient.events(res);\n"
    "    return new Uint8Array(await res.arrayBuffer());\n  }\n"
    "\n  private static async error(res: Response): Promise<AbxError> {\n"
    "    const text = await res.text();\n"
    "    try {\n"
    "      const e = (JSON.parse(text) as { error: { code: string; message: string; details?: unknown } }).error;\n"
    "      return new AbxError(e.code, e.message, res.status, e.details, res.headers.get(\"X-Request-Id\") ?? undefined);\n"
    "    } catch {\n"
    "      return new AbxError(\"client.bad_reply\", `HTTP ${res.status}: ${text.slice(0, 200)}`, res.status);\n"
    "    }\n  }\n"
    "\n  private static async *events(res: Response): AsyncIterable<AbxEvent> {\n"
    "    if (!res.body) return;\n"
    "    const reader = res.body.getReader();\n"
    "    const dec = new TextDecoder();\n"
    "    let buf = \"\";\n"
    "    let ev: { event: string; data: string[]; id?: string } = { event: \"message\", data: [] };\n"
    "    try {\n"
    "      for (;;) {\n"
    "        const { value, done } = await reader.read();\n"
    "        if (done) break;\n"
    "        buf += dec.decode(value, { stream: true });\n"
    "        let nl: number;\n"
    "        while ((nl = buf.indexOf(\"\\n\")) >= 0) {\n"
    "          const line = buf.slice(0, nl).replace(/\\r$/, \"\");\n"
    "          buf = buf.slice(nl + 1);\n"
    "          if (line === \"\") {\n"
    "            if (ev.data.length) yield AbxClient.event(ev);\n"
    "            ev = { event: \"message\", data: [] };\n"
    "          } else if (!line.startsWith(\":\")) {\n"
    "            const i = line.indexOf(\":\");\n"
    "            const field = i < 0 ? line : line.slice(0, i);\n"
    "            const v = i < 0 ? \"\" : line.slice(i + 1).replace(/^ /, \"\");\n"
    "            if (field === \"event\") ev.event = v;\n"
    "            else if (field === \"data\") ev.data.push(v);\n"
    "            else if (field === \"id\") ev.id = v;\n"
    "          }\n"
    "        }\n"
    "      }\n"
    "    } finally {\n      await reader.cancel();\n    }\n"
    "    if (ev.data.length) yield AbxClient.event(ev);\n  }\n"
    "\n  private static event(ev: { event: string; data: string[]; id?: string }): AbxEvent {\n"
    "    const text = ev.data.join(\"\\n\");\n"
    "    let data: unknown = text;\n"
    "    try {\n      data = JSON.parse(text);\n    } catch {\n      // not JSON: the text as sent\n    }\n"
    "    return ev.id === undefined ? { event: ev.event, data } : { event: ev.event, data, id: ev.id };\n  }\n}\n";

static char *gen_ts(const json_t *cat)
{
    const json_t *ops = json_object_get(cat, "ops");
    json_t *ns = namespaces(ops);
    abx_buf b;
    abx_buf_init(&b, 0);
    abx_buf_printf(&b,
                   "// Typed abx client, generated by `abx gen-client --lang ts` from the registry of\n"
                   "// abx %s (catalog %d). Do not edit: regenerate it.\n"
                   "//\n"
                   "//   const abx = new Abx({ url: \"http://127.0.0.1:8080\", token });\n"
                   "//   const listing = await abx.files.list({ path: \".\" });\n"
                   "//\n"
                   "// JSON results are typed by each operation's declared result (JsonObject when undeclared).\n\n"
                   "export const ABX_VERSION = \"%s\";\nexport const CATALOG_VERSION = %d;\n",
                   ABX_VERSION, ABX_CATALOG_VERSION, ABX_VERSION, ABX_CATALOG_VERSION);
    abx_buf_puts(&b, ts_runtime);
    size_t i;
    json_t *e;
    json_array_foreach(ops, i, e)
    {
        if (is_ws(e))
            continue;
        abx_buf iface;
        abx_buf_init(&iface, 0);
        camel(&iface, jstr(e, "id"), strlen(jstr(e, "id")));
        abx_buf_puts(&iface, "Params");
        char *doc = abx_asprintf("Parameters of `%s`.", jstr(e, "id"));
        ts_interface(&b, json_object_get(e, "params"), iface.data, doc);
        abx__gen_ts_result(&b, e);
        abx_free(doc);
        abx_buf_release(&iface);
    }
    for (size_t k = json_array_size(ns); k-- > 1;) /* deepest first; index 0 is the root */
        ts_namespace(&b, ops, ns, json_string_value(json_array_get(ns, k)));
    abx_buf_puts(&b, "\n/** Every operation of the registry this module was generated from, by namespace. */\n"
                     "export class Abx extends AbxClient {\n");
    json_t *x;
    json_array_foreach(ns, i, x)
    {
        const char *n = json_string_value(x);
        if (!*n || strchr(n, '.'))
            continue;
        abx_buf cc;
        abx_buf_init(&cc, 0);
        camel(&cc, n, strlen(n));
        abx_buf_printf(&b, "  readonly %s = new %sOps(this);\n", n, cc.data);
        abx_buf_release(&cc);
    }
    abx_buf_puts(&b, "}\n");
    json_decref(ns);
    return b.failed ? (abx_buf_release(&b), NULL) : abx_buf_detach(&b);
}

char *abx_gen_client(const abx_registry *reg, const char *lang, char *err, size_t errlen)
{
    if (!lang || (strcmp(lang, "python") != 0 && strcmp(lang, "ts") != 0 && strcmp(lang, "openapi") != 0)) {
        snprintf(err, errlen, "unknown language '%s' (python, ts or openapi)", lang ? lang : "");
        return NULL;
    }
    json_t *doc = strcmp(lang, "openapi") == 0 ? abx_openapi(reg, NULL, 0, NULL) : abx_catalog(reg, NULL, 0);
    char *out = NULL;
    if (doc && strcmp(lang, "openapi") == 0) {
        char *s = json_dumps(doc, JSON_INDENT(2) | JSON_SORT_KEYS);
        out = s ? abx_asprintf("%s\n", s) : NULL;
        free(s);
    } else if (doc) {
        out = strcmp(lang, "python") == 0 ? gen_python(doc) : gen_ts(doc);
    }
    json_decref(doc);
    if (!out)
        snprintf(err, errlen, "out of memory");
    return out;
}

/* for genresult.c */
void abx__gen_camel(abx_buf *b, const char *s, size_t n) { camel(b, s, n); }
void abx__gen_py_type(abx_buf *b, const json_t *p, const char *typed_dict) { py_type(b, p, typed_dict); }
void abx__gen_ts_interface(abx_buf *b, const json_t *params, const char *iface, const char *doc)
{
    ts_interface(b, params, iface, doc);
}
