/* fuzz_agents.c — libFuzzer target for the agent CLIs' output mapping
 * (src/builtin/agents_cli.c): the bytes a codex or Claude Code process writes on stdout
 * become abx events there. The first byte picks the adapter (bit 0: codex or Claude Code);
 * the rest is split into lines, each parsed as JSON and mapped. Invariants: every event is
 * an object whose "type" is one of the schema's, and no line makes more than a bounded
 * number of events per content block. */
#include <jansson.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "builtin/agents.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

static const char *const types[] = {"session", "message", "tool_call", "tool_result", "file_change",
                                    "final", "error", "warning"};

static void check(const json_t *events)
{
    size_t i;
    json_t *e;
    json_array_foreach(events, i, e) {
        if (!json_is_object(e))
            abort();
        const char *t = json_string_value(json_object_get(e, "type"));
        bool known = false;
        for (size_t k = 0; t && k < sizeof types / sizeof types[0]; k++)
            known = known || strcmp(t, types[k]) == 0;
        if (!known)
            abort();
    }
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    if (size < 1)
        return 0;
    const agents_adapter *ad = &agents_adapters[data[0] & 1];
    const char *p = (const char *)data + 1, *end = (const char *)data + size;
    while (p < end) {
        const char *nl = memchr(p, '\n', (size_t)(end - p));
        size_t len = nl ? (size_t)(nl - p) : (size_t)(end - p);
        json_t *line = json_loadb(p, len, 0, NULL);
        if (json_is_object(line)) {
            json_t *out = json_array();
            agents_map_line(ad, line, out);
            check(out);
            json_decref(out);
        }
        json_decref(line);
        p += len + 1;
    }
    return 0;
}
