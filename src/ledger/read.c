/* read.c — reading the ledger: a principal's timeline, one group with its events
 * (through the writer's connection, under its lock), and the command line's reads of a
 * ledger file (abx ledger tail/show). */
#include "ledger/ledger_int.h"
#include "core/util.h"
#include <errno.h>
#include <fcntl.h>
#include <dirent.h>
#include <sys/stat.h>
#include <unistd.h>
#include <sqlite3.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* ---- reads ---- */

static json_t *bounded_data(const char *text)
{
    size_t n = strlen(text);
    if (n <= FIELD_MAX) {
        json_t *j = json_loads(text, 0, NULL);
        return j ? j : json_string(text);
    }
    /* field-bounded: a long record is shown cut, and says so (not history pagination) */
    return json_pack("{s:b, s:I, s:s%}", "truncated", 1, "size", (json_int_t)n, "preview", text, (size_t)512);
}

static json_t *event_row(sqlite3_stmt *st)
{
    return json_pack("{s:I, s:I, s:s, s:s, s:o, s:s?, s:s?, s:s?, s:s, s:s?}", "ordinal",
                     (json_int_t)sqlite3_column_int64(st, 0), "group_id", (json_int_t)sqlite3_column_int64(st, 1),
                     "kind", (const char *)sqlite3_column_text(st, 2), "at", (const char *)sqlite3_column_text(st, 3),
                     "data", bounded_data((const char *)sqlite3_column_text(st, 4)), "principal",
                     (const char *)sqlite3_column_text(st, 5), "op", (const char *)sqlite3_column_text(st, 6),
                     "request_id", (const char *)sqlite3_column_text(st, 7), "hash",
                     (const char *)sqlite3_column_text(st, 8), "door", (const char *)sqlite3_column_text(st, 9));
}

json_t *abx_ledger_timeline(abx_ledger *l, const char *principal, int limit, int64_t before, int64_t after)
{
    /* the latest window first; before moves older, after moves newer (mutually exclusive) */
    char sql[512];
    const char *cols = "SELECT e.ordinal, e.group_id, e.kind, e.at, e.data, g.principal, g.op, g.request_id, e.hash,"
                       " g.door"
                       " FROM action_events e JOIN action_groups g ON g.group_id = e.group_id";
    if (after >= 0)
        snprintf(sql, sizeof sql, "%s WHERE e.ordinal > ?1 AND (?2 IS NULL OR g.principal = ?2) ORDER BY e.ordinal ASC"
                                  " LIMIT ?3", cols);
    else
        snprintf(sql, sizeof sql, "%s WHERE e.ordinal < ?1 AND (?2 IS NULL OR g.principal = ?2)"
                                  " ORDER BY e.ordinal DESC LIMIT ?3", cols);
    json_t *events = json_array();
    bool more = false;
    pthread_mutex_lock(&l->db_mu);
    sqlite3_stmt *st;
    if (l->db && sqlite3_prepare_v2(l->db, sql, -1, &st, NULL) == SQLITE_OK) {
        sqlite3_bind_int64(st, 1, after >= 0 ? after : before >= 0 ? before : INT64_MAX);
        if (principal)
            sqlite3_bind_text(st, 2, principal, -1, SQLITE_STATIC);
        else
            sqlite3_bind_null(st, 2);
        sqlite3_bind_int(st, 3, limit + 1);
        int n = 0;
        while (sqlite3_step(st) == SQLITE_ROW) {
            if (n++ == limit) {
                more = true;
                break;
            }
            json_array_append_new(events, event_row(st));
        }
        sqlite3_finalize(st);
    }
    pthread_mutex_unlock(&l->db_mu);
    if (after < 0) { /* newest-first from SQL; answer in ledger order */
        json_t *asc = json_array();
        for (size_t i = json_array_size(events); i > 0; i--)
            json_array_append(asc, json_array_get(events, i - 1));
        json_decref(events);
        events = asc;
    }
    size_t n = json_array_size(events);
    json_int_t first = n ? json_integer_value(json_object_get(json_array_get(events, 0), "ordinal")) : 0;
    json_int_t last = n ? json_integer_value(json_object_get(json_array_get(events, n - 1), "ordinal")) : 0;
    /* whether the caller has anything beyond this window, in its own view */
    bool more_before = after >= 0 ? false : more, more_after = after >= 0 ? more : false;
    pthread_mutex_lock(&l->db_mu);
    for (int dir = 0; dir < 2 && n; dir++) {
        if ((dir == 0 && after < 0) || (dir == 1 && after >= 0))
            continue; /* already known from the window query */
        sqlite3_stmt *q;
        const char *sqlq = dir == 0 ? "SELECT 1 FROM action_events e JOIN action_groups g ON g.group_id = e.group_id"
                                      " WHERE e.ordinal < ?1 AND (?2 IS NULL OR g.principal = ?2) LIMIT 1"
                                    : "SELECT 1 FROM action_events e JOIN action_groups g ON g.group_id = e.group_id"
                                      " WHERE e.ordinal > ?1 AND (?2 IS NULL OR g.principal = ?2) LIMIT 1";
        if (l->db && sqlite3_prepare_v2(l->db, sqlq, -1, &q, NULL) == SQLITE_OK) {
            sqlite3_bind_int64(q, 1, dir == 0 ? first : last);
            if (principal)
                sqlite3_bind_text(q, 2, principal, -1, SQLITE_STATIC);
            else
                sqlite3_bind_null(q, 2);
            bool exists = sqlite3_step(q) == SQLITE_ROW;
            if (dir == 0)
                more_before = exists;
            else
                more_after = exists;
            sqlite3_finalize(q);
        }
    }
    pthread_mutex_unlock(&l->db_mu);
    pthread_mutex_lock(&l->db_mu);
    json_int_t seg_first = (json_int_t)l->seg_first_ordinal;
    pthread_mutex_unlock(&l->db_mu);
    json_t *cursor = json_pack("{s:o, s:o}", "before_ordinal", n ? json_integer(first) : json_null(), "after_ordinal",
                               n ? json_integer(last) : (after >= 0 ? json_integer(after) : json_null()));
    /* events before the live segment's first ordinal are in archived segments (abx ledger export) */
    return json_pack("{s:o, s:o, s:b, s:b, s:i, s:i, s:I}", "events", events, "cursor", cursor, "has_more_before",
                     more_before, "has_more_after", more_after, "limit", limit, "field_max_bytes", FIELD_MAX,
                     "live_first_ordinal", seg_first);
}

json_t *abx_ledger_group(abx_ledger *l, uint64_t group_id, const char *principal)
{
    json_t *out = NULL;
    pthread_mutex_lock(&l->db_mu);
    sqlite3_stmt *st;
    if (l->db && sqlite3_prepare_v2(l->db,
                           "SELECT group_id, request_id, principal, op, door, client, created_at, batch_group FROM"
                           " action_groups WHERE group_id = ?1 AND (?2 IS NULL OR principal = ?2)",
                           -1, &st, NULL) == SQLITE_OK) {
        sqlite3_bind_int64(st, 1, (sqlite3_int64)group_id);
        if (principal)
            sqlite3_bind_text(st, 2, principal, -1, SQLITE_STATIC);
        else
            sqlite3_bind_null(st, 2);
        if (sqlite3_step(st) == SQLITE_ROW)
            out = json_pack("{s:I, s:s, s:s?, s:s?, s:s?, s:s?, s:s}", "group_id",
                            (json_int_t)sqlite3_column_int64(st, 0), "request_id",
                            (const char *)sqlite3_column_text(st, 1), "principal",
                            (const char *)sqlite3_column_text(st, 2), "op", (const char *)sqlite3_column_text(st, 3),
                            "door", (const char *)sqlite3_column_text(st, 4), "client",
                            (const char *)sqlite3_column_text(st, 5), "created_at",
                            (const char *)sqlite3_column_text(st, 6));
        if (out)
            json_object_set_new(out, "batch_group", sqlite3_column_type(st, 7) == SQLITE_NULL
                                                        ? json_null()
                                                        : json_integer(sqlite3_column_int64(st, 7)));
        sqlite3_finalize(st);
    }
    if (out) {
        json_t *events = json_array(), *attempts = json_array();
        if (sqlite3_prepare_v2(l->db,
                               "SELECT e.ordinal, e.group_id, e.kind, e.at, e.data, g.principal, g.op, g.request_id,"
                               " e.hash, g.door FROM action_events e JOIN action_groups g ON g.group_id = e.group_id"
                               " WHERE e.group_id = ?1 ORDER BY e.ordinal",
                               -1, &st, NULL) == SQLITE_OK) {
            sqlite3_bind_int64(st, 1, (sqlite3_int64)group_id);
            while (sqlite3_step(st) == SQLITE_ROW)
                json_array_append_new(events, event_row(st));
            sqlite3_finalize(st);
        }
        if (sqlite3_prepare_v2(l->db, "SELECT attempt_id, started_at FROM execution_attempts WHERE group_id = ?1"
                                      " ORDER BY attempt_id", -1, &st, NULL) == SQLITE_OK) {
            sqlite3_bind_int64(st, 1, (sqlite3_int64)group_id);
            while (sqlite3_step(st) == SQLITE_ROW)
                json_array_append_new(attempts, json_pack("{s:I, s:s}", "attempt_id",
                                                          (json_int_t)sqlite3_column_int64(st, 0), "started_at",
                                                          (const char *)sqlite3_column_text(st, 1)));
            sqlite3_finalize(st);
        }
        json_object_set_new(out, "events", events);
        json_object_set_new(out, "attempts", attempts);
    }
    pthread_mutex_unlock(&l->db_mu);
    return out;
}

/* ---- command-line reads: the last events, one group ---- */

static void print_rows(sqlite3_stmt *st, FILE *f)
{
    while (sqlite3_step(st) == SQLITE_ROW) {
        json_t *row = event_row(st);
        char *s = json_dumps(row, JSON_COMPACT);
        if (s)
            fprintf(f, "%s\n", s);
        free(s);
        json_decref(row);
    }
}

int abx_ledger_print(const char *path, int64_t group, int tail, void *file, char *err, size_t errlen)
{
    sqlite3 *db = abx__ledger_open_ro(path, err, errlen);
    if (!db)
        return -1;
    const char *cols = "SELECT e.ordinal, e.group_id, e.kind, e.at, e.data, g.principal, g.op, g.request_id, e.hash,"
                       " g.door"
                       " FROM action_events e JOIN action_groups g ON g.group_id = e.group_id";
    char sql[512];
    if (group > 0)
        snprintf(sql, sizeof sql, "%s WHERE e.group_id = ?1 ORDER BY e.ordinal", cols);
    else
        snprintf(sql, sizeof sql, "SELECT * FROM (%s ORDER BY e.ordinal DESC LIMIT ?1) ORDER BY ordinal", cols);
    sqlite3_stmt *st;
    if (sqlite3_prepare_v2(db, sql, -1, &st, NULL) != SQLITE_OK) {
        snprintf(err, errlen, "not a ledger: %s", sqlite3_errmsg(db));
        sqlite3_close(db);
        return -1;
    }
    sqlite3_bind_int64(st, 1, group > 0 ? group : tail);
    print_rows(st, file);
    sqlite3_finalize(st);
    sqlite3_close(db);
    return 0;
}
