/* yaml.h — YAML (and JSON, its subset) text → jansson value, keeping the line of
 * every node so config errors can say file:line. Knows nothing of abx's config keys.
 * Refuses what an operator never means and an attacker loves: aliases/anchors
 * (billion laughs), several documents, duplicate keys, non-string keys, nesting
 * deeper than 64, input over 4 MiB. */
#ifndef ABX_CORE_YAML_H
#define ABX_CORE_YAML_H

#include <jansson.h>
#include <stdbool.h>
#include <stddef.h>

typedef struct abx_linemap abx_linemap;

/* Parse text. Plain scalars are typed as YAML 1.2's core schema does: null/~/empty →
 * null, true/false (also True/TRUE/False/FALSE) → boolean, decimal integers (and
 * 0x.., 0o..) → integer, decimals/exponents/.inf/.nan → real; anything quoted → string;
 * everything else → string. An empty document is an empty object.
 * On success returns the value (owned) and *lines (owned, free with abx_linemap_free;
 * may be NULL if lines is NULL). On failure returns NULL, writes a message to err
 * and the 1-based line to *err_line (0 when unknown). */
json_t *abx_yaml_load(const char *text, size_t len, abx_linemap **lines, char *err, size_t errlen, int *err_line);
/* 1-based line where a node starts; 0 when unknown (the node did not come from the parse). */
int abx_linemap_line(const abx_linemap *m, const json_t *node);
/* 1-based line of a key in a mapping; 0 when unknown. */
int abx_linemap_key_line(const abx_linemap *m, const json_t *object, const char *key);
void abx_linemap_free(abx_linemap *m);

/* For the parser (yaml.c) only: an empty map, and record a node's line (key NULL) or the
 * line of key in mapping node. false on OOM. */
abx_linemap *abx__linemap_new(void);
bool abx__linemap_put(abx_linemap *m, const json_t *node, const char *key, int line);

#endif
