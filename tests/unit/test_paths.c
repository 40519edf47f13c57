/* test_paths.c — unit tests of src/policy/paths.c: pattern validation, glob matching
 * (including its worst-case running time), jail roots, canonicalization against a
 * real temporary tree of symlinks, and abx_path_under.
 * The tests own only the temporary directory they make and must never touch anything
 * outside it (symlinks point outside only to a second temp dir of their own). */
#include <stdarg.h>
#include <stddef.h>
#include <setjmp.h>
#include <stdint.h>
#include <cmocka.h>

#include <errno.h>
#include <fcntl.h>
#include <ftw.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "policy/paths.h"

/* ------------------------------------------------------------- helpers ---- */

static double now_s(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec / 1e9;
}

/* A fresh temp tree per test: base is the realpath of the mkdtemp dir (so expected
 * strings do not depend on /tmp itself being a symlink). */
typedef struct tree {
    char base[256];
    char out[256]; /* a second dir, "outside" the first */
} tree;

static int rm_one(const char *path, const struct stat *sb, int flag, struct FTW *ftw)
{
    (void)sb;
    (void)ftw;
    return flag == FTW_DP ? rmdir(path) : unlink(path);
}

/* Depth-first, never following symlinks (FTW_PHYS): the links made by the tests
 * point outside on purpose. Only ever called on the mkdtemp directories below. */
static void rm_rf(const char *dir)
{
    if (!strstr(dir, "/abx-paths-"))
        return;
    if (nftw(dir, rm_one, 16, FTW_DEPTH | FTW_PHYS) != 0)
        fprintf(stderr, "cleanup of %s failed\n", dir);
}

static int tree_setup(void **state)
{
    tree *t = calloc(1, sizeof *t);
    assert_non_null(t);
    char tmpl[] = "/tmp/abx-paths-XXXXXX";
    char tmpl2[] = "/tmp/abx-paths-out-XXXXXX";
    assert_non_null(mkdtemp(tmpl));
    assert_non_null(mkdtemp(tmpl2));
    char *r1 = realpath(tmpl, NULL), *r2 = realpath(tmpl2, NULL);
    assert_non_null(r1);
    assert_non_null(r2);
    assert_true(strlen(r1) < sizeof t->base && strlen(r2) < sizeof t->out);
    strcpy(t->base, r1);
    strcpy(t->out, r2);
    free(r1);
    free(r2);
    *state = t;
    return 0;
}

static int tree_teardown(void **state)
{
    tree *t = *state;
    rm_rf(t->base);
    rm_rf(t->out);
    free(t);
    return 0;
}

static const char *P(const tree *t, const char *rel, char *buf)
{
    snprintf(buf, PATH_MAX, "%s/%s", t->base, rel);
    return buf;
}

static void mk_dir(const tree *t, const char *rel)
{
    char b[PATH_MAX];
    assert_int_equal(mkdir(P(t, rel, b), 0755), 0);
}

static void mk_file(const tree *t, const char *rel)
{
    char b[PATH_MAX];
    int fd = open(P(t, rel, b), O_WRONLY | O_CREAT | O_EXCL, 0644);
    assert_true(fd >= 0);
    close(fd);
}

static void mk_link(const tree *t, const char *target, const char *rel)
{
    char b[PATH_MAX];
    assert_int_equal(symlink(target, P(t, rel, b)), 0);
}

/* Canonicalize and compare with base + expected_rel (expected_rel "" = base). */
static void expect_canon_in(const tree *t, const char *anchor, const char *input,
                            const char *expected_rel)
{
    char *out = NULL;
    char want[PATH_MAX * 2];
    int rc = abx_path_canon(anchor, input, &out);
    if (rc != 0)
        fail_msg("canon(%s) failed: %d", input, rc);
    if (expected_rel[0])
        snprintf(want, sizeof want, "%s/%s", t->base, expected_rel);
    else
        snprintf(want, sizeof want, "%s", t->base);
    assert_string_equal(out, want);
    free(out);
}

static void expect_canon_abs(const char *anchor, const char *input, const char *want)
{
    char *out = NULL;
    int rc = abx_path_canon(anchor, input, &out);
    if (rc != 0)
        fail_msg("canon(%s) failed: %d", input, rc);
    assert_string_equal(out, want);
    free(out);
}

static void expect_canon_err(const char *anchor, const char *input, int err)
{
    char *out = (char *)"sentinel";
    int rc = abx_path_canon(anchor, input, &out);
    assert_int_equal(rc, err);
    assert_null(out);
}

/* ---------------------------------------------------------- validation ---- */

static void test_glob_valid_accepts(void **state)
{
    (void)state;
    static const char *ok[] = {
        "/", "/a", "/a/b/c", "/a/**", "/**", "/**/x", "/a/**/b/**", "/a/*.c",
        "/a/?/b", "/a/*x*y?", "/~", "/.hidden", "/a..b", "/\xff\xfe", "/caf\xc3\xa9",
        "/a b/c", "/*", "/?",
    };
    char err[128];
    for (size_t i = 0; i < sizeof ok / sizeof ok[0]; i++) {
        strcpy(err, "untouched");
        if (!abx_glob_valid(ok[i], err, sizeof err))
            fail_msg("rejected valid pattern \"%s\": %s", ok[i], err);
    }
}

static void test_glob_valid_rejects(void **state)
{
    (void)state;
    static const char *bad[] = {
        "", "a", "a/b", "**", "//", "/a//b", "/a/", "/.", "/..", "/./a", "/a/..",
        "/a/./b", "/a**", "/**b", "/***", "/a/b**c", "/a/[ab]", "/a]", "/a\\*",
        "/a\nb", "/a\tb", "/a\x7f", "/a\x01",
    };
    char err[128];
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        err[0] = '\0';
        if (abx_glob_valid(bad[i], err, sizeof err))
            fail_msg("accepted invalid pattern \"%s\"", bad[i]);
        assert_true(strlen(err) > 0); /* a message for the user */
    }
    assert_false(abx_glob_valid(NULL, err, sizeof err));
    /* No buffer, and a tiny one, are both fine. */
    assert_false(abx_glob_valid("/a//b", NULL, 0));
    char tiny[4] = "xyz";
    assert_false(abx_glob_valid("/a//b", tiny, sizeof tiny));
    assert_int_equal(strlen(tiny), 3);
}

/* ------------------------------------------------------------ matching ---- */

static void test_glob_match_literal(void **state)
{
    (void)state;
    assert_true(abx_glob_match("/etc/passwd", "/etc/passwd"));
    assert_false(abx_glob_match("/etc/passwd", "/etc/passwd2"));
    assert_false(abx_glob_match("/etc/passwd", "/etc"));
    assert_false(abx_glob_match("/etc/passwd", "/etc/passwd/x"));
    assert_false(abx_glob_match("/etc", "/etc/passwd"));
    assert_true(abx_glob_match("/", "/"));
    assert_false(abx_glob_match("/", "/a"));
    assert_false(abx_glob_match("/a", "/"));
    assert_true(abx_glob_match("/caf\xc3\xa9", "/caf\xc3\xa9"));
    /* literal segments compare bytes: a broken sequence matches only itself */
    assert_true(abx_glob_match("/w/\xc3/x", "/w/\xc3/x"));
    assert_false(abx_glob_match("/w/\xc3", "/w/\xc3\xa9"));
    assert_false(abx_glob_match("/w/ab/**", "/w/a/b"));
    assert_true(abx_glob_prefix_match("/w/ab/**", "/w/ab"));
    assert_false(abx_glob_prefix_match("/w/ab/**", "/w/abc"));
    assert_false(abx_glob_match("/a", "a"));
    assert_false(abx_glob_match(NULL, "/a"));
    assert_false(abx_glob_match("/a", NULL));
}

static void test_glob_match_star(void **state)
{
    (void)state;
    assert_true(abx_glob_match("/w/*.c", "/w/main.c"));
    assert_true(abx_glob_match("/w/*.c", "/w/.c"));
    assert_false(abx_glob_match("/w/*.c", "/w/main.h"));
    assert_false(abx_glob_match("/w/*.c", "/w/src/main.c")); /* never crosses '/' */
    assert_false(abx_glob_match("/w/*", "/w"));
    assert_true(abx_glob_match("/w/*", "/w/x"));
    assert_false(abx_glob_match("/w/*", "/w/x/y"));
    assert_true(abx_glob_match("/*", "/anything"));
    assert_false(abx_glob_match("/*", "/"));
    assert_true(abx_glob_match("/w/a*b*c", "/w/abc"));
    assert_true(abx_glob_match("/w/a*b*c", "/w/aXbYbZc"));
    assert_false(abx_glob_match("/w/a*b*c", "/w/aXbYbZcd"));
    assert_true(abx_glob_match("/w/*/*/f", "/w/x/y/f"));
    assert_false(abx_glob_match("/w/*/*/f", "/w/x/f"));
    assert_true(abx_glob_match("/w/**/", "/w") == false); /* invalid pattern, no match */
}

static void test_glob_match_question(void **state)
{
    (void)state;
    assert_true(abx_glob_match("/w/?.c", "/w/a.c"));
    assert_false(abx_glob_match("/w/?.c", "/w/ab.c"));
    assert_false(abx_glob_match("/w/?.c", "/w/.c"));
    assert_false(abx_glob_match("/w?x", "/w/x")); /* '?' is never '/' */
    /* One character, not one byte: "é" is two bytes, "😀" four. */
    assert_true(abx_glob_match("/w/?", "/w/\xc3\xa9"));
    assert_false(abx_glob_match("/w/??", "/w/\xc3\xa9"));
    assert_true(abx_glob_match("/w/?", "/w/\xf0\x9f\x98\x80"));
    /* Bytes that are not UTF-8 are characters of their own. */
    assert_true(abx_glob_match("/w/??", "/w/\xff\xfe"));
    assert_true(abx_glob_match("/w/??", "/w/\xc3("));
    /* A `*` never ends inside a character: "*\xa9" does not match "é". */
    assert_false(abx_glob_match("/w/*\xa9", "/w/\xc3\xa9"));
    assert_true(abx_glob_match("/w/*\xc3\xa9", "/w/caf\xc3\xa9"));
}

static void test_glob_match_globstar(void **state)
{
    (void)state;
    assert_true(abx_glob_match("/a/**", "/a"));
    assert_true(abx_glob_match("/a/**", "/a/b"));
    assert_true(abx_glob_match("/a/**", "/a/b/c/d"));
    assert_false(abx_glob_match("/a/**", "/ab"));
    assert_false(abx_glob_match("/a/**", "/"));
    assert_false(abx_glob_match("/a/**", "/b/a"));
    assert_true(abx_glob_match("/**", "/"));
    assert_true(abx_glob_match("/**", "/x/y/z"));
    assert_true(abx_glob_match("/a/**/b", "/a/b"));
    assert_true(abx_glob_match("/a/**/b", "/a/x/b"));
    assert_true(abx_glob_match("/a/**/b", "/a/x/y/b"));
    assert_true(abx_glob_match("/a/**/b", "/a/b/b"));
    assert_false(abx_glob_match("/a/**/b", "/a/x/bc"));
    assert_false(abx_glob_match("/a/**/b", "/a/b/c"));
    assert_true(abx_glob_match("/**/x/**/y", "/x/y"));
    assert_true(abx_glob_match("/**/x/**/y", "/p/x/q/r/y"));
    assert_false(abx_glob_match("/**/x/**/y", "/p/y/q/x"));
    assert_true(abx_glob_match("/**/*.c", "/a/b/c.c"));
    assert_true(abx_glob_match("/**/*.c", "/c.c"));
    assert_false(abx_glob_match("/**/*.c", "/a/b.c/d"));
    assert_true(abx_glob_match("/a/**/**/b", "/a/b"));
    assert_false(abx_glob_match("/a/*/**", "/a"));
    assert_true(abx_glob_match("/a/*/**", "/a/b"));
    /* The backtrack must retry, not give up at the first partial match. */
    assert_true(abx_glob_match("/**/a/b", "/a/a/a/b"));
    assert_false(abx_glob_match("/**/a/b", "/a/a/a/c"));
}

static void test_glob_match_is_not_exponential(void **state)
{
    (void)state;
    /* A 200-segment path that almost matches: every `**` has to try many splits. */
    char path[200 * 2 + 8];
    size_t n = 0;
    for (int i = 0; i < 200; i++) {
        path[n++] = '/';
        path[n++] = 'a';
    }
    path[n] = '\0';
    char pat_long[512];
    strcpy(pat_long, "");
    for (int i = 0; i < 40; i++)
        strcat(pat_long, "/**/a");
    strcat(pat_long, "/x");

    /* The same pathology inside one segment: many `*` against a 255-byte name. */
    char seg_path[300], seg_pat[300];
    seg_path[0] = '/';
    memset(seg_path + 1, 'a', 255);
    seg_path[256] = '\0';
    strcpy(seg_pat, "/");
    for (int i = 0; i < 30; i++)
        strcat(seg_pat, "*a");
    strcat(seg_pat, "*b");

    double t0 = now_s();
    for (int rep = 0; rep < 20; rep++) {
        assert_false(abx_glob_match("/**/**/**/**/x", path));
        assert_false(abx_glob_match(pat_long, path));
        assert_false(abx_glob_match(seg_pat, seg_path));
    }
    path[n - 1] = 'x';
    assert_true(abx_glob_match("/**/**/**/**/x", path));
    double dt = now_s() - t0;
    if (dt >= 1.0)
        fail_msg("pathological globs took %.3f s", dt);
}

/* ----------------------------------------------------------------- root ---- */

static void test_glob_root(void **state)
{
    (void)state;
    static const char *cases[][2] = {
        {"/w/**", "/w"},
        {"/w/*.c", "/w"},
        {"/etc/passwd", "/etc"},
        {"/**", "/"},
        {"/x", "/"},
        {"/", "/"},
        {"/*", "/"},
        {"/a/b/**/c/*", "/a/b"},
        {"/a/b?/c", "/a"},
        {"/a/b/c/d", "/a/b/c"},
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        char *r = abx_glob_root(cases[i][0]);
        assert_non_null(r);
        if (strcmp(r, cases[i][1]) != 0)
            fail_msg("root of %s: got %s, want %s", cases[i][0], r, cases[i][1]);
        free(r);
    }
    assert_null(abx_glob_root("relative/**"));
    assert_null(abx_glob_root("/a//b"));
    assert_null(abx_glob_root(NULL));
}

/* Every path a pattern matches lies under its root: the jail never has to open
 * anything above it. */
static void test_glob_root_contains_matches(void **state)
{
    (void)state;
    static const char *cases[][2] = {
        {"/w/**", "/w"}, {"/w/**", "/w/a/b"}, {"/w/*.c", "/w/m.c"},
        {"/etc/passwd", "/etc/passwd"}, {"/**", "/"}, {"/a/**/b", "/a/b"},
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        assert_true(abx_glob_match(cases[i][0], cases[i][1]));
        char *root = abx_glob_root(cases[i][0]);
        const char *rel = NULL;
        assert_true(abx_path_under(root, cases[i][1], &rel));
        assert_non_null(rel);
        free(root);
    }
}

/* ---------------------------------------------------------------- under ---- */

static void test_glob_prefix_match(void **state)
{
    (void)state;
    /* a prefix of something the pattern matches, or below a `**` */
    assert_true(abx_glob_prefix_match("/w/ws/**", "/"));
    assert_true(abx_glob_prefix_match("/w/ws/**", "/w"));
    assert_true(abx_glob_prefix_match("/w/ws/**", "/w/ws"));
    assert_true(abx_glob_prefix_match("/w/ws/**", "/w/ws/a/b"));
    assert_true(abx_glob_prefix_match("/home/*/ws/*.c", "/home/alice"));
    assert_true(abx_glob_prefix_match("/home/*/ws/*.c", "/home/alice/ws/m.c"));
    assert_true(abx_glob_prefix_match("/etc/passwd", "/etc"));
    /* never: a sibling, a path below a literal pattern, a segment the glob refuses */
    assert_false(abx_glob_prefix_match("/w/ws/**", "/w/other"));
    assert_false(abx_glob_prefix_match("/w/ws/**", "/proc"));
    assert_false(abx_glob_prefix_match("/etc/passwd", "/etc/passwd/x"));
    assert_false(abx_glob_prefix_match("/home/*/ws/*.c", "/home/alice/x"));
    assert_false(abx_glob_prefix_match("/home/*/ws/*.c", "/home/alice/ws/m.h"));
}

static bool gate_under_base(const char *prefix, void *arg)
{
    return abx_glob_prefix_match((const char *)arg, prefix);
}

/* The gate keeps lookups inside the scope: a link outside is not read, a loop outside
 * is not met, and what lies under them is kept as written. */
static void test_canon_gated(void **state)
{
    tree *t = *state;
    char pat[PATH_MAX + 8], in[PATH_MAX * 2], want[PATH_MAX * 2];
    snprintf(pat, sizeof pat, "%s/**", t->base);
    char loop[PATH_MAX + 16];
    snprintf(loop, sizeof loop, "%s/loop", t->out);
    assert_int_equal(symlink("loop", loop), 0);
    snprintf(in, sizeof in, "%s/loop/x", t->out);
    char *out = NULL;
    assert_int_equal(abx_path_canon(t->base, in, &out), -ELOOP); /* ungated: the loop is met */
    assert_int_equal(abx_path_canon_gated(t->base, in, gate_under_base, pat, &out), 0);
    assert_string_equal(out, in);
    free(out);
    /* a link inside pointing out: read (it is inside), its target kept as written */
    mk_link(t, loop, "toloop");
    snprintf(want, sizeof want, "%s/x", loop);
    assert_int_equal(abx_path_canon_gated(t->base, "toloop/x", gate_under_base, pat, &out), 0);
    assert_string_equal(out, want);
    free(out);
    /* ".." outside folds as text */
    snprintf(in, sizeof in, "%s/loop/../y", t->out);
    snprintf(want, sizeof want, "%s/y", t->out);
    assert_int_equal(abx_path_canon_gated(t->base, in, gate_under_base, pat, &out), 0);
    assert_string_equal(out, want);
    free(out);
}

static void test_path_under(void **state)
{
    (void)state;
    const char *rel = NULL;
    assert_true(abx_path_under("/w", "/w", &rel));
    assert_string_equal(rel, ".");
    assert_true(abx_path_under("/w", "/w/a/b", &rel));
    assert_string_equal(rel, "a/b");
    assert_false(abx_path_under("/w", "/wx", &rel));
    assert_false(abx_path_under("/w", "/", &rel));
    assert_false(abx_path_under("/w/a", "/w", &rel));
    assert_true(abx_path_under("/", "/", &rel));
    assert_string_equal(rel, ".");
    assert_true(abx_path_under("/", "/etc/passwd", &rel));
    assert_string_equal(rel, "etc/passwd");
    const char *path = "/w/x";
    assert_true(abx_path_under("/w", path, &rel));
    assert_ptr_equal(rel, path + 3); /* points into path */
    assert_false(abx_path_under(NULL, "/w", &rel));
    assert_false(abx_path_under("/w", NULL, &rel));
    assert_false(abx_path_under("w", "w/x", &rel));
}

/* -------------------------------------------------------- canon: lexical ---- */

static void test_canon_lexical(void **state)
{
    tree *t = *state;
    mk_dir(t, "d");
    mk_dir(t, "d/e");
    char anchor[PATH_MAX];
    snprintf(anchor, sizeof anchor, "%s/d", t->base);

    expect_canon_in(t, anchor, "e", "d/e");
    expect_canon_in(t, anchor, "./e", "d/e");
    expect_canon_in(t, anchor, "e/", "d/e");
    expect_canon_in(t, anchor, "e//", "d/e");
    expect_canon_in(t, anchor, ".//e/./", "d/e");
    expect_canon_in(t, anchor, ".", "d");
    expect_canon_in(t, anchor, "..", "");
    expect_canon_in(t, anchor, "e/../e/../..", "");
    expect_canon_in(t, anchor, "missing/x", "d/missing/x");
    expect_canon_in(t, anchor, "missing/./x/../y", "d/missing/y");

    char abs[PATH_MAX * 2];
    snprintf(abs, sizeof abs, "%s//d///e/", t->base);
    expect_canon_in(t, "/nonexistent-anchor-ignored", abs, "d/e");

    /* ".." never climbs above "/". */
    expect_canon_abs("/", "..", "/");
    expect_canon_abs("/", "../../..", "/");
    expect_canon_abs(NULL, "/../../abx-no-such-dir/x/..", "/abx-no-such-dir");
    expect_canon_abs(NULL, "/", "/");
    expect_canon_abs(NULL, "//", "/");
    expect_canon_abs(NULL, "/.", "/");
}

static void test_canon_literal_bytes(void **state)
{
    tree *t = *state;
    char anchor[PATH_MAX];
    snprintf(anchor, sizeof anchor, "%s", t->base);
    /* "~" is a name like any other; non-UTF-8 bytes are kept as they are. */
    expect_canon_in(t, anchor, "~", "~");
    expect_canon_in(t, anchor, "~/x", "~/x");
    expect_canon_in(t, anchor, "\xff\xfe/caf\xc3\xa9", "\xff\xfe/caf\xc3\xa9");
    mk_dir(t, "\xff");
    expect_canon_in(t, anchor, "\xff/./", "\xff");
    expect_canon_in(t, anchor, "a b/ c", "a b/ c");
}

static void test_canon_errors(void **state)
{
    (void)state;
    expect_canon_err("/", "", -EINVAL);
    expect_canon_err("/", NULL, -EINVAL);
    expect_canon_err(NULL, "rel", -EINVAL);
    expect_canon_err("not/absolute", "rel", -EINVAL);
    assert_int_equal(abx_path_canon("/", "/x", NULL), -EINVAL);

    /* A component of NAME_MAX bytes is fine, one more is not. */
    char name[NAME_MAX + 3];
    name[0] = '/';
    memset(name + 1, 'n', NAME_MAX);
    name[NAME_MAX + 1] = '\0';
    char *out = NULL;
    assert_int_equal(abx_path_canon(NULL, name, &out), 0);
    assert_int_equal(strlen(out), NAME_MAX + 1);
    free(out);
    name[NAME_MAX + 1] = 'n';
    name[NAME_MAX + 2] = '\0';
    expect_canon_err(NULL, name, -ENAMETOOLONG);
    /* ...even when ".." would fold it away later. */
    char folded[NAME_MAX + 8];
    snprintf(folded, sizeof folded, "%s/..", name);
    expect_canon_err(NULL, folded, -ENAMETOOLONG);

    /* 4095 bytes in total is the limit; 4096 is over it. */
    char big[4100];
    size_t n = 0;
    while (n + 2 <= 4095) {
        big[n++] = '/';
        big[n++] = 'x';
    }
    big[n++] = '/';
    big[n] = '\0';
    assert_int_equal(n, 4095);
    assert_int_equal(abx_path_canon(NULL, big, &out), 0);
    free(out);
    big[n++] = 'y';
    big[n] = '\0';
    expect_canon_err(NULL, big, -ENAMETOOLONG);
    /* Joined to the anchor, the intermediate is over the limit too. */
    expect_canon_err("/anchor", big + 1, -ENAMETOOLONG);
}

/* ------------------------------------------------------ canon: symlinks ---- */

static void test_canon_link_inside_to_outside(void **state)
{
    tree *t = *state;
    char want[PATH_MAX * 2];
    mk_link(t, t->out, "out");
    expect_canon_abs(t->base, "out", t->out);
    snprintf(want, sizeof want, "%s/secret", t->out);
    expect_canon_abs(t->base, "out/secret", want);
    /* The policy sees where the link goes, not the link's name. */
    expect_canon_abs(t->base, "out/./secret/", want);
}

static void test_canon_relative_target_with_dotdot(void **state)
{
    tree *t = *state;
    mk_dir(t, "a");
    mk_dir(t, "a/b");
    mk_dir(t, "c");
    mk_file(t, "c/f");
    /* "../../c" is relative to a/b, the link's directory, not to the anchor. */
    mk_link(t, "../../c", "a/b/up");
    expect_canon_in(t, t->base, "a/b/up/f", "c/f");
    expect_canon_in(t, "/", t->base, "");
    /* From a deeper anchor the answer is the same. */
    char anchor[PATH_MAX];
    snprintf(anchor, sizeof anchor, "%s/a/b", t->base);
    expect_canon_in(t, anchor, "up/f", "c/f");
    /* ".." after a link is the parent of the target, not of the link. */
    expect_canon_in(t, t->base, "a/b/up/..", "");
    mk_link(t, "b", "a/lb");
    expect_canon_in(t, t->base, "a/lb/up/../a", "a");
    /* A target that climbs above "/" stops at "/". */
    char deep[PATH_MAX * 2];
    snprintf(deep, sizeof deep, "%s/../../../../../../../../../../..", t->base);
    assert_int_equal(symlink(deep, P(t, "top", (char[PATH_MAX]){0})), 0);
    expect_canon_abs(t->base, "top", "/");
}

static void test_canon_chain(void **state)
{
    tree *t = *state;
    mk_dir(t, "real");
    mk_file(t, "real/f");
    mk_link(t, "real", "l3");
    mk_link(t, "l3", "l2");
    char abs_l2[PATH_MAX * 2];
    snprintf(abs_l2, sizeof abs_l2, "%s/l2", t->base);
    mk_link(t, abs_l2, "l1");
    expect_canon_in(t, t->base, "l1/f", "real/f");
    expect_canon_in(t, t->base, "l1", "real");
    expect_canon_in(t, t->base, "l1/", "real");
    /* A link in the anchor is resolved too. */
    char anchor[PATH_MAX * 2];
    snprintf(anchor, sizeof anchor, "%s/l1", t->base);
    expect_canon_in(t, anchor, "f", "real/f");
}

static void test_canon_loops(void **state)
{
    tree *t = *state;
    mk_link(t, "b", "a");
    mk_link(t, "a", "b");
    mk_link(t, "self", "self");
    char abs_self[PATH_MAX * 2];
    snprintf(abs_self, sizeof abs_self, "%s/aself", t->base);
    mk_link(t, abs_self, "aself");
    mk_link(t, "./dotself/x", "dotself");
    expect_canon_err(t->base, "a", -ELOOP);
    expect_canon_err(t->base, "b/x", -ELOOP);
    expect_canon_err(t->base, "self", -ELOOP);
    expect_canon_err(t->base, "aself", -ELOOP);
    expect_canon_err(t->base, "dotself", -ELOOP);
}

static void test_canon_link_limit(void **state)
{
    tree *t = *state;
    /* l0 -> l1 -> ... -> l40 -> "end": 41 links in a row is one too many, 40 fine. */
    mk_dir(t, "end");
    char name[32], target[32];
    for (int i = 0; i <= 40; i++) {
        snprintf(name, sizeof name, "l%d", i);
        if (i == 40)
            snprintf(target, sizeof target, "end");
        else
            snprintf(target, sizeof target, "l%d", i + 1);
        mk_link(t, target, name);
    }
    expect_canon_in(t, t->base, "l1", "end");
    expect_canon_err(t->base, "l0", -ELOOP);
}

static void test_canon_dangling(void **state)
{
    tree *t = *state;
    char want[PATH_MAX * 2], target[PATH_MAX * 2];
    /* The target is what the policy must see (an O_CREAT would create it). */
    snprintf(target, sizeof target, "%s/newdir/newfile", t->out);
    mk_link(t, target, "dangle_abs");
    expect_canon_abs(t->base, "dangle_abs", target);
    snprintf(want, sizeof want, "%s/newdir/newfile/more", t->out);
    expect_canon_abs(t->base, "dangle_abs/more", want);

    mk_dir(t, "sub");
    mk_link(t, "../nothere/x", "sub/dangle_rel");
    expect_canon_in(t, t->base, "sub/dangle_rel", "nothere/x");
    expect_canon_in(t, t->base, "sub/dangle_rel/../y", "nothere/y");
}

static void test_canon_file_as_directory(void **state)
{
    tree *t = *state;
    mk_file(t, "file");
    expect_canon_in(t, t->base, "file/x", "file/x");
    expect_canon_in(t, t->base, "file/x/y/..", "file/x");
    expect_canon_in(t, t->base, "file", "file");
}

static void test_canon_missing_then_dotdot_resumes_lookup(void **state)
{
    tree *t = *state;
    /* "missing/../link/x": once ".." climbs back into the tree, "link" must be
     * looked up again; keeping it literal would let the policy judge "link/x"
     * while the jail opens the link's target. */
    mk_dir(t, "private");
    mk_link(t, "private", "pub");
    expect_canon_in(t, t->base, "missing/../pub/secret", "private/secret");
    expect_canon_in(t, t->base, "m1/m2/../../pub", "private");
    expect_canon_in(t, t->base, "m1/m2/../pub", "m1/pub");
}

static void test_canon_trailing_slash_and_dots(void **state)
{
    tree *t = *state;
    mk_dir(t, "d");
    mk_link(t, "d", "ld");
    expect_canon_in(t, t->base, "ld/", "d");
    expect_canon_in(t, t->base, "./ld/./", "d");
    expect_canon_in(t, t->base, "ld//.//", "d");
    char in[PATH_MAX * 2];
    snprintf(in, sizeof in, "%s///ld////", t->base);
    expect_canon_in(t, "/", in, "d");
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_glob_valid_accepts),
        cmocka_unit_test(test_glob_valid_rejects),
        cmocka_unit_test(test_glob_match_literal),
        cmocka_unit_test(test_glob_match_star),
        cmocka_unit_test(test_glob_match_question),
        cmocka_unit_test(test_glob_match_globstar),
        cmocka_unit_test(test_glob_match_is_not_exponential),
        cmocka_unit_test(test_glob_root),
        cmocka_unit_test(test_glob_root_contains_matches),
        cmocka_unit_test(test_path_under),
        cmocka_unit_test(test_glob_prefix_match),
        cmocka_unit_test_setup_teardown(test_canon_gated, tree_setup, tree_teardown),
        cmocka_unit_test_setup_teardown(test_canon_lexical, tree_setup, tree_teardown),
        cmocka_unit_test_setup_teardown(test_canon_literal_bytes, tree_setup, tree_teardown),
        cmocka_unit_test(test_canon_errors),
        cmocka_unit_test_setup_teardown(test_canon_link_inside_to_outside, tree_setup, tree_teardown),
        cmocka_unit_test_setup_teardown(test_canon_relative_target_with_dotdot, tree_setup, tree_teardown),
        cmocka_unit_test_setup_teardown(test_canon_chain, tree_setup, tree_teardown),
        cmocka_unit_test_setup_teardown(test_canon_loops, tree_setup, tree_teardown),
        cmocka_unit_test_setup_teardown(test_canon_link_limit, tree_setup, tree_teardown),
        cmocka_unit_test_setup_teardown(test_canon_dangling, tree_setup, tree_teardown),
        cmocka_unit_test_setup_teardown(test_canon_file_as_directory, tree_setup, tree_teardown),
        cmocka_unit_test_setup_teardown(test_canon_missing_then_dotdot_resumes_lookup, tree_setup, tree_teardown),
        cmocka_unit_test_setup_teardown(test_canon_trailing_slash_and_dots, tree_setup, tree_teardown),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
