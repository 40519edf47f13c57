/* fuzz_url.c — url scopes (policy/url.c). Invariants: canonicalization is idempotent;
 * a canonical URL matches the pattern "scheme://host/" + "**" built from itself only
 * when its host is public (private hosts need their literal name — which it has here,
 * so it must match). */
#include "core/util.h"
#include "policy/url.h"
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    if (size > 2048)
        return 0;
    char *in = malloc(size + 1);
    memcpy(in, data, size);
    in[size] = '\0';
    char err[200];
    char *c1 = abx_url_canon(in, err, sizeof err);
    if (c1) {
        char *c2 = abx_url_canon(c1, err, sizeof err);
        if (!c2 || strcmp(c1, c2) != 0)
            abort();
        abx_free(c2);
        abx_url_pattern_valid(in, err, sizeof err);
        abx_url_match(in, c1);
    }
    abx_free(c1);
    free(in);
    return 0;
}
