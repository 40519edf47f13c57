/* errors.c — lookups over the one error table (include/abx/errors.def).
 * Must never define a code that is not in the table. */
#include <abx/abx.h>
#include <string.h>

static const struct {
    const char *code;
    int status;
    const char *meaning;
} table[] = {
    [ABX_OK] = {"ok", 200, "Success"},
#define ABX_ERR(name, code, status, meaning) [ABX_E_##name] = {code, status, meaning},
#include <abx/errors.def>
#undef ABX_ERR
};

const char *abx_err_code(abx_err e) { return (unsigned)e < ABX_E__COUNT ? table[e].code : "server.internal"; }
int abx_err_status(abx_err e) { return (unsigned)e < ABX_E__COUNT ? table[e].status : 500; }
const char *abx_err_meaning(abx_err e) { return (unsigned)e < ABX_E__COUNT ? table[e].meaning : ""; }

int abx_err_by_code(const char *code)
{
    for (int i = 1; i < ABX_E__COUNT; i++)
        if (strcmp(table[i].code, code) == 0)
            return i;
    return -1;
}
