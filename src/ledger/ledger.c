/* ledger.c — the SQLite action ledger (see ledger.h).
 *
 * Writer state machine: callers enqueue an item (group id assigned at enqueue, so ids
 * follow queue order) → one writer at a time takes everything queued, writes it in one
 * transaction with each event's hash chained to the previous one (ordinal order) →
 * COMMIT → items marked done and waiters woken. A failed transaction rolls back, marks
 * the ledger unhealthy and fails the items; the next transaction tries again, so the
 * ledger recovers by itself when space returns. Non-durable items wait at most
 * flush_ms for company, and the writer thread writes them; a durable item is written
 * at once by its own caller when no one is writing (with whatever is queued: group
 * commit), else by the first of the waiting callers once the batch being written is
 * done — a mutating call does not wait on two thread hand-offs per event. Rotation
 * stays the writer thread's. The connection is the writer's; reads borrow it under
 * `db_mu`. */
#include "ledger/ledger_int.h"
#include "core/jsonout.h"
#include "core/util.h"
#include <errno.h>
#include <fcntl.h>
#include <dirent.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>
#include <pthread.h>
#include <sqlite3.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>


/* item and struct abx_ledger: ledger/ledger_int.h */

static const char *const schema[] = {
    "CREATE TABLE IF NOT EXISTS action_groups(group_id INTEGER PRIMARY KEY, request_id TEXT NOT NULL, principal TEXT,"
    " op TEXT, door TEXT, client TEXT, created_at TEXT NOT NULL, batch_group INTEGER)",
    "CREATE TABLE IF NOT EXISTS action_events(ordinal INTEGER PRIMARY KEY, group_id INTEGER NOT NULL,"
    " seq INTEGER NOT NULL, kind TEXT NOT NULL, at TEXT NOT NULL, data TEXT NOT NULL, prev_hash TEXT NOT NULL,"
    " hash TEXT NOT NULL)",
    "CREATE INDEX IF NOT EXISTS action_events_group ON action_events(group_id, seq)",
    /* no index on principal: every query of the ledger reaches a group by its id (the
     * timeline walks events by ordinal and filters), and an index the reads never use cost
     * each call a fourth B-tree insert; ledgers that have it lose it on open */
    "DROP INDEX IF EXISTS action_groups_principal",
    "CREATE TABLE IF NOT EXISTS execution_attempts(attempt_id INTEGER PRIMARY KEY, group_id INTEGER NOT NULL,"
    " started_at TEXT NOT NULL)",
    /* append-only: old rows are never updated or deleted; a retry is a new attempt */
    "CREATE TRIGGER IF NOT EXISTS action_groups_no_update BEFORE UPDATE ON action_groups"
    " BEGIN SELECT RAISE(ABORT, 'the ledger is append-only'); END",
    "CREATE TRIGGER IF NOT EXISTS action_groups_no_delete BEFORE DELETE ON action_groups"
    " BEGIN SELECT RAISE(ABORT, 'the ledger is append-only'); END",
    "CREATE TRIGGER IF NOT EXISTS action_events_no_update BEFORE UPDATE ON action_events"
    " BEGIN SELECT RAISE(ABORT, 'the ledger is append-only'); END",
    "CREATE TRIGGER IF NOT EXISTS action_events_no_delete BEFORE DELETE ON action_events"
    " BEGIN SELECT RAISE(ABORT, 'the ledger is append-only'); END",
    "CREATE TRIGGER IF NOT EXISTS execution_attempts_no_update BEFORE UPDATE ON execution_attempts"
    " BEGIN SELECT RAISE(ABORT, 'the ledger is append-only'); END",
    "CREATE TRIGGER IF NOT EXISTS execution_attempts_no_delete BEFORE DELETE ON execution_attempts"
    " BEGIN SELECT RAISE(ABORT, 'the ledger is append-only'); END",
    /* schema 2: where this segment's chain starts (one row, written when the segment is
     * created). A ledger is a sequence of segments: archived ones in <path>.archive/ and
     * the live one at <path>; each continues the previous one's chain. */
    "CREATE TABLE IF NOT EXISTS ledger_segment(first_ordinal INTEGER NOT NULL, prev_hash TEXT NOT NULL,"
    " first_group INTEGER NOT NULL, created_ms INTEGER NOT NULL)",
    "CREATE TRIGGER IF NOT EXISTS ledger_segment_no_update BEFORE UPDATE ON ledger_segment"
    " BEGIN SELECT RAISE(ABORT, 'the ledger is append-only'); END",
    "CREATE TRIGGER IF NOT EXISTS ledger_segment_no_delete BEFORE DELETE ON ledger_segment"
    " BEGIN SELECT RAISE(ABORT, 'the ledger is append-only'); END",
};

/* The chained hash of one event: every field, in a fixed order, after the previous hash. */
void abx__ledger_event_hash(const char *prev, int64_t ordinal, uint64_t group, int64_t seq, const char *kind,
                             const char *at, const char *data, char out[65])
{
    abx_sha256 c;
    char num[64];
    abx_sha256_init(&c);
    abx_sha256_update(&c, prev, strlen(prev));
    int n = snprintf(num, sizeof num, "\n%lld\n%llu\n%lld\n", (long long)ordinal, (unsigned long long)group,
                     (long long)seq);
    abx_sha256_update(&c, num, (size_t)n);
    abx_sha256_update(&c, kind, strlen(kind));
    abx_sha256_update(&c, "\n", 1);
    abx_sha256_update(&c, at, strlen(at));
    abx_sha256_update(&c, "\n", 1);
    abx_sha256_update(&c, data, strlen(data));
    unsigned char h[32];
    abx_sha256_final(&c, h);
    abx_hex(h, 32, out);
}

const char abx__ledger_genesis[] = "0000000000000000000000000000000000000000000000000000000000000000";

static int exec_sql(sqlite3 *db, const char *sql)
{
    return sqlite3_exec(db, sql, NULL, NULL, NULL);
}

static int migrate(sqlite3 *db, char *err, size_t errlen)
{
    sqlite3_stmt *st;
    int version = 0;
    if (sqlite3_prepare_v2(db, "PRAGMA user_version", -1, &st, NULL) == SQLITE_OK) {
        if (sqlite3_step(st) == SQLITE_ROW)
            version = sqlite3_column_int(st, 0);
        sqlite3_finalize(st);
    }
    if (version > SCHEMA_VERSION) {
        snprintf(err, errlen, "the ledger was written by a newer abx (schema %d)", version);
        return -1;
    }
    if (exec_sql(db, "BEGIN IMMEDIATE") != SQLITE_OK)
        goto fail;
    for (size_t i = 0; i < ABX_ARRAY_LEN(schema); i++)
        if (exec_sql(db, schema[i]) != SQLITE_OK)
            goto fail_tx;
    char pragma[64];
    snprintf(pragma, sizeof pragma, "PRAGMA user_version=%d", SCHEMA_VERSION);
    if (exec_sql(db, pragma) != SQLITE_OK || exec_sql(db, "COMMIT") != SQLITE_OK)
        goto fail_tx;
    return 0;
fail_tx:
    exec_sql(db, "ROLLBACK");
fail:
    snprintf(err, errlen, "cannot create the ledger schema: %s", sqlite3_errmsg(db));
    return -1;
}

#define QUEUE_MAX 8192
#define SMALL_SEGMENT (16 * 1024 * 1024) /* ledger.max_size below which segments keep 4 KiB pages */
#define WAKE_BATCH 512 /* queued non-durable items that make the writer commit before flush_ms */

/* Write a batch of items in one transaction; false on any failure (rolled back). */
static bool write_items(abx_ledger *l, item *first)
{
    sqlite3 *db = l->db;
    sqlite3_stmt *b = abx__ledger_stmt(l, ABX_LST_BEGIN), *g = abx__ledger_stmt(l, ABX_LST_GROUP),
                 *e = abx__ledger_stmt(l, ABX_LST_EVENT), *a = abx__ledger_stmt(l, ABX_LST_ATTEMPT),
                 *q = abx__ledger_stmt(l, ABX_LST_SEQ), *c = abx__ledger_stmt(l, ABX_LST_COMMIT);
    bool ok = b && g && e && a && q && c && sqlite3_step(b) == SQLITE_DONE;
    if (b)
        sqlite3_reset(b);
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
            sqlite3_bind_text(g, 7, it->n_ev ? it->ev_at[0] : it->at, -1, SQLITE_STATIC);
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
            /* SQLITE_STATIC (no copy): every buffer outlives the step and the reset below,
             * and every parameter is bound again before the next step */
            sqlite3_bind_text(e, 6, dj, -1, SQLITE_STATIC);
            sqlite3_bind_text(e, 7, hash, -1, SQLITE_STATIC);
            sqlite3_bind_text(e, 8, h, -1, SQLITE_STATIC);
            ok = sqlite3_step(e) == SQLITE_DONE;
            sqlite3_reset(e);
            memcpy(hash, h, sizeof hash);
            ordinal++;
        }
    }
    int rc = ok ? sqlite3_step(c) : SQLITE_ERROR;
    if (c)
        sqlite3_reset(c);
    if (rc == SQLITE_DONE) {
        l->next_ordinal = (uint64_t)ordinal;
        memcpy(l->last_hash, hash, sizeof hash);
        return true;
    }
    exec_sql(db, "ROLLBACK");
    return false;
}

static bool rotation_due(abx_ledger *l);
static bool rotate(abx_ledger *l);

/* Write what is queued as one transaction: called with mu held by whoever writes now
 * (the writer thread, or a caller of a durable item that found no one writing: it
 * commits its own item and what queued before it, saving two thread hand-offs per
 * mutating call); returns with mu held. Rotation is the writer thread's: a caller only
 * flags it (a checkpoint and a rename are not a request's to wait for). */
static void flush_locked(abx_ledger *l, bool writer)
{
    item *batch = l->head;
    l->head = l->tail = NULL;
    l->queued = 0;
    l->n_durable = 0;
    l->writing = true;
    pthread_cond_broadcast(&l->cond); /* room again for waiting callers */
    pthread_mutex_unlock(&l->mu);
    pthread_mutex_lock(&l->db_mu);
    bool ok = l->db && write_items(l, batch);
    if (ok)
        abx__ledger_head_write(l);
    bool due = ok && rotation_due(l);
    if (due && writer)
        rotate(l);
    pthread_mutex_unlock(&l->db_mu);
    pthread_mutex_lock(&l->mu);
    if (due && !writer)
        l->rotate_due = true;
    if (ok != l->healthy)
        fprintf(stderr, "{\"level\":\"%s\",\"msg\":\"ledger %s\"}\n", ok ? "info" : "error",
                ok ? "writable again" : "cannot be written: mutating calls are refused");
    l->healthy = ok;
    l->writing = false;
    item *done = NULL; /* non-durable items: freed after the lock is dropped */
    for (item *it = batch, *nx; it; it = nx) {
        nx = it->next;
        if (it->durable) { /* the waiter frees it */
            it->done = true;
            it->ok = ok;
        } else {
            it->next = done;
            done = it;
        }
    }
    pthread_cond_broadcast(&l->cond);
    if (!writer && (l->head || l->rotate_due || l->stop))
        pthread_cond_signal(&l->wake); /* what queued meanwhile, a rotation flagged, a stop */
    /* hundreds of items a batch: freeing them under mu made every request thread
     * that records a call wait behind the writer (a head-of-line stall at p99) */
    pthread_mutex_unlock(&l->mu);
    for (item *nx; done; done = nx) {
        nx = done->next;
        abx__ledger_item_free(done);
    }
    pthread_mutex_lock(&l->mu);
}

static void *writer_main(void *arg)
{
    abx_ledger *l = arg;
    pthread_mutex_lock(&l->mu);
    for (;;) {
        while (!l->stop && (l->writing || (!l->head && !l->rotate_due)))
            pthread_cond_wait(&l->wake, &l->mu);
        if (l->writing) { /* stopping, but a caller is still writing: wait for it */
            pthread_cond_wait(&l->wake, &l->mu);
            continue;
        }
        if (!l->head && l->stop)
            break;
        if (!l->head) { /* a rotation a caller flagged */
            l->writing = true;
            pthread_mutex_unlock(&l->mu);
            pthread_mutex_lock(&l->db_mu);
            if (l->db && rotation_due(l))
                rotate(l); /* failed: tried again after the writer's next batch */
            pthread_mutex_unlock(&l->db_mu);
            pthread_mutex_lock(&l->mu);
            l->writing = false;
            l->rotate_due = false;
            pthread_cond_broadcast(&l->cond);
            continue;
        }
        /* a durable item is written now; otherwise wait for company until the oldest
         * queued item is flush_ms old (group commit: one transaction for many reads) */
        if (!l->n_durable && !l->stop && l->queued < WAKE_BATCH) {
            int64_t due = l->first_queued_ms + l->flush_ms;
            struct timespec ts = {.tv_sec = due / 1000, .tv_nsec = (due % 1000) * 1000000};
            while (!l->n_durable && !l->stop && l->queued < WAKE_BATCH && l->head && !l->writing)
                if (pthread_cond_timedwait(&l->wake, &l->mu, &ts) == ETIMEDOUT)
                    break;
        }
        if (!l->head || l->writing) /* a caller took the batch meanwhile */
            continue;
        flush_locked(l, true);
    }
    pthread_mutex_unlock(&l->mu);
    return NULL;
}

/* ---- segments ----
 * Rotation state machine (writer thread, holding db_mu): live segment full or old →
 * checkpoint and close it → rename it to <archive_dir>/seg-<first>-<last>.db (fsync the
 * directories) → open a new live segment whose ledger_segment row continues the chain
 * (next ordinal, last hash, next group). A crash after the rename leaves no live file:
 * open_segment() then continues from the newest archive, so the chain never forks. */

static int64_t wall_ms(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_REALTIME, &ts);
    return (int64_t)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

static bool is_segment_name(const char *n)
{
    unsigned long long a, b;
    char tail[8];
    return strncmp(n, "seg-", 4) == 0 && sscanf(n, "seg-%12llu-%12llu.%7s", &a, &b, tail) == 3 &&
           strcmp(tail, "db") == 0 && strlen(n) == 4 + 12 + 1 + 12 + 3;
}

static int cmp_str(const void *a, const void *b) { return strcmp(*(char *const *)a, *(char *const *)b); }

/* The archived segments of a ledger, oldest first (names are zero-padded first ordinals),
 * then the live one. Caller frees each path and the array. */
char **abx__ledger_list_segments(const char *path, size_t *n)
{
    *n = 0;
    char *dir = abx_asprintf("%s.archive", path);
    size_t cap = 8;
    char **out = abx_calloc(cap, sizeof *out);
    DIR *d = dir ? opendir(dir) : NULL;
    struct dirent *de;
    while (out && d && (de = readdir(d))) {
        if (!is_segment_name(de->d_name))
            continue;
        if (*n + 2 > cap) {
            char **g = abx_realloc(out, cap * 2 * sizeof *out);
            if (!g)
                break;
            out = g;
            cap *= 2;
        }
        out[(*n)++] = abx_asprintf("%s/%s", dir, de->d_name);
    }
    if (d)
        closedir(d);
    abx_free(dir);
    if (!out)
        return NULL;
    qsort(out, *n, sizeof *out, cmp_str);
    out[(*n)++] = abx_strdup(path);
    return out;
}

void abx__ledger_free_list(char **v, size_t n)
{
    for (size_t i = 0; v && i < n; i++)
        abx_free(v[i]);
    abx_free(v);
}

/* The segment row of an open database: defaults for a schema-1 ledger (abx__ledger_genesis). */
void abx__ledger_read_segment_row(sqlite3 *db, int64_t *first_ordinal, char prev[65], int64_t *first_group,
                                  int64_t *created_ms, bool *present)
{
    *first_ordinal = 1;
    *first_group = 1;
    *created_ms = 0;
    *present = false;
    snprintf(prev, 65, "%s", abx__ledger_genesis);
    sqlite3_stmt *st;
    if (sqlite3_prepare_v2(db, "SELECT first_ordinal, prev_hash, first_group, created_ms FROM ledger_segment LIMIT 1",
                           -1, &st, NULL) != SQLITE_OK)
        return;
    if (sqlite3_step(st) == SQLITE_ROW) {
        *first_ordinal = sqlite3_column_int64(st, 0);
        snprintf(prev, 65, "%s", sqlite3_column_text(st, 1) ? (const char *)sqlite3_column_text(st, 1) : "");
        *first_group = sqlite3_column_int64(st, 2);
        *created_ms = sqlite3_column_int64(st, 3);
        *present = true;
    }
    sqlite3_finalize(st);
}

/* Where the newest archived segment's chain ends: false when there is none. */
static bool archive_tail(const char *path, uint64_t *next_ordinal, char hash[65], uint64_t *next_group)
{
    size_t n;
    char **segs = abx__ledger_list_segments(path, &n);
    bool found = false;
    if (segs && n >= 2) {
        sqlite3 *db = NULL;
        if (sqlite3_open_v2(segs[n - 2], &db, SQLITE_OPEN_READONLY, NULL) == SQLITE_OK) {
            sqlite3_stmt *st;
            if (sqlite3_prepare_v2(db, "SELECT ordinal, hash FROM action_events ORDER BY ordinal DESC LIMIT 1", -1,
                                   &st, NULL) == SQLITE_OK) {
                if (sqlite3_step(st) == SQLITE_ROW) {
                    *next_ordinal = (uint64_t)sqlite3_column_int64(st, 0) + 1;
                    snprintf(hash, 65, "%s", (const char *)sqlite3_column_text(st, 1));
                    found = true;
                }
                sqlite3_finalize(st);
            }
            if (found && sqlite3_prepare_v2(db, "SELECT COALESCE(MAX(group_id), 0) FROM action_groups", -1, &st,
                                            NULL) == SQLITE_OK) {
                if (sqlite3_step(st) == SQLITE_ROW)
                    *next_group = (uint64_t)sqlite3_column_int64(st, 0) + 1;
                sqlite3_finalize(st);
            }
        }
        sqlite3_close(db);
    }
    abx__ledger_free_list(segs, n);
    return found;
}

/* Open (or create) the live segment at l->path and continue the chain where it ends:
 * in this segment, else where its row says it starts, else after the newest archive.
 * Rotating (callers go on enqueueing, under mu, while the writer does this under db_mu),
 * the group ids handed out are left alone: one given to an item not yet written is still
 * taken. */
static int open_segment(abx_ledger *l, bool rotating, char *err, size_t errlen)
{
    uint64_t ng;
    if (sqlite3_open_v2(l->path, &l->db, SQLITE_OPEN_READWRITE | SQLITE_OPEN_CREATE | SQLITE_OPEN_NOMUTEX, NULL) !=
        SQLITE_OK) {
        snprintf(err, errlen, "cannot open the ledger %s: %s", l->path, l->db ? sqlite3_errmsg(l->db) : "?");
        goto fail;
    }
    sqlite3_busy_timeout(l->db, 5000);
    char pragma[64];
    snprintf(pragma, sizeof pragma, "PRAGMA synchronous=%s", l->sync_full ? "FULL" : "NORMAL");
    /* a new segment's pages (an existing one keeps its own): 16 KiB, so a group commit of
     * a few hundred reads is ~20 WAL frames, not ~80 (SQLite writes a frame with two
     * system calls); 4 KiB when segments rotate small, where an empty segment's dozen
     * pages would already be most of ledger.max_size */
    char page[40];
    snprintf(page, sizeof page, "PRAGMA page_size=%d", l->max_size > 0 && l->max_size < SMALL_SEGMENT ? 4096 : 16384);
    if (exec_sql(l->db, page) != SQLITE_OK ||
        exec_sql(l->db, "PRAGMA journal_mode=WAL") != SQLITE_OK || exec_sql(l->db, pragma) != SQLITE_OK ||
        migrate(l->db, err, errlen) != 0) {
        if (!*err)
            snprintf(err, errlen, "cannot set up the ledger: %s", sqlite3_errmsg(l->db));
        goto fail;
    }
    int64_t first_ordinal, first_group, created_ms;
    char prev[65];
    bool present;
    abx__ledger_read_segment_row(l->db, &first_ordinal, prev, &first_group, &created_ms, &present);
    bool has_events = false;
    sqlite3_stmt *st;
    snprintf(l->last_hash, sizeof l->last_hash, "%s", prev);
    l->next_ordinal = (uint64_t)first_ordinal;
    ng = (uint64_t)first_group;
    if (sqlite3_prepare_v2(l->db, "SELECT ordinal, hash FROM action_events ORDER BY ordinal DESC LIMIT 1", -1, &st,
                           NULL) == SQLITE_OK) {
        if (sqlite3_step(st) == SQLITE_ROW) {
            has_events = true;
            l->next_ordinal = (uint64_t)sqlite3_column_int64(st, 0) + 1;
            snprintf(l->last_hash, sizeof l->last_hash, "%s", (const char *)sqlite3_column_text(st, 1));
        }
        sqlite3_finalize(st);
    }
    if (sqlite3_prepare_v2(l->db, "SELECT COALESCE(MAX(group_id), 0) FROM action_groups", -1, &st, NULL) ==
        SQLITE_OK) {
        if (sqlite3_step(st) == SQLITE_ROW && (uint64_t)sqlite3_column_int64(st, 0) + 1 > ng)
            ng = (uint64_t)sqlite3_column_int64(st, 0) + 1;
        sqlite3_finalize(st);
    }
    if (!present) {
        /* a new live segment (or a schema-1 ledger): record where its chain starts */
        if (!has_events && archive_tail(l->path, &l->next_ordinal, l->last_hash, &ng))
            first_ordinal = (int64_t)l->next_ordinal, first_group = (int64_t)ng,
            snprintf(prev, sizeof prev, "%s", l->last_hash);
        created_ms = wall_ms();
        if (sqlite3_prepare_v2(l->db, "INSERT INTO ledger_segment VALUES(?,?,?,?)", -1, &st, NULL) != SQLITE_OK) {
            snprintf(err, errlen, "cannot set up the ledger: %s", sqlite3_errmsg(l->db));
            goto fail;
        }
        sqlite3_bind_int64(st, 1, first_ordinal);
        sqlite3_bind_text(st, 2, prev, -1, SQLITE_STATIC);
        sqlite3_bind_int64(st, 3, first_group);
        sqlite3_bind_int64(st, 4, created_ms);
        int rc = sqlite3_step(st);
        sqlite3_finalize(st);
        if (rc != SQLITE_DONE) {
            snprintf(err, errlen, "cannot set up the ledger: %s", sqlite3_errmsg(l->db));
            goto fail;
        }
    }
    l->seg_first_ordinal = (uint64_t)first_ordinal;
    l->seg_created_ms = created_ms;
    if (!rotating)
        l->next_group = ng;
    return 0;
fail:
    abx__ledger_close_db(l);
    return -1;
}

static void fsync_dir(const char *dir)
{
    int fd = open(dir, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
    if (fd >= 0) {
        fsync(fd);
        close(fd);
    }
}

/* Is the live segment due for rotation? (writer thread, holding db_mu) */
static bool rotation_due(abx_ledger *l)
{
    if (l->next_ordinal == l->seg_first_ordinal) /* nothing in it yet */
        return false;
    if (l->retention_ms > 0 && wall_ms() - l->seg_created_ms >= l->retention_ms)
        return true;
    if (l->max_size <= 0)
        return false;
    int64_t pages = 0, size = 0;
    sqlite3_stmt *st;
    if (sqlite3_prepare_v2(l->db, "PRAGMA page_count", -1, &st, NULL) == SQLITE_OK) {
        if (sqlite3_step(st) == SQLITE_ROW)
            pages = sqlite3_column_int64(st, 0);
        sqlite3_finalize(st);
    }
    if (sqlite3_prepare_v2(l->db, "PRAGMA page_size", -1, &st, NULL) == SQLITE_OK) {
        if (sqlite3_step(st) == SQLITE_ROW)
            size = sqlite3_column_int64(st, 0);
        sqlite3_finalize(st);
    }
    return pages * size >= l->max_size;
}

/* Archive the live segment and start the next one (writer thread, holding db_mu). */
static bool rotate(abx_ledger *l)
{
    char name[64];
    snprintf(name, sizeof name, "seg-%012llu-%012llu.db", (unsigned long long)l->seg_first_ordinal,
             (unsigned long long)(l->next_ordinal - 1));
    char *dst = abx_asprintf("%s/%s", l->archive_dir, name);
    if (!dst)
        return false;
    /* fold the WAL in and leave WAL mode, so an archived segment is one self-contained
     * file that readers open without creating -wal/-shm files beside it */
    abx__ledger_stmts_drop(l);
    exec_sql(l->db, "PRAGMA wal_checkpoint(TRUNCATE)");
    exec_sql(l->db, "PRAGMA journal_mode=DELETE");
    abx__ledger_close_db(l);
    bool moved = rename(l->path, dst) == 0;
    if (moved) {
        fsync_dir(l->archive_dir);
        char *wal = abx_asprintf("%s-wal", l->path);
        if (wal)
            unlink(wal); /* checkpointed and closed: nothing in it */
        abx_free(wal);
        char *parent = abx_strdup(l->path), *slash = parent ? strrchr(parent, '/') : NULL;
        if (slash)
            *(slash == parent ? slash + 1 : slash) = '\0';
        fsync_dir(slash ? parent : ".");
        abx_free(parent);
    }
    char err[256] = "";
    if (open_segment(l, true, err, sizeof err) != 0) {
        /* cannot start a new segment: put the old one back and keep writing there */
        if (moved)
            rename(dst, l->path);
        err[0] = '\0';
        if (open_segment(l, true, err, sizeof err) != 0)
            fprintf(stderr, "{\"level\":\"error\",\"msg\":\"ledger: cannot reopen %s: %s\"}\n", l->path, err);
        abx_free(dst);
        return false;
    }
    fprintf(stderr, "{\"level\":\"info\",\"msg\":\"ledger: segment archived as %s\"}\n", dst);
    abx_free(dst);
    return moved;
}

abx_ledger *abx_ledger_open(const abx_ledger_opts *o, char *err, size_t errlen)
{
    abx_ledger *l = abx_calloc(1, sizeof *l);
    if (!l) {
        snprintf(err, errlen, "out of memory");
        return NULL;
    }
    /* two servers writing one chain would fork it: the second refuses to start */
    char *lock = abx_asprintf("%s.lock", o->path);
    l->lock_fd = lock ? open(lock, O_RDWR | O_CREAT | O_CLOEXEC, 0600) : -1;
    abx_free(lock);
    if (l->lock_fd < 0 || flock(l->lock_fd, LOCK_EX | LOCK_NB) != 0) {
        snprintf(err, errlen, "the ledger %s is in use by another abx server (set ledger.path to a file of its own)",
                 o->path);
        if (l->lock_fd >= 0)
            close(l->lock_fd);
        abx_free(l);
        return NULL;
    }
    l->head_fd = -1;
    l->path = abx_strdup(o->path);
    l->archive_dir = abx_asprintf("%s.archive", o->path);
    l->sync_full = o->sync_full;
    l->max_size = o->max_size;
    l->retention_ms = o->retention_ms;
    if (!l->path || !l->archive_dir) {
        snprintf(err, errlen, "out of memory");
        goto fail;
    }
    /* made now, so the policy compiled next can mask it from child processes; needed
     * only when segments rotate */
    if (mkdir(l->archive_dir, 0700) != 0 && errno != EEXIST && (l->max_size > 0 || l->retention_ms > 0)) {
        snprintf(err, errlen, "cannot create %s: %s", l->archive_dir, strerror(errno));
        goto fail;
    }
    if (o->head_path) { /* a ledger that is gone is not created anew over a recorded head */
        uint64_t hc;
        char hh[65];
        struct stat st;
        if (abx_ledger_head_read(o->head_path, &hc, hh) == 0 && hc > 0 && stat(l->path, &st) != 0 &&
            !abx__ledger_hash_at(l->path, hc, hh)) {
            snprintf(err, errlen,
                     "the ledger %s is gone, but abx recorded a chain head of %llu events in %s. Restore the ledger, "
                     "or start a new chain with `abx ledger reset --i-know` (recorded)",
                     l->path, (unsigned long long)hc, o->head_path);
            goto fail;
        }
    }
    if (open_segment(l, false, err, errlen) != 0)
        goto fail;
    if (o->head_path && abx__ledger_head_open(l, o->head_path, err, errlen) != 0) {
        abx__ledger_close_db(l);
        goto fail;
    }
    l->healthy = true;
    l->flush_ms = o->flush_ms > 0 ? o->flush_ms : 200;
    pthread_mutex_init(&l->mu, NULL);
    pthread_mutex_init(&l->db_mu, NULL);
    pthread_condattr_t ca;
    pthread_condattr_init(&ca);
    pthread_condattr_setclock(&ca, CLOCK_MONOTONIC);
    pthread_cond_init(&l->cond, &ca);
    pthread_cond_init(&l->wake, &ca);
    pthread_condattr_destroy(&ca);
    if (pthread_create(&l->thread, NULL, writer_main, l) != 0) {
        snprintf(err, errlen, "cannot start the ledger writer");
        abx__ledger_close_db(l);
        goto fail;
    }
    return l;
fail:
    close(l->lock_fd);
    if (l->head_fd >= 0)
        close(l->head_fd);
    abx_free(l->path);
    abx_free(l->archive_dir);
    abx_free(l);
    return NULL;
}

void abx_ledger_close(abx_ledger *l)
{
    if (!l)
        return;
    pthread_mutex_lock(&l->mu);
    l->stop = true;
    pthread_cond_broadcast(&l->cond);
    pthread_cond_signal(&l->wake);
    pthread_mutex_unlock(&l->mu);
    pthread_join(l->thread, NULL);
    abx__ledger_close_db(l);
    close(l->lock_fd);
    if (l->head_fd >= 0)
        close(l->head_fd);
    abx_free(l->path);
    abx_free(l->archive_dir);
    pthread_cond_destroy(&l->cond);
    pthread_cond_destroy(&l->wake);
    pthread_mutex_destroy(&l->mu);
    pthread_mutex_destroy(&l->db_mu);
    abx_free(l);
}

bool abx_ledger_healthy(abx_ledger *l)
{
    pthread_mutex_lock(&l->mu);
    bool h = l->healthy;
    pthread_mutex_unlock(&l->mu);
    return h;
}

/* Enqueue; with durable, wait for the commit. Returns the group id or 0 on failure. */
uint64_t abx__ledger_enqueue(abx_ledger *l, item *it)
{
    pthread_mutex_lock(&l->mu);
    if (l->stop) {
        pthread_mutex_unlock(&l->mu);
        abx__ledger_item_free(it);
        return 0;
    }
    while (l->queued >= QUEUE_MAX && !l->stop) /* backpressure: memory stays bounded */
        pthread_cond_wait(&l->cond, &l->mu);
    l->queued++;
    if (it->request_id)
        it->group_id = l->next_group++;
    uint64_t gid = it->group_id;
    bool was_empty = !l->head;
    if (l->tail)
        l->tail->next = it;
    else
        l->head = it;
    l->tail = it;
    if (was_empty)
        l->first_queued_ms = abx_now_ms();
    if (it->durable)
        l->n_durable++;
    /* wake the writer only when it has something to decide: the first item starts its
     * flush timer, a full batch is written now; a durable item's caller writes it
     * itself (below), at once or after the batch being written */
    if (!it->durable && (was_empty || l->queued == WAKE_BATCH))
        pthread_cond_signal(&l->wake);
    if (!it->durable) {
        pthread_mutex_unlock(&l->mu);
        return gid;
    }
    /* no one writing: this caller commits (its item and what queued before it);
     * else it waits, and takes over if the batch being written was not its own */
    while (!it->done) {
        if (!l->writing && l->head)
            flush_locked(l, false);
        else
            pthread_cond_wait(&l->cond, &l->mu);
    }
    bool ok = it->ok;
    pthread_mutex_unlock(&l->mu);
    abx__ledger_item_free(it);
    return ok ? gid : 0;
}

