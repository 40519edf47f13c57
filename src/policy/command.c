/* command.c — command scopes: shell-word splitting without expansion, refusal of shell
 * syntax, PATH resolution and argv pattern matching. A command string never reaches a
 * shell: it becomes an argv here, and the argv is what the policy matches and what the
 * process receives. */
#include "policy/command.h"
#include "core/util.h"
#include <errno.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#define MAX_WORDS 4096
#define MAX_CMD 65536

void abx_argv_release(abx_argv *a)
{
    for (size_t i = 0; i < a->n; i++)
        abx_free(a->v[i]);
    abx_free(a->v);
    a->v = NULL;
    a->n = 0;
}

bool abx_argv_push(abx_argv *a, const char *s, size_t len)
{
    if (a->n + 2 > MAX_WORDS)
        return false;
    char **g = abx_realloc(a->v, (a->n + 2) * sizeof *g);
    if (!g)
        return false;
    a->v = g;
    if (!(a->v[a->n] = abx_strndup(s, len)))
        return false;
    a->n++;
    a->v[a->n] = NULL;
    return true;
}

static int refuse(char *err, size_t errlen, const char *what, char c, size_t off)
{
    if (c == '\n')
        snprintf(err, errlen, "shell syntax is not allowed: newline at offset %zu", off);
    else if (c == '\r')
        snprintf(err, errlen, "shell syntax is not allowed: carriage return at offset %zu", off);
    else
        snprintf(err, errlen, "shell syntax is not allowed: %s '%c' at offset %zu", what, c, off);
    return -1;
}

int abx_shell_split(const char *cmd, abx_argv *out, char *err, size_t errlen)
{
    memset(out, 0, sizeof *out);
    size_t n = strlen(cmd);
    if (n > MAX_CMD) {
        snprintf(err, errlen, "the command is longer than %d bytes", MAX_CMD);
        return -1;
    }
    abx_buf w;
    abx_buf_init(&w, MAX_CMD);
    bool in_word = false;
    for (size_t i = 0; i <= n; i++) {
        char c = cmd[i];
        if (c == '\0' || c == ' ' || c == '\t') {
            if (in_word) {
                if (!abx_argv_push(out, w.data ? w.data : "", w.len))
                    goto oom;
                w.len = 0;
                if (w.data)
                    w.data[0] = '\0';
                in_word = false;
            }
            continue;
        }
        if (c == '\n' || c == '\r')
            goto bad_nl;
        if (strchr("|;&><(){}`$", c)) {
            refuse(err, errlen, c == '$' || c == '`' ? "expansion" : "operator", c, i);
            goto fail;
        }
        if (strchr("*?[]", c)) {
            refuse(err, errlen, "glob", c, i);
            goto fail;
        }
        if (!in_word && (c == '~' || c == '#')) {
            refuse(err, errlen, c == '~' ? "tilde expansion" : "comment", c, i);
            goto fail;
        }
        in_word = true;
        if (c == '\\') {
            if (i + 1 >= n) {
                snprintf(err, errlen, "a trailing backslash escapes nothing");
                goto fail;
            }
            if (cmd[i + 1] == '\n' || cmd[i + 1] == '\r') {
                i++;
                goto bad_nl;
            }
            abx_buf_putc(&w, cmd[++i]);
        } else if (c == '\'') {
            size_t j = i + 1;
            while (j < n && cmd[j] != '\'')
                j++;
            if (j >= n) {
                snprintf(err, errlen, "unterminated single quote at offset %zu", i);
                goto fail;
            }
            abx_buf_append(&w, cmd + i + 1, j - i - 1);
            i = j;
        } else if (c == '"') {
            size_t j = i + 1;
            for (; j < n && cmd[j] != '"'; j++) {
                char d = cmd[j];
                if (d == '$' || d == '`') {
                    refuse(err, errlen, "expansion", d, j);
                    goto fail;
                }
                if (d == '\\' && j + 1 < n && strchr("\"\\$`", cmd[j + 1])) {
                    abx_buf_putc(&w, cmd[++j]);
                    continue;
                }
                if (d == '\\' && j + 1 < n && cmd[j + 1] == '\n') {
                    j++;
                    continue;
                }
                abx_buf_putc(&w, d);
            }
            if (j >= n) {
                snprintf(err, errlen, "unterminated double quote at offset %zu", i);
                goto fail;
            }
            i = j;
        } else {
            abx_buf_putc(&w, c);
        }
        if (w.failed)
            goto oom;
    }
    abx_buf_release(&w);
    if (out->n == 0) {
        snprintf(err, errlen, "the command is empty");
        return -1;
    }
    return 0;
bad_nl:
    refuse(err, errlen, "", cmd[strcspn(cmd, "\r\n")], strcspn(cmd, "\r\n"));
    goto fail;
oom:
    snprintf(err, errlen, "the command has too many words or is too long");
fail:
    abx_buf_release(&w);
    abx_argv_release(out);
    return -1;
}

static char *canon_exec(const char *path)
{
    char *real = realpath(path, NULL);
    if (!real)
        return NULL;
    struct stat st;
    if (stat(real, &st) != 0 || !S_ISREG(st.st_mode) || access(real, X_OK) != 0) {
        free(real);
        return NULL;
    }
    char *out = abx_strdup(real);
    free(real);
    return out;
}

char *abx_resolve_program(const char *name, const char *search_path)
{
    if (!name || !*name)
        return NULL;
    if (strchr(name, '/'))
        return name[0] == '/' ? canon_exec(name) : NULL;
    const char *sp = search_path ? search_path : "/usr/local/bin:/usr/bin:/bin";
    while (*sp) {
        size_t l = strcspn(sp, ":");
        if (l > 0 && sp[0] == '/') {
            char cand[PATH_MAX];
            if ((size_t)snprintf(cand, sizeof cand, "%.*s/%s", (int)l, sp, name) < sizeof cand) {
                char *r = canon_exec(cand);
                if (r)
                    return r;
            }
        }
        sp += l;
        if (*sp == ':')
            sp++;
    }
    return NULL;
}

int abx_cmd_pattern_compile(const char *text, const char *search_path, abx_cmd_pattern *out, char *err,
                            size_t errlen)
{
    memset(out, 0, sizeof *out);
    /* patterns are split like commands, except that a standalone * is the wildcard */
    abx_argv words = {0};
    char *copy = abx_strdup(text);
    if (!copy) {
        snprintf(err, errlen, "out of memory");
        return -1;
    }
    for (char *save = NULL, *t = strtok_r(copy, " \t", &save); t; t = strtok_r(NULL, " \t", &save)) {
        if (strcmp(t, "*") != 0) {
            abx_argv one;
            if (abx_shell_split(t, &one, err, errlen) != 0 || one.n != 1) {
                if (one.n != 1 && err[0] == '\0')
                    snprintf(err, errlen, "pattern word '%s' is not one word", t);
                abx_argv_release(&one);
                abx_argv_release(&words);
                abx_free(copy);
                return -1;
            }
            abx_argv_push(&words, one.v[0], strlen(one.v[0]));
            abx_argv_release(&one);
        } else {
            abx_argv_push(&words, "*", 1);
        }
    }
    abx_free(copy);
    if (words.n == 0 || strcmp(words.v[0], "*") == 0) {
        snprintf(err, errlen, "command pattern '%s' must start with a program", text);
        abx_argv_release(&words);
        return -1;
    }
    out->program = abx_resolve_program(words.v[0], search_path);
    if (!out->program) {
        snprintf(err, errlen, "program '%s' of command pattern '%s' is not an executable on the search path",
                 words.v[0], text);
        abx_argv_release(&words);
        return -1;
    }
    out->text = abx_strdup(text);
    for (size_t i = 1; i < words.n; i++)
        abx_argv_push(&out->words, words.v[i], strlen(words.v[i]));
    abx_argv_release(&words);
    return 0;
}

void abx_cmd_pattern_release(abx_cmd_pattern *p)
{
    abx_free(p->text);
    abx_free(p->program);
    abx_argv_release(&p->words);
}

/* Words against arguments; '*' matches zero or more. Iterative with one backtrack
 * point per star (the classic wildcard algorithm over words). */
static bool match_words(char *const *pw, size_t np, const char *const *args, size_t na)
{
    size_t p = 0, a = 0, star_p = (size_t)-1, star_a = 0;
    while (a < na) {
        if (p < np && strcmp(pw[p], "*") == 0) {
            star_p = p++;
            star_a = a;
        } else if (p < np && strcmp(pw[p], args[a]) == 0) {
            p++;
            a++;
        } else if (star_p != (size_t)-1) {
            p = star_p + 1;
            a = ++star_a;
        } else {
            return false;
        }
    }
    while (p < np && strcmp(pw[p], "*") == 0)
        p++;
    return p == np;
}

bool abx_cmd_pattern_match(const abx_cmd_pattern *p, const char *const *argv, size_t argc)
{
    if (argc == 0 || strcmp(p->program, argv[0]) != 0)
        return false;
    return match_words(p->words.v, p->words.n, argv + 1, argc - 1);
}
