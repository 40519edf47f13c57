/* secrets.h — the config's `secrets:` (issue 17): NAME: {env: VAR} | {file: PATH}, read
 * when the config is loaded. The values live only here (never in the config's JSON, the
 * ledger, logs, /config or explain output); the egress proxy puts them into the headers
 * its inject rules name, written as templates: "Bearer ${secret:NAME}". */
#ifndef ABX_CONFIG_SECRETS_H
#define ABX_CONFIG_SECRETS_H

#include <jansson.h>
#include <stdbool.h>
#include <stddef.h>

#define ABX_SECRET_NAME_MAX 64
#define ABX_SECRET_VALUE_MAX 8192

typedef struct abx_secret {
    char *name;
    char *value; /* wiped when freed */
} abx_secret;

typedef struct abx_secrets {
    abx_secret *v;
    size_t n;
} abx_secrets;

/* Read every secret of the `secrets` map. 0, or -1 with *code (config.invalid, or
 * config.secret_unavailable) and a message naming the secret and where it was looked
 * for — never its value. */
int abx_secrets_load(const json_t *map, abx_secrets *out, const char **code, char *err, size_t errlen);
void abx_secrets_free(abx_secrets *s);
const char *abx_secret_value(const abx_secrets *s, const char *name);

/* ---- templates: text with ${secret:NAME} references ($$ is a literal $) ----
 * One step of the parser: from tpl + *pos, the literal text before the next reference is
 * [*pos, *pos + *lit) and, when it returns 1, name holds the reference's name; 0 at the
 * end (the rest is literal); -1 on a malformed reference. *pos moves past both. */
int abx_secret_tpl_next(const char *tpl, size_t *pos, size_t *lit, char name[ABX_SECRET_NAME_MAX + 1]);
/* Expand into a new string; each secret used is passed to used(value, ctx) (may be NULL).
 * NULL with a message on a malformed template or an unknown secret. */
char *abx_secret_expand(const char *tpl, const abx_secrets *s, void (*used)(const char *value, void *ctx), void *ctx,
                        char *err, size_t errlen);

#endif
