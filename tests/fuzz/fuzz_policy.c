/* fuzz_policy.c — config loading end to end: YAML text → policy compile on the
 * built-in registry → a few decisions. Must never crash, leak or hang, whatever the
 * file says (configs come from operators, but a parser is a parser). */
#include "core/yaml.h"
#include "policy/policy.h"
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

static abx_registry *reg;

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    if (size > 16384)
        return 0;
    if (!reg) {
        reg = abx_registry_new(abx_registry_default());
        abx_registry_freeze(reg);
    }
    char err[300];
    int line;
    abx_linemap *lines = NULL;
    json_t *root = abx_yaml_load((const char *)data, size, &lines, err, sizeof err, &line);
    if (root && json_is_object(root)) {
        abx_policy_input in = {.reg = reg, .auth = json_object_get(root, "auth"),
                               .policy = json_object_get(root, "policy"), .egress = json_object_get(root, "egress"),
                               .lines = lines, .workspace = "/tmp",
                               .default_token_sha256_hex =
                                   "0000000000000000000000000000000000000000000000000000000000000000"};
        abx_diags d = {0};
        abx_policy *p = abx_policy_compile(&in, &d);
        if (p) {
            const abx_op *op = abx_registry_get(reg, "files.read");
            json_t *args = json_pack("{s:s}", "path", "/tmp/x");
            for (int slot = 0; slot <= (int)p->n_principals; slot++) {
                abx_decision dec;
                abx_decide(p, slot, op, abx_registry_index_of(reg, op), args, &dec, NULL);
                abx_decision_release(&dec);
            }
            json_decref(args);
            abx_policy_unref(p);
        }
        abx_diags_release(&d);
    }
    json_decref(root);
    abx_linemap_free(lines);
    return 0;
}
