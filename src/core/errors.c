/* errors.c — lookups over the one error table (include/abx/errors.def).
 * Must never define a code that is not in the table. Also the one errno → code map
 * (abx_err_from_errno) that the file and process handlers share, and the one JSON error
 * envelope (abx_error_json) that every door answers with. */
#include "core/core.h"
#include <errno.h>
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

json_t *abx_error_json(abx_err e, const char *message, const json_t *details)
{
    json_t *doc = json_pack("{s:{s:s, s:s}}", "error", "code", abx_err_code(e), "message",
                            message ? message : abx_err_meaning(e));
    if (doc && details)
        json_object_set(json_object_get(doc, "error"), "details", (json_t *)details);
    return doc;
}

int abx_err_by_code(const char *code)
{
    for (int i = 1; i < ABX_E__COUNT; i++)
        if (strcmp(table[i].code, code) == 0)
            return i;
    return -1;
}

abx_err abx_err_from_errno(int err)
{
    switch (err) {
    case ENOENT:
    case ENOTDIR:
        return ABX_E_FILES_NOT_FOUND;
    case EXDEV:
    case ELOOP:
    case ABX_EIDENT:
        return ABX_E_POLICY_PATH_DENIED;
    case EACCES:
    case EPERM:
        return ABX_E_FILES_ACCESS;
    case ENAMETOOLONG:
        return ABX_E_ARGS_INVALID;
    case ENXIO: /* open() of a Unix socket, or of a device without a driver */
        return ABX_E_FILES_NOT_REGULAR;
    case ENOSPC:
    case EDQUOT:
        return ABX_E_FILES_NO_SPACE;
    case EMFILE:
    case ENFILE:
    case ENOMEM:
        return ABX_E_SERVER_UNAVAILABLE;
    default:
        return ABX_E_FILES_IO;
    }
}
