/* verify.c — the ledger offline: verify every segment's chain (and the anchor), the
 * anchor itself, export as JSON lines, and the redacted projection of arguments that
 * every event's data goes through. */
#include "ledger/ledger_int.h"
#include "core/util.h"
#include <errno.h>
#include <fcntl.h>
#include <dirent.h>
#include <sys/stat.h>
#include <unistd.h>
#include <sqlite3.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* ---- offline tools ---- */

sqlite3 *abx__ledger_open_ro(const char *path, char *err, size_t errlen)
{
    sqlite3 *db = NULL;
    if (sqlite3_open_v2(path, &db, SQLITE_OPEN_READONLY, NULL) != SQLITE_OK) {
        snprintf(err, errlen, "cannot open %s: %s", path, db ? sqlite3_errmsg(db) : "?");
        sqlite3_close(db);
        return NULL;
    }
    return db;
}

/* Verify one segment, continuing the chain from prev/expect; remembers the anchored
 * event's hash when it passes by. 0 when intact, else 1 with why in err. */
static int verify_segment(const char *file, bool first, char prev[65], int64_t *expect, unsigned long long anchor_n,
                          char anchor_seen[65], char *err, size_t errlen)
{
    sqlite3 *db = abx__ledger_open_ro(file, err, errlen);
    if (!db)
        return 1;
    int64_t first_ordinal, first_group, created_ms;
    char seg_prev[65];
    bool present;
    abx__ledger_read_segment_row(db, &first_ordinal, seg_prev, &first_group, &created_ms, &present);
    int rc = 0;
    if (present && first_ordinal != *expect) {
        if (first)
            snprintf(err, errlen, "%s starts at event %lld: the segments holding events %lld to %lld are missing", file,
                     (long long)first_ordinal, (long long)*expect, (long long)first_ordinal - 1);
        else
            snprintf(err, errlen, "%s starts at event %lld but the previous segment ends at event %lld: a segment is "
                                  "missing or was altered", file, (long long)first_ordinal, (long long)*expect - 1);
        rc = 1;
    } else if (present && strcmp(seg_prev, prev) != 0) {
        snprintf(err, errlen, "%s does not chain to the previous segment: edited, deleted or reordered", file);
        rc = 1;
    } else if (!present && !first) {
        snprintf(err, errlen, "%s has no segment record but is not the first segment", file);
        rc = 1;
    }
    sqlite3_stmt *st;
    if (rc == 0 && sqlite3_prepare_v2(db, "SELECT ordinal, group_id, seq, kind, at, data, prev_hash, hash FROM"
                                          " action_events ORDER BY ordinal", -1, &st, NULL) != SQLITE_OK) {
        snprintf(err, errlen, "%s is not a ledger: %s", file, sqlite3_errmsg(db));
        rc = 1;
    } else if (rc == 0) {
        while (rc == 0 && sqlite3_step(st) == SQLITE_ROW) {
            int64_t ord = sqlite3_column_int64(st, 0);
            const char *kind = (const char *)sqlite3_column_text(st, 3),
                       *at = (const char *)sqlite3_column_text(st, 4),
                       *data = (const char *)sqlite3_column_text(st, 5),
                       *ph = (const char *)sqlite3_column_text(st, 6), *h = (const char *)sqlite3_column_text(st, 7);
            char want[65];
            abx__ledger_event_hash(prev, ord, (uint64_t)sqlite3_column_int64(st, 1), sqlite3_column_int64(st, 2),
                       kind ? kind : "", at ? at : "", data ? data : "", want);
            if (ord != *expect) {
                snprintf(err, errlen, "event %lld is missing (found %lld next): deleted or reordered",
                         (long long)*expect, (long long)ord);
                rc = 1;
            } else if (!ph || strcmp(ph, prev) != 0) {
                snprintf(err, errlen, "event %lld does not chain to event %lld: edited, deleted or reordered",
                         (long long)ord, (long long)ord - 1);
                rc = 1;
            } else if (!h || strcmp(h, want) != 0) {
                snprintf(err, errlen, "event %lld's hash does not match its content: edited", (long long)ord);
                rc = 1;
            }
            if (h)
                snprintf(prev, 65, "%s", h);
            if (h && (unsigned long long)ord == anchor_n)
                snprintf(anchor_seen, 65, "%s", h);
            *expect = ord + 1;
        }
        sqlite3_finalize(st);
    }
    /* the tables beside the chain must agree with it: every group row matches the
     * event that opened it ("received", or "finished" for a read recorded as one
     * event) (and every event's group exists), every attempt row is named by a chained
     * "started" event of its group, and back */
    static const char *const checks[][3] = {
        {"SELECT g.group_id FROM action_groups g LEFT JOIN action_events e ON e.group_id = g.group_id AND e.seq = 0"
         " AND e.kind IN ('received', 'finished') WHERE e.ordinal IS NULL LIMIT 1",
         "group", "has no chained \"received\" event: added or edited"},
        {"SELECT e.ordinal FROM action_events e LEFT JOIN action_groups g ON g.group_id = e.group_id"
         " WHERE g.group_id IS NULL AND e.group_id >= ?1 LIMIT 1", /* older groups live in older segments */
         "event", "belongs to a group that is gone: a group row was deleted"},
        {"SELECT g.group_id FROM action_groups g JOIN action_events e ON e.group_id = g.group_id AND e.seq = 0"
         " WHERE json_extract(e.data, '$.request_id') IS NOT g.request_id"
         " OR json_extract(e.data, '$.principal') IS NOT g.principal"
         " OR json_extract(e.data, '$.op') IS NOT g.op"
         " OR (json_type(e.data, '$.door') IS NOT NULL AND json_extract(e.data, '$.door') IS NOT g.door)"
         " OR (json_type(e.data, '$.client') IS NOT NULL AND json_extract(e.data, '$.client') IS NOT g.client)"
         " OR json_extract(e.data, '$.batch_group') IS NOT g.batch_group"
         " OR e.at IS NOT g.created_at LIMIT 1",
         "group", "differs from the event that recorded it: edited"},
        {"SELECT a.attempt_id FROM execution_attempts a LEFT JOIN action_events e ON e.kind = 'started'"
         " AND json_extract(e.data, '$.attempt_id') = a.attempt_id AND e.group_id = a.group_id"
         " WHERE e.ordinal IS NULL LIMIT 1",
         "attempt", "is not named by a chained \"started\" event: added or edited"},
        {"SELECT e.ordinal FROM action_events e LEFT JOIN execution_attempts a"
         " ON a.attempt_id = json_extract(e.data, '$.attempt_id') AND a.group_id = e.group_id"
         " WHERE e.kind = 'started' AND json_type(e.data, '$.attempt_id') IS NOT NULL AND a.attempt_id IS NULL LIMIT 1",
         "event", "names an attempt that is gone: an attempt row was deleted or edited"},
    };
    for (size_t k = 0; rc == 0 && k < sizeof checks / sizeof checks[0]; k++) {
        if (sqlite3_prepare_v2(db, checks[k][0], -1, &st, NULL) != SQLITE_OK) {
            snprintf(err, errlen, "cannot check the ledger: %s", sqlite3_errmsg(db));
            rc = 1;
            break;
        }
        if (strstr(checks[k][0], "?1"))
            sqlite3_bind_int64(st, 1, first_group);
        if (sqlite3_step(st) == SQLITE_ROW) {
            snprintf(err, errlen, "%s %lld %s", checks[k][1], (long long)sqlite3_column_int64(st, 0), checks[k][2]);
            rc = 1;
        }
        sqlite3_finalize(st);
    }
    sqlite3_close(db);
    return rc;
}

int abx_ledger_verify(const char *path, const char *anchor, char *err, size_t errlen, uint64_t *events)
{
    *events = 0;
    char ah[65] = "", seen[65] = "";
    unsigned long long count = 0;
    if (anchor && sscanf(anchor, "%64[0-9a-f]:%llu", ah, &count) != 2) {
        snprintf(err, errlen, "an anchor reads HASH:COUNT");
        return 1;
    }
    if (access(path, F_OK) != 0) {
        snprintf(err, errlen, "cannot open %s: %s", path, strerror(errno));
        return 1;
    }
    size_t n;
    char **segs = abx__ledger_list_segments(path, &n);
    if (!segs) {
        snprintf(err, errlen, "out of memory");
        return 1;
    }
    char prev[65];
    snprintf(prev, sizeof prev, "%s", abx__ledger_genesis);
    int64_t expect = 1;
    int rc = 0;
    for (size_t i = 0; rc == 0 && i < n; i++)
        rc = verify_segment(segs[i], i == 0, prev, &expect, anchor ? count : 0, seen, err, errlen);
    abx__ledger_free_list(segs, n);
    *events = (uint64_t)(expect - 1);
    if (rc == 0 && anchor) {
        if (count > *events) {
            snprintf(err, errlen, "the ledger has %llu events; the anchor says %llu: the tail was truncated",
                     (unsigned long long)*events, count);
            rc = 1;
        } else if (count && strcmp(seen, ah) != 0) {
            snprintf(err, errlen, "event %llu does not have the anchored hash: history was rewritten", count);
            rc = 1;
        }
    }
    return rc;
}

int abx_ledger_anchor(const char *path, char *out, size_t outlen)
{
    char err[256];
    sqlite3 *db = abx__ledger_open_ro(path, err, sizeof err);
    if (!db)
        return -1;
    sqlite3_stmt *st;
    int rc = -1;
    if (sqlite3_prepare_v2(db, "SELECT hash, ordinal FROM action_events ORDER BY ordinal DESC LIMIT 1", -1, &st,
                           NULL) == SQLITE_OK) {
        if (sqlite3_step(st) == SQLITE_ROW) {
            snprintf(out, outlen, "%s:%lld", (const char *)sqlite3_column_text(st, 0),
                     (long long)sqlite3_column_int64(st, 1));
        } else { /* an empty live segment: the chain ends where it starts */
            int64_t first_ordinal, first_group, created_ms;
            char prev[65];
            bool present;
            abx__ledger_read_segment_row(db, &first_ordinal, prev, &first_group, &created_ms, &present);
            snprintf(out, outlen, "%s:%lld", prev, (long long)first_ordinal - 1);
        }
        rc = 0;
        sqlite3_finalize(st);
    }
    sqlite3_close(db);
    return rc;
}

int abx_ledger_export(const char *path, void *file, char *err, size_t errlen)
{
    FILE *f = file;
    if (access(path, F_OK) != 0) {
        snprintf(err, errlen, "cannot open %s: %s", path, strerror(errno));
        return -1;
    }
    size_t n;
    char **segs = abx__ledger_list_segments(path, &n);
    if (!segs) {
        snprintf(err, errlen, "out of memory");
        return -1;
    }
    int rc = 0;
    for (size_t i = 0; rc == 0 && i < n; i++) {
        sqlite3 *db = abx__ledger_open_ro(segs[i], err, errlen);
        sqlite3_stmt *st;
        if (!db) {
            rc = -1;
            break;
        }
        /* LEFT JOIN: a later event of a group recorded in an older segment */
        if (sqlite3_prepare_v2(db,
                               "SELECT e.ordinal, e.group_id, e.kind, e.at, e.data, g.principal, g.op, g.request_id,"
                               " e.hash FROM action_events e LEFT JOIN action_groups g ON g.group_id = e.group_id"
                               " ORDER BY e.ordinal",
                               -1, &st, NULL) != SQLITE_OK) {
            snprintf(err, errlen, "%s is not a ledger: %s", segs[i], sqlite3_errmsg(db));
            sqlite3_close(db);
            rc = -1;
            break;
        }
        while (sqlite3_step(st) == SQLITE_ROW) {
            json_t *row = json_pack("{s:I, s:I, s:s, s:s, s:o, s:s?, s:s?, s:s?, s:s}", "ordinal",
                                    (json_int_t)sqlite3_column_int64(st, 0), "group_id",
                                    (json_int_t)sqlite3_column_int64(st, 1), "kind",
                                    (const char *)sqlite3_column_text(st, 2), "at",
                                    (const char *)sqlite3_column_text(st, 3), "data",
                                    json_loads((const char *)sqlite3_column_text(st, 4), 0, NULL) ?: json_null(),
                                    "principal", (const char *)sqlite3_column_text(st, 5), "op",
                                    (const char *)sqlite3_column_text(st, 6), "request_id",
                                    (const char *)sqlite3_column_text(st, 7), "hash",
                                    (const char *)sqlite3_column_text(st, 8));
            char *line = json_dumps(row, JSON_COMPACT | JSON_SORT_KEYS);
            if (line)
                fprintf(f, "%s\n", line);
            free(line);
            json_decref(row);
        }
        sqlite3_finalize(st);
        sqlite3_close(db);
    }
    abx__ledger_free_list(segs, n);
    return rc;
}

/* ---- redaction ---- */

/* secrets match anywhere in the name (access_token, db_password); contents exactly */
static bool name_is(const char *name, const char *const *list, bool substring)
{
    char low[128];
    size_t n = 0;
    for (; name[n] && n < sizeof low - 1; n++)
        low[n] = (char)(name[n] >= 'A' && name[n] <= 'Z' ? name[n] - 'A' + 'a' : name[n]);
    low[n] = '\0';
    for (; *list; list++)
        if (strcmp(low, *list) == 0 || (substring && strstr(low, *list)))
            return true;
    return false;
}

static json_t *digest_of(const json_t *v)
{
    char *text = json_is_string(v) ? NULL : json_dumps(v, JSON_COMPACT | JSON_ENCODE_ANY);
    const char *p = json_is_string(v) ? json_string_value(v) : text;
    size_t n = json_is_string(v) ? json_string_length(v) : (text ? strlen(text) : 0);
    char hex[65];
    abx_sha256_hex(p ? p : "", n, hex);
    free(text);
    return json_pack("{s:s, s:I}", "sha256", hex, "size", (json_int_t)n);
}

/* What abx_ledger_redact does with one member: KEEP copies it as it is. */
enum { KEEP, SECRET, ENV, NESTED, CONTENTS };
static const char *const secret_names[] = {"token",         "password", "secret", "credential",
                                           "authorization", "api_key",  "ticket", NULL};
static const char *const contents_names[] = {"content", "data", "stdin", "old", "new", "code", NULL};

/* Not one of the names below: redact_rule keeps such a member whatever its value. */
static bool name_kept(const char *k)
{
    return !name_is(k, secret_names, true) && strcmp(k, "env") != 0 && strcmp(k, "args") != 0 &&
           !name_is(k, contents_names, false);
}

static int redact_rule(const char *k, const json_t *v)
{
    if (name_is(k, secret_names, true))
        return SECRET;
    if (strcmp(k, "env") == 0 && json_is_object(v)) /* names stay, values do not */
        return ENV;
    if (strcmp(k, "args") == 0 && json_is_object(v)) /* another op's arguments (explain, batch) */
        return NESTED;
    if (name_is(k, contents_names, false) && (json_is_string(v) || json_is_object(v) || json_is_array(v)))
        return CONTENTS;
    return KEEP; /* paths, argv, flags: what an auditor needs */
}

/* Names that redact_rule keeps whatever their value (neither a secret nor "env",
 * "args" or a contents name), remembered per thread: every call's arguments are
 * checked, and they are the same few names ("path", "offset") over and over. */
#define KEEP_CACHE 32
#define KEEP_NAME 24
static _Thread_local char keep_names[KEEP_CACHE][KEEP_NAME];

static bool name_always_kept(const char *k)
{
    size_t n = strlen(k);
    if (n == 0 || n >= KEEP_NAME)
        return false;
    uint32_t h = 2166136261u;
    for (size_t i = 0; i < n; i++)
        h = (h ^ (unsigned char)k[i]) * 16777619u;
    char *slot = keep_names[h % KEEP_CACHE];
    if (memcmp(slot, k, n + 1) == 0)
        return true;
    if (!name_kept(k))
        return false;
    memcpy(slot, k, n + 1);
    return true;
}

bool abx_ledger_redact_keeps(const json_t *args)
{
    const char *k;
    json_t *v;
    if (!json_is_object(args))
        return false;
    json_object_foreach((json_t *)args, k, v)
    {
        if (!name_always_kept(k) && redact_rule(k, v) != KEEP)
            return false;
    }
    return true;
}

json_t *abx_ledger_redact(const json_t *args)
{
    json_t *out = json_object();
    const char *k;
    json_t *v;
    json_object_foreach((json_t *)args, k, v)
    {
        switch (redact_rule(k, v)) {
        case SECRET:
        case CONTENTS: json_object_set_new(out, k, digest_of(v)); break;
        case ENV: {
            json_t *env = json_object();
            const char *ek;
            json_t *ev;
            json_object_foreach(v, ek, ev) json_object_set_new(env, ek, digest_of(ev));
            json_object_set_new(out, k, env);
            break;
        }
        case NESTED: json_object_set_new(out, k, abx_ledger_redact(v)); break;
        default: json_object_set(out, k, v);
        }
    }
    return out;
}

const char *abx_ledger_path(const abx_ledger *l) { return l->path; }
