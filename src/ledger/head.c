/* head.c — the chain head: the ledger's last ordinal and hash kept in abx's home, apart
 * from the ledger file (two checksummed slots written alternately), so a replaced or
 * truncated ledger is noticed at open and by abx ledger verify. */
#include "ledger/ledger_int.h"
#include "core/util.h"
#include <errno.h>
#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>
#include <sqlite3.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

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

void abx__ledger_head_write(abx_ledger *l)
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
bool abx__ledger_hash_at(const char *path, uint64_t ordinal, char out[65])
{
    size_t n;
    char **segs = abx__ledger_list_segments(path, &n);
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
    abx__ledger_free_list(segs, n);
    return found;
}

int abx_ledger_head_check(const char *path, uint64_t count, const char *hash, char *err, size_t errlen)
{
    char got[65];
    if (count == 0)
        return 0;
    if (!abx__ledger_hash_at(path, count, got)) {
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
int abx__ledger_head_open(abx_ledger *l, const char *head_path, char *err, size_t errlen)
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
    abx__ledger_head_write(l);
    l->head_count = UINT64_MAX;
    abx__ledger_head_write(l);
    return 0;
}
