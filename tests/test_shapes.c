/* test_shapes: every copy shape pinfast stages gives what the driver alone
 * gives.  A child runs the random cases of shapes_cases.h (2D copies
 * between pageable memory and device memory, unified pointers or arrays of
 * random formats, with random widths, heights, pitches and offsets; 3D
 * copies of random depths, heights and slice offsets; host <-> 1D array
 * copies; copies across VMM mappings laid end to end; bad input of each
 * kind) and logs, per case, the return code and a hash of every byte of
 * both sides after it (host and device sides filled with random data, the
 * destination's bytes outside the copy checked as well).  The test runs the child on the
 * fake alone and under pinfast with the same seed, and the logs must be
 * equal; pinfast's report must show each shape staged (so the test fails
 * when pinfast passes a shape through).  A third run, with pinfast's
 * registrations, registers the cases' host buffer early: its later cases
 * go through the registration, and their log must be plain's too.  The
 * cases once more with every asynchronous one behind work on its stream
 * and an H2D's source written over as the call returns, plain and under
 * pinfast: the logs must be equal, and some copies must have been bounced.
 * tests/gpu/checks/shapes.cu runs the same cases on the GPU.
 *
 * Slots of 64 KiB and PINFAST_MIN_SIZE=0: rows wider than a slot (passed
 * through), copies of many chunks, and every size staged.  Device memory and
 * arrays are filled and read back through pinned memory, which pinfast
 * never stages: its report's staged rows are the cases' copies alone.
 * More tests: a 3D copy of slices far smaller than a chunk passes through;
 * the runtime's 2D array copies (cuMemcpy3D of one slice, heights 0) are
 * staged; pitched copies of a block copied again and again go through its
 * registration; asynchronous H2D copies of short slices register no block;
 * asynchronous pitched H2D copies of a registered block behind a long
 * kernel return at once (bounced).
 * Internal: test_shapes run <log file>, test_shapes slices, test_shapes
 * array, test_shapes held <slice rows>, test_shapes async_slices,
 * test_shapes busy. */
#define _GNU_SOURCE
#include "t.h"
#include "report.h"
#include "spawn.h"

#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

#define CASES 360

/* A sanitizer's malloc comes before pinfast in the preload list: pinfast's
 * heap is off and nothing is registered (docs/design.md); the cases still
 * check every byte. */
#if defined(__SANITIZE_ADDRESS__) || defined(__SANITIZE_THREAD__)
#define OWN_MALLOC 0
#else
#define OWN_MALLOC 1
#endif

static FILE *LOG;
#define SC(f) D.f
#define SC_LOG(...) fprintf(LOG, __VA_ARGS__)
#include "shapes_cases.h"

static int child_run(const char *logf)
{
    if (t_setup(NULL) || !(LOG = fopen(logf, "w")))
        return 30;
    rs = t_seed();
    int rc = shape_cases(CASES);
    fclose(LOG);
    return rc;
}

/* 3D copies up and back, one of slices of 2 rows of 512 bytes, one of 16
 * rows of 1 KiB, the host rows 64 bytes apart beyond the row; every row
 * brought back must be the one sent. */
static int child_slices(void)
{
    static const size_t shape[2][3] = { { 512, 2, 16 }, { 1024, 16, 4 } }; /* width, rows, slices */
    if (t_setup(NULL))
        return 30;
    for (int k = 0; k < 2; k++) {
        size_t w = shape[k][0], h = shape[k][1], d = shape[k][2], pitch = w + 64, n = pitch * h * d;
        unsigned char *src = malloc(n), *back = calloc(1, n);
        CUdeviceptr dev;
        if (!src || !back || D.MemAlloc(&dev, n))
            return 31;
        t_fill(src, n, (uint64_t)k + 1);
        CUDA_MEMCPY3D up = { .WidthInBytes = w, .Height = h, .Depth = d,
                             .srcMemoryType = CU_MEMORYTYPE_HOST, .srcHost = src, .srcPitch = pitch,
                             .srcHeight = h, .dstMemoryType = CU_MEMORYTYPE_DEVICE, .dstDevice = dev,
                             .dstPitch = pitch, .dstHeight = h };
        CUDA_MEMCPY3D down = { .WidthInBytes = w, .Height = h, .Depth = d,
                               .srcMemoryType = CU_MEMORYTYPE_DEVICE, .srcDevice = dev, .srcPitch = pitch,
                               .srcHeight = h, .dstMemoryType = CU_MEMORYTYPE_HOST, .dstHost = back,
                               .dstPitch = pitch, .dstHeight = h };
        if (D.Memcpy3D(&up) || D.Memcpy3D(&down))
            return 32;
        for (size_t r = 0; r < h * d; r++)
            if (memcmp(src + r * pitch, back + r * pitch, w)) {
                fprintf(stderr, "slices of %zu rows of %zu bytes: row %zu came back wrong\n", h, w, r);
                return 33;
            }
        free(src);
        free(back);
        D.MemFree(dev);
    }
    return 0;
}

/* cudaMemcpy2DToArray and FromArray as the runtime issues them: cuMemcpy3D
 * of one slice with heights of 0, between 256 rows of 4 KiB, 64 bytes
 * apart beyond the row, and a 2D array of uchar4; every row brought back
 * must be the one sent. */
static int child_array(void)
{
    enum { W = 4096, ROWS = 256, PITCH = W + 64 };
    if (t_setup(NULL))
        return 30;
    unsigned char *src = malloc(PITCH * ROWS), *back = calloc(1, PITCH * ROWS);
    CUDA_ARRAY_DESCRIPTOR d = { .Width = W / 4, .Height = ROWS, .Format = CU_AD_FORMAT_UNSIGNED_INT8, .NumChannels = 4 };
    CUarray a;
    if (!src || !back || D.ArrayCreate(&a, &d))
        return 31;
    t_fill(src, PITCH * ROWS, 7);
    CUDA_MEMCPY3D up = { .WidthInBytes = W, .Height = ROWS, .Depth = 1, .srcMemoryType = CU_MEMORYTYPE_HOST,
                         .srcHost = src, .srcPitch = PITCH, .dstMemoryType = CU_MEMORYTYPE_ARRAY, .dstArray = a };
    CUDA_MEMCPY3D down = { .WidthInBytes = W, .Height = ROWS, .Depth = 1, .srcMemoryType = CU_MEMORYTYPE_ARRAY,
                           .srcArray = a, .dstMemoryType = CU_MEMORYTYPE_HOST, .dstHost = back, .dstPitch = PITCH };
    if (D.Memcpy3D(&up) || D.Memcpy3D(&down))
        return 32;
    for (size_t r = 0; r < ROWS; r++)
        if (memcmp(src + r * PITCH, back + r * PITCH, W)) {
            fprintf(stderr, "array row %zu came back wrong\n", r);
            return 33;
        }
    free(src);
    free(back);
    return D.ArrayDestroy(a) ? 34 : 0;
}

/* The rows of one heap block copied again and again, 3D to pitched device
 * memory and back (slices of `slice_rows` rows) and 2D (the runtime's
 * form) to an array and back, one way synchronous and the other
 * asynchronous: once the registrar has registered the block, each copy
 * goes through its registration.  Then the program changes a page under
 * the registration.  Every row brought back must be the one sent, and no
 * byte between rows written. */
static int child_held(size_t slice_rows)
{
    enum { W = 4096, ROWS = 256, SLICES = 2, PITCH = W + 64, N = PITCH * ROWS * SLICES, GAP = 0xee };
    if (t_setup(NULL))
        return 30;
    unsigned char *src = malloc(N), *back = malloc(N);
    CUDA_ARRAY_DESCRIPTOR d = { .Width = W / 4, .Height = ROWS, .Format = CU_AD_FORMAT_UNSIGNED_INT8, .NumChannels = 4 };
    CUarray a;
    CUdeviceptr dev;
    CUstream st;
    if (!src || !back || D.MemAlloc(&dev, N) || D.ArrayCreate(&a, &d) || D.StreamCreate(&st, CU_STREAM_NON_BLOCKING))
        return 31;
    size_t h = slice_rows, depth = ROWS * SLICES / slice_rows;
    CUDA_MEMCPY3D up = { .WidthInBytes = W, .Height = h, .Depth = depth, .srcMemoryType = CU_MEMORYTYPE_HOST,
                         .srcHost = src, .srcPitch = PITCH, .srcHeight = h, .dstMemoryType = CU_MEMORYTYPE_DEVICE,
                         .dstDevice = dev, .dstPitch = PITCH, .dstHeight = h };
    CUDA_MEMCPY3D down = { .WidthInBytes = W, .Height = h, .Depth = depth, .srcMemoryType = CU_MEMORYTYPE_DEVICE,
                           .srcDevice = dev, .srcPitch = PITCH, .srcHeight = h, .dstMemoryType = CU_MEMORYTYPE_HOST,
                           .dstHost = back, .dstPitch = PITCH, .dstHeight = h };
    CUDA_MEMCPY3D to_array = { .WidthInBytes = W, .Height = ROWS, .Depth = 1, .srcMemoryType = CU_MEMORYTYPE_HOST,
                               .srcHost = src, .srcPitch = PITCH, .dstMemoryType = CU_MEMORYTYPE_ARRAY, .dstArray = a };
    CUDA_MEMCPY3D from_array = { .WidthInBytes = W, .Height = ROWS, .Depth = 1, .srcMemoryType = CU_MEMORYTYPE_ARRAY,
                                 .srcArray = a, .dstMemoryType = CU_MEMORYTYPE_HOST, .dstHost = back,
                                 .dstPitch = PITCH };
    for (int round = 0; round < 40; round++) {
        for (int k = 0; k < 2; k++) {
            size_t rows = k ? ROWS : ROWS * SLICES;
            t_fill(src, N, (uint64_t)(2 * round + k + 1));
            memset(back, GAP, N);
            /* the stream does not block: it is waited for before the legacy
             * stream's copy */
            CUresult r = k ? D.Memcpy3DAsync(&to_array, st) : D.Memcpy3D(&up);
            r = r ? r : D.StreamSynchronize(st);
            r = r ? r : k ? D.Memcpy3D(&from_array) : D.Memcpy3DAsync(&down, st);
            if (r || D.StreamSynchronize(st))
                return 32;
            for (size_t row = 0; row < rows; row++) {
                if (memcmp(src + row * PITCH, back + row * PITCH, W)) {
                    fprintf(stderr, "round %d, %s: row %zu came back wrong\n", round, k ? "array" : "3D", row);
                    return 33;
                }
                for (size_t b = W; b < PITCH; b++)
                    if (back[row * PITCH + b] != GAP) {
                        fprintf(stderr, "round %d, %s: byte %zu after row %zu written\n", round, k ? "array" : "3D",
                                b - W, row);
                        return 34;
                    }
            }
        }
        usleep(5000); /* the registrar's turn */
    }
    /* the program changes a page of the source under its registration,
     * which retires it: the next copy must not undo it (a wait for the
     * device), nor pass through over it */
    if (madvise((void *)(((uintptr_t)src + 4095) & ~(uintptr_t)4095), 4096, MADV_DONTNEED))
        return 36;
    t_fill(src, N, 99);
    memset(back, GAP, N);
    if (D.Memcpy3D(&up) || D.Memcpy3DAsync(&down, st) || D.StreamSynchronize(st))
        return 32;
    for (size_t row = 0; row < ROWS * SLICES; row++)
        if (memcmp(src + row * PITCH, back + row * PITCH, W)) {
            fprintf(stderr, "after the change, 3D: row %zu came back wrong\n", row);
            return 33;
        }
    free(src);
    free(back);
    return D.ArrayDestroy(a) || D.MemFree(dev) || D.StreamDestroy(st) ? 35 : 0;
}

/* Asynchronous 3D H2D copies of 1-row slices of one heap block, again and
 * again: every row lands. */
static int child_async_slices(void)
{
    enum { W = 4096, PITCH = W + 64, ROWS = 512, N = PITCH * ROWS };
    if (t_setup(NULL))
        return 30;
    unsigned char *src = malloc(N), *back = malloc((size_t)W * ROWS);
    CUdeviceptr dev;
    CUstream st;
    if (!src || !back || D.MemAlloc(&dev, (size_t)W * ROWS) || D.StreamCreate(&st, CU_STREAM_NON_BLOCKING))
        return 31;
    CUDA_MEMCPY3D up = { .WidthInBytes = W, .Height = 1, .Depth = ROWS, .srcMemoryType = CU_MEMORYTYPE_HOST,
                         .srcHost = src, .srcPitch = PITCH, .srcHeight = 1, .dstMemoryType = CU_MEMORYTYPE_DEVICE,
                         .dstDevice = dev, .dstPitch = W, .dstHeight = 1 };
    for (int round = 0; round < 10; round++) {
        t_fill(src, N, (uint64_t)round + 1);
        if (D.Memcpy3DAsync(&up, st) || D.StreamSynchronize(st) || D.MemcpyDtoH(back, dev, (size_t)W * ROWS))
            return 32;
        for (size_t row = 0; row < ROWS; row++)
            if (memcmp(src + row * PITCH, back + row * W, W)) {
                fprintf(stderr, "round %d: row %zu came back wrong\n", round, row);
                return 33;
            }
    }
    free(src);
    free(back);
    return D.MemFree(dev) || D.StreamDestroy(st) ? 34 : 0;
}

/* A long "kernel" on the stream. */
static void CUDA_CB hold(void *arg) { usleep((useconds_t)(uintptr_t)arg); }

/* Asynchronous pitched H2D copies from a heap block copied again and again
 * (registered under pinfast), each queued behind a long "kernel": slices of
 * one row (1 MiB), and 2D copies under PINFAST_MIN_SIZE (128 KiB) into
 * device memory and into an array.  The driver stages each and returns at
 * once; so must they, and land the bytes their source held at the call,
 * which is overwritten right after it. */
static int child_busy(void)
{
    enum { W = 4096, PITCH = W + 64, ROWS = 512, N = PITCH * ROWS, HOLD_US = 400000 };
    static const char *const what[] = { "3D", "2D", "2D to an array" };
    if (t_setup(NULL))
        return 30;
    unsigned char *src = malloc(N), *sent = malloc(N), *back = malloc(N);
    CUDA_ARRAY_DESCRIPTOR ad = { .Width = W / 4, .Height = 32, .Format = CU_AD_FORMAT_UNSIGNED_INT8, .NumChannels = 4 };
    CUarray a;
    CUdeviceptr dev;
    CUstream st;
    if (!src || !sent || !back || D.MemAlloc(&dev, N) || D.ArrayCreate(&a, &ad) ||
        D.StreamCreate(&st, CU_STREAM_NON_BLOCKING))
        return 31;
    if (t_copied_again(src, dev, N))
        return 32;
    CUDA_MEMCPY3D slices = { .WidthInBytes = W, .Height = 1, .Depth = ROWS / 2, .srcMemoryType = CU_MEMORYTYPE_HOST,
                             .srcHost = src, .srcPitch = PITCH, .srcHeight = 1,
                             .dstMemoryType = CU_MEMORYTYPE_DEVICE, .dstDevice = dev, .dstPitch = W,
                             .dstHeight = 1 };
    CUDA_MEMCPY2D rows = { .WidthInBytes = W, .Height = 32, .srcMemoryType = CU_MEMORYTYPE_HOST, .srcHost = src,
                           .srcY = 7, .srcPitch = PITCH, .dstMemoryType = CU_MEMORYTYPE_DEVICE, .dstDevice = dev,
                           .dstPitch = W };
    CUDA_MEMCPY2D to_array = rows, from_array = { .WidthInBytes = W, .Height = 32,
                                                  .srcMemoryType = CU_MEMORYTYPE_ARRAY, .srcArray = a,
                                                  .dstMemoryType = CU_MEMORYTYPE_HOST, .dstHost = back,
                                                  .dstPitch = W };
    to_array.dstMemoryType = CU_MEMORYTYPE_ARRAY;
    to_array.dstArray = a;
    for (int k = 0; k < 3; k++) {
        size_t first = k ? 7 : 0, n = k ? 32 : ROWS / 2;
        t_fill(src, N, (uint64_t)k + 100);
        memcpy(sent, src, N);
        if (D.LaunchHostFunc(st, hold, (void *)(uintptr_t)HOLD_US))
            return 32;
        double t0 = t_now();
        CUresult r = k == 2 ? D.Memcpy2DAsync(&to_array, st) : k ? D.Memcpy2DAsync(&rows, st)
                                                                 : D.Memcpy3DAsync(&slices, st);
        double took = t_now() - t0;
        memset(src, 0xab, N); /* the program reuses its memory at once */
        if (r || D.StreamSynchronize(st) || (k == 2 ? D.Memcpy2D(&from_array) : D.MemcpyDtoH(back, dev, n * W)))
            return 33;
        if (took > HOLD_US / 2 * 1e-6) {
            fprintf(stderr, "%s: returned after %.0f ms, behind the kernel\n", what[k], took * 1e3);
            return 34;
        }
        for (size_t row = 0; row < n; row++)
            if (memcmp(sent + (first + row) * PITCH, back + row * W, W)) {
                fprintf(stderr, "%s: row %zu came back wrong\n", what[k], row);
                return 35;
            }
    }
    free(src);
    free(sent);
    free(back);
    return D.ArrayDestroy(a) || D.MemFree(dev) || D.StreamDestroy(st) ? 36 : 0;
}

/* ---- the tests: plain and pinfast, same seed -------------------------------- */
/* The calls of `api` (in direction `dir`; NULL: either) the report counts
 * on `path`. */
static long path_calls(const struct report *r, const char *api, const char *dir, const char *path)
{
    long n = 0;
    for (int i = 0; i < r->nt; i++)
        if (!strcmp(r->t[i].api, api) && (!dir || !strcmp(r->t[i].direction, dir)) && !strcmp(r->t[i].path, path))
            n += r->t[i].calls;
    return n;
}

/* The child's log run as `name`: plain (pinfast 0) or under pinfast, with
 * the settings `set` (up to 5) and its report into json. */
static void run_cases(const char *seed, const char *name, int pinfast, const char *const *set, const char *json,
                      char *log, size_t n)
{
    char stats[300];
    snprintf(log, n, "%s/%s.log", sp_dir, name);
    snprintf(stats, sizeof stats, "PINFAST_STATS_FILE=%s", json);
    char *argv[] = { "test_shapes", "run", log, NULL };
    const char *env[9] = { seed, "PINFAST_STATS=json", stats };
    for (int i = 0; i < 5 && set[i]; i++)
        env[3 + i] = set[i];
    int rc = sp_run(argv, pinfast, env, NULL, NULL, 600, NULL);
    if (rc)
        fail_msg("the %s child exited %d", name, rc);
}

/* The two logs, line by line. */
static void same_lines(const char *plain, const char *other, const char *name)
{
    char *a = sp_slurp(plain, NULL), *b = sp_slurp(other, NULL);
    assert_non_null(a);
    assert_non_null(b);
    for (char *p = a, *q = b; *p || *q;) {
        char *pe = strchrnul(p, '\n'), *qe = strchrnul(q, '\n');
        if (pe - p != qe - q || memcmp(p, q, (size_t)(pe - p)))
            fail_msg("plain and %s differ:\n  plain:   %.*s\n  %s: %.*s", name, (int)(pe - p), p, name,
                     (int)(qe - q), q);
        p = *pe ? pe + 1 : pe;
        q = *qe ? qe + 1 : qe;
    }
    free(a);
    free(b);
}

/* The cases plain, under pinfast with every shape staged (no block of
 * pinfast's heap registered), and under pinfast with its registrations:
 * the cases' host buffer, one block copied again and again, is registered
 * early and the later cases go through its registration. */
static void equivalence(void **state)
{
    (void)state;
    char seed[64], logs[3][256], json[2][256];
    snprintf(seed, sizeof seed, "PFT_SEED=%llu", (unsigned long long)t_seed());
    snprintf(json[0], sizeof json[0], "%s/report.json", sp_dir);
    snprintf(json[1], sizeof json[1], "%s/report-registered.json", sp_dir);
    static const char *const staged[] = { "PINFAST_MIN_SIZE=0", "PINFAST_CHUNK=64K", "PINFAST_STAGING=1M",
                                          "PINFAST_REGISTER=0", NULL };
    static const char *const registered[] = { "PINFAST_MIN_SIZE=0", "PINFAST_CHUNK=64K", "PINFAST_STAGING=1M",
                                              "PINFAST_REGISTER=1", NULL };
    run_cases(seed, "plain", 0, staged, json[0], logs[0], sizeof logs[0]);
    run_cases(seed, "staged", 1, staged, json[0], logs[1], sizeof logs[1]);
    run_cases(seed, "registered", 1, registered, json[1], logs[2], sizeof logs[2]);
    same_lines(logs[0], logs[1], "staged");
    same_lines(logs[0], logs[2], "registered");
    struct report r;
    if (report_read(json[0], &r))
        fail_msg("report: %s", r.err);
    static const char *const shapes[] = { "cuMemcpy2D", "cuMemcpy2DUnaligned", "cuMemcpy2DAsync",
                                          "cuMemcpy3D", "cuMemcpy3DAsync",
                                          "cuMemcpyHtoA", "cuMemcpyAtoH", "cuMemcpyHtoAAsync",
                                          "cuMemcpyAtoHAsync", "cuMemcpyHtoD", "cuMemcpyDtoH" };
    for (size_t i = 0; i < sizeof shapes / sizeof shapes[0]; i++) {
        long n = path_calls(&r, shapes[i], NULL, "staged");
        printf("[ staged   ] %s: %ld\n", shapes[i], n);
        if (!n)
            fail_msg("no %s copy was staged", shapes[i]);
    }
    if (report_read(json[1], &r))
        fail_msg("report: %s", r.err);
    long held = 0;
    for (size_t i = 0; i < 5; i++) /* the 2D and 3D calls */
        held += path_calls(&r, shapes[i], NULL, "registered");
    printf("[ regist'd ] 2D and 3D copies through a registration: %ld\n", held);
    if (!held && OWN_MALLOC)
        fail_msg("no 2D or 3D copy went through a registration");
}

/* The cases with every asynchronous one behind work on its stream and an
 * H2D's source written over as the call returns (SC_BUSY), plain and under
 * pinfast at its defaults but for small slots: the logs must be equal, and
 * pinfast's report must show 2D or 3D copies bounced (over the
 * registration of the cases' host buffer, copied again and again). */
static void busy_cases(void **state)
{
    (void)state;
    char seed[64], logs[2][256], json[256];
    snprintf(seed, sizeof seed, "PFT_SEED=%llu", (unsigned long long)t_seed());
    snprintf(json, sizeof json, "%s/report-busy.json", sp_dir);
    static const char *const set[] = { "SC_BUSY=1", "PINFAST_CHUNK=64K", "PINFAST_STAGING=1M", NULL };
    run_cases(seed, "plain-busy", 0, set, json, logs[0], sizeof logs[0]);
    run_cases(seed, "busy", 1, set, json, logs[1], sizeof logs[1]);
    same_lines(logs[0], logs[1], "busy");
    struct report r;
    if (report_read(json, &r))
        fail_msg("report: %s", r.err);
    long bounced = path_calls(&r, "cuMemcpy2DAsync", "H2D", "bounced") +
                   path_calls(&r, "cuMemcpy3DAsync", "H2D", "bounced");
    printf("[ busy     ] 2D and 3D copies bounced: %ld\n", bounced);
    if (!bounced && OWN_MALLOC)
        fail_msg("no 2D or 3D copy was bounced");
}

/* Runs the child `test_shapes what [arg]` under pinfast, with the settings
 * `set` (up to 4) besides its JSON report, and reads the report into r. */
static void child_report(const char *what, const char *arg, const char *const *set, struct report *r)
{
    char json[256], stats[300];
    snprintf(json, sizeof json, "%s/%s%s.json", sp_dir, what, arg ? arg : "");
    snprintf(stats, sizeof stats, "PINFAST_STATS_FILE=%s", json);
    char *argv[] = { "test_shapes", (char *)what, (char *)arg, NULL };
    const char *env[7] = { "PINFAST_STATS=json", stats };
    for (int i = 0; i < 4 && set[i]; i++)
        env[2 + i] = set[i];
    int rc = sp_run(argv, 1, env, NULL, NULL, 120, NULL);
    if (rc)
        fail_msg("the %s %s child exited %d", what, arg ? arg : "", rc);
    if (report_read(json, r))
        fail_msg("report: %s", r->err);
}

/* Runs the child `what` under pinfast with 64 KiB chunks; *staged and
 * *passed: its cuMemcpy3D calls by path. */
static void child_paths(const char *what, long *staged, long *passed)
{
    static const char *const set[] = { "PINFAST_MIN_SIZE=0", "PINFAST_CHUNK=64K", "PINFAST_REGISTER=0", NULL };
    struct report r;
    child_report(what, NULL, set, &r);
    *staged = path_calls(&r, "cuMemcpy3D", NULL, "staged");
    *passed = path_calls(&r, "cuMemcpy3D", NULL, "passthrough");
    printf("[ 3D       ] %s: staged %ld, passed through %ld\n", what, *staged, *passed);
}

/* A 3D copy whose slices are under a sixteenth of a chunk passes through:
 * a chunk never crosses a slice, so it would be a DMA and a fence a slice.
 * With chunks of 64 KiB, one of 1 KiB slices passes through and one of
 * 16 KiB slices is staged. */
static void short_slices(void **state)
{
    (void)state;
    long staged, passed;
    child_paths("slices", &staged, &passed);
    assert_int_equal(staged, 2);
    assert_int_equal(passed, 2);
}

/* The runtime's 2D array copies (one slice, heights 0) are staged. */
static void runtime_array(void **state)
{
    (void)state;
    long staged, passed;
    child_paths("array", &staged, &passed);
    assert_int_equal(staged, 2);
    assert_int_equal(passed, 0);
}

/* Pitched copies of a heap block copied again and again go through its
 * registration, each way, synchronous and asynchronous: in slices of 256
 * rows (staged until then) and of 1 row (passed through until then).  A
 * copy over the registration the program's change retired is staged, not
 * passed through (which would undo it, a wait for the device). */
static void held_rows(void **state)
{
    (void)state;
    static const char *const apis[] = { "cuMemcpy3D", "cuMemcpy3DAsync" }, *const dirs[] = { "H2D", "D2H" };
    static const char *const slices[] = { "256", "1" }, *const none[] = { NULL };
    for (int v = 0; v < 2; v++) {
        struct report r;
        child_report("held", slices[v], none, &r);
        if (!OWN_MALLOC)
            continue; /* the bytes were checked; nothing is registered */
        for (int i = 0; i < 2; i++)
            for (int k = 0; k < 2; k++) {
                long n = path_calls(&r, apis[i], dirs[k], "registered");
                printf("[ held     ] slices of %s rows, %s %s: %ld through a registration\n", slices[v], apis[i],
                       dirs[k], n);
                if (!n)
                    fail_msg("no %s %s (slices of %s rows) went through a registration", apis[i], dirs[k], slices[v]);
            }
        long staged = path_calls(&r, "cuMemcpy3D", "H2D", "staged");
        printf("[ held     ] slices of %s rows: registrations retired %lld; cuMemcpy3D H2D staged %ld\n", slices[v],
               r.reg.retired, staged);
        assert_true(r.reg.retired > 0);
        assert_true(staged > 0);
        assert_int_equal(r.reg.guarded, 0);
    }
}

/* Asynchronous H2D copies of short slices register no block: the driver
 * takes one behind its stream's work without waiting, a copy through a
 * registration would wait for that work.  They pass through. */
static void async_slices_unregistered(void **state)
{
    (void)state;
    static const char *const none[] = { NULL };
    struct report r;
    child_report("async_slices", NULL, none, &r);
    long passed = path_calls(&r, "cuMemcpy3DAsync", "H2D", "passthrough"),
         held = path_calls(&r, "cuMemcpy3DAsync", "H2D", "registered");
    printf("[ async    ] cuMemcpy3DAsync H2D passed through %ld of 10, through a registration %ld\n", passed, held);
    assert_int_equal(passed, 10);
    assert_int_equal(held, 0);
}

/* Asynchronous pitched H2D copies of a registered block, behind a long
 * kernel, return at once and land what their source held at the call,
 * plain and under pinfast, which bounces them: through the registration
 * they would wait for the kernel (the driver takes registered memory for
 * pinned, so a copy passed to it would be waited for too). */
static void busy_stream(void **state)
{
    (void)state;
    static const char *const none[] = { NULL };
    char *argv[] = { "test_shapes", "busy", NULL };
    int rc = sp_run(argv, 0, NULL, NULL, NULL, 120, NULL);
    if (rc)
        fail_msg("the plain busy child exited %d", rc);
    struct report r;
    child_report("busy", NULL, none, &r);
    if (!OWN_MALLOC)
        return; /* the bytes and the times were checked; nothing is registered */
    long b3 = path_calls(&r, "cuMemcpy3DAsync", "H2D", "bounced"),
         b2 = path_calls(&r, "cuMemcpy2DAsync", "H2D", "bounced");
    printf("[ busy     ] bounced: cuMemcpy3DAsync %ld, cuMemcpy2DAsync %ld; registered copies %lld\n", b3, b2,
           r.reg.copies);
    assert_true(r.reg.copies > 0);
    assert_int_equal(b3, 1);
    assert_int_equal(b2, 2);
}

int main(int argc, char **argv)
{
    if (argc == 3 && strcmp(argv[1], "run") == 0)
        return child_run(argv[2]);
    if (argc == 2 && strcmp(argv[1], "slices") == 0)
        return child_slices();
    if (argc == 2 && strcmp(argv[1], "array") == 0)
        return child_array();
    if (argc == 2 && strcmp(argv[1], "async_slices") == 0)
        return child_async_slices();
    if (argc == 2 && strcmp(argv[1], "busy") == 0)
        return child_busy();
    if (argc == 3 && strcmp(argv[1], "held") == 0)
        return child_held(strtoul(argv[2], NULL, 10));
    const struct CMUnitTest tests[] = { cmocka_unit_test(equivalence), cmocka_unit_test(busy_cases),
                                        cmocka_unit_test(short_slices),
                                        cmocka_unit_test(runtime_array), cmocka_unit_test(held_rows),
                                        cmocka_unit_test(async_slices_unregistered), cmocka_unit_test(busy_stream) };
    return cmocka_run_group_tests(tests, sp_dir_setup, sp_dir_teardown);
}
