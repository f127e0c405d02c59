/* test_clock: the ticks pinfast times its calls in (shim/base/clock.c, linked in
 * here), held against CLOCK_MONOTONIC: durations of random sleeps converted
 * within 1%, in this process and in a forked child; ns -> ticks -> ns gives
 * back what went in; a start after the end is no huge wrapped duration; and
 * without the counter (the fallback) ticks are CLOCK_MONOTONIC ns. */
#define _GNU_SOURCE
#include "t.h"
#include "clock.h"

#include <stdio.h>
#include <stdlib.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

static void nap_ns(uint64_t ns)
{
    struct timespec t = {(time_t)(ns / 1000000000u), (long)(ns % 1000000000u)};
    while (nanosleep(&t, &t))
        ;
}

/* Ticks and ns at one moment: bracketed, retried while the bracket is wide
 * (a 2-core CI machine under sanitizers preempts for ms: 2.6% of 30 ms
 * between two unbracketed readings was seen). */
static void both(uint64_t *t, uint64_t *ns)
{
    for (int i = 0;; i++) {
        uint64_t a = pf_now_ns();
        *t = pf_ticks();
        uint64_t b = pf_now_ns();
        *ns = a + (b - a) / 2;
        if (b - a < 20000 || i == 1000)
            return;
    }
}

/* |converted - measured| / measured over a random sleep of 20-40 ms */
static double error_over_sleep(void)
{
    uint64_t n0, t0, n1, t1;
    both(&t0, &n0);
    nap_ns(t_rand_range(20, 40) * 1000000u);
    both(&t1, &n1);
    double want = (double)(n1 - n0), got = (double)pf_ticks_to_ns(t1 - t0);
    return (got > want ? got - want : want - got) / want;
}

static void test_conversion_matches_monotonic(void **s)
{
    (void)s;
    for (int i = 0; i < 5; i++) {
        double e = error_over_sleep();
        if (e > 0.01)
            fail_msg("round %d: ticks converted to ns off CLOCK_MONOTONIC by %.3f%%", i, 100 * e);
    }
}

static void test_ns_to_ticks_and_back(void **s)
{
    (void)s;
    for (int i = 0; i < 1000; i++) {
        uint64_t ns = t_rand_range(1000, 10000000000u);
        uint64_t back = pf_ticks_to_ns(pf_ns_to_ticks(ns));
        uint64_t d = back > ns ? back - ns : ns - back;
        if (d > 1 + ns / 1000000)
            fail_msg("%llu ns -> %llu ticks -> %llu ns", (unsigned long long)ns,
                     (unsigned long long)pf_ns_to_ticks(ns), (unsigned long long)back);
    }
}

/* a thread moved to a CPU whose counter is behind must not count ~2^64 */
static void test_start_after_end_is_zero(void **s)
{
    (void)s;
    uint64_t ahead = pf_ns_to_ticks(t_rand_range(1000, 1000000000u));
    assert_int_equal(pf_ticks_since(pf_ticks() + ahead), 0);
    uint64_t t0 = pf_ticks();
    nap_ns(t_rand_range(1, 1000) * 1000u);
    assert_true(pf_ticks_since(t0) > 0);
}

/* the child keeps the parent's anchor and ratio */
static void test_forked_child(void **s)
{
    (void)s;
    fflush(NULL);
    pid_t pid = fork();
    assert_true(pid >= 0);
    if (pid == 0)
        _exit(error_over_sleep() <= 0.01 ? 0 : 1);
    int st;
    assert_int_equal(waitpid(pid, &st, 0), pid);
    assert_true(WIFEXITED(st));
    assert_int_equal(WEXITSTATUS(st), 0);
}

/* As on a CPU without an invariant TSC; last, since it changes the mode. */
static void test_without_counter(void **s)
{
    (void)s;
    pf_clock_mode = PF_CLOCK_NS;
    uint64_t before = pf_now_ns(), t = pf_ticks(), after = pf_now_ns();
    assert_true(before <= t && t <= after);
    uint64_t x = t_rand();
    assert_true(pf_ticks_to_ns(x) == x);
    assert_true(pf_ns_to_ticks(x) == x);
    assert_true(error_over_sleep() <= 0.01);
}

int main(void)
{
    t_seed();
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_conversion_matches_monotonic),
        cmocka_unit_test(test_ns_to_ticks_and_back),
        cmocka_unit_test(test_start_after_end_is_zero),
        cmocka_unit_test(test_forked_child),
        cmocka_unit_test(test_without_counter),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
