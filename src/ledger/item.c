/* item.c — what a call's record is on its way to the writer thread: an item, its
 * strings and its events serialized on the caller's thread (ledger.c writes them). */
#include "ledger/ledger_int.h"
#include "core/jsonout.h"
#include "core/util.h"
#include <stdlib.h>
#include <string.h>

void abx__ledger_item_free(item *it)
{
    if (it->packed) {
        for (size_t i = 0; i < it->n_ev; i++)
            free(it->ev_data[i]);
        abx_free(it);
        return;
    }
    abx_free(it->request_id);
    abx_free(it->principal);
    abx_free(it->op);
    abx_free(it->door);
    abx_free(it->client);
    abx_free(it->at);
    for (size_t i = 0; i < it->n_ev; i++) {
        abx_free(it->ev_kind[i]);
        abx_free(it->ev_at[i]);
        free(it->ev_data[i]);
    }
    abx_free(it->ev_kind);
    abx_free(it->ev_at);
    abx_free(it->ev_data);
    abx_free(it);
}

/* Serialize events ({"kind", "at", ...data}) on the caller's thread. */
static bool item_events(item *it, const json_t *events)
{
    size_t n = json_array_size(events);
    it->ev_kind = abx_calloc(n + 1, sizeof(char *));
    it->ev_at = abx_calloc(n + 1, sizeof(char *));
    it->ev_data = abx_calloc(n + 1, sizeof(char *));
    if (!it->ev_kind || !it->ev_at || !it->ev_data)
        return false;
    for (size_t i = 0; i < n; i++) {
        const json_t *ev = json_array_get(events, i);
        /* the event without kind and at, as json_dumps(COMPACT | SORT_KEYS) of such a copy */
        static const char *const outside[] = {"kind", "at", NULL};
        it->ev_kind[i] = abx_strdup(json_string_value(json_object_get(ev, "kind")) ?: "?");
        it->ev_at[i] = abx_strdup(json_string_value(json_object_get(ev, "at")) ?: it->at);
        it->ev_data[i] = json_is_object(ev) ? abx_json_compact_except(ev, true, outside, NULL) : strdup("{}");
        it->n_ev++;
        if (!it->ev_kind[i] || !it->ev_at[i] || !it->ev_data[i])
            return false;
    }
    return true;
}

/* Bump allocation inside a packed item's block (sized exactly by record_packed). */
static char *pack_str(char **cur, const char *s)
{
    size_t n = strlen(s) + 1;
    char *d = memcpy(*cur, s, n);
    *cur += n;
    return d;
}

/* abx_ledger_record for events the caller serialized: the item, its strings and its
 * event arrays in one block. Every call records one (most calls: one event), and the
 * writer thread frees it: one cross-thread free instead of a dozen. */
static uint64_t record_packed(abx_ledger *l, const abx_ledger_call *c)
{
    char at[32];
    abx_iso8601(abx_wall_ms(), at);
    const char *rid = c->request_id ? c->request_id : "-", *door = c->door ? c->door : "-";
    size_t n = c->n_raw, strs = strlen(rid) + strlen(door) + strlen(at) + 3;
    bool whole = true; /* an event its caller could not serialize fails the record */
    for (size_t i = 0; i < n; i++)
        whole = whole && c->raw[i].kind && c->raw[i].data;
    strs += (c->principal ? strlen(c->principal) + 1 : 0) + (c->op ? strlen(c->op) + 1 : 0) +
            (c->client ? strlen(c->client) + 1 : 0);
    for (size_t i = 0; whole && i < n; i++)
        strs += strlen(c->raw[i].kind) + 1 + (c->raw[i].at ? strlen(c->raw[i].at) + 1 : 0);
    size_t arrays = 3 * (n + 1) * sizeof(char *);
    item *it = whole ? abx_calloc(1, sizeof *it + arrays + strs) : NULL;
    if (!it) {
        for (size_t i = 0; i < n; i++) {
            free(c->raw[i].data);
            c->raw[i].data = NULL;
        }
        return 0;
    }
    it->packed = true;
    char **arr = (char **)(void *)(it + 1);
    it->ev_kind = arr;
    it->ev_at = arr + (n + 1);
    it->ev_data = arr + 2 * (n + 1);
    char *cur = (char *)(arr + 3 * (n + 1));
    it->request_id = pack_str(&cur, rid);
    it->principal = c->principal ? pack_str(&cur, c->principal) : NULL;
    it->op = c->op ? pack_str(&cur, c->op) : NULL;
    it->door = pack_str(&cur, door);
    it->client = c->client ? pack_str(&cur, c->client) : NULL;
    it->at = pack_str(&cur, at);
    for (size_t i = 0; i < n; i++) {
        it->ev_kind[i] = pack_str(&cur, c->raw[i].kind);
        it->ev_at[i] = c->raw[i].at ? pack_str(&cur, c->raw[i].at) : it->at;
        it->ev_data[i] = c->raw[i].data;
        c->raw[i].data = NULL;
        it->n_ev++;
    }
    it->attempt = c->attempt;
    it->batch_group = c->batch_group;
    it->durable = c->durable;
    return abx__ledger_enqueue(l, it);
}

uint64_t abx_ledger_record(abx_ledger *l, const abx_ledger_call *c)
{
    if (c->raw)
        return record_packed(l, c);
    item *it = abx_calloc(1, sizeof *it);
    if (!it)
        return 0;
    char at[32];
    abx_iso8601(abx_wall_ms(), at);
    it->request_id = abx_strdup(c->request_id ? c->request_id : "-");
    it->principal = c->principal ? abx_strdup(c->principal) : NULL;
    it->op = c->op ? abx_strdup(c->op) : NULL;
    it->door = abx_strdup(c->door ? c->door : "-");
    it->client = c->client ? abx_strdup(c->client) : NULL;
    it->at = abx_strdup(at);
    if (!item_events(it, c->events)) {
        abx__ledger_item_free(it);
        return 0;
    }
    it->attempt = c->attempt;
    it->batch_group = c->batch_group;
    it->durable = c->durable;
    return abx__ledger_enqueue(l, it);
}

int abx_ledger_append(abx_ledger *l, uint64_t group_id, json_t *events, bool durable)
{
    item *it = abx_calloc(1, sizeof *it);
    if (!it)
        return -1;
    char at[32];
    abx_iso8601(abx_wall_ms(), at);
    it->group_id = group_id;
    it->at = abx_strdup(at);
    if (!item_events(it, events)) {
        abx__ledger_item_free(it);
        return -1;
    }
    it->durable = durable;
    return abx__ledger_enqueue(l, it) ? 0 : -1;
}

