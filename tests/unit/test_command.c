/* test_command.c — unit tests of src/policy/command.c: shell-word splitting without
 * expansion (quotes, escapes, empty words), every refusal of shell syntax with the
 * offending character and offset, the size limits, program resolution through a
 * search path, and argv patterns (exact words, standalone * as zero or more
 * arguments, quoted words). Stats executables under /bin; runs nothing. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "policy/command.h"

/* cmd splits into exactly the n words given (NULL-terminated list). */
static void splits(const char *cmd, const char *const *want)
{
    abx_argv a;
    char err[200] = "";
    if (abx_shell_split(cmd, &a, err, sizeof err) != 0)
        fail_msg("split(%s) refused: %s", cmd, err);
    size_t n = 0;
    while (want[n])
        n++;
    if (a.n != n)
        fail_msg("split(%s): %zu words, want %zu", cmd, a.n, n);
    for (size_t i = 0; i < n; i++)
        if (strcmp(a.v[i], want[i]) != 0)
            fail_msg("split(%s) word %zu: '%s', want '%s'", cmd, i, a.v[i], want[i]);
    assert_null(a.v[n]);
    abx_argv_release(&a);
}

#define SPLITS(cmd, ...) splits(cmd, (const char *const[]){__VA_ARGS__, NULL})

static void refused(const char *cmd, const char *why)
{
    abx_argv a = {(char **)1, 99};
    char err[200] = "";
    if (abx_shell_split(cmd, &a, err, sizeof err) == 0 || !strstr(err, why))
        fail_msg("split(%s): want refusal '%s', got '%s'", cmd, why, err);
    assert_null(a.v); /* nothing left to free on refusal */
    assert_int_equal(a.n, 0);
}

static void test_split_words(void **state)
{
    (void)state;
    SPLITS("git status", "git", "status");
    SPLITS("  a   b\t c ", "a", "b", "c");
    SPLITS("'a b' c", "a b", "c");
    SPLITS("a'b'c", "abc");
    SPLITS("''", "");
    SPLITS("a '' b", "a", "", "b");
    SPLITS("\"\"", "");
    SPLITS("a\\ b", "a b");
    SPLITS("\\|", "|");
    SPLITS("\"a \\\"q\\\" \\\\ \\$ \\` \\n\"", "a \"q\" \\ $ ` \\n");
    SPLITS("'$HOME `x` | ; * ~ #'", "$HOME `x` | ; * ~ #");
    SPLITS("\"a|b;c*d\"", "a|b;c*d");
    SPLITS("a#b c~d", "a#b", "c~d"); /* # and ~ only lead a word as syntax */
    SPLITS("\"a\\\nb\"", "ab");      /* a line continuation inside double quotes */
    SPLITS("a\0; rm -rf /", "a");    /* a NUL ends the command */
}

static void test_split_refusals(void **state)
{
    (void)state;
    refused("", "the command is empty");
    refused("  \t ", "the command is empty");
    refused("a | b", "operator '|' at offset 2");
    refused("a;b", "operator ';' at offset 1");
    refused("a && b", "operator '&' at offset 2");
    refused("a > f", "operator '>' at offset 2");
    refused("a < f", "operator '<' at offset 2");
    refused("(a)", "operator '(' at offset 0");
    refused("{a}", "operator '{' at offset 0");
    refused("echo $HOME", "expansion '$' at offset 5");
    refused("echo `id`", "expansion '`' at offset 5");
    refused("echo \"$HOME\"", "expansion '$' at offset 6");
    refused("echo \"`id`\"", "expansion '`' at offset 6");
    refused("ls *.c", "glob '*' at offset 3");
    refused("ls a?", "glob '?' at offset 4");
    refused("ls [ab]", "glob '[' at offset 3");
    refused("ls ~/x", "tilde expansion '~' at offset 3");
    refused("# comment", "comment '#' at offset 0");
    refused("a\nb", "newline at offset 1");
    refused("a\rb", "carriage return at offset 1");
    refused("a\\\nb", "newline at offset 2");
    refused("a \\", "a trailing backslash escapes nothing");
    refused("'abc", "unterminated single quote at offset 0");
    refused("a \"abc", "unterminated double quote at offset 2");
}

static void test_split_limits(void **state)
{
    (void)state;
    char *big = malloc(65537 + 1);
    memset(big, 'a', 65537);
    big[65537] = '\0';
    refused(big, "longer than 65536 bytes");
    /* 5000 one-letter words: more than an argv holds */
    for (size_t i = 0; i < 10000; i += 2) {
        big[i] = 'a';
        big[i + 1] = ' ';
    }
    big[10000] = '\0';
    refused(big, "too many words");
    /* 4000 words fit */
    big[8000] = '\0';
    abx_argv a;
    char err[200];
    assert_int_equal(abx_shell_split(big, &a, err, sizeof err), 0);
    assert_int_equal(a.n, 4000);
    abx_argv_release(&a);
    free(big);
}

static char *real(const char *p)
{
    char *r = realpath(p, NULL);
    assert_non_null(r);
    return r;
}

static void test_resolve_program(void **state)
{
    (void)state;
    char *sh = real("/bin/sh");
    char *got = abx_resolve_program("sh", NULL);
    assert_non_null(got);
    assert_string_equal(got, sh); /* canonical: symlinks resolved */
    free(got);
    got = abx_resolve_program("/bin/sh", NULL);
    assert_string_equal(got, sh);
    free(got);
    got = abx_resolve_program("sh", "relative/dir:/nonexistent:/bin");
    assert_string_equal(got, sh);
    free(got);
    assert_null(abx_resolve_program("sh", "relative:/nonexistent"));
    assert_null(abx_resolve_program("sh", "::"));
    assert_null(abx_resolve_program("sh", ""));
    assert_null(abx_resolve_program("./sh", NULL));
    assert_null(abx_resolve_program("bin/sh", NULL));
    assert_null(abx_resolve_program("", NULL));
    assert_null(abx_resolve_program(NULL, NULL));
    assert_null(abx_resolve_program("/etc/passwd", NULL)); /* not executable */
    assert_null(abx_resolve_program("/bin", NULL));        /* a directory */
    assert_null(abx_resolve_program("no-such-program-xyz", NULL));
    char longname[PATH_MAX + 10];
    memset(longname, 'a', sizeof longname - 1);
    longname[sizeof longname - 1] = '\0';
    assert_null(abx_resolve_program(longname, NULL));
    free(sh);
}

typedef struct pat {
    abx_cmd_pattern p;
    char *sh;
} pat;

static pat compile(const char *text)
{
    pat r;
    char err[300] = "";
    if (abx_cmd_pattern_compile(text, NULL, &r.p, err, sizeof err) != 0)
        fail_msg("pattern '%s': %s", text, err);
    r.sh = real("/bin/sh");
    assert_string_equal(r.p.program, r.sh);
    return r;
}

static void release(pat *r)
{
    abx_cmd_pattern_release(&r->p);
    free(r->sh);
}

/* argv after the program, NULL-terminated */
static bool run_match(const pat *r, const char *const *args)
{
    const char *argv[16] = {r->sh};
    size_t n = 1;
    while (args[n - 1])
        argv[n] = args[n - 1], n++;
    return abx_cmd_pattern_match(&r->p, argv, n);
}

#define M(r, ...) run_match(&(r), (const char *const[]){__VA_ARGS__})

static void test_patterns(void **state)
{
    (void)state;
    pat exact = compile("sh");
    assert_true(M(exact, NULL));
    assert_false(M(exact, "a", NULL));
    release(&exact);

    pat c = compile("sh -c *");
    assert_true(M(c, "-c", NULL));
    assert_true(M(c, "-c", "x", "y", NULL));
    assert_false(M(c, NULL));
    assert_false(M(c, "-x", NULL));
    assert_false(M(c, "x", "-c", NULL));
    release(&c);

    pat end = compile("sh * end");
    assert_true(M(end, "end", NULL));
    assert_true(M(end, "a", "b", "end", NULL));
    assert_false(M(end, "end", "x", NULL));
    assert_false(M(end, NULL));
    release(&end);

    pat two = compile("sh * a * b");
    assert_true(M(two, "a", "b", NULL));
    assert_true(M(two, "x", "a", "y", "z", "b", NULL));
    assert_false(M(two, "b", "a", NULL));
    release(&two);

    pat quoted = compile("/bin/sh 'a' \"b\\\"c\" d\\|e");
    assert_true(M(quoted, "a", "b\"c", "d|e", NULL));
    assert_false(M(quoted, "'a'", "b\"c", "d|e", NULL));
    assert_false(M(quoted, "a", "b\"c", NULL));
    release(&quoted);

    /* argv[0] must be the resolved program: a bare name or another path does not match */
    pat any = compile("sh *");
    const char *bare[] = {"sh", "x"};
    assert_false(abx_cmd_pattern_match(&any.p, bare, 2));
    const char *other[] = {"/bin/shx", "x"};
    assert_false(abx_cmd_pattern_match(&any.p, other, 2));
    assert_false(abx_cmd_pattern_match(&any.p, bare, 0));
    release(&any);
}

static void test_patterns_refused(void **state)
{
    (void)state;
    static const struct {
        const char *text, *why;
    } bad[] = {
        {"", "must start with a program"},
        {"* x", "must start with a program"},
        {"no-such-program-xyz *", "is not an executable on the search path"},
        {"./sh *", "is not an executable"},
        {"sh a*", "glob '*'"},
        {"sh |", "operator '|'"},
        {"sh $HOME", "expansion '$'"},
        {"sh 'open", "unterminated single quote"},
        /* pattern words are cut at blanks before they are unquoted: a quoted word
         * cannot hold a blank (refused, never read as two words) */
        {"sh 'a b'", "unterminated single quote"},
    };
    for (size_t i = 0; i < sizeof bad / sizeof *bad; i++) {
        abx_cmd_pattern p;
        char err[300] = "";
        if (abx_cmd_pattern_compile(bad[i].text, NULL, &p, err, sizeof err) == 0 || !strstr(err, bad[i].why))
            fail_msg("pattern '%s': want '%s', got '%s'", bad[i].text, bad[i].why, err);
    }
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_split_words),    cmocka_unit_test(test_split_refusals),
        cmocka_unit_test(test_split_limits),   cmocka_unit_test(test_resolve_program),
        cmocka_unit_test(test_patterns),       cmocka_unit_test(test_patterns_refused),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
