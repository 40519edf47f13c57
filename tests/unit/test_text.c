/* test_text.c — unit tests for src/core/text.c: abx's one definition of text (strict UTF-8
 * without NUL), the repair that turns any bytes into text for a JSON result, and the cut
 * that never splits a character. Each malformed class is checked on both the check and
 * the repair, so the two can never disagree again. */
#include <stdarg.h>
#include <stddef.h>
#include <setjmp.h>
#include <stdint.h>
#include <cmocka.h>

#include <stdlib.h>
#include <string.h>

#include "core/text.h"

#define FFFD "\xef\xbf\xbd"

/* abx_text_json(in) as a C string compared with want (want may not contain NUL: text never does) */
static void assert_repair(const char *in, size_t n, const char *want)
{
    json_t *j = abx_text_json(in, n);
    assert_non_null(j);
    assert_int_equal(json_string_length(j), strlen(want));
    assert_memory_equal(json_string_value(j), want, strlen(want));
    assert_true(abx_text_valid(json_string_value(j), json_string_length(j)));
    json_decref(j);
}

static void test_valid_text_passes_unchanged(void **state)
{
    (void)state;
    static const char *const good[] = {"", "plain ascii", "caf\xc3\xa9", "\xe2\x82\xac 10", "\xf0\x9f\x98\x80",
                                       "\xf4\x8f\xbf\xbf" /* U+10FFFF, the last code point */,
                                       "\xed\x9f\xbf" /* U+D7FF, just below the surrogates */,
                                       "\xee\x80\x80" /* U+E000, just above them */};
    for (size_t i = 0; i < sizeof good / sizeof *good; i++) {
        assert_true(abx_utf8_valid(good[i], strlen(good[i])));
        assert_true(abx_text_valid(good[i], strlen(good[i])));
        assert_repair(good[i], strlen(good[i]), good[i]);
    }
    assert_true(abx_text_valid(NULL, 0));
}

/* NUL is UTF-8 but not text: the check refuses it, the repair replaces it (and keeps what follows) */
static void test_nul_is_not_text(void **state)
{
    (void)state;
    assert_true(abx_utf8_valid("a\0b", 3));
    assert_false(abx_text_valid("a\0b", 3));
    assert_false(abx_text_valid("\0", 1));
    assert_repair("a\0b", 3, "a" FFFD "b");
    assert_repair("\0\0", 2, FFFD FFFD);
    assert_repair("caf\xc3\xa9\0", 6, "caf\xc3\xa9" FFFD);
}

static void test_overlong_encodings(void **state)
{
    (void)state;
    static const struct {
        const char *in, *want;
    } cases[] = {
        {"\xc0\xaf", FFFD FFFD},             /* '/' in two bytes */
        {"\xc1\xbf", FFFD FFFD},             /* U+007F in two bytes */
        {"\xe0\x80\xaf", FFFD FFFD FFFD},    /* '/' in three */
        {"\xe0\x9f\xbf", FFFD FFFD FFFD},    /* U+07FF in three */
        {"\xf0\x80\x80\xaf", FFFD FFFD FFFD FFFD}, /* '/' in four */
        {"\xf0\x8f\xbf\xbf", FFFD FFFD FFFD FFFD}, /* U+FFFF in four */
        {"\xc0\x80", FFFD FFFD},             /* "modified UTF-8" NUL: not a way around the NUL rule */
    };
    for (size_t i = 0; i < sizeof cases / sizeof *cases; i++) {
        assert_false(abx_utf8_valid(cases[i].in, strlen(cases[i].in)));
        assert_false(abx_text_valid(cases[i].in, strlen(cases[i].in)));
        assert_repair(cases[i].in, strlen(cases[i].in), cases[i].want);
    }
}

static void test_surrogates(void **state)
{
    (void)state;
    static const char *const bad[] = {"\xed\xa0\x80" /* U+D800 */, "\xed\xbf\xbf" /* U+DFFF */,
                                      "\xed\xa0\xbd\xed\xb8\x80" /* a CESU-8 pair for U+1F600 */};
    for (size_t i = 0; i < sizeof bad / sizeof *bad; i++) {
        assert_false(abx_utf8_valid(bad[i], strlen(bad[i])));
        assert_false(abx_text_valid(bad[i], strlen(bad[i])));
    }
    assert_repair("x\xed\xa0\x80y", 5, "x" FFFD FFFD FFFD "y");
}

static void test_above_u10ffff(void **state)
{
    (void)state;
    static const char *const bad[] = {"\xf4\x90\x80\x80" /* U+110000 */, "\xf5\x80\x80\x80", "\xf7\xbf\xbf\xbf",
                                      "\xf8\x88\x80\x80\x80" /* old five-byte form */, "\xff", "\xfe"};
    for (size_t i = 0; i < sizeof bad / sizeof *bad; i++) {
        assert_false(abx_utf8_valid(bad[i], strlen(bad[i])));
        assert_false(abx_text_valid(bad[i], strlen(bad[i])));
    }
    assert_repair("\xf4\x90\x80\x80", 4, FFFD FFFD FFFD FFFD);
    assert_repair("a\xffz", 3, "a" FFFD "z");
}

/* A sequence cut short: at the end of the input, or followed by something that is not a
 * continuation byte. Each byte of the stump becomes one U+FFFD; the next character survives. */
static void test_truncated_sequences(void **state)
{
    (void)state;
    static const struct {
        const char *in, *want;
    } cases[] = {
        {"\xc3", FFFD},
        {"ab\xe2\x82", "ab" FFFD FFFD},
        {"\xf0\x9f\x98", FFFD FFFD FFFD},
        {"\xe2\x82" "A", FFFD FFFD "A"},
        {"\xf0\x9f" "\xc3\xa9", FFFD FFFD "\xc3\xa9"},
        {"\x80", FFFD},                     /* a lone continuation byte */
        {"\x80\x80\xc3\xa9", FFFD FFFD "\xc3\xa9"},
    };
    for (size_t i = 0; i < sizeof cases / sizeof *cases; i++) {
        assert_false(abx_utf8_valid(cases[i].in, strlen(cases[i].in)));
        assert_false(abx_text_valid(cases[i].in, strlen(cases[i].in)));
        assert_repair(cases[i].in, strlen(cases[i].in), cases[i].want);
    }
    /* the length given is what counts, not a NUL terminator: a valid character cut by n */
    assert_false(abx_utf8_valid("\xf0\x9f\x98\x80", 3));
    assert_repair("\xf0\x9f\x98\x80", 3, FFFD FFFD FFFD);
}

/* Every byte value alone: the repair yields text, and keeps the byte exactly when it is text. */
static void test_every_single_byte(void **state)
{
    (void)state;
    for (int c = 0; c < 256; c++) {
        char b = (char)c;
        json_t *j = abx_text_json(&b, 1);
        assert_non_null(j);
        if (c >= 1 && c < 0x80)
            assert_true(json_string_length(j) == 1 && json_string_value(j)[0] == b);
        else
            assert_string_equal(json_string_value(j), FFFD);
        json_decref(j);
    }
}

/* The ASCII fast path reads eight bytes at a time: a bad byte, a NUL or a character at
 * every offset of a long ASCII run, and a sequence split across an eight-byte boundary,
 * give the same answers as byte by byte. */
static void test_ascii_runs_every_offset(void **state)
{
    (void)state;
    char buf[80];
    for (size_t off = 0; off < 72; off++) {
        memset(buf, 'a', sizeof buf);
        assert_true(abx_utf8_valid(buf, sizeof buf));
        buf[off] = (char)0x80; /* a stray continuation byte */
        assert_false(abx_utf8_valid(buf, sizeof buf));
        buf[off] = (char)0xff;
        assert_false(abx_utf8_valid(buf, sizeof buf));
        buf[off] = 0;
        assert_true(abx_utf8_valid(buf, sizeof buf));
        assert_false(abx_text_valid(buf, sizeof buf));
        memcpy(buf + off, "\xe2\x82\xac", 3); /* U+20AC, across a word boundary for some off */
        assert_true(abx_text_valid(buf, sizeof buf));
        assert_false(abx_utf8_valid(buf, off + 2)); /* cut inside the character */
        buf[off + 2] = 'a';
        assert_false(abx_utf8_valid(buf, sizeof buf));
    }
}

static void test_complete_prefix(void **state)
{
    (void)state;
    const char *s = "a\xc3\xa9\xe2\x82\xac\xf0\x9f\x98\x80"; /* a, é (2), € (3), 😀 (4): 10 bytes */
    static const size_t want[] = {0, 1, 1, 3, 3, 3, 6, 6, 6, 6, 10};
    for (size_t n = 0; n <= 10; n++)
        assert_int_equal(abx_utf8_complete_prefix(s, n), want[n]);
    /* whatever is cut off, the prefix of valid text is valid text */
    for (size_t n = 0; n <= 10; n++)
        assert_true(abx_text_valid(s, abx_utf8_complete_prefix(s, n)));
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_valid_text_passes_unchanged),
        cmocka_unit_test(test_nul_is_not_text),
        cmocka_unit_test(test_overlong_encodings),
        cmocka_unit_test(test_surrogates),
        cmocka_unit_test(test_above_u10ffff),
        cmocka_unit_test(test_truncated_sequences),
        cmocka_unit_test(test_every_single_byte),
        cmocka_unit_test(test_complete_prefix),
        cmocka_unit_test(test_ascii_runs_every_offset),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
