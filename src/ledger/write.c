/* write.c — the ledger writer's transaction: a batch of items (new groups, attempts,
 * events) appended to the hash chain in one transaction, with statements compiled once
 * per connection. */
#include "ledger/ledger_int.h"
#include <sqlite3.h>
#include <stdio.h>
#include <string.h>

/* The writer's statements, compiled once per connection (a batch is often one item:
 * compiling them for every transaction cost more than writing it). */
enum { WS_BEGIN, WS_COMMIT, WS_GROUP, WS_EVENT, WS_ATTEMPT, WS_SEQ, WS_N };
static const char *const ws_sql[WS_N] = {
    [WS_BEGIN] = "BEGIN IMMEDIATE",
    [WS_COMMIT] = "COMMIT",
    [WS_GROUP] = "INSERT INTO action_groups(group_id, request_id, principal, op, door, client, created_at,"
                 " batch_group) VALUES(?,?,?,?,?,?,?,?)",
    [WS_EVENT] = "INSERT INTO action_events(ordinal, group_id, seq, kind, at, data, prev_hash, hash)"
                 " VALUES(?,?,?,?,?,?,?,?)",
    [WS_ATTEMPT] = "INSERT INTO execution_attempts(group_id, started_at) VALUES(?,?)",
    [WS_SEQ] = "SELECT COALESCE(MAX(seq), -1) + 1 FROM action_events WHERE group_id = ?",
};

static void drop_stmts(abx_ledger *l)
{
    for (int i = 0; i < WS_N; i++) {
        sqlite3_finalize(l->ws[i]);
        l->ws[i] = NULL;
    }
    l->ws_db = NULL;
}

/* Close the live connection and the statements made on it. */
void abx__ledger_close_db(abx_ledger *l)
{
    drop_stmts(l);
    sqlite3_close(l->db);
}

static bool write_stmts(abx_ledger *l)
{
    if (l->ws_db == l->db && l->ws[0])
        return true;
    drop_stmts(l);
    for (int i = 0; i < WS_N; i++)
        if (sqlite3_prepare_v3(l->db, ws_sql[i], -1, SQLITE_PREPARE_PERSISTENT, &l->ws[i], NULL) != SQLITE_OK) {
            drop_stmts(l);
            return false;
        }
    l->ws_db = l->db;
    return true;
}

static int step_reset(sqlite3_stmt *st)
{
    int rc = sqlite3_step(st);
    sqlite3_reset(st);
    return rc;
}

/* Write a batch of items in one transaction; false on any failure (rolled back). */
bool abx__ledger_write_items(abx_ledger *l, item *first)
{
    sqlite3 *db = l->db;
    if (!write_stmts(l))
        return false;
    sqlite3_stmt *g = l->ws[WS_GROUP], *e = l->ws[WS_EVENT], *a = l->ws[WS_ATTEMPT], *q = l->ws[WS_SEQ];
    bool ok = step_reset(l->ws[WS_BEGIN]) == SQLITE_DONE;
    int64_t ordinal = (int64_t)l->next_ordinal;
    char hash[65];
    snprintf(hash, sizeof hash, "%s", l->last_hash);
    for (item *it = first; ok && it; it = it->next) {
        if (it->request_id) { /* a new group (appends to existing groups carry none) */
            sqlite3_bind_int64(g, 1, (sqlite3_int64)it->group_id);
            sqlite3_bind_text(g, 2, it->request_id, -1, SQLITE_STATIC);
            sqlite3_bind_text(g, 3, it->principal, -1, SQLITE_STATIC);
            sqlite3_bind_text(g, 4, it->op, -1, SQLITE_STATIC);
            sqlite3_bind_text(g, 5, it->door, -1, SQLITE_STATIC);
            sqlite3_bind_text(g, 6, it->client, -1, SQLITE_STATIC);
            /* the group's time is its "received" event's, so verify can hold them together */
            sqlite3_bind_text(g, 7, it->n_ev ? it->ev_at[0] : it->at, -1, SQLITE_TRANSIENT);
            if (it->batch_group)
                sqlite3_bind_int64(g, 8, (sqlite3_int64)it->batch_group);
            else
                sqlite3_bind_null(g, 8);
            ok = sqlite3_step(g) == SQLITE_DONE;
            sqlite3_reset(g);
        }
        sqlite3_int64 attempt_id = 0;
        if (ok && it->attempt) {
            sqlite3_bind_int64(a, 1, (sqlite3_int64)it->group_id);
            sqlite3_bind_text(a, 2, it->n_ev ? it->ev_at[0] : it->at, -1, SQLITE_STATIC);
            ok = sqlite3_step(a) == SQLITE_DONE;
            sqlite3_reset(a);
            attempt_id = sqlite3_last_insert_rowid(db);
        }
        int64_t seq0 = 0; /* events appended to an existing group continue its sequence */
        if (ok && !it->request_id) {
            sqlite3_bind_int64(q, 1, (sqlite3_int64)it->group_id);
            if (sqlite3_step(q) == SQLITE_ROW)
                seq0 = sqlite3_column_int64(q, 0);
            sqlite3_reset(q);
        }
        for (size_t k = 0; ok && k < it->n_ev; k++) {
            const char *kind = it->ev_kind[k], *at = it->ev_at[k], *dj = it->ev_data[k];
            char started[64];
            if (attempt_id && strcmp(kind, "started") == 0) { /* the attempt id is chained too */
                snprintf(started, sizeof started, "{\"attempt_id\":%lld}", (long long)attempt_id);
                dj = started;
            }
            char h[65];
            abx__ledger_event_hash(hash, ordinal, it->group_id, seq0 + (int64_t)k, kind, at, dj, h);
            sqlite3_bind_int64(e, 1, ordinal);
            sqlite3_bind_int64(e, 2, (sqlite3_int64)it->group_id);
            sqlite3_bind_int64(e, 3, (sqlite3_int64)(seq0 + (int64_t)k));
            sqlite3_bind_text(e, 4, kind, -1, SQLITE_STATIC);
            sqlite3_bind_text(e, 5, at, -1, SQLITE_STATIC);
            sqlite3_bind_text(e, 6, dj, -1, SQLITE_TRANSIENT);
            sqlite3_bind_text(e, 7, hash, -1, SQLITE_TRANSIENT);
            sqlite3_bind_text(e, 8, h, -1, SQLITE_TRANSIENT);
            ok = sqlite3_step(e) == SQLITE_DONE;
            sqlite3_reset(e);
            memcpy(hash, h, sizeof hash);
            ordinal++;
        }
    }
    if (ok && step_reset(l->ws[WS_COMMIT]) == SQLITE_DONE) {
        l->next_ordinal = (uint64_t)ordinal;
        memcpy(l->last_hash, hash, sizeof hash);
        return true;
    }
    sqlite3_exec(db, "ROLLBACK", NULL, NULL, NULL);
    return false;
}

