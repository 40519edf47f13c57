/* ledger.h — the action ledger: an append-only SQLite history of every call.
 *
 * Canonical history (backend-extension-guide "Extend the Action Ledger"):
 * action_groups (one per call), action_events (ordered, hash-chained) and
 * execution_attempts (one per start of a handler). One connection, owned by one
 * writer thread that commits in groups; callers enqueue and, for mutating calls, wait
 * until their events are durable. Triggers refuse UPDATE and DELETE. Knows no HTTP. */
#ifndef ABX_LEDGER_LEDGER_H
#define ABX_LEDGER_LEDGER_H

#include <jansson.h>
#include <stdbool.h>
#include <stdint.h>

typedef struct abx_ledger abx_ledger;

typedef struct abx_ledger_opts {
    const char *path;       /* database file */
    bool sync_full;         /* synchronous=FULL (default NORMAL: durable against crashes of abx, not of power) */
    int64_t flush_ms;       /* non-durable events are committed within this (default 200 ms) */
    int64_t max_size;       /* archive the live segment once it holds this many bytes (0 = never) */
    int64_t retention_ms;   /* archive the live segment once it is this old (0 = never) */
    const char *head_path;  /* the chain head (count, hash) kept outside the ledger's folder, in abx's
                               home: open refuses a ledger that does not continue it; NULL = none */
} abx_ledger_opts;

abx_ledger *abx_ledger_open(const abx_ledger_opts *o, char *err, size_t errlen);
/* Commit what is queued, stop the writer, close. */
void abx_ledger_close(abx_ledger *l);
/* false once a write failed (disk full, read-only): mutating calls must be refused. */
bool abx_ledger_healthy(abx_ledger *l);

/* An event serialized by its caller (the pipeline's hot events skip the jansson tree):
 * data is the event without kind and at, as abx_json_compact(sort_keys) writes it;
 * malloc'd, and the ledger's (freed by it) once passed to abx_ledger_record. */
typedef struct abx_ledger_raw {
    const char *kind, *at;
    char *data;
} abx_ledger_raw;

/* One call's record, filled by the pipeline and written at once (abx_ledger_record). */
typedef struct abx_ledger_call {
    const char *request_id, *principal, *op, *door, *client;
    json_t *events;         /* borrowed: array of {"kind", "at", ...} in order */
    struct abx_ledger_raw *raw; /* instead of events, when set: n_raw events already serialized */
    size_t n_raw;
    bool durable;           /* wait until committed (mutating calls) */
    bool attempt;           /* a handler started: allocate an execution attempt */
    uint64_t batch_group;   /* the batch's group id, 0 none */
} abx_ledger_call;

/* Append a group with its events (and an attempt). With durable, blocks until the
 * transaction holding them is committed. Returns the group id (> 0), or 0 when the
 * ledger cannot be written. */
uint64_t abx_ledger_record(abx_ledger *l, const abx_ledger_call *c);
/* Append events to an existing group (e.g. an approval decided later). */
int abx_ledger_append(abx_ledger *l, uint64_t group_id, json_t *events, bool durable);

/* Reads (owned results). principal NULL = every principal. */
json_t *abx_ledger_timeline(abx_ledger *l, const char *principal, int limit, int64_t before, int64_t after);
json_t *abx_ledger_group(abx_ledger *l, uint64_t group_id, const char *principal);

/* Offline tools: verify the chain across every segment (<path>.archive/seg-*.db, then
 * <path>) and an anchor "HASH:COUNT"; the head anchor; export NDJSON of every segment
 * to a FILE*. verify returns 0 when intact, else 1 with why in err. */
int abx_ledger_verify(const char *path, const char *anchor, char *err, size_t errlen, uint64_t *events);
int abx_ledger_anchor(const char *path, char *out, size_t outlen);
/* Where abx keeps the head of the ledger at ledger_path: <home>/ledger-heads/<hash of the
 * ledger's absolute path>.head (one per ledger, so servers sharing a home do not mix
 * them). mkdirs: create the folder (0700). Owned result. */
char *abx_ledger_head_path(const char *home, const char *ledger_path, bool mkdirs);
/* The chain head recorded in a head file: 0 and "count, hash" filled, or -1 when there is
 * none (no file, or no valid slot). */
int abx_ledger_head_read(const char *head_path, uint64_t *count, char hash[65]);
/* Does the ledger at path continue a head (event `count` has `hash`)? 0 yes, 1 no (why in err). */
int abx_ledger_head_check(const char *path, uint64_t count, const char *hash, char *err, size_t errlen);
int abx_ledger_export(const char *path, void *file /* FILE* */, char *err, size_t errlen);
/* The live segment's path (borrowed), for verifying an open ledger (ledger.verify). */
const char *abx_ledger_path(const abx_ledger *l);

/* Print a group's events (group > 0) or the last `tail` events as NDJSON to a FILE*. */
int abx_ledger_print(const char *path, int64_t group, int tail, void *file, char *err, size_t errlen);

/* Redact a call's arguments for the record: secrets, env values and contents become
 * {"sha256", "size"}; paths and argv stay. Owned result. */
json_t *abx_ledger_redact(const json_t *args);
/* true when abx_ledger_redact(args) would copy every member as it is (an object) */
bool abx_ledger_redact_keeps(const json_t *args);

#endif
