/* test_walk.c — unit tests of src/builtin/files/walk.c, the one directory walker of the
 * files namespace, on a real temporary tree and without a request (FILES_WALK_NONE: the
 * policy rules are tested black-box in tests/blackbox/test_files_walk.py). What is
 * tested here are the walker's own rules (walk.h): sorted names, hidden names, symlinks
 * delivered and never entered (a loop, a link out of the tree), the depth cap (lenient
 * and strict), entry and byte limits with truncation, prune and post order.
 * The tests own only the mkdtemp directories they make and write nowhere else. */
#include <stdarg.h>
#include <stddef.h>
#include <setjmp.h>
#include <stdint.h>
#include <cmocka.h>

#include <errno.h>
#include <fcntl.h>
#include <ftw.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "builtin/files/walk.h"
#include "pipeline/pipeline.h" /* the test builds the request a context stands for */

typedef struct fixture {
    char base[256]; /* the walked tree */
    char out[256];  /* a directory outside it */
    int fd;
} fixture;

static int rm_one(const char *path, const struct stat *sb, int flag, struct FTW *ftw)
{
    (void)sb;
    (void)ftw;
    return flag == FTW_DP ? rmdir(path) : unlink(path);
}

static void mk(fixture *f, const char *rel, bool dir)
{
    char p[4096];
    snprintf(p, sizeof p, "%s/%s", f->base, rel);
    if (dir) {
        assert_int_equal(mkdir(p, 0755), 0);
    } else {
        FILE *fp = fopen(p, "w");
        assert_non_null(fp);
        fputs("0123456789", fp);
        fclose(fp);
    }
}

static void link_to(fixture *f, const char *target, const char *rel)
{
    char p[4096];
    snprintf(p, sizeof p, "%s/%s", f->base, rel);
    assert_int_equal(symlink(target, p), 0);
}

static int setup(void **state)
{
    fixture *f = calloc(1, sizeof *f);
    snprintf(f->base, sizeof f->base, "/tmp/abx-walk-XXXXXX");
    snprintf(f->out, sizeof f->out, "/tmp/abx-walk-out-XXXXXX");
    if (!mkdtemp(f->base) || !mkdtemp(f->out))
        return -1;
    *state = f;
    return 0;
}

static int teardown(void **state)
{
    fixture *f = *state;
    if (f->fd > 0)
        close(f->fd);
    nftw(f->base, rm_one, 16, FTW_DEPTH | FTW_PHYS);
    nftw(f->out, rm_one, 16, FTW_DEPTH | FTW_PHYS);
    free(f);
    return 0;
}

static int open_base(fixture *f)
{
    f->fd = open(f->base, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
    assert_true(f->fd >= 0);
    return f->fd;
}

/* What a walk delivered: "rel:type" joined by ',' (type f, d, l; post entries "rel:up"). */
typedef struct seen {
    char text[65536];
    int n;
    const char *prune; /* a rel not to enter */
    bool take;         /* count each entry with files_walk_take */
    int64_t charge;    /* bytes to charge per entry */
} seen;

static files_walk_step record(files_walk *w, const files_walk_entry *e, void *ud)
{
    seen *s = ud;
    if (s->take && !files_walk_take(w))
        return FILES_WALK_STOP;
    if (s->charge && !files_walk_charge(w, s->charge))
        return FILES_WALK_STOP;
    const char *type = e->post ? "up" : S_ISLNK(e->st.st_mode) ? "l" : S_ISDIR(e->st.st_mode) ? "d" : "f";
    size_t len = strlen(s->text);
    snprintf(s->text + len, sizeof s->text - len, "%s%s:%s", len ? "," : "", e->rel, type);
    s->n++;
    return s->prune && strcmp(s->prune, e->rel) == 0 ? FILES_WALK_PRUNE : FILES_WALK_NEXT;
}

static abx_err run(fixture *f, files_walk_opts *o, seen *s, bool *truncated)
{
    return files_walk_run(o, open_base(f), NULL, f->base, "path", record, s, truncated);
}

static void test_sorted_and_hidden(void **state)
{
    fixture *f = *state;
    mk(f, "b", false);
    mk(f, "a", false);
    mk(f, ".h", false);
    mk(f, "c", true);
    mk(f, "c/x", false);
    mk(f, "c/.y", false);
    seen s = {0};
    files_walk_opts o = {.check = FILES_WALK_NONE};
    assert_int_equal(run(f, &o, &s, NULL), ABX_OK);
    assert_string_equal(s.text, "a:f,b:f,c:d,c/x:f");
    close(f->fd);
    seen h = {0};
    o.hidden = true;
    assert_int_equal(run(f, &o, &h, NULL), ABX_OK);
    assert_string_equal(h.text, ".h:f,a:f,b:f,c:d,c/.y:f,c/x:f");
}

static void test_symlinks_are_never_entered(void **state)
{
    fixture *f = *state;
    mk(f, "d", true);
    mk(f, "d/f", false);
    link_to(f, ".", "loop");     /* a loop to the top */
    link_to(f, "..", "d/up");    /* a loop from below, and out of the tree */
    link_to(f, f->out, "out");   /* out of the tree */
    char secret[300];
    snprintf(secret, sizeof secret, "%s/secret", f->out);
    FILE *fp = fopen(secret, "w");
    assert_non_null(fp);
    fclose(fp);
    seen s = {0};
    files_walk_opts o = {.check = FILES_WALK_NONE, .hidden = true};
    assert_int_equal(run(f, &o, &s, NULL), ABX_OK);
    assert_string_equal(s.text, "d:d,d/f:f,d/up:l,loop:l,out:l");
}

static void test_depth_cap(void **state)
{
    fixture *f = *state;
    mk(f, "d", true);
    mk(f, "d/d", true);
    mk(f, "d/d/d", true);
    mk(f, "d/d/d/d", true);
    mk(f, "d/d/d/d/f", false);
    seen s = {0};
    files_walk_opts o = {.check = FILES_WALK_NONE, .max_depth = 3};
    assert_int_equal(run(f, &o, &s, NULL), ABX_OK); /* the third level is shown, not entered */
    assert_string_equal(s.text, "d:d,d/d:d,d/d/d:d");
    close(f->fd);
    /* strict: a tree deeper than the cap fails the walk, with the reason in the reply */
    abx_reply r = {.fd = -1};
    seen t = {0};
    o.strict = true;
    o.r = &r;
    assert_int_equal(run(f, &o, &t, NULL), ABX_E_FILES_IO);
    assert_int_equal(r.err, ABX_E_FILES_IO);
    assert_non_null(strstr(r.message, "deeper than 3 levels"));
    abx_free(r.message);
    json_decref(r.details);
    close(f->fd);
    seen u = {0};
    o.max_depth = 5; /* deep enough: the whole tree */
    assert_int_equal(run(f, &o, &u, NULL), ABX_OK);
    assert_string_equal(u.text, "d:d,d/d:d,d/d/d:d,d/d/d/d:d,d/d/d/d/f:f");
}

static void test_entry_and_byte_limits(void **state)
{
    fixture *f = *state;
    mk(f, "a", false);
    mk(f, "b", false);
    mk(f, "c", false);
    bool truncated = false;
    seen s = {.take = true};
    files_walk_opts o = {.check = FILES_WALK_NONE, .max_entries = 2};
    assert_int_equal(run(f, &o, &s, &truncated), ABX_OK);
    assert_string_equal(s.text, "a:f,b:f");
    assert_true(truncated);
    close(f->fd);
    seen all = {.take = true};
    o.max_entries = 3; /* exactly as many as there are: not truncated */
    assert_int_equal(run(f, &o, &all, &truncated), ABX_OK);
    assert_int_equal(all.n, 3);
    assert_false(truncated);
    close(f->fd);
    seen b = {.charge = 10};
    files_walk_opts ob = {.check = FILES_WALK_NONE, .max_bytes = 25};
    assert_int_equal(run(f, &ob, &b, &truncated), ABX_OK);
    assert_string_equal(b.text, "a:f,b:f");
    assert_true(truncated);
}

static void test_prune_and_post_order(void **state)
{
    fixture *f = *state;
    mk(f, "p", true);
    mk(f, "p/in", false);
    mk(f, "q", true);
    mk(f, "q/r", true);
    mk(f, "q/r/s", false);
    seen s = {.prune = "p"};
    files_walk_opts o = {.check = FILES_WALK_NONE, .post = true};
    assert_int_equal(run(f, &o, &s, NULL), ABX_OK);
    /* p is pruned (no post for a directory never entered); q's entries come before q again */
    assert_string_equal(s.text, "p:d,q:d,q/r:d,q/r/s:f,q/r:up,q:up");
}

static void test_iterator_and_prefix(void **state)
{
    fixture *f = *state;
    mk(f, "x", true);
    mk(f, "x/y", false);
    files_walk_opts o = {.check = FILES_WALK_NONE};
    int err = 0;
    files_walk *w = files_walk_begin(&o, open_base(f), "top", "/canon", &err);
    assert_non_null(w);
    files_walk_entry e;
    assert_int_equal(files_walk_next(w, &e), 1);
    assert_string_equal(e.rel, "top/x");
    assert_string_equal(e.abs, "/canon/x");
    assert_int_equal(e.depth, 0);
    assert_int_equal(files_walk_next(w, &e), 1);
    assert_string_equal(e.rel, "top/x/y");
    assert_string_equal(e.name, "y");
    assert_int_equal(e.depth, 1);
    assert_int_equal(files_walk_next(w, &e), 0);
    assert_false(files_walk_truncated(w));
    files_walk_end(w);
    /* a start that is not a directory cannot be walked */
    int fd = openat(f->fd, "x/y", O_RDONLY | O_CLOEXEC);
    assert_true(fd >= 0);
    assert_null(files_walk_begin(&o, fd, NULL, "/canon/x/y", &err));
    assert_int_equal(err, ENOTDIR);
    close(fd);
}

/* files_pread, the reader of files.read's descriptors (O_NONBLOCK left set): a read that
 * answers EAGAIN clears the flag and waits instead of failing. A pipe stands in for the
 * rare regular file that honours O_NONBLOCK (FUSE); its writer comes 50 ms late. */
static void *late_writer(void *arg)
{
    usleep(50 * 1000);
    ssize_t w = write(*(int *)arg, "late", 4);
    (void)w;
    return NULL;
}

static void test_pread_waits_instead_of_eagain(void **state)
{
    fixture *f = *state;
    int p[2];
    assert_int_equal(pipe2(p, O_NONBLOCK), 0);
    char buf[8];
    errno = 0;
    assert_int_equal(read(p[0], buf, sizeof buf), -1); /* the flag is in force */
    assert_int_equal(errno, EAGAIN);
    pthread_t t;
    assert_int_equal(pthread_create(&t, NULL, late_writer, &p[1]), 0);
    ssize_t g = files_pread(p[0], buf, sizeof buf, -1);
    pthread_join(t, NULL);
    assert_int_equal(g, 4);
    assert_memory_equal(buf, "late", 4);
    assert_int_equal(fcntl(p[0], F_GETFL) & O_NONBLOCK, 0);
    close(p[1]);
    assert_int_equal(files_pread(p[0], buf, sizeof buf, -1), 0); /* end of file */
    close(p[0]);
    /* a positioned read on a regular file with the flag set reads as usual */
    char path[300];
    snprintf(path, sizeof path, "%s/digits", f->base);
    int fd = open(path, O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0600);
    assert_true(fd >= 0);
    assert_int_equal(write(fd, "0123456789", 10), 10);
    close(fd);
    int ro = open(path, O_RDONLY | O_NONBLOCK | O_CLOEXEC);
    assert_true(ro >= 0);
    assert_int_equal(files_pread(ro, buf, 4, 3), 4);
    assert_memory_equal(buf, "3456", 4);
    close(ro);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test_setup_teardown(test_sorted_and_hidden, setup, teardown),
        cmocka_unit_test_setup_teardown(test_symlinks_are_never_entered, setup, teardown),
        cmocka_unit_test_setup_teardown(test_depth_cap, setup, teardown),
        cmocka_unit_test_setup_teardown(test_entry_and_byte_limits, setup, teardown),
        cmocka_unit_test_setup_teardown(test_prune_and_post_order, setup, teardown),
        cmocka_unit_test_setup_teardown(test_iterator_and_prefix, setup, teardown),
        cmocka_unit_test_setup_teardown(test_pread_waits_instead_of_eagain, setup, teardown),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
