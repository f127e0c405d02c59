/* test_advice: the report's size histogram, time share and advice, and the
 * PINFAST_TRACE file, exact on a known workload.  The binary re-executes itself as a child ("child"
 * mode) under pinfast with a JSON report; the parent checks the histogram
 * rows and which advice was given.  Under the plain variant there is no
 * report to check: the test only runs the workload. */
#define _GNU_SOURCE
#include "spawn.h"
#include "t.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define MiB (1u << 20)

/* 3000 copies of 64 B (tiny, synchronous), one staged 80 MiB copy (pin
 * your buffers), 25 pinned allocations of 4 KiB (pinned churn), 3 D2H
 * copies of 4 KiB, 13 trips of 512 KiB to the host and back: 12
 * unchanged (round trips), one with its first word changed (not one), and
 * 13 trips of 64 KiB, too small to be looked at. */
static int child(void)
{
    struct drv d;
    CUcontext ctx;
    CUdeviceptr a;
    if (drv_load(&d, DRV_GPA, 0) || drv_context0(&d, &ctx) || d.MemAlloc(&a, 80 * MiB))
        return 11;
    unsigned char *h = malloc(80 * MiB);
    memset(h, 7, 80 * MiB);
    for (int i = 0; i < 3000; i++)
        if (d.MemcpyHtoD(a, h, 64))
            return 12;
    if (d.MemcpyHtoD(a, h, 80 * MiB))
        return 13;
    for (int i = 0; i < 3; i++)
        if (d.MemcpyDtoH(h, a, 4096))
            return 14;
    for (int i = 0; i < 25; i++) {
        void *p;
        if (d.MemHostAlloc(&p, 4096, 0) || d.MemFreeHost(p))
            return 15;
    }
    for (size_t n = 512 << 10; n >= 65536; n /= 8)
        for (int i = 0; i < 13; i++) {
            if (d.MemcpyDtoH(h, a, n))
                return 16;
            h[0] ^= i == 12; /* the last trip changes what came back */
            if (d.MemcpyHtoD(a, h, n))
                return 17;
        }
    free(h);
    return 0;
}

static void test_histogram_and_advice(void **state)
{
    (void)state;
    const char *dir = sp_tmpdir("advice");
    assert_non_null(dir);
    char file[512], set0[600];
    snprintf(file, sizeof file, "%s/r.json", dir);
    snprintf(set0, sizeof set0, "PINFAST_STATS_FILE=%s", file);
    const char *set[] = {set0, "PINFAST_STATS=json", NULL};
    char *argv[] = {"test_advice", "child", NULL};
    assert_int_equal(sp_run(argv, t_pinfast(), set, NULL, NULL, 120, NULL), 0);
    if (!t_pinfast()) {
        sp_rmdir(dir);
        return;
    }
    char *r = sp_slurp(file, NULL);
    assert_non_null(r);
    /* bucket 64 holds the 3000 tiny copies, bucket 64 MiB the 80 MiB one */
    assert_non_null(strstr(r, "\"H2D\":[{\"from\":64,\"calls\":3000,\"bytes\":192000,"));
    assert_non_null(strstr(r, "{\"from\":67108864,\"calls\":1,\"bytes\":83886080,"));
    assert_non_null(strstr(r, "\"D2H\":[{\"from\":4096,\"calls\":3,\"bytes\":12288,"));
    assert_non_null(strstr(r, "\"summary\":{\"copy_seconds\":"));
    assert_non_null(strstr(r, ",\"round_trips\":12,\"round_trip_bytes\":6291456}"));
    static const char *const given[] = {"tiny-copies", "synchronous-copies", "pin-buffers",
                                        "pinned-churn", "round-trips"};
    for (size_t i = 0; i < sizeof given / sizeof given[0]; i++) {
        char kind[64];
        snprintf(kind, sizeof kind, "{\"kind\":\"%s\",", given[i]);
        if (!strstr(r, kind))
            fail_msg("advice %s missing from:\n%s", given[i], strstr(r, "\"advice\""));
    }
    /* nothing went through the driver's pageable path but tiny copies */
    assert_null(strstr(r, "\"pageable-memory\""));
    assert_null(strstr(r, "\"register-churn\""));
    assert_non_null(strstr(r, "3000 copies under 4 KiB"));
    free(r);
    sp_rmdir(dir);
}

/* One line per intercepted call, whatever thread made it. */
static void test_trace(void **state)
{
    (void)state;
    if (!t_pinfast())
        return;
    const char *dir = sp_tmpdir("trace");
    assert_non_null(dir);
    char set0[600];
    snprintf(set0, sizeof set0, "PINFAST_TRACE=%s/t-%%p.txt", dir);
    const char *set[] = {set0, "PINFAST_STATS=off", NULL};
    char *argv[] = {"test_advice", "child", NULL};
    pid_t pid;
    assert_int_equal(sp_run(argv, 1, set, NULL, NULL, 120, &pid), 0);
    char file[600];
    snprintf(file, sizeof file, "%s/t-%d.txt", dir, (int)pid);
    char *t = sp_slurp(file, NULL);
    assert_non_null(t);
    static const struct { const char *api; int want; } rows[] = {
        {"cuMemAlloc", 1}, {"cuMemcpyHtoD", 3027}, {"cuMemcpyDtoH", 29},
        {"cuMemHostAlloc", 25}, {"cuMemFreeHost", 25}};
    int lines = 0;
    for (char *l = strtok(t, "\n"); l; l = strtok(NULL, "\n")) {
        if (l[0] == '#')
            continue;
        char api[64], dirn[16], mem[16], path[16];
        double start, secs;
        long tid;
        size_t bytes;
        int result;
        assert_int_equal(sscanf(l, "%lf %ld %63s %15s %15s %zu %lf %15s %d", &start, &tid, api, dirn,
                                mem, &bytes, &secs, path, &result), 9);
        assert_int_equal(result, 0);
        for (size_t i = 0; i < sizeof rows / sizeof rows[0]; i++)
            lines += !strcmp(api, rows[i].api);
    }
    assert_int_equal(lines, 1 + 3027 + 29 + 25 + 25);
    free(t);
    sp_rmdir(dir);
}

/* An unwritable trace file: one warning, and the program carries on. */
static void test_trace_unwritable(void **state)
{
    (void)state;
    if (!t_pinfast())
        return;
    const char *dir = sp_tmpdir("trace-bad");
    assert_non_null(dir);
    char err[600];
    snprintf(err, sizeof err, "%s/stderr", dir);
    const char *set[] = {"PINFAST_TRACE=/nonexistent-dir/t.txt", "PINFAST_STATS=off", NULL};
    char *argv[] = {"test_advice", "child", NULL};
    assert_int_equal(sp_run(argv, 1, set, NULL, err, 120, NULL), 0);
    char *e = sp_slurp(err, NULL);
    assert_non_null(e);
    char *w = strstr(e, "pinfast: warning: cannot write the trace");
    assert_non_null(w);
    assert_null(strstr(w + 1, "pinfast:"));
    free(e);
    sp_rmdir(dir);
}

/* Pinned buffers for data already in pageable memory, as
 * tensor.pin_memory() makes them ("late"), or the same buffers allocated
 * before any copy ("early"): after a copy of 24 MiB, three of 24 MiB, one of
 * 32 MiB (the power of two above: PyTorch's rounding) and one of 16 MiB (no
 * match), each filled and copied to the device; the late run then frees the
 * first and pins 24 MiB again. */
static int pinning(int late)
{
    static const size_t size[] = {24 * MiB, 24 * MiB, 24 * MiB, 32 * MiB, 16 * MiB};
    enum { N = sizeof size / sizeof size[0] };
    struct drv d;
    CUcontext ctx;
    CUdeviceptr a;
    if (drv_load(&d, DRV_GPA, 0) || drv_context0(&d, &ctx) || d.MemAlloc(&a, 32 * MiB))
        return 21;
    unsigned char *h = malloc(32 * MiB);
    void *p[N];
    if (!h)
        return 22;
    memset(h, 5, 32 * MiB);
    for (int round = 0; round < 2; round++) {
        if (round != late && d.MemcpyHtoD(a, h, 24 * MiB))
            return 23;
        for (int i = 0; i < N && round == late; i++)
            if (i == 3 ? d.MemAllocHost(&p[i], size[i]) : d.MemHostAlloc(&p[i], size[i], 0))
                return 24;
    }
    for (int i = 0; i < N; i++) {
        memcpy(p[i], h, size[i]);
        if (d.MemcpyHtoD(a, p[i], size[i]))
            return 25;
    }
    if (late && (d.MemFreeHost(p[0]) || d.MemHostAlloc(&p[0], size[0], 0)))
        return 26;
    for (int i = 0; i < N; i++)
        if (d.MemFreeHost(p[i]))
            return 27;
    free(h);
    return 0;
}

/* The advice of a run of the child in mode, or NULL under the plain variant. */
static char *advice_of(const char *mode)
{
    const char *dir = sp_tmpdir("pinning");
    assert_non_null(dir);
    char file[512], set0[600];
    snprintf(file, sizeof file, "%s/r.json", dir);
    snprintf(set0, sizeof set0, "PINFAST_STATS_FILE=%s", file);
    const char *set[] = {set0, "PINFAST_STATS=json", NULL};
    char *argv[] = {"test_advice", (char *)mode, NULL};
    assert_int_equal(sp_run(argv, t_pinfast(), set, NULL, NULL, 120, NULL), 0);
    char *r = t_pinfast() ? sp_slurp(file, NULL) : NULL;
    sp_rmdir(dir);
    if (!r)
        return NULL;
    char *adv = strstr(r, "\"advice\":[");
    assert_non_null(adv);
    memmove(r, adv, strlen(adv) + 1);
    return r;
}

/* 5 pinned allocations of sizes copied before, 128 MiB, at most 104 MiB held. */
static void test_late_pinning(void **state)
{
    (void)state;
    char *adv = advice_of("late");
    if (!adv)
        return;
    const char *k = strstr(adv, "{\"kind\":\"late-pinning\",\"text\":\"");
    if (!k)
        fail_msg("no late-pinning advice in:\n%s", adv);
    assert_non_null(strstr(k, "\"text\":\"5 pinned allocations (128.0 MiB) had sizes already "
                              "copied from pageable memory, holding up to 104.0 MiB pinned"));
    free(adv);
}

/* The same buffers allocated before the copies: no advice. */
static void test_early_pinning(void **state)
{
    (void)state;
    char *adv = advice_of("early");
    if (!adv)
        return;
    assert_null(strstr(adv, "late-pinning"));
    free(adv);
}

int main(int argc, char **argv)
{
    if (argc > 1 && !strcmp(argv[1], "child"))
        return child();
    if (argc > 1 && (!strcmp(argv[1], "late") || !strcmp(argv[1], "early")))
        return pinning(!strcmp(argv[1], "late"));
    const struct CMUnitTest tests[] = {cmocka_unit_test(test_histogram_and_advice),
                                       cmocka_unit_test(test_trace),
                                       cmocka_unit_test(test_trace_unwritable),
                                       cmocka_unit_test(test_late_pinning),
                                       cmocka_unit_test(test_early_pinning)};
    return cmocka_run_group_tests(tests, NULL, NULL);
}
