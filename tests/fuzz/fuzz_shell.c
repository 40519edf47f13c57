/* fuzz_shell.c — command splitting (policy/command.c). Invariant: when a command is
 * accepted, quoting each word in single quotes and splitting again gives the same
 * argv back (the splitter and a quoting round trip agree), and no word is NULL. */
#include "core/util.h"
#include "policy/command.h"
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    if (size > 4096)
        return 0;
    char *cmd = malloc(size + 1);
    memcpy(cmd, data, size);
    cmd[size] = '\0';
    abx_argv a;
    char err[200];
    if (abx_shell_split(cmd, &a, err, sizeof err) == 0) {
        if (a.n == 0 || a.v[a.n] != NULL)
            abort();
        abx_buf q;
        abx_buf_init(&q, 0);
        for (size_t i = 0; i < a.n; i++) {
            if (!a.v[i])
                abort();
            abx_buf_puts(&q, i ? " '" : "'");
            for (const char *c = a.v[i]; *c; c++) {
                if (*c == '\'')
                    abx_buf_puts(&q, "'\\''");
                else
                    abx_buf_putc(&q, *c);
            }
            abx_buf_putc(&q, '\'');
        }
        abx_argv b;
        if (abx_shell_split(q.data ? q.data : "", &b, err, sizeof err) != 0 || b.n != a.n)
            abort();
        for (size_t i = 0; i < a.n; i++)
            if (strcmp(a.v[i], b.v[i]) != 0)
                abort();
        abx_argv_release(&b);
        abx_buf_release(&q);
        abx_argv_release(&a);
    }
    free(cmd);
    return 0;
}
