/* test_nvtx: NVTX ranges around staged copies.  The binary re-executes
 * itself as a child under pinfast with the fake tool of nvtx/tool.c
 * injected through NVTX_INJECTION64_PATH ($PFT_NVTX_TOOL), and checks the
 * tool's log: one range per copy pinfast tried to stage, named after it,
 * pushed and popped in balance on the thread that made the copy; none for
 * small copies, none with PINFAST_NVTX=0, and no tool loaded without the
 * variable.  Under the plain variant the children only run. */
#define _GNU_SOURCE
#include "spawn.h"
#include "t.h"

#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#define MiB (1u << 20)
#define BIG (4 * MiB)

static struct drv d;
static CUcontext ctx;
static CUdeviceptr dev;

/* one staged H2D from a thread of its own */
static void *other_thread(void *arg) {
    unsigned char *h = arg;
    if (d.CtxSetCurrent(ctx) || d.MemcpyHtoD(dev + BIG, h, BIG))
        return h;
    return NULL;
}

/* 2 staged H2D and 1 staged D2H here, 1 H2D on another thread, 5 small ones */
static int child(void) {
    if (drv_load(&d, DRV_GPA, 0) || drv_context0(&d, &ctx) || d.MemAlloc(&dev, 2 * BIG))
        return 11;
    unsigned char *h = malloc(BIG), *g = malloc(BIG);
    if (!h || !g)
        return 12;
    t_fill(h, BIG, 3);
    t_fill(g, BIG, 4);
    pthread_t t;
    void *res = h;
    if (pthread_create(&t, NULL, other_thread, g) || pthread_join(t, &res) || res)
        return 13;
    if (d.MemcpyHtoD(dev, h, BIG) || d.MemcpyHtoD(dev, h, BIG))
        return 14;
    for (int i = 0; i < 5; i++)
        if (d.MemcpyHtoD(dev, h, 64))
            return 15;
    t_poison(h, BIG);
    if (d.MemcpyDtoH(h, dev, BIG))
        return 16;
    size_t bad;
    if (!t_check_fill(h, BIG, 3, &bad))
        return 17;
    free(h);
    free(g);
    return 0;
}

/* Runs the child with the settings; returns the tool's log ("" when the
 * tool wrote none), or NULL under the plain variant. */
static char *run(int with_tool, const char *extra) {
    const char *dir = sp_tmpdir("nvtx");
    assert_non_null(dir);
    char log[512], set0[600], set1[600];
    snprintf(log, sizeof log, "%s/log", dir);
    snprintf(set0, sizeof set0, "PFT_NVTX_LOG=%s", log);
    const char *tool = getenv("PFT_NVTX_TOOL");
    assert_non_null(tool);
    snprintf(set1, sizeof set1, "NVTX_INJECTION64_PATH=%s", tool);
    const char *set[] = {set0, "PINFAST_STATS=off", with_tool ? set1 : extra, extra, NULL};
    char *argv[] = {"test_nvtx", "child", NULL};
    assert_int_equal(sp_run(argv, t_pinfast(), set, NULL, NULL, 120, NULL), 0);
    char *r = NULL;
    if (t_pinfast()) {
        struct stat st;
        r = stat(log, &st) ? strdup("") : sp_slurp(log, NULL);
        assert_non_null(r);
    }
    sp_rmdir(dir);
    return r;
}

/* Checks that pushes and pops balance and nest on each thread, and that
 * the ranges, in the order pushed, are the names in want (NULL-ended). */
static void check_ranges(char *log, const char *const *want) {
    int tids[8] = {0}, depth[8] = {0}, ntids = 0, n = 0;
    assert_non_null(strstr(log, "init\ndomain pinfast\n"));
    for (char *l = strtok(log, "\n"); l; l = strtok(NULL, "\n")) {
        assert_null(strstr(l, "not the domain"));
        int tid, k;
        char name[128];
        unsigned long long payload;
        int push = sscanf(l, "push %d %llu %127[^\n]", &tid, &payload, name) == 3;
        if (!push && sscanf(l, "pop %d", &tid) != 1)
            continue;
        for (k = 0; k < ntids && tids[k] != tid; k++)
            ;
        if (k == ntids) {
            assert_true(ntids < 8);
            tids[ntids++] = tid;
        }
        if (!push) {
            assert_true(depth[k] > 0);
            depth[k]--;
            continue;
        }
        depth[k]++;
        assert_true(depth[k] == 1); /* pinfast's ranges do not nest */
        assert_non_null(want[n]);
        if (strcmp(name, want[n]))
            fail_msg("range %d is \"%s\", not \"%s\"", n, name, want[n]);
        assert_int_equal(payload, BIG);
        n++;
    }
    assert_null(want[n]);
    for (int k = 0; k < ntids; k++)
        assert_int_equal(depth[k], 0);
    assert_int_equal(ntids, 2);
}

static void test_staged(void **state) {
    (void)state;
    char *log = run(1, NULL);
    if (!log)
        return;
    static const char *const want[] = {"pinfast stage H2D 4.0 MiB", "pinfast stage H2D 4.0 MiB",
                                       "pinfast stage H2D 4.0 MiB", "pinfast stage D2H 4.0 MiB",
                                       NULL};
    check_ranges(log, want);
    free(log);
}

/* No staging memory: each copy's attempt, then its pass-through. */
static void test_declined(void **state) {
    (void)state;
    char *log = run(1, "PINFAST_STAGING=0");
    if (!log)
        return;
    static const char *const want[] = {
        "pinfast stage H2D 4.0 MiB", "pinfast passthrough H2D 4.0 MiB",
        "pinfast stage H2D 4.0 MiB", "pinfast passthrough H2D 4.0 MiB",
        "pinfast stage H2D 4.0 MiB", "pinfast passthrough H2D 4.0 MiB",
        "pinfast stage D2H 4.0 MiB", "pinfast passthrough D2H 4.0 MiB", NULL};
    check_ranges(log, want);
    free(log);
}

/* PINFAST_NVTX=0, or no tool: NVTX is never started, no tool loaded. */
static void test_off(void **state) {
    (void)state;
    char *log = run(1, "PINFAST_NVTX=0");
    if (log)
        assert_string_equal(log, "");
    free(log);
    log = run(0, NULL);
    if (log)
        assert_string_equal(log, "");
    free(log);
}

int main(int argc, char **argv) {
    if (argc > 1 && !strcmp(argv[1], "child"))
        return child();
    const struct CMUnitTest tests[] = {cmocka_unit_test(test_staged),
                                       cmocka_unit_test(test_declined),
                                       cmocka_unit_test(test_off)};
    return cmocka_run_group_tests(tests, NULL, NULL);
}
