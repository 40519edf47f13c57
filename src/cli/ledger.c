/* ledger.c — `abx ledger`: read, check, anchor, export and (deliberately) reset the action
 * ledger from the command line, offline: no server needs to run. */
#include "cli/cli.h"
#include "ledger/ledger.h"
#include "pipeline/pipeline.h"
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/file.h>
#include <unistd.h>

static int ledger_sub(const char *sub, const char *path, const char *head, const char *anchor, int64_t group, int n,
                      bool i_know);

/* abx ledger tail|show|verify|anchor|export|reset [--path FILE | --config FILE] ... */
int abx_cli_ledger(int argc, char **argv)
{
    if (argc < 1) {
        fprintf(stderr, "usage: abx ledger tail|show GROUP|verify [--anchor H:N]|anchor|export|reset --i-know [--path FILE | --config FILE]\n");
        return 2;
    }
    const char *sub = argv[0], *path = NULL, *config = NULL, *anchor = NULL;
    int64_t group = 0;
    int n = 20;
    bool i_know = false;
    for (int i = 1; i < argc; i++) {
        if (strcmp(argv[i], "--path") == 0 && i + 1 < argc)
            path = argv[++i];
        else if (strcmp(argv[i], "--config") == 0 && i + 1 < argc)
            config = argv[++i];
        else if (strcmp(argv[i], "--anchor") == 0 && i + 1 < argc)
            anchor = argv[++i];
        else if (strcmp(argv[i], "-n") == 0 && i + 1 < argc)
            n = atoi(argv[++i]);
        else if (strcmp(argv[i], "--i-know") == 0 && strcmp(sub, "reset") == 0)
            i_know = true;
        else if (strcmp(sub, "show") == 0 && argv[i][0] != '-')
            group = atoll(argv[i]);
        else {
            fprintf(stderr, "abx ledger: unexpected argument '%s'\n", argv[i]);
            return 2;
        }
    }
    char buf[4096];
    if (!path) { /* the server's default: ledger.path, .abx/ledger.db beside the config, or in abx's home */
        abx_diags d = {0};
        abx_config cfg;
        if (abx_config_load(&cfg, config, &d) != 0) {
            fprintf(stderr, "abx ledger: cannot load %s\n", config ? config : "the embedded default");
            abx_diags_release(&d);
            return 2;
        }
        char *p = abx_ledger_default_path(&cfg, false);
        snprintf(buf, sizeof buf, "%s", p ? p : "");
        abx_free(p);
        abx_config_release(&cfg);
        abx_diags_release(&d);
        path = buf;
    }
    char *home = abx_home_dir();
    char *head = home ? abx_ledger_head_path(home, path, false) : NULL;
    abx_free(home);
    int rc = ledger_sub(sub, path, head, anchor, group, n, i_know);
    abx_free(head);
    return rc;
}

/* abx ledger reset --i-know: the ledger (and its archive) is moved aside, never deleted,
 * and a new chain starts whose first event records the reset: who, when, the old head
 * and where the old files went. Refused while a server holds the ledger. */
static int ledger_reset(const char *path, const char *head)
{
    char *lock = abx_asprintf("%s.lock", path);
    int lfd = lock ? open(lock, O_RDWR | O_CREAT | O_CLOEXEC, 0600) : -1;
    abx_free(lock);
    if (lfd < 0 || flock(lfd, LOCK_EX | LOCK_NB) != 0) {
        fprintf(stderr, "abx ledger reset: the ledger %s is in use by a running server; stop it first\n", path);
        if (lfd >= 0)
            close(lfd);
        return 1;
    }
    uint64_t hc = 0;
    char hh[65] = "", anchor[160] = "", stamp[32];
    bool had_head = head && abx_ledger_head_read(head, &hc, hh) == 0;
    if (access(path, F_OK) == 0 && abx_ledger_anchor(path, anchor, sizeof anchor) != 0)
        anchor[0] = '\0';
    abx_iso8601(abx_wall_ms(), stamp);
    for (char *c = stamp; *c; c++)
        if (*c == ':' || *c == '.')
            *c = '-';
    char *moved = abx_asprintf("%s.reset-%s", path, stamp);
    static const char *const suffix[] = {"", "-wal", "-shm", ".archive"};
    bool any = false;
    for (size_t i = 0; moved && i < ABX_ARRAY_LEN(suffix); i++) {
        char *from = abx_asprintf("%s%s", path, suffix[i]), *to = abx_asprintf("%s%s", moved, suffix[i]);
        if (from && to && access(from, F_OK) == 0) {
            if (rename(from, to) != 0) {
                fprintf(stderr, "abx ledger reset: cannot move %s to %s: %s\n", from, to, strerror(errno));
                abx_free(from);
                abx_free(to);
                abx_free(moved);
                close(lfd);
                return 1;
            }
            any = true;
        }
        abx_free(from);
        abx_free(to);
    }
    if (head)
        unlink(head);
    close(lfd);
    char err[1024] = "";
    abx_ledger_opts lo = {.path = path, .sync_full = true, .head_path = head};
    abx_ledger *l = abx_ledger_open(&lo, err, sizeof err);
    if (!l) {
        fprintf(stderr, "abx ledger reset: %s\n", err);
        abx_free(moved);
        return 1;
    }
    char at[32], rid[33], who[64];
    abx_iso8601(abx_wall_ms(), at);
    unsigned char rnd[16] = {0};
    if (abx_random(rnd, sizeof rnd) != 0)
        memset(rnd, 0x5a, sizeof rnd);
    abx_hex(rnd, sizeof rnd, rid);
    snprintf(who, sizeof who, "operator:uid=%d", (int)getuid());
    json_t *events = json_pack("[{s:s, s:s, s:s, s:s, s:s, s:s, s:s}, {s:s, s:s, s:s?, s:s?, s:o, s:s?}]", "kind",
                               "received", "at", at, "request_id", rid, "principal", who, "op", "ledger.reset", "door",
                               "cli", "client", "local", "kind", "reset", "at", at, "previous_anchor",
                               anchor[0] ? anchor : NULL, "moved_to", any ? moved : NULL, "previous_head",
                               had_head ? json_pack("{s:I, s:s}", "count", (json_int_t)hc, "hash", hh) : json_null(),
                               "reason", "abx ledger reset --i-know");
    abx_ledger_call call = {.request_id = rid, .principal = who, .op = "ledger.reset", .door = "cli",
                            .client = "local", .events = events, .durable = true};
    uint64_t g = events ? abx_ledger_record(l, &call) : 0;
    json_decref(events);
    abx_ledger_close(l);
    if (!g) {
        fprintf(stderr, "abx ledger reset: the reset could not be recorded\n");
        abx_free(moved);
        return 1;
    }
    printf("a new chain starts in %s; its first event records the reset", path);
    if (any)
        printf(" (the old ledger is in %s)", moved);
    printf("\n");
    abx_free(moved);
    return 0;
}

static int ledger_sub(const char *sub, const char *path, const char *head, const char *anchor, int64_t group, int n,
                      bool i_know)
{
    char err[512] = "";
    if (strcmp(sub, "verify") == 0) {
        uint64_t events = 0;
        int rc = abx_ledger_verify(path, anchor, err, sizeof err, &events);
        uint64_t hc;
        char hh[65];
        if (rc == 0 && head && abx_ledger_head_read(head, &hc, hh) == 0 &&
            abx_ledger_head_check(path, hc, hh, err, sizeof err) != 0)
            rc = 1; /* intact inside, but not the ledger abx wrote */
        if (rc == 0)
            printf("ok: %llu events, chain intact%s\n", (unsigned long long)events, anchor ? ", anchor matches" : "");
        else
            printf("TAMPERED or damaged: %s\n", err);
        return rc;
    }
    if (strcmp(sub, "anchor") == 0) {
        char a[128];
        if (abx_ledger_anchor(path, a, sizeof a) != 0) {
            fprintf(stderr, "abx ledger: cannot read %s\n", path);
            return 1;
        }
        puts(a);
        return 0;
    }
    if (strcmp(sub, "reset") == 0) {
        if (!i_know) {
            fprintf(stderr, "abx ledger reset starts a new chain: the ledger is moved aside and abx stops checking "
                            "that it continues. Pass --i-know to do it.\n");
            return 2;
        }
        return ledger_reset(path, head);
    }
    if (strcmp(sub, "export") == 0)
        return abx_ledger_export(path, stdout, err, sizeof err) == 0 ? 0 : (fprintf(stderr, "%s\n", err), 1);
    if (strcmp(sub, "tail") == 0 || strcmp(sub, "show") == 0) {
        if (strcmp(sub, "show") == 0 && group <= 0) {
            fprintf(stderr, "usage: abx ledger show GROUP\n");
            return 2;
        }
        return abx_ledger_print(path, group, n, stdout, err, sizeof err) == 0 ? 0 : (fprintf(stderr, "%s\n", err), 1);
    }
    fprintf(stderr, "abx ledger: unknown subcommand '%s'\n", sub);
    return 2;
}
