/* diag.c — the diagnostics list (diag.h). */
#include "core/diag.h"
#include "core/util.h"
#include <stdarg.h>
#include <stdio.h>
#include <string.h>

void abx_diag_add(abx_diags *d, const char *level, const char *code, int line, const char *fmt, ...)
{
    if (!d)
        return;
    if (d->n == d->cap) {
        size_t cap = d->cap ? d->cap * 2 : 8;
        abx_diag *n = abx_realloc(d->items, cap * sizeof *n);
        if (!n)
            return;
        d->items = n;
        d->cap = cap;
    }
    abx_diag *x = &d->items[d->n++];
    snprintf(x->level, sizeof x->level, "%s", level);
    snprintf(x->code, sizeof x->code, "%s", code);
    x->line = line;
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(x->message, sizeof x->message, fmt, ap);
    va_end(ap);
    if (strcmp(level, "error") == 0)
        d->errors++;
}

void abx_diags_release(abx_diags *d)
{
    abx_free(d->items);
    memset(d, 0, sizeof *d);
}
