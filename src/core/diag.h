/* diag.h — diagnostics: a growing list of {level, code, line, message} that the config
 * loader, the policy compiler and the ext loaders append to and the server, the CLI
 * and system.reload print. Knows nothing of what is diagnosed; never logs or aborts.
 * Adding under memory pressure drops the item rather than failing the caller. */
#ifndef ABX_CORE_DIAG_H
#define ABX_CORE_DIAG_H

#include <stddef.h>

typedef struct abx_diag {
    char level[8];      /* "error" | "warning" */
    char code[40];
    int line;
    char message[512];
} abx_diag;

typedef struct abx_diags {
    abx_diag *items;
    size_t n, cap;
    size_t errors;
} abx_diags;

/* d may be NULL (nothing is kept). level "error" counts toward d->errors. */
void abx_diag_add(abx_diags *d, const char *level, const char *code, int line, const char *fmt, ...)
    __attribute__((format(printf, 5, 6)));
void abx_diags_release(abx_diags *d);

#endif
