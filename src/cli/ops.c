/* ops.c — `abx ops [OP|PREFIX ...] [--json]` and `abx call OP --help`: what an operation
 * takes, read from the catalog the registry generates (the same entries GET /catalog
 * serves): each parameter's name, type, whether it is required, its default and its
 * description. No server is needed. */
#include "cli/cli.h"
#include "core/core.h"
#include "discovery/discovery.h"
#include <stdio.h>
#include <string.h>

/* "string", "list of string", "map of any", "enum (a|b)", "integer 1..128" */
static void param_type(const json_t *p, char *out, size_t n)
{
    const char *t = json_string_value(json_object_get(p, "type"));
    const char *items = json_string_value(json_object_get(p, "items"));
    const json_t *choices = json_object_get(p, "choices");
    size_t k = (size_t)snprintf(out, n, "%s%s%s", t ? t : "any", items ? " of " : "", items ? items : "");
    if (json_is_array(choices) && k < n) {
        k += (size_t)snprintf(out + k, n - k, " (");
        size_t i;
        const json_t *c;
        json_array_foreach(choices, i, c)
        {
            if (k < n)
                k += (size_t)snprintf(out + k, n - k, "%s%s", i ? "|" : "", json_string_value(c) ? json_string_value(c) : "");
        }
        if (k < n)
            k += (size_t)snprintf(out + k, n - k, ")");
    }
    const json_t *mn = json_object_get(p, "min"), *mx = json_object_get(p, "max");
    if ((mn || mx) && !items && k < n) {
        if (mn && mx)
            snprintf(out + k, n - k, " %lld..%lld", (long long)json_integer_value(mn), (long long)json_integer_value(mx));
        else if (mn)
            snprintf(out + k, n - k, " >= %lld", (long long)json_integer_value(mn));
        else
            snprintf(out + k, n - k, " <= %lld", (long long)json_integer_value(mx));
    }
}

static void print_params(FILE *f, const json_t *params)
{
    size_t i;
    const json_t *p;
    if (!json_array_size(params)) {
        fprintf(f, "  (no parameters)\n");
        return;
    }
    json_array_foreach(params, i, p)
    {
        char type[256];
        param_type(p, type, sizeof type);
        const json_t *d = json_object_get(p, "default");
        char *dflt = d ? json_dumps(d, JSON_ENCODE_ANY | JSON_COMPACT) : NULL;
        bool req = json_is_true(json_object_get(p, "required"));
        fprintf(f, "  %-16s %-24s %s%s%s\n", json_string_value(json_object_get(p, "name")), type,
                req ? "required" : "optional", dflt ? ", default " : "", dflt ? dflt : "");
        const char *doc = json_string_value(json_object_get(p, "doc"));
        if (doc && doc[0])
            fprintf(f, "      %s\n", doc);
        free(dflt);
    }
}

static void print_op(FILE *f, const json_t *op)
{
    fprintf(f, "%s — %s\n", json_string_value(json_object_get(op, "id")),
            json_string_value(json_object_get(op, "summary")) ? json_string_value(json_object_get(op, "summary")) : "");
    print_params(f, json_object_get(op, "params"));
}

/* The declared result's fields (abx call OP --help): always present or optional. */
static void print_result(FILE *f, const json_t *result)
{
    const json_t *fields = json_object_get(result, "fields");
    if (!json_array_size(fields))
        return;
    fprintf(f, "\nresult (a JSON object):\n");
    size_t i;
    const json_t *p;
    json_array_foreach(fields, i, p)
    {
        char type[256];
        param_type(p, type, sizeof type);
        fprintf(f, "  %-16s %-24s %s%s\n", json_string_value(json_object_get(p, "name")), type,
                json_is_true(json_object_get(p, "required")) ? "always" : "optional",
                json_is_true(json_object_get(p, "nullable")) ? ", may be null" : "");
        const char *doc = json_string_value(json_object_get(p, "doc"));
        if (doc && doc[0])
            fprintf(f, "      %s\n", doc);
    }
}

static json_t *catalog_ops(void)
{
    abx_registry *reg = abx_registry_default();
    abx_registry_freeze(reg);
    json_t *cat = abx_catalog(reg, NULL, 0);
    json_t *ops = json_incref(json_object_get(cat, "ops"));
    json_decref(cat);
    return ops;
}

/* An exact id matches itself; "files" or "files." matches the namespace. */
static bool op_matches(const char *id, const char *want)
{
    size_t n = strlen(want);
    if (strcmp(id, want) == 0)
        return true;
    if (n && want[n - 1] == '.')
        return strncmp(id, want, n) == 0;
    return strncmp(id, want, n) == 0 && id[n] == '.';
}

int abx_cli_op_help(const char *op, FILE *f)
{
    json_t *ops = catalog_ops();
    size_t i;
    const json_t *o;
    int rc = 1;
    json_array_foreach(ops, i, o)
    {
        if (strcmp(json_string_value(json_object_get(o, "id")), op) == 0) {
            fprintf(f, "usage: abx call %s [name=value ...] [--args '{...}']\n\n", op);
            print_op(f, o);
            print_result(f, json_object_get(o, "result"));
            rc = 0;
        }
    }
    if (rc)
        fprintf(stderr, "abx: no operation '%s' (abx ops lists them)\n", op);
    json_decref(ops);
    return rc;
}

int abx_cli_ops(int argc, char **argv)
{
    bool json_out = false;
    for (int i = 0; i < argc; i++) {
        if (strcmp(argv[i], "--json") == 0)
            json_out = true;
        else if (argv[i][0] == '-') {
            fprintf(stderr, "usage: abx ops [OP|NAMESPACE ...] [--json]\n");
            return 2;
        }
    }
    json_t *ops = catalog_ops(), *picked = json_array();
    size_t i;
    json_t *o;
    json_array_foreach(ops, i, o)
    {
        const char *id = json_string_value(json_object_get(o, "id"));
        bool want = true;
        for (int a = 0; a < argc; a++) {
            if (argv[a][0] == '-')
                continue;
            want = op_matches(id, argv[a]);
            if (want)
                break;
        }
        if (want)
            json_array_append(picked, o);
    }
    json_decref(ops);
    int rc = json_array_size(picked) ? 0 : 1;
    if (rc)
        fprintf(stderr, "abx ops: no operation matches\n");
    else if (json_out) {
        char *t = json_dumps(picked, JSON_INDENT(2));
        puts(t ? t : "[]");
        free(t);
    } else {
        json_array_foreach(picked, i, o)
        {
            if (i)
                putchar('\n');
            print_op(stdout, o);
        }
    }
    json_decref(picked);
    return rc;
}
