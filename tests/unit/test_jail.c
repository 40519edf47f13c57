/* test_jail.c — unit tests of src/sandbox/jail.c against a real temporary tree:
 * plain opens, escapes by "..", absolute names and symlinks, /proc magic links, FIFOs,
 * abx_jail_open_parent, and a thread that swaps a directory for a symlink to outside
 * while the main thread keeps opening a file beneath it.
 * The tests own only the two mkdtemp directories they make ("root" and "outside")
 * and must never write anywhere else. */
#include <stdarg.h>
#include <stddef.h>
#include <setjmp.h>
#include <stdint.h>
#include <cmocka.h>

#include <errno.h>
#include <fcntl.h>
#include <ftw.h>
#include <limits.h>
#include <pthread.h>
#include <signal.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "sandbox/jail.h"

/* ------------------------------------------------------------- helpers ---- */

typedef struct fixture {
    char base[256]; /* the jail root */
    char out[256];  /* a directory outside it holding a "secret" */
    int rootfd;
} fixture;

static int rm_one(const char *path, const struct stat *sb, int flag, struct FTW *ftw)
{
    (void)sb;
    (void)ftw;
    return flag == FTW_DP ? rmdir(path) : unlink(path);
}

/* FTW_PHYS: never follow the links that point outside on purpose. */
static void rm_rf(const char *dir)
{
    if (!strstr(dir, "/abx-jail-"))
        return;
    if (nftw(dir, rm_one, 16, FTW_DEPTH | FTW_PHYS) != 0)
        fprintf(stderr, "cleanup of %s failed\n", dir);
}

static void write_file(const char *dir, const char *rel, const char *text)
{
    char p[600];
    snprintf(p, sizeof p, "%s/%s", dir, rel);
    int fd = open(p, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
    assert_true(fd >= 0);
    size_t n = strlen(text);
    assert_int_equal(write(fd, text, n), (ssize_t)n);
    close(fd);
}

static void mk_dir(const char *dir, const char *rel)
{
    char p[600];
    snprintf(p, sizeof p, "%s/%s", dir, rel);
    assert_int_equal(mkdir(p, 0755), 0);
}

static void mk_link(const char *target, const char *dir, const char *rel)
{
    char p[600];
    snprintf(p, sizeof p, "%s/%s", dir, rel);
    assert_int_equal(symlink(target, p), 0);
}

/* Read all of fd (small files) into buf as a string. */
static const char *slurp(int fd, char *buf, size_t len)
{
    ssize_t n = read(fd, buf, len - 1);
    assert_true(n >= 0);
    buf[n] = '\0';
    return buf;
}

static int fx_setup(void **state)
{
    fixture *f = calloc(1, sizeof *f);
    assert_non_null(f);
    char t1[] = "/tmp/abx-jail-root-XXXXXX", t2[] = "/tmp/abx-jail-out-XXXXXX";
    assert_non_null(mkdtemp(t1));
    assert_non_null(mkdtemp(t2));
    char *r1 = realpath(t1, NULL), *r2 = realpath(t2, NULL);
    assert_non_null(r1);
    assert_non_null(r2);
    assert_true(strlen(r1) < 200 && strlen(r2) < 200);
    strcpy(f->base, r1);
    strcpy(f->out, r2);
    free(r1);
    free(r2);
    write_file(f->base, "file", "inside");
    write_file(f->out, "secret", "outside");
    f->rootfd = abx_jail_open_root(f->base);
    assert_true(f->rootfd >= 0);
    *state = f;
    return 0;
}

static int fx_teardown(void **state)
{
    fixture *f = *state;
    close(f->rootfd);
    rm_rf(f->base);
    rm_rf(f->out);
    free(f);
    return 0;
}

/* --------------------------------------------------------------- tests ---- */

static void test_available(void **state)
{
    (void)state;
    /* The project requires Linux >= 5.6; a false here means the jail cannot work. */
    assert_true(abx_jail_available());
}

static void test_open_root(void **state)
{
    fixture *f = *state;
    int fd = abx_jail_open_root(f->base);
    assert_true(fd >= 0);
    int fl = fcntl(fd, F_GETFL);
    assert_true(fl >= 0);
    assert_true((fl & O_PATH) == O_PATH);
    assert_true(fcntl(fd, F_GETFD) & FD_CLOEXEC);
    close(fd);

    assert_int_equal(abx_jail_open_root(NULL), -EINVAL);
    assert_int_equal(abx_jail_open_root("relative/dir"), -EINVAL);
    char p[600];
    snprintf(p, sizeof p, "%s/no-such-dir", f->base);
    assert_int_equal(abx_jail_open_root(p), -ENOENT);
    snprintf(p, sizeof p, "%s/file", f->base);
    assert_int_equal(abx_jail_open_root(p), -ENOTDIR);
}

static void test_open_plain_file(void **state)
{
    fixture *f = *state;
    char buf[64];
    int fd = abx_jail_open(f->rootfd, "file", O_RDONLY, 0);
    assert_true(fd >= 0);
    assert_string_equal(slurp(fd, buf, sizeof buf), "inside");
    /* O_CLOEXEC is added even though the caller did not ask. */
    assert_true(fcntl(fd, F_GETFD) & FD_CLOEXEC);
    close(fd);

    mk_dir(f->base, "sub");
    write_file(f->base, "sub/g", "deeper");
    fd = abx_jail_open(f->rootfd, "sub/./g", O_RDONLY, 0);
    assert_true(fd >= 0);
    assert_string_equal(slurp(fd, buf, sizeof buf), "deeper");
    close(fd);
    /* ".." that stays inside is fine. */
    fd = abx_jail_open(f->rootfd, "sub/../file", O_RDONLY, 0);
    assert_true(fd >= 0);
    close(fd);

    /* "." is the root itself. */
    fd = abx_jail_open(f->rootfd, ".", O_RDONLY | O_DIRECTORY, 0);
    assert_true(fd >= 0);
    struct stat a, b;
    assert_int_equal(fstat(fd, &a), 0);
    assert_int_equal(stat(f->base, &b), 0);
    assert_true(a.st_ino == b.st_ino && a.st_dev == b.st_dev);
    close(fd);

    assert_int_equal(abx_jail_open(f->rootfd, "missing", O_RDONLY, 0), -ENOENT);
    assert_int_equal(abx_jail_open(f->rootfd, "", O_RDONLY, 0), -EINVAL);
    assert_int_equal(abx_jail_open(f->rootfd, NULL, O_RDONLY, 0), -EINVAL);
    assert_int_equal(abx_jail_open(-1, "file", O_RDONLY, 0), -EBADF);
}

static void test_create_with_mode(void **state)
{
    fixture *f = *state;
    mode_t old = umask(022);
    int fd = abx_jail_open(f->rootfd, "new", O_WRONLY | O_CREAT | O_EXCL, 0640);
    umask(old);
    assert_true(fd >= 0);
    struct stat st;
    assert_int_equal(fstat(fd, &st), 0);
    assert_int_equal(st.st_mode & 0777, 0640);
    close(fd);
    char p[600];
    snprintf(p, sizeof p, "%s/new", f->base);
    assert_int_equal(access(p, F_OK), 0);
    /* Without O_CREAT the mode is ignored rather than refused by the kernel. */
    fd = abx_jail_open(f->rootfd, "file", O_RDONLY, 0644);
    assert_true(fd >= 0);
    close(fd);
}

static void test_escapes_refused(void **state)
{
    fixture *f = *state;
    mk_dir(f->base, "sub");
    assert_int_equal(abx_jail_open(f->rootfd, "../x", O_RDONLY, 0), -EXDEV);
    assert_int_equal(abx_jail_open(f->rootfd, "..", O_RDONLY, 0), -EXDEV);
    assert_int_equal(abx_jail_open(f->rootfd, "sub/../../x", O_RDONLY, 0), -EXDEV);
    assert_int_equal(abx_jail_open(f->rootfd, "/etc/passwd", O_RDONLY, 0), -EXDEV);
    char abs[600];
    snprintf(abs, sizeof abs, "%s/file", f->base);
    /* Even an absolute name that happens to lie inside the root. */
    assert_int_equal(abx_jail_open(f->rootfd, abs, O_RDONLY, 0), -EXDEV);
    /* The way out through ".." to the outside secret, spelled relatively. */
    char rel[700];
    const char *outname = strrchr(f->out, '/') + 1;
    snprintf(rel, sizeof rel, "../%s/secret", outname);
    assert_int_equal(abx_jail_open(f->rootfd, rel, O_RDONLY, 0), -EXDEV);
    /* Creating outside is refused the same way. */
    snprintf(rel, sizeof rel, "../%s/created", outname);
    assert_int_equal(abx_jail_open(f->rootfd, rel, O_WRONLY | O_CREAT, 0644), -EXDEV);
    char p[600];
    snprintf(p, sizeof p, "%s/created", f->out);
    assert_int_equal(access(p, F_OK), -1);
}

static void test_symlink_inside_to_outside_refused(void **state)
{
    fixture *f = *state;
    char target[600];
    snprintf(target, sizeof target, "%s/secret", f->out);
    mk_link(target, f->base, "abs_out");
    mk_link(f->out, f->base, "abs_outdir");
    const char *outname = strrchr(f->out, '/') + 1;
    snprintf(target, sizeof target, "../%s/secret", outname);
    mk_link(target, f->base, "rel_out");

    /* RESOLVE_NO_SYMLINKS answers before RESOLVE_BENEATH gets to look at the target */
    assert_int_equal(abx_jail_open(f->rootfd, "abs_out", O_RDONLY, 0), -ELOOP);
    assert_int_equal(abx_jail_open(f->rootfd, "abs_outdir/secret", O_RDONLY, 0), -ELOOP);
    assert_int_equal(abx_jail_open(f->rootfd, "rel_out", O_RDONLY, 0), -ELOOP);
    /* A dangling link out must not let O_CREAT make a file outside. */
    snprintf(target, sizeof target, "%s/made-through-link", f->out);
    mk_link(target, f->base, "dangling_out");
    assert_int_equal(abx_jail_open(f->rootfd, "dangling_out", O_WRONLY | O_CREAT, 0644), -ELOOP);
    assert_int_equal(access(target, F_OK), -1);
}

/* Names reaching the jail are canonical: a symlink inside the root was put there after
 * the policy check, and following it would open a name the policy never saw (a denied
 * file beside an allowed one). Refused, wherever it points. */
static void test_symlink_inside_to_inside_refused(void **state)
{
    fixture *f = *state;
    char buf[64];
    mk_dir(f->base, "dir");
    write_file(f->base, "dir/g", "gee");
    mk_link("file", f->base, "lfile");
    mk_link("dir", f->base, "ldir");
    mk_link("../file", f->base, "dir/up");

    assert_int_equal(abx_jail_open(f->rootfd, "lfile", O_RDONLY, 0), -ELOOP);
    assert_int_equal(abx_jail_open(f->rootfd, "ldir/g", O_RDONLY, 0), -ELOOP);
    assert_int_equal(abx_jail_open(f->rootfd, "dir/up", O_RDONLY, 0), -ELOOP);
    assert_int_equal(abx_jail_open(f->rootfd, "lfile", O_WRONLY | O_CREAT | O_TRUNC, 0644), -ELOOP);
    assert_int_equal(abx_jail_open(f->rootfd, "lfile", O_RDONLY | O_NOFOLLOW, 0), -ELOOP);
    /* the canonical names open */
    int fd = abx_jail_open(f->rootfd, "dir/g", O_RDONLY, 0);
    assert_true(fd >= 0);
    assert_string_equal(slurp(fd, buf, sizeof buf), "gee");
    close(fd);
    /* the link itself (O_PATH | O_NOFOLLOW): what delete and move act on */
    fd = abx_jail_open(f->rootfd, "lfile", O_PATH | O_NOFOLLOW, 0);
    assert_true(fd >= 0);
    struct stat st;
    assert_int_equal(fstatat(fd, "", &st, AT_EMPTY_PATH), 0);
    assert_true(S_ISLNK(st.st_mode));
    close(fd);
    /* ... but never through a symlinked directory */
    assert_int_equal(abx_jail_open(f->rootfd, "ldir/up", O_PATH | O_NOFOLLOW, 0), -ELOOP);
    /* the file itself is untouched */
    fd = abx_jail_open(f->rootfd, "file", O_RDONLY, 0);
    assert_true(fd >= 0);
    assert_string_equal(slurp(fd, buf, sizeof buf), "inside");
    close(fd);
}

static void test_magic_links_refused(void **state)
{
    fixture *f = *state;
    /* A symlink in the root to a /proc magic link: refused (it is absolute, so
     * RESOLVE_BENEATH answers EXDEV before the magic link is even reached). */
    mk_link("/proc/self/fd/0", f->base, "magic");
    int fd = abx_jail_open(f->rootfd, "magic", O_RDONLY, 0);
    assert_true(fd == -EXDEV || fd == -ELOOP);

    /* Beneath "/", the relative name reaches the magic link itself: -ELOOP. */
    int slash = abx_jail_open_root("/");
    assert_true(slash >= 0);
    assert_int_equal(abx_jail_open(slash, "proc/self/fd/0", O_RDONLY, 0), -ELOOP);
    char rel[64];
    int probe = open("/dev/null", O_RDONLY | O_CLOEXEC);
    assert_true(probe >= 0);
    snprintf(rel, sizeof rel, "proc/self/fd/%d", probe);
    assert_int_equal(abx_jail_open(slash, rel, O_RDONLY, 0), -ELOOP);
    snprintf(rel, sizeof rel, "proc/thread-self/fd/%d", probe);
    assert_int_equal(abx_jail_open(slash, rel, O_RDONLY, 0), -ELOOP);
    close(probe);
    /* /proc/self is a plain symlink: refused too (a canonical name never holds it);
     * the name it stands for opens. */
    assert_int_equal(abx_jail_open(slash, "proc/self/status", O_RDONLY, 0), -ELOOP);
    snprintf(rel, sizeof rel, "proc/%d/status", (int)getpid());
    fd = abx_jail_open(slash, rel, O_RDONLY, 0);
    assert_true(fd >= 0);
    close(fd);
    close(slash);
}

static void test_fifo_does_not_hang(void **state)
{
    fixture *f = *state;
    char p[600];
    snprintf(p, sizeof p, "%s/fifo", f->base);
    assert_int_equal(mkfifo(p, 0600), 0);
    /* Watchdog: if the open blocked, SIGALRM's default action kills the test. */
    alarm(5);
    int fd = abx_jail_open(f->rootfd, "fifo", O_RDONLY | O_NONBLOCK, 0);
    alarm(0);
    assert_true(fd >= 0);
    struct stat st;
    assert_int_equal(fstat(fd, &st), 0);
    assert_true(S_ISFIFO(st.st_mode));
    close(fd);
    /* A writer with no reader gets ENXIO at once instead of blocking. */
    alarm(5);
    fd = abx_jail_open(f->rootfd, "fifo", O_WRONLY | O_NONBLOCK, 0);
    alarm(0);
    assert_int_equal(fd, -ENXIO);
}

static void test_open_parent(void **state)
{
    fixture *f = *state;
    mk_dir(f->base, "a");
    mk_dir(f->base, "a/b");
    write_file(f->base, "a/b/c", "cee");
    const char *name = NULL;

    const char *rel = "a/b/c";
    int dfd = abx_jail_open_parent(f->rootfd, rel, &name);
    assert_true(dfd >= 0);
    assert_ptr_equal(name, rel + 4); /* points inside rel */
    assert_string_equal(name, "c");
    assert_true(fcntl(dfd, F_GETFD) & FD_CLOEXEC);
    struct stat st, want;
    assert_int_equal(fstatat(dfd, name, &st, AT_SYMLINK_NOFOLLOW), 0);
    char p[600];
    snprintf(p, sizeof p, "%s/a/b/c", f->base);
    assert_int_equal(stat(p, &want), 0);
    assert_true(st.st_ino == want.st_ino);
    /* The parent fd is usable for the *at calls the handlers make. */
    assert_int_equal(mkdirat(dfd, "made", 0755), 0);
    snprintf(p, sizeof p, "%s/a/b/made", f->base);
    assert_int_equal(access(p, F_OK), 0);
    close(dfd);

    /* A top-level name: the parent is the root itself. */
    dfd = abx_jail_open_parent(f->rootfd, "file", &name);
    assert_true(dfd >= 0);
    assert_string_equal(name, "file");
    assert_int_equal(fstat(dfd, &st), 0);
    assert_int_equal(stat(f->base, &want), 0);
    assert_true(st.st_ino == want.st_ino);
    close(dfd);

    /* The name need not exist (it is about to be created). */
    dfd = abx_jail_open_parent(f->rootfd, "a/new", &name);
    assert_true(dfd >= 0);
    assert_string_equal(name, "new");
    close(dfd);

    /* A symlink in the parent part is refused, even one that stays inside. */
    mk_link("a/b", f->base, "lab");
    assert_int_equal(abx_jail_open_parent(f->rootfd, "lab/c", &name), -ELOOP);
    /* A final symlink is only a name: its parent opens. */
    dfd = abx_jail_open_parent(f->rootfd, "lab", &name);
    assert_true(dfd >= 0);
    assert_string_equal(name, "lab");
    assert_int_equal(fstatat(dfd, name, &st, AT_SYMLINK_NOFOLLOW), 0);
    assert_true(S_ISLNK(st.st_mode));
    close(dfd);
}

static void test_open_parent_refusals(void **state)
{
    fixture *f = *state;
    const char *name = "unchanged";
    assert_int_equal(abx_jail_open_parent(f->rootfd, ".", &name), -EINVAL);
    assert_null(name);
    assert_int_equal(abx_jail_open_parent(f->rootfd, "a/.", &name), -EINVAL);
    assert_int_equal(abx_jail_open_parent(f->rootfd, "..", &name), -EINVAL);
    assert_int_equal(abx_jail_open_parent(f->rootfd, "file/..", &name), -EINVAL);
    assert_int_equal(abx_jail_open_parent(f->rootfd, "dir/", &name), -EINVAL);
    assert_int_equal(abx_jail_open_parent(f->rootfd, "", &name), -EINVAL);
    assert_int_equal(abx_jail_open_parent(f->rootfd, "x", NULL), -EINVAL);
    /* Parents that escape. */
    assert_int_equal(abx_jail_open_parent(f->rootfd, "../x", &name), -EXDEV);
    assert_null(name);
    assert_int_equal(abx_jail_open_parent(f->rootfd, "/etc/passwd", &name), -EXDEV);
    mk_dir(f->base, "sub");
    assert_int_equal(abx_jail_open_parent(f->rootfd, "sub/../../x", &name), -EXDEV);
    mk_link(f->out, f->base, "outdir");
    assert_int_equal(abx_jail_open_parent(f->rootfd, "outdir/secret", &name), -ELOOP);
    assert_int_equal(abx_jail_open_parent(f->rootfd, "outdir/new", &name), -ELOOP);
    /* A parent that is a file, or missing. */
    assert_int_equal(abx_jail_open_parent(f->rootfd, "file/x", &name), -ENOTDIR);
    assert_int_equal(abx_jail_open_parent(f->rootfd, "missing/x", &name), -ENOENT);
}

/* ---------------------------------------------------------------- race ---- */

typedef struct racer {
    int rootfd;
    atomic_bool stop;
    atomic_long swaps;
} racer;

/* Swap "d" (a real directory) and "l" (a symlink to the outside directory) with
 * RENAME_EXCHANGE, over and over: at any instant "d" is one or the other. */
static void *race_swapper(void *arg)
{
    racer *r = arg;
    while (!atomic_load(&r->stop)) {
        if (renameat2(r->rootfd, "d", r->rootfd, "l", RENAME_EXCHANGE) == 0)
            atomic_fetch_add(&r->swaps, 1);
    }
    return NULL;
}

static void test_race_swapped_symlink_never_escapes(void **state)
{
    fixture *f = *state;
    mk_dir(f->base, "d");
    write_file(f->base, "d/secret", "inside");
    mk_link(f->out, f->base, "l"); /* absolute link to outside/, which holds "secret" */

    /* Sanity: through the link itself the jail already refuses. */
    assert_int_equal(abx_jail_open(f->rootfd, "l/secret", O_RDONLY, 0), -ELOOP);

    racer r;
    r.rootfd = f->rootfd;
    atomic_init(&r.stop, false);
    atomic_init(&r.swaps, 0);
    pthread_t th;
    assert_int_equal(pthread_create(&th, NULL, race_swapper, &r), 0);

    int opened = 0, refused = 0, escaped = 0, other = 0;
    char buf[64];
    for (int i = 0; i < 20000; i++) {
        int fd = abx_jail_open(f->rootfd, "d/secret", O_RDONLY, 0);
        if (fd >= 0) {
            if (strcmp(slurp(fd, buf, sizeof buf), "inside") == 0)
                opened++;
            else
                escaped++;
            close(fd);
        } else if (fd == -EXDEV || fd == -ELOOP) {
            refused++;
        } else {
            other++; /* e.g. ENOENT in the instant between swaps */
        }
    }
    atomic_store(&r.stop, true);
    pthread_join(th, NULL);

    print_message("race: %d opened inside, %d refused, %d other, %ld swaps\n", opened,
                  refused, other, atomic_load(&r.swaps));
    assert_int_equal(escaped, 0);
    assert_true(atomic_load(&r.swaps) > 100); /* the race really ran */
    assert_true(opened > 0);
    assert_int_equal(opened + refused + other, 20000);
}

int main(void)
{
#define T(fn) cmocka_unit_test_setup_teardown(fn, fx_setup, fx_teardown)
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_available),
        T(test_open_root),
        T(test_open_plain_file),
        T(test_create_with_mode),
        T(test_escapes_refused),
        T(test_symlink_inside_to_outside_refused),
        T(test_symlink_inside_to_inside_refused),
        T(test_magic_links_refused),
        T(test_fifo_does_not_hang),
        T(test_open_parent),
        T(test_open_parent_refusals),
        T(test_race_swapped_symlink_never_escapes),
    };
#undef T
    return cmocka_run_group_tests(tests, NULL, NULL);
}
