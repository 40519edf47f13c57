/* fuzz_yaml.c — libFuzzer target for src/core/yaml.c: arbitrary bytes go to
 * abx_yaml_load; a value that comes back is dumped with json_dumps, re-read by
 * jansson and compared, and walked to check that every node and every key has a
 * line > 0. Owns no state across inputs; must never leak, and must free
 * everything it is handed. Seeds: tests/fuzz/corpus/fuzz_yaml/. */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/yaml.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

static void check(int ok, const char *what)
{
    if (!ok) {
        fprintf(stderr, "fuzz_yaml: invariant broken: %s\n", what);
        abort();
    }
}

/* Every node has a line; every key of every object has a line. Depth is bounded
 * by the loader (64), so recursion is safe. */
static void walk(const abx_linemap *m, json_t *node, int depth)
{
    check(depth <= 64, "nesting deeper than 64 came back");
    check(abx_linemap_line(m, node) > 0, "node without a line");
    if (json_is_object(node)) {
        const char *key;
        json_t *child;
        json_object_foreach(node, key, child) {
            check(abx_linemap_key_line(m, node, key) > 0, "key without a line");
            walk(m, child, depth + 1);
        }
    } else if (json_is_array(node)) {
        size_t i;
        json_t *child;
        json_array_foreach(node, i, child) {
            walk(m, child, depth + 1);
        }
    }
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    char err[256];
    int line = -1;
    abx_linemap *lines = NULL;
    json_t *v = abx_yaml_load((const char *)data, size, &lines, err, sizeof err, &line);

    /* the same input without the optional outputs must give the same answer */
    json_t *bare = abx_yaml_load((const char *)data, size, NULL, NULL, 0, NULL);
    check((v == NULL) == (bare == NULL), "result depends on the optional outputs");

    if (!v) {
        check(lines == NULL, "line map returned on failure");
        check(memchr(err, '\0', sizeof err) != NULL, "error not terminated");
        check(err[0] != '\0', "failure without a message");
        check(line >= 0 && (size_t)line <= size + 2, "error line out of range");
        return 0;
    }
    check(lines != NULL, "no line map on success");
    check(line == 0, "error line set on success");
    check(json_equal(v, bare), "result depends on the optional outputs");
    json_decref(bare);

    char *text = json_dumps(v, JSON_ENCODE_ANY | JSON_COMPACT);
    check(text != NULL, "json_dumps failed");
    json_error_t jerr;
    json_t *again = json_loads(text, JSON_DECODE_ANY, &jerr);
    check(again != NULL, "dumped JSON does not load");
    check(json_equal(v, again), "dumped JSON differs");
    json_decref(again);
    free(text);

    walk(lines, v, 0);

    json_decref(v);
    abx_linemap_free(lines);
    return 0;
}
