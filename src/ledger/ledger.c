/* ledger.c — the SQLite action ledger (see ledger.h).
 *
 * Writer state machine: callers enqueue an item (group id assigned at enqueue, so ids
 * follow queue order) → the writer thread takes everything queued, writes it in one
 * transaction with each event's hash chained to the previous one (ordinal order) →
 * COMMIT → items marked done and waiters woken. A failed transaction rolls back, marks
 * the ledger unhealthy and fails the items; the next transaction tries again, so the
 * ledger recovers by itself when space returns. Non-durable items wait at most
 * flush_ms for company; a durable item is written at once (with whatever is queued:
 * group commit). The connection is the writer's; reads borrow it under `db_mu`. */
#include "ledger/ledger.h"
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

#define SCHEMA_VERSION 2
#define FIELD_MAX 2048

typedef struct item {
    uint64_t group_id;
    char *request_id, *principal, *op, *door, *client;
    char *at;
    size_t n_ev;         /* events, serialized by the caller's thread (the writer only hashes) */
    char **ev_kind, **ev_at, **ev_data;
    bool attempt;
    uint64_t batch_group;
    bool durable;
    bool done, ok;
    struct item *next;
} item;

struct abx_ledger {
    sqlite3 *db;
    int lock_fd;                 /* flock on <path>.lock: one server per ledger */
    pthread_mutex_t db_mu;       /* the connection: writer transactions and reads */
    pthread_mutex_t mu;          /* queue, counters, flags */
    pthread_cond_t cond;         /* items done, room in the queue (callers wait on it) */
    pthread_cond_t wake;         /* the writer waits on it: a durable item, a full batch, stop */
    size_t n_durable;            /* durable items queued: the writer commits at once */
    int64_t first_queued_ms;     /* monotonic time the oldest queued item arrived */
    pthread_t thread;
    item *head, *tail;
    bool stop;
    bool healthy;
    size_t queued;               /* items waiting: bounded, callers wait when it is full */
    uint64_t next_group;
    uint64_t next_ordinal;
    char last_hash[65];
    int64_t flush_ms;
    char *path;                  /* owned: the live segment */
    char *archive_dir;           /* owned: <path>.archive, where rotated segments go */
    bool sync_full;
    int64_t max_size;            /* rotate when the live segment reaches this many bytes (0 = never) */
    int64_t retention_ms;        /* rotate when the live segment is this old (0 = never) */
    int64_t seg_created_ms;      /* wall time the live segment was started */
    uint64_t seg_first_ordinal;  /* first ordinal the live segment holds (or will hold) */
    int head_fd;                 /* the chain head file (two slots, written alternately), -1 none */
    unsigned head_writes;
    uint64_t head_count;         /* the count last written there */
};

static const char *const schema[] = {
    "CREATE TABLE IF NOT EXISTS action_groups(group_id INTEGER PRIMARY KEY, request_id TEXT NOT NULL, principal TEXT,"
    " op TEXT, door TEXT, client TEXT, created_at TEXT NOT NULL, batch_group INTEGER)",
    "CREATE TABLE IF NOT EXISTS action_events(ordinal INTEGER PRIMARY KEY, group_id INTEGER NOT NULL,"
    " seq INTEGER NOT NULL, kind TEXT NOT NULL, at TEXT NOT NULL, data TEXT NOT NULL, prev_hash TEXT NOT NULL,"
    " hash TEXT NOT NULL)",
    "CREATE INDEX IF NOT EXISTS action_events_group ON action_events(group_id, seq)",
    "CREATE INDEX IF NOT EXISTS action_groups_principal ON action_groups(principal, group_id)",
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
static void event_hash(const char *prev, int64_t ordinal, uint64_t group, int64_t seq, const char *kind,
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

static const char genesis[] = "0000000000000000000000000000000000000000000000000000000000000000";

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
#define WAKE_BATCH 512 /* queued non-durable items that make the writer commit before flush_ms */

static void item_free(item *it)
{
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
        json_t *data = json_object(); /* a shallow copy without kind and at: values are shared */
        const char *k;
        json_t *v;
        json_object_foreach((json_t *)ev, k, v)
        {
            if (strcmp(k, "kind") != 0 && strcmp(k, "at") != 0)
                json_object_set(data, k, v);
        }
        it->ev_kind[i] = abx_strdup(json_string_value(json_object_get(ev, "kind")) ?: "?");
        it->ev_at[i] = abx_strdup(json_string_value(json_object_get(ev, "at")) ?: it->at);
        it->ev_data[i] = json_dumps(data, JSON_COMPACT | JSON_SORT_KEYS);
        json_decref(data);
        it->n_ev++;
        if (!it->ev_kind[i] || !it->ev_at[i] || !it->ev_data[i])
            return false;
    }
    return true;
}

/* Write a batch of items in one transaction; false on any failure (rolled back). */
static bool write_items(abx_ledger *l, item *first)
{
    sqlite3 *db = l->db;
    sqlite3_stmt *g = NULL, *e = NULL, *a = NULL, *q = NULL;
    bool ok = exec_sql(db, "BEGIN IMMEDIATE") == SQLITE_OK;
    ok = ok && sqlite3_prepare_v2(db,
                                  "INSERT INTO action_groups(group_id, request_id, principal, op, door, client,"
                                  " created_at, batch_group) VALUES(?,?,?,?,?,?,?,?)",
                                  -1, &g, NULL) == SQLITE_OK;
    ok = ok && sqlite3_prepare_v2(db,
                                  "INSERT INTO action_events(ordinal, group_id, seq, kind, at, data, prev_hash, hash)"
                                  " VALUES(?,?,?,?,?,?,?,?)",
                                  -1, &e, NULL) == SQLITE_OK;
    ok = ok && sqlite3_prepare_v2(db, "INSERT INTO execution_attempts(group_id, started_at) VALUES(?,?)", -1, &a,
                                  NULL) == SQLITE_OK;
    ok = ok && sqlite3_prepare_v2(db, "SELECT COALESCE(MAX(seq), -1) + 1 FROM action_events WHERE group_id = ?", -1,
                                  &q, NULL) == SQLITE_OK;
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
            event_hash(hash, ordinal, it->group_id, seq0 + (int64_t)k, kind, at, dj, h);
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
    sqlite3_finalize(g);
    sqlite3_finalize(e);
    sqlite3_finalize(a);
    sqlite3_finalize(q);
    if (ok && exec_sql(db, "COMMIT") == SQLITE_OK) {
        l->next_ordinal = (uint64_t)ordinal;
        memcpy(l->last_hash, hash, sizeof hash);
        return true;
    }
    exec_sql(db, "ROLLBACK");
    return false;
}

static bool rotation_due(abx_ledger *l);
static bool rotate(abx_ledger *l);
static void head_write(abx_ledger *l);

static void *writer_main(void *arg)
{
    abx_ledger *l = arg;
    pthread_mutex_lock(&l->mu);
    for (;;) {
        while (!l->head && !l->stop)
            pthread_cond_wait(&l->wake, &l->mu);
        if (!l->head && l->stop)
            break;
        /* a durable item is written now; otherwise wait for company until the oldest
         * queued item is flush_ms old (group commit: one transaction for many reads) */
        if (!l->n_durable && !l->stop && l->queued < WAKE_BATCH) {
            int64_t due = l->first_queued_ms + l->flush_ms;
            struct timespec ts = {.tv_sec = due / 1000, .tv_nsec = (due % 1000) * 1000000};
            while (!l->n_durable && !l->stop && l->queued < WAKE_BATCH)
                if (pthread_cond_timedwait(&l->wake, &l->mu, &ts) == ETIMEDOUT)
                    break;
        }
        item *batch = l->head;
        l->head = l->tail = NULL;
        l->queued = 0;
        l->n_durable = 0;
        pthread_cond_broadcast(&l->cond); /* room again for waiting callers */
        pthread_mutex_unlock(&l->mu);
        pthread_mutex_lock(&l->db_mu);
        bool ok = l->db && write_items(l, batch);
        if (ok)
            head_write(l);
        if (ok && rotation_due(l))
            rotate(l);
        pthread_mutex_unlock(&l->db_mu);
        pthread_mutex_lock(&l->mu);
        if (ok != l->healthy)
            fprintf(stderr, "{\"level\":\"%s\",\"msg\":\"ledger %s\"}\n", ok ? "info" : "error",
                    ok ? "writable again" : "cannot be written: mutating calls are refused");
        l->healthy = ok;
        for (item *it = batch, *nx; it; it = nx) {
            nx = it->next;
            if (it->durable) { /* the waiter frees it */
                it->done = true;
                it->ok = ok;
            } else {
                item_free(it);
            }
        }
        pthread_cond_broadcast(&l->cond);
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
static char **list_segments(const char *path, size_t *n)
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

static void free_list(char **v, size_t n)
{
    for (size_t i = 0; v && i < n; i++)
        abx_free(v[i]);
    abx_free(v);
}

/* The segment row of an open database: defaults for a schema-1 ledger (genesis). */
static void read_segment_row(sqlite3 *db, int64_t *first_ordinal, char prev[65], int64_t *first_group,
                             int64_t *created_ms, bool *present)
{
    *first_ordinal = 1;
    *first_group = 1;
    *created_ms = 0;
    *present = false;
    snprintf(prev, 65, "%s", genesis);
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
    char **segs = list_segments(path, &n);
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
    free_list(segs, n);
    return found;
}

/* Open (or create) the live segment at l->path and continue the chain where it ends:
 * in this segment, else where its row says it starts, else after the newest archive. */
static int open_segment(abx_ledger *l, char *err, size_t errlen)
{
    if (sqlite3_open_v2(l->path, &l->db, SQLITE_OPEN_READWRITE | SQLITE_OPEN_CREATE | SQLITE_OPEN_NOMUTEX, NULL) !=
        SQLITE_OK) {
        snprintf(err, errlen, "cannot open the ledger %s: %s", l->path, l->db ? sqlite3_errmsg(l->db) : "?");
        goto fail;
    }
    sqlite3_busy_timeout(l->db, 5000);
    char pragma[64];
    snprintf(pragma, sizeof pragma, "PRAGMA synchronous=%s", l->sync_full ? "FULL" : "NORMAL");
    if (exec_sql(l->db, "PRAGMA journal_mode=WAL") != SQLITE_OK || exec_sql(l->db, pragma) != SQLITE_OK ||
        migrate(l->db, err, errlen) != 0) {
        if (!*err)
            snprintf(err, errlen, "cannot set up the ledger: %s", sqlite3_errmsg(l->db));
        goto fail;
    }
    int64_t first_ordinal, first_group, created_ms;
    char prev[65];
    bool present;
    read_segment_row(l->db, &first_ordinal, prev, &first_group, &created_ms, &present);
    bool has_events = false;
    sqlite3_stmt *st;
    snprintf(l->last_hash, sizeof l->last_hash, "%s", prev);
    l->next_ordinal = (uint64_t)first_ordinal;
    l->next_group = (uint64_t)first_group;
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
        if (sqlite3_step(st) == SQLITE_ROW && (uint64_t)sqlite3_column_int64(st, 0) + 1 > l->next_group)
            l->next_group = (uint64_t)sqlite3_column_int64(st, 0) + 1;
        sqlite3_finalize(st);
    }
    if (!present) {
        /* a new live segment (or a schema-1 ledger): record where its chain starts */
        if (!has_events && archive_tail(l->path, &l->next_ordinal, l->last_hash, &l->next_group))
            first_ordinal = (int64_t)l->next_ordinal, first_group = (int64_t)l->next_group,
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
    return 0;
fail:
    sqlite3_close(l->db);
    l->db = NULL;
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
    exec_sql(l->db, "PRAGMA wal_checkpoint(TRUNCATE)");
    exec_sql(l->db, "PRAGMA journal_mode=DELETE");
    sqlite3_close(l->db);
    l->db = NULL;
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
    if (open_segment(l, err, sizeof err) != 0) {
        /* cannot start a new segment: put the old one back and keep writing there */
        if (moved)
            rename(dst, l->path);
        err[0] = '\0';
        if (open_segment(l, err, sizeof err) != 0)
            fprintf(stderr, "{\"level\":\"error\",\"msg\":\"ledger: cannot reopen %s: %s\"}\n", l->path, err);
        abx_free(dst);
        return false;
    }
    fprintf(stderr, "{\"level\":\"info\",\"msg\":\"ledger: segment archived as %s\"}\n", dst);
    abx_free(dst);
    return moved;
}

/* ---- the chain head ----
 * The ledger proves that nothing inside it was changed; it cannot prove by itself that it
 * is the ledger: a file swapped for a fresh one, or removed, is a valid empty chain. So
 * abx keeps the chain head (count, hash) in its own home, where no statement reaches,
 * and refuses to open a ledger that does not continue it. The file has two fixed-size
 * slots written in turn with one pwrite each, every slot with its own check value: a
 * torn write spoils only the slot being written, and the other still holds a head the
 * ledger continues. A head lags the ledger by at most the last commit (it is written
 * after it), so "continues" means: event `count` exists and has `hash`. */

#define HEAD_SLOT 192

static void head_format(char slot[HEAD_SLOT], uint64_t count, const char *hash)
{
    char body[96], check[65];
    snprintf(body, sizeof body, "%llu %s", (unsigned long long)count, hash);
    abx_sha256_hex(body, strlen(body), check);
    memset(slot, ' ', HEAD_SLOT);
    int n = snprintf(slot, HEAD_SLOT, "abx-ledger-head 1 %s %.16s", body, check);
    slot[n] = ' ';
    slot[HEAD_SLOT - 1] = '\n';
}

static bool head_parse(const char *slot, uint64_t *count, char hash[65])
{
    unsigned long long n;
    char h[65], check[17], body[96], want[65];
    char text[HEAD_SLOT + 1];
    memcpy(text, slot, HEAD_SLOT);
    text[HEAD_SLOT] = '\0';
    if (sscanf(text, "abx-ledger-head 1 %llu %64[0-9a-f] %16[0-9a-f]", &n, h, check) != 3 || strlen(h) != 64)
        return false;
    snprintf(body, sizeof body, "%llu %s", n, h);
    abx_sha256_hex(body, strlen(body), want);
    if (strncmp(want, check, 16) != 0)
        return false;
    *count = n;
    memcpy(hash, h, 65);
    return true;
}

char *abx_ledger_head_path(const char *home, const char *ledger_path, bool mkdirs)
{
    /* the ledger's folder resolved (it exists once the ledger does), its name kept */
    const char *slash = strrchr(ledger_path, '/');
    char *dir = slash ? abx_strndup(ledger_path, slash == ledger_path ? 1 : (size_t)(slash - ledger_path))
                      : abx_strdup(".");
    char *real = dir ? realpath(dir, NULL) : NULL;
    char *full = abx_asprintf("%s/%s", real ? real : (dir ? dir : ""), slash ? slash + 1 : ledger_path);
    free(real);
    abx_free(dir);
    char h[65];
    abx_sha256_hex(full ? full : ledger_path, strlen(full ? full : ledger_path), h);
    abx_free(full);
    char *heads = abx_asprintf("%s/ledger-heads", home);
    if (heads && mkdirs)
        mkdir(heads, 0700);
    char *out = heads ? abx_asprintf("%s/%.32s.head", heads, h) : NULL;
    abx_free(heads);
    return out;
}

int abx_ledger_head_read(const char *head_path, uint64_t *count, char hash[65])
{
    int fd = open(head_path, O_RDONLY | O_CLOEXEC | O_NOFOLLOW);
    if (fd < 0)
        return -1;
    char buf[2 * HEAD_SLOT];
    ssize_t got = pread(fd, buf, sizeof buf, 0);
    close(fd);
    int rc = -1;
    for (int i = 0; i < 2; i++) {
        uint64_t c;
        char h[65];
        if (got >= (ssize_t)((i + 1) * HEAD_SLOT) && head_parse(buf + i * HEAD_SLOT, &c, h) &&
            (rc != 0 || c > *count)) {
            *count = c;
            memcpy(hash, h, 65);
            rc = 0;
        }
    }
    return rc;
}

static void head_write(abx_ledger *l)
{
    if (l->head_fd < 0 || l->next_ordinal - 1 == l->head_count)
        return;
    char slot[HEAD_SLOT];
    head_format(slot, l->next_ordinal - 1, l->last_hash);
    off_t off = (off_t)(l->head_writes++ % 2) * HEAD_SLOT;
    if (pwrite(l->head_fd, slot, HEAD_SLOT, off) == HEAD_SLOT) {
        l->head_count = l->next_ordinal - 1;
        if (l->sync_full)
            fdatasync(l->head_fd);
    }
}

/* The hash of event `ordinal`, in whichever segment holds it. */
static bool hash_at(const char *path, uint64_t ordinal, char out[65])
{
    size_t n;
    char **segs = list_segments(path, &n);
    bool found = false;
    for (size_t i = n; segs && i-- > 0 && !found;) {
        sqlite3 *db = NULL;
        sqlite3_stmt *st;
        if (sqlite3_open_v2(segs[i], &db, SQLITE_OPEN_READONLY, NULL) == SQLITE_OK &&
            sqlite3_prepare_v2(db, "SELECT hash FROM action_events WHERE ordinal = ?", -1, &st, NULL) == SQLITE_OK) {
            sqlite3_bind_int64(st, 1, (sqlite3_int64)ordinal);
            if (sqlite3_step(st) == SQLITE_ROW && sqlite3_column_text(st, 0)) {
                snprintf(out, 65, "%s", (const char *)sqlite3_column_text(st, 0));
                found = true;
            }
            sqlite3_finalize(st);
        }
        sqlite3_close(db);
    }
    free_list(segs, n);
    return found;
}

int abx_ledger_head_check(const char *path, uint64_t count, const char *hash, char *err, size_t errlen)
{
    char got[65];
    if (count == 0)
        return 0;
    if (!hash_at(path, count, got)) {
        snprintf(err, errlen,
                 "the ledger %s does not hold event %llu, which abx recorded as its chain head: the ledger was removed, "
                 "replaced or truncated",
                 path, (unsigned long long)count);
        return 1;
    }
    if (strcmp(got, hash) != 0) {
        snprintf(err, errlen,
                 "event %llu of the ledger %s does not have the hash abx recorded as its chain head: the ledger was "
                 "replaced or rewritten",
                 (unsigned long long)count, path);
        return 1;
    }
    return 0;
}

/* Open the head file and check that the ledger continues it; a missing head (a first
 * start) is written now. */
static int head_open(abx_ledger *l, const char *head_path, char *err, size_t errlen)
{
    uint64_t count = 0;
    char hash[65];
    bool have = abx_ledger_head_read(head_path, &count, hash) == 0;
    char why[512];
    if (have && abx_ledger_head_check(l->path, count, hash, why, sizeof why) != 0) {
        snprintf(err, errlen,
                 "%s (head: %s). Restore the ledger, or start a new chain with `abx ledger reset --i-know` "
                 "(recorded)",
                 why, head_path);
        return -1;
    }
    l->head_fd = open(head_path, O_RDWR | O_CREAT | O_CLOEXEC | O_NOFOLLOW, 0600);
    if (l->head_fd < 0) {
        snprintf(err, errlen, "cannot open the ledger's head file %s: %s", head_path, strerror(errno));
        return -1;
    }
    l->head_count = UINT64_MAX; /* write it once now, in both slots */
    head_write(l);
    l->head_count = UINT64_MAX;
    head_write(l);
    return 0;
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
            !hash_at(l->path, hc, hh)) {
            snprintf(err, errlen,
                     "the ledger %s is gone, but abx recorded a chain head of %llu events in %s. Restore the ledger, "
                     "or start a new chain with `abx ledger reset --i-know` (recorded)",
                     l->path, (unsigned long long)hc, o->head_path);
            goto fail;
        }
    }
    if (open_segment(l, err, errlen) != 0)
        goto fail;
    if (o->head_path && head_open(l, o->head_path, err, errlen) != 0) {
        sqlite3_close(l->db);
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
        sqlite3_close(l->db);
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
    sqlite3_close(l->db);
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
static uint64_t enqueue(abx_ledger *l, item *it)
{
    pthread_mutex_lock(&l->mu);
    if (l->stop) {
        pthread_mutex_unlock(&l->mu);
        item_free(it);
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
     * flush timer, a durable item or a full batch is written now */
    if (was_empty || it->durable || l->queued == WAKE_BATCH)
        pthread_cond_signal(&l->wake);
    if (!it->durable) {
        pthread_mutex_unlock(&l->mu);
        return gid;
    }
    while (!it->done)
        pthread_cond_wait(&l->cond, &l->mu);
    bool ok = it->ok;
    pthread_mutex_unlock(&l->mu);
    item_free(it);
    return ok ? gid : 0;
}

uint64_t abx_ledger_record(abx_ledger *l, const abx_ledger_call *c)
{
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
        item_free(it);
        return 0;
    }
    it->attempt = c->attempt;
    it->batch_group = c->batch_group;
    it->durable = c->durable;
    return enqueue(l, it);
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
        item_free(it);
        return -1;
    }
    it->durable = durable;
    return enqueue(l, it) ? 0 : -1;
}

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
    return json_pack("{s:I, s:I, s:s, s:s, s:o, s:s?, s:s?, s:s?, s:s}", "ordinal",
                     (json_int_t)sqlite3_column_int64(st, 0), "group_id", (json_int_t)sqlite3_column_int64(st, 1),
                     "kind", (const char *)sqlite3_column_text(st, 2), "at", (const char *)sqlite3_column_text(st, 3),
                     "data", bounded_data((const char *)sqlite3_column_text(st, 4)), "principal",
                     (const char *)sqlite3_column_text(st, 5), "op", (const char *)sqlite3_column_text(st, 6),
                     "request_id", (const char *)sqlite3_column_text(st, 7), "hash",
                     (const char *)sqlite3_column_text(st, 8));
}

json_t *abx_ledger_timeline(abx_ledger *l, const char *principal, int limit, int64_t before, int64_t after)
{
    /* the latest window first; before moves older, after moves newer (mutually exclusive) */
    char sql[512];
    const char *cols = "SELECT e.ordinal, e.group_id, e.kind, e.at, e.data, g.principal, g.op, g.request_id, e.hash"
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
                               " e.hash FROM action_events e JOIN action_groups g ON g.group_id = e.group_id"
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

/* ---- offline tools ---- */

static sqlite3 *open_ro(const char *path, char *err, size_t errlen)
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
    sqlite3 *db = open_ro(file, err, errlen);
    if (!db)
        return 1;
    int64_t first_ordinal, first_group, created_ms;
    char seg_prev[65];
    bool present;
    read_segment_row(db, &first_ordinal, seg_prev, &first_group, &created_ms, &present);
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
            event_hash(prev, ord, (uint64_t)sqlite3_column_int64(st, 1), sqlite3_column_int64(st, 2),
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
    char **segs = list_segments(path, &n);
    if (!segs) {
        snprintf(err, errlen, "out of memory");
        return 1;
    }
    char prev[65];
    snprintf(prev, sizeof prev, "%s", genesis);
    int64_t expect = 1;
    int rc = 0;
    for (size_t i = 0; rc == 0 && i < n; i++)
        rc = verify_segment(segs[i], i == 0, prev, &expect, anchor ? count : 0, seen, err, errlen);
    free_list(segs, n);
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
    sqlite3 *db = open_ro(path, err, sizeof err);
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
            read_segment_row(db, &first_ordinal, prev, &first_group, &created_ms, &present);
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
    char **segs = list_segments(path, &n);
    if (!segs) {
        snprintf(err, errlen, "out of memory");
        return -1;
    }
    int rc = 0;
    for (size_t i = 0; rc == 0 && i < n; i++) {
        sqlite3 *db = open_ro(segs[i], err, errlen);
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
    free_list(segs, n);
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

json_t *abx_ledger_redact(const json_t *args)
{
    static const char *const secret[] = {"token", "password", "secret", "credential", "authorization", "api_key",
                                         NULL};
    static const char *const contents[] = {"content", "data", "stdin", "old", "new", NULL};
    json_t *out = json_object();
    const char *k;
    json_t *v;
    json_object_foreach((json_t *)args, k, v)
    {
        if (name_is(k, secret, true)) {
            json_object_set_new(out, k, digest_of(v));
        } else if (strcmp(k, "env") == 0 && json_is_object(v)) { /* names stay, values do not */
            json_t *env = json_object();
            const char *ek;
            json_t *ev;
            json_object_foreach(v, ek, ev) json_object_set_new(env, ek, digest_of(ev));
            json_object_set_new(out, k, env);
        } else if (strcmp(k, "args") == 0 && json_is_object(v)) { /* another op's arguments (explain, batch) */
            json_object_set_new(out, k, abx_ledger_redact(v));
        } else if (name_is(k, contents, false) && (json_is_string(v) || json_is_object(v) || json_is_array(v))) {
            json_object_set_new(out, k, digest_of(v));
        } else {
            json_object_set(out, k, v); /* paths, argv, flags: what an auditor needs */
        }
    }
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
    sqlite3 *db = open_ro(path, err, errlen);
    if (!db)
        return -1;
    const char *cols = "SELECT e.ordinal, e.group_id, e.kind, e.at, e.data, g.principal, g.op, g.request_id, e.hash"
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
