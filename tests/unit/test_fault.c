/* test_fault.c — the allocation-failure injector of src/core/fault.c, which util.c's
 * allocators ask. In a build with
 * ABX_FAULT_INJECTION=1 it checks the countdown, each allocator, the environment
 * variable, thread-safe counting, and that the helpers built on the allocators fail
 * cleanly at every possible point. In other builds it only checks that the injector's
 * entry points are harmless no-ops. */
#include <stdarg.h>
#include <stddef.h>
#include <setjmp.h>
#include <stdint.h>
#include <cmocka.h>

#include <stdlib.h>
#include <string.h>

#include "core/util.h"

#if defined(ABX_FAULT_INJECTION) && ABX_FAULT_INJECTION

#include <pthread.h>
#include <spawn.h>
#include <sys/wait.h>

extern char **environ;

/* Every test starts with injection off, whatever ABX_FAIL_ALLOC_AT the runner set. */
static int reset_off(void **state)
{
    (void)state;
    abx_fault_reset(0);
    return 0;
}

static void test_nth_call_fails_once(void **state)
{
    (void)state;
    abx_fault_reset(3);
    void *p1 = abx_malloc(8), *p2 = abx_malloc(8), *p3 = abx_malloc(8);
    assert_non_null(p1);
    assert_non_null(p2);
    assert_null(p3);
    assert_int_equal(abx_fault_count(), 3);
    /* Only the third: the countdown does not re-arm. */
    for (int i = 0; i < 10; i++) {
        void *p = abx_malloc(8);
        assert_non_null(p);
        abx_free(p);
    }
    assert_int_equal(abx_fault_count(), 13);
    abx_free(p1);
    abx_free(p2);
}

static void test_each_allocator_counts_once(void **state)
{
    (void)state;
    abx_fault_reset(1);
    assert_null(abx_malloc(1));
    assert_int_equal(abx_fault_count(), 1);

    abx_fault_reset(1);
    assert_null(abx_calloc(4, 4));
    assert_int_equal(abx_fault_count(), 1);

    abx_fault_reset(1);
    assert_null(abx_strdup("x"));
    assert_int_equal(abx_fault_count(), 1);

    abx_fault_reset(1);
    assert_null(abx_strndup("xyz", 2));
    assert_int_equal(abx_fault_count(), 1);

    abx_fault_reset(1);
    assert_null(abx_asprintf("%d", 5));
    assert_int_equal(abx_fault_count(), 1);

    /* realloc: the failure leaves the old block intact and owned by the caller. */
    abx_fault_reset(0);
    char *p = abx_strdup("keep me");
    assert_non_null(p);
    abx_fault_reset(1);
    assert_null(abx_realloc(p, 4096));
    assert_int_equal(abx_fault_count(), 1);
    assert_string_equal(p, "keep me");
    char *q = abx_realloc(p, 4096); /* the next call is not affected */
    assert_non_null(q);
    assert_string_equal(q, "keep me");
    abx_free(q);

    /* Each allocator call is exactly one tick, and abx_free is none. */
    abx_fault_reset(0);
    void *a = abx_malloc(1), *b = abx_calloc(1, 1);
    char *c = abx_strdup("c"), *d = abx_strndup("d", 1), *e = abx_asprintf("e");
    void *f = abx_realloc(NULL, 1);
    assert_int_equal(abx_fault_count(), 6);
    abx_free(a);
    abx_free(b);
    abx_free(c);
    abx_free(d);
    abx_free(e);
    abx_free(f);
    assert_int_equal(abx_fault_count(), 6);
    /* Calls refused for a NULL argument allocate nothing and are not counted. */
    assert_null(abx_strdup(NULL));
    assert_null(abx_strndup(NULL, 1));
    assert_int_equal(abx_fault_count(), 6);
}

static void test_disable_and_restart(void **state)
{
    (void)state;
    long offs[] = {0, -1, -1000};
    for (size_t k = 0; k < ABX_ARRAY_LEN(offs); k++) {
        abx_fault_reset(offs[k]);
        for (int i = 0; i < 100; i++) {
            void *p = abx_malloc(16);
            assert_non_null(p);
            abx_free(p);
        }
        assert_int_equal(abx_fault_count(), 100); /* still counted while disabled */
    }

    /* A reset restarts the count: the new n is relative to the reset. */
    abx_fault_reset(5);
    for (int i = 0; i < 3; i++) {
        void *p = abx_malloc(16);
        assert_non_null(p);
        abx_free(p);
    }
    abx_fault_reset(2);
    assert_int_equal(abx_fault_count(), 0);
    void *p = abx_malloc(16);
    assert_non_null(p);
    abx_free(p);
    assert_null(abx_malloc(16));
    assert_int_equal(abx_fault_count(), 2);
}

static void test_buf_under_failure(void **state)
{
    (void)state;
    abx_buf b;
    abx_buf_init(&b, 0);
    assert_true(abx_buf_puts(&b, "kept"));
    size_t cap = b.cap;

    /* Growing past the capacity needs a realloc, which fails. */
    char big[1000];
    memset(big, 'x', sizeof(big));
    abx_fault_reset(1);
    assert_false(abx_buf_append(&b, big, sizeof(big)));
    assert_true(b.failed);
    assert_int_equal(b.len, 4);
    assert_int_equal(b.cap, cap);
    assert_string_equal(b.data, "kept");
    abx_buf_release(&b);

    /* A first append on an empty buffer, and printf. */
    abx_fault_reset(1);
    assert_false(abx_buf_putc(&b, 'x'));
    assert_true(b.failed);
    assert_null(b.data);
    abx_buf_release(&b);
    abx_fault_reset(1);
    assert_false(abx_buf_printf(&b, "%d", 12));
    assert_true(b.failed);
    abx_buf_release(&b);

    /* Detaching an empty buffer allocates its "". */
    abx_fault_reset(1);
    assert_null(abx_buf_detach(&b));
    assert_null(b.data);
}

static void test_arena_under_failure(void **state)
{
    (void)state;
    abx_fault_reset(1);
    assert_null(abx_arena_new());

    abx_fault_reset(0);
    abx_arena *a = abx_arena_new();
    assert_non_null(a);
    abx_fault_reset(1); /* the first chunk */
    assert_null(abx_arena_alloc(a, 10));
    abx_fault_reset(1); /* a hook's record lives in the arena too */
    assert_false(abx_arena_cleanup(a, abx_free, NULL));
    assert_int_equal(abx_fault_count(), 1);
    char *s = abx_arena_strdup(a, "fine now");
    assert_string_equal(s, "fine now");

    abx_fault_reset(1); /* a big allocation's own chunk */
    assert_null(abx_arena_alloc(a, 1 << 20));
    abx_fault_reset(1); /* fits in the current chunk: no allocation, no failure */
    assert_non_null(abx_arena_alloc(a, 16));
    assert_int_equal(abx_fault_count(), 0);
    abx_fault_reset(1); /* wide enough to need a chunk of its own */
    assert_null(abx_arena_printf(a, "%*s", 50000, "x"));
    assert_int_equal(abx_fault_count(), 1);
    char *wide = abx_arena_printf(a, "%*s", 50000, "x");
    assert_non_null(wide);
    assert_int_equal(strlen(wide), 50000);
    assert_string_equal(s, "fine now");
    abx_arena_free(a);
}

static void test_encoders_under_failure(void **state)
{
    (void)state;
    abx_fault_reset(1);
    assert_null(abx_base64_encode("abc", 3, NULL));
    abx_fault_reset(1);
    size_t n = 42;
    assert_null(abx_base64_decode("YWJj", 4, &n));
    assert_int_equal(n, 42);
    abx_fault_reset(2); /* only the second call fails; the third works again */
    char *e1 = abx_base64_encode("abc", 3, NULL);
    assert_string_equal(e1, "YWJj");
    abx_free(e1);
    assert_null(abx_base64_encode("abc", 3, NULL));
    unsigned char *d = abx_base64_decode("YWJj", 4, &n);
    assert_non_null(d);
    assert_memory_equal(d, "abc", 3);
    abx_free(d);
}

/* A request-shaped workload that checks every allocation and unwinds on failure.
 * Returns true only when everything succeeded. */
static bool workload(void)
{
    bool ok = false;
    char *det = NULL, *enc = NULL, *s = NULL;
    unsigned char *dec = NULL;
    abx_buf b;
    abx_buf_init(&b, 0);
    abx_arena *a = abx_arena_new();
    if (!a)
        return false;
    for (int i = 0; i < 50; i++)
        if (!abx_arena_alloc(a, 100 + (size_t)i * 50))
            goto out;
    if (!abx_arena_printf(a, "%d-%s", 42, "x"))
        goto out;
    if (!abx_arena_alloc(a, 100000))
        goto out;
    char *heap = abx_strdup("freed by a hook");
    if (!heap)
        goto out;
    if (!abx_arena_cleanup(a, abx_free, heap)) {
        abx_free(heap);
        goto out;
    }
    for (int i = 0; i < 200; i++)
        if (!abx_buf_printf(&b, "line %d\n", i))
            goto out;
    det = abx_buf_detach(&b);
    if (!det)
        goto out;
    enc = abx_base64_encode(det, strlen(det), NULL);
    if (!enc)
        goto out;
    dec = abx_base64_decode(enc, strlen(enc), NULL);
    if (!dec)
        goto out;
    s = abx_asprintf("%s", "tail");
    if (!s)
        goto out;
    char *r = abx_realloc(s, 1000);
    if (!r)
        goto out;
    s = r;
    ok = strcmp((char *)dec, det) == 0 && strcmp(s, "tail") == 0;
out:
    abx_free(s);
    abx_free(dec);
    abx_free(enc);
    abx_free(det);
    abx_buf_release(&b);
    abx_arena_free(a);
    return ok;
}

static void test_sweep_every_failure_point(void **state)
{
    (void)state;
    abx_fault_reset(0);
    assert_true(workload());
    long total = abx_fault_count();
    assert_true(total > 10);
    /* Failing any single allocation makes the workload fail, cleanly (the sanitizer
     * build turns a leak or a use-after-free on any of these paths into a failure). */
    for (long n = 1; n <= total; n++) {
        abx_fault_reset(n);
        if (workload())
            fail_msg("workload succeeded although allocation %ld of %ld failed", n, total);
        assert_true(abx_fault_count() >= n);
    }
    abx_fault_reset(total + 1);
    assert_true(workload());
    assert_int_equal(abx_fault_count(), total);
}

/* Enough calls that a non-atomic counter reliably loses some of them. */
enum { THREADS = 4, PER_THREAD = 200000 };

static pthread_barrier_t start_line;

static void *alloc_loop(void *arg)
{
    long *failures = arg;
    pthread_barrier_wait(&start_line);
    for (int i = 0; i < PER_THREAD; i++) {
        void *p = abx_malloc(32);
        if (!p)
            (*failures)++;
        abx_free(p);
    }
    return NULL;
}

static void test_threads_counted_atomically(void **state)
{
    (void)state;
    for (int round = 0; round < 2; round++) {
        /* Round 0: no failure, exact count. Round 1: exactly one failure overall. */
        abx_fault_reset(round == 0 ? 0 : THREADS * PER_THREAD / 2);
        pthread_t t[THREADS];
        long failures[THREADS] = {0};
        assert_int_equal(pthread_barrier_init(&start_line, NULL, THREADS), 0);
        for (int i = 0; i < THREADS; i++)
            assert_int_equal(pthread_create(&t[i], NULL, alloc_loop, &failures[i]), 0);
        for (int i = 0; i < THREADS; i++)
            assert_int_equal(pthread_join(t[i], NULL), 0);
        pthread_barrier_destroy(&start_line);
        long total = 0;
        for (int i = 0; i < THREADS; i++)
            total += failures[i];
        assert_int_equal(abx_fault_count(), THREADS * PER_THREAD);
        assert_int_equal(total, round);
    }
}

/* The child half of the environment test: runs in a fresh process where the
 * injector has not read the environment yet. Exit code 0 means as expected. */
static int env_child(const char *expect)
{
    int fail_at = atoi(expect); /* 0: expect no failure */
    for (int i = 1; i <= 6; i++) {
        void *p = abx_malloc(8);
        if ((p == NULL) != (i == fail_at))
            return 10 + i;
        abx_free(p);
    }
    return abx_fault_count() == 6 ? 0 : 2;
}

static int spawn_env_child(const char *value, const char *expect)
{
    char var[64] = "ABX_FAIL_ALLOC_AT=";
    strncat(var, value, sizeof(var) - strlen(var) - 1);
    char *envp[] = {var, NULL};
    char *argv[] = {"test_fault", "--env-child", (char *)expect, NULL};
    pid_t pid;
    if (posix_spawn(&pid, "/proc/self/exe", NULL, NULL, argv, envp) != 0)
        return -1;
    int status;
    if (waitpid(pid, &status, 0) != pid || !WIFEXITED(status))
        return -2;
    return WEXITSTATUS(status);
}

static void test_environment_variable(void **state)
{
    (void)state;
    assert_int_equal(spawn_env_child("3", "3"), 0);
    assert_int_equal(spawn_env_child("1", "1"), 0);
    assert_int_equal(spawn_env_child("0", "0"), 0);    /* 0 disables */
    assert_int_equal(spawn_env_child("-2", "0"), 0);   /* negative disables */
    assert_int_equal(spawn_env_child("junk", "0"), 0); /* unparsable disables */
    assert_int_equal(spawn_env_child("3x", "0"), 0);
    assert_int_equal(spawn_env_child("", "0"), 0);
    assert_int_equal(spawn_env_child("100", "0"), 0);  /* beyond the six calls */
}

int main(int argc, char **argv)
{
    if (argc == 3 && strcmp(argv[1], "--env-child") == 0)
        return env_child(argv[2]);
    const struct CMUnitTest tests[] = {
        cmocka_unit_test_setup(test_nth_call_fails_once, reset_off),
        cmocka_unit_test_setup(test_each_allocator_counts_once, reset_off),
        cmocka_unit_test_setup(test_disable_and_restart, reset_off),
        cmocka_unit_test_setup(test_buf_under_failure, reset_off),
        cmocka_unit_test_setup(test_arena_under_failure, reset_off),
        cmocka_unit_test_setup(test_encoders_under_failure, reset_off),
        cmocka_unit_test_setup(test_sweep_every_failure_point, reset_off),
        cmocka_unit_test_setup(test_threads_counted_atomically, reset_off),
        cmocka_unit_test_setup(test_environment_variable, reset_off),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}

#else /* no fault injection in this build */

static void test_reset_is_a_noop(void **state)
{
    (void)state;
    /* Asking for the very next allocation to fail changes nothing here. */
    for (long n = -1; n <= 3; n++) {
        abx_fault_reset(n);
        void *a = abx_malloc(8), *b = abx_calloc(2, 8), *c = abx_realloc(NULL, 8);
        char *d = abx_strdup("d"), *e = abx_strndup("ee", 1), *f = abx_asprintf("%d", 6);
        assert_non_null(a);
        assert_non_null(b);
        assert_non_null(c);
        assert_string_equal(d, "d");
        assert_string_equal(e, "e");
        assert_string_equal(f, "6");
        abx_free(a);
        abx_free(b);
        abx_free(c);
        abx_free(d);
        abx_free(e);
        abx_free(f);
        assert_int_equal(abx_fault_count(), 0); /* nothing is counted */
    }
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_reset_is_a_noop),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}

#endif
