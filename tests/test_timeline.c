/* test_timeline: the debug log's per-chunk timeline of a staged copy.  A
 * child (this binary in "copy" mode) stages one H2D and one D2H of a random
 * size with small chunks and PINFAST_LOG=debug; for each staged copy the
 * chunk lines must tile the copy exactly, and their times must follow the
 * order the engine works in: a D2H chunk lands after its DMA and is copied
 * out after it lands; an H2D chunk is copied in before its DMA; every task
 * runs inside its chunk's copy, by the caller (w0) or one of the workers. */
#define _GNU_SOURCE
#include "t.h"
#include "spawn.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define KiB ((size_t)1 << 10)
#define THREADS 3
#define MAX_CHUNKS 24 /* the log details this many chunks of a copy */

static int child_copy(void)
{
    if (t_setup(NULL))
        return 30;
    size_t n = t_rand_range(1200 * KiB, 3000 * KiB);
    unsigned char *h = malloc(n), *o = malloc(n);
    CUdeviceptr d;
    if (!h || !o || D.MemAlloc(&d, n))
        return 31;
    uint64_t salt = t_rand();
    size_t bad;
    t_fill(h, n, salt);
    t_poison(o, n);
    if (D.MemcpyHtoD(d, h, n) || D.MemcpyDtoH(o, d, n))
        return 32;
    if (!t_check_fill(o, n, salt, &bad)) {
        fprintf(stderr, "wrong byte at %zu\n", bad);
        return 33;
    }
    printf("copied %zu\n", n);
    return 0;
}

static const char *dir;

static int setup(void **s)
{
    (void)s;
    dir = sp_tmpdir("timeline");
    return dir ? 0 : -1;
}

static int teardown(void **s)
{
    (void)s;
    sp_rmdir(dir);
    return 0;
}

struct chunk {
    size_t off, len;
    double dma, dma_end, landed, first, last, retired;
};

static int by_offset(const void *a, const void *b)
{
    const struct chunk *x = a, *y = b;
    return (x->off > y->off) - (x->off < y->off);
}

/* Checks one chunk's tasks line against its chunk; returns the next line. */
static const char *check_tasks(const char *p, const struct chunk *c, const char *dirn)
{
    if (strncmp(p, "pinfast: debug:     tasks", 25))
        fail_msg("%s chunk %zu: no tasks line: \"%.60s\"", dirn, c->off, p);
    const char *end = strchr(p, '\n');
    int ntasks = 0;
    for (const char *q = strstr(p, " w"); q && q < end; q = strstr(q + 1, " w")) {
        int by;
        double start, stop;
        if (sscanf(q, " w%d:%lf-%lf", &by, &start, &stop) != 3)
            fail_msg("%s chunk %zu: unreadable task \"%.30s\"", dirn, c->off, q);
        if (by < 0 || by > THREADS)
            fail_msg("%s chunk %zu: task run by w%d, with %d workers", dirn, c->off, by, THREADS);
        if (start > stop || start < c->first || stop > c->last)
            fail_msg("%s chunk %zu: task %.1f-%.1f outside the chunk's copy %.1f-%.1f", dirn,
                     c->off, start, stop, c->first, c->last);
        ntasks++;
    }
    if (ntasks == 0)
        fail_msg("%s chunk %zu: no task", dirn, c->off);
    return end + 1;
}

/* Checks the timeline after the "staged" line at p; returns the chunk count. */
static int check_copy(const char *p, size_t n, int h2d)
{
    const char *dirn = h2d ? "H2D" : "D2H";
    int nchunks;
    const char *q = strstr(p, " B (");
    if (!q || sscanf(strstr(q, "): ") + 3, "%d chunks", &nchunks) != 1)
        fail_msg("%s: unreadable debug line \"%.80s\"", dirn, p);
    struct chunk c[MAX_CHUNKS];
    int k = 0;
    p = strchr(p, '\n') + 1;
    while (!strncmp(p, "pinfast: debug:   chunk ", 24)) {
        if (k == MAX_CHUNKS)
            fail_msg("%s: more than %d chunk lines", dirn, MAX_CHUNKS);
        struct chunk *x = &c[k++];
        if (sscanf(p + 24, "%zu+%zu us: dma %lf-%lf landed %lf copy %lf-%lf retired %lf", &x->off,
                   &x->len, &x->dma, &x->dma_end, &x->landed, &x->first, &x->last,
                   &x->retired) != 8)
            fail_msg("%s: unreadable chunk line \"%.80s\"", dirn, p);
        if (x->first < 0 || x->first > x->last || x->last > x->retired || x->dma < 0 ||
            x->dma > x->dma_end)
            fail_msg("%s chunk %zu: copy %.1f-%.1f retired %.1f dma %.1f-%.1f out of order", dirn,
                     x->off, x->first, x->last, x->retired, x->dma, x->dma_end);
        if (h2d ? x->landed != -1.0 || x->dma < x->last || x->dma_end > x->retired
                : x->landed < x->dma_end || x->first < x->landed)
            fail_msg("%s chunk %zu: dma %.1f landed %.1f copy %.1f-%.1f out of order", dirn,
                     x->off, x->dma, x->landed, x->first, x->last);
        p = check_tasks(strchr(p, '\n') + 1, x, dirn);
    }
    if (k != (nchunks < MAX_CHUNKS ? nchunks : MAX_CHUNKS))
        fail_msg("%s: %d chunk lines for %d chunks", dirn, k, nchunks);
    qsort(c, (size_t)k, sizeof c[0], by_offset);
    size_t at = 0;
    for (int i = 0; i < k; i++) {
        if (c[i].off != at || !c[i].len)
            fail_msg("%s: chunk at %zu, expected one at %zu", dirn, c[i].off, at);
        at += c[i].len;
    }
    if (at != n)
        fail_msg("%s: chunks cover %zu bytes of %zu", dirn, at, n);
    return k;
}

static void test_timeline(void **s)
{
    (void)s;
    char out[300], err[300];
    snprintf(out, sizeof out, "%s/out", dir);
    snprintf(err, sizeof err, "%s/err", dir);
    const char *set[] = { "PINFAST_MIN_SIZE=0", "PINFAST_STATS=off", "PINFAST_LOG=debug",
                          "PINFAST_THREADS=3", "PINFAST_CHUNK=256K", NULL };
    char *argv[] = { "test_timeline", "copy", NULL };
    int rc = sp_run(argv, t_pinfast(), set, out, err, 120, NULL);
    char *o = sp_slurp(out, NULL), *e = sp_slurp(err, NULL);
    if (rc != 0)
        fail_msg("child: status %d\n%s", rc, e ? e : "");
    size_t n = 0;
    const char *copied = o ? strstr(o, "copied ") : NULL;
    if (!copied || sscanf(copied, "copied %zu", &n) != 1)
        fail_msg("child printed no size");
    if (t_pinfast()) {
        const char *h = e ? strstr(e, "pinfast: debug: staged H2D") : NULL;
        const char *d = e ? strstr(e, "pinfast: debug: staged D2H") : NULL;
        if (!h || !d)
            fail_msg("no staged copy in the debug log:\n%s", e ? e : "");
        int kh = check_copy(h, n, 1), kd = check_copy(d, n, 0);
        print_message("%zu bytes: %d H2D chunks, %d D2H chunks\n", n, kh, kd);
    }
    free(o);
    free(e);
}

int main(int argc, char **argv)
{
    if (argc == 2 && strcmp(argv[1], "copy") == 0)
        return child_copy();
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_timeline),
    };
    return cmocka_run_group_tests(tests, setup, teardown);
}
