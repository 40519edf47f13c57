/* command.h — command scopes: POSIX-shell word splitting without expansion, refusal of
 * shell syntax, program resolution through a search path, and argv patterns.
 * Pure functions plus stat()s of candidate executables; nothing is executed here. */
#ifndef ABX_POLICY_COMMAND_H
#define ABX_POLICY_COMMAND_H

#include <stdbool.h>
#include <stddef.h>

typedef struct abx_argv {
    char **v;      /* owned, NULL-terminated */
    size_t n;
} abx_argv;

void abx_argv_release(abx_argv *a);
bool abx_argv_push(abx_argv *a, const char *s, size_t len);

/* Split a command line into words the way a POSIX shell does, without any expansion:
 * blanks separate words; '...' is literal; "..." keeps \" \\ \$ \` escapes; a backslash
 * outside quotes escapes the next character. Shell syntax is refused unless allowed:
 * unquoted | ; & > < ( ) { } * ? [ ] ~ (leading) # (leading) and newline/CR, and $ or `
 * anywhere outside single quotes. Returns 0, or -1 with a message naming the offending
 * character (and its offset) in err. An empty command is refused too. */
int abx_shell_split(const char *cmd, abx_argv *out, char *err, size_t errlen);

/* Resolve a program name to an absolute, canonical path of an executable regular file:
 * names containing '/' must be absolute; others are searched in `search_path`
 * ("/usr/local/bin:/usr/bin:/bin" when NULL). Returns a malloc'd path or NULL. */
char *abx_resolve_program(const char *name, const char *search_path);

/* A compiled argv pattern: "git status" (exact), "git *" (git with zero or more
 * arguments), "/usr/bin/make -C * all". A standalone * word matches zero or more
 * arguments; every other word matches exactly. The program word is resolved at
 * compile time (an unresolvable program is an error). */
typedef struct abx_cmd_pattern {
    char *text;       /* as written */
    char *program;    /* resolved absolute path */
    abx_argv words;   /* the argument words after the program */
} abx_cmd_pattern;

int abx_cmd_pattern_compile(const char *text, const char *search_path, abx_cmd_pattern *out, char *err,
                            size_t errlen);
void abx_cmd_pattern_release(abx_cmd_pattern *p);
/* argv[0] must already be resolved to an absolute path. */
bool abx_cmd_pattern_match(const abx_cmd_pattern *p, const char *const *argv, size_t argc);

#endif
