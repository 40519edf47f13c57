/* fuzz_dyndef.c — libFuzzer target for the dynamic tool definition parser
 * (src/core/dyndef.c: abx_dyndef_parse). The input is JSON text, a tools.define body as a
 * model would write it. Invariants:
 *  - parse answers 0 with a definition or -1 with a non-empty message, never both;
 *  - an accepted definition has a portable name (abx_dyn_name_ok), id "dyn.<name>",
 *    at most ABX_DYN_PARAMS_MAX parameters, each with a registry type, effects without
 *    admin, absolute path roots, and a hash that is the SHA-256 of its canonical text;
 *  - the canonical text is a fixed point: parsed again it is accepted with the same hash
 *    (the canonical form does not depend on key order or on what was normalised away);
 *  - the synthetic op built from it passes the registry's argument schema builder.
 * Owns no state across inputs. */
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/dyndef.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

#define MAX_INPUT 65536

static void fail(const char *what, const char *detail)
{
    fprintf(stderr, "fuzz_dyndef: %s\n  %s\n", what, detail ? detail : "");
    abort();
}

static void check(const abx_dyndef *d)
{
    if (!abx_dyn_name_ok(d->name) || strncmp(d->id, "dyn.", 4) || strcmp(d->id + 4, d->name))
        fail("an accepted name is not portable", d->id);
    if (d->n_params > ABX_DYN_PARAMS_MAX || d->params[d->n_params].name)
        fail("the parameters are not terminated", d->canonical);
    for (size_t i = 0; i < d->n_params; i++) {
        abx_type t = d->params[i].type;
        if (t != ABX_T_STRING && t != ABX_T_INT && t != ABX_T_NUMBER && t != ABX_T_BOOL && t != ABX_T_LIST &&
            t != ABX_T_ENUM)
            fail("a parameter type outside the closed list", d->params[i].name);
    }
    if (d->effects & ABX_EFF_ADMIN || !d->effects)
        fail("effects admin or none", d->canonical);
    for (size_t i = 0; i < d->n_read; i++)
        if (d->read[i][0] != '/')
            fail("a relative root", d->read[i]);
    char hex[65];
    abx_sha256_hex(d->canonical, strlen(d->canonical), hex);
    if (strcmp(hex, d->hash))
        fail("the hash is not the canonical text's", d->canonical);
    abx_op op = {.def = NULL, .id = d->id, .n_params = d->n_params};
    abx_op_def def = {.id = d->id, .params = d->params, .effects = d->effects};
    op.def = &def;
    json_t *schema = abx_op_args_schema(&op);
    if (!schema)
        fail("no argument schema", d->canonical);
    json_decref(schema);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    if (size > MAX_INPUT)
        return 0;
    json_t *j = json_loadb((const char *)data, size, JSON_DECODE_ANY, NULL);
    if (!j)
        return 0;
    abx_dyndef *d = NULL;
    char err[300] = "";
    int rc = abx_dyndef_parse(j, &d, err, sizeof err);
    json_decref(j);
    if (rc == 0 && !d)
        fail("accepted without a definition", NULL);
    if (rc != 0 && (d || !err[0]))
        fail("refused without a message (or with a definition)", err);
    if (rc != 0)
        return 0;
    check(d);
    json_t *again = json_loads(d->canonical, 0, NULL);
    abx_dyndef *d2 = NULL;
    char err2[300] = "";
    if (!again || abx_dyndef_parse(again, &d2, err2, sizeof err2) != 0)
        fail("the canonical text is refused", err2);
    if (strcmp(d2->hash, d->hash) || strcmp(d2->canonical, d->canonical))
        fail("the canonical text is not a fixed point", d->canonical);
    json_decref(again);
    abx_dyndef_free(d2);
    abx_dyndef_free(d);
    return 0;
}
