/* files.c — the files namespace: its descriptor, composed from the op families' tables
 * (each family file ends with its own parameters and rows, next to its handlers). */
#include "builtin/files/files.h"

static const abx_op_def *const files_tables[] = {
    files_read_ops, files_write_ops, files_tree_ops, files_search_ops, files_transfer_ops,
    files_archive_ops, files_extract_ops, files_watch_ops, NULL,
};

/* files.stat and files.read open their one path through abx_ctx_open(_stat) before
 * anything else, and have no effect: step 7 decides them without a lookup. */
static const char *const files_jail_checked[] = {"files.stat", "files.read", NULL};

const abx_namespace abx_ns_files = {.name = "files", .op_tables = files_tables, .jail_checked = files_jail_checked};
