/* test_batch: batches pinfast stages give what the driver alone gives.  A
 * child runs the random cases of batch_cases.h (cuMemcpyBatchAsync and
 * cuMemcpy3DBatchAsync, both ABIs, pageable, pinned and device operands,
 * random attributes, bad input of each kind) and logs, per case, the return
 * code, failIdx and a hash of every host and device byte after it.  The
 * test runs the child on the fake alone and under pinfast with the same
 * seed, twice: every size staged (PINFAST_MIN_SIZE=0), and from 128 KiB
 * with the smaller H2D copies bounced; the logs must be equal, and the
 * report must show batches of both families staged (and, the second time,
 * bounced), so the test fails when pinfast passes them through.  Then the
 * cases behind work on their stream, the sources of 3D ops read in the
 * call written over as it returns, plain and under pinfast: equal logs,
 * and 3D ops bounced over the registration of the cases' host buffer.
 * tests/gpu/checks/batch.sh runs the same cases on the GPU.
 * Then the source orders, plain and under pinfast: an H2D from pageable
 * memory in stream order (CU_MEMCPY_SRC_ACCESS_ORDER_STREAM) reads what a
 * host function queued before it wrote, and one of the other orders what
 * the source held in the call, whatever the program writes after it.
 * Then a pitched batch H2D of a registered heap block queued behind a long
 * kernel returns at once (bounced under pinfast) and lands its rows.  Then a
 * 3D batch the driver refuses at its second op lands its first as its
 * source was at the call, over a registration too; and a batch's D2H into
 * a registered block behind a long kernel returns at once.
 * Internal: test_batch run <log file>; test_batch order; test_batch busy;
 * test_batch refused; test_batch d2h. */
#define _GNU_SOURCE
#include "t.h"
#include "report.h"
#include "spawn.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#define CASES 300

/* A sanitizer's malloc comes before pinfast in the preload list: pinfast's
 * heap is off and nothing is registered (docs/design.md). */
#if defined(__SANITIZE_ADDRESS__) || defined(__SANITIZE_THREAD__)
#define OWN_MALLOC 0
#else
#define OWN_MALLOC 1
#endif

static FILE *LOG;
#define BC(f) D.f
#define BC_LOG(...) fprintf(LOG, __VA_ARGS__)
#include "batch_cases.h"

static int child_run(const char *logf)
{
    if (t_setup(NULL) || !(LOG = fopen(logf, "w")))
        return 30;
    rs = t_seed();
    int rc = batch_cases(CASES);
    fclose(LOG);
    return rc;
}

/* ---- the test: plain and pinfast, same seed --------------------------------- */
static long calls(const struct report *r, const char *api, const char *path)
{
    long n = 0;
    for (int i = 0; i < r->nt; i++)
        if (!strcmp(r->t[i].api, api) && !strcmp(r->t[i].path, path))
            n += r->t[i].calls;
    return n;
}

/* One child; v: 0 plain, else under pinfast with PINFAST_MIN_SIZE=min;
 * busy: the cases behind work on their stream (BC_BUSY). */
static char *run(int v, const char *min, int busy, const char *json)
{
    char seed[64], log[256], stats[300], minv[64];
    snprintf(seed, sizeof seed, "PFT_SEED=%llu", (unsigned long long)t_seed());
    snprintf(log, sizeof log, "%s/%d%s.log", sp_dir, v, busy ? "-busy" : "");
    snprintf(stats, sizeof stats, "PINFAST_STATS_FILE=%s", json);
    snprintf(minv, sizeof minv, "PINFAST_MIN_SIZE=%s", min);
    char *argv[] = { "test_batch", "run", log, NULL };
    const char *set[] = { seed, minv, "PINFAST_CHUNK=64K", "PINFAST_STAGING=1M", "PINFAST_STATS=json", stats,
                          busy ? "BC_BUSY=1" : NULL, NULL };
    int rc = sp_run(argv, v != 0, set, NULL, NULL, 600, NULL);
    if (rc)
        fail_msg("child %d exited %d", v, rc);
    char *s = sp_slurp(log, NULL);
    assert_non_null(s);
    return s;
}

static void same(const char *a, const char *b)
{
    for (const char *p = a, *q = b; *p || *q;) {
        const char *pe = strchrnul(p, '\n'), *qe = strchrnul(q, '\n');
        if (pe - p != qe - q || memcmp(p, q, (size_t)(pe - p)))
            fail_msg("plain and pinfast differ:\n  plain:   %.*s\n  pinfast: %.*s", (int)(pe - p), p,
                     (int)(qe - q), q);
        p = *pe ? pe + 1 : pe;
        q = *qe ? qe + 1 : qe;
    }
}

/* The child `test_batch what` plain, then under pinfast, with the
 * settings `set`: each must exit 0. */
static void both(const char *what, const char *const *set)
{
    char *argv[] = { "test_batch", (char *)what, NULL };
    for (int v = 0; v < 2; v++) {
        int rc = sp_run(argv, v, set, NULL, NULL, 120, NULL);
        if (rc)
            fail_msg("the %s %s child exited %d", v ? "pinfast" : "plain", what, rc);
    }
}

static void equivalence(void **state)
{
    (void)state;
    char json[256];
    snprintf(json, sizeof json, "%s/report.json", sp_dir);
    char *plain = run(0, "0", 0, json);
    static const char *const mins[] = { "0", "128K" };
    static const char *const apis[] = { "cuMemcpyBatchAsync", "cuMemcpy3DBatchAsync" };
    for (int v = 1; v <= 2; v++) {
        char *pf = run(v, mins[v - 1], 0, json);
        same(plain, pf);
        free(pf);
        struct report r;
        if (report_read(json, &r))
            fail_msg("report: %s", r.err);
        for (int k = 0; k < 2; k++) {
            long st = calls(&r, apis[k], "staged"), bo = calls(&r, apis[k], "bounced");
            printf("[ batches  ] PINFAST_MIN_SIZE=%s %s: staged %ld, bounced %ld\n", mins[v - 1], apis[k], st, bo);
            if (!st && (v == 1 || k == 0))
                fail_msg("no %s batch was staged", apis[k]);
            if (v == 2 && k == 0 && !bo)
                fail_msg("no %s batch was bounced", apis[k]);
        }
    }
    free(plain);
}

/* The cases behind work on their stream, with the sources of 3D ops read in
 * the call written over as it returns (BC_BUSY), plain and under pinfast
 * from 128 KiB: the logs must be equal, and 3D ops under it over the
 * registration of the cases' host buffer (copied again and again) must
 * have been bounced. */
static void busy_cases(void **state)
{
    (void)state;
    char json[256];
    snprintf(json, sizeof json, "%s/report-busy.json", sp_dir);
    char *plain = run(0, "128K", 1, json), *pf = run(1, "128K", 1, json);
    same(plain, pf);
    free(plain);
    free(pf);
    struct report r;
    if (report_read(json, &r))
        fail_msg("report: %s", r.err);
    long bounced = calls(&r, "cuMemcpy3DBatchAsync", "bounced");
    printf("[ busy     ] cuMemcpy3DBatchAsync bounced %ld\n", bounced);
    if (OWN_MALLOC && !bounced)
        fail_msg("no 3D batch op was bounced");
}

/* ---- source orders ------------------------------------------------------------ */
#define ORDER_BYTES ((size_t)1 << 20)

static void CUDA_CB writer(void *p)
{
    usleep(20000); /* the batch call is made by then */
    memset(p, 0xAB, ORDER_BYTES);
}

/* 0 when a batch H2D of source order o from 0x11 bytes moved what it must:
 * in stream order, the 0xAB a host function queued before it writes; in
 * any other, the 0x11 of the call, though the program writes 0x22 once it
 * returns. */
static int one_order(CUmemcpySrcAccessOrder o)
{
    int in_order = o == CU_MEMCPY_SRC_ACCESS_ORDER_STREAM;
    unsigned char want = in_order ? 0xAB : 0x11;
    unsigned char *host = malloc(ORDER_BYTES), *back = malloc(ORDER_BYTES);
    CUdeviceptr dev;
    CUstream s;
    size_t n = ORDER_BYTES, idx = 0;
    CUmemcpyAttributes a = { .srcAccessOrder = o };
    if (!host || !back || D.MemAlloc(&dev, n) || D.StreamCreate(&s, CU_STREAM_NON_BLOCKING))
        return 41;
    memset(host, 0x11, n);
    CUdeviceptr src = (CUdeviceptr)(uintptr_t)host;
    int rc = (in_order && D.LaunchHostFunc(s, writer, host)) || D.MemcpyBatchAsync(&dev, &src, &n, 1, &a, &idx, 1, s)
                 ? 42 : 0;
    if (!in_order)
        memset(host, 0x22, n);
    if (!rc && (D.StreamSynchronize(s) || D.MemcpyDtoH(back, dev, n)))
        rc = 43;
    for (size_t i = 0; !rc && i < n; i++)
        if (back[i] != want) {
            fprintf(stderr, "order %d: byte %zu is %#x, not %#x\n", (int)o, i, back[i], want);
            rc = 44;
        }
    D.MemFree(dev);
    D.StreamDestroy(s);
    free(host);
    free(back);
    return rc;
}

static int order_run(void)
{
    if (t_setup(NULL))
        return 30;
    int rc = one_order(CU_MEMCPY_SRC_ACCESS_ORDER_STREAM);
    if (!rc)
        rc = one_order(CU_MEMCPY_SRC_ACCESS_ORDER_ANY);
    return rc ? rc : one_order(CU_MEMCPY_SRC_ACCESS_ORDER_DURING_API_CALL);
}

static void orders(void **state)
{
    (void)state;
    static const char *const set[] = { "PINFAST_MIN_SIZE=0", NULL };
    both("order", set);
}

/* ---- a batch behind busy work ----------------------------------------------------- */

static void CUDA_CB hold(void *arg) { usleep((useconds_t)(uintptr_t)arg); }

/* A call that took `took` seconds behind hold_us of work waited for it. */
static int late(const char *what, double took, unsigned hold_us)
{
    if (took <= hold_us / 2 * 1e-6)
        return 0;
    fprintf(stderr, "%s returned after %.0f ms, behind the kernel\n", what, took * 1e3);
    return 1;
}

/* A 3D batch op of 32 pitched rows (128 KiB, under PINFAST_MIN_SIZE) from
 * a heap block copied again and again (registered under pinfast), its
 * source read at the driver's choice (ANY), queued behind a long "kernel":
 * the driver takes it and returns at once (H200, probe_driver_staging
 * slices); so must it, and land the rows. */
static int busy_run(void)
{
    enum { W = 4096, PITCH = W + 64, ROWS = 512, N = PITCH * ROWS, HOLD_US = 400000 };
    if (t_setup(NULL))
        return 30;
    unsigned char *src = malloc(N), *back = malloc(N);
    CUdeviceptr dev;
    CUstream st;
    if (!src || !back || D.MemAlloc(&dev, N) || D.StreamCreate(&st, CU_STREAM_NON_BLOCKING))
        return 31;
    if (t_copied_again(src, dev, N))
        return 32;
    CUDA_MEMCPY3D_BATCH_OP op = {
        .src = { .type = CU_MEMCPY_OPERAND_TYPE_POINTER,
                 .op.ptr = { .ptr = (CUdeviceptr)(uintptr_t)src, .rowLength = PITCH, .layerHeight = 32,
                             .locHint = { .type = CU_MEM_LOCATION_TYPE_HOST } } },
        .dst = { .type = CU_MEMCPY_OPERAND_TYPE_POINTER,
                 .op.ptr = { .ptr = dev, .rowLength = W, .layerHeight = 32,
                             .locHint = { .type = CU_MEM_LOCATION_TYPE_DEVICE } } },
        .extent = { .width = W, .height = 32, .depth = 1 },
        .srcAccessOrder = CU_MEMCPY_SRC_ACCESS_ORDER_ANY,
    };
    t_fill(src, N, 100);
    if (D.LaunchHostFunc(st, hold, (void *)(uintptr_t)HOLD_US))
        return 32;
    double t0 = t_now();
    CUresult r = D.Memcpy3DBatchAsync(1, &op, 0, st);
    double took = t_now() - t0;
    if (r || D.StreamSynchronize(st) || D.MemcpyDtoH(back, dev, 32 * W))
        return 33;
    if (late("the batch", took, HOLD_US))
        return 34;
    for (size_t row = 0; row < 32; row++)
        if (memcmp(src + row * PITCH, back + row * W, W)) {
            fprintf(stderr, "row %zu came back wrong\n", row);
            return 35;
        }
    free(src);
    free(back);
    return D.MemFree(dev) || D.StreamDestroy(st) ? 36 : 0;
}

/* A pitched batch H2D of a registered block, behind a long kernel, returns
 * at once and lands its rows, plain and under pinfast, which bounces it:
 * passed to the driver over the registration, it would be waited for. */
static void busy_stream(void **state)
{
    (void)state;
    char json[256], stats[300];
    snprintf(json, sizeof json, "%s/busy.json", sp_dir);
    snprintf(stats, sizeof stats, "PINFAST_STATS_FILE=%s", json);
    const char *set[] = { "PINFAST_STATS=json", stats, NULL };
    both("busy", set);
    struct report r;
    if (report_read(json, &r))
        fail_msg("report: %s", r.err);
    long bounced = calls(&r, "cuMemcpy3DBatchAsync", "bounced");
    printf("[ busy     ] cuMemcpy3DBatchAsync bounced %ld\n", bounced);
    if (OWN_MALLOC)
        assert_int_equal(bounced, 1);
}

/* A 3D batch the driver refuses at its second op (a device range past its
 * allocation), the first an H2D from a registered heap block read in the
 * call, behind a long "kernel", the source written over as the call
 * returns: the driver moves the ops before the one it refuses, and the
 * first must land what its source held at the call (plain reads pageable
 * memory in the call; under pinfast the driver takes the registration for
 * pinned memory, and the refused batch must be waited for). */
static int refused_run(void)
{
    enum { W = 4096, ROWS = 16, N = 2 << 20, HOLD_US = 200000 }; /* N: a block pinfast registers */
    if (t_setup(NULL))
        return 30;
    unsigned char *src = malloc(N), *sent = malloc(N), *back = calloc(1, N);
    CUdeviceptr dev;
    CUstream st;
    if (!src || !sent || !back || D.MemAlloc(&dev, N) || D.StreamCreate(&st, CU_STREAM_NON_BLOCKING))
        return 31;
    if (t_copied_again(src, dev, N) || D.MemcpyHtoD(dev, back, N)) /* registered; the device side zeros */
        return 32;
    CUDA_MEMCPY3D_BATCH_OP ops[2] = {
        { .src = { .type = CU_MEMCPY_OPERAND_TYPE_POINTER, .op.ptr = { .ptr = (CUdeviceptr)(uintptr_t)src } },
          .dst = { .type = CU_MEMCPY_OPERAND_TYPE_POINTER, .op.ptr = { .ptr = dev } },
          .extent = { .width = W, .height = ROWS, .depth = 1 },
          .srcAccessOrder = CU_MEMCPY_SRC_ACCESS_ORDER_DURING_API_CALL },
        { .src = { .type = CU_MEMCPY_OPERAND_TYPE_POINTER, .op.ptr = { .ptr = (CUdeviceptr)(uintptr_t)src } },
          .dst = { .type = CU_MEMCPY_OPERAND_TYPE_POINTER, .op.ptr = { .ptr = dev + N - 8 } },
          .extent = { .width = 64, .height = 1, .depth = 1 },
          .srcAccessOrder = CU_MEMCPY_SRC_ACCESS_ORDER_DURING_API_CALL },
    };
    t_fill(src, N, 200);
    memcpy(sent, src, N);
    if (D.LaunchHostFunc(st, hold, (void *)(uintptr_t)HOLD_US))
        return 32;
    CUresult r = D.Memcpy3DBatchAsync(2, ops, 0, st);
    memset(src, 0xab, N); /* the program reuses its memory at once */
    if (r == CUDA_SUCCESS || D.StreamSynchronize(st) || D.MemcpyDtoH(back, dev, W * ROWS))
        return 33;
    static const unsigned char zero[W];
    for (size_t row = 0; row < ROWS; row++) /* moved, or not */
        if (memcmp(back + row * W, sent + row * W, W) && memcmp(back + row * W, zero, W)) {
            fprintf(stderr, "row %zu of the refused batch's first op landed bytes written after the call\n", row);
            return 35;
        }
    free(src);
    free(sent);
    free(back);
    return D.MemFree(dev) || D.StreamDestroy(st) ? 36 : 0;
}

/* A batch of one D2H of 2 MiB, source order ANY, into a heap block copied
 * again and again (registered under pinfast), behind a long "kernel": a
 * linear batch (`rows` 0) or a 3D op of 32 rows of 64 KiB.  Into pageable
 * memory the driver does not wait for the linear one, and waits for the
 * stream and lands the rows before it returns (H200, probe_batch_d2h);
 * into registered memory it waits for neither.  So pinfast, which passes
 * the batch to the driver over its registration, must not wait for the
 * first and must wait for the second.  The bytes land by the stream's end. */
static int d2h_run(int rows)
{
    enum { N = 2 << 20, ROW = 64 << 10, HOLD_US = 400000 };
    if (t_setup(NULL))
        return 30;
    unsigned char *dst = malloc(N), *want = malloc(N);
    CUdeviceptr dev;
    CUstream st;
    if (!dst || !want || D.MemAlloc(&dev, N) || D.StreamCreate(&st, CU_STREAM_NON_BLOCKING))
        return 31;
    if (t_copied_again(dst, dev, N)) /* registered under pinfast */
        return 32;
    t_fill(want, N, 300);
    CUdeviceptr d = (CUdeviceptr)(uintptr_t)dst;
    size_t n = N, idx = 0;
    CUmemcpyAttributes a = { .srcAccessOrder = CU_MEMCPY_SRC_ACCESS_ORDER_ANY };
    CUDA_MEMCPY3D_BATCH_OP op = { .srcAccessOrder = CU_MEMCPY_SRC_ACCESS_ORDER_ANY };
    op.src.type = op.dst.type = CU_MEMCPY_OPERAND_TYPE_POINTER;
    op.src.op.ptr.ptr = dev;
    op.dst.op.ptr.ptr = d;
    op.extent = (CUextent3D){ ROW, N / ROW, 1 };
    if (D.MemcpyHtoD(dev, want, N) || D.LaunchHostFunc(st, hold, (void *)(uintptr_t)HOLD_US))
        return 32;
    double t0 = t_now();
    CUresult r = rows ? D.Memcpy3DBatchAsync(1, &op, 0, st) : D.MemcpyBatchAsync(&d, &dev, &n, 1, &a, &idx, 1, st);
    double took = t_now() - t0;
    int landed = !memcmp(dst, want, N);
    if (r || D.StreamSynchronize(st))
        return 33;
    if (!rows && late("the batch's D2H", took, HOLD_US))
        return 34;
    if (rows && !landed) {
        fprintf(stderr, "the 3D batch's D2H of %d rows had not landed when the call returned\n", N / ROW);
        return 34;
    }
    if (memcmp(dst, want, N)) {
        fprintf(stderr, "the batch's D2H landed wrong bytes\n");
        return 35;
    }
    free(dst);
    free(want);
    return D.MemFree(dev) || D.StreamDestroy(st) ? 36 : 0;
}

/* The batch's D2H, linear and of rows, plain and under pinfast. */
static void d2h_registered(void **state)
{
    (void)state;
    static const char *const set[] = { "PINFAST_STATS=off", NULL };
    both("d2h", set);
    both("d2h_rows", set);
}

/* The refused batch's first op, plain and under pinfast. */
static void refused_batch(void **state)
{
    (void)state;
    static const char *const set[] = { "PINFAST_STATS=off", NULL };
    both("refused", set);
}

int main(int argc, char **argv)
{
    if (argc == 3 && strcmp(argv[1], "run") == 0)
        return child_run(argv[2]);
    if (argc == 2 && strcmp(argv[1], "order") == 0)
        return order_run();
    if (argc == 2 && strcmp(argv[1], "busy") == 0)
        return busy_run();
    if (argc == 2 && strcmp(argv[1], "refused") == 0)
        return refused_run();
    if (argc == 2 && strcmp(argv[1], "d2h") == 0)
        return d2h_run(0);
    if (argc == 2 && strcmp(argv[1], "d2h_rows") == 0)
        return d2h_run(1);
    const struct CMUnitTest tests[] = { cmocka_unit_test(equivalence), cmocka_unit_test(busy_cases),
                                        cmocka_unit_test(orders),
                                        cmocka_unit_test(busy_stream), cmocka_unit_test(refused_batch),
                                        cmocka_unit_test(d2h_registered) };
    return cmocka_run_group_tests(tests, sp_dir_setup, sp_dir_teardown);
}
