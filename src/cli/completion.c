/* completion.c — `abx completion bash`: the bash completion script, written from the
 * command table (main.c: each row's synopsis gives its options, their values and its
 * words) and the registry (operation ids after `call`, `ops` and `--op`). The build runs
 * it and `cmake --install` puts the script where bash-completion looks for it. */
#include "cli/cli.h"
#include "core/core.h"
#include "core/util.h"
#include "discovery/discovery.h"
#include <ctype.h>
#include <stdio.h>
#include <string.h>

/* What an option's value is, from the placeholder after it in a synopsis. */
typedef struct {
    char name[32];
    char words[160]; /* "python ts openapi", or one of the kinds below */
} opt_value;

static bool is_word(const char *s, size_t n)
{
    if (!n)
        return false;
    for (size_t i = 0; i < n; i++)
        if (!islower((unsigned char)s[i]) && s[i] != '-' && s[i] != '_')
            return false;
    return true;
}

/* "python|ts|openapi" → "python ts openapi"; "on|off|allow:HOST,..." → "on off allow:" */
static void alternatives(const char *tok, char *out, size_t cap)
{
    out[0] = '\0';
    size_t k = 0;
    while (*tok) {
        size_t n = strcspn(tok, "|");
        size_t w = 0;
        while (w < n && (islower((unsigned char)tok[w]) || tok[w] == '-' || tok[w] == '_' || tok[w] == ':'))
            w++;
        if (w && (w == n || tok[w - 1] == ':') && k + w + 2 < cap)
            k += (size_t)snprintf(out + k, cap - k, "%s%.*s", k ? " " : "", (int)w, tok);
        tok += n + (tok[n] == '|');
    }
}

/* The value kind of a placeholder: files, folders, operation ids, fixed words, or none. */
static void value_kind(const char *tok, char *out, size_t cap)
{
    if (strcmp(tok, "FILE") == 0 || strcmp(tok, "F") == 0)
        snprintf(out, cap, "@file");
    else if (strcmp(tok, "DIR") == 0)
        snprintf(out, cap, "@dir");
    else if (strcmp(tok, "OP") == 0)
        snprintf(out, cap, "@op");
    else if (strchr(tok, '|'))
        alternatives(tok, out, cap);
    else
        snprintf(out, cap, "@any");
}

/* Split a synopsis into tokens without brackets: "[--config FILE]" → "--config", "FILE". */
static size_t tokens(const char *args, char tok[][96], size_t max)
{
    size_t n = 0;
    while (*args && n < max) {
        args += strspn(args, " []'{}");
        size_t len = strcspn(args, " []");
        if (!len)
            continue;
        snprintf(tok[n++], 96, "%.*s", (int)(len < 95 ? len : 95), args);
        args += len;
    }
    return n;
}

/* One command's case: its options and its words (subcommands or an op id). */
static void command_case(FILE *f, const abx_cli_command *c, opt_value *vals, size_t *nvals, size_t maxvals)
{
    char tok[48][96], opts[512] = "", words[256] = "";
    size_t n = tokens(c->args, tok, 48), ko = 0, kw = 0;
    bool op = false;
    for (size_t i = 0; i < n; i++) {
        if (strncmp(tok[i], "--", 2) == 0) {
            char name[32];
            snprintf(name, sizeof name, "%.*s", (int)strcspn(tok[i], "=|"), tok[i]);
            if (!strstr(opts, name) && ko + strlen(name) + 2 < sizeof opts)
                ko += (size_t)snprintf(opts + ko, sizeof opts - ko, "%s%s", ko ? " " : "", name);
            bool has_value = i + 1 < n && tok[i + 1][0] != '-' && strcmp(tok[i + 1], "|") != 0 &&
                             strcmp(tok[i + 1], "...") != 0 && !strchr(tok[i], '=');
            size_t j = 0;
            while (j < *nvals && strcmp(vals[j].name, name) != 0)
                j++;
            if (has_value && j == *nvals && j < maxvals) {
                snprintf(vals[j].name, sizeof vals[j].name, "%s", name);
                value_kind(tok[i + 1], vals[j].words, sizeof vals[j].words);
                (*nvals)++;
            }
            i += has_value;
        } else if (strcmp(tok[i], "OP") == 0) {
            op = true;
        } else if (strchr(tok[i], '|') || is_word(tok[i], strlen(tok[i]))) {
            char alt[160];
            alternatives(tok[i], alt, sizeof alt);
            if (alt[0] && kw + strlen(alt) + 2 < sizeof words)
                kw += (size_t)snprintf(words + kw, sizeof words - kw, "%s%s", kw ? " " : "", alt);
        }
    }
    /* ops: an op id anywhere ([OP|NAMESPACE ...]); 2: the first word only (call OP) */
    int ops = strcmp(c->name, "ops") == 0 ? 1 : op ? 2 : 0;
    fprintf(f, "        %s) opts=\"%s\"; words=\"%s\"; ops=%d ;;\n", c->name, opts, ops ? "" : words, ops);
}

static void print_ops(FILE *f)
{
    abx_registry *reg = abx_registry_default();
    abx_registry_freeze(reg);
    json_t *cat = abx_catalog(reg, NULL, 0);
    size_t i;
    json_t *op;
    fputs("_abx_ops=\"", f);
    json_array_foreach(json_object_get(cat, "ops"), i, op)
    {
        const char *id = json_string_value(json_object_get(op, "id"));
        fprintf(f, "%s%s", i ? " " : "", id ? id : "");
    }
    fputs("\"\n", f);
    json_decref(cat);
}

static void script(FILE *f)
{
    size_t n;
    const abx_cli_command *c = abx_cli_commands(&n);
    opt_value vals[64];
    size_t nvals = 0;
    fputs("# bash completion for abx — generated by `abx completion bash` from the command table\n"
          "# (src/cli/main.c) and the registry; do not edit\n",
          f);
    print_ops(f);
    fputs("_abx() {\n"
          "    local cur=${COMP_WORDS[COMP_CWORD]} prev=${COMP_WORDS[COMP_CWORD-1]}\n"
          "    local opts=\"\" words=\"\" ops=0\n"
          "    if [ \"$COMP_CWORD\" -eq 1 ]; then\n"
          "        COMPREPLY=($(compgen -W \"",
          f);
    for (size_t i = 0, k = 0; i < n; i++)
        if (c[i].help)
            fprintf(f, "%s%s", k++ ? " " : "", c[i].name);
    fputs("\" -- \"$cur\"))\n        return\n    fi\n    case \"${COMP_WORDS[1]}\" in\n", f);
    for (size_t i = 0; i < n; i++)
        if (c[i].help)
            command_case(f, &c[i], vals, &nvals, ABX_ARRAY_LEN(vals));
    fputs("        *) return ;;\n    esac\n    case \"$prev\" in\n", f);
    for (size_t i = 0; i < nvals; i++) {
        const char *w = vals[i].words;
        fprintf(f, "        %s) ", vals[i].name);
        if (strcmp(w, "@file") == 0)
            fputs("COMPREPLY=($(compgen -f -- \"$cur\")); compopt -o filenames 2>/dev/null; return ;;\n", f);
        else if (strcmp(w, "@dir") == 0)
            fputs("COMPREPLY=($(compgen -d -- \"$cur\")); compopt -o filenames 2>/dev/null; return ;;\n", f);
        else if (strcmp(w, "@op") == 0)
            fputs("COMPREPLY=($(compgen -W \"$_abx_ops\" -- \"$cur\")); return ;;\n", f);
        else if (strcmp(w, "@any") == 0)
            fputs("return ;;\n", f);
        else
            fprintf(f, "COMPREPLY=($(compgen -W \"%s\" -- \"$cur\")); return ;;\n", w);
    }
    fputs("    esac\n"
          "    if [[ $cur == -* ]]; then\n"
          "        COMPREPLY=($(compgen -W \"$opts\" -- \"$cur\"))\n"
          "    elif [ \"$ops\" = 1 ] || { [ \"$ops\" = 2 ] && [ \"$COMP_CWORD\" -eq 2 ]; }; then\n"
          "        COMPREPLY=($(compgen -W \"$_abx_ops\" -- \"$cur\"))\n"
          "    elif [ -n \"$words\" ] && [ \"$COMP_CWORD\" -eq 2 ]; then\n"
          "        COMPREPLY=($(compgen -W \"$words\" -- \"$cur\"))\n"
          "    else\n"
          "        COMPREPLY=($(compgen -f -- \"$cur\")); compopt -o filenames 2>/dev/null\n"
          "    fi\n"
          "}\n"
          "complete -F _abx abx\n",
          f);
}

int abx_cli_completion(int argc, char **argv)
{
    if (argc != 1 || strcmp(argv[0], "bash") != 0) {
        fprintf(stderr, "usage: abx completion bash\n");
        return 2;
    }
    script(stdout);
    return fflush(stdout) == 0 ? 0 : 1;
}
