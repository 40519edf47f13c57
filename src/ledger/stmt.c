/* stmt.c — the ledger writer's prepared statements, kept for the life of a connection.
 * Preparing them per batch parsed six SQL texts per commit, which under load (a batch of
 * one or two reads) was most of the writer's CPU after the inserts themselves. */
#include "ledger/ledger_int.h"

#include <stddef.h>

static const char *const stmt_sql[] = {
    [ABX_LST_BEGIN] = "BEGIN IMMEDIATE",
    [ABX_LST_COMMIT] = "COMMIT",
    [ABX_LST_GROUP] = "INSERT INTO action_groups(group_id, request_id, principal, op, door, client,"
                      " created_at, batch_group) VALUES(?,?,?,?,?,?,?,?)",
    [ABX_LST_EVENT] = "INSERT INTO action_events(ordinal, group_id, seq, kind, at, data, prev_hash, hash)"
                      " VALUES(?,?,?,?,?,?,?,?)",
    [ABX_LST_ATTEMPT] = "INSERT INTO execution_attempts(group_id, started_at) VALUES(?,?)",
    [ABX_LST_SEQ] = "SELECT COALESCE(MAX(seq), -1) + 1 FROM action_events WHERE group_id = ?",
};
_Static_assert(sizeof stmt_sql / sizeof stmt_sql[0] == sizeof((abx_ledger *)0)->stmt / sizeof(sqlite3_stmt *),
               "one slot per statement");

sqlite3_stmt *abx__ledger_stmt(abx_ledger *l, int which)
{
    if (!l->db)
        return NULL;
    if (!l->stmt[which] &&
        sqlite3_prepare_v3(l->db, stmt_sql[which], -1, SQLITE_PREPARE_PERSISTENT, &l->stmt[which], NULL) != SQLITE_OK) {
        sqlite3_finalize(l->stmt[which]);
        l->stmt[which] = NULL;
    }
    return l->stmt[which];
}

void abx__ledger_stmts_drop(abx_ledger *l)
{
    for (size_t i = 0; i < sizeof l->stmt / sizeof l->stmt[0]; i++) {
        sqlite3_finalize(l->stmt[i]);
        l->stmt[i] = NULL;
    }
}

void abx__ledger_close_db(abx_ledger *l)
{
    abx__ledger_stmts_drop(l);
    sqlite3_close(l->db);
    l->db = NULL;
}
