/* ledger_int.h — the ledger's value and what its files share (src/ledger only):
 * ledger.c (the writer, segments, the chain head, open/close, recording), read.c (reads
 * and the command line's views), verify.c (verify, anchor, export, redaction). */
#ifndef ABX_LEDGER_LEDGER_INT_H
#define ABX_LEDGER_LEDGER_INT_H

#include "ledger/ledger.h"
#include <pthread.h>
#include <sqlite3.h>
#include <stdbool.h>
#include <stdint.h>

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
    bool packed;         /* strings and arrays live in the item's own block (only ev_data apart) */
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
    bool writing;                /* a batch is being written (by the writer or a caller) */
    bool rotate_due;             /* a caller's commit found the segment due: the writer rotates */
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
    sqlite3_stmt *stmt[6];       /* the writer's statements, prepared once per connection (stmt.c) */
};

/* The hash before the first event of a chain. */
extern const char abx__ledger_genesis[];
/* The chained hash of one event: every field, in a fixed order, after the previous hash. */
void abx__ledger_event_hash(const char *prev, int64_t ordinal, uint64_t group, int64_t seq, const char *kind,
                            const char *at, const char *data, char out[65]);
/* The archived segments of a ledger at path, sorted (owned; free with abx__ledger_free_list). */
char **abx__ledger_list_segments(const char *path, size_t *n);
void abx__ledger_free_list(char **v, size_t n);
/* A segment's ledger_segment row: where its chain starts. */
void abx__ledger_read_segment_row(sqlite3 *db, int64_t *first_ordinal, char prev[65], int64_t *first_group,
                                  int64_t *created_ms, bool *present);
/* The writer's statements (stmt.c), prepared on first use and kept for the connection:
 * a batch no longer parses its SQL again. NULL when it cannot be prepared. */
enum { ABX_LST_BEGIN, ABX_LST_COMMIT, ABX_LST_GROUP, ABX_LST_EVENT, ABX_LST_ATTEMPT, ABX_LST_SEQ };
sqlite3_stmt *abx__ledger_stmt(abx_ledger *l, int which);
/* Finalize them (before the connection's journal mode changes or it closes). */
void abx__ledger_stmts_drop(abx_ledger *l);
/* Finalize them, close l->db and set it to NULL. */
void abx__ledger_close_db(abx_ledger *l);
/* item.c: free an item (whatever thread made it); ledger.c: queue one for the writer,
 * its group id or 0 */
void abx__ledger_item_free(item *it);
uint64_t abx__ledger_enqueue(abx_ledger *l, item *it);
/* A read-only connection to a ledger file; NULL with err. */
sqlite3 *abx__ledger_open_ro(const char *path, char *err, size_t errlen);

/* The chain head (head.c): write the current count and hash to the next slot; open (or
 * create) the head file at head_path and check the ledger against it. */
void abx__ledger_head_write(abx_ledger *l);
int abx__ledger_head_open(abx_ledger *l, const char *head_path, char *err, size_t errlen);
/* The hash of event `ordinal`, in whichever segment holds it; false when none does. */
bool abx__ledger_hash_at(const char *path, uint64_t ordinal, char out[65]);

#endif
